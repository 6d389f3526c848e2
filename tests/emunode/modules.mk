# Builds gdrpeer.ko and the test-only modules inside a staged copy of the sources
# (build/kmod/<kernel>/src, or /build/gdrpeer in the sid chroot). Staged copies let one checkout
# build for several kernels at once; kbuild writes its objects next to the sources.
#   make -f Makefile.modules modules-build KDIR=<headers> MODOUT=<dir with driver/ uapi/ selftests/>
KDIR ?= /lib/modules/$(shell uname -r)/build
MODOUT ?= $(CURDIR)

modules-build:
	$(MAKE) -C $(MODOUT)/driver KDIR=$(KDIR)
	@if [ -f $(MODOUT)/selftests/kmod/Makefile ]; then \
		$(MAKE) -C $(MODOUT)/selftests/kmod KDIR=$(KDIR); fi
	@cp $(MODOUT)/driver/*.ko $(MODOUT)/
	@if ls $(MODOUT)/selftests/kmod/*.ko >/dev/null 2>&1; then cp $(MODOUT)/selftests/kmod/*.ko $(MODOUT)/; fi

.PHONY: modules-build

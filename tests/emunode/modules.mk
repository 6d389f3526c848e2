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
	@if [ -f $(MODOUT)/selftests/kmod/gdrpeer_nvstub.ko ]; then \
		$(MAKE) -f $(MODOUT)/Makefile.modules linked-build KDIR=$(KDIR) MODOUT=$(MODOUT); fi

# gdrpeer-linked.ko: gdrpeer.ko built the way DKMS builds it after the NVIDIA driver, linked
# against the exports of the stand-in gdrpeer_nvstub.ko (EXPORT_SYMBOL, like nvidia.ko) instead
# of finding them with symbol_get(). Its module name is still gdrpeer. The stand-in's two builds
# export the same names from one kbuild directory, so its Module.symvers lists each name once;
# the symbol CRCs come from the shared declarations (driver/nv_p2p_abi.h) and are the same for
# both, and the lines are rewritten to name gdrpeer_nvstub and EXPORT_SYMBOL.
linked-build:
	rm -rf $(MODOUT)/linked && mkdir -p $(MODOUT)/linked
	cp -r $(MODOUT)/driver $(MODOUT)/uapi $(MODOUT)/linked/
	$(MAKE) -C $(KDIR) M=$(MODOUT)/linked/driver clean >/dev/null
	awk -F '\t' -v OFS='\t' '$$2 ~ /^nvidia_p2p_/ { sub(/_gpl$$/, "", $$3); \
		$$4 = "EXPORT_SYMBOL"; if (!seen[$$2]++) print }' $(MODOUT)/selftests/kmod/Module.symvers \
		> $(MODOUT)/linked/nvstub.symvers
	test -s $(MODOUT)/linked/nvstub.symvers
	$(MAKE) -C $(MODOUT)/linked/driver KDIR=$(KDIR) NVIDIA_SYMVERS=$(MODOUT)/linked/nvstub.symvers MODOUT=
	cp $(MODOUT)/linked/driver/gdrpeer.ko $(MODOUT)/gdrpeer-linked.ko

.PHONY: modules-build linked-build

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
	$(MAKE) -f $(MODOUT)/Makefile.modules testhooks-build KDIR=$(KDIR) MODOUT=$(MODOUT)
	@if [ -f $(MODOUT)/selftests/kmod/gdrpeer_nvstub.ko ]; then \
		$(MAKE) -f $(MODOUT)/Makefile.modules linked-build prop-build KDIR=$(KDIR) MODOUT=$(MODOUT); fi
	@if [ -f $(MODOUT)/selftests/kmod/gdrpeer_peerhost.ko ]; then \
		$(MAKE) -f $(MODOUT)/Makefile.modules peermem-build KDIR=$(KDIR) MODOUT=$(MODOUT); fi

# Builds of gdrpeer.ko next to the nvidia_p2p stand-ins, each in its own copy of driver/, with
# the build's own output in gdrpeer-<variant>.log (the tests read the choice it logged). Their
# module name is still gdrpeer.
#   $(call variant,NAME,make arguments): driver/ copied to $(MODOUT)/NAME, built, kept as
#   $(MODOUT)/gdrpeer-NAME.ko and $(MODOUT)/gdrpeer-NAME.log
define variant
	rm -rf $(MODOUT)/$(1) && mkdir -p $(MODOUT)/$(1)
	cp -r $(MODOUT)/driver $(MODOUT)/uapi $(MODOUT)/$(1)/
	$(MAKE) -C $(KDIR) M=$(MODOUT)/$(1)/driver clean >/dev/null
	$(MAKE) -C $(MODOUT)/$(1)/driver KDIR=$(KDIR) MODOUT= $(2) > $(MODOUT)/gdrpeer-$(1).log 2>&1 || \
		{ cat $(MODOUT)/gdrpeer-$(1).log; exit 1; }
	cat $(MODOUT)/gdrpeer-$(1).log
	cp $(MODOUT)/$(1)/driver/gdrpeer.ko $(MODOUT)/gdrpeer-$(1).ko
endef

# gdrpeer-testhooks.ko: gdrpeer.ko with the test-only race hooks (GDRPEER_TEST_HOOKS=1, see
# driver/Kbuild and docs/driver.md); only tests/test_revoke_race.py loads it.
testhooks-build:
	$(call variant,testhooks,GDRPEER_TEST_HOOKS=1)

# $(call symvers,MODULE): the nvidia_p2p_* lines of selftests/kmod/Module.symvers as MODULE's
# own, EXPORT_SYMBOL. The stand-ins export the same names from one kbuild directory, and some
# kernels' modpost lists each name once, under whichever module came first; the symbol CRCs come
# from the shared declarations (driver/nv_p2p_abi.h) and are the same for all of them.
symvers = awk -F '\t' -v OFS='\t' '$$2 ~ /^nvidia_p2p_/ { sub(/[^\/]*$$/, "$(1)", $$3); \
	$$4 = "EXPORT_SYMBOL"; if (!seen[$$2]++) print }' $(MODOUT)/selftests/kmod/Module.symvers

# binutils' nm; the sid toolchain chroot has only the target-prefixed one
NM := $(or $(shell command -v nm),$(shell command -v x86_64-linux-gnu-nm),nm)

# Each stand-in's .ko is put next to its Module.symvers, where a DKMS build of the NVIDIA driver
# has it: newer kernels (7.x) write only the module's name into Module.symvers, and
# driver/Makefile reads the exporter's licence from the .ko it finds there.
# gdrpeer-linked.ko: gdrpeer.ko built the way DKMS builds it after the NVIDIA driver, linked
# against the exports of the stand-in gdrpeer_nvstub.ko (EXPORT_SYMBOL, licence GPL, like
# NVIDIA's open kernel modules) instead of finding them with symbol_get().
linked-build:
	rm -rf $(MODOUT)/nvstub && mkdir -p $(MODOUT)/nvstub
	$(call symvers,gdrpeer_nvstub) > $(MODOUT)/nvstub/Module.symvers
	test -s $(MODOUT)/nvstub/Module.symvers
	cp $(MODOUT)/selftests/kmod/gdrpeer_nvstub.ko $(MODOUT)/nvstub/
	$(call variant,linked,NVIDIA_SYMVERS=$(MODOUT)/nvstub/Module.symvers)

# gdrpeer-autoprop.ko: NVIDIA_SYMVERS=auto finding the Module.symvers of gdrpeer_nvstub_prop.ko
# (EXPORT_SYMBOL, licence "NVIDIA", like NVIDIA's proprietary modules), where a DKMS build of
# the NVIDIA driver leaves it: the build must not link against it (symbol_get instead).
# gdrpeer-proplinked.ko: what the build made of that before it looked at the licence, linked
# anyway by calling kbuild directly on the symbol_get build's tree: the tests show the kernel
# refuses to load it.
prop-build:
	rm -rf $(MODOUT)/nvprop && mkdir -p $(MODOUT)/nvprop/dkms
	$(call symvers,gdrpeer_nvstub_prop) > $(MODOUT)/nvprop/dkms/Module.symvers
	test -s $(MODOUT)/nvprop/dkms/Module.symvers
	cp $(MODOUT)/selftests/kmod/gdrpeer_nvstub_prop.ko $(MODOUT)/nvprop/dkms/
	$(call variant,autoprop,NVIDIA_SYMVERS=auto NVIDIA_SYMVERS_SEARCH='$(MODOUT)/nvprop/*/Module.symvers')
	rm -rf $(MODOUT)/proplinked && mkdir -p $(MODOUT)/proplinked
	cp -r $(MODOUT)/driver $(MODOUT)/uapi $(MODOUT)/proplinked/
	$(MAKE) -C $(KDIR) M=$(MODOUT)/proplinked/driver clean >/dev/null
	$(MAKE) -C $(MODOUT)/proplinked/driver KDIR=$(KDIR) NVIDIA_SYMVERS=none conftest.h nvidia_link.h \
		> $(MODOUT)/gdrpeer-proplinked.log 2>&1
	$(MAKE) -C $(KDIR) M=$(MODOUT)/proplinked/driver NVIDIA_SYMVERS=$(MODOUT)/nvprop/dkms/Module.symvers \
		KBUILD_EXTRA_SYMBOLS=$(MODOUT)/nvprop/dkms/Module.symvers modules \
		>> $(MODOUT)/gdrpeer-proplinked.log 2>&1 || { cat $(MODOUT)/gdrpeer-proplinked.log; exit 1; }
	$(NM) $(MODOUT)/proplinked/driver/gdrpeer.ko | grep -q ' U nvidia_p2p_get_pages$$'
	cp $(MODOUT)/proplinked/driver/gdrpeer.ko $(MODOUT)/gdrpeer-proplinked.ko

# $(MODOUT)/ofa_kernel: the test-only peer-memory host gdrpeer_peerhost.ko installed the way
# MLNX_OFED / DOCA-OFED install their RDMA core for a kernel (/usr/src/ofa_kernel/<arch>/<kver>):
# include/rdma/peer_mem.h and a Module.symvers with ib_register/unregister_peer_memory_client.
ofa-stage:
	rm -rf $(MODOUT)/ofa_kernel && mkdir -p $(MODOUT)/ofa_kernel
	cp -r $(MODOUT)/selftests/kmod/ofa/include $(MODOUT)/ofa_kernel/
	awk -F '\t' '$$2 ~ /^ib_(un)?register_peer_memory_client$$/' \
		$(MODOUT)/selftests/kmod/Module.symvers > $(MODOUT)/ofa_kernel/Module.symvers
	test "$$(wc -l < $(MODOUT)/ofa_kernel/Module.symvers)" = 2

# gdrpeer-ofed.ko: gdrpeer.ko built the way DKMS builds it after OFED, found by the same probe
# (OFA_DIR), with the peer-memory client; it needs gdrpeer_peerhost.ko loaded first.
peermem-build: ofa-stage
	$(call variant,ofed,OFA_DIR=$(MODOUT)/ofa_kernel)
	modinfo -F depends $(MODOUT)/gdrpeer-ofed.ko | grep -qw gdrpeer_peerhost

.PHONY: modules-build linked-build prop-build ofa-stage peermem-build

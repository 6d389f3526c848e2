# SPDX-License-Identifier: GPL-2.0
#
# `make check` for driver/Makefile and selftests/kmod/Makefile (both include
# this file): a W=1 + sparse (C=1) build of the modules in $(HERE) against
# $(KDIR), from clean, where any warning or error fails the check. The
# including Makefile provides HERE, KDIR, KBUILD_ARGS and a conftest.h rule.
# Then scripts/kernel-doc -v of every /** comment (name, @params, Context:,
# Return:), where the kernel's headers ship the script (7.x's do not).

KERNEL_DOC := $(wildcard $(KDIR)/scripts/kernel-doc)

check: conftest.h
	$(MAKE) -C $(KDIR) M=$(HERE) $(KBUILD_ARGS) clean
	$(MAKE) -C $(KDIR) M=$(HERE) $(KBUILD_ARGS) W=1 C=1 modules \
		2> check.log || { cat check.log; exit 1; }
	@cat check.log
	@if grep -E 'warning:|error:' check.log; then \
		echo "check: warnings found"; exit 1; fi
	@if grep -E 'C=1 specified, but' check.log; then \
		echo "check: kbuild turned the checker off (sparse missing or too old)"; exit 1; fi
	@rm -f check.log
	@if [ -n "$(KERNEL_DOC)" ]; then \
		KBUILD_EXTRA_WARN=1 perl $(KERNEL_DOC) -v -none $(HERE)/*.c $(HERE)/*.h \
			2>&1 | grep -v ' info: ' > kdoc.log || true; \
		if grep -q . kdoc.log; then cat kdoc.log; \
			echo "check: kernel-doc warnings"; exit 1; fi; \
		rm -f kdoc.log; echo "check: kernel-doc clean"; fi
	@echo "check: W=1 C=1 clean"

# SPDX-License-Identifier: GPL-2.0
#
# `make check` for driver/Makefile and selftests/kmod/Makefile (both include
# this file): a W=1 + sparse (C=1) build of the modules in $(HERE) against
# $(KDIR), from clean, where any warning or error fails the check. The
# including Makefile provides HERE, KDIR, KBUILD_ARGS and a conftest.h rule.

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
	@echo "check: W=1 C=1 clean"

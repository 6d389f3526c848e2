#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# kbuild's C=1 runs `scripts/checker-valid.sh CHECKER FLAGS...` and checks the source only if it
# prints 1. Debian's linux-kbuild package (7.x) does not ship that script, so C=1 quietly turns
# sparse off there; the test bed's toolchain chroot gets this one: 1 when the checker
# preprocesses an empty input with the kernel's flags.
"$@" -E - </dev/null >/dev/null 2>&1 && echo 1

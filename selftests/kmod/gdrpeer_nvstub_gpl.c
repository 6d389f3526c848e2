// SPDX-License-Identifier: GPL-2.0
/*
 * gdrpeer_nvstub_gpl.ko - gdrpeer_nvstub.ko with its nvidia_p2p_* symbols
 * exported by EXPORT_SYMBOL_GPL: what symbol_get() can reach from 6.5 on,
 * to test the run-time resolution path next to the link-time one.
 */
#define NVSTUB_EXPORT_GPL 1
#include "gdrpeer_nvstub.c"

// SPDX-License-Identifier: GPL-2.0
/*
 * gdrpeer_nvstub_prop.ko - test only: the nvidia_p2p_* exports of a
 * module whose MODULE_LICENSE is "NVIDIA", as NVIDIA's proprietary kernel
 * modules declare (its open ones say "Dual MIT/GPL").  The source is GPL;
 * only the licence string the kernel sees is the proprietary one, because
 * that string is what the kernel and driver/Makefile act on:
 *  - the kernel refuses to load a module that uses GPL-only symbols (as
 *    gdrpeer.ko does) and also symbols of a proprietary module (5.9 on),
 *    so gdrpeer must never be linked against this module's Module.symvers;
 *  - its EXPORT_SYMBOL exports are out of symbol_get()'s reach on kernels
 *    where symbol_get() reaches only GPL exports.
 *
 * The functions do nothing (no memory behind them) and log every call: a
 * gdrpeer built and loaded next to this module must never get to call
 * them on such kernels, and the test checks that the log stays silent.
 * Being "proprietary", this module may use no GPL-only kernel symbol
 * (modpost refuses the build otherwise): it only logs.  It includes the
 * headers gdrpeer_nvstub.c does, so that its symbol versions (CRCs) are
 * the same as that one's and as what gdrpeer.ko expects.
 * It exports the same names as gdrpeer_nvstub.ko: load one at a time.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/errno.h>
#include <linux/module.h>
#include <linux/pci.h>
#include <linux/printk.h>

#include "nv_p2p_abi.h"

static void nvprop_called(const char *fn)
{
	pr_warn("%s called: nothing should reach this module's exports\n", fn);
}

int nvidia_p2p_get_pages(u64 p2p_token, u32 va_space, u64 virtual_address,
			 u64 length, struct nvidia_p2p_page_table **page_table,
			 void (*free_callback)(void *data), void *data)
{
	nvprop_called(__func__);
	return -ENODEV;
}
EXPORT_SYMBOL(nvidia_p2p_get_pages);

int nvidia_p2p_get_pages_persistent(u64 virtual_address, u64 length,
				    struct nvidia_p2p_page_table **page_table,
				    u32 flags)
{
	nvprop_called(__func__);
	return -ENODEV;
}
EXPORT_SYMBOL(nvidia_p2p_get_pages_persistent);

int nvidia_p2p_put_pages(u64 p2p_token, u32 va_space, u64 virtual_address,
			 struct nvidia_p2p_page_table *page_table)
{
	nvprop_called(__func__);
	return -EINVAL;
}
EXPORT_SYMBOL(nvidia_p2p_put_pages);

int nvidia_p2p_put_pages_persistent(u64 virtual_address,
				    struct nvidia_p2p_page_table *page_table,
				    u32 flags)
{
	nvprop_called(__func__);
	return -EINVAL;
}
EXPORT_SYMBOL(nvidia_p2p_put_pages_persistent);

int nvidia_p2p_dma_map_pages(struct pci_dev *peer,
			     struct nvidia_p2p_page_table *page_table,
			     struct nvidia_p2p_dma_mapping **dma_mapping)
{
	nvprop_called(__func__);
	return -ENODEV;
}
EXPORT_SYMBOL(nvidia_p2p_dma_map_pages);

int nvidia_p2p_dma_unmap_pages(struct pci_dev *peer,
			       struct nvidia_p2p_page_table *page_table,
			       struct nvidia_p2p_dma_mapping *dma_mapping)
{
	nvprop_called(__func__);
	return -EINVAL;
}
EXPORT_SYMBOL(nvidia_p2p_dma_unmap_pages);

int nvidia_p2p_free_page_table(struct nvidia_p2p_page_table *page_table)
{
	nvprop_called(__func__);
	return -EINVAL;
}
EXPORT_SYMBOL(nvidia_p2p_free_page_table);

int nvidia_p2p_free_dma_mapping(struct nvidia_p2p_dma_mapping *dma_mapping)
{
	nvprop_called(__func__);
	return -EINVAL;
}
EXPORT_SYMBOL(nvidia_p2p_free_dma_mapping);

MODULE_DESCRIPTION("gdrpeer test: nvidia_p2p_* exports of a proprietary-licensed module");
MODULE_LICENSE("NVIDIA");

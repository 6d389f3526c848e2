// SPDX-License-Identifier: GPL-2.0
/*
 * gdrpeer_nvrefuse.ko - test only: the five nvidia_p2p_* functions that
 * gdrpeer's nvidia provider needs (driver/nv_p2p_abi.h), with no GPU
 * behind them.  nvidia_p2p_get_pages() refuses every range with -EINVAL,
 * which is what nvidia.ko answers for an address that is not CUDA memory
 * of the caller, so with this module loaded before gdrpeer.ko every
 * GDRPEER_IOCTL_EXPORT_VA (and peer-memory acquire) is a request that
 * gets as far as the pin and then fails: the cheap, unprivileged failing
 * request of driver review 3, defect 1.
 *
 * It needs no BAR, so gdrpeer's pcibar provider keeps the emulated GPU
 * (gdrpeer_nvstub.ko wants the same BAR).  No page table is ever handed
 * out, so the other functions can only be reached by a caller that uses
 * a table it never got: they WARN (a kernel report fails the boot).
 *
 * /sys/module/gdrpeer_nvrefuse/parameters/refused: get_pages calls so far.
 */
#include <linux/atomic.h>
#include <linux/bug.h>
#include <linux/errno.h>
#include <linux/module.h>
#include <linux/moduleparam.h>

#include "nv_p2p_abi.h"

static atomic64_t nvrefuse_refused = ATOMIC64_INIT(0);

static int nvrefuse_refused_get(char *buf, const struct kernel_param *kp)
{
	return sysfs_emit(buf, "%lld\n",
			  (long long)atomic64_read(&nvrefuse_refused));
}

static const struct kernel_param_ops nvrefuse_refused_ops = {
	.get = nvrefuse_refused_get,
};
module_param_cb(refused, &nvrefuse_refused_ops, NULL, 0444);
MODULE_PARM_DESC(refused, "nvidia_p2p_get_pages calls refused so far");

int nvidia_p2p_get_pages(u64 p2p_token, u32 va_space, u64 virtual_address,
			 u64 length, struct nvidia_p2p_page_table **page_table,
			 void (*free_callback)(void *data), void *data)
{
	atomic64_inc(&nvrefuse_refused);
	return -EINVAL;
}
EXPORT_SYMBOL_GPL(nvidia_p2p_get_pages);

int nvidia_p2p_put_pages(u64 p2p_token, u32 va_space, u64 virtual_address,
			 struct nvidia_p2p_page_table *page_table)
{
	WARN_ONCE(1, "put_pages of a table this module never handed out\n");
	return -EINVAL;
}
EXPORT_SYMBOL_GPL(nvidia_p2p_put_pages);

int nvidia_p2p_dma_map_pages(struct pci_dev *peer,
			     struct nvidia_p2p_page_table *page_table,
			     struct nvidia_p2p_dma_mapping **dma_mapping)
{
	WARN_ONCE(1, "dma_map_pages of a table this module never handed out\n");
	return -EINVAL;
}
EXPORT_SYMBOL_GPL(nvidia_p2p_dma_map_pages);

int nvidia_p2p_dma_unmap_pages(struct pci_dev *peer,
			       struct nvidia_p2p_page_table *page_table,
			       struct nvidia_p2p_dma_mapping *dma_mapping)
{
	WARN_ONCE(1, "dma_unmap_pages of a table this module never handed out\n");
	return -EINVAL;
}
EXPORT_SYMBOL_GPL(nvidia_p2p_dma_unmap_pages);

int nvidia_p2p_free_page_table(struct nvidia_p2p_page_table *page_table)
{
	WARN_ONCE(1, "free_page_table of a table this module never handed out\n");
	return -EINVAL;
}
EXPORT_SYMBOL_GPL(nvidia_p2p_free_page_table);

MODULE_DESCRIPTION("gdrpeer test: nvidia_p2p_* exports that refuse every pin (no GPU)");
MODULE_LICENSE("GPL");

/* SPDX-License-Identifier: GPL-2.0 */
/*
 * gdrpeer's own declarations of NVIDIA's kernel peer-to-peer API
 * (nvidia_p2p_*), written from NVIDIA's public GPUDirect RDMA
 * documentation ("Supported Functions", "Persistent and non-persistent
 * mappings"): the function signatures, the structure layouts the driver
 * hands out, and the version fields a caller must check.
 *
 * Used by the nvidia provider (resolved at run time or linked) and by the
 * test-only stand-in selftests/kmod/gdrpeer_nvstub.c, which exports the
 * same symbols; one header keeps the two in agreement.
 *
 * Facts the callers rely on (from the documentation):
 *  - virtual_address and length are multiples of 64 KiB (-EINVAL else);
 *    pages come in 64 KiB GPU pages.
 *  - nvidia_p2p_get_pages() needs a free_callback (-EINVAL without).  The
 *    callback runs when the memory is freed under the pin (cudaFree,
 *    process exit, context teardown); after it returns the driver frees
 *    the page table and every DMA mapping of it, so the caller must not
 *    touch them again.  nvidia_p2p_put_pages() of such a table returns 0
 *    without doing anything; a put that races with the callback waits for
 *    it.  nvidia_p2p_free_page_table() and nvidia_p2p_free_dma_mapping()
 *    are kept for old callers and do nothing in current drivers.
 *  - Persistent pins (nvidia_p2p_get_pages_persistent) have no callback:
 *    the pages stay until nvidia_p2p_put_pages_persistent(), even across
 *    cudaFree.  Not every system has them (-ENOTSUPP).
 *  - nvidia_p2p_dma_map_pages() maps for one PCI peer; the result lives
 *    until nvidia_p2p_dma_unmap_pages() or the free callback.
 *  - Every structure starts with a u32 version: major in the upper 16
 *    bits (incompatible layouts), minor in the lower 16 (compatible
 *    additions).  A caller accepts a structure when the major matches and
 *    the minor is at least the one it was written for.
 */
#ifndef GDRPEER_NV_P2P_ABI_H
#define GDRPEER_NV_P2P_ABI_H

#include <linux/types.h>

struct pci_dev;

#define NVIDIA_P2P_PAGE_TABLE_VERSION	0x00010002
#define NVIDIA_P2P_DMA_MAPPING_VERSION	0x00020003

/* major and minor of a structure's version word */
#define GDRPEER_NV_MAJOR(v) (((v) >> 16) & 0xffff)
#define GDRPEER_NV_MINOR(v) ((v) & 0xffff)

static inline bool gdrpeer_nv_version_ok(u32 have, u32 want)
{
	return GDRPEER_NV_MAJOR(have) == GDRPEER_NV_MAJOR(want) &&
	       GDRPEER_NV_MINOR(have) >= GDRPEER_NV_MINOR(want);
}

enum nvidia_p2p_page_size_type {
	NVIDIA_P2P_PAGE_SIZE_4KB = 0,
	NVIDIA_P2P_PAGE_SIZE_64KB,
	NVIDIA_P2P_PAGE_SIZE_128KB,
	NVIDIA_P2P_PAGE_SIZE_COUNT
};

/* GPU pages are 64 KiB: the unit of alignment, pinning and mapping. */
#define GDRPEER_NV_PAGE_SHIFT	16
#define GDRPEER_NV_PAGE_SIZE	(1ull << GDRPEER_NV_PAGE_SHIFT)

/* flags of the persistent calls */
#define NVIDIA_P2P_FLAGS_DEFAULT		0
#define NVIDIA_P2P_FLAGS_FORCE_BAR1_MAPPING	1

struct nvidia_p2p_page {
	u64 physical_address;		/* CPU physical address (BAR1) */
	union nvidia_p2p_request_registers {
		struct {
			u32 wreqmb_h;
			u32 rreqmb_h;
			u32 rreqmb_0;
			u32 reserved[3];
		} fermi;
	} registers;
};

struct nvidia_p2p_page_table {
	u32 version;
	u32 page_size;			/* enum nvidia_p2p_page_size_type */
	struct nvidia_p2p_page **pages;
	u32 entries;
	u8 *gpu_uuid;			/* 16 bytes */
};

struct nvidia_p2p_dma_mapping {
	u32 version;
	enum nvidia_p2p_page_size_type page_size_type;
	u32 entries;
	u64 *dma_addresses;		/* one per page, for the peer */
	void *private;
	struct pci_dev *pci_dev;
};

int nvidia_p2p_get_pages(u64 p2p_token, u32 va_space, u64 virtual_address,
			 u64 length, struct nvidia_p2p_page_table **page_table,
			 void (*free_callback)(void *data), void *data);
int nvidia_p2p_put_pages(u64 p2p_token, u32 va_space, u64 virtual_address,
			 struct nvidia_p2p_page_table *page_table);
int nvidia_p2p_get_pages_persistent(u64 virtual_address, u64 length,
				    struct nvidia_p2p_page_table **page_table,
				    u32 flags);
int nvidia_p2p_put_pages_persistent(u64 virtual_address,
				    struct nvidia_p2p_page_table *page_table,
				    u32 flags);
int nvidia_p2p_dma_map_pages(struct pci_dev *peer,
			     struct nvidia_p2p_page_table *page_table,
			     struct nvidia_p2p_dma_mapping **dma_mapping);
int nvidia_p2p_dma_unmap_pages(struct pci_dev *peer,
			       struct nvidia_p2p_page_table *page_table,
			       struct nvidia_p2p_dma_mapping *dma_mapping);
int nvidia_p2p_free_page_table(struct nvidia_p2p_page_table *page_table);
int nvidia_p2p_free_dma_mapping(struct nvidia_p2p_dma_mapping *dma_mapping);

#endif /* GDRPEER_NV_P2P_ABI_H */

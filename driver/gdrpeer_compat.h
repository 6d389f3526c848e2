/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Kernel differences, decided by conftest.sh probes (conftest.h in the
 * build directory), never by version numbers.  Shared by gdrpeer.ko and
 * the test modules in selftests/kmod.
 */
#ifndef GDRPEER_COMPAT_H
#define GDRPEER_COMPAT_H

#include <linux/dma-resv.h>
#include <linux/mm.h>
#include <linux/module.h>

#include "conftest.h"

#ifndef GDRPEER_HAVE_ATTACH_PEER2PEER
#error "dma_buf_attachment has no peer2peer flag: kernel too old for gdrpeer"
#endif
#ifndef GDRPEER_HAVE_DMA_MAP_RESOURCE
#error "dma_map_resource() is missing"
#endif

/* vm_flags became read-only behind vm_flags_set() in 6.3. */
static inline void gdrpeer_vm_flags_set(struct vm_area_struct *vma,
					unsigned long flags)
{
#ifdef GDRPEER_HAVE_VM_FLAGS_SET
	vm_flags_set(vma, flags);
#else
	vma->vm_flags |= flags;
#endif
}

/*
 * dma-buf symbols are in the DMA_BUF namespace since 5.16; the argument of
 * MODULE_IMPORT_NS became a string literal in 6.13.  Use without ';'.
 */
#if !defined(GDRPEER_HAVE_DMA_BUF_NS)
#define GDRPEER_IMPORT_DMA_BUF_NS()
#elif defined(GDRPEER_HAVE_MODULE_IMPORT_NS_IDENT)
#define GDRPEER_IMPORT_DMA_BUF_NS() MODULE_IMPORT_NS(DMA_BUF);
#else
#define GDRPEER_IMPORT_DMA_BUF_NS() MODULE_IMPORT_NS("DMA_BUF");
#endif

/* vm_operations_struct.split became may_split in 5.11. */
#ifdef GDRPEER_HAVE_VM_OPS_MAY_SPLIT
#define GDRPEER_VM_OPS_MAY_SPLIT may_split
#else
#define GDRPEER_VM_OPS_MAY_SPLIT split
#endif

/* struct device_type.devnode takes a const device since 6.2. */
#ifdef GDRPEER_HAVE_DEVNODE_CONST
#define GDRPEER_DEVNODE_CONST const
#else
#define GDRPEER_DEVNODE_CONST
#endif

/*
 * Wait up to @timeout jiffies for every fence of a dma-buf's reservation
 * object: an importer's queued work on a revoked buffer must be over
 * before its memory goes.  Returns 0 when fences are still unsignalled.
 * dma_resv_usage arrived in 5.19; before it, dma_resv_wait_timeout_rcu().
 */
static inline long gdrpeer_resv_wait(struct dma_resv *resv, long timeout)
{
#if defined(GDRPEER_HAVE_DMA_RESV_USAGE)
	return dma_resv_wait_timeout(resv, DMA_RESV_USAGE_BOOKKEEP, false,
				     timeout);
#else
	return dma_resv_wait_timeout_rcu(resv, true, false, timeout);
#endif
}

/*
 * dma_buf_ops.vmap hands out a struct iosys_map since 5.18 and a struct
 * dma_buf_map (same fields) from 5.11; before that it returned a pointer
 * and gdrpeer offers no vmap (no kernel there has dma-buf memory regions).
 */
#if defined(GDRPEER_HAVE_DMA_BUF_VMAP_IOSYS_MAP)
#include <linux/iosys-map.h>
#define GDRPEER_HAVE_DMABUF_VMAP 1
#define gdrpeer_iosys_map iosys_map
#define gdrpeer_iosys_map_set_vaddr_iomem iosys_map_set_vaddr_iomem
#elif defined(GDRPEER_HAVE_DMA_BUF_VMAP_DMA_BUF_MAP)
#include <linux/dma-buf-map.h>
#define GDRPEER_HAVE_DMABUF_VMAP 1
#define gdrpeer_iosys_map dma_buf_map
#define gdrpeer_iosys_map_set_vaddr_iomem dma_buf_map_set_vaddr_iomem
#endif

#endif /* GDRPEER_COMPAT_H */

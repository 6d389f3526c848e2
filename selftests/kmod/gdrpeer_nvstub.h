/* SPDX-License-Identifier: ((GPL-2.0 WITH Linux-syscall-note) OR MIT) */
/*
 * gdrpeer_nvstub.h - ioctls of the test-only module gdrpeer_nvstub.ko, a
 * stand-in for nvidia.ko's peer-to-peer API.  It exports the nvidia_p2p_*
 * functions declared in driver/nv_p2p_abi.h with NVIDIA's documented
 * semantics, backed by the ivshmem "GPU BAR" cut into 64 KiB pages, and
 * gives every open file of /dev/gdrpeer_nvstub (one per process: a "CUDA
 * context") its own fake GPU virtual address space.
 *
 * Two builds of one source: gdrpeer_nvstub.ko exports the symbols with
 * EXPORT_SYMBOL, as nvidia.ko does; gdrpeer_nvstub_gpl.ko with
 * EXPORT_SYMBOL_GPL (what symbol_get() needs from 6.5 on).
 * Not part of the gdrpeer ABI.
 */
#ifndef GDRPEER_NVSTUB_H
#define GDRPEER_NVSTUB_H

#include <linux/ioctl.h>
#include <linux/types.h>

#define NVSTUB_DEVICE_PATH "/dev/gdrpeer_nvstub"
#define NVSTUB_MAGIC 0xDD
#define NVSTUB_PAGE_SIZE 65536ull

/* nvstub_alloc.flags */
/* hand out the pages in descending BAR order (no two are contiguous) */
#define NVSTUB_ALLOC_SCATTER (1u << 0)

/*
 * NVSTUB_IOCTL_ALLOC ("cuMemAlloc"): size bytes (multiple of 64 KiB, > 0)
 * of fake GPU memory in the caller's address space.
 * out: va (64 KiB aligned, never 0, never reused by this file),
 * bar_offsets_ptr (optional user array of size / 64 KiB __u64) receives the
 * BAR offset of every page, so a test can find the bytes in the BAR
 * backing file.  Default: the lowest free pages in ascending order
 * (contiguous while the BAR is not fragmented).  VAs of one file start at
 * 0x7f0000000000 (+1 TiB per further open file of the same process, whose
 * VAs never overlap), 64 KiB aligned, 2 MiB apart.
 * Errors: -EINVAL, -ENOMEM (BAR exhausted, or this file's 1 TiB of VA
 * used up), -EFAULT (nothing stays allocated).  open() fails with -EMFILE
 * beyond 64 open files per process.
 */
struct nvstub_alloc {
	__u64 size;		/* in */
	__u32 flags;		/* in: NVSTUB_ALLOC_* */
	__u32 pad0;		/* must be 0 */
	__u64 bar_offsets_ptr;	/* in: user pointer or 0 */
	__u64 va;		/* out */
	__u64 reserved[2];	/* must be 0 */
};

/*
 * NVSTUB_IOCTL_FREE ("cuMemFree"): free the allocation that starts at va.
 * Every callback-based pin of it gets its free callback first (called from
 * a workqueue, the way the real driver calls it from its own context) and
 * the ioctl returns only after every callback has returned and the pins'
 * page tables and DMA mappings are gone.  Persistent pins keep the pages
 * until nvidia_p2p_put_pages_persistent().  Freed pages are filled with
 * NVSTUB_POISON_BYTE in the BAR once no pin holds them.
 * Errors: -ENOENT no allocation starts at va.
 */
struct nvstub_free {
	__u64 va;		/* in */
	__u64 reserved[3];	/* must be 0 */
};

#define NVSTUB_POISON_BYTE 0x6b

#define NVSTUB_IOCTL_ALLOC _IOWR(NVSTUB_MAGIC, 0x00, struct nvstub_alloc)
#define NVSTUB_IOCTL_FREE _IOWR(NVSTUB_MAGIC, 0x01, struct nvstub_free)

/*
 * Closing the file (process exit) frees every allocation of it as
 * NVSTUB_IOCTL_FREE does.
 *
 * sysfs, /sys/class/misc/gdrpeer_nvstub/ (read-only gauges unless noted):
 *   allocations    live allocations (all files)
 *   pins           live page tables (callback and persistent)
 *   dma_mappings   live DMA mappings
 *   callbacks      free callbacks called so far (running total)
 *   violations     API rule breaks seen so far (running total): a put of
 *                  an unknown table, unmap of a mapping of a freed table,
 *                  wrong peer on unmap, persistent put of a callback pin
 *                  and the reverse, a call that would deadlock with the
 *                  real driver (get/put/dma_map from inside a free
 *                  callback: -EDEADLK).  Each one is also logged (pr_err).
 *   puts_after_callback   put_pages of a table whose free callback had
 *                  already returned (running total).  The API allows it
 *                  (returns 0) but gdrpeer must never do it: tests assert 0.
 *   puts_during_callback  put_pages that arrived while the table's free
 *                  callback was running and waited for it (running total;
 *                  the race the API allows, also returns 0).
 *   maps_after_callback  dma_map_pages of a table whose free callback was
 *                  running or done (running total; -EINVAL).  With
 *                  nvidia.ko this reads freed memory; a caller can only
 *                  close that window by waiting for its map inside the
 *                  callback, which deadlocks there, so it is counted here
 *                  and not in violations.
 *   persistent     read/write: 1 = get_pages_persistent works, 0 = it
 *                  fails with -ENOTSUPP (a driver without persistent pins)
 *   table_version  read/write: version word put in new page tables
 *                  (default NVIDIA_P2P_PAGE_TABLE_VERSION), to play an old
 *                  driver
 *   mapping_version  read/write: version word put in new DMA mappings
 *                  (default NVIDIA_P2P_DMA_MAPPING_VERSION), likewise
 */

#endif /* GDRPEER_NVSTUB_H */

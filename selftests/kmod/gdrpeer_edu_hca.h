/* SPDX-License-Identifier: ((GPL-2.0 WITH Linux-syscall-note) OR MIT) */
/*
 * gdrpeer_edu_hca.h - ioctls of the test-only module gdrpeer_edu_hca.ko,
 * which turns QEMU's edu device (PCI 1234:11e8) into a stand-in HCA: it
 * imports a dma-buf the way an RDMA driver does (peer2peer; dynamic or pinned) with
 * edu's struct device, and moves bytes with edu's DMA engine.
 * Node: /dev/gdrpeer_edu_hca.  Not part of the gdrpeer ABI.
 */
#ifndef GDRPEER_EDU_HCA_H
#define GDRPEER_EDU_HCA_H

#include <linux/ioctl.h>
#include <linux/types.h>

#define EDU_HCA_DEVICE_PATH "/dev/gdrpeer_edu_hca"
#define EDU_HCA_MAGIC 0xDC

/* edu transfers are cut into pieces of at most this many bytes */
#define EDU_HCA_CHUNK 2048
/* longest pattern one EDU_HCA_IOCTL_DMA writes */
#define EDU_HCA_MAX_LEN (64 * 1024)

/* edu_hca_dma.flags */
/* DMA to raw_phys (a CPU physical address) instead of the mapped address */
#define EDU_HCA_DMA_RAW_PHYS (1u << 0)

/*
 * EDU_HCA_IOCTL_DMA: attach to the dma-buf (peer2peer importer), pin, map;
 * write the pattern of @seed into bytes [offset, offset + length) of the
 * dma-buf with edu's DMA engine, read them back with edu, compare; unmap,
 * unpin, detach.  Errors: -EINVAL bad arguments, -EBADF not a dma-buf,
 * errors of attach/map as they come (-EOPNOTSUPP...), -ETIMEDOUT when edu
 * does not finish a transfer.  A failed comparison is not an error: it
 * is reported in mismatches.
 *
 * Pattern: 8-byte little-endian words; word k (k = 0, 1, ...) is
 * splitmix64(seed + (k + 1) * 0x9E3779B97F4A7C15).
 */
struct edu_hca_dma {
	__s32 dmabuf_fd;	/* in */
	__u32 flags;		/* in: EDU_HCA_DMA_* */
	__u64 offset;		/* in: byte offset into the dma-buf, 8-aligned */
	__u64 length;		/* in: bytes, multiple of 8, <= EDU_HCA_MAX_LEN */
	__u64 seed;		/* in */
	__u64 raw_phys;		/* in: with EDU_HCA_DMA_RAW_PHYS: target of byte @offset */
	__u64 max_seg;		/* in: edu's max DMA segment while attached; 0 = default */
	__u64 nents;		/* out: entries of the attachment's sg table */
	__u64 first_dma;	/* out: mapped DMA address of byte @offset */
	__u64 mismatches;	/* out: bytes read back different from the pattern */
	__u64 transfers;	/* out: edu DMA transfers issued */
	__u64 reserved[2];	/* must be 0 */
};

/* edu_hca_bench.flags */
/* attach with dma_buf_attach() (no peer2peer): expected to be refused */
#define EDU_HCA_BENCH_STATIC_ATTACH (1u << 0)

/*
 * EDU_HCA_IOCTL_BENCH: time attach + pin + map and unmap + unpin + detach
 * of the whole dma-buf with edu's device; count sg entries and check that
 * every entry is page aligned and at most the max segment size.
 * Errors: those of attach/map; -EPROTO when an entry breaks the rules.
 */
struct edu_hca_bench {
	__s32 dmabuf_fd;	/* in */
	__u32 flags;		/* in: EDU_HCA_BENCH_* */
	__u64 max_seg;		/* in: as in edu_hca_dma; out: the value used */
	__u64 attach_ns;	/* out: dma_buf_dynamic_attach */
	__u64 map_ns;		/* out: pin + dma_buf_map_attachment */
	__u64 unmap_ns;		/* out: unmap + unpin + detach */
	__u64 nents;		/* out */
	__u64 bytes;		/* out: sum of entry lengths */
	__u64 reserved[2];	/* must be 0 */
};

/*
 * Long-lived imports: the way an RDMA driver keeps a dma-buf MR.  An import
 * stays attached (dynamic, peer2peer) and mapped (pinned with
 * EDU_HCA_IMPORT_PINNED) until
 * EDU_HCA_IOCTL_UNIMPORT or until the file is closed.  When the exporter
 * revokes the buffer (move_notify / invalidate_mappings, e.g. the memory
 * behind it was freed), the module waits for a DMA in flight on it to
 * finish, unmaps it and marks it revoked (a pinned import ignores it); it
 * stays attached until UNIMPORT or close.  Ids are per open file, never 0.
 */

/* edu_hca_import.flags */
/*
 * Attach with a platform device (not PCI) instead of edu, then detach at
 * once: only the exporter's answer to attach is reported, nothing is kept
 * (id 0).  For exporters that refuse non-PCI importers.
 */
#define EDU_HCA_IMPORT_NON_PCI (1u << 0)
/*
 * Pin the dma-buf and ignore move_notify, as ib_umem_dmabuf_get_pinned()
 * importers (EFA, irdma, bnxt_re, mlx5 without ODP) do.  Without it an
 * import is dynamic: mapped, and unmapped when the exporter revokes.
 */
#define EDU_HCA_IMPORT_PINNED (1u << 1)

/*
 * EDU_HCA_IOCTL_IMPORT: attach + map (+ pin) the dma-buf and keep it.
 * Errors: -EINVAL bad flags/reserved/max_seg, -EBADF / -EINVAL not a
 * dma-buf, errors of attach/pin/map as they come (-EOPNOTSUPP, -ENODEV...).
 */
struct edu_hca_import {
	__s32 dmabuf_fd;	/* in */
	__u32 flags;		/* in: EDU_HCA_IMPORT_* */
	__u64 max_seg;		/* in: as in edu_hca_dma */
	__u32 id;		/* out: import id in this file */
	__u32 pad0;		/* must be 0 */
	__u64 size;		/* out: bytes of the dma-buf */
	__u64 nents;		/* out: entries of the sg table */
	__u64 first_dma;	/* out: DMA address of byte 0 */
	__u64 reserved[2];	/* must be 0 */
};

/*
 * EDU_HCA_IOCTL_IMPORT_DMA: as EDU_HCA_IOCTL_DMA, through a kept import:
 * write the pattern of @seed into [offset, offset + length), read back and
 * compare, chunk by chunk.  The import's revocation is checked before each
 * chunk.  Errors: -ENOENT unknown id, -EINVAL bad arguments, -ENODEV the
 * import was revoked (before or during the call: @done says how many
 * bytes were written and checked before), -ETIMEDOUT edu hung.
 */
struct edu_hca_import_dma {
	__u32 id;		/* in */
	__u32 flags;		/* in: must be 0 */
	__u64 offset;		/* in: 8-aligned */
	__u64 length;		/* in: multiple of 8, <= EDU_HCA_MAX_LEN */
	__u64 seed;		/* in */
	__u64 done;		/* out: bytes written and read back */
	__u64 mismatches;	/* out */
	__u64 transfers;	/* out */
	__u64 reserved[2];	/* must be 0 */
};

/* EDU_HCA_IOCTL_UNIMPORT: unmap (if still mapped), unpin, detach.  -ENOENT */
struct edu_hca_unimport {
	__u32 id;		/* in */
	__u32 pad0;		/* must be 0 */
	__u64 reserved[3];	/* must be 0 */
};

/*
 * EDU_HCA_IOCTL_IMPORT_STATE: revoked = 1 once the exporter revoked the
 * import (its mapping is gone), dmas_done = IMPORT_DMA calls that finished
 * on it without error, nents = sg entries still mapped (0 once revoked).
 * -ENOENT unknown id.
 */
struct edu_hca_import_state {
	__u32 id;		/* in */
	__u32 revoked;		/* out */
	__u64 dmas_done;	/* out */
	__u64 nents;		/* out */
	__u64 reserved[3];	/* must be 0 */
};

/*
 * EDU_HCA_IOCTL_BUS_DMA: write the pattern of @seed to @length bytes at bus
 * address @bus_addr with edu's DMA engine, read them back and compare, with
 * no mapping made for the call.  For the test that an address an importer
 * held once (edu_hca_import.first_dma, then EDU_HCA_IOCTL_UNIMPORT) no
 * longer reaches the memory: under a translating IOMMU the DMA faults
 * (DMAR fault in the kernel log; edu reports nothing, so the read-back
 * differs: mismatches).  Without translation the address is physical and
 * the bytes land wherever it points: root only, test nodes only.
 * Errors: -EINVAL bad arguments, -ETIMEDOUT edu hung.
 */
struct edu_hca_bus_dma {
	__u64 bus_addr;		/* in: 8-aligned, not 0 */
	__u64 length;		/* in: multiple of 8, <= EDU_HCA_MAX_LEN */
	__u64 seed;		/* in */
	__u32 flags;		/* in: must be 0 */
	__u32 pad0;		/* must be 0 */
	__u64 mismatches;	/* out */
	__u64 transfers;	/* out */
	__u64 reserved[2];	/* must be 0 */
};

#define EDU_HCA_IOCTL_DMA _IOWR(EDU_HCA_MAGIC, 0x00, struct edu_hca_dma)
#define EDU_HCA_IOCTL_BENCH _IOWR(EDU_HCA_MAGIC, 0x01, struct edu_hca_bench)
#define EDU_HCA_IOCTL_IMPORT _IOWR(EDU_HCA_MAGIC, 0x02, struct edu_hca_import)
#define EDU_HCA_IOCTL_IMPORT_DMA \
	_IOWR(EDU_HCA_MAGIC, 0x03, struct edu_hca_import_dma)
#define EDU_HCA_IOCTL_UNIMPORT \
	_IOWR(EDU_HCA_MAGIC, 0x04, struct edu_hca_unimport)
#define EDU_HCA_IOCTL_IMPORT_STATE \
	_IOWR(EDU_HCA_MAGIC, 0x05, struct edu_hca_import_state)
#define EDU_HCA_IOCTL_BUS_DMA \
	_IOWR(EDU_HCA_MAGIC, 0x06, struct edu_hca_bus_dma)

/*
 * sysfs, /sys/class/misc/gdrpeer_edu_hca/ (read-only):
 *   imports      attachments the module holds now (kept imports and the
 *                ones of a DMA/BENCH call in progress)
 *   mapped       of those, mapped right now
 *   revocations  mappings dropped on the exporter's request (running total)
 */

#ifdef __KERNEL__
/* exported to gdrpeer_peerhost.ko (see gdrpeer_edu_hca.c) */
struct device;
struct device *gdrpeer_edu_hca_dma_device(void);
int gdrpeer_edu_hca_write_check(__u64 addr, __u64 seed, __u64 pos, __u32 len,
				__u64 *mismatches, __u64 *transfers);
#endif

#endif /* GDRPEER_EDU_HCA_H */

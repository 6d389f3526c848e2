/* SPDX-License-Identifier: ((GPL-2.0 WITH Linux-syscall-note) OR MIT) */
/*
 * gdrpeer_peerhost.h - ioctls of the test-only module gdrpeer_peerhost.ko,
 * which plays the part of MLNX_OFED's ib_core for peer-memory clients: it
 * exports ib_register_peer_memory_client / ib_unregister_peer_memory_client
 * (ABI: ofa/include/rdma/peer_mem.h) and registers user addresses the way
 * ib_umem_get does when get_user_pages cannot, with the stand-in HCA's
 * (gdrpeer_edu_hca.ko's edu) struct device as the DMA device; edu's engine
 * then writes through the returned DMA addresses.
 * Node: /dev/gdrpeer_peerhost.  Not part of the gdrpeer ABI.
 */
#ifndef GDRPEER_PEERHOST_H
#define GDRPEER_PEERHOST_H

#include <linux/ioctl.h>
#include <linux/types.h>

#define PEERHOST_DEVICE_PATH "/dev/gdrpeer_peerhost"
#define PEERHOST_MAGIC 0xDD

/* sg entries a registration reports back */
#define PEERHOST_MAX_SG 16

/*
 * peerhost_reg.flags: break the calling contract on purpose, to see that
 * the client refuses instead of trusting the core (the registration then
 * fails with the client's error and is undone)
 */
#define PEERHOST_REG_MAP_BEFORE_PIN (1u << 0)	/* dma_map before get_pages */
#define PEERHOST_REG_PIN_OTHER_RANGE (1u << 1)	/* get_pages one page further */

/* peerhost_reg.owner */
#define PEERHOST_OWNER_PEER 1		/* a peer-memory client took it */
#define PEERHOST_OWNER_HOST_PAGES 2	/* no client: pinned as host pages */

/*
 * PEERHOST_IOCTL_REG: register [addr, addr + length) of the caller's
 * address space.  Every client's acquire is asked in turn; the first that
 * takes it gets get_pages, dma_map (edu's device), get_page_size.  When
 * none does, the range is pinned with pin_user_pages_fast like ordinary
 * memory (what ib_core falls back to).  The host checks what the client
 * returns: *nmap equal to the table's entries, every entry's DMA address
 * and length aligned to the client's page size (get_page_size), the
 * entries covering the range widened to that page size;
 * a client that breaks this gets its registration undone and -EPROTO.
 * Errors: -EINVAL bad arguments, -ENODEV no edu bound, the client's
 * errors as they come, pin_user_pages_fast's (-EFAULT) for host pages.
 */
struct peerhost_reg {
	__u64 addr;		/* in */
	__u64 length;		/* in */
	__u32 flags;		/* in: PEERHOST_REG_* */
	__u32 id;		/* out: registration id in this file, not 0 */
	__u32 owner;		/* out: PEERHOST_OWNER_* */
	__u32 nents;		/* out: sg entries (peer), pages (host) */
	__u64 page_size;	/* out: the client's get_page_size */
	__u64 sg_dma[PEERHOST_MAX_SG];	/* out: first entries' DMA addresses */
	__u64 sg_len[PEERHOST_MAX_SG];	/* out: and lengths */
	char client[64];	/* out: the client's name (peer) */
	__u64 reserved[2];	/* must be 0 */
};

/*
 * PEERHOST_IOCTL_DMA: edu writes the pattern of @seed (as in
 * gdrpeer_edu_hca.h, its word 0 at byte @offset) to bytes [offset,
 * offset + length) of the registered range (offset from addr) through the
 * client's DMA addresses, reads them
 * back and compares, in chunks of at most 2048 bytes.  Each chunk runs
 * under the registration's mapping lock, which invalidate takes: after an
 * invalidation no chunk starts.  Errors: -ENOENT unknown id, -EINVAL bad
 * arguments, -EOPNOTSUPP host pages, -ENODEV invalidated (before or during
 * the call: @done bytes were written and checked before), -ETIMEDOUT.
 */
struct peerhost_dma {
	__u32 id;		/* in */
	__u32 flags;		/* in: must be 0 */
	__u64 offset;		/* in: 8-aligned */
	__u64 length;		/* in: multiple of 8, at most 65536 */
	__u64 seed;		/* in */
	__u64 done;		/* out: bytes written and read back */
	__u64 mismatches;	/* out */
	__u64 transfers;	/* out: edu transfers */
	__u64 first_dma;	/* out: DMA address of byte @offset */
	__u64 reserved[2];	/* must be 0 */
};

/*
 * PEERHOST_IOCTL_DEREG: ib_umem_release: dma_unmap + put_pages (unless
 * invalidated), release.  -ENOENT unknown id.
 */
struct peerhost_dereg {
	__u32 id;		/* in */
	__u32 pad0;		/* must be 0 */
	__u64 reserved[2];	/* must be 0 */
};

/*
 * PEERHOST_IOCTL_STATE: invalidated = 1 once the client invalidated the
 * registration; dmas_done = DMA calls that finished on it without error.
 */
struct peerhost_state {
	__u32 id;		/* in */
	__u32 invalidated;	/* out */
	__u64 dmas_done;	/* out */
	__u64 reserved[2];	/* must be 0 */
};

#define PEERHOST_IOCTL_REG _IOWR(PEERHOST_MAGIC, 0x00, struct peerhost_reg)
#define PEERHOST_IOCTL_DMA _IOWR(PEERHOST_MAGIC, 0x01, struct peerhost_dma)
#define PEERHOST_IOCTL_DEREG _IOWR(PEERHOST_MAGIC, 0x02, struct peerhost_dereg)
#define PEERHOST_IOCTL_STATE _IOWR(PEERHOST_MAGIC, 0x03, struct peerhost_state)

/*
 * sysfs, /sys/class/misc/gdrpeer_peerhost/ (read-only):
 *   clients        registered peer-memory clients, one "name flags" line
 *                  each (flags: inval = invalidation required, unmaps =
 *                  PEER_MEM_INVALIDATE_UNMAPS)
 *   registrations  live registrations through a client (gauge)
 *   invalidations  invalidate calls that hit a live registration (total)
 *   stale_invalidations  invalidate calls for a core_context that is not
 *                  (or no longer) registered: harmless, counted (total)
 * and, as MLNX_OFED's ib_core, one directory per registered client,
 * /sys/kernel/mm/memory_peers/<name>/: version, num_alloc_mrs,
 * num_dealloc_mrs, num_reg_pages, num_dereg_pages, num_reg_bytes,
 * num_dereg_bytes, num_free_callbacks (docs/driver.md).  A second client
 * under a registered name is refused (NULL), with one line in the log.
 */

#endif /* GDRPEER_PEERHOST_H */

/* SPDX-License-Identifier: GPL-2.0 */
/*
 * gdrpeer core: devices (memory that a provider hands out,
 * gdrpeer_device.c), regions (allocations in a device, gdrpeer_region.c)
 * and their lifetimes.
 *
 * Lifetimes (all counted, nothing is freed while used):
 *  - A region is referenced by the handle that created it, by every dma-buf
 *    exported from it and by every CPU mmap() of the handle.  The memory
 *    goes back to the provider when the last reference is gone.
 *  - A device is a kobject; each region holds a reference, so the struct
 *    outlives every region.  A device can be unbound only while it has no
 *    region (-EBUSY otherwise).
 *  - The module cannot be unloaded while a /dev/gdrpeer file, a mapping of
 *    it or a dma-buf exists (file owners and dma_buf_export_info.owner).
 *
 * Revocation: a region can lose its memory while users still hold it (the
 * device is unbound, hot-unplugged or fails; NVIDIA frees CUDA memory under
 * a callback pin).  gdrpeer_region_revoke() then stops every use before
 * the memory is given back: CPU mappings are zapped and fault with SIGBUS,
 * every exporter of gdrpeer_revokers[] (exporter.h) tells its importers
 * (dma-buf move_notify / invalidate_mappings, peer-memory invalidation)
 * and waits until they have unmapped, ioctls on the handle fail with
 * -ENODEV.  The references stay counted; only the memory is gone.
 *
 * Lock order (outermost first), all mutexes or rwsems, all taken only where
 * the caller may sleep:
 *   pcibar_bind_lock            (provider_pcibar.c: run-time bind/unbind)
 *   -> device_lock(pci_dev)     (driver core: probe, remove)
 *   -> gdrpeer_devices_lock     (gdrpeer_device.c: the device registry)
 *   -> gdrpeer_device.lock      (one device: allocator, region list, dead;
 *                               the provider's alloc/free run under it,
 *                               asserted in provider_pcibar.c)
 *   mmap_lock (taken by the mm before ->mmap, ->fault and vm_ops->close)
 *   -> gdrpeer_file.lock        (per open file: its handle table)
 *   -> gdrpeer_region.memory_lock (gdrpeer_region.c: read by CPU faults
 *                               and by ALLOC's clear, one 2 MiB chunk at a
 *                               time with no other lock held; written by
 *                               revoke)
 *   gdrpeer_region.dmabuf_revoke_lock (held across a region's whole
 *   dma-buf revocation, waits included; taken by nothing else)
 *   -> gdrpeer_region.exports_lock -> dma-buf reservation lock -> importer
 *   locks (move_notify); exports_lock never held while waiting.  The
 *   exporter's map, unmap, pin and unpin run under the reservation lock
 *   (asserted in exporter_dmabuf.c).
 * How revocation takes them is written at gdrpeer_region_revoke
 * (gdrpeer_region.c) and gdrpeer_dmabuf_revoke_region (exporter_dmabuf.c).
 * A device's revocation walks its regions holding a reference to the current
 * one and takes gdrpeer_device.lock only to step to the next (asserted in
 * gdrpeer_device_next_live), never while a region is revoked.  The mmap
 * window allocator (an IDA, its own spinlock) is used at registration and
 * at the device struct's release, with no lock of ours held.
 * The provider registry (gdrpeer_providers.c) has no lock: its list is
 * fixed at build time.  Providers' own locks are written in their files
 * (pcibar_bind_lock above; pcibar_wanted_lock innermost; nvp_resolve_lock
 * and nvp_pin.lock, never held while a region is revoked).
 * No user copy happens under any of them (a fault would take mmap_lock).
 */
#ifndef GDRPEER_CORE_H
#define GDRPEER_CORE_H

#include <linux/atomic.h>
#include <linux/kobject.h>
#include <linux/kref.h>
#include <linux/mm_types.h>
#include <linux/mutex.h>
#include <linux/rwsem.h>
#include <linux/list.h>
#include <linux/mm.h>
#include <linux/types.h>
#include <linux/dma-buf.h>

struct dma_buf;
struct dma_buf_attachment;
struct pci_dev;
struct sg_table;
struct gdrpeer_device;
struct gdrpeer_device_info;
struct gdrpeer_provider_ops;
struct gdrpeer_region;

/*
 * One contiguous piece of a region: in CPU physical addresses (a region's
 * ranges), or in one importer's DMA addresses (what a provider that maps
 * for each importer hands the exporter, gdrpeer_region_ops.dma_ranges).
 */
struct gdrpeer_range {
	phys_addr_t phys;
	u64 len;
};

/* Gauges shown in sysfs; each is "live right now", not a running total. */
struct gdrpeer_counters {
	atomic64_t allocations;
	atomic64_t alloc_bytes;
	atomic64_t exports;
	atomic64_t attachments;
	atomic64_t active_maps;
	atomic64_t revoked;		/* live regions whose memory is gone */
	atomic64_t vmaps;		/* kernel CPU mappings (dma_buf_vmap) */
};

/*
 * Regions whose provider maps them for each importer itself and can lose
 * them underneath (nvidia pins).  The exporter serves them with their own
 * dma_buf_ops (exporter_dmabuf.c), which call these instead of mapping the
 * ranges with dma_map_resource().
 */
struct gdrpeer_region_ops {
	/* importer attaches (no lock of ours or of dma-buf held; may sleep) */
	int (*attach)(struct gdrpeer_region *r, struct dma_buf_attachment *a);
	void (*detach)(struct gdrpeer_region *r, struct dma_buf_attachment *a);
	/*
	 * The whole region in @a's DMA addresses, as ascending ranges that
	 * stay valid until detach (-ENODEV once the memory is gone).  Called
	 * under the dma-buf's reservation lock, so it must not take any lock
	 * that is held while taking that one.
	 */
	int (*dma_ranges)(struct gdrpeer_region *r,
			  struct dma_buf_attachment *a,
			  const struct gdrpeer_range **ranges,
			  unsigned int *nr_ranges);
	/* last reference gone: give the memory back and free @r */
	void (*release)(struct gdrpeer_region *r);
};

/*
 * The exporter's state of one importer's attachment (attach->priv): the
 * provider's own per-importer state, and the pins the importer holds
 * (under the dma-buf's reservation lock).
 */
struct gdrpeer_attachment {
	void *provider;
	unsigned int pins;
};

static inline void **gdrpeer_attach_provider(struct dma_buf_attachment *a)
{
	return &((struct gdrpeer_attachment *)a->priv)->provider;
}

/*
 * How a region may disappear under its users; decides what importers may
 * do with it (see exporter_dmabuf.c, pin).
 */
enum gdrpeer_revocable {
	/* only when the device goes (unbind, hot-unplug, error) */
	GDRPEER_REVOCABLE_WITH_DEVICE,
	/* at any time, by its owner (cudaFree under a callback pin) */
	GDRPEER_REVOCABLE_ANY_TIME,
};

/* An allocation of device memory. */
struct gdrpeer_region {
	struct kref ref;
	struct gdrpeer_device *gdev;	/* holds a kobject reference; NULL
					 * for regions with @ops */
	const struct gdrpeer_region_ops *ops;	/* NULL: plain BAR ranges */
	struct gdrpeer_counters *cnt;	/* gauges this region counts in */
	u64 size;
	u64 dev_offset;			/* offset inside the device memory */
	u32 flags;			/* GDRPEER alloc flags (none yet) */
	enum gdrpeer_revocable revocable;
	atomic_t exports;		/* live dma-bufs exported from it */
	unsigned int nr_ranges;
	struct gdrpeer_range *ranges;	/* ascending, covering [0, size) */
	struct gdrpeer_range range0;	/* storage when nr_ranges == 1 */
	/*
	 * CPU mappings of the region (handle mmaps) live at this page offset
	 * of gdrpeer's own address space: its device's window plus its page
	 * offset in the device, its own while it lives, so that revocation
	 * can zap exactly them; 0: none (regions without a handle).
	 * Set by gdrpeer_device_add_region (gdrpeer_device.c).
	 */
	unsigned long mmap_pgoff;
	/* protects @revoked; read-held by CPU faults while they insert */
	struct rw_semaphore memory_lock;
	bool revoked;
	struct mutex exports_lock;	/* protects @dmabufs, @exports_closed */
	struct list_head dmabufs;	/* struct gdrpeer_dmabuf, live ones */
	/*
	 * Set by the dma-buf revocation under @exports_lock before it walks
	 * @dmabufs: an export checks it under the same lock before it lists
	 * its dma-buf, so the walk cannot miss one (exporter_dmabuf.c).
	 */
	bool exports_closed;
	/* one dma-buf revocation of this region at a time (sleeps inside) */
	struct mutex dmabuf_revoke_lock;
	/* in gdev->regions; under gdev->lock; plain (BAR) regions only */
	struct list_head dev_node;
	bool memory_returned;		/* the provider took it back at revoke */
};

/* A device whose memory gdrpeer hands out. Embedded in provider state. */
struct gdrpeer_device {
	struct kobject kobj;		/* devices/<index>; counts the struct */
	u32 index;
	const struct gdrpeer_provider_ops *ops;
	struct pci_dev *pdev;		/* provider holds a pci_dev reference */
	int bar;
	u64 size;			/* bytes of device memory managed */
	struct mutex lock;		/* protects the allocator, @regions, @dead */
	bool dead;			/* unbound or failed: no new regions */
	struct list_head regions;	/* live regions (gdrpeer_region.dev_node) */
	unsigned long mmap_pgoff;	/* its mmap window, while the struct lives */
	struct gdrpeer_counters cnt;
};

/*
 * gdrpeer_device.c: registry, mmap windows, a device's regions and its
 * revocation, per-device sysfs (kernel-doc, with each one's Context, at
 * the definitions)
 */
int gdrpeer_devices_init(struct kobject *parent);
void gdrpeer_devices_exit(void);
int gdrpeer_device_register(struct gdrpeer_device *gdev);
void gdrpeer_device_revoke(struct gdrpeer_device *gdev);
void gdrpeer_device_unregister(struct gdrpeer_device *gdev);
struct gdrpeer_device *gdrpeer_device_find_pci(struct pci_dev *pdev);
struct gdrpeer_device *
gdrpeer_device_find_first(const struct gdrpeer_provider_ops *ops);
struct gdrpeer_device *gdrpeer_device_get(u32 index);
void gdrpeer_device_put(struct gdrpeer_device *gdev);
u32 gdrpeer_device_count(void);
u32 gdrpeer_device_list(struct gdrpeer_device_info *out, u32 count);
int gdrpeer_device_add_region(struct gdrpeer_device *gdev,
			      struct gdrpeer_region *r);
void gdrpeer_device_remove_region(struct gdrpeer_device *gdev,
				  struct gdrpeer_region *r);

/*
 * gdrpeer_region.c: region lifetime, clearing, revocation, CPU mmap and
 * faults, gdrpeer's own address space (kernel-doc at the definitions)
 */
int gdrpeer_mapping_init(void);
void gdrpeer_mapping_exit(void);
struct address_space *gdrpeer_mapping(void);
int gdrpeer_region_create(u32 index, u64 size, u32 flags,
			  struct gdrpeer_region **out);
void gdrpeer_region_init(struct gdrpeer_region *r, u64 size,
			 enum gdrpeer_revocable revocable);
void gdrpeer_region_get(struct gdrpeer_region *r);
void gdrpeer_region_put(struct gdrpeer_region *r);
void gdrpeer_region_revoke(struct gdrpeer_region *r);
bool gdrpeer_region_revoked(struct gdrpeer_region *r);
int gdrpeer_region_mmap_handle(struct gdrpeer_region *r, u64 offset,
			       struct vm_area_struct *vma);
void gdrpeer_region_mmap_prepare(struct vm_area_struct *vma);
vm_fault_t gdrpeer_region_fault(struct gdrpeer_region *r, u64 offset,
				struct vm_fault *vmf);
int gdrpeer_region_phys(const struct gdrpeer_region *r, u64 offset,
			phys_addr_t *phys);
int gdrpeer_vma_no_split(struct vm_area_struct *vma, unsigned long addr);
struct gdrpeer_region *gdrpeer_region_from_user(struct mm_struct *mm,
						unsigned long addr, u64 len,
						u64 *offset);

/* gdrpeer_chardev.c */
int gdrpeer_chardev_init(void);
int gdrpeer_chardev_enable(void);
void gdrpeer_chardev_disable(void);
void gdrpeer_chardev_exit(void);
struct kobject *gdrpeer_sysfs_dir(void);
extern unsigned int gdrpeer_dev_mode;
extern unsigned int gdrpeer_dev_gid;

#endif /* GDRPEER_CORE_H */

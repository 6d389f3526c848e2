/* SPDX-License-Identifier: GPL-2.0 */
/*
 * gdrpeer core: devices (memory that a provider hands out), regions
 * (allocations in a device) and their lifetimes.
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
 * Lock order (outermost first), all mutexes, all taken only where the
 * caller may sleep:
 *   mmap_lock (taken by the mm before ->mmap and vm_ops->close)
 *   -> gdrpeer_file.lock        (per open file: its handle table)
 *   -> pcibar_bind_lock         (provider_pcibar.c: bind/unbind)
 *   -> gdrpeer_devices_lock     (gdrpeer_device.c: the device registry)
 *   -> gdrpeer_device.lock      (one device: allocator and "dead")
 * No user copy happens under any of them (a fault would take mmap_lock).
 */
#ifndef GDRPEER_CORE_H
#define GDRPEER_CORE_H

#include <linux/atomic.h>
#include <linux/kobject.h>
#include <linux/kref.h>
#include <linux/mm_types.h>
#include <linux/mutex.h>
#include <linux/types.h>

struct dma_buf;
struct dma_buf_attachment;
struct pci_dev;
struct sg_table;
struct gdrpeer_device;
struct gdrpeer_device_info;
struct gdrpeer_provider_ops;
struct gdrpeer_region;

/* One physically contiguous piece of a region, in CPU physical addresses. */
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
	atomic64_t vmaps;		/* kernel CPU mappings (dma_buf_vmap) */
};

/*
 * Regions whose provider maps them for each importer itself and can lose
 * them underneath (nvidia pins).  The exporter calls these instead of
 * mapping the ranges with dma_map_resource(); CPU mappings of such a
 * region are built page by page at fault time so that they can be zapped.
 */
struct gdrpeer_region_ops {
	/* importer attaches (no lock of ours or of dma-buf held; may sleep) */
	int (*attach)(struct gdrpeer_region *r, struct dma_buf_attachment *a);
	void (*detach)(struct gdrpeer_region *r, struct dma_buf_attachment *a);
	/*
	 * sg table of [offset, offset + len) for @a, entries of at most
	 * @max_seg bytes.  Called under the dma-buf's reservation lock, so
	 * it must not take any lock that is held while taking that one.
	 */
	struct sg_table *(*map)(struct gdrpeer_region *r,
				struct dma_buf_attachment *a, u64 offset,
				u64 len, u64 max_seg);
	/* the dma-buf exported from @r is being released */
	void (*unexport)(struct gdrpeer_region *r, struct dma_buf *dmabuf);
	/* last reference gone: give the memory back and free @r */
	void (*release)(struct gdrpeer_region *r);
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
	atomic_t exports;		/* live dma-bufs exported from it */
	unsigned int nr_ranges;
	struct gdrpeer_range *ranges;	/* ascending, covering [0, size) */
	struct gdrpeer_range range0;	/* storage when nr_ranges == 1 */
};

/* A device whose memory gdrpeer hands out. Embedded in provider state. */
struct gdrpeer_device {
	struct kobject kobj;		/* devices/<index>; counts the struct */
	u32 index;
	const struct gdrpeer_provider_ops *ops;
	struct pci_dev *pdev;		/* provider holds a pci_dev reference */
	int bar;
	u64 size;			/* bytes of device memory managed */
	struct mutex lock;		/* protects the allocator and @dead */
	bool dead;			/* unbound: no new regions */
	struct gdrpeer_counters cnt;
};

/* gdrpeer_device.c: registry, regions, per-device sysfs */
int gdrpeer_devices_init(struct kobject *parent);
void gdrpeer_devices_exit(void);
int gdrpeer_device_register(struct gdrpeer_device *gdev);
int gdrpeer_device_unregister(struct gdrpeer_device *gdev);
struct gdrpeer_device *gdrpeer_device_find_pci(struct pci_dev *pdev);
struct gdrpeer_device *
gdrpeer_device_find_first(const struct gdrpeer_provider_ops *ops);
void gdrpeer_device_put(struct gdrpeer_device *gdev);
u32 gdrpeer_device_count(void);
u32 gdrpeer_device_list(struct gdrpeer_device_info *out, u32 count);
int gdrpeer_region_create(u32 index, u64 size, u32 flags,
			  struct gdrpeer_region **out);
void gdrpeer_region_get(struct gdrpeer_region *r);
void gdrpeer_region_put(struct gdrpeer_region *r);
extern const struct vm_operations_struct gdrpeer_handle_vm_ops;
extern const struct vm_operations_struct gdrpeer_dmabuf_vm_ops;
int gdrpeer_region_mmap(struct gdrpeer_region *r, u64 offset,
			struct vm_area_struct *vma);
int gdrpeer_region_phys(const struct gdrpeer_region *r, u64 offset,
			phys_addr_t *phys);
int gdrpeer_vma_no_split(struct vm_area_struct *vma, unsigned long addr);

/* gdrpeer_chardev.c */
int gdrpeer_chardev_init(void);
void gdrpeer_chardev_exit(void);
struct kobject *gdrpeer_providers(void);
extern unsigned int gdrpeer_dev_mode;
extern unsigned int gdrpeer_dev_gid;

#endif /* GDRPEER_CORE_H */

// SPDX-License-Identifier: GPL-2.0
/*
 * gdrpeer core: the registry of bound devices, regions (allocations) with
 * their reference counts, CPU mmap of a region, and the per-device sysfs
 * directory /sys/class/gdrpeer/gdrpeer/devices/<index>/.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/idr.h>
#include <linux/io.h>
#include <linux/lockdep.h>
#include <linux/mm.h>
#include <linux/pci.h>
#include <linux/sched.h>
#include <linux/sizes.h>
#include <linux/slab.h>
#include <linux/sysfs.h>
#include <linux/xarray.h>

#include <gdrpeer.h>

#include "gdrpeer_compat.h"
#include "gdrpeer_core.h"
#include "exporter.h"
#include "provider.h"

/*
 * Index -> device.  gdrpeer_devices_lock (mutex, may sleep) serialises
 * register/unregister against lookups that take a device reference; it is
 * taken before any gdrpeer_device.lock.
 */
static DEFINE_MUTEX(gdrpeer_devices_lock);
static DEFINE_XARRAY_ALLOC(gdrpeer_devices);
static struct kobject *gdrpeer_devices_kobj;	/* .../gdrpeer/devices */

static struct gdrpeer_device *kobj_to_gdev(struct kobject *kobj)
{
	return container_of(kobj, struct gdrpeer_device, kobj);
}

/* ---- per-device sysfs ---------------------------------------------- */

static ssize_t bdf_show(struct kobject *kobj, struct kobj_attribute *attr,
			char *buf)
{
	return sysfs_emit(buf, "%s\n", pci_name(kobj_to_gdev(kobj)->pdev));
}

static ssize_t bar_show(struct kobject *kobj, struct kobj_attribute *attr,
			char *buf)
{
	return sysfs_emit(buf, "%d\n", kobj_to_gdev(kobj)->bar);
}

static ssize_t bar_size_show(struct kobject *kobj,
			     struct kobj_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "%llu\n", kobj_to_gdev(kobj)->size);
}

static ssize_t free_bytes_show(struct kobject *kobj,
			       struct kobj_attribute *attr, char *buf)
{
	struct gdrpeer_device *gdev = kobj_to_gdev(kobj);

	/*
	 * sysfs files are removed (and readers drained) before shutdown,
	 * so the allocator still exists here.
	 */
	return sysfs_emit(buf, "%llu\n", gdev->ops->free_bytes(gdev));
}

static ssize_t provider_show(struct kobject *kobj,
			     struct kobj_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "%s\n", kobj_to_gdev(kobj)->ops->name);
}

#define GDRPEER_COUNTER_ATTR(name)					\
static ssize_t name##_show(struct kobject *kobj,			\
			   struct kobj_attribute *attr, char *buf)	\
{									\
	return sysfs_emit(buf, "%lld\n",				\
		(long long)atomic64_read(&kobj_to_gdev(kobj)->cnt.name)); \
}									\
static struct kobj_attribute name##_attr = __ATTR_RO(name)

GDRPEER_COUNTER_ATTR(allocations);
GDRPEER_COUNTER_ATTR(alloc_bytes);
GDRPEER_COUNTER_ATTR(exports);
GDRPEER_COUNTER_ATTR(attachments);
GDRPEER_COUNTER_ATTR(active_maps);
GDRPEER_COUNTER_ATTR(revoked);
GDRPEER_COUNTER_ATTR(vmaps);

static struct kobj_attribute bdf_attr = __ATTR_RO(bdf);
static struct kobj_attribute bar_attr = __ATTR_RO(bar);
static struct kobj_attribute bar_size_attr = __ATTR_RO(bar_size);
static struct kobj_attribute free_bytes_attr = __ATTR_RO(free_bytes);
static struct kobj_attribute provider_attr = __ATTR_RO(provider);

static struct attribute *gdrpeer_device_attrs[] = {
	&bdf_attr.attr,
	&bar_attr.attr,
	&bar_size_attr.attr,
	&free_bytes_attr.attr,
	&provider_attr.attr,
	&allocations_attr.attr,
	&alloc_bytes_attr.attr,
	&exports_attr.attr,
	&attachments_attr.attr,
	&active_maps_attr.attr,
	&revoked_attr.attr,
	&vmaps_attr.attr,
	NULL,
};
ATTRIBUTE_GROUPS(gdrpeer_device);

/*
 * Windows of gdrpeer's mmap offset space (gdrpeer_mapping()), so that
 * zapping one region's CPU mappings touches no other region's.  Each
 * registered device owns a window while its struct lives: window k
 * (k >= 1) covers page offsets [k << SHIFT, (k + 1) << SHIFT), and a
 * region's handle mappings live at the device's window plus the region's
 * page offset in the device.  Live regions of one device never overlap
 * there (the allocator hands out disjoint ranges and takes a range back
 * only when its region is released, or when the dead device's revoked
 * regions give their memory back; no region is created after that), and
 * the window is given back only when the device struct is released, after
 * the last region of it, so no two live regions ever share page offsets.
 * A request that fails takes nothing.
 *
 * A device is at most 1 << SHIFT pages (refused at registration), and the
 * windows end below 2^(63 - PAGE_SHIFT) pages, so every byte offset of
 * every window fits a loff_t: revocation's zap by byte offset cannot wrap
 * or lose bits.  That allows 2^15 - 2 device structs alive at once with
 * 4 KiB pages (each bind makes one; an unbound one lives on while a region
 * of it is referenced); past that a bind fails with -ENOSPC.  Regions of
 * providers that map for each importer (nvidia pins, peer-memory
 * registrations) have no handle and no window (mmap_pgoff 0).
 */
#define GDRPEER_WINDOW_SHIFT	36
#define GDRPEER_WINDOW_PAGES	(1ULL << GDRPEER_WINDOW_SHIFT)
#define GDRPEER_WINDOWS_MAX	\
	((unsigned int)((1ULL << (63 - PAGE_SHIFT - GDRPEER_WINDOW_SHIFT)) - 2))
static_assert(63 - PAGE_SHIFT - GDRPEER_WINDOW_SHIFT >= 8,
	      "too few mmap windows for this page size");
static_assert(BITS_PER_LONG == 64, "mmap windows need 64-bit page offsets");
static DEFINE_IDA(gdrpeer_windows);

static int gdrpeer_window_take(struct gdrpeer_device *gdev)
{
	int k;

	if ((gdev->size >> PAGE_SHIFT) > GDRPEER_WINDOW_PAGES)
		return -E2BIG;
	k = ida_alloc_range(&gdrpeer_windows, 1, GDRPEER_WINDOWS_MAX,
			    GFP_KERNEL);
	if (k < 0)
		return k;
	gdev->mmap_pgoff = (unsigned long)k << GDRPEER_WINDOW_SHIFT;
	return 0;
}

static void gdrpeer_window_give(struct gdrpeer_device *gdev)
{
	if (gdev->mmap_pgoff)
		ida_free(&gdrpeer_windows,
			 (unsigned int)(gdev->mmap_pgoff >> GDRPEER_WINDOW_SHIFT));
	gdev->mmap_pgoff = 0;
}

static void gdrpeer_device_release(struct kobject *kobj)
{
	struct gdrpeer_device *gdev = kobj_to_gdev(kobj);

	/* every region of it is gone, and with them every handle mapping */
	gdrpeer_window_give(gdev);
	gdev->ops->destroy(gdev);
}

static struct kobj_type gdrpeer_device_ktype = {
	.release = gdrpeer_device_release,
	.sysfs_ops = &kobj_sysfs_ops,
	.default_groups = gdrpeer_device_groups,
};

/* ---- registry ------------------------------------------------------- */

int gdrpeer_devices_init(struct kobject *parent)
{
	gdrpeer_devices_kobj = kobject_create_and_add("devices", parent);
	return gdrpeer_devices_kobj ? 0 : -ENOMEM;
}

void gdrpeer_devices_exit(void)
{
	WARN_ON(!xa_empty(&gdrpeer_devices));
	kobject_put(gdrpeer_devices_kobj);
	gdrpeer_devices_kobj = NULL;
}

/*
 * Takes over @gdev: on success it is visible in sysfs and to ALLOC; on
 * failure it has been released (ops->shutdown and ops->destroy called).
 */
int gdrpeer_device_register(struct gdrpeer_device *gdev)
{
	u32 index;
	int ret;

	mutex_init(&gdev->lock);
	INIT_LIST_HEAD(&gdev->regions);
	kobject_init(&gdev->kobj, &gdrpeer_device_ktype);
	gdev->mmap_pgoff = 0;
	ret = gdrpeer_window_take(gdev);
	if (ret) {
		pr_err("%s: no mmap window for the device (%d)\n",
		       pci_name(gdev->pdev), ret);
		goto err_shutdown;
	}

	mutex_lock(&gdrpeer_devices_lock);
	ret = xa_alloc(&gdrpeer_devices, &index, gdev, xa_limit_31b,
		       GFP_KERNEL);
	if (ret)
		goto err_unlock;
	gdev->index = index;
	ret = kobject_add(&gdev->kobj, gdrpeer_devices_kobj, "%u", index);
	if (ret) {
		xa_erase(&gdrpeer_devices, index);
		goto err_unlock;
	}
	mutex_unlock(&gdrpeer_devices_lock);
	kobject_uevent(&gdev->kobj, KOBJ_ADD);
	return 0;

err_unlock:
	mutex_unlock(&gdrpeer_devices_lock);
err_shutdown:
	gdev->ops->shutdown(gdev);
	kobject_put(&gdev->kobj);
	return ret;
}

/*
 * The live region after @after in @gdev's list (the first one for NULL),
 * with a reference, or NULL at the end.  A region in its release
 * (reference 0) is skipped: its memory goes back without our help.
 * @after is still on the list: the caller holds a reference to it, and a
 * region leaves the list only in its release.
 */
static struct gdrpeer_region *
gdrpeer_device_next_live(struct gdrpeer_device *gdev,
			 struct gdrpeer_region *after)
{
	struct gdrpeer_region *r;

	lockdep_assert_held(&gdev->lock);
	r = after ? list_next_entry(after, dev_node) :
		    list_first_entry(&gdev->regions, struct gdrpeer_region,
				     dev_node);
	list_for_each_entry_from(r, &gdev->regions, dev_node)
		if (kref_get_unless_zero(&r->ref))
			return r;
	return NULL;
}

/*
 * The device's memory is going (unbind, hot-unplug, a fatal error): no new
 * region, and every live one is revoked.  Returns when no CPU mapping and
 * no importer mapping of the device's memory is left.  Sleeps; callers
 * hold no lock of ours.
 *
 * The walk needs no memory: it holds a reference to the region it revokes,
 * which keeps that region on the list as the cursor, and takes gdev->lock
 * only to step to the next one.  @dead is set under gdev->lock before the
 * first step and region creation checks it under the same lock, so no
 * region joins the list behind the cursor; regions that leave it (their
 * last reference went) need no revocation.  Concurrent callers (an error
 * handler and remove()) each walk the whole list: region revocation is
 * idempotent and each returns only once the region's users are gone.
 */
void gdrpeer_device_revoke(struct gdrpeer_device *gdev)
{
	struct gdrpeer_region *r, *next;

	mutex_lock(&gdev->lock);
	gdev->dead = true;
	r = gdrpeer_device_next_live(gdev, NULL);
	mutex_unlock(&gdev->lock);

	while (r) {
		gdrpeer_region_revoke(r);
		mutex_lock(&gdev->lock);
		next = gdrpeer_device_next_live(gdev, r);
		mutex_unlock(&gdev->lock);
		/* the release (if last) takes gdev->lock: not held here */
		gdrpeer_region_put(r);
		r = next;
		cond_resched();
	}
}

/*
 * Unbind: revoke everything, take the memory of still referenced regions
 * back, then remove the device (sysfs, registry) and give its resources
 * back (ops->shutdown).  The struct lives on until the last region
 * reference is gone.
 */
void gdrpeer_device_unregister(struct gdrpeer_device *gdev)
{
	struct gdrpeer_region *r;

	mutex_lock(&gdrpeer_devices_lock);
	xa_erase(&gdrpeer_devices, gdev->index);
	mutex_unlock(&gdrpeer_devices_lock);

	gdrpeer_device_revoke(gdev);

	/* nobody can reach the memory now: hand it back before shutdown */
	mutex_lock(&gdev->lock);
	list_for_each_entry(r, &gdev->regions, dev_node) {
		if (!r->memory_returned) {
			gdev->ops->free(gdev, r);
			r->memory_returned = true;
		}
	}
	mutex_unlock(&gdev->lock);

	/* removes the sysfs files and waits for readers of free_bytes */
	kobject_del(&gdev->kobj);
	gdev->ops->shutdown(gdev);
	kobject_put(&gdev->kobj);
}

/* Returns a device reference (gdrpeer_device_put) or NULL. */
struct gdrpeer_device *gdrpeer_device_find_pci(struct pci_dev *pdev)
{
	struct gdrpeer_device *gdev, *found = NULL;
	unsigned long index;

	mutex_lock(&gdrpeer_devices_lock);
	xa_for_each(&gdrpeer_devices, index, gdev) {
		if (gdev->pdev == pdev) {
			found = gdev;
			kobject_get(&gdev->kobj);
			break;
		}
	}
	mutex_unlock(&gdrpeer_devices_lock);
	return found;
}

/* First device of provider @ops with a reference, or NULL. */
struct gdrpeer_device *
gdrpeer_device_find_first(const struct gdrpeer_provider_ops *ops)
{
	struct gdrpeer_device *gdev, *found = NULL;
	unsigned long index;

	mutex_lock(&gdrpeer_devices_lock);
	xa_for_each(&gdrpeer_devices, index, gdev) {
		if (gdev->ops == ops) {
			found = gdev;
			kobject_get(&gdev->kobj);
			break;
		}
	}
	mutex_unlock(&gdrpeer_devices_lock);
	return found;
}

void gdrpeer_device_put(struct gdrpeer_device *gdev)
{
	kobject_put(&gdev->kobj);
}

u32 gdrpeer_device_count(void)
{
	struct gdrpeer_device *gdev;
	unsigned long index;
	u32 n = 0;

	mutex_lock(&gdrpeer_devices_lock);
	xa_for_each(&gdrpeer_devices, index, gdev)
		n++;
	mutex_unlock(&gdrpeer_devices_lock);
	return n;
}

/* Fills up to @count entries of @out (kernel memory); returns the total. */
u32 gdrpeer_device_list(struct gdrpeer_device_info *out, u32 count)
{
	struct gdrpeer_device *gdev;
	unsigned long index;
	u32 n = 0;

	mutex_lock(&gdrpeer_devices_lock);
	xa_for_each(&gdrpeer_devices, index, gdev) {
		if (n < count) {
			struct gdrpeer_device_info *d = &out[n];

			memset(d, 0, sizeof(*d));
			d->index = gdev->index;
			d->provider = gdev->ops->uapi_id;
			d->pci_domain = pci_domain_nr(gdev->pdev->bus);
			d->pci_bus = gdev->pdev->bus->number;
			d->pci_dev = PCI_SLOT(gdev->pdev->devfn);
			d->pci_func = PCI_FUNC(gdev->pdev->devfn);
			d->bar = (__u8)gdev->bar;
			d->bar_size = gdev->size;
			d->free_bytes = gdev->ops->free_bytes(gdev);
			d->alloc_align = PAGE_SIZE;
		}
		n++;
	}
	mutex_unlock(&gdrpeer_devices_lock);
	return n;
}

/* ---- regions -------------------------------------------------------- */

/* Common initialisation of a region of @size bytes (providers too). */
void gdrpeer_region_init(struct gdrpeer_region *r, u64 size,
			 enum gdrpeer_revocable revocable)
{
	kref_init(&r->ref);
	r->size = size;
	r->revocable = revocable;
	atomic_set(&r->exports, 0);
	init_rwsem(&r->memory_lock);
	mutex_init(&r->exports_lock);
	INIT_LIST_HEAD(&r->dmabufs);
	mutex_init(&r->dmabuf_revoke_lock);
	INIT_LIST_HEAD(&r->dev_node);
	r->mmap_pgoff = 0;	/* set by gdrpeer_region_create (handles) */
}

/* Bytes cleared between two chances to reschedule. */
#define GDRPEER_CLEAR_CHUNK SZ_2M

/*
 * Zero the memory before it is handed out: it may hold what the previous
 * user of this BAR range wrote.  Large allocations take a while (about a
 * second per 10 GiB on a real BAR): clear in chunks, rescheduling between
 * them.
 *
 * The region is on the device's list already, so the device can go while
 * we clear (unbind, hot-unplug, a fatal error): its revocation takes
 * @memory_lock for writing, then hands the memory back and releases the
 * BAR.  Each chunk is written with @memory_lock held for reading and only
 * if the region is not revoked, so revocation waits for the chunk in
 * flight and no write reaches the BAR after it; the ALLOC then fails
 * with -ENODEV.
 */
static int gdrpeer_region_clear(struct gdrpeer_region *r)
{
	unsigned int i;
	int ret = 0;

	for (i = 0; i < r->nr_ranges && !ret; i++) {
		u64 done;

		for (done = 0; done < r->ranges[i].len && !ret;
		     done += GDRPEER_CLEAR_CHUNK) {
			u64 n = min_t(u64, GDRPEER_CLEAR_CHUNK,
				      r->ranges[i].len - done);
			void __iomem *p = ioremap_wc(r->ranges[i].phys + done, n);

			if (!p)
				return -ENOMEM;
			down_read(&r->memory_lock);
			if (r->revoked) {
				ret = -ENODEV;
			} else {
				memset_io(p, 0, n);
				/* the writes are posted: land before revoke */
				wmb();
			}
			up_read(&r->memory_lock);
			iounmap(p);
			cond_resched();
		}
	}
	return ret;
}

int gdrpeer_region_create(u32 index, u64 size, u32 flags,
			  struct gdrpeer_region **out)
{
	struct gdrpeer_device *gdev;
	struct gdrpeer_region *r;
	int ret;

	mutex_lock(&gdrpeer_devices_lock);
	gdev = xa_load(&gdrpeer_devices, index);
	if (gdev)
		kobject_get(&gdev->kobj);
	mutex_unlock(&gdrpeer_devices_lock);
	if (!gdev)
		return -ENODEV;

	if (size > gdev->size) {
		ret = -E2BIG;
		goto err_put;
	}
	/* charged to the caller's memory cgroup: handles are user-driven */
	r = kzalloc(sizeof(*r), GFP_KERNEL_ACCOUNT);
	if (!r) {
		ret = -ENOMEM;
		goto err_put;
	}
	gdrpeer_region_init(r, size, GDRPEER_REVOCABLE_WITH_DEVICE);
	r->gdev = gdev;
	r->cnt = &gdev->cnt;
	r->flags = flags;

	mutex_lock(&gdev->lock);
	ret = gdev->dead ? -ENODEV : gdev->ops->alloc(gdev, r);
	if (!ret) {
		/* its own pages of the device's window (see above) */
		r->mmap_pgoff = gdev->mmap_pgoff +
				(unsigned long)(r->dev_offset >> PAGE_SHIFT);
		list_add(&r->dev_node, &gdev->regions);
	}
	mutex_unlock(&gdev->lock);
	if (ret) {
		kfree(r);
		goto err_put;
	}
	atomic64_inc(&gdev->cnt.allocations);
	atomic64_add(size, &gdev->cnt.alloc_bytes);
	ret = gdrpeer_region_clear(r);
	if (ret) {
		gdrpeer_region_put(r);
		return ret;
	}
	*out = r;
	return 0;

err_put:
	kobject_put(&gdev->kobj);
	return ret;
}

void gdrpeer_region_get(struct gdrpeer_region *r)
{
	kref_get(&r->ref);
}

static void gdrpeer_region_release(struct kref *ref)
{
	struct gdrpeer_region *r = container_of(ref, struct gdrpeer_region,
						ref);
	struct gdrpeer_device *gdev = r->gdev;

	/* a provider's release waits for its own revocation to end */
	if (r->ops) {
		r->ops->release(r);
		return;
	}
	if (r->revoked)
		atomic64_dec(&r->cnt->revoked);
	mutex_lock(&gdev->lock);
	list_del(&r->dev_node);
	if (!r->memory_returned)
		gdev->ops->free(gdev, r);
	mutex_unlock(&gdev->lock);
	atomic64_sub(r->size, &gdev->cnt.alloc_bytes);
	atomic64_dec(&gdev->cnt.allocations);
	if (r->ranges != &r->range0)
		kfree(r->ranges);
	mutex_destroy(&r->exports_lock);
	mutex_destroy(&r->dmabuf_revoke_lock);
	kfree(r);
	kobject_put(&gdev->kobj);
}

/* Process context only: the release takes gdev->lock. */
void gdrpeer_region_put(struct gdrpeer_region *r)
{
	might_sleep();
	kref_put(&r->ref, gdrpeer_region_release);
}

bool gdrpeer_region_revoked(struct gdrpeer_region *r)
{
	bool revoked;

	down_read(&r->memory_lock);
	revoked = r->revoked;
	up_read(&r->memory_lock);
	return revoked;
}

/*
 * The memory of @r is going away: stop every use of it and return when
 * none is left (see gdrpeer_core.h).  Idempotent.  Sleeps; the caller
 * holds a reference and no lock of ours.
 */
void gdrpeer_region_revoke(struct gdrpeer_region *r)
{
	bool first;

	down_write(&r->memory_lock);
	first = !r->revoked;
	r->revoked = true;
	up_write(&r->memory_lock);
	if (first)
		atomic64_inc(&r->cnt->revoked);

	/*
	 * handle mappings: faults after this see @revoked and get SIGBUS.
	 * The region's pages of its device's window, whose byte offsets fit
	 * a loff_t (see above).  (unmap_mapping_pages() would spare the
	 * conversion but is not exported on 5.10.)
	 */
	if (r->mmap_pgoff)
		unmap_mapping_range(gdrpeer_mapping(),
				    (loff_t)r->mmap_pgoff << PAGE_SHIFT,
				    (loff_t)r->size, 1);
	gdrpeer_dmabuf_revoke_region(r);
	gdrpeer_peermem_revoke_region(r);
}

/*
 * A mapping is undone as a whole: x86 PAT tracks the memory type of a
 * PFN mapping per vma, and unmapping part of one ("freeing invalid
 * memtype") would leave the rest of the reservation behind.
 */
int gdrpeer_vma_no_split(struct vm_area_struct *vma, unsigned long addr)
{
	return -EINVAL;
}

/*
 * CPU mappings (handle mmaps and dma-buf mmaps) are filled one page per
 * fault, write-combined, so that revocation can zap them and a fault
 * after it gets SIGBUS.  The caller has checked the vma's size.
 */
void gdrpeer_region_mmap_prepare(struct vm_area_struct *vma)
{
	gdrpeer_vm_flags_set(vma, VM_IO | VM_PFNMAP | VM_DONTEXPAND |
			     VM_DONTDUMP | VM_DONTCOPY);
	vma->vm_page_prot = pgprot_writecombine(vma->vm_page_prot);
}

/* Fault at byte @offset of @r: insert its page unless revoked. */
vm_fault_t gdrpeer_region_fault(struct gdrpeer_region *r, u64 offset,
				struct vm_fault *vmf)
{
	vm_fault_t ret = VM_FAULT_SIGBUS;
	phys_addr_t phys;

	/* revoke zaps after it set @revoked: no page can be left behind */
	down_read(&r->memory_lock);
	if (!r->revoked && offset < r->size &&
	    !gdrpeer_region_phys(r, offset, &phys))
		ret = vmf_insert_pfn_prot(vmf->vma, vmf->address & PAGE_MASK,
					  phys >> PAGE_SHIFT,
					  vmf->vma->vm_page_prot);
	up_read(&r->memory_lock);
	return ret;
}

static void gdrpeer_handle_vma_open(struct vm_area_struct *vma)
{
	gdrpeer_region_get(vma->vm_private_data);
}

static void gdrpeer_handle_vma_close(struct vm_area_struct *vma)
{
	gdrpeer_region_put(vma->vm_private_data);
}

static vm_fault_t gdrpeer_handle_vma_fault(struct vm_fault *vmf)
{
	struct gdrpeer_region *r = vmf->vma->vm_private_data;

	return gdrpeer_region_fault(r, (u64)(vmf->pgoff - r->mmap_pgoff) <<
				    PAGE_SHIFT, vmf);
}

/* handle mappings hold a region reference for their lifetime */
static const struct vm_operations_struct gdrpeer_handle_vm_ops = {
	.open = gdrpeer_handle_vma_open,
	.close = gdrpeer_handle_vma_close,
	.fault = gdrpeer_handle_vma_fault,
	.GDRPEER_VM_OPS_MAY_SPLIT = gdrpeer_vma_no_split,
};

/*
 * mmap of [offset, offset + vma size) of @r through /dev/gdrpeer.  On
 * success the vma owns the caller's region reference; its page offset is
 * moved into the region's own window of gdrpeer's address space.
 */
int gdrpeer_region_mmap_handle(struct gdrpeer_region *r, u64 offset,
			       struct vm_area_struct *vma)
{
	u64 len = vma->vm_end - vma->vm_start;

	if (!(vma->vm_flags & VM_SHARED))
		return -EINVAL;
	if (offset > r->size || len > r->size - offset)
		return -EINVAL;
	if (gdrpeer_region_revoked(r))
		return -ENODEV;
	gdrpeer_region_mmap_prepare(vma);
	vma->vm_pgoff = r->mmap_pgoff + (unsigned long)(offset >> PAGE_SHIFT);
	vma->vm_private_data = r;
	vma->vm_ops = &gdrpeer_handle_vm_ops;
	return 0;
}

/*
 * The region behind [addr, addr + len) of @mm when that range lies inside
 * one handle mapping, with a reference, and the byte offset of @addr in
 * it; NULL otherwise.  The caller holds @mm's mmap_lock.
 */
struct gdrpeer_region *gdrpeer_region_from_user(struct mm_struct *mm,
						unsigned long addr, u64 len,
						u64 *offset)
{
	struct vm_area_struct *vma = find_vma(mm, addr);
	struct gdrpeer_region *r;

	if (!vma || vma->vm_start > addr || vma->vm_ops != &gdrpeer_handle_vm_ops ||
	    len > vma->vm_end - addr)
		return NULL;
	r = vma->vm_private_data;
	*offset = ((u64)(vma->vm_pgoff - r->mmap_pgoff) << PAGE_SHIFT) +
		  (addr - vma->vm_start);
	gdrpeer_region_get(r);
	return r;
}

/* CPU physical address of byte @offset of @r; -EINVAL beyond its end. */
int gdrpeer_region_phys(const struct gdrpeer_region *r, u64 offset,
			phys_addr_t *phys)
{
	unsigned int i;

	for (i = 0; i < r->nr_ranges; i++) {
		if (offset < r->ranges[i].len) {
			*phys = r->ranges[i].phys + offset;
			return 0;
		}
		offset -= r->ranges[i].len;
	}
	return -EINVAL;
}

// SPDX-License-Identifier: GPL-2.0
/*
 * gdrpeer devices: the registry of bound devices, each device's mmap
 * window, its list of regions and its revocation, and the per-device
 * sysfs directory /sys/class/gdrpeer/gdrpeer/devices/<index>/.  Regions
 * themselves are gdrpeer_region.c's; they reach a device's allocator and
 * list only through gdrpeer_device_add_region/remove_region here.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/idr.h>
#include <linux/lockdep.h>
#include <linux/mm.h>
#include <linux/pci.h>
#include <linux/sched.h>
#include <linux/slab.h>
#include <linux/sysfs.h>
#include <linux/xarray.h>

#include <gdrpeer.h>

#include "gdrpeer_compat.h"
#include "gdrpeer_core.h"
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
 * Windows of gdrpeer's mmap offset space (gdrpeer_mapping(),
 * gdrpeer_region.c), so that
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

/**
 * gdrpeer_devices_init() - make the devices/ directory of the registry
 * @parent: the class device's kobject
 *
 * Context: Module load, process context.  Sleeps.
 * Return: 0 or -ENOMEM.
 */
int gdrpeer_devices_init(struct kobject *parent)
{
	gdrpeer_devices_kobj = kobject_create_and_add("devices", parent);
	return gdrpeer_devices_kobj ? 0 : -ENOMEM;
}

/**
 * gdrpeer_devices_exit() - remove the devices/ directory
 *
 * Context: Module unload, after every provider unregistered its devices.
 * Sleeps.
 */
void gdrpeer_devices_exit(void)
{
	WARN_ON(!xa_empty(&gdrpeer_devices));
	kobject_put(gdrpeer_devices_kobj);
	gdrpeer_devices_kobj = NULL;
}

/**
 * gdrpeer_device_register() - make a provider's device visible
 * @gdev: the device, with @ops, @pdev, @bar and @size filled in
 *
 * Takes over @gdev: on success it is visible in sysfs and to ALLOC, with
 * its own mmap window; on failure it has been released (ops->shutdown and
 * ops->destroy called).
 *
 * Context: Process context (a provider's probe or init).  Sleeps; takes
 * gdrpeer_devices_lock.
 * Return: 0, -E2BIG (larger than an mmap window), -ENOSPC (no window
 * left) or another negative errno.
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

/**
 * gdrpeer_device_revoke() - revoke every region of a device, refuse new ones
 * @gdev: the device
 *
 * The device's memory is going (unbind, hot-unplug, a fatal error): no new
 * region, and every live one is revoked.  Returns when no CPU mapping and
 * no importer mapping of the device's memory is left.
 *
 * The walk needs no memory: it holds a reference to the region it revokes,
 * which keeps that region on the list as the cursor, and takes gdev->lock
 * only to step to the next one.  @dead is set under gdev->lock before the
 * first step and region creation checks it under the same lock, so no
 * region joins the list behind the cursor; regions that leave it (their
 * last reference went) need no revocation.  Concurrent callers (an error
 * handler and remove()) each walk the whole list: region revocation is
 * idempotent and each returns only once the region's users are gone.
 *
 * Context: Process context.  Sleeps, possibly for long (importers that
 * hold mappings); the caller holds no lock of ours.
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

/**
 * gdrpeer_device_unregister() - the device goes (unbind, remove)
 * @gdev: a registered device; the caller's reference goes with it
 *
 * Revoke everything, take the memory of still referenced regions back,
 * then remove the device (sysfs, registry) and give its resources back
 * (ops->shutdown).  The struct lives on until the last region reference
 * is gone.
 *
 * Context: Process context (a provider's remove).  Sleeps, possibly for
 * long (see gdrpeer_device_revoke()); the caller holds no lock of ours.
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

/*
 * The first registered device for which @match(gdev, @key) holds, with a
 * reference, or NULL.
 */
static struct gdrpeer_device *
gdrpeer_device_find(bool (*match)(const struct gdrpeer_device *gdev,
				  const void *key), const void *key)
{
	struct gdrpeer_device *gdev, *found = NULL;
	unsigned long index;

	mutex_lock(&gdrpeer_devices_lock);
	xa_for_each(&gdrpeer_devices, index, gdev) {
		if (match(gdev, key)) {
			found = gdev;
			kobject_get(&gdev->kobj);
			break;
		}
	}
	mutex_unlock(&gdrpeer_devices_lock);
	return found;
}

static bool gdrpeer_device_is_pci(const struct gdrpeer_device *gdev,
				  const void *pdev)
{
	return gdev->pdev == pdev;
}

static bool gdrpeer_device_has_ops(const struct gdrpeer_device *gdev,
				   const void *ops)
{
	return gdev->ops == ops;
}

/**
 * gdrpeer_device_find_pci() - the device a PCI function serves
 * @pdev: the function
 *
 * Context: Process context.  Sleeps; takes gdrpeer_devices_lock.
 * Return: the device with a reference (gdrpeer_device_put()) or NULL.
 */
struct gdrpeer_device *gdrpeer_device_find_pci(struct pci_dev *pdev)
{
	return gdrpeer_device_find(gdrpeer_device_is_pci, pdev);
}

/**
 * gdrpeer_device_find_first() - the first device of a provider
 * @ops: the provider's device ops
 *
 * Context: Process context.  Sleeps; takes gdrpeer_devices_lock.
 * Return: the device with a reference (gdrpeer_device_put()) or NULL.
 */
struct gdrpeer_device *
gdrpeer_device_find_first(const struct gdrpeer_provider_ops *ops)
{
	return gdrpeer_device_find(gdrpeer_device_has_ops, ops);
}

/**
 * gdrpeer_device_get() - the registered device of an index
 * @index: its index (devices/<index>, GDRPEER_IOCTL_ALLOC's device)
 *
 * Context: Process context.  Sleeps; takes gdrpeer_devices_lock.
 * Return: the device with a reference (gdrpeer_device_put()) or NULL.
 */
struct gdrpeer_device *gdrpeer_device_get(u32 index)
{
	struct gdrpeer_device *gdev;

	mutex_lock(&gdrpeer_devices_lock);
	gdev = xa_load(&gdrpeer_devices, index);
	if (gdev)
		kobject_get(&gdev->kobj);
	mutex_unlock(&gdrpeer_devices_lock);
	return gdev;
}

/**
 * gdrpeer_device_put() - drop a device reference
 * @gdev: the device
 *
 * Context: Process context (the last reference runs ops->destroy).
 */
void gdrpeer_device_put(struct gdrpeer_device *gdev)
{
	kobject_put(&gdev->kobj);
}

/**
 * gdrpeer_device_count() - how many devices are registered
 *
 * Context: Process context.  Sleeps; takes gdrpeer_devices_lock.
 * Return: the number of devices.
 */
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

/**
 * gdrpeer_device_list() - describe the registered devices
 * @out: kernel memory for @count entries (NULL when @count is 0)
 * @count: entries to fill at most
 *
 * Context: Process context.  Sleeps; takes gdrpeer_devices_lock, under
 * which each provider's free_bytes runs (lock-free by contract).
 * Return: the number of devices, which may exceed @count.
 */
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

/* ---- a device's regions ---------------------------------------------- */

/**
 * gdrpeer_device_add_region() - give a new region memory of a device
 * @gdev: the device; @r holds the caller's reference to it on success
 * @r: the new region, with @size set
 *
 * The provider's alloc fills the region's ranges and device offset; the
 * region gets its own pages of the device's mmap window and joins the
 * device's list, which the device's revocation walks.
 *
 * Context: Process context.  Sleeps; takes gdrpeer_device.lock, under
 * which the provider's alloc runs.
 * Return: 0, -ENODEV (the device is going) or the provider's error.
 */
int gdrpeer_device_add_region(struct gdrpeer_device *gdev,
			      struct gdrpeer_region *r)
{
	int ret;

	mutex_lock(&gdev->lock);
	ret = gdev->dead ? -ENODEV : gdev->ops->alloc(gdev, r);
	if (!ret) {
		/* its own pages of the device's window (see above) */
		r->mmap_pgoff = gdev->mmap_pgoff +
				(unsigned long)(r->dev_offset >> PAGE_SHIFT);
		list_add(&r->dev_node, &gdev->regions);
	}
	mutex_unlock(&gdev->lock);
	return ret;
}

/**
 * gdrpeer_device_remove_region() - a region of a device is released
 * @gdev: the device
 * @r: the region, in its release (no reference left)
 *
 * Takes @r off the device's list and gives its memory back to the
 * provider, unless the device's unregistration took it already.
 *
 * Context: Process context.  Sleeps; takes gdrpeer_device.lock, under
 * which the provider's free runs.
 */
void gdrpeer_device_remove_region(struct gdrpeer_device *gdev,
				  struct gdrpeer_region *r)
{
	mutex_lock(&gdev->lock);
	list_del(&r->dev_node);
	if (!r->memory_returned)
		gdev->ops->free(gdev, r);
	mutex_unlock(&gdev->lock);
}

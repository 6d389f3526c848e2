// SPDX-License-Identifier: GPL-2.0
/*
 * gdrpeer core: the registry of bound devices, regions (allocations) with
 * their reference counts, CPU mmap of a region, and the per-device sysfs
 * directory /sys/class/gdrpeer/gdrpeer/devices/<index>/.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/io.h>
#include <linux/mm.h>
#include <linux/pci.h>
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
	&vmaps_attr.attr,
	NULL,
};
ATTRIBUTE_GROUPS(gdrpeer_device);

static void gdrpeer_device_release(struct kobject *kobj)
{
	struct gdrpeer_device *gdev = kobj_to_gdev(kobj);

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
	kobject_init(&gdev->kobj, &gdrpeer_device_ktype);

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
	gdev->ops->shutdown(gdev);
	kobject_put(&gdev->kobj);
	return ret;
}

/* -EBUSY while any region of @gdev is alive; then @gdev is gone. */
int gdrpeer_device_unregister(struct gdrpeer_device *gdev)
{
	mutex_lock(&gdrpeer_devices_lock);
	mutex_lock(&gdev->lock);
	if (atomic64_read(&gdev->cnt.allocations)) {
		mutex_unlock(&gdev->lock);
		mutex_unlock(&gdrpeer_devices_lock);
		return -EBUSY;
	}
	gdev->dead = true;
	mutex_unlock(&gdev->lock);
	xa_erase(&gdrpeer_devices, gdev->index);
	mutex_unlock(&gdrpeer_devices_lock);

	/* removes the sysfs files and waits for readers of free_bytes */
	kobject_del(&gdev->kobj);
	gdev->ops->shutdown(gdev);
	kobject_put(&gdev->kobj);
	return 0;
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
	r = kzalloc(sizeof(*r), GFP_KERNEL);
	if (!r) {
		ret = -ENOMEM;
		goto err_put;
	}
	kref_init(&r->ref);
	r->gdev = gdev;
	r->cnt = &gdev->cnt;
	r->size = size;
	r->flags = flags;
	atomic_set(&r->exports, 0);

	mutex_lock(&gdev->lock);
	ret = gdev->dead ? -ENODEV : gdev->ops->alloc(gdev, r);
	if (!ret) {
		atomic64_inc(&gdev->cnt.allocations);
		atomic64_add(size, &gdev->cnt.alloc_bytes);
	}
	mutex_unlock(&gdev->lock);
	if (ret) {
		kfree(r);
		goto err_put;
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

	if (r->ops) {
		r->ops->release(r);
		return;
	}
	mutex_lock(&gdev->lock);
	gdev->ops->free(gdev, r);
	atomic64_sub(r->size, &gdev->cnt.alloc_bytes);
	atomic64_dec(&gdev->cnt.allocations);
	mutex_unlock(&gdev->lock);
	if (r->ranges != &r->range0)
		kfree(r->ranges);
	kfree(r);
	kobject_put(&gdev->kobj);
}

/* Process context only: the release takes gdev->lock. */
void gdrpeer_region_put(struct gdrpeer_region *r)
{
	might_sleep();
	kref_put(&r->ref, gdrpeer_region_release);
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

const struct vm_operations_struct gdrpeer_dmabuf_vm_ops = {
	.GDRPEER_VM_OPS_MAY_SPLIT = gdrpeer_vma_no_split,
};

static void gdrpeer_vma_open(struct vm_area_struct *vma)
{
	gdrpeer_region_get(vma->vm_private_data);
}

static void gdrpeer_vma_close(struct vm_area_struct *vma)
{
	gdrpeer_region_put(vma->vm_private_data);
}

/* handle mappings hold a region reference for their lifetime */
const struct vm_operations_struct gdrpeer_handle_vm_ops = {
	.open = gdrpeer_vma_open,
	.close = gdrpeer_vma_close,
	.GDRPEER_VM_OPS_MAY_SPLIT = gdrpeer_vma_no_split,
};

/*
 * Map [offset, offset + vma size) of @r write-combined into @vma.  Used by
 * the handle mmap of /dev/gdrpeer and by dma-buf mmap; the caller keeps the
 * region alive for the life of the vma.
 */
int gdrpeer_region_mmap(struct gdrpeer_region *r, u64 offset,
			struct vm_area_struct *vma)
{
	u64 len = vma->vm_end - vma->vm_start;
	unsigned long va = vma->vm_start;
	unsigned int i;
	int ret;

	if (!(vma->vm_flags & VM_SHARED))
		return -EINVAL;
	if (offset > r->size || len > r->size - offset)
		return -EINVAL;

	gdrpeer_vm_flags_set(vma, VM_IO | VM_PFNMAP | VM_DONTEXPAND |
			     VM_DONTDUMP | VM_DONTCOPY);
	vma->vm_page_prot = pgprot_writecombine(vma->vm_page_prot);

	for (i = 0; i < r->nr_ranges && len; i++) {
		const struct gdrpeer_range *rg = &r->ranges[i];
		u64 n;

		if (offset >= rg->len) {
			offset -= rg->len;
			continue;
		}
		n = min(rg->len - offset, len);
		ret = io_remap_pfn_range(vma, va,
					 (rg->phys + offset) >> PAGE_SHIFT, n,
					 vma->vm_page_prot);
		if (ret)
			return ret;
		va += n;
		len -= n;
		offset = 0;
	}
	return len ? -EINVAL : 0;
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

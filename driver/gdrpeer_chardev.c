// SPDX-License-Identifier: GPL-2.0
/*
 * /dev/gdrpeer: the class "gdrpeer", its one device node, the ioctls of
 * uapi/gdrpeer.h, the per-open-file handle table and mmap of handles.
 *
 * Handles: the upper 32 bits are a cookie unique to the open file, the
 * lower bits an id in that file's table (xarray, allocated cyclically so a
 * freed id is not reused soon).  A handle of another file never matches
 * the cookie and fails with -ENOENT, so does a freed one.
 * The mmap offset of a handle is id << GDRPEER_MMAP_WINDOW_SHIFT.
 *
 * Access model: a file opened without write access (O_RDONLY) may look
 * (INFO, LIST_DEVICES, QUERY) but not allocate, free, export or pin: those
 * hand out writable device memory, and answer -EBADF.
 *
 * Every open file shares gdrpeer's own address space (gdrpeer_mapping(),
 * gdrpeer_region.c) instead of the device node's, so that revocation can
 * zap a region's CPU mappings whatever node or namespace they came from.
 *
 * The node is the last thing that appears at load and the first that goes
 * at unload (gdrpeer_chardev_enable/disable): no file can be opened into a
 * module whose load is still going to fail.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/cdev.h>
#include <linux/compat.h>
#include <linux/device.h>
#include <linux/dma-buf.h>
#include <linux/fs.h>
#include <linux/file.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/nospec.h>
#include <linux/overflow.h>
#include <linux/random.h>
#include <linux/slab.h>
#include <linux/uaccess.h>
#include <linux/xarray.h>

#include <gdrpeer.h>

#include "gdrpeer_compat.h"
#include "gdrpeer_core.h"
#include "exporter.h"
#include "provider.h"

/* ids are < 2^22 so that id << 40 stays below 2^62 (a valid off_t) */
#define GDRPEER_ID_MAX ((1u << (63 - GDRPEER_MMAP_WINDOW_SHIFT - 1)) - 1)
#define GDRPEER_MMAP_WINDOW (1ull << GDRPEER_MMAP_WINDOW_SHIFT)

struct gdrpeer_file {
	/* protects @handles (mutex, may sleep); see gdrpeer_core.h order */
	struct mutex lock;
	struct xarray handles;		/* id -> struct gdrpeer_region * */
	u32 next_id;			/* cursor for xa_alloc_cyclic */
	u32 cookie;			/* upper 32 bits of every handle */
};

static atomic_t gdrpeer_cookie_seq;
static dev_t gdrpeer_devt;
static struct cdev gdrpeer_cdev;
static bool gdrpeer_cdev_live;
static struct device *gdrpeer_dev;

/* ---- handle table ---------------------------------------------------- */

static u64 gdrpeer_handle(struct gdrpeer_file *gf, u32 id)
{
	return ((u64)gf->cookie << 32) | id;
}

/* Region of @handle with a reference, or NULL. */
static struct gdrpeer_region *gdrpeer_lookup(struct gdrpeer_file *gf,
					     u64 handle)
{
	struct gdrpeer_region *r;
	u32 id = (u32)handle;

	if ((u32)(handle >> 32) != gf->cookie || !id || id > GDRPEER_ID_MAX)
		return NULL;
	mutex_lock(&gf->lock);
	r = xa_load(&gf->handles, id);
	if (r)
		gdrpeer_region_get(r);
	mutex_unlock(&gf->lock);
	return r;
}

/* ---- ioctls ---------------------------------------------------------- */

static bool gdrpeer_zero(const void *p, size_t n)
{
	return !memchr_inv(p, 0, n);
}

static int gdrpeer_ioc_info(struct gdrpeer_file *gf, void *arg)
{
	struct gdrpeer_info *in = arg;
	u32 caller = in->abi_version;

	if (in->pad0 || !gdrpeer_zero(in->reserved, sizeof(in->reserved)))
		return -EINVAL;
	memset(in, 0, sizeof(*in));
	in->abi_version = GDRPEER_ABI_VERSION;
	in->caps = GDRPEER_CAP_DMABUF | GDRPEER_CAP_MMAP |
		   gdrpeer_providers_caps();
	in->num_devices = gdrpeer_device_count();
	in->page_size = PAGE_SIZE;
	in->mmap_window = GDRPEER_MMAP_WINDOW;
	/* copied back even on -EPROTO so the caller learns our version */
	if (!caller ||
	    GDRPEER_ABI_MAJOR(caller) != GDRPEER_ABI_VERSION_MAJOR)
		return -EPROTO;
	return 0;
}

/* Caps the kernel buffer; more devices than this are still counted. */
#define GDRPEER_LIST_MAX 256

static int gdrpeer_ioc_list(struct gdrpeer_file *gf, void *arg)
{
	struct gdrpeer_list_devices *ld = arg;
	struct gdrpeer_device_info *buf = NULL;
	u32 n, total;

	if (ld->pad0 || !gdrpeer_zero(ld->reserved, sizeof(ld->reserved)))
		return -EINVAL;
	if (ld->entry_size != sizeof(struct gdrpeer_device_info))
		return -EINVAL;
	n = min_t(u32, ld->count, GDRPEER_LIST_MAX);
	if (n) {
		buf = kcalloc(n, sizeof(*buf), GFP_KERNEL);
		if (!buf)
			return -ENOMEM;
	}
	total = gdrpeer_device_list(buf, n);
	n = min(n, total);
	/* no lock is held here: a fault on the user array is fine */
	if (n && copy_to_user(u64_to_user_ptr(ld->devices_ptr), buf,
			      (size_t)n * sizeof(*buf))) {
		kfree(buf);
		return -EFAULT;
	}
	kfree(buf);
	ld->total = total;
	return 0;
}

static int gdrpeer_ioc_alloc(struct gdrpeer_file *gf, void *arg)
{
	struct gdrpeer_alloc *a = arg;
	struct gdrpeer_region *r;
	u32 id;
	int ret;

	/* handle, mmap_offset and bar_offset are outputs: ignored */
	if (!gdrpeer_zero(a->reserved, sizeof(a->reserved)))
		return -EINVAL;
	if (a->flags)
		return -EINVAL;
	if (!a->size || !PAGE_ALIGNED(a->size))
		return -EINVAL;
	ret = gdrpeer_region_create(a->device, a->size, a->flags, &r);
	if (ret)
		return ret;
	/*
	 * Read what the caller gets back while the reference is still ours:
	 * once the handle is in the table another thread sharing the file
	 * can FREE it, and with it the region.
	 */
	a->bar_offset = r->dev_offset;

	mutex_lock(&gf->lock);
	ret = xa_alloc_cyclic(&gf->handles, &id, r,
			      XA_LIMIT(1, GDRPEER_ID_MAX), &gf->next_id,
			      GFP_KERNEL);
	mutex_unlock(&gf->lock);
	if (ret < 0) {
		gdrpeer_region_put(r);
		return ret == -EBUSY ? -ENOSPC : ret;
	}
	/* from here on @r may be gone: only @id is used */
	a->handle = gdrpeer_handle(gf, id);
	a->mmap_offset = (u64)id << GDRPEER_MMAP_WINDOW_SHIFT;
	return 0;
}

static int gdrpeer_ioc_free(struct gdrpeer_file *gf, void *arg)
{
	struct gdrpeer_free *f = arg;
	struct gdrpeer_region *r = NULL;
	u32 id = (u32)f->handle;

	if (!gdrpeer_zero(f->reserved, sizeof(f->reserved)))
		return -EINVAL;
	if ((u32)(f->handle >> 32) != gf->cookie || !id || id > GDRPEER_ID_MAX)
		return -ENOENT;
	mutex_lock(&gf->lock);
	r = xa_erase(&gf->handles, id);
	mutex_unlock(&gf->lock);
	if (!r)
		return -ENOENT;
	/* dma-bufs and mmaps keep their own references */
	gdrpeer_region_put(r);
	return 0;
}

static int gdrpeer_ioc_query(struct gdrpeer_file *gf, void *arg)
{
	struct gdrpeer_query *q = arg;
	struct gdrpeer_region *r;
	u64 handle = q->handle;

	/* everything but handle and reserved is output: ignored */
	if (!gdrpeer_zero(q->reserved, sizeof(q->reserved)))
		return -EINVAL;
	r = gdrpeer_lookup(gf, handle);
	if (!r)
		return -ENOENT;
	if (gdrpeer_region_revoked(r)) {
		gdrpeer_region_put(r);
		return -ENODEV;
	}
	memset(q, 0, sizeof(*q));
	q->handle = handle;
	q->size = r->size;
	q->mmap_offset = (u64)(u32)handle << GDRPEER_MMAP_WINDOW_SHIFT;
	q->bar_offset = r->dev_offset;
	q->device = r->gdev->index;
	q->flags = r->flags;
	q->exports = (u32)atomic_read(&r->exports);
	gdrpeer_region_put(r);
	return 0;
}

/* Install @dmabuf as a new fd after copying @e (with e->fd) back. */
static int gdrpeer_install_dmabuf(struct dma_buf *dmabuf, void *e,
				  size_t size, __s32 *fd_field,
				  void __user *uarg)
{
	int fd = get_unused_fd_flags(O_CLOEXEC);

	if (fd < 0) {
		dma_buf_put(dmabuf);
		return fd;
	}
	*fd_field = fd;
	if (copy_to_user(uarg, e, size)) {
		put_unused_fd(fd);
		dma_buf_put(dmabuf);
		return -EFAULT;
	}
	fd_install(fd, dmabuf->file);
	return 0;
}

/*
 * Export copies its result to userspace itself: the fd is installed only
 * after the copy succeeded, so a bad pointer leaks no fd.
 */
static int gdrpeer_ioc_export(struct gdrpeer_file *gf, void *arg,
			      void __user *uarg)
{
	struct gdrpeer_export *e = arg;
	struct gdrpeer_region *r;
	struct dma_buf *dmabuf;
	u64 end;
	int ret;

	if (e->flags || !gdrpeer_zero(e->reserved, sizeof(e->reserved)))
		return -EINVAL;
	r = gdrpeer_lookup(gf, e->handle);
	if (!r)
		return -ENOENT;
	if (gdrpeer_region_revoked(r)) {
		ret = -ENODEV;
		goto out_put;
	}
	if (check_add_overflow(e->offset, e->length, &end)) {
		ret = -EOVERFLOW;
		goto out_put;
	}
	if (!e->length || !PAGE_ALIGNED(e->offset) ||
	    !PAGE_ALIGNED(e->length) || end > r->size) {
		ret = -EINVAL;
		goto out_put;
	}
	dmabuf = gdrpeer_dmabuf_export(r, e->offset, e->length);
	if (IS_ERR(dmabuf)) {
		ret = PTR_ERR(dmabuf);
		goto out_put;
	}
	ret = gdrpeer_install_dmabuf(dmabuf, e, sizeof(*e), &e->fd, uarg);
out_put:
	gdrpeer_region_put(r);
	return ret;
}

/* Pins through the provider that serves it; copies back like export. */
static int gdrpeer_ioc_export_va(struct gdrpeer_file *gf, void *arg,
				 void __user *uarg)
{
	struct gdrpeer_export_va *e = arg;
	struct dma_buf *dmabuf;

	if (!gdrpeer_zero(e->reserved, sizeof(e->reserved)))
		return -EINVAL;
	e->fd = -1;
	e->pin_mode = 0;
	e->page_size = 0;
	e->pages = 0;
	dmabuf = gdrpeer_providers_export_va(e);
	if (IS_ERR(dmabuf))
		return PTR_ERR(dmabuf);
	return gdrpeer_install_dmabuf(dmabuf, e, sizeof(*e), &e->fd, uarg);
}

struct gdrpeer_ioctl_desc {
	unsigned int cmd;
	int (*fn)(struct gdrpeer_file *gf, void *arg);
	/* copies back itself (export) */
	int (*fn_user)(struct gdrpeer_file *gf, void *arg, void __user *uarg);
	bool copy_on_error;
	bool needs_write;	/* hands out or changes device memory */
};

#define GDRPEER_IOCTL_NR(c) _IOC_NR(GDRPEER_IOCTL_##c)
static const struct gdrpeer_ioctl_desc gdrpeer_ioctls[] = {
	[GDRPEER_IOCTL_NR(INFO)] = { GDRPEER_IOCTL_INFO, gdrpeer_ioc_info,
				     NULL, true },
	[GDRPEER_IOCTL_NR(LIST_DEVICES)] = { GDRPEER_IOCTL_LIST_DEVICES,
					     gdrpeer_ioc_list },
	[GDRPEER_IOCTL_NR(ALLOC)] = { GDRPEER_IOCTL_ALLOC, gdrpeer_ioc_alloc,
				      .needs_write = true },
	[GDRPEER_IOCTL_NR(FREE)] = { GDRPEER_IOCTL_FREE, gdrpeer_ioc_free,
				     .needs_write = true },
	[GDRPEER_IOCTL_NR(EXPORT)] = { GDRPEER_IOCTL_EXPORT, NULL,
				       gdrpeer_ioc_export,
				       .needs_write = true },
	[GDRPEER_IOCTL_NR(QUERY)] = { GDRPEER_IOCTL_QUERY, gdrpeer_ioc_query },
	[GDRPEER_IOCTL_NR(EXPORT_VA)] = { GDRPEER_IOCTL_EXPORT_VA, NULL,
					  gdrpeer_ioc_export_va,
					  .needs_write = true },
};

/* Large enough for every argument struct. */
union gdrpeer_ioctl_arg {
	struct gdrpeer_info info;
	struct gdrpeer_list_devices list;
	struct gdrpeer_alloc alloc;
	struct gdrpeer_free free;
	struct gdrpeer_export export;
	struct gdrpeer_query query;
	struct gdrpeer_export_va export_va;
};

static long gdrpeer_ioctl(struct file *filp, unsigned int cmd,
			  unsigned long arg)
{
	struct gdrpeer_file *gf = filp->private_data;
	void __user *uarg = (void __user *)arg;
	const struct gdrpeer_ioctl_desc *d;
	union gdrpeer_ioctl_arg karg;
	unsigned int nr = _IOC_NR(cmd);
	size_t size;
	int ret;

	if (_IOC_TYPE(cmd) != GDRPEER_IOCTL_MAGIC ||
	    nr >= ARRAY_SIZE(gdrpeer_ioctls))
		return -ENOTTY;
	d = &gdrpeer_ioctls[array_index_nospec(nr,
					       ARRAY_SIZE(gdrpeer_ioctls))];
	/* a known number with another size or direction: wrong struct */
	if (cmd != d->cmd)
		return -EINVAL;
	if (d->needs_write && !(filp->f_mode & FMODE_WRITE))
		return -EBADF;
	size = _IOC_SIZE(cmd);
	if (WARN_ON_ONCE(size > sizeof(karg)))
		return -EINVAL;
	if (copy_from_user(&karg, uarg, size))
		return -EFAULT;
	if (d->fn_user)
		return d->fn_user(gf, &karg, uarg);
	ret = d->fn(gf, &karg);
	if ((ret == 0 || d->copy_on_error) && copy_to_user(uarg, &karg, size))
		return -EFAULT;
	return ret;
}

/* ---- mmap of a handle ------------------------------------------------- */

static int gdrpeer_mmap(struct file *filp, struct vm_area_struct *vma)
{
	struct gdrpeer_file *gf = filp->private_data;
	unsigned long window_pages = GDRPEER_MMAP_WINDOW >> PAGE_SHIFT;
	u64 id = vma->vm_pgoff / window_pages;
	u64 off = (u64)(vma->vm_pgoff % window_pages) << PAGE_SHIFT;
	struct gdrpeer_region *r;
	int ret;

	if (!id || id > GDRPEER_ID_MAX)
		return -ENOENT;
	r = gdrpeer_lookup(gf, gdrpeer_handle(gf, (u32)id));
	if (!r)
		return -ENOENT;
	/* on success the lookup reference belongs to the vma */
	ret = gdrpeer_region_mmap_handle(r, off, vma);
	if (ret)
		gdrpeer_region_put(r);
	return ret;
}

/* ---- open / release ------------------------------------------------- */

static int gdrpeer_open(struct inode *inode, struct file *filp)
{
	struct gdrpeer_file *gf;

	gf = kzalloc(sizeof(*gf), GFP_KERNEL_ACCOUNT);
	if (!gf)
		return -ENOMEM;
	mutex_init(&gf->lock);
	xa_init_flags(&gf->handles, XA_FLAGS_ALLOC1);
	do {
		gf->cookie = (u32)atomic_inc_return(&gdrpeer_cookie_seq);
	} while (!gf->cookie);
	filp->private_data = gf;
	filp->f_mapping = gdrpeer_mapping();
	return nonseekable_open(inode, filp);
}

static int gdrpeer_release(struct inode *inode, struct file *filp)
{
	struct gdrpeer_file *gf = filp->private_data;
	struct gdrpeer_region *r;
	unsigned long id;

	/* last reference to the file: nobody else uses the table */
	xa_for_each(&gf->handles, id, r)
		gdrpeer_region_put(r);
	xa_destroy(&gf->handles);
	mutex_destroy(&gf->lock);
	kfree(gf);
	return 0;
}

static const struct file_operations gdrpeer_fops = {
	.owner = THIS_MODULE,
	.open = gdrpeer_open,
	.release = gdrpeer_release,
	.unlocked_ioctl = gdrpeer_ioctl,
	.compat_ioctl = compat_ptr_ioctl,
	.mmap = gdrpeer_mmap,
};

/* ---- class and node ------------------------------------------------ */

static char *gdrpeer_devnode(GDRPEER_DEVNODE_CONST struct device *dev,
			     umode_t *mode, kuid_t *uid, kgid_t *gid)
{
	if (mode)
		*mode = (umode_t)(gdrpeer_dev_mode & 0777);
	if (gid)
		*gid = make_kgid(&init_user_ns, gdrpeer_dev_gid);
	return NULL;
}

static const struct device_type gdrpeer_devtype = {
	.name = "gdrpeer",
	.devnode = gdrpeer_devnode,
};

static struct class gdrpeer_class = {
	.name = "gdrpeer",
};

static void gdrpeer_dev_release(struct device *dev)
{
	kfree(dev);
}

/**
 * gdrpeer_chardev_init() - the class, its device (not openable yet), sysfs
 *
 * Context: Module load, after gdrpeer_mapping_init().  Sleeps.
 * Return: 0 or a negative errno (nothing is left behind).  On success the
 * class device has the providers' attributes and the registry's devices/,
 * and the node exists but cannot be opened (-ENXIO) until
 * gdrpeer_chardev_enable().
 */
int gdrpeer_chardev_init(void)
{
	struct device *dev;
	int ret;

	atomic_set(&gdrpeer_cookie_seq, (int)get_random_u32());
	ret = alloc_chrdev_region(&gdrpeer_devt, 0, 1, "gdrpeer");
	if (ret)
		return ret;
	cdev_init(&gdrpeer_cdev, &gdrpeer_fops);
	gdrpeer_cdev.owner = THIS_MODULE;
	ret = class_register(&gdrpeer_class);
	if (ret)
		goto err_region;

	dev = kzalloc(sizeof(*dev), GFP_KERNEL);
	if (!dev) {
		ret = -ENOMEM;
		goto err_class;
	}
	device_initialize(dev);
	dev->devt = gdrpeer_devt;
	dev->class = &gdrpeer_class;
	dev->type = &gdrpeer_devtype;
	/* providers' own files (pcibar_bind ...), there from the start */
	dev->groups = gdrpeer_providers_node_groups();
	dev->release = gdrpeer_dev_release;
	ret = dev_set_name(dev, "gdrpeer");
	if (ret)
		goto err_dev;
	ret = device_add(dev);
	if (ret)
		goto err_dev;
	ret = gdrpeer_devices_init(&dev->kobj);
	if (ret)
		goto err_del;
	gdrpeer_dev = dev;
	return 0;

err_del:
	device_del(dev);
err_dev:
	put_device(dev);
err_class:
	class_unregister(&gdrpeer_class);
err_region:
	unregister_chrdev_region(gdrpeer_devt, 1);
	return ret;
}

/**
 * gdrpeer_chardev_enable() - /dev/gdrpeer can be opened from here on
 *
 * Context: The last step of a load.  Sleeps.
 * Return: 0 or a negative errno.
 */
int gdrpeer_chardev_enable(void)
{
	int ret = cdev_add(&gdrpeer_cdev, gdrpeer_devt, 1);

	gdrpeer_cdev_live = !ret;
	return ret;
}

/**
 * gdrpeer_chardev_disable() - no new open of /dev/gdrpeer
 *
 * Context: The first step of an unload (open files hold the module, so
 * none is left then) or of a failed load's undo.  Sleeps.
 */
void gdrpeer_chardev_disable(void)
{
	if (gdrpeer_cdev_live)
		cdev_del(&gdrpeer_cdev);
	gdrpeer_cdev_live = false;
}

/**
 * gdrpeer_sysfs_dir() - the class device's directory
 *
 * Context: Any context, between gdrpeer_chardev_init() and
 * gdrpeer_chardev_exit().
 * Return: /sys/class/gdrpeer/gdrpeer, where the registry puts providers/.
 */
struct kobject *gdrpeer_sysfs_dir(void)
{
	return &gdrpeer_dev->kobj;
}

/**
 * gdrpeer_chardev_exit() - undo gdrpeer_chardev_init()
 *
 * Context: Module unload (or a failed load), after the providers' exit.
 * Sleeps.
 */
void gdrpeer_chardev_exit(void)
{
	gdrpeer_chardev_disable();
	gdrpeer_devices_exit();
	device_del(gdrpeer_dev);
	put_device(gdrpeer_dev);
	gdrpeer_dev = NULL;
	class_unregister(&gdrpeer_class);
	unregister_chrdev_region(gdrpeer_devt, 1);
}

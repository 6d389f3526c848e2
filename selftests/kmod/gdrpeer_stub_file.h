/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What an open file of a test-only stand-in device holds: a table of the
 * objects it made through its ioctls (the edu HCA's imports, the peer
 * host's registrations), by id from 1, each entry holding one reference
 * of its object, all put when the file is released.  The xarray's lock
 * is held only to look an id up and take a reference.  Not gdrpeer ABI.
 */
#ifndef GDRPEER_STUB_FILE_H
#define GDRPEER_STUB_FILE_H

#include <linux/fs.h>
#include <linux/kref.h>
#include <linux/slab.h>
#include <linux/stddef.h>
#include <linux/xarray.h>

struct stub_file {
	struct xarray objs;	/* id -> object (the file's reference) */
	void *dev;		/* the stand-in the file was opened on */
	void (*put)(void *obj);	/* drops the file's reference of an object */
};

/*
 * open(): @filp->private_data becomes the (empty) table of @dev, whose
 * objects @put takes back when the file is released.
 */
static inline int stub_file_open(struct file *filp, void *dev,
				 void (*put)(void *obj))
{
	struct stub_file *f = kzalloc(sizeof(*f), GFP_KERNEL);

	if (!f)
		return -ENOMEM;
	f->dev = dev;
	f->put = put;
	xa_init_flags(&f->objs, XA_FLAGS_ALLOC1);
	filp->private_data = f;
	return 0;
}

/*
 * The file_operations' release: every object the file still holds is put
 * (no ioctl of the file can be running now), then the table.
 */
static inline int stub_file_release(struct inode *inode, struct file *filp)
{
	struct stub_file *f = filp->private_data;
	unsigned long id;
	void *obj;

	xa_for_each(&f->objs, id, obj) {
		xa_erase(&f->objs, id);
		f->put(obj);
	}
	xa_destroy(&f->objs);
	kfree(f);
	return 0;
}

/*
 * The object of @f with id @id, its struct kref @ref_offset bytes in, with a
 * reference taken (an ioctl of another thread may drop the file's own
 * meanwhile); NULL when there is none.
 */
static inline void *stub_file_get(struct stub_file *f, u32 id,
				  size_t ref_offset)
{
	void *obj;

	xa_lock(&f->objs);
	obj = xa_load(&f->objs, id);
	if (obj)
		kref_get((struct kref *)((char *)obj + ref_offset));
	xa_unlock(&f->objs);
	return obj;
}

#endif /* GDRPEER_STUB_FILE_H */

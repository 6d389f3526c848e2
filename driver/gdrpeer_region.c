// SPDX-License-Identifier: GPL-2.0
/*
 * gdrpeer regions: an allocation of device memory and everything about its
 * life: creation (with the clearing of what the previous user left),
 * reference counting, revocation, CPU mmap of a handle and its faults,
 * and gdrpeer's own address space in which those mappings live.
 *
 * The region code calls down only: into its device (gdrpeer_device.c) for
 * the memory and into the exporters through gdrpeer_revokers[]
 * (exporter.h) on revocation.  The char device, the exporters and the
 * providers call into it.
 *
 * Revocation (gdrpeer_region_revoke) takes memory_lock for writing to set
 * @revoked, drops it, zaps the handle mappings, then runs each exporter's
 * revocation in list order with no lock of ours held.  The dma-buf one
 * takes dmabuf_revoke_lock, under it exports_lock (dropped before each
 * dma-buf is revoked), then the reservation lock; while it waits for
 * importers it holds only dmabuf_revoke_lock, which no importer, fault or
 * ioctl path takes (exporter_dmabuf.c).  The whole lock order is in
 * gdrpeer_core.h.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/fs.h>
#include <linux/io.h>
#include <linux/mm.h>
#include <linux/mount.h>
#include <linux/pseudo_fs.h>
#include <linux/sched.h>
#include <linux/sizes.h>
#include <linux/slab.h>

#include "gdrpeer_compat.h"
#include "gdrpeer_core.h"
#include "exporter.h"

/* ---- gdrpeer's own address space ---------------------------------------- */

/*
 * Every open /dev/gdrpeer file shares this address space (an inode of a
 * small pseudo filesystem, as DRM and VFIO do) instead of the device
 * node's, so that a region's CPU mappings, placed at the region's own
 * offset there (gdrpeer_device.c, mmap windows), can be zapped on
 * revocation whatever node or namespace they came from.
 */
#define GDRPEER_FS_MAGIC 0x67647270	/* "gdrp" */

static struct vfsmount *gdrpeer_mnt;
static struct inode *gdrpeer_inode;	/* its i_mapping holds every mmap */

static int gdrpeer_fs_init_fs_context(struct fs_context *fc)
{
	return init_pseudo(fc, GDRPEER_FS_MAGIC) ? 0 : -ENOMEM;
}

/*
 * No .owner: the mount is ours for the module's whole life, and a module
 * reference from it would keep the module from ever unloading.
 */
static struct file_system_type gdrpeer_fs_type = {
	.name = "gdrpeer",
	.init_fs_context = gdrpeer_fs_init_fs_context,
	.kill_sb = kill_anon_super,
};

/**
 * gdrpeer_mapping() - the address space of every region's CPU mappings
 *
 * Context: Any context, between gdrpeer_mapping_init() and
 * gdrpeer_mapping_exit().
 * Return: the address space that each open /dev/gdrpeer file uses as its
 * f_mapping.
 */
struct address_space *gdrpeer_mapping(void)
{
	return gdrpeer_inode->i_mapping;
}

/**
 * gdrpeer_mapping_init() - mount the pseudo filesystem, make its inode
 *
 * Context: Module load, before anything can map a region.  Sleeps.
 * Return: 0 or a negative errno.
 */
int gdrpeer_mapping_init(void)
{
	gdrpeer_mnt = kern_mount(&gdrpeer_fs_type);
	if (IS_ERR(gdrpeer_mnt))
		return PTR_ERR(gdrpeer_mnt);
	gdrpeer_inode = alloc_anon_inode(gdrpeer_mnt->mnt_sb);
	if (IS_ERR(gdrpeer_inode)) {
		kern_unmount(gdrpeer_mnt);
		return PTR_ERR(gdrpeer_inode);
	}
	return 0;
}

/**
 * gdrpeer_mapping_exit() - undo gdrpeer_mapping_init()
 *
 * Context: Module unload (or a failed load), once no file and no mapping
 * is left.  Sleeps.
 */
void gdrpeer_mapping_exit(void)
{
	iput(gdrpeer_inode);
	kern_unmount(gdrpeer_mnt);
}

/* ---- lifetime --------------------------------------------------------- */

/**
 * gdrpeer_region_init() - common initialisation of a region
 * @r: the region (zeroed by its allocator)
 * @size: bytes of memory it stands for
 * @revocable: how its memory may disappear under its users
 *
 * For regions of the char device's ALLOC and of providers that build
 * their own (nvidia pins).  One reference, owned by the caller.
 *
 * Context: Any context; takes no lock.
 */
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
	r->mmap_pgoff = 0;	/* set by gdrpeer_device_add_region (handles) */
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

/**
 * gdrpeer_region_create() - a new, cleared region of a registered device
 * @index: the device's index (devices/<index>)
 * @size: bytes, page aligned, not 0
 * @flags: GDRPEER alloc flags (none yet)
 * @out: the region, with one reference, on success
 *
 * Context: Process context.  Sleeps; takes gdrpeer_devices_lock and then
 * gdrpeer_device.lock (one after the other), then @memory_lock of the new
 * region; the caller holds no lock of ours.
 * Return: 0, -ENODEV (no such device, or it went meanwhile), -E2BIG
 * (larger than the device), -ENOMEM or the provider's alloc error.
 */
int gdrpeer_region_create(u32 index, u64 size, u32 flags,
			  struct gdrpeer_region **out)
{
	struct gdrpeer_device *gdev;
	struct gdrpeer_region *r;
	int ret;

	gdev = gdrpeer_device_get(index);
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

	ret = gdrpeer_device_add_region(gdev, r);
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
	gdrpeer_device_put(gdev);
	return ret;
}

/**
 * gdrpeer_region_get() - take a reference to a region
 * @r: a region the caller holds a reference to
 *
 * Context: Any context.
 */
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
	gdrpeer_device_remove_region(gdev, r);
	atomic64_sub(r->size, &gdev->cnt.alloc_bytes);
	atomic64_dec(&gdev->cnt.allocations);
	if (r->ranges != &r->range0)
		kfree(r->ranges);
	mutex_destroy(&r->exports_lock);
	mutex_destroy(&r->dmabuf_revoke_lock);
	kfree(r);
	gdrpeer_device_put(gdev);
}

/**
 * gdrpeer_region_put() - drop a reference to a region
 * @r: the region
 *
 * The last reference gives the memory back to its provider and frees @r.
 *
 * Context: Process context.  May sleep: the release takes
 * gdrpeer_device.lock (or runs the provider's release), so the caller
 * holds neither that lock nor one taken under it.
 */
void gdrpeer_region_put(struct gdrpeer_region *r)
{
	might_sleep();
	kref_put(&r->ref, gdrpeer_region_release);
}

/**
 * gdrpeer_region_revoked() - has the region's memory gone?
 * @r: a region the caller holds a reference to
 *
 * Context: Process context.  Sleeps (reads @memory_lock): not under
 * @memory_lock or a lock that revocation takes after it.
 * Return: true once gdrpeer_region_revoke() has begun for @r.
 */
bool gdrpeer_region_revoked(struct gdrpeer_region *r)
{
	bool revoked;

	down_read(&r->memory_lock);
	revoked = r->revoked;
	up_read(&r->memory_lock);
	return revoked;
}

/**
 * gdrpeer_region_revoke() - stop every use of a region's memory
 * @r: the region
 *
 * The memory of @r is going away (see gdrpeer_core.h): CPU faults after
 * this get SIGBUS, the handle's CPU mappings are zapped, and each exporter
 * of gdrpeer_revokers[] revokes what it handed out, in list order.
 * Returns when no CPU or importer mapping of the memory is left.
 * Idempotent.
 *
 * Context: Process context.  Sleeps, possibly for long (importers that
 * hold mappings); the caller holds a reference to @r and no lock of ours.
 */
void gdrpeer_region_revoke(struct gdrpeer_region *r)
{
	unsigned int i;
	bool first;

	might_sleep();
	down_write(&r->memory_lock);
	first = !r->revoked;
	r->revoked = true;
	up_write(&r->memory_lock);
	if (first)
		atomic64_inc(&r->cnt->revoked);

	/*
	 * handle mappings: faults after this see @revoked and get SIGBUS.
	 * The region's pages of its device's window, whose byte offsets fit
	 * a loff_t (gdrpeer_device.c).  (unmap_mapping_pages() would spare
	 * the conversion but is not exported on 5.10.)
	 */
	if (r->mmap_pgoff)
		unmap_mapping_range(gdrpeer_mapping(),
				    (loff_t)r->mmap_pgoff << PAGE_SHIFT,
				    (loff_t)r->size, 1);
	for (i = 0; i < ARRAY_SIZE(gdrpeer_revokers); i++)
		gdrpeer_revokers[i](r);
}

/* ---- CPU access ---------------------------------------------------------- */

/**
 * gdrpeer_vma_no_split() - refuse to split a CPU mapping of a region
 * @vma: the mapping
 * @addr: where it would be split
 *
 * A mapping is undone as a whole: x86 PAT tracks the memory type of a
 * PFN mapping per vma, and unmapping part of one ("freeing invalid
 * memtype") would leave the rest of the reservation behind.
 *
 * Context: vm_operations_struct.may_split (split before 5.11), under
 * mmap_lock.
 * Return: -EINVAL, always.
 */
int gdrpeer_vma_no_split(struct vm_area_struct *vma, unsigned long addr)
{
	return -EINVAL;
}

/**
 * gdrpeer_region_mmap_prepare() - flags of a CPU mapping of a region
 * @vma: a new mapping whose size the caller has checked
 *
 * CPU mappings (handle mmaps and dma-buf mmaps) are filled one page per
 * fault, write-combined, so that revocation can zap them and a fault
 * after it gets SIGBUS.
 *
 * Context: An ->mmap handler, under mmap_lock.
 */
void gdrpeer_region_mmap_prepare(struct vm_area_struct *vma)
{
	gdrpeer_vm_flags_set(vma, VM_IO | VM_PFNMAP | VM_DONTEXPAND |
			     VM_DONTDUMP | VM_DONTCOPY);
	vma->vm_page_prot = pgprot_writecombine(vma->vm_page_prot);
}

/**
 * gdrpeer_region_fault() - insert the page at an offset of a region
 * @r: the region the faulting mapping refers to
 * @offset: byte offset in @r
 * @vmf: the fault
 *
 * Context: A vm_operations_struct.fault handler, under mmap_lock; reads
 * @memory_lock (which revocation writes before it zaps).
 * Return: the result of inserting the page, or VM_FAULT_SIGBUS when @r is
 * revoked or @offset lies outside it.
 */
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

/**
 * gdrpeer_region_mmap_handle() - map part of a region through /dev/gdrpeer
 * @r: the region; on success the vma owns the caller's reference
 * @offset: byte offset in @r of the mapping's first page
 * @vma: the new mapping; its size is the length
 *
 * The vma's page offset is moved into the region's own pages of
 * gdrpeer's address space, where revocation finds it.
 *
 * Context: The char device's ->mmap, under mmap_lock; reads @memory_lock.
 * Return: 0, -EINVAL (not shared, or not inside @r) or -ENODEV (revoked).
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

/**
 * gdrpeer_region_from_user() - the region behind a user address range
 * @mm: the address space
 * @addr: first byte
 * @len: bytes
 * @offset: the byte offset of @addr in the region, when found
 *
 * Context: The caller holds @mm's mmap_lock (at least for reading).
 * Return: the region, with a reference, when [@addr, @addr + @len) lies
 * inside one handle mapping; NULL otherwise.
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

/**
 * gdrpeer_region_phys() - CPU physical address of a byte of a region
 * @r: the region
 * @offset: byte offset in @r
 * @phys: the address, on success
 *
 * Context: Any context; the caller holds a reference to @r (its ranges
 * stay until the release).
 * Return: 0, or -EINVAL beyond the region's end.
 */
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

// SPDX-License-Identifier: GPL-2.0
/*
 * dma-buf exporter: a range of a region as a dma-buf that peer-to-peer
 * capable importers (RDMA NICs through ib_umem_dmabuf) can map.
 *
 * - attach refuses importers that cannot take memory without struct pages
 *   (attach->peer2peer false).
 * - map_dma_buf maps every physically contiguous range with
 *   dma_map_resource() on the importer's device, so the address goes
 *   through that device's IOMMU domain, in entries of at most the
 *   importer's dma_get_max_seg_size(), each a multiple of PAGE_SIZE.
 * - The buffer never moves, so pin/unpin only count: they exist so that
 *   pinned importers (ib_umem_dmabuf_get_pinned) work and so that the core
 *   treats us as a dynamic exporter (map/unmap are then called with the
 *   reservation lock held by the caller; we never take it ourselves).
 * - The dma-buf holds a region reference until its release.
 * - Regions with ops (nvidia pins) are mapped by their provider for each
 *   importer, and can be revoked (gdrpeer_dmabuf_revoke) when the memory
 *   is freed underneath: importers are told through move_notify /
 *   invalidate_mappings, CPU mappings (built at fault time for exactly
 *   this) are zapped, and attach, map and mmap fail with -ENODEV after.
 * - vmap gives kernel CPU access (importers that copy with the CPU, such
 *   as the test bed's soft-RoCE): the range ioremap'ed write-combined,
 *   handed out as I/O memory, at most one mapping per dma-buf (the core
 *   shares it between vmap users), counted in the "vmaps" gauge.
 *   Contract: an importer that holds a vmap must hold a dynamic
 *   attachment, and its move_notify / invalidate_mappings must stop every
 *   access and dma_buf_vunmap() before returning (the reservation lock is
 *   held there, as dma_buf_vunmap needs since 6.2); revoke checks that the
 *   mapping is gone and says so in the kernel log if an importer kept it.
 *   vmap of revoked memory is refused with -ENODEV and a log line.
 *
 * Lock order (outermost first), all may sleep:
 *   provider's pin lock (provider_nvidia.c, held while it revokes)
 *   -> gdrpeer_dmabuf.lock (@revoked)
 *   -> dma-buf reservation lock -> importer's locks (move_notify)
 *   mmap_lock (mmap, fault) -> gdrpeer_dmabuf.lock
 * map/unmap run under the reservation lock and take none of ours; so do
 * vmap/vunmap (the reservation lock since 6.2, the dma-buf's own lock
 * before), which read @revoked with READ_ONCE like map does.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": dmabuf: " fmt

#include <linux/dma-buf.h>
#include <linux/dma-mapping.h>
#include <linux/dma-resv.h>
#include <linux/mm.h>
#include <linux/fcntl.h>
#include <linux/io.h>
#include <linux/module.h>
#include <linux/scatterlist.h>
#include <linux/slab.h>

#include "gdrpeer_compat.h"
#include "exporter.h"
#include "gdrpeer_core.h"

GDRPEER_IMPORT_DMA_BUF_NS()

struct gdrpeer_dmabuf {
	struct gdrpeer_region *region;	/* one reference */
	u64 offset;			/* into the region */
	u64 length;
	atomic_t pins;
	struct mutex lock;		/* protects @revoked; see order above */
	bool revoked;			/* memory gone: no new access */
	void __iomem *vaddr;		/* the vmap, NULL when none; set and
					 * cleared by vmap/vunmap, which the
					 * dma-buf core serializes */
};

static struct gdrpeer_counters *dmabuf_cnt(struct dma_buf *dmabuf)
{
	struct gdrpeer_dmabuf *gb = dmabuf->priv;

	return gb->region->cnt;
}

static bool gdrpeer_dmabuf_revoked(struct gdrpeer_dmabuf *gb)
{
	bool revoked;

	mutex_lock(&gb->lock);
	revoked = gb->revoked;
	mutex_unlock(&gb->lock);
	return revoked;
}

static int gdrpeer_dmabuf_attach(struct dma_buf *dmabuf,
				 struct dma_buf_attachment *attach)
{
	struct gdrpeer_dmabuf *gb = dmabuf->priv;
	struct gdrpeer_region *r = gb->region;
	int ret;

	if (!attach->peer2peer) {
		dev_dbg(attach->dev,
			"gdrpeer: importer is not peer2peer capable\n");
		return -EOPNOTSUPP;
	}
	if (r->ops) {
		if (gdrpeer_dmabuf_revoked(gb))
			return -ENODEV;
		ret = r->ops->attach(r, attach);
		if (ret)
			return ret;
	}
	atomic64_inc(&dmabuf_cnt(dmabuf)->attachments);
	return 0;
}

static void gdrpeer_dmabuf_detach(struct dma_buf *dmabuf,
				  struct dma_buf_attachment *attach)
{
	struct gdrpeer_dmabuf *gb = dmabuf->priv;

	if (gb->region->ops)
		gb->region->ops->detach(gb->region, attach);
	atomic64_dec(&dmabuf_cnt(dmabuf)->attachments);
}

static int gdrpeer_dmabuf_pin(struct dma_buf_attachment *attach)
{
	struct gdrpeer_dmabuf *gb = attach->dmabuf->priv;

	atomic_inc(&gb->pins);
	return 0;
}

static void gdrpeer_dmabuf_unpin(struct dma_buf_attachment *attach)
{
	struct gdrpeer_dmabuf *gb = attach->dmabuf->priv;

	WARN_ON(atomic_dec_return(&gb->pins) < 0);
}

/* Longest sg entry for @dev: its max segment, page aligned, fits in u32. */
static u64 gdrpeer_max_seg(struct device *dev)
{
	u64 seg = min_t(u64, dma_get_max_seg_size(dev), UINT_MAX);

	seg &= PAGE_MASK;
	return seg ? seg : PAGE_SIZE;
}

/*
 * Calls @fn for each (phys, len) piece of [gb->offset, +gb->length),
 * pieces split at range ends and at @max_seg.  Stops on error.
 */
static int gdrpeer_for_each_piece(struct gdrpeer_dmabuf *gb, u64 max_seg,
				  int (*fn)(void *ctx, phys_addr_t phys,
					    u64 len),
				  void *ctx)
{
	const struct gdrpeer_region *r = gb->region;
	u64 skip = gb->offset, left = gb->length;
	unsigned int i;
	int ret;

	for (i = 0; i < r->nr_ranges && left; i++) {
		const struct gdrpeer_range *rg = &r->ranges[i];
		u64 pos, end;

		if (skip >= rg->len) {
			skip -= rg->len;
			continue;
		}
		pos = skip;
		end = min(rg->len, skip + left);
		skip = 0;
		while (pos < end) {
			u64 n = min(end - pos, max_seg);

			ret = fn(ctx, rg->phys + pos, n);
			if (ret)
				return ret;
			pos += n;
			left -= n;
		}
	}
	return 0;
}

static int gdrpeer_count_piece(void *ctx, phys_addr_t phys, u64 len)
{
	(*(unsigned int *)ctx)++;
	return 0;
}

struct gdrpeer_map_ctx {
	struct device *dev;
	enum dma_data_direction dir;
	struct scatterlist *sg;
	unsigned int mapped;
};

static int gdrpeer_map_piece(void *ctx, phys_addr_t phys, u64 len)
{
	struct gdrpeer_map_ctx *m = ctx;
	dma_addr_t addr;

	addr = dma_map_resource(m->dev, phys, len, m->dir,
				DMA_ATTR_SKIP_CPU_SYNC);
	if (dma_mapping_error(m->dev, addr))
		return -EIO;
	/* no struct page: importers must only use the DMA fields */
	sg_set_page(m->sg, NULL, (unsigned int)len, 0);
	sg_dma_address(m->sg) = addr;
	sg_dma_len(m->sg) = (unsigned int)len;
	m->sg = sg_next(m->sg);
	m->mapped++;
	return 0;
}

static void gdrpeer_unmap_entries(struct device *dev, struct sg_table *sgt,
				  unsigned int n, enum dma_data_direction dir)
{
	struct scatterlist *sg;
	unsigned int i;

	for_each_sg(sgt->sgl, sg, n, i)
		dma_unmap_resource(dev, sg_dma_address(sg), sg_dma_len(sg),
				   dir, DMA_ATTR_SKIP_CPU_SYNC);
}

/* Walks the pieces of gdrpeer_sg_from_pages(); @sg NULL only counts. */
static unsigned int gdrpeer_page_pieces(const u64 *addrs, u32 npages,
					u64 page_size, u64 offset, u64 len,
					u64 max_seg, struct scatterlist *sg)
{
	unsigned int n = 0;
	u64 start = 0, run = 0;

	while (len) {
		u32 pg = (u32)div64_u64(offset, page_size);
		u64 in = offset - (u64)pg * page_size;
		u64 take = min(page_size - in, len);
		u64 addr = addrs[pg] + in;

		if (run && start + run == addr && run + take <= max_seg) {
			run += take;
		} else {
			if (run) {
				if (sg) {
					sg_dma_address(sg) = start;
					sg_dma_len(sg) = (unsigned int)run;
					sg = sg_next(sg);
				}
				n++;
			}
			/* a page longer than max_seg is cut into pieces */
			while (take > max_seg) {
				if (sg) {
					sg_dma_address(sg) = addr;
					sg_dma_len(sg) = (unsigned int)max_seg;
					sg = sg_next(sg);
				}
				n++;
				addr += max_seg;
				take -= max_seg;
				offset += max_seg;
				len -= max_seg;
			}
			start = addr;
			run = take;
		}
		offset += take;
		len -= take;
	}
	if (run) {
		if (sg) {
			sg_dma_address(sg) = start;
			sg_dma_len(sg) = (unsigned int)run;
		}
		n++;
	}
	return n;
}

struct sg_table *gdrpeer_sg_from_pages(const u64 *addrs, u32 npages,
				       u64 page_size, u64 offset, u64 len,
				       u64 max_seg)
{
	struct scatterlist *sg;
	struct sg_table *sgt;
	unsigned int nents, i;
	int ret;

	if (!len || offset + len < offset ||
	    offset + len > (u64)npages * page_size)
		return ERR_PTR(-EINVAL);
	nents = gdrpeer_page_pieces(addrs, npages, page_size, offset, len,
				    max_seg, NULL);
	sgt = kzalloc(sizeof(*sgt), GFP_KERNEL);
	if (!sgt)
		return ERR_PTR(-ENOMEM);
	ret = sg_alloc_table(sgt, nents, GFP_KERNEL);
	if (ret) {
		kfree(sgt);
		return ERR_PTR(ret);
	}
	/* no struct page: importers must only use the DMA fields */
	for_each_sg(sgt->sgl, sg, nents, i)
		sg_set_page(sg, NULL, 0, 0);
	gdrpeer_page_pieces(addrs, npages, page_size, offset, len, max_seg,
			    sgt->sgl);
	for_each_sg(sgt->sgl, sg, nents, i)
		sg->length = sg_dma_len(sg);
	return sgt;
}

/* Called with the dma-buf's reservation lock held by dynamic importers. */
static struct sg_table *
gdrpeer_dmabuf_map(struct dma_buf_attachment *attach,
		   enum dma_data_direction dir)
{
	struct gdrpeer_dmabuf *gb = attach->dmabuf->priv;
	struct gdrpeer_map_ctx m = { .dev = attach->dev, .dir = dir };
	u64 max_seg = gdrpeer_max_seg(attach->dev);
	unsigned int nents = 0;
	struct sg_table *sgt;
	int ret;

	if (gb->region->ops) {
		/* revoke sets @revoked before it takes the reservation lock */
		if (READ_ONCE(gb->revoked))
			return ERR_PTR(-ENODEV);
		sgt = gb->region->ops->map(gb->region, attach, gb->offset,
					   gb->length, max_seg);
		if (!IS_ERR(sgt))
			atomic64_inc(&dmabuf_cnt(attach->dmabuf)->active_maps);
		return sgt;
	}
	gdrpeer_for_each_piece(gb, max_seg, gdrpeer_count_piece, &nents);
	sgt = kzalloc(sizeof(*sgt), GFP_KERNEL);
	if (!sgt)
		return ERR_PTR(-ENOMEM);
	ret = sg_alloc_table(sgt, nents, GFP_KERNEL);
	if (ret)
		goto err_free;
	m.sg = sgt->sgl;
	ret = gdrpeer_for_each_piece(gb, max_seg, gdrpeer_map_piece, &m);
	if (ret) {
		dev_warn(attach->dev,
			 "gdrpeer: dma_map_resource failed after %u of %u entries\n",
			 m.mapped, nents);
		gdrpeer_unmap_entries(attach->dev, sgt, m.mapped, dir);
		goto err_table;
	}
	atomic64_inc(&dmabuf_cnt(attach->dmabuf)->active_maps);
	return sgt;

err_table:
	sg_free_table(sgt);
err_free:
	kfree(sgt);
	return ERR_PTR(ret);
}

static void gdrpeer_dmabuf_unmap(struct dma_buf_attachment *attach,
				 struct sg_table *sgt,
				 enum dma_data_direction dir)
{
	struct gdrpeer_dmabuf *gb = attach->dmabuf->priv;

	/* provider mappings belong to the attachment, not to this table */
	if (!gb->region->ops)
		gdrpeer_unmap_entries(attach->dev, sgt, sgt->orig_nents, dir);
	sg_free_table(sgt);
	kfree(sgt);
	atomic64_dec(&dmabuf_cnt(attach->dmabuf)->active_maps);
}

/*
 * CPU mappings of revocable regions are filled one page per fault so that
 * revoke can zap them with unmap_mapping_range() on the dma-buf's file: a
 * fault after the revoke gets SIGBUS, and no mapping can be half built
 * while the revoke runs (both hold gdrpeer_dmabuf.lock).
 */
static vm_fault_t gdrpeer_dmabuf_fault(struct vm_fault *vmf)
{
	struct vm_area_struct *vma = vmf->vma;
	struct gdrpeer_dmabuf *gb = vma->vm_private_data;
	u64 off = (u64)vmf->pgoff << PAGE_SHIFT;
	phys_addr_t phys;
	vm_fault_t ret = VM_FAULT_SIGBUS;

	mutex_lock(&gb->lock);
	if (!gb->revoked && off < gb->length &&
	    !gdrpeer_region_phys(gb->region, gb->offset + off, &phys))
		ret = vmf_insert_pfn_prot(vma, vmf->address & PAGE_MASK,
					  phys >> PAGE_SHIFT,
					  vma->vm_page_prot);
	mutex_unlock(&gb->lock);
	return ret;
}

static const struct vm_operations_struct gdrpeer_dmabuf_fault_vm_ops = {
	.fault = gdrpeer_dmabuf_fault,
	.GDRPEER_VM_OPS_MAY_SPLIT = gdrpeer_vma_no_split,
};

/* The core has checked vm_pgoff + pages against the dma-buf size. */
static int gdrpeer_dmabuf_mmap(struct dma_buf *dmabuf,
			       struct vm_area_struct *vma)
{
	struct gdrpeer_dmabuf *gb = dmabuf->priv;
	u64 off = (u64)vma->vm_pgoff << PAGE_SHIFT;

	if (off > gb->length ||
	    vma->vm_end - vma->vm_start > gb->length - off)
		return -EINVAL;
	if (gb->region->ops) {
		if (!(vma->vm_flags & VM_SHARED))
			return -EINVAL;
		mutex_lock(&gb->lock);
		if (gb->revoked) {
			mutex_unlock(&gb->lock);
			return -ENODEV;
		}
		gdrpeer_vm_flags_set(vma, VM_IO | VM_PFNMAP | VM_DONTEXPAND |
				     VM_DONTDUMP | VM_DONTCOPY);
		vma->vm_page_prot = pgprot_writecombine(vma->vm_page_prot);
		vma->vm_private_data = gb;	/* the vma holds the file */
		vma->vm_ops = &gdrpeer_dmabuf_fault_vm_ops;
		mutex_unlock(&gb->lock);
		return 0;
	}
	/* the vma holds the dma-buf file, which holds the region */
	vma->vm_ops = &gdrpeer_dmabuf_vm_ops;
	return gdrpeer_region_mmap(gb->region, gb->offset + off, vma);
}

#ifdef GDRPEER_HAVE_DMABUF_VMAP
struct gdrpeer_contig_ctx {
	phys_addr_t start;
	phys_addr_t next;
	bool started;
	bool split;
};

static int gdrpeer_contig_piece(void *ctx, phys_addr_t phys, u64 len)
{
	struct gdrpeer_contig_ctx *c = ctx;

	if (!c->started) {
		c->start = phys;
		c->started = true;
	} else if (phys != c->next) {
		c->split = true;
	}
	c->next = phys + len;
	return 0;
}

/*
 * Kernel CPU access to the exported range: called by the dma-buf core for
 * the first vmap user only (under the reservation lock since 6.2, under
 * the dma-buf's own lock before).  One physically contiguous range only:
 * ioremap_wc cannot stitch BAR pieces, which only a fragmented nvidia pin
 * has (refused with a log line).
 */
static int gdrpeer_dmabuf_vmap(struct dma_buf *dmabuf,
			       struct gdrpeer_iosys_map *map)
{
	struct gdrpeer_dmabuf *gb = dmabuf->priv;
	struct gdrpeer_contig_ctx c = {};
	void __iomem *va;

	/* revoke sets @revoked before it takes the reservation lock */
	if (READ_ONCE(gb->revoked)) {
		pr_warn_ratelimited("vmap of %llu bytes refused: the memory was revoked (freed by its owner or its device removed)\n",
				    gb->length);
		return -ENODEV;
	}
	gdrpeer_for_each_piece(gb, U64_MAX, gdrpeer_contig_piece, &c);
	if (!c.started || c.split) {
		pr_warn_ratelimited("vmap of %llu bytes refused: the memory is not one physically contiguous range\n",
				    gb->length);
		return -EOPNOTSUPP;
	}
	va = ioremap_wc(c.start, gb->length);
	if (!va)
		return -ENOMEM;
	gb->vaddr = va;
	gdrpeer_iosys_map_set_vaddr_iomem(map, va);
	atomic64_inc(&dmabuf_cnt(dmabuf)->vmaps);
	return 0;
}

/* Called by the dma-buf core when the last vmap user is gone. */
static void gdrpeer_dmabuf_vunmap(struct dma_buf *dmabuf,
				  struct gdrpeer_iosys_map *map)
{
	struct gdrpeer_dmabuf *gb = dmabuf->priv;

	if (WARN_ON(!gb->vaddr || gb->vaddr != map->vaddr_iomem))
		return;
	iounmap(gb->vaddr);
	gb->vaddr = NULL;
	atomic64_dec(&dmabuf_cnt(dmabuf)->vmaps);
}
#endif /* GDRPEER_HAVE_DMABUF_VMAP */

/*
 * DMA_BUF_IOCTL_SYNC and in-kernel CPU access brackets: the memory is
 * mapped write-combined everywhere, so there is no cache to maintain; what
 * the caller learns here is whether the memory is still there.
 */
static int gdrpeer_dmabuf_begin_cpu_access(struct dma_buf *dmabuf,
					   enum dma_data_direction dir)
{
	struct gdrpeer_dmabuf *gb = dmabuf->priv;

	return READ_ONCE(gb->revoked) ? -ENODEV : 0;
}

static int gdrpeer_dmabuf_end_cpu_access(struct dma_buf *dmabuf,
					 enum dma_data_direction dir)
{
	return 0;
}

static void gdrpeer_dmabuf_release(struct dma_buf *dmabuf)
{
	struct gdrpeer_dmabuf *gb = dmabuf->priv;
	struct gdrpeer_region *r = gb->region;

	WARN_ON(atomic_read(&gb->pins));
	WARN_ON(gb->vaddr);	/* the core vunmaps before it releases */
	if (r->ops && r->ops->unexport)
		r->ops->unexport(r, dmabuf);
	atomic64_dec(&r->cnt->exports);
	atomic_dec(&r->exports);
	mutex_destroy(&gb->lock);
	kfree(gb);
	gdrpeer_region_put(r);
}

static const struct dma_buf_ops gdrpeer_dmabuf_ops = {
	.attach = gdrpeer_dmabuf_attach,
	.detach = gdrpeer_dmabuf_detach,
	.pin = gdrpeer_dmabuf_pin,
	.unpin = gdrpeer_dmabuf_unpin,
	.map_dma_buf = gdrpeer_dmabuf_map,
	.unmap_dma_buf = gdrpeer_dmabuf_unmap,
	.mmap = gdrpeer_dmabuf_mmap,
#ifdef GDRPEER_HAVE_DMABUF_VMAP
	.vmap = gdrpeer_dmabuf_vmap,
	.vunmap = gdrpeer_dmabuf_vunmap,
#endif
	.begin_cpu_access = gdrpeer_dmabuf_begin_cpu_access,
	.end_cpu_access = gdrpeer_dmabuf_end_cpu_access,
	.release = gdrpeer_dmabuf_release,
};

struct dma_buf *gdrpeer_dmabuf_export(struct gdrpeer_region *r, u64 offset,
				      u64 length)
{
	DEFINE_DMA_BUF_EXPORT_INFO(exp_info);
	struct gdrpeer_dmabuf *gb;
	struct dma_buf *dmabuf;

	gb = kzalloc(sizeof(*gb), GFP_KERNEL);
	if (!gb)
		return ERR_PTR(-ENOMEM);
	gdrpeer_region_get(r);
	gb->region = r;
	gb->offset = offset;
	gb->length = length;
	atomic_set(&gb->pins, 0);
	mutex_init(&gb->lock);

	exp_info.exp_name = KBUILD_MODNAME;
	exp_info.owner = THIS_MODULE;	/* rmmod refused while it lives */
	exp_info.ops = &gdrpeer_dmabuf_ops;
	exp_info.size = length;
	exp_info.flags = O_RDWR;
	exp_info.priv = gb;
	dmabuf = dma_buf_export(&exp_info);
	if (IS_ERR(dmabuf)) {
		gdrpeer_region_put(r);
		kfree(gb);
		return dmabuf;
	}
	/* from here on gdrpeer_dmabuf_release undoes these */
	atomic_inc(&r->exports);
	atomic64_inc(&r->cnt->exports);
	return dmabuf;
}

/*
 * The memory behind @dmabuf is going away (or gone): no new attachment,
 * map or mmap; importers are told to drop their mappings; CPU mappings
 * are zapped.  Returns when all of that is done.  Sleeps.  The caller
 * keeps @dmabuf alive (provider_nvidia.c holds its pin lock, which the
 * dma-buf release path takes through ->unexport).
 */
void gdrpeer_dmabuf_revoke(struct dma_buf *dmabuf)
{
	struct gdrpeer_dmabuf *gb = dmabuf->priv;

	mutex_lock(&gb->lock);
	WRITE_ONCE(gb->revoked, true);
	mutex_unlock(&gb->lock);

	dma_resv_lock(dmabuf->resv, NULL);
#ifdef GDRPEER_HAVE_DMA_BUF_INVALIDATE_MAPPINGS
	dma_buf_invalidate_mappings(dmabuf);
#else
	dma_buf_move_notify(dmabuf);
#endif
	/* importers have dropped their vmap in move_notify (see the top) */
	if (READ_ONCE(gb->vaddr))
		pr_warn("revoked %llu bytes while a kernel mapping (vmap) of them is still held: an importer ignored move_notify or holds no dynamic attachment\n",
			gb->length);
	dma_resv_unlock(dmabuf->resv);

	/* every CPU mapping of the dma-buf goes through its file */
	unmap_mapping_range(dmabuf->file->f_mapping, 0, 0, 1);
}

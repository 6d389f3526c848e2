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
 *   Regions with ops (nvidia pins) are mapped by their provider.
 * - Every region can be revoked (gdrpeer_region_revoke): the device goes,
 *   or NVIDIA frees the memory under a callback pin.  Then attach, map and
 *   mmap fail with -ENODEV, importers are told through move_notify /
 *   invalidate_mappings, CPU mappings (built at fault time for exactly
 *   this) are zapped, and revocation waits until every importer mapping is
 *   gone before the memory is given back.
 * - pin: a pinned importer (ib_umem_dmabuf_get_pinned: EFA, irdma,
 *   bnxt_re, mlx5 without ODP) ignores move_notify.  Memory that its owner
 *   can take back at any time (a callback pin) is therefore refused to
 *   pinned importers; memory that goes only with its device may be pinned,
 *   and unbinding the device then waits until the pinned importer lets go.
 * - vmap gives kernel CPU access (importers that copy with the CPU, such
 *   as the test bed's soft-RoCE): the range ioremap'ed write-combined,
 *   handed out as I/O memory, at most one mapping per dma-buf (the core
 *   shares it between vmap users), counted in the "vmaps" gauge.
 *   Contract: an importer that holds a vmap must hold a dynamic
 *   attachment, and its move_notify / invalidate_mappings must stop every
 *   access and dma_buf_vunmap() before returning (the reservation lock is
 *   held there, as dma_buf_vunmap needs since 6.2); revocation waits for
 *   the vmap to go like it waits for sg tables, and says so in the kernel
 *   log while it waits.  vmap of revoked memory is refused (-ENODEV).
 * - The dma-buf holds a region reference until its release.
 *
 * Lock order (outermost first), all may sleep:
 *   gdrpeer_region.exports_lock (the list of a region's dma-bufs; only
 *   held to walk or change it, never across an importer call)
 *   dma-buf reservation lock -> importer's locks (move_notify)
 *   mmap_lock (fault) -> gdrpeer_region.memory_lock (read)
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
#include <linux/file.h>
#include <linux/wait.h>
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
	struct dma_buf *dmabuf;
	struct list_head node;		/* in region->dmabufs */
	u64 offset;			/* into the region */
	u64 length;
	atomic_t pins;
	atomic_t maps;			/* live importer sg tables */
	wait_queue_head_t unmapped;	/* woken when @maps drops to 0 */
	void __iomem *vaddr;		/* the vmap, NULL when none; set and
					 * cleared by vmap/vunmap, which the
					 * dma-buf core serializes */
};

static struct gdrpeer_counters *dmabuf_cnt(struct dma_buf *dmabuf)
{
	struct gdrpeer_dmabuf *gb = dmabuf->priv;

	return gb->region->cnt;
}

static int gdrpeer_dmabuf_attach(struct dma_buf *dmabuf,
				 struct dma_buf_attachment *attach)
{
	struct gdrpeer_dmabuf *gb = dmabuf->priv;
	struct gdrpeer_region *r = gb->region;
	struct gdrpeer_attachment *ga;
	int ret;

	if (!attach->peer2peer) {
		dev_dbg(attach->dev,
			"gdrpeer: importer is not peer2peer capable\n");
		return -EOPNOTSUPP;
	}
	if (gdrpeer_region_revoked(r))
		return -ENODEV;
	ga = kzalloc(sizeof(*ga), GFP_KERNEL_ACCOUNT);
	if (!ga)
		return -ENOMEM;
	attach->priv = ga;
	if (r->ops) {
		ret = r->ops->attach(r, attach);
		if (ret) {
			attach->priv = NULL;
			kfree(ga);
			return ret;
		}
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
	kfree(attach->priv);
	attach->priv = NULL;
	atomic64_dec(&dmabuf_cnt(dmabuf)->attachments);
}

/*
 * Would this pin let an importer keep memory that its owner can take back
 * at any time?  7.x says whether the importer handles invalidation while
 * pinned (dma_buf_attach_revocable).  Before it, where the core maps
 * without pinning (CONFIG_DMABUF_MOVE_NOTIFY) every pin is an importer's
 * own; where the core pins for each map of a dynamic importer, that pin
 * is the only one, and a second one on the attachment is the importer's
 * (ib_umem_dmabuf_get_pinned pins, then maps).
 */
static bool gdrpeer_pin_outlives_owner(struct dma_buf_attachment *attach,
				       const struct gdrpeer_attachment *ga)
{
#if defined(GDRPEER_HAVE_DMA_BUF_ATTACH_REVOCABLE)
	return !dma_buf_attach_revocable(attach);
#else
	if (IS_ENABLED(CONFIG_DMABUF_MOVE_NOTIFY))
		return true;
	return ga->pins >= 1;
#endif
}

/* Called with the reservation lock held (dma_buf_pin, or map). */
static int gdrpeer_dmabuf_pin(struct dma_buf_attachment *attach)
{
	struct gdrpeer_dmabuf *gb = attach->dmabuf->priv;
	struct gdrpeer_attachment *ga = attach->priv;

	if (gb->region->revocable == GDRPEER_REVOCABLE_ANY_TIME &&
	    gdrpeer_pin_outlives_owner(attach, ga)) {
		dev_info_ratelimited(attach->dev,
				     "gdrpeer: pin refused: this memory can be freed by its owner at any time (callback pin) and a pinned importer would keep writing into it; use an importer that handles invalidation (ODP) or a persistent pin\n");
		return -EOPNOTSUPP;
	}
	if (READ_ONCE(gb->region->revoked))
		return -ENODEV;
	ga->pins++;
	atomic_inc(&gb->pins);
	return 0;
}

static void gdrpeer_dmabuf_unpin(struct dma_buf_attachment *attach)
{
	struct gdrpeer_dmabuf *gb = attach->dmabuf->priv;
	struct gdrpeer_attachment *ga = attach->priv;

	ga->pins--;
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

	/*
	 * revoke sets @revoked before it takes the reservation lock that we
	 * hold here: a map that sees it clear is told by move_notify after
	 */
	if (READ_ONCE(gb->region->revoked))
		return ERR_PTR(-ENODEV);
	if (gb->region->ops) {
		sgt = gb->region->ops->map(gb->region, attach, gb->offset,
					   gb->length, max_seg);
		if (!IS_ERR(sgt)) {
			atomic_inc(&gb->maps);
			atomic64_inc(&dmabuf_cnt(attach->dmabuf)->active_maps);
		}
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
	atomic_inc(&gb->maps);
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
	if (atomic_dec_and_test(&gb->maps))
		wake_up_all(&gb->unmapped);
}

static vm_fault_t gdrpeer_dmabuf_fault(struct vm_fault *vmf)
{
	struct gdrpeer_dmabuf *gb = vmf->vma->vm_private_data;
	u64 off = (u64)vmf->pgoff << PAGE_SHIFT;

	if (off >= gb->length)
		return VM_FAULT_SIGBUS;
	return gdrpeer_region_fault(gb->region, gb->offset + off, vmf);
}

static const struct vm_operations_struct gdrpeer_dmabuf_vm_ops = {
	.fault = gdrpeer_dmabuf_fault,
	.GDRPEER_VM_OPS_MAY_SPLIT = gdrpeer_vma_no_split,
};

/*
 * The core has checked vm_pgoff + pages against the dma-buf size; the vma
 * holds the dma-buf file, which holds the region.
 */
static int gdrpeer_dmabuf_mmap(struct dma_buf *dmabuf,
			       struct vm_area_struct *vma)
{
	struct gdrpeer_dmabuf *gb = dmabuf->priv;
	u64 off = (u64)vma->vm_pgoff << PAGE_SHIFT;

	if (off > gb->length ||
	    vma->vm_end - vma->vm_start > gb->length - off)
		return -EINVAL;
	if (!(vma->vm_flags & VM_SHARED))
		return -EINVAL;
	if (gdrpeer_region_revoked(gb->region))
		return -ENODEV;
	gdrpeer_region_mmap_prepare(vma);
	vma->vm_private_data = gb;
	vma->vm_ops = &gdrpeer_dmabuf_vm_ops;
	return 0;
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
	if (READ_ONCE(gb->region->revoked)) {
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
	WRITE_ONCE(gb->vaddr, NULL);
	atomic64_dec(&dmabuf_cnt(dmabuf)->vmaps);
	wake_up_all(&gb->unmapped);
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

	return READ_ONCE(gb->region->revoked) ? -ENODEV : 0;
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

	WARN_ON(atomic_read(&gb->pins) || atomic_read(&gb->maps));
	WARN_ON(gb->vaddr);	/* the core vunmaps before it releases */
	mutex_lock(&r->exports_lock);
	list_del(&gb->node);
	mutex_unlock(&r->exports_lock);
	atomic64_dec(&r->cnt->exports);
	atomic_dec(&r->exports);
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

	gb = kzalloc(sizeof(*gb), GFP_KERNEL_ACCOUNT);
	if (!gb)
		return ERR_PTR(-ENOMEM);
	gdrpeer_region_get(r);
	gb->region = r;
	gb->offset = offset;
	gb->length = length;
	atomic_set(&gb->pins, 0);
	atomic_set(&gb->maps, 0);
	init_waitqueue_head(&gb->unmapped);
	INIT_LIST_HEAD(&gb->node);

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
	gb->dmabuf = dmabuf;
	/* from here on gdrpeer_dmabuf_release undoes these */
	atomic_inc(&r->exports);
	atomic64_inc(&r->cnt->exports);
	mutex_lock(&r->exports_lock);
	list_add(&gb->node, &r->dmabufs);
	mutex_unlock(&r->exports_lock);
	/* revoked while we exported: it must not escape unrevoked */
	if (gdrpeer_region_revoked(r)) {
		dma_buf_put(dmabuf);
		return ERR_PTR(-ENODEV);
	}
	return dmabuf;
}

/*
 * A reference to the dma-buf's file unless its last one is already gone
 * (the release is on its way, possibly blocked on exports_lock: there is
 * no importer and no mapping left to revoke then).
 */
static bool gdrpeer_dmabuf_get_unless_dying(struct dma_buf *dmabuf)
{
#ifdef GDRPEER_HAVE_GET_FILE_ACTIVE
	return get_file_active(&dmabuf->file) != NULL;
#else
	return get_file_rcu(dmabuf->file);
#endif
}

/* Seconds between "still waiting" lines while importers hold mappings. */
#define GDRPEER_REVOKE_WARN_SECS 10

static void gdrpeer_dmabuf_revoke_one(struct gdrpeer_dmabuf *gb)
{
	struct dma_buf *dmabuf = gb->dmabuf;

	dma_resv_lock(dmabuf->resv, NULL);
#ifdef GDRPEER_HAVE_DMA_BUF_INVALIDATE_MAPPINGS
	dma_buf_invalidate_mappings(dmabuf);
#else
	dma_buf_move_notify(dmabuf);
#endif
	dma_resv_unlock(dmabuf->resv);
	/* work an importer queued on the buffer must end before the memory */
	gdrpeer_resv_wait_all(dmabuf->resv);

	/* every CPU mapping of the dma-buf goes through its file */
	unmap_mapping_range(dmabuf->file->f_mapping, 0, 0, 1);

	/*
	 * Dynamic importers unmap in move_notify or right after; a pinned
	 * one keeps its mapping until it detaches, and the memory must not
	 * be given back before.
	 */
	while (!wait_event_timeout(gb->unmapped, !atomic_read(&gb->maps) &&
				   !READ_ONCE(gb->vaddr),
				   GDRPEER_REVOKE_WARN_SECS * HZ))
		pr_warn("revoked dma-buf: still waiting for %d importer mapping(s) (%d pinned)%s to go before the memory is given back\n",
			atomic_read(&gb->maps), atomic_read(&gb->pins),
			READ_ONCE(gb->vaddr) ? " and a kernel vmap" : "");
}

/*
 * Revoke every live dma-buf exported from @r (gdrpeer_region_revoke, after
 * @r->revoked is set, so that no new attachment, map or mmap succeeds).
 * Sleeps; no lock of ours is held.
 */
void gdrpeer_dmabuf_revoke_region(struct gdrpeer_region *r)
{
	struct gdrpeer_dmabuf *gb, **live;
	unsigned int n = 0, i;

	mutex_lock(&r->exports_lock);
	list_for_each_entry(gb, &r->dmabufs, node)
		n++;
	mutex_unlock(&r->exports_lock);
	if (!n)
		return;
	live = kcalloc(n, sizeof(*live), GFP_KERNEL | __GFP_NOFAIL);
	i = 0;
	mutex_lock(&r->exports_lock);
	list_for_each_entry(gb, &r->dmabufs, node) {
		/* one exported meanwhile sees @revoked and drops itself */
		if (i == n)
			break;
		if (gdrpeer_dmabuf_get_unless_dying(gb->dmabuf))
			live[i++] = gb;
	}
	mutex_unlock(&r->exports_lock);

	n = i;
	for (i = 0; i < n; i++) {
		gdrpeer_dmabuf_revoke_one(live[i]);
		dma_buf_put(live[i]->dmabuf);
	}
	kfree(live);
}

// SPDX-License-Identifier: GPL-2.0
/*
 * dma-buf exporter: a range of a region as a dma-buf that peer-to-peer
 * capable importers (RDMA NICs through ib_umem_dmabuf) can map.
 *
 * - attach refuses importers that cannot take memory without struct pages
 *   (attach->peer2peer false).
 * - Two kinds of dma-buf, each with its own dma_buf_ops, chosen at export:
 *   plain (a region without ops: BAR ranges that go only with their
 *   device; map_dma_buf maps each piece with dma_map_resource() on the
 *   importer's device, so the address goes through that device's IOMMU
 *   domain; any importer may pin) and provider-mapped (a region with ops:
 *   nvidia pins, which the provider maps for each importer at attach and
 *   which a callback pin's owner can revoke at any time; pin checks that).
 *   Both build their sg table with one helper, gdrpeer_ranges_to_sgt():
 *   entries of at most the importer's dma_get_max_seg_size(), each a
 *   multiple of PAGE_SIZE, DMA fields only.
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
 *   as the test bed's soft-RoCE), only for dma-bufs exported while the
 *   parameter dmabuf_vmap is set (otherwise their ops have no .vmap) and
 *   only while the dma-buf has a dynamic attachment: dma_buf_vmap() needs
 *   none, and a user without one cannot be told of a revocation.  The
 *   range ioremap'ed write-combined, handed out as I/O memory, at most one
 *   mapping per dma-buf (the core shares it between vmap users), counted
 *   in the "vmaps" gauge.
 *   Contract: an importer that holds a vmap holds a dynamic attachment,
 *   takes the vmap under the reservation lock, and its move_notify /
 *   invalidate_mappings must stop every access and dma_buf_vunmap() before
 *   returning; revocation waits for the vmap to go like it waits for sg
 *   tables, and says so in the kernel log while it waits.  vmap of revoked
 *   memory is refused (-ENODEV).
 * - The dma-buf holds a region reference until its release.
 * - Revocation (gdrpeer_dmabuf_revoke_region) closes the region's list of
 *   dma-bufs to new exports, then takes one dma-buf at a time until none
 *   is left: nothing counted in advance, nothing allocated.
 *
 * Lock order (outermost first), all may sleep:
 *   gdrpeer_region.dmabuf_revoke_lock (one revocation of the region's
 *   dma-bufs; held across its waits, taken by nothing else)
 *   -> gdrpeer_region.exports_lock (the list of a region's dma-bufs and
 *   exports_closed; only held to walk or change it, never across an
 *   importer call or a wait)
 *   dma-buf reservation lock -> importer's locks (move_notify)
 *   dma-buf reservation lock (6.2+) or the dma-buf's mutex (before)
 *   -> gdrpeer_region.memory_lock (read, vmap)
 *   mmap_lock (fault) -> gdrpeer_region.memory_lock (read)
 * map/unmap run under the reservation lock and take none of ours and read
 * @revoked with READ_ONCE (revocation sets it before it takes that lock).
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
	bool revoke_taken;		/* a revocation has taken it; under
					 * region->exports_lock */
	u64 offset;			/* into the region */
	u64 length;
	atomic_t pins;
	atomic_t maps;			/* live importer sg tables */
	/* attachments of dynamic importers (they get move_notify), the
	 * only ones vmap is served for */
	atomic_t dynamic_attachments;
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

/* ---- [offset, offset + size) of a list of ranges -> sg table ---------- */

/*
 * Walks [offset, offset + size) of ascending @ranges in pieces that end at
 * range ends and are at most @max_seg bytes long.
 */
struct gdrpeer_pieces {
	const struct gdrpeer_range *range, *end;
	u64 pos;			/* into *range */
	u64 left;			/* bytes still to walk */
	u64 max_seg;
};

static void gdrpeer_pieces_start(struct gdrpeer_pieces *it,
				 const struct gdrpeer_range *ranges,
				 unsigned int nr_ranges, u64 offset, u64 size,
				 u64 max_seg)
{
	it->range = ranges;
	it->end = ranges + nr_ranges;
	while (it->range < it->end && offset >= it->range->len) {
		offset -= it->range->len;
		it->range++;
	}
	it->pos = offset;
	it->left = size;
	it->max_seg = max_seg;
}

static bool gdrpeer_pieces_next(struct gdrpeer_pieces *it, u64 *addr,
				u64 *len)
{
	while (it->range < it->end && it->pos >= it->range->len) {
		it->range++;
		it->pos = 0;
	}
	if (!it->left || it->range == it->end)
		return false;
	*addr = it->range->phys + it->pos;
	*len = min3(it->range->len - it->pos, it->left, it->max_seg);
	it->pos += *len;
	it->left -= *len;
	return true;
}

/* Longest sg entry for @dev: its max segment, page aligned, fits in u32. */
static u64 gdrpeer_max_seg(struct device *dev)
{
	u64 seg = min_t(u64, dma_get_max_seg_size(dev), UINT_MAX);

	seg &= PAGE_MASK;
	return seg ? seg : PAGE_SIZE;
}

/* How the addresses of the ranges given to gdrpeer_ranges_to_sgt() are. */
enum gdrpeer_sg_addrs {
	/* CPU physical: each entry is mapped with dma_map_resource() */
	GDRPEER_SG_MAP_PHYS,
	/* already the importer's DMA addresses (a provider mapped them) */
	GDRPEER_SG_DMA_ADDRS,
};

static void gdrpeer_sgt_unmap(struct device *dev, struct sg_table *sgt,
			      unsigned int n, enum dma_data_direction dir)
{
	struct scatterlist *sg;
	unsigned int i;

	for_each_sg(sgt->sgl, sg, n, i)
		dma_unmap_resource(dev, sg_dma_address(sg), sg_dma_len(sg),
				   dir, DMA_ATTR_SKIP_CPU_SYNC);
}

/*
 * The sg table of [offset, offset + size) of @ranges for @attach's device,
 * shaped like the kernel's dma_buf_phys_vec_to_sgt() (7.x), which gdrpeer
 * cannot use on older kernels: entries split at range ends and at the
 * importer's max segment (so each is a multiple of PAGE_SIZE), DMA fields
 * only (page NULL: importers must not touch the CPU side), mapped through
 * the importer's own IOMMU domain where @addrs says so.  The caller has
 * checked that the span lies inside the ranges.  Undone with
 * gdrpeer_sgt_free() with the same @addrs.
 */
static struct sg_table *gdrpeer_ranges_to_sgt(struct dma_buf_attachment *attach,
					      const struct gdrpeer_range *ranges,
					      unsigned int nr_ranges,
					      u64 offset, u64 size,
					      enum dma_data_direction dir,
					      enum gdrpeer_sg_addrs addrs)
{
	u64 max_seg = gdrpeer_max_seg(attach->dev);
	struct gdrpeer_pieces it;
	unsigned int nents = 0, done = 0;
	struct scatterlist *sg;
	struct sg_table *sgt;
	u64 addr, len;
	int ret;

	gdrpeer_pieces_start(&it, ranges, nr_ranges, offset, size, max_seg);
	while (gdrpeer_pieces_next(&it, &addr, &len))
		nents++;
	if (!nents || it.left)
		return ERR_PTR(-EINVAL);
	sgt = kzalloc(sizeof(*sgt), GFP_KERNEL);
	if (!sgt)
		return ERR_PTR(-ENOMEM);
	ret = sg_alloc_table(sgt, nents, GFP_KERNEL);
	if (ret)
		goto err_free;

	sg = sgt->sgl;
	gdrpeer_pieces_start(&it, ranges, nr_ranges, offset, size, max_seg);
	while (gdrpeer_pieces_next(&it, &addr, &len)) {
		dma_addr_t dma = addr;

		if (addrs == GDRPEER_SG_MAP_PHYS) {
			dma = dma_map_resource(attach->dev, addr, len, dir,
					       DMA_ATTR_SKIP_CPU_SYNC);
			if (dma_mapping_error(attach->dev, dma)) {
				dev_warn(attach->dev,
					 "gdrpeer: dma_map_resource failed after %u of %u entries\n",
					 done, nents);
				gdrpeer_sgt_unmap(attach->dev, sgt, done, dir);
				ret = -EIO;
				goto err_table;
			}
		}
		sg_set_page(sg, NULL, (unsigned int)len, 0);
		sg_dma_address(sg) = dma;
		sg_dma_len(sg) = (unsigned int)len;
		sg = sg_next(sg);
		done++;
	}
	return sgt;

err_table:
	sg_free_table(sgt);
err_free:
	kfree(sgt);
	return ERR_PTR(ret);
}

static void gdrpeer_sgt_free(struct dma_buf_attachment *attach,
			     struct sg_table *sgt, enum dma_data_direction dir,
			     enum gdrpeer_sg_addrs addrs)
{
	if (addrs == GDRPEER_SG_MAP_PHYS)
		gdrpeer_sgt_unmap(attach->dev, sgt, sgt->orig_nents, dir);
	sg_free_table(sgt);
	kfree(sgt);
}

/* ---- what plain and provider-mapped dma-bufs share --------------------- */

static int gdrpeer_attach_prepare(struct dma_buf_attachment *attach)
{
	struct gdrpeer_dmabuf *gb = attach->dmabuf->priv;
	struct gdrpeer_attachment *ga;

	if (!attach->peer2peer) {
		dev_dbg(attach->dev,
			"gdrpeer: importer is not peer2peer capable\n");
		return -EOPNOTSUPP;
	}
	if (gdrpeer_region_revoked(gb->region))
		return -ENODEV;
	ga = kzalloc(sizeof(*ga), GFP_KERNEL_ACCOUNT);
	if (!ga)
		return -ENOMEM;
	attach->priv = ga;
	return 0;
}

/*
 * A dynamic importer attached with importer ops (dma_buf_dynamic_attach()). This is the
 * definition dma_buf_attachment_is_dynamic() had on 5.10..6.x; 7.x removed the helper but kept
 * the field, so the field is read directly on every kernel.
 */
static bool gdrpeer_attachment_is_dynamic(const struct dma_buf_attachment *attach)
{
	return attach->importer_ops != NULL;
}

static void gdrpeer_attach_done(struct dma_buf_attachment *attach)
{
	struct gdrpeer_dmabuf *gb = attach->dmabuf->priv;

	if (gdrpeer_attachment_is_dynamic(attach))
		atomic_inc(&gb->dynamic_attachments);
	atomic64_inc(&dmabuf_cnt(attach->dmabuf)->attachments);
}

static void gdrpeer_attach_drop(struct dma_buf_attachment *attach)
{
	kfree(attach->priv);
	attach->priv = NULL;
}

static void gdrpeer_detach_done(struct dma_buf_attachment *attach)
{
	struct gdrpeer_dmabuf *gb = attach->dmabuf->priv;

	if (gdrpeer_attachment_is_dynamic(attach))
		atomic_dec(&gb->dynamic_attachments);
	gdrpeer_attach_drop(attach);
	atomic64_dec(&dmabuf_cnt(attach->dmabuf)->attachments);
}

/* Called with the reservation lock held (dma_buf_pin, or map). */
static int gdrpeer_pin_count(struct dma_buf_attachment *attach)
{
	struct gdrpeer_dmabuf *gb = attach->dmabuf->priv;
	struct gdrpeer_attachment *ga = attach->priv;

	dma_resv_assert_held(attach->dmabuf->resv);
	if (READ_ONCE(gb->region->revoked))
		return -ENODEV;
	ga->pins++;
	atomic_inc(&gb->pins);
	return 0;
}

/* Called with the reservation lock held (dma_buf_unpin, or unmap). */
static void gdrpeer_dmabuf_unpin(struct dma_buf_attachment *attach)
{
	struct gdrpeer_dmabuf *gb = attach->dmabuf->priv;
	struct gdrpeer_attachment *ga = attach->priv;

	dma_resv_assert_held(attach->dmabuf->resv);
	ga->pins--;
	WARN_ON(atomic_dec_return(&gb->pins) < 0);
}

/* A map succeeded: revocation waits for its unmap. */
static void gdrpeer_map_done(struct dma_buf_attachment *attach)
{
	struct gdrpeer_dmabuf *gb = attach->dmabuf->priv;

	atomic_inc(&gb->maps);
	atomic64_inc(&dmabuf_cnt(attach->dmabuf)->active_maps);
}

static void gdrpeer_unmap_done(struct dma_buf_attachment *attach)
{
	struct gdrpeer_dmabuf *gb = attach->dmabuf->priv;

	atomic64_dec(&dmabuf_cnt(attach->dmabuf)->active_maps);
	if (atomic_dec_and_test(&gb->maps))
		wake_up_all(&gb->unmapped);
}

/*
 * map_dma_buf and unmap_dma_buf run with the dma-buf's reservation lock
 * held: gdrpeer's dma-bufs have .pin, which makes them dynamic, and the
 * core takes (or asserts) that lock around both for every importer, on
 * every kernel gdrpeer builds for.  Revoke sets @revoked before it takes
 * that lock: a map that sees it clear is told by move_notify after.
 */
static void gdrpeer_map_assert_locked(struct dma_buf_attachment *attach)
{
	dma_resv_assert_held(attach->dmabuf->resv);
}

static bool gdrpeer_map_revoked(struct dma_buf_attachment *attach)
{
	struct gdrpeer_dmabuf *gb = attach->dmabuf->priv;

	gdrpeer_map_assert_locked(attach);
	return READ_ONCE(gb->region->revoked);
}

/* ---- plain regions: BAR ranges that go only with their device ---------- */

static int gdrpeer_plain_attach(struct dma_buf *dmabuf,
				struct dma_buf_attachment *attach)
{
	int ret = gdrpeer_attach_prepare(attach);

	if (!ret)
		gdrpeer_attach_done(attach);
	return ret;
}

static void gdrpeer_plain_detach(struct dma_buf *dmabuf,
				 struct dma_buf_attachment *attach)
{
	gdrpeer_detach_done(attach);
}

/*
 * BAR memory never moves and goes only with its device, whose unbind
 * waits for pinned importers to let go: a pin only counts.
 */
static int gdrpeer_plain_pin(struct dma_buf_attachment *attach)
{
	return gdrpeer_pin_count(attach);
}

static struct sg_table *gdrpeer_plain_map(struct dma_buf_attachment *attach,
					  enum dma_data_direction dir)
{
	struct gdrpeer_dmabuf *gb = attach->dmabuf->priv;
	struct gdrpeer_region *r = gb->region;
	struct sg_table *sgt;

	if (gdrpeer_map_revoked(attach))
		return ERR_PTR(-ENODEV);
	sgt = gdrpeer_ranges_to_sgt(attach, r->ranges, r->nr_ranges,
				    gb->offset, gb->length, dir,
				    GDRPEER_SG_MAP_PHYS);
	if (!IS_ERR(sgt))
		gdrpeer_map_done(attach);
	return sgt;
}

static void gdrpeer_plain_unmap(struct dma_buf_attachment *attach,
				struct sg_table *sgt,
				enum dma_data_direction dir)
{
	gdrpeer_map_assert_locked(attach);
	gdrpeer_sgt_free(attach, sgt, dir, GDRPEER_SG_MAP_PHYS);
	gdrpeer_unmap_done(attach);
}

/* ---- provider-mapped regions: nvidia pins, revocable by their owner ---- */

static int gdrpeer_mapped_attach(struct dma_buf *dmabuf,
				 struct dma_buf_attachment *attach)
{
	struct gdrpeer_dmabuf *gb = dmabuf->priv;
	struct gdrpeer_region *r = gb->region;
	int ret = gdrpeer_attach_prepare(attach);

	if (ret)
		return ret;
	ret = r->ops->attach(r, attach);
	if (ret) {
		gdrpeer_attach_drop(attach);
		return ret;
	}
	gdrpeer_attach_done(attach);
	return 0;
}

static void gdrpeer_mapped_detach(struct dma_buf *dmabuf,
				  struct dma_buf_attachment *attach)
{
	struct gdrpeer_dmabuf *gb = dmabuf->priv;

	gb->region->ops->detach(gb->region, attach);
	gdrpeer_detach_done(attach);
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
static int gdrpeer_mapped_pin(struct dma_buf_attachment *attach)
{
	struct gdrpeer_dmabuf *gb = attach->dmabuf->priv;
	struct gdrpeer_attachment *ga = attach->priv;

	if (gb->region->revocable == GDRPEER_REVOCABLE_ANY_TIME &&
	    gdrpeer_pin_outlives_owner(attach, ga)) {
		dev_info_ratelimited(attach->dev,
				     "gdrpeer: pin refused: this memory can be freed by its owner at any time (callback pin) and a pinned importer would keep writing into it; use an importer that handles invalidation (ODP) or a persistent pin\n");
		return -EOPNOTSUPP;
	}
	return gdrpeer_pin_count(attach);
}

static struct sg_table *gdrpeer_mapped_map(struct dma_buf_attachment *attach,
					   enum dma_data_direction dir)
{
	struct gdrpeer_dmabuf *gb = attach->dmabuf->priv;
	struct gdrpeer_region *r = gb->region;
	const struct gdrpeer_range *ranges;
	unsigned int nr_ranges;
	struct sg_table *sgt;
	int ret;

	if (gdrpeer_map_revoked(attach))
		return ERR_PTR(-ENODEV);
	ret = r->ops->dma_ranges(r, attach, &ranges, &nr_ranges);
	if (ret)
		return ERR_PTR(ret);
	sgt = gdrpeer_ranges_to_sgt(attach, ranges, nr_ranges, gb->offset,
				    gb->length, dir, GDRPEER_SG_DMA_ADDRS);
	if (!IS_ERR(sgt))
		gdrpeer_map_done(attach);
	return sgt;
}

/* the provider's mappings belong to the attachment, not to this table */
static void gdrpeer_mapped_unmap(struct dma_buf_attachment *attach,
				 struct sg_table *sgt,
				 enum dma_data_direction dir)
{
	gdrpeer_map_assert_locked(attach);
	gdrpeer_sgt_free(attach, sgt, dir, GDRPEER_SG_DMA_ADDRS);
	gdrpeer_unmap_done(attach);
}

/* ---- CPU access, shared --------------------------------------------------- */

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
/*
 * The lock the dma-buf core calls vmap/vunmap under: the reservation lock
 * since 6.2 (asserted), the dma-buf's own mutex before (not reachable).
 */
static void gdrpeer_vmap_assert_locked(struct dma_buf *dmabuf)
{
#ifdef GDRPEER_HAVE_DMA_BUF_VMAP_UNLOCKED
	dma_resv_assert_held(dmabuf->resv);
#endif
}

/*
 * Kernel CPU access to the exported range: called by the dma-buf core for
 * the first vmap user only.  One physically contiguous range only:
 * ioremap_wc cannot stitch BAR pieces, which only a fragmented nvidia pin
 * has (refused with a log line).
 *
 * Served only while the dma-buf has a dynamic attachment: dma_buf_vmap()
 * needs none, and a user without one (videobuf2-vmalloc imports
 * V4L2_MEMORY_DMABUF buffers by vmap alone) can never be told of a
 * revocation, which would then wait for it for ever; vb2 also gives an
 * I/O mapping back in a way dma_buf_vunmap() BUG()s on.  The dma-buf API
 * cannot tie a vmap to an attachment (the core shares one vmap between
 * all its users and calls us for the first only), so this is as far as
 * the exporter can check: see "vmap contract" in docs/driver.md.
 *
 * @revoked is read under memory_lock, held until @vaddr is set: a
 * revocation (down_write, then move_notify) either refuses this vmap or
 * finds @vaddr set and waits for it, also before 6.2, where vmap does
 * not run under the reservation lock that move_notify holds.
 */
static int gdrpeer_dmabuf_vmap(struct dma_buf *dmabuf,
			       struct gdrpeer_iosys_map *map)
{
	struct gdrpeer_dmabuf *gb = dmabuf->priv;
	struct gdrpeer_region *r = gb->region;
	struct gdrpeer_pieces it;
	u64 start, len;
	void __iomem *va;
	int ret = 0;

	gdrpeer_vmap_assert_locked(dmabuf);
	if (!atomic_read(&gb->dynamic_attachments)) {
		pr_warn_ratelimited("vmap of %llu bytes refused: the dma-buf has no dynamic attachment, so revocation could not tell the user (e.g. videobuf2-vmalloc)\n",
				    gb->length);
		return -EOPNOTSUPP;
	}
	/* one piece of the whole length: one contiguous range */
	gdrpeer_pieces_start(&it, r->ranges, r->nr_ranges, gb->offset,
			     gb->length, U64_MAX);
	if (!gdrpeer_pieces_next(&it, &start, &len) || len != gb->length) {
		pr_warn_ratelimited("vmap of %llu bytes refused: the memory is not one physically contiguous range\n",
				    gb->length);
		return -EOPNOTSUPP;
	}
	down_read(&r->memory_lock);
	if (r->revoked) {
		pr_warn_ratelimited("vmap of %llu bytes refused: the memory was revoked (freed by its owner or its device removed)\n",
				    gb->length);
		ret = -ENODEV;
		goto out;
	}
	va = ioremap_wc(start, gb->length);
	if (!va) {
		ret = -ENOMEM;
		goto out;
	}
	WRITE_ONCE(gb->vaddr, va);
	gdrpeer_iosys_map_set_vaddr_iomem(map, va);
	atomic64_inc(&dmabuf_cnt(dmabuf)->vmaps);
out:
	up_read(&r->memory_lock);
	return ret;
}

/* Called by the dma-buf core when the last vmap user is gone. */
static void gdrpeer_dmabuf_vunmap(struct dma_buf *dmabuf,
				  struct gdrpeer_iosys_map *map)
{
	struct gdrpeer_dmabuf *gb = dmabuf->priv;

	gdrpeer_vmap_assert_locked(dmabuf);
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

#ifdef GDRPEER_HAVE_DMABUF_VMAP
#define GDRPEER_DMABUF_VMAP_OPS			\
	.vmap = gdrpeer_dmabuf_vmap,		\
	.vunmap = gdrpeer_dmabuf_vunmap,
#else
#define GDRPEER_DMABUF_VMAP_OPS
#endif

/* What every gdrpeer dma-buf does the same way. */
#define GDRPEER_DMABUF_COMMON_OPS					\
	.unpin = gdrpeer_dmabuf_unpin,					\
	.mmap = gdrpeer_dmabuf_mmap,					\
	.begin_cpu_access = gdrpeer_dmabuf_begin_cpu_access,		\
	.end_cpu_access = gdrpeer_dmabuf_end_cpu_access,		\
	.release = gdrpeer_dmabuf_release

/* Regions without ops: ranges of a BAR, mapped here for each importer. */
#define GDRPEER_PLAIN_OPS						\
	.attach = gdrpeer_plain_attach,					\
	.detach = gdrpeer_plain_detach,					\
	.pin = gdrpeer_plain_pin,					\
	.map_dma_buf = gdrpeer_plain_map,				\
	.unmap_dma_buf = gdrpeer_plain_unmap,				\
	GDRPEER_DMABUF_COMMON_OPS

/* Regions with ops: their provider maps them for each importer. */
#define GDRPEER_MAPPED_OPS						\
	.attach = gdrpeer_mapped_attach,				\
	.detach = gdrpeer_mapped_detach,				\
	.pin = gdrpeer_mapped_pin,					\
	.map_dma_buf = gdrpeer_mapped_map,				\
	.unmap_dma_buf = gdrpeer_mapped_unmap,				\
	GDRPEER_DMABUF_COMMON_OPS

/*
 * Without .vmap unless the administrator serves kernel CPU importers
 * (dmabuf_vmap=1): then dma_buf_vmap() answers -EINVAL in the core, with
 * no exporter call, where an exporter's refusal is a WARN_ON_ONCE on the
 * kernels of the test bed (6.1, 6.12).
 */
static const struct dma_buf_ops gdrpeer_plain_dmabuf_ops = {
	GDRPEER_PLAIN_OPS,
};

static const struct dma_buf_ops gdrpeer_mapped_dmabuf_ops = {
	GDRPEER_MAPPED_OPS,
};

#ifdef GDRPEER_HAVE_DMABUF_VMAP
static const struct dma_buf_ops gdrpeer_plain_vmap_dmabuf_ops = {
	GDRPEER_PLAIN_OPS,
	GDRPEER_DMABUF_VMAP_OPS
};

static const struct dma_buf_ops gdrpeer_mapped_vmap_dmabuf_ops = {
	GDRPEER_MAPPED_OPS,
	GDRPEER_DMABUF_VMAP_OPS
};
#endif

/*
 * Kernel CPU access (vmap) for importers that copy with the CPU, such as
 * the test bed's soft-RoCE; RDMA NICs never need it.  Off by default: a
 * kernel user of dma_buf_vmap() needs no attachment, so it may be one that
 * revocation cannot tell (videobuf2-vmalloc), see gdrpeer_dmabuf_vmap().
 * Read at each EXPORT: dma-bufs keep the ops they were exported with.
 */
static bool dmabuf_vmap;
module_param(dmabuf_vmap, bool, 0644);
MODULE_PARM_DESC(dmabuf_vmap,
		 "serve dma_buf_vmap() to importers that hold a dynamic attachment (CPU importers such as soft-RoCE); default off");

static const struct dma_buf_ops *gdrpeer_dmabuf_ops_for(struct gdrpeer_region *r)
{
#ifdef GDRPEER_HAVE_DMABUF_VMAP
	if (READ_ONCE(dmabuf_vmap))
		return r->ops ? &gdrpeer_mapped_vmap_dmabuf_ops :
				&gdrpeer_plain_vmap_dmabuf_ops;
#endif
	return r->ops ? &gdrpeer_mapped_dmabuf_ops : &gdrpeer_plain_dmabuf_ops;
}

/* ---- test-only: EXPORT racing revocation, made deterministic ---------- */

#ifdef GDRPEER_TEST_HOOKS
/*
 * Built only with GDRPEER_TEST_HOOKS=1 (gdrpeer-testhooks.ko of the
 * emulated node; never in a package).  One EXPORT and one revocation meet
 * at fixed points, so that a selftest exports inside a revocation without
 * relying on preemption:
 *   the test writes ARMED;
 *   the next export (past its ioctl's revoked check, before its dma-buf is
 *   listed) sets HELD and waits;
 *   a revocation, after its first phase, sees HELD, sets RELEASED and
 *   waits for the export to list its dma-buf (or be refused): LISTED;
 *   the export then keeps its dma-buf until that revocation is over
 *   (DONE), so a walk that met it still finds it live, and sets OFF.
 * Every wait is bounded (a test that never unbinds costs 10 s, no hang).
 */
enum {
	GDRPEER_TH_OFF,
	GDRPEER_TH_ARMED,
	GDRPEER_TH_HELD,
	GDRPEER_TH_RELEASED,
	GDRPEER_TH_LISTED,
	GDRPEER_TH_DONE,
};

static int test_export_hold;
module_param(test_export_hold, int, 0600);
MODULE_PARM_DESC(test_export_hold,
		 "TEST-ONLY (GDRPEER_TEST_HOOKS builds): 1 holds the next EXPORT until a revocation meets it");
static DECLARE_WAIT_QUEUE_HEAD(gdrpeer_th_wait);
#define GDRPEER_TH_TIMEOUT (10 * HZ)

static void gdrpeer_th_set(int state)
{
	WRITE_ONCE(test_export_hold, state);
	wake_up_all(&gdrpeer_th_wait);
}

static bool gdrpeer_th_wait_for(int state)
{
	return wait_event_timeout(gdrpeer_th_wait,
				  READ_ONCE(test_export_hold) == state,
				  GDRPEER_TH_TIMEOUT) != 0;
}

/* An export, before it lists its dma-buf: true when it is the held one. */
static bool gdrpeer_th_export_hold(void)
{
	if (cmpxchg(&test_export_hold, GDRPEER_TH_ARMED, GDRPEER_TH_HELD) !=
	    GDRPEER_TH_ARMED)
		return false;
	wake_up_all(&gdrpeer_th_wait);
	if (!gdrpeer_th_wait_for(GDRPEER_TH_RELEASED))
		pr_warn("test_export_hold: no revocation met the held export\n");
	return true;
}

/* The held export listed its dma-buf (or was refused). */
static void gdrpeer_th_export_listed(bool held)
{
	if (!held)
		return;
	gdrpeer_th_set(GDRPEER_TH_LISTED);
	gdrpeer_th_wait_for(GDRPEER_TH_DONE);
	gdrpeer_th_set(GDRPEER_TH_OFF);
}

/* A revocation after its first phase: true when it met the held export. */
static bool gdrpeer_th_revoke_meet(void)
{
	if (cmpxchg(&test_export_hold, GDRPEER_TH_HELD, GDRPEER_TH_RELEASED) !=
	    GDRPEER_TH_HELD)
		return false;
	wake_up_all(&gdrpeer_th_wait);
	gdrpeer_th_wait_for(GDRPEER_TH_LISTED);
	return true;
}

static void gdrpeer_th_revoke_done(bool met)
{
	if (met)
		gdrpeer_th_set(GDRPEER_TH_DONE);
}
#else
static inline bool gdrpeer_th_export_hold(void) { return false; }
static inline void gdrpeer_th_export_listed(bool held) { }
static inline bool gdrpeer_th_revoke_meet(void) { return false; }
static inline void gdrpeer_th_revoke_done(bool met) { }
#endif /* GDRPEER_TEST_HOOKS */

/**
 * gdrpeer_dmabuf_export() - a dma-buf of part of a region
 * @r: the region; the dma-buf takes its own reference
 * @offset: first byte, page aligned
 * @length: bytes, page aligned, not 0
 *
 * The caller has validated the range against @r.  The dma-buf joins the
 * region's list, which revocation walks, unless revocation has closed it.
 *
 * Context: Process context.  Sleeps; takes @r->exports_lock.
 * Return: the dma-buf (one reference, owned by the caller) or an ERR_PTR:
 * -ENODEV when @r is being revoked, -ENOMEM, or dma_buf_export()'s error.
 */
struct dma_buf *gdrpeer_dmabuf_export(struct gdrpeer_region *r, u64 offset,
				      u64 length)
{
	DEFINE_DMA_BUF_EXPORT_INFO(exp_info);
	struct gdrpeer_dmabuf *gb;
	struct dma_buf *dmabuf;
	bool held, closed;

	gb = kzalloc(sizeof(*gb), GFP_KERNEL_ACCOUNT);
	if (!gb)
		return ERR_PTR(-ENOMEM);
	gdrpeer_region_get(r);
	gb->region = r;
	gb->offset = offset;
	gb->length = length;
	atomic_set(&gb->pins, 0);
	atomic_set(&gb->maps, 0);
	atomic_set(&gb->dynamic_attachments, 0);
	init_waitqueue_head(&gb->unmapped);
	INIT_LIST_HEAD(&gb->node);

	exp_info.exp_name = KBUILD_MODNAME;
	exp_info.owner = THIS_MODULE;	/* rmmod refused while it lives */
	exp_info.ops = gdrpeer_dmabuf_ops_for(r);
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
	held = gdrpeer_th_export_hold();
	/*
	 * Listed only while the region's dma-buf revocation has not begun:
	 * it closes the list under this lock before it walks it, so every
	 * dma-buf is either listed before (and the walk meets it) or refused
	 * here.  Nothing is counted in advance.
	 */
	mutex_lock(&r->exports_lock);
	closed = r->exports_closed;
	if (!closed)
		list_add(&gb->node, &r->dmabufs);
	mutex_unlock(&r->exports_lock);
	gdrpeer_th_export_listed(held);
	if (closed) {
		dma_buf_put(dmabuf);	/* its release unlinks nothing */
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

/*
 * Fences of the reservation object: an importer's queued work must end
 * before the memory goes.  Since 6.0 any holder of the dma-buf's fd can
 * add a fence (DMA_BUF_IOCTL_IMPORT_SYNC_FILE); one that never signals
 * keeps this waiting, said in the log every GDRPEER_REVOKE_WARN_SECS
 * (giving the memory back under queued work would be worse: see
 * docs/driver.md, "Revocation").
 */
static void gdrpeer_dmabuf_wait_fences(struct gdrpeer_dmabuf *gb)
{
	unsigned int waited = 0;

	while (!gdrpeer_resv_wait(gb->dmabuf->resv,
				  GDRPEER_REVOKE_WARN_SECS * HZ)) {
		waited += GDRPEER_REVOKE_WARN_SECS;
		pr_warn("revoked dma-buf (%llu bytes): still waiting after %u s for fences of its reservation object (queued importer work, or a fence added with DMA_BUF_IOCTL_IMPORT_SYNC_FILE) before the memory is given back\n",
			gb->length, waited);
	}
}

static void gdrpeer_dmabuf_revoke_one(struct gdrpeer_dmabuf *gb)
{
	struct dma_buf *dmabuf = gb->dmabuf;
	unsigned int waited = 0;

	dma_resv_lock(dmabuf->resv, NULL);
#ifdef GDRPEER_HAVE_DMA_BUF_INVALIDATE_MAPPINGS
	dma_buf_invalidate_mappings(dmabuf);
#else
	dma_buf_move_notify(dmabuf);
#endif
	dma_resv_unlock(dmabuf->resv);
	gdrpeer_dmabuf_wait_fences(gb);

	/* every CPU mapping of the dma-buf goes through its file */
	unmap_mapping_range(dmabuf->file->f_mapping, 0, 0, 1);

	/*
	 * Dynamic importers unmap (and vunmap) in move_notify or right
	 * after; a pinned one keeps its mapping until it detaches, and the
	 * memory must not be given back before.  A vmap left with no
	 * dynamic attachment belongs to a user nobody can tell (one that
	 * shared another importer's vmap): said as such.
	 */
	while (!wait_event_timeout(gb->unmapped, !atomic_read(&gb->maps) &&
				   !READ_ONCE(gb->vaddr),
				   GDRPEER_REVOKE_WARN_SECS * HZ)) {
		waited += GDRPEER_REVOKE_WARN_SECS;
		pr_warn("revoked dma-buf (%llu bytes): still waiting after %u s for %d importer mapping(s) (%d pinned)%s to go before the memory is given back\n",
			gb->length, waited, atomic_read(&gb->maps),
			atomic_read(&gb->pins),
			!READ_ONCE(gb->vaddr) ? "" :
			atomic_read(&gb->dynamic_attachments) ?
			" and a kernel vmap" :
			" and a kernel vmap whose user holds no attachment and cannot be told");
	}
}

/*
 * The next dma-buf of @r that no revocation has taken yet, with a file
 * reference, or NULL when none is left.  Taken ones go to the tail and
 * new ones cannot come (@exports_closed), so the first entry tells.  A
 * dma-buf whose last reference is already gone is taken and skipped: its
 * release (waiting on exports_lock) finds no importer and no mapping.
 */
static struct gdrpeer_dmabuf *gdrpeer_dmabuf_take_next(struct gdrpeer_region *r)
{
	struct gdrpeer_dmabuf *gb;

	lockdep_assert_held(&r->dmabuf_revoke_lock);
	mutex_lock(&r->exports_lock);
	WARN_ON(!r->exports_closed);
	while ((gb = list_first_entry_or_null(&r->dmabufs,
					      struct gdrpeer_dmabuf, node))) {
		if (gb->revoke_taken) {
			gb = NULL;
			break;
		}
		gb->revoke_taken = true;
		list_move_tail(&gb->node, &r->dmabufs);
		if (gdrpeer_dmabuf_get_unless_dying(gb->dmabuf))
			break;
	}
	mutex_unlock(&r->exports_lock);
	return gb;
}

/**
 * gdrpeer_dmabuf_revoke_region() - revoke every dma-buf of a region
 * @r: the region, whose @revoked is set already
 *
 * Listed in gdrpeer_revokers[] (exporter.h), run by
 * gdrpeer_region_revoke() after @r->revoked is set, so that no new
 * attachment, map or mmap succeeds.
 * First the list is closed: an export that has not listed its dma-buf
 * yet is refused (gdrpeer_dmabuf_export).  Then the dma-bufs are taken
 * one at a time under exports_lock and revoked with no lock of ours but
 * dmabuf_revoke_lock held, until none is left: no count taken in advance,
 * no allocation, one that is released meanwhile simply leaves the list.
 * dmabuf_revoke_lock makes a second revocation of @r (idempotent) return
 * only once the first one is complete.
 *
 * Context: Process context.  Sleeps, possibly for long (importers that
 * hold mappings, fences); takes @r->dmabuf_revoke_lock, @r->exports_lock
 * and each dma-buf's reservation lock, so the caller holds no lock of
 * ours.
 */
void gdrpeer_dmabuf_revoke_region(struct gdrpeer_region *r)
{
	struct gdrpeer_dmabuf *gb;
	bool met;

	might_sleep();
	mutex_lock(&r->dmabuf_revoke_lock);
	mutex_lock(&r->exports_lock);
	r->exports_closed = true;
	mutex_unlock(&r->exports_lock);
	met = gdrpeer_th_revoke_meet();

	while ((gb = gdrpeer_dmabuf_take_next(r))) {
		gdrpeer_dmabuf_revoke_one(gb);
		dma_buf_put(gb->dmabuf);
	}
	mutex_unlock(&r->dmabuf_revoke_lock);
	gdrpeer_th_revoke_done(met);
}

// SPDX-License-Identifier: GPL-2.0
/*
 * gdrpeer_edu_hca.ko - test only: QEMU's edu device as a stand-in HCA.
 *
 * It imports a dma-buf the way ib_umem_dmabuf_get() does (dynamic attach
 * with allow_peer2peer, map under the reservation lock, unmap on
 * move_notify) or, on request, the way ib_umem_dmabuf_get_pinned() does
 * (pinned, move_notify ignored), using edu's struct device, so the
 * addresses it gets
 * went through edu's IOMMU domain.  Then edu's DMA engine writes a pattern
 * to those addresses and reads it back.  The host checks the bytes in the
 * file behind the "GPU" BAR.
 *
 * edu (QEMU hw/misc/edu.c): BAR0 registers 0x80 source, 0x88 destination,
 * 0x90 count, 0x98 command (bit 0 start/busy, bit 1 direction: 1 = edu
 * buffer -> bus address).  The engine's buffer is at device address
 * 0x40000; transfers stay below 4096 bytes (QEMU 7.2 aborts on 4096).
 * One transfer completes ~100 ms after the command.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/delay.h>
#include <linux/dma-buf.h>
#include <linux/dma-mapping.h>
#include <linux/dma-resv.h>
#include <linux/io.h>
#include <linux/ktime.h>
#include <linux/miscdevice.h>
#include <linux/module.h>
#include <linux/pci.h>
#include <linux/platform_device.h>
#include <linux/scatterlist.h>
#include <linux/slab.h>
#include <linux/sysfs.h>
#include <linux/wait.h>
#include <linux/uaccess.h>
#include <linux/xarray.h>

#include "gdrpeer_compat.h"
#include "gdrpeer_edu_hca.h"
#include "gdrpeer_stub_file.h"

GDRPEER_IMPORT_DMA_BUF_NS()

#define EDU_REG_ID		0x00
#define EDU_REG_DMA_SRC		0x80
#define EDU_REG_DMA_DST		0x88
#define EDU_REG_DMA_CNT		0x90
#define EDU_REG_DMA_CMD		0x98
#define EDU_CMD_START		0x1
#define EDU_CMD_TO_BUS		0x2	/* edu buffer -> bus address */
#define EDU_BUF_ADDR		0x40000
#define EDU_ID_LOW		0xed	/* ID register: 0x010000ed */
#define EDU_DMA_TIMEOUT_MS	5000

struct edu_hca {
	struct pci_dev *pdev;
	void __iomem *regs;
	/* bounce buffers in RAM: pattern, poison, read-back */
	void *pat, *poison, *back;
	dma_addr_t pat_dma, poison_dma, back_dma;
	struct miscdevice misc;
	/*
	 * edu has one DMA engine (mutex, sleeps): held around each chunk of
	 * transfers and while edu's max_seg is changed for a map.  See the
	 * lock order above struct edu_import.
	 */
	struct mutex lock;
	/* a device that is not PCI, for EDU_HCA_IMPORT_NON_PCI */
	struct platform_device *nonpci;
	atomic_t imports;		/* gauge: attachments held */
	atomic_t mapped;		/* gauge: of those, mapped */
	atomic64_t revocations;		/* total: mappings dropped on request */
};

static struct edu_hca *edu_hca;	/* the one bound edu */
static DEFINE_MUTEX(edu_hca_bind_lock);	/* protects @edu_hca */

/* ---- edu DMA engine ---------------------------------------------------- */

static int edu_dma(struct edu_hca *e, u64 src, u64 dst, u32 len, bool to_bus,
		   u64 *transfers)
{
	unsigned long deadline = jiffies + msecs_to_jiffies(EDU_DMA_TIMEOUT_MS);

	writeq(src, e->regs + EDU_REG_DMA_SRC);
	writeq(dst, e->regs + EDU_REG_DMA_DST);
	writeq(len, e->regs + EDU_REG_DMA_CNT);
	writeq(EDU_CMD_START | (to_bus ? EDU_CMD_TO_BUS : 0),
	       e->regs + EDU_REG_DMA_CMD);
	(*transfers)++;
	while (readq(e->regs + EDU_REG_DMA_CMD) & EDU_CMD_START) {
		if (time_after(jiffies, deadline)) {
			dev_err(&e->pdev->dev, "edu DMA did not finish\n");
			return -ETIMEDOUT;
		}
		msleep(10);
	}
	return 0;
}

static u64 splitmix64(u64 z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Bytes [pos, pos + len) of the pattern of @seed (pos 8-aligned). */
static void edu_pattern(u8 *out, u64 seed, u64 pos, u32 len)
{
	u32 i;

	for (i = 0; i < len; i += 8) {
		u64 k = (pos + i) / 8;
		__le64 w = cpu_to_le64(splitmix64(seed +
					(k + 1) * 0x9e3779b97f4a7c15ull));

		memcpy(out + i, &w, min_t(u32, 8, len - i));
	}
}

/*
 * Write pattern bytes [pos, pos + len) to bus address @addr, read them
 * back and count differences.  Before the read-back the edu buffer gets
 * the inverted pattern, so a read that is blocked cannot look right.
 */
static int edu_write_check(struct edu_hca *e, u64 addr, u64 seed, u64 pos,
			   u32 len, struct edu_hca_dma *req)
{
	u32 i;
	int ret;

	edu_pattern(e->pat, seed, pos, len);
	for (i = 0; i < len; i++)
		((u8 *)e->poison)[i] = ~((u8 *)e->pat)[i];
	memset(e->back, 0, len);

	ret = edu_dma(e, e->pat_dma, EDU_BUF_ADDR, len, false, &req->transfers);
	if (!ret)
		ret = edu_dma(e, EDU_BUF_ADDR, addr, len, true, &req->transfers);
	if (!ret)
		ret = edu_dma(e, e->poison_dma, EDU_BUF_ADDR, len, false,
			      &req->transfers);
	if (!ret)
		ret = edu_dma(e, addr, EDU_BUF_ADDR, len, false, &req->transfers);
	if (!ret)
		ret = edu_dma(e, EDU_BUF_ADDR, e->back_dma, len, true,
			      &req->transfers);
	if (ret)
		return ret;
	for (i = 0; i < len; i++)
		if (((u8 *)e->back)[i] != ((u8 *)e->pat)[i])
			req->mismatches++;
	return 0;
}

/* ---- for gdrpeer_peerhost.ko -------------------------------------------
 *
 * The peer-memory host (the role of OFED's ib_core) maps a client's memory
 * for edu and moves bytes with edu's engine: edu's struct device and one
 * pattern write + read-back to a DMA address.  Both under
 * edu_hca_bind_lock, so that edu cannot be unbound in between.
 */

/* edu's device with a reference (put_device), or NULL when none is bound */
struct device *gdrpeer_edu_hca_dma_device(void)
{
	struct device *dev = NULL;

	mutex_lock(&edu_hca_bind_lock);
	if (edu_hca)
		dev = get_device(&edu_hca->pdev->dev);
	mutex_unlock(&edu_hca_bind_lock);
	return dev;
}
EXPORT_SYMBOL_GPL(gdrpeer_edu_hca_dma_device);

/*
 * Pattern bytes [pos, pos + len) of @seed to bus address @addr and back
 * (edu_write_check); len <= EDU_HCA_CHUNK, 8-aligned pos.  -ENODEV: no edu.
 */
int gdrpeer_edu_hca_write_check(u64 addr, u64 seed, u64 pos, u32 len,
				u64 *mismatches, u64 *transfers)
{
	struct edu_hca_dma req = { };
	int ret = -ENODEV;

	if (!len || len > EDU_HCA_CHUNK || len % 8 || pos % 8)
		return -EINVAL;
	mutex_lock(&edu_hca_bind_lock);
	if (edu_hca) {
		mutex_lock(&edu_hca->lock);
		ret = edu_write_check(edu_hca, addr, seed, pos, len, &req);
		mutex_unlock(&edu_hca->lock);
	}
	mutex_unlock(&edu_hca_bind_lock);
	*mismatches += req.mismatches;
	*transfers += req.transfers;
	return ret;
}
EXPORT_SYMBOL_GPL(gdrpeer_edu_hca_write_check);

/* ---- importer ----------------------------------------------------------
 *
 * Every attachment of this module is a struct edu_import (importer_priv):
 * kept ones (EDU_HCA_IOCTL_IMPORT, in the file's table) and the short-lived
 * ones of EDU_HCA_IOCTL_DMA / _BENCH.
 *
 * Lock order (who may sleep):
 *   edu_hca.lock (mutex, sleeps; the DMA engine, its bounce buffers and
 *   edu's max_seg) -> dma_buf resv (ww_mutex, sleeps) -> edu_import.state_lock
 *   (spinlock, never held across anything that sleeps).
 * move_notify runs with the resv lock held by the exporter and takes only
 * state_lock; it waits for dma_busy to clear.  dma_busy is set only by the
 * holder of edu_hca.lock while it drives edu, which needs no other lock, so
 * the wait always ends: the DMA path never takes the resv lock while
 * dma_busy is set (nor while it holds edu_hca.lock around a chunk).
 * stub_file.objs (each open file's imports: xarray, its own spinlock) is
 * taken alone.
 */

struct edu_import {
	struct kref ref;
	struct edu_hca *e;
	struct dma_buf *dmabuf;
	struct dma_buf_attachment *attach;
	/* under dmabuf->resv; stays valid while dma_busy; NULL once revoked */
	struct sg_table *sgt;
	bool pinned;
	u64 nents;
	spinlock_t state_lock;	/* protects revoked, dma_busy */
	bool revoked;		/* exporter revoked: no DMA may start */
	bool dma_busy;		/* a chunk is being transferred */
	wait_queue_head_t idle;	/* woken when dma_busy clears */
	atomic64_t dmas_done;
};

static bool edu_import_idle(struct edu_import *im)
{
	bool idle;

	spin_lock(&im->state_lock);
	idle = !im->dma_busy;
	spin_unlock(&im->state_lock);
	return idle;
}

/* Called by the exporter with dmabuf->resv held. */
static void edu_hca_move_notify(struct dma_buf_attachment *attach)
{
	struct edu_import *im = attach->importer_priv;
	struct edu_hca *e = im->e;

	dma_resv_assert_held(attach->dmabuf->resv);
	if (im->pinned) {
		/* what ib_umem_dmabuf_unsupported_move_notify() does */
		dev_warn_ratelimited(&e->pdev->dev,
				     "move_notify on a pinned import: ignored\n");
		return;
	}
	spin_lock(&im->state_lock);
	im->revoked = true;
	spin_unlock(&im->state_lock);
	/* a chunk in flight finishes (<= 5 edu transfers); none starts after */
	wait_event(im->idle, edu_import_idle(im));
	if (im->sgt) {
		/* we are inside the resv lock: the locked unmap is the right one */
		dma_buf_unmap_attachment(attach, im->sgt, DMA_BIDIRECTIONAL);
		im->sgt = NULL;
		atomic_dec(&e->mapped);
		atomic64_inc(&e->revocations);
	}
}

static const struct dma_buf_attach_ops edu_hca_importer_ops = {
	.allow_peer2peer = true,
#if defined(GDRPEER_HAVE_IMPORTER_MOVE_NOTIFY)
	.move_notify = edu_hca_move_notify,
#elif defined(GDRPEER_HAVE_IMPORTER_INVALIDATE_MAPPINGS)
	.invalidate_mappings = edu_hca_move_notify,
#endif
};

/*
 * A pinned import plays a legacy pinned importer (ib_umem_dmabuf_get_pinned).
 * Where move_notify is mandatory it has one that only warns; where the hook
 * is invalidate_mappings (7.x) it is optional, and a pinned importer that
 * cannot give its mapping back leaves it out, which is what makes
 * dma_buf_attach_revocable() say no to the exporter.
 */
static const struct dma_buf_attach_ops edu_hca_pinned_importer_ops = {
	.allow_peer2peer = true,
#if defined(GDRPEER_HAVE_IMPORTER_MOVE_NOTIFY)
	.move_notify = edu_hca_move_notify,
#endif
};

/* Final reference: unmap (unless revoked), unpin, detach, drop the dma-buf. */
static void edu_import_release(struct kref *ref)
{
	struct edu_import *im = container_of(ref, struct edu_import, ref);
	struct edu_hca *e = im->e;

	if (im->attach) {
		dma_resv_lock(im->dmabuf->resv, NULL);
		if (im->sgt) {
			dma_buf_unmap_attachment(im->attach, im->sgt,
						 DMA_BIDIRECTIONAL);
			im->sgt = NULL;
			atomic_dec(&e->mapped);
		}
		if (im->pinned)
			dma_buf_unpin(im->attach);
		dma_resv_unlock(im->dmabuf->resv);
		dma_buf_detach(im->dmabuf, im->attach);
		atomic_dec(&e->imports);
	}
	if (im->dmabuf)
		dma_buf_put(im->dmabuf);
	kfree(im);
}

static void edu_import_put(struct edu_import *im)
{
	kref_put(&im->ref, edu_import_release);
}

static void edu_import_put_obj(void *im)
{
	edu_import_put(im);
}

/*
 * DYNAMIC: mapped under the reservation lock, unmapped in move_notify
 * (ib_umem_dmabuf_get, mlx5 ODP).  PINNED: pinned and mapped once,
 * move_notify only warns (ib_umem_dmabuf_get_pinned: EFA, irdma, bnxt_re).
 */
enum edu_attach_kind { EDU_ATTACH_DYNAMIC, EDU_ATTACH_PINNED, EDU_ATTACH_STATIC,
		       EDU_ATTACH_NON_PCI };

/*
 * Attach and map (and, for EDU_ATTACH_PINNED, pin) the dma-buf behind @fd
 * with edu's device.  EDU_ATTACH_NON_PCI only attaches
 * (with a platform device) and detaches again: *out stays NULL.
 */
static int edu_import_create(struct edu_hca *e, int fd, u64 max_seg,
			     enum edu_attach_kind kind, struct edu_import **out,
			     u64 *attach_ns, u64 *map_ns)
{
	struct device *dev = &e->pdev->dev;
	struct dma_buf_attachment *attach;
	unsigned int saved_max_seg = 0;
	struct edu_import *im;
	struct sg_table *sgt;
	ktime_t t0;
	int ret;

	*out = NULL;
	if (max_seg && (max_seg > UINT_MAX || max_seg < PAGE_SIZE))
		return -EINVAL;
	im = kzalloc(sizeof(*im), GFP_KERNEL);
	if (!im)
		return -ENOMEM;
	kref_init(&im->ref);
	im->e = e;
	spin_lock_init(&im->state_lock);
	init_waitqueue_head(&im->idle);
	atomic64_set(&im->dmas_done, 0);
	im->dmabuf = dma_buf_get(fd);
	if (IS_ERR(im->dmabuf)) {
		ret = PTR_ERR(im->dmabuf);
		im->dmabuf = NULL;
		goto err;
	}

	if (kind == EDU_ATTACH_NON_PCI) {
		attach = dma_buf_dynamic_attach(im->dmabuf, &e->nonpci->dev,
						&edu_hca_importer_ops, im);
		if (IS_ERR(attach)) {
			ret = PTR_ERR(attach);
			goto err;
		}
		dma_buf_detach(im->dmabuf, attach);
		edu_import_put(im);
		return 0;
	}

	/* edu's max_seg is device state: changed and restored under e->lock */
	mutex_lock(&e->lock);
	if (max_seg) {
		saved_max_seg = dma_get_max_seg_size(dev);
		dma_set_max_seg_size(dev, (unsigned int)max_seg);
	}
	t0 = ktime_get();
	if (kind == EDU_ATTACH_STATIC)
		attach = dma_buf_attach(im->dmabuf, dev);
	else
		attach = dma_buf_dynamic_attach(im->dmabuf, dev,
						kind == EDU_ATTACH_PINNED ?
						&edu_hca_pinned_importer_ops :
						&edu_hca_importer_ops, im);
	if (attach_ns)
		*attach_ns = ktime_to_ns(ktime_sub(ktime_get(), t0));
	if (IS_ERR(attach)) {
		ret = PTR_ERR(attach);
		goto err_unlock;
	}
	im->attach = attach;
	atomic_inc(&e->imports);

	t0 = ktime_get();
	dma_resv_lock(im->dmabuf->resv, NULL);
	ret = kind == EDU_ATTACH_PINNED ? dma_buf_pin(attach) : 0;
	if (!ret) {
		im->pinned = kind == EDU_ATTACH_PINNED;
		sgt = dma_buf_map_attachment(attach, DMA_BIDIRECTIONAL);
		if (IS_ERR(sgt)) {
			ret = PTR_ERR(sgt);
		} else {
			im->sgt = sgt;
			im->nents = sgt->nents;
			atomic_inc(&e->mapped);
		}
	}
	dma_resv_unlock(im->dmabuf->resv);
	if (map_ns)
		*map_ns = ktime_to_ns(ktime_sub(ktime_get(), t0));
err_unlock:
	if (max_seg)
		dma_set_max_seg_size(dev, saved_max_seg);
	mutex_unlock(&e->lock);
	if (ret)
		goto err;
	*out = im;
	return 0;
err:
	edu_import_put(im);
	return ret;
}

/* DMA address of byte @pos of the mapping and bytes left in its entry. */
static int edu_sg_lookup(struct sg_table *sgt, u64 pos, u64 *addr, u64 *left)
{
	struct scatterlist *sg;
	unsigned int i;

	for_each_sgtable_dma_sg(sgt, sg, i) {
		u64 len = sg_dma_len(sg);

		if (pos < len) {
			*addr = sg_dma_address(sg) + pos;
			*left = len - pos;
			return 0;
		}
		pos -= len;
	}
	return -EINVAL;
}

/*
 * Pattern of @seed into [offset, offset + length) of the import, chunk by
 * chunk; each chunk starts only while the import is not revoked and keeps
 * its mapping alive (dma_busy) until its transfers are done.  @raw_phys
 * (non-zero) replaces the mapped addresses (the negative test).
 */
static int edu_import_write(struct edu_import *im, u64 offset, u64 length,
			    u64 seed, u64 raw_phys, struct edu_hca_dma *req,
			    u64 *done_out)
{
	struct edu_hca *e = im->e;
	u64 done = 0;
	int ret = 0;

	if (offset > im->dmabuf->size || length > im->dmabuf->size - offset)
		return -EINVAL;
	while (done < length) {
		u64 addr, left, n = 0;

		mutex_lock(&e->lock);
		spin_lock(&im->state_lock);
		if (im->revoked || !im->sgt) {
			spin_unlock(&im->state_lock);
			mutex_unlock(&e->lock);
			ret = -ENODEV;
			break;
		}
		im->dma_busy = true;
		spin_unlock(&im->state_lock);

		ret = edu_sg_lookup(im->sgt, offset + done, &addr, &left);
		if (!ret) {
			if (!done)
				req->first_dma = addr;
			if (raw_phys) {
				/* never mapped for edu: blocked under translation */
				addr = raw_phys + done;
				left = length - done;
			}
			/* a chunk never crosses an sg entry: they need not be adjacent */
			n = min3(left, length - done, (u64)EDU_HCA_CHUNK);
			ret = edu_write_check(e, addr, seed, done, (u32)n, req);
		}

		spin_lock(&im->state_lock);
		im->dma_busy = false;
		spin_unlock(&im->state_lock);
		wake_up(&im->idle);
		mutex_unlock(&e->lock);
		if (ret)
			break;
		done += n;
	}
	*done_out = done;
	return ret;
}

/* Per open file: the table of kept imports (gdrpeer_stub_file.h), dev = edu */

static struct edu_import *edu_file_get(struct stub_file *f, u32 id)
{
	return stub_file_get(f, id, offsetof(struct edu_import, ref));
}

/* ---- ioctls ------------------------------------------------------------ */

static int edu_hca_ioc_dma(struct edu_hca *e, struct edu_hca_dma *req)
{
	struct edu_import *im;
	u64 done;
	int ret;

	if (req->reserved[0] || req->reserved[1] ||
	    (req->flags & ~EDU_HCA_DMA_RAW_PHYS) || !req->length ||
	    req->length > EDU_HCA_MAX_LEN || req->length % 8 ||
	    req->offset % 8)
		return -EINVAL;
	if ((req->flags & EDU_HCA_DMA_RAW_PHYS) && !req->raw_phys)
		return -EINVAL;
	req->nents = 0;
	req->mismatches = 0;
	req->transfers = 0;

	ret = edu_import_create(e, req->dmabuf_fd, req->max_seg,
				EDU_ATTACH_DYNAMIC, &im, NULL, NULL);
	if (ret)
		return ret;
	req->nents = im->nents;
	ret = edu_import_write(im, req->offset, req->length, req->seed,
			       (req->flags & EDU_HCA_DMA_RAW_PHYS) ?
			       req->raw_phys : 0, req, &done);
	edu_import_put(im);
	return ret;
}

static int edu_hca_ioc_bench(struct edu_hca *e, struct edu_hca_bench *req)
{
	struct edu_import *im;
	struct scatterlist *sg;
	unsigned int i;
	u64 max_seg;
	ktime_t t0;
	int ret;

	if (req->reserved[0] || req->reserved[1] ||
	    (req->flags & ~EDU_HCA_BENCH_STATIC_ATTACH))
		return -EINVAL;
	ret = edu_import_create(e, req->dmabuf_fd, req->max_seg,
				(req->flags & EDU_HCA_BENCH_STATIC_ATTACH) ?
				EDU_ATTACH_STATIC : EDU_ATTACH_DYNAMIC, &im,
				&req->attach_ns, &req->map_ns);
	if (ret)
		return ret;
	/* the value in force while it was mapped */
	max_seg = req->max_seg ? req->max_seg : dma_get_max_seg_size(&e->pdev->dev);
	req->max_seg = max_seg;
	req->nents = im->nents;
	req->bytes = 0;
	dma_resv_lock(im->dmabuf->resv, NULL);
	if (im->sgt) {
		for_each_sgtable_dma_sg(im->sgt, sg, i) {
			if (!PAGE_ALIGNED(sg_dma_address(sg)) ||
			    !PAGE_ALIGNED(sg_dma_len(sg)) ||
			    sg_dma_len(sg) > max_seg) {
				dev_err(&e->pdev->dev,
					"sg entry %u: addr %#llx len %u breaks the rules (max %llu)\n",
					i, (u64)sg_dma_address(sg),
					sg_dma_len(sg), max_seg);
				ret = -EPROTO;
			}
			req->bytes += sg_dma_len(sg);
		}
	} else {
		ret = -ENODEV;	/* revoked while we looked */
	}
	dma_resv_unlock(im->dmabuf->resv);
	t0 = ktime_get();
	edu_import_put(im);
	req->unmap_ns = ktime_to_ns(ktime_sub(ktime_get(), t0));
	return ret;
}

static int edu_hca_ioc_import(struct stub_file *f, struct edu_hca_import *req)
{
	struct edu_import *im;
	u32 id;
	int ret;

	if (req->reserved[0] || req->reserved[1] || req->pad0 ||
	    (req->flags & ~(EDU_HCA_IMPORT_NON_PCI | EDU_HCA_IMPORT_PINNED)))
		return -EINVAL;
	req->id = 0;
	req->size = 0;
	req->nents = 0;
	req->first_dma = 0;
	ret = edu_import_create(f->dev, req->dmabuf_fd, req->max_seg,
				(req->flags & EDU_HCA_IMPORT_NON_PCI) ?
				EDU_ATTACH_NON_PCI :
				(req->flags & EDU_HCA_IMPORT_PINNED) ?
				EDU_ATTACH_PINNED : EDU_ATTACH_DYNAMIC, &im,
				NULL, NULL);
	if (ret || !im)
		return ret;
	req->size = im->dmabuf->size;
	req->nents = im->nents;
	if (im->sgt && im->sgt->nents)
		req->first_dma = sg_dma_address(im->sgt->sgl);
	/*
	 * Ids from 1, asked for explicitly: callers take 0 for "no import", and
	 * XA_FLAGS_ALLOC1 alone did not keep 0 out on 6.1 (the fuzzer lost an
	 * import that edu had filed under id 0).
	 */
	ret = xa_alloc(&f->objs, &id, im, XA_LIMIT(1, INT_MAX), GFP_KERNEL);
	if (ret) {
		edu_import_put(im);
		return ret;
	}
	req->id = id;
	return 0;
}

static int edu_hca_ioc_import_dma(struct stub_file *f,
				  struct edu_hca_import_dma *req)
{
	struct edu_hca_dma acc = { 0 };
	struct edu_import *im;
	int ret;

	req->done = 0;
	req->mismatches = 0;
	req->transfers = 0;
	if (req->reserved[0] || req->reserved[1] || req->flags ||
	    !req->length || req->length > EDU_HCA_MAX_LEN || req->length % 8 ||
	    req->offset % 8)
		return -EINVAL;
	im = edu_file_get(f, req->id);
	if (!im)
		return -ENOENT;
	ret = edu_import_write(im, req->offset, req->length, req->seed, 0,
			       &acc, &req->done);
	req->mismatches = acc.mismatches;
	req->transfers = acc.transfers;
	if (!ret)
		atomic64_inc(&im->dmas_done);
	edu_import_put(im);
	return ret;
}

static int edu_hca_ioc_unimport(struct stub_file *f, struct edu_hca_unimport *req)
{
	struct edu_import *im;

	if (req->pad0 || req->reserved[0] || req->reserved[1] ||
	    req->reserved[2])
		return -EINVAL;
	im = xa_erase(&f->objs, req->id);
	if (!im)
		return -ENOENT;
	/* a DMA of another thread on it holds its own reference */
	edu_import_put(im);
	return 0;
}

static int edu_hca_ioc_import_state(struct stub_file *f,
				    struct edu_hca_import_state *req)
{
	struct edu_import *im;

	if (req->reserved[0] || req->reserved[1] || req->reserved[2])
		return -EINVAL;
	im = edu_file_get(f, req->id);
	if (!im)
		return -ENOENT;
	spin_lock(&im->state_lock);
	req->revoked = im->revoked;
	spin_unlock(&im->state_lock);
	dma_resv_lock(im->dmabuf->resv, NULL);
	req->nents = im->sgt ? im->nents : 0;
	dma_resv_unlock(im->dmabuf->resv);
	req->dmas_done = atomic64_read(&im->dmas_done);
	edu_import_put(im);
	return 0;
}

/* Pattern to a bus address nobody mapped for this call (see the header). */
static int edu_hca_ioc_bus_dma(struct edu_hca *e, struct edu_hca_bus_dma *req)
{
	struct edu_hca_dma acc = { 0 };
	u64 done = 0;
	int ret = 0;

	req->mismatches = 0;
	req->transfers = 0;
	if (req->reserved[0] || req->reserved[1] || req->flags || req->pad0 ||
	    !req->bus_addr || req->bus_addr % 8 || !req->length ||
	    req->length > EDU_HCA_MAX_LEN || req->length % 8 ||
	    req->bus_addr > U64_MAX - req->length)
		return -EINVAL;
	while (done < req->length && !ret) {
		u32 n = (u32)min_t(u64, req->length - done, EDU_HCA_CHUNK);

		mutex_lock(&e->lock);
		ret = edu_write_check(e, req->bus_addr + done, req->seed, done,
				      n, &acc);
		mutex_unlock(&e->lock);
		done += n;
	}
	req->mismatches = acc.mismatches;
	req->transfers = acc.transfers;
	return ret;
}

static long edu_hca_ioctl(struct file *filp, unsigned int cmd,
			  unsigned long arg)
{
	struct stub_file *f = filp->private_data;
	struct edu_hca *e = f->dev;
	void __user *uarg = (void __user *)arg;
	union {
		struct edu_hca_dma dma;
		struct edu_hca_bench bench;
		struct edu_hca_import import;
		struct edu_hca_import_dma import_dma;
		struct edu_hca_unimport unimport;
		struct edu_hca_import_state state;
		struct edu_hca_bus_dma bus_dma;
	} u;
	size_t size;
	int ret;

	switch (cmd) {
	case EDU_HCA_IOCTL_DMA:
	case EDU_HCA_IOCTL_BENCH:
	case EDU_HCA_IOCTL_IMPORT:
	case EDU_HCA_IOCTL_IMPORT_DMA:
	case EDU_HCA_IOCTL_UNIMPORT:
	case EDU_HCA_IOCTL_IMPORT_STATE:
	case EDU_HCA_IOCTL_BUS_DMA:
		size = _IOC_SIZE(cmd);
		break;
	default:
		return -ENOTTY;
	}
	if (copy_from_user(&u, uarg, size))
		return -EFAULT;
	switch (cmd) {
	case EDU_HCA_IOCTL_DMA:
		ret = edu_hca_ioc_dma(e, &u.dma);
		break;
	case EDU_HCA_IOCTL_BENCH:
		ret = edu_hca_ioc_bench(e, &u.bench);
		break;
	case EDU_HCA_IOCTL_IMPORT:
		ret = edu_hca_ioc_import(f, &u.import);
		break;
	case EDU_HCA_IOCTL_IMPORT_DMA:
		ret = edu_hca_ioc_import_dma(f, &u.import_dma);
		break;
	case EDU_HCA_IOCTL_UNIMPORT:
		ret = edu_hca_ioc_unimport(f, &u.unimport);
		break;
	case EDU_HCA_IOCTL_BUS_DMA:
		ret = edu_hca_ioc_bus_dma(e, &u.bus_dma);
		break;
	default:
		ret = edu_hca_ioc_import_state(f, &u.state);
		break;
	}
	if (copy_to_user(uarg, &u, size)) {
		/* the caller cannot learn the id: do not leak the import */
		if (cmd == EDU_HCA_IOCTL_IMPORT && !ret && u.import.id) {
			struct edu_import *im = xa_erase(&f->objs,
							 u.import.id);

			if (im)
				edu_import_put(im);
		}
		return -EFAULT;
	}
	return ret;
}

/* Imports die with the file (stub_file_release). */
static int edu_hca_open(struct inode *inode, struct file *filp)
{
	return stub_file_open(filp, container_of(filp->private_data,
						 struct edu_hca, misc),
			      edu_import_put_obj);
}

static const struct file_operations edu_hca_fops = {
	.owner = THIS_MODULE,
	.open = edu_hca_open,
	.release = stub_file_release,
	.unlocked_ioctl = edu_hca_ioctl,
};

/* ---- sysfs: /sys/class/misc/gdrpeer_edu_hca/ ---------------------------- */

static struct edu_hca *edu_hca_of(struct device *dev)
{
	struct miscdevice *misc = dev_get_drvdata(dev);

	return container_of(misc, struct edu_hca, misc);
}

static ssize_t imports_show(struct device *dev, struct device_attribute *attr,
			    char *buf)
{
	return sysfs_emit(buf, "%d\n", atomic_read(&edu_hca_of(dev)->imports));
}
static DEVICE_ATTR_RO(imports);

static ssize_t mapped_show(struct device *dev, struct device_attribute *attr,
			   char *buf)
{
	return sysfs_emit(buf, "%d\n", atomic_read(&edu_hca_of(dev)->mapped));
}
static DEVICE_ATTR_RO(mapped);

static ssize_t revocations_show(struct device *dev,
				struct device_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "%lld\n",
			  (long long)atomic64_read(&edu_hca_of(dev)->revocations));
}
static DEVICE_ATTR_RO(revocations);

static struct attribute *edu_hca_attrs[] = {
	&dev_attr_imports.attr,
	&dev_attr_mapped.attr,
	&dev_attr_revocations.attr,
	NULL,
};
ATTRIBUTE_GROUPS(edu_hca);

/* ---- PCI driver -------------------------------------------------------- */

static int edu_hca_probe(struct pci_dev *pdev, const struct pci_device_id *id)
{
	struct device *dev = &pdev->dev;
	struct edu_hca *e;
	u32 ident;
	int ret;

	mutex_lock(&edu_hca_bind_lock);
	if (edu_hca) {
		mutex_unlock(&edu_hca_bind_lock);
		dev_info(dev, "another edu is already the stand-in HCA\n");
		return -EBUSY;
	}
	mutex_unlock(&edu_hca_bind_lock);

	e = devm_kzalloc(dev, sizeof(*e), GFP_KERNEL);
	if (!e)
		return -ENOMEM;
	e->pdev = pdev;
	mutex_init(&e->lock);
	ret = pci_enable_device(pdev);
	if (ret)
		return ret;
	ret = pci_request_region(pdev, 0, KBUILD_MODNAME);
	if (ret)
		goto err_disable;
	e->regs = pci_iomap(pdev, 0, 0);
	if (!e->regs) {
		ret = -ENOMEM;
		goto err_release;
	}
	ident = readl(e->regs + EDU_REG_ID);
	if ((ident & 0xff) != EDU_ID_LOW) {
		dev_err(dev, "not an edu device (id %#x)\n", ident);
		ret = -ENODEV;
		goto err_unmap;
	}
	pci_set_master(pdev);
	ret = dma_set_mask_and_coherent(dev, DMA_BIT_MASK(64));
	if (ret) {
		dev_err(dev, "no 64-bit DMA mask (%d)\n", ret);
		goto err_unmap;
	}
	e->pat = dmam_alloc_coherent(dev, EDU_HCA_CHUNK, &e->pat_dma,
				     GFP_KERNEL);
	e->poison = dmam_alloc_coherent(dev, EDU_HCA_CHUNK, &e->poison_dma,
					GFP_KERNEL);
	e->back = dmam_alloc_coherent(dev, EDU_HCA_CHUNK, &e->back_dma,
				      GFP_KERNEL);
	if (!e->pat || !e->poison || !e->back) {
		ret = -ENOMEM;
		goto err_unmap;
	}

	e->misc.minor = MISC_DYNAMIC_MINOR;
	e->misc.name = "gdrpeer_edu_hca";
	e->misc.fops = &edu_hca_fops;
	e->misc.mode = 0600;
	e->misc.groups = edu_hca_groups;
	e->nonpci = platform_device_register_simple("gdrpeer_edu_nonpci",
						    PLATFORM_DEVID_NONE, NULL, 0);
	if (IS_ERR(e->nonpci)) {
		ret = PTR_ERR(e->nonpci);
		goto err_unmap;
	}
	ret = misc_register(&e->misc);
	if (ret) {
		platform_device_unregister(e->nonpci);
		goto err_unmap;
	}
	pci_set_drvdata(pdev, e);
	mutex_lock(&edu_hca_bind_lock);
	edu_hca = e;
	mutex_unlock(&edu_hca_bind_lock);
	dev_info(dev, "edu id %#x is the stand-in HCA (/dev/%s)\n", ident,
		 e->misc.name);
	return 0;

err_unmap:
	pci_clear_master(pdev);
	pci_iounmap(pdev, e->regs);
err_release:
	pci_release_region(pdev, 0);
err_disable:
	pci_disable_device(pdev);
	return ret;
}

static void edu_hca_remove(struct pci_dev *pdev)
{
	struct edu_hca *e = pci_get_drvdata(pdev);

	misc_deregister(&e->misc);
	platform_device_unregister(e->nonpci);
	mutex_lock(&edu_hca_bind_lock);
	edu_hca = NULL;
	mutex_unlock(&edu_hca_bind_lock);
	pci_clear_master(pdev);
	pci_iounmap(pdev, e->regs);
	pci_release_region(pdev, 0);
	pci_disable_device(pdev);
}

static const struct pci_device_id edu_hca_ids[] = {
	{ PCI_DEVICE(0x1234, 0x11e8) },
	{ }
};
MODULE_DEVICE_TABLE(pci, edu_hca_ids);

static struct pci_driver edu_hca_driver = {
	.name = "gdrpeer_edu_hca",
	.id_table = edu_hca_ids,
	.probe = edu_hca_probe,
	.remove = edu_hca_remove,
};
module_pci_driver(edu_hca_driver);

MODULE_DESCRIPTION("gdrpeer test: QEMU edu as a dma-buf importing stand-in HCA");
MODULE_LICENSE("GPL");

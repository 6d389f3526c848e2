// SPDX-License-Identifier: GPL-2.0
/*
 * gdrpeer_edu_hca.ko - test only: QEMU's edu device as a stand-in HCA.
 *
 * It imports a dma-buf exactly the way ib_umem_dmabuf_get_pinned() does
 * (dynamic attach with allow_peer2peer, dma_buf_pin and map under the
 * reservation lock) using edu's struct device, so the addresses it gets
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
#include <linux/scatterlist.h>
#include <linux/slab.h>
#include <linux/uaccess.h>

#include "gdrpeer_compat.h"
#include "gdrpeer_edu_hca.h"

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
	/* one test at a time (mutex, sleeps): edu has one DMA engine */
	struct mutex lock;
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

/* ---- importer ---------------------------------------------------------- */

static void edu_hca_move_notify(struct dma_buf_attachment *attach)
{
	/* a pinned importer: the exporter must never move the buffer */
	WARN(1, "gdrpeer_edu_hca: exporter moved a pinned buffer\n");
}

static const struct dma_buf_attach_ops edu_hca_importer_ops = {
	.allow_peer2peer = true,
#if defined(GDRPEER_HAVE_IMPORTER_MOVE_NOTIFY)
	.move_notify = edu_hca_move_notify,
#elif defined(GDRPEER_HAVE_IMPORTER_INVALIDATE_MAPPINGS)
	.invalidate_mappings = edu_hca_move_notify,
#endif
};

struct edu_import {
	struct dma_buf *dmabuf;
	struct dma_buf_attachment *attach;
	struct sg_table *sgt;
	bool pinned;
	unsigned int saved_max_seg;
	bool max_seg_set;
};

/* Undo edu_import_map in reverse, whatever part of it succeeded. */
static void edu_import_unmap(struct edu_hca *e, struct edu_import *im)
{
	if (im->attach) {
		dma_resv_lock(im->dmabuf->resv, NULL);
		if (im->sgt)
			dma_buf_unmap_attachment(im->attach, im->sgt,
						 DMA_BIDIRECTIONAL);
		if (im->pinned)
			dma_buf_unpin(im->attach);
		dma_resv_unlock(im->dmabuf->resv);
		dma_buf_detach(im->dmabuf, im->attach);
	}
	if (im->max_seg_set)
		dma_set_max_seg_size(&e->pdev->dev, im->saved_max_seg);
	if (im->dmabuf)
		dma_buf_put(im->dmabuf);
}

static int edu_import_map(struct edu_hca *e, int fd, u64 max_seg,
			  bool static_attach, struct edu_import *im,
			  u64 *attach_ns, u64 *map_ns)
{
	struct device *dev = &e->pdev->dev;
	ktime_t t0;
	int ret;

	memset(im, 0, sizeof(*im));
	im->dmabuf = dma_buf_get(fd);
	if (IS_ERR(im->dmabuf)) {
		ret = PTR_ERR(im->dmabuf);
		im->dmabuf = NULL;
		return ret;
	}
	if (max_seg) {
		if (max_seg > UINT_MAX || max_seg < PAGE_SIZE) {
			ret = -EINVAL;
			goto err;
		}
		im->saved_max_seg = dma_get_max_seg_size(dev);
		im->max_seg_set = true;
		dma_set_max_seg_size(dev, (unsigned int)max_seg);
	}

	t0 = ktime_get();
	if (static_attach)
		im->attach = dma_buf_attach(im->dmabuf, dev);
	else
		im->attach = dma_buf_dynamic_attach(im->dmabuf, dev,
						    &edu_hca_importer_ops, e);
	if (attach_ns)
		*attach_ns = ktime_to_ns(ktime_sub(ktime_get(), t0));
	if (IS_ERR(im->attach)) {
		ret = PTR_ERR(im->attach);
		im->attach = NULL;
		goto err;
	}

	/* what ib_umem_dmabuf_get_pinned() does */
	t0 = ktime_get();
	dma_resv_lock(im->dmabuf->resv, NULL);
	ret = dma_buf_pin(im->attach);
	if (!ret) {
		im->pinned = true;
		im->sgt = dma_buf_map_attachment(im->attach, DMA_BIDIRECTIONAL);
		if (IS_ERR(im->sgt)) {
			ret = PTR_ERR(im->sgt);
			im->sgt = NULL;
		}
	}
	dma_resv_unlock(im->dmabuf->resv);
	if (map_ns)
		*map_ns = ktime_to_ns(ktime_sub(ktime_get(), t0));
	if (ret)
		goto err;
	return 0;
err:
	edu_import_unmap(e, im);
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

/* ---- ioctls ------------------------------------------------------------ */

static int edu_hca_ioc_dma(struct edu_hca *e, struct edu_hca_dma *req)
{
	struct edu_import im;
	u64 done = 0;
	int ret;

	if (req->reserved[0] || req->reserved[1] ||
	    (req->flags & ~EDU_HCA_DMA_RAW_PHYS) || !req->length ||
	    req->length > EDU_HCA_MAX_LEN || req->length % 8 ||
	    req->offset % 8)
		return -EINVAL;
	req->nents = 0;
	req->mismatches = 0;
	req->transfers = 0;

	ret = edu_import_map(e, req->dmabuf_fd, req->max_seg, false, &im,
			     NULL, NULL);
	if (ret)
		return ret;
	req->nents = im.sgt->nents;
	if (req->offset > im.dmabuf->size ||
	    req->length > im.dmabuf->size - req->offset) {
		ret = -EINVAL;
		goto out;
	}

	while (done < req->length) {
		u64 addr, left, n;

		ret = edu_sg_lookup(im.sgt, req->offset + done, &addr, &left);
		if (ret)
			goto out;
		if (!done)
			req->first_dma = addr;
		if (req->flags & EDU_HCA_DMA_RAW_PHYS) {
			/* never mapped for edu: blocked under translation */
			addr = req->raw_phys + done;
			left = req->length - done;
		}
		/* a chunk never crosses an sg entry: entries need not be adjacent */
		n = min3(left, req->length - done, (u64)EDU_HCA_CHUNK);
		ret = edu_write_check(e, addr, req->seed, done, (u32)n, req);
		if (ret)
			goto out;
		done += n;
	}
out:
	edu_import_unmap(e, &im);
	return ret;
}

static int edu_hca_ioc_bench(struct edu_hca *e, struct edu_hca_bench *req)
{
	struct edu_import im;
	struct scatterlist *sg;
	unsigned int i;
	u64 max_seg;
	ktime_t t0;
	int ret;

	if (req->reserved[0] || req->reserved[1] ||
	    (req->flags & ~EDU_HCA_BENCH_STATIC_ATTACH))
		return -EINVAL;
	ret = edu_import_map(e, req->dmabuf_fd, req->max_seg,
			     req->flags & EDU_HCA_BENCH_STATIC_ATTACH, &im,
			     &req->attach_ns, &req->map_ns);
	if (ret)
		return ret;
	max_seg = dma_get_max_seg_size(&e->pdev->dev);
	req->max_seg = max_seg;
	req->nents = im.sgt->nents;
	req->bytes = 0;
	for_each_sgtable_dma_sg(im.sgt, sg, i) {
		if (!PAGE_ALIGNED(sg_dma_address(sg)) ||
		    !PAGE_ALIGNED(sg_dma_len(sg)) || sg_dma_len(sg) > max_seg) {
			dev_err(&e->pdev->dev,
				"sg entry %u: addr %#llx len %u breaks the rules (max %llu)\n",
				i, (u64)sg_dma_address(sg), sg_dma_len(sg),
				max_seg);
			ret = -EPROTO;
		}
		req->bytes += sg_dma_len(sg);
	}
	t0 = ktime_get();
	edu_import_unmap(e, &im);
	req->unmap_ns = ktime_to_ns(ktime_sub(ktime_get(), t0));
	return ret;
}

static long edu_hca_ioctl(struct file *filp, unsigned int cmd,
			  unsigned long arg)
{
	struct edu_hca *e = container_of(filp->private_data, struct edu_hca,
					 misc);
	void __user *uarg = (void __user *)arg;
	union {
		struct edu_hca_dma dma;
		struct edu_hca_bench bench;
	} u;
	size_t size;
	int ret;

	switch (cmd) {
	case EDU_HCA_IOCTL_DMA:
	case EDU_HCA_IOCTL_BENCH:
		size = _IOC_SIZE(cmd);
		break;
	default:
		return -ENOTTY;
	}
	if (copy_from_user(&u, uarg, size))
		return -EFAULT;
	mutex_lock(&e->lock);
	if (cmd == EDU_HCA_IOCTL_DMA)
		ret = edu_hca_ioc_dma(e, &u.dma);
	else
		ret = edu_hca_ioc_bench(e, &u.bench);
	mutex_unlock(&e->lock);
	if (copy_to_user(uarg, &u, size))
		return -EFAULT;
	return ret;
}

static const struct file_operations edu_hca_fops = {
	.owner = THIS_MODULE,
	.unlocked_ioctl = edu_hca_ioctl,
};

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
	ret = misc_register(&e->misc);
	if (ret)
		goto err_unmap;
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

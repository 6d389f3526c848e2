// SPDX-License-Identifier: GPL-2.0
/*
 * pcibar provider: device memory = one prefetchable memory BAR of a PCI
 * device chosen by the administrator ("pcibar=BDF[@BAR][,...]" at load
 * time, /sys/class/gdrpeer/gdrpeer/pcibar_bind and pcibar_unbind at run
 * time).  The BAR is carved with the kernel's genalloc.
 *
 * gdrpeer does not become the PCI driver of the device: it claims the BAR
 * with pci_request_region(), which is what fails when another driver
 * owns it, and refuses devices that already have a driver.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": pcibar: " fmt

#include <linux/genalloc.h>
#include <linux/kernel.h>
#include <linux/log2.h>
#include <linux/pci.h>
#include <linux/sizes.h>
#include <linux/slab.h>
#include <linux/string.h>

#include <gdrpeer.h>

#include "gdrpeer_core.h"
#include "provider.h"

/* Smallest BAR worth carving; smaller ones are refused as "too small". */
#define PCIBAR_MIN_SIZE SZ_1M
/* Longest accepted "DDDD:BB:DD.F@N" spec, with room for a newline. */
#define PCIBAR_SPEC_MAX 32

struct pcibar_dev {
	struct gdrpeer_device gdev;
	struct gen_pool *pool;	/* addresses are CPU physical */
	phys_addr_t start;	/* BAR start */
};

/* Serialises bind/unbind (mutex, may sleep); before gdrpeer_devices_lock. */
static DEFINE_MUTEX(pcibar_bind_lock);
/* false while the module loads or unloads: sysfs binds are refused */
static bool pcibar_enabled;

static struct pcibar_dev *to_pcibar(struct gdrpeer_device *gdev)
{
	return container_of(gdev, struct pcibar_dev, gdev);
}

static int pcibar_alloc(struct gdrpeer_device *gdev, struct gdrpeer_region *r)
{
	struct pcibar_dev *pb = to_pcibar(gdev);
	struct genpool_data_align align;
	unsigned long addr;

	/*
	 * Natural alignment up to 2 MiB lets an IOMMU use large pages for
	 * big buffers; smaller buffers stay page aligned and pack tightly.
	 */
	align.align = (int)min_t(u64, rounddown_pow_of_two(r->size), SZ_2M);
	addr = gen_pool_alloc_algo(pb->pool, r->size, gen_pool_first_fit_align,
				   &align);
	if (!addr)
		return -ENOMEM;
	r->dev_offset = addr - pb->start;
	r->range0.phys = addr;
	r->range0.len = r->size;
	r->ranges = &r->range0;
	r->nr_ranges = 1;
	return 0;
}

static void pcibar_free(struct gdrpeer_device *gdev, struct gdrpeer_region *r)
{
	gen_pool_free(to_pcibar(gdev)->pool, (unsigned long)r->range0.phys,
		      r->size);
}

static u64 pcibar_free_bytes(struct gdrpeer_device *gdev)
{
	return gen_pool_avail(to_pcibar(gdev)->pool);
}

static void pcibar_shutdown(struct gdrpeer_device *gdev)
{
	struct pcibar_dev *pb = to_pcibar(gdev);

	gen_pool_destroy(pb->pool);
	pb->pool = NULL;
	pci_release_region(gdev->pdev, gdev->bar);
	pci_disable_device(gdev->pdev);
}

static void pcibar_destroy(struct gdrpeer_device *gdev)
{
	pci_dev_put(gdev->pdev);
	kfree(to_pcibar(gdev));
}

static const struct gdrpeer_provider_ops pcibar_ops = {
	.name = "pcibar",
	.uapi_id = GDRPEER_PROVIDER_PCIBAR,
	.alloc = pcibar_alloc,
	.free = pcibar_free,
	.free_bytes = pcibar_free_bytes,
	.shutdown = pcibar_shutdown,
	.destroy = pcibar_destroy,
};

/*
 * Parse "[DDDD:]BB:DD.F[@N]" with optional trailing newline.  *bar is -1
 * when no BAR was given.
 */
static int pcibar_parse(const char *spec, unsigned int *domain,
			unsigned int *bus, unsigned int *slot,
			unsigned int *fn, int *bar)
{
	char buf[PCIBAR_SPEC_MAX + 1];
	char *at, *s;
	unsigned int n;
	int len;

	len = strscpy(buf, spec, sizeof(buf));
	if (len < 0)
		return -EINVAL;
	s = strim(buf);
	*bar = -1;
	at = strchr(s, '@');
	if (at) {
		*at++ = '\0';
		if (kstrtouint(at, 10, &n) || n >= PCI_STD_NUM_BARS)
			return -EINVAL;
		*bar = (int)n;
	}
	/* kernel sscanf stops at the first mismatch; check with %n */
	if (sscanf(s, "%x:%x:%x.%x%n", domain, bus, slot, fn, &len) == 4 &&
	    (size_t)len == strlen(s)) {
		/* full form */
	} else if (sscanf(s, "%x:%x.%x%n", bus, slot, fn, &len) == 3 &&
		   (size_t)len == strlen(s)) {
		*domain = 0;
	} else {
		return -EINVAL;
	}
	if (*domain > 0xffff || *bus > 0xff || *slot > 0x1f || *fn > 7)
		return -EINVAL;
	return 0;
}

/* Largest prefetchable memory BAR, or -1. */
static int pcibar_pick(struct pci_dev *pdev)
{
	resource_size_t best_size = 0;
	int i, best = -1;

	for (i = 0; i < PCI_STD_NUM_BARS; i++) {
		unsigned long flags = pci_resource_flags(pdev, i);

		if (!(flags & IORESOURCE_MEM) || !(flags & IORESOURCE_PREFETCH))
			continue;
		if (pci_resource_len(pdev, i) > best_size) {
			best_size = pci_resource_len(pdev, i);
			best = i;
		}
	}
	return best;
}

/* Check @bar of @pdev; say why it is refused. */
static int pcibar_check(struct pci_dev *pdev, int bar)
{
	unsigned long flags = pci_resource_flags(pdev, bar);
	resource_size_t len = pci_resource_len(pdev, bar);

	if (!(flags & IORESOURCE_MEM) || !len) {
		pr_err("%s: BAR %d refused: not a memory BAR%s\n",
		       pci_name(pdev), bar,
		       flags & IORESOURCE_IO ? " (I/O port BAR)" :
		       !len ? " (not implemented)" : "");
		return -EINVAL;
	}
	if (len < PCIBAR_MIN_SIZE) {
		pr_err("%s: BAR %d refused: too small (%llu bytes, need at least %u)\n",
		       pci_name(pdev), bar, (unsigned long long)len,
		       PCIBAR_MIN_SIZE);
		return -ENOSPC;
	}
	if (!(flags & IORESOURCE_PREFETCH)) {
		pr_err("%s: BAR %d refused: memory BAR is not prefetchable\n",
		       pci_name(pdev), bar);
		return -EINVAL;
	}
	if (!PAGE_ALIGNED(pci_resource_start(pdev, bar))) {
		pr_err("%s: BAR %d refused: start is not page aligned\n",
		       pci_name(pdev), bar);
		return -EINVAL;
	}
	return 0;
}

static int pcibar_bind_locked(const char *spec)
{
	unsigned int domain, bus, slot, fn;
	struct gdrpeer_device *other;
	struct pci_dev *pdev;
	struct pcibar_dev *pb;
	int bar, ret;

	ret = pcibar_parse(spec, &domain, &bus, &slot, &fn, &bar);
	if (ret) {
		pr_err("cannot parse '%.*s': expected [DDDD:]BB:DD.F[@BAR]\n",
		       PCIBAR_SPEC_MAX, spec);
		return ret;
	}
	pdev = pci_get_domain_bus_and_slot((int)domain, bus,
					   PCI_DEVFN(slot, fn));
	if (!pdev) {
		pr_err("%04x:%02x:%02x.%x refused: no such PCI device\n",
		       domain, bus, slot, fn);
		return -ENODEV;
	}
	other = gdrpeer_device_find_pci(pdev);
	if (other) {
		pr_err("%s refused: already bound to gdrpeer (device %u)\n",
		       pci_name(pdev), other->index);
		gdrpeer_device_put(other);
		ret = -EBUSY;
		goto err_put;
	}
	if (pdev->dev.driver) {
		pr_err("%s refused: already claimed by driver %s\n",
		       pci_name(pdev), pdev->dev.driver->name);
		ret = -EBUSY;
		goto err_put;
	}
	if (bar < 0) {
		bar = pcibar_pick(pdev);
		if (bar < 0) {
			pr_err("%s refused: no prefetchable memory BAR\n",
			       pci_name(pdev));
			ret = -EINVAL;
			goto err_put;
		}
	}
	ret = pcibar_check(pdev, bar);
	if (ret)
		goto err_put;

	pb = kzalloc(sizeof(*pb), GFP_KERNEL);
	if (!pb) {
		ret = -ENOMEM;
		goto err_put;
	}
	ret = pci_enable_device_mem(pdev);
	if (ret) {
		pr_err("%s refused: cannot enable memory decoding (%d)\n",
		       pci_name(pdev), ret);
		goto err_free;
	}
	ret = pci_request_region(pdev, bar, KBUILD_MODNAME);
	if (ret) {
		pr_err("%s: BAR %d refused: already claimed by someone else\n",
		       pci_name(pdev), bar);
		ret = -EBUSY;
		goto err_disable;
	}
	pb->start = pci_resource_start(pdev, bar);
	pb->pool = gen_pool_create(PAGE_SHIFT, dev_to_node(&pdev->dev));
	if (!pb->pool) {
		ret = -ENOMEM;
		goto err_release;
	}
	ret = gen_pool_add(pb->pool, (unsigned long)pb->start,
			   pci_resource_len(pdev, bar), dev_to_node(&pdev->dev));
	if (ret)
		goto err_pool;

	pb->gdev.ops = &pcibar_ops;
	pb->gdev.pdev = pdev;		/* reference from pci_get_... */
	pb->gdev.bar = bar;
	pb->gdev.size = pci_resource_len(pdev, bar);
	/* on failure this calls pcibar_shutdown and pcibar_destroy */
	ret = gdrpeer_device_register(&pb->gdev);
	if (ret) {
		pr_err("%s: registering failed (%d)\n", pci_name(pdev), ret);
		return ret;
	}
	pr_info("%s: BAR %d (%llu MiB) bound as device %u\n", pci_name(pdev),
		bar, pb->gdev.size >> 20, pb->gdev.index);
	return 0;

err_pool:
	gen_pool_destroy(pb->pool);
err_release:
	pci_release_region(pdev, bar);
err_disable:
	pci_disable_device(pdev);
err_free:
	kfree(pb);
err_put:
	pci_dev_put(pdev);
	return ret;
}

int pcibar_bind(const char *spec)
{
	int ret;

	mutex_lock(&pcibar_bind_lock);
	ret = pcibar_enabled ? pcibar_bind_locked(spec) : -EAGAIN;
	mutex_unlock(&pcibar_bind_lock);
	return ret;
}

int pcibar_unbind(const char *spec)
{
	unsigned int domain, bus, slot, fn;
	struct gdrpeer_device *gdev;
	struct pci_dev *pdev;
	int bar, ret;

	ret = pcibar_parse(spec, &domain, &bus, &slot, &fn, &bar);
	if (ret) {
		pr_err("cannot parse '%.*s': expected [DDDD:]BB:DD.F\n",
		       PCIBAR_SPEC_MAX, spec);
		return ret;
	}
	pdev = pci_get_domain_bus_and_slot((int)domain, bus,
					   PCI_DEVFN(slot, fn));
	if (!pdev)
		return -ENODEV;

	mutex_lock(&pcibar_bind_lock);
	gdev = gdrpeer_device_find_pci(pdev);
	if (!gdev || gdev->ops != &pcibar_ops) {
		ret = -ENODEV;
	} else {
		ret = gdrpeer_device_unregister(gdev);
		if (ret == -EBUSY)
			pr_err("%s: unbind refused: %lld allocations alive\n",
			       pci_name(pdev),
			       (long long)atomic64_read(&gdev->cnt.allocations));
		else if (!ret)
			pr_info("%s: unbound\n", pci_name(pdev));
	}
	if (gdev)
		gdrpeer_device_put(gdev);
	mutex_unlock(&pcibar_bind_lock);
	pci_dev_put(pdev);
	return ret;
}

/* "BDF[@N][,BDF[@N]...]" from the module parameter; all or nothing. */
int pcibar_bind_list(const char *list)
{
	char *dup, *cur, *tok;
	int ret = 0;

	if (!list || !*list)
		return 0;
	dup = kstrdup(list, GFP_KERNEL);
	if (!dup)
		return -ENOMEM;
	cur = dup;
	while ((tok = strsep(&cur, ",")) != NULL) {
		if (!*tok)
			continue;
		ret = pcibar_bind(tok);
		if (ret)
			break;
	}
	kfree(dup);
	return ret;
}

void pcibar_enable(void)
{
	mutex_lock(&pcibar_bind_lock);
	pcibar_enabled = true;
	mutex_unlock(&pcibar_bind_lock);
}

/*
 * Module exit (or failed load): refuse further binds, unbind everything.
 * Nothing can hold a region then (no file or dma-buf is left).
 */
void pcibar_unbind_all(void)
{
	struct gdrpeer_device *gdev;
	int ret;

	mutex_lock(&pcibar_bind_lock);
	pcibar_enabled = false;
	for (;;) {
		gdev = gdrpeer_device_find_first(&pcibar_ops);
		if (!gdev)
			break;
		ret = gdrpeer_device_unregister(gdev);
		gdrpeer_device_put(gdev);
		if (WARN_ON(ret))
			break;
	}
	mutex_unlock(&pcibar_bind_lock);
}

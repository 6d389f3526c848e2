// SPDX-License-Identifier: GPL-2.0
/*
 * pcibar provider: device memory = one prefetchable memory BAR of a PCI
 * function, carved with the kernel's genalloc.
 *
 * gdrpeer serves a BAR only while it is the PCI driver of that function,
 * so that the driver core tells it when the function goes away (unbind,
 * hot-unplug, "remove" in sysfs) and nobody else can claim it meanwhile.
 * It has no ID table: it binds the way vfio-pci is bound to a device chosen
 * by the administrator,
 *   echo gdrpeer > /sys/bus/pci/devices/BDF/driver_override
 *   echo BDF > /sys/bus/pci/drivers/gdrpeer/bind
 * or with new_id; "pcibar=BDF[@BAR][,...]" at load time and
 * /sys/class/gdrpeer/gdrpeer/pcibar_bind|pcibar_unbind do the same (they
 * set and clear driver_override themselves) and choose the BAR.
 *
 * remove() revokes every allocation (gdrpeer_device_unregister): importers
 * are told and waited for, CPU mappings are zapped, and only then is the
 * BAR released.  While bound, the driver core's runtime-PM reference taken
 * for probe is kept (no pm_runtime_put in probe), so the function stays
 * powered while its memory is served.  A fatal AER error revokes too.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": pcibar: " fmt

#include <linux/device.h>
#include <linux/genalloc.h>
#include <linux/io.h>
#include <linux/kernel.h>
#include <linux/lockdep.h>
#include <linux/log2.h>
#include <linux/moduleparam.h>
#include <linux/pci.h>
#include <linux/sizes.h>
#include <linux/slab.h>
#include <linux/string.h>
#include <linux/sysfs.h>

#include <gdrpeer.h>

#include "gdrpeer_compat.h"
#include "gdrpeer_core.h"
#include "provider.h"

static char *pcibar;
module_param(pcibar, charp, 0444);
MODULE_PARM_DESC(pcibar,
		 "PCI devices to bind to the pcibar provider: BDF[@BAR][,...]; the largest prefetchable BAR when @BAR is absent");

/* Smallest BAR worth carving; smaller ones are refused as "too small". */
#define PCIBAR_MIN_SIZE SZ_1M
/* Longest accepted "DDDD:BB:DD.F@N" spec, with room for a newline. */
#define PCIBAR_SPEC_MAX 32

struct pcibar_dev {
	struct gdrpeer_device gdev;
	struct gen_pool *pool;	/* addresses are CPU physical */
	phys_addr_t start;	/* BAR start */
	int wc_cookie;		/* arch_phys_wc_add (MTRR where no PAT) */
};

/*
 * Serialises pcibar_bind/pcibar_unbind (mutex, may sleep); taken before
 * the device lock that the driver core takes around probe and remove.
 */
static DEFINE_MUTEX(pcibar_bind_lock);
/* false while the module loads or unloads: sysfs binds are refused */
static bool pcibar_enabled;

/*
 * The BAR a pcibar_bind() asked for, read by the probe it triggers; and
 * the probe's errno, which the driver core does not pass back.  Under
 * pcibar_wanted_lock (mutex, innermost: probe takes it under the device
 * lock, while pcibar_bind holds pcibar_bind_lock).
 */
static DEFINE_MUTEX(pcibar_wanted_lock);
static struct pci_dev *pcibar_wanted_pdev;
static int pcibar_wanted_bar = -1;
static int pcibar_wanted_err;

/*
 * Functions whose driver_override pcibar_bind() set (struct pcibar_override,
 * each with a pci_dev reference), under pcibar_bind_lock: pcibar_unbind and
 * the unload clear exactly those, never one the administrator wrote.
 */
struct pcibar_override {
	struct list_head node;
	struct pci_dev *pdev;
};
static LIST_HEAD(pcibar_overrides);

static struct pci_driver pcibar_driver;

static struct pcibar_dev *to_pcibar(struct gdrpeer_device *gdev)
{
	return container_of(gdev, struct pcibar_dev, gdev);
}

static int pcibar_alloc(struct gdrpeer_device *gdev, struct gdrpeer_region *r)
{
	struct pcibar_dev *pb = to_pcibar(gdev);
	struct genpool_data_align align;
	unsigned long addr;

	lockdep_assert_held(&gdev->lock);
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
	lockdep_assert_held(&gdev->lock);
	gen_pool_free(to_pcibar(gdev)->pool, (unsigned long)r->range0.phys,
		      r->size);
}

static u64 pcibar_free_bytes(struct gdrpeer_device *gdev)
{
	struct gen_pool *pool = to_pcibar(gdev)->pool;

	return pool ? gen_pool_avail(pool) : 0;
}

/* Unbind, after every region was revoked and its memory taken back. */
static void pcibar_shutdown(struct gdrpeer_device *gdev)
{
	struct pcibar_dev *pb = to_pcibar(gdev);

	gen_pool_destroy(pb->pool);
	pb->pool = NULL;
	arch_phys_wc_del(pb->wc_cookie);
	arch_io_free_memtype_wc(pb->start, gdev->size);
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

/*
 * driver_override: a field of struct pci_dev set with driver_set_override()
 * (5.19) or by hand before; a field of struct device with its own helpers
 * since 7.x.
 */

/* Set (or, with NULL, clear) @pdev's driver_override. */
static int pcibar_set_override(struct pci_dev *pdev, const char *name)
{
#if defined(GDRPEER_HAVE_DEVICE_SET_DRIVER_OVERRIDE)
	return device_set_driver_override(&pdev->dev, name ? name : "");
#elif defined(GDRPEER_HAVE_DRIVER_SET_OVERRIDE)
	return driver_set_override(&pdev->dev, &pdev->driver_override,
				   name ? name : "", name ? strlen(name) : 0);
#else
	typeof(pdev->driver_override) old;	/* const since 5.19 */
	char *new = NULL;

	if (name) {
		new = kstrdup(name, GFP_KERNEL);
		if (!new)
			return -ENOMEM;
	}
	device_lock(&pdev->dev);
	old = pdev->driver_override;
	pdev->driver_override = new;
	device_unlock(&pdev->dev);
	kfree(old);
	return 0;
#endif
}

/* 1: @pdev's driver_override names us, 0: another driver, -1: none. */
static int pcibar_override_match(struct pci_dev *pdev)
{
#if defined(GDRPEER_HAVE_DEVICE_SET_DRIVER_OVERRIDE)
	/*
	 * What device_match_driver_override() does, spelt out: sparse
	 * cannot follow the guard() in that helper and reports an imbalance.
	 */
	int match = -1;

	spin_lock(&pdev->dev.driver_override.lock);
	if (pdev->dev.driver_override.name)
		match = !strcmp(pdev->dev.driver_override.name,
				pcibar_driver.name);
	spin_unlock(&pdev->dev.driver_override.lock);
	return match;
#else
	int match = -1;

	device_lock(&pdev->dev);
	if (pdev->driver_override)
		match = !strcmp(pdev->driver_override, pcibar_driver.name);
	device_unlock(&pdev->dev);
	return match;
#endif
}

/* Remember that we set @pdev's override; under pcibar_bind_lock. */
static int pcibar_override_track(struct pci_dev *pdev)
{
	struct pcibar_override *o;

	lockdep_assert_held(&pcibar_bind_lock);
	o = kzalloc(sizeof(*o), GFP_KERNEL);
	if (!o)
		return -ENOMEM;
	o->pdev = pci_dev_get(pdev);
	list_add(&o->node, &pcibar_overrides);
	return 0;
}

/*
 * Clear the override we set on @pdev (every one when NULL) if it still
 * names us; under pcibar_bind_lock.
 */
static void pcibar_override_untrack(struct pci_dev *pdev)
{
	struct pcibar_override *o, *tmp;

	lockdep_assert_held(&pcibar_bind_lock);
	list_for_each_entry_safe(o, tmp, &pcibar_overrides, node) {
		if (pdev && o->pdev != pdev)
			continue;
		if (pcibar_override_match(o->pdev) > 0)
			pcibar_set_override(o->pdev, NULL);
		list_del(&o->node);
		pci_dev_put(o->pdev);
		kfree(o);
	}
}

/* The BAR a bind asked for, else the largest prefetchable one. */
static int pcibar_choose_bar(struct pci_dev *pdev)
{
	int bar = -1;

	mutex_lock(&pcibar_wanted_lock);
	if (pcibar_wanted_pdev == pdev)
		bar = pcibar_wanted_bar;
	mutex_unlock(&pcibar_wanted_lock);
	if (bar < 0) {
		bar = pcibar_pick(pdev);
		if (bar < 0)
			pr_err("%s refused: no prefetchable memory BAR\n",
			       pci_name(pdev));
	}
	return bar;
}

static void pcibar_report(struct pci_dev *pdev, int err)
{
	mutex_lock(&pcibar_wanted_lock);
	if (pcibar_wanted_pdev == pdev)
		pcibar_wanted_err = err;
	mutex_unlock(&pcibar_wanted_lock);
}

/* The driver core offers us @pdev (driver_override, new_id, bind). */
static int pcibar_probe(struct pci_dev *pdev, const struct pci_device_id *id)
{
	struct pcibar_dev *pb;
	int bar, ret;

	bar = pcibar_choose_bar(pdev);
	ret = bar < 0 ? -EINVAL : pcibar_check(pdev, bar);
	if (ret)
		goto out;

	pb = kzalloc(sizeof(*pb), GFP_KERNEL);
	if (!pb) {
		ret = -ENOMEM;
		goto out;
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
	/*
	 * CPU mappings are inserted page by page at fault time and take the
	 * memory type reserved for the range: reserve write-combining for
	 * the whole BAR, or they would come out uncached.
	 */
	ret = arch_io_reserve_memtype_wc(pb->start, pci_resource_len(pdev, bar));
	if (ret) {
		pr_err("%s: BAR %d refused: cannot reserve write-combining (%d)\n",
		       pci_name(pdev), bar, ret);
		goto err_release;
	}
	pb->wc_cookie = arch_phys_wc_add(pb->start, pci_resource_len(pdev, bar));
	pb->pool = gen_pool_create(PAGE_SHIFT, dev_to_node(&pdev->dev));
	if (!pb->pool) {
		ret = -ENOMEM;
		goto err_memtype;
	}
	ret = gen_pool_add(pb->pool, (unsigned long)pb->start,
			   pci_resource_len(pdev, bar), dev_to_node(&pdev->dev));
	if (ret)
		goto err_pool;

	pb->gdev.ops = &pcibar_ops;
	pb->gdev.pdev = pci_dev_get(pdev);
	pb->gdev.bar = bar;
	pb->gdev.size = pci_resource_len(pdev, bar);
	/* on failure this calls pcibar_shutdown and pcibar_destroy */
	ret = gdrpeer_device_register(&pb->gdev);
	if (ret) {
		pr_err("%s: registering failed (%d)\n", pci_name(pdev), ret);
		goto out;
	}
	pci_set_drvdata(pdev, pb);
	pr_info("%s: BAR %d (%llu MiB) bound as device %u\n", pci_name(pdev),
		bar, pb->gdev.size >> 20, pb->gdev.index);
	goto out;

err_pool:
	gen_pool_destroy(pb->pool);
err_memtype:
	arch_phys_wc_del(pb->wc_cookie);
	arch_io_free_memtype_wc(pb->start, pci_resource_len(pdev, bar));
err_release:
	pci_release_region(pdev, bar);
err_disable:
	pci_disable_device(pdev);
err_free:
	kfree(pb);
out:
	pcibar_report(pdev, ret);
	return ret;
}

/*
 * The function goes (unbind, hot-unplug, sysfs remove, module unload):
 * revoke everything it served, then release the BAR.  Called with the
 * device lock held; sleeps until importers have let go.
 */
static void pcibar_remove(struct pci_dev *pdev)
{
	struct pcibar_dev *pb = pci_get_drvdata(pdev);

	pr_info("%s: unbinding device %u: revoking %lld allocation(s)\n",
		pci_name(pdev), pb->gdev.index,
		(long long)atomic64_read(&pb->gdev.cnt.allocations));
	gdrpeer_device_unregister(&pb->gdev);
	pci_set_drvdata(pdev, NULL);
}

/* A fatal error: stop every use of the memory now; remove() follows. */
static pci_ers_result_t pcibar_error_detected(struct pci_dev *pdev,
					      pci_channel_state_t state)
{
	struct pcibar_dev *pb = pci_get_drvdata(pdev);

	if (state == pci_channel_io_normal)
		return PCI_ERS_RESULT_CAN_RECOVER;
	pr_err("%s: PCI error (state %d): revoking every allocation\n",
	       pci_name(pdev), state);
	if (pb)
		gdrpeer_device_revoke(&pb->gdev);
	return PCI_ERS_RESULT_DISCONNECT;
}

static const struct pci_error_handlers pcibar_err_handlers = {
	.error_detected = pcibar_error_detected,
};

static struct pci_driver pcibar_driver = {
	.name = KBUILD_MODNAME,
	.id_table = NULL,	/* bound by driver_override or new_id only */
	.probe = pcibar_probe,
	.remove = pcibar_remove,
	.err_handler = &pcibar_err_handlers,
};

static struct pci_dev *pcibar_lookup(const char *spec, int *bar)
{
	unsigned int domain, bus, slot, fn;
	struct pci_dev *pdev;

	if (pcibar_parse(spec, &domain, &bus, &slot, &fn, bar)) {
		pr_err("cannot parse '%.*s': expected [DDDD:]BB:DD.F[@BAR]\n",
		       PCIBAR_SPEC_MAX, spec);
		return ERR_PTR(-EINVAL);
	}
	pdev = pci_get_domain_bus_and_slot((int)domain, bus,
					   PCI_DEVFN(slot, fn));
	if (!pdev) {
		pr_err("%04x:%02x:%02x.%x refused: no such PCI device\n",
		       domain, bus, slot, fn);
		return ERR_PTR(-ENODEV);
	}
	return pdev;
}

static int pcibar_bind_locked(const char *spec)
{
	struct device_driver *drv;
	struct pci_dev *pdev;
	int bar, override, ret;
	bool set_override;

	lockdep_assert_held(&pcibar_bind_lock);
	pdev = pcibar_lookup(spec, &bar);
	if (IS_ERR(pdev))
		return PTR_ERR(pdev);

	/* the driver core decides under the device lock; this is for errnos */
	device_lock(&pdev->dev);
	drv = pdev->dev.driver;
	ret = 0;
	if (drv == &pcibar_driver.driver) {
		pr_err("%s refused: already bound to gdrpeer\n",
		       pci_name(pdev));
		ret = -EBUSY;
	} else if (drv) {
		pr_err("%s refused: already claimed by driver %s\n",
		       pci_name(pdev), drv->name);
		ret = -EBUSY;
	}
	device_unlock(&pdev->dev);
	if (ret)
		goto out_put;
	override = pcibar_override_match(pdev);
	if (!override) {
		pr_err("%s refused: its driver_override names another driver\n",
		       pci_name(pdev));
		ret = -EBUSY;
		goto out_put;
	}
	set_override = override < 0;

	if (set_override) {
		ret = pcibar_override_track(pdev);
		if (!ret)
			ret = pcibar_set_override(pdev, pcibar_driver.name);
		if (ret) {
			pcibar_override_untrack(pdev);
			goto out_put;
		}
	}
	mutex_lock(&pcibar_wanted_lock);
	pcibar_wanted_pdev = pdev;
	pcibar_wanted_bar = bar;
	pcibar_wanted_err = -ENODEV;	/* if the probe never runs */
	mutex_unlock(&pcibar_wanted_lock);

	ret = device_attach(&pdev->dev);

	mutex_lock(&pcibar_wanted_lock);
	if (ret == 1)
		ret = 0;
	else if (ret == 0)
		ret = pcibar_wanted_err ? pcibar_wanted_err : -ENODEV;
	pcibar_wanted_pdev = NULL;
	pcibar_wanted_bar = -1;
	mutex_unlock(&pcibar_wanted_lock);
	if (ret && set_override)
		pcibar_override_untrack(pdev);
out_put:
	pci_dev_put(pdev);
	return ret;
}

static int pcibar_bind(const char *spec)
{
	int ret;

	mutex_lock(&pcibar_bind_lock);
	ret = pcibar_enabled ? pcibar_bind_locked(spec) : -EAGAIN;
	mutex_unlock(&pcibar_bind_lock);
	return ret;
}

/* Unbind @spec: everything it served is revoked (never -EBUSY). */
static int pcibar_unbind(const char *spec)
{
	struct pci_dev *pdev;
	int bar, ret = 0;

	pdev = pcibar_lookup(spec, &bar);
	if (IS_ERR(pdev))
		return PTR_ERR(pdev);

	mutex_lock(&pcibar_bind_lock);
	device_lock(&pdev->dev);
	if (pdev->dev.driver != &pcibar_driver.driver)
		ret = -ENODEV;
	device_unlock(&pdev->dev);
	if (!ret) {
		device_release_driver(&pdev->dev);
		pr_info("%s: unbound\n", pci_name(pdev));
	}
	/* not bound again behind the administrator's back */
	pcibar_override_untrack(pdev);
	mutex_unlock(&pcibar_bind_lock);
	pci_dev_put(pdev);
	return ret;
}

/* "BDF[@N][,BDF[@N]...]" from the module parameter; all or nothing. */
static int pcibar_bind_list(const char *list)
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

/*
 * Unload (or failed load): refuse further binds, then unregister the
 * driver, which removes (and revokes) every bound function.  The
 * overrides pcibar= or pcibar_bind set are cleared; the administrator's
 * own stay, so that a later load binds those functions again.
 */
static void pcibar_exit(void)
{
	mutex_lock(&pcibar_bind_lock);
	pcibar_enabled = false;
	mutex_unlock(&pcibar_bind_lock);
	pci_unregister_driver(&pcibar_driver);
	mutex_lock(&pcibar_bind_lock);
	pcibar_override_untrack(NULL);
	mutex_unlock(&pcibar_bind_lock);
}

/*
 * Load: register the PCI driver (binds are accepted from here on) and
 * bind what pcibar= names, all or nothing.
 */
static int pcibar_init(void)
{
	int ret = pci_register_driver(&pcibar_driver);

	if (ret)
		return ret;
	mutex_lock(&pcibar_bind_lock);
	pcibar_enabled = true;
	mutex_unlock(&pcibar_bind_lock);
	ret = pcibar_bind_list(pcibar);
	if (ret) {
		pr_err("load refused: pcibar=%s could not be bound (%d)\n",
		       pcibar, ret);
		pcibar_exit();
	}
	return ret;
}

/* ---- sysfs ---------------------------------------------------------- */

/* /sys/class/gdrpeer/gdrpeer/pcibar_bind and pcibar_unbind */
static ssize_t pcibar_bind_store(struct device *dev,
				 struct device_attribute *attr,
				 const char *buf, size_t count)
{
	int ret = pcibar_bind(buf);

	return ret ? ret : (ssize_t)count;
}
static DEVICE_ATTR_WO(pcibar_bind);

static ssize_t pcibar_unbind_store(struct device *dev,
				   struct device_attribute *attr,
				   const char *buf, size_t count)
{
	int ret = pcibar_unbind(buf);

	return ret ? ret : (ssize_t)count;
}
static DEVICE_ATTR_WO(pcibar_unbind);

static struct attribute *pcibar_node_attrs[] = {
	&dev_attr_pcibar_bind.attr,
	&dev_attr_pcibar_unbind.attr,
	NULL,
};

static const struct attribute_group pcibar_node_group = {
	.attrs = pcibar_node_attrs,
};

/* providers/pcibar/status: the BAR provider is always built in */
static ssize_t status_show(struct kobject *kobj, struct kobj_attribute *attr,
			   char *buf)
{
	return sysfs_emit(buf, "active, %u device(s) bound\n",
			  gdrpeer_device_count());
}
static struct kobj_attribute pcibar_status_attr = __ATTR_RO(status);

static struct attribute *pcibar_attrs[] = {
	&pcibar_status_attr.attr,
	NULL,
};

static const struct attribute_group pcibar_group = {
	.attrs = pcibar_attrs,
};

const struct gdrpeer_provider gdrpeer_pcibar_provider = {
	.name = "pcibar",
	.sysfs_group = &pcibar_group,
	.node_group = &pcibar_node_group,
	.init = pcibar_init,
	.exit = pcibar_exit,
};

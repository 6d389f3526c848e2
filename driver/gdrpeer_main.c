// SPDX-License-Identifier: GPL-2.0
/*
 * gdrpeer.ko: device memory in a PCI BAR, handed to userspace through
 * /dev/gdrpeer and to RDMA NICs through dma-buf.
 *
 * Module parameters (read at load time):
 *   dev_mode=0660                   mode of /dev/gdrpeer
 *   dev_gid=0                       group of /dev/gdrpeer
 * and the providers' own: pcibar=BDF[@BAR][,...] (provider_pcibar.c),
 * nvidia_module=nvidia (provider_nvidia.c).
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/slab.h>

#include <gdrpeer.h>

#include "gdrpeer_compat.h"
#include "gdrpeer_core.h"
#include "provider.h"
#include "exporter.h"

unsigned int gdrpeer_dev_mode = 0660;
module_param_named(dev_mode, gdrpeer_dev_mode, uint, 0444);
MODULE_PARM_DESC(dev_mode, "mode of /dev/gdrpeer (default 0660)");

unsigned int gdrpeer_dev_gid;
module_param_named(dev_gid, gdrpeer_dev_gid, uint, 0444);
MODULE_PARM_DESC(dev_gid, "group id of /dev/gdrpeer (default 0, root)");

/* Long enough for every provider's status in the load line. */
#define GDRPEER_LOAD_LINE_MAX 1024

/* The one line that says what this node can do. */
static void gdrpeer_log_loaded(void)
{
	char *providers = kmalloc(GDRPEER_LOAD_LINE_MAX, GFP_KERNEL);

	if (providers)
		gdrpeer_providers_describe(providers, GDRPEER_LOAD_LINE_MAX);
	pr_info("ABI %u.%u loaded, %u device(s) bound; providers: %s; peermem %s\n",
		GDRPEER_ABI_VERSION_MAJOR, GDRPEER_ABI_VERSION_MINOR,
		gdrpeer_device_count(), providers ? providers : "?",
		gdrpeer_peermem_status());
	kfree(providers);
}

/*
 * Load order: sysfs and state first, then the providers (which bind what
 * they serve), user-visible entry points last (/dev/gdrpeer opens only
 * once nothing can fail any more); unload in the reverse order, the node
 * first.  Exporters that need setting up at load go between the providers
 * and the node.
 */
static int __init gdrpeer_init(void)
{
	int ret;

	if (gdrpeer_dev_mode & ~0777u) {
		pr_err("dev_mode %#o has bits outside 0777\n", gdrpeer_dev_mode);
		return -EINVAL;
	}
	ret = gdrpeer_mapping_init();
	if (ret)
		return ret;
	ret = gdrpeer_chardev_init();
	if (ret)
		goto err_mapping;
	ret = gdrpeer_providers_init(gdrpeer_sysfs_dir());
	if (ret)
		goto err_chardev;
	ret = gdrpeer_peermem_init(gdrpeer_providers());
	if (ret)
		goto err_providers;
	ret = gdrpeer_chardev_enable();
	if (ret)
		goto err_peermem;
	gdrpeer_log_loaded();
	return 0;

err_peermem:
	gdrpeer_peermem_exit();
err_providers:
	gdrpeer_providers_exit();
err_chardev:
	gdrpeer_chardev_exit();
err_mapping:
	gdrpeer_mapping_exit();
	return ret;
}

static void __exit gdrpeer_exit(void)
{
	gdrpeer_chardev_disable();
	gdrpeer_peermem_exit();
	gdrpeer_providers_exit();
	gdrpeer_chardev_exit();
	gdrpeer_mapping_exit();
}

module_init(gdrpeer_init);
module_exit(gdrpeer_exit);

MODULE_DESCRIPTION("gdrpeer: device memory in PCI BARs exported to RDMA as dma-buf");
MODULE_LICENSE("GPL");
MODULE_VERSION("1.1");

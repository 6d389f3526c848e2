// SPDX-License-Identifier: GPL-2.0
/*
 * gdrpeer.ko: device memory in a PCI BAR, handed to userspace through
 * /dev/gdrpeer and to RDMA NICs through dma-buf.
 *
 * Module parameters (read at load time):
 *   pcibar=BDF[@BAR][,BDF[@BAR]...]  devices to bind to the pcibar provider
 *   dev_mode=0660                   mode of /dev/gdrpeer
 *   dev_gid=0                       group of /dev/gdrpeer
 *   nvidia_module=nvidia            module blamed when nvidia_p2p_* is
 *                                   missing (provider_nvidia.c)
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/module.h>
#include <linux/moduleparam.h>

#include <gdrpeer.h>

#include "gdrpeer_compat.h"
#include "gdrpeer_core.h"
#include "provider.h"
#include "exporter.h"

static char *pcibar;
module_param(pcibar, charp, 0444);
MODULE_PARM_DESC(pcibar,
		 "PCI devices to bind to the pcibar provider: BDF[@BAR][,...]; the largest prefetchable BAR when @BAR is absent");

unsigned int gdrpeer_dev_mode = 0660;
module_param_named(dev_mode, gdrpeer_dev_mode, uint, 0444);
MODULE_PARM_DESC(dev_mode, "mode of /dev/gdrpeer (default 0660)");

unsigned int gdrpeer_dev_gid;
module_param_named(dev_gid, gdrpeer_dev_gid, uint, 0444);
MODULE_PARM_DESC(dev_gid, "group id of /dev/gdrpeer (default 0, root)");

/*
 * Load order: sysfs and state first, user-visible entry points last
 * (/dev/gdrpeer opens only once nothing can fail any more); unload in the
 * reverse order, the node first.
 */
static int __init gdrpeer_init(void)
{
	int ret;

	if (gdrpeer_dev_mode & ~0777u) {
		pr_err("dev_mode %#o has bits outside 0777\n", gdrpeer_dev_mode);
		return -EINVAL;
	}
	ret = gdrpeer_chardev_init();
	if (ret)
		return ret;
	ret = nvp_init(gdrpeer_providers());
	if (ret)
		goto err_chardev;
	ret = pcibar_init();
	if (ret)
		goto err_nvp;
	ret = pcibar_bind_list(pcibar);
	if (ret) {
		pr_err("load refused: pcibar=%s could not be bound (%d)\n",
		       pcibar, ret);
		goto err_pcibar;
	}
	ret = gdrpeer_peermem_init(gdrpeer_providers());
	if (ret)
		goto err_pcibar;
	ret = gdrpeer_chardev_enable();
	if (ret)
		goto err_peermem;
	/* the one line that says what this node can do */
	pr_info("ABI %u.%u loaded, %u device(s) bound; providers: pcibar active, nvidia %s; peermem %s\n",
		GDRPEER_ABI_VERSION_MAJOR, GDRPEER_ABI_VERSION_MINOR,
		gdrpeer_device_count(), nvp_status_line(),
		gdrpeer_peermem_status());
	return 0;

err_peermem:
	gdrpeer_peermem_exit();
err_pcibar:
	pcibar_exit();
err_nvp:
	nvp_exit();
err_chardev:
	gdrpeer_chardev_exit();
	return ret;
}

static void __exit gdrpeer_exit(void)
{
	gdrpeer_chardev_disable();
	gdrpeer_peermem_exit();
	pcibar_exit();
	nvp_exit();
	gdrpeer_chardev_exit();
}

module_init(gdrpeer_init);
module_exit(gdrpeer_exit);

MODULE_DESCRIPTION("gdrpeer: device memory in PCI BARs exported to RDMA as dma-buf");
MODULE_LICENSE("GPL");
MODULE_VERSION("1.1");

// SPDX-License-Identifier: GPL-2.0
/*
 * gdrpeer_peerclient.ko - test only: a second peer-memory client for
 * gdrpeer_peerhost.ko, under the name the test gives it (name=, default
 * "stand-in"), that owns no memory (acquire says "not mine").  With
 * name=nv_mem it plays the client nvidia_peermem registers, so that the
 * tests can see two clients side by side in /sys/kernel/mm/memory_peers
 * and a second client under a name already taken refused by the host.
 * Registered without invalidation, like nvidia_peermem's "nv_mem_nc".
 * The module fails to load (-EINVAL, as nvidia_peermem does) when the
 * host refuses the registration; the host's log line says why.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/scatterlist.h>
#include <linux/string.h>

#include "ofa/include/rdma/peer_mem.h"

static char *name = "stand-in";
module_param(name, charp, 0444);
MODULE_PARM_DESC(name, "the client's name in the host (at most 63 characters)");

static int pc_acquire(unsigned long addr, size_t size, void *private_data,
		      char *peer_mem_name, void **client_context)
{
	return 0;		/* not mine, ever */
}

/* never called: acquire takes nothing */
static int pc_get_pages(unsigned long addr, size_t size, int write, int force,
			struct sg_table *sg_head, void *client_context,
			u64 core_context)
{
	return -EINVAL;
}

static int pc_dma_map(struct sg_table *sg_head, void *client_context,
		      struct device *dma_device, int dmasync, int *nmap)
{
	return -EINVAL;
}

static int pc_dma_unmap(struct sg_table *sg_head, void *client_context,
			struct device *dma_device)
{
	return 0;
}

static void pc_put_pages(struct sg_table *sg_head, void *client_context)
{
}

static unsigned long pc_get_page_size(void *client_context)
{
	return PAGE_SIZE;
}

static void pc_release(void *client_context)
{
}

static struct peer_memory_client pc_client = {
	.acquire = pc_acquire,
	.get_pages = pc_get_pages,
	.dma_map = pc_dma_map,
	.dma_unmap = pc_dma_unmap,
	.put_pages = pc_put_pages,
	.get_page_size = pc_get_page_size,
	.release = pc_release,
};
static void *pc_handle;

static int __init pc_init(void)
{
	if (!name || !*name || strlen(name) >= sizeof(pc_client.name))
		return -EINVAL;
	strscpy(pc_client.name, name, sizeof(pc_client.name));
	strscpy(pc_client.version, "stand-in", sizeof(pc_client.version));
	pc_handle = ib_register_peer_memory_client(&pc_client, NULL);
	if (!pc_handle) {
		pr_err("the host refused client %s\n", pc_client.name);
		return -EINVAL;
	}
	return 0;
}

static void __exit pc_exit(void)
{
	ib_unregister_peer_memory_client(pc_handle);
}

module_init(pc_init);
module_exit(pc_exit);

MODULE_DESCRIPTION("gdrpeer test: a peer-memory client that owns nothing, under a chosen name");
MODULE_LICENSE("GPL");

/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The MLNX_OFED / DOCA-OFED peer-memory ABI, as the test-only host
 * gdrpeer_peerhost.ko provides it.  Written for gdrpeer's test bed from the
 * facts of the OFED header (not a copy of it): the layout and the calling
 * contract are those of include/rdma/peer_mem.h in current mlnx-ofa_kernel,
 * the kernel part of MLNX_OFED 5.x and of DOCA-OFED (PEER_MEM_U64_CORE_CONTEXT,
 * struct peer_memory_client_ex with PEER_MEM_INVALIDATE_UNMAPS);
 * docs/driver.md says how that was checked.  The test bed installs this file the way OFED
 * installs its own: <ofa dir>/include/rdma/peer_mem.h next to the host's
 * Module.symvers, so gdrpeer's build finds both as it finds OFED's.
 *
 * Calling contract of the core (ib_umem_get of a user address no page
 * pinning can reach):
 *   acquire()       every registered client in turn until one returns 1
 *   get_pages()     the client pins the range; core_context identifies
 *                   this registration in invalidate calls from now on
 *   dma_map()       the client fills the core's sg_table with DMA
 *                   addresses for dma_device; *nmap = entries
 *   ... the HCA uses the addresses ...
 *   dma_unmap(), put_pages()   (unless invalidated with INVALIDATE_UNMAPS)
 *   release()       always, once, for every acquire() that returned 1
 * invalidate(reg_handle, core_context): the client's memory is going away;
 * on return the HCA does no more DMA to it.  Without INVALIDATE_UNMAPS the
 * core calls dma_unmap() and put_pages() from inside it; with it the
 * client undoes its own mapping after invalidate returns and later
 * dma_unmap()/put_pages() calls must find nothing left to undo.
 */
#ifndef RDMA_PEER_MEM_H
#define RDMA_PEER_MEM_H

#include <linux/scatterlist.h>
#include <linux/types.h>

#define IB_PEER_MEMORY_NAME_MAX 64
#define IB_PEER_MEMORY_VER_MAX 16

/* core_context is a u64 (older OFED releases passed a void *) */
#define PEER_MEM_U64_CORE_CONTEXT

struct device;

struct peer_memory_client {
	char name[IB_PEER_MEMORY_NAME_MAX];
	/*
	 * version[IB_PEER_MEMORY_VER_MAX - 1] != 0 says that this struct is
	 * the first member of a struct peer_memory_client_ex.
	 */
	char version[IB_PEER_MEMORY_VER_MAX];
	/* 1: the client serves all of [addr, addr + size); 0 or -errno: not */
	int (*acquire)(unsigned long addr, size_t size,
		       void *peer_mem_private_data, char *peer_mem_name,
		       void **client_context);
	/* sg_head is NULL; 0 or -errno */
	int (*get_pages)(unsigned long addr, size_t size, int write, int force,
			 struct sg_table *sg_head, void *client_context,
			 u64 core_context);
	/* allocates and fills *sg_head; dmasync is always 0; 0 or -errno */
	int (*dma_map)(struct sg_table *sg_head, void *client_context,
		       struct device *dma_device, int dmasync, int *nmap);
	/* must return 0 */
	int (*dma_unmap)(struct sg_table *sg_head, void *client_context,
			 struct device *dma_device);
	/* frees sg_head's entries */
	void (*put_pages)(struct sg_table *sg_head, void *client_context);
	unsigned long (*get_page_size)(void *client_context);
	void (*release)(void *client_context);
};

enum {
	PEER_MEM_INVALIDATE_UNMAPS = 1 << 0,
};

struct peer_memory_client_ex {
	struct peer_memory_client client;
	size_t ex_size;		/* sizeof(struct peer_memory_client_ex) */
	u32 flags;		/* PEER_MEM_* */
};

typedef int (*invalidate_peer_memory)(void *reg_handle, u64 core_context);

/*
 * Returns the registration handle, or NULL when refused (a mandatory
 * callback missing, no memory).  With a non-NULL @invalidate_callback the
 * core stores its invalidate function there and only uses this client
 * for registrations that can be invalidated.
 */
void *ib_register_peer_memory_client(const struct peer_memory_client *peer_client,
				     invalidate_peer_memory *invalidate_callback);
/* Waits until no registration of the client is left. */
void ib_unregister_peer_memory_client(void *reg_handle);

#endif /* RDMA_PEER_MEM_H */

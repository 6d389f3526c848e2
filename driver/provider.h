/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Providers: where device memory comes from.  A provider binds devices,
 * registers a struct gdrpeer_device for each (gdrpeer_device_register) and
 * carves its memory on request.  The core and the exporters only see
 * struct gdrpeer_region ranges, so a provider with non-contiguous memory
 * (nvidia_p2p page tables) fits without changes to them.
 */
#ifndef GDRPEER_PROVIDER_H
#define GDRPEER_PROVIDER_H

#include "gdrpeer_core.h"

/*
 * What a provider implements.  alloc/free are called with gdev->lock held
 * (they may sleep); free_bytes without it (must be lock-free).
 */
struct gdrpeer_provider_ops {
	const char *name;
	u32 uapi_id;				/* GDRPEER_PROVIDER_* */
	/* reserve region->size bytes; fill dev_offset and ranges */
	int (*alloc)(struct gdrpeer_device *gdev, struct gdrpeer_region *r);
	void (*free)(struct gdrpeer_device *gdev, struct gdrpeer_region *r);
	u64 (*free_bytes)(struct gdrpeer_device *gdev);
	/* unbind: give back BAR and allocator; regions are revoked and
	 * their memory was handed back with free (memory_returned) */
	void (*shutdown)(struct gdrpeer_device *gdev);
	/* kobject release: free the provider struct that embeds gdev */
	void (*destroy)(struct gdrpeer_device *gdev);
};

/* provider_pcibar.c: generic PCI BAR provider */
int pcibar_init(void);
void pcibar_exit(void);
int pcibar_bind(const char *spec);
int pcibar_unbind(const char *spec);
int pcibar_bind_list(const char *list);

/* provider_nvidia.c: CUDA memory pinned through nvidia_p2p */
struct dma_buf;
struct gdrpeer_export_va;
int nvp_init(struct kobject *providers);
void nvp_exit(void);
bool nvp_has_persistent(void);
bool nvp_available(void);
const char *nvp_status_line(void);
struct dma_buf *nvp_export_va(struct gdrpeer_export_va *e);

#endif /* GDRPEER_PROVIDER_H */

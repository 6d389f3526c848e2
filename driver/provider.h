/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Providers: where device memory comes from.
 *
 * A provider is described by one struct gdrpeer_provider and listed in the
 * registry (gdrpeer_providers.c).  It owns everything that is its own:
 * its sysfs files (providers/<name>/ and, where it has them, attributes of
 * the class device), what it binds at load, the capabilities it adds to
 * GDRPEER_IOCTL_INFO and the ioctls that only it serves (EXPORT_VA).  The
 * char device, the core and the exporters never name a provider: they go
 * through the registry, and see a provider's memory only as
 * struct gdrpeer_region ranges, so a provider with non-contiguous memory
 * (nvidia_p2p page tables) fits without changes to them.
 *
 * A provider that serves devices registers a struct gdrpeer_device for each
 * (gdrpeer_device_register) with its gdrpeer_device_ops.
 */
#ifndef GDRPEER_PROVIDER_H
#define GDRPEER_PROVIDER_H

#include "gdrpeer_core.h"

struct attribute_group;
struct dma_buf;
struct gdrpeer_export_va;
struct kobject;

/*
 * What a device of a provider implements.  alloc/free are called with
 * gdev->lock held (they may sleep); free_bytes without it (must be
 * lock-free).
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

/*
 * A provider, as the registry sees it.  Every hook is optional.  init and
 * exit run in process context with no lock of gdrpeer held; the other
 * hooks may run at any time between them (ioctls, sysfs).
 */
struct gdrpeer_provider {
	const char *name;		/* its directory providers/<name>/ */
	/* files in providers/<name>/ (kobj_attribute) */
	const struct attribute_group *sysfs_group;
	/* files of the class device /sys/class/gdrpeer/gdrpeer/
	 * (device_attribute), there from before init until after exit */
	const struct attribute_group *node_group;
	/* load: find or bind what it serves; a failure fails the load */
	int (*init)(void);
	/* unload (or a failed load after init succeeded) */
	void (*exit)(void);
	/* GDRPEER_CAP_* it adds to GDRPEER_IOCTL_INFO right now */
	u32 (*caps)(void);
	/* a few words for the load line ("active", "unavailable: ...") */
	const char *(*status)(void);
	/*
	 * GDRPEER_IOCTL_EXPORT_VA: pin [e->va, +e->length) of the caller's
	 * memory, fill the outputs of @e, return a dma-buf (one reference)
	 * or an ERR_PTR.  At most one provider has it.
	 */
	struct dma_buf *(*export_va)(struct gdrpeer_export_va *e);
	/*
	 * The peer-memory client's registration of a user address that is
	 * not a gdrpeer mapping (a CUDA address): pin the provider's pages
	 * around [addr, addr + size) of the calling process in *@mode
	 * (GDRPEER_PIN_*, 0 = the provider's default; the mode used comes
	 * back), set *@page_size (the region starts at addr rounded down to
	 * it), return the region with one reference or an ERR_PTR (-EINVAL:
	 * not the provider's memory).  At most one provider has it.
	 */
	struct gdrpeer_region *(*pin_user)(u64 addr, u64 size, u32 *mode,
					   u64 *page_size);
};

/* The providers built into gdrpeer.ko (listed in gdrpeer_providers.c). */
extern const struct gdrpeer_provider gdrpeer_pcibar_provider;	/* provider_pcibar.c */
extern const struct gdrpeer_provider gdrpeer_nvidia_provider;	/* provider_nvidia.c */

/* gdrpeer_providers.c: the registry */
const struct attribute_group **gdrpeer_providers_node_groups(void);
int gdrpeer_providers_init(struct kobject *parent);
void gdrpeer_providers_exit(void);
u32 gdrpeer_providers_caps(void);
struct dma_buf *gdrpeer_providers_export_va(struct gdrpeer_export_va *e);
struct gdrpeer_region *gdrpeer_providers_pin_user(u64 addr, u64 size,
						  u32 *mode, u64 *page_size);
size_t gdrpeer_providers_describe(char *buf, size_t size);
struct kobject *gdrpeer_providers(void);

#endif /* GDRPEER_PROVIDER_H */

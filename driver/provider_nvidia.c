// SPDX-License-Identifier: GPL-2.0
/*
 * nvidia provider: CUDA device memory pinned through NVIDIA's nvidia_p2p
 * API (declared in nv_p2p_abi.h) and exported as a dma-buf
 * (GDRPEER_IOCTL_EXPORT_VA), for drivers and nodes without NVIDIA's own
 * dma-buf export.
 *
 * Finding the API.  gdrpeer.ko must load with or without nvidia.ko, so by
 * default the functions are looked up at load time (and on a write to
 * providers/nvidia/rescan) with symbol_get().  Since 6.5 (and in stable
 * kernels that took the change, Debian's 6.1 among them) symbol_get()
 * only reaches EXPORT_SYMBOL_GPL exports and NVIDIA exports these with
 * EXPORT_SYMBOL; for such systems gdrpeer is built against the NVIDIA
 * module's Module.symvers (NVIDIA_SYMVERS=..., what a DKMS build after the
 * NVIDIA driver does) and calls them directly ("linked"); that build needs
 * nvidia.ko loaded first.  providers/nvidia/status says which way is used,
 * or why the provider is unavailable.
 *
 * One pin = one region = one dma-buf, or one registration of the OFED
 * peer-memory client (pin_user: exporter_peermem.c pins in its acquire
 * and maps the region's ranges with the DMA API itself, never calling
 * nvidia_p2p_dma_map_pages).  A pin is either persistent (pages
 * stay until put, even across cudaFree) or callback-based: NVIDIA calls
 * nvp_free_callback() when the memory is freed underneath, and after the
 * callback returns it frees the page table and every DMA mapping of it
 * itself.  So after a callback gdrpeer never touches the table again and
 * never calls put_pages for it (the final release only waits for the
 * callback to finish).
 *
 * States of a pin (nvp_pin.state, under nvp_pin.lock):
 *   PINNED --callback--> REVOKING --(importers told, unmaps drained)--> REVOKED
 *   PINNED --last reference--> RELEASING (put_pages is called once)
 * A callback that finds RELEASING returns at once: the put it races with
 * is what frees the table (NVIDIA serialises the two), and the release
 * waits for the callback to return before freeing the pin.
 *
 * Locks (outermost first), all may sleep:
 *   nvp_resolve_lock   symbol resolution (load, rescan, unload)
 *   nvp_pin.lock       state, imports list; never held while the region
 *                      is revoked (gdrpeer_region_revoke takes the
 *                      region's locks, the reservation lock and waits for
 *                      importers, whose detach takes nvp_pin.lock);
 *                      held while the pin's write-combining memtype is
 *                      reserved (after the table is taken) and while the
 *                      free callback gives it back, so a reservation never
 *                      outlives the callback (NVIDIA reuses the pages)
 * No lock of ours is held across a call into nvidia.ko: get_pages,
 * put_pages, dma_map_pages and dma_unmap_pages can wait for a running
 * free callback, and the callback takes nvp_pin.lock.  The callback waits
 * only for dma_unmap_pages calls in flight (counted outside the lock),
 * which NVIDIA lets finish while a callback runs.
 *
 * Known limit: NVIDIA's nvidia_p2p_dma_map_pages() reads the page table
 * before it takes any lock, so an attach whose dma_map_pages overlaps the
 * free callback can read a table NVIDIA is freeing.  Making the callback
 * wait for such a map would close that window but can deadlock (the map
 * may wait for the RM lock the freeing thread holds while it runs the
 * callback: the nvidia-peermem hang).  gdrpeer keeps the window as small
 * as it can (the state is checked just before the call), re-checks after
 * it, and drops a mapping that arrived after the callback (NVIDIA freed
 * it with the table).  The test stand-in counts such an overlap as a
 * violation.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": nvidia: " fmt

#include <linux/completion.h>
#include <linux/io.h>
#include <linux/dma-buf.h>
#include <linux/kobject.h>
#include <linux/list.h>
#include <linux/lockdep.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/namei.h>
#include <linux/overflow.h>
#include <linux/pci.h>
#include <linux/scatterlist.h>
#include <linux/slab.h>
#include <linux/sysfs.h>
#include <linux/wait.h>

#include <gdrpeer.h>

#include "gdrpeer_compat.h"
#include "gdrpeer_core.h"
#include "exporter.h"
#include "nv_p2p_abi.h"
#include "nvidia_link.h"
#include "provider.h"

/* How this build reaches nvidia_p2p_*, and why (driver/Makefile). */
MODULE_INFO(nvidia_link, GDRPEER_NV_LINK);

static char *nvidia_module = "nvidia";
module_param(nvidia_module, charp, 0444);
MODULE_PARM_DESC(nvidia_module,
		 "module expected to export nvidia_p2p_* (named in the status line; default nvidia)");

/* ---- the API, resolved ------------------------------------------------ */

struct nvp_api {
	typeof(&nvidia_p2p_get_pages) get_pages;
	typeof(&nvidia_p2p_put_pages) put_pages;
	typeof(&nvidia_p2p_dma_map_pages) dma_map_pages;
	typeof(&nvidia_p2p_dma_unmap_pages) dma_unmap_pages;
	typeof(&nvidia_p2p_free_page_table) free_page_table;
	/* both or neither */
	typeof(&nvidia_p2p_get_pages_persistent) get_pages_persistent;
	typeof(&nvidia_p2p_put_pages_persistent) put_pages_persistent;
};

/* Written under nvp_resolve_lock before nvp_active is set; then constant. */
static struct nvp_api nvp;
static bool nvp_active;		/* smp_store_release / smp_load_acquire */
static DEFINE_MUTEX(nvp_resolve_lock);	/* protects nvp_status */
static char nvp_status[768] = "unavailable: not probed";
static char nvp_last_error[160] = "none";

static struct gdrpeer_counters nvp_cnt;	/* allocations = live pins */
static atomic64_t nvp_pins_persistent, nvp_pins_callback, nvp_revoked;
static atomic64_t nvp_dma_mappings, nvp_callbacks;

static bool nvp_is_active(void)
{
	return smp_load_acquire(&nvp_active);
}

static bool nvp_has_persistent(void)
{
	return nvp_is_active() && nvp.get_pages_persistent;
}

static __printf(1, 2) void nvp_set_last_error(const char *fmt, ...)
{
	va_list ap;

	mutex_lock(&nvp_resolve_lock);
	va_start(ap, fmt);
	vscnprintf(nvp_last_error, sizeof(nvp_last_error), fmt, ap);
	va_end(ap);
	mutex_unlock(&nvp_resolve_lock);
}

#ifdef GDRPEER_NV_LINKED
/* Built against the NVIDIA module's symbols: they are there once loaded. */
static int nvp_resolve(void)
{
	nvp.get_pages = nvidia_p2p_get_pages;
	nvp.put_pages = nvidia_p2p_put_pages;
	nvp.dma_map_pages = nvidia_p2p_dma_map_pages;
	nvp.dma_unmap_pages = nvidia_p2p_dma_unmap_pages;
	nvp.free_page_table = nvidia_p2p_free_page_table;
#ifdef GDRPEER_NV_LINKED_PERSISTENT
	nvp.get_pages_persistent = nvidia_p2p_get_pages_persistent;
	nvp.put_pages_persistent = nvidia_p2p_put_pages_persistent;
#endif
	scnprintf(nvp_status, sizeof(nvp_status), "active (%s)%s",
		  GDRPEER_NV_LINK,
		  nvp.get_pages_persistent ? "" : ", no persistent pins");
	return 0;
}

static void nvp_unresolve(void)
{
}
#else
static void nvp_unresolve(void)
{
	if (nvp.get_pages)
		symbol_put(nvidia_p2p_get_pages);
	if (nvp.put_pages)
		symbol_put(nvidia_p2p_put_pages);
	if (nvp.dma_map_pages)
		symbol_put(nvidia_p2p_dma_map_pages);
	if (nvp.dma_unmap_pages)
		symbol_put(nvidia_p2p_dma_unmap_pages);
	if (nvp.free_page_table)
		symbol_put(nvidia_p2p_free_page_table);
	if (nvp.get_pages_persistent)
		symbol_put(nvidia_p2p_get_pages_persistent);
	if (nvp.put_pages_persistent)
		symbol_put(nvidia_p2p_put_pages_persistent);
	memset(&nvp, 0, sizeof(nvp));
}

/* Is /sys/module/<name> there: the module is loaded (diagnosis only). */
static bool nvp_module_loaded(const char *name)
{
	char path[80];
	struct path p;

	if (snprintf(path, sizeof(path), "/sys/module/%s", name) >=
	    (int)sizeof(path))
		return false;
	if (kern_path(path, LOOKUP_FOLLOW, &p))
		return false;
	path_put(&p);
	return true;
}

static int nvp_resolve(void)
{
	char missing[160] = "";
	size_t used = 0;

#define NVP_GET(field, sym) do {					\
		nvp.field = symbol_get(sym);				\
		if (!nvp.field)						\
			used += scnprintf(missing + used,		\
					  sizeof(missing) - used,	\
					  "%s" #sym, used ? " " : "");	\
	} while (0)
	NVP_GET(get_pages, nvidia_p2p_get_pages);
	NVP_GET(put_pages, nvidia_p2p_put_pages);
	NVP_GET(dma_map_pages, nvidia_p2p_dma_map_pages);
	NVP_GET(dma_unmap_pages, nvidia_p2p_dma_unmap_pages);
	NVP_GET(free_page_table, nvidia_p2p_free_page_table);
#undef NVP_GET
	if (used) {
		bool none = !nvp.get_pages && !nvp.put_pages &&
			    !nvp.dma_map_pages && !nvp.dma_unmap_pages &&
			    !nvp.free_page_table;

		nvp_unresolve();
		if (!none)
			scnprintf(nvp_status, sizeof(nvp_status),
				  "unavailable: symbols missing: %s (NVIDIA driver too old?)",
				  missing);
		else if (nvp_module_loaded(nvidia_module))
			scnprintf(nvp_status, sizeof(nvp_status),
				  "unavailable: %s is loaded but its nvidia_p2p_* exports are not GPL and this kernel's symbol_get() reaches only GPL exports (mainline 6.5+, stable backports): %s (build: %s)",
				  nvidia_module,
				  IS_ENABLED(GDRPEER_NV_LINK_REFUSED) ?
				  "a proprietary exporter cannot be served on this kernel" :
				  "for NVIDIA's open modules (GPL-compatible) rebuild gdrpeer with NVIDIA_SYMVERS=<its Module.symvers>; the proprietary ones cannot be served on this kernel",
				  GDRPEER_NV_LINK);
		else
			scnprintf(nvp_status, sizeof(nvp_status),
				  "unavailable: no nvidia_p2p_* symbols (%s not loaded)",
				  nvidia_module);
		return -ENOENT;
	}
	/* optional: persistent pins (both or neither) */
	nvp.get_pages_persistent = symbol_get(nvidia_p2p_get_pages_persistent);
	nvp.put_pages_persistent = symbol_get(nvidia_p2p_put_pages_persistent);
	if (!nvp.get_pages_persistent || !nvp.put_pages_persistent) {
		if (nvp.get_pages_persistent)
			symbol_put(nvidia_p2p_get_pages_persistent);
		if (nvp.put_pages_persistent)
			symbol_put(nvidia_p2p_put_pages_persistent);
		nvp.get_pages_persistent = NULL;
		nvp.put_pages_persistent = NULL;
	}
	scnprintf(nvp_status, sizeof(nvp_status), "active (symbol_get)%s",
		  nvp.get_pages_persistent ? "" : ", no persistent pins");
	return 0;
}
#endif

/* Resolve if not active yet; called with nvp_resolve_lock held. */
static int nvp_try_activate(void)
{
	int ret;

	lockdep_assert_held(&nvp_resolve_lock);
	if (nvp_active)
		return 0;
	ret = nvp_resolve();
	if (!ret)
		smp_store_release(&nvp_active, true);
	return ret;
}

/* ---- pins -------------------------------------------------------------- */

enum nvp_pin_state {
	NVP_PINNED,
	NVP_REVOKING,	/* free callback running */
	NVP_REVOKED,	/* callback done: NVIDIA freed table and mappings */
	NVP_RELEASING,	/* last reference gone: put_pages called once */
};

struct nvp_pin {
	struct gdrpeer_region region;
	struct nvidia_p2p_page_table *pt;	/* NVIDIA's; dead after REVOKING */
	u64 va;
	bool persistent;
	struct mutex lock;		/* see the lock order at the top */
	enum nvp_pin_state state;
	struct list_head imports;	/* struct nvp_import */
	bool wc_reserved;		/* ranges reserved write-combining */
	bool cb_started;
	struct completion cb_done;	/* the callback has returned */
	atomic_t unmaps_in_flight;	/* dma_unmap_pages calls running */
	wait_queue_head_t unmap_wq;
};

/* One importer's mapping (dma_buf_attachment.priv). */
struct nvp_import {
	struct list_head node;
	struct pci_dev *pdev;
	struct nvidia_p2p_dma_mapping *map;	/* NULL once revoked */
	/* @map's addresses, adjacent pages merged (room for one per page) */
	struct gdrpeer_range *dma_ranges;
	unsigned int nr_dma_ranges;
};

static void nvp_import_free(struct nvp_import *im)
{
	if (im)
		kfree(im->dma_ranges);
	kfree(im);
}

/* Fill @im's DMA ranges from its mapping; under pin->lock, while PINNED. */
static void nvp_import_fill_ranges(struct nvp_import *im)
{
	const struct nvidia_p2p_dma_mapping *map = im->map;
	struct gdrpeer_range *rg = im->dma_ranges;
	unsigned int i, n = 0;

	for (i = 0; i < map->entries; i++) {
		u64 addr = map->dma_addresses[i];

		if (n && rg[n - 1].phys + rg[n - 1].len == addr) {
			rg[n - 1].len += GDRPEER_NV_PAGE_SIZE;
		} else {
			rg[n].phys = addr;
			rg[n].len = GDRPEER_NV_PAGE_SIZE;
			n++;
		}
	}
	im->nr_dma_ranges = n;
}

static struct nvp_pin *to_pin(struct gdrpeer_region *r)
{
	return container_of(r, struct nvp_pin, region);
}

/* Give back the write-combining reservations of the first @n ranges. */
static void nvp_wc_release(struct gdrpeer_region *r, unsigned int n)
{
	while (n--)
		arch_io_free_memtype_wc(r->ranges[n].phys, r->ranges[n].len);
}

/* Called by NVIDIA (its own context) when the memory under @data goes. */
static void nvp_free_callback(void *data)
{
	struct nvp_pin *pin = data;
	struct nvp_import *im;

	atomic64_inc(&nvp_callbacks);
	mutex_lock(&pin->lock);
	pin->cb_started = true;
	if (pin->state != NVP_PINNED) {
		/* racing with the final put: nothing is exported any more */
		mutex_unlock(&pin->lock);
		complete(&pin->cb_done);
		return;
	}
	pin->state = NVP_REVOKING;
	atomic64_inc(&nvp_revoked);
	/*
	 * New attaches see REVOKING.  The region may be in its release
	 * already; that waits for cb_done before it frees anything.
	 */
	mutex_unlock(&pin->lock);

	/* importers told and waited for, CPU mappings zapped */
	gdrpeer_region_revoke(&pin->region);

	mutex_lock(&pin->lock);
	/* NVIDIA frees these mappings after we return */
	list_for_each_entry(im, &pin->imports, node) {
		if (im->map) {
			im->map = NULL;
			atomic64_dec(&nvp_dma_mappings);
		}
	}
	/*
	 * NVIDIA hands these BAR1 pages to someone else after we return: the
	 * write-combining reservation goes now, not when the last fd of the
	 * dma-buf is closed, or a later uncached mapping of the same pages by
	 * another user would get WC (x86 PAT keeps the first type).  No CPU
	 * mapping of ours is left (zapped above) and faults see @revoked.
	 */
	if (pin->wc_reserved) {
		nvp_wc_release(&pin->region, pin->region.nr_ranges);
		pin->wc_reserved = false;
	}
	mutex_unlock(&pin->lock);

	/* an unmap that started before may still use the table: let it end */
	wait_event(pin->unmap_wq, !atomic_read(&pin->unmaps_in_flight));

	mutex_lock(&pin->lock);
	pin->state = NVP_REVOKED;
	pin->pt = NULL;
	mutex_unlock(&pin->lock);
	complete(&pin->cb_done);
}

static int nvp_attach(struct gdrpeer_region *r, struct dma_buf_attachment *a)
{
	struct nvp_pin *pin = to_pin(r);
	struct nvidia_p2p_dma_mapping *map = NULL;
	struct nvidia_p2p_page_table *pt;
	struct nvp_import *im;
	struct pci_dev *pdev;
	int ret;

	/* nvidia_p2p_dma_map_pages maps for a PCI peer and nothing else */
	if (!dev_is_pci(a->dev)) {
		dev_dbg(a->dev, "gdrpeer: nvidia memory needs a PCI importer\n");
		return -EOPNOTSUPP;
	}
	pdev = to_pci_dev(a->dev);
	im = kzalloc(sizeof(*im), GFP_KERNEL);
	if (im)
		im->dma_ranges = kcalloc(r->size / GDRPEER_NV_PAGE_SIZE,
					 sizeof(*im->dma_ranges), GFP_KERNEL);
	if (!im || !im->dma_ranges) {
		nvp_import_free(im);
		return -ENOMEM;
	}
	im->pdev = pdev;

	mutex_lock(&pin->lock);
	pt = pin->pt;
	ret = pin->state == NVP_PINNED ? 0 : -ENODEV;
	mutex_unlock(&pin->lock);
	if (ret)
		goto err_free;

	/* no lock of ours here: this may wait for a running callback */
	ret = nvp.dma_map_pages(pdev, pt, &map);
	if (ret) {
		mutex_lock(&pin->lock);
		/* the memory went while we asked: say so, not NVIDIA's errno */
		if (pin->state != NVP_PINNED)
			ret = -ENODEV;
		mutex_unlock(&pin->lock);
		ret = ret == -ENOTSUPP ? -EOPNOTSUPP : ret;
		goto err_free;
	}

	mutex_lock(&pin->lock);
	if (pin->state != NVP_PINNED) {
		/* freed meanwhile: NVIDIA dropped the mapping with the table */
		mutex_unlock(&pin->lock);
		ret = -ENODEV;
		goto err_free;
	}
	if (!gdrpeer_nv_version_ok(map->version,
				   NVIDIA_P2P_DMA_MAPPING_VERSION) ||
	    map->page_size_type != NVIDIA_P2P_PAGE_SIZE_64KB ||
	    map->entries != pt->entries || !map->dma_addresses) {
		atomic_inc(&pin->unmaps_in_flight);
		mutex_unlock(&pin->lock);
		pr_warn_ratelimited("DMA mapping version %#x / page size type %u / %u entries not understood (want version %#x)\n",
				    map->version, map->page_size_type,
				    map->entries,
				    NVIDIA_P2P_DMA_MAPPING_VERSION);
		nvp_set_last_error("DMA mapping version %#x not compatible with %#x",
				   map->version,
				   NVIDIA_P2P_DMA_MAPPING_VERSION);
		nvp.dma_unmap_pages(pdev, pt, map);
		if (atomic_dec_and_test(&pin->unmaps_in_flight))
			wake_up(&pin->unmap_wq);
		ret = -EPROTO;
		goto err_free;
	}
	im->map = map;
	nvp_import_fill_ranges(im);
	list_add(&im->node, &pin->imports);
	atomic64_inc(&nvp_dma_mappings);
	mutex_unlock(&pin->lock);
	*gdrpeer_attach_provider(a) = im;
	return 0;

err_free:
	nvp_import_free(im);
	return ret;
}

static void nvp_detach(struct gdrpeer_region *r, struct dma_buf_attachment *a)
{
	struct nvp_pin *pin = to_pin(r);
	struct nvp_import *im = *gdrpeer_attach_provider(a);
	struct nvidia_p2p_dma_mapping *map;
	struct nvidia_p2p_page_table *pt;

	mutex_lock(&pin->lock);
	list_del(&im->node);
	map = im->map;
	pt = pin->pt;
	if (map) {
		/* still ours to unmap: the callback waits for us */
		atomic_inc(&pin->unmaps_in_flight);
		atomic64_dec(&nvp_dma_mappings);
	}
	mutex_unlock(&pin->lock);
	if (map) {
		int ret = nvp.dma_unmap_pages(im->pdev, pt, map);

		if (ret)
			pr_warn_ratelimited("dma_unmap_pages for %s: %d\n",
					    pci_name(im->pdev), ret);
		if (atomic_dec_and_test(&pin->unmaps_in_flight))
			wake_up(&pin->unmap_wq);
	}
	*gdrpeer_attach_provider(a) = NULL;
	nvp_import_free(im);
}

/*
 * Under the reservation lock: the exporter has checked that the dma-buf is
 * not revoked, and the callback revokes (under this same lock) before it
 * returns and NVIDIA frees @im->map, so the addresses are valid here.
 */
static int nvp_dma_ranges(struct gdrpeer_region *r,
			  struct dma_buf_attachment *a,
			  const struct gdrpeer_range **ranges,
			  unsigned int *nr_ranges)
{
	struct nvp_import *im = *gdrpeer_attach_provider(a);

	dma_resv_assert_held(a->dmabuf->resv);
	if (!READ_ONCE(im->map))
		return -ENODEV;
	*ranges = im->dma_ranges;
	*nr_ranges = im->nr_dma_ranges;
	return 0;
}

static void nvp_put(struct nvp_pin *pin)
{
	int ret;

	if (pin->persistent)
		ret = nvp.put_pages_persistent(pin->va, pin->pt, 0);
	else
		ret = nvp.put_pages(0, 0, pin->va, pin->pt);
	if (ret)
		pr_warn_ratelimited("put_pages of %#llx: %d\n", pin->va, ret);
}

/*
 * CPU mappings of the pin are inserted page by page at fault time and get
 * the memory type reserved for each address, uncached where nobody
 * reserved one: reserve write-combining for every range, as the pcibar
 * provider does for its whole BAR.  A range that another mapping holds
 * uncached stays so (x86 PAT never mixes types); that is logged.
 */
static void nvp_wc_reserve(struct nvp_pin *pin)
{
	struct gdrpeer_region *r = &pin->region;
	unsigned int i;
	int ret = 0;

	lockdep_assert_held(&pin->lock);

	for (i = 0; i < r->nr_ranges; i++) {
		ret = arch_io_reserve_memtype_wc(r->ranges[i].phys,
						 r->ranges[i].len);
		if (ret)
			break;
	}
	if (ret) {
		nvp_wc_release(r, i);
		pr_warn_ratelimited("cannot reserve write-combining for %#llx (%d): CPU mappings of this pin may be uncached\n",
				    (u64)r->ranges[i].phys, ret);
		return;
	}
	pin->wc_reserved = true;
}

static void nvp_release(struct gdrpeer_region *r)
{
	struct nvp_pin *pin = to_pin(r);
	bool put = false, wait;

	mutex_lock(&pin->lock);
	if (pin->state == NVP_PINNED) {
		pin->state = NVP_RELEASING;
		put = true;
	}
	mutex_unlock(&pin->lock);

	/* exactly once, and never after a callback took the table away */
	if (put)
		nvp_put(pin);

	mutex_lock(&pin->lock);
	wait = pin->cb_started;
	mutex_unlock(&pin->lock);
	/* the callback may still be running on another CPU */
	if (wait)
		wait_for_completion(&pin->cb_done);
	else if (!put)
		WARN_ON_ONCE(1);	/* revoked state without a callback */

	mutex_lock(&pin->lock);
	if (pin->state == NVP_REVOKED || pin->state == NVP_REVOKING)
		atomic64_dec(&nvp_revoked);
	mutex_unlock(&pin->lock);
	/* the callback's revoke is over: this cannot change any more */
	if (r->revoked)
		atomic64_dec(&r->cnt->revoked);
	if (pin->persistent)
		atomic64_dec(&nvp_pins_persistent);
	else
		atomic64_dec(&nvp_pins_callback);
	atomic64_sub(r->size, &nvp_cnt.alloc_bytes);
	atomic64_dec(&nvp_cnt.allocations);
	if (pin->wc_reserved)
		nvp_wc_release(r, r->nr_ranges);
	if (r->ranges != &r->range0)
		kfree(r->ranges);
	mutex_destroy(&pin->lock);
	kfree(pin);
}

static const struct gdrpeer_region_ops nvp_region_ops = {
	.attach = nvp_attach,
	.detach = nvp_detach,
	.dma_ranges = nvp_dma_ranges,
	.release = nvp_release,
};

/*
 * Checks NVIDIA's page table and fills the region's CPU ranges (for mmap)
 * from it, adjacent pages merged.
 */
static int nvp_take_table(struct nvp_pin *pin, u64 len)
{
	struct nvidia_p2p_page_table *pt = pin->pt;
	struct gdrpeer_region *r = &pin->region;
	u32 i, n = 0;

	if (!gdrpeer_nv_version_ok(pt->version,
				   NVIDIA_P2P_PAGE_TABLE_VERSION)) {
		pr_warn_ratelimited("page table version %#x is not compatible with %#x (NVIDIA driver too old or too new)\n",
				    pt->version, NVIDIA_P2P_PAGE_TABLE_VERSION);
		nvp_set_last_error("page table version %#x not compatible with %#x",
				   pt->version, NVIDIA_P2P_PAGE_TABLE_VERSION);
		return -EPROTO;
	}
	if (pt->page_size != NVIDIA_P2P_PAGE_SIZE_64KB || !pt->pages ||
	    (u64)pt->entries * GDRPEER_NV_PAGE_SIZE != len) {
		pr_warn_ratelimited("page table: page size type %u, %u entries for %llu bytes: not understood\n",
				    pt->page_size, pt->entries, len);
		nvp_set_last_error("page table: page size type %u, %u entries for %llu bytes",
				   pt->page_size, pt->entries, len);
		return -EPROTO;
	}
	for (i = 0; i < pt->entries; i++)
		if (!i || pt->pages[i]->physical_address !=
			  pt->pages[i - 1]->physical_address +
			  GDRPEER_NV_PAGE_SIZE)
			n++;
	if (n == 1) {
		r->ranges = &r->range0;
	} else {
		r->ranges = kcalloc(n, sizeof(*r->ranges), GFP_KERNEL);
		if (!r->ranges)
			return -ENOMEM;
	}
	r->nr_ranges = n;
	n = 0;
	for (i = 0; i < pt->entries; i++) {
		u64 pa = pt->pages[i]->physical_address;

		if (i && pa == r->ranges[n - 1].phys + r->ranges[n - 1].len) {
			r->ranges[n - 1].len += GDRPEER_NV_PAGE_SIZE;
		} else {
			r->ranges[n].phys = pa;
			r->ranges[n].len = GDRPEER_NV_PAGE_SIZE;
			n++;
		}
	}
	return 0;
}

/*
 * Pin [va, va + length) of the caller's CUDA memory (64 KiB aligned, the
 * caller checked) in @mode: GDRPEER_PIN_PERSISTENT, GDRPEER_PIN_CALLBACK
 * or 0 (persistent where the driver has it, else callback).  Returns the
 * pin's region with one reference, or an ERR_PTR.
 */
static struct nvp_pin *nvp_pin_va(u64 va, u64 length, u32 mode)
{
	struct nvp_pin *pin;
	int ret;

	if (!nvp_is_active())
		return ERR_PTR(-ENODEV);
	if (mode == GDRPEER_PIN_PERSISTENT && !nvp.get_pages_persistent)
		return ERR_PTR(-EOPNOTSUPP);

	pin = kzalloc(sizeof(*pin), GFP_KERNEL);
	if (!pin)
		return ERR_PTR(-ENOMEM);
	mutex_init(&pin->lock);
	INIT_LIST_HEAD(&pin->imports);
	init_completion(&pin->cb_done);
	atomic_set(&pin->unmaps_in_flight, 0);
	init_waitqueue_head(&pin->unmap_wq);
	pin->va = va;
	pin->state = NVP_PINNED;
	/*
	 * Before get_pages: its free callback may revoke the region at once,
	 * and revocation counts in the region's gauges.
	 */
	gdrpeer_region_init(&pin->region, length, GDRPEER_REVOCABLE_ANY_TIME);
	pin->region.ops = &nvp_region_ops;
	pin->region.cnt = &nvp_cnt;

	/* persistent by default where the driver has it */
	ret = -EOPNOTSUPP;
	if (mode != GDRPEER_PIN_CALLBACK && nvp.get_pages_persistent) {
		ret = nvp.get_pages_persistent(va, length, &pin->pt, 0);
		if (!ret)
			pin->persistent = true;
		else if (ret == -ENOTSUPP || ret == -EOPNOTSUPP)
			ret = mode ? -EOPNOTSUPP : -ENOTSUPP;
	}
	if (!pin->persistent && mode != GDRPEER_PIN_PERSISTENT &&
	    (ret == -ENOTSUPP || ret == -EOPNOTSUPP))
		ret = nvp.get_pages(0, 0, va, length, &pin->pt,
				    nvp_free_callback, pin);
	if (ret) {
		mutex_destroy(&pin->lock);
		kfree(pin);
		return ERR_PTR(ret == -ENOTSUPP ? -EOPNOTSUPP : ret);
	}

	/* from here on nvp_release() undoes everything */
	if (pin->persistent)
		pin->region.revocable = GDRPEER_REVOCABLE_WITH_DEVICE;
	atomic64_inc(&nvp_cnt.allocations);
	atomic64_add(length, &nvp_cnt.alloc_bytes);
	atomic64_inc(pin->persistent ? &nvp_pins_persistent :
				       &nvp_pins_callback);

	/* the table is only read before a callback can have freed it if
	 * the callback has not started: hold the lock while reading it
	 */
	mutex_lock(&pin->lock);
	ret = pin->state == NVP_PINNED ? nvp_take_table(pin, length) : -ENODEV;
	/*
	 * Under the lock with the state checked: a free callback either came
	 * first (no reservation is made) or gives the reservation back.
	 */
	if (!ret)
		nvp_wc_reserve(pin);
	mutex_unlock(&pin->lock);
	if (ret) {
		pin->region.nr_ranges = 0;
		gdrpeer_region_put(&pin->region);
		return ERR_PTR(ret);
	}
	return pin;
}

/*
 * GDRPEER_IOCTL_EXPORT_VA: pin [e->va, +e->length) of the caller's CUDA
 * memory and export it.  Fills the outputs of @e; returns the dma-buf.
 */
static struct dma_buf *nvp_export_va(struct gdrpeer_export_va *e)
{
	u32 mode = e->flags & (GDRPEER_PIN_PERSISTENT | GDRPEER_PIN_CALLBACK);
	struct dma_buf *dmabuf;
	struct nvp_pin *pin;
	u64 end;

	if (e->flags & ~(GDRPEER_PIN_PERSISTENT | GDRPEER_PIN_CALLBACK) ||
	    mode == (GDRPEER_PIN_PERSISTENT | GDRPEER_PIN_CALLBACK))
		return ERR_PTR(-EINVAL);
	if (check_add_overflow(e->va, e->length, &end))
		return ERR_PTR(-EOVERFLOW);
	if (!e->length || !IS_ALIGNED(e->va, GDRPEER_NV_PAGE_SIZE) ||
	    !IS_ALIGNED(e->length, GDRPEER_NV_PAGE_SIZE) ||
	    e->length / GDRPEER_NV_PAGE_SIZE > U32_MAX)
		return ERR_PTR(-EINVAL);
	pin = nvp_pin_va(e->va, e->length, mode);
	if (IS_ERR(pin))
		return ERR_CAST(pin);

	dmabuf = gdrpeer_dmabuf_export(&pin->region, 0, e->length);
	/* the dma-buf holds its own reference from here on */
	if (IS_ERR(dmabuf)) {
		gdrpeer_region_put(&pin->region);
		return dmabuf;
	}
	/*
	 * Freed between pinning and exporting: the callback revoked the
	 * region before the dma-buf existed, and export saw that.
	 */
	gdrpeer_region_put(&pin->region);

	e->pin_mode = pin->persistent ? GDRPEER_PIN_PERSISTENT :
					GDRPEER_PIN_CALLBACK;
	e->page_size = (u32)GDRPEER_NV_PAGE_SIZE;
	e->pages = e->length / GDRPEER_NV_PAGE_SIZE;
	return dmabuf;
}

/*
 * The peer-memory client's CUDA addresses: pin the GPU pages around
 * [addr, addr + size).  No lock of gdrpeer is held; the caller may hold
 * ib_core's client lock, which NVIDIA's free path never takes.
 */
static struct gdrpeer_region *nvp_pin_user(u64 addr, u64 size, u32 *mode,
					   u64 *page_size)
{
	u64 start = round_down(addr, GDRPEER_NV_PAGE_SIZE), end;
	struct nvp_pin *pin;

	if (!size || check_add_overflow(addr, size, &end) ||
	    end > U64_MAX - GDRPEER_NV_PAGE_SIZE)
		return ERR_PTR(-EINVAL);
	end = round_up(end, GDRPEER_NV_PAGE_SIZE);
	if ((end - start) / GDRPEER_NV_PAGE_SIZE > U32_MAX)
		return ERR_PTR(-EINVAL);
	pin = nvp_pin_va(start, end - start, *mode);
	if (IS_ERR(pin))
		return ERR_CAST(pin);
	*mode = pin->persistent ? GDRPEER_PIN_PERSISTENT : GDRPEER_PIN_CALLBACK;
	*page_size = GDRPEER_NV_PAGE_SIZE;
	return &pin->region;
}

/* ---- sysfs: .../providers/nvidia/ --------------------------------------- */

static ssize_t status_show(struct kobject *kobj, struct kobj_attribute *attr,
			   char *buf)
{
	ssize_t n;

	mutex_lock(&nvp_resolve_lock);
	n = sysfs_emit(buf, "%s\n", nvp_status);
	mutex_unlock(&nvp_resolve_lock);
	return n;
}

static ssize_t last_error_show(struct kobject *kobj,
			       struct kobj_attribute *attr, char *buf)
{
	ssize_t n;

	mutex_lock(&nvp_resolve_lock);
	n = sysfs_emit(buf, "%s\n", nvp_last_error);
	mutex_unlock(&nvp_resolve_lock);
	return n;
}

static ssize_t persistent_show(struct kobject *kobj,
			       struct kobj_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "%d\n", nvp_has_persistent() ? 1 : 0);
}

static ssize_t rescan_store(struct kobject *kobj, struct kobj_attribute *attr,
			    const char *buf, size_t count)
{
	bool yes;
	int ret;

	ret = kstrtobool(buf, &yes);
	if (ret)
		return ret;
	if (!yes)
		return -EINVAL;
	mutex_lock(&nvp_resolve_lock);
	ret = nvp_try_activate();
	mutex_unlock(&nvp_resolve_lock);
	if (!ret)
		pr_info("provider %s\n", nvp_status);
	return ret ? -ENODEV : (ssize_t)count;
}

#define NVP_GAUGE(name, var)						\
static ssize_t name##_show(struct kobject *kobj,			\
			   struct kobj_attribute *attr, char *buf)	\
{									\
	return sysfs_emit(buf, "%lld\n", (long long)atomic64_read(var));	\
}									\
static struct kobj_attribute name##_attr = __ATTR_RO(name)

NVP_GAUGE(pins, &nvp_cnt.allocations);
NVP_GAUGE(pinned_bytes, &nvp_cnt.alloc_bytes);
NVP_GAUGE(pins_persistent, &nvp_pins_persistent);
NVP_GAUGE(pins_callback, &nvp_pins_callback);
NVP_GAUGE(revoked, &nvp_revoked);
NVP_GAUGE(exports, &nvp_cnt.exports);
NVP_GAUGE(attachments, &nvp_cnt.attachments);
NVP_GAUGE(active_maps, &nvp_cnt.active_maps);
NVP_GAUGE(vmaps, &nvp_cnt.vmaps);
NVP_GAUGE(dma_mappings, &nvp_dma_mappings);
NVP_GAUGE(callbacks, &nvp_callbacks);

static struct kobj_attribute status_attr = __ATTR_RO(status);
static struct kobj_attribute last_error_attr = __ATTR_RO(last_error);
static struct kobj_attribute persistent_attr = __ATTR_RO(persistent);
static struct kobj_attribute rescan_attr = __ATTR_WO(rescan);

static struct attribute *nvp_attrs[] = {
	&status_attr.attr,
	&last_error_attr.attr,
	&persistent_attr.attr,
	&rescan_attr.attr,
	&pins_attr.attr,
	&pinned_bytes_attr.attr,
	&pins_persistent_attr.attr,
	&pins_callback_attr.attr,
	&revoked_attr.attr,
	&exports_attr.attr,
	&attachments_attr.attr,
	&active_maps_attr.attr,
	&vmaps_attr.attr,
	&dma_mappings_attr.attr,
	&callbacks_attr.attr,
	NULL,
};

static const struct attribute_group nvp_group = {
	.attrs = nvp_attrs,
};

/* Load: look the API up once (providers/nvidia/rescan tries again). */
static int nvp_init(void)
{
	mutex_lock(&nvp_resolve_lock);
	nvp_try_activate();
	mutex_unlock(&nvp_resolve_lock);
	return 0;
}

/* Module unload: no pin can be alive (each dma-buf holds the module). */
static void nvp_exit(void)
{
	mutex_lock(&nvp_resolve_lock);
	WARN_ON(atomic64_read(&nvp_cnt.allocations));
	if (nvp_active)
		nvp_unresolve();
	smp_store_release(&nvp_active, false);
	mutex_unlock(&nvp_resolve_lock);
}

static u32 nvp_caps(void)
{
	u32 caps = 0;

	if (nvp_is_active())
		caps |= GDRPEER_CAP_EXPORT_VA;
	if (nvp_has_persistent())
		caps |= GDRPEER_CAP_PIN_PERSISTENT;
	return caps;
}

/* For the load line, which runs before any sysfs write can change it. */
static const char *nvp_status_line(void)
{
	return nvp_status;
}

const struct gdrpeer_provider gdrpeer_nvidia_provider = {
	.name = "nvidia",
	.sysfs_group = &nvp_group,
	.init = nvp_init,
	.exit = nvp_exit,
	.caps = nvp_caps,
	.status = nvp_status_line,
	.export_va = nvp_export_va,
	.pin_user = nvp_pin_user,
};

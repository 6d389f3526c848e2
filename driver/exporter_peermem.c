// SPDX-License-Identifier: GPL-2.0
/*
 * Peer-memory client of MLNX_OFED / DOCA-OFED's ib_core: a plain
 * ibv_reg_mr() of a gdrpeer mapping (mmap of a /dev/gdrpeer handle) or of
 * a CUDA address registers the device memory behind it, the way
 * nvidia-peermem does for CUDA addresses.  Built only when
 * driver/Makefile's probe (conftest_peermem.sh) found OFED's
 * include/rdma/peer_mem.h and the two ib_*_peer_memory_client exports in
 * its Module.symvers; otherwise this file only says why in
 * providers/peermem/status.
 *
 * What it serves: user addresses inside one handle mapping of a region of
 * plain BAR ranges (the pcibar provider), and (peermem_cuda, below) CUDA
 * addresses the nvidia provider can pin: acquire pins the 64 KiB GPU
 * pages around the range (nvidia_p2p_get_pages with a free callback, or
 * _persistent: peermem_cuda_pin) as a region of its own.  Everything else
 * (host memory, regions with provider ops) is answered "not mine", so the
 * core tries the next client or pins host pages.
 *
 * One registration (struct pm_ctx) goes
 *   acquire:   region reference (a CUDA pin: the pin) and a module
 *              reference (rmmod gdrpeer is refused with -EBUSY while any
 *              registration lives)
 *   get_pages: on the pinned list (revocation finds it there)
 *   dma_map:   every physically contiguous piece of the range mapped with
 *              dma_map_resource() on the HCA's device, one sg entry each
 *   dma_unmap, put_pages, release: undone in that order; release drops
 *              the region (a CUDA pin's last reference puts its pages)
 * Revocation (the device is unbound or removed; NVIDIA's free callback of
 * a CUDA pin, i.e. cudaFree) calls the core's invalidate for every pinned
 * registration of the region and unmaps it itself afterwards
 * (PEER_MEM_INVALIDATE_UNMAPS): once invalidate returns the HCA does no
 * more DMA, and the memory goes back only after that (NVIDIA frees the
 * pages when its callback returns).
 *
 * Lock order (outermost first), all mutexes, every holder may sleep:
 *   core's peer client lock (acquire) -> mmap_lock (read)
 *   core's peer client lock (acquire) -> NVIDIA's RM lock (CUDA pin)
 *   NVIDIA's RM lock (its free path, running our free callback)
 *     -> core's umem mapping lock (the core's invalidate; no lock of ours
 *     is held across that call)
 *   core's umem mapping lock (get_pages, dma_map, dma_unmap, put_pages)
 *   -> pm_ctx.lock -> pm_list_lock -> gdrpeer_region.memory_lock (read)
 * So nothing that runs under the core's mapping lock may wait for the RM
 * lock (the class of nvidia-peermem's inversion with MOFED 5.1, between
 * the mapping lock and an NVIDIA driver lock).  A CUDA pin is therefore
 * taken in acquire and put in release, which the core calls outside its
 * mapping lock, and mapped with the DMA API on the page table's addresses,
 * which needs no NVIDIA lock, instead of nvidia_p2p_dma_map_pages.
 * The core's invalidate takes its umem mapping lock, and without
 * INVALIDATE_UNMAPS calls dma_unmap/put_pages (pm_ctx.lock) from inside,
 * so it is called with no lock of ours held: pm_ctx.lock is dropped after
 * marking the registration invalidating, and taken again after it returns.
 * pm_nv_lock (which of NVIDIA's peer-memory modules are loaded) is a leaf:
 *   module notifier chain (its rwsem) -> pm_nv_lock -> module kset's
 *   list_lock (spinlock, in kset_find_obj)
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": peermem: " fmt

#include <linux/ctype.h>
#include <linux/dma-mapping.h>
#include <linux/kobject.h>
#include <linux/kref.h>
#include <linux/list.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/mutex.h>
#include <linux/notifier.h>
#include <linux/sched.h>
#include <linux/scatterlist.h>
#include <linux/slab.h>
#include <linux/string.h>
#include <linux/sysfs.h>

#include <gdrpeer.h>

#include "gdrpeer_compat.h"
#include "exporter.h"
#include "provider.h"
/* GDRPEER_PEERMEM, GDRPEER_PEERMEM_LINK and OFED's peer_mem.h, or why not */
#include "peermem_link.h"

static struct kobject *pm_kobj;		/* providers/peermem */
static const char *pm_status = GDRPEER_PEERMEM_LINK;

#ifdef GDRPEER_PEERMEM

/* Longest sg entry (sg lengths are unsigned int). */
#define PM_MAX_SEG SZ_1G

enum pm_state {
	PM_ACQUIRED,		/* acquire done, nothing pinned */
	PM_PINNED,		/* get_pages done: on pm_pinned */
	PM_MAPPED,		/* dma_map done */
	PM_INVALIDATED,		/* revoked: unmapped by us, still listed */
};

struct pm_seg {
	dma_addr_t addr;
	u64 len;
};

/* One registration of the core (its client_context). */
struct pm_ctx {
	struct kref ref;		/* release's + revocation's walkers */
	struct mutex lock;		/* everything below */
	struct gdrpeer_region *r;	/* reference from acquire to release */
	bool cuda;			/* @r is a CUDA pin made by acquire */
	u64 page_size;			/* what get_page_size reports */
	unsigned long addr;		/* as acquire got them */
	size_t size;
	u64 offset;			/* @page_size aligned start in @r */
	u64 len;			/* @page_size aligned length */
	enum pm_state state;
	bool invalidating;		/* revocation started: no new dma_map */
	u64 core_context;
	struct device *dma_dev;		/* reference while mapped */
	struct pm_seg *segs;		/* mapped pieces while PM_MAPPED */
	unsigned int nsegs;
	struct sg_table sgt;		/* the table dma_map allocated */
	/* on pm_pinned from get_pages to put_pages/release; pm_list_lock */
	struct list_head node;
	bool listed;
	bool revoke_seen;		/* pm_list_lock */
};

static DEFINE_MUTEX(pm_list_lock);
static LIST_HEAD(pm_pinned);

static struct peer_memory_client_ex pm_client;
static void *pm_handle;			/* from ib_register_peer_memory_client */
static invalidate_peer_memory pm_core_invalidate;

static atomic64_t pm_acquired = ATOMIC64_INIT(0);	/* gauge */
static atomic64_t pm_mapped = ATOMIC64_INIT(0);		/* gauge */
static atomic64_t pm_invalidations = ATOMIC64_INIT(0);	/* total */
static atomic64_t pm_cuda_acquired = ATOMIC64_INIT(0);	/* gauge */

/*
 * Coexistence with nvidia-peermem: who serves CUDA addresses.  ib_core
 * gives a registration to the first client whose acquire takes it, so
 * two clients claiming the same memory would split it by load order;
 * the default leaves CUDA addresses to nvidia-peermem whenever it is
 * loaded.
 */
enum { PM_CUDA_AUTO, PM_CUDA_ON, PM_CUDA_OFF };
static const char * const pm_cuda_names[] = { "auto", "on", "off" };
/* how CUDA addresses are pinned (nvidia_p2p_get_pages or _persistent) */
enum { PM_PIN_CALLBACK, PM_PIN_PERSISTENT };
static const char * const pm_pin_names[] = { "callback", "persistent" };

struct pm_choice {
	int val;			/* READ_ONCE: a sysfs write may change it */
	const char * const *names;
	unsigned int n;
};

static int pm_choice_set(const char *val, const struct kernel_param *kp)
{
	struct pm_choice *c = kp->arg;
	int i = __sysfs_match_string(c->names, c->n, val);

	if (i < 0)
		return -EINVAL;
	WRITE_ONCE(c->val, i);
	return 0;
}

static int pm_choice_get(char *buf, const struct kernel_param *kp)
{
	const struct pm_choice *c = kp->arg;

	return scnprintf(buf, PAGE_SIZE, "%s\n", c->names[READ_ONCE(c->val)]);
}

static const struct kernel_param_ops pm_choice_ops = {
	.set = pm_choice_set,
	.get = pm_choice_get,
};

static struct pm_choice pm_cuda = {
	PM_CUDA_AUTO, pm_cuda_names, ARRAY_SIZE(pm_cuda_names)
};
module_param_cb(peermem_cuda, &pm_choice_ops, &pm_cuda, 0644);
MODULE_PARM_DESC(peermem_cuda,
		 "serve CUDA addresses (ibv_reg_mr of cudaMalloc memory) through the nvidia provider: auto (default: not while nvidia_peermem or nv_peer_mem is loaded), on, off");

static struct pm_choice pm_pin = {
	PM_PIN_CALLBACK, pm_pin_names, ARRAY_SIZE(pm_pin_names)
};
module_param_cb(peermem_cuda_pin, &pm_choice_ops, &pm_pin, 0644);
MODULE_PARM_DESC(peermem_cuda_pin,
		 "pins of CUDA registrations: callback (default: cudaFree invalidates the registration) or persistent (the memory stays until deregistration)");

/*
 * The name the client registers under.  Consumers do not ask ib_core
 * which clients exist: each looks for the sysfs entry of names it knows
 * (MOFED's ib_core makes /sys/kernel/mm/memory_peers/<name>/), see
 * docs/driver.md.  "gdrpeer" (the default) is recognised by none of them
 * and can never collide with NVIDIA's client; "nv_mem" is what NCCL,
 * NVSHMEM and UCX recognise, and is nvidia_peermem's own name, so it is
 * refused while nvidia_peermem (or nv_peer_mem) is loaded, and while
 * gdrpeer holds it they are refused (pm_module_event).  Set at load only:
 * the client is registered once.  A sysfs directory name of at most
 * IB_PEER_MEMORY_NAME_MAX - 1 characters from [A-Za-z0-9_-].
 */
static char pm_name[IB_PEER_MEMORY_NAME_MAX] = KBUILD_MODNAME;

static int pm_name_set(const char *val, const struct kernel_param *kp)
{
	size_t len = strcspn(val, "\n");
	size_t i;

	if (!len || len >= sizeof(pm_name))
		return -EINVAL;
	for (i = 0; i < len; i++)
		if (!isalnum(val[i]) && val[i] != '_' && val[i] != '-')
			return -EINVAL;
	memcpy(pm_name, val, len);
	pm_name[len] = '\0';
	return 0;
}

static int pm_name_get(char *buf, const struct kernel_param *kp)
{
	return scnprintf(buf, PAGE_SIZE, "%s\n", pm_name);
}

static const struct kernel_param_ops pm_name_ops = {
	.set = pm_name_set,
	.get = pm_name_get,
};
module_param_cb(peermem_name, &pm_name_ops, NULL, 0444);
MODULE_PARM_DESC(peermem_name,
		 "name of the peer-memory client in ib_core (/sys/kernel/mm/memory_peers/<name>): gdrpeer (default, seen by no consumer) or e.g. nv_mem (what NCCL, NVSHMEM and UCX look for; refused while nvidia_peermem is loaded). Set at load only");

/*
 * Whether NVIDIA's own peer-memory client (or its predecessor) is loaded,
 * from the kernel's module list, never from a path: a path is resolved in
 * the calling process's root and mount namespace, so a tenant in a chroot
 * or a container would see another owner of CUDA addresses (or fake one
 * with a directory of that name).  A module notifier follows each name
 * (COMING/LIVE: loaded, GOING: gone); the modules already loaded when
 * gdrpeer loads are found once, after the notifier is in place, in the
 * kernel's module kset (the kobjects /sys/module shows, looked up inside
 * the kernel): our own module's kset, since module_kset is not exported.
 * The lookup only ever sets "loaded", and only for a module not GOING, so
 * it cannot undo what the notifier saw meanwhile.
 *
 * pm_nv_lock is a leaf (taken under the module notifier chain's rwsem;
 * nothing is called under it but the kset's spinlock).
 */
static const char * const pm_nv_modules[] = { "nvidia_peermem", "nv_peer_mem" };
/*
 * The client names both register (nvidia-peermem.c of the open NVIDIA
 * modules: "nv_mem" with invalidation and "nv_mem_nc" without; nv_peer_mem
 * (Mellanox/nv_peer_memory): "nv_mem", later also "nv_mem_nc").
 */
static const char * const pm_nv_client_names[] = { "nv_mem", "nv_mem_nc" };
static DEFINE_MUTEX(pm_nv_lock);
static bool pm_nv_loaded[ARRAY_SIZE(pm_nv_modules)];	/* READ_ONCE */
static bool pm_nv_tracking;		/* the notifier is registered */
/*
 * gdrpeer registers (or holds) one of pm_nv_client_names: set under
 * pm_nv_lock before ib_register_peer_memory_client, so that either the
 * notifier saw NVIDIA's module first (and gdrpeer refuses the name) or it
 * sees this and refuses the module.  Two clients under one name never
 * exist, whether or not the core refuses duplicates itself.
 */
static bool pm_holds_nv_name;

static bool pm_name_is_nvidias(void)
{
	return match_string(pm_nv_client_names, ARRAY_SIZE(pm_nv_client_names),
			    pm_name) >= 0;
}

static int pm_nv_index(const char *name)
{
	return match_string(pm_nv_modules, ARRAY_SIZE(pm_nv_modules), name);
}

/* The first of NVIDIA's peer-memory modules that is loaded, or NULL. */
static const char *pm_nvidia_client_loaded(void)
{
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE(pm_nv_modules); i++)
		if (READ_ONCE(pm_nv_loaded[i]))
			return pm_nv_modules[i];
	return NULL;
}

static int pm_module_event(struct notifier_block *nb, unsigned long state,
			   void *data)
{
	struct module *mod = data;
	int i = pm_nv_index(mod->name);

	if (i < 0)
		return NOTIFY_DONE;
	mutex_lock(&pm_nv_lock);
	if (state == MODULE_STATE_COMING && pm_holds_nv_name) {
		mutex_unlock(&pm_nv_lock);
		/* the kernel fails the load; we get no GOING for it */
		pr_err("%s refused: gdrpeer's peer-memory client is registered as \"%s\", a name %s registers too, and two clients under one name must not exist (consumers could not tell which one they found). Fix: unload gdrpeer, or load it with another peermem_name (default gdrpeer)\n",
		       mod->name, pm_name, mod->name);
		return notifier_from_errno(-EBUSY);
	}
	if (state == MODULE_STATE_COMING || state == MODULE_STATE_LIVE)
		WRITE_ONCE(pm_nv_loaded[i], true);
	else if (state == MODULE_STATE_GOING)
		WRITE_ONCE(pm_nv_loaded[i], false);
	mutex_unlock(&pm_nv_lock);
	return NOTIFY_DONE;
}

static struct notifier_block pm_module_nb = {
	.notifier_call = pm_module_event,
};

/*
 * Is @name loaded right now, by the module kset?  Holding the kobject
 * keeps the struct module: module removal waits for the last reference
 * to its kobject before it frees the module.  A kobject without a module
 * is a built-in one (only parameters): loaded for good.
 */
static bool pm_module_present(const char *name)
{
	struct kobject *kobj;
	struct module *mod;
	bool present;

	kobj = kset_find_obj(THIS_MODULE->mkobj.kobj.kset, name);
	if (!kobj)
		return false;
	mod = container_of(kobj, struct module_kobject, kobj)->mod;
	present = !mod || READ_ONCE(mod->state) == MODULE_STATE_COMING ||
		  READ_ONCE(mod->state) == MODULE_STATE_LIVE;
	kobject_put(kobj);
	return present;
}

static int pm_nv_track_start(void)
{
	unsigned int i;
	int ret;

	ret = register_module_notifier(&pm_module_nb);
	if (ret)
		return ret;
	pm_nv_tracking = true;
	mutex_lock(&pm_nv_lock);
	for (i = 0; i < ARRAY_SIZE(pm_nv_modules); i++)
		if (pm_module_present(pm_nv_modules[i]))
			WRITE_ONCE(pm_nv_loaded[i], true);
	mutex_unlock(&pm_nv_lock);
	return 0;
}

static void pm_nv_track_stop(void)
{
	if (pm_nv_tracking)
		unregister_module_notifier(&pm_module_nb);
	pm_nv_tracking = false;
}

/*
 * Whether new registrations of CUDA addresses are ours, and why, in a
 * few words for the status line; @buf may be NULL.
 */
static bool pm_cuda_claimed(char *buf, size_t size)
{
	int mode = READ_ONCE(pm_cuda.val);
	const char *other = mode == PM_CUDA_OFF ? NULL :
			    pm_nvidia_client_loaded();
	bool claim = mode == PM_CUDA_ON || (mode == PM_CUDA_AUTO && !other);

	if (!buf)
		return claim;
	if (mode == PM_CUDA_OFF)
		scnprintf(buf, size, "not claimed (peermem_cuda=off)");
	else if (!claim)
		scnprintf(buf, size, "left to %s (it is loaded; peermem_cuda=auto)",
			  other);
	else
		scnprintf(buf, size, "claimed through the nvidia provider, %s pins (peermem_cuda=%s%s%s)",
			  pm_pin_names[READ_ONCE(pm_pin.val)],
			  pm_cuda_names[mode],
			  other ? "; also loaded: " : ", nvidia_peermem not loaded",
			  other ? other : "");
	return claim;
}

static void pm_ctx_free(struct kref *ref)
{
	struct pm_ctx *ctx = container_of(ref, struct pm_ctx, ref);

	mutex_destroy(&ctx->lock);
	kfree(ctx);
}

/*
 * A CUDA address: pinned here, in acquire, for the whole registration
 * (released in release), so that no call into NVIDIA's driver is made
 * under the core's mapping lock, which the core's invalidate takes from
 * inside NVIDIA's free callback (see the lock order at the top).  A range
 * NVIDIA does not know is "not mine".  Returns the pin's region or NULL.
 */
static struct gdrpeer_region *pm_cuda_pin(unsigned long addr, size_t size,
					  u64 *offset, u64 *page_size)
{
	struct gdrpeer_region *r;
	u32 mode;

	if (!pm_cuda_claimed(NULL, 0))
		return NULL;
	mode = READ_ONCE(pm_pin.val) == PM_PIN_PERSISTENT ?
	       GDRPEER_PIN_PERSISTENT : GDRPEER_PIN_CALLBACK;
	r = gdrpeer_providers_pin_user(addr, size, &mode, page_size);
	if (IS_ERR(r)) {
		/* -EINVAL is "not device memory of this process": say nothing */
		if (PTR_ERR(r) != -EINVAL && PTR_ERR(r) != -ENODEV)
			pr_warn_ratelimited("CUDA address %#lx (+%zu) not registered: pinning failed (%pe)\n",
					    addr, size, r);
		return NULL;
	}
	*offset = addr - round_down(addr, *page_size);
	return r;
}

static int pm_acquire(unsigned long addr, size_t size, void *private_data,
		      char *peer_mem_name, void **client_context)
{
	struct gdrpeer_region *r;
	struct pm_ctx *ctx;
	u64 offset;

	u64 page_size = PAGE_SIZE;
	bool cuda = false;

	if (!size || !current->mm)
		return 0;
	mmap_read_lock(current->mm);
	r = gdrpeer_region_from_user(current->mm, addr, size, &offset);
	mmap_read_unlock(current->mm);
	/* handle mappings are of plain regions; anything else is refused */
	if (r && r->ops) {
		gdrpeer_region_put(r);
		return 0;
	}
	if (!r) {
		r = pm_cuda_pin(addr, size, &offset, &page_size);
		if (!r)
			return 0;
		cuda = true;
	}
	if (!try_module_get(THIS_MODULE)) {
		gdrpeer_region_put(r);
		return 0;
	}
	ctx = kzalloc(sizeof(*ctx), GFP_KERNEL_ACCOUNT);
	if (!ctx) {
		module_put(THIS_MODULE);
		gdrpeer_region_put(r);
		return 0;
	}
	kref_init(&ctx->ref);
	mutex_init(&ctx->lock);
	INIT_LIST_HEAD(&ctx->node);
	ctx->r = r;
	ctx->cuda = cuda;
	ctx->page_size = page_size;
	ctx->addr = addr;
	ctx->size = size;
	ctx->offset = round_down(offset, page_size);
	ctx->len = round_up(offset + size, page_size) - ctx->offset;
	ctx->state = PM_ACQUIRED;
	atomic64_inc(&pm_acquired);
	if (cuda)
		atomic64_inc(&pm_cuda_acquired);
	*client_context = ctx;
	return 1;
}

static int pm_get_pages(unsigned long addr, size_t size, int write,
			int force, struct sg_table *sg_head,
			void *client_context, u64 core_context)
{
	struct pm_ctx *ctx = client_context;
	int ret = 0;

	mutex_lock(&ctx->lock);
	if (ctx->state != PM_ACQUIRED || addr != ctx->addr ||
	    size != ctx->size) {
		ret = -EINVAL;
		goto out;
	}
	/*
	 * Listed and checked under pm_list_lock: revocation sets @revoked
	 * before it walks the list, so it either finds this registration or
	 * this sees @revoked.
	 */
	mutex_lock(&pm_list_lock);
	if (gdrpeer_region_revoked(ctx->r)) {
		ret = -ENODEV;
	} else {
		list_add_tail(&ctx->node, &pm_pinned);
		ctx->listed = true;
		ctx->core_context = core_context;
		ctx->state = PM_PINNED;
	}
	mutex_unlock(&pm_list_lock);
out:
	mutex_unlock(&ctx->lock);
	return ret;
}

/*
 * Count (and with @segs and @phys, fill) the pieces of the range: one per
 * physically contiguous stretch, at most PM_MAX_SEG bytes each.
 */
static unsigned int pm_pieces(const struct pm_ctx *ctx, struct pm_seg *segs,
			      phys_addr_t *phys)
{
	const struct gdrpeer_region *r = ctx->r;
	u64 start = ctx->offset, end = ctx->offset + ctx->len, base = 0;
	phys_addr_t next = 0;
	unsigned int i, n = 0;
	u64 cur = 0;

	for (i = 0; i < r->nr_ranges && base < end;
	     base += r->ranges[i].len, i++) {
		u64 from = max(start, base);
		u64 to = min(end, base + r->ranges[i].len);
		phys_addr_t p = r->ranges[i].phys + (from - base);

		while (from < to) {
			u64 piece = min_t(u64, to - from, PM_MAX_SEG);

			if (n && p == next && cur + piece <= PM_MAX_SEG) {
				cur += piece;
			} else {
				n++;
				cur = piece;
				if (phys)
					phys[n - 1] = p;
			}
			if (segs)
				segs[n - 1].len = cur;
			next = p + piece;
			p += piece;
			from += piece;
		}
	}
	return n;
}

static void pm_unmap_locked(struct pm_ctx *ctx)
{
	unsigned int i;

	if (ctx->state != PM_MAPPED)
		return;
	for (i = 0; i < ctx->nsegs; i++)
		dma_unmap_resource(ctx->dma_dev, ctx->segs[i].addr,
				   ctx->segs[i].len, DMA_BIDIRECTIONAL,
				   DMA_ATTR_SKIP_CPU_SYNC);
	kfree(ctx->segs);
	ctx->segs = NULL;
	ctx->nsegs = 0;
	put_device(ctx->dma_dev);
	ctx->dma_dev = NULL;
	ctx->state = PM_PINNED;
	atomic64_dec(&pm_mapped);
}

static void pm_free_table_locked(struct pm_ctx *ctx)
{
	if (ctx->sgt.sgl)
		sg_free_table(&ctx->sgt);
	memset(&ctx->sgt, 0, sizeof(ctx->sgt));
}

static void pm_unlist_locked(struct pm_ctx *ctx)
{
	mutex_lock(&pm_list_lock);
	if (ctx->listed)
		list_del_init(&ctx->node);
	ctx->listed = false;
	mutex_unlock(&pm_list_lock);
}

static int pm_dma_map(struct sg_table *sg_head, void *client_context,
		      struct device *dma_device, int dmasync, int *nmap)
{
	struct pm_ctx *ctx = client_context;
	struct sg_table sgt = { };
	struct scatterlist *sg;
	struct pm_seg *segs = NULL;
	phys_addr_t *phys = NULL;
	unsigned int n, i, mapped = 0;
	int ret;

	mutex_lock(&ctx->lock);
	if (ctx->state != PM_PINNED || !dma_device) {
		ret = -EINVAL;
		goto out;
	}
	if (ctx->invalidating || gdrpeer_region_revoked(ctx->r)) {
		ret = -ENODEV;
		goto out;
	}
	n = pm_pieces(ctx, NULL, NULL);
	segs = kcalloc(n, sizeof(*segs), GFP_KERNEL);
	phys = kcalloc(n, sizeof(*phys), GFP_KERNEL);
	ret = -ENOMEM;
	if (!n || !segs || !phys || sg_alloc_table(&sgt, n, GFP_KERNEL))
		goto out;
	pm_pieces(ctx, segs, phys);
	ret = 0;
	for_each_sg(sgt.sgl, sg, n, i) {
		segs[i].addr = dma_map_resource(dma_device, phys[i], segs[i].len,
						DMA_BIDIRECTIONAL,
						DMA_ATTR_SKIP_CPU_SYNC);
		if (dma_mapping_error(dma_device, segs[i].addr)) {
			ret = -EIO;
			break;
		}
		mapped++;
		/* no struct page: the core only reads the DMA fields */
		sg->offset = 0;
		sg->length = segs[i].len;
		sg_dma_address(sg) = segs[i].addr;
		sg_dma_len(sg) = segs[i].len;
	}
	if (ret) {
		dev_warn(dma_device, "gdrpeer: dma_map_resource failed after %u of %u entries\n",
			 mapped, n);
		while (mapped--)
			dma_unmap_resource(dma_device, segs[mapped].addr,
					   segs[mapped].len, DMA_BIDIRECTIONAL,
					   DMA_ATTR_SKIP_CPU_SYNC);
		sg_free_table(&sgt);
		goto out;
	}
	ctx->segs = segs;
	ctx->nsegs = n;
	segs = NULL;
	ctx->dma_dev = get_device(dma_device);
	/* our copy: the core forgets its table when it is invalidated */
	ctx->sgt = sgt;
	*sg_head = sgt;
	*nmap = n;
	ctx->state = PM_MAPPED;
	atomic64_inc(&pm_mapped);
out:
	mutex_unlock(&ctx->lock);
	kfree(segs);
	kfree(phys);
	return ret;
}

static int pm_dma_unmap(struct sg_table *sg_head, void *client_context,
			struct device *dma_device)
{
	struct pm_ctx *ctx = client_context;

	mutex_lock(&ctx->lock);
	pm_unmap_locked(ctx);
	mutex_unlock(&ctx->lock);
	return 0;
}

static void pm_put_pages(struct sg_table *sg_head, void *client_context)
{
	struct pm_ctx *ctx = client_context;

	mutex_lock(&ctx->lock);
	pm_unmap_locked(ctx);
	pm_free_table_locked(ctx);
	pm_unlist_locked(ctx);
	ctx->state = PM_ACQUIRED;
	mutex_unlock(&ctx->lock);
}

/* BAR ranges are mapped in CPU pages, CUDA memory in GPU pages (64 KiB). */
static unsigned long pm_get_page_size(void *client_context)
{
	struct pm_ctx *ctx = client_context;

	return ctx->page_size;
}

static void pm_release(void *client_context)
{
	struct pm_ctx *ctx = client_context;
	struct gdrpeer_region *r;

	mutex_lock(&ctx->lock);
	pm_unmap_locked(ctx);
	pm_free_table_locked(ctx);
	pm_unlist_locked(ctx);
	ctx->state = PM_ACQUIRED;
	r = ctx->r;
	ctx->r = NULL;
	mutex_unlock(&ctx->lock);
	/* a CUDA pin is put here (nvidia_p2p_put_pages), under no core lock */
	gdrpeer_region_put(r);
	atomic64_dec(&pm_acquired);
	if (ctx->cuda)
		atomic64_dec(&pm_cuda_acquired);
	kref_put(&ctx->ref, pm_ctx_free);
	module_put(THIS_MODULE);
}

/* Stop the HCA's DMA to @ctx and unmap it; see the lock order above. */
static void pm_invalidate(struct pm_ctx *ctx)
{
	u64 core_context;

	mutex_lock(&ctx->lock);
	if (ctx->state != PM_PINNED && ctx->state != PM_MAPPED) {
		mutex_unlock(&ctx->lock);
		return;
	}
	ctx->invalidating = true;
	core_context = ctx->core_context;
	mutex_unlock(&ctx->lock);

	pm_core_invalidate(pm_handle, core_context);

	mutex_lock(&ctx->lock);
	/* put_pages may have run meanwhile (a registration that failed) */
	if (ctx->state == PM_PINNED || ctx->state == PM_MAPPED) {
		pm_unmap_locked(ctx);
		pm_free_table_locked(ctx);
		ctx->state = PM_INVALIDATED;
	}
	mutex_unlock(&ctx->lock);
	atomic64_inc(&pm_invalidations);
}

/**
 * gdrpeer_peermem_revoke_region() - invalidate every registration of a region
 * @r: the region, whose @revoked is set already
 *
 * Listed in gdrpeer_revokers[] (exporter.h).  Each registration of @r is
 * invalidated once (ib_core's invalidate callback, then its DMA mapping
 * and pin table go).
 *
 * Context: Process context.  Sleeps; takes pm_list_lock and each
 * registration's lock in turn, none across ib_core's callback.
 */
void gdrpeer_peermem_revoke_region(struct gdrpeer_region *r)
{
	struct pm_ctx *ctx, *found;

	if (!pm_handle)
		return;
	for (;;) {
		found = NULL;
		mutex_lock(&pm_list_lock);
		list_for_each_entry(ctx, &pm_pinned, node) {
			if (ctx->r == r && !ctx->revoke_seen) {
				ctx->revoke_seen = true;
				kref_get(&ctx->ref);
				found = ctx;
				break;
			}
		}
		mutex_unlock(&pm_list_lock);
		if (!found)
			return;
		pm_invalidate(found);
		kref_put(&found->ref, pm_ctx_free);
	}
}

#define PM_GAUGE_ATTR(name)						\
static ssize_t name##_show(struct kobject *kobj,			\
			   struct kobj_attribute *attr, char *buf)	\
{									\
	return sysfs_emit(buf, "%lld\n",				\
			  (long long)atomic64_read(&pm_##name));	\
}									\
static struct kobj_attribute name##_attr = __ATTR_RO(name)

PM_GAUGE_ATTR(acquired);
PM_GAUGE_ATTR(mapped);
PM_GAUGE_ATTR(invalidations);
PM_GAUGE_ATTR(cuda_acquired);

static ssize_t cuda_show(struct kobject *kobj, struct kobj_attribute *attr,
			 char *buf)
{
	char line[160];

	pm_cuda_claimed(line, sizeof(line));
	return sysfs_emit(buf, "%s\n", line);
}
static struct kobj_attribute cuda_attr = __ATTR_RO(cuda);

/* The load line's status, kept as it was at load (sysfs shows it now). */
static char pm_load_line[256];

static const char *pm_active_line(char *buf, size_t size)
{
	char cuda[160];

	pm_cuda_claimed(cuda, sizeof(cuda));
	scnprintf(buf, size, "active: registered with ib_core as peer-memory client \"%s\" (gdrpeer handle mappings; CUDA addresses: %s)",
		  pm_name, cuda);
	return buf;
}

/* The name is no longer held: NVIDIA's modules may load again. */
static void pm_name_release(void)
{
	mutex_lock(&pm_nv_lock);
	pm_holds_nv_name = false;
	mutex_unlock(&pm_nv_lock);
}

static int pm_register(void)
{
	struct peer_memory_client *c = &pm_client.client;
	const char *other;
	int ret;

	/* before anything can ask who owns CUDA addresses */
	ret = pm_nv_track_start();
	if (ret) {
		pr_err("register_module_notifier failed (%d)\n", ret);
		return ret;
	}
	/* an NVIDIA client name: not while NVIDIA's module is loaded */
	mutex_lock(&pm_nv_lock);
	other = pm_name_is_nvidias() ? pm_nvidia_client_loaded() : NULL;
	pm_holds_nv_name = pm_name_is_nvidias() && !other;
	mutex_unlock(&pm_nv_lock);
	if (other) {
		scnprintf(pm_load_line, sizeof(pm_load_line),
			  "inactive: peermem_name=%s refused: %s is loaded and registers that name",
			  pm_name, other);
		pm_status = pm_load_line;
		pr_err("peermem_name=%s refused: %s is loaded and registers its client under that name; two peer-memory clients under one name must not exist. gdrpeer's client stays off (dma-buf export works). Fix: load gdrpeer with the default peermem_name (gdrpeer), or unload %s first\n",
		       pm_name, other, other);
		return 0;
	}
	strscpy(c->name, pm_name, sizeof(c->name));
	strscpy(c->version, "1.1", sizeof(c->version) - 1);
	/* the last version byte says "this is a peer_memory_client_ex" */
	c->version[IB_PEER_MEMORY_VER_MAX - 1] = 1;
	c->acquire = pm_acquire;
	c->get_pages = pm_get_pages;
	c->dma_map = pm_dma_map;
	c->dma_unmap = pm_dma_unmap;
	c->put_pages = pm_put_pages;
	c->get_page_size = pm_get_page_size;
	c->release = pm_release;
	pm_client.ex_size = sizeof(pm_client);
	pm_client.flags = PEER_MEM_INVALIDATE_UNMAPS;

	pm_handle = ib_register_peer_memory_client(c, &pm_core_invalidate);
	if (!pm_handle) {
		pm_name_release();
		pm_status = "inactive: ib_core refused the registration (ib_register_peer_memory_client returned NULL)";
		pr_err("ib_register_peer_memory_client refused gdrpeer as client \"%s\" (see ib_core's message above); ibv_reg_mr of gdrpeer mappings will fail, dma-buf export still works. Fix: if ib_core says a client of that name exists, load gdrpeer with another peermem_name; otherwise load an ib_core of the OFED that gdrpeer was built against (" GDRPEER_PEERMEM_LINK ")\n",
		       pm_name);
		return 0;
	}
	if (!pm_core_invalidate) {
		ib_unregister_peer_memory_client(pm_handle);
		pm_handle = NULL;
		pm_name_release();
		pm_status = "inactive: ib_core gave no invalidate callback";
		pr_err("ib_core registered gdrpeer but gave no invalidate callback: revocation could not stop the HCA, so the client stays off. Fix: an OFED whose peer_mem.h has PEER_MEM_U64_CORE_CONTEXT (MLNX_OFED 5.x, DOCA-OFED)\n");
		return 0;
	}
	pm_status = pm_active_line(pm_load_line, sizeof(pm_load_line));
	return 0;
}

static void pm_unregister(void)
{
	/* no registration is left: each holds a module reference */
	if (pm_handle)
		ib_unregister_peer_memory_client(pm_handle);
	pm_handle = NULL;
	pm_name_release();
	pm_nv_track_stop();
}

#else /* !GDRPEER_PEERMEM */

/* Listed in gdrpeer_revokers[]: no registrations without OFED. */
void gdrpeer_peermem_revoke_region(struct gdrpeer_region *r)
{
}

static int pm_register(void)
{
	return 0;
}

static void pm_unregister(void)
{
}

#endif /* GDRPEER_PEERMEM */

static ssize_t status_show(struct kobject *kobj, struct kobj_attribute *attr,
			   char *buf)
{
#ifdef GDRPEER_PEERMEM
	char line[256];

	/* who owns CUDA addresses can change (parameter, nvidia_peermem) */
	if (pm_handle)
		return sysfs_emit(buf, "%s\n",
				  pm_active_line(line, sizeof(line)));
#endif
	return sysfs_emit(buf, "%s\n", pm_status);
}
static struct kobj_attribute status_attr = __ATTR_RO(status);

static struct attribute *pm_attrs[] = {
	&status_attr.attr,
#ifdef GDRPEER_PEERMEM
	&acquired_attr.attr,
	&mapped_attr.attr,
	&invalidations_attr.attr,
	&cuda_acquired_attr.attr,
	&cuda_attr.attr,
#endif
	NULL,
};

static const struct attribute_group pm_group = {
	.attrs = pm_attrs,
};

/**
 * gdrpeer_peermem_init() - providers/peermem/ and, where built, the client
 * @providers: the providers/ directory
 *
 * The sysfs directory always (its status says why the client is off);
 * the registration with ib_core only where OFED's headers were found.
 * A client ib_core refuses leaves the load going, said in its status.
 *
 * Context: Module load, after the providers, process context.  Sleeps.
 * Return: 0 or a negative errno (nothing is left behind).
 */
int gdrpeer_peermem_init(struct kobject *providers)
{
	int ret;

	pm_kobj = kobject_create_and_add("peermem", providers);
	if (!pm_kobj)
		return -ENOMEM;
	ret = sysfs_create_group(pm_kobj, &pm_group);
	if (ret) {
		kobject_put(pm_kobj);
		pm_kobj = NULL;
		return ret;
	}
	ret = pm_register();
	if (ret)
		gdrpeer_peermem_exit();
	return ret;
}

/**
 * gdrpeer_peermem_exit() - undo gdrpeer_peermem_init()
 *
 * Context: Module unload (or a failed load), process context; no
 * registration is left (each holds a module reference).  Sleeps.
 */
void gdrpeer_peermem_exit(void)
{
	pm_unregister();
	if (pm_kobj) {
		sysfs_remove_group(pm_kobj, &pm_group);
		kobject_put(pm_kobj);
		pm_kobj = NULL;
	}
}

/**
 * gdrpeer_peermem_status() - the client's state for the load line
 *
 * Context: Any context after gdrpeer_peermem_init().
 * Return: a string that lives as long as the module ("active ...",
 * "left out: ...", "inactive: ...").
 */
const char *gdrpeer_peermem_status(void)
{
	return pm_status;
}

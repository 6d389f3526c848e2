// SPDX-License-Identifier: GPL-2.0
/*
 * gdrpeer_peerhost.ko - test only: the peer-memory side of MLNX_OFED's
 * ib_core, so that gdrpeer's peer-memory client can be driven without
 * OFED.  It exports ib_register_peer_memory_client and
 * ib_unregister_peer_memory_client with OFED's ABI (ofa/include/rdma/
 * peer_mem.h) and registers user addresses the way ib_umem_get does when
 * no page pinning reaches them: acquire, get_pages, dma_map with the
 * stand-in HCA's device (edu, through gdrpeer_edu_hca.ko), then edu DMA
 * through the returned addresses; dma_unmap, put_pages, release on
 * deregistration; and the invalidate callback.  Ioctls:
 * gdrpeer_peerhost.h.
 *
 * Like MLNX_OFED's ib_core (drivers/infiniband/core/peer_mem.c of
 * mlnx-ofa_kernel, read at MLNX_OFED 5.1-2.5.8.0), each registered client
 * gets /sys/kernel/mm/memory_peers/<name>/ with its version and counters
 * (version, num_alloc_mrs, num_dealloc_mrs, num_reg_pages,
 * num_dereg_pages, num_reg_bytes, num_dereg_bytes, num_free_callbacks);
 * memory_peers/ exists while at least one client is registered.  That is
 * where NCCL, NVSHMEM and UCX look for a peer-memory client by name.  A
 * second client under a name already registered is refused: ib_core's
 * kobject_add of the same directory fails with -EEXIST and the
 * registration returns NULL; this host checks the name first and says so
 * in one line (instead of the kernel's duplicate-sysfs-name warning).
 *
 * Lock order (outermost first), all mutexes, all holders may sleep:
 *   ph_clients_lock (acquire runs under it, as in ib_core; also the
 *   memory_peers directories: created and removed under it)
 *   ph_reg.mapping_lock (get_pages, dma_map, dma_unmap, put_pages, each
 *   edu DMA chunk, and invalidate: so invalidate waits for a registration
 *   in progress and for the DMA chunk in flight)
 *   -> gdrpeer_edu_hca's locks
 * ph_client.regs' xa_lock is only held to look an id up.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/completion.h>
#include <linux/kernfs.h>
#include <linux/kobject.h>
#include <linux/kref.h>
#include <linux/list.h>
#include <linux/miscdevice.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/refcount.h>
#include <linux/scatterlist.h>
#include <linux/slab.h>
#include <linux/sysfs.h>
#include <linux/uaccess.h>
#include <linux/xarray.h>

#include "ofa/include/rdma/peer_mem.h"

#include "gdrpeer_edu_hca.h"
#include "gdrpeer_peerhost.h"
#include "gdrpeer_stub_file.h"

/* The core_context of registrations of clients that need no invalidation. */
#define PH_NO_INVALIDATION U32_MAX
/* Most host pages one registration pins (1 GiB of 4 KiB pages). */
#define PH_MAX_HOST_PAGES (1UL << 18)

/* MOFED's per-client statistics, shown in memory_peers/<name>/ */
struct ph_stats {
	atomic64_t num_alloc_mrs;	/* registrations mapped */
	atomic64_t num_dealloc_mrs;	/* mapped registrations unmapped */
	atomic64_t num_reg_pages;	/* sum of *nmap (sg entries) */
	atomic64_t num_dereg_pages;
	atomic64_t num_reg_bytes;	/* sum of registered lengths */
	atomic64_t num_dereg_bytes;
	atomic64_t num_free_callbacks;	/* invalidate calls, stale ones too */
};

struct ph_client {
	const struct peer_memory_client *ops;
	struct kobject kobj;		/* memory_peers/<name>; frees this */
	struct ph_stats stats;
	bool inval_required;		/* gave an invalidate_callback pointer */
	bool unmaps;			/* PEER_MEM_INVALIDATE_UNMAPS */
	struct list_head node;		/* ph_clients, under ph_clients_lock */
	refcount_t users;		/* 1 + registrations */
	struct completion unused;	/* users reached 0 */
	struct xarray regs;		/* core_context -> struct ph_reg */
	u32 next_id;
};

enum ph_state { PH_UNMAPPED, PH_MAPPED, PH_INVALIDATED };

struct ph_reg {
	struct kref ref;		/* the file's + an invalidate's */
	struct mutex mapping_lock;	/* @state, @sgt */
	enum ph_state state;
	struct ph_client *client;	/* NULL: host pages */
	void *client_ctx;
	u32 core_id;
	struct sg_table sgt;
	struct device *dma_dev;
	unsigned long addr;
	u64 length;
	u64 page_size;
	int nmap;			/* the client's *nmap when mapped */
	bool dereg_counted;		/* num_dereg_* counted already */
	struct page **pages;		/* host pages */
	unsigned long npages;
	atomic64_t dmas_done;
};

/*
 * How the host answers registrations, for the client's failure paths:
 * refuse_clients returns NULL (as ib_core does when it cannot take a
 * client); no_invalidation leaves *invalidate_callback untouched (as a core
 * without invalidation support would).
 */
static bool refuse_clients;
module_param(refuse_clients, bool, 0444);
MODULE_PARM_DESC(refuse_clients, "refuse every client registration");
static bool no_invalidation;
module_param(no_invalidation, bool, 0444);
MODULE_PARM_DESC(no_invalidation, "give clients no invalidate callback");

static DEFINE_MUTEX(ph_clients_lock);
static LIST_HEAD(ph_clients);
/* /sys/kernel/mm/memory_peers while a client is registered; ph_clients_lock */
static struct kobject *ph_peers_kobj;
/* /sys/kernel/mm (a reference from init to exit) */
static struct kobject *ph_mm_kobj;
static atomic64_t ph_registrations = ATOMIC64_INIT(0);
static atomic64_t ph_invalidations = ATOMIC64_INIT(0);
static atomic64_t ph_stale_invalidations = ATOMIC64_INIT(0);

/* ---- memory_peers/<name>/, as MOFED's ib_core ------------------------- */

/* MAPPED -> unmapped (deregistration or invalidation), as MOFED counts it */
static void ph_count_unmap(struct ph_client *c)
{
	atomic64_inc(&c->stats.num_dealloc_mrs);
}

/* the registration's pages and bytes go back (once) */
static void ph_count_dereg(struct ph_client *c, struct ph_reg *reg)
{
	if (reg->dereg_counted)
		return;
	reg->dereg_counted = true;
	atomic64_add(reg->nmap, &c->stats.num_dereg_pages);
	atomic64_add(reg->length, &c->stats.num_dereg_bytes);
}

struct ph_peer_attr {
	struct attribute attr;
	ssize_t (*show)(struct ph_client *c, char *buf);
};

static ssize_t ph_peer_attr_show(struct kobject *kobj, struct attribute *attr,
				 char *buf)
{
	struct ph_peer_attr *a = container_of(attr, struct ph_peer_attr, attr);

	return a->show(container_of(kobj, struct ph_client, kobj), buf);
}

static const struct sysfs_ops ph_peer_sysfs_ops = {
	.show = ph_peer_attr_show,
};

/* the client's version string (its last byte is the _ex flag, not text) */
static ssize_t version_show(struct ph_client *c, char *buf)
{
	return sysfs_emit(buf, "%.*s\n", IB_PEER_MEMORY_VER_MAX - 1,
			  c->ops->version);
}

#define PH_PEER_STAT(_n)						\
static ssize_t _n##_show(struct ph_client *c, char *buf)		\
{									\
	return sysfs_emit(buf, "%llu\n",				\
			  (u64)atomic64_read(&c->stats._n));		\
}									\
static struct ph_peer_attr ph_peer_attr_##_n = {			\
	.attr = { .name = #_n, .mode = 0444 }, .show = _n##_show,	\
}

static struct ph_peer_attr ph_peer_attr_version = {
	.attr = { .name = "version", .mode = 0444 }, .show = version_show,
};
PH_PEER_STAT(num_alloc_mrs);
PH_PEER_STAT(num_dealloc_mrs);
PH_PEER_STAT(num_reg_pages);
PH_PEER_STAT(num_dereg_pages);
PH_PEER_STAT(num_reg_bytes);
PH_PEER_STAT(num_dereg_bytes);
PH_PEER_STAT(num_free_callbacks);

static struct attribute *ph_peer_attrs[] = {
	&ph_peer_attr_version.attr,
	&ph_peer_attr_num_alloc_mrs.attr,
	&ph_peer_attr_num_dealloc_mrs.attr,
	&ph_peer_attr_num_reg_pages.attr,
	&ph_peer_attr_num_dereg_pages.attr,
	&ph_peer_attr_num_reg_bytes.attr,
	&ph_peer_attr_num_dereg_bytes.attr,
	&ph_peer_attr_num_free_callbacks.attr,
	NULL,
};
ATTRIBUTE_GROUPS(ph_peer);

static void ph_client_release(struct kobject *kobj)
{
	kfree(container_of(kobj, struct ph_client, kobj));
}

static struct kobj_type ph_peer_ktype = {
	.sysfs_ops = &ph_peer_sysfs_ops,
	.default_groups = ph_peer_groups,
	.release = ph_client_release,
};

/*
 * The kobject of /sys/kernel/mm, where MOFED's ib_core puts memory_peers
 * (under mm_kobj).  mm_kobj is exported up to 6.1 here but not by 6.12, so
 * it is found the same way on every kernel: the "mm" directory below
 * kernel_kobj, whose kernfs node keeps its kobject in priv (sysfs creates
 * a kobject's directory that way).  Test code only.
 */
static struct kobject *ph_find_mm_kobj(void)
{
	struct kernfs_node *kn = kernfs_find_and_get(kernel_kobj->sd, "mm");
	struct kobject *mm = NULL;

	if (!kn)
		return NULL;
	if (kernfs_type(kn) == KERNFS_DIR && kn->priv)
		mm = kobject_get(kn->priv);
	kernfs_put(kn);
	return mm;
}

/* A client registered under @name?  ph_clients_lock held. */
static bool ph_name_taken(const char *name)
{
	struct ph_client *c;

	lockdep_assert_held(&ph_clients_lock);
	list_for_each_entry(c, &ph_clients, node)
		if (!strncmp(c->ops->name, name, IB_PEER_MEMORY_NAME_MAX))
			return true;
	return false;
}

/* memory_peers/<name> for @c; ph_clients_lock held */
static int ph_peer_dir_add(struct ph_client *c)
{
	int ret;

	lockdep_assert_held(&ph_clients_lock);
	if (!ph_peers_kobj) {
		ph_peers_kobj = kobject_create_and_add("memory_peers",
						       ph_mm_kobj);
		if (!ph_peers_kobj)
			return -ENOMEM;
	}
	ret = kobject_add(&c->kobj, ph_peers_kobj, "%.*s",
			  IB_PEER_MEMORY_NAME_MAX, c->ops->name);
	if (ret && list_empty(&ph_clients)) {
		kobject_put(ph_peers_kobj);
		ph_peers_kobj = NULL;
	}
	return ret;
}

/* ph_clients_lock held, @c already off the list */
static void ph_peer_dir_del(struct ph_client *c)
{
	lockdep_assert_held(&ph_clients_lock);
	kobject_del(&c->kobj);
	if (list_empty(&ph_clients)) {
		kobject_put(ph_peers_kobj);
		ph_peers_kobj = NULL;
	}
}

/* ---- the exported ABI ------------------------------------------------- */

static bool ph_unmaps_on_invalidate(const struct peer_memory_client *c)
{
	const struct peer_memory_client_ex *ex;

	if (!c->version[IB_PEER_MEMORY_VER_MAX - 1])
		return false;
	ex = container_of(c, const struct peer_memory_client_ex, client);
	return ex->ex_size >= offsetofend(struct peer_memory_client_ex, flags) &&
	       (ex->flags & PEER_MEM_INVALIDATE_UNMAPS);
}

static void ph_reg_free(struct kref *ref)
{
	struct ph_reg *reg = container_of(ref, struct ph_reg, ref);

	mutex_destroy(&reg->mapping_lock);
	kfree(reg);
}

static int ph_invalidate(void *reg_handle, u64 core_context)
{
	struct ph_client *c = reg_handle;
	struct ph_reg *reg;

	atomic64_inc(&c->stats.num_free_callbacks);
	xa_lock(&c->regs);
	reg = core_context < PH_NO_INVALIDATION ?
	      xa_load(&c->regs, (unsigned long)core_context) : NULL;
	if (reg)
		kref_get(&reg->ref);
	xa_unlock(&c->regs);
	if (!reg) {
		atomic64_inc(&ph_stale_invalidations);
		return 0;
	}
	/* waits for a registration in progress and the DMA chunk in flight */
	mutex_lock(&reg->mapping_lock);
	if (reg->state == PH_MAPPED) {
		if (!c->unmaps) {
			c->ops->dma_unmap(&reg->sgt, reg->client_ctx,
					  reg->dma_dev);
			c->ops->put_pages(&reg->sgt, reg->client_ctx);
			/* MOFED: straight to UNMAPPED, pages given back */
			ph_count_dereg(c, reg);
		}
		ph_count_unmap(c);
		/* the client owns the table; ib_core forgets it here too */
		memset(&reg->sgt, 0, sizeof(reg->sgt));
		reg->state = PH_INVALIDATED;
		atomic64_inc(&ph_invalidations);
	}
	mutex_unlock(&reg->mapping_lock);
	kref_put(&reg->ref, ph_reg_free);
	return 0;
}

void *ib_register_peer_memory_client(const struct peer_memory_client *peer_client,
				     invalidate_peer_memory *invalidate_callback)
{
	static const struct {
		size_t offset;
		const char *name;
	} mandatory[] = {
		{ offsetof(struct peer_memory_client, acquire), "acquire" },
		{ offsetof(struct peer_memory_client, get_pages), "get_pages" },
		{ offsetof(struct peer_memory_client, dma_map), "dma_map" },
		{ offsetof(struct peer_memory_client, dma_unmap), "dma_unmap" },
		{ offsetof(struct peer_memory_client, put_pages), "put_pages" },
	};
	struct ph_client *c;
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE(mandatory); i++) {
		if (!*(void * const *)((const char *)peer_client +
				       mandatory[i].offset)) {
			pr_err("client %.64s refused: no %s callback\n",
			       peer_client->name, mandatory[i].name);
			return NULL;
		}
	}
	if (refuse_clients) {
		pr_err("client %.64s refused (refuse_clients=1)\n",
		       peer_client->name);
		return NULL;
	}
	c = kzalloc(sizeof(*c), GFP_KERNEL);
	if (!c)
		return NULL;
	kobject_init(&c->kobj, &ph_peer_ktype);
	c->ops = peer_client;
	c->unmaps = ph_unmaps_on_invalidate(peer_client);
	refcount_set(&c->users, 1);
	init_completion(&c->unused);
	xa_init_flags(&c->regs, XA_FLAGS_ALLOC);
	if (invalidate_callback && !no_invalidation) {
		*invalidate_callback = ph_invalidate;
		c->inval_required = true;
	}
	mutex_lock(&ph_clients_lock);
	if (ph_name_taken(peer_client->name)) {
		mutex_unlock(&ph_clients_lock);
		pr_err("client %.64s refused: a client of that name is registered (MOFED's ib_core refuses it too: its kobject_add of memory_peers/%.64s fails with -EEXIST)\n",
		       peer_client->name, peer_client->name);
		goto err;
	}
	if (ph_peer_dir_add(c)) {
		mutex_unlock(&ph_clients_lock);
		pr_err("client %.64s refused: memory_peers/%.64s could not be created\n",
		       peer_client->name, peer_client->name);
		goto err;
	}
	list_add_tail(&c->node, &ph_clients);
	mutex_unlock(&ph_clients_lock);
	pr_info("client %.64s %.15s registered%s%s\n", peer_client->name,
		peer_client->version, c->inval_required ? ", invalidation" : "",
		c->unmaps ? ", INVALIDATE_UNMAPS" : "");
	return c;

err:
	xa_destroy(&c->regs);
	kobject_put(&c->kobj);		/* frees @c */
	return NULL;
}
EXPORT_SYMBOL(ib_register_peer_memory_client);

static void ph_client_put(struct ph_client *c)
{
	if (refcount_dec_and_test(&c->users))
		complete(&c->unused);
}

void ib_unregister_peer_memory_client(void *reg_handle)
{
	struct ph_client *c = reg_handle;

	mutex_lock(&ph_clients_lock);
	list_del(&c->node);
	ph_peer_dir_del(c);
	mutex_unlock(&ph_clients_lock);
	/* as ib_core: no client call after this returns */
	ph_client_put(c);
	wait_for_completion(&c->unused);
	xa_destroy(&c->regs);
	pr_info("client %.64s unregistered\n", c->ops->name);
	kobject_put(&c->kobj);		/* frees @c */
}
EXPORT_SYMBOL(ib_unregister_peer_memory_client);

/* ---- registrations (ib_umem_get / ib_umem_release) ------------------- */

/* What the core checks of a client's table before an HCA may use it. */
static int ph_check_table(struct ph_reg *reg, int nmap)
{
	u64 start = ALIGN_DOWN(reg->addr, reg->page_size);
	u64 need = ALIGN(reg->addr + reg->length, reg->page_size) - start;
	struct scatterlist *sg;
	u64 total = 0;
	int i;

	if (nmap <= 0 || nmap > reg->sgt.orig_nents) {
		pr_warn("client %.64s: nmap %d for a table of %u entries\n",
			reg->client->ops->name, nmap, reg->sgt.orig_nents);
		return -EPROTO;
	}
	/* the HCA's MR is built in the client's pages: entries align to them */
	for_each_sg(reg->sgt.sgl, sg, nmap, i) {
		if (!IS_ALIGNED(sg_dma_address(sg), reg->page_size) ||
		    !IS_ALIGNED((u64)sg_dma_len(sg), reg->page_size) ||
		    !sg_dma_len(sg)) {
			pr_warn("client %.64s: entry %d (%pad, %u bytes) is not aligned to its page size %llu\n",
				reg->client->ops->name, i, &sg_dma_address(sg),
				sg_dma_len(sg), reg->page_size);
			return -EPROTO;
		}
		total += sg_dma_len(sg);
	}
	if (total != need) {
		pr_warn("client %.64s: entries cover %llu bytes, the range needs %llu\n",
			reg->client->ops->name, total, need);
		return -EPROTO;
	}
	return 0;
}

/* Ask the clients; on success @reg is mapped and counted. */
static int ph_reg_peer(struct ph_reg *reg, u32 flags)
{
	const struct peer_memory_client *ops = NULL;
	struct ph_client *c;
	void *ctx = NULL;
	int ret, nmap = 0;

	mutex_lock(&ph_clients_lock);
	list_for_each_entry(c, &ph_clients, node) {
		if (c->ops->acquire(reg->addr, reg->length, NULL, NULL,
				    &ctx) > 0) {
			refcount_inc(&c->users);
			ops = c->ops;
			break;
		}
	}
	mutex_unlock(&ph_clients_lock);
	if (!ops)
		return 1;		/* nobody's: host pages */

	reg->client = c;
	reg->client_ctx = ctx;
	reg->core_id = PH_NO_INVALIDATION;
	mutex_lock(&reg->mapping_lock);
	if (c->inval_required) {
		ret = xa_alloc_cyclic(&c->regs, &reg->core_id, reg,
				      XA_LIMIT(0, PH_NO_INVALIDATION - 1),
				      &c->next_id, GFP_KERNEL);
		if (ret < 0)
			goto err_client;
	}
	if (flags & PEERHOST_REG_MAP_BEFORE_PIN) {
		ret = ops->dma_map(&reg->sgt, ctx, reg->dma_dev, 0, &nmap);
		if (!ret) {
			pr_warn("client %.64s mapped a range it was not asked to pin\n",
				ops->name);
			ops->dma_unmap(&reg->sgt, ctx, reg->dma_dev);
			ops->put_pages(&reg->sgt, ctx);
			ret = -EPROTO;
		}
		goto err_xa;
	}
	ret = ops->get_pages(reg->addr +
			     (flags & PEERHOST_REG_PIN_OTHER_RANGE ? PAGE_SIZE : 0),
			     reg->length, 1, 0, NULL, ctx, reg->core_id);
	if (ret)
		goto err_xa;
	ret = ops->dma_map(&reg->sgt, ctx, reg->dma_dev, 0, &nmap);
	if (ret)
		goto err_pages;
	reg->page_size = ops->get_page_size ? ops->get_page_size(ctx) :
			 PAGE_SIZE;
	if (!reg->page_size || reg->page_size % PAGE_SIZE ||
	    !is_power_of_2(reg->page_size)) {
		pr_warn("client %.64s: page size %llu\n", ops->name,
			reg->page_size);
		ret = -EPROTO;
	} else {
		ret = ph_check_table(reg, nmap);
	}
	if (ret) {
		ops->dma_unmap(&reg->sgt, ctx, reg->dma_dev);
		goto err_pages;
	}
	reg->sgt.nents = nmap;
	reg->nmap = nmap;
	reg->state = PH_MAPPED;
	atomic64_add(nmap, &c->stats.num_reg_pages);
	atomic64_add(reg->length, &c->stats.num_reg_bytes);
	atomic64_inc(&c->stats.num_alloc_mrs);
	mutex_unlock(&reg->mapping_lock);
	atomic64_inc(&ph_registrations);
	return 0;

err_pages:
	ops->put_pages(&reg->sgt, ctx);
err_xa:
	if (reg->core_id != PH_NO_INVALIDATION)
		xa_erase(&c->regs, reg->core_id);
err_client:
	mutex_unlock(&reg->mapping_lock);
	ops->release(ctx);
	reg->client = NULL;
	ph_client_put(c);
	return ret;
}

static int ph_reg_host_pages(struct ph_reg *reg)
{
	unsigned long start = reg->addr & PAGE_MASK;
	unsigned long n = (PAGE_ALIGN(reg->addr + reg->length) - start) >>
			  PAGE_SHIFT;
	long got;

	if (n > PH_MAX_HOST_PAGES)
		return -EINVAL;
	reg->pages = kvcalloc(n, sizeof(*reg->pages), GFP_KERNEL);
	if (!reg->pages)
		return -ENOMEM;
	got = pin_user_pages_fast(start, (int)n, FOLL_WRITE | FOLL_LONGTERM,
				  reg->pages);
	if (got != (long)n) {
		if (got > 0)
			unpin_user_pages(reg->pages, got);
		kvfree(reg->pages);
		reg->pages = NULL;
		return got < 0 ? (int)got : -EFAULT;
	}
	reg->npages = n;
	return 0;
}

static void ph_reg_release(struct ph_reg *reg)
{
	struct ph_client *c = reg->client;

	if (c) {
		mutex_lock(&reg->mapping_lock);
		if (reg->state == PH_MAPPED) {
			c->ops->dma_unmap(&reg->sgt, reg->client_ctx,
					  reg->dma_dev);
			c->ops->put_pages(&reg->sgt, reg->client_ctx);
			ph_count_unmap(c);
		}
		if (reg->state != PH_UNMAPPED)
			ph_count_dereg(c, reg);
		reg->state = PH_UNMAPPED;
		mutex_unlock(&reg->mapping_lock);
		if (reg->core_id != PH_NO_INVALIDATION)
			xa_erase(&c->regs, reg->core_id);
		c->ops->release(reg->client_ctx);
		atomic64_dec(&ph_registrations);
		ph_client_put(c);
	} else if (reg->pages) {
		unpin_user_pages(reg->pages, reg->npages);
		kvfree(reg->pages);
	}
	put_device(reg->dma_dev);
	kref_put(&reg->ref, ph_reg_free);
}

/* ---- file and ioctls ---------------------------------------------------- */

/* Per open file: the table of its registrations (gdrpeer_stub_file.h). */

/*
 * A registration of @f with a reference: DEREG in another thread (or a
 * forked child sharing the file) may release it meanwhile; a DMA then
 * finds it unmapped and stops.
 */
static struct ph_reg *ph_get(struct stub_file *f, u32 id)
{
	return stub_file_get(f, id, offsetof(struct ph_reg, ref));
}

static int ph_ioc_reg(struct stub_file *f, struct peerhost_reg *req)
{
	struct scatterlist *sg;
	struct ph_reg *reg;
	unsigned int i;
	int ret;

	if (!req->length || req->addr + req->length < req->addr ||
	    req->flags & ~(PEERHOST_REG_MAP_BEFORE_PIN |
			   PEERHOST_REG_PIN_OTHER_RANGE) ||
	    req->reserved[0] || req->reserved[1])
		return -EINVAL;
	reg = kzalloc(sizeof(*reg), GFP_KERNEL);
	if (!reg)
		return -ENOMEM;
	kref_init(&reg->ref);
	mutex_init(&reg->mapping_lock);
	atomic64_set(&reg->dmas_done, 0);
	reg->addr = req->addr;
	reg->length = req->length;
	reg->dma_dev = gdrpeer_edu_hca_dma_device();
	if (!reg->dma_dev) {
		kref_put(&reg->ref, ph_reg_free);
		return -ENODEV;
	}
	ret = ph_reg_peer(reg, req->flags);
	if (ret == 1)
		ret = ph_reg_host_pages(reg);
	if (ret) {
		put_device(reg->dma_dev);
		kref_put(&reg->ref, ph_reg_free);
		return ret;
	}
	ret = xa_alloc(&f->objs, &req->id, reg, XA_LIMIT(1, U32_MAX),
		       GFP_KERNEL);
	if (ret) {
		ph_reg_release(reg);
		return ret;
	}
	memset(req->sg_dma, 0, sizeof(req->sg_dma));
	memset(req->sg_len, 0, sizeof(req->sg_len));
	memset(req->client, 0, sizeof(req->client));
	if (reg->client) {
		req->owner = PEERHOST_OWNER_PEER;
		req->nents = reg->sgt.nents;
		req->page_size = reg->page_size;
		strscpy(req->client, reg->client->ops->name,
			sizeof(req->client));
		for_each_sg(reg->sgt.sgl, sg, reg->sgt.nents, i) {
			if (i >= PEERHOST_MAX_SG)
				break;
			req->sg_dma[i] = sg_dma_address(sg);
			req->sg_len[i] = sg_dma_len(sg);
		}
	} else {
		req->owner = PEERHOST_OWNER_HOST_PAGES;
		req->nents = reg->npages;
		req->page_size = PAGE_SIZE;
	}
	return 0;
}

/* DMA address of byte @pos of the mapped table and the bytes after it. */
static int ph_sg_lookup(struct ph_reg *reg, u64 pos, u64 *addr, u64 *left)
{
	struct scatterlist *sg;
	unsigned int i;

	for_each_sg(reg->sgt.sgl, sg, reg->sgt.nents, i) {
		if (pos < sg_dma_len(sg)) {
			*addr = sg_dma_address(sg) + pos;
			*left = sg_dma_len(sg) - pos;
			return 0;
		}
		pos -= sg_dma_len(sg);
	}
	return -EINVAL;
}

static int ph_ioc_dma(struct ph_reg *reg, struct peerhost_dma *req)
{
	/* the table starts at the client's page boundary below addr */
	u64 lead = reg->addr - ALIGN_DOWN(reg->addr, reg->page_size);
	int ret = 0;

	if (req->flags || req->reserved[0] || req->reserved[1] ||
	    req->offset % 8 || req->length % 8 || !req->length ||
	    req->length > EDU_HCA_MAX_LEN || req->offset > reg->length ||
	    req->length > reg->length - req->offset)
		return -EINVAL;
	if (!reg->client)
		return -EOPNOTSUPP;
	req->done = 0;
	req->mismatches = 0;
	req->transfers = 0;
	while (req->done < req->length) {
		u64 pos = req->offset + req->done, addr, left;
		u32 chunk = 0;

		mutex_lock(&reg->mapping_lock);
		if (reg->state != PH_MAPPED) {
			mutex_unlock(&reg->mapping_lock);
			ret = -ENODEV;
			break;
		}
		ret = ph_sg_lookup(reg, lead + pos, &addr, &left);
		if (!ret) {
			chunk = min3(left, req->length - req->done,
				     (u64)EDU_HCA_CHUNK);
			if (!req->done)
				req->first_dma = addr;
			ret = gdrpeer_edu_hca_write_check(addr, req->seed,
							  req->done, chunk,
							  &req->mismatches,
							  &req->transfers);
		}
		mutex_unlock(&reg->mapping_lock);
		if (ret)
			break;
		req->done += chunk;
	}
	if (!ret)
		atomic64_inc(&reg->dmas_done);
	return ret;
}

static long ph_ioctl(struct file *filp, unsigned int cmd, unsigned long arg)
{
	struct stub_file *f = filp->private_data;
	void __user *uarg = (void __user *)arg;
	union {
		struct peerhost_reg reg;
		struct peerhost_dma dma;
		struct peerhost_dereg dereg;
		struct peerhost_state state;
	} u;
	struct ph_reg *reg;
	size_t size = _IOC_SIZE(cmd);
	int ret;

	switch (cmd) {
	case PEERHOST_IOCTL_REG:
	case PEERHOST_IOCTL_DMA:
	case PEERHOST_IOCTL_DEREG:
	case PEERHOST_IOCTL_STATE:
		break;
	default:
		return -ENOTTY;
	}
	if (copy_from_user(&u, uarg, size))
		return -EFAULT;

	switch (cmd) {
	case PEERHOST_IOCTL_REG:
		ret = ph_ioc_reg(f, &u.reg);
		break;
	case PEERHOST_IOCTL_DMA:
		reg = ph_get(f, u.dma.id);
		if (!reg)
			return -ENOENT;
		ret = ph_ioc_dma(reg, &u.dma);
		kref_put(&reg->ref, ph_reg_free);
		break;
	case PEERHOST_IOCTL_DEREG:
		if (u.dereg.pad0 || u.dereg.reserved[0] || u.dereg.reserved[1])
			return -EINVAL;
		reg = xa_erase(&f->objs, u.dereg.id);
		if (!reg)
			return -ENOENT;
		ph_reg_release(reg);
		return 0;
	default:
		reg = ph_get(f, u.state.id);
		if (!reg)
			return -ENOENT;
		mutex_lock(&reg->mapping_lock);
		u.state.invalidated = reg->state == PH_INVALIDATED;
		mutex_unlock(&reg->mapping_lock);
		u.state.dmas_done = atomic64_read(&reg->dmas_done);
		kref_put(&reg->ref, ph_reg_free);
		ret = 0;
		break;
	}
	/* DMA reports how far it got even when it stopped */
	if ((!ret || cmd == PEERHOST_IOCTL_DMA) && copy_to_user(uarg, &u, size))
		return -EFAULT;
	return ret;
}

static void ph_reg_release_obj(void *reg)
{
	ph_reg_release(reg);
}

/*
 * Like uverbs at process exit: every registration of the file goes when it
 * is released (stub_file_release).
 */
static int ph_open(struct inode *inode, struct file *filp)
{
	return stub_file_open(filp, NULL, ph_reg_release_obj);
}

static const struct file_operations ph_fops = {
	.owner = THIS_MODULE,
	.open = ph_open,
	.release = stub_file_release,
	.unlocked_ioctl = ph_ioctl,
};

/* ---- sysfs -------------------------------------------------------------- */

static ssize_t clients_show(struct device *dev, struct device_attribute *attr,
			    char *buf)
{
	struct ph_client *c;
	int n = 0;

	mutex_lock(&ph_clients_lock);
	list_for_each_entry(c, &ph_clients, node)
		n += sysfs_emit_at(buf, n, "%.64s%s%s\n", c->ops->name,
				   c->inval_required ? " inval" : "",
				   c->unmaps ? " unmaps" : "");
	mutex_unlock(&ph_clients_lock);
	return n;
}
static DEVICE_ATTR_RO(clients);

#define PH_COUNTER_ATTR(name)						\
static ssize_t name##_show(struct device *dev,				\
			   struct device_attribute *attr, char *buf)	\
{									\
	return sysfs_emit(buf, "%lld\n",				\
			  (long long)atomic64_read(&ph_##name));	\
}									\
static DEVICE_ATTR_RO(name)

PH_COUNTER_ATTR(registrations);
PH_COUNTER_ATTR(invalidations);
PH_COUNTER_ATTR(stale_invalidations);

static struct attribute *ph_attrs[] = {
	&dev_attr_clients.attr,
	&dev_attr_registrations.attr,
	&dev_attr_invalidations.attr,
	&dev_attr_stale_invalidations.attr,
	NULL,
};
ATTRIBUTE_GROUPS(ph);

static struct miscdevice ph_misc = {
	.minor = MISC_DYNAMIC_MINOR,
	.name = "gdrpeer_peerhost",
	.fops = &ph_fops,
	.mode = 0600,
	.groups = ph_groups,
};

static int __init ph_init(void)
{
	int ret;

	ph_mm_kobj = ph_find_mm_kobj();
	if (!ph_mm_kobj) {
		pr_err("/sys/kernel/mm not found\n");
		return -ENOENT;
	}
	ret = misc_register(&ph_misc);
	if (ret)
		kobject_put(ph_mm_kobj);
	return ret;
}

/* Clients link against this module: they are all gone by now. */
static void __exit ph_exit(void)
{
	misc_deregister(&ph_misc);
	kobject_put(ph_mm_kobj);
}

module_init(ph_init);
module_exit(ph_exit);

MODULE_DESCRIPTION("gdrpeer test: the peer-memory host of OFED's ib_core, driving edu");
MODULE_LICENSE("GPL");

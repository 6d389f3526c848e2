// SPDX-License-Identifier: GPL-2.0
/*
 * gdrpeer_nvstub.ko - test only: a stand-in for nvidia.ko's peer-to-peer
 * API.  It exports the nvidia_p2p_* functions of driver/nv_p2p_abi.h with
 * the semantics written there, backed by the ivshmem "GPU BAR" (module
 * parameter bar=BDF, BAR 2) cut into 64 KiB pages.  Every open file of
 * /dev/gdrpeer_nvstub is one fake GPU address space (a "CUDA context") of
 * the process that opened it; NVSTUB_IOCTL_ALLOC/FREE stand in for
 * cuMemAlloc/cuMemFree (see gdrpeer_nvstub.h).  gdrpeer_nvstub_gpl.c
 * builds the same source with EXPORT_SYMBOL_GPL.
 *
 * The exported functions find the caller's address space by current->mm,
 * as nvidia.ko does: the importer calls them from the ioctl of the process
 * that owns the memory.
 *
 * Rules enforced (errno as the real driver; a "violation" is also counted
 * in sysfs and logged with pr_err, because with the real driver it would
 * be a use-after-free or a leak rather than an error code):
 *  - get_pages / get_pages_persistent: p2p_token and va_space 0, va and
 *    length 64 KiB multiples, length > 0, range inside one live allocation
 *    of the caller, free_callback non-NULL (-EINVAL); persistent flags 0 or
 *    FORCE_BAR1 (-EINVAL), -ENOTSUPP when sysfs persistent is 0.
 *  - put_pages of a live callback table frees it and its DMA mappings; of
 *    a table whose callback ran: 0 (counted in puts_after_callback, or in
 *    puts_during_callback when the put arrived while the callback ran and
 *    waited for it); anything else (unknown, persistent, second put) is a
 *    violation, -EINVAL.  put_pages_persistent likewise for persistent.
 *  - dma_map_pages needs a PCI peer and a live table (nvidia.ko reads the
 *    table unlocked: a map racing with the callback is a use after free
 *    there, so a violation here), -ENOTSUPP for a FORCE_BAR1 pin;
 *    dma_unmap_pages a live table, one of its mappings and the peer it
 *    was mapped for.
 *  - put_pages(_persistent) of NULL returns 0 as nvidia.ko does, but is
 *    counted as a violation: the caller lost track of its table.
 *  - Calling get/put/dma_map from inside a free callback would deadlock on
 *    the RM lock with the real driver: here it is a violation, -EDEADLK.
 *
 * Locking, mirroring the real driver's hazards:
 *  nvstub_rm_lock (mutex, "RM API lock"; holders sleep)
 *    held by get_pages(_persistent), put_pages(_persistent), dma_map_pages
 *    and by the whole free path (NVSTUB_IOCTL_FREE, file release),
 *    including while that path waits for the free callbacks, which run on
 *    nvstub_wq (another context).  So a caller that holds a lock across
 *    put_pages which its free callback also takes deadlocks here exactly
 *    as with nvidia.ko.
 *  -> nvstub_table.lock (mutex, per table; holders sleep): the table's DMA
 *    mappings.  dma_unmap_pages takes only this lock, never rm_lock, so it
 *    may be called from a free callback.
 *  -> nvstub_tables_lock (spinlock, innermost, never sleeps): the lists of
 *    live tables and tombstones, table state and refcount.
 *  Atomic gauges need no lock.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/bitmap.h>
#include <linux/completion.h>
#include <linux/dma-mapping.h>
#include <linux/io.h>
#include <linux/miscdevice.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/pci.h>
#include <linux/refcount.h>
#include <linux/sched.h>
#include <linux/sched/mm.h>
#include <linux/slab.h>
#include <linux/spinlock.h>
#include <linux/uaccess.h>
#include <linux/workqueue.h>

#include "nv_p2p_abi.h"
#include "gdrpeer_nvstub.h"

#ifdef NVSTUB_EXPORT_GPL
#define NVSTUB_EXPORT(sym) EXPORT_SYMBOL_GPL(sym)
#else
#define NVSTUB_EXPORT(sym) EXPORT_SYMBOL(sym)
#endif

#define NVSTUB_BAR		2
#define NVSTUB_PAGE		GDRPEER_NV_PAGE_SIZE
#define NVSTUB_PAGE_SHIFT	GDRPEER_NV_PAGE_SHIFT
/* fake GPU VAs: slot k of a process starts at BASE + k * SPAN */
#define NVSTUB_VA_BASE		0x7f0000000000ull
#define NVSTUB_VA_SPAN		(1ull << 40)
#define NVSTUB_VA_SLOTS		64
#define NVSTUB_VA_GAP		(2ull << 20)
/* freed tables kept to recognise late puts; the oldest go beyond this */
#define NVSTUB_MAX_TOMBS	8192
#define NVSTUB_CB_WARN_MS	10000

static char *bar;
module_param(bar, charp, 0444);
MODULE_PARM_DESC(bar, "PCI address [DDDD:]BB:DD.F of the ivshmem \"GPU\" (BAR 2 backs the fake GPU memory)");

/*
 * 1: keep a write-combining mapping of the whole BAR, as a driver that
 * maps its BAR does; 0: map pages only while poisoning them, so that the
 * only lasting memory-type reservation of a pinned page is gdrpeer's own.
 */
static bool bar_map = true;
module_param(bar_map, bool, 0444);
MODULE_PARM_DESC(bar_map, "keep a write-combining mapping of the BAR (default 1)");

enum nvstub_state {
	NVSTUB_LIVE,		/* pinned and usable */
	NVSTUB_REVOKING,	/* free path: callback queued or running */
	NVSTUB_DEAD_CB,		/* freed after its callback, no put yet */
	NVSTUB_DEAD_CB_PUT,	/* ... and the one allowed put came */
	NVSTUB_DEAD_PUT,	/* freed by put_pages(_persistent) */
};

struct nvstub_ctx;

/* One NVSTUB_IOCTL_ALLOC: a range of fake GPU memory. */
struct nvstub_mem {
	struct list_head ctx_node;	/* in ctx->mems until freed */
	struct nvstub_ctx *ctx;		/* NULL once freed by its owner */
	u64 va, size;
	u32 npages;
	u32 *pages;			/* BAR page index of each page */
	struct list_head tables;	/* pins of it (callback + persistent) */
	unsigned int refs;		/* 1 while allocated + persistent pins */
};

/* One open file: a fake GPU address space of the process that opened it. */
struct nvstub_ctx {
	struct list_head node;		/* in nvstub_ctxs */
	struct mm_struct *mm;		/* mmgrab'ed owner */
	unsigned int slot;
	u64 next_va, va_end;
	struct list_head mems;
};

/* A page table handed out by get_pages(_persistent). */
struct nvstub_table {
	struct nvidia_p2p_page_table pt;	/* what the caller sees */
	struct list_head node;		/* nvstub_tables or nvstub_tombs */
	struct list_head mem_node;	/* in mem->tables while live */
	struct nvstub_mem *mem;
	u64 va, len;
	u32 first;			/* index of its first page in mem */
	bool persistent;
	bool force_bar1;		/* FORCE_BAR1: CPU mappings only */
	void (*free_callback)(void *data);
	void *data;
	enum nvstub_state state;	/* nvstub_tables_lock */
	struct task_struct *cb_task;	/* running the callback, else NULL */
	struct mutex lock;		/* maps */
	struct list_head maps;
	struct work_struct cb_work;
	struct completion cb_done;
	refcount_t ref;			/* 1 for being listed + unmap callers */
	struct nvidia_p2p_page *page_array;
	struct nvidia_p2p_page **page_ptrs;
	u8 uuid[16];
};

/* A DMA mapping handed out by dma_map_pages. */
struct nvstub_map {
	struct nvidia_p2p_dma_mapping m;	/* what the caller sees */
	struct list_head node;		/* in table->maps */
	struct pci_dev *peer;		/* pci_dev_get'ed */
	u64 dma[];
};

static DEFINE_MUTEX(nvstub_rm_lock);
static DEFINE_SPINLOCK(nvstub_tables_lock);
static LIST_HEAD(nvstub_ctxs);		/* rm_lock */
static LIST_HEAD(nvstub_tables);	/* tables_lock: live tables */
static LIST_HEAD(nvstub_tombs);		/* tables_lock: freed tables, oldest first */
static unsigned int nvstub_ntombs;	/* tables_lock */

/* the BAR: set at load, constant afterwards; the bitmap under rm_lock */
static struct pci_dev *nvstub_pdev;
static phys_addr_t nvstub_bar_start;
static u64 nvstub_bar_len;
static void __iomem *nvstub_bar_map;
static unsigned long *nvstub_used;
static u32 nvstub_npages, nvstub_nfree;
static u8 nvstub_uuid[16];
static struct workqueue_struct *nvstub_wq;

/* sysfs gauges and knobs */
static atomic_t nvstub_allocations = ATOMIC_INIT(0);
static atomic_t nvstub_pins = ATOMIC_INIT(0);
static atomic_t nvstub_dma_mappings = ATOMIC_INIT(0);
static atomic64_t nvstub_callbacks = ATOMIC64_INIT(0);
static atomic64_t nvstub_violations = ATOMIC64_INIT(0);
static atomic64_t nvstub_puts_after_cb = ATOMIC64_INIT(0);
static atomic64_t nvstub_puts_during_cb = ATOMIC64_INIT(0);
static atomic64_t nvstub_maps_after_cb = ATOMIC64_INIT(0);
static bool nvstub_persistent = true;
static u32 nvstub_table_version = NVIDIA_P2P_PAGE_TABLE_VERSION;
static u32 nvstub_mapping_version = NVIDIA_P2P_DMA_MAPPING_VERSION;

#define nvstub_violation(fmt, ...)					\
	do {								\
		atomic64_inc(&nvstub_violations);			\
		pr_err("API violation: " fmt, ##__VA_ARGS__);		\
	} while (0)

/* ---- BAR pages --------------------------------------------------------- */

/* Fill @pages with @n free BAR pages and mark them used (rm_lock held). */
static int nvstub_pages_take(u32 *pages, u32 n, bool scatter)
{
	u32 i, idx;

	if (n > nvstub_nfree)
		return -ENOMEM;
	if (scatter) {
		/* highest first, descending: no page follows its predecessor */
		idx = nvstub_npages;
		for (i = 0; i < n; i++) {
			do {
				idx--;
			} while (test_bit(idx, nvstub_used));
			pages[i] = idx;
		}
	} else {
		idx = 0;
		for (i = 0; i < n; i++) {
			idx = find_next_zero_bit(nvstub_used, nvstub_npages,
						 idx);
			pages[i] = idx++;
		}
	}
	for (i = 0; i < n; i++)
		__set_bit(pages[i], nvstub_used);
	nvstub_nfree -= n;
	return 0;
}

/* Poison freed pages in the BAR and give them back (rm_lock held). */
static void nvstub_pages_give(const u32 *pages, u32 n)
{
	u32 i;

	for (i = 0; i < n; i++) {
		u64 off = (u64)pages[i] << NVSTUB_PAGE_SHIFT;
		void __iomem *p = nvstub_bar_map ? nvstub_bar_map + off :
				  ioremap_wc(nvstub_bar_start + off, NVSTUB_PAGE);

		/* without a mapping the page is not poisoned: say so */
		if (p)
			memset_io(p, NVSTUB_POISON_BYTE, NVSTUB_PAGE);
		else
			pr_warn("page %u not poisoned: ioremap failed\n", pages[i]);
		if (p && !nvstub_bar_map)
			iounmap(p);
		__clear_bit(pages[i], nvstub_used);
	}
	nvstub_nfree += n;
}

/* Drop one reference of @mem: the last gives its pages back (rm_lock). */
static void nvstub_mem_unref(struct nvstub_mem *mem)
{
	if (--mem->refs)
		return;
	nvstub_pages_give(mem->pages, mem->npages);
	kvfree(mem->pages);
	kfree(mem);
}

/* ---- tables and mappings ----------------------------------------------- */

/* Live table or tombstone whose page table is @pt (tables_lock held). */
static struct nvstub_table *nvstub_table_find(struct nvidia_p2p_page_table *pt)
{
	struct nvstub_table *t;

	list_for_each_entry(t, &nvstub_tables, node)
		if (&t->pt == pt)
			return t;
	list_for_each_entry(t, &nvstub_tombs, node)
		if (&t->pt == pt)
			return t;
	return NULL;
}

static void nvstub_table_put(struct nvstub_table *t)
{
	if (refcount_dec_and_test(&t->ref)) {
		mutex_destroy(&t->lock);
		kfree(t);
	}
}

/*
 * True (and a violation) when the caller runs inside one of our free
 * callbacks: the real driver holds its RM lock there, so @fn would
 * deadlock.  Here it fails instead of hanging the test.
 */
static bool nvstub_in_callback(const char *fn)
{
	struct nvstub_table *t;
	bool found = false;

	spin_lock(&nvstub_tables_lock);
	list_for_each_entry(t, &nvstub_tables, node)
		if (t->state == NVSTUB_REVOKING &&
		    READ_ONCE(t->cb_task) == current) {
			found = true;
			break;
		}
	spin_unlock(&nvstub_tables_lock);
	if (found)
		nvstub_violation("%s called from a free callback: deadlocks on the RM lock with nvidia.ko\n",
				 fn);
	return found;
}

static void nvstub_map_destroy(struct nvstub_map *m)
{
	u32 i;

	for (i = 0; i < m->m.entries; i++)
		dma_unmap_resource(&m->peer->dev, m->dma[i], NVSTUB_PAGE,
				   DMA_BIDIRECTIONAL, DMA_ATTR_SKIP_CPU_SYNC);
	list_del(&m->node);
	pci_dev_put(m->peer);
	kfree(m);
	atomic_dec(&nvstub_dma_mappings);
}

static void nvstub_cb_work(struct work_struct *work)
{
	struct nvstub_table *t = container_of(work, struct nvstub_table,
					      cb_work);

	WRITE_ONCE(t->cb_task, current);
	t->free_callback(t->data);
	WRITE_ONCE(t->cb_task, NULL);
	atomic64_inc(&nvstub_callbacks);
	complete(&t->cb_done);
}

/*
 * Free a table: unmap its remaining DMA mappings, free its pages array,
 * make it a tombstone in state @state, drop its pin (rm_lock held).
 */
static void nvstub_table_teardown(struct nvstub_table *t,
				  enum nvstub_state state)
{
	struct nvstub_table *evict = NULL;
	struct nvstub_map *m, *tmp;

	mutex_lock(&t->lock);
	list_for_each_entry_safe(m, tmp, &t->maps, node)
		nvstub_map_destroy(m);
	spin_lock(&nvstub_tables_lock);
	t->state = state;
	list_move_tail(&t->node, &nvstub_tombs);
	if (++nvstub_ntombs > NVSTUB_MAX_TOMBS) {
		evict = list_first_entry(&nvstub_tombs, struct nvstub_table,
					 node);
		list_del(&evict->node);
		nvstub_ntombs--;
	}
	spin_unlock(&nvstub_tables_lock);
	/* a late reader finds no pages rather than stale ones */
	kfree(t->page_ptrs);
	kfree(t->page_array);
	t->page_ptrs = NULL;
	t->page_array = NULL;
	t->pt.pages = NULL;
	t->pt.entries = 0;
	t->pt.gpu_uuid = NULL;
	mutex_unlock(&t->lock);

	list_del(&t->mem_node);
	if (t->persistent)
		nvstub_mem_unref(t->mem);
	t->mem = NULL;
	if (evict)
		nvstub_table_put(evict);
	atomic_dec(&nvstub_pins);
	module_put(THIS_MODULE);
}

/*
 * The free path of one allocation (cuMemFree, file release; rm_lock held
 * throughout, as nvidia.ko holds its RM lock): mark the callback pins
 * revoking, run their callbacks on nvstub_wq, wait for every one, free
 * them; persistent pins keep the pages until their put.
 */
static void nvstub_mem_free(struct nvstub_mem *mem)
{
	struct nvstub_table *t, *tmp;

	list_del(&mem->ctx_node);
	mem->ctx = NULL;
	atomic_dec(&nvstub_allocations);

	list_for_each_entry(t, &mem->tables, mem_node) {
		if (t->persistent)
			continue;
		spin_lock(&nvstub_tables_lock);
		t->state = NVSTUB_REVOKING;
		spin_unlock(&nvstub_tables_lock);
	}
	list_for_each_entry(t, &mem->tables, mem_node)
		if (!t->persistent)
			queue_work(nvstub_wq, &t->cb_work);
	list_for_each_entry(t, &mem->tables, mem_node) {
		if (t->persistent)
			continue;
		while (!wait_for_completion_timeout(&t->cb_done,
				msecs_to_jiffies(NVSTUB_CB_WARN_MS)))
			pr_err("free callback %ps of va %#llx has not returned for %u s with the RM lock held: deadlock in the caller?\n",
			       t->free_callback, t->va,
			       NVSTUB_CB_WARN_MS / 1000);
	}
	list_for_each_entry_safe(t, tmp, &mem->tables, mem_node)
		if (!t->persistent)
			nvstub_table_teardown(t, NVSTUB_DEAD_CB);
	nvstub_mem_unref(mem);
}

/* Allocation of @mm covering [va, va + len) (rm_lock held). */
static struct nvstub_mem *nvstub_mem_lookup(struct mm_struct *mm, u64 va,
					    u64 len)
{
	struct nvstub_ctx *ctx;
	struct nvstub_mem *mem;

	if (!mm)
		return NULL;
	list_for_each_entry(ctx, &nvstub_ctxs, node) {
		if (ctx->mm != mm)
			continue;
		list_for_each_entry(mem, &ctx->mems, ctx_node)
			if (va >= mem->va && va - mem->va < mem->size &&
			    len <= mem->size - (va - mem->va))
				return mem;
	}
	return NULL;
}

static int nvstub_get(u64 va, u64 len, struct nvidia_p2p_page_table **ptp,
		      void (*free_callback)(void *data), void *data,
		      bool persistent, bool force_bar1, const char *fn)
{
	struct nvstub_table *t;
	struct nvstub_mem *mem;
	u32 i, n;
	int ret;

	if (nvstub_in_callback(fn))
		return -EDEADLK;
	mutex_lock(&nvstub_rm_lock);
	mem = nvstub_mem_lookup(current->mm, va, len);
	if (!mem) {
		pr_debug("%s: [%#llx, +%#llx) is not inside one allocation of the caller\n",
			 fn, va, len);
		ret = -EINVAL;
		goto out;
	}
	n = len >> NVSTUB_PAGE_SHIFT;
	ret = -ENOMEM;
	t = kzalloc(sizeof(*t), GFP_KERNEL);
	if (!t)
		goto out;
	t->page_array = kcalloc(n, sizeof(*t->page_array), GFP_KERNEL);
	t->page_ptrs = kcalloc(n, sizeof(*t->page_ptrs), GFP_KERNEL);
	if (!t->page_array || !t->page_ptrs)
		goto err_free;
	if (!try_module_get(THIS_MODULE)) {
		ret = -ENODEV;
		goto err_free;
	}
	t->mem = mem;
	t->va = va;
	t->len = len;
	t->first = (va - mem->va) >> NVSTUB_PAGE_SHIFT;
	t->persistent = persistent;
	t->force_bar1 = force_bar1;
	t->free_callback = free_callback;
	t->data = data;
	t->state = NVSTUB_LIVE;
	mutex_init(&t->lock);
	INIT_LIST_HEAD(&t->maps);
	INIT_WORK(&t->cb_work, nvstub_cb_work);
	init_completion(&t->cb_done);
	refcount_set(&t->ref, 1);
	memcpy(t->uuid, nvstub_uuid, sizeof(t->uuid));
	for (i = 0; i < n; i++) {
		t->page_array[i].physical_address = nvstub_bar_start +
			((u64)mem->pages[t->first + i] << NVSTUB_PAGE_SHIFT);
		t->page_ptrs[i] = &t->page_array[i];
	}
	t->pt.version = READ_ONCE(nvstub_table_version);
	t->pt.page_size = NVIDIA_P2P_PAGE_SIZE_64KB;
	t->pt.pages = t->page_ptrs;
	t->pt.entries = n;
	t->pt.gpu_uuid = t->uuid;

	list_add_tail(&t->mem_node, &mem->tables);
	if (persistent)
		mem->refs++;
	spin_lock(&nvstub_tables_lock);
	list_add_tail(&t->node, &nvstub_tables);
	spin_unlock(&nvstub_tables_lock);
	atomic_inc(&nvstub_pins);
	*ptp = &t->pt;
	ret = 0;
	goto out;

err_free:
	kfree(t->page_ptrs);
	kfree(t->page_array);
	kfree(t);
out:
	mutex_unlock(&nvstub_rm_lock);
	return ret;
}

static bool nvstub_range_ok(u64 va, u64 len)
{
	return len && IS_ALIGNED(va, NVSTUB_PAGE) &&
	       IS_ALIGNED(len, NVSTUB_PAGE) && va + len > va;
}

/* ---- the exported API -------------------------------------------------- */

int nvidia_p2p_get_pages(u64 p2p_token, u32 va_space, u64 virtual_address,
			 u64 length, struct nvidia_p2p_page_table **page_table,
			 void (*free_callback)(void *data), void *data)
{
	if (!page_table)
		return -EINVAL;
	*page_table = NULL;
	if (p2p_token || va_space || !free_callback ||
	    !nvstub_range_ok(virtual_address, length))
		return -EINVAL;
	return nvstub_get(virtual_address, length, page_table, free_callback,
			  data, false, false, __func__);
}
NVSTUB_EXPORT(nvidia_p2p_get_pages);

int nvidia_p2p_get_pages_persistent(u64 virtual_address, u64 length,
				    struct nvidia_p2p_page_table **page_table,
				    u32 flags)
{
	if (!page_table)
		return -EINVAL;
	*page_table = NULL;
	if ((flags & ~NVIDIA_P2P_FLAGS_FORCE_BAR1_MAPPING) ||
	    !nvstub_range_ok(virtual_address, length))
		return -EINVAL;
	if (!READ_ONCE(nvstub_persistent))
		return -ENOTSUPP;
	return nvstub_get(virtual_address, length, page_table, NULL, NULL,
			  true, flags & NVIDIA_P2P_FLAGS_FORCE_BAR1_MAPPING,
			  __func__);
}
NVSTUB_EXPORT(nvidia_p2p_get_pages_persistent);

int nvidia_p2p_put_pages(u64 p2p_token, u32 va_space, u64 virtual_address,
			 struct nvidia_p2p_page_table *page_table)
{
	enum nvstub_state state = NVSTUB_LIVE;
	struct nvstub_table *t;
	bool racing;
	int ret = 0;

	if (!page_table) {
		/* nvidia.ko returns 0; a caller that does this has lost track */
		nvstub_violation("put_pages of a NULL page table\n");
		return 0;
	}
	if (nvstub_in_callback(__func__))
		return -EDEADLK;
	/* a put that finds its table revoking waits for the free path */
	spin_lock(&nvstub_tables_lock);
	t = nvstub_table_find(page_table);
	racing = t && t->state == NVSTUB_REVOKING;
	spin_unlock(&nvstub_tables_lock);

	mutex_lock(&nvstub_rm_lock);
	spin_lock(&nvstub_tables_lock);
	t = nvstub_table_find(page_table);
	if (t) {
		state = t->state;
		if (!t->persistent && state == NVSTUB_DEAD_CB)
			t->state = NVSTUB_DEAD_CB_PUT;
	}
	spin_unlock(&nvstub_tables_lock);

	if (!t) {
		nvstub_violation("put_pages of unknown page table %p\n",
				 page_table);
		ret = -EINVAL;
	} else if (t->persistent) {
		nvstub_violation("put_pages of persistent page table %p (va %#llx)\n",
				 page_table, t->va);
		ret = -EINVAL;
	} else if (state == NVSTUB_LIVE) {
		if (p2p_token || va_space || virtual_address != t->va) {
			nvstub_violation("put_pages of page table %p with va %#llx, pinned at %#llx\n",
					 page_table, virtual_address, t->va);
			ret = -EINVAL;
		} else {
			nvstub_table_teardown(t, NVSTUB_DEAD_PUT);
		}
	} else if (state == NVSTUB_DEAD_CB) {
		/* allowed by the API; gdrpeer must not need it */
		if (racing)
			atomic64_inc(&nvstub_puts_during_cb);
		else
			atomic64_inc(&nvstub_puts_after_cb);
	} else {
		nvstub_violation("second put_pages of page table %p (va %#llx)\n",
				 page_table, t->va);
		ret = -EINVAL;
	}
	mutex_unlock(&nvstub_rm_lock);
	return ret;
}
NVSTUB_EXPORT(nvidia_p2p_put_pages);

int nvidia_p2p_put_pages_persistent(u64 virtual_address,
				    struct nvidia_p2p_page_table *page_table,
				    u32 flags)
{
	enum nvstub_state state = NVSTUB_LIVE;
	struct nvstub_table *t;
	int ret = 0;

	if (flags)
		return -EINVAL;
	if (!page_table) {
		nvstub_violation("put_pages_persistent of a NULL page table\n");
		return 0;
	}
	if (nvstub_in_callback(__func__))
		return -EDEADLK;
	mutex_lock(&nvstub_rm_lock);
	spin_lock(&nvstub_tables_lock);
	t = nvstub_table_find(page_table);
	if (t)
		state = t->state;
	spin_unlock(&nvstub_tables_lock);

	if (!t) {
		nvstub_violation("put_pages_persistent of unknown page table %p\n",
				 page_table);
		ret = -EINVAL;
	} else if (!t->persistent) {
		nvstub_violation("put_pages_persistent of callback page table %p (va %#llx)\n",
				 page_table, t->va);
		ret = -EINVAL;
	} else if (state != NVSTUB_LIVE) {
		nvstub_violation("second put_pages_persistent of page table %p (va %#llx)\n",
				 page_table, t->va);
		ret = -EINVAL;
	} else if (virtual_address != t->va) {
		nvstub_violation("put_pages_persistent of page table %p with va %#llx, pinned at %#llx\n",
				 page_table, virtual_address, t->va);
		ret = -EINVAL;
	} else {
		nvstub_table_teardown(t, NVSTUB_DEAD_PUT);
	}
	mutex_unlock(&nvstub_rm_lock);
	return ret;
}
NVSTUB_EXPORT(nvidia_p2p_put_pages_persistent);

int nvidia_p2p_dma_map_pages(struct pci_dev *peer,
			     struct nvidia_p2p_page_table *page_table,
			     struct nvidia_p2p_dma_mapping **dma_mapping)
{
	enum nvstub_state state;
	struct nvstub_table *t;
	struct nvstub_map *m;
	u32 i, n;
	int ret;

	if (!peer || !page_table || !dma_mapping)
		return -EINVAL;
	*dma_mapping = NULL;
	if (nvstub_in_callback(__func__))
		return -EDEADLK;
	mutex_lock(&nvstub_rm_lock);
	spin_lock(&nvstub_tables_lock);
	t = nvstub_table_find(page_table);
	/* no table is revoking while rm_lock is held */
	state = t ? t->state : NVSTUB_DEAD_PUT;
	spin_unlock(&nvstub_tables_lock);
	if (t && (state == NVSTUB_REVOKING || state == NVSTUB_DEAD_CB)) {
		/*
		 * nvidia.ko reads the table before it takes any lock: a map
		 * that overlaps the free callback reads freed memory there.
		 * A caller cannot close this window without waiting for its
		 * map inside the callback (a deadlock with nvidia.ko), so it
		 * is counted on its own, apart from the violations.
		 */
		atomic64_inc(&nvstub_maps_after_cb);
		pr_warn("dma_map_pages of called-back page table %p: the free-callback window (reads freed memory in nvidia.ko)\n",
			page_table);
		ret = -EINVAL;
		goto out;
	}
	if (!t || state != NVSTUB_LIVE) {
		nvstub_violation("dma_map_pages of %s page table %p: use after free with nvidia.ko\n",
				 !t ? "an unknown" : "a put", page_table);
		ret = -EINVAL;
		goto out;
	}
	if (t->force_bar1) {
		ret = -ENOTSUPP;	/* as nvidia.ko: CPU mappings only */
		goto out;
	}
	n = t->pt.entries;
	m = kzalloc(struct_size(m, dma, n), GFP_KERNEL);
	if (!m) {
		ret = -ENOMEM;
		goto out;
	}
	for (i = 0; i < n; i++) {
		/* through the peer's DMA ops: its IOMMU domain is honoured */
		m->dma[i] = dma_map_resource(&peer->dev,
					     t->page_array[i].physical_address,
					     NVSTUB_PAGE, DMA_BIDIRECTIONAL,
					     DMA_ATTR_SKIP_CPU_SYNC);
		if (dma_mapping_error(&peer->dev, m->dma[i])) {
			pci_err(peer, "nvstub: mapping GPU page %#llx failed\n",
				t->page_array[i].physical_address);
			while (i--)
				dma_unmap_resource(&peer->dev, m->dma[i],
						   NVSTUB_PAGE,
						   DMA_BIDIRECTIONAL,
						   DMA_ATTR_SKIP_CPU_SYNC);
			kfree(m);
			ret = -EIO;
			goto out;
		}
	}
	m->peer = pci_dev_get(peer);
	m->m.version = READ_ONCE(nvstub_mapping_version);
	m->m.page_size_type = NVIDIA_P2P_PAGE_SIZE_64KB;
	m->m.entries = n;
	m->m.dma_addresses = m->dma;
	m->m.pci_dev = peer;
	mutex_lock(&t->lock);
	list_add_tail(&m->node, &t->maps);
	mutex_unlock(&t->lock);
	atomic_inc(&nvstub_dma_mappings);
	*dma_mapping = &m->m;
	ret = 0;
out:
	mutex_unlock(&nvstub_rm_lock);
	return ret;
}
NVSTUB_EXPORT(nvidia_p2p_dma_map_pages);

/* Takes only the table's lock: callable from a free callback. */
int nvidia_p2p_dma_unmap_pages(struct pci_dev *peer,
			       struct nvidia_p2p_page_table *page_table,
			       struct nvidia_p2p_dma_mapping *dma_mapping)
{
	struct nvstub_map *m, *found = NULL;
	enum nvstub_state state;
	struct nvstub_table *t;
	int ret = -EINVAL;

	if (!peer || !page_table || !dma_mapping)
		return -EINVAL;
	spin_lock(&nvstub_tables_lock);
	t = nvstub_table_find(page_table);
	if (t)
		refcount_inc(&t->ref);
	spin_unlock(&nvstub_tables_lock);
	if (!t) {
		nvstub_violation("dma_unmap_pages with unknown page table %p\n",
				 page_table);
		return -EINVAL;
	}

	mutex_lock(&t->lock);
	spin_lock(&nvstub_tables_lock);
	state = t->state;
	spin_unlock(&nvstub_tables_lock);
	list_for_each_entry(m, &t->maps, node)
		if (&m->m == dma_mapping) {
			found = m;
			break;
		}
	if (state != NVSTUB_LIVE && state != NVSTUB_REVOKING)
		nvstub_violation("dma_unmap_pages of freed page table %p (va %#llx): use after free with nvidia.ko\n",
				 page_table, t->va);
	else if (!found)
		nvstub_violation("dma_unmap_pages of mapping %p that page table %p (va %#llx) does not have\n",
				 dma_mapping, page_table, t->va);
	else if (found->peer != peer)
		nvstub_violation("dma_unmap_pages of mapping %p for %s with peer %s\n",
				 dma_mapping, pci_name(found->peer),
				 pci_name(peer));
	else
		ret = 0;
	if (!ret)
		nvstub_map_destroy(found);
	mutex_unlock(&t->lock);
	nvstub_table_put(t);
	return ret;
}
NVSTUB_EXPORT(nvidia_p2p_dma_unmap_pages);

/* Kept for old callers; current drivers do nothing here either. */
int nvidia_p2p_free_page_table(struct nvidia_p2p_page_table *page_table)
{
	return 0;
}
NVSTUB_EXPORT(nvidia_p2p_free_page_table);

int nvidia_p2p_free_dma_mapping(struct nvidia_p2p_dma_mapping *dma_mapping)
{
	return 0;
}
NVSTUB_EXPORT(nvidia_p2p_free_dma_mapping);

/* ---- char device: fake GPU address spaces ------------------------------ */

static int nvstub_open(struct inode *inode, struct file *filp)
{
	DECLARE_BITMAP(used, NVSTUB_VA_SLOTS);
	struct nvstub_ctx *ctx, *o;
	unsigned int slot;

	if (!current->mm)
		return -EINVAL;
	ctx = kzalloc(sizeof(*ctx), GFP_KERNEL);
	if (!ctx)
		return -ENOMEM;
	INIT_LIST_HEAD(&ctx->mems);
	bitmap_zero(used, NVSTUB_VA_SLOTS);

	/* files of one process get disjoint VA slots: lookups are by mm */
	mutex_lock(&nvstub_rm_lock);
	list_for_each_entry(o, &nvstub_ctxs, node)
		if (o->mm == current->mm)
			__set_bit(o->slot, used);
	slot = find_first_zero_bit(used, NVSTUB_VA_SLOTS);
	if (slot >= NVSTUB_VA_SLOTS) {
		mutex_unlock(&nvstub_rm_lock);
		kfree(ctx);
		return -EMFILE;
	}
	ctx->slot = slot;
	ctx->next_va = NVSTUB_VA_BASE + slot * NVSTUB_VA_SPAN;
	ctx->va_end = ctx->next_va + NVSTUB_VA_SPAN;
	ctx->mm = current->mm;
	mmgrab(ctx->mm);
	list_add_tail(&ctx->node, &nvstub_ctxs);
	mutex_unlock(&nvstub_rm_lock);
	filp->private_data = ctx;
	return 0;
}

/* Process exit or last close: free everything as NVSTUB_IOCTL_FREE does. */
static int nvstub_release(struct inode *inode, struct file *filp)
{
	struct nvstub_ctx *ctx = filp->private_data;

	mutex_lock(&nvstub_rm_lock);
	while (!list_empty(&ctx->mems))
		nvstub_mem_free(list_first_entry(&ctx->mems, struct nvstub_mem,
						 ctx_node));
	list_del(&ctx->node);
	mutex_unlock(&nvstub_rm_lock);
	mmdrop(ctx->mm);
	kfree(ctx);
	return 0;
}

/* Free the allocation of @ctx that starts at @va. */
static int nvstub_free_va(struct nvstub_ctx *ctx, u64 va)
{
	struct nvstub_mem *mem;
	int ret = -ENOENT;

	mutex_lock(&nvstub_rm_lock);
	list_for_each_entry(mem, &ctx->mems, ctx_node)
		if (mem->va == va) {
			nvstub_mem_free(mem);
			ret = 0;
			break;
		}
	mutex_unlock(&nvstub_rm_lock);
	return ret;
}

static int nvstub_ioc_alloc(struct nvstub_ctx *ctx,
			    struct nvstub_alloc __user *uarg)
{
	u64 __user *uoffs;
	struct nvstub_alloc a;
	struct nvstub_mem *mem;
	u64 *offs = NULL;
	u32 i, n;
	int ret;

	if (copy_from_user(&a, uarg, sizeof(a)))
		return -EFAULT;
	if (a.pad0 || a.reserved[0] || a.reserved[1] ||
	    (a.flags & ~NVSTUB_ALLOC_SCATTER) || !a.size ||
	    !IS_ALIGNED(a.size, NVSTUB_PAGE))
		return -EINVAL;
	if (a.size > nvstub_bar_len)
		return -ENOMEM;
	n = a.size >> NVSTUB_PAGE_SHIFT;
	uoffs = u64_to_user_ptr(a.bar_offsets_ptr);

	mem = kzalloc(sizeof(*mem), GFP_KERNEL);
	if (!mem)
		return -ENOMEM;
	mem->pages = kvmalloc_array(n, sizeof(*mem->pages), GFP_KERNEL);
	if (a.bar_offsets_ptr)
		offs = kvmalloc_array(n, sizeof(*offs), GFP_KERNEL);
	if (!mem->pages || (a.bar_offsets_ptr && !offs)) {
		ret = -ENOMEM;
		goto err_free;
	}
	mem->npages = n;
	mem->size = a.size;
	mem->refs = 1;
	INIT_LIST_HEAD(&mem->tables);

	mutex_lock(&nvstub_rm_lock);
	if (a.size + NVSTUB_VA_GAP > ctx->va_end - ctx->next_va) {
		ret = -ENOMEM;	/* this file's VA span is used up */
	} else {
		ret = nvstub_pages_take(mem->pages, n,
					a.flags & NVSTUB_ALLOC_SCATTER);
	}
	if (ret) {
		mutex_unlock(&nvstub_rm_lock);
		goto err_free;
	}
	mem->va = ctx->next_va;
	ctx->next_va += a.size + NVSTUB_VA_GAP;
	mem->ctx = ctx;
	list_add_tail(&mem->ctx_node, &ctx->mems);
	atomic_inc(&nvstub_allocations);
	for (i = 0; offs && i < n; i++)
		offs[i] = (u64)mem->pages[i] << NVSTUB_PAGE_SHIFT;
	a.va = mem->va;
	mutex_unlock(&nvstub_rm_lock);

	/* from here @mem belongs to the file: undo through the free path */
	if ((offs && copy_to_user(uoffs, offs, (size_t)n * sizeof(*offs))) ||
	    copy_to_user(uarg, &a, sizeof(a))) {
		nvstub_free_va(ctx, a.va);
		ret = -EFAULT;
	}
	kvfree(offs);
	return ret;

err_free:
	kvfree(offs);
	kvfree(mem->pages);
	kfree(mem);
	return ret;
}

static int nvstub_ioc_free(struct nvstub_ctx *ctx,
			   struct nvstub_free __user *uarg)
{
	struct nvstub_free f;

	if (copy_from_user(&f, uarg, sizeof(f)))
		return -EFAULT;
	if (f.reserved[0] || f.reserved[1] || f.reserved[2])
		return -EINVAL;
	return nvstub_free_va(ctx, f.va);
}

static long nvstub_ioctl(struct file *filp, unsigned int cmd,
			 unsigned long arg)
{
	struct nvstub_ctx *ctx = filp->private_data;

	switch (cmd) {
	case NVSTUB_IOCTL_ALLOC:
		return nvstub_ioc_alloc(ctx, (void __user *)arg);
	case NVSTUB_IOCTL_FREE:
		return nvstub_ioc_free(ctx, (void __user *)arg);
	default:
		return -ENOTTY;
	}
}

static const struct file_operations nvstub_fops = {
	.owner = THIS_MODULE,
	.open = nvstub_open,
	.release = nvstub_release,
	.unlocked_ioctl = nvstub_ioctl,
	.compat_ioctl = compat_ptr_ioctl,
};

/* ---- sysfs ------------------------------------------------------------- */

#define NVSTUB_GAUGE(name, read)					\
static ssize_t name##_show(struct device *dev,				\
			   struct device_attribute *attr, char *buf)	\
{									\
	return sysfs_emit(buf, "%lld\n", (long long)(read));		\
}									\
static DEVICE_ATTR_RO(name)

NVSTUB_GAUGE(allocations, atomic_read(&nvstub_allocations));
NVSTUB_GAUGE(pins, atomic_read(&nvstub_pins));
NVSTUB_GAUGE(dma_mappings, atomic_read(&nvstub_dma_mappings));
NVSTUB_GAUGE(callbacks, atomic64_read(&nvstub_callbacks));
NVSTUB_GAUGE(violations, atomic64_read(&nvstub_violations));
NVSTUB_GAUGE(puts_after_callback, atomic64_read(&nvstub_puts_after_cb));
NVSTUB_GAUGE(maps_after_callback, atomic64_read(&nvstub_maps_after_cb));
NVSTUB_GAUGE(puts_during_callback, atomic64_read(&nvstub_puts_during_cb));

static ssize_t persistent_show(struct device *dev,
			       struct device_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "%d\n", READ_ONCE(nvstub_persistent));
}

static ssize_t persistent_store(struct device *dev,
				struct device_attribute *attr,
				const char *buf, size_t count)
{
	bool v;
	int ret = kstrtobool(buf, &v);

	if (ret)
		return ret;
	WRITE_ONCE(nvstub_persistent, v);
	return count;
}
static DEVICE_ATTR_RW(persistent);

/* A structure version the stand-in reports (tests set old or future ones). */
#define NVSTUB_VERSION_KNOB(name, var)					\
static ssize_t name##_show(struct device *dev,				\
			   struct device_attribute *attr, char *buf)	\
{									\
	return sysfs_emit(buf, "%#x\n", READ_ONCE(var));		\
}									\
static ssize_t name##_store(struct device *dev,				\
			    struct device_attribute *attr,		\
			    const char *buf, size_t count)		\
{									\
	u32 v;								\
	int ret = kstrtou32(buf, 0, &v);				\
									\
	if (ret)							\
		return ret;						\
	WRITE_ONCE(var, v);						\
	return count;							\
}									\
static DEVICE_ATTR_RW(name)

NVSTUB_VERSION_KNOB(table_version, nvstub_table_version);
NVSTUB_VERSION_KNOB(mapping_version, nvstub_mapping_version);

static struct attribute *nvstub_attrs[] = {
	&dev_attr_allocations.attr,
	&dev_attr_pins.attr,
	&dev_attr_dma_mappings.attr,
	&dev_attr_callbacks.attr,
	&dev_attr_violations.attr,
	&dev_attr_puts_after_callback.attr,
	&dev_attr_maps_after_callback.attr,
	&dev_attr_puts_during_callback.attr,
	&dev_attr_persistent.attr,
	&dev_attr_table_version.attr,
	&dev_attr_mapping_version.attr,
	NULL,
};
ATTRIBUTE_GROUPS(nvstub);

static struct miscdevice nvstub_misc = {
	.minor = MISC_DYNAMIC_MINOR,
	.name = "gdrpeer_nvstub",
	.fops = &nvstub_fops,
	.groups = nvstub_groups,
	.mode = 0600,
};

/* ---- module ------------------------------------------------------------ */

static int nvstub_bind_bar(void)
{
	unsigned int domain = 0, busn, slot, fn;
	unsigned long flags;
	struct pci_dev *pdev;
	char extra;
	int ret;

	if (!bar || (sscanf(bar, "%x:%x:%x.%x%c", &domain, &busn, &slot, &fn,
			    &extra) != 4 &&
		     sscanf(bar, "%x:%x.%x%c", &busn, &slot, &fn, &extra) != 3)) {
		pr_err("bar=%s: expected the ivshmem \"GPU\" as bar=[DDDD:]BB:DD.F\n",
		       bar ? bar : "(missing)");
		return -ENODEV;
	}
	if (busn > 0xff || slot > 0x1f || fn > 7) {
		pr_err("bar=%s: not a PCI address\n", bar);
		return -ENODEV;
	}
	pdev = pci_get_domain_bus_and_slot((int)domain, busn,
					   PCI_DEVFN(slot, fn));
	if (!pdev) {
		pr_err("bar=%s: no such PCI device\n", bar);
		return -ENODEV;
	}
	flags = pci_resource_flags(pdev, NVSTUB_BAR);
	if (!(flags & IORESOURCE_MEM) || !(flags & IORESOURCE_MEM_64) ||
	    !(flags & IORESOURCE_PREFETCH) ||
	    pci_resource_len(pdev, NVSTUB_BAR) < NVSTUB_PAGE ||
	    !IS_ALIGNED(pci_resource_start(pdev, NVSTUB_BAR), NVSTUB_PAGE)) {
		pr_err("%s: BAR %d is not a 64-bit prefetchable memory BAR of at least 64 KiB\n",
		       pci_name(pdev), NVSTUB_BAR);
		ret = -ENODEV;
		goto err_put;
	}
	ret = pci_enable_device_mem(pdev);
	if (ret) {
		pr_err("%s: cannot enable memory decoding (%d)\n",
		       pci_name(pdev), ret);
		goto err_put;
	}
	ret = pci_request_region(pdev, NVSTUB_BAR, KBUILD_MODNAME);
	if (ret) {
		pr_err("%s: BAR %d is claimed by someone else (gdrpeer pcibar?)\n",
		       pci_name(pdev), NVSTUB_BAR);
		ret = -EBUSY;
		goto err_disable;
	}
	nvstub_bar_start = pci_resource_start(pdev, NVSTUB_BAR);
	nvstub_bar_len = round_down(pci_resource_len(pdev, NVSTUB_BAR),
				    NVSTUB_PAGE);
	if (bar_map) {
		nvstub_bar_map = ioremap_wc(nvstub_bar_start, nvstub_bar_len);
		if (!nvstub_bar_map) {
			ret = -ENOMEM;
			goto err_release;
		}
	}
	nvstub_npages = nvstub_bar_len >> NVSTUB_PAGE_SHIFT;
	nvstub_nfree = nvstub_npages;
	nvstub_used = bitmap_zalloc(nvstub_npages, GFP_KERNEL);
	if (!nvstub_used) {
		ret = -ENOMEM;
		goto err_unmap;
	}
	/* a fixed, recognisable UUID that names the device */
	memcpy(nvstub_uuid, "GPU-nvstub", 10);
	nvstub_uuid[10] = domain >> 8;
	nvstub_uuid[11] = domain;
	nvstub_uuid[12] = busn;
	nvstub_uuid[13] = PCI_DEVFN(slot, fn);
	nvstub_pdev = pdev;
	return 0;

err_unmap:
	if (nvstub_bar_map)
		iounmap(nvstub_bar_map);
	nvstub_bar_map = NULL;
err_release:
	pci_release_region(pdev, NVSTUB_BAR);
err_disable:
	pci_disable_device(pdev);
err_put:
	pci_dev_put(pdev);
	return ret;
}

static void nvstub_unbind_bar(void)
{
	bitmap_free(nvstub_used);
	if (nvstub_bar_map)
		iounmap(nvstub_bar_map);
	nvstub_bar_map = NULL;
	pci_release_region(nvstub_pdev, NVSTUB_BAR);
	pci_disable_device(nvstub_pdev);
	pci_dev_put(nvstub_pdev);
}

static int __init nvstub_init(void)
{
	int ret = nvstub_bind_bar();

	if (ret)
		return ret;
	nvstub_wq = alloc_workqueue("gdrpeer_nvstub_cb", WQ_UNBOUND, 0);
	if (!nvstub_wq) {
		ret = -ENOMEM;
		goto err_unbind;
	}
	ret = misc_register(&nvstub_misc);
	if (ret)
		goto err_wq;
	pr_info("%s: BAR %d, %u pages of 64 KiB, exports nvidia_p2p_* (%s)\n",
		pci_name(nvstub_pdev), NVSTUB_BAR, nvstub_npages,
#ifdef NVSTUB_EXPORT_GPL
		"EXPORT_SYMBOL_GPL"
#else
		"EXPORT_SYMBOL"
#endif
		);
	return 0;

err_wq:
	destroy_workqueue(nvstub_wq);
err_unbind:
	nvstub_unbind_bar();
	return ret;
}

/* No file is open (fops owner) and no pin lives (a module ref each). */
static void __exit nvstub_exit(void)
{
	struct nvstub_table *t, *tmp;

	misc_deregister(&nvstub_misc);
	destroy_workqueue(nvstub_wq);
	list_for_each_entry_safe(t, tmp, &nvstub_tombs, node) {
		list_del(&t->node);
		nvstub_table_put(t);
	}
	WARN_ON(!list_empty(&nvstub_tables) || nvstub_nfree != nvstub_npages);
	nvstub_unbind_bar();
}

module_init(nvstub_init);
module_exit(nvstub_exit);

MODULE_DESCRIPTION("gdrpeer test: stand-in for nvidia.ko's nvidia_p2p_* API on an ivshmem BAR");
MODULE_LICENSE("GPL");

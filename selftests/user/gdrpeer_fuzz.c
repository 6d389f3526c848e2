// SPDX-License-Identifier: GPL-2.0
/*
 * gdrpeer_fuzz - random system calls against /dev/gdrpeer, its handles,
 * mappings and dma-bufs from several threads, while a controller thread
 * unbinds/binds (and, where gdrpeer is the PCI driver, removes/rescans) the
 * device under test.  kselftest TAP output.
 *
 *   gdrpeer_fuzz [--seed S] [--ops N] [--threads T] [--no-churn]
 *
 * Each worker draws its operations from splitmix64(seed, worker), so one
 * seed gives every worker the same sequence of operations and arguments;
 * only their interleaving (and so which errno comes back) differs between
 * runs.  The seed is printed first; rerun with --seed to repeat.
 *
 * Operations: open (O_RDWR / O_RDONLY), close, dup, fork (the child uses
 * the inherited files and exits), every GDRPEER ioctl with random and
 * boundary arguments (reserved fields, flags, sizes 0 / unaligned / huge,
 * wrapping offsets, a faulting pointer, wrong argument sizes, unknown
 * numbers), mmap/munmap of handles and of dma-bufs, reads and writes of
 * mapped pages, and with gdrpeer_edu_hca.ko loaded dma-buf imports by the
 * edu stand-in HCA with a few real DMAs through them.  And the operations
 * that found driver review 3's defects (issue 22): bursts of requests that
 * fail after reaching the pin (EXPORT_VA refused by the nvidia provider,
 * e.g. with gdrpeer_nvrefuse.ko loaded, or full-BAR ALLOCs that find no
 * room where that provider is absent), EXPORT bursts with an unbind asked
 * for at once, many one-page allocations and then an unbind, and ALLOC
 * racing FREE of the next handle on one file from two threads.
 *
 * Pass criteria: every errno is one the ABI documents for that call (the
 * per-call sets below); a DMA that succeeds reads back what it wrote;
 * forked children exit normally; SIGBUS on touching a mapping is counted
 * (revoked memory), any other signal kills the run; every bar_offset an
 * ALLOC returns lies in the BAR (a freed region read 0x6b... under
 * slub_debug=P); once the workers are done, every handle mapping whose
 * handle answers -ENODEV (revoked) faults; afterwards, with everything
 * closed, every device's gauges are 0 and the edu module holds no import.  The caller checks that rmmod is clean and that the kernel
 * printed no report.
 */
#define _GNU_SOURCE

#include <dirent.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>

#include "gdrpeer_test.h"
#include "../kmod/gdrpeer_edu_hca.h"
#include "kselftest.h"

#define NFILES 24
#define NHANDLES 48
#define NMAPS 24
/*
 * Mappings of one allocation that the edu importer may hold at once.  The debug kernel's DMA-API
 * checker counts live mappings (MMIO included) by their first cacheline and warns once more than
 * 8 are live ("exceeded 7 overlapping mappings"): a leak heuristic, which 9 legitimate importers
 * of one allocation set off just as a leak would.  Every edu import may map the same allocation,
 * so the fuzzer keeps the edu mappings that can be live at once within 8 (edu_mapping_reserve;
 * that its table names every import edu holds is checked at the end, check_edu_table) and
 * proves the other half, that no mapping outlives its import, with dma-debug's own table
 * (check_dma_debug).
 */
#define MAX_EDU_MAPPINGS 8
#define NIMPORTS 6
#define MAX_THREADS 64
#define PCI_DRIVER_DIR "/sys/bus/pci/drivers/gdrpeer"
#define EDU_SYSFS "/sys/class/misc/gdrpeer_edu_hca"
#define DMA_DEBUG_DUMP "/sys/kernel/debug/dma-api/dump"

/* ---- random numbers ------------------------------------------------------ */

static uint64_t rnd(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static uint64_t below(uint64_t *s, uint64_t n)
{
	return n ? rnd(s) % n : 0;
}

static int one_in(uint64_t *s, unsigned int n)
{
	return below(s, n) == 0;
}

/* ---- shared state ---------------------------------------------------------- */

enum kind { K_EMPTY, K_GDRPEER, K_DMABUF };

struct file_slot {
	pthread_rwlock_t lock;	/* write: close/replace; read: use the fd */
	int fd;
	enum kind kind;
	int rdonly;
	uint64_t size;		/* dma-buf: bytes exported */
};

struct map_slot {
	pthread_rwlock_t lock;	/* write: munmap/replace; read: touch */
	uint8_t *addr;
	size_t len;
	int fd;			/* handle mappings: the file and handle */
	uint64_t handle;	/* 0: a dma-buf mapping */
};

struct handle_slot {
	uint64_t handle, size, mmap_offset;
	int fd;			/* the fd (number) it was allocated on */
	int valid;
};

static struct file_slot files[NFILES];
static struct map_slot maps[NMAPS];
static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER; /* handles, imports */
static struct handle_slot handles[NHANDLES];
static uint32_t imports[NIMPORTS];
static uint64_t import_size[NIMPORTS];
/*
 * Also under table_lock.  An import stays mapped while an import DMA or state query of another
 * thread holds it, even once it has left its slot (unimported or replaced): those calls are
 * counted as mappings for as long as they run.
 */
static unsigned int edu_pending;	/* imports and one-shot DMAs being made */
static unsigned int edu_holders;	/* import DMAs and state queries running */
static int edu_fd = -1;
static uint64_t page;
static void *fault_ptr;		/* a PROT_NONE page: ioctl arguments that fault */
static atomic_int stop_churn;
/* a worker asks the controller to unbind now (revocation during its burst) */
static atomic_int unbind_now;

/* ---- results ----------------------------------------------------------------- */

enum op {
	OP_OPEN, OP_CLOSE, OP_DUP, OP_FORK, OP_INFO, OP_LIST, OP_ALLOC, OP_FREE,
	OP_EXPORT, OP_QUERY, OP_EXPORT_VA, OP_BAD_IOCTL, OP_MMAP, OP_MUNMAP,
	OP_TOUCH, OP_EDU_IMPORT, OP_EDU_DMA, OP_EDU_UNIMPORT, OP_EDU_STATE,
	OP_EDU_ONESHOT, OP_PIN_BURST, OP_EXPORT_BURST, OP_TINY_ALLOCS,
	OP_ALLOC_RACE, NOPS
};
static const char *const op_name[NOPS] = {
	"open", "close", "dup", "fork", "info", "list", "alloc", "free",
	"export", "query", "export_va", "bad_ioctl", "mmap", "munmap", "touch",
	"edu_import", "edu_dma", "edu_unimport", "edu_state", "edu_oneshot",
	"pin_burst", "export_burst", "tiny_allocs", "alloc_race",
};
/* relative weights; the edu DMAs are slow (each transfer ~100 ms in QEMU) */
static const unsigned int op_weight[NOPS] = {
	4, 4, 2, 1, 3, 3, 10, 6, 8, 5, 2, 4, 8, 5, 12, 3, 0, 2, 2, 0,
	2, 2, 1, 1,
};

#define NERR 134
static atomic_ulong errcount[NOPS][NERR];	/* [op][0] = successes */
static atomic_ulong sigbus_count, ops_done, dma_done, mismatch_bytes;
static atomic_ulong bad_errno, bad_child, bad_offset;
static pthread_mutex_t report_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned int reports;

static void report(const char *fmt, ...)
{
	va_list ap;

	pthread_mutex_lock(&report_lock);
	if (reports++ < 20) {
		va_start(ap, fmt);
		printf("# ");
		vprintf(fmt, ap);
		printf("\n");
		fflush(stdout);
		va_end(ap);
	}
	pthread_mutex_unlock(&report_lock);
}

/* errno sets: 0-terminated, static (they outlive the switch that picks them) */
#define SET(...) ({ static const int __set[] = { __VA_ARGS__, 0 }; __set; })

static int in_set(int e, const int *set)
{
	for (; *set; set++)
		if (*set == e)
			return 1;
	return 0;
}

/*
 * Count the result of @op (0 or -errno); an errno outside @allowed (and
 * outside what the slot explains: ENOTTY for a gdrpeer ioctl on a dma-buf,
 * EPERM/EACCES/EBADF for a write through a read-only open) is a failure.
 */
static void account(enum op op, int ret, const int *allowed,
		    const struct file_slot *f, const char *what)
{
	int e = -ret;

	if (e < 0 || e >= NERR)
		e = NERR - 1;
	atomic_fetch_add(&errcount[op][ret ? e : 0], 1);
	if (!ret || in_set(e, allowed))
		return;
	if (f && f->kind == K_DMABUF && e == ENOTTY && op >= OP_INFO &&
	    op <= OP_BAD_IOCTL)
		return;
	if (f && f->rdonly && (e == EPERM || e == EACCES || e == EBADF))
		return;
	atomic_fetch_add(&bad_errno, 1);
	report("%s: unexpected errno %d (%s) [%s]", op_name[op], -ret,
	       strerror(-ret), what);
}

/* ---- files ----------------------------------------------------------------- */

/*
 * A random file slot locked for reading: any slot (NULL when it is empty)
 * or, with @want_kind, the first slot of that kind from a random start.
 */
static struct file_slot *grab_file(uint64_t *s, int want_kind)
{
	unsigned int i, start = below(s, NFILES);

	for (i = 0; i < (want_kind ? NFILES : 1); i++) {
		struct file_slot *f = &files[(start + i) % NFILES];

		pthread_rwlock_rdlock(&f->lock);
		if (f->kind != K_EMPTY && (!want_kind || f->kind == want_kind))
			return f;
		pthread_rwlock_unlock(&f->lock);
	}
	return NULL;
}

/* the handle table entries of @fd are no longer usable (closed) */
static void forget_handles(int fd)
{
	unsigned int i;

	pthread_mutex_lock(&table_lock);
	for (i = 0; i < NHANDLES; i++)
		if (handles[i].fd == fd)
			handles[i].valid = 0;
	pthread_mutex_unlock(&table_lock);
}

/* put a new fd in an empty slot, or close it when none is free */
static void keep_fd(uint64_t *s, int fd, enum kind kind, int rdonly,
		    uint64_t size)
{
	unsigned int i, start = below(s, NFILES);

	for (i = 0; i < NFILES; i++) {
		struct file_slot *f = &files[(start + i) % NFILES];

		if (pthread_rwlock_trywrlock(&f->lock))
			continue;
		if (f->kind == K_EMPTY) {
			f->fd = fd;
			f->kind = kind;
			f->rdonly = rdonly;
			f->size = size;
			pthread_rwlock_unlock(&f->lock);
			return;
		}
		pthread_rwlock_unlock(&f->lock);
	}
	close(fd);
}

static void op_open(uint64_t *s)
{
	int rdonly = one_in(s, 8);
	int fd = open(GDRPEER_DEVICE_PATH, (rdonly ? O_RDONLY : O_RDWR) | O_CLOEXEC);

	account(OP_OPEN, fd < 0 ? -errno : 0,
		rdonly ? SET(EACCES, EPERM) : SET(ENOMEM), NULL, "open");
	if (fd >= 0)
		keep_fd(s, fd, K_GDRPEER, rdonly, 0);
}

static void op_close(uint64_t *s)
{
	struct file_slot *f = &files[below(s, NFILES)];

	pthread_rwlock_wrlock(&f->lock);
	if (f->kind != K_EMPTY) {
		if (f->kind == K_GDRPEER)
			forget_handles(f->fd);
		account(OP_CLOSE, close(f->fd) ? -errno : 0, SET(EIO), NULL, "close");
		f->kind = K_EMPTY;
		f->fd = -1;
	}
	pthread_rwlock_unlock(&f->lock);
}

static void op_dup(uint64_t *s)
{
	struct file_slot *f = grab_file(s, 0);
	enum kind kind;
	int fd, rdonly;
	uint64_t size;

	if (!f)
		return;
	fd = dup(f->fd);
	kind = f->kind;
	rdonly = f->rdonly;
	size = f->size;
	pthread_rwlock_unlock(&f->lock);
	account(OP_DUP, fd < 0 ? -errno : 0, SET(EMFILE), NULL, "dup");
	if (fd >= 0)
		keep_fd(s, fd, kind, rdonly, size);
}

/* ---- handles ----------------------------------------------------------------- */

static void add_handle(const struct gdrpeer_alloc *a, uint64_t size, int fd)
{
	unsigned int i;

	pthread_mutex_lock(&table_lock);
	for (i = 0; i < NHANDLES; i++)
		if (!handles[i].valid) {
			handles[i] = (struct handle_slot){ a->handle, size,
							   a->mmap_offset, fd, 1 };
			break;
		}
	pthread_mutex_unlock(&table_lock);
}

/*
 * A handle for a call on @fd: mostly one allocated on that fd (maybe freed
 * since), else any file's (-ENOENT: handles belong to their file) or a
 * made-up one.
 */
static struct handle_slot pick_handle(uint64_t *s, int fd)
{
	struct handle_slot h = { 0 };
	unsigned int i, start;

	if (one_in(s, 8)) {
		static const uint64_t odd[] = { 0, 1, 2, ~0ull, 1ull << 63, 0x1000 };

		h.handle = one_in(s, 2) ? odd[below(s, 6)] : rnd(s);
		h.size = page * (1 + below(s, 16));
		h.mmap_offset = rnd(s) & ~(page - 1);
		return h;
	}
	pthread_mutex_lock(&table_lock);
	h = handles[below(s, NHANDLES)];
	if (!one_in(s, 4)) {
		start = below(s, NHANDLES);
		for (i = 0; i < NHANDLES; i++) {
			struct handle_slot *c = &handles[(start + i) % NHANDLES];

			if (c->valid && c->fd == fd) {
				h = *c;
				/* forget it now and then: it may have been freed */
				if (one_in(s, 8))
					c->valid = 0;
				break;
			}
		}
	}
	pthread_mutex_unlock(&table_lock);
	return h;
}

static void forget_handle(uint64_t handle, int fd)
{
	unsigned int i;

	pthread_mutex_lock(&table_lock);
	for (i = 0; i < NHANDLES; i++)
		if (handles[i].handle == handle && handles[i].fd == fd)
			handles[i].valid = 0;
	pthread_mutex_unlock(&table_lock);
}

static uint64_t fuzz_size(uint64_t *s, uint64_t bar)
{
	switch (below(s, 10)) {
	case 0: return 0;
	case 1: return page - 1;
	case 2: return bar;
	case 3: return bar + page;
	case 4: return ~0ull & ~(page - 1);
	case 5: return page * (1 + below(s, 4096));
	default: return page * (1 + below(s, 64));
	}
}

static uint32_t fuzz_device(uint64_t *s)
{
	static const uint32_t odd[] = { 1, 2, 15, 16, ~0u };

	return one_in(s, 6) ? odd[below(s, 5)] : 0;
}

static void junk_reserved(uint64_t *s, __u64 *res, unsigned int n)
{
	if (one_in(s, 16))
		res[below(s, n)] = rnd(s) | 1;
}

static void *arg_ptr(uint64_t *s, void *arg)
{
	return one_in(s, 32) ? fault_ptr : arg;
}

/* an ALLOC's bar_offset must lie in the BAR: anything else was not read from a live region */
static void check_bar_offset(uint64_t off, uint64_t size, uint64_t bar)
{
	if (off % page || off > bar || size > bar - off) {
		atomic_fetch_add(&bad_offset, 1);
		report("alloc: impossible bar_offset %#llx for %llu bytes%s",
		       (unsigned long long)off, (unsigned long long)size,
		       off == 0x6b6b6b6b6b6b6b6bull ? " (SLUB free poison: a freed region)" : "");
	}
}

static void op_ioctl(uint64_t *s, enum op op, uint64_t bar)
{
	struct file_slot *f = grab_file(s, 0);
	union {
		struct gdrpeer_info info;
		struct gdrpeer_list_devices ld;
		struct gdrpeer_alloc alloc;
		struct gdrpeer_free fr;
		struct gdrpeer_export ex;
		struct gdrpeer_query q;
		struct gdrpeer_export_va va;
		uint8_t raw[512];
	} u;
	struct gdrpeer_device_info devs[16];
	struct handle_slot h;
	unsigned long cmd = 0;
	const int *allowed = SET(EFAULT);
	char what[96];
	int ret;

	if (!f)
		return;
	memset(&u, 0, sizeof(u));
	switch (op) {
	case OP_INFO:
		cmd = GDRPEER_IOCTL_INFO;
		u.info.abi_version = one_in(s, 8) ? (uint32_t)rnd(s) : GDRPEER_ABI_VERSION;
		if (one_in(s, 16))
			u.info.pad0 = 1;
		junk_reserved(s, u.info.reserved, 4);
		allowed = SET(EPROTO, EINVAL, EFAULT);
		break;
	case OP_LIST:
		cmd = GDRPEER_IOCTL_LIST_DEVICES;
		u.ld.count = below(s, 17);
		u.ld.devices_ptr = one_in(s, 4) ? 0 :
			one_in(s, 8) ? (uintptr_t)fault_ptr : (uintptr_t)devs;
		u.ld.entry_size = one_in(s, 8) ? (uint32_t)below(s, 256) : sizeof(devs[0]);
		junk_reserved(s, u.ld.reserved, 2);
		allowed = SET(EINVAL, EFAULT);
		break;
	case OP_ALLOC:
		cmd = GDRPEER_IOCTL_ALLOC;
		u.alloc.device = fuzz_device(s);
		u.alloc.size = fuzz_size(s, bar);
		u.alloc.flags = one_in(s, 16) ? (uint32_t)rnd(s) : 0;
		junk_reserved(s, u.alloc.reserved, 3);
		/* ENOSPC/EDQUOT: per-user limits (a cap on handles or bytes) */
		allowed = SET(ENODEV, EINVAL, E2BIG, ENOMEM, EFAULT, ENOSPC, EDQUOT);
		break;
	case OP_FREE:
		cmd = GDRPEER_IOCTL_FREE;
		u.fr.handle = pick_handle(s, f->fd).handle;
		junk_reserved(s, u.fr.reserved, 3);
		allowed = SET(ENOENT, EINVAL, EFAULT, ENODEV);
		break;
	case OP_EXPORT:
		cmd = GDRPEER_IOCTL_EXPORT;
		h = pick_handle(s, f->fd);
		u.ex.handle = h.handle;
		u.ex.offset = one_in(s, 8) ? rnd(s) : page * below(s, h.size / page + 1);
		u.ex.length = one_in(s, 8) ? fuzz_size(s, bar) :
			h.size > u.ex.offset ? page * (1 + below(s, (h.size - u.ex.offset) / page)) : page;
		u.ex.flags = one_in(s, 16) ? (uint32_t)rnd(s) : 0;
		junk_reserved(s, u.ex.reserved, 2);
		allowed = SET(ENOENT, EINVAL, EOVERFLOW, ENODEV, ENOMEM, EFAULT, EMFILE);
		break;
	case OP_QUERY:
		cmd = GDRPEER_IOCTL_QUERY;
		u.q.handle = pick_handle(s, f->fd).handle;
		junk_reserved(s, u.q.reserved, 3);
		allowed = SET(ENOENT, EINVAL, EFAULT, ENODEV);
		break;
	case OP_EXPORT_VA:
		cmd = GDRPEER_IOCTL_EXPORT_VA;
		u.va.va = one_in(s, 2) ? rnd(s) : (rnd(s) & ~0xffffull);
		u.va.length = one_in(s, 2) ? rnd(s) : 0x10000 * below(s, 4);
		u.va.flags = (uint32_t)below(s, 8);
		junk_reserved(s, u.va.reserved, 3);
		allowed = SET(ENODEV, EINVAL, EOVERFLOW, EOPNOTSUPP, EFAULT, EPROTO, ENOMEM);
		break;
	default: /* OP_BAD_IOCTL: wrong size or direction, unknown number */
		switch (below(s, 3)) {
		case 0:
			cmd = _IOC(_IOC_READ | _IOC_WRITE, GDRPEER_IOCTL_MAGIC,
				   below(s, 7), 8 * below(s, 40));
			break;
		case 1:
			cmd = _IOC(_IOC_NONE, GDRPEER_IOCTL_MAGIC, below(s, 7), 0);
			break;
		default:
			cmd = _IOC(_IOC_READ | _IOC_WRITE, GDRPEER_IOCTL_MAGIC,
				   7 + below(s, 249), 8 * below(s, 40));
		}
		/* a size that happens to be right reaches the real ioctl */
		allowed = SET(EINVAL, ENOTTY, EFAULT, EPROTO, ENOENT, ENODEV, E2BIG,
			      EOVERFLOW, ENOMEM);
		break;
	}
	ret = gp_ioctl(f->fd, cmd, arg_ptr(s, &u));
	snprintf(what, sizeof(what), "fd kind %d%s cmd %#lx", f->kind,
		 f->rdonly ? " rdonly" : "", cmd);
	account(op, ret, allowed, f, what);
	if (!ret && cmd == GDRPEER_IOCTL_FREE)
		forget_handle(u.fr.handle, f->fd);
	if (!ret && op == OP_ALLOC && cmd == GDRPEER_IOCTL_ALLOC) {
		check_bar_offset(u.alloc.bar_offset, u.alloc.size, bar);
		add_handle(&u.alloc, u.alloc.size, f->fd);
	}
	if (!ret && cmd == GDRPEER_IOCTL_EXPORT) {
		int fd = u.ex.fd;
		uint64_t len = u.ex.length;

		pthread_rwlock_unlock(&f->lock);
		keep_fd(s, fd, K_DMABUF, 0, len);
		return;
	}
	if (!ret && cmd == GDRPEER_IOCTL_EXPORT_VA && u.va.fd >= 0)
		close(u.va.fd);
	pthread_rwlock_unlock(&f->lock);
}

/* ---- mappings ---------------------------------------------------------------- */

static void op_mmap(uint64_t *s)
{
	struct file_slot *f = grab_file(s, 0);
	uint64_t off, len, avail;
	struct handle_slot h = { 0 };
	int flags = one_in(s, 16) ? MAP_PRIVATE : MAP_SHARED;
	int prot = one_in(s, 8) ? PROT_READ : PROT_READ | PROT_WRITE;
	unsigned int i, start;
	uint8_t *p;
	int ret, fd;

	if (!f)
		return;
	if (f->kind == K_GDRPEER) {
		h = pick_handle(s, f->fd);
		avail = h.size;
	} else {
		avail = f->size;
	}
	off = page * below(s, avail / page + 1);
	len = page * (1 + below(s, avail > off ? (avail - off) / page : 1));
	if (one_in(s, 8))
		len += page * below(s, 4);	/* beyond the end */
	if (one_in(s, 16))
		off = rnd(s) & ~(page - 1);
	p = mmap(NULL, len, prot, flags, f->fd, (off_t)(h.mmap_offset + off));
	ret = p == MAP_FAILED ? -errno : 0;
	account(OP_MMAP, ret, SET(ENOENT, EINVAL, ENODEV, ENOMEM, EOVERFLOW, EACCES),
		f, f->kind == K_GDRPEER ? "handle" : "dma-buf");
	fd = f->fd;
	pthread_rwlock_unlock(&f->lock);
	if (ret)
		return;
	start = below(s, NMAPS);
	for (i = 0; i < NMAPS; i++) {
		struct map_slot *m = &maps[(start + i) % NMAPS];

		if (pthread_rwlock_trywrlock(&m->lock))
			continue;
		if (!m->addr) {
			m->addr = p;
			/* bit 0 (lengths are page multiples): mapped read-only */
			m->len = len | !(prot & PROT_WRITE);
			m->fd = f->kind == K_GDRPEER ? fd : -1;
			m->handle = f->kind == K_GDRPEER ? h.handle : 0;
			pthread_rwlock_unlock(&m->lock);
			return;
		}
		pthread_rwlock_unlock(&m->lock);
	}
	munmap(p, len);
}

static void op_munmap(uint64_t *s)
{
	struct map_slot *m = &maps[below(s, NMAPS)];

	pthread_rwlock_wrlock(&m->lock);
	if (m->addr) {
		account(OP_MUNMAP, munmap(m->addr, m->len & ~1ull) ? -errno : 0,
			SET(EINVAL), NULL, "munmap");
		m->addr = NULL;
	}
	pthread_rwlock_unlock(&m->lock);
}

static __thread sigjmp_buf touch_env;
static __thread volatile int touching;

static void on_sigbus(int sig, siginfo_t *si, void *ctx)
{
	if (!touching) {
		/* SIGBUS outside a touch of our mappings: a real failure */
		static const char msg[] = "# SIGBUS outside a mapping touch\n";

		write(1, msg, sizeof(msg) - 1);
		_exit(3);
	}
	siglongjmp(touch_env, 1);
}

static void op_touch(uint64_t *s)
{
	struct map_slot *m = &maps[below(s, NMAPS)];
	volatile uint64_t *w;
	volatile int write_it = one_in(s, 2);

	pthread_rwlock_rdlock(&m->lock);
	if (!m->addr) {
		pthread_rwlock_unlock(&m->lock);
		return;
	}
	if (m->len & 1)		/* mapped read-only */
		write_it = 0;
	w = (volatile uint64_t *)(m->addr + (below(s, (m->len & ~1ull) / 8) * 8));
	if (sigsetjmp(touch_env, 1) == 0) {
		touching = 1;
		if (write_it)
			*w = rnd(s);
		else
			(void)*w;
		touching = 0;
		atomic_fetch_add(&errcount[OP_TOUCH][0], 1);
	} else {
		touching = 0;
		atomic_fetch_add(&sigbus_count, 1);
		atomic_fetch_add(&errcount[OP_TOUCH][EFAULT], 1);
	}
	pthread_rwlock_unlock(&m->lock);
}

/* ---- fork ------------------------------------------------------------------------ */

/* The child uses the inherited files with raw system calls only (no locks,
 * no stdio: other threads may hold them at fork time) and exits. */
static void op_fork(uint64_t *s)
{
	uint64_t cs = rnd(s);
	pid_t pid;
	int status;

	pid = fork();
	if (pid < 0) {
		account(OP_FORK, -errno, SET(EAGAIN, ENOMEM), NULL, "fork");
		return;
	}
	if (pid == 0) {
		unsigned int i;

		for (i = 0; i < 8; i++) {
			int fd = files[below(&cs, NFILES)].fd;
			struct handle_slot h = handles[below(&cs, NHANDLES)];
			struct gdrpeer_export ex = { .handle = h.handle,
						     .length = page };
			struct gdrpeer_free fr = { .handle = h.handle };
			struct gdrpeer_query q = { .handle = h.handle };

			if (fd < 0)
				continue;
			switch (below(&cs, 3)) {
			case 0:
				if (!ioctl(fd, GDRPEER_IOCTL_EXPORT, &ex))
					close(ex.fd);
				break;
			case 1:
				ioctl(fd, GDRPEER_IOCTL_FREE, &fr);
				break;
			default:
				ioctl(fd, GDRPEER_IOCTL_QUERY, &q);
			}
		}
		_exit(0);
	}
	if (waitpid(pid, &status, 0) != pid) {
		account(OP_FORK, -errno, SET(0), NULL, "waitpid");
		return;
	}
	if (!WIFEXITED(status) || WEXITSTATUS(status)) {
		atomic_fetch_add(&bad_child, 1);
		report("fork: child %s %d", WIFSIGNALED(status) ? "killed by signal" :
		       "exited with", WIFSIGNALED(status) ? WTERMSIG(status) :
		       WEXITSTATUS(status));
		return;
	}
	atomic_fetch_add(&errcount[OP_FORK][0], 1);
}

/* ---- the edu stand-in HCA ---------------------------------------------------------- */

/* Slots holding an import; table_lock held, or the workers done. */
static unsigned int imports_in_slots(void)
{
	unsigned int i, n = 0;

	for (i = 0; i < NIMPORTS; i++)
		n += imports[i] != 0;
	return n;
}

/* Room for one more edu mapping within MAX_EDU_MAPPINGS: reserve it (true) or not (false). */
static bool edu_mapping_reserve(void)
{
	bool ok;

	pthread_mutex_lock(&table_lock);
	ok = imports_in_slots() + edu_pending + edu_holders < MAX_EDU_MAPPINGS;
	edu_pending += ok;
	pthread_mutex_unlock(&table_lock);
	return ok;
}

static void edu_mapping_unreserve(void)
{
	pthread_mutex_lock(&table_lock);
	edu_pending--;
	pthread_mutex_unlock(&table_lock);
}

static void edu_holder_done(void)
{
	pthread_mutex_lock(&table_lock);
	edu_holders--;
	pthread_mutex_unlock(&table_lock);
}

static void op_edu(uint64_t *s, enum op op)
{
	struct file_slot *f;
	unsigned int slot = below(s, NIMPORTS);
	bool random_id;
	uint32_t id;
	uint64_t size;
	int ret;

	if (edu_fd < 0)
		return;
	pthread_mutex_lock(&table_lock);
	if (op == OP_EDU_DMA) { /* a DMA wants a live import: the first from slot on */
		unsigned int i;

		for (i = 0; i < NIMPORTS && !imports[slot]; i++)
			slot = (slot + 1) % NIMPORTS;
	}
	id = imports[slot];
	size = import_size[slot];
	edu_holders += op == OP_EDU_DMA || op == OP_EDU_STATE;
	pthread_mutex_unlock(&table_lock);
	random_id = one_in(s, 16);
	if (random_id)
		id = (uint32_t)rnd(s);

	switch (op) {
	case OP_EDU_IMPORT: {
		struct edu_hca_import im = { .dmabuf_fd = -1 };

		if (!edu_mapping_reserve())
			return;
		/* now and then a /dev/gdrpeer fd: not a dma-buf */
		f = grab_file(s, one_in(s, 8) ? 0 : K_DMABUF);
		if (!f) {
			edu_mapping_unreserve();
			return;
		}
		im.dmabuf_fd = f->fd;
		ret = gp_ioctl(edu_fd, EDU_HCA_IOCTL_IMPORT, &im);
		account(op, ret, SET(EINVAL, EBADF, ENODEV, EOPNOTSUPP, ENOMEM, EBUSY,
				     EPERM), NULL, f->kind == K_DMABUF ? "dma-buf" : "gdrpeer fd");
		pthread_rwlock_unlock(&f->lock);
		if (ret) {
			edu_mapping_unreserve();
		} else {
			/* the reservation becomes the slot, with no gap between */
			pthread_mutex_lock(&table_lock);
			edu_pending--;
			if (imports[slot]) { /* slot taken: drop the older one */
				struct edu_hca_unimport un = { .id = imports[slot] };

				gp_ioctl(edu_fd, EDU_HCA_IOCTL_UNIMPORT, &un);
			}
			imports[slot] = im.id;
			import_size[slot] = im.size;
			pthread_mutex_unlock(&table_lock);
		}
		return;
	}
	case OP_EDU_DMA: {
		struct edu_hca_import_dma d = { .id = id, .seed = rnd(s) };

		d.length = 8 * (1 + below(s, 64));
		d.offset = size > d.length ? 8 * below(s, (size - d.length) / 8) : 0;
		ret = gp_ioctl(edu_fd, EDU_HCA_IOCTL_IMPORT_DMA, &d);
		edu_holder_done();
		account(op, ret, SET(ENOENT, ENODEV, EINVAL), NULL, "import dma");
		if (!ret)
			atomic_fetch_add(&dma_done, 1);
		if (d.mismatches) {
			atomic_fetch_add(&mismatch_bytes, d.mismatches);
			report("edu_dma: %llu bytes read back wrong",
			       (unsigned long long)d.mismatches);
		}
		return;
	}
	case OP_EDU_UNIMPORT: {
		struct edu_hca_unimport un = { .id = id };
		unsigned int i;

		/*
		 * Under table_lock, with the slot read again, so that the slots name exactly the
		 * imports edu holds: edu reuses a dropped import's id, and an id read earlier could
		 * clear the slot of a newer import with that id that it never dropped (which then
		 * lived, and stayed mapped, until the end of the run).
		 */
		pthread_mutex_lock(&table_lock);
		if (!random_id)
			un.id = imports[slot];
		ret = gp_ioctl(edu_fd, EDU_HCA_IOCTL_UNIMPORT, &un);
		for (i = 0; i < NIMPORTS && !ret; i++)
			if (imports[i] == un.id)
				imports[i] = 0;
		pthread_mutex_unlock(&table_lock);
		account(op, ret, SET(ENOENT), NULL, "unimport");
		return;
	}
	case OP_EDU_STATE: {
		struct edu_hca_import_state st = { .id = id };

		ret = gp_ioctl(edu_fd, EDU_HCA_IOCTL_IMPORT_STATE, &st);
		edu_holder_done();
		account(op, ret, SET(ENOENT), NULL, "state");
		return;
	}
	default: { /* OP_EDU_ONESHOT: attach, map, DMA, unmap, detach */
		struct edu_hca_dma d = { .seed = rnd(s) };

		if (!edu_mapping_reserve())
			return;
		f = grab_file(s, K_DMABUF);
		if (!f) {
			edu_mapping_unreserve();
			return;
		}
		d.dmabuf_fd = f->fd;
		d.length = 8 * (1 + below(s, 64));
		d.offset = f->size > d.length ? 8 * below(s, (f->size - d.length) / 8) : 0;
		ret = gp_ioctl(edu_fd, EDU_HCA_IOCTL_DMA, &d);
		account(op, ret, SET(EINVAL, ENODEV, EOPNOTSUPP, ENOMEM, EBUSY, EPERM),
			NULL, "one-shot dma");
		pthread_rwlock_unlock(&f->lock);
		edu_mapping_unreserve();
		if (!ret)
			atomic_fetch_add(&dma_done, 1);
		if (d.mismatches) {
			atomic_fetch_add(&mismatch_bytes, d.mismatches);
			report("edu_oneshot: %llu bytes read back wrong",
			       (unsigned long long)d.mismatches);
		}
	}
	}
}

/* ---- driver review 3: failing bursts, revocation at scale, ALLOC/FREE races ---------- */

/* the longest EXPORT_VA accepts: 2^32 - 1 GPU pages of 64 KiB */
#define PIN_BURST_LEN (0xffffffffull << 16)
/* set when the controller runs: a worker that asked for an unbind waits for it */
static atomic_int churn_on;

/* Read one byte of @p under the SIGBUS guard: 0, or -1 when it faulted. */
static int touch_byte(const volatile uint8_t *p)
{
	if (sigsetjmp(touch_env, 1) == 0) {
		touching = 1;
		(void)*p;
		touching = 0;
		return 0;
	}
	touching = 0;
	return -1;
}

/*
 * Requests that fail after reaching the pin: EXPORT_VA of the longest range at an address that
 * is no CUDA memory of ours (the nvidia provider refuses it: EINVAL), or, where that provider is
 * absent (ENODEV), an ALLOC of the whole BAR, which finds no room while anything is allocated
 * (ENOMEM).  The driver of review 3 used up an mmap window with each of them.
 */
static void op_pin_burst(uint64_t *s, uint64_t bar)
{
	struct file_slot *f = grab_file(s, K_GDRPEER);
	unsigned int i, n = 256 + below(s, 256);
	struct gdrpeer_alloc a;
	int ret;

	if (!f)
		return;
	if (f->rdonly)
		n = 1;		/* EBADF at once: one call says it */
	for (i = 0; i < n; i++) {
		ret = gp_export_va(f->fd, rnd(s) & 0x0000ffffffff0000ull, PIN_BURST_LEN, 0, NULL);
		if (ret >= 0) {
			close(ret);
			ret = 0;
		}
		account(OP_PIN_BURST, ret, SET(EINVAL, ENODEV, EOPNOTSUPP, ENOMEM), f,
			"export_va burst");
		if (ret != -ENODEV)
			continue;
		ret = gp_alloc(f->fd, 0, bar, &a);
		account(OP_PIN_BURST, ret, SET(ENOMEM, ENODEV, E2BIG), f, "full-BAR alloc");
		if (!ret) {
			check_bar_offset(a.bar_offset, bar, bar);
			gp_free(f->fd, a.handle);
		}
	}
	pthread_rwlock_unlock(&f->lock);
}

/*
 * EXPORT of one handle again and again with an unbind asked for at once: exports that land
 * while revocation walks the region's dma-bufs.  Each dma-buf is then mapped and read (a
 * revoked one faults or refuses the mmap) and closed.
 */
static void op_export_burst(uint64_t *s)
{
	struct file_slot *f = grab_file(s, K_GDRPEER);
	unsigned int i, n = 0;
	struct handle_slot h;
	int fds[16], ret;
	uint8_t *p;

	if (!f)
		return;
	h = pick_handle(s, f->fd);
	if (one_in(s, 4))
		atomic_store(&unbind_now, 1);
	for (i = 0; i < 16; i++) {
		ret = gp_export(f->fd, h.handle, 0, page);
		account(OP_EXPORT_BURST, ret < 0 ? ret : 0,
			SET(ENOENT, EINVAL, ENODEV, ENOMEM, EMFILE), f, "export burst");
		if (ret >= 0)
			fds[n++] = ret;
	}
	pthread_rwlock_unlock(&f->lock);
	for (i = 0; i < n; i++) {
		p = mmap(NULL, page, PROT_READ, MAP_SHARED, fds[i], 0);
		account(OP_EXPORT_BURST, p == MAP_FAILED ? -errno : 0, SET(ENODEV, ENOMEM),
			NULL, "mmap of a burst's dma-buf");
		if (p != MAP_FAILED) {
			if (touch_byte(p))
				atomic_fetch_add(&sigbus_count, 1);
			munmap(p, page);
		}
		close(fds[i]);
	}
}

/* After asking for an unbind: until the controller took the request (at most 2 s) */
static void wait_unbind_taken(void)
{
	struct timespec ts = { 0, 10 * 1000000L };
	unsigned int i;

	for (i = 0; i < 200 && atomic_load(&churn_on) && atomic_load(&unbind_now); i++)
		nanosleep(&ts, NULL);
	nanosleep(&ts, NULL);
}

/*
 * Many one-page allocations on a file of their own, then an unbind asked for: revocation of
 * more live regions than fit a page of pointers (the old revocation WARNed above 1,024 and
 * oopsed above 524,288).  Closing the file frees them, maybe while they are being revoked.
 * Rare (about 1,300 ALLOCs each).
 */
static void op_tiny_allocs(uint64_t *s, uint64_t bar)
{
	unsigned int i, n = 1025 + below(s, 512);
	struct gdrpeer_alloc a;
	int fd, ret = 0;

	if (!one_in(s, 8))
		return;
	fd = open(GDRPEER_DEVICE_PATH, O_RDWR | O_CLOEXEC);
	account(OP_TINY_ALLOCS, fd < 0 ? -errno : 0, SET(ENOMEM, EMFILE), NULL, "open");
	if (fd < 0)
		return;
	for (i = 0; i < n && !ret; i++) {
		ret = gp_alloc(fd, 0, page, &a);
		if (!ret)
			check_bar_offset(a.bar_offset, page, bar);
	}
	account(OP_TINY_ALLOCS, ret, SET(ENOMEM, ENODEV, ENOSPC), NULL, "one-page allocs");
	atomic_store(&unbind_now, 1);
	wait_unbind_taken();
	close(fd);
}

struct alloc_race {
	int fd;
	_Atomic uint64_t last;	/* the handle of the latest ALLOC */
	atomic_int stop;
};

/* FREE of the handle the next ALLOC returns (ids are cyclic: the latest + 1) */
static void *alloc_race_freer(void *arg)
{
	struct alloc_race *r = arg;

	while (!atomic_load(&r->stop))
		gp_free(r->fd, atomic_load(&r->last) + 1);
	return NULL;
}

/*
 * ALLOC on one file while another thread FREEs the handle it is about to return: the driver
 * of review 3 read bar_offset from the region after the FREE could have freed it.
 */
static void op_alloc_race(uint64_t *s, uint64_t bar)
{
	unsigned int i, n = 64 + below(s, 64);
	struct alloc_race r = { 0 };
	struct gdrpeer_alloc a;
	pthread_t t;
	int ret;

	r.fd = open(GDRPEER_DEVICE_PATH, O_RDWR | O_CLOEXEC);
	account(OP_ALLOC_RACE, r.fd < 0 ? -errno : 0, SET(ENOMEM, EMFILE), NULL, "open");
	if (r.fd < 0)
		return;
	ret = gp_alloc(r.fd, 0, page, &a);
	account(OP_ALLOC_RACE, ret, SET(ENOMEM, ENODEV), NULL, "first alloc");
	if (ret || pthread_create(&t, NULL, alloc_race_freer, &r)) {
		close(r.fd);
		return;
	}
	check_bar_offset(a.bar_offset, page, bar);
	atomic_store(&r.last, a.handle);
	gp_free(r.fd, a.handle);
	for (i = 0; i < n; i++) {
		ret = gp_alloc(r.fd, 0, page, &a);
		account(OP_ALLOC_RACE, ret, SET(ENOMEM, ENODEV, ENOSPC), NULL, "alloc racing free");
		if (ret)
			continue;
		check_bar_offset(a.bar_offset, page, bar);
		atomic_store(&r.last, a.handle);
		/* 0, or ENOENT when the other thread freed it first */
		account(OP_ALLOC_RACE, gp_free(r.fd, a.handle), SET(ENOENT), NULL,
			"free racing free");
	}
	atomic_store(&r.stop, 1);
	pthread_join(t, NULL);
	close(r.fd);
}

/* ---- workers ----------------------------------------------------------------------- */

struct worker {
	pthread_t tid;
	uint64_t state;
	uint64_t ops;
	uint64_t bar;
	unsigned int dma_one_in;
};

static enum op pick_op(uint64_t *s, unsigned int dma_one_in)
{
	unsigned int total = 0, i, r;

	if (edu_fd >= 0 && one_in(s, dma_one_in))
		return one_in(s, 2) ? OP_EDU_DMA : OP_EDU_ONESHOT;
	for (i = 0; i < NOPS; i++)
		total += op_weight[i];
	r = below(s, total);
	for (i = 0; i < NOPS; i++) {
		if (r < op_weight[i])
			return i;
		r -= op_weight[i];
	}
	return OP_TOUCH;
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	uint64_t n;

	for (n = 0; n < w->ops; n++) {
		enum op op = pick_op(&w->state, w->dma_one_in);

		switch (op) {
		case OP_OPEN: op_open(&w->state); break;
		case OP_CLOSE: op_close(&w->state); break;
		case OP_DUP: op_dup(&w->state); break;
		case OP_FORK: op_fork(&w->state); break;
		case OP_MMAP: op_mmap(&w->state); break;
		case OP_MUNMAP: op_munmap(&w->state); break;
		case OP_TOUCH: op_touch(&w->state); break;
		case OP_EDU_IMPORT: case OP_EDU_DMA: case OP_EDU_UNIMPORT:
		case OP_EDU_STATE: case OP_EDU_ONESHOT:
			op_edu(&w->state, op);
			break;
		case OP_PIN_BURST: op_pin_burst(&w->state, w->bar); break;
		case OP_EXPORT_BURST: op_export_burst(&w->state); break;
		case OP_TINY_ALLOCS: op_tiny_allocs(&w->state, w->bar); break;
		case OP_ALLOC_RACE: op_alloc_race(&w->state, w->bar); break;
		default:
			op_ioctl(&w->state, op, w->bar);
		}
		atomic_fetch_add(&ops_done, 1);
	}
	return NULL;
}

/* ---- the controller: unbind/bind and remove/rescan of the device ------------------- */

struct churn {
	pthread_t tid;
	uint64_t state;
	const char *bdf;
	int pci_driver;		/* gdrpeer is a pci_driver: remove/rescan allowed */
	unsigned long unbinds, binds, removes, rescans, refused, bad;
};

static int device_present(const char *bdf)
{
	char path[128];

	snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s", bdf);
	return access(path, F_OK) == 0;
}

static int device_bound(const char *bdf)
{
	char path[160];

	snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/driver", bdf);
	if (access(path, F_OK) == 0)
		return 1;
	/* the pcibar provider without a pci_driver: ask the char device */
	{
		struct gdrpeer_list_devices ld = { .entry_size =
				sizeof(struct gdrpeer_device_info) };
		int fd = open(GDRPEER_DEVICE_PATH, O_RDWR | O_CLOEXEC), ret;

		if (fd < 0)
			return 0;
		ret = gp_ioctl(fd, GDRPEER_IOCTL_LIST_DEVICES, &ld);
		close(fd);
		return !ret && ld.total > 0;
	}
}

static void churn_result(struct churn *c, const char *what, int err,
			 const int *allowed)
{
	if (!err)
		return;
	if (in_set(err, allowed)) {
		c->refused++;
		return;
	}
	c->bad++;
	report("churn: %s: unexpected errno %d (%s)", what, err, strerror(err));
}

/* bind the device again, through the PCI driver or the pcibar attribute */
static void churn_bind(struct churn *c)
{
	char path[160];
	int err;

	if (c->pci_driver && one_in(&c->state, 2)) {
		snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/driver_override",
			 c->bdf);
		err = gp_write_file(path, "gdrpeer");
		churn_result(c, "driver_override", err, SET(ENODEV, ENOENT));
		err = gp_write_file(PCI_DRIVER_DIR "/bind", c->bdf);
		churn_result(c, "pci bind", err, SET(EBUSY, ENODEV, EEXIST));
	} else {
		err = gp_write_file(GDRPEER_SYSFS "/pcibar_bind", c->bdf);
		churn_result(c, "pcibar_bind", err, SET(EBUSY, ENODEV, EEXIST));
	}
	c->binds += !err;
}

static void *churn_main(void *arg)
{
	struct churn *c = arg;
	char path[160];
	int err;

	while (!atomic_load(&stop_churn)) {
		/* mostly bound (0.3-1 s), briefly away (10-100 ms): the workers get to use it */
		long bound_ms = 300 + (long)below(&c->state, 700), slept;
		struct timespec tick = { 0, 10 * 1000000L };
		struct timespec ts = { 0, (long)(10 + below(&c->state, 90)) * 1000000L };

		/*
		 * a worker's burst may ask for the unbind now; granted after 200 ms bound, so that
		 * the workers still get to use the device most of the time
		 */
		for (slept = 0; slept < bound_ms; slept += 10) {
			if (slept >= 200 && atomic_exchange(&unbind_now, 0))
				break;
			nanosleep(&tick, NULL);
		}
		if (c->pci_driver && one_in(&c->state, 3)) {
			snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/remove", c->bdf);
			err = gp_write_file(path, "1");
			churn_result(c, "remove", err, SET(ENOENT));
			c->removes += !err;
			nanosleep(&ts, NULL);
			err = gp_write_file("/sys/bus/pci/rescan", "1");
			churn_result(c, "rescan", err, SET(0));
			c->rescans += !err;
			if (!device_present(c->bdf)) {
				c->bad++;
				report("churn: %s did not come back after rescan", c->bdf);
				continue;
			}
		} else if (c->pci_driver && one_in(&c->state, 2)) {
			err = gp_write_file(PCI_DRIVER_DIR "/unbind", c->bdf);
			churn_result(c, "pci unbind", err, SET(ENODEV));
			c->unbinds += !err;
		} else {
			/* the pcibar attribute: EBUSY while in use (before revocation existed) */
			err = gp_write_file(GDRPEER_SYSFS "/pcibar_unbind", c->bdf);
			churn_result(c, "pcibar_unbind", err, SET(EBUSY, ENODEV));
			c->unbinds += !err;
		}
		nanosleep(&ts, NULL);
		if (!device_bound(c->bdf))
			churn_bind(c);
	}
	return NULL;
}

/* ---- the end: everything released, gauges back at 0 -------------------------------- */

static int probe_fd = -1;

/*
 * Mappings rarely survive the run (workers unmap them), so the end makes a few of its own, on
 * a file of its own, after everything the run did to the driver (e.g. failed requests that
 * used up offsets), and touches them: the last unbind must revoke these too.
 */
static unsigned int make_probe_maps(void)
{
	struct gdrpeer_alloc a;
	unsigned int i, made = 0;
	uint8_t *p;

	probe_fd = open(GDRPEER_DEVICE_PATH, O_RDWR | O_CLOEXEC);
	if (probe_fd < 0)
		return 0;
	for (i = 0; i < NMAPS && made < 4; i++) {
		struct map_slot *m = &maps[i];

		if (m->addr)
			continue;
		if (gp_alloc(probe_fd, 0, page, &a))
			break;
		p = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_SHARED, probe_fd,
			 (off_t)a.mmap_offset);
		if (p == MAP_FAILED)
			break;
		p[0] = 1;
		m->addr = p;
		m->len = page;
		m->fd = probe_fd;
		m->handle = a.handle;
		made++;
	}
	return made;
}

/*
 * Once the workers and the controller are done and a last unbind has returned (so every
 * revocation is complete): a handle mapping whose handle answers -ENODEV is of a revoked region
 * and must fault.  Mappings whose file was closed cannot be asked and are not counted.
 * Returns how many still read; *revoked counts those checked.
 */
static int check_revoked_maps(unsigned int *revoked)
{
	struct gdrpeer_query q;
	unsigned int i;
	int stale = 0;

	for (i = 0; i < NMAPS; i++) {
		struct map_slot *m = &maps[i];

		if (!m->addr || !m->handle || gp_query(m->fd, m->handle, &q) != -ENODEV)
			continue;
		(*revoked)++;
		if (!touch_byte(m->addr)) {
			stale++;
			report("handle %#llx is revoked but its mapping at %p still reads",
			       (unsigned long long)m->handle, (void *)m->addr);
		}
	}
	return stale;
}

static void release_everything(void)
{
	unsigned int i;

	for (i = 0; i < NMAPS; i++)
		if (maps[i].addr) {
			munmap(maps[i].addr, maps[i].len & ~1ull);
			maps[i].addr = NULL;
		}
	for (i = 0; i < NFILES; i++)
		if (files[i].kind != K_EMPTY) {
			close(files[i].fd);
			files[i].kind = K_EMPTY;
		}
	if (edu_fd >= 0) {
		close(edu_fd);
		edu_fd = -1;
	}
	if (probe_fd >= 0) {
		close(probe_fd);
		probe_fd = -1;
	}
}

/* every devices/<n>/ gauge 0 and free_bytes == bar_size; number of bad ones */
static int check_gauges(void)
{
	static const char *const gauges[] = { "allocations", "alloc_bytes", "exports",
					      "attachments", "active_maps" };
	char path[300];
	struct dirent *de;
	int bad = 0, seen = 0;
	unsigned int i;
	DIR *d = opendir(GDRPEER_SYSFS "/devices");

	if (!d) {
		printf("# %s/devices: %s\n", GDRPEER_SYSFS, strerror(errno));
		return 1;
	}
	while ((de = readdir(d))) {
		long long v, size, free;

		if (de->d_name[0] == '.')
			continue;
		seen++;
		for (i = 0; i < sizeof(gauges) / sizeof(gauges[0]); i++) {
			snprintf(path, sizeof(path), GDRPEER_SYSFS "/devices/%s/%s",
				 de->d_name, gauges[i]);
			v = gp_read_num(path);
			printf("# device %s %s=%lld\n", de->d_name, gauges[i], v);
			bad += v != 0;
		}
		snprintf(path, sizeof(path), GDRPEER_SYSFS "/devices/%s/bar_size", de->d_name);
		size = gp_read_num(path);
		snprintf(path, sizeof(path), GDRPEER_SYSFS "/devices/%s/free_bytes", de->d_name);
		free = gp_read_num(path);
		printf("# device %s free_bytes=%lld bar_size=%lld\n", de->d_name, free, size);
		bad += free != size || size <= 0;
	}
	closedir(d);
	printf("# %d device(s) checked\n", seen);
	if (access(EDU_SYSFS "/imports", R_OK) == 0) {
		long long im = gp_read_num(EDU_SYSFS "/imports");
		long long mp = gp_read_num(EDU_SYSFS "/mapped");

		printf("# edu_hca imports=%lld mapped=%lld\n", im, mp);
		bad += im != 0 || mp != 0;
	}
	return bad + (seen == 0);
}

/*
 * Once the workers are done, edu holds exactly the imports in the slots: an import the fuzzer
 * lost track of would stay mapped, uncounted by edu_mapping_reserve(), until the end.  1 when
 * they differ.
 */
static int check_edu_table(void)
{
	unsigned int i, slots = imports_in_slots();
	long long held;

	if (edu_fd < 0 || access(EDU_SYSFS "/imports", R_OK))
		return 0;
	held = gp_read_num(EDU_SYSFS "/imports");
	printf("# edu imports before the close: %lld held by edu, %u in the fuzzer's slots\n",
	       held, slots);
	if (held == slots)
		return 0;
	for (i = 0; i < NIMPORTS; i++)
		printf("# slot %u: id %u\n", i, imports[i]);
	for (i = 0; i < 4096; i++) {
		struct edu_hca_import_state st = { .id = i };

		if (!gp_ioctl(edu_fd, EDU_HCA_IOCTL_IMPORT_STATE, &st))
			printf("# edu holds id %u (revoked %u)\n", i, (unsigned int)st.revoked);
	}
	return 1;
}

/*
 * With CONFIG_DMA_API_DEBUG the kernel lists every live DMA mapping in dma-api/dump, one per
 * line: "<device> <driver> <type> idx ...".  Once everything is closed no mapping that the edu
 * importer made of gdrpeer memory (type "resource") may be left.  Number of leaked ones; 0
 * where the kernel has no such list (said in the output).
 */
static int check_dma_debug(void)
{
	FILE *f = fopen(DMA_DEBUG_DUMP, "r");
	char line[512], dev[128], driver[128], type[32];
	int leaked = 0, entries = 0;

	if (!f) {
		printf("# %s: %s: no check of live DMA mappings (kernel without "
		       "CONFIG_DMA_API_DEBUG)\n", DMA_DEBUG_DUMP, strerror(errno));
		return 0;
	}
	while (fgets(line, sizeof(line), f)) {
		entries++;
		if (sscanf(line, "%127s %127s %31s", dev, driver, type) == 3 &&
		    !strcmp(driver, "gdrpeer_edu_hca") && !strcmp(type, "resource")) {
			if (leaked++ < 8)
				printf("# leaked DMA mapping: %s", line);
		}
	}
	fclose(f);
	printf("# dma-api: %d live DMA mapping(s) in the kernel, %d of gdrpeer memory by edu\n",
	       entries, leaked);
	return leaked;
}

static void print_errnos(void)
{
	unsigned int op, e;

	for (op = 0; op < NOPS; op++) {
		char line[1024];
		int n = snprintf(line, sizeof(line), "# %-12s ok=%lu", op_name[op],
				 atomic_load(&errcount[op][0]));

		for (e = 1; e < NERR && n < (int)sizeof(line) - 40; e++) {
			unsigned long c = atomic_load(&errcount[op][e]);

			if (c)
				n += snprintf(line + n, sizeof(line) - n, " %s=%lu",
					      op == OP_TOUCH && e == EFAULT ? "SIGBUS" :
					      strerrorname_np(e) ? strerrorname_np(e) : "?", c);
		}
		printf("%s\n", line);
	}
}

static void usage(const char *argv0)
{
	fprintf(stderr, "usage: %s [--seed S] [--ops N] [--threads T] [--dma-one-in K] "
		"[--no-churn]\n", argv0);
	exit(2);
}

int main(int argc, char **argv)
{
	uint64_t seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
	uint64_t ops = 1000000, i;
	unsigned int threads = 8, dma_one_in = 2000;
	struct worker w[MAX_THREADS];
	struct churn c = { 0 };
	struct sigaction sa = { 0 };
	const char *bdf = getenv("GDRPEER_GPU_BDF");
	int churn = 1, fd, bad, table_off, a, stale;
	unsigned int revoked = 0;
	struct gp_dev dut;

	for (a = 1; a < argc; a++) {
		if (!strcmp(argv[a], "--seed") && a + 1 < argc)
			seed = strtoull(argv[++a], NULL, 0);
		else if (!strcmp(argv[a], "--ops") && a + 1 < argc)
			ops = strtoull(argv[++a], NULL, 0);
		else if (!strcmp(argv[a], "--threads") && a + 1 < argc)
			threads = strtoul(argv[++a], NULL, 0);
		else if (!strcmp(argv[a], "--dma-one-in") && a + 1 < argc)
			dma_one_in = strtoul(argv[++a], NULL, 0);
		else if (!strcmp(argv[a], "--no-churn"))
			churn = 0;
		else
			usage(argv[0]);
	}
	if (!threads || threads > MAX_THREADS || !dma_one_in)
		usage(argv[0]);

	ksft_print_header();
	ksft_set_plan(5);
	printf("# seed %#llx ops %llu threads %u dma 1 in %u churn %s\n",
	       (unsigned long long)seed, (unsigned long long)ops, threads,
	       dma_one_in, churn ? "on" : "off");
	setvbuf(stdout, NULL, _IOLBF, 0);

	page = (uint64_t)gp_page();
	fd = open(GDRPEER_DEVICE_PATH, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		ksft_exit_skip("%s: %s (is gdrpeer.ko loaded?)\n", GDRPEER_DEVICE_PATH,
			       strerror(errno));
	if (gp_find_device(fd, &dut))
		ksft_exit_skip("no bound gdrpeer device\n");
	close(fd);
	fault_ptr = mmap(NULL, page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (fault_ptr == MAP_FAILED)
		ksft_exit_fail_msg("mmap: %s\n", strerror(errno));
	edu_fd = open(EDU_HCA_DEVICE_PATH, O_RDWR | O_CLOEXEC);
	printf("# device %s, BAR %llu bytes; edu importer %s\n", dut.bdf,
	       (unsigned long long)dut.info.bar_size,
	       edu_fd >= 0 ? "present" : "absent (no dma-buf imports)");

	sa.sa_sigaction = on_sigbus;
	sa.sa_flags = SA_SIGINFO;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGBUS, &sa, NULL);

	for (i = 0; i < NFILES; i++) {
		pthread_rwlock_init(&files[i].lock, NULL);
		files[i].fd = -1;
	}
	for (i = 0; i < NMAPS; i++)
		pthread_rwlock_init(&maps[i].lock, NULL);

	if (churn) {
		c.state = seed ^ 0xc0ffee;
		c.bdf = bdf && *bdf ? bdf : dut.bdf;
		c.pci_driver = access(PCI_DRIVER_DIR, F_OK) == 0;
		if (!c.pci_driver)
			printf("# churn: %s absent: gdrpeer is not the PCI driver of the device, "
			       "so no remove/rescan (it would hit the unrevoked BAR); "
			       "pcibar_unbind/bind only\n", PCI_DRIVER_DIR);
		atomic_store(&churn_on, 1);
		pthread_create(&c.tid, NULL, churn_main, &c);
	}
	for (i = 0; i < threads; i++) {
		w[i].state = seed + 0x1000 * (i + 1);
		w[i].ops = ops / threads + (i < ops % threads);
		w[i].bar = dut.info.bar_size;
		w[i].dma_one_in = dma_one_in;
		pthread_create(&w[i].tid, NULL, worker_main, &w[i]);
	}
	for (i = 0; i < threads; i++)
		pthread_join(w[i].tid, NULL);
	if (churn) {
		atomic_store(&stop_churn, 1);
		pthread_join(c.tid, NULL);
		printf("# churn: %lu unbinds, %lu binds, %lu removes, %lu rescans, "
		       "%lu refused as documented, %lu unexpected\n", c.unbinds, c.binds,
		       c.removes, c.rescans, c.refused, c.bad);
	}

	print_errnos();
	printf("# %lu operations, %lu DMAs checked, %lu SIGBUS on revoked mappings\n",
	       atomic_load(&ops_done), atomic_load(&dma_done), atomic_load(&sigbus_count));
	ksft_test_result(atomic_load(&ops_done) == ops && !atomic_load(&bad_errno) &&
			 !atomic_load(&bad_child) && !atomic_load(&bad_offset),
			 "operations: %llu done, %lu unexpected errnos, %lu bad children, "
			 "%lu impossible bar_offsets\n",
			 (unsigned long long)ops, atomic_load(&bad_errno),
			 atomic_load(&bad_child), atomic_load(&bad_offset));
	ksft_test_result(!atomic_load(&mismatch_bytes),
			 "dma: %lu edu DMAs, %lu bytes read back wrong\n",
			 atomic_load(&dma_done), atomic_load(&mismatch_bytes));
	if (churn)
		ksft_test_result(!c.bad, "churn: bind/unbind%s answered as documented\n",
				 c.pci_driver ? ", remove/rescan" : "");
	else
		ksft_test_result_skip("churn: --no-churn\n");

	/* every mapping still held, and a few new ones, belong to a revoked region after this */
	if (churn) {
		if (!device_present(c.bdf))
			gp_write_file("/sys/bus/pci/rescan", "1");
		if (!device_bound(c.bdf))
			churn_bind(&c);
		printf("# %u probe mappings made for the last unbind\n", make_probe_maps());
		a = gp_write_file(GDRPEER_SYSFS "/pcibar_unbind", c.bdf);
		churn_result(&c, "last pcibar_unbind", a, SET(ENODEV));
	}
	stale = check_revoked_maps(&revoked);
	ksft_test_result(!stale, "revoked handle mappings: %u checked, %d still reach memory\n",
			 revoked, stale);
	table_off = check_edu_table();
	release_everything();
	if (churn && !device_bound(c.bdf)) {
		if (!device_present(c.bdf))
			gp_write_file("/sys/bus/pci/rescan", "1");
		churn_bind(&c);
	}
	bad = table_off + check_gauges() + check_dma_debug();
	ksft_test_result(!bad, "gauges: all 0 and no DMA mapping left once everything is closed "
			 "(%d off)\n", bad);
	ksft_finished();
}

// SPDX-License-Identifier: GPL-2.0
/*
 * kselftest: gdrpeer's OFED peer-memory client (driver/exporter_peermem.c)
 * against the test-only host gdrpeer_peerhost.ko, which registers user
 * addresses the way MLNX_OFED's ib_umem_get does and moves bytes with edu
 * (gdrpeer_edu_hca.ko) through the addresses the client mapped.  Two
 * fixtures, for two ways of loading (choose one with "--only FIXTURE"):
 *   peermem       gdrpeer handle mappings: gdrpeer_edu_hca.ko,
 *                 gdrpeer_peerhost.ko, gdrpeer-ofed.ko (gdrpeer built
 *                 against the host's OFED-style headers), the GPU bound;
 *   peermem_cuda  CUDA addresses: the same without pcibar=, after the
 *                 nvidia_p2p stand-in gdrpeer_nvstub_gpl.ko (bar=GPU),
 *                 gdrpeer-ofed.ko nvidia_module=gdrpeer_nvstub_gpl;
 *   peermem_coexist  as peermem_cuda, with a module named nvidia_peermem
 *                 loaded (selftests/kmod's name-only nvidia_peermem.ko);
 *   peermem_name  as peermem, with any peermem_name=: the client's entry
 *                 in /sys/kernel/mm/memory_peers/<name>/ and its counters.
 *
 * "--proof FILE" (not a kselftest: run it after them, with no allocation
 * after it) registers, DMAs and deregisters like data_through_client and
 * writes "bar_offset seed length" of the bytes edu wrote to FILE, so the
 * host finds them in the BAR file (memory is cleared only when allocated).
 * "--cuda-proof FILE" does the same through a CUDA registration and, on a
 * second allocation, frees it while edu writes through its registration;
 * it leaves a child holding the first allocation (freed pages are
 * poisoned) and must be the last thing run.  See cuda_proof().
 * Each edu transfer takes ~100 ms: the DMA tests move a few KiB only.
 */
#define _GNU_SOURCE

#include <pthread.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "../kmod/gdrpeer_peerhost.h"
#include "gdrpeer_test.h"
#include "gdrpeer_nvstub_test.h"
#include "kselftest_harness.h"

#define PEERMEM_SYSFS GDRPEER_SYSFS "/providers/peermem"
#define HOST_SYSFS "/sys/class/misc/gdrpeer_peerhost"
#define SIZE (64 * 1024)

static int ph_reg(int host, const void *addr, uint64_t len,
		  struct peerhost_reg *r)
{
	memset(r, 0, sizeof(*r));
	r->addr = (uintptr_t)addr;
	r->length = len;
	return gp_ioctl(host, PEERHOST_IOCTL_REG, r);
}

static int ph_dma(int host, uint32_t id, uint64_t off, uint64_t len,
		  uint64_t seed, struct peerhost_dma *d)
{
	memset(d, 0, sizeof(*d));
	d->id = id;
	d->offset = off;
	d->length = len;
	d->seed = seed;
	return gp_ioctl(host, PEERHOST_IOCTL_DMA, d);
}

static int ph_dereg(int host, uint32_t id)
{
	struct peerhost_dereg d;

	memset(&d, 0, sizeof(d));
	d.id = id;
	return gp_ioctl(host, PEERHOST_IOCTL_DEREG, &d);
}

static int ph_state(int host, uint32_t id, struct peerhost_state *s)
{
	memset(s, 0, sizeof(*s));
	s->id = id;
	return gp_ioctl(host, PEERHOST_IOCTL_STATE, s);
}

static long long pm_num(const char *name)
{
	return gp_sysfs_num(PEERMEM_SYSFS, name);
}

static long long host_num(const char *name)
{
	return gp_sysfs_num(HOST_SYSFS, name);
}

/* @r: registered by gdrpeer's client as one entry of @len in @page pages */
static void reg_is_one_entry(struct __test_metadata *_metadata,
			     const struct peerhost_reg *r, uint64_t page,
			     uint64_t len)
{
	EXPECT_EQ(PEERHOST_OWNER_PEER, r->owner);
	EXPECT_STREQ("gdrpeer", r->client);
	EXPECT_EQ(page, r->page_size);
	EXPECT_EQ(1, r->nents);
	EXPECT_EQ(len, r->sg_len[0]);
	EXPECT_EQ(0, r->sg_dma[0] % page);
}

/*
 * The host's DMA of @len bytes of @seed's pattern at @off of one-entry
 * registration @r: all done, none mismatched, at the address it was given.
 */
static void dma_lands(struct __test_metadata *_metadata, int host,
		      const struct peerhost_reg *r, uint64_t off, uint64_t len,
		      uint64_t seed)
{
	struct peerhost_dma d;

	ASSERT_EQ(0, ph_dma(host, r->id, off, len, seed, &d));
	EXPECT_EQ(len, d.done);
	EXPECT_EQ(0, d.mismatches);
	EXPECT_EQ(r->sg_dma[0] + off, d.first_dma);
}

/* In a fixture setup: skip, saying why, unless the peer-memory client is active. */
#define PM_NEED_ACTIVE()						\
	do {								\
		char _status[512];					\
									\
		if (gp_read_line(PEERMEM_SYSFS "/status", _status, sizeof(_status))) \
			SKIP(return, "%s missing: gdrpeer.ko predates the peer-memory client", \
			     PEERMEM_SYSFS "/status");			\
		if (strncmp(_status, "active", 6))			\
			SKIP(return, "peer-memory client not active: %s (load gdrpeer-ofed.ko after gdrpeer_peerhost.ko)", \
			     _status);					\
	} while (0)

/*
 * In the setup of a fixture on the device under test: its descriptor and
 * address in @self (host not open yet), and the client active.
 */
#define PM_SETUP_DUT(self)						\
	do {								\
		struct gp_dev _dut;					\
									\
		(self)->host = -1;					\
		GP_SETUP_DUT(self);					\
		ASSERT_EQ(0, gp_find_device((self)->fd, &_dut));	\
		memcpy((self)->bdf, _dut.bdf, sizeof((self)->bdf));	\
		PM_NEED_ACTIVE();					\
	} while (0)

FIXTURE(peermem)
{
	int fd, host;
	unsigned int dev;
	uint64_t bar_size, page;
	char bdf[32];
};

FIXTURE_SETUP(peermem)
{
	PM_SETUP_DUT(self);
	self->host = open(PEERHOST_DEVICE_PATH, O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, self->host) TH_LOG("%s: %s", PEERHOST_DEVICE_PATH,
					 strerror(errno));
	ASSERT_EQ(0, pm_num("acquired"));
	ASSERT_EQ(0, pm_num("mapped"));
}

FIXTURE_TEARDOWN(peermem)
{
	if (self->host >= 0)
		close(self->host);
	if (self->fd >= 0) {
		close(self->fd);
		/* closing the host's file released what a test left */
		EXPECT_EQ(0, pm_num("acquired"));
		EXPECT_EQ(0, pm_num("mapped"));
		EXPECT_EQ(0, host_num("registrations"));
		EXPECT_EQ(0, gp_sysfs(self->dev, "allocations"));
	}
}

/* An allocation of @size mapped through its handle. */
static uint8_t *alloc_map(struct __test_metadata *_metadata, int fd,
			  unsigned int dev, uint64_t size,
			  struct gdrpeer_alloc *a)
{
	uint8_t *p;
	int err;

	ASSERT_EQ(0, gp_alloc(fd, dev, size, a));
	p = gp_mmap(fd, size, MAP_SHARED, a->mmap_offset, &err);
	ASSERT_NE(NULL, p) TH_LOG("mmap: %s", strerror(err));
	return p;
}

/* The host lists the client with invalidation and INVALIDATE_UNMAPS. */
GP_TEST_F(peermem, client_registered)
{
	char clients[512];

	ASSERT_EQ(0, gp_read_line(HOST_SYSFS "/clients", clients,
				  sizeof(clients)));
	EXPECT_STREQ("gdrpeer inval unmaps", clients);
}

/*
 * acquire -> get_pages -> dma_map -> edu DMA -> dma_unmap -> put_pages
 * -> release: one coalesced page-aligned entry for the BAR range; the bytes
 * edu wrote through it are what the CPU reads through the mapping.
 */
GP_TEST_F(peermem, data_through_client)
{
	const uint64_t off = 8192, len = 4096, seed = 0x1234abcdULL ^ getpid();
	struct gdrpeer_alloc a;
	struct peerhost_reg r;
	struct peerhost_dma d;
	uint8_t want[4096];
	uint8_t *p;

	p = alloc_map(_metadata, self->fd, self->dev, SIZE, &a);
	memset(p, 0x5a, SIZE);
	ASSERT_EQ(0, ph_reg(self->host, p, SIZE, &r));
	/* one physically contiguous BAR range: one entry */
	reg_is_one_entry(_metadata, &r, self->page, SIZE);
	EXPECT_EQ(1, pm_num("acquired"));
	EXPECT_EQ(1, pm_num("mapped"));
	EXPECT_EQ(1, host_num("registrations"));

	dma_lands(_metadata, self->host, &r, off, len, seed);
	gp_pattern(want, seed, len);
	EXPECT_EQ(0, memcmp(want, p + off, len));
	EXPECT_EQ(0x5a, p[off - 1]);
	EXPECT_EQ(0x5a, p[off + len]);

	ASSERT_EQ(0, ph_dereg(self->host, r.id));
	EXPECT_EQ(0, pm_num("acquired"));
	EXPECT_EQ(0, pm_num("mapped"));
	EXPECT_EQ(-ENOENT, ph_dma(self->host, r.id, 0, 8, seed, &d));
	munmap(p, SIZE);
	ASSERT_EQ(0, gp_free(self->fd, a.handle));
}

/*
 * A core that calls out of order (dma_map before get_pages) or pins
 * another range than it acquired gets -EINVAL and nothing is left behind.
 */
GP_TEST_F(peermem, refuses_calls_out_of_order)
{
	struct gdrpeer_alloc a;
	struct peerhost_reg r;
	uint8_t *p;

	p = alloc_map(_metadata, self->fd, self->dev, SIZE, &a);
	memset(&r, 0, sizeof(r));
	r.addr = (uintptr_t)p;
	r.length = SIZE / 2;
	r.flags = PEERHOST_REG_MAP_BEFORE_PIN;
	EXPECT_EQ(-EINVAL, gp_ioctl(self->host, PEERHOST_IOCTL_REG, &r));
	r.flags = PEERHOST_REG_PIN_OTHER_RANGE;
	EXPECT_EQ(-EINVAL, gp_ioctl(self->host, PEERHOST_IOCTL_REG, &r));
	EXPECT_EQ(0, pm_num("acquired"));
	EXPECT_EQ(0, pm_num("mapped"));
	EXPECT_EQ(0, host_num("registrations"));
	/* the same range in order works */
	ASSERT_EQ(0, ph_reg(self->host, p, SIZE / 2, &r));
	ASSERT_EQ(0, ph_dereg(self->host, r.id));
	munmap(p, SIZE);
	ASSERT_EQ(0, gp_free(self->fd, a.handle));
}

/*
 * A range that starts and ends inside pages: the entries cover the pages
 * around it, and byte 0 of the registration is the byte at its address.
 */
GP_TEST_F(peermem, unaligned_range)
{
	const uint64_t start = 100, len = 2 * 4096 + 8, seed = 77;
	struct gdrpeer_alloc a;
	struct peerhost_reg r;
	struct peerhost_dma d;
	uint8_t want[64];
	uint8_t *p;

	p = alloc_map(_metadata, self->fd, self->dev, SIZE, &a);
	ASSERT_EQ(0, ph_reg(self->host, p + self->page + start, len, &r));
	EXPECT_EQ(PEERHOST_OWNER_PEER, r.owner);
	EXPECT_EQ(1, r.nents);
	EXPECT_EQ(3 * self->page, r.sg_len[0]);
	ASSERT_EQ(0, ph_dma(self->host, r.id, 0, sizeof(want), seed, &d));
	EXPECT_EQ(0, d.mismatches);
	gp_pattern(want, seed, sizeof(want));
	EXPECT_EQ(0, memcmp(want, p + self->page + start, sizeof(want)));
	/* the host refuses a DMA past the registered range */
	EXPECT_EQ(-EINVAL, ph_dma(self->host, r.id, len, 8, seed, &d));
	ASSERT_EQ(0, ph_dereg(self->host, r.id));
	munmap(p, SIZE);
	ASSERT_EQ(0, gp_free(self->fd, a.handle));
}

/*
 * Not gdrpeer's: anonymous memory goes to the core's fallback (pinned
 * host pages) without the client taking it; a range that runs past the
 * end of a gdrpeer mapping, or that covers two of them, is refused by the
 * client too, and the fallback cannot pin device memory (-EFAULT).
 */
GP_TEST_F(peermem, refuses_what_it_does_not_own)
{
	struct gdrpeer_alloc a, b;
	struct peerhost_reg r;
	uint8_t *p, *q, *anon, *area;
	int err;

	anon = mmap(NULL, SIZE, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, anon);
	memset(anon, 1, SIZE);
	ASSERT_EQ(0, ph_reg(self->host, anon, SIZE, &r));
	EXPECT_EQ(PEERHOST_OWNER_HOST_PAGES, r.owner);
	EXPECT_EQ(SIZE / self->page, r.nents);
	EXPECT_EQ(0, pm_num("acquired"));
	ASSERT_EQ(0, ph_dereg(self->host, r.id));
	munmap(anon, SIZE);

	/* two allocations mapped side by side in a reserved area */
	area = mmap(NULL, 2 * SIZE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, area);
	ASSERT_EQ(0, gp_alloc(self->fd, self->dev, SIZE, &a));
	ASSERT_EQ(0, gp_alloc(self->fd, self->dev, SIZE, &b));
	p = mmap(area, SIZE, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED,
		 self->fd, (off_t)a.mmap_offset);
	ASSERT_EQ(area, p);
	/* the end of one mapping, nothing after it */
	EXPECT_EQ(-EFAULT, ph_reg(self->host, p + self->page, SIZE, &r));
	q = mmap(area + SIZE, SIZE, PROT_READ | PROT_WRITE,
		 MAP_SHARED | MAP_FIXED, self->fd, (off_t)b.mmap_offset);
	err = errno;
	ASSERT_EQ(area + SIZE, q) TH_LOG("mmap: %s", strerror(err));
	/* across two mappings (of two allocations) */
	EXPECT_EQ(-EFAULT, ph_reg(self->host, p + self->page, SIZE, &r));
	EXPECT_EQ(0, pm_num("acquired"));
	EXPECT_EQ(0, host_num("registrations"));
	munmap(area, 2 * SIZE);
	ASSERT_EQ(0, gp_free(self->fd, a.handle));
	ASSERT_EQ(0, gp_free(self->fd, b.handle));
}

/*
 * The registration holds the memory: freeing the handle and unmapping do
 * not end it (DMA still lands, in memory nobody else got); deregistration
 * gives the allocation back.
 */
GP_TEST_F(peermem, registration_outlives_handle)
{
	struct gdrpeer_alloc a;
	struct peerhost_reg r;
	struct peerhost_dma d;
	uint8_t *p;

	p = alloc_map(_metadata, self->fd, self->dev, SIZE, &a);
	ASSERT_EQ(0, ph_reg(self->host, p, SIZE, &r));
	munmap(p, SIZE);
	ASSERT_EQ(0, gp_free(self->fd, a.handle));
	EXPECT_EQ(1, gp_sysfs(self->dev, "allocations"));
	ASSERT_EQ(0, ph_dma(self->host, r.id, 0, 64, 5, &d));
	EXPECT_EQ(0, d.mismatches);
	ASSERT_EQ(0, ph_dereg(self->host, r.id));
	EXPECT_EQ(0, gp_sysfs(self->dev, "allocations"));
}

/*
 * rmmod is refused while a registration lives (each holds a module
 * reference), even with /dev/gdrpeer closed and nothing mapped: the
 * kernel's "in use" answer, EWOULDBLOCK, at once (never a wait).
 */
GP_TEST_F(peermem, unload_refused_while_registered)
{
	struct gdrpeer_alloc a;
	struct peerhost_reg r;
	uint8_t *p;
	long ret;

	p = alloc_map(_metadata, self->fd, self->dev, SIZE, &a);
	ASSERT_EQ(0, ph_reg(self->host, p, SIZE, &r));
	munmap(p, SIZE);
	ASSERT_EQ(0, gp_free(self->fd, a.handle));
	close(self->fd);
	ret = syscall(SYS_delete_module, "gdrpeer", O_NONBLOCK);
	EXPECT_EQ(-1, ret);
	EXPECT_EQ(EWOULDBLOCK, errno);
	EXPECT_EQ(1, gp_read_num("/sys/module/gdrpeer/refcnt"));
	ASSERT_EQ(0, ph_dereg(self->host, r.id));
	EXPECT_EQ(0, gp_read_num("/sys/module/gdrpeer/refcnt"));
	self->fd = open("/dev/gdrpeer", O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, self->fd);
}

/*
 * A process that exits with live registrations: closing its host file
 * (uverbs does the same at exit) releases them and the memory.  A forked
 * child does not inherit gdrpeer mappings (VM_DONTCOPY): its registration
 * of the parent's address is refused, and the parent's keeps working.
 */
GP_TEST_F(peermem, exit_and_fork_with_live_registrations)
{
	struct gdrpeer_alloc a;
	struct peerhost_reg r;
	struct peerhost_dma d;
	int status;
	pid_t pid;
	uint8_t *p;

	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid) {
		int fd = open("/dev/gdrpeer", O_RDWR | O_CLOEXEC);
		int host = open(PEERHOST_DEVICE_PATH, O_RDWR | O_CLOEXEC);
		struct gdrpeer_alloc ca;
		struct peerhost_reg cr;
		void *cp;

		if (fd < 0 || host < 0 || gp_alloc(fd, self->dev, SIZE, &ca))
			_exit(10);
		cp = mmap(NULL, SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
			  (off_t)ca.mmap_offset);
		if (cp == MAP_FAILED || ph_reg(host, cp, SIZE, &cr) ||
		    cr.owner != PEERHOST_OWNER_PEER || pm_num("mapped") != 1)
			_exit(11);
		_exit(0);	/* registration, mapping and handle still live */
	}
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	ASSERT_TRUE(WIFEXITED(status));
	ASSERT_EQ(0, WEXITSTATUS(status));
	EXPECT_EQ(0, pm_num("acquired"));
	EXPECT_EQ(0, host_num("registrations"));
	EXPECT_EQ(0, gp_sysfs(self->dev, "allocations"));

	p = alloc_map(_metadata, self->fd, self->dev, SIZE, &a);
	ASSERT_EQ(0, ph_reg(self->host, p, SIZE, &r));
	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid) {
		struct peerhost_reg cr;

		/* the shared host file, the parent's address, no mapping */
		_exit(ph_reg(self->host, p, SIZE, &cr) == -EFAULT ? 0 : 12);
	}
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	ASSERT_TRUE(WIFEXITED(status));
	EXPECT_EQ(0, WEXITSTATUS(status));
	ASSERT_EQ(0, ph_dma(self->host, r.id, 0, 64, 9, &d));
	EXPECT_EQ(0, d.mismatches);
	EXPECT_EQ(1, pm_num("mapped"));
	ASSERT_EQ(0, ph_dereg(self->host, r.id));
	munmap(p, SIZE);
	ASSERT_EQ(0, gp_free(self->fd, a.handle));
}

struct dma_loop {
	int host;
	uint32_t id;
	int last;		/* the DMA call that stopped the loop */
	uint64_t rounds;	/* DMA calls that finished without error */
	volatile int started;
};

static void *dma_loop_fn(void *arg)
{
	struct dma_loop *l = arg;
	struct peerhost_dma d;

	for (;;) {
		l->last = ph_dma(l->host, l->id, 0, 2048, l->rounds, &d);
		if (l->last)
			return NULL;
		l->rounds++;
		l->started = 1;
	}
}

/* @l's loop on registration @id in thread *t; back once its first DMA is done. */
static void dma_loop_start(struct __test_metadata *_metadata,
			   struct dma_loop *l, uint32_t id, pthread_t *t)
{
	l->id = id;
	ASSERT_EQ(0, pthread_create(t, NULL, dma_loop_fn, l));
	while (!l->started && !l->last)
		usleep(10000);
	ASSERT_EQ(0, l->last);
}

/*
 * @l's loop in thread @t was stopped by an invalidation: its last DMA was
 * refused, the host marked the registration invalidated, and every DMA
 * before it counted.
 */
static void dma_loop_invalidated(struct __test_metadata *_metadata,
				 struct dma_loop *l, pthread_t t)
{
	struct peerhost_state s;

	ASSERT_EQ(0, pthread_join(t, NULL));
	EXPECT_EQ(-ENODEV, l->last);
	ASSERT_EQ(0, ph_state(l->host, l->id, &s));
	EXPECT_EQ(1, s.invalidated);
	EXPECT_EQ(l->rounds, s.dmas_done);
}

static int rebind(const char *bdf)
{
	return gp_write_file(GDRPEER_SYSFS "/pcibar_bind", bdf);
}

/*
 * The device goes while the HCA is moving data through a registration:
 * the client invalidates it (the host waits for the chunk in flight), the
 * HCA's next DMA is refused, the unbind completes (no deadlock between
 * the invalidate and the core's locks), and nothing is left afterwards.
 */
GP_TEST_F_TIMEOUT(peermem, revoke_invalidates_during_dma, 120)
{
	long long inval_host = host_num("invalidations");
	long long inval_pm = pm_num("invalidations");
	struct dma_loop l = { .host = self->host };
	struct gdrpeer_alloc a;
	struct peerhost_reg r;
	pthread_t t;
	uint8_t *p;

	p = alloc_map(_metadata, self->fd, self->dev, SIZE, &a);
	ASSERT_EQ(0, ph_reg(self->host, p, SIZE, &r));
	dma_loop_start(_metadata, &l, r.id, &t);
	ASSERT_EQ(0, gp_write_file(GDRPEER_SYSFS "/pcibar_unbind", self->bdf));
	dma_loop_invalidated(_metadata, &l, t);
	EXPECT_EQ(inval_host + 1, host_num("invalidations"));
	EXPECT_EQ(inval_pm + 1, pm_num("invalidations"));
	EXPECT_EQ(0, pm_num("mapped"));
	EXPECT_EQ(1, pm_num("acquired"));
	ASSERT_EQ(0, ph_dereg(self->host, r.id));
	EXPECT_EQ(0, pm_num("acquired"));
	munmap(p, SIZE);
	gp_free(self->fd, a.handle);
	close(self->fd);
	ASSERT_EQ(0, rebind(self->bdf));
	GP_SETUP_DUT(self);
}

/*
 * 8 threads for a few seconds: six register, DMA-free churn (alloc, map,
 * register, free the handle or unmap before or after deregistering), two
 * unbind and rebind the device under them.  Errors from a device that is
 * gone are expected; a hang, a leak or a kernel report is not.
 */
#define RACE_THREADS 8
#define RACE_SECONDS 8

struct race {
	int host, fd;
	unsigned int dev;
	const char *bdf;
	double end;
	unsigned long regs, refused, revokes;
	pthread_mutex_t lock;
};

static void *race_user(void *arg)
{
	struct race *rc = arg;
	unsigned int seed = (unsigned int)pthread_self();

	while (gp_now_s() < rc->end) {
		struct gdrpeer_alloc a;
		struct peerhost_reg r;
		void *p;
		int ok;

		if (gp_alloc(rc->fd, rc->dev, SIZE, &a)) {
			struct gp_dev d;

			/* unbound: rebinding may give the device a new index */
			if (!gp_find_device(rc->fd, &d))
				rc->dev = d.info.index;
			continue;
		}
		p = mmap(NULL, SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, rc->fd,
			 (off_t)a.mmap_offset);
		if (p == MAP_FAILED) {
			gp_free(rc->fd, a.handle);
			continue;
		}
		ok = !ph_reg(rc->host, p, SIZE, &r);
		if (rand_r(&seed) & 1) {
			munmap(p, SIZE);
			gp_free(rc->fd, a.handle);
			if (ok)
				ph_dereg(rc->host, r.id);
		} else {
			if (ok)
				ph_dereg(rc->host, r.id);
			munmap(p, SIZE);
			gp_free(rc->fd, a.handle);
		}
		pthread_mutex_lock(&rc->lock);
		if (ok)
			rc->regs++;
		else
			rc->refused++;
		pthread_mutex_unlock(&rc->lock);
	}
	return NULL;
}

static void *race_revoker(void *arg)
{
	struct race *rc = arg;

	while (gp_now_s() < rc->end) {
		pthread_mutex_lock(&rc->lock);
		/* one of the two revokers wins each round; the other finds it gone */
		if (!gp_write_file(GDRPEER_SYSFS "/pcibar_unbind", rc->bdf))
			rc->revokes++;
		usleep(20000);
		gp_write_file(GDRPEER_SYSFS "/pcibar_bind", rc->bdf);
		pthread_mutex_unlock(&rc->lock);
		usleep(200000);
	}
	return NULL;
}

GP_TEST_F_TIMEOUT(peermem, race_register_deregister_revoke, 180)
{
	struct race rc = { .host = self->host, .fd = self->fd,
			   .dev = self->dev, .bdf = self->bdf };
	pthread_t t[RACE_THREADS];
	unsigned int i;

	pthread_mutex_init(&rc.lock, NULL);
	rc.end = gp_now_s() + RACE_SECONDS;
	for (i = 0; i < RACE_THREADS; i++)
		ASSERT_EQ(0, pthread_create(&t[i], NULL,
					    i < 6 ? race_user : race_revoker, &rc));
	for (i = 0; i < RACE_THREADS; i++)
		ASSERT_EQ(0, pthread_join(t[i], NULL));
	TH_LOG("%lu registrations, %lu refused, %lu revocations", rc.regs,
	       rc.refused, rc.revokes);
	EXPECT_LT(0, rc.regs);
	EXPECT_LT(0, rc.revokes);
	EXPECT_EQ(0, pm_num("acquired"));
	EXPECT_EQ(0, pm_num("mapped"));
	EXPECT_EQ(0, host_num("registrations"));
	/* the device is bound again (maybe under a new index) */
	close(self->fd);
	GP_SETUP_DUT(self);
}

/* ---- the client's entry in /sys/kernel/mm/memory_peers ------------------ */

/*
 * peermem_name: loaded as the peermem fixture, with any peermem_name=.
 * The client must appear where MOFED's ib_core puts every client,
 * /sys/kernel/mm/memory_peers/<name>/ (what NCCL, NVSHMEM and UCX look
 * for), with the version it registered and counters that follow what the
 * core did: registrations mapped and unmapped, sg entries and bytes in
 * and out, invalidate calls.
 */
#define NAME_PARAM "/sys/module/gdrpeer/parameters/peermem_name"
#define PEERS_DIR "/sys/kernel/mm/memory_peers"

FIXTURE(peermem_name)
{
	int fd, host;
	unsigned int dev;
	uint64_t bar_size, page;
	char bdf[32];
	char name[64];
};

FIXTURE_SETUP(peermem_name)
{
	PM_SETUP_DUT(self);
	ASSERT_EQ(0, gp_read_line(NAME_PARAM, self->name, sizeof(self->name)))
		TH_LOG("%s: gdrpeer has no peermem_name parameter", NAME_PARAM);
	self->host = open(PEERHOST_DEVICE_PATH, O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, self->host);
}

FIXTURE_TEARDOWN(peermem_name)
{
	if (self->host >= 0)
		close(self->host);
	if (self->fd >= 0)
		close(self->fd);
}

struct peer_counts {
	long long alloc, dealloc, reg_pages, dereg_pages, reg_bytes,
		  dereg_bytes, free_callbacks;
};

static long long peer_num(const char *name, const char *file)
{
	char path[256];

	snprintf(path, sizeof(path), PEERS_DIR "/%s/%s", name, file);
	return gp_read_num(path);
}

static void peer_counts(const char *name, struct peer_counts *c)
{
	c->alloc = peer_num(name, "num_alloc_mrs");
	c->dealloc = peer_num(name, "num_dealloc_mrs");
	c->reg_pages = peer_num(name, "num_reg_pages");
	c->dereg_pages = peer_num(name, "num_dereg_pages");
	c->reg_bytes = peer_num(name, "num_reg_bytes");
	c->dereg_bytes = peer_num(name, "num_dereg_bytes");
	c->free_callbacks = peer_num(name, "num_free_callbacks");
}

/* The entry is there under the parameter's name, with the version. */
GP_TEST_F(peermem_name, entry_under_the_name)
{
	char path[256], line[128], clients[512] = "";
	FILE *f;

	snprintf(path, sizeof(path), PEERS_DIR "/%s/version", self->name);
	ASSERT_EQ(0, gp_read_line(path, line, sizeof(line)))
		TH_LOG("%s missing", path);
	EXPECT_STREQ("1.1", line);
	/* the host's own list (one line per client) says the same */
	f = fopen(HOST_SYSFS "/clients", "r");
	ASSERT_NE(NULL, f);
	snprintf(line, sizeof(line), "%s inval unmaps\n", self->name);
	while (fgets(clients, sizeof(clients), f) && strcmp(clients, line))
		;
	EXPECT_STREQ(line, clients);
	fclose(f);
}

/* One registration, a DMA through it, its deregistration: counted. */
GP_TEST_F(peermem_name, counters_follow_a_registration)
{
	struct peer_counts c0, c1, c2;
	struct gdrpeer_alloc a;
	struct peerhost_reg r;
	struct peerhost_dma d;
	uint8_t *p;

	peer_counts(self->name, &c0);
	ASSERT_LE(0, c0.alloc) TH_LOG("no counters under %s/%s", PEERS_DIR,
				      self->name);
	p = alloc_map(_metadata, self->fd, self->dev, SIZE, &a);
	ASSERT_EQ(0, ph_reg(self->host, p, SIZE, &r));
	EXPECT_EQ(PEERHOST_OWNER_PEER, r.owner);
	EXPECT_STREQ(self->name, r.client);
	ASSERT_LT(0, r.nents);
	peer_counts(self->name, &c1);
	EXPECT_EQ(c0.alloc + 1, c1.alloc);
	EXPECT_EQ(c0.reg_pages + r.nents, c1.reg_pages);
	EXPECT_EQ(c0.reg_bytes + SIZE, c1.reg_bytes);
	EXPECT_EQ(c0.dealloc, c1.dealloc);
	EXPECT_EQ(c0.dereg_pages, c1.dereg_pages);
	EXPECT_EQ(c0.dereg_bytes, c1.dereg_bytes);
	ASSERT_EQ(0, ph_dma(self->host, r.id, 0, 64, 7, &d));
	EXPECT_EQ(0, d.mismatches);
	ASSERT_EQ(0, ph_dereg(self->host, r.id));
	peer_counts(self->name, &c2);
	EXPECT_EQ(c1.alloc, c2.alloc);
	EXPECT_EQ(c1.dealloc + 1, c2.dealloc);
	EXPECT_EQ(c1.dereg_pages + r.nents, c2.dereg_pages);
	EXPECT_EQ(c1.dereg_bytes + SIZE, c2.dereg_bytes);
	EXPECT_EQ(c0.free_callbacks, c2.free_callbacks);
	munmap(p, SIZE);
	gp_free(self->fd, a.handle);
}

/*
 * The device goes while registered: one invalidate call, the registration
 * unmapped (dealloc) at once, its pages and bytes given back when it is
 * deregistered (MOFED counts them on the way to "unmapped").
 */
GP_TEST_F_TIMEOUT(peermem_name, invalidation_counted, 60)
{
	struct peer_counts c0, c1, c2;
	struct gdrpeer_alloc a;
	struct peerhost_reg r;
	uint8_t *p;

	p = alloc_map(_metadata, self->fd, self->dev, SIZE, &a);
	ASSERT_EQ(0, ph_reg(self->host, p, SIZE, &r));
	peer_counts(self->name, &c0);
	ASSERT_EQ(0, gp_write_file(GDRPEER_SYSFS "/pcibar_unbind", self->bdf));
	peer_counts(self->name, &c1);
	EXPECT_EQ(c0.free_callbacks + 1, c1.free_callbacks);
	EXPECT_EQ(c0.dealloc + 1, c1.dealloc);
	EXPECT_EQ(c0.dereg_pages, c1.dereg_pages);
	ASSERT_EQ(0, ph_dereg(self->host, r.id));
	peer_counts(self->name, &c2);
	EXPECT_EQ(c1.dealloc, c2.dealloc);
	EXPECT_EQ(c1.dereg_pages + r.nents, c2.dereg_pages);
	EXPECT_EQ(c1.dereg_bytes + SIZE, c2.dereg_bytes);
	munmap(p, SIZE);
	gp_free(self->fd, a.handle);
	close(self->fd);
	ASSERT_EQ(0, rebind(self->bdf));
	GP_SETUP_DUT(self);
}

/* ---- CUDA addresses through the nvidia provider ------------------------- */

#define NV_SYSFS GDRPEER_SYSFS "/providers/nvidia"
#define GPU_PAGE NVSTUB_PAGE_SIZE
#define PIN_PARAM "/sys/module/gdrpeer/parameters/peermem_cuda_pin"
#define CUDA_PARAM "/sys/module/gdrpeer/parameters/peermem_cuda"

static long long nv_num(const char *name)
{
	return gp_sysfs_num(NV_SYSFS, name);
}

/* Gauges of client, provider, stand-in and host that must be 0 when idle. */
static int cuda_gauges_not_zero(struct __test_metadata *_metadata)
{
	static const char *const pm[] = { "acquired", "mapped",
					  "cuda_acquired" };
	static const char *const nv[] = { "pins", "pins_callback",
					  "pins_persistent", "revoked" };
	static const char *const stub[] = { "allocations", "pins",
					    "dma_mappings" };
	unsigned int i;
	int bad = 0;
	long long v;

	for (i = 0; i < 3; i++) {
		v = pm_num(pm[i]);
		if (v) {
			TH_LOG("providers/peermem/%s = %lld", pm[i], v);
			bad++;
		}
		v = gp_nvstub_num(stub[i]);
		if (v) {
			TH_LOG("stand-in %s = %lld", stub[i], v);
			bad++;
		}
	}
	for (i = 0; i < 4; i++) {
		v = nv_num(nv[i]);
		if (v) {
			TH_LOG("providers/nvidia/%s = %lld", nv[i], v);
			bad++;
		}
	}
	v = host_num("registrations");
	if (v) {
		TH_LOG("host registrations = %lld", v);
		bad++;
	}
	return bad;
}

FIXTURE(peermem_cuda)
{
	int fd;		/* /dev/gdrpeer */
	int host;
	int nv;		/* /dev/gdrpeer_nvstub: this process's "CUDA context" */
	long long violations;
};

FIXTURE_SETUP(peermem_cuda)
{
	char line[512];

	self->host = self->nv = -1;
	self->fd = open("/dev/gdrpeer", O_RDWR | O_CLOEXEC);
	if (self->fd < 0)
		SKIP(return, "/dev/gdrpeer: %s (is gdrpeer.ko loaded?)",
		     strerror(errno));
	PM_NEED_ACTIVE();
	if (gp_read_line(NV_SYSFS "/status", line, sizeof(line)) ||
	    strncmp(line, "active", 6))
		SKIP(return, "nvidia provider not active: %s (load gdrpeer_nvstub_gpl.ko first, gdrpeer with nvidia_module=gdrpeer_nvstub_gpl)",
		     line);
	self->nv = open(NVSTUB_DEVICE_PATH, O_RDWR | O_CLOEXEC);
	if (self->nv < 0)
		SKIP(return, "%s: %s (the tests need the stand-in gdrpeer_nvstub_gpl.ko)",
		     NVSTUB_DEVICE_PATH, strerror(errno));
	self->host = open(PEERHOST_DEVICE_PATH, O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, self->host) TH_LOG("%s: %s", PEERHOST_DEVICE_PATH,
					 strerror(errno));
	ASSERT_EQ(0, gp_write_file(CUDA_PARAM, "auto"));
	ASSERT_EQ(0, gp_write_file(PIN_PARAM, "callback"));
	ASSERT_EQ(0, cuda_gauges_not_zero(_metadata))
		TH_LOG("gauges not 0 before the test: an earlier one leaked");
	self->violations = gp_nvstub_num("violations");
}

FIXTURE_TEARDOWN(peermem_cuda)
{
	if (self->host >= 0)
		close(self->host);
	if (self->nv >= 0)
		close(self->nv);
	if (self->fd >= 0)
		close(self->fd);
	if (self->nv >= 0) {
		/* closing host and stand-in files released what a test left */
		EXPECT_EQ(0, cuda_gauges_not_zero(_metadata));
		EXPECT_EQ(self->violations, gp_nvstub_num("violations"));
		EXPECT_EQ(0, gp_nvstub_num("maps_after_callback"));
	}
}

/* "cuMemAlloc" of @pages GPU pages; the BAR offset of each in @offs */
static uint64_t cuda_alloc(struct __test_metadata *_metadata, int nv,
			   unsigned int pages, uint32_t flags, uint64_t *offs)
{
	uint64_t va = 0;

	ASSERT_EQ(0, gp_nvstub_alloc(nv, pages * GPU_PAGE, flags, offs, &va));
	return va;
}

/*
 * The client claims a CUDA address (status says so), pins it in 64 KiB
 * GPU pages with a free callback, reports that page size, maps one entry
 * for physically contiguous pages, and edu's bytes come back through it.
 */
GP_TEST_F(peermem_cuda, data_through_cuda_address)
{
	const uint64_t off = GPU_PAGE + 8, len = 2048, seed = 0xc0da ^ getpid();
	long long late = gp_nvstub_num("puts_after_callback");
	struct peerhost_reg r;
	uint64_t va, offs[4];
	char line[512];

	ASSERT_EQ(0, gp_read_line(PEERMEM_SYSFS "/cuda", line, sizeof(line)));
	EXPECT_EQ(0, strncmp(line, "claimed through the nvidia provider, callback pins", 50))
		TH_LOG("cuda: %s", line);
	ASSERT_EQ(0, gp_read_line(PEERMEM_SYSFS "/status", line, sizeof(line)));
	EXPECT_NE(NULL, strstr(line, "CUDA addresses: claimed")) TH_LOG("%s", line);

	va = cuda_alloc(_metadata, self->nv, 4, 0, offs);
	ASSERT_EQ(offs[0] + 3 * GPU_PAGE, offs[3]);	/* contiguous */
	ASSERT_EQ(0, ph_reg(self->host, (void *)(uintptr_t)va, 4 * GPU_PAGE, &r));
	reg_is_one_entry(_metadata, &r, GPU_PAGE, 4 * GPU_PAGE);
	EXPECT_EQ(1, pm_num("cuda_acquired"));
	EXPECT_EQ(1, pm_num("mapped"));
	EXPECT_EQ(1, nv_num("pins_callback"));
	EXPECT_EQ(1, gp_nvstub_num("pins"));
	/* the DMA API, not nvidia_p2p_dma_map_pages (see exporter_peermem.c) */
	EXPECT_EQ(0, gp_nvstub_num("dma_mappings"));

	dma_lands(_metadata, self->host, &r, off, len, seed);

	ASSERT_EQ(0, ph_dereg(self->host, r.id));
	EXPECT_EQ(0, pm_num("cuda_acquired"));
	EXPECT_EQ(0, gp_nvstub_num("pins"));
	EXPECT_EQ(late, gp_nvstub_num("puts_after_callback"));
	ASSERT_EQ(0, gp_nvstub_free(self->nv, va));
}

/*
 * Scattered GPU pages: one entry per page, each 64 KiB aligned, in the
 * allocation's order; a range that starts and ends inside GPU pages is
 * widened to them, and byte 0 of the registration is the byte at its
 * address, also across a page boundary.
 */
GP_TEST_F(peermem_cuda, scattered_pages_unaligned_range)
{
	const uint64_t start = 96, len = 2 * GPU_PAGE, seed = 99;
	struct peerhost_reg r;
	struct peerhost_dma d;
	uint64_t va, offs[3];
	unsigned int i;

	va = cuda_alloc(_metadata, self->nv, 3, NVSTUB_ALLOC_SCATTER, offs);
	ASSERT_GT(offs[0], offs[1]);
	ASSERT_EQ(0, ph_reg(self->host, (void *)(uintptr_t)(va + start), len, &r));
	EXPECT_EQ(PEERHOST_OWNER_PEER, r.owner);
	EXPECT_EQ(GPU_PAGE, r.page_size);
	ASSERT_EQ(3, r.nents);
	for (i = 0; i < 3; i++) {
		EXPECT_EQ(GPU_PAGE, r.sg_len[i]);
		EXPECT_EQ(0, r.sg_dma[i] % GPU_PAGE);
	}
	/* 2 KiB across the end of the first GPU page */
	ASSERT_EQ(0, ph_dma(self->host, r.id, GPU_PAGE - start - 1024, 2048,
			    seed, &d));
	EXPECT_EQ(2048, d.done);
	EXPECT_EQ(0, d.mismatches);
	EXPECT_EQ(r.sg_dma[0] + GPU_PAGE - 1024, d.first_dma);
	EXPECT_EQ(-EINVAL, ph_dma(self->host, r.id, len, 8, seed, &d));
	ASSERT_EQ(0, ph_dereg(self->host, r.id));
	ASSERT_EQ(0, gp_nvstub_free(self->nv, va));
}

/*
 * Not CUDA memory of this process: a VA the stand-in never gave out, a
 * range running past the end of an allocation, another process's
 * allocation (a forked child asks for the parent's address), and any
 * CUDA address with peermem_cuda=off: the client answers "not mine" and
 * the core's fallback cannot pin it (-EFAULT: nothing is mapped there).
 */
GP_TEST_F(peermem_cuda, refuses_what_it_does_not_own)
{
	struct peerhost_reg r;
	char line[256];
	int status;
	uint64_t va;
	pid_t pid;

	va = cuda_alloc(_metadata, self->nv, 2, 0, NULL);
	EXPECT_EQ(-EFAULT, ph_reg(self->host, (void *)(uintptr_t)(va + 2 * GPU_PAGE),
				  GPU_PAGE, &r));
	EXPECT_EQ(-EFAULT, ph_reg(self->host, (void *)(uintptr_t)(va + GPU_PAGE),
				  2 * GPU_PAGE, &r));
	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid)
		_exit(ph_reg(self->host, (void *)(uintptr_t)va, GPU_PAGE, &r) ==
		      -EFAULT ? 0 : 12);
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	ASSERT_TRUE(WIFEXITED(status));
	EXPECT_EQ(0, WEXITSTATUS(status));

	ASSERT_EQ(0, gp_write_file(CUDA_PARAM, "off"));
	ASSERT_EQ(0, gp_read_line(PEERMEM_SYSFS "/cuda", line, sizeof(line)));
	EXPECT_STREQ("not claimed (peermem_cuda=off)", line);
	EXPECT_EQ(-EFAULT, ph_reg(self->host, (void *)(uintptr_t)va, GPU_PAGE, &r));
	ASSERT_EQ(0, gp_write_file(CUDA_PARAM, "on"));
	ASSERT_EQ(0, ph_reg(self->host, (void *)(uintptr_t)va, GPU_PAGE, &r));
	EXPECT_EQ(PEERHOST_OWNER_PEER, r.owner);
	ASSERT_EQ(0, ph_dereg(self->host, r.id));
	/* no pin was left by the refusals */
	EXPECT_EQ(0, gp_nvstub_num("pins"));
	EXPECT_EQ(0, pm_num("acquired"));
	ASSERT_EQ(0, gp_nvstub_free(self->nv, va));
}

/*
 * cudaFree while edu writes through the registration (callback pin):
 * NVIDIA's free callback reaches the core's invalidate with no lock of
 * ours held, the host stops DMA (the chunk in flight ends first), the
 * free returns (the stand-in waits for the callback before it frees and
 * poisons the pages), the client unmapped (INVALIDATE_UNMAPS), and
 * deregistration later puts nothing: NVIDIA already took the pages back.
 */
GP_TEST_F_TIMEOUT(peermem_cuda, cuda_free_invalidates_during_dma, 120)
{
	long long inval_host = host_num("invalidations");
	long long inval_pm = pm_num("invalidations");
	long long callbacks = gp_nvstub_num("callbacks");
	long long late = gp_nvstub_num("puts_after_callback");
	long long during = gp_nvstub_num("puts_during_callback");
	struct dma_loop l = { .host = self->host };
	struct peerhost_reg r;
	pthread_t t;
	uint64_t va;

	va = cuda_alloc(_metadata, self->nv, 2, 0, NULL);
	ASSERT_EQ(0, ph_reg(self->host, (void *)(uintptr_t)va, 2 * GPU_PAGE, &r));
	dma_loop_start(_metadata, &l, r.id, &t);
	ASSERT_EQ(0, gp_nvstub_free(self->nv, va));
	dma_loop_invalidated(_metadata, &l, t);
	EXPECT_EQ(callbacks + 1, gp_nvstub_num("callbacks"));
	EXPECT_EQ(inval_host + 1, host_num("invalidations"));
	EXPECT_EQ(inval_pm + 1, pm_num("invalidations"));
	EXPECT_EQ(0, pm_num("mapped"));
	EXPECT_EQ(1, pm_num("cuda_acquired"));
	EXPECT_EQ(0, gp_nvstub_num("pins"));	/* NVIDIA freed the table */
	EXPECT_EQ(1, nv_num("revoked"));
	ASSERT_EQ(0, ph_dereg(self->host, r.id));
	EXPECT_EQ(0, pm_num("acquired"));
	EXPECT_EQ(0, nv_num("revoked"));
	/* the callback took the pages: gdrpeer put nothing afterwards */
	EXPECT_EQ(late, gp_nvstub_num("puts_after_callback"));
	EXPECT_EQ(during, gp_nvstub_num("puts_during_callback"));
}

/*
 * peermem_cuda_pin=persistent: cudaFree does not reach the registration
 * (no callback, no invalidation); the pages stay and edu still writes
 * through them until deregistration gives them back.
 */
GP_TEST_F(peermem_cuda, persistent_pin_outlives_free)
{
	long long inval = pm_num("invalidations");
	struct peerhost_reg r;
	struct peerhost_dma d;
	char line[256];
	uint64_t va;

	if (gp_nvstub_num("persistent") != 1)
		SKIP(return, "the stand-in's persistent knob is off");
	ASSERT_EQ(0, gp_write_file(PIN_PARAM, "persistent"));
	ASSERT_EQ(0, gp_read_line(PEERMEM_SYSFS "/cuda", line, sizeof(line)));
	EXPECT_NE(NULL, strstr(line, "persistent pins")) TH_LOG("%s", line);
	va = cuda_alloc(_metadata, self->nv, 2, 0, NULL);
	ASSERT_EQ(0, ph_reg(self->host, (void *)(uintptr_t)va, 2 * GPU_PAGE, &r));
	EXPECT_EQ(GPU_PAGE, r.page_size);
	EXPECT_EQ(1, nv_num("pins_persistent"));
	ASSERT_EQ(0, gp_nvstub_free(self->nv, va));
	EXPECT_EQ(0, gp_nvstub_num("allocations"));
	EXPECT_EQ(1, gp_nvstub_num("pins"));
	ASSERT_EQ(0, ph_dma(self->host, r.id, 0, 512, 3, &d));
	EXPECT_EQ(0, d.mismatches);
	EXPECT_EQ(inval, pm_num("invalidations"));
	ASSERT_EQ(0, ph_dereg(self->host, r.id));
	EXPECT_EQ(0, gp_nvstub_num("pins"));
	ASSERT_EQ(0, gp_write_file(PIN_PARAM, "callback"));
}

/*
 * A process that exits with a live CUDA registration: whichever of its
 * files goes first (the "CUDA context": cudaFree of everything, so
 * invalidation; or the host's: deregistration, so a put), nothing is
 * left and no rule of the NVIDIA API is broken.
 */
GP_TEST_F(peermem_cuda, exit_with_live_registration)
{
	long long late = gp_nvstub_num("puts_after_callback");
	unsigned int order;

	for (order = 0; order < 2; order++) {
		int status;
		pid_t pid = fork();

		ASSERT_LE(0, pid);
		if (!pid) {
			/* the lower descriptor is closed first at exit */
			int a = open(order ? PEERHOST_DEVICE_PATH : NVSTUB_DEVICE_PATH,
				     O_RDWR | O_CLOEXEC);
			int b = open(order ? NVSTUB_DEVICE_PATH : PEERHOST_DEVICE_PATH,
				     O_RDWR | O_CLOEXEC);
			int nv = order ? b : a, host = order ? a : b;
			struct peerhost_reg cr;
			uint64_t cva;

			if (a < 0 || b < 0 ||
			    gp_nvstub_alloc(nv, 2 * GPU_PAGE, 0, NULL, &cva) ||
			    ph_reg(host, (void *)(uintptr_t)cva, 2 * GPU_PAGE, &cr) ||
			    cr.owner != PEERHOST_OWNER_PEER)
				_exit(11);
			_exit(0);
		}
		ASSERT_EQ(pid, waitpid(pid, &status, 0));
		ASSERT_TRUE(WIFEXITED(status));
		EXPECT_EQ(0, WEXITSTATUS(status)) TH_LOG("order %u", order);
		EXPECT_EQ(0, cuda_gauges_not_zero(_metadata)) TH_LOG("order %u", order);
	}
	EXPECT_EQ(late, gp_nvstub_num("puts_after_callback"));
}

/*
 * 8 threads for a few seconds: five allocate CUDA memory, register it,
 * hold the registration a moment (sometimes with a DMA), deregister and
 * free it, in either order; three free registered allocations of the
 * others underneath them (cudaFree from another thread).  Refusals and
 * invalidations are expected; a hang, a leak, an API violation or a
 * kernel report is not.
 */
#define CRACE_THREADS 8
#define CRACE_USERS 5
#define CRACE_SECONDS 8

struct cuda_race {
	int host, nv;
	double end;
	uint64_t live[CRACE_USERS];	/* allocation a user has registered */
	unsigned long regs, refused, invalidated, freed_under;
	pthread_mutex_t lock;
};

struct cuda_race_arg {
	struct cuda_race *rc;
	unsigned int i;
};

static void *cuda_race_user(void *arg)
{
	struct cuda_race_arg *a = arg;
	struct cuda_race *rc = a->rc;
	unsigned int seed = a->i * 7919u;

	while (gp_now_s() < rc->end) {
		struct peerhost_state st;
		struct peerhost_reg r;
		struct peerhost_dma d;
		uint64_t va;
		int ok, inval;

		if (gp_nvstub_alloc(rc->nv, (1 + rand_r(&seed) % 2) * GPU_PAGE,
				    rand_r(&seed) & 1 ? NVSTUB_ALLOC_SCATTER : 0,
				    NULL, &va))
			continue;
		pthread_mutex_lock(&rc->lock);
		rc->live[a->i] = va;
		pthread_mutex_unlock(&rc->lock);
		ok = !ph_reg(rc->host, (void *)(uintptr_t)va, GPU_PAGE, &r);
		if (ok && !(rand_r(&seed) % 8))
			ph_dma(rc->host, r.id, 0, 64, seed, &d);
		else
			usleep(1000 + rand_r(&seed) % 4000);
		inval = ok && !ph_state(rc->host, r.id, &st) && st.invalidated;
		pthread_mutex_lock(&rc->lock);
		rc->live[a->i] = 0;
		pthread_mutex_unlock(&rc->lock);
		if (rand_r(&seed) & 1) {
			gp_nvstub_free(rc->nv, va);	/* may be freed already */
			if (ok)
				ph_dereg(rc->host, r.id);
		} else {
			if (ok)
				ph_dereg(rc->host, r.id);
			gp_nvstub_free(rc->nv, va);
		}
		pthread_mutex_lock(&rc->lock);
		rc->regs += ok;
		rc->refused += !ok;
		rc->invalidated += inval;
		pthread_mutex_unlock(&rc->lock);
	}
	return NULL;
}

static void *cuda_race_freer(void *arg)
{
	struct cuda_race_arg *a = arg;
	struct cuda_race *rc = a->rc;
	unsigned int seed = a->i * 104729u;

	while (gp_now_s() < rc->end) {
		uint64_t va;

		usleep(500 + rand_r(&seed) % 3000);
		pthread_mutex_lock(&rc->lock);
		va = rc->live[rand_r(&seed) % CRACE_USERS];
		pthread_mutex_unlock(&rc->lock);
		if (va && !gp_nvstub_free(rc->nv, va)) {
			pthread_mutex_lock(&rc->lock);
			rc->freed_under++;
			pthread_mutex_unlock(&rc->lock);
		}
	}
	return NULL;
}

GP_TEST_F_TIMEOUT(peermem_cuda, race_free_register_deregister, 180)
{
	struct cuda_race rc = { .host = self->host, .nv = self->nv };
	struct cuda_race_arg args[CRACE_THREADS];
	long long inval = pm_num("invalidations");
	pthread_t t[CRACE_THREADS];
	unsigned int i;

	pthread_mutex_init(&rc.lock, NULL);
	rc.end = gp_now_s() + CRACE_SECONDS;
	for (i = 0; i < CRACE_THREADS; i++) {
		args[i].rc = &rc;
		args[i].i = i < CRACE_USERS ? i : i - CRACE_USERS;
		ASSERT_EQ(0, pthread_create(&t[i], NULL,
					    i < CRACE_USERS ? cuda_race_user :
							      cuda_race_freer,
					    &args[i]));
	}
	for (i = 0; i < CRACE_THREADS; i++)
		ASSERT_EQ(0, pthread_join(t[i], NULL));
	TH_LOG("cuda race: %lu registrations, %lu refused, %lu freed underneath, %lu seen invalidated, %lld client invalidations, %lld puts after / %lld during a callback",
	       rc.regs, rc.refused, rc.freed_under, rc.invalidated,
	       pm_num("invalidations") - inval,
	       gp_nvstub_num("puts_after_callback"),
	       gp_nvstub_num("puts_during_callback"));
	EXPECT_LT(0, rc.regs);
	EXPECT_LT(0, rc.freed_under);
	EXPECT_LT(0, pm_num("invalidations") - inval);
	/* teardown: every gauge 0, no violation, no map in the callback window */
}

/* ---- --proof: bytes the host finds in the BAR file ---------------------- */

static int proof(const char *path)
{
	const uint64_t off = 8192, len = 4096;
	uint64_t seed = ((uint64_t)getpid() << 32) ^ (uint64_t)time(NULL);
	struct gdrpeer_alloc a;
	struct peerhost_reg r;
	struct peerhost_dma d;
	struct gp_dev dev;
	int fd, host, err;
	FILE *f;
	void *p;

	fd = open("/dev/gdrpeer", O_RDWR | O_CLOEXEC);
	host = open(PEERHOST_DEVICE_PATH, O_RDWR | O_CLOEXEC);
	if (fd < 0 || host < 0 || gp_find_device(fd, &dev)) {
		fprintf(stderr, "proof: needs gdrpeer-ofed.ko (GPU bound) and the host loaded\n");
		return 1;
	}
	err = gp_alloc(fd, dev.info.index, SIZE, &a);
	p = err ? NULL : gp_mmap(fd, SIZE, MAP_SHARED, a.mmap_offset, &err);
	if (!p) {
		fprintf(stderr, "proof: alloc/mmap: %s\n", strerror(abs(err)));
		return 1;
	}
	err = ph_reg(host, p, SIZE, &r);
	if (err || r.owner != PEERHOST_OWNER_PEER) {
		fprintf(stderr, "proof: register: %s, owner %u\n", strerror(-err),
			r.owner);
		return 1;
	}
	err = ph_dma(host, r.id, off, len, seed, &d);
	if (err || d.mismatches || d.done != len) {
		fprintf(stderr, "proof: DMA: %s, %llu mismatches\n", strerror(-err),
			(unsigned long long)d.mismatches);
		return 1;
	}
	if (ph_dereg(host, r.id) || munmap(p, SIZE) || gp_free(fd, a.handle)) {
		fprintf(stderr, "proof: teardown failed\n");
		return 1;
	}
	f = fopen(path, "w");
	if (!f) {
		fprintf(stderr, "proof: %s: %s\n", path, strerror(errno));
		return 1;
	}
	fprintf(f, "%llu %llu %llu\n", (unsigned long long)(a.bar_offset + off),
		(unsigned long long)seed, (unsigned long long)len);
	fclose(f);
	printf("proof: %llu bytes at BAR offset %#llx through DMA address %#llx\n",
	       (unsigned long long)len, (unsigned long long)(a.bar_offset + off),
	       (unsigned long long)d.first_dma);
	return 0;
}

/*
 * Coexistence: with a module named nvidia_peermem loaded (the tests load
 * selftests/kmod's name-only stand-in, nvidia_peermem.ko, before running
 * this fixture alone), peermem_cuda=auto leaves CUDA addresses to it and
 * says so; peermem_cuda=on claims them anyway, naming the other client;
 * off never claims them.
 */
FIXTURE(peermem_coexist)
{
	int host, nv;
};

FIXTURE_SETUP(peermem_coexist)
{
	self->host = self->nv = -1;
	if (access("/sys/module/nvidia_peermem", F_OK))
		SKIP(return, "nvidia_peermem is not loaded (load selftests/kmod's nvidia_peermem.ko and run --only peermem_coexist)");
	PM_NEED_ACTIVE();
	self->nv = open(NVSTUB_DEVICE_PATH, O_RDWR | O_CLOEXEC);
	self->host = open(PEERHOST_DEVICE_PATH, O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, self->nv) TH_LOG("%s: %s", NVSTUB_DEVICE_PATH, strerror(errno));
	ASSERT_LE(0, self->host);
}

FIXTURE_TEARDOWN(peermem_coexist)
{
	if (self->host >= 0)
		close(self->host);
	if (self->nv >= 0) {
		close(self->nv);
		EXPECT_EQ(0, gp_write_file(CUDA_PARAM, "auto"));
		EXPECT_EQ(0, pm_num("acquired"));
		EXPECT_EQ(0, gp_nvstub_num("pins"));
	}
}

GP_TEST_F(peermem_coexist, auto_leaves_cuda_to_nvidia_peermem)
{
	struct peerhost_reg r;
	char line[512];
	uint64_t va;

	ASSERT_EQ(0, gp_write_file(CUDA_PARAM, "auto"));
	ASSERT_EQ(0, gp_read_line(PEERMEM_SYSFS "/cuda", line, sizeof(line)));
	EXPECT_STREQ("left to nvidia_peermem (it is loaded; peermem_cuda=auto)", line);
	ASSERT_EQ(0, gp_read_line(PEERMEM_SYSFS "/status", line, sizeof(line)));
	EXPECT_NE(NULL, strstr(line, "CUDA addresses: left to nvidia_peermem"))
		TH_LOG("%s", line);
	ASSERT_EQ(0, gp_nvstub_alloc(self->nv, GPU_PAGE, 0, NULL, &va));
	/* not asked of NVIDIA at all: no pin, the core falls back (-EFAULT) */
	EXPECT_EQ(-EFAULT, ph_reg(self->host, (void *)(uintptr_t)va, GPU_PAGE, &r));
	EXPECT_EQ(0, gp_nvstub_num("pins"));

	ASSERT_EQ(0, gp_write_file(CUDA_PARAM, "on"));
	ASSERT_EQ(0, gp_read_line(PEERMEM_SYSFS "/cuda", line, sizeof(line)));
	EXPECT_NE(NULL, strstr(line, "peermem_cuda=on; also loaded: nvidia_peermem"))
		TH_LOG("%s", line);
	ASSERT_EQ(0, ph_reg(self->host, (void *)(uintptr_t)va, GPU_PAGE, &r));
	EXPECT_EQ(PEERHOST_OWNER_PEER, r.owner);
	ASSERT_EQ(0, ph_dereg(self->host, r.id));

	ASSERT_EQ(0, gp_write_file(CUDA_PARAM, "off"));
	EXPECT_EQ(-EFAULT, ph_reg(self->host, (void *)(uintptr_t)va, GPU_PAGE, &r));
	/* a value it does not know is refused, the setting stays */
	EXPECT_EQ(EINVAL, gp_write_file(CUDA_PARAM, "maybe"));
	ASSERT_EQ(0, gp_read_line(CUDA_PARAM, line, sizeof(line)));
	EXPECT_STREQ("off", line);
	ASSERT_EQ(0, gp_nvstub_free(self->nv, va));
}

/*
 * --cuda-proof FILE: bytes edu wrote through a CUDA registration, and a
 * cudaFree during DMA that the host must have stopped before the memory
 * was poisoned.  Both allocations are scattered, so they come from the
 * top of the BAR, away from --proof's pcibar memory at its bottom.
 *  A (2 GPU pages): registered, edu writes @len bytes at @off, deregistered,
 *     kept allocated by a child that outlives this process (a freed
 *     allocation is poisoned), so the bytes stay for the host to find;
 *  B (2 GPU pages): registered, edu writes through it in a loop, cudaFree
 *     underneath: the stand-in poisons B's pages only after the free
 *     callback returned, i.e. after the core's invalidate stopped edu; a
 *     DMA after that would leave pattern bytes in the poison.
 * FILE: "A_page0 A_page1 seed off len" and "B_page0 B_page1 rounds", BAR
 * offsets, one line each.
 */
static int cuda_proof(const char *path)
{
	const uint64_t off = GPU_PAGE - 1024, len = 2048;
	uint64_t seed = ((uint64_t)getpid() << 32) ^ (uint64_t)time(NULL);
	struct dma_loop l = { .last = 0 };
	uint64_t a_offs[2], b_offs[2], va, vb;
	struct peerhost_reg r, rb;
	struct peerhost_state st;
	struct peerhost_dma d;
	int nv, host, err;
	pthread_t t;
	pid_t child;
	FILE *f;

	nv = open(NVSTUB_DEVICE_PATH, O_RDWR);
	host = open(PEERHOST_DEVICE_PATH, O_RDWR | O_CLOEXEC);
	if (nv < 0 || host < 0 ||
	    gp_write_file(PIN_PARAM, "callback") ||
	    gp_nvstub_alloc(nv, 2 * GPU_PAGE, NVSTUB_ALLOC_SCATTER, a_offs, &va) ||
	    gp_nvstub_alloc(nv, 2 * GPU_PAGE, NVSTUB_ALLOC_SCATTER, b_offs, &vb)) {
		fprintf(stderr, "cuda-proof: needs the stand-in, the host and gdrpeer-ofed.ko loaded\n");
		return 1;
	}
	err = ph_reg(host, (void *)(uintptr_t)va, 2 * GPU_PAGE, &r);
	if (err || r.owner != PEERHOST_OWNER_PEER || r.page_size != GPU_PAGE) {
		fprintf(stderr, "cuda-proof: register A: %s, owner %u\n",
			strerror(-err), r.owner);
		return 1;
	}
	err = ph_dma(host, r.id, off, len, seed, &d);
	if (err || d.mismatches || d.done != len || ph_dereg(host, r.id)) {
		fprintf(stderr, "cuda-proof: DMA A: %s, %llu mismatches\n",
			strerror(-err), (unsigned long long)d.mismatches);
		return 1;
	}

	err = ph_reg(host, (void *)(uintptr_t)vb, 2 * GPU_PAGE, &rb);
	if (err || rb.owner != PEERHOST_OWNER_PEER) {
		fprintf(stderr, "cuda-proof: register B: %s\n", strerror(-err));
		return 1;
	}
	l.host = host;
	l.id = rb.id;
	if (pthread_create(&t, NULL, dma_loop_fn, &l))
		return 1;
	while (!l.started && !l.last)
		usleep(10000);
	err = gp_nvstub_free(nv, vb);
	pthread_join(t, NULL);
	if (err || !l.started || l.last != -ENODEV ||
	    ph_state(host, rb.id, &st) || !st.invalidated) {
		fprintf(stderr, "cuda-proof: free B during DMA: free %d, loop %d after %llu rounds\n",
			err, l.last, (unsigned long long)l.rounds);
		return 1;
	}
	/* a transfer edu still had would land within ~100 ms */
	usleep(500000);
	if (ph_dereg(host, rb.id)) {
		fprintf(stderr, "cuda-proof: deregister B failed\n");
		return 1;
	}

	/* A stays allocated in the child until the node powers off */
	child = fork();
	if (child < 0)
		return 1;
	if (!child) {
		int fd;

		setsid();
		for (fd = 0; fd < 3; fd++)
			close(fd);
		for (;;)
			pause();
	}
	close(nv);
	f = fopen(path, "w");
	if (!f) {
		fprintf(stderr, "cuda-proof: %s: %s\n", path, strerror(errno));
		return 1;
	}
	fprintf(f, "%llu %llu %llu %llu %llu\n%llu %llu %llu\n",
		(unsigned long long)a_offs[0], (unsigned long long)a_offs[1],
		(unsigned long long)seed, (unsigned long long)off,
		(unsigned long long)len, (unsigned long long)b_offs[0],
		(unsigned long long)b_offs[1], (unsigned long long)l.rounds);
	fclose(f);
	printf("cuda-proof: %llu bytes across GPU pages at BAR %#llx/%#llx through DMA address %#llx; B invalidated after %llu DMA rounds\n",
	       (unsigned long long)len, (unsigned long long)a_offs[0],
	       (unsigned long long)a_offs[1], (unsigned long long)d.first_dma,
	       (unsigned long long)l.rounds);
	return 0;
}

/* "--only FIXTURE": run that fixture's tests alone (the others need
 * another way of loading the modules, see the top of this file)
 */
static int keep_only(const char *name)
{
	struct __fixture_metadata *f;

	for (f = __fixture_list; f; f = f->next) {
		if (!strcmp(f->name, name)) {
			f->prev = f;
			f->next = NULL;
			__fixture_list = f;
			return 0;
		}
	}
	fprintf(stderr, "--only %s: no such fixture\n", name);
	return 2;
}

/* what GP_HARNESS_MAIN does, with a main() that also knows --proof */
GP_CONSTRUCTOR_ORDER_LAST

int main(int argc, char **argv)
{
	GP_LIST_TESTS_IF_ASKED(argc, argv);
	if (argc == 3 && !strcmp(argv[1], "--proof"))
		return proof(argv[2]);
	if (argc == 3 && !strcmp(argv[1], "--cuda-proof"))
		return cuda_proof(argv[2]);
	if (argc == 3 && !strcmp(argv[1], "--only") && keep_only(argv[2]))
		return 2;
	return test_harness_run(argc, argv);
}

// SPDX-License-Identifier: GPL-2.0
/*
 * kselftest: gdrpeer's OFED peer-memory client (driver/exporter_peermem.c)
 * against the test-only host gdrpeer_peerhost.ko, which registers user
 * addresses the way MLNX_OFED's ib_umem_get does and moves bytes with edu
 * (gdrpeer_edu_hca.ko) through the addresses the client mapped.  Needs
 * gdrpeer_edu_hca.ko, gdrpeer_peerhost.ko and gdrpeer-ofed.ko (gdrpeer
 * built against the host's OFED-style headers) loaded, the GPU bound.
 *
 * "--proof FILE" (not a kselftest: run it after them, with no allocation
 * after it) registers, DMAs and deregisters like data_through_client and
 * writes "bar_offset seed length" of the bytes edu wrote to FILE, so the
 * host finds them in the BAR file (memory is cleared only when allocated).
 * Each edu transfer takes ~100 ms: the DMA tests move a few KiB only.
 */
#define _GNU_SOURCE

#include <pthread.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "../kmod/gdrpeer_peerhost.h"
#include "gdrpeer_test.h"
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
	char path[256];

	snprintf(path, sizeof(path), PEERMEM_SYSFS "/%s", name);
	return gp_read_num(path);
}

static long long host_num(const char *name)
{
	char path[256];

	snprintf(path, sizeof(path), HOST_SYSFS "/%s", name);
	return gp_read_num(path);
}

FIXTURE(peermem)
{
	int fd, host;
	unsigned int dev;
	uint64_t bar_size, page;
	char bdf[32];
};

FIXTURE_SETUP(peermem)
{
	char line[512];
	struct gp_dev d;

	self->host = -1;
	GP_SETUP_DUT(self);
	ASSERT_EQ(0, gp_find_device(self->fd, &d));
	memcpy(self->bdf, d.bdf, sizeof(self->bdf));
	if (gp_read_line(PEERMEM_SYSFS "/status", line, sizeof(line)))
		SKIP(return, "%s missing: gdrpeer.ko predates the peer-memory client",
		     PEERMEM_SYSFS "/status");
	if (strncmp(line, "active", 6))
		SKIP(return, "peer-memory client not active: %s (load gdrpeer-ofed.ko after gdrpeer_peerhost.ko)",
		     line);
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
	EXPECT_EQ(PEERHOST_OWNER_PEER, r.owner);
	EXPECT_STREQ("gdrpeer", r.client);
	EXPECT_EQ(self->page, r.page_size);
	/* one physically contiguous BAR range: one entry */
	EXPECT_EQ(1, r.nents);
	EXPECT_EQ(SIZE, r.sg_len[0]);
	EXPECT_EQ(0, r.sg_dma[0] % self->page);
	EXPECT_EQ(1, pm_num("acquired"));
	EXPECT_EQ(1, pm_num("mapped"));
	EXPECT_EQ(1, host_num("registrations"));

	ASSERT_EQ(0, ph_dma(self->host, r.id, off, len, seed, &d));
	EXPECT_EQ(len, d.done);
	EXPECT_EQ(0, d.mismatches);
	EXPECT_EQ(r.sg_dma[0] + off, d.first_dma);
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
	struct peerhost_state s;
	struct peerhost_reg r;
	pthread_t t;
	uint8_t *p;

	p = alloc_map(_metadata, self->fd, self->dev, SIZE, &a);
	ASSERT_EQ(0, ph_reg(self->host, p, SIZE, &r));
	l.id = r.id;
	ASSERT_EQ(0, pthread_create(&t, NULL, dma_loop_fn, &l));
	while (!l.started && !l.last)
		usleep(10000);
	ASSERT_EQ(0, l.last);
	ASSERT_EQ(0, gp_write_file(GDRPEER_SYSFS "/pcibar_unbind", self->bdf));
	ASSERT_EQ(0, pthread_join(t, NULL));
	EXPECT_EQ(-ENODEV, l.last);
	ASSERT_EQ(0, ph_state(self->host, r.id, &s));
	EXPECT_EQ(1, s.invalidated);
	EXPECT_EQ(l.rounds, s.dmas_done);
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

/* what TEST_HARNESS_MAIN does, with a main() that also knows --proof */
static void __attribute__((constructor)) pm_constructor_order_last(void)
{
	if (!__constructor_order)
		__constructor_order = _CONSTRUCTOR_ORDER_BACKWARD;
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "--proof"))
		return proof(argv[2]);
	return test_harness_run(argc, argv);
}

// SPDX-License-Identifier: GPL-2.0
/*
 * kselftest: the pcibar device goes while its memory is in use (unbind
 * through pcibar_unbind or the PCI driver's own unbind, PCI remove), and
 * what a shared node needs around it: everything is revoked (CPU mappings
 * fault with SIGBUS, handles answer ENODEV, dynamic importers are
 * invalidated and a pinned importer is waited for), the memory comes back
 * whole on the next bind, freed memory is handed out cleared, and a
 * read-only open cannot get at device memory; CPU mappings are
 * write-combining (read from the page table by gdrpeer_ptebits.ko).
 *
 * Needs gdrpeer.ko with the device under test bound ($GDRPEER_GPU_BDF) and
 * gdrpeer_edu_hca.ko (the importer tests skip without it); run as root.
 * Every test leaves the device bound again with nothing allocated.
 */
#define _GNU_SOURCE
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>

#include "gdrpeer_test.h"
#include "gdrpeer_edu_test.h"
#include "../kmod/gdrpeer_ptebits.h"
#include "kselftest_harness.h"

#define PCI_DEVICES "/sys/bus/pci/devices"
#define PCI_DRIVER "/sys/bus/pci/drivers/gdrpeer"

FIXTURE(rv)
{
	int fd;
	unsigned int dev;
	uint64_t bar_size;
	uint64_t page;
	char bdf[32];
};

static int pci_attr_write(const char *bdf, const char *attr, const char *s)
{
	char path[256];

	snprintf(path, sizeof(path), PCI_DEVICES "/%s/%s", bdf, attr);
	return gp_write_file(path, s);
}

static bool path_exists(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0;
}

/* Wait up to @secs for @path to exist (@want) or not; true when it did. */
static bool wait_path(const char *path, bool want, double secs)
{
	double end = gp_now_s() + secs;

	while (path_exists(path) != want) {
		if (gp_now_s() > end)
			return false;
		usleep(10000);
	}
	return true;
}

FIXTURE_SETUP(rv)
{
	GP_SETUP_UNBINDABLE_DUT(self);
}

FIXTURE_TEARDOWN(rv)
{
	GP_TEARDOWN_UNBINDABLE_DUT(self);
}

/* Handle mapping, dma-buf and its mapping of one allocation, all live. */
struct users {
	struct gdrpeer_alloc a;
	uint8_t *cpu;		/* mmap of the handle */
	int dfd;
	uint8_t *dcpu;		/* mmap of the dma-buf */
	uint64_t size;
};

static int users_make(FIXTURE_DATA(rv) *self, struct users *u)
{
	uint64_t off;
	int err;

	u->size = 4 * self->page;
	err = gp_alloc(self->fd, self->dev, u->size, &u->a);
	if (err)
		return err;
	u->cpu = gp_mmap(self->fd, u->size, MAP_SHARED, u->a.mmap_offset, &err);
	if (!u->cpu)
		return -err;
	memset(u->cpu, 0x5a, u->size);
	u->dfd = gp_export(self->fd, u->a.handle, 0, u->size);
	if (u->dfd < 0)
		return u->dfd;
	u->dcpu = gp_mmap(u->dfd, u->size, MAP_SHARED, 0, &err);
	if (!u->dcpu)
		return -err;
	/*
	 * Touch every page of the dma-buf mapping, so that its page table
	 * entries exist: revocation must take them away, not only refuse
	 * later faults.
	 */
	for (off = 0; off < u->size; off += self->page)
		if (u->dcpu[off] != 0x5a)
			return -EIO;
	return 0;
}

/* After the device went: every use of @u fails the way it must. */
static void users_check_revoked(struct __test_metadata *_metadata,
				FIXTURE_DATA(rv) *self, struct users *u)
{
	struct gdrpeer_query q;
	uint8_t v = 0;
	int err;

	EXPECT_EQ(-1, guarded_read(u->cpu, &v)) TH_LOG("handle mapping still readable");
	EXPECT_EQ(-1, guarded_write(u->cpu + self->page, 1));
	EXPECT_EQ(-1, guarded_read(u->dcpu, &v)) TH_LOG("dma-buf mapping still readable");
	EXPECT_EQ(-1, guarded_write(u->dcpu + self->page, 1));
	EXPECT_EQ(-ENODEV, gp_export(self->fd, u->a.handle, 0, self->page));
	EXPECT_EQ(NULL, gp_mmap(self->fd, self->page, MAP_SHARED,
				u->a.mmap_offset, &err));
	EXPECT_EQ(ENODEV, err);
	EXPECT_EQ(NULL, gp_mmap(u->dfd, self->page, MAP_SHARED, 0, &err));
	EXPECT_EQ(ENODEV, err);
	/* the handle says its memory is gone; it is still the caller's to free */
	EXPECT_EQ(-ENODEV, gp_query(self->fd, u->a.handle, &q));
}

static void users_drop(struct users *u)
{
	munmap(u->dcpu, u->size);
	close(u->dfd);
	munmap(u->cpu, u->size);
}

GP_TEST_F(rv, pcibar_unbind_revokes_everything)
{
	struct users u;
	struct gdrpeer_alloc b;

	ASSERT_EQ(0, users_make(self, &u));
	ASSERT_EQ(1, gp_sysfs(self->dev, "allocations"));
	/* not refused (EBUSY) any more: the memory is taken back */
	ASSERT_EQ(0, gp_unbind_bdf(self->bdf));
	users_check_revoked(_metadata, self, &u);
	/* the device is gone: no new allocation */
	EXPECT_EQ(-ENODEV, gp_alloc(self->fd, self->dev, self->page, &b));
	EXPECT_EQ(0, gp_free(self->fd, u.a.handle));
	users_drop(&u);
	ASSERT_EQ(0, gp_rebind_bdf(self->fd, self->bdf, &self->dev));
}

GP_TEST_F(rv, pci_driver_unbind_and_bind)
{
	char path[256];
	struct users u;
	struct gp_dev d;

	snprintf(path, sizeof(path), PCI_DEVICES "/%s/driver", self->bdf);
	ASSERT_TRUE(path_exists(PCI_DRIVER)) TH_LOG("gdrpeer is no PCI driver");
	ASSERT_EQ(0, users_make(self, &u));
	ASSERT_EQ(0, gp_write_file(PCI_DRIVER "/unbind", self->bdf));
	EXPECT_FALSE(path_exists(path));
	users_check_revoked(_metadata, self, &u);
	EXPECT_EQ(-ENODEV, gp_find_device(self->fd, &d));
	users_drop(&u);
	/* the vfio-pci way back: driver_override, then bind */
	ASSERT_EQ(0, pci_attr_write(self->bdf, "driver_override", "gdrpeer"));
	ASSERT_EQ(0, gp_write_file(PCI_DRIVER "/bind", self->bdf));
	ASSERT_EQ(0, gp_find_device(self->fd, &d));
	self->dev = d.info.index;
	EXPECT_EQ((long long)self->bar_size, gp_sysfs(self->dev, "free_bytes"));
	/* pcibar_unbind clears only an override it set itself */
	EXPECT_EQ(0, gp_unbind_bdf(self->bdf));
	EXPECT_EQ(0, pci_attr_write(self->bdf, "driver_override", "\n"));
	EXPECT_EQ(0, gp_rebind_bdf(self->fd, self->bdf, &self->dev));
}

GP_TEST_F_TIMEOUT(rv, pci_remove_and_rescan, 60)
{
	char path[256];
	struct users u;
	struct gp_dev d;

	snprintf(path, sizeof(path), PCI_DEVICES "/%s", self->bdf);
	ASSERT_EQ(0, users_make(self, &u));
	ASSERT_EQ(0, pci_attr_write(self->bdf, "remove", "1"));
	ASSERT_TRUE(wait_path(path, false, 10));
	users_check_revoked(_metadata, self, &u);
	EXPECT_EQ(-ENODEV, gp_find_device(self->fd, &d));
	EXPECT_EQ(0, gp_free(self->fd, u.a.handle));
	users_drop(&u);
	ASSERT_EQ(0, gp_write_file("/sys/bus/pci/rescan", "1"));
	ASSERT_TRUE(wait_path(path, true, 10));
	/* a new function: unbound until asked, then whole again */
	EXPECT_EQ(-ENODEV, gp_find_device(self->fd, &d));
	ASSERT_EQ(0, gp_rebind_bdf(self->fd, self->bdf, &self->dev));
}

/* A dynamic importer (ib_umem_dmabuf_get) is invalidated, not waited for. */
GP_TEST_F(rv, unbind_invalidates_dynamic_importer)
{
	struct edu_hca_import_state st;
	struct edu_hca_import_dma dma;
	struct edu_hca_import im, im2;
	struct gdrpeer_alloc a;
	int hca, dfd;

	EDU_OPEN_OR_SKIP(hca);
	ASSERT_EQ(0, gp_alloc(self->fd, self->dev, 4 * self->page, &a));
	dfd = gp_export(self->fd, a.handle, 0, 4 * self->page);
	ASSERT_LE(0, dfd);
	ASSERT_EQ(0, edu_import(hca, dfd, 0, &im));
	ASSERT_EQ(0, edu_import_dma(hca, im.id, 0, 1024, 7, &dma));
	EXPECT_EQ(0, dma.mismatches);
	EXPECT_EQ(1, gp_sysfs(self->dev, "active_maps"));

	ASSERT_EQ(0, gp_unbind_bdf(self->bdf));
	ASSERT_EQ(0, edu_state(hca, im.id, &st));
	EXPECT_EQ(1, st.revoked);
	EXPECT_EQ(0, st.nents);
	EXPECT_EQ(-ENODEV, edu_import_dma(hca, im.id, 0, 1024, 8, &dma));
	/* a new import of the revoked dma-buf is refused */
	EXPECT_EQ(-ENODEV, edu_import(hca, dfd, 0, &im2));
	EXPECT_EQ(0, edu_unimport(hca, im.id));
	close(hca);
	close(dfd);
	EXPECT_EQ(0, gp_free(self->fd, a.handle));
	ASSERT_EQ(0, gp_rebind_bdf(self->fd, self->bdf, &self->dev));
}

/*
 * A pinned importer (ib_umem_dmabuf_get_pinned) ignores move_notify: the
 * unbind must not give the memory back while it still holds a mapping.
 */
GP_TEST_F_TIMEOUT(rv, unbind_waits_for_pinned_importer, 90)
{
	struct edu_hca_import im;
	struct gdrpeer_alloc a;
	char wchan_path[64], wchan[128] = "";
	int hca, dfd, status;
	struct gp_dev d;
	double t0;
	pid_t pid;

	EDU_OPEN_OR_SKIP(hca);
	ASSERT_EQ(0, gp_alloc(self->fd, self->dev, 4 * self->page, &a));
	dfd = gp_export(self->fd, a.handle, 0, 4 * self->page);
	ASSERT_LE(0, dfd);
	ASSERT_EQ(0, edu_import(hca, dfd, EDU_HCA_IMPORT_PINNED, &im));
	EXPECT_EQ(0, gp_free(self->fd, a.handle));
	close(dfd);

	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		/* not the import's holder: an unbind that waits must not wait on itself */
		close(hca);
		_exit(gp_unbind_bdf(self->bdf));
	}
	/* the unbind has begun (the device left the registry) ... */
	t0 = gp_now_s();
	while (!gp_find_device(self->fd, &d) && gp_now_s() - t0 < 20)
		usleep(10000);
	ASSERT_EQ(-ENODEV, gp_find_device(self->fd, &d));
	/*
	 * ... and sleeps in gdrpeer's revocation (the kernel names the
	 * function it sleeps in) until the pinned mapping goes; an unbind
	 * that does not wait finishes instead.
	 */
	snprintf(wchan_path, sizeof(wchan_path), "/proc/%d/wchan", (int)pid);
	t0 = gp_now_s();
	while ((gp_read_line(wchan_path, wchan, sizeof(wchan)) ||
		!strstr(wchan, "revoke")) && gp_now_s() - t0 < 20 &&
	       !waitpid(pid, &status, WNOHANG))
		usleep(10000);
	ASSERT_NE(NULL, strstr(wchan, "revoke")) TH_LOG("unbind sleeps in '%s'", wchan);
	ASSERT_EQ(0, waitpid(pid, &status, WNOHANG)) TH_LOG("unbind did not wait");
	ASSERT_EQ(0, edu_unimport(hca, im.id));
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	EXPECT_TRUE(WIFEXITED(status));
	EXPECT_EQ(0, WEXITSTATUS(status));
	close(hca);
	ASSERT_EQ(0, gp_rebind_bdf(self->fd, self->bdf, &self->dev));
}

/* What user A wrote is not what user B gets: memory is cleared on ALLOC. */
GP_TEST_F(rv, freed_memory_is_cleared)
{
	uint64_t size = 16 * self->page, i, dirty = 0;
	struct gdrpeer_alloc a, b;
	uint8_t *p;
	int fd2, err;

	ASSERT_EQ(0, gp_alloc(self->fd, self->dev, size, &a));
	p = gp_mmap(self->fd, size, MAP_SHARED, a.mmap_offset, &err);
	ASSERT_NE(NULL, p);
	memset(p, 0xa5, size);
	munmap(p, size);
	ASSERT_EQ(0, gp_free(self->fd, a.handle));

	fd2 = open("/dev/gdrpeer", O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, fd2);
	ASSERT_EQ(0, gp_alloc(fd2, self->dev, size, &b));
	/* the same bytes of the BAR, or this proves nothing */
	ASSERT_EQ(a.bar_offset, b.bar_offset);
	p = gp_mmap(fd2, size, MAP_SHARED, b.mmap_offset, &err);
	ASSERT_NE(NULL, p);
	for (i = 0; i < size; i++)
		dirty += p[i] != 0;
	EXPECT_EQ(0, dirty) TH_LOG("%llu bytes of the previous user visible",
				   (unsigned long long)dirty);
	munmap(p, size);
	close(fd2);
}

/*
 * CPU mappings are filled at fault time and take the memory type reserved
 * for the range: gdrpeer reserves write-combining for the BAR, or they
 * would be uncached (UC-), ten times slower for gdrcopy-style copies.
 */
GP_TEST_F(rv, cpu_mappings_are_write_combining)
{
	struct ptebits_query q;
	struct users u;
	int pt, err;

	pt = open(PTEBITS_DEVICE_PATH, O_RDWR | O_CLOEXEC);
	if (pt < 0)
		SKIP(return, PTEBITS_DEVICE_PATH ": %s (gdrpeer_ptebits.ko not loaded)",
		     strerror(errno));
	ASSERT_EQ(0, users_make(self, &u));
	memset(&q, 0, sizeof(q));
	q.addr = (uintptr_t)u.cpu;
	err = gp_ioctl(pt, PTEBITS_IOCTL_QUERY, &q);
	if (err == -EOPNOTSUPP) {
		users_drop(&u);
		EXPECT_EQ(0, gp_free(self->fd, u.a.handle));
		close(pt);
		SKIP(return, "this kernel has no page-walk helper the test module knows");
	}
	ASSERT_EQ(0, err);
	EXPECT_EQ(PTEBITS_X86_WC, q.prot & PTEBITS_X86_CACHE_MASK)
		TH_LOG("handle mapping: pte bits %#llx", (unsigned long long)q.prot);
	u.dcpu[0] = 1;		/* fault the page in */
	q.addr = (uintptr_t)u.dcpu;
	ASSERT_EQ(0, gp_ioctl(pt, PTEBITS_IOCTL_QUERY, &q));
	EXPECT_EQ(PTEBITS_X86_WC, q.prot & PTEBITS_X86_CACHE_MASK)
		TH_LOG("dma-buf mapping: pte bits %#llx", (unsigned long long)q.prot);
	users_drop(&u);
	EXPECT_EQ(0, gp_free(self->fd, u.a.handle));
	close(pt);
}

/* O_RDONLY may look, never allocate, export or pin. */
GP_TEST_F(rv, read_only_open_cannot_touch_memory)
{
	struct gdrpeer_export_va e;
	struct gdrpeer_alloc a, b;
	struct gdrpeer_info info;
	struct gdrpeer_query q;
	struct gp_dev d;
	int ro;

	ro = open("/dev/gdrpeer", O_RDONLY | O_CLOEXEC);
	ASSERT_LE(0, ro);
	memset(&info, 0, sizeof(info));
	info.abi_version = GDRPEER_ABI_VERSION;
	EXPECT_EQ(0, gp_ioctl(ro, GDRPEER_IOCTL_INFO, &info));
	EXPECT_EQ(0, gp_find_device(ro, &d));
	EXPECT_EQ(-EBADF, gp_alloc(ro, self->dev, self->page, &a));
	EXPECT_EQ(-EBADF, gp_free(ro, 1));
	EXPECT_EQ(-EBADF, gp_export(ro, 1, 0, self->page));
	memset(&e, 0, sizeof(e));
	e.va = 1ull << 30;
	e.length = 1ull << 16;
	EXPECT_EQ(-EBADF, gp_ioctl(ro, GDRPEER_IOCTL_EXPORT_VA, &e));
	/* another file's handle is not reachable from it either */
	ASSERT_EQ(0, gp_alloc(self->fd, self->dev, self->page, &b));
	EXPECT_EQ(-ENOENT, gp_query(ro, b.handle, &q));
	EXPECT_EQ(0, gp_free(self->fd, b.handle));
	close(ro);
}

GP_HARNESS_MAIN

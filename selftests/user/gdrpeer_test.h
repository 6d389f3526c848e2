/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Helpers shared by the gdrpeer kselftests: ioctl wrappers that return
 * -errno, the device under test, and its sysfs counters.
 *
 * The device under test is the bound device whose PCI address is
 * $GDRPEER_GPU_BDF (the emulated node sets it), else device index 0.
 */
#ifndef GDRPEER_TEST_H
#define GDRPEER_TEST_H

#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <gdrpeer.h>

#define GDRPEER_SYSFS "/sys/class/gdrpeer/gdrpeer"

/* ioctl returning 0 or -errno (errno captured before anything else) */
static inline int gp_ioctl(int fd, unsigned long cmd, void *arg)
{
	return ioctl(fd, cmd, arg) ? -errno : 0;
}

static inline long gp_page(void)
{
	return sysconf(_SC_PAGESIZE);
}

struct gp_dev {
	struct gdrpeer_device_info info;
	char bdf[32];
};

/* Fill *d with the device under test; -ENODEV when none is bound. */
static inline int gp_find_device(int fd, struct gp_dev *d)
{
	struct gdrpeer_device_info infos[16];
	struct gdrpeer_list_devices ld;
	const char *want = getenv("GDRPEER_GPU_BDF");
	unsigned int i, n;
	int ret;

	memset(&ld, 0, sizeof(ld));
	memset(infos, 0, sizeof(infos));
	ld.devices_ptr = (uintptr_t)infos;
	ld.count = 16;
	ld.entry_size = sizeof(infos[0]);
	ret = gp_ioctl(fd, GDRPEER_IOCTL_LIST_DEVICES, &ld);
	if (ret)
		return ret;
	n = ld.total < 16 ? ld.total : 16;
	for (i = 0; i < n; i++) {
		char bdf[32];

		snprintf(bdf, sizeof(bdf), "%04x:%02x:%02x.%x",
			 infos[i].pci_domain, infos[i].pci_bus,
			 infos[i].pci_dev, infos[i].pci_func);
		if (!want || !*want || !strcmp(want, bdf) ||
		    !strcmp(want, bdf + 5)) {
			d->info = infos[i];
			memcpy(d->bdf, bdf, sizeof(bdf));
			return 0;
		}
	}
	return -ENODEV;
}

/* /sys/class/gdrpeer/gdrpeer/devices/<index>/<name> as a number; -1 on error */
static inline long long gp_sysfs(unsigned int index, const char *name)
{
	char path[256];
	long long v = -1;
	FILE *f;

	snprintf(path, sizeof(path), GDRPEER_SYSFS "/devices/%u/%s", index,
		 name);
	f = fopen(path, "r");
	if (!f)
		return -1;
	if (fscanf(f, "%lld", &v) != 1)
		v = -1;
	fclose(f);
	return v;
}

/* First line of any sysfs file into buf (newline dropped); -errno on error */
static inline int gp_read_line(const char *path, char *buf, size_t n)
{
	FILE *f = fopen(path, "r");
	size_t len;

	if (!f)
		return -errno;
	if (!fgets(buf, (int)n, f)) {
		fclose(f);
		return -EIO;
	}
	fclose(f);
	len = strlen(buf);
	if (len && buf[len - 1] == '\n')
		buf[len - 1] = 0;
	return 0;
}

/* Any sysfs file holding one number; -1 when missing or not a number */
static inline long long gp_read_num(const char *path)
{
	char buf[64], *end;
	long long v;

	if (gp_read_line(path, buf, sizeof(buf)))
		return -1;
	errno = 0;
	v = strtoll(buf, &end, 0);
	if (errno || end == buf)
		return -1;
	return v;
}

/* @dir/@name (a sysfs folder and one of its files) as gp_read_num() reads it */
static inline long long gp_sysfs_num(const char *dir, const char *name)
{
	char path[256];

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return gp_read_num(path);
}

/*
 * GDRPEER_IOCTL_EXPORT_VA (ABI 1.1): dma-buf fd (>= 0) or -errno; *out
 * (optional) gets the whole struct back.
 */
static inline int gp_export_va(int fd, uint64_t va, uint64_t length,
			       uint32_t flags, struct gdrpeer_export_va *out)
{
	struct gdrpeer_export_va e;
	int ret;

	memset(&e, 0, sizeof(e));
	e.va = va;
	e.length = length;
	e.flags = flags;
	e.fd = -1;
	ret = gp_ioctl(fd, GDRPEER_IOCTL_EXPORT_VA, &e);
	if (out)
		*out = e;
	return ret ? ret : e.fd;
}

static inline int gp_alloc(int fd, unsigned int dev, uint64_t size,
			   struct gdrpeer_alloc *a)
{
	memset(a, 0, sizeof(*a));
	a->device = dev;
	a->size = size;
	return gp_ioctl(fd, GDRPEER_IOCTL_ALLOC, a);
}

static inline int gp_free(int fd, uint64_t handle)
{
	struct gdrpeer_free f;

	memset(&f, 0, sizeof(f));
	f.handle = handle;
	return gp_ioctl(fd, GDRPEER_IOCTL_FREE, &f);
}

static inline int gp_query(int fd, uint64_t handle, struct gdrpeer_query *q)
{
	memset(q, 0, sizeof(*q));
	q->handle = handle;
	return gp_ioctl(fd, GDRPEER_IOCTL_QUERY, q);
}

/* dma-buf fd (>= 0) or -errno */
static inline int gp_export(int fd, uint64_t handle, uint64_t offset,
			    uint64_t length)
{
	struct gdrpeer_export e;
	int ret;

	memset(&e, 0, sizeof(e));
	e.handle = handle;
	e.offset = offset;
	e.length = length;
	ret = gp_ioctl(fd, GDRPEER_IOCTL_EXPORT, &e);
	return ret ? ret : e.fd;
}

/* mmap returning the mapping or NULL with *err = errno */
static inline void *gp_mmap(int fd, size_t len, int flags, uint64_t off,
			    int *err)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, flags, fd,
		       (off_t)off);

	if (p == MAP_FAILED) {
		*err = errno;
		return NULL;
	}
	*err = 0;
	return p;
}

/* The edu test module's pattern (see gdrpeer_edu_hca.h), bytes [0, len). */
static inline void gp_pattern(uint8_t *out, uint64_t seed, uint64_t len)
{
	uint64_t i;

	for (i = 0; i < len; i += 8) {
		uint64_t z = seed + (i / 8 + 1) * 0x9e3779b97f4a7c15ull;
		unsigned int b;

		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
		z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
		z ^= z >> 31;
		for (b = 0; b < 8 && i + b < len; b++)
			out[i + b] = (uint8_t)(z >> (8 * b));
	}
}

/* SIGBUS guard: a per-thread sigsetjmp around one access (bus_install first) */

static __thread sigjmp_buf bus_env;
static __thread volatile sig_atomic_t bus_armed;

static inline void bus_handler(int sig)
{
	if (bus_armed)
		siglongjmp(bus_env, 1);
	signal(sig, SIG_DFL);
	raise(sig);
}

static inline void bus_install(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = bus_handler;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGBUS, &sa, NULL);
}

/*
 * One byte at @p: read into *v (@write false) or written from *v (@write
 * true); 0, or -1 when the access raised SIGBUS.
 */
static inline int guarded_access(volatile uint8_t *p, uint8_t *v, bool write)
{
	if (sigsetjmp(bus_env, 1)) {
		bus_armed = 0;
		return -1;
	}
	bus_armed = 1;
	if (write)
		*p = *v;
	else
		*v = *p;
	bus_armed = 0;
	return 0;
}

static inline int guarded_read(volatile uint8_t *p, uint8_t *v)
{
	return guarded_access(p, v, false);
}

static inline int guarded_write(volatile uint8_t *p, uint8_t v)
{
	return guarded_access(p, &v, true);
}

/* true when both a read and a write of the byte at @p raised SIGBUS (a revoked mapping) */
static inline bool faults_on_read_and_write(volatile uint8_t *p)
{
	uint8_t v;

	return guarded_read(p, &v) && guarded_write(p, 0x5a);
}

/* 0 or errno of writing @val to the (sysfs) file @path */
static inline int gp_write_file(const char *path, const char *val)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC), err = 0;

	if (fd < 0)
		return errno;
	if (write(fd, val, strlen(val)) < 0)
		err = errno;
	close(fd);
	return err;
}

/* CLOCK_MONOTONIC in seconds */
static inline double gp_now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* CPU physical start of BAR @bar of PCI device @bdf (0 on error) */
static inline uint64_t gp_bar_phys(const char *bdf, unsigned int bar)
{
	unsigned long long start = 0, end, flags;
	char path[128];
	unsigned int i;
	FILE *f;

	snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s%s/resource",
		 strlen(bdf) < 10 ? "0000:" : "", bdf);
	f = fopen(path, "r");
	if (!f)
		return 0;
	for (i = 0; i <= bar; i++)
		if (fscanf(f, "%llx %llx %llx", &start, &end, &flags) != 3) {
			start = 0;
			break;
		}
	fclose(f);
	return start;
}

/*
 * TEST_F whose body does not run when FIXTURE_SETUP skipped: the 6.1
 * harness runs the body after a SKIP in setup.  Include after
 * kselftest_harness.h.
 */
#define GP_TEST_F(fix, name)						\
	static void fix##_body_##name(struct __test_metadata *_metadata, \
				      FIXTURE_DATA(fix) *self);		\
	TEST_F(fix, name)						\
	{								\
		if (!_metadata->skip)					\
			fix##_body_##name(_metadata, self);		\
	}								\
	static void fix##_body_##name(struct __test_metadata *_metadata, \
				      FIXTURE_DATA(fix) *self)

/* GP_TEST_F with a harness timeout other than 30 s (seconds) */
#define GP_TEST_F_TIMEOUT(fix, name, seconds)				\
	static void fix##_body_##name(struct __test_metadata *_metadata, \
				      FIXTURE_DATA(fix) *self);		\
	TEST_F_TIMEOUT(fix, name, seconds)				\
	{								\
		if (!_metadata->skip)					\
			fix##_body_##name(_metadata, self);		\
	}								\
	static void fix##_body_##name(struct __test_metadata *_metadata, \
				      FIXTURE_DATA(fix) *self)

/*
 * Body of FIXTURE_SETUP for the device under test, shared by the kselftests:
 * open /dev/gdrpeer, find the device (skip, saying why, when there is none)
 * and assert that nobody left allocations on it. `self` needs the members
 * int fd; unsigned int dev; uint64_t bar_size; uint64_t page.
 */
#define GP_SETUP_DUT(self)						\
	do {								\
		struct gp_dev __d;					\
		int __ret;						\
									\
		(self)->fd = open("/dev/gdrpeer", O_RDWR | O_CLOEXEC);	\
		if ((self)->fd < 0)					\
			SKIP(return, "/dev/gdrpeer: %s (is gdrpeer.ko loaded?)", \
			     strerror(errno));				\
		__ret = gp_find_device((self)->fd, &__d);		\
		if (__ret)						\
			SKIP(return, "no bound gdrpeer device (%s)",	\
			     strerror(-__ret));				\
		(self)->dev = __d.info.index;				\
		(self)->bar_size = __d.info.bar_size;			\
		(self)->page = (uint64_t)gp_page();			\
		ASSERT_EQ(0, gp_sysfs((self)->dev, "allocations"))	\
			TH_LOG("device %u has allocations left by someone else", \
			       (self)->dev);				\
	} while (0)

/*
 * `PROGRAM -l`: the name of each test as its TAP line gives it ("fixture.test"), one a line,
 * and no test run. The 6.1 harness has no -l (later ones have); tests/helpers/tap.py takes a
 * program's tests from here instead of a count typed again in Python. For main(), after
 * kselftest_harness.h.
 */
#define GP_LIST_TESTS_IF_ASKED(argc, argv)				\
	do {								\
		struct __fixture_variant_metadata __none = { .name = "" }; \
		struct __fixture_variant_metadata *__v;			\
		struct __fixture_metadata *__f;				\
		struct __test_metadata *__t;				\
									\
		if ((argc) != 2 || strcmp((argv)[1], "-l"))		\
			break;						\
		for (__f = __fixture_list; __f; __f = __f->next)	\
			for (__v = __f->variant ?: &__none; __v; __v = __v->next) \
				for (__t = __f->tests; __t; __t = __t->next) \
					printf("%s%s%s.%s\n", __f->name, \
					       __v->name[0] ? "." : "",	\
					       __v->name, __t->name);	\
		return 0;						\
	} while (0)

/*
 * What TEST_HARNESS_MAIN sets up before main() (the harness's test order),
 * for a program with its own main(), which must call
 * GP_LIST_TESTS_IF_ASKED and test_harness_run itself.
 */
#define GP_CONSTRUCTOR_ORDER_LAST					\
	static void __attribute__((constructor)) gp_constructor_order_last(void) \
	{								\
		if (!__constructor_order)				\
			__constructor_order = _CONSTRUCTOR_ORDER_BACKWARD; \
	}

/* TEST_HARNESS_MAIN that also knows -l */
#define GP_HARNESS_MAIN							\
	GP_CONSTRUCTOR_ORDER_LAST					\
									\
	int main(int argc, char **argv)					\
	{								\
		GP_LIST_TESTS_IF_ASKED(argc, argv);			\
		return test_harness_run(argc, argv);			\
	}

/*
 * The kselftests that unbind the device under test (revoke, revoke_race,
 * bounds) share one fixture shape: GP_SETUP_DUT's members plus
 * char bdf[32], the device's PCI address, through which they unbind it
 * (pcibar_unbind) and bind it again (pcibar_bind).
 */

/* pcibar_unbind of the device at @bdf: 0 or -errno. */
static inline int gp_unbind_bdf(const char *bdf)
{
	return gp_write_file(GDRPEER_SYSFS "/pcibar_unbind", bdf);
}

/*
 * The device at @bdf bound again (pcibar_bind) and found through @fd: its
 * new index in *@dev; 0 or -errno.
 */
static inline int gp_rebind_bdf(int fd, const char *bdf, unsigned int *dev)
{
	struct gp_dev d;
	int err = gp_write_file(GDRPEER_SYSFS "/pcibar_bind", bdf);

	if (err)
		return err;
	err = -gp_find_device(fd, &d);
	if (!err)
		*dev = d.info.index;
	return err;
}

/* FIXTURE_SETUP body: GP_SETUP_DUT, the device's BDF, the SIGBUS guard. */
#define GP_SETUP_UNBINDABLE_DUT(self)					\
	do {								\
		struct gp_dev __u;					\
									\
		GP_SETUP_DUT(self);					\
		if ((self)->fd < 0)					\
			return;						\
		ASSERT_EQ(0, gp_find_device((self)->fd, &__u));		\
		memcpy((self)->bdf, __u.bdf, sizeof((self)->bdf));	\
		bus_install();						\
	} while (0)

/*
 * FIXTURE_TEARDOWN body: the device bound again if a test left it
 * unbound, then whole: no allocation, export, revoked region or kernel
 * mapping left, all of its BAR (the size found at setup) free.
 */
#define GP_TEARDOWN_UNBINDABLE_DUT(self)				\
	do {								\
		struct gp_dev __u;					\
									\
		if ((self)->fd < 0)					\
			return;						\
		if (gp_find_device((self)->fd, &__u))			\
			EXPECT_EQ(0, gp_rebind_bdf((self)->fd, (self)->bdf, \
						   &(self)->dev));	\
		EXPECT_EQ(0, gp_sysfs((self)->dev, "allocations"));	\
		EXPECT_EQ(0, gp_sysfs((self)->dev, "exports"));		\
		EXPECT_EQ(0, gp_sysfs((self)->dev, "revoked"));		\
		EXPECT_EQ(0, gp_sysfs((self)->dev, "vmaps"));		\
		EXPECT_EQ((long long)(self)->bar_size,			\
			  gp_sysfs((self)->dev, "free_bytes"));		\
		close((self)->fd);					\
	} while (0)

#endif /* GDRPEER_TEST_H */

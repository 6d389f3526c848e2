// SPDX-License-Identifier: GPL-2.0
/*
 * kselftest: the /dev/gdrpeer ABI and every kind of bad input.
 * Needs gdrpeer.ko loaded with at least one bound device (64 MiB or more
 * is enough); run as root.  Each bad input is its own test and checks the
 * exact errno, then that nothing leaked (sysfs counters back to zero).
 */
#define _GNU_SOURCE
#include <assert.h>
#include <linux/dma-buf.h>
#include <stddef.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "gdrpeer_test.h"
#include "kselftest_harness.h"

/* The ABI is fixed: these sizes are what libgdrpeer was built against. */
static_assert(sizeof(struct gdrpeer_info) == 64, "info size");
static_assert(sizeof(struct gdrpeer_device_info) == 72, "device_info size");
static_assert(sizeof(struct gdrpeer_list_devices) == 40, "list size");
static_assert(sizeof(struct gdrpeer_alloc) == 64, "alloc size");
static_assert(sizeof(struct gdrpeer_free) == 32, "free size");
static_assert(sizeof(struct gdrpeer_export) == 48, "export size");
static_assert(sizeof(struct gdrpeer_query) == 72, "query size");

/* errno of a call that must fail: 0 when it unexpectedly succeeded */
#define GP_FAILS(call) ((call) ? errno : 0)

FIXTURE(gp)
{
	int fd;
	unsigned int dev;
	uint64_t bar_size;
	uint64_t page;
};

FIXTURE_SETUP(gp)
{
	GP_SETUP_DUT(self);
}

FIXTURE_TEARDOWN(gp)
{
	if (self->fd >= 0) {
		close(self->fd);
		/* everything a test made is gone with its last reference */
		EXPECT_EQ(0, gp_sysfs(self->dev, "allocations"));
		EXPECT_EQ(0, gp_sysfs(self->dev, "exports"));
		EXPECT_EQ(0, gp_sysfs(self->dev, "attachments"));
		EXPECT_EQ(0, gp_sysfs(self->dev, "active_maps"));
		EXPECT_EQ((long long)self->bar_size,
			  gp_sysfs(self->dev, "free_bytes"));
	}
}

/* ---- ABI ------------------------------------------------------------ */

GP_TEST_F(gp, info_version)
{
	struct gdrpeer_info in = { .abi_version = GDRPEER_ABI_VERSION };

	ASSERT_EQ(0, gp_ioctl(self->fd, GDRPEER_IOCTL_INFO, &in));
	EXPECT_EQ(GDRPEER_ABI_VERSION, in.abi_version);
	EXPECT_EQ(self->page, in.page_size);
	EXPECT_EQ(1ull << GDRPEER_MMAP_WINDOW_SHIFT, in.mmap_window);
	EXPECT_EQ(GDRPEER_CAP_DMABUF | GDRPEER_CAP_MMAP, in.caps);
	EXPECT_LE(1, in.num_devices);
}

GP_TEST_F(gp, info_newer_minor_accepted)
{
	struct gdrpeer_info in = {
		.abi_version = GDRPEER_ABI_VERSION + 1 };

	EXPECT_EQ(0, gp_ioctl(self->fd, GDRPEER_IOCTL_INFO, &in));
	EXPECT_EQ(GDRPEER_ABI_VERSION, in.abi_version);
}

GP_TEST_F(gp, bad_abi_major_eproto)
{
	struct gdrpeer_info in = {
		.abi_version = (GDRPEER_ABI_VERSION_MAJOR + 1) << 16 };

	EXPECT_EQ(-EPROTO, gp_ioctl(self->fd, GDRPEER_IOCTL_INFO, &in));
	/* the driver's version still comes back */
	EXPECT_EQ(GDRPEER_ABI_VERSION, in.abi_version);
}

GP_TEST_F(gp, bad_abi_zero_eproto)
{
	struct gdrpeer_info in = { .abi_version = 0 };

	EXPECT_EQ(-EPROTO, gp_ioctl(self->fd, GDRPEER_IOCTL_INFO, &in));
}

GP_TEST_F(gp, list_devices)
{
	struct gdrpeer_device_info infos[4];
	struct gdrpeer_list_devices ld = {
		.entry_size = sizeof(infos[0]) };
	unsigned int i;

	/* count 0, no array: only the total */
	ASSERT_EQ(0, gp_ioctl(self->fd, GDRPEER_IOCTL_LIST_DEVICES, &ld));
	ASSERT_LE(1, ld.total);

	memset(infos, 0xff, sizeof(infos));
	ld.devices_ptr = (uintptr_t)infos;
	ld.count = 1;
	ASSERT_EQ(0, gp_ioctl(self->fd, GDRPEER_IOCTL_LIST_DEVICES, &ld));
	/* only one entry written even when more devices exist */
	for (i = 1; i < 4; i++)
		EXPECT_EQ(0xffffffffu, infos[i].index);
	EXPECT_EQ(GDRPEER_PROVIDER_PCIBAR, infos[0].provider);
	EXPECT_EQ(gp_sysfs(infos[0].index, "bar_size"),
		  (long long)infos[0].bar_size);
	EXPECT_EQ(gp_sysfs(infos[0].index, "bar"), infos[0].bar);
	EXPECT_EQ(self->page, infos[0].alloc_align);
	for (i = 0; i < 4; i++)
		EXPECT_EQ(0, infos[0].reserved[i]);
}

GP_TEST_F(gp, alloc_query_free)
{
	struct gdrpeer_alloc a;
	struct gdrpeer_query q;
	long long free0 = gp_sysfs(self->dev, "free_bytes");

	ASSERT_EQ(0, gp_alloc(self->fd, self->dev, 4 * self->page, &a));
	EXPECT_NE(0, a.handle);
	EXPECT_EQ(0, a.mmap_offset % self->page);
	EXPECT_EQ(0, a.bar_offset % self->page);
	EXPECT_EQ(1, gp_sysfs(self->dev, "allocations"));
	EXPECT_EQ((long long)(4 * self->page),
		  gp_sysfs(self->dev, "alloc_bytes"));
	EXPECT_EQ(free0 - (long long)(4 * self->page),
		  gp_sysfs(self->dev, "free_bytes"));

	ASSERT_EQ(0, gp_query(self->fd, a.handle, &q));
	EXPECT_EQ(a.handle, q.handle);
	EXPECT_EQ(4 * self->page, q.size);
	EXPECT_EQ(a.mmap_offset, q.mmap_offset);
	EXPECT_EQ(a.bar_offset, q.bar_offset);
	EXPECT_EQ(self->dev, q.device);
	EXPECT_EQ(0, q.exports);

	EXPECT_EQ(0, gp_free(self->fd, a.handle));
	EXPECT_EQ(free0, gp_sysfs(self->dev, "free_bytes"));
}

GP_TEST_F(gp, handles_distinct)
{
	struct gdrpeer_alloc a, b;

	ASSERT_EQ(0, gp_alloc(self->fd, self->dev, self->page, &a));
	ASSERT_EQ(0, gp_alloc(self->fd, self->dev, self->page, &b));
	EXPECT_NE(a.handle, b.handle);
	EXPECT_NE(a.mmap_offset, b.mmap_offset);
	EXPECT_NE(a.bar_offset, b.bar_offset);
	EXPECT_EQ(0, gp_free(self->fd, a.handle));
	EXPECT_EQ(0, gp_free(self->fd, b.handle));
}

GP_TEST_F(gp, mmap_read_write)
{
	struct gdrpeer_alloc a;
	uint64_t size = 4 * self->page, i;
	uint32_t *p, *q;
	int err;

	ASSERT_EQ(0, gp_alloc(self->fd, self->dev, size, &a));
	p = gp_mmap(self->fd, size, MAP_SHARED, a.mmap_offset, &err);
	ASSERT_NE(NULL, p) TH_LOG("mmap: %s", strerror(err));
	for (i = 0; i < size / 4; i++)
		p[i] = (uint32_t)(i * 2654435761u);
	/* a second mapping of the last page sees the same memory */
	q = gp_mmap(self->fd, self->page, MAP_SHARED,
		    a.mmap_offset + 3 * self->page, &err);
	ASSERT_NE(NULL, q) TH_LOG("mmap at offset: %s", strerror(err));
	for (i = 0; i < self->page / 4; i++)
		ASSERT_EQ((uint32_t)((i + 3 * self->page / 4) * 2654435761u),
			  q[i]);
	EXPECT_EQ(0, munmap(q, self->page));
	EXPECT_EQ(0, munmap(p, size));
	EXPECT_EQ(0, gp_free(self->fd, a.handle));
}

GP_TEST_F(gp, export_dmabuf_fd)
{
	struct gdrpeer_alloc a;
	struct gdrpeer_query q;
	char path[64], line[256];
	int dfd, flags, found = 0;
	FILE *f;

	ASSERT_EQ(0, gp_alloc(self->fd, self->dev, 8 * self->page, &a));
	dfd = gp_export(self->fd, a.handle, 2 * self->page, 4 * self->page);
	ASSERT_LE(0, dfd) TH_LOG("export: %s", strerror(-dfd));
	flags = fcntl(dfd, F_GETFD);
	EXPECT_TRUE(flags & FD_CLOEXEC);
	flags = fcntl(dfd, F_GETFL);
	EXPECT_EQ(O_RDWR, flags & O_ACCMODE);
	/* dma-buf reports its size through SEEK_END */
	EXPECT_EQ((off_t)(4 * self->page), lseek(dfd, 0, SEEK_END));
	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", dfd);
	f = fopen(path, "r");
	ASSERT_NE(NULL, f);
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, "exp_name:", 9) && strstr(line, "gdrpeer"))
			found = 1;
	fclose(f);
	EXPECT_TRUE(found) TH_LOG("fdinfo has no exp_name gdrpeer");
	EXPECT_EQ(1, gp_sysfs(self->dev, "exports"));
	ASSERT_EQ(0, gp_query(self->fd, a.handle, &q));
	EXPECT_EQ(1, q.exports);
	EXPECT_EQ(0, close(dfd));
	EXPECT_EQ(0, gp_sysfs(self->dev, "exports"));
	ASSERT_EQ(0, gp_query(self->fd, a.handle, &q));
	EXPECT_EQ(0, q.exports);
	EXPECT_EQ(0, gp_free(self->fd, a.handle));
}

GP_TEST_F(gp, dmabuf_mmap_same_memory)
{
	struct dma_buf_sync sync = { DMA_BUF_SYNC_START | DMA_BUF_SYNC_RW };
	struct gdrpeer_alloc a;
	uint64_t size = 4 * self->page;
	uint8_t *p, *d;
	int dfd, err;

	ASSERT_EQ(0, gp_alloc(self->fd, self->dev, size, &a));
	p = gp_mmap(self->fd, size, MAP_SHARED, a.mmap_offset, &err);
	ASSERT_NE(NULL, p);
	dfd = gp_export(self->fd, a.handle, self->page, 2 * self->page);
	ASSERT_LE(0, dfd);
	d = gp_mmap(dfd, 2 * self->page, MAP_SHARED, 0, &err);
	ASSERT_NE(NULL, d) TH_LOG("dma-buf mmap: %s", strerror(err));
	p[self->page] = 0x5a;
	p[3 * self->page - 1] = 0xa5;
	EXPECT_EQ(0x5a, d[0]);
	EXPECT_EQ(0xa5, d[2 * self->page - 1]);
	/* write-combined everywhere: the CPU access brackets just succeed */
	EXPECT_EQ(0, gp_ioctl(dfd, DMA_BUF_IOCTL_SYNC, &sync));
	d[1] = 0x77;
	sync.flags = DMA_BUF_SYNC_END | DMA_BUF_SYNC_RW;
	EXPECT_EQ(0, gp_ioctl(dfd, DMA_BUF_IOCTL_SYNC, &sync));
	EXPECT_EQ(0x77, p[self->page + 1]);
	EXPECT_EQ(0, munmap(d, 2 * self->page));
	EXPECT_EQ(0, close(dfd));
	EXPECT_EQ(0, munmap(p, size));
	EXPECT_EQ(0, gp_free(self->fd, a.handle));
}

GP_TEST_F(gp, fork_shares_open_file_handles)
{
	struct gdrpeer_alloc a;
	struct gdrpeer_query q;
	int status;
	pid_t pid;

	ASSERT_EQ(0, gp_alloc(self->fd, self->dev, self->page, &a));
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0)
		_exit(gp_query(self->fd, a.handle, &q) == 0 ? 0 : 1);
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	/* same open file description: the handle is valid there too */
	EXPECT_EQ(0, WEXITSTATUS(status));
	EXPECT_EQ(0, gp_free(self->fd, a.handle));
}

/* ---- bad input: allocation --------------------------------------------- */

GP_TEST_F(gp, bad_alloc_size_zero_einval)
{
	struct gdrpeer_alloc a;

	EXPECT_EQ(-EINVAL, gp_alloc(self->fd, self->dev, 0, &a));
}

GP_TEST_F(gp, bad_alloc_size_not_page_multiple_einval)
{
	struct gdrpeer_alloc a;

	EXPECT_EQ(-EINVAL, gp_alloc(self->fd, self->dev, self->page + 1, &a));
	EXPECT_EQ(-EINVAL, gp_alloc(self->fd, self->dev, self->page / 2, &a));
}

GP_TEST_F(gp, bad_alloc_larger_than_bar_e2big)
{
	struct gdrpeer_alloc a;

	EXPECT_EQ(-E2BIG, gp_alloc(self->fd, self->dev,
				   self->bar_size + self->page, &a));
	/* a size whose page rounding would wrap */
	EXPECT_EQ(-E2BIG, gp_alloc(self->fd, self->dev,
				   ~(self->page - 1), &a));
}

GP_TEST_F(gp, bad_alloc_unknown_device_enodev)
{
	struct gdrpeer_alloc a;

	EXPECT_EQ(-ENODEV, gp_alloc(self->fd, 0x7fffffff, self->page, &a));
	EXPECT_EQ(-ENODEV, gp_alloc(self->fd, 0xffffffff, self->page, &a));
}

GP_TEST_F(gp, bad_alloc_flags_einval)
{
	struct gdrpeer_alloc a = { .device = self->dev, .size = self->page,
				   .flags = 1 };

	EXPECT_EQ(-EINVAL, gp_ioctl(self->fd, GDRPEER_IOCTL_ALLOC, &a));
}

GP_TEST_F(gp, bad_reserved_nonzero_einval)
{
	struct gdrpeer_alloc a = { .device = self->dev, .size = self->page };
	struct gdrpeer_info in = { .abi_version = GDRPEER_ABI_VERSION };
	struct gdrpeer_list_devices ld = {
		.entry_size = sizeof(struct gdrpeer_device_info) };
	struct gdrpeer_free f = { 0 };
	struct gdrpeer_export e = { 0 };
	struct gdrpeer_query q = { 0 };

	a.reserved[2] = 1;
	EXPECT_EQ(-EINVAL, gp_ioctl(self->fd, GDRPEER_IOCTL_ALLOC, &a));
	in.reserved[3] = 1;
	EXPECT_EQ(-EINVAL, gp_ioctl(self->fd, GDRPEER_IOCTL_INFO, &in));
	in.reserved[3] = 0;
	in.pad0 = 1;
	EXPECT_EQ(-EINVAL, gp_ioctl(self->fd, GDRPEER_IOCTL_INFO, &in));
	ld.reserved[0] = 1;
	EXPECT_EQ(-EINVAL, gp_ioctl(self->fd, GDRPEER_IOCTL_LIST_DEVICES,
				    &ld));
	ld.reserved[0] = 0;
	ld.pad0 = 1;
	EXPECT_EQ(-EINVAL, gp_ioctl(self->fd, GDRPEER_IOCTL_LIST_DEVICES,
				    &ld));

	/* on a valid handle, so the reserved field is the only fault */
	a.reserved[2] = 0;
	ASSERT_EQ(0, gp_ioctl(self->fd, GDRPEER_IOCTL_ALLOC, &a));
	f.handle = a.handle;
	f.reserved[1] = 1;
	EXPECT_EQ(-EINVAL, gp_ioctl(self->fd, GDRPEER_IOCTL_FREE, &f));
	e.handle = a.handle;
	e.length = self->page;
	e.reserved[0] = 1;
	EXPECT_EQ(-EINVAL, gp_ioctl(self->fd, GDRPEER_IOCTL_EXPORT, &e));
	e.reserved[0] = 0;
	e.flags = 1;
	EXPECT_EQ(-EINVAL, gp_ioctl(self->fd, GDRPEER_IOCTL_EXPORT, &e));
	q.handle = a.handle;
	q.reserved[2] = 1;
	EXPECT_EQ(-EINVAL, gp_ioctl(self->fd, GDRPEER_IOCTL_QUERY, &q));
	/* none of the refused calls changed anything */
	EXPECT_EQ(0, gp_sysfs(self->dev, "exports"));
	EXPECT_EQ(0, gp_free(self->fd, a.handle));
}

GP_TEST_F(gp, bad_list_entry_size_einval)
{
	struct gdrpeer_device_info info;
	struct gdrpeer_list_devices ld = {
		.devices_ptr = (uintptr_t)&info, .count = 1,
		.entry_size = sizeof(info) - 8 };

	EXPECT_EQ(-EINVAL, gp_ioctl(self->fd, GDRPEER_IOCTL_LIST_DEVICES,
				    &ld));
}

GP_TEST_F(gp, bad_list_pointer_efault)
{
	struct gdrpeer_list_devices ld = {
		.devices_ptr = 8, .count = 1,
		.entry_size = sizeof(struct gdrpeer_device_info) };

	EXPECT_EQ(-EFAULT, gp_ioctl(self->fd, GDRPEER_IOCTL_LIST_DEVICES,
				    &ld));
}

GP_TEST_F(gp, bad_ioctl_arg_pointer_efault)
{
	EXPECT_EQ(-EFAULT, gp_ioctl(self->fd, GDRPEER_IOCTL_ALLOC,
				    (void *)8));
	EXPECT_EQ(-EFAULT, gp_ioctl(self->fd, GDRPEER_IOCTL_INFO, NULL));
}

/* ---- bad input: ioctl numbers and struct sizes ---------------------------- */

GP_TEST_F(gp, bad_ioctl_unknown_number_enotty)
{
	char buf[256] = { 0 };

	EXPECT_EQ(-ENOTTY, gp_ioctl(self->fd,
		_IOWR(GDRPEER_IOCTL_MAGIC, 0x3f, struct gdrpeer_alloc), buf));
	/* 0x06 is GDRPEER_IOCTL_EXPORT_VA since ABI 1.1: 0x07 is the first free */
	EXPECT_EQ(-ENOTTY, gp_ioctl(self->fd,
		_IOWR(GDRPEER_IOCTL_MAGIC, 0x07, struct gdrpeer_alloc), buf));
	/* another magic with an otherwise valid layout */
	EXPECT_EQ(-ENOTTY, gp_ioctl(self->fd,
		_IOWR(GDRPEER_IOCTL_MAGIC + 1, 0x02, struct gdrpeer_alloc),
		buf));
	EXPECT_EQ(-ENOTTY, gp_ioctl(self->fd, 0, buf));
}

GP_TEST_F(gp, bad_ioctl_short_struct_einval)
{
	char buf[256] = { 0 };
	struct gdrpeer_alloc *a = (void *)buf;

	a->device = self->dev;
	a->size = self->page;
	EXPECT_EQ(-EINVAL, gp_ioctl(self->fd,
		_IOC(_IOC_READ | _IOC_WRITE, GDRPEER_IOCTL_MAGIC, 0x02,
		     sizeof(struct gdrpeer_alloc) - 8), buf));
	EXPECT_EQ(-EINVAL, gp_ioctl(self->fd,
		_IOC(_IOC_READ | _IOC_WRITE, GDRPEER_IOCTL_MAGIC, 0x00, 4),
		buf));
	/* EXPORT_VA (ABI 1.1) is a known number: a short struct is -EINVAL */
	EXPECT_EQ(-EINVAL, gp_ioctl(self->fd,
		_IOC(_IOC_READ | _IOC_WRITE, GDRPEER_IOCTL_MAGIC, 0x06,
		     sizeof(struct gdrpeer_export_va) - 8), buf));
	EXPECT_EQ(0, gp_sysfs(self->dev, "allocations"));
}

GP_TEST_F(gp, bad_ioctl_oversized_struct_einval)
{
	char buf[256] = { 0 };
	struct gdrpeer_alloc *a = (void *)buf;

	a->device = self->dev;
	a->size = self->page;
	EXPECT_EQ(-EINVAL, gp_ioctl(self->fd,
		_IOC(_IOC_READ | _IOC_WRITE, GDRPEER_IOCTL_MAGIC, 0x02,
		     sizeof(struct gdrpeer_alloc) + 8), buf));
	EXPECT_EQ(-EINVAL, gp_ioctl(self->fd,
		_IOC(_IOC_READ | _IOC_WRITE, GDRPEER_IOCTL_MAGIC, 0x00, 200),
		buf));
	EXPECT_EQ(-EINVAL, gp_ioctl(self->fd,
		_IOC(_IOC_READ | _IOC_WRITE, GDRPEER_IOCTL_MAGIC, 0x06,
		     sizeof(struct gdrpeer_export_va) + 8), buf));
	EXPECT_EQ(0, gp_sysfs(self->dev, "allocations"));
}

GP_TEST_F(gp, bad_ioctl_wrong_direction_einval)
{
	struct gdrpeer_alloc a = { .device = self->dev, .size = self->page };

	EXPECT_EQ(-EINVAL, gp_ioctl(self->fd,
		_IOW(GDRPEER_IOCTL_MAGIC, 0x02, struct gdrpeer_alloc), &a));
	EXPECT_EQ(0, gp_sysfs(self->dev, "allocations"));
}

/* ---- bad input: handles --------------------------------------------------- */

GP_TEST_F(gp, bad_handle_unknown_enoent)
{
	struct gdrpeer_query q;
	uint64_t bogus[] = { 0, 1, 0x12345678, ~0ull, 1ull << 32 };
	unsigned int i;

	for (i = 0; i < sizeof(bogus) / sizeof(bogus[0]); i++) {
		EXPECT_EQ(-ENOENT, gp_query(self->fd, bogus[i], &q));
		EXPECT_EQ(-ENOENT, gp_free(self->fd, bogus[i]));
		EXPECT_EQ(-ENOENT, gp_export(self->fd, bogus[i], 0,
					     self->page));
	}
}

GP_TEST_F(gp, bad_handle_stale_enoent)
{
	struct gdrpeer_alloc a, b;
	struct gdrpeer_query q;

	ASSERT_EQ(0, gp_alloc(self->fd, self->dev, self->page, &a));
	ASSERT_EQ(0, gp_free(self->fd, a.handle));
	EXPECT_EQ(-ENOENT, gp_query(self->fd, a.handle, &q));
	/* a new allocation does not bring the old handle back */
	ASSERT_EQ(0, gp_alloc(self->fd, self->dev, self->page, &b));
	EXPECT_NE(a.handle, b.handle);
	EXPECT_EQ(-ENOENT, gp_query(self->fd, a.handle, &q));
	EXPECT_EQ(0, gp_free(self->fd, b.handle));
}

GP_TEST_F(gp, bad_handle_other_open_file_enoent)
{
	struct gdrpeer_alloc a, b;
	struct gdrpeer_query q;
	int fd2, err;

	fd2 = open("/dev/gdrpeer", O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, fd2);
	ASSERT_EQ(0, gp_alloc(self->fd, self->dev, self->page, &a));
	/* fd2 has a handle of its own with the same table slot */
	ASSERT_EQ(0, gp_alloc(fd2, self->dev, self->page, &b));
	EXPECT_NE(a.handle, b.handle);
	EXPECT_EQ(-ENOENT, gp_query(fd2, a.handle, &q));
	EXPECT_EQ(-ENOENT, gp_export(fd2, a.handle, 0, self->page));
	EXPECT_EQ(-ENOENT, gp_free(fd2, a.handle));
	/* the mmap offset names a slot in fd2's own table, not fd1's */
	EXPECT_EQ(a.mmap_offset, b.mmap_offset);
	EXPECT_EQ(0, gp_free(fd2, b.handle));
	EXPECT_EQ(NULL, gp_mmap(fd2, self->page, MAP_SHARED, a.mmap_offset,
				&err));
	EXPECT_EQ(ENOENT, err);
	/* still valid in its own file */
	EXPECT_EQ(0, gp_query(self->fd, a.handle, &q));
	EXPECT_EQ(0, gp_free(self->fd, a.handle));
	close(fd2);
}

GP_TEST_F(gp, bad_handle_other_process_enoent)
{
	struct gdrpeer_alloc a;
	int status;
	pid_t pid;

	ASSERT_EQ(0, gp_alloc(self->fd, self->dev, self->page, &a));
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		struct gdrpeer_query q;
		int fd = open("/dev/gdrpeer", O_RDWR);
		int bad = 0;

		if (fd < 0)
			_exit(2);
		bad |= gp_query(fd, a.handle, &q) != -ENOENT;
		bad |= gp_export(fd, a.handle, 0, self->page) != -ENOENT;
		bad |= gp_free(fd, a.handle) != -ENOENT;
		_exit(bad);
	}
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	EXPECT_TRUE(WIFEXITED(status));
	EXPECT_EQ(0, WEXITSTATUS(status));
	/* the child's attempt to free did not free it */
	EXPECT_EQ(1, gp_sysfs(self->dev, "allocations"));
	EXPECT_EQ(0, gp_free(self->fd, a.handle));
}

GP_TEST_F(gp, bad_double_free_enoent)
{
	struct gdrpeer_alloc a;

	ASSERT_EQ(0, gp_alloc(self->fd, self->dev, self->page, &a));
	EXPECT_EQ(0, gp_free(self->fd, a.handle));
	EXPECT_EQ(-ENOENT, gp_free(self->fd, a.handle));
}

GP_TEST_F(gp, bad_export_freed_handle_enoent)
{
	struct gdrpeer_alloc a;

	ASSERT_EQ(0, gp_alloc(self->fd, self->dev, self->page, &a));
	EXPECT_EQ(0, gp_free(self->fd, a.handle));
	EXPECT_EQ(-ENOENT, gp_export(self->fd, a.handle, 0, self->page));
}

/* ---- bad input: export ranges ----------------------------------------------- */

GP_TEST_F(gp, bad_export_offset_length_overflow_eoverflow)
{
	struct gdrpeer_alloc a;

	ASSERT_EQ(0, gp_alloc(self->fd, self->dev, 2 * self->page, &a));
	EXPECT_EQ(-EOVERFLOW, gp_export(self->fd, a.handle, self->page,
					~(self->page - 1)));
	EXPECT_EQ(-EOVERFLOW, gp_export(self->fd, a.handle,
					~(self->page - 1), 2 * self->page));
	EXPECT_EQ(0, gp_sysfs(self->dev, "exports"));
	EXPECT_EQ(0, gp_free(self->fd, a.handle));
}

GP_TEST_F(gp, bad_export_beyond_buffer_einval)
{
	struct gdrpeer_alloc a;

	ASSERT_EQ(0, gp_alloc(self->fd, self->dev, 2 * self->page, &a));
	EXPECT_EQ(-EINVAL, gp_export(self->fd, a.handle, 0, 3 * self->page));
	EXPECT_EQ(-EINVAL, gp_export(self->fd, a.handle, self->page,
				     2 * self->page));
	EXPECT_EQ(-EINVAL, gp_export(self->fd, a.handle, 2 * self->page,
				     self->page));
	EXPECT_EQ(0, gp_free(self->fd, a.handle));
}

GP_TEST_F(gp, bad_export_length_zero_einval)
{
	struct gdrpeer_alloc a;

	ASSERT_EQ(0, gp_alloc(self->fd, self->dev, self->page, &a));
	EXPECT_EQ(-EINVAL, gp_export(self->fd, a.handle, 0, 0));
	EXPECT_EQ(0, gp_free(self->fd, a.handle));
}

GP_TEST_F(gp, bad_export_unaligned_einval)
{
	struct gdrpeer_alloc a;

	ASSERT_EQ(0, gp_alloc(self->fd, self->dev, 2 * self->page, &a));
	EXPECT_EQ(-EINVAL, gp_export(self->fd, a.handle, 1, self->page));
	EXPECT_EQ(-EINVAL, gp_export(self->fd, a.handle, 0, self->page + 8));
	EXPECT_EQ(0, gp_free(self->fd, a.handle));
}

/* ---- bad input: mmap -------------------------------------------------------- */

GP_TEST_F(gp, bad_mmap_beyond_buffer_einval)
{
	struct gdrpeer_alloc a;
	int err;

	ASSERT_EQ(0, gp_alloc(self->fd, self->dev, 2 * self->page, &a));
	EXPECT_EQ(NULL, gp_mmap(self->fd, 3 * self->page, MAP_SHARED,
				a.mmap_offset, &err));
	EXPECT_EQ(EINVAL, err);
	EXPECT_EQ(NULL, gp_mmap(self->fd, 2 * self->page, MAP_SHARED,
				a.mmap_offset + self->page, &err));
	EXPECT_EQ(EINVAL, err);
	EXPECT_EQ(NULL, gp_mmap(self->fd, self->page, MAP_SHARED,
				a.mmap_offset + 2 * self->page, &err));
	EXPECT_EQ(EINVAL, err);
	EXPECT_EQ(0, gp_free(self->fd, a.handle));
}

GP_TEST_F(gp, bad_mmap_wrong_offset_enoent)
{
	struct gdrpeer_alloc a;
	int err;

	ASSERT_EQ(0, gp_alloc(self->fd, self->dev, self->page, &a));
	/* offset 0 and a window no handle owns */
	EXPECT_EQ(NULL, gp_mmap(self->fd, self->page, MAP_SHARED, 0, &err));
	EXPECT_EQ(ENOENT, err);
	EXPECT_EQ(NULL, gp_mmap(self->fd, self->page, MAP_SHARED,
				a.mmap_offset +
				(1ull << GDRPEER_MMAP_WINDOW_SHIFT), &err));
	EXPECT_EQ(ENOENT, err);
	EXPECT_EQ(0, gp_free(self->fd, a.handle));
	/* the freed handle's window */
	EXPECT_EQ(NULL, gp_mmap(self->fd, self->page, MAP_SHARED,
				a.mmap_offset, &err));
	EXPECT_EQ(ENOENT, err);
}

GP_TEST_F(gp, bad_mmap_private_einval)
{
	struct gdrpeer_alloc a;
	int err;

	ASSERT_EQ(0, gp_alloc(self->fd, self->dev, self->page, &a));
	EXPECT_EQ(NULL, gp_mmap(self->fd, self->page, MAP_PRIVATE,
				a.mmap_offset, &err));
	EXPECT_EQ(EINVAL, err);
	EXPECT_EQ(0, gp_free(self->fd, a.handle));
}

GP_TEST_F(gp, bad_mmap_cannot_grow)
{
	struct gdrpeer_alloc a;
	void *p, *q;
	int err;

	ASSERT_EQ(0, gp_alloc(self->fd, self->dev, 2 * self->page, &a));
	p = gp_mmap(self->fd, self->page, MAP_SHARED, a.mmap_offset, &err);
	ASSERT_NE(NULL, p);
	/* VM_DONTEXPAND: mremap may not make the mapping larger */
	q = mremap(p, self->page, 2 * self->page, MREMAP_MAYMOVE);
	EXPECT_EQ(MAP_FAILED, q);
	EXPECT_EQ(EFAULT, errno);
	EXPECT_EQ(0, munmap(p, self->page));
	EXPECT_EQ(0, gp_free(self->fd, a.handle));
}

GP_TEST_F(gp, bad_dmabuf_mmap_beyond_einval)
{
	struct gdrpeer_alloc a;
	int dfd, err;

	ASSERT_EQ(0, gp_alloc(self->fd, self->dev, 4 * self->page, &a));
	dfd = gp_export(self->fd, a.handle, 0, 2 * self->page);
	ASSERT_LE(0, dfd);
	EXPECT_EQ(NULL, gp_mmap(dfd, 3 * self->page, MAP_SHARED, 0, &err));
	EXPECT_EQ(EINVAL, err);
	EXPECT_EQ(NULL, gp_mmap(dfd, self->page, MAP_SHARED,
				2 * self->page, &err));
	EXPECT_EQ(EINVAL, err);
	EXPECT_EQ(NULL, gp_mmap(dfd, self->page, MAP_PRIVATE, 0, &err));
	EXPECT_EQ(EINVAL, err);
	close(dfd);
	EXPECT_EQ(0, gp_free(self->fd, a.handle));
}

/* ---- bad input: exhaustion ------------------------------------------------- */

GP_TEST_F(gp, bar_full_enomem_then_recovers)
{
	uint64_t chunk = 1ull << 20, n = self->bar_size / chunk, i;
	uint64_t *handles;
	struct gdrpeer_alloc a;

	handles = calloc(n, sizeof(*handles));
	ASSERT_NE(NULL, handles);
	for (i = 0; i < n; i++) {
		ASSERT_EQ(0, gp_alloc(self->fd, self->dev, chunk, &a))
			TH_LOG("allocation %llu of %llu",
			       (unsigned long long)i, (unsigned long long)n);
		handles[i] = a.handle;
	}
	EXPECT_EQ(0, gp_sysfs(self->dev, "free_bytes"));
	EXPECT_EQ(-ENOMEM, gp_alloc(self->fd, self->dev, self->page, &a));
	EXPECT_EQ(-ENOMEM, gp_alloc(self->fd, self->dev, chunk, &a));
	/* one hole: exactly that much fits again, no more */
	EXPECT_EQ(0, gp_free(self->fd, handles[n / 2]));
	EXPECT_EQ(-ENOMEM, gp_alloc(self->fd, self->dev, 2 * chunk, &a));
	ASSERT_EQ(0, gp_alloc(self->fd, self->dev, chunk, &a));
	handles[n / 2] = a.handle;
	for (i = 0; i < n; i++)
		EXPECT_EQ(0, gp_free(self->fd, handles[i]));
	free(handles);
	/* full recovery: the whole BAR in one piece */
	EXPECT_EQ((long long)self->bar_size, gp_sysfs(self->dev, "free_bytes"));
	ASSERT_EQ(0, gp_alloc(self->fd, self->dev, self->bar_size, &a));
	EXPECT_EQ(0, a.bar_offset);
	EXPECT_EQ(0, gp_free(self->fd, a.handle));
}

GP_HARNESS_MAIN

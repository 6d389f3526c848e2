// SPDX-License-Identifier: GPL-2.0
/*
 * kselftest: exact lifetimes.  Freeing a handle or closing /dev/gdrpeer
 * while a dma-buf or an mmap lives keeps the memory reserved (and its
 * contents) until the last of them goes; the module cannot be unloaded
 * meanwhile.  Needs gdrpeer.ko with one bound device; run as root.
 */
#define _GNU_SOURCE
#include <sys/syscall.h>

#include "gdrpeer_test.h"
#include "kselftest_harness.h"

FIXTURE(lt)
{
	int fd;
	unsigned int dev;
	uint64_t bar_size;
	uint64_t page;
};

FIXTURE_SETUP(lt)
{
	GP_SETUP_DUT(self);
}

FIXTURE_TEARDOWN(lt)
{
	if (self->fd >= 0)
		close(self->fd);
	if (self->bar_size) {
		EXPECT_EQ(0, gp_sysfs(self->dev, "allocations"));
		EXPECT_EQ(0, gp_sysfs(self->dev, "exports"));
		EXPECT_EQ((long long)self->bar_size,
			  gp_sysfs(self->dev, "free_bytes"));
	}
}

static long long reserved_bytes(FIXTURE_DATA(lt) *self)
{
	return (long long)self->bar_size - gp_sysfs(self->dev, "free_bytes");
}

static void fill(uint8_t *p, uint64_t n, uint8_t seed)
{
	uint64_t i;

	for (i = 0; i < n; i++)
		p[i] = (uint8_t)(seed + i * 7);
}

static int check(const uint8_t *p, uint64_t n, uint8_t seed)
{
	uint64_t i;

	for (i = 0; i < n; i++)
		if (p[i] != (uint8_t)(seed + i * 7))
			return 0;
	return 1;
}

/* delete_module without waiting: the module is in use -> EWOULDBLOCK */
static int try_unload(void)
{
	return syscall(SYS_delete_module, "gdrpeer", O_NONBLOCK) ? errno : 0;
}

GP_TEST_F(lt, free_while_exported_keeps_memory)
{
	uint64_t size = 4 * self->page;
	struct gdrpeer_alloc a;
	uint8_t *p, *d;
	int dfd, err;

	ASSERT_EQ(0, gp_alloc(self->fd, self->dev, size, &a));
	p = gp_mmap(self->fd, size, MAP_SHARED, a.mmap_offset, &err);
	ASSERT_NE(NULL, p);
	fill(p, size, 3);
	ASSERT_EQ(0, munmap(p, size));
	dfd = gp_export(self->fd, a.handle, 0, size);
	ASSERT_LE(0, dfd);
	ASSERT_EQ(0, gp_free(self->fd, a.handle));

	/* the handle is gone, the memory is not */
	EXPECT_EQ(1, gp_sysfs(self->dev, "allocations"));
	EXPECT_EQ((long long)size, reserved_bytes(self));
	d = gp_mmap(dfd, size, MAP_SHARED, 0, &err);
	ASSERT_NE(NULL, d) TH_LOG("dma-buf mmap after free: %s",
				  strerror(err));
	EXPECT_TRUE(check(d, size, 3));
	EXPECT_EQ(0, munmap(d, size));
	EXPECT_EQ(0, close(dfd));
	EXPECT_EQ(0, gp_sysfs(self->dev, "allocations"));
	EXPECT_EQ(0, reserved_bytes(self));
}

GP_TEST_F(lt, close_device_while_exported_keeps_memory)
{
	uint64_t size = 2 * self->page;
	struct gdrpeer_alloc a;
	uint8_t *d;
	int fd2, dfd, err;

	fd2 = open("/dev/gdrpeer", O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, fd2);
	ASSERT_EQ(0, gp_alloc(fd2, self->dev, size, &a));
	dfd = gp_export(fd2, a.handle, 0, size);
	ASSERT_LE(0, dfd);
	ASSERT_EQ(0, close(fd2));

	EXPECT_EQ(1, gp_sysfs(self->dev, "allocations"));
	EXPECT_EQ(1, gp_sysfs(self->dev, "exports"));
	d = gp_mmap(dfd, size, MAP_SHARED, 0, &err);
	ASSERT_NE(NULL, d);
	fill(d, size, 9);
	EXPECT_TRUE(check(d, size, 9));
	EXPECT_EQ(0, close(dfd));
	/* the mapping holds the dma-buf file, which holds the memory */
	EXPECT_EQ(1, gp_sysfs(self->dev, "allocations"));
	EXPECT_TRUE(check(d, size, 9));
	EXPECT_EQ(0, munmap(d, size));
	EXPECT_EQ(0, gp_sysfs(self->dev, "allocations"));
	EXPECT_EQ(0, gp_sysfs(self->dev, "exports"));
}

GP_TEST_F(lt, free_while_mmapped_keeps_memory)
{
	uint64_t size = 2 * self->page;
	struct gdrpeer_alloc a;
	uint8_t *p;
	int err;

	ASSERT_EQ(0, gp_alloc(self->fd, self->dev, size, &a));
	p = gp_mmap(self->fd, size, MAP_SHARED, a.mmap_offset, &err);
	ASSERT_NE(NULL, p);
	ASSERT_EQ(0, gp_free(self->fd, a.handle));
	EXPECT_EQ(1, gp_sysfs(self->dev, "allocations"));
	fill(p, size, 5);
	EXPECT_TRUE(check(p, size, 5));
	/* mappings go as a whole (PAT tracks them per vma): no split */
	EXPECT_EQ(-1, munmap(p, self->page));
	EXPECT_EQ(EINVAL, errno);
	EXPECT_EQ(1, gp_sysfs(self->dev, "allocations"));
	EXPECT_TRUE(check(p, size, 5));
	EXPECT_EQ(0, munmap(p, size));
	EXPECT_EQ(0, gp_sysfs(self->dev, "allocations"));
}

GP_TEST_F(lt, mmap_outlives_close)
{
	uint64_t size = self->page;
	struct gdrpeer_alloc a;
	uint8_t *p;
	int fd2, err;

	fd2 = open("/dev/gdrpeer", O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, fd2);
	ASSERT_EQ(0, gp_alloc(fd2, self->dev, size, &a));
	p = gp_mmap(fd2, size, MAP_SHARED, a.mmap_offset, &err);
	ASSERT_NE(NULL, p);
	ASSERT_EQ(0, close(fd2));
	EXPECT_EQ(1, gp_sysfs(self->dev, "allocations"));
	fill(p, size, 1);
	EXPECT_TRUE(check(p, size, 1));
	EXPECT_EQ(0, munmap(p, size));
	EXPECT_EQ(0, gp_sysfs(self->dev, "allocations"));
}

GP_TEST_F(lt, memory_not_reused_while_exported)
{
	uint64_t size = 2 * self->page;
	struct gdrpeer_alloc a, b;
	int dfd;

	ASSERT_EQ(0, gp_alloc(self->fd, self->dev, size, &a));
	dfd = gp_export(self->fd, a.handle, 0, size);
	ASSERT_LE(0, dfd);
	ASSERT_EQ(0, gp_free(self->fd, a.handle));
	/* a new allocation never lands on memory a dma-buf still covers */
	ASSERT_EQ(0, gp_alloc(self->fd, self->dev, size, &b));
	EXPECT_NE(a.bar_offset, b.bar_offset);
	EXPECT_EQ(0, gp_free(self->fd, b.handle));
	EXPECT_EQ(0, close(dfd));
}

GP_TEST_F(lt, exports_counted_per_handle)
{
	struct gdrpeer_alloc a;
	struct gdrpeer_query q;
	int d1, d2;

	ASSERT_EQ(0, gp_alloc(self->fd, self->dev, 2 * self->page, &a));
	d1 = gp_export(self->fd, a.handle, 0, self->page);
	d2 = gp_export(self->fd, a.handle, self->page, self->page);
	ASSERT_LE(0, d1);
	ASSERT_LE(0, d2);
	ASSERT_EQ(0, gp_query(self->fd, a.handle, &q));
	EXPECT_EQ(2, q.exports);
	EXPECT_EQ(2, gp_sysfs(self->dev, "exports"));
	EXPECT_EQ(0, close(d1));
	ASSERT_EQ(0, gp_query(self->fd, a.handle, &q));
	EXPECT_EQ(1, q.exports);
	EXPECT_EQ(0, close(d2));
	EXPECT_EQ(0, gp_sysfs(self->dev, "exports"));
	EXPECT_EQ(0, gp_free(self->fd, a.handle));
}

GP_TEST_F(lt, rmmod_refused_while_dmabuf_lives)
{
	struct gdrpeer_alloc a;
	int dfd;

	ASSERT_EQ(0, gp_alloc(self->fd, self->dev, self->page, &a));
	dfd = gp_export(self->fd, a.handle, 0, self->page);
	ASSERT_LE(0, dfd);
	/* only the dma-buf is left */
	ASSERT_EQ(0, close(self->fd));
	self->fd = -1;
	EXPECT_EQ(EWOULDBLOCK, try_unload());
	EXPECT_EQ(1, gp_sysfs(self->dev, "allocations"));
	EXPECT_EQ(0, close(dfd));
}

GP_TEST_F(lt, rmmod_refused_while_mmap_lives)
{
	struct gdrpeer_alloc a;
	void *p;
	int err;

	ASSERT_EQ(0, gp_alloc(self->fd, self->dev, self->page, &a));
	p = gp_mmap(self->fd, self->page, MAP_SHARED, a.mmap_offset, &err);
	ASSERT_NE(NULL, p);
	/* only the mapping is left */
	ASSERT_EQ(0, close(self->fd));
	self->fd = -1;
	EXPECT_EQ(EWOULDBLOCK, try_unload());
	EXPECT_EQ(0, munmap(p, self->page));
}

GP_HARNESS_MAIN

// SPDX-License-Identifier: GPL-2.0
/*
 * kselftest: the nvidia_p2p stand-in's own rules, seen from userspace
 * (gdrpeer_nvstub.ko, see selftests/kmod/gdrpeer_nvstub.h): fake cuMemAlloc
 * and cuMemFree, their refusals, the page order of default and SCATTER
 * allocations, VA rules, the free on close and the sysfs knobs.  The
 * nvidia_p2p_* functions themselves are exercised through gdrpeer.ko by
 * other tests; so is the poisoning of freed pages, which only the host can
 * see (the BAR file): the module holds the BAR region, so
 * /sys/bus/pci/.../resource2 cannot be mapped here.
 * Needs: insmod gdrpeer_nvstub.ko bar=$GDRPEER_GPU_BDF, run as root, no
 * other user of the stand-in meanwhile.
 */
#define _GNU_SOURCE

#include "gdrpeer_test.h"
#include "gdrpeer_nvstub_test.h"
#include "kselftest_harness.h"

#define PG NVSTUB_PAGE_SIZE
#define MAXPAGES 64

/* BAR 2 size of $GDRPEER_GPU_BDF from sysfs; 0 when unknown */
static uint64_t gpu_bar_size(void)
{
	unsigned long long start = 0, end = 0, flags;
	const char *bdf = getenv("GDRPEER_GPU_BDF");
	char rpath[128];
	unsigned int i;
	FILE *f;

	if (!bdf || !*bdf)
		return 0;
	snprintf(rpath, sizeof(rpath), "/sys/bus/pci/devices/%s%s/resource",
		 strlen(bdf) < 10 ? "0000:" : "", bdf);
	f = fopen(rpath, "r");
	if (!f)
		return 0;
	for (i = 0; i <= 2; i++)
		if (fscanf(f, "%llx %llx %llx", &start, &end, &flags) != 3) {
			end = start = 0;
			break;
		}
	fclose(f);
	return end > start ? end - start + 1 : 0;
}

FIXTURE(nv)
{
	int fd;
	long long violations, callbacks;
	uint64_t bar_size;
};

FIXTURE_SETUP(nv)
{
	self->fd = open(NVSTUB_DEVICE_PATH, O_RDWR | O_CLOEXEC);
	if (self->fd < 0)
		SKIP(return, "%s: %s (is gdrpeer_nvstub.ko loaded?)",
		     NVSTUB_DEVICE_PATH, strerror(errno));
	self->bar_size = gpu_bar_size();
	ASSERT_EQ(0, gp_nvstub_num("allocations"))
		TH_LOG("someone else has allocations in the stand-in");
	ASSERT_EQ(0, gp_nvstub_num("pins"));
	ASSERT_EQ(0, gp_nvstub_num("dma_mappings"));
	self->violations = gp_nvstub_num("violations");
	self->callbacks = gp_nvstub_num("callbacks");
	ASSERT_LE(0, self->violations);
	ASSERT_LE(0, self->callbacks);
}

FIXTURE_TEARDOWN(nv)
{
	if (self->fd < 0)
		return;
	close(self->fd);
	/* closing frees whatever a failed test left behind */
	EXPECT_EQ(0, gp_nvstub_num("allocations"));
	EXPECT_EQ(0, gp_nvstub_num("pins"));
	EXPECT_EQ(0, gp_nvstub_num("dma_mappings"));
	/* nothing here pins, so nothing may call back or break a rule */
	EXPECT_EQ(self->violations, gp_nvstub_num("violations"));
	EXPECT_EQ(self->callbacks, gp_nvstub_num("callbacks"));
}

GP_TEST_F(nv, alloc_free)
{
	uint64_t offs[3], va = 0;
	unsigned int i;

	ASSERT_EQ(0, gp_nvstub_alloc(self->fd, 3 * PG, 0, offs, &va));
	EXPECT_NE(0, va);
	EXPECT_EQ(0, va % PG);
	EXPECT_EQ(1, gp_nvstub_num("allocations"));
	/* default: lowest free pages, ascending (BAR empty: contiguous) */
	for (i = 0; i < 3; i++) {
		EXPECT_EQ(0, offs[i] % PG);
		if (i)
			EXPECT_EQ(offs[i - 1] + PG, offs[i]);
	}
	EXPECT_EQ(0, offs[0]);
	ASSERT_EQ(0, gp_nvstub_free(self->fd, va));
	EXPECT_EQ(0, gp_nvstub_num("allocations"));
	EXPECT_EQ(-ENOENT, gp_nvstub_free(self->fd, va));
}

GP_TEST_F(nv, bad_sizes_and_fields)
{
	struct nvstub_alloc a;
	struct nvstub_free f;

	EXPECT_EQ(-EINVAL, gp_nvstub_alloc(self->fd, 0, 0, NULL, NULL));
	EXPECT_EQ(-EINVAL, gp_nvstub_alloc(self->fd, 4096, 0, NULL, NULL));
	EXPECT_EQ(-EINVAL, gp_nvstub_alloc(self->fd, PG + 4096, 0, NULL, NULL));
	EXPECT_EQ(-EINVAL, gp_nvstub_alloc(self->fd, PG - 1, 0, NULL, NULL));
	EXPECT_EQ(-EINVAL, gp_nvstub_alloc(self->fd, PG, 1u << 5, NULL, NULL));
	/* aligned but larger than any BAR */
	EXPECT_EQ(-ENOMEM, gp_nvstub_alloc(self->fd, 1ull << 50, 0, NULL, NULL));

	memset(&a, 0, sizeof(a));
	a.size = PG;
	a.pad0 = 1;
	EXPECT_EQ(-EINVAL, gp_ioctl(self->fd, NVSTUB_IOCTL_ALLOC, &a));
	a.pad0 = 0;
	a.reserved[1] = 1;
	EXPECT_EQ(-EINVAL, gp_ioctl(self->fd, NVSTUB_IOCTL_ALLOC, &a));
	a.reserved[1] = 0;
	/* an unwritable offsets array: -EFAULT and nothing stays allocated */
	a.bar_offsets_ptr = 8;
	EXPECT_EQ(-EFAULT, gp_ioctl(self->fd, NVSTUB_IOCTL_ALLOC, &a));
	EXPECT_EQ(0, gp_nvstub_num("allocations"));

	memset(&f, 0, sizeof(f));
	f.reserved[2] = 1;
	EXPECT_EQ(-EINVAL, gp_ioctl(self->fd, NVSTUB_IOCTL_FREE, &f));
	EXPECT_EQ(-ENOTTY, gp_ioctl(self->fd, _IO(NVSTUB_MAGIC, 0x7f), NULL));
	EXPECT_EQ(0, gp_nvstub_num("allocations"));
}

GP_TEST_F(nv, scatter_descends)
{
	uint64_t offs[8], va;
	unsigned int i;

	ASSERT_EQ(0, gp_nvstub_alloc(self->fd, 8 * PG, NVSTUB_ALLOC_SCATTER, offs,
			      &va));
	for (i = 0; i < 8; i++) {
		EXPECT_EQ(0, offs[i] % PG);
		if (self->bar_size)
			EXPECT_GT(self->bar_size, offs[i]);
		/* descending: no page directly follows the one before */
		if (i)
			EXPECT_GT(offs[i - 1], offs[i])
				TH_LOG("page %u at %#llx, page %u at %#llx", i - 1,
				       (unsigned long long)offs[i - 1], i,
				       (unsigned long long)offs[i]);
	}
	if (self->bar_size)
		EXPECT_EQ(self->bar_size - PG, offs[0]);
	ASSERT_EQ(0, gp_nvstub_free(self->fd, va));
}

GP_TEST_F(nv, free_needs_the_start)
{
	uint64_t va;

	ASSERT_EQ(0, gp_nvstub_alloc(self->fd, 2 * PG, 0, NULL, &va));
	EXPECT_EQ(-ENOENT, gp_nvstub_free(self->fd, va + PG));
	EXPECT_EQ(-ENOENT, gp_nvstub_free(self->fd, va - PG));
	EXPECT_EQ(-ENOENT, gp_nvstub_free(self->fd, 0));
	EXPECT_EQ(-ENOENT, gp_nvstub_free(self->fd, 0x1000));
	EXPECT_EQ(1, gp_nvstub_num("allocations"));
	ASSERT_EQ(0, gp_nvstub_free(self->fd, va));
}

GP_TEST_F(nv, vas_never_reused_and_per_file)
{
	uint64_t va1, va2, va3, vb;
	int fd2;

	ASSERT_EQ(0, gp_nvstub_alloc(self->fd, PG, 0, NULL, &va1));
	ASSERT_EQ(0, gp_nvstub_alloc(self->fd, 4 * PG, 0, NULL, &va2));
	EXPECT_LE(va1 + PG, va2);
	ASSERT_EQ(0, gp_nvstub_free(self->fd, va1));
	ASSERT_EQ(0, gp_nvstub_alloc(self->fd, PG, 0, NULL, &va3));
	EXPECT_NE(va1, va3);
	EXPECT_LE(va2 + 4 * PG, va3);

	/* another file of the same process: its own, disjoint VAs */
	fd2 = open(NVSTUB_DEVICE_PATH, O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, fd2);
	ASSERT_EQ(0, gp_nvstub_alloc(fd2, PG, 0, NULL, &vb));
	EXPECT_TRUE(vb + PG <= va1 || vb >= va3 + PG);
	/* one file cannot free the other's memory */
	EXPECT_EQ(-ENOENT, gp_nvstub_free(fd2, va2));
	EXPECT_EQ(-ENOENT, gp_nvstub_free(self->fd, vb));
	EXPECT_EQ(3, gp_nvstub_num("allocations"));
	close(fd2);
	EXPECT_EQ(2, gp_nvstub_num("allocations"));
	EXPECT_EQ(0, gp_nvstub_free(self->fd, va2));
	EXPECT_EQ(0, gp_nvstub_free(self->fd, va3));
}

GP_TEST_F(nv, close_frees_everything)
{
	uint64_t offs[4], va;
	unsigned int i;
	int fd2;

	fd2 = open(NVSTUB_DEVICE_PATH, O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, fd2);
	for (i = 0; i < 5; i++)
		ASSERT_EQ(0, gp_nvstub_alloc(fd2, 2 * PG, i & 1 ? NVSTUB_ALLOC_SCATTER
							  : 0, NULL, &va));
	EXPECT_EQ(5, gp_nvstub_num("allocations"));
	close(fd2);
	EXPECT_EQ(0, gp_nvstub_num("allocations"));
	/* the pages came back: the lowest ones are handed out again */
	ASSERT_EQ(0, gp_nvstub_alloc(self->fd, 4 * PG, 0, offs, &va));
	EXPECT_EQ(0, offs[0]);
	EXPECT_EQ(3 * PG, offs[3]);
	ASSERT_EQ(0, gp_nvstub_free(self->fd, va));
}

GP_TEST_F(nv, whole_bar_then_enomem)
{
	uint64_t va, va2;

	if (!self->bar_size)
		SKIP(return, "GDRPEER_GPU_BDF unset or its BAR 2 unreadable");
	ASSERT_EQ(0, gp_nvstub_alloc(self->fd, self->bar_size, 0, NULL, &va));
	EXPECT_EQ(-ENOMEM, gp_nvstub_alloc(self->fd, PG, 0, NULL, &va2));
	EXPECT_EQ(-ENOMEM, gp_nvstub_alloc(self->fd, PG, NVSTUB_ALLOC_SCATTER, NULL,
				    &va2));
	ASSERT_EQ(0, gp_nvstub_free(self->fd, va));
	ASSERT_EQ(0, gp_nvstub_alloc(self->fd, PG, 0, NULL, &va2));
	ASSERT_EQ(0, gp_nvstub_free(self->fd, va2));
}

GP_TEST_F(nv, sysfs_knobs)
{
	long long ver = gp_nvstub_num("table_version");

	EXPECT_EQ(0x00010002, ver);	/* NVIDIA_P2P_PAGE_TABLE_VERSION */
	EXPECT_EQ(1, gp_nvstub_num("persistent"));
	EXPECT_EQ(0, gp_nvstub_num("puts_after_callback"));
	EXPECT_LE(0, gp_nvstub_num("puts_during_callback"));

	ASSERT_EQ(0, gp_nvstub_set("persistent", "0"));
	EXPECT_EQ(0, gp_nvstub_num("persistent"));
	ASSERT_EQ(0, gp_nvstub_set("persistent", "1"));
	EXPECT_EQ(1, gp_nvstub_num("persistent"));
	EXPECT_EQ(-EINVAL, gp_nvstub_set("persistent", "maybe"));
	EXPECT_EQ(1, gp_nvstub_num("persistent"));

	ASSERT_EQ(0, gp_nvstub_set("table_version", "0x00010001"));
	EXPECT_EQ(0x00010001, gp_nvstub_num("table_version"));
	EXPECT_EQ(-ERANGE, gp_nvstub_set("table_version", "0x1ffffffff"));
	EXPECT_EQ(-EINVAL, gp_nvstub_set("table_version", "v1"));
	EXPECT_EQ(0x00010001, gp_nvstub_num("table_version"));
	ASSERT_EQ(0, gp_nvstub_set("table_version", "0x00010002"));
	EXPECT_EQ(0x00010002, gp_nvstub_num("table_version"));

	/* NVIDIA_P2P_DMA_MAPPING_VERSION */
	EXPECT_EQ(0x00020003, gp_nvstub_num("mapping_version"));
	ASSERT_EQ(0, gp_nvstub_set("mapping_version", "0x00010000"));
	EXPECT_EQ(0x00010000, gp_nvstub_num("mapping_version"));
	ASSERT_EQ(0, gp_nvstub_set("mapping_version", "0x00020003"));
	EXPECT_EQ(0x00020003, gp_nvstub_num("mapping_version"));

	/* gauges are read-only */
	EXPECT_NE(0, gp_nvstub_set("allocations", "5"));
	EXPECT_EQ(0, gp_nvstub_num("allocations"));
}

GP_HARNESS_MAIN

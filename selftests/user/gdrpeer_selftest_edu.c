// SPDX-License-Identifier: GPL-2.0
/*
 * kselftest: the dma-buf exporter seen by a real DMA importer, QEMU's edu
 * device driven by gdrpeer_edu_hca.ko.  Needs gdrpeer.ko (GPU bound) and
 * gdrpeer_edu_hca.ko loaded; GDRPEER_IOMMU (off, translated, passthrough)
 * selects what the raw-address test expects.  Each edu transfer takes
 * ~100 ms, so the DMA tests move a few KiB only.
 */
#define _GNU_SOURCE

#include "../kmod/gdrpeer_edu_hca.h"
#include "gdrpeer_test.h"
#include "gdrpeer_edu_test.h"
#include "kselftest_harness.h"

#define FILL 0x5a

FIXTURE(edu)
{
	int fd, hca;
	unsigned int dev;
	uint64_t bar_size, page;
	char bdf[32];
	int bar;
};

FIXTURE_SETUP(edu)
{
	struct gp_dev d;
	int ret;

	self->fd = -1;
	self->hca = -1;
	self->fd = open("/dev/gdrpeer", O_RDWR | O_CLOEXEC);
	if (self->fd < 0)
		SKIP(return, "/dev/gdrpeer: %s", strerror(errno));
	ret = gp_find_device(self->fd, &d);
	if (ret)
		SKIP(return, "no bound gdrpeer device");
	self->hca = open(EDU_HCA_DEVICE_PATH, O_RDWR | O_CLOEXEC);
	if (self->hca < 0)
		SKIP(return, "%s: %s (load gdrpeer_edu_hca.ko)",
		     EDU_HCA_DEVICE_PATH, strerror(errno));
	self->dev = d.info.index;
	self->bar_size = d.info.bar_size;
	self->bar = d.info.bar;
	memcpy(self->bdf, d.bdf, sizeof(self->bdf));
	self->page = (uint64_t)gp_page();
}

FIXTURE_TEARDOWN(edu)
{
	if (self->hca >= 0)
		close(self->hca);
	if (self->fd >= 0) {
		close(self->fd);
		EXPECT_EQ(0, gp_sysfs(self->dev, "allocations"));
		EXPECT_EQ(0, gp_sysfs(self->dev, "attachments"));
		EXPECT_EQ(0, gp_sysfs(self->dev, "active_maps"));
	}
}

/* allocation of @size filled with FILL through mmap; returns the mapping */
static uint8_t *alloc_filled(struct __test_metadata *_metadata,
			     FIXTURE_DATA(edu) *self, uint64_t size,
			     struct gdrpeer_alloc *a)
{
	uint8_t *p;
	int err;

	ASSERT_EQ(0, gp_alloc(self->fd, self->dev, size, a));
	p = gp_mmap(self->fd, size, MAP_SHARED, a->mmap_offset, &err);
	ASSERT_NE(NULL, p);
	memset(p, FILL, size);
	return p;
}

static int bench(int hca, int dfd, uint32_t flags, uint64_t max_seg,
		 struct edu_hca_bench *b)
{
	memset(b, 0, sizeof(*b));
	b->dmabuf_fd = dfd;
	b->flags = flags;
	b->max_seg = max_seg;
	return gp_ioctl(hca, EDU_HCA_IOCTL_BENCH, b);
}

static int dma(int hca, int dfd, uint64_t off, uint64_t len, uint64_t seed,
	       uint64_t max_seg, uint64_t raw, struct edu_hca_dma *r)
{
	memset(r, 0, sizeof(*r));
	r->dmabuf_fd = dfd;
	r->offset = off;
	r->length = len;
	r->seed = seed;
	r->max_seg = max_seg;
	if (raw) {
		r->flags = EDU_HCA_DMA_RAW_PHYS;
		r->raw_phys = raw;
	}
	return gp_ioctl(hca, EDU_HCA_IOCTL_DMA, r);
}

GP_TEST_F(edu, static_importer_refused_eopnotsupp)
{
	struct gdrpeer_alloc a;
	struct edu_hca_bench b;
	int dfd;

	ASSERT_EQ(0, gp_alloc(self->fd, self->dev, self->page, &a));
	dfd = gp_export(self->fd, a.handle, 0, self->page);
	ASSERT_LE(0, dfd);
	/* dma_buf_attach() without peer2peer: the exporter says no */
	EXPECT_EQ(-EOPNOTSUPP, bench(self->hca, dfd,
				     EDU_HCA_BENCH_STATIC_ATTACH, 0, &b));
	EXPECT_EQ(0, gp_sysfs(self->dev, "attachments"));
	close(dfd);
	EXPECT_EQ(0, gp_free(self->fd, a.handle));
}

GP_TEST_F(edu, not_a_dmabuf_ebadf_einval)
{
	struct edu_hca_bench b;

	/* dma_buf_get() of a non-dma-buf fd is -EINVAL, of no fd -EBADF */
	EXPECT_EQ(-EINVAL, bench(self->hca, self->fd, 0, 0, &b));
	EXPECT_EQ(-EBADF, bench(self->hca, 999, 0, 0, &b));
}

GP_TEST_F(edu, sg_entries_split_at_max_segment)
{
	uint64_t size = 1ull << 20;
	struct gdrpeer_alloc a;
	struct edu_hca_bench b;
	int dfd;

	ASSERT_EQ(0, gp_alloc(self->fd, self->dev, size, &a));
	dfd = gp_export(self->fd, a.handle, 0, size);
	ASSERT_LE(0, dfd);

	/* edu's default (PCI: 64 KiB) */
	ASSERT_EQ(0, bench(self->hca, dfd, 0, 0, &b));
	EXPECT_EQ((size + b.max_seg - 1) / b.max_seg, b.nents);
	EXPECT_EQ(size, b.bytes);
	/* one page per entry */
	ASSERT_EQ(0, bench(self->hca, dfd, 0, self->page, &b));
	EXPECT_EQ(size / self->page, b.nents);
	EXPECT_EQ(size, b.bytes);
	/* an odd, not page-multiple limit is rounded down to pages */
	ASSERT_EQ(0, bench(self->hca, dfd, 0, 3 * self->page + 100, &b));
	EXPECT_EQ((size + 3 * self->page - 1) / (3 * self->page), b.nents);
	/* a large limit: the contiguous range is one entry */
	ASSERT_EQ(0, bench(self->hca, dfd, 0, 0x80000000ull, &b));
	EXPECT_EQ(1, b.nents);
	EXPECT_EQ(size, b.bytes);

	EXPECT_EQ(0, gp_sysfs(self->dev, "active_maps"));
	EXPECT_EQ(0, gp_sysfs(self->dev, "attachments"));
	close(dfd);
	EXPECT_EQ(0, gp_free(self->fd, a.handle));
}

GP_TEST_F(edu, map_subrange_length)
{
	struct gdrpeer_alloc a;
	struct edu_hca_bench b;
	int dfd;

	ASSERT_EQ(0, gp_alloc(self->fd, self->dev, 16 * self->page, &a));
	dfd = gp_export(self->fd, a.handle, 3 * self->page, 5 * self->page);
	ASSERT_LE(0, dfd);
	ASSERT_EQ(0, bench(self->hca, dfd, 0, self->page, &b));
	EXPECT_EQ(5, b.nents);
	EXPECT_EQ(5 * self->page, b.bytes);
	close(dfd);
	EXPECT_EQ(0, gp_free(self->fd, a.handle));
}

/* edu writes through the mapping; the CPU sees exactly those bytes */
GP_TEST_F(edu, dma_write_read_through_mapping)
{
	uint64_t size = 4 * self->page, off = self->page - 1024, len = 3072;
	uint64_t seed = 0x1234abcdull ^ (uint64_t)getpid();
	uint8_t want[3072];
	struct gdrpeer_alloc a;
	struct edu_hca_dma r;
	uint8_t *p;
	uint64_t i;
	int dfd;

	p = alloc_filled(_metadata, self, size, &a);
	dfd = gp_export(self->fd, a.handle, 0, size);
	ASSERT_LE(0, dfd);
	/* one page per sg entry, so the transfer crosses two entries */
	ASSERT_EQ(0, dma(self->hca, dfd, off, len, seed, self->page, 0, &r));
	EXPECT_EQ(size / self->page, r.nents);
	EXPECT_EQ(0, r.mismatches);
	EXPECT_LE(10, r.transfers);
	gp_pattern(want, seed, len);
	EXPECT_EQ(0, memcmp(p + off, want, len));
	for (i = 0; i < size; i++)
		if (i < off || i >= off + len)
			ASSERT_EQ(FILL, p[i]) TH_LOG("byte %llu outside written",
						     (unsigned long long)i);
	close(dfd);
	EXPECT_EQ(0, munmap(p, size));
	EXPECT_EQ(0, gp_free(self->fd, a.handle));
}

/* the importer keeps working after the handle and /dev/gdrpeer are gone */
GP_TEST_F(edu, dma_after_free_and_close)
{
	uint64_t size = 2 * self->page, seed = 77;
	struct gdrpeer_alloc a;
	struct edu_hca_dma r;
	uint8_t want[2048];
	uint8_t *d;
	int dfd, err;

	ASSERT_EQ(0, gp_alloc(self->fd, self->dev, size, &a));
	dfd = gp_export(self->fd, a.handle, 0, size);
	ASSERT_LE(0, dfd);
	ASSERT_EQ(0, gp_free(self->fd, a.handle));
	ASSERT_EQ(0, close(self->fd));
	self->fd = open("/dev/gdrpeer", O_RDWR | O_CLOEXEC);
	ASSERT_EQ(1, gp_sysfs(self->dev, "allocations"));
	ASSERT_EQ(0, dma(self->hca, dfd, self->page, 2048, seed, 0, 0, &r));
	EXPECT_EQ(0, r.mismatches);
	d = gp_mmap(dfd, size, MAP_SHARED, 0, &err);
	ASSERT_NE(NULL, d);
	gp_pattern(want, seed, sizeof(want));
	EXPECT_EQ(0, memcmp(d + self->page, want, sizeof(want)));
	EXPECT_EQ(0, munmap(d, size));
	EXPECT_EQ(0, close(dfd));
	EXPECT_EQ(0, gp_sysfs(self->dev, "allocations"));
}

/*
 * DMA to the raw physical address of the buffer, which the exporter never
 * mapped for edu: under a translating IOMMU it must not land (and the
 * read-back must not match); without translation the address is the
 * physical one and it lands.  Either way the test knows which to expect.
 */
GP_TEST_F(edu, raw_address_blocked_only_under_translation)
{
	const char *mode = getenv("GDRPEER_IOMMU");
	uint64_t size = self->page, len = 2048, seed = 4242, raw, i;
	struct gdrpeer_alloc a;
	struct edu_hca_dma r;
	uint8_t want[2048];
	uint8_t *p;
	int dfd;

	if (!mode)
		SKIP(return, "GDRPEER_IOMMU not set: expectation unknown");
	raw = gp_bar_phys(self->bdf, (unsigned int)self->bar);
	ASSERT_NE(0, raw);
	p = alloc_filled(_metadata, self, size, &a);
	raw += a.bar_offset;
	dfd = gp_export(self->fd, a.handle, 0, size);
	ASSERT_LE(0, dfd);
	ASSERT_EQ(0, dma(self->hca, dfd, 0, len, seed, 0, raw, &r));
	gp_pattern(want, seed, len);
	if (!strcmp(mode, "translated")) {
		EXPECT_NE(raw, r.first_dma);
		EXPECT_LT(len / 2, r.mismatches);
		for (i = 0; i < len; i++)
			ASSERT_EQ(FILL, p[i]) TH_LOG("byte %llu changed",
						     (unsigned long long)i);
	} else {
		/* identity: the mapped address is the physical one */
		EXPECT_EQ(raw, r.first_dma);
		EXPECT_EQ(0, r.mismatches);
		EXPECT_EQ(0, memcmp(p, want, len));
	}
	close(dfd);
	EXPECT_EQ(0, munmap(p, size));
	EXPECT_EQ(0, gp_free(self->fd, a.handle));
}

/*
 * After the importer unmaps, the address it had must no longer reach the
 * memory: under a translating IOMMU a DMA to it faults and the bytes
 * written while it was mapped stay.  Without translation the address is
 * the physical one and nothing can stop it: the test checks that it
 * lands, so it knows the DMA itself works.  (tests/test_driver.py checks
 * the same against the host's BAR file and the DMAR fault.)
 */
GP_TEST_F(edu, importer_address_dies_with_unmap)
{
	const char *mode = getenv("GDRPEER_IOMMU");
	uint64_t size = self->page, len = 2048, old = 0x01d5eed, stale = 0x57a1e;
	struct edu_hca_import_dma id;
	struct edu_hca_import im;
	struct edu_hca_bus_dma b;
	struct gdrpeer_alloc a;
	uint8_t want[2048];
	uint8_t *p;
	int dfd;

	if (!mode)
		SKIP(return, "GDRPEER_IOMMU not set: expectation unknown");
	p = alloc_filled(_metadata, self, size, &a);
	dfd = gp_export(self->fd, a.handle, 0, size);
	ASSERT_LE(0, dfd);
	ASSERT_EQ(0, edu_import(self->hca, dfd, 0, &im));
	ASSERT_EQ(1, im.nents);
	ASSERT_EQ(0, edu_import_dma(self->hca, im.id, 0, len, old, &id));
	ASSERT_EQ(0, id.mismatches);
	ASSERT_EQ(1, gp_sysfs(self->dev, "active_maps"));
	ASSERT_EQ(0, edu_unimport(self->hca, im.id));
	EXPECT_EQ(0, gp_sysfs(self->dev, "active_maps"));

	memset(&b, 0, sizeof(b));
	b.bus_addr = im.first_dma;
	b.length = len;
	b.seed = stale;
	ASSERT_EQ(0, gp_ioctl(self->hca, EDU_HCA_IOCTL_BUS_DMA, &b));
	if (!strcmp(mode, "translated")) {
		gp_pattern(want, old, len);
		EXPECT_LT(len / 2, b.mismatches);
	} else {
		gp_pattern(want, stale, len);
		EXPECT_EQ(0, b.mismatches);
	}
	EXPECT_EQ(0, memcmp(p, want, len));
	close(dfd);
	EXPECT_EQ(0, munmap(p, size));
	EXPECT_EQ(0, gp_free(self->fd, a.handle));
}

GP_TEST_F(edu, dma_bad_args_einval)
{
	struct gdrpeer_alloc a;
	struct edu_hca_dma r;
	int dfd;

	ASSERT_EQ(0, gp_alloc(self->fd, self->dev, self->page, &a));
	dfd = gp_export(self->fd, a.handle, 0, self->page);
	ASSERT_LE(0, dfd);
	/* beyond the dma-buf: refused before any DMA */
	EXPECT_EQ(-EINVAL, dma(self->hca, dfd, self->page - 8, 16, 1, 0, 0,
			       &r));
	EXPECT_EQ(0, r.transfers);
	EXPECT_EQ(-EINVAL, dma(self->hca, dfd, 0, 0, 1, 0, 0, &r));
	EXPECT_EQ(-EINVAL, dma(self->hca, dfd, 4, 8, 1, 0, 0, &r));
	close(dfd);
	EXPECT_EQ(0, gp_free(self->fd, a.handle));
}

GP_HARNESS_MAIN

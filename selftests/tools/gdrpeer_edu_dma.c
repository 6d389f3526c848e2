// SPDX-License-Identifier: GPL-2.0
/*
 * gdrpeer_edu_dma - one edu DMA run for host-side checks.
 *
 * Allocates SIZE bytes on the device under test, fills them with FILL
 * through mmap (FILL "keep": no fill; a new allocation reads 0), exports
 * [EXP_OFF, EXP_OFF + EXP_LEN) as a dma-buf, drops the handle and /dev/gdrpeer (the dma-buf alone keeps the memory), and
 * has gdrpeer_edu_hca.ko write the pattern of SEED at OFF (relative to the
 * dma-buf) and read it back.  With RAW_OFF and RAW_SEED, a second DMA of
 * the pattern of RAW_SEED goes to the buffer's raw physical address at
 * RAW_OFF instead of a mapped one (the negative test; same memory, so all
 * results stay visible to the host).  With STALE_OFF, OLD_SEED and
 * STALE_SEED as well, a third run checks that an importer's address dies
 * with its mapping: the dma-buf is imported (kept, one sg entry), edu
 * writes EDU_HCA_CHUNK bytes of the pattern of OLD_SEED at STALE_OFF
 * through it, the import is dropped (unmapped), and edu writes the pattern
 * of STALE_SEED to the same bus address with no mapping
 * (EDU_HCA_IOCTL_BUS_DMA).  Prints key=value
 * lines (raw_* for the second DMA, stale_* for the third); the host then
 * finds the bytes at bar_offset + exp_off + off in the BAR file.
 *
 * usage: gdrpeer_edu_dma SIZE EXP_OFF EXP_LEN OFF LEN SEED FILL
 *            [RAW_OFF RAW_SEED [STALE_OFF OLD_SEED STALE_SEED]]
 * Exit status: 0 when the run completed (mismatches are data, not errors),
 * 1 on any failure, with a message on stderr.
 */
#define _GNU_SOURCE
#include "../kmod/gdrpeer_edu_hca.h"
#include "gdrpeer_test.h"

static uint64_t num(const char *s)
{
	char *end;
	unsigned long long v = strtoull(s, &end, 0);

	if (!*s || *end) {
		fprintf(stderr, "gdrpeer_edu_dma: bad number '%s'\n", s);
		exit(1);
	}
	return v;
}

/*
 * The stale-address run (see the top).  Exits with a message on any
 * failure before the stale DMA; its own outcome is data for the host.
 */
static void stale_run(int hca, int dfd, uint64_t off, uint64_t old_seed,
		      uint64_t stale_seed)
{
	/* one edu chunk: the fewest DMAR faults (a write, a read) to look for */
	const uint64_t len = EDU_HCA_CHUNK;
	struct edu_hca_import_dma id;
	struct edu_hca_unimport u;
	struct edu_hca_bus_dma b;
	struct edu_hca_import im;
	int ret;

	memset(&im, 0, sizeof(im));
	im.dmabuf_fd = dfd;
	im.max_seg = 1ull << 30;	/* one entry: byte off is first_dma + off */
	ret = gp_ioctl(hca, EDU_HCA_IOCTL_IMPORT, &im);
	if (ret || im.nents != 1) {
		fprintf(stderr, "gdrpeer_edu_dma: stale: import: %s, %llu entries\n",
			strerror(-ret), (unsigned long long)im.nents);
		exit(1);
	}
	memset(&id, 0, sizeof(id));
	id.id = im.id;
	id.offset = off;
	id.length = len;
	id.seed = old_seed;
	ret = gp_ioctl(hca, EDU_HCA_IOCTL_IMPORT_DMA, &id);
	if (ret || id.mismatches) {
		fprintf(stderr, "gdrpeer_edu_dma: stale: DMA while imported: %s, %llu mismatches\n",
			strerror(-ret), (unsigned long long)id.mismatches);
		exit(1);
	}
	memset(&u, 0, sizeof(u));
	u.id = im.id;
	ret = gp_ioctl(hca, EDU_HCA_IOCTL_UNIMPORT, &u);
	if (ret) {
		fprintf(stderr, "gdrpeer_edu_dma: stale: unimport: %s\n", strerror(-ret));
		exit(1);
	}
	memset(&b, 0, sizeof(b));
	b.bus_addr = im.first_dma + off;
	b.length = len;
	b.seed = stale_seed;
	ret = gp_ioctl(hca, EDU_HCA_IOCTL_BUS_DMA, &b);
	if (ret) {
		fprintf(stderr, "gdrpeer_edu_dma: stale: EDU_HCA_IOCTL_BUS_DMA: %s\n",
			strerror(-ret));
		exit(1);
	}
	printf("stale=1\nstale_off=%llu\nstale_addr=%llu\nstale_old_mismatches=%llu\n"
	       "stale_mismatches=%llu\nstale_transfers=%llu\n",
	       (unsigned long long)off, (unsigned long long)b.bus_addr,
	       (unsigned long long)id.mismatches,
	       (unsigned long long)b.mismatches,
	       (unsigned long long)b.transfers);
}

int main(int argc, char **argv)
{
	uint64_t size, exp_off, exp_len, raw = 0;
	struct edu_hca_dma r, rr;
	struct gdrpeer_alloc a;
	int raw_mode, fd, hca, dfd, ret, err;
	struct gp_dev d;
	uint8_t *p;

	if (argc != 8 && argc != 10 && argc != 13) {
		fprintf(stderr, "usage: gdrpeer_edu_dma SIZE EXP_OFF EXP_LEN OFF LEN SEED FILL "
			"[RAW_OFF RAW_SEED [STALE_OFF OLD_SEED STALE_SEED]]\n");
		return 1;
	}
	raw_mode = argc >= 10;
	size = num(argv[1]);
	exp_off = num(argv[2]);
	exp_len = num(argv[3]);
	fd = open("/dev/gdrpeer", O_RDWR | O_CLOEXEC);
	hca = open(EDU_HCA_DEVICE_PATH, O_RDWR | O_CLOEXEC);
	if (fd < 0 || hca < 0) {
		perror("gdrpeer_edu_dma: open /dev/gdrpeer or " EDU_HCA_DEVICE_PATH);
		return 1;
	}
	ret = gp_find_device(fd, &d);
	if (ret || (ret = gp_alloc(fd, d.info.index, size, &a))) {
		fprintf(stderr, "gdrpeer_edu_dma: alloc: %s\n", strerror(-ret));
		return 1;
	}
	p = gp_mmap(fd, size, MAP_SHARED, a.mmap_offset, &err);
	if (!p) {
		fprintf(stderr, "gdrpeer_edu_dma: mmap: %s\n", strerror(err));
		return 1;
	}
	if (strcmp(argv[7], "keep"))
		memset(p, (int)num(argv[7]), size);
	munmap(p, size);
	dfd = gp_export(fd, a.handle, exp_off, exp_len);
	if (dfd < 0) {
		fprintf(stderr, "gdrpeer_edu_dma: export: %s\n", strerror(-dfd));
		return 1;
	}
	if (raw_mode) {
		raw = gp_bar_phys(d.bdf, d.info.bar);
		if (!raw) {
			fprintf(stderr, "gdrpeer_edu_dma: no BAR address for %s\n", d.bdf);
			return 1;
		}
		raw += a.bar_offset + exp_off + num(argv[8]);
	}
	/* from here on only the dma-buf holds the memory */
	gp_free(fd, a.handle);
	close(fd);

	memset(&r, 0, sizeof(r));
	r.dmabuf_fd = dfd;
	r.offset = num(argv[4]);
	r.length = num(argv[5]);
	r.seed = num(argv[6]);
	ret = gp_ioctl(hca, EDU_HCA_IOCTL_DMA, &r);
	if (ret) {
		fprintf(stderr, "gdrpeer_edu_dma: EDU_HCA_IOCTL_DMA: %s\n", strerror(-ret));
		return 1;
	}
	/*
	 * Before the raw DMA: the kernel rate-limits DMAR fault lines and, with
	 * QEMU's VT-d, stops showing them after a few in a row; the host looks
	 * for the first fault of each run.
	 */
	if (argc == 13)
		stale_run(hca, dfd, num(argv[10]), num(argv[11]), num(argv[12]));
	memset(&rr, 0, sizeof(rr));
	if (raw_mode) {
		rr.dmabuf_fd = dfd;
		rr.offset = num(argv[8]);
		rr.length = r.length;
		rr.seed = num(argv[9]);
		rr.flags = EDU_HCA_DMA_RAW_PHYS;
		rr.raw_phys = raw;
		ret = gp_ioctl(hca, EDU_HCA_IOCTL_DMA, &rr);
		if (ret) {
			fprintf(stderr, "gdrpeer_edu_dma: raw EDU_HCA_IOCTL_DMA: %s\n",
				strerror(-ret));
			return 1;
		}
	}
	printf("bar_offset=%llu\nexp_off=%llu\noff=%llu\nlen=%llu\nseed=%llu\n"
	       "nents=%llu\nmismatches=%llu\ntransfers=%llu\nfirst_dma=%llu\n"
	       "raw=%d\nraw_addr=%llu\nraw_mismatches=%llu\n"
	       "raw_transfers=%llu\nraw_first_dma=%llu\n",
	       (unsigned long long)a.bar_offset, (unsigned long long)exp_off,
	       (unsigned long long)r.offset, (unsigned long long)r.length,
	       (unsigned long long)r.seed, (unsigned long long)r.nents,
	       (unsigned long long)r.mismatches,
	       (unsigned long long)r.transfers,
	       (unsigned long long)r.first_dma, raw_mode,
	       (unsigned long long)raw, (unsigned long long)rr.mismatches,
	       (unsigned long long)rr.transfers,
	       (unsigned long long)rr.first_dma);
	close(dfd);
	close(hca);
	return 0;
}

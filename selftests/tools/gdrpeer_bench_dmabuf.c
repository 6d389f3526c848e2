// SPDX-License-Identifier: GPL-2.0
/*
 * gdrpeer_bench_dmabuf - what it costs an importer to get at device memory,
 * next to what it costs to register host memory.
 *
 * For each size (MiB, default 2 64 1024): allocate (ALLOC clears the memory
 * it hands out: that is most of its time), export the allocation as a
 * dma-buf, then gdrpeer_edu_hca.ko attaches, pins and maps it with edu's
 * struct device (the path ib_umem_dmabuf_get_pinned takes), with edu's
 * default max segment (PCI: 64 KiB) and with 2 GiB (what mlx5 sets for
 * its PCI device); and ibv_reg_mr of the same size of touched host memory on
 * rxe0 (pin_user_pages + rxe's page table).  Median of REPS runs, in
 * microseconds; prints a Markdown table.  Needs gdrpeer.ko with a device
 * bound whose BAR holds the largest size, gdrpeer_edu_hca.ko, and rxe0.
 *
 * usage: gdrpeer_bench_dmabuf [-r REPS] [MiB ...]
 */
#define _GNU_SOURCE
#include <infiniband/verbs.h>
#include <time.h>

#include "../kmod/gdrpeer_edu_hca.h"
#include "gdrpeer_test.h"

/* what mlx5 sets with dma_set_max_seg_size() */
#define BIG_SEG 0x80000000ull

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static double median_us(uint64_t *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_u64);
	return (double)v[n / 2] / 1000.0;
}

static void die(const char *what, int err)
{
	fprintf(stderr, "gdrpeer_bench_dmabuf: %s: %s\n", what, strerror(err));
	exit(1);
}

static struct ibv_pd *open_pd(const char *name)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_context *ctx = NULL;
	int i;

	for (i = 0; list && list[i]; i++)
		if (!strcmp(ibv_get_device_name(list[i]), name))
			ctx = ibv_open_device(list[i]);
	if (list)
		ibv_free_device_list(list);
	return ctx ? ibv_alloc_pd(ctx) : NULL;
}

#define MAX_REPS 15

int main(int argc, char **argv)
{
	uint64_t sizes[16] = { 2, 64, 1024 };
	int nsizes = 3, reps = 3, i, r, fd, hca;
	struct ibv_pd *pd;
	struct gp_dev d;

	if (argc > 2 && !strcmp(argv[1], "-r")) {
		reps = atoi(argv[2]);
		argv += 2;
		argc -= 2;
	}
	if (reps < 1 || reps > MAX_REPS)
		die("-r", EINVAL);
	if (argc > 1) {
		nsizes = 0;
		for (i = 1; i < argc && nsizes < 16; i++)
			sizes[nsizes++] = strtoull(argv[i], NULL, 0);
	}
	fd = open("/dev/gdrpeer", O_RDWR | O_CLOEXEC);
	if (fd < 0)
		die("/dev/gdrpeer", errno);
	hca = open(EDU_HCA_DEVICE_PATH, O_RDWR | O_CLOEXEC);
	if (hca < 0)
		die(EDU_HCA_DEVICE_PATH, errno);
	if (gp_find_device(fd, &d))
		die("no bound device", ENODEV);
	pd = open_pd(getenv("GDRPEER_RDMA_DEV") ? getenv("GDRPEER_RDMA_DEV") : "rxe0");
	if (!pd)
		die("rxe0", ENODEV);

	printf("| size | alloc (cleared) | export | attach+pin+map, 64 KiB seg | sg entries | attach+pin+map, 2 GiB seg | sg entries | unmap+detach | ibv_reg_mr host | ibv_dereg_mr | reg_mr / (export+map) | reg_mr / map |\n");
	printf("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
	for (i = 0; i < nsizes; i++) {
		uint64_t size = sizes[i] << 20;
		uint64_t alloc[MAX_REPS], exp[MAX_REPS], map64[MAX_REPS];
		uint64_t mapbig[MAX_REPS];
		uint64_t unmap[MAX_REPS], reg[MAX_REPS], dereg[MAX_REPS];
		uint64_t n64 = 0, nbig = 0;
		double dev_total, host;
		void *host_buf;

		if (size > d.info.bar_size) {
			printf("| %llu MiB | skipped: BAR is %llu MiB | | | | | | | | | | |\n",
			       (unsigned long long)sizes[i],
			       (unsigned long long)(d.info.bar_size >> 20));
			continue;
		}
		host_buf = mmap(NULL, size, PROT_READ | PROT_WRITE,
				MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (host_buf == MAP_FAILED)
			die("mmap host memory", errno);
		memset(host_buf, 1, size);	/* measure pinning, not faults */

		for (r = 0; r < reps; r++) {
			struct gdrpeer_alloc a;
			struct edu_hca_bench b;
			struct ibv_mr *mr;
			uint64_t t;
			int dfd, ret;

			t = now_ns();
			ret = gp_alloc(fd, d.info.index, size, &a);
			alloc[r] = now_ns() - t;
			if (ret)
				die("alloc", -ret);
			t = now_ns();
			dfd = gp_export(fd, a.handle, 0, size);
			exp[r] = now_ns() - t;
			if (dfd < 0)
				die("export", -dfd);

			memset(&b, 0, sizeof(b));
			b.dmabuf_fd = dfd;
			ret = gp_ioctl(hca, EDU_HCA_IOCTL_BENCH, &b);
			if (ret)
				die("bench (default seg)", -ret);
			map64[r] = b.attach_ns + b.map_ns;
			n64 = b.nents;

			memset(&b, 0, sizeof(b));
			b.dmabuf_fd = dfd;
			b.max_seg = BIG_SEG;
			ret = gp_ioctl(hca, EDU_HCA_IOCTL_BENCH, &b);
			if (ret)
				die("bench (4 GiB seg)", -ret);
			mapbig[r] = b.attach_ns + b.map_ns;
			unmap[r] = b.unmap_ns;
			nbig = b.nents;
			close(dfd);
			gp_free(fd, a.handle);

			t = now_ns();
			mr = ibv_reg_mr(pd, host_buf, size,
					IBV_ACCESS_LOCAL_WRITE |
					IBV_ACCESS_REMOTE_WRITE);
			reg[r] = now_ns() - t;
			if (!mr)
				die("ibv_reg_mr", errno);
			t = now_ns();
			ibv_dereg_mr(mr);
			dereg[r] = now_ns() - t;
		}
		munmap(host_buf, size);
		dev_total = median_us(exp, reps) + median_us(mapbig, reps);
		host = median_us(reg, reps);
		printf("| %llu MiB | %.1f us | %.1f us | %.1f us | %llu | %.1f us | %llu | %.1f us | %.1f us | %.1f us | %.0fx | %.0fx |\n",
		       (unsigned long long)sizes[i], median_us(alloc, reps),
		       median_us(exp, reps),
		       median_us(map64, reps), (unsigned long long)n64,
		       median_us(mapbig, reps), (unsigned long long)nbig,
		       median_us(unmap, reps), host, median_us(dereg, reps),
		       host / dev_total, host / median_us(mapbig, reps));
		fflush(stdout);
	}
	return 0;
}

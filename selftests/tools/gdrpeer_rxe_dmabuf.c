// SPDX-License-Identifier: GPL-2.0
/*
 * gdrpeer_rxe_dmabuf - real verbs traffic into gdrpeer memory through a
 * dma-buf memory region, for the emulated node's dma-buf capable rxe
 * (tests/emunode/softroce.py).  Two RC queue pairs of this process on one
 * port, connected to each other (a loopback), move data; every byte is
 * checked here through the CPU mapping, and the lines starting with "BAR "
 * tell the host what the BAR backing file must hold:
 *
 *   BAR PATTERN <name> <bar offset> <length> <seed>   bytes = pattern(seed)
 *   BAR U64 <name> <bar offset> <value>               one little-endian u64
 *   BAR HOST <name> <bar offset> <length>              what the host wrote
 *   BAR READ <name> <bar offset> <length> <sha256 of what RDMA READ returned>
 *
 * "What the host wrote": gdrpeer clears memory it hands out, so the tool
 * asks the host (tests/emunode/softroce.py HostFill, watching the BAR
 * file while the guest runs) to write its bytes into a range after
 * allocating it: a header (HOST_FILL_MAGIC, BAR offset, length) at the
 * range's start, which the host overwrites with its bytes.
 *   BAR POISON <name> <bar offset> <length>            all NVSTUB_POISON_BYTE
 *   BAR SEQMAX <name> <bar offset> <length> <n>        every 64-byte slot is
 *	untouched since boot or eight copies of a u64 in 1..n (WRITE loop)
 *
 * pattern(seed)[i] = ((i * 2654435761 + seed) mod 2^32) >> 13, low byte
 * (tests/test_rxe_dmabuf.py computes the same).
 *
 *   gdrpeer_rxe_dmabuf traffic
 *	WRITE, READ, SEND, FETCH_ADD, CMP_SWAP on a dma-buf MR at dma-buf
 *	offset 0 and at a non-zero offset; a WRITE 8 bytes past an MR's end
 *	(remote access error); a registration past the dma-buf's end (EINVAL).
 *   gdrpeer_rxe_dmabuf demo
 *	one RDMA WRITE, one SEND and one RDMA READ, for `make demo`.
 *   gdrpeer_rxe_dmabuf hold
 *	registers MRs, prints "ready", then sleeps (the test SIGKILLs it).
 *   gdrpeer_rxe_dmabuf revoke-nvidia
 *	a WRITE loop into a dma-buf MR of stand-in "CUDA" memory; after 64
 *	good WRITEs the memory is freed (cuMemFree path) under the loop; the
 *	loop must then end with an error completion.
 *   gdrpeer_rxe_dmabuf revoke-pcibar unbind|remove
 *	the same, revoking by unbinding / removing the gdrpeer PCI device.
 *   gdrpeer_rxe_dmabuf revoke-pcibar device_del
 *	the same, revoking by a real hot-unplug (QEMU device_del, asked for
 *	with emunode-host) while a CPU mapping of the memory and an edu import
 *	of it doing DMA (gdrpeer_edu_hca.ko) are live too: the DMA loop ends
 *	with ENODEV, the import reads revoked, the mapping raises SIGBUS; then
 *	device_add, driver_override + bind, and a new MR's WRITE lands again.
 * Exit 0 when everything checked here held, 1 otherwise, 4 when skipped.
 * $GDRPEER_RDMA_DEV names the device (default rxe0).
 */
#define _GNU_SOURCE
#include <infiniband/verbs.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <time.h>

#include "gdrpeer_test.h"
#include "gdrpeer_nvstub_test.h"
#include "../kmod/gdrpeer_edu_hca.h"

#define MTU_BYTES 1024
#define ACCESS_ALL (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | \
		    IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC)

static int failures;

static void fail(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	printf("FAIL: ");
	vprintf(fmt, ap);
	printf("\n");
	va_end(ap);
	failures++;
}

static void die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	printf("FATAL: ");
	vprintf(fmt, ap);
	printf("\n");
	va_end(ap);
	exit(1);
}

static uint8_t pattern_byte(uint64_t i, uint32_t seed)
{
	return (uint8_t)((uint32_t)(i * 2654435761u + seed) >> 13);
}

static void fill(uint8_t *p, size_t n, uint32_t seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = pattern_byte(i, seed);
}

/* first differing offset, or -1 */
static long mismatch(const volatile uint8_t *p, size_t n, uint32_t seed)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != pattern_byte(i, seed))
			return (long)i;
	return -1;
}

/* ---- sha256 (FIPS 180-4), to report what an RDMA READ returned ---------- */
static const uint32_t K256[64] = {
	0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1,
	0x923f82a4, 0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3,
	0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786,
	0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
	0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147,
	0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13,
	0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
	0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
	0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a,
	0x5b9cca4f, 0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208,
	0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

#define ROR(x, n) (((x) >> (n)) | ((x) << (32 - (n))))

static void sha256_block(uint32_t h[8], const uint8_t *b)
{
	uint32_t w[64], s[8];
	int i;

	for (i = 0; i < 16; i++)
		w[i] = (uint32_t)b[4 * i] << 24 | (uint32_t)b[4 * i + 1] << 16 |
		       (uint32_t)b[4 * i + 2] << 8 | b[4 * i + 3];
	for (i = 16; i < 64; i++)
		w[i] = w[i - 16] + (ROR(w[i - 15], 7) ^ ROR(w[i - 15], 18) ^
				    (w[i - 15] >> 3)) + w[i - 7] +
		       (ROR(w[i - 2], 17) ^ ROR(w[i - 2], 19) ^ (w[i - 2] >> 10));
	memcpy(s, h, sizeof(s));
	for (i = 0; i < 64; i++) {
		uint32_t t1 = s[7] + (ROR(s[4], 6) ^ ROR(s[4], 11) ^
				      ROR(s[4], 25)) +
			      ((s[4] & s[5]) ^ (~s[4] & s[6])) + K256[i] + w[i];
		uint32_t t2 = (ROR(s[0], 2) ^ ROR(s[0], 13) ^ ROR(s[0], 22)) +
			      ((s[0] & s[1]) ^ (s[0] & s[2]) ^ (s[1] & s[2]));

		memmove(s + 1, s, 7 * sizeof(s[0]));
		s[4] += t1;
		s[0] = t1 + t2;
	}
	for (i = 0; i < 8; i++)
		h[i] += s[i];
}

static void sha256_hex(const uint8_t *p, size_t n, char out[65])
{
	uint32_t h[8] = { 0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
			  0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19 };
	uint8_t tail[128];
	size_t full = n / 64 * 64, rest = n - full, tl;
	uint64_t bits = (uint64_t)n * 8;
	int i;

	for (size_t off = 0; off < full; off += 64)
		sha256_block(h, p + off);
	memset(tail, 0, sizeof(tail));
	memcpy(tail, p + full, rest);
	tail[rest] = 0x80;
	tl = rest + 1 + 8 <= 64 ? 64 : 128;
	for (i = 0; i < 8; i++)
		tail[tl - 1 - i] = (uint8_t)(bits >> (8 * i));
	sha256_block(h, tail);
	if (tl == 128)
		sha256_block(h, tail + 64);
	for (i = 0; i < 8; i++)
		sprintf(out + 8 * i, "%08x", h[i]);
}

/* ---- the loopback ------------------------------------------------------ */
struct lb {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp[2];
	uint8_t *host;		/* staging buffer in host memory */
	size_t host_len;
	struct ibv_mr *host_mr;
};

static struct ibv_context *open_device(void)
{
	const char *name = getenv("GDRPEER_RDMA_DEV");
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_context *ctx = NULL;

	if (!name)
		name = "rxe0";
	for (int i = 0; list && list[i]; i++)
		if (!strcmp(ibv_get_device_name(list[i]), name))
			ctx = ibv_open_device(list[i]);
	if (list)
		ibv_free_device_list(list);
	if (!ctx)
		die("no RDMA device %s", name);
	return ctx;
}

static void qp_connect(struct ibv_qp *qp, uint32_t dest_qpn,
		       const union ibv_gid *gid)
{
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qp_access_flags = ACCESS_ALL;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
			  IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		die("QP to INIT: %s", strerror(errno));
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = dest_qpn;
	a.max_dest_rd_atomic = 4;
	a.min_rnr_timer = 1;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = *gid;
	a.ah_attr.grh.sgid_index = 0;
	a.ah_attr.grh.hop_limit = 1;
	a.ah_attr.port_num = 1;
	/*
	 * Right after the link comes up the link-local GID's address may
	 * still be tentative (IPv6 DAD): RTR fails with ETIMEDOUT or
	 * ENETUNREACH for a moment.  Retry for up to 10 s.
	 */
	for (int tries = 0;; tries++) {
		int ret = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV |
					IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
					IBV_QP_RQ_PSN |
					IBV_QP_MAX_DEST_RD_ATOMIC |
					IBV_QP_MIN_RNR_TIMER);

		if (!ret)
			break;
		ret = ret > 0 ? ret : errno;
		if ((ret != ETIMEDOUT && ret != ENETUNREACH) || tries >= 100)
			die("QP to RTR: %s", strerror(ret));
		usleep(100000);
	}
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 4;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT |
			  IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
			  IBV_QP_MAX_QP_RD_ATOMIC))
		die("QP to RTS: %s", strerror(errno));
}

static void lb_open(struct lb *l, size_t host_len)
{
	struct ibv_qp_init_attr qa;
	union ibv_gid gid;

	memset(l, 0, sizeof(*l));
	l->ctx = open_device();
	l->pd = ibv_alloc_pd(l->ctx);
	l->cq = ibv_create_cq(l->ctx, 256, NULL, NULL, 0);
	if (!l->pd || !l->cq)
		die("PD/CQ: %s", strerror(errno));
	memset(&qa, 0, sizeof(qa));
	qa.send_cq = l->cq;
	qa.recv_cq = l->cq;
	qa.qp_type = IBV_QPT_RC;
	qa.cap.max_send_wr = 64;
	qa.cap.max_recv_wr = 64;
	qa.cap.max_send_sge = 1;
	qa.cap.max_recv_sge = 1;
	for (int i = 0; i < 2; i++) {
		l->qp[i] = ibv_create_qp(l->pd, &qa);
		if (!l->qp[i])
			die("create QP: %s", strerror(errno));
	}
	if (ibv_query_gid(l->ctx, 1, 0, &gid))
		die("query GID 0: %s", strerror(errno));
	qp_connect(l->qp[0], l->qp[1]->qp_num, &gid);
	qp_connect(l->qp[1], l->qp[0]->qp_num, &gid);
	l->host_len = host_len;
	l->host = aligned_alloc(4096, host_len);
	if (!l->host)
		die("staging buffer");
	l->host_mr = ibv_reg_mr(l->pd, l->host, host_len, ACCESS_ALL);
	if (!l->host_mr)
		die("ibv_reg_mr of the staging buffer: %s", strerror(errno));
}

static void lb_close(struct lb *l)
{
	ibv_dereg_mr(l->host_mr);
	for (int i = 0; i < 2; i++)
		ibv_destroy_qp(l->qp[i]);
	ibv_destroy_cq(l->cq);
	ibv_dealloc_pd(l->pd);
	ibv_close_device(l->ctx);
	free(l->host);
}

/* Waits for one completion; its status (IBV_WC_SUCCESS or the error). */
static enum ibv_wc_status wait_one(struct lb *l, const char *what)
{
	struct timespec t0, t;
	struct ibv_wc wc;
	int n;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		n = ibv_poll_cq(l->cq, 1, &wc);
		if (n < 0)
			die("poll CQ: %d", n);
		if (n == 1)
			return wc.status;
		clock_gettime(CLOCK_MONOTONIC, &t);
		if (t.tv_sec - t0.tv_sec > 20)
			die("no completion for %s within 20 s", what);
	}
}

static int post_send(struct lb *l, enum ibv_wr_opcode op, void *laddr,
		     uint32_t len, uint32_t lkey, uint64_t raddr,
		     uint32_t rkey, uint64_t cmp, uint64_t swap_add)
{
	struct ibv_sge sge = { (uintptr_t)laddr, len, lkey };
	struct ibv_send_wr wr, *bad;

	memset(&wr, 0, sizeof(wr));
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = op;
	wr.send_flags = IBV_SEND_SIGNALED;
	if (op == IBV_WR_ATOMIC_FETCH_AND_ADD || op == IBV_WR_ATOMIC_CMP_AND_SWP) {
		wr.wr.atomic.remote_addr = raddr;
		wr.wr.atomic.rkey = rkey;
		wr.wr.atomic.compare_add = op == IBV_WR_ATOMIC_CMP_AND_SWP ?
					   cmp : swap_add;
		wr.wr.atomic.swap = swap_add;
	} else {
		wr.wr.rdma.remote_addr = raddr;
		wr.wr.rdma.rkey = rkey;
	}
	return ibv_post_send(l->qp[0], &wr, &bad);
}

static enum ibv_wc_status op(struct lb *l, enum ibv_wr_opcode opc,
			     void *laddr, uint32_t len, uint32_t lkey,
			     uint64_t raddr, uint32_t rkey, uint64_t cmp,
			     uint64_t swap_add, const char *what)
{
	if (post_send(l, opc, laddr, len, lkey, raddr, rkey, cmp, swap_add))
		die("post %s: %s", what, strerror(errno));
	return wait_one(l, what);
}

/* ---- gdrpeer memory ---------------------------------------------------- */
struct gmem {
	int fd;
	unsigned int dev;
	struct gdrpeer_alloc a;
	volatile uint8_t *cpu;	/* mmap of the whole allocation */
	int dmabuf;		/* the whole allocation */
};

/*
 * @spacer bytes are allocated first and never touched, so that the memory
 * under test lies past what other commands of the same boot use (the
 * stand-in's allocations start at BAR offset 0 and are poisoned on free).
 */
static void gmem_alloc(struct gmem *g, uint64_t size, uint64_t spacer)
{
	struct gdrpeer_alloc sp;
	struct gp_dev d;
	void *p;

	g->fd = open("/dev/gdrpeer", O_RDWR | O_CLOEXEC);
	if (g->fd < 0)
		die("/dev/gdrpeer: %s", strerror(errno));
	if (gp_find_device(g->fd, &d))
		die("no bound gdrpeer device");
	g->dev = d.info.index;
	if (spacer && gp_alloc(g->fd, g->dev, spacer, &sp))
		die("gdrpeer alloc %" PRIu64 ": %s", spacer, strerror(errno));
	if (gp_alloc(g->fd, g->dev, size, &g->a))
		die("gdrpeer alloc %" PRIu64 ": %s", size, strerror(errno));
	p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, g->fd,
		 (off_t)g->a.mmap_offset);
	if (p == MAP_FAILED)
		die("mmap: %s", strerror(errno));
	g->cpu = p;
	g->dmabuf = gp_export(g->fd, g->a.handle, 0, size);
	if (g->dmabuf < 0)
		die("export: %s", strerror(-g->dmabuf));
}

static struct ibv_mr *reg_dmabuf(struct lb *l, int dmabuf, uint64_t off,
				 size_t len, uint64_t iova)
{
	struct ibv_mr *mr = ibv_reg_dmabuf_mr(l->pd, off, len, iova, dmabuf,
					      ACCESS_ALL);

	if (!mr)
		die("ibv_reg_dmabuf_mr(offset %" PRIu64 ", %zu bytes): %s",
		    off, len, strerror(errno));
	return mr;
}

static void copy_to_bar(volatile uint8_t *dst, const uint8_t *src, size_t n)
{
	for (size_t i = 0; i < n; i++)
		dst[i] = src[i];
}

static void copy_from_bar(uint8_t *dst, const volatile uint8_t *src, size_t n)
{
	for (size_t i = 0; i < n; i++)
		dst[i] = src[i];
}

static uint32_t seed_base;

#define HOST_FILL_MAGIC "GDRPEER HOST FILL PLEASE"	/* 24 bytes */

/* Asks the host to fill BAR [bar, +len) (mapped at @cpu) and waits for it. */
static void host_fill(volatile uint8_t *cpu, uint64_t bar, uint64_t len)
{
	uint8_t hdr[40];

	memcpy(hdr, HOST_FILL_MAGIC, 24);
	memcpy(hdr + 24, &bar, 8);
	memcpy(hdr + 32, &len, 8);
	copy_to_bar(cpu, hdr, sizeof(hdr));
	for (int i = 0; i < 600; i++) {
		uint8_t now[24];

		copy_from_bar(now, cpu, sizeof(now));
		if (memcmp(now, HOST_FILL_MAGIC, 24))
			return;
		usleep(50000);
	}
	die("the host did not fill BAR offset %#" PRIx64 " within 30 s (is the node run with softroce.HostFill?)",
	    bar);
}

/*
 * One MR over dma-buf [mr_off, +len) of the allocation; the iova is an
 * arbitrary value unlike the offset, so iova arithmetic is exercised too.
 * Layout inside the MR: [0, q) WRITE, [q, 2q) READ (host's bytes),
 * [2q, 3q) SEND, 3q FETCH_ADD and 3q + 8 CMP_SWAP.
 */
static void traffic_case(struct lb *l, struct gmem *g, const char *name,
			 uint64_t mr_off, size_t len)
{
	const uint64_t iova = 0x100000000ull + mr_off * 3;
	uint64_t bar = (uint64_t)g->a.bar_offset + mr_off;
	size_t q = len / 4;
	uint32_t sw = ++seed_base * 7919u, ss = ++seed_base * 7919u;
	struct ibv_recv_wr rwr, *bad;
	struct ibv_sge rsge;
	struct ibv_mr *mr;
	enum ibv_wc_status st;
	char sha[65];
	uint64_t v0 = 0x0123456789abcdefull + mr_off, got;
	long m;

	mr = reg_dmabuf(l, g->dmabuf, mr_off, len, iova);
	printf("%s: dma-buf MR at dma-buf offset %" PRIu64 ", %zu bytes, BAR offset %#" PRIx64 ", lkey %#x\n",
	       name, mr_off, len, bar, mr->lkey);

	/* RDMA WRITE: staging -> MR [0, q) */
	fill(l->host, q, sw);
	st = op(l, IBV_WR_RDMA_WRITE, l->host, (uint32_t)q, l->host_mr->lkey,
		iova, mr->rkey, 0, 0, "RDMA WRITE");
	if (st != IBV_WC_SUCCESS)
		fail("%s: RDMA WRITE completed with %s", name, ibv_wc_status_str(st));
	m = mismatch(g->cpu + mr_off, q, sw);
	if (m >= 0)
		fail("%s: RDMA WRITE: byte %ld differs in the BAR (CPU view)", name, m);
	else
		printf("%s: RDMA WRITE of %zu bytes: every byte right (CPU view)\n", name, q);
	printf("BAR PATTERN %s-write %" PRIu64 " %zu %u\n", name, bar, q, sw);

	/* RDMA READ of MR [q, 2q), which the host fills first */
	host_fill(g->cpu + mr_off + q, bar + q, q);
	memset(l->host, 0, q);
	st = op(l, IBV_WR_RDMA_READ, l->host, (uint32_t)q, l->host_mr->lkey,
		iova + q, mr->rkey, 0, 0, "RDMA READ");
	if (st != IBV_WC_SUCCESS)
		fail("%s: RDMA READ completed with %s", name, ibv_wc_status_str(st));
	{
		uint8_t *cpu = malloc(q);

		copy_from_bar(cpu, g->cpu + mr_off + q, q);
		if (memcmp(cpu, l->host, q))
			fail("%s: RDMA READ returned other bytes than the CPU sees", name);
		else
			printf("%s: RDMA READ of %zu bytes: equal to the CPU view\n", name, q);
		free(cpu);
	}
	sha256_hex(l->host, q, sha);
	printf("BAR READ %s-read %" PRIu64 " %zu %s\n", name, bar + q, q, sha);

	/* SEND: QP 0 sends from staging into a receive on the MR [2q, 3q) */
	rsge.addr = iova + 2 * q;
	rsge.length = (uint32_t)q;
	rsge.lkey = mr->lkey;
	memset(&rwr, 0, sizeof(rwr));
	rwr.sg_list = &rsge;
	rwr.num_sge = 1;
	if (ibv_post_recv(l->qp[1], &rwr, &bad))
		die("post receive: %s", strerror(errno));
	fill(l->host, q, ss);
	if (post_send(l, IBV_WR_SEND, l->host, (uint32_t)q, l->host_mr->lkey,
		      0, 0, 0, 0))
		die("post SEND: %s", strerror(errno));
	for (int i = 0; i < 2; i++) {
		st = wait_one(l, "SEND");
		if (st != IBV_WC_SUCCESS)
			fail("%s: SEND completed with %s", name, ibv_wc_status_str(st));
	}
	m = mismatch(g->cpu + mr_off + 2 * q, q, ss);
	if (m >= 0)
		fail("%s: SEND: byte %ld differs in the BAR (CPU view)", name, m);
	else
		printf("%s: SEND of %zu bytes: every byte right (CPU view)\n", name, q);
	printf("BAR PATTERN %s-send %" PRIu64 " %zu %u\n", name, bar + 2 * q, q, ss);

	/* FETCH_ADD and CMP_SWAP on u64s at MR [3q, 3q + 16) */
	copy_to_bar(g->cpu + mr_off + 3 * q, (const uint8_t *)&v0, 8);
	copy_to_bar(g->cpu + mr_off + 3 * q + 8, (const uint8_t *)&v0, 8);
	st = op(l, IBV_WR_ATOMIC_FETCH_AND_ADD, l->host, 8, l->host_mr->lkey,
		iova + 3 * q, mr->rkey, 0, 0x1111, "FETCH_ADD");
	memcpy(&got, l->host, 8);
	if (st != IBV_WC_SUCCESS || got != v0)
		fail("%s: FETCH_ADD: %s, returned %#" PRIx64 " (want %#" PRIx64 ")",
		     name, ibv_wc_status_str(st), got, v0);
	st = op(l, IBV_WR_ATOMIC_CMP_AND_SWP, l->host, 8, l->host_mr->lkey,
		iova + 3 * q + 8, mr->rkey, v0, 0xfeedfacecafef00dull,
		"CMP_SWAP");
	memcpy(&got, l->host, 8);
	if (st != IBV_WC_SUCCESS || got != v0)
		fail("%s: CMP_SWAP (equal): %s, returned %#" PRIx64, name,
		     ibv_wc_status_str(st), got);
	/* a compare that does not match leaves the value alone */
	st = op(l, IBV_WR_ATOMIC_CMP_AND_SWP, l->host, 8, l->host_mr->lkey,
		iova + 3 * q + 8, mr->rkey, v0, 0x1ull, "CMP_SWAP");
	memcpy(&got, l->host, 8);
	if (st != IBV_WC_SUCCESS || got != 0xfeedfacecafef00dull)
		fail("%s: CMP_SWAP (different): %s, returned %#" PRIx64, name,
		     ibv_wc_status_str(st), got);
	copy_from_bar((uint8_t *)&got, g->cpu + mr_off + 3 * q, 8);
	if (got != v0 + 0x1111)
		fail("%s: FETCH_ADD left %#" PRIx64 " in the BAR", name, got);
	copy_from_bar((uint8_t *)&got, g->cpu + mr_off + 3 * q + 8, 8);
	if (got != 0xfeedfacecafef00dull)
		fail("%s: CMP_SWAP left %#" PRIx64 " in the BAR", name, got);
	printf("%s: FETCH_ADD and CMP_SWAP: returned and left the right values\n", name);
	printf("BAR U64 %s-fetch-add %" PRIu64 " %" PRIu64 "\n", name, bar + 3 * q,
	       v0 + 0x1111);
	printf("BAR U64 %s-cmp-swap %" PRIu64 " %" PRIu64 "\n", name,
	       bar + 3 * q + 8, (uint64_t)0xfeedfacecafef00dull);
	if (ibv_dereg_mr(mr))
		fail("%s: ibv_dereg_mr: %s", name, strerror(errno));
}

static int cmd_traffic(void)
{
	const size_t len = 64 << 10, alloc = 1 << 20;
	struct gmem g;
	struct lb l;
	struct ibv_mr *mr;
	enum ibv_wc_status st;
	uint64_t off;

	gmem_alloc(&g, alloc, 8 << 20);
	lb_open(&l, len);
	traffic_case(&l, &g, "offset0", 0, len);
	traffic_case(&l, &g, "offset", 5 * 64 << 10, len);	/* 320 KiB */

	/* a WRITE whose last 8 bytes fall past the MR's end */
	off = 10 * 64 << 10;
	mr = reg_dmabuf(&l, g.dmabuf, off, 4096, 0x200000);
	host_fill(g.cpu + off, g.a.bar_offset + off, 8192);
	fill(l.host, 64, 99);
	st = op(&l, IBV_WR_RDMA_WRITE, l.host, 64, l.host_mr->lkey,
		0x200000 + 4096 - 56, mr->rkey, 0, 0, "overrun WRITE");
	if (st != IBV_WC_REM_ACCESS_ERR)
		fail("WRITE 8 bytes past the MR's end completed with %s, want %s",
		     ibv_wc_status_str(st), ibv_wc_status_str(IBV_WC_REM_ACCESS_ERR));
	else
		printf("overrun: WRITE 8 bytes past the MR's end: %s\n",
		       ibv_wc_status_str(st));
	/* the MR and the page after it stay what the host wrote */
	printf("BAR HOST overrun %" PRIu64 " %d\n", (uint64_t)(g.a.bar_offset + off), 8192);
	ibv_dereg_mr(mr);
	lb_close(&l);	/* the QP is in error after the remote access error */

	/* registering past the dma-buf's end */
	lb_open(&l, 4096);
	errno = 0;
	mr = ibv_reg_dmabuf_mr(l.pd, alloc - 4096, 8192, 0, g.dmabuf, ACCESS_ALL);
	if (mr || errno != EINVAL)
		fail("ibv_reg_dmabuf_mr past the dma-buf's end: %s, want EINVAL",
		     mr ? "registered" : strerror(errno));
	else
		printf("past the end: ibv_reg_dmabuf_mr(offset %zu, 8192 bytes) of a %zu-byte dma-buf: EINVAL\n",
		       alloc - 4096, alloc);
	if (mr)
		ibv_dereg_mr(mr);
	lb_close(&l);
	close(g.dmabuf);
	printf("vmaps after the MRs are gone: %lld\n", gp_sysfs(g.dev, "vmaps"));
	if (gp_sysfs(g.dev, "vmaps") != 0)
		fail("vmaps gauge is not 0 after every MR was deregistered");
	printf("%s\n", failures ? "traffic: FAILED" : "traffic: all checks passed");
	return failures ? 1 : 0;
}

static int cmd_demo(void)
{
	const size_t n = 4096;
	struct ibv_recv_wr rwr, *bad;
	struct ibv_sge rsge;
	struct ibv_mr *mr;
	enum ibv_wc_status st;
	struct gmem g;
	struct lb l;
	char sha[65];

	/* past the 1 MiB that `gdrpeer verify` used before it in the demo */
	gmem_alloc(&g, 1 << 20, 4 << 20);
	lb_open(&l, n);
	mr = reg_dmabuf(&l, g.dmabuf, 0, 3 * n, 0);
	printf("ibv_reg_dmabuf_mr on a gdrpeer dma-buf: lkey %#x, BAR offset %#llx\n",
	       mr->lkey, (unsigned long long)g.a.bar_offset);
	fill(l.host, n, 1);
	st = op(&l, IBV_WR_RDMA_WRITE, l.host, n, l.host_mr->lkey, 0, mr->rkey,
		0, 0, "RDMA WRITE");
	printf("RDMA WRITE %zu bytes: %s\n", n, ibv_wc_status_str(st));
	printf("BAR PATTERN write %llu %zu 1\n", (unsigned long long)g.a.bar_offset, n);
	rsge.addr = n;
	rsge.length = n;
	rsge.lkey = mr->lkey;
	memset(&rwr, 0, sizeof(rwr));
	rwr.sg_list = &rsge;
	rwr.num_sge = 1;
	if (ibv_post_recv(l.qp[1], &rwr, &bad))
		die("post receive: %s", strerror(errno));
	fill(l.host, n, 2);
	post_send(&l, IBV_WR_SEND, l.host, n, l.host_mr->lkey, 0, 0, 0, 0);
	st = wait_one(&l, "SEND");
	if (st == IBV_WC_SUCCESS)
		st = wait_one(&l, "SEND");
	printf("SEND %zu bytes into a receive on the MR: %s\n", n, ibv_wc_status_str(st));
	printf("BAR PATTERN send %llu %zu 2\n", (unsigned long long)g.a.bar_offset + n, n);
	host_fill(g.cpu + 2 * n, g.a.bar_offset + 2 * n, n);
	st = op(&l, IBV_WR_RDMA_READ, l.host, n, l.host_mr->lkey, 2 * n,
		mr->rkey, 0, 0, "RDMA READ");
	sha256_hex(l.host, n, sha);
	printf("RDMA READ %zu bytes: %s\n", n, ibv_wc_status_str(st));
	printf("BAR READ read %llu %zu %s\n", (unsigned long long)g.a.bar_offset + 2 * n, n, sha);
	ibv_dereg_mr(mr);
	lb_close(&l);
	return st == IBV_WC_SUCCESS ? 0 : 1;
}

static int cmd_hold(void)
{
	struct gmem g;
	struct lb l;

	gmem_alloc(&g, 1 << 20, 0);
	lb_open(&l, 4096);
	reg_dmabuf(&l, g.dmabuf, 0, 1 << 19, 0);
	reg_dmabuf(&l, g.dmabuf, 1 << 19, 1 << 19, 0);
	printf("ready: 2 dma-buf MRs, vmaps %lld\n", gp_sysfs(g.dev, "vmaps"));
	fflush(stdout);
	for (;;)
		pause();
	return 0;
}

/*
 * A WRITE loop into an MR over [0, len) of @dmabuf, 64 bytes per WRITE at
 * slot seq % (len / 64) holding the u64 seq eight times; after 64 good
 * WRITEs @revoke runs (it returns once the revocation is complete); the
 * loop goes on until an error completion.  Every WRITE posted after the
 * revocation must fail.
 */
static int write_loop(struct lb *l, int dmabuf, size_t len,
		      int (*revoke)(void *), void *arg, uint64_t *last_good)
{
	struct ibv_mr *mr = reg_dmabuf(l, dmabuf, 0, len, 0);
	uint64_t seq, revoked_at = 0;
	enum ibv_wc_status st = IBV_WC_SUCCESS;

	for (seq = 1; seq < 100000; seq++) {
		uint64_t *w = (uint64_t *)l->host;

		for (int i = 0; i < 8; i++)
			w[i] = seq;
		st = op(l, IBV_WR_RDMA_WRITE, l->host, 64, l->host_mr->lkey,
			(seq % (len / 64)) * 64, mr->rkey, 0, 0, "WRITE loop");
		if (st != IBV_WC_SUCCESS)
			break;
		if (seq == 64) {
			int ret = revoke(arg);

			if (ret)
				die("revoking: %s", strerror(-ret));
			revoked_at = seq;
			printf("revoked after WRITE %" PRIu64 "\n", seq);
		}
	}
	if (st == IBV_WC_SUCCESS) {
		fail("the WRITE loop never failed after the revocation");
	} else if (!revoked_at) {
		fail("WRITE %" PRIu64 " failed before the revocation: %s", seq,
		     ibv_wc_status_str(st));
	} else if (seq != revoked_at + 1) {
		fail("%" PRIu64 " WRITEs completed after the revocation", seq - revoked_at - 1);
	} else {
		printf("loop: WRITE %" PRIu64 " (the first after the revocation) completed with \"%s\" (%d)\n",
		       seq, ibv_wc_status_str(st), st);
	}
	*last_good = revoked_at;
	if (ibv_dereg_mr(mr))
		fail("ibv_dereg_mr after the revocation: %s", strerror(errno));
	return failures ? 1 : 0;
}

struct nv_revoke {
	int nv;
	uint64_t va;
};

static int nv_free(void *arg)
{
	struct nv_revoke *r = arg;

	return gp_nvstub_free(r->nv, r->va);
}

static int cmd_revoke_nvidia(void)
{
	const size_t len = 4 * NVSTUB_PAGE_SIZE;
	uint64_t offs[4];
	struct gdrpeer_export_va e;
	struct nv_revoke r;
	uint64_t last;
	struct lb l;
	int fd, ret;

	fd = open("/dev/gdrpeer", O_RDWR | O_CLOEXEC);
	r.nv = open(NVSTUB_DEVICE_PATH, O_RDWR | O_CLOEXEC);
	if (fd < 0 || r.nv < 0)
		die("open /dev/gdrpeer or %s: %s", NVSTUB_DEVICE_PATH, strerror(errno));
	ret = gp_nvstub_alloc(r.nv, len, 0, offs, &r.va);
	if (ret)
		die("stand-in cuMemAlloc: %s", strerror(-ret));
	for (int i = 1; i < 4; i++)
		if (offs[i] != offs[0] + i * NVSTUB_PAGE_SIZE)
			die("the stand-in allocation is not contiguous");
	memset(&e, 0, sizeof(e));
	e.va = r.va;
	e.length = len;
	e.flags = GDRPEER_PIN_CALLBACK;
	ret = gp_ioctl(fd, GDRPEER_IOCTL_EXPORT_VA, &e);
	if (ret)
		die("EXPORT_VA: %s", strerror(-ret));
	lb_open(&l, 4096);
	ret = write_loop(&l, e.fd, len, nv_free, &r, &last);
	/* freed memory is poisoned once no pin holds it: no WRITE after */
	printf("BAR POISON nvidia %" PRIu64 " %zu\n", offs[0], len);
	lb_close(&l);
	close(e.fd);
	close(r.nv);
	close(fd);
	return ret;
}

struct pci_revoke {
	char path[256];
	char value[64];
};

static int pci_write(void *arg)
{
	struct pci_revoke *r = arg;
	int fd = open(r->path, O_WRONLY);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = write(fd, r->value, strlen(r->value));
	close(fd);
	return n < 0 ? -errno : 0;
}

/* QEMU takes the device away (pciehp handles it); 0 once it left sysfs */
static int unplug(void *arg)
{
	const char *bdf = arg;
	char path[128];
	int status = system("emunode-host device_del gpu");

	if (status)
		return -EIO;
	snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s", bdf);
	for (int i = 0; i < 300; i++) {
		if (access(path, F_OK))
			return 0;
		usleep(100000);
	}
	return -ETIMEDOUT;
}

struct edu_loop {
	int hca;
	uint32_t id;
	unsigned long done;
	uint64_t mismatches;
	int err;		/* -errno that ended the loop */
};

static void *edu_loop_main(void *arg)
{
	struct edu_loop *e = arg;

	for (;;) {
		struct edu_hca_import_dma d = { .id = e->id, .length = 2048, .seed = e->done + 1 };
		int ret = gp_ioctl(e->hca, EDU_HCA_IOCTL_IMPORT_DMA, &d);

		e->mismatches += d.mismatches;
		if (ret) {
			e->err = ret;
			return NULL;
		}
		e->done++;
	}
}

/* after device_add: bound again by driver_override + bind, a new MR takes a WRITE */
static int serves_again(const char *bdf)
{
	char path[128];
	struct gmem g;
	struct lb l;
	struct ibv_mr *mr;
	enum ibv_wc_status st;
	int i, ret;

	if (system("emunode-host device_add gpu"))
		return -EIO;
	snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s", bdf);
	for (i = 0; i < 300 && access(path, F_OK); i++)
		usleep(100000);
	sleep(2);	/* sysfs shows it before the PCI core has finished adding it */
	snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/driver_override", bdf);
	ret = gp_write_file(path, "gdrpeer");
	if (!ret)
		ret = gp_write_file("/sys/bus/pci/drivers/gdrpeer/bind", bdf);
	if (ret)
		return ret;
	gmem_alloc(&g, 1 << 16, 3u << 20);
	lb_open(&l, 4096);
	mr = reg_dmabuf(&l, g.dmabuf, 0, 1 << 16, 0);
	memset(l.host, 0x5a, 64);
	st = op(&l, IBV_WR_RDMA_WRITE, l.host, 64, l.host_mr->lkey, 0, mr->rkey, 0, 0,
		"WRITE after re-plug");
	ret = st == IBV_WC_SUCCESS && g.cpu[0] == 0x5a && g.cpu[63] == 0x5a ? 0 : -EIO;
	printf("re-plugged: bound, new MR's WRITE %s, bytes %s\n", ibv_wc_status_str(st),
	       g.cpu[0] == 0x5a ? "landed" : "missing");
	ibv_dereg_mr(mr);
	lb_close(&l);
	close(g.dmabuf);
	munmap((void *)g.cpu, 1 << 16);
	close(g.fd);
	return ret;
}

static int cmd_unplug(void)
{
	/* the MR's dma-buf: the first half; the edu import's: the second */
	const size_t len = 1 << 16;
	struct edu_hca_import im = { 0 };
	struct edu_hca_import_state st = { 0 };
	struct edu_loop e = { 0 };
	struct gp_dev d;
	struct gmem g;
	struct lb l;
	pthread_t tid;
	uint64_t last;
	int mr_buf, ret;

	if (access("/usr/bin/emunode-host", X_OK)) {
		printf("SKIP: emunode-host absent: not in the emulated node\n");
		return 4;
	}
	gmem_alloc(&g, 2 * len, 4u << 20);
	if (gp_find_device(g.fd, &d))
		die("no device");
	mr_buf = gp_export(g.fd, g.a.handle, 0, len);
	im.dmabuf_fd = gp_export(g.fd, g.a.handle, len, len);
	if (mr_buf < 0 || im.dmabuf_fd < 0)
		die("export: %s", strerror(-(mr_buf < 0 ? mr_buf : im.dmabuf_fd)));
	e.hca = open(EDU_HCA_DEVICE_PATH, O_RDWR | O_CLOEXEC);
	if (e.hca < 0)
		die("%s: %s (gdrpeer_edu_hca.ko loaded?)", EDU_HCA_DEVICE_PATH, strerror(errno));
	ret = gp_ioctl(e.hca, EDU_HCA_IOCTL_IMPORT, &im);
	if (ret)
		die("edu IMPORT: %s", strerror(-ret));
	e.id = im.id;
	pthread_create(&tid, NULL, edu_loop_main, &e);
	while (!e.done && !e.err)
		usleep(10000);
	g.cpu[2 * len - 8] = 7;	/* the CPU mapping is live (and faulted in) */

	lb_open(&l, 4096);
	ret = write_loop(&l, mr_buf, len, unplug, d.bdf, &last);
	printf("BAR SEQMAX pcibar %llu %zu %" PRIu64 "\n",
	       (unsigned long long)g.a.bar_offset, len, last);
	pthread_join(tid, NULL);
	if (e.err != -ENODEV || e.mismatches || !e.done)
		fail("edu DMA loop: %lu DMAs, then %s (want ENODEV), %llu bytes wrong", e.done,
		     strerror(-e.err), (unsigned long long)e.mismatches);
	else
		printf("edu DMA loop: %lu DMAs right, then ENODEV\n", e.done);
	st.id = im.id;
	ret = gp_ioctl(e.hca, EDU_HCA_IOCTL_IMPORT_STATE, &st);
	if (ret || st.revoked != 1 || st.nents)
		fail("edu import not revoked (state %s, revoked %u)", strerror(-ret), st.revoked);
	else
		printf("edu import revoked\n");
	if (!faults_on_read_and_write((volatile uint8_t *)g.cpu))
		fail("the CPU mapping still reads or writes after the unplug");
	else
		printf("CPU mapping: SIGBUS on read and write\n");
	lb_close(&l);
	munmap((void *)g.cpu, 2 * len);
	close(e.hca);
	close(im.dmabuf_fd);
	close(mr_buf);
	close(g.dmabuf);
	close(g.fd);
	ret = serves_again(d.bdf);
	if (ret)
		fail("re-plug, bind and a WRITE through a new MR: %s", strerror(-ret));
	return failures ? 1 : 0;
}

static int cmd_revoke_pcibar(const char *how)
{
	const size_t len = 1 << 16;
	struct pci_revoke r;
	struct gp_dev d;
	uint64_t last;
	struct gmem g;
	struct lb l;
	int ret;

	bus_install(); /* the revoked CPU mapping is probed for SIGBUS */
	if (access("/sys/bus/pci/drivers/gdrpeer", F_OK)) {
		printf("SKIP: /sys/bus/pci/drivers/gdrpeer is absent: this gdrpeer is not the PCI driver of the BAR function, so unbind/remove cannot revoke yet\n");
		return 4;
	}
	if (!strcmp(how, "device_del"))
		return cmd_unplug();
	/*
	 * Each run's bytes get their own part of the BAR, so that what a later
	 * command of the same boot allocates (and ALLOC clears) or the
	 * stand-in poisons at BAR offset 0 leaves them for the host to check.
	 */
	gmem_alloc(&g, len, !strcmp(how, "unbind") ? 2u << 20 : 1u << 20);
	if (gp_find_device(g.fd, &d))
		die("no device");
	if (!strcmp(how, "unbind")) {
		snprintf(r.path, sizeof(r.path), "/sys/bus/pci/drivers/gdrpeer/unbind");
		snprintf(r.value, sizeof(r.value), "%s", d.bdf);
	} else {
		snprintf(r.path, sizeof(r.path), "/sys/bus/pci/devices/%s/remove", d.bdf);
		snprintf(r.value, sizeof(r.value), "1");
	}
	lb_open(&l, 4096);
	ret = write_loop(&l, g.dmabuf, len, pci_write, &r, &last);
	/* each 64-byte slot: the host's boot bytes or a seq <= last */
	printf("BAR SEQMAX pcibar %llu %zu %" PRIu64 "\n",
	       (unsigned long long)g.a.bar_offset, len, last);
	lb_close(&l);
	return ret;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	seed_base = (uint32_t)time(NULL);
	if (argc >= 2 && !strcmp(argv[1], "traffic"))
		return cmd_traffic();
	if (argc >= 2 && !strcmp(argv[1], "demo"))
		return cmd_demo();
	if (argc >= 2 && !strcmp(argv[1], "hold"))
		return cmd_hold();
	if (argc >= 2 && !strcmp(argv[1], "revoke-nvidia"))
		return cmd_revoke_nvidia();
	if (argc >= 3 && !strcmp(argv[1], "revoke-pcibar"))
		return cmd_revoke_pcibar(argv[2]);
	fprintf(stderr, "usage: %s traffic|demo|hold|revoke-nvidia|revoke-pcibar unbind|remove|device_del\n",
		argv[0]);
	return 2;
}

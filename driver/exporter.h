/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Exporters: how importers (RDMA NICs, other DMA devices) get at a region.
 * Each exporter takes its own region reference for as long as the object
 * it hands out lives.
 */
#ifndef GDRPEER_EXPORTER_H
#define GDRPEER_EXPORTER_H

#include "gdrpeer_core.h"

struct dma_buf;

/* exporter_dmabuf.c (kernel-doc at the definitions) */
struct dma_buf *gdrpeer_dmabuf_export(struct gdrpeer_region *r, u64 offset,
				      u64 length);
void gdrpeer_dmabuf_revoke_region(struct gdrpeer_region *r);

/*
 * exporter_peermem.c: gdrpeer as a peer-memory client of OFED's ib_core
 * (ibv_reg_mr of a handle mapping), built when driver/Makefile found
 * OFED's headers; otherwise only its status line says why not.
 */
int gdrpeer_peermem_init(struct kobject *providers);
void gdrpeer_peermem_exit(void);
const char *gdrpeer_peermem_status(void);
void gdrpeer_peermem_revoke_region(struct gdrpeer_region *r);

/*
 * gdrpeer_revokers - what gdrpeer_region_revoke() (gdrpeer_region.c) runs
 * once the region's memory is marked revoked and its handle mappings are
 * zapped, in this order.  This is the one place that lists exporters to
 * revocation: the core calls none of them by name, and a new exporter is
 * one line here.  Only gdrpeer_region.c reads it (__maybe_unused for the
 * other files that include this header).
 *
 * Each entry revokes everything its exporter handed out from the region
 * and returns when the importers of what it revoked have let go (it may
 * wait long for them).  Each runs in process context with the caller's
 * region reference and no lock of ours held, takes only its own locks
 * (listed in its file) and is idempotent.  The entries do not depend on
 * each other; the order is the one revocation has always had: dma-bufs
 * (importers through ib_umem_dmabuf and other dma-buf users), then
 * peer-memory registrations (ibv_reg_mr under OFED).
 */
static void (*const gdrpeer_revokers[])(struct gdrpeer_region *r) __maybe_unused = {
	gdrpeer_dmabuf_revoke_region,
	gdrpeer_peermem_revoke_region,
};

#endif /* GDRPEER_EXPORTER_H */

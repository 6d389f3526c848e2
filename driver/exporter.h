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

/*
 * exporter_dmabuf.c: a dma-buf for [offset, offset + length) of @r.
 * The caller has validated the range.  Returns the dma-buf (one reference,
 * owned by the caller) or an ERR_PTR.
 */
struct dma_buf *gdrpeer_dmabuf_export(struct gdrpeer_region *r, u64 offset,
				      u64 length);

/* Memory of @r is gone: revoke every dma-buf exported from it (sleeps). */
void gdrpeer_dmabuf_revoke_region(struct gdrpeer_region *r);

/*
 * exporter_peermem.c: gdrpeer as a peer-memory client of OFED's ib_core
 * (ibv_reg_mr of a handle mapping), built when driver/Makefile found
 * OFED's headers; otherwise only its status line says why not.
 */
int gdrpeer_peermem_init(struct kobject *providers);
void gdrpeer_peermem_exit(void);
const char *gdrpeer_peermem_status(void);
/* Memory of @r is gone: invalidate every registration of it (sleeps). */
void gdrpeer_peermem_revoke_region(struct gdrpeer_region *r);

#endif /* GDRPEER_EXPORTER_H */

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

#endif /* GDRPEER_EXPORTER_H */

/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The test-only edu stand-in HCA (selftests/kmod/gdrpeer_edu_hca.ko) as a
 * long-lived dma-buf importer: thin wrappers of its ioctls, each returning
 * 0 or -errno.  Include after gdrpeer_test.h.
 */
#ifndef GDRPEER_EDU_TEST_H
#define GDRPEER_EDU_TEST_H

#include "../kmod/gdrpeer_edu_hca.h"

static inline int edu_import(int hca, int dfd, uint32_t flags,
		      struct edu_hca_import *r)
{
	memset(r, 0, sizeof(*r));
	r->dmabuf_fd = dfd;
	r->flags = flags;
	return gp_ioctl(hca, EDU_HCA_IOCTL_IMPORT, r);
}

static inline int edu_import_dma(int hca, uint32_t id, uint64_t off, uint64_t len,
			  uint64_t seed, struct edu_hca_import_dma *r)
{
	memset(r, 0, sizeof(*r));
	r->id = id;
	r->offset = off;
	r->length = len;
	r->seed = seed;
	return gp_ioctl(hca, EDU_HCA_IOCTL_IMPORT_DMA, r);
}

static inline int edu_unimport(int hca, uint32_t id)
{
	struct edu_hca_unimport u;

	memset(&u, 0, sizeof(u));
	u.id = id;
	return gp_ioctl(hca, EDU_HCA_IOCTL_UNIMPORT, &u);
}

static inline int edu_state(int hca, uint32_t id, struct edu_hca_import_state *s)
{
	memset(s, 0, sizeof(*s));
	s->id = id;
	return gp_ioctl(hca, EDU_HCA_IOCTL_IMPORT_STATE, s);
}

/*
 * In a test body: @hca = a descriptor of the edu stand-in, or the test
 * skips, saying why, when the module is not loaded.
 */
#define EDU_OPEN_OR_SKIP(hca)						\
	do {								\
		(hca) = open(EDU_HCA_DEVICE_PATH, O_RDWR | O_CLOEXEC);	\
		if ((hca) < 0)						\
			SKIP(return, EDU_HCA_DEVICE_PATH ": %s (edu stand-in not loaded)", \
			     strerror(errno));				\
	} while (0)

#endif /* GDRPEER_EDU_TEST_H */

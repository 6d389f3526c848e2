// SPDX-License-Identifier: GPL-2.0
/*
 * kselftest: gdrpeer memory at the RDMA boundary on the soft RoCE device
 * rxe0.  rxe cannot import dma-buf in any supported kernel, so
 * ibv_reg_dmabuf_mr of an exported buffer must fail with exactly
 * EOPNOTSUPP; ibv_reg_mr of host memory is the working baseline.
 * $GDRPEER_RDMA_DEV overrides the device name (default rxe0).
 *
 * rdma-core's rxe provider has no reg_dmabuf_mr, so ibv_reg_dmabuf_mr()
 * answers EOPNOTSUPP from libibverbs without a system call.  To reach the
 * kernel too, one test issues UVERBS_METHOD_REG_DMABUF_MR itself through
 * libibverbs' provider helper ibv_cmd_reg_dmabuf_mr() (a private symbol,
 * hence weak: the test skips when the library lacks it).
 */
#define _GNU_SOURCE
#include <infiniband/verbs.h>

#include "gdrpeer_test.h"
#include "kselftest_harness.h"

/*
 * struct verbs_mr of <infiniband/driver.h> (not installed): ibv_mr plus
 * two ints; spare room in case a newer library writes more.  The trailing
 * ibv_command_buffer argument exists in newer rdma-core only; passing NULL
 * where it does not exist is harmless in the x86-64 calling convention.
 */
struct gp_verbs_mr {
	struct ibv_mr ibv_mr;
	int mr_type;
	int access;
	char spare[64];
};
struct ibv_command_buffer;
extern int ibv_cmd_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t offset,
				 size_t length, uint64_t iova, int fd,
				 int access, struct gp_verbs_mr *vmr,
				 struct ibv_command_buffer *driver)
	__attribute__((weak));

FIXTURE(rdma)
{
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	int fd;
	unsigned int dev;
	uint64_t page;
};

static struct ibv_context *open_by_name(const char *name)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_context *ctx = NULL;
	int i;

	if (!list)
		return NULL;
	for (i = 0; list[i]; i++)
		if (!strcmp(ibv_get_device_name(list[i]), name))
			ctx = ibv_open_device(list[i]);
	ibv_free_device_list(list);
	return ctx;
}

FIXTURE_SETUP(rdma)
{
	const char *name = getenv("GDRPEER_RDMA_DEV");
	struct gp_dev d;

	self->fd = -1;
	if (!name)
		name = "rxe0";
	self->ctx = open_by_name(name);
	if (!self->ctx)
		SKIP(return, "no RDMA device %s", name);
	self->pd = ibv_alloc_pd(self->ctx);
	ASSERT_NE(NULL, self->pd);
	self->page = (uint64_t)gp_page();
	self->fd = open("/dev/gdrpeer", O_RDWR | O_CLOEXEC);
	if (self->fd < 0)
		SKIP(return, "/dev/gdrpeer: %s", strerror(errno));
	if (gp_find_device(self->fd, &d))
		SKIP(return, "no bound gdrpeer device");
	self->dev = d.info.index;
}

FIXTURE_TEARDOWN(rdma)
{
	if (self->pd)
		ibv_dealloc_pd(self->pd);
	if (self->ctx)
		ibv_close_device(self->ctx);
	if (self->fd >= 0)
		close(self->fd);
}

GP_TEST_F(rdma, reg_dmabuf_mr_eopnotsupp)
{
	uint64_t size = 16 * self->page;
	struct gdrpeer_alloc a;
	struct ibv_mr *mr;
	int dfd, err;

	ASSERT_EQ(0, gp_alloc(self->fd, self->dev, size, &a));
	dfd = gp_export(self->fd, a.handle, 0, size);
	ASSERT_LE(0, dfd);
	errno = 0;
	mr = ibv_reg_dmabuf_mr(self->pd, 0, size, 0, dfd,
			       IBV_ACCESS_LOCAL_WRITE |
			       IBV_ACCESS_REMOTE_WRITE |
			       IBV_ACCESS_REMOTE_READ);
	err = errno;
	EXPECT_EQ(NULL, mr);
	EXPECT_EQ(EOPNOTSUPP, err) TH_LOG("errno %d (%s)", err, strerror(err));
	if (mr)
		ibv_dereg_mr(mr);
	/* a refused registration leaves nothing attached */
	EXPECT_EQ(0, gp_sysfs(self->dev, "attachments"));
	EXPECT_EQ(0, gp_sysfs(self->dev, "active_maps"));
	close(dfd);
	EXPECT_EQ(0, gp_free(self->fd, a.handle));
}

GP_TEST_F(rdma, reg_dmabuf_mr_kernel_uverbs_eopnotsupp)
{
	uint64_t size = 16 * self->page;
	struct gdrpeer_alloc a;
	struct gp_verbs_mr vmr;
	int dfd, ret;

	if (!ibv_cmd_reg_dmabuf_mr)
		SKIP(return, "libibverbs has no ibv_cmd_reg_dmabuf_mr");
	ASSERT_EQ(0, gp_alloc(self->fd, self->dev, size, &a));
	dfd = gp_export(self->fd, a.handle, 0, size);
	ASSERT_LE(0, dfd);
	memset(&vmr, 0, sizeof(vmr));
	/*
	 * The kernel's answer: rxe has no reg_user_mr_dmabuf.  6.1 and later
	 * reach the method and say EOPNOTSUPP; 5.10 leaves the method out of
	 * the device's uverbs API and says EPROTONOSUPPORT.
	 */
	ret = ibv_cmd_reg_dmabuf_mr(self->pd, 0, size, 0, dfd,
				    IBV_ACCESS_LOCAL_WRITE, &vmr, NULL);
	EXPECT_TRUE(ret == EOPNOTSUPP || ret == EPROTONOSUPPORT)
		TH_LOG("ret %d (%s)", ret, strerror(ret));
	EXPECT_EQ(0, gp_sysfs(self->dev, "attachments"));
	close(dfd);
	EXPECT_EQ(0, gp_free(self->fd, a.handle));
}

GP_TEST_F(rdma, reg_mr_host_memory_works)
{
	size_t size = 16 * self->page;
	struct ibv_mr *mr;
	void *buf;

	buf = mmap(NULL, size, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, buf);
	memset(buf, 1, size);
	mr = ibv_reg_mr(self->pd, buf, size, IBV_ACCESS_LOCAL_WRITE |
			IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
	ASSERT_NE(NULL, mr) TH_LOG("ibv_reg_mr: %s", strerror(errno));
	EXPECT_EQ(size, mr->length);
	EXPECT_NE(0, mr->lkey);
	EXPECT_EQ(0, ibv_dereg_mr(mr));
	munmap(buf, size);
}

GP_HARNESS_MAIN

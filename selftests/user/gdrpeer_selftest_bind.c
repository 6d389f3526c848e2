// SPDX-License-Identifier: GPL-2.0
/*
 * kselftest: run-time binding of the pcibar provider and every refusal
 * reason, each with its errno.  Uses the emulated node's devices from the
 * environment: GDRPEER_GPU_BDF (ivshmem: BAR0 256-byte registers, BAR2
 * the prefetchable "GPU" BAR), GDRPEER_NIC_BDF (bound to e1000e),
 * GDRPEER_EDU_BDF (edu: BAR0 1 MiB, not prefetchable; must not have a
 * driver yet, i.e. run this before gdrpeer_edu_hca.ko is loaded).
 * Expects the GPU bound at start (insmod gdrpeer.ko pcibar=$GDRPEER_GPU_BDF)
 * and leaves it bound.
 */
#define _GNU_SOURCE

#include "gdrpeer_test.h"
#include "kselftest_harness.h"

/* 0 or errno of writing @spec to pcibar_bind / pcibar_unbind */
static int sysfs_write(const char *attr, const char *spec)
{
	char path[128];
	ssize_t n;
	int fd, err = 0;

	snprintf(path, sizeof(path), GDRPEER_SYSFS "/%s", attr);
	fd = open(path, O_WRONLY);
	if (fd < 0)
		return errno;
	n = write(fd, spec, strlen(spec));
	if (n < 0)
		err = errno;
	close(fd);
	return err;
}

static int do_bind(const char *spec)
{
	return sysfs_write("pcibar_bind", spec);
}

static int do_unbind(const char *spec)
{
	return sysfs_write("pcibar_unbind", spec);
}

static int bound_count(void)
{
	struct gdrpeer_list_devices ld = {
		.entry_size = sizeof(struct gdrpeer_device_info) };
	int fd = open("/dev/gdrpeer", O_RDWR), ret;

	if (fd < 0)
		return -1;
	ret = gp_ioctl(fd, GDRPEER_IOCTL_LIST_DEVICES, &ld);
	close(fd);
	return ret ? -1 : (int)ld.total;
}

FIXTURE(bind)
{
	const char *gpu, *nic, *edu;
	char spec[64];
};

FIXTURE_SETUP(bind)
{
	self->gpu = getenv("GDRPEER_GPU_BDF");
	self->nic = getenv("GDRPEER_NIC_BDF");
	self->edu = getenv("GDRPEER_EDU_BDF");
	if (!self->gpu || !self->nic || !self->edu)
		SKIP(return, "needs GDRPEER_GPU_BDF, _NIC_BDF and _EDU_BDF (emulated node)");
	if (access(GDRPEER_SYSFS "/pcibar_bind", W_OK))
		SKIP(return, "gdrpeer.ko not loaded");
	ASSERT_EQ(1, bound_count()) TH_LOG("expects only the GPU bound");
}

FIXTURE_TEARDOWN(bind)
{
	/* whatever happened, leave the GPU bound */
	if (self->gpu && bound_count() == 0)
		do_bind(self->gpu);
}

GP_TEST_F(bind, rebind_roundtrip)
{
	EXPECT_EQ(0, do_unbind(self->gpu));
	EXPECT_EQ(0, bound_count());
	EXPECT_EQ(-1, gp_sysfs(0, "bar_size"));	/* directory gone */
	/* newline as echo writes it */
	snprintf(self->spec, sizeof(self->spec), "%s\n", self->gpu);
	EXPECT_EQ(0, do_bind(self->spec));
	EXPECT_EQ(1, bound_count());
	EXPECT_EQ(2, gp_sysfs(0, "bar"));
	EXPECT_EQ(gp_sysfs(0, "bar_size"), gp_sysfs(0, "free_bytes"));
}

GP_TEST_F(bind, bind_twice_ebusy)
{
	EXPECT_EQ(EBUSY, do_bind(self->gpu));
	EXPECT_EQ(1, bound_count());
}

GP_TEST_F(bind, bind_claimed_by_driver_ebusy)
{
	EXPECT_EQ(EBUSY, do_bind(self->nic));
	EXPECT_EQ(1, bound_count());
}

GP_TEST_F(bind, bind_bar_too_small_enospc)
{
	ASSERT_EQ(0, do_unbind(self->gpu));
	snprintf(self->spec, sizeof(self->spec), "%s@0", self->gpu);
	EXPECT_EQ(ENOSPC, do_bind(self->spec));	/* 256-byte register BAR */
	EXPECT_EQ(0, bound_count());
	EXPECT_EQ(0, do_bind(self->gpu));
}

GP_TEST_F(bind, bind_not_memory_bar_einval)
{
	ASSERT_EQ(0, do_unbind(self->gpu));
	/* BAR1 is not implemented, BAR3 is the upper half of BAR2 */
	snprintf(self->spec, sizeof(self->spec), "%s@1", self->gpu);
	EXPECT_EQ(EINVAL, do_bind(self->spec));
	snprintf(self->spec, sizeof(self->spec), "%s@3", self->gpu);
	EXPECT_EQ(EINVAL, do_bind(self->spec));
	EXPECT_EQ(0, bound_count());
	EXPECT_EQ(0, do_bind(self->gpu));
}

GP_TEST_F(bind, bind_not_prefetchable_einval)
{
	snprintf(self->spec, sizeof(self->spec), "%s@0", self->edu);
	EXPECT_EQ(EINVAL, do_bind(self->spec));
	/* and without @BAR: edu has no prefetchable BAR at all */
	EXPECT_EQ(EINVAL, do_bind(self->edu));
	EXPECT_EQ(1, bound_count());
}

GP_TEST_F(bind, bind_no_such_device_enodev)
{
	EXPECT_EQ(ENODEV, do_bind("0000:7e:1f.7"));
	EXPECT_EQ(1, bound_count());
}

GP_TEST_F(bind, bind_unparsable_einval)
{
	const char *bad[] = { "xyz", "00:02", "0000:00:02.0@9",
			      "0000:00:02.0@", "0000:00:02.8",
			      "0000:00:02.0 junk",
			      "0000:00:02.0@2@2" };
	unsigned int i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		const char *spec = bad[i];

		EXPECT_EQ(EINVAL, do_bind(spec)) TH_LOG("spec '%s'", spec);
	}
	EXPECT_EQ(1, bound_count());
}

GP_TEST_F(bind, unbind_not_bound_enodev)
{
	EXPECT_EQ(ENODEV, do_unbind(self->edu));
	EXPECT_EQ(ENODEV, do_unbind("0000:7e:1f.7"));
	EXPECT_EQ(1, bound_count());
}

GP_HARNESS_MAIN

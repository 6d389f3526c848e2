/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Calls into the nvstub stand-in ("cuMemAlloc"/"cuMemFree") shared by the
 * selftests that use it, and its sysfs knobs.  Include after gdrpeer_test.h
 * (gp_ioctl, gp_read_num, gp_write_file).
 */
#ifndef GDRPEER_NVSTUB_TEST_H
#define GDRPEER_NVSTUB_TEST_H

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "../kmod/gdrpeer_nvstub.h"

/* NVSTUB_IOCTL_ALLOC: 0 or -errno; offs (optional) gets size/64K entries;
 * *va (optional) gets the address, 0 on failure
 */
static inline int gp_nvstub_alloc(int nv, uint64_t size, uint32_t flags,
				  uint64_t *offs, uint64_t *va)
{
	struct nvstub_alloc a;
	int ret;

	memset(&a, 0, sizeof(a));
	a.size = size;
	a.flags = flags;
	a.bar_offsets_ptr = (uintptr_t)offs;
	ret = gp_ioctl(nv, NVSTUB_IOCTL_ALLOC, &a);
	if (va)
		*va = ret ? 0 : a.va;
	return ret;
}

/* NVSTUB_IOCTL_FREE: 0 or -errno */
static inline int gp_nvstub_free(int nv, uint64_t va)
{
	struct nvstub_free f;

	memset(&f, 0, sizeof(f));
	f.va = va;
	return gp_ioctl(nv, NVSTUB_IOCTL_FREE, &f);
}

#define GP_NVSTUB_SYSFS "/sys/class/misc/gdrpeer_nvstub"

/* /sys/class/misc/gdrpeer_nvstub/<name> as a number (any base); -1 on error */
static inline long long gp_nvstub_num(const char *name)
{
	return gp_sysfs_num(GP_NVSTUB_SYSFS, name);
}

/* Write @val to the stand-in's sysfs knob @name: 0 or -errno */
static inline int gp_nvstub_set(const char *name, const char *val)
{
	char path[128];

	snprintf(path, sizeof(path), GP_NVSTUB_SYSFS "/%s", name);
	return -gp_write_file(path, val);
}

#endif /* GDRPEER_NVSTUB_TEST_H */

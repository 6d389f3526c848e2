// SPDX-License-Identifier: GPL-2.0
/*
 * The provider registry: which providers gdrpeer.ko is built with, their
 * sysfs directories /sys/class/gdrpeer/gdrpeer/providers/<name>/, and the
 * hooks the char device reaches them through (provider.h).  This is the
 * one place that lists providers.
 *
 * The list is fixed at build time and only read, so the hooks need no
 * lock; providers_kobj[] is written at load and unload only, which the
 * module loader serialises against everything else here.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/dma-buf.h>
#include <linux/err.h>
#include <linux/kernel.h>
#include <linux/kobject.h>
#include <linux/sysfs.h>

#include <gdrpeer.h>

#include "provider.h"

/* Load order; unload runs backwards.  The load line names them so. */
static const struct gdrpeer_provider *const gdrpeer_provider_list[] = {
	&gdrpeer_pcibar_provider,
	&gdrpeer_nvidia_provider,
};

#define GDRPEER_NR_PROVIDERS ARRAY_SIZE(gdrpeer_provider_list)

static struct kobject *gdrpeer_providers_dir;	/* .../gdrpeer/providers */
static struct kobject *gdrpeer_provider_dirs[GDRPEER_NR_PROVIDERS];
/* how many providers' init succeeded, in list order */
static unsigned int gdrpeer_providers_started;

#define gdrpeer_for_each_provider(p, i)						\
	for ((i) = 0; (i) < GDRPEER_NR_PROVIDERS &&			\
		      ((p) = gdrpeer_provider_list[i]); (i)++)

/**
 * gdrpeer_providers_node_groups() - the providers' files of the class device
 *
 * Context: Module load, before device_add() of the class device; the
 * array is static and built here.
 * Return: each provider's node_group, NULL terminated, for device_add().
 */
const struct attribute_group **gdrpeer_providers_node_groups(void)
{
	static const struct attribute_group *groups[GDRPEER_NR_PROVIDERS + 1];
	const struct gdrpeer_provider *p;
	unsigned int i, n = 0;

	gdrpeer_for_each_provider(p, i)
		if (p->node_group)
			groups[n++] = p->node_group;
	groups[n] = NULL;
	return groups;
}

static void gdrpeer_provider_dir_remove(unsigned int i)
{
	const struct gdrpeer_provider *p = gdrpeer_provider_list[i];

	if (!gdrpeer_provider_dirs[i])
		return;
	if (p->sysfs_group)
		sysfs_remove_group(gdrpeer_provider_dirs[i], p->sysfs_group);
	kobject_put(gdrpeer_provider_dirs[i]);
	gdrpeer_provider_dirs[i] = NULL;
}

static int gdrpeer_provider_dir_add(unsigned int i)
{
	const struct gdrpeer_provider *p = gdrpeer_provider_list[i];
	struct kobject *dir;
	int ret;

	dir = kobject_create_and_add(p->name, gdrpeer_providers_dir);
	if (!dir)
		return -ENOMEM;
	if (p->sysfs_group) {
		ret = sysfs_create_group(dir, p->sysfs_group);
		if (ret) {
			kobject_put(dir);
			return ret;
		}
	}
	gdrpeer_provider_dirs[i] = dir;
	return 0;
}

/**
 * gdrpeer_providers_init() - start every provider
 * @parent: the class device's kobject
 *
 * providers/ under @parent, then for each provider its directory and its
 * init, in list order.  All or nothing: on failure whatever was done is
 * undone.
 *
 * Context: Module load, process context, no lock of ours held (a
 * provider's init may bind devices, which takes the registry's locks).
 * Return: 0 or the first failing step's negative errno.
 */
int gdrpeer_providers_init(struct kobject *parent)
{
	const struct gdrpeer_provider *p;
	unsigned int i;
	int ret;

	gdrpeer_providers_dir = kobject_create_and_add("providers", parent);
	if (!gdrpeer_providers_dir)
		return -ENOMEM;
	gdrpeer_for_each_provider(p, i) {
		ret = gdrpeer_provider_dir_add(i);
		if (ret)
			goto err;
	}
	gdrpeer_for_each_provider(p, i) {
		ret = p->init ? p->init() : 0;
		if (ret)
			goto err;
		gdrpeer_providers_started = i + 1;
	}
	return 0;

err:
	gdrpeer_providers_exit();
	return ret;
}

/**
 * gdrpeer_providers() - the providers/ directory
 *
 * Context: Any context, between gdrpeer_providers_init() and
 * gdrpeer_providers_exit().
 * Return: .../gdrpeer/providers, for exporters that list themselves
 * beside the providers.
 */
struct kobject *gdrpeer_providers(void)
{
	return gdrpeer_providers_dir;
}

/**
 * gdrpeer_providers_exit() - stop every started provider
 *
 * Context: Module unload (or a failed load), process context, no lock of
 * ours held; each started provider's exit runs backwards, then sysfs goes.
 */
void gdrpeer_providers_exit(void)
{
	unsigned int i;

	for (i = gdrpeer_providers_started; i-- > 0;)
		if (gdrpeer_provider_list[i]->exit)
			gdrpeer_provider_list[i]->exit();
	gdrpeer_providers_started = 0;
	for (i = GDRPEER_NR_PROVIDERS; i-- > 0;)
		gdrpeer_provider_dir_remove(i);
	kobject_put(gdrpeer_providers_dir);
	gdrpeer_providers_dir = NULL;
}

/**
 * gdrpeer_providers_caps() - what the providers add to GDRPEER_IOCTL_INFO
 *
 * Context: Process context (an ioctl); the list needs no lock.
 * Return: the GDRPEER_CAP_* bits of every provider, right now.
 */
u32 gdrpeer_providers_caps(void)
{
	const struct gdrpeer_provider *p;
	unsigned int i;
	u32 caps = 0;

	gdrpeer_for_each_provider(p, i)
		if (p->caps)
			caps |= p->caps();
	return caps;
}

/**
 * gdrpeer_providers_export_va() - GDRPEER_IOCTL_EXPORT_VA, to its provider
 * @e: the ioctl's argument, copied in; its outputs are filled
 *
 * Context: Process context (an ioctl), no lock of ours held; the
 * provider pins the caller's memory and may sleep.
 * Return: the dma-buf (one reference) or an ERR_PTR (-ENODEV: no
 * provider serves it).
 */
struct dma_buf *gdrpeer_providers_export_va(struct gdrpeer_export_va *e)
{
	const struct gdrpeer_provider *p;
	unsigned int i;

	gdrpeer_for_each_provider(p, i)
		if (p->export_va)
			return p->export_va(e);
	return ERR_PTR(-ENODEV);
}

/**
 * gdrpeer_providers_pin_user() - pin a user address that is not gdrpeer's
 * @addr: first byte, in the calling process
 * @size: bytes
 * @mode: GDRPEER_PIN_* wanted (0: the provider's default); the one used
 * @page_size: the provider's page size, on success
 *
 * For the peer-memory client's registrations (struct gdrpeer_provider,
 * pin_user).
 *
 * Context: Process context, no lock of gdrpeer held (the caller may hold
 * ib_core's).  Sleeps.
 * Return: the region with one reference, or an ERR_PTR (-ENODEV: no
 * provider pins user addresses; -EINVAL: not the provider's memory).
 */
struct gdrpeer_region *gdrpeer_providers_pin_user(u64 addr, u64 size,
						  u32 *mode, u64 *page_size)
{
	const struct gdrpeer_provider *p;
	unsigned int i;

	gdrpeer_for_each_provider(p, i)
		if (p->pin_user)
			return p->pin_user(addr, size, mode, page_size);
	return ERR_PTR(-ENODEV);
}

/**
 * gdrpeer_providers_describe() - the providers' part of the load line
 * @buf: where "pcibar active, nvidia unavailable: ..." goes
 * @size: bytes of @buf
 *
 * Context: Process context; each provider's status takes no lock.
 * Return: the length written (without the NUL).
 */
size_t gdrpeer_providers_describe(char *buf, size_t size)
{
	const struct gdrpeer_provider *p;
	unsigned int i;
	size_t n = 0;

	if (size)
		buf[0] = '\0';
	gdrpeer_for_each_provider(p, i)
		n += scnprintf(buf + n, size - n, "%s%s %s", i ? ", " : "",
			       p->name, p->status ? p->status() : "active");
	return n;
}

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

/*
 * Attribute groups of the class device, NULL terminated, for
 * device_add(): each provider's node_group.
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

/*
 * Load: providers/ under @parent, then for each provider its directory and
 * its init.  All or nothing: on failure whatever was done is undone.
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

/* .../gdrpeer/providers, for exporters that list themselves beside the providers */
struct kobject *gdrpeer_providers(void)
{
	return gdrpeer_providers_dir;
}

/* Unload: every started provider's exit, backwards, then sysfs. */
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

/* GDRPEER_IOCTL_EXPORT_VA goes to the provider that serves it. */
struct dma_buf *gdrpeer_providers_export_va(struct gdrpeer_export_va *e)
{
	const struct gdrpeer_provider *p;
	unsigned int i;

	gdrpeer_for_each_provider(p, i)
		if (p->export_va)
			return p->export_va(e);
	return ERR_PTR(-ENODEV);
}

/* The peer-memory client's user addresses go to the provider that pins them. */
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

/* "pcibar active, nvidia unavailable: ..." into @buf; returns its length. */
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

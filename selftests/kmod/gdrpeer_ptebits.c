// SPDX-License-Identifier: GPL-2.0
/*
 * gdrpeer_ptebits.ko - test only: reads the page-table entry of a user
 * address of the calling process (see gdrpeer_ptebits.h), so the tests can
 * check that gdrpeer's CPU mappings of device memory are write-combining
 * and not the uncached type an unreserved range gets.
 *
 * The walk uses follow_pfnmap_start() (6.12+) or follow_pte() on the mm
 * (up to 6.9), whichever the kernel has (conftest.h); it holds the mmap
 * lock for reading around it.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/fs.h>
#include <linux/miscdevice.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/uaccess.h>

#include "conftest.h"
#include "gdrpeer_ptebits.h"

static int ptebits_walk(struct mm_struct *mm, struct ptebits_query *q)
{
#if defined(GDRPEER_HAVE_FOLLOW_PFNMAP_START)
	struct follow_pfnmap_args args = { .address = q->addr };
	int ret;

	args.vma = vma_lookup(mm, q->addr);
	if (!args.vma)
		return -EFAULT;
	ret = follow_pfnmap_start(&args);
	if (ret)
		return -EFAULT;
	q->prot = pgprot_val(args.pgprot);
	q->pfn = args.pfn;
	follow_pfnmap_end(&args);
	return 0;
#elif defined(GDRPEER_HAVE_FOLLOW_PTE_MM)
	spinlock_t *ptl;
	pte_t *ptep;
	pte_t pte;

	if (follow_pte(mm, q->addr, &ptep, &ptl))
		return -EFAULT;
	/* follow_pte() returned with *ptl held; say so to sparse */
	__acquire(ptl);
	pte = *ptep;
	pte_unmap_unlock(ptep, ptl);
	q->prot = pgprot_val(pte_pgprot(pte));
	q->pfn = pte_pfn(pte);
	return 0;
#else
	return -EOPNOTSUPP;
#endif
}

static long ptebits_ioctl(struct file *f, unsigned int cmd, unsigned long arg)
{
	void __user *uarg = (void __user *)arg;
	struct ptebits_query q;
	int ret;

	if (cmd != PTEBITS_IOCTL_QUERY)
		return -ENOTTY;
	if (copy_from_user(&q, uarg, sizeof(q)))
		return -EFAULT;
	mmap_read_lock(current->mm);
	ret = ptebits_walk(current->mm, &q);
	mmap_read_unlock(current->mm);
	if (ret)
		return ret;
	return copy_to_user(uarg, &q, sizeof(q)) ? -EFAULT : 0;
}

static const struct file_operations ptebits_fops = {
	.owner = THIS_MODULE,
	.unlocked_ioctl = ptebits_ioctl,
};

static struct miscdevice ptebits_dev = {
	.minor = MISC_DYNAMIC_MINOR,
	.name = "gdrpeer_ptebits",
	.fops = &ptebits_fops,
	.mode = 0600,
};
module_misc_device(ptebits_dev);

MODULE_DESCRIPTION("gdrpeer test only: page-table entry bits of a user address");
MODULE_LICENSE("GPL");

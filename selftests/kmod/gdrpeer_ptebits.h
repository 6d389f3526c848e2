/* SPDX-License-Identifier: GPL-2.0 */
/*
 * gdrpeer_ptebits.h - ioctl of the test-only module gdrpeer_ptebits.ko:
 * the page-table entry bits of one user address of the caller, so that a
 * test sees the memory type a CPU mapping really got (x86 PAT: the PWT,
 * PCD and PAT bits of a 4 KiB entry).
 */
#ifndef GDRPEER_PTEBITS_H
#define GDRPEER_PTEBITS_H

#include <linux/ioctl.h>
#include <linux/types.h>

#define PTEBITS_DEVICE_PATH "/dev/gdrpeer_ptebits"

/* x86 page-table entry bits that select the PAT entry (4 KiB pages) */
#define PTEBITS_X86_PWT (1ull << 3)
#define PTEBITS_X86_PCD (1ull << 4)
#define PTEBITS_X86_PAT (1ull << 7)
/* Linux's PAT layout: index 1 (PWT) is write-combining, 2 (PCD) uncached- */
#define PTEBITS_X86_CACHE_MASK (PTEBITS_X86_PWT | PTEBITS_X86_PCD | PTEBITS_X86_PAT)
#define PTEBITS_X86_WC PTEBITS_X86_PWT
#define PTEBITS_X86_UC_MINUS PTEBITS_X86_PCD

/*
 * PTEBITS_IOCTL_QUERY: in addr (mapped in the caller, a VM_IO/VM_PFNMAP
 * mapping); out prot (the entry's bits other than the frame number) and
 * pfn.  Errors: -EFAULT no mapping or no entry there yet (touch it first),
 * -EOPNOTSUPP this kernel has no page-walk helper the module knows.
 */
struct ptebits_query {
	__u64 addr;	/* in */
	__u64 prot;	/* out */
	__u64 pfn;	/* out */
};

#define PTEBITS_IOCTL_QUERY _IOWR('G', 0x70, struct ptebits_query)

#endif /* GDRPEER_PTEBITS_H */

/* SPDX-License-Identifier: ((GPL-2.0 WITH Linux-syscall-note) OR MIT) */
/*
 * gdrpeer.h - ioctl ABI of /dev/gdrpeer (gdrpeer.ko)
 *
 * gdrpeer hands out device memory that lives in a PCI BAR ("device
 * memory", as GPU memory is exposed through BAR1) to userspace and to
 * DMA-capable importers (RDMA NICs) through dma-buf.
 *
 * ABI rules (they are what keeps this header stable):
 *  - Every struct has a fixed size, a multiple of 8 bytes, explicit padding
 *    and trailing reserved fields.  Reserved fields and unknown flag bits
 *    must be zero on input (-EINVAL otherwise); the driver zeroes them on
 *    output.  New features use reserved fields / flag bits and bump the
 *    minor version; an incompatible change bumps the major version.
 *  - Every size, offset and handle is a __u64; pointers to user memory are
 *    passed as __u64 as well.  No kernel pointer or physical address is
 *    ever returned.
 *  - The argument size is part of the ioctl number.  A known ioctl whose
 *    encoded size or direction differs from this header fails with -EINVAL
 *    (short or oversized struct); an unknown ioctl number fails with -ENOTTY.
 *  - Handles belong to the open file description of /dev/gdrpeer that
 *    created them.  A handle of another open file (another process), a
 *    freed handle, or a made-up value fails with -ENOENT.  Handle values
 *    are never 0.
 *
 * Common errno values: -EFAULT bad user pointer, -EINVAL malformed
 * argument, -ENOENT unknown handle, -ENODEV unknown device index,
 * -ENOMEM device memory (or kernel memory) exhausted, -E2BIG request larger
 * than the device could ever satisfy, -EOVERFLOW offset + length wraps.
 */
#ifndef _UAPI_GDRPEER_H
#define _UAPI_GDRPEER_H

#include <linux/ioctl.h>
#include <linux/types.h>

#define GDRPEER_ABI_VERSION_MAJOR 1
#define GDRPEER_ABI_VERSION_MINOR 1
/* major in bits 31..16, minor in bits 15..0 */
#define GDRPEER_ABI_VERSION \
	((GDRPEER_ABI_VERSION_MAJOR << 16) | GDRPEER_ABI_VERSION_MINOR)
#define GDRPEER_ABI_MAJOR(v) (((v) >> 16) & 0xffff)
#define GDRPEER_ABI_MINOR(v) ((v) & 0xffff)

/* Character device node created by the driver. */
#define GDRPEER_DEVICE_PATH "/dev/gdrpeer"

/* Not registered in ioctl-number.rst: gdrpeer is an out-of-tree module. */
#define GDRPEER_IOCTL_MAGIC 0xDB

/* Memory providers (struct gdrpeer_device_info.provider). */
#define GDRPEER_PROVIDER_PCIBAR 1 /* generic PCI BAR carved by the driver */
#define GDRPEER_PROVIDER_NVIDIA 2 /* nvidia_p2p pins (GDRPEER_IOCTL_EXPORT_VA) */

/* struct gdrpeer_info.caps */
#define GDRPEER_CAP_DMABUF (1u << 0) /* GDRPEER_IOCTL_EXPORT is available */
#define GDRPEER_CAP_MMAP   (1u << 1) /* mmap() of a handle is available */
/* GDRPEER_IOCTL_EXPORT_VA works: the nvidia provider is active (ABI 1.1) */
#define GDRPEER_CAP_EXPORT_VA (1u << 2)
/* ... and it can pin persistently (nvidia_p2p_get_pages_persistent) */
#define GDRPEER_CAP_PIN_PERSISTENT (1u << 3)

/*
 * GDRPEER_IOCTL_INFO - version handshake and driver facts.
 *
 * in:  abi_version = GDRPEER_ABI_VERSION the caller was built against.
 * out: abi_version = the driver's GDRPEER_ABI_VERSION, caps, page_size
 *      (allocation sizes, export offsets/lengths and mmap offsets must be
 *      multiples of it), num_devices (bound devices right now).
 * Errors: -EPROTO when the caller's major version differs from the
 * driver's or abi_version is 0; the struct is still written back so the
 * caller can read the driver's version.  -EINVAL: reserved fields not 0.
 */
struct gdrpeer_info {
	__u32 abi_version;	/* in/out */
	__u32 caps;		/* out: GDRPEER_CAP_* */
	__u32 num_devices;	/* out */
	__u32 pad0;		/* must be 0 */
	__u64 page_size;	/* out */
	__u64 mmap_window;	/* out: bytes of mmap offset space per handle */
	__u64 reserved[4];	/* must be 0 */
};

/*
 * One bound device, as filled in by GDRPEER_IOCTL_LIST_DEVICES.
 * index is what GDRPEER_IOCTL_ALLOC takes; it is stable while the device
 * stays bound.
 */
struct gdrpeer_device_info {
	__u32 index;
	__u32 provider;		/* GDRPEER_PROVIDER_* */
	__u32 pci_domain;
	__u8 pci_bus;
	__u8 pci_dev;
	__u8 pci_func;
	__u8 bar;		/* BAR number carved by the provider */
	__u64 bar_size;		/* bytes of the BAR */
	__u64 free_bytes;	/* bytes not allocated right now */
	__u64 alloc_align;	/* allocation granularity (>= page_size) */
	__u64 reserved[4];	/* zero */
};

/*
 * GDRPEER_IOCTL_LIST_DEVICES - enumerate bound devices.
 *
 * in:  devices_ptr = user array of struct gdrpeer_device_info,
 *      count = its number of entries (0 with devices_ptr 0 asks for the total),
 *      entry_size = sizeof(struct gdrpeer_device_info).
 * out: total = number of bound devices; min(count, total) entries written.
 * Errors: -EINVAL entry_size differs or reserved not 0; -EFAULT bad array.
 */
struct gdrpeer_list_devices {
	__u64 devices_ptr;	/* in: user pointer */
	__u32 count;		/* in */
	__u32 total;		/* out */
	__u32 entry_size;	/* in */
	__u32 pad0;		/* must be 0 */
	__u64 reserved[2];	/* must be 0 */
};

/*
 * GDRPEER_IOCTL_ALLOC - reserve device memory in a device's BAR.
 *
 * in:  device (index), size (bytes, multiple of page_size, > 0), flags (0).
 * out: handle, mmap_offset (see "mmap" below), bar_offset (offset of the
 *      memory inside the BAR, for diagnostics and tests).
 * Errors: -ENODEV unknown device (or one being unbound); -EINVAL size 0 /
 * not page multiple / unknown flags / reserved not 0; -E2BIG size larger
 * than the BAR; -ENOMEM no contiguous free range of that size right now;
 * -ENOSPC the file's handle table is full; -EBADF the file is not open for
 * writing.
 * The memory is physically contiguous within the BAR and reads as zeros:
 * it is cleared before it is handed out.
 *
 * Revocation: when the device goes (unbind, PCI remove, hot-unplug, a
 * fatal PCI error), every use of its memory is revoked: CPU mappings fault
 * with SIGBUS, dma-buf importers are invalidated, and EXPORT, QUERY and
 * mmap of the handle answer -ENODEV; FREE still drops it.
 */
struct gdrpeer_alloc {
	__u32 device;		/* in */
	__u32 flags;		/* in: must be 0 */
	__u64 size;		/* in */
	__u64 handle;		/* out */
	__u64 mmap_offset;	/* out */
	__u64 bar_offset;	/* out */
	__u64 reserved[3];	/* must be 0 */
};

/*
 * GDRPEER_IOCTL_FREE - drop the handle.
 *
 * The handle is gone at once.  The memory returns to the device when the
 * last user of it is gone too: dma-bufs exported from it, their
 * attachments/mappings, and mmap()s of the handle keep it reserved.
 * Errors: -ENOENT unknown, already freed or foreign handle; -EBADF the
 * file is not open for writing.
 */
struct gdrpeer_free {
	__u64 handle;		/* in */
	__u64 reserved[3];	/* must be 0 */
};

/*
 * GDRPEER_IOCTL_EXPORT - export [offset, offset + length) of a handle as a
 * dma-buf.
 *
 * in:  handle, offset and length (multiples of page_size, length > 0,
 *      offset + length <= size of the allocation), flags (0).
 * out: fd = a new dma-buf file descriptor opened O_RDWR | O_CLOEXEC.
 * The dma-buf keeps the memory reserved until its last reference and
 * mapping are gone, whatever happens to the handle.  Importers must be
 * peer-to-peer capable.  mmap() of the dma-buf fd maps the exported range.
 * Errors: -ENOENT bad handle; -ENODEV its memory was revoked; -EINVAL
 * length 0, unaligned, beyond the allocation, unknown flags or reserved
 * not 0; -EOVERFLOW offset + length wraps around; -EBADF the file is not
 * open for writing.
 */
struct gdrpeer_export {
	__u64 handle;		/* in */
	__u64 offset;		/* in */
	__u64 length;		/* in */
	__u32 flags;		/* in: must be 0 */
	__s32 fd;		/* out */
	__u64 reserved[2];	/* must be 0 */
};

/*
 * GDRPEER_IOCTL_QUERY - describe a handle.
 *
 * in:  handle.  out: everything else.
 * Errors: -ENOENT bad handle; -ENODEV its memory was revoked; -EINVAL
 * reserved not 0.
 */
struct gdrpeer_query {
	__u64 handle;		/* in */
	__u64 size;		/* out: bytes */
	__u64 mmap_offset;	/* out: same value GDRPEER_IOCTL_ALLOC returned */
	__u64 bar_offset;	/* out: offset inside the device's BAR */
	__u32 device;		/* out: device index */
	__u32 flags;		/* out: alloc flags */
	__u32 exports;		/* out: dma-bufs exported from it still alive */
	__u32 pad0;		/* zero */
	__u64 reserved[3];	/* must be 0 on input */
};

/* struct gdrpeer_export_va.flags and .pin_mode */
#define GDRPEER_PIN_PERSISTENT (1u << 0) /* pages stay until the dma-buf goes */
#define GDRPEER_PIN_CALLBACK   (1u << 1) /* cudaFree revokes the dma-buf */

/*
 * GDRPEER_IOCTL_EXPORT_VA (ABI 1.1) - pin a range of CUDA device memory of
 * the calling process through NVIDIA's nvidia_p2p API and export it as a
 * dma-buf, for drivers that have no dma-buf export of their own.
 *
 * in:  va and length (multiples of 64 KiB, length > 0, as cuMemAlloc
 *      hands them out), flags: GDRPEER_PIN_PERSISTENT, GDRPEER_PIN_CALLBACK
 *      or 0 = persistent when the driver offers it, else callback.
 * out: fd = a new dma-buf (O_RDWR | O_CLOEXEC) of length bytes;
 *      pin_mode = the GDRPEER_PIN_* used; page_size = GPU page size in
 *      bytes (65536); pages = GPU pages pinned.
 *
 * The pin lives as long as the dma-buf.  Importers must be PCI devices
 * (others get -EOPNOTSUPP at attach); each is mapped with
 * nvidia_p2p_dma_map_pages for its own pci_dev.  mmap() of the fd maps
 * the memory write-combined.
 *
 * Callback pins: when the memory is freed underneath (cudaFree, process
 * exit, context teardown) the dma-buf is revoked: importers are told
 * (move_notify / invalidate_mappings), CPU mappings are zapped (a later
 * access gets SIGBUS), and new attachments, maps and mmaps fail with
 * -ENODEV.  The fd stays valid until closed.  Because of that, a callback
 * pin is not pinned for importers that would ignore the revocation
 * (ib_umem_dmabuf_get_pinned: their registration fails with -EOPNOTSUPP).
 * Persistent pins: the memory stays pinned across cudaFree until the
 * dma-buf is released.  A file not open for writing gets -EBADF.
 *
 * Errors: -EINVAL va or length not 64 KiB multiples, length 0, both
 * GDRPEER_PIN_* flags, unknown flags or reserved not 0, or (from the
 * NVIDIA driver) a range that is not device memory of this process;
 * -EOVERFLOW va + length wraps; -ENODEV the nvidia provider is not active
 * (/sys/class/gdrpeer/gdrpeer/providers/nvidia/status says why), or the
 * memory was freed while it was being pinned;
 * -EOPNOTSUPP GDRPEER_PIN_PERSISTENT asked of a driver without it;
 * -EPROTO the NVIDIA driver's page table or mapping version is not one
 * gdrpeer understands; -ENOMEM and other errors of nvidia_p2p_get_pages
 * as they come.
 */
struct gdrpeer_export_va {
	__u64 va;		/* in */
	__u64 length;		/* in */
	__u32 flags;		/* in: GDRPEER_PIN_* */
	__s32 fd;		/* out */
	__u32 pin_mode;		/* out: GDRPEER_PIN_* */
	__u32 page_size;	/* out */
	__u64 pages;		/* out */
	__u64 reserved[3];	/* must be 0 */
};

#define GDRPEER_IOCTL_INFO \
	_IOWR(GDRPEER_IOCTL_MAGIC, 0x00, struct gdrpeer_info)
#define GDRPEER_IOCTL_LIST_DEVICES \
	_IOWR(GDRPEER_IOCTL_MAGIC, 0x01, struct gdrpeer_list_devices)
#define GDRPEER_IOCTL_ALLOC \
	_IOWR(GDRPEER_IOCTL_MAGIC, 0x02, struct gdrpeer_alloc)
#define GDRPEER_IOCTL_FREE \
	_IOWR(GDRPEER_IOCTL_MAGIC, 0x03, struct gdrpeer_free)
#define GDRPEER_IOCTL_EXPORT \
	_IOWR(GDRPEER_IOCTL_MAGIC, 0x04, struct gdrpeer_export)
#define GDRPEER_IOCTL_QUERY \
	_IOWR(GDRPEER_IOCTL_MAGIC, 0x05, struct gdrpeer_query)
#define GDRPEER_IOCTL_EXPORT_VA \
	_IOWR(GDRPEER_IOCTL_MAGIC, 0x06, struct gdrpeer_export_va)

/*
 * mmap of a handle on the /dev/gdrpeer fd:
 *
 *   mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
 *        mmap_offset + off);
 *
 * mmap_offset comes from ALLOC or QUERY; off is a multiple of page_size
 * and off + len <= size.  The mapping is write-combined device memory, is
 * not inherited by fork() and cannot grow with mremap().  Treat
 * mmap_offset as opaque; each handle owns a window of mmap_window bytes
 * of offset space (GDRPEER_MMAP_WINDOW_SHIFT).
 * Errors: -ENOENT no handle at that offset; -EINVAL range beyond the
 * allocation, or not MAP_SHARED.
 */
#define GDRPEER_MMAP_WINDOW_SHIFT 40

#endif /* _UAPI_GDRPEER_H */

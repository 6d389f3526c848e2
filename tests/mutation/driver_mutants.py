"""The driver bugs `make test-driver-mutants` plants, one at a time (tests/mutation/driver_run.py).

Each is a small change to driver/*.c that a reviewer could miss and that a tenant of a shared GPU
node would pay for (memory left reachable, another tenant's bytes readable, a revocation that
does not revoke). `old` must occur exactly once in `file`; when the driver changes, the runner
names the entry, the file and the text it no longer finds, and the entry is updated here.
`tests` are the guest selftest programs (build/bin/gdrpeer_selftest_<name>) run with the mutated
gdrpeer.ko loaded, on the switch topology under the translated IOMMU (the only mode where a
DMA to an address the driver left mapped, or forgot to map, shows).
"""

from mutants import Mutant

EXPORTER = "driver/exporter_dmabuf.c"
EXPORTERS = "driver/exporter.h"
REGION = "driver/gdrpeer_region.c"
CHARDEV = "driver/gdrpeer_chardev.c"
PCIBAR = "driver/provider_pcibar.c"

# The selftest programs a mutant may name, in the order a boot runs them (bind wants edu without
# its driver, so it is not used here; gdrpeer_edu_hca.ko stays loaded for the whole boot).
PROGRAMS = ("abi", "lifetime", "edu", "revoke")

MUTANTS = [
    # ---- dma-buf exporter: what importers may reach ---------------------------------------
    Mutant("unmap-leaks-dma-mapping", EXPORTER,
           "\tif (addrs == GDRPEER_SG_MAP_PHYS)\n\t\tgdrpeer_sgt_unmap(attach->dev, sgt, sgt->orig_nents, dir);\n",
           "",
           ["edu"], "pcibar path: unmap frees the table but leaves the IOMMU mapping, so the "
                    "importer's old address still reaches the BAR"),
    Mutant("map-ignores-max-segment", EXPORTER,
           "\t*len = min3(it->range->len - it->pos, it->left, it->max_seg);",
           "\t*len = min(it->range->len - it->pos, it->left);",
           ["edu"], "sg entries longer than the importer's max segment size"),
    Mutant("revoke-without-move-notify", EXPORTER,
           "#else\n\tdma_buf_move_notify(dmabuf);\n#endif",
           "#else\n#endif",
           ["revoke"], "revocation never tells dynamic importers to unmap (it then waits on them)"),
    Mutant("revoke-keeps-dmabuf-cpu-mappings", EXPORTER,
           "\tunmap_mapping_range(dmabuf->file->f_mapping, 0, 0, 1);\n",
           "",
           ["revoke"], "an mmap of the dma-buf keeps reaching the BAR after revocation"),
    Mutant("dmabuf-mmap-private", EXPORTER,
           "\tif (!(vma->vm_flags & VM_SHARED))\n\t\treturn -EINVAL;\n\tif (gdrpeer_region_revoked(gb->region))",
           "\tif (gdrpeer_region_revoked(gb->region))",
           ["abi"], "a private (copy-on-write) mmap of BAR memory is accepted"),
    # ---- memory handed out by ALLOC and mmap --------------------------------------------
    Mutant("alloc-skips-clear", REGION,
           "\tret = gdrpeer_region_clear(r);\n\tif (ret) {",
           "\tret = 0 && gdrpeer_region_clear(r);\n\tif (ret) {",
           ["revoke"], "a new allocation shows the bytes of the tenant that freed them"),
    Mutant("revoke-skips-dmabufs", EXPORTERS,
           "\tgdrpeer_dmabuf_revoke_region,\n\tgdrpeer_peermem_revoke_region,\n};",
           "\tgdrpeer_peermem_revoke_region,\n};",
           ["revoke"], "revocation leaves every dma-buf of the memory and its importers alone"),
    Mutant("revoke-keeps-handle-cpu-mappings", REGION,
           "\tunmap_mapping_range(gdrpeer_mapping(),\n",
           "\tif (0) unmap_mapping_range(gdrpeer_mapping(),\n",
           ["revoke"], "an mmap of a handle keeps reaching the BAR after revocation"),
    Mutant("handle-mmap-one-page-past-end", REGION,
           "\tif (offset > r->size || len > r->size - offset)\n\t\treturn -EINVAL;\n\tif (gdrpeer_region_revoked(r))",
           "\tif (offset > r->size || len > r->size - offset + PAGE_SIZE)\n\t\treturn -EINVAL;\n\tif (gdrpeer_region_revoked(r))",
           ["abi", "lifetime"], "an mmap of a handle may reach one page past the allocation"),
    Mutant("fault-after-revoke", REGION,
           "\tif (!r->revoked && offset < r->size &&",
           "\tif (offset < r->size &&",
           ["revoke"], "a CPU fault after revocation maps the BAR page again"),
    Mutant("alloc-larger-than-bar", REGION,
           "\tif (size > gdev->size) {\n\t\tret = -E2BIG;",
           "\tif (size > gdev->size + gdev->size) {\n\t\tret = -E2BIG;",
           ["abi"], "an allocation larger than the BAR is not refused up front"),
    # ---- the character device: who may do what ------------------------------------------
    Mutant("ioctl-skips-fmode-write", CHARDEV,
           "\tif (d->needs_write && !(filp->f_mode & FMODE_WRITE))",
           "\tif (d->needs_write && !(filp->f_mode & FMODE_READ))",
           ["revoke"], "a read-only open may allocate, free and export"),
    Mutant("handle-of-another-file", CHARDEV,
           "\tif ((u32)(handle >> 32) != gf->cookie || !id || id > GDRPEER_ID_MAX)\n\t\treturn NULL;",
           "\tif (!id || id > GDRPEER_ID_MAX)\n\t\treturn NULL;",
           ["abi"], "a handle is accepted by any open file, not only the one that allocated it"),
    Mutant("export-one-page-past-end", CHARDEV,
           "\t    !PAGE_ALIGNED(e->length) || end > r->size) {",
           "\t    !PAGE_ALIGNED(e->length) || end > r->size + PAGE_SIZE) {",
           ["abi"], "an export may cover one page past the allocation"),
]

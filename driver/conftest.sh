#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# conftest.sh KDIR OUTDIR [make args...]
#
# Compile probes against the kernel tree KDIR with that kernel's own kbuild
# flags and write OUTDIR/conftest.h: one GDRPEER_* macro per kernel
# difference the driver and the test modules care about.  Kernel versions
# are never compared; each probe asks the compiler (or Module.symvers)
# whether the thing exists.  Extra arguments (CC=..., LLVM=1) go to make.
set -eu

KDIR=${1:?usage: conftest.sh KDIR OUTDIR [make args]}
OUT=${2:?usage: conftest.sh KDIR OUTDIR [make args]}
shift 2

WORK="$OUT/.conftest"
rm -rf "$WORK"
mkdir -p "$WORK"

# probe NAME <<EOF ... C source ... EOF: NAME is defined when it compiles.
PROBES=""
probe() {
	cat > "$WORK/$1.c"
	PROBES="$PROBES $1"
}

probe vm_flags_set <<'EOF'
#include <linux/mm.h>
void conftest(struct vm_area_struct *vma);
void conftest(struct vm_area_struct *vma) { vm_flags_set(vma, VM_IO); }
EOF

# Until 6.13 the namespace is an identifier that the macro stringifies;
# since then it is a string literal and an identifier does not compile.
probe module_import_ns_ident <<'EOF'
#include <linux/module.h>
MODULE_IMPORT_NS(DMA_BUF);
EOF

# devnode callbacks take a const struct device since 6.2.
probe devnode_const <<'EOF'
#include <linux/device.h>
_Static_assert(__builtin_types_compatible_p(
	typeof(((struct device_type *)0)->devnode),
	char *(*)(const struct device *, umode_t *, kuid_t *, kgid_t *)),
	"devnode takes a const device");
EOF

probe attach_peer2peer <<'EOF'
#include <linux/dma-buf.h>
int conftest(struct dma_buf_attachment *a);
int conftest(struct dma_buf_attachment *a) { return a->peer2peer; }
EOF

probe dma_buf_map_attachment_unlocked <<'EOF'
#include <linux/dma-buf.h>
struct sg_table *conftest(struct dma_buf_attachment *a);
struct sg_table *conftest(struct dma_buf_attachment *a)
{
	return dma_buf_map_attachment_unlocked(a, DMA_BIDIRECTIONAL);
}
EOF

# Importer notification: move_notify (mandatory for dynamic importers up to
# 6.x) was renamed invalidate_mappings (optional) in 7.x.
probe importer_move_notify <<'EOF'
#include <linux/dma-buf.h>
void conftest(struct dma_buf_attachment *a);
void conftest(struct dma_buf_attachment *a) { }
const struct dma_buf_attach_ops conftest_ops = { .move_notify = conftest };
EOF

probe importer_invalidate_mappings <<'EOF'
#include <linux/dma-buf.h>
void conftest(struct dma_buf_attachment *a);
void conftest(struct dma_buf_attachment *a) { }
const struct dma_buf_attach_ops conftest_ops = {
	.invalidate_mappings = conftest };
EOF

# The exporter's "your mapping is gone" call: dma_buf_move_notify() up to
# 6.x, dma_buf_invalidate_mappings() in 7.x.
probe dma_buf_invalidate_mappings <<'EOF'
#include <linux/dma-buf.h>
void conftest(struct dma_buf *d);
void conftest(struct dma_buf *d) { dma_buf_invalidate_mappings(d); }
EOF

# Kernel CPU access for importers (dma_buf_ops.vmap): a struct iosys_map
# since 5.18, a struct dma_buf_map 5.11..5.17, a plain pointer before.
probe dma_buf_vmap_iosys_map <<'EOF'
#include <linux/dma-buf.h>
#include <linux/iosys-map.h>
int conftest(struct dma_buf *d, struct iosys_map *m);
int conftest(struct dma_buf *d, struct iosys_map *m) { return 0; }
const struct dma_buf_ops conftest_ops = { .vmap = conftest };
EOF

probe dma_buf_vmap_dma_buf_map <<'EOF'
#include <linux/dma-buf.h>
#include <linux/dma-buf-map.h>
int conftest(struct dma_buf *d, struct dma_buf_map *m);
int conftest(struct dma_buf *d, struct dma_buf_map *m) { return 0; }
const struct dma_buf_ops conftest_ops = { .vmap = conftest };
EOF

# 6.2 moved dma_buf_vmap() to the dynamic locking rules: the caller holds the
# reservation lock (dma_buf_vmap_unlocked() takes it), so the exporter's
# vmap runs under it; before, under the dma-buf's own mutex.
probe dma_buf_vmap_unlocked <<'EOF'
#include <linux/dma-buf.h>
#include <linux/iosys-map.h>
int conftest(struct dma_buf *d, struct iosys_map *m);
int conftest(struct dma_buf *d, struct iosys_map *m)
{
	return dma_buf_vmap_unlocked(d, m);
}
EOF

probe dma_map_resource <<'EOF'
#include <linux/dma-mapping.h>
dma_addr_t conftest(struct device *d);
dma_addr_t conftest(struct device *d)
{
	return dma_map_resource(d, 0, 4096, DMA_BIDIRECTIONAL, 0);
}
EOF

# dma_resv_usage (and dma_resv_wait_timeout taking one) arrived in 5.19.
probe dma_resv_usage <<'EOF'
#include <linux/dma-resv.h>
long conftest(struct dma_resv *r);
long conftest(struct dma_resv *r)
{
	return dma_resv_wait_timeout(r, DMA_RESV_USAGE_BOOKKEEP, false, 1);
}
EOF

# get_file_active(): a file reference unless the last one is gone (6.7);
# before it get_file_rcu() took the file itself.
probe get_file_active <<'EOF'
#include <linux/fs.h>
struct file *conftest(struct file **f);
struct file *conftest(struct file **f) { return get_file_active(f); }
EOF

# Setting a device's driver_override from a driver (5.19).
probe driver_set_override <<'EOF'
#include <linux/pci.h>
int conftest(struct pci_dev *p);
int conftest(struct pci_dev *p)
{
	return driver_set_override(&p->dev, &p->driver_override, "x", 1);
}
EOF

# driver_override moved into struct device, with its own helpers (7.x).
probe device_set_driver_override <<'EOF'
#include <linux/device.h>
int conftest(struct device *d);
int conftest(struct device *d) { return device_set_driver_override(d, ""); }
EOF

# Does the importer of an attachment handle revocation while pinned (7.x)?
probe dma_buf_attach_revocable <<'EOF'
#include <linux/dma-buf.h>
bool conftest(struct dma_buf_attachment *a);
bool conftest(struct dma_buf_attachment *a) { return dma_buf_attach_revocable(a); }
EOF

# Page-table walks for the test module gdrpeer_ptebits: follow_pfnmap_start
# (6.12+) or follow_pte on an mm (5.11 to 6.9).
probe follow_pfnmap_start <<'EOF'
#include <linux/mm.h>
int conftest(struct follow_pfnmap_args *a);
int conftest(struct follow_pfnmap_args *a) { return follow_pfnmap_start(a); }
EOF

probe follow_pte_mm <<'EOF'
#include <linux/mm.h>
int conftest(struct mm_struct *mm, pte_t **p, spinlock_t **l);
int conftest(struct mm_struct *mm, pte_t **p, spinlock_t **l)
{
	return follow_pte(mm, 0, p, l);
}
EOF

# vm_operations_struct.split was renamed may_split in 5.11.
probe vm_ops_may_split <<'EOF'
#include <linux/mm.h>
int conftest(struct vm_area_struct *vma, unsigned long addr);
int conftest(struct vm_area_struct *vma, unsigned long addr) { return 0; }
const struct vm_operations_struct conftest_ops = { .may_split = conftest };
EOF

objs=""
for p in $PROBES; do
	objs="$objs $p.o"
done
printf 'obj-m :=%s\n' "$objs" > "$WORK/Kbuild"
# -k: a probe that does not compile must not stop the others
make -k -C "$KDIR" M="$(cd "$WORK" && pwd)" "$@" $objs \
	> "$WORK/make.log" 2>&1 || true

HDR="$OUT/conftest.h.tmp"
{
	echo "/* generated by conftest.sh for $KDIR: do not edit */"
	echo "#ifndef GDRPEER_CONFTEST_H"
	echo "#define GDRPEER_CONFTEST_H"
	for p in $PROBES; do
		name=$(echo "GDRPEER_HAVE_$p" | tr 'a-z' 'A-Z')
		if [ -f "$WORK/$p.o" ]; then
			echo "#define $name 1"
		else
			echo "/* #undef $name */"
		fi
	done
	# Since 5.16 dma-buf exports live in the DMA_BUF symbol namespace;
	# Module.symvers says which namespace a symbol is in.
	if awk '$2 == "dma_buf_export" && $5 ~ /DMA_BUF/ { f = 1 }
		END { exit !f }' "$KDIR/Module.symvers" 2>/dev/null; then
		echo "#define GDRPEER_HAVE_DMA_BUF_NS 1"
	else
		echo "/* #undef GDRPEER_HAVE_DMA_BUF_NS */"
	fi
	echo "#endif"
} > "$HDR"

# A probe that every supported kernel passes failing means the compiler
# itself failed: say so instead of generating a wrong header.
if [ ! -f "$WORK/attach_peer2peer.o" ] || [ ! -f "$WORK/dma_map_resource.o" ]; then
	echo "conftest.sh: basic probes failed against $KDIR; log:" >&2
	tail -n 40 "$WORK/make.log" >&2
	rm -f "$HDR"
	exit 1
fi
mv "$HDR" "$OUT/conftest.h"
rm -rf "$WORK"

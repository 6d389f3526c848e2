#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# conftest_peermem.sh KDIR OFA_DIR OUTDIR [make args...]
#
# Decides whether exporter_peermem.c is built as an OFED peer-memory client.
# OFA_DIR is where MLNX_OFED / DOCA-OFED install the kernel side of their
# RDMA core for one kernel (/usr/src/ofa_kernel/<arch>/<kver>): it needs
# include/rdma/peer_mem.h with the ABI exporter_peermem.c is written for
# (u64 core_context, struct peer_memory_client_ex) -- a compile probe with
# KDIR's kbuild flags -- and a Module.symvers that exports
# ib_register_peer_memory_client and ib_unregister_peer_memory_client.
#
# Writes OUTDIR/peermem_link.h (GDRPEER_PEERMEM_LINK: the one line that
# says what was decided and why; GDRPEER_PEERMEM and the header's include
# when built) and OUTDIR/peermem.symvers (OFED's Module.symvers path, for
# KBUILD_EXTRA_SYMBOLS; empty when left out), and prints the line.
# Each file is rewritten only when it changes, so kbuild rebuilds only then.
set -eu

KDIR=${1:?usage: conftest_peermem.sh KDIR OFA_DIR OUTDIR [make args]}
OFA=${2?usage: conftest_peermem.sh KDIR OFA_DIR OUTDIR [make args]}
OUT=${3:?usage: conftest_peermem.sh KDIR OFA_DIR OUTDIR [make args]}
shift 3

HDR="$OFA/include/rdma/peer_mem.h"
SYMVERS="$OFA/Module.symvers"
WORK="$OUT/.conftest_peermem"
why=""

exports() {
	awk -v s="$1" '$2 == s { f = 1 } END { exit !f }' "$SYMVERS" 2>/dev/null
}

# kexports SYMBOL: the kernel itself (KDIR's Module.symvers) exports it
kexports() {
	awk -v s="$1" '$2 == s { f = 1 } END { exit !f }' \
		"$KDIR/Module.symvers" 2>/dev/null
}

if [ -z "$OFA" ]; then
	why="left out: OFA_DIR is empty"
elif [ ! -f "$HDR" ]; then
	why="left out: no $HDR (the MLNX_OFED/DOCA-OFED kernel headers for this kernel are not installed; install them, or name their directory with OFA_DIR=)"
elif ! exports ib_register_peer_memory_client ||
	! exports ib_unregister_peer_memory_client; then
	why="left out: $SYMVERS does not export ib_register_peer_memory_client and ib_unregister_peer_memory_client (build OFED's kernel modules for this kernel first)"
else
	rm -rf "$WORK"
	mkdir -p "$WORK"
	cat > "$WORK/peer_mem_abi.c" <<EOF
#include <linux/types.h>
#include "$HDR"
#ifndef PEER_MEM_U64_CORE_CONTEXT
#error "core_context is not a u64"
#endif
static int conftest_invalidate(void *reg_handle, u64 core_context)
{
	return 0;
}
static invalidate_peer_memory conftest_cb = conftest_invalidate;
static int conftest_get_pages(unsigned long addr, size_t size, int write,
			      int force, struct sg_table *sg_head,
			      void *client_context, u64 core_context)
{
	return 0;
}
static struct peer_memory_client_ex conftest_client = {
	.client = { .get_pages = conftest_get_pages },
	.ex_size = sizeof(struct peer_memory_client_ex),
	.flags = PEER_MEM_INVALIDATE_UNMAPS,
};
void *conftest(void);
void *conftest(void)
{
	(void)conftest_cb;
	return ib_register_peer_memory_client(&conftest_client.client,
					      &conftest_cb);
}
EOF
	# Who owns CUDA addresses is decided from the kernel's module list: a
	# module notifier, and the module kset (struct module_kobject) for the
	# modules loaded before gdrpeer (exporter_peermem.c, pm_nv_track_start)
	cat > "$WORK/module_list.c" <<'EOF'
#include <linux/kobject.h>
#include <linux/module.h>
#include <linux/notifier.h>
static int conftest_event(struct notifier_block *nb, unsigned long state,
			  void *data)
{
	return NOTIFY_DONE;
}
static struct notifier_block conftest_nb = { .notifier_call = conftest_event };
int conftest(const char *name);
int conftest(const char *name)
{
	struct kobject *k = kset_find_obj(THIS_MODULE->mkobj.kobj.kset, name);
	struct module *mod = k ?
		container_of(k, struct module_kobject, kobj)->mod : NULL;
	int live = mod && mod->state == MODULE_STATE_LIVE;

	kobject_put(k);
	if (register_module_notifier(&conftest_nb))
		return -1;
	unregister_module_notifier(&conftest_nb);
	return live;
}
EOF
	echo "obj-m := peer_mem_abi.o module_list.o" > "$WORK/Kbuild"
	make -k -C "$KDIR" M="$(cd "$WORK" && pwd)" "$@" peer_mem_abi.o \
		module_list.o > "$WORK/make.log" 2>&1 || true
	if [ ! -f "$WORK/peer_mem_abi.o" ]; then
		err=$(grep -v module_list "$WORK/make.log" | grep -m 1 'error' | sed 's/"/'"'"'/g' || true)
		why="left out: $HDR is not the peer-memory ABI gdrpeer is written for (u64 core_context, peer_memory_client_ex; MLNX_OFED 5.x or DOCA-OFED): ${err:-compile probe failed}"
	elif [ ! -f "$WORK/module_list.o" ] ||
		! kexports kset_find_obj || ! kexports register_module_notifier ||
		! kexports unregister_module_notifier; then
		err=$(grep -m 1 'module_list.c.*error' "$WORK/make.log" | sed 's/"/'"'"'/g' || true)
		why="left out: $KDIR lacks what decides who owns CUDA addresses (a module notifier, kset_find_obj and struct module_kobject, exported): ${err:-not exported in $KDIR/Module.symvers}"
	fi
	rm -rf "$WORK"
fi

# c_string: the line as a C string literal
c_string() {
	printf '"%s"' "$(printf '%s' "$1" | sed 's/\\/\\\\/g; s/"/\\"/g')"
}

if [ -z "$why" ]; then
	line="built against $OFA (ib_register_peer_memory_client in $SYMVERS)"
	{
		echo "/* generated by conftest_peermem.sh: do not edit */"
		echo "#define GDRPEER_PEERMEM_LINK $(c_string "$line")"
		echo "#define GDRPEER_PEERMEM 1"
		echo "#include \"$HDR\""
	} > "$OUT/peermem_link.h.new"
	echo "$SYMVERS" > "$OUT/peermem.symvers.new"
else
	line="$why"
	{
		echo "/* generated by conftest_peermem.sh: do not edit */"
		echo "#define GDRPEER_PEERMEM_LINK $(c_string "$line")"
	} > "$OUT/peermem_link.h.new"
	: > "$OUT/peermem.symvers.new"
fi
for f in peermem_link.h peermem.symvers; do
	if cmp -s "$OUT/$f.new" "$OUT/$f"; then
		rm -f "$OUT/$f.new"
	else
		mv "$OUT/$f.new" "$OUT/$f"
	fi
done
echo "gdrpeer: peermem client: $line"

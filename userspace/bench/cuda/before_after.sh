#!/bin/bash
# Two gdrpeer binaries on one real GPU node (issue 28's guard rail: behaviour byte-identical and
# the live check's time unchanged after the structure step, docs/benchmarks.md).
#   - the outputs of `check`, `check --json`, `topo`, `check --cuda` and the check of a snapshot
#     each binary took, compared byte for byte (the snapshot's own bytes carry a time stamp);
#   - ROUNDS alternating runs of the default live check, old then new, wall microseconds;
#   - the new binary alone: `verify --p2p` (every ordered GPU pair) and verify's CUDA memory
#     sources with `--cuda-dmabuf-mapping pcie` (issue 26; the node has no RDMA device, so verify
#     reports the sources and exits 3).
#
# Usage: bash userspace/bench/cuda/before_after.sh OLD_BIN NEW_BIN OUT_DIR [ROUNDS]
set -u
OLD=$1 NEW=$2 OUT=$(mkdir -p "$3" && cd "$3" && pwd) ROUNDS=${4:-30}
# NVLink multicast (NVLS) stays off on these machines; nothing here calls cuMulticastCreate.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1

{ date -u; uname -r; nvidia-smi -L; nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -1
  "$OLD" --version; "$NEW" --version; } > "$OUT/node.txt" 2>&1

same() { # NAME ARGS...: run both binaries, keep both outputs and exit codes, say whether equal
  local name=$1; shift
  "$OLD" "$@" > "$OUT/old-$name.out" 2>&1; echo "exit $?" >> "$OUT/old-$name.out"
  "$NEW" "$@" > "$OUT/new-$name.out" 2>&1; echo "exit $?" >> "$OUT/new-$name.out"
  if cmp -s "$OUT/old-$name.out" "$OUT/new-$name.out"; then echo "$name identical"; else echo "$name DIFFERENT"; fi
}
{
  same check check
  same check-json check --json
  same topo topo
  same check-cuda check --cuda
  "$OLD" snapshot "$OUT/old.tar" > /dev/null 2>&1; "$NEW" snapshot "$OUT/new.tar" > /dev/null 2>&1
  same snapshot-old-checked check --json "$OUT/old.tar"
  same snapshot-new-checked check --json "$OUT/new.tar"
} > "$OUT/identical.txt"

for i in $(seq "$ROUNDS"); do
  s=$(date +%s%N); "$OLD" check > /dev/null 2>&1; e=$(date +%s%N); echo "old $(( (e - s) / 1000 ))"
  s=$(date +%s%N); "$NEW" check > /dev/null 2>&1; e=$(date +%s%N); echo "new $(( (e - s) / 1000 ))"
done > "$OUT/timing-us.txt"

s=$(date +%s%N); "$NEW" verify --p2p > "$OUT/verify-p2p.txt" 2>&1; rc=$?; e=$(date +%s%N)
echo "exit $rc wall_ms $(( (e - s) / 1000000 ))" >> "$OUT/verify-p2p.txt"
"$NEW" verify --source cuda --source cuda-vmm > "$OUT/verify-cuda-default.txt" 2>&1; echo "exit $?" >> "$OUT/verify-cuda-default.txt"
"$NEW" verify --source cuda --source cuda-vmm --cuda-dmabuf-mapping pcie > "$OUT/verify-cuda-pcie.txt" 2>&1
echo "exit $?" >> "$OUT/verify-cuda-pcie.txt"

python3 - "$OUT" > "$OUT/summary.txt" 2>&1 <<'EOF'
import statistics, sys
out = sys.argv[1]
t = {}
for line in open(f"{out}/timing-us.txt"):
    k, v = line.split()
    t.setdefault(k, []).append(int(v) / 1000)
for k in ("old", "new"):
    v = sorted(t[k])
    print(f"{k}: median {statistics.median(v):.2f} ms, min {v[0]:.2f}, max {v[-1]:.2f} ({len(v)} runs)")
print(f"new/old median ratio {statistics.median(t['new']) / statistics.median(t['old']):.3f}")
print(open(f"{out}/identical.txt").read(), end="")
EOF
cat "$OUT/summary.txt"

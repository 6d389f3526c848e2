#!/bin/bash
# The proof on a real multi-GPU node (issue 23, docs/benchmarks.md "Real multi-GPU node"), in
# one run: nvidia-smi's own view, gdrpeer check (default, --cuda, --json), a snapshot (checked
# here and, afterwards, offline), gdrpeer verify --p2p (text and JSON), the independent
# cudaMemcpyPeerAsync anchor (p2p_anchor.cu, built here with nvcc), and 15 alternating timing
# runs of `nvidia-smi topo -m` against the default `gdrpeer check`.
#
# Usage: bash userspace/bench/cuda/real_node.sh BIN_DIR OUT_DIR
#   BIN_DIR holds the gdrpeer binary; OUT_DIR receives at most 6 files:
#     real-node.tgz     everything below, one file per step (real-node/*.txt, *.json)
#     summary.txt       medians, verify vs anchor per pair, verify's wall time, verdict agreement
#     node-snapshot.tar the snapshot (for tests/reference)
#     verify-p2p.json   gdrpeer verify --p2p --json
#     anchor.jsonl      p2p_anchor.cu, one JSON object per ordered pair
set -u
BIN=$(cd "$1" && pwd); OUT=$(mkdir -p "$2" && cd "$2" && pwd); D=$(cd "$(dirname "$0")" && pwd)
R=$OUT/real-node; mkdir -p "$R"
G="$BIN/gdrpeer"
# NVLink multicast (NVLS) stays off on these machines; nothing here calls cuMulticastCreate.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PATH=$PATH:/usr/local/cuda/bin

step() { echo "== $*"; "$@"; echo "exit $?"; }

{ date -u; hostname; uname -a; nvidia-smi -L; nvidia-smi --query-gpu=index,pci.bus_id,name,driver_version --format=csv; "$G" --version; } > "$R/node.txt" 2>&1
nvidia-smi topo -m > "$R/nvidia-smi-topo-m.txt" 2>&1
for k in r w n a; do echo "== nvidia-smi topo -p2p $k"; nvidia-smi topo -p2p $k; done > "$R/nvidia-smi-topo-p2p.txt" 2>&1
{ nvidia-smi nvlink -s; echo "== nvidia-smi -q (Fabric)"; nvidia-smi -q | grep -A4 -i fabric; } > "$R/nvidia-smi-nvlink.txt" 2>&1
[ -f "$D/nvml_dump.py" ] && python3 "$D/nvml_dump.py" > "$R/nvml.json" 2> "$R/nvml.err"

# gdrpeer check, the three ways (exit codes kept: 0 optimal, 1 degraded/unreliable, 2 blocked).
step "$G" check > "$R/check.txt" 2>&1
step "$G" check --cuda > "$R/check-cuda.txt" 2>&1
"$G" check --json > "$R/check.json" 2> "$R/check-json.err"; echo "exit $?" >> "$R/check-json.err"
"$G" check --json --cuda > "$R/check-cuda.json" 2>> "$R/check-json.err"

# The snapshot, and the same node checked from it here (offline on the CI machine afterwards).
step "$G" snapshot "$OUT/node-snapshot.tar" > "$R/snapshot.txt" 2>&1
"$G" check --json "$OUT/node-snapshot.tar" > "$R/check-snapshot.json" 2>> "$R/snapshot.txt"
step "$G" check "$OUT/node-snapshot.tar" >> "$R/snapshot.txt" 2>&1

# The anchor first (cudaMemcpyPeerAsync, 256 MiB x 10 after a warm-up), then verify --p2p
# measured the same way, then the anchor again: the ratio is taken against both anchor runs.
if nvcc -O2 -o "$R/p2p_anchor" "$D/p2p_anchor.cu" > "$R/anchor-build.txt" 2>&1; then
  "$R/p2p_anchor" 256 10 > "$OUT/anchor.jsonl" 2> "$R/anchor.err"
else
  echo '{"error": "nvcc failed: see real-node/anchor-build.txt"}' > "$OUT/anchor.jsonl"
fi
s=$(date +%s%N); "$G" verify --p2p > "$R/verify-p2p.txt" 2>&1; rc=$?; e=$(date +%s%N)
echo "exit $rc wall_ms $(( (e - s) / 1000000 ))" >> "$R/verify-p2p.txt"
s=$(date +%s%N); "$G" verify --p2p --json > "$OUT/verify-p2p.json" 2> "$R/verify-p2p-json.err"; rc=$?; e=$(date +%s%N)
echo "exit $rc wall_ms $(( (e - s) / 1000000 ))" >> "$R/verify-p2p-json.err"
[ -x "$R/p2p_anchor" ] && "$R/p2p_anchor" 256 10 > "$R/anchor-after.jsonl" 2>> "$R/anchor.err"
# Argument errors and the one-GPU case, on the real driver.
{ step "$G" verify --p2p --pair 0000:ff:00.0,0000:fe:00.0
  step "$G" verify --p2p --pair nonsense
  step env CUDA_VISIBLE_DEVICES=0 "$G" verify --p2p --p2p-size 16M; } > "$R/verify-p2p-errors.txt" 2>&1

# 15 alternating runs: nvidia-smi topo -m, then the default gdrpeer check (microseconds).
for i in $(seq 15); do
  s=$(date +%s%N); nvidia-smi topo -m > /dev/null 2>&1; e=$(date +%s%N); echo "smi $(( (e - s) / 1000 ))"
  s=$(date +%s%N); "$G" check > /dev/null 2>&1; e=$(date +%s%N); echo "gdrpeer $(( (e - s) / 1000 ))"
done > "$R/timing-us.txt"
for i in 1 2 3; do
  s=$(date +%s%N); "$G" check --cuda > /dev/null 2>&1; e=$(date +%s%N); echo "gdrpeer-cuda $(( (e - s) / 1000 ))"
done >> "$R/timing-us.txt"

python3 - "$R" "$OUT" > "$OUT/summary.txt" 2>&1 <<'EOF'
import json, statistics, sys
R, OUT = sys.argv[1], sys.argv[2]
t = {}
for line in open(f"{R}/timing-us.txt"):
    k, v = line.split()
    t.setdefault(k, []).append(int(v) / 1000)
smi, gp = statistics.median(t["smi"]), statistics.median(t["gdrpeer"])
print(f"nvidia-smi topo -m median {smi:.1f} ms, gdrpeer check median {gp:.1f} ms: ratio {gp / smi:.3f} (target <= 0.5)")
if "gdrpeer-cuda" in t:
    print(f"gdrpeer check --cuda median of {len(t['gdrpeer-cuda'])}: {statistics.median(t['gdrpeer-cuda']):.1f} ms")
def anchor(path):
    out = {}
    try:
        for line in open(path):
            a = json.loads(line)
            if "src_bdf" in a:
                out[(a["src_bdf"].lower(), a["dst_bdf"].lower())] = a
    except (OSError, ValueError):
        pass
    return out
a1, a2 = anchor(f"{OUT}/anchor.jsonl"), anchor(f"{R}/anchor-after.jsonl")
try:
    v = json.load(open(f"{OUT}/verify-p2p.json"))
except (OSError, ValueError) as e:
    print(f"verify-p2p.json unreadable: {e}")
    sys.exit(0)
print(f"verify --p2p --json: exit {v['exit_code']}, {v['seconds']} s for {len(v['pairs'])} ordered pairs (target <= 20 s); {v.get('not_run', '')}")
worst = None
for p in v["pairs"]:
    k = (p["src_bdf"].lower(), p["dst_bdf"].lower())
    line = f"  {k[0]} -> {k[1]}: {p['outcome']}: {p['comparison']}"
    for name, ref in (("uni", "uni_gbps_peer"), ("bidi", "bidi_gbps_peer"), ("staged", "uni_gbps_staged")):
        refs = [x[k][ref] for x in (a1, a2) if k in x and x[k][ref] > 0]
        if refs and p[ref] > 0:
            r = p[ref] / max(refs)
            line += f"; {name} {p[ref]:.1f} vs anchor {max(refs):.1f} = {r:.3f}"
            if name != "staged":
                worst = r if worst is None else min(worst, r)
    line += f"; lat {p['lat_us_peer']:.2f} us; bad bytes {p['bad_bytes']}"
    print(line)
if worst is not None:
    print(f"worst verify/anchor ratio with peer access (uni and bidi): {worst:.3f} (target >= 0.95)")
try:
    live = json.load(open(f"{R}/check.json"))
    snap = json.load(open(f"{R}/check-snapshot.json"))
    lv = {(p["a_bdf"], p["b_bdf"]): (p["verdict"], p.get("nvlink")) for p in live["pairs"]}
    sv = {(p["a_bdf"], p["b_bdf"]): (p["verdict"], p.get("nvlink")) for p in snap["pairs"]}
    print(f"live check: exit {live['summary']['exit_code']}, worst {live['summary']['worst']}; snapshot: exit {snap['summary']['exit_code']}; "
          f"pair verdicts and NVLink {'identical' if lv == sv else 'DIFFER'}")
except (OSError, ValueError) as e:
    print(f"check JSON unreadable: {e}")
EOF
cat "$OUT/summary.txt" > "$R/summary.txt"
rm -f "$R/p2p_anchor"
tar -C "$OUT" -czf "$OUT/real-node.tgz" real-node && rm -rf "$R"
ls -la "$OUT"

#!/bin/bash
# One device-tool call on a multi-GPU machine: the real node's artefacts (docs/benchmarks.md,
# "real multi-GPU node"). Usage: bash userspace/bench/cuda/recon.sh BIN_DIR OUT
set -u
BIN=$1; O=$2; R=$O/recon; mkdir -p "$R"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
D=$(dirname "$0")
{ date -u; hostname; uname -a; nvidia-smi -L; } > "$R/node.txt" 2>&1
nvidia-smi topo -m > "$R/topo-m.txt" 2>&1
for k in r w n a; do echo "== -p2p $k"; nvidia-smi topo -p2p $k; done > "$R/topo-p2p.txt" 2>&1
nvidia-smi nvlink -s > "$R/nvlink-s.txt" 2>&1
nvidia-smi -q > "$R/smi-q.txt" 2>&1
for f in /proc/driver/nvidia/params /proc/driver/nvidia/version /proc/driver/nvidia/registry; do echo "== $f"; cat $f; done > "$R/proc-nvidia.txt" 2>&1
{ cat /proc/modules; echo "== memory_peers"; ls -laR /sys/kernel/mm/memory_peers; echo "== modprobe.d"; cat /etc/modprobe.d/* ; echo "== cmdline"; cat /proc/cmdline; } > "$R/modules.txt" 2>&1
for g in /sys/bus/pci/devices/*; do [ "$(cat $g/vendor)" = 0x10de ] && echo "$g numa_node=$(cat $g/numa_node) local_cpulist=$(cat $g/local_cpulist) class=$(cat $g/class) device=$(cat $g/device)"; done > "$R/sysfs-gpus.txt" 2>&1
lspci -tv > "$R/lspci-tv.txt" 2>&1; lspci -vvv -nn > "$R/lspci-vvv.txt" 2>&1
python3 "$D/nvml_dump.py" > "$R/nvml.json" 2> "$R/nvml.err"
( nvcc -O2 -o /tmp/p2p_anchor "$D/p2p_anchor.cu" && /tmp/p2p_anchor 256 10 ) > "$R/anchor.jsonl" 2> "$R/anchor.err"
"$BIN/gdrpeer" --version > "$R/gdrpeer-version.txt" 2>&1
for a in "" "--cuda" "--json"; do echo "== gdrpeer check $a"; "$BIN/gdrpeer" check $a; echo "exit $?"; done > "$R/check.txt" 2>&1
"$BIN/gdrpeer" snapshot "$R/node-snapshot.tar" > "$R/snapshot.txt" 2>&1
# Timing: 15 alternating runs each of nvidia-smi topo -m and gdrpeer check (default).
for i in $(seq 15); do
  s=$(date +%s%N); nvidia-smi topo -m >/dev/null 2>&1; e=$(date +%s%N); echo "smi $(( (e-s)/1000 ))"
  s=$(date +%s%N); "$BIN/gdrpeer" check >/dev/null 2>&1; e=$(date +%s%N); echo "gdrpeer $(( (e-s)/1000 ))"
done > "$R/timing-us.txt"
tar -C "$O" -czf "$O/recon.tgz" recon && rm -rf "$R"

#!/usr/bin/python3
"""Benchmark for docs/benchmarks.md, section "gdrpeer check".

  /usr/bin/python3 userspace/bench/check_vs_lstopo.py [path/to/gdrpeer]

1. Same input, same run: `gdrpeer check --hwloc X` vs `lstopo --input X --of xml` (whole process,
   spawn included, median of N runs each, interleaved).
2. A sysfs snapshot vs lstopo reading a file-system root: `gdrpeer check SNAP.tar` and
   `gdrpeer check --sysfs-root DIR` vs `HWLOC_FSROOT=G lstopo --of xml` where G is this machine's
   hwloc-gather-topology dump (hwloc's own sysfs snapshot format).
3. Fleet mode: node dumps per second for one `gdrpeer check --fleet` call over many dumps.
"""
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
GDRPEER = sys.argv[1] if len(sys.argv) > 1 else str(REPO / "build/userspace/cli/gdrpeer")
REF = REPO / "topology/reference"
ENV = dict(os.environ, GDRPEER_DATA_DIR=str(REPO / "topology"))


def timed(cmd, env=None, n=30):
    samples = []
    for _ in range(n):
        t = time.perf_counter()
        p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env or ENV)
        samples.append(time.perf_counter() - t)
        assert p.returncode in (0, 1, 2), (cmd, p.returncode)
    return statistics.median(samples)


def row(name, ours, theirs):
    print(f"| {name} | {ours * 1e3:.2f} ms | {theirs * 1e3:.2f} ms | {theirs / ours:.1f}x |")


print(f"machine: {os.uname().nodename}, {os.cpu_count()} CPUs, {os.uname().release}")
print("| input | gdrpeer check | lstopo | speed-up |\n| --- | --- | --- | --- |")
for name in ("aws-p4d.24xlarge.xml", "aws-p5en.48xlarge.xml", "aws-p6e-gb200.36xlarge.xml"):
    x = str(REF / name)
    ours = timed([GDRPEER, "check", "--hwloc", x])
    theirs = timed(["lstopo", "--input", x, "--of", "xml", "-"])
    row(f"hwloc {name} ({os.path.getsize(x) // 1024} KiB)", ours, theirs)

work = Path(tempfile.mkdtemp(prefix="gdrpeer-bench-"))
snap = work / "live.tar"
subprocess.run([GDRPEER, "snapshot", "--no-cuda", str(snap)], check=True, env=ENV, stderr=subprocess.DEVNULL)
snapdir = work / "snapdir"
snapdir.mkdir()
tarfile.open(snap).extractall(snapdir)
gather = work / "gather"
subprocess.run(["hwloc-gather-topology", str(gather)], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
gdir = work / "gatherdir"
gdir.mkdir()
tarfile.open(str(gather) + ".tar.bz2").extractall(gdir)
fsroot = next(p for p in gdir.iterdir() if p.is_dir())
env = dict(ENV, HWLOC_FSROOT=str(fsroot))
theirs = timed(["lstopo", "--of", "xml", "-"], env=env)
row("this machine: snapshot tar vs HWLOC_FSROOT", timed([GDRPEER, "check", str(snap)]), theirs)
row("this machine: --sysfs-root dir vs HWLOC_FSROOT", timed([GDRPEER, "check", "--sysfs-root", str(snapdir)]), theirs)
row("this machine: live sysfs vs live lstopo", timed([GDRPEER, "check", "--no-cuda"]), timed(["lstopo", "--of", "xml", "-"]))

print("\n| fleet input | dumps | seconds | dumps/s |\n| --- | --- | --- | --- |")
for label, src, count in (("hwloc p5en (243 KiB each)", REF / "aws-p5en.48xlarge.xml", 1000),
                          ("NCCL topology file p5 pr1226", REF / "aws-p5.48xl-topo-pr1226.xml", 5000),
                          ("lspci transcript ESC8000A", REF / "stelline-asus-esc8000a-e12.md", 5000),
                          ("sysfs snapshot tar (this machine)", snap, 5000),
                          ("sysfs snapshot tar (synthetic switch node)", REF / "seeds_snapshot/switch-acs-dma.tar", 5000)):
    d = work / ("fleet-" + str(abs(hash(label))))
    d.mkdir()
    files = []
    for i in range(count):
        f = d / f"n{i}{src.suffix}"
        os.link(src, f) if src.stat().st_dev == f.parent.stat().st_dev else shutil.copy(src, f)
        files.append(str(f))
    best = None
    for _ in range(3):
        t = time.perf_counter()
        p = subprocess.run([GDRPEER, "check", "--fleet", *files], stdout=subprocess.DEVNULL, env=ENV)
        el = time.perf_counter() - t
        assert p.returncode in (0, 1, 2)
        best = el if best is None else min(best, el)
    print(f"| {label} | {count} | {best:.2f} | {count / best:.0f} |")
shutil.rmtree(work)

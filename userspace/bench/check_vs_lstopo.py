#!/usr/bin/python3
"""Benchmark for docs/benchmarks.md, section "gdrpeer check".

  /usr/bin/python3 userspace/bench/check_vs_lstopo.py [GDRPEER [SPAWN_TIMER]] [--runs=N] [--baseline=OLD_GDRPEER]

--baseline adds an older gdrpeer binary to the same runs (same alternation, same load), for
before/after numbers that machine load does not skew. GDRPEER defaults to build/userspace/cli/gdrpeer, SPAWN_TIMER to build/userspace/bench/spawn_timer
(userspace/bench/spawn_timer.cpp, built by `make userspace`).

1. Same input, same run: `gdrpeer check --hwloc X` vs `lstopo --input X --of xml -`. Whole
   processes, started by spawn_timer (posix_spawn + wait4, output to /dev/null) for both tools
   alike, the two commands alternating, median of N runs each. Python's subprocess is not in
   the numbers. Also the floor: spawn_timer starting /bin/true (fork+exec+dynamic loader of a
   C program with libc only) and the empty C programs exec_floor_dynamic / exec_floor_static
   (userspace/bench/exec_floor.c), i.e. what no process on this machine can go below.
4. If built (needs libhwloc-dev): inproc_vs_hwloc, the same hwloc comparison inside one
   process each, exec excluded on both sides.
2. A sysfs snapshot vs lstopo reading a file-system root: `gdrpeer check SNAP.tar` and
   `gdrpeer check --sysfs-root DIR` vs `HWLOC_FSROOT=G lstopo --of xml -` where G is this
   machine's hwloc-gather-topology dump (hwloc's own sysfs snapshot format); and live sysfs.
3. Fleet mode: node dumps per second for one `gdrpeer check --fleet` call over many dumps
   (best of 3; one process, so the spawn cost is negligible), with one thread (`-j 1`) and
   with the default of one thread per CPU.
"""
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
args = [a for a in sys.argv[1:] if not a.startswith("--")]
RUNS = 200
BASELINE = None
for a in sys.argv[1:]:
    if a.startswith("--runs="):
        RUNS = int(a.split("=", 1)[1])
    elif a.startswith("--baseline="):
        BASELINE = os.path.abspath(a.split("=", 1)[1])
GDRPEER = os.path.abspath(args[0]) if len(args) > 0 else str(REPO / "build/userspace/cli/gdrpeer")
TIMER = os.path.abspath(args[1]) if len(args) > 1 else str(REPO / "build/userspace/bench/spawn_timer")
REF = REPO / "tests/reference"
ENV = dict(os.environ, GDRPEER_DATA_DIR=str(REPO / "topology"))
LSTOPO = shutil.which("lstopo") or "/usr/bin/lstopo"
LINE = re.compile(r"median_ms=(\S+) min_ms=(\S+) max_ms=(\S+) cpu_ms=(\S+) exit=(\S+) cmd=(.*)")


def timed(cmds, env=None, runs=RUNS):
    """Runs the commands alternating, `runs` rounds; returns [(median_ms, cpu_ms)] in order."""
    argv = [TIMER, str(runs)]
    for c in cmds:
        argv += ["--", *c]
    out = subprocess.run(argv, env=env or ENV, check=True, capture_output=True, text=True).stdout
    rows = []
    for line in out.splitlines():
        m = LINE.match(line)
        assert m, line
        codes = {int(x) for x in m.group(5).split(",")}
        assert codes <= {0, 1, 2}, line  # a verdict, never an error
        rows.append((float(m.group(1)), float(m.group(4))))
    assert len(rows) == len(cmds), out
    return rows


def row(name, ours, theirs, before=None):
    extra = f" {before[0]:.2f} ms ({theirs[0] / before[0]:.1f}x) |" if before else ""
    print(f"| {name} | {ours[0]:.2f} ms | {theirs[0]:.2f} ms | {theirs[0] / ours[0]:.1f}x |"
          f" {ours[1]:.2f} / {theirs[1]:.2f} ms |{extra}")


def with_base(cmds):
    """cmds plus, with --baseline, the same gdrpeer commands run by the baseline binary."""
    return cmds + ([[BASELINE, *c[1:]] for c in cmds if c[0] == GDRPEER] if BASELINE else [])


load = os.getloadavg()
print(f"date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
print(f"machine: {os.uname().nodename}, {os.cpu_count()} CPUs, kernel {os.uname().release}, "
      f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} at start; {RUNS} runs per command")
BENCH = Path(TIMER).parent
floors = [["/bin/true"]] + [[str(BENCH / n)] for n in ("exec_floor_dynamic", "exec_floor_static") if (BENCH / n).exists()]
for cmd, (wall, cpu) in zip(floors, timed(floors)):
    print(f"floor: {Path(cmd[0]).name} {wall:.3f} ms (cpu {cpu:.3f} ms)")
print("\n| input | gdrpeer check | lstopo | speed-up | CPU time gdrpeer / lstopo |" + (" baseline gdrpeer (speed-up) |" if BASELINE else "")
      + "\n| --- | --- | --- | --- | --- |" + (" --- |" if BASELINE else ""))
for name in ("aws-p4d.24xlarge.xml", "aws-p5en.48xlarge.xml", "aws-p6e-gb200.36xlarge.xml"):
    x = str(REF / name)
    ours, theirs, *before = timed(with_base([[GDRPEER, "check", "--hwloc", x], [LSTOPO, "--input", x, "--of", "xml", "-"]]))
    row(f"hwloc {name} ({os.path.getsize(x) // 1024} KiB)", ours, theirs, *before)

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
tar_ours, dir_ours, theirs, *before = timed(with_base([[GDRPEER, "check", str(snap)],
                                                     [GDRPEER, "check", "--sysfs-root", str(snapdir)],
                                                     [LSTOPO, "--of", "xml", "-"]]), env=env)
row("this machine: snapshot tar vs `HWLOC_FSROOT`", tar_ours, theirs, *before[:1])
row("this machine: `--sysfs-root` dir vs `HWLOC_FSROOT`", dir_ours, theirs, *before[1:])
ours, theirs, *before = timed(with_base([[GDRPEER, "check", "--no-cuda"], [LSTOPO, "--of", "xml", "-"]]), runs=max(RUNS // 4, 20))
row("this machine: live sysfs vs live `lstopo`", ours, theirs, *before)

jobs = len(os.sched_getaffinity(0))
print(f"\n| fleet input | dumps | seconds, 1 thread (`-j 1`) | dumps/s, 1 thread | seconds, {jobs} threads (default) |"
      f" dumps/s, {jobs} threads |" + (" baseline dumps/s, 1 / {jobs} threads |".format(jobs=jobs) if BASELINE else "")
      + "\n| --- | --- | --- | --- | --- | --- |" + (" --- |" if BASELINE else ""))
for label, src, count in (("hwloc p4d (102 KiB each)", REF / "aws-p4d.24xlarge.xml", 2000),
                          ("hwloc p5en (243 KiB each)", REF / "aws-p5en.48xlarge.xml", 2000),
                          ("hwloc p6e-gb200 (242 KiB each)", REF / "aws-p6e-gb200.36xlarge.xml", 2000),
                          ("NCCL topology file p5 pr1226", REF / "aws-p5.48xl-topo-pr1226.xml", 5000),
                          ("lspci transcript ESC8000A (98 KiB markdown report)", REF / "stelline-asus-esc8000a-e12.md", 5000),
                          ("sysfs snapshot tar (this machine)", snap, 5000),
                          ("sysfs snapshot tar (synthetic switch node)", REF / "seeds_snapshot/switch-acs-dma.tar", 5000)):
    d = work / ("fleet-" + str(abs(hash(label))))
    d.mkdir()
    files = []
    for i in range(count):
        f = d / f"n{i}{src.suffix}"
        os.link(src, f) if src.stat().st_dev == f.parent.stat().st_dev else shutil.copy(src, f)
        files.append(str(f))
    best = {}
    for _ in range(3):
        for binary in [GDRPEER] + ([BASELINE] if BASELINE else []):
            for j in ("1", str(jobs)):
                t = time.perf_counter()
                p = subprocess.run([binary, "check", "--fleet", "-j", j, *files], stdout=subprocess.DEVNULL, env=ENV)
                el = time.perf_counter() - t
                assert p.returncode in (0, 1, 2)
                best[binary, j] = min(best.get((binary, j), el), el)
    one, many = best[GDRPEER, "1"], best[GDRPEER, str(jobs)]
    extra = f" {count / best[BASELINE, '1']:.0f} / {count / best[BASELINE, str(jobs)]:.0f} |" if BASELINE else ""
    print(f"| {label} | {count} | {one:.2f} | {count / one:.0f} | {many:.2f} | {count / many:.0f} |{extra}")
shutil.rmtree(work)
inproc = BENCH / "inproc_vs_hwloc"
if inproc.exists():
    print()
    subprocess.run([str(inproc), "-n", "100", str(REPO / "topology"),
                    *[str(REF / n) for n in ("aws-p4d.24xlarge.xml", "aws-p5en.48xlarge.xml", "aws-p6e-gb200.36xlarge.xml")]],
                   check=True)
load = os.getloadavg()
print(f"\nload average at the end: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")

"""`make test-driver-mutants`: plant each bug of tests/mutation/driver_mutants.py in a scratch copy
of driver/, build one gdrpeer.ko per bug, and run the guest selftests that should notice it.

The emulated node is booted as few times as possible: one boot loads the unmutated module first
(its tests must pass), then each mutant's module in turn (insmod, its selftest programs, rmmod).
A mutant is killed when one of its programs fails, its module does not load or unload, or the
kernel log between its markers has a BUG/WARNING/Oops. A mutant that leaves the kernel in doubt
(a kernel problem, a failed unload, a hang) ends what that boot can judge: the mutants after it
go to the next boot. A boot that dies is retried one mutant per boot; a mutant whose own boot
dies is killed by it.

A mutant whose `old` text is not found exactly once in its file, or whose mutated driver does
not build, is an error of the list: the run fails and names the entry, so the list follows the
driver.

Usage: python3 tests/mutation/driver_run.py [--kernel 6.1] [--only ID[,ID...]] [--list]
"""

import argparse
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(REPO / "tests"))

from driver_mutants import MUTANTS, PROGRAMS  # noqa: E402
from selection import choose, print_list  # noqa: E402
from emunode import Node, kernels  # noqa: E402
from emunode.build import CHROOT_TOOLCHAIN, modules_dir  # noqa: E402
from emunode.errors import GuestError  # noqa: E402
from emunode.node import PROBLEM, CommandResult  # noqa: E402
from emunode.node import _parse as node_parse  # noqa: E402
from run import sync_tree  # noqa: E402

BASELINE = "unmutated"
BIN = REPO / "build" / "bin"
# one boot's limits: a selftest program, and the whole boot
CMD_TIMEOUT_S = 150
BOOT_TIMEOUT_S = 2400


def log(msg):
    print(msg, flush=True)


class ListError(Exception):
    """An entry of driver_mutants.py that no longer matches the driver."""


def apply(src: Path, m):
    """Mutates m.file under src; returns the original text. Raises ListError naming the entry."""
    path = src / m.file
    text = path.read_text() if path.exists() else None
    n = text.count(m.old) if text is not None else 0
    if n != 1:
        # where the first line of the code is now, in any driver file: the entry's new anchor
        first = m.old.strip().splitlines()[0].strip()
        seen = [f"{f.relative_to(src)}:{i + 1}" for f in sorted((src / "driver").glob("*.[ch]"))
                for i, line in enumerate(f.read_text().splitlines()) if first in line]
        found = "is gone" if text is None else f"holds the code to mutate {n} times, not once"
        raise ListError(f"{m.id}: {m.file} {found}; its first line {first!r} is at "
                        f"{', '.join(seen) or 'no line of driver/'}; update the entry in "
                        f"tests/mutation/driver_mutants.py:\n    old = {m.old!r}")
    path.write_text(text.replace(m.old, m.new))
    return text


class Builder:
    """One scratch copy of driver/ + uapi/, rebuilt incrementally for each mutant."""

    def __init__(self, base: Path, kernel_name: str):
        self.src = base / "src"
        self.kos = base / "ko"
        self.kernel = kernels.ensure_kernel(kernel_name, log=log)

    def prepare(self):
        for part in ("driver", "uapi"):
            sync_tree(REPO / part, self.src / part)
        shutil.rmtree(self.kos, ignore_errors=True)
        self.kos.mkdir(parents=True)

    def build(self, name):
        """Builds gdrpeer.ko from the scratch copy as ko/<name>.ko; (ok, build output)."""
        p = subprocess.run(["nice", "make", "-C", str(self.src / "driver"),
                            f"KDIR={self.kernel.kdir}", "KBUILD_ARGS=CC=gcc"],
                           capture_output=True, text=True, errors="replace")
        if p.returncode:
            return False, p.stdout + p.stderr
        out = self.kos / f"{name}.ko"
        shutil.copy2(self.src / "driver" / "gdrpeer.ko", out)
        # debug info is most of the module: leave it out of the guest's initramfs
        subprocess.run(["strip", "--strip-debug", str(out)], check=True)
        return True, ""


# Exit status of a unit's command that did not run: an earlier unit left the kernel in doubt.
NOT_RUN = 125


def unit_commands(name, previous, programs):
    """Guest commands of one unit: load, the programs, unload (each its own result). Each runs
    only if the unit before it (`previous`) unloaded cleanly, so that a kernel one mutant wedged
    costs the rest of the boot no time (they go to the next boot)."""
    gate = f"test -e /tmp/unloaded-{previous} || exit {NOT_RUN}; "
    load = (f"{gate}echo 'gdrpeer-mutant: begin {name}' > /dev/kmsg; "
            f"insmod /mutants/{name}.ko pcibar=$GDRPEER_GPU_BDF")
    unload = (f"{gate}rmmod gdrpeer && ! test -e /sys/module/gdrpeer; rc=$?; "
              f"echo 'gdrpeer-mutant: end {name}' > /dev/kmsg; "
              f"[ $rc = 0 ] && touch /tmp/unloaded-{name}; exit $rc")
    return [load, *[f"{gate}gdrpeer_selftest_{p}" for p in programs], unload]


def kernel_slice(kernel_log, name):
    """The kernel log lines between the unit's begin and end markers (to the end if none)."""
    lines = kernel_log.splitlines()
    begin = next((i for i, l in enumerate(lines) if f"gdrpeer-mutant: begin {name}" in l), None)
    if begin is None:
        return None
    end = next((i for i, l in enumerate(lines[begin:]) if f"gdrpeer-mutant: end {name}" in l),
               len(lines) - begin)
    return lines[begin:begin + end + 1]


def judge(name, programs, results, kernel_log):
    """(verdict, clean) of one unit from its command results: verdict '' = every check passed;
    clean False = the kernel may be left in a state later units cannot be judged in.
    None when the unit did not run (an earlier one left the kernel in doubt)."""
    load, *progs, unload = results
    if load.status == NOT_RUN:
        return None
    lines = kernel_slice(kernel_log, name)
    if lines is None:
        raise GuestError(f"the guest's kernel log lost the marker of '{name}' "
                         f"(log_buf_len too small?)", kernel_log[-2000:])
    problems = [l.strip() for l in lines if PROBLEM.search(l)]
    why = []
    if load.status:
        why.append(f"insmod failed ({load.output.strip()[-200:]})")
    for prog, r in zip(programs, progs):
        if r.status:
            failed = re.findall(r"^not ok \d+ (.*)$", r.output, re.M)
            what = ", ".join(failed[:3]) or f"exit {r.status}"
            why.append(f"{prog}: {what}")
    if unload.status:
        why.append("rmmod failed")
    if problems:
        why.append(f"kernel: {problems[0]}")
    timed_out = any(r.status == 137 for r in results)
    clean = not problems and not unload.status and not timed_out
    return "; ".join(why), clean


class ShutdownWatch:
    """Runs beside the guest (Node.run's bar_host hook, which hands it the BAR file in the run's
    work folder). Once the guest has sent all its results, a mutant may still keep it from
    powering off (a revocation waiting forever on device shutdown): after POWEROFF_GRACE_S the
    watch ends that QEMU (our child, found by its work folder) and the results are read from
    the folder."""

    POWEROFF_GRACE_S = 60

    def __init__(self):
        self.work = None
        self.ended_qemu = False

    def __call__(self, bar_path, stop):
        self.work = Path(bar_path).parent
        results = self.work / "results.log"
        done_at = None
        while not stop.wait(2):
            if done_at is None:
                if results.exists() and "@@EMUNODE DONE" in results.read_text(errors="replace"):
                    done_at = time.monotonic()
            elif time.monotonic() - done_at > self.POWEROFF_GRACE_S:
                pid = self._qemu_pid()
                if pid:
                    log(f"driver mutation: the guest sent its results but does not power off "
                        f"after {self.POWEROFF_GRACE_S} s: ending its QEMU (pid {pid})")
                    self.ended_qemu = True
                    os.kill(pid, signal.SIGTERM)
                return

    def _qemu_pid(self):
        for proc in Path("/proc").iterdir():
            if not proc.name.isdigit():
                continue
            try:
                stat = (proc / "stat").read_text()
                cmdline = (proc / "cmdline").read_bytes().decode(errors="replace")
            except OSError:
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            if ppid == os.getpid() and str(self.work) in cmdline:
                return int(proc.name)
        return None

    def results(self, ncommands):
        """(command results, kernel log) from the work folder of a guest that finished."""
        records, done = node_parse((self.work / "results.log").read_text(errors="replace"))
        if not done or ("dmesg", "kernel") not in records:
            return None
        out = []
        for i in range(ncommands):
            data, status = records[("cmd", f"{i:04d}")]
            out.append(CommandResult(f"command {i}", data.decode(errors="replace"), status))
        return out, records[("dmesg", "kernel")][0].decode(errors="replace")


def boot(kernel_name, units, kos):
    """Runs the units in one boot; returns {name: (verdict, clean)} for those it can judge, in
    order, stopping after the first unit that is not clean. Raises GuestError if the boot dies."""
    commands = ["insmod /gdrpeer/modules/gdrpeer_edu_hca.ko && "
                "insmod /gdrpeer/modules/gdrpeer_ptebits.ko && touch /tmp/unloaded-start"]
    spans, previous = [], "start"
    for name, programs in units:
        cmds = unit_commands(name, previous, programs)
        spans.append((name, programs, len(commands), len(cmds)))
        commands += cmds
        previous = name
    files = {f"/mutants/{name}.ko": (kos / f"{name}.ko").read_bytes() for name, _ in units}
    node = Node(kernel_name, "switch", "translated", bar_mib=64,
                log=lambda m: print(m, file=sys.stderr))
    watch = ShutdownWatch()
    t0 = time.monotonic()
    try:
        res = node.run(commands, timeout=BOOT_TIMEOUT_S, cmd_timeout=CMD_TIMEOUT_S,
                       allow_problems=True, files=files, bar_host=watch,
                       # every unit's markers must survive the boot's whole log
                       extra_cmdline=("log_buf_len=16M",))
        results, kernel_log = res.results, res.kernel_log
    except GuestError:
        got = watch.results(len(commands)) if watch.ended_qemu else None
        if got is None:
            raise
        results, kernel_log = got
    if results[0].status:
        raise GuestError(f"the test modules did not load: {results[0].output}", "")
    judged = {}
    for name, programs, first, n in spans:
        verdict = judge(name, programs, results[first:first + n], kernel_log)
        if verdict is None:
            break
        judged[name] = verdict
        if not verdict[1]:
            break
    return judged, time.monotonic() - t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kernel", default=os.environ.get("VM_KERNEL", "6.1"))
    ap.add_argument("--build", default=str(REPO / "build" / "driver-mutants"))
    ap.add_argument("--only", default="", help="comma-separated mutant ids")
    ap.add_argument("--list", action="store_true", help="print the mutants and exit")
    args = ap.parse_args()

    for m in MUTANTS:
        unknown = [p for p in m.tests if p not in PROGRAMS]
        if unknown or not m.tests:
            sys.exit(f"driver mutation: {m.id}: tests {m.tests} must name some of {PROGRAMS}")
    ids = [m.id for m in MUTANTS]
    chosen = choose(MUTANTS, args.only, "driver mutation")
    if args.list:
        print_list(MUTANTS, 34)
        return 0
    if args.kernel in CHROOT_TOOLCHAIN:
        sys.exit(f"driver mutation: kernel {args.kernel} builds in a chroot toolchain; "
                 f"use a kernel the host gcc builds for (5.10, 6.1, 6.12)")
    missing = [f"gdrpeer_selftest_{p}" for p in PROGRAMS if not (BIN / f"gdrpeer_selftest_{p}").exists()]
    test_mods = [modules_dir(args.kernel) / f for f in ("gdrpeer_edu_hca.ko", "gdrpeer_ptebits.ko")]
    missing += [str(p) for p in test_mods if not p.exists()]
    if missing:
        sys.exit(f"driver mutation: missing {', '.join(missing)} (make selftests vm-modules)")

    t0 = time.monotonic()
    b = Builder(Path(args.build).resolve() / args.kernel, args.kernel)
    b.prepare()
    log(f"driver mutation: building the unmutated gdrpeer.ko for kernel {args.kernel}")
    ok, out = b.build(BASELINE)
    if not ok:
        sys.exit(f"driver mutation: the unmutated driver does not build:\n{out[-4000:]}")
    errors, built = [], []
    order = sorted(chosen, key=lambda m: (m.file, ids.index(m.id)))
    for m in order:
        try:
            original = apply(b.src, m)
        except ListError as e:
            errors.append(str(e))
            log(f"ERROR    {e}")
            continue
        try:
            ok, out = b.build(m.id)
        finally:
            (b.src / m.file).write_text(original)
        if ok:
            built.append(m)
        else:
            errors.append(f"{m.id}: the mutated driver does not build:\n{out[-2000:]}")
            log(f"ERROR    {m.id}: does not build")
    t_build = time.monotonic() - t0
    log(f"driver mutation: {len(built) + 1} modules built in {t_build:.0f} s")

    # every program any mutant names runs against the unmutated module first
    base_programs = [p for p in PROGRAMS if any(p in m.tests for m in built)]
    queue = [(BASELINE, base_programs)] + [(m.id, [p for p in PROGRAMS if p in m.tests])
                                          for m in built]
    verdicts, boots, guest_s, singles = {}, 0, 0.0, False
    while queue:
        batch = queue[:1] if singles else queue
        boots += 1
        log(f"driver mutation: boot {boots}: {', '.join(n for n, _ in batch)}")
        try:
            judged, secs = boot(args.kernel, batch, b.kos)
            guest_s += secs
        except GuestError as e:
            if not singles and len(batch) > 1:
                log(f"driver mutation: boot {boots} died ({e}); one mutant per boot from here")
                singles = True
                continue
            name = batch[0][0]
            if name == BASELINE:
                sys.exit(f"driver mutation: the unmutated driver's boot died: {e}")
            judged = {name: (f"the guest died ({str(e).splitlines()[0][:200]})", False)}
        if not judged:
            sys.exit(f"driver mutation: boot {boots} judged no unit (see the log above)")
        for name, (verdict, clean) in judged.items():
            verdicts[name] = verdict
            if name == BASELINE:
                if verdict:
                    sys.exit(f"driver mutation: the unmutated driver fails its tests ({verdict}): "
                             f"fix them before judging mutants")
                continue
            log(f"{'killed  ' if verdict else 'SURVIVED'} {name:34} {verdict}"
                + ("" if clean else "  [kernel left in doubt: the rest go to a new boot]"))
        queue = [u for u in queue if u[0] not in judged]

    killed = [m.id for m in built if verdicts.get(m.id)]
    survived = [m.id for m in built if not verdicts.get(m.id)]
    total = time.monotonic() - t0
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    log(f"driver mutation: {len(killed)}/{len(built)} mutants killed, {len(survived)} survived, "
        f"{len(errors)} errors in the list; kernel {args.kernel}, {boots} boot(s); {total:.0f} s "
        f"in all ({t_build:.0f} s building, {guest_s:.0f} s in guests), "
        f"{ru.ru_utime + ru.ru_stime:.0f} s of CPU time in children")
    for s in survived:
        m = next(x for x in MUTANTS if x.id == s)
        log(f"  survived: {s} ({m.file}: {m.why})")
    for e in errors:
        log(f"  list error: {e}")
    return 1 if survived or errors else 0


if __name__ == "__main__":
    sys.exit(main())

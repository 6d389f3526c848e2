"""`make test-mutants`: plant each bug of tests/mutation/mutants.py in a scratch copy of the
userspace sources, rebuild incrementally and run the fast host tests that should notice it.

Every mutant must be killed (some test fails, crashes or hangs). A mutant whose `old` text is no
longer found exactly once in its file, or whose mutated code does not compile, is an error of the
list: the run fails loudly so the list stays true to the code.

Usage: python3 tests/mutation/run.py [--build DIR] [--only ID[,ID...]] [--list]
"""

import argparse
import filecmp
import os
import re
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent))

from mutants import MUTANTS  # noqa: E402
from selection import choose, print_list  # noqa: E402

# What the scratch copy holds: the userspace sources, the rule data and test fixtures the tests
# read, the ABI header.
COPIED = ("userspace", "topology", "tests/reference", "uapi")
TEST_TIMEOUT_S = 120


def log(msg):
    print(msg, flush=True)


def sync_tree(src: Path, dst: Path):
    """Make dst a copy of src, rewriting only files whose bytes differ (keeps make incremental)."""
    seen = set()
    for root, dirs, files in os.walk(src):
        dirs[:] = [d for d in dirs if d not in ("__pycache__",)]
        rel = Path(root).relative_to(src)
        (dst / rel).mkdir(parents=True, exist_ok=True)
        for name in files:
            s, d = Path(root) / name, dst / rel / name
            seen.add(d)
            if not d.exists() or not filecmp.cmp(s, d, shallow=False):
                shutil.copy2(s, d)
                os.utime(d)  # newer than any object built from the old content
    for root, dirs, files in os.walk(dst):
        for name in files:
            p = Path(root) / name
            if p not in seen:
                p.unlink()


def run(cmd, cwd=None, timeout=None, env=None):
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, errors="replace",
                          timeout=timeout, env=env)


class Scratch:
    def __init__(self, base: Path, jobs: int):
        self.src = base / "src"
        self.build = base / "build"
        self.jobs = jobs

    def prepare(self):
        for part in COPIED:
            sync_tree(REPO / part, self.src / part)
        self.drop_stale_build_dirs()
        # Configured every time (cheap when nothing changed): a target added to the CMake
        # files since the scratch build was made is unknown to its old Makefiles otherwise.
        # -O0 and no debug info: the mutants recompile one file each, quickly.
        p = run(["cmake", "-S", str(self.src / "userspace"), "-B", str(self.build),
                 "-DCMAKE_BUILD_TYPE=MutationCheck", "-DCMAKE_CXX_FLAGS_MUTATIONCHECK=-O0",
                 "-DCMAKE_C_FLAGS_MUTATIONCHECK=-O0", "-DGDRPEER_BUILD_BENCH=OFF",
                 "-DGDRPEER_BUILD_FUZZ=OFF", "-DGDRPEER_STATIC_LIBSTDCXX=OFF"])
        if p.returncode:
            sys.exit(f"mutation: cmake configure failed:\n{p.stdout}{p.stderr}")

    def drop_stale_build_dirs(self):
        """A build folder whose source folder has no CMakeLists.txt any more (its tests moved to
        another folder) still holds the old test programs: remove it, so that each test program
        is found once."""
        if not self.build.is_dir():
            return
        for cmakefiles in sorted(self.build.rglob("CMakeFiles")):
            folder = cmakefiles.parent
            rel = folder.relative_to(self.build)
            if rel == Path(".") or "CMakeFiles" in rel.parts or not folder.is_dir():
                continue
            if not (self.src / "userspace" / rel / "CMakeLists.txt").exists():
                log(f"mutation: removing {folder} (its source folder is gone)")
                shutil.rmtree(folder)

    def targets(self):
        names = set()
        for m in MUTANTS:
            names.update(t.split(":")[0] for t in m.tests)
        return sorted(names)

    def build_targets(self, targets):
        p = run(["nice", "cmake", "--build", str(self.build), f"-j{self.jobs}", "--target", *targets])
        return p.returncode == 0, p.stdout + p.stderr

    def binary(self, target):
        hits = list(self.build.rglob(target))
        hits = [h for h in hits if h.is_file() and os.access(h, os.X_OK)]
        if len(hits) != 1:
            sys.exit(f"mutation: expected one built '{target}' under {self.build}, found {hits}")
        return hits[0]


def first_failure(output):
    m = re.search(r"^\[  FAILED  \] (\S+)", output, re.M)
    return m.group(1) if m else None


def run_test(scratch, spec):
    """Runs one test binary (spec "binary" or "binary:GtestFilter"); returns (killed, what)."""
    target, _, filt = spec.partition(":")
    cmd = [str(scratch.binary(target)), "--gtest_fail_fast", "--gtest_brief=1"]
    if filt:
        cmd.append(f"--gtest_filter={filt}")
    try:
        p = run(cmd, timeout=TEST_TIMEOUT_S, cwd=scratch.build)
    except subprocess.TimeoutExpired:
        return True, f"{target}: hung (> {TEST_TIMEOUT_S} s)"
    if p.returncode == 0:
        return False, ""
    if p.returncode < 0:
        return True, f"{target}: killed by signal {-p.returncode}"
    return True, f"{target}: {first_failure(p.stdout) or 'exit ' + str(p.returncode)}"


def apply(scratch, m):
    """Returns the original text of the mutated file, or raises ValueError naming the problem."""
    path = scratch.src / m.file
    text = path.read_text()
    n = text.count(m.old)
    if n != 1:
        raise ValueError(f"{m.file}: the code to mutate is found {n} times, not once:\n    {m.old!r}")
    path.write_text(text.replace(m.old, m.new))
    return text


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=str(REPO / "build" / "mutants"))
    ap.add_argument("--only", default="", help="comma-separated mutant ids")
    ap.add_argument("--list", action="store_true", help="print the mutants and exit")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    args = ap.parse_args()

    ids = [m.id for m in MUTANTS]
    chosen = choose(MUTANTS, args.only, "mutation")
    if args.list:
        print_list(MUTANTS, 32)
        return 0

    t0 = time.monotonic()
    scratch = Scratch(Path(args.build).resolve(), args.jobs)
    scratch.prepare()
    log(f"mutation: building the unmutated tests in {scratch.build}")
    ok, out = scratch.build_targets(scratch.targets())
    if not ok:
        sys.exit(f"mutation: the unmutated sources do not build:\n{out[-4000:]}")
    for target in scratch.targets():
        killed, what = run_test(scratch, target)
        if killed:
            sys.exit(f"mutation: the unmutated tests fail ({what}): fix them before judging mutants")
    t_base = time.monotonic() - t0
    log(f"mutation: baseline built and passing in {t_base:.0f} s; {len(chosen)} mutants")

    # Mutants of one file in a row: restoring the file and mutating it again costs one compile.
    order = sorted(chosen, key=lambda m: (m.file, ids.index(m.id)))
    survived, errors, results = [], [], []
    for m in order:
        t1 = time.monotonic()
        try:
            original = apply(scratch, m)
        except ValueError as e:
            errors.append(f"{m.id}: {e}")
            log(f"ERROR    {m.id}: {e}")
            continue
        try:
            verdict = None
            for spec in m.tests:
                target = spec.split(":")[0]
                ok, out = scratch.build_targets([target])
                if not ok:
                    errors.append(f"{m.id}: the mutated code does not build:\n{out[-2000:]}")
                    verdict = "ERROR"
                    break
                killed, what = run_test(scratch, spec)
                if killed:
                    verdict = what
                    break
        finally:
            (scratch.src / m.file).write_text(original)
        dt = time.monotonic() - t1
        if verdict == "ERROR":
            log(f"ERROR    {m.id}: does not build ({dt:.0f} s)")
        elif verdict:
            log(f"killed   {m.id:32} by {verdict} ({dt:.0f} s)")
            results.append(m.id)
        else:
            log(f"SURVIVED {m.id:32} ({m.file}: {m.why}) ({dt:.0f} s)")
            survived.append(m.id)

    total = time.monotonic() - t0
    judged = len(results) + len(survived)
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    log(f"mutation: {len(results)}/{judged} mutants killed, {len(survived)} survived, "
        f"{len(errors)} errors in the list; {total:.0f} s in all ({t_base:.0f} s baseline build), "
        f"{ru.ru_utime + ru.ru_stime:.0f} s of CPU time in builds and tests")
    for e in errors:
        log(f"  list error: {e}")
    return 1 if survived or errors else 0


if __name__ == "__main__":
    sys.exit(main())

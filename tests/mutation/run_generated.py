"""`make test-mutants-generated`: run the generated operator mutants (generate.py) of the checker.

1. Copies userspace/, topology/ and uapi/ into the scratch tree (default build/mutants-gen/src),
   rewrites every file of generate.SOURCES there into its mutant schemata, and builds the test
   binaries and the CLI once at -O0 with schemata.hpp force-included into gdrpeer_topo. A site
   the compiler refuses (a compile error on its line) is dropped, reported "not built", and the
   build retried.
2. Coverage pass: every test command runs once with no mutant live (it must pass) and
   GDRPEER_MUTANT_TRACE set, which records the sites each command reaches.
3. Each mutant: a site no command reaches is "not reached" (a survivor nobody tests); otherwise
   the commands that reach it run in order with GDRPEER_MUTANT=<number>, each under a timeout,
   until one fails ("killed"), hangs ("timeout") or all pass ("survived").
4. Survivors named in tests/mutation/equivalent/<source>.txt are counted "equivalent" (argued there).
   The result goes to <build>/results.json and a table per file and kind is printed (the one in
   docs/tests.md comes from it).

Usage: python3 tests/mutation/run_generated.py [--build DIR] [--files GLOB,...] [--kinds K,...]
           [--sample N] [--seed S] [--only NUMBER,...] [--jobs N] [--stop-at HH:MM]
"""

import argparse
import fnmatch
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import generate  # noqa: E402
import run as handpicked  # noqa: E402  (its scratch-tree helpers)

REPO = generate.REPO
COPIED = handpicked.COPIED
HEADER = HERE / "schemata.hpp"
EQUIVALENT = HERE / "equivalent"  # one <source>.txt per mutated file
TEST_TIMEOUT_S = 60
PYTHON = os.environ.get("PYTHON", "/usr/bin/python3")  # Debian's, with pytest (make deps)

# The fast host tests, cheapest first: GoogleTest binaries of the topo library, then the pytest
# files that run the CLI on the reference inputs (tests/reference). (name, build target or
# None, command; {bin} is the target's path, {gdrpeer} the CLI's.)
GTESTS = ["test_topo_truth", "test_truth_rules", "test_truth_stack", "test_truth_consumers", "test_truth_lspci",
          "test_truth_xml_inputs", "test_truth_stack_inputs", "test_truth_sysfs", "test_topo", "test_stack", "test_readiness",
          "test_id_tables", "test_nvlink_nvml", "test_node_capture", "test_topo_fastpaths", "test_truth_readers",
          "test_truth_readiness", "test_ibgda_probe", "test_truth_readiness_stage", "test_truth_render"]
PYTESTS = ["tests/test_check.py", "tests/test_check_stack.py", "tests/test_check_readiness.py",
           "tests/test_check_inputs.py", "tests/test_check_sysfs.py"]


def log(msg):
    print(msg, flush=True)


def commands(scratch, pytests=PYTESTS):
    out = []
    for t in GTESTS:
        out.append((t, [str(scratch.binary(t)), "--gtest_fail_fast", "--gtest_brief=1"], {}))
    gdrpeer = str(scratch.binary("gdrpeer"))
    for f in pytests:
        out.append((Path(f).stem, [PYTHON, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider",
                                   "-p", "no:randomly", str(REPO / f)], {"GDRPEER_BIN": gdrpeer}))
    return out


def run_in_group(cmd, env, timeout):
    """subprocess.run in a process group of its own, the whole group killed at the timeout: a
    pytest file's CLI child that a mutant sends into a loop must not outlive its pytest (it
    would run on, orphaned, taking a core from every later mutant). None on a timeout."""
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, errors="replace",
                          env=env, cwd=REPO, start_new_session=True) as proc:
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            return None
        finally:
            try:
                os.killpg(proc.pid, signal.SIGKILL)  # anything the command left running
            except ProcessLookupError:
                pass
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def sync_with_overrides(src: Path, dst: Path, overrides: dict):
    """handpicked.sync_tree, but files in `overrides` get the given text instead of src's."""
    for root, dirs, files in os.walk(src):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        rel = Path(root).relative_to(src)
        (dst / rel).mkdir(parents=True, exist_ok=True)
        for name in files:
            s, d = Path(root) / name, dst / rel / name
            key = str(Path(src.name) / rel / name)
            want = overrides[key].encode() if key in overrides else s.read_bytes()
            if not d.exists() or d.read_bytes() != want:
                d.write_bytes(want)
                os.utime(d)


def launcher():
    """ccache, where installed: every worktree's schemata build compiles the same rewritten
    files, and with CCACHE_BASEDIR at the worktrees' common parent their paths match, so a
    second checkout's first build is mostly cache hits (minutes instead of ~11 on 2 cores)."""
    if not shutil.which("ccache"):
        return []
    os.environ.setdefault("CCACHE_BASEDIR", str(REPO.parent))
    return ["-DCMAKE_CXX_COMPILER_LAUNCHER=ccache", "-DCMAKE_C_COMPILER_LAUNCHER=ccache"]


def prepare(scratch, rewritten: dict):
    for part in COPIED:
        sync_with_overrides(REPO / part, scratch.src / part, {k: v for k, v in rewritten.items()
                                                            if k.startswith(part + "/")})
    p = handpicked.run(["cmake", "-S", str(scratch.src / "userspace"), "-B", str(scratch.build),
                        "-DCMAKE_BUILD_TYPE=MutationCheck", "-DCMAKE_CXX_FLAGS_MUTATIONCHECK=-O0",
                        "-DCMAKE_C_FLAGS_MUTATIONCHECK=-O0", "-DGDRPEER_BUILD_BENCH=OFF",
                        "-DGDRPEER_BUILD_FUZZ=OFF", "-DGDRPEER_STATIC_LIBSTDCXX=OFF", *launcher()])
    if p.returncode:
        sys.exit(f"mutation: cmake configure failed:\n{p.stdout}{p.stderr}")


def schemata_cmake(text: str) -> str:
    """The target's CMake file plus the force-include (and no -Werror: see schemata.hpp)."""
    return text + (f"\n# mutant schemata (tests/mutation/run_generated.py)\n"
                   f"target_compile_options({generate.TARGET} PRIVATE -Wno-error -D_GLIBCXX_ASSERTIONS -include {HEADER})\n")


ERR_RE = re.compile(r"^(?P<path>[^\s:]+):(?P<line>\d+):(?P<col>\d+):\s+(?:error|required from)", re.M)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=str(REPO / "build" / "mutants-gen"))
    ap.add_argument("--files", default="", help="comma-separated globs of the files whose mutants run")
    ap.add_argument("--kinds", default="", help="comma-separated kinds (rel,eq,and,or,if,tern,not,lit)")
    ap.add_argument("--sample", type=int, default=0, help="run a random N of the chosen mutants")
    ap.add_argument("--seed", type=int, default=28)
    ap.add_argument("--only", default="", help="comma-separated mutant numbers")
    ap.add_argument("--unjudged", action="store_true",
                    help="only the mutants no run has judged yet (in no judged/, equivalent/ or survivors/ "
                         "list): the new ids of code changed since its file's last run")
    ap.add_argument("--jobs", type=int, default=1, help="mutants run at once")
    ap.add_argument("--build-jobs", type=int, default=2)
    ap.add_argument("--stop-at", default="", help="HH:MM (UTC): stop starting mutants then")
    ap.add_argument("--timeout", type=int, default=TEST_TIMEOUT_S)
    ap.add_argument("--no-build", action="store_true",
                    help="use the scratch build as it is (a second run beside one in progress)")
    ap.add_argument("--results", default="results.json", help="file name in the build directory")
    ap.add_argument("--update-survivors", action="store_true",
                    help="write each judged mutant's verdict into tests/mutation/survivors/<source>.txt "
                         "(a survivor or unreached one added, a killed or equivalent one removed)")
    ap.add_argument("--pytests", default=",".join(PYTESTS),
                    help="comma-separated pytest files of the set (the slow part of a survivor)")
    args = ap.parse_args()

    t0 = time.monotonic()
    files = generate.source_files()
    per_file = [(rel, *generate.sites_of(REPO, rel)) for rel in files]
    scratch = handpicked.Scratch(Path(args.build).resolve(), args.build_jobs)
    dropped = {}  # mutant number -> compiler message
    targets = GTESTS + ["gdrpeer"]
    for attempt in range(12):
        allm = generate.number_sites(per_file)
        rewritten = {rel: generate.rewrite(p, sites) for rel, p, sites in per_file}
        rewritten[generate.TARGET_CMAKE] = schemata_cmake((REPO / generate.TARGET_CMAKE).read_text())
        if args.no_build:
            break
        prepare(scratch, rewritten)
        log(f"mutation: building {len(allm)} mutants at {sum(len(s) for _, _, s in per_file)} sites "
            f"(attempt {attempt + 1})")
        ok, out = scratch.build_targets(targets)
        if ok:
            break
        bad = {}
        for m in ERR_RE.finditer(out):
            # make prints paths relative to the target's build folder (../../src/userspace/...)
            path = m["path"]
            at = path.find("userspace/")
            if at < 0:
                continue
            rel = path[at:]
            bad.setdefault(rel, set()).add(int(m["line"]))
        if not bad:
            sys.exit(f"mutation: the schemata build fails outside the mutated lines:\n{out[-5000:]}")
        for i, (rel, p, sites) in enumerate(per_file):
            lines = bad.get(rel, set())
            keep = []
            for s in sites:
                span = range(p.toks[s.first].line, p.toks[s.last].line + 1)
                if any(ln in span for ln in lines):
                    for m in s.mutants:
                        dropped[m.id] = m
                else:
                    keep.append(s)
            per_file[i] = (rel, p, keep)
        log(f"mutation: {sum(len(v) for v in bad.values())} lines with compile errors; "
            f"{len(dropped)} mutants dropped so far")
    else:
        sys.exit("mutation: the schemata build still fails after 12 attempts")
    t_build = time.monotonic() - t0
    catalogue = {m.number: m for m in allm}
    json.dump([vars(m) for m in allm], open(scratch.build / "generated.json", "w"), indent=0)

    # coverage pass
    cmds = commands(scratch, [f for f in args.pytests.split(",") if f])
    reach = {}
    tdir = scratch.build / ("trace-" + Path(args.results).stem)
    shutil.rmtree(tdir, ignore_errors=True)
    tdir.mkdir()
    cost = {}
    for name, cmd, env in cmds:
        t1 = time.monotonic()
        e = dict(os.environ, **env, GDRPEER_MUTANT_TRACE=str(tdir / name))
        e.pop("GDRPEER_MUTANT", None)
        p = subprocess.run(["nice", *cmd], capture_output=True, text=True, errors="replace", env=e, cwd=REPO)
        cost[name] = time.monotonic() - t1
        if p.returncode:
            sys.exit(f"mutation: {name} fails with no mutant live:\n{(p.stdout + p.stderr)[-3000:]}")
        f = tdir / name
        reach[name] = {int(x) for x in f.read_text().split()} if f.exists() else set()
        log(f"mutation: {name}: passes in {cost[name]:.1f} s, reaches {len(reach[name])} sites")
    t_cov = time.monotonic() - t0 - t_build

    # which mutants
    chosen = list(allm)
    if args.files:
        globs = args.files.split(",")
        chosen = [m for m in chosen if any(fnmatch.fnmatch(Path(m.file).name, g) for g in globs)]
    if args.kinds:
        chosen = [m for m in chosen if m.kind in args.kinds.split(",")]
    if args.only:
        want = {int(x) for x in args.only.split(",")}
        chosen = [m for m in chosen if m.number in want]
    if args.unjudged:
        chosen = [m for m in chosen if m.id not in known_ids(Path(m.file).name)]
    if args.sample and args.sample < len(chosen):
        chosen = sorted(random.Random(args.seed).sample(chosen, args.sample), key=lambda m: m.number)
    base_of = {}
    for rel, p, sites in per_file:
        for s in sites:
            for m in s.mutants:
                base_of[m.number] = s.base
    stop = None
    if args.stop_at:
        hh, mm = map(int, args.stop_at.split(":"))
        stop = (hh, mm)

    def judge(m):
        if stop and time.gmtime()[3:5] >= stop:
            return m, "not run", "stopped (--stop-at)", 0.0
        base = base_of[m.number]
        # the commands that reach the site, cheapest first
        runs = sorted(((n, c, e) for n, c, e in cmds if base in reach[n]), key=lambda r: cost[r[0]])
        if not runs:
            return m, "not reached", "", 0.0
        t1 = time.monotonic()
        for name, cmd, env in runs:
            e = dict(os.environ, **env, GDRPEER_MUTANT=str(m.number))
            e.pop("GDRPEER_MUTANT_TRACE", None)
            p = run_in_group(["nice", *cmd], env=e, timeout=args.timeout)
            if p is None:
                return m, "timeout", name, time.monotonic() - t1
            if p.returncode:
                what = handpicked.first_failure(p.stdout) or (
                    re.search(r"^FAILED (\S+)", p.stdout, re.M) or [None, f"exit {p.returncode}"])[1]
                return m, "killed", f"{name}: {what}", time.monotonic() - t1
        return m, "survived", "", time.monotonic() - t1

    equivalent = {}
    for listed in sorted(EQUIVALENT.glob("*.txt")):
        for line in listed.read_text().splitlines():
            if line.strip() and not line.startswith("#"):
                mid, _, why = line.partition("\t")
                equivalent[mid.strip()] = why.strip()
    log(f"mutation: build {t_build:.0f} s, coverage {t_cov:.0f} s; running {len(chosen)} of {len(allm)} mutants")
    results = []
    with ThreadPoolExecutor(max_workers=args.jobs) as ex:
        for m, verdict, what, dt in ex.map(judge, chosen):
            if verdict in ("survived", "not reached") and m.id in equivalent:
                verdict = "equivalent"
            results.append({"number": m.number, "id": m.id, "file": m.file, "line": m.line, "col": m.col,
                            "kind": m.kind, "verdict": verdict, "by": what, "seconds": round(dt, 1)})
            if verdict != "not run":
                log(f"{verdict.upper():12} {m.number:5} {m.file}:{m.line}:{m.col} {m.id}"
                    + (f"  [{what}, {dt:.1f} s]" if verdict == "killed" else ""))
    for mid, m in dropped.items():
        results.append({"number": -1, "id": mid, "file": m.file, "line": m.line, "col": m.col,
                        "kind": m.kind, "verdict": "not built", "by": "", "seconds": 0})
    stale = sorted(set(equivalent) - {m.id for m in allm} - set(dropped))
    total = time.monotonic() - t0
    summary = {"total_s": round(total), "build_s": round(t_build), "coverage_s": round(t_cov),
               "planted": len(allm) + len(dropped), "chosen": len(chosen), "results": results,
               "stale_equivalents": stale}
    json.dump(summary, open(scratch.build / args.results, "w"), indent=1)
    if args.update_survivors:
        pytests = [Path(f).name for f in args.pytests.split(",") if f]
        update_survivors(results, catalogue, "the GoogleTest binaries" + (
            " and " + ", ".join(pytests) if pytests else " only (no pytest file)"))
    print_table(results)
    log(f"mutation: {total:.0f} s in all ({t_build:.0f} s build, {t_cov:.0f} s coverage)")
    for s in stale:
        log(f"  equivalent/ names a mutant that no longer exists: {s}")
    bad = [r for r in results if r["verdict"] in ("survived", "not reached", "timeout")]
    return 1 if bad or stale else 0


SURVIVORS = HERE / "survivors"  # one <source>.txt per mutated file: what is left to kill or argue
# One <source>.txt per mutated file: every id some run has judged (any verdict). score.py counts
# a planted id that is in no list here as "not judged": code changed since the file's last run
# plants new ids, and a file-wide "every mutant judged" mark alone would count them as killed.
JUDGED = HERE / "judged"


def read_ids(path):
    return {l for l in path.read_text().splitlines() if l.strip() and not l.startswith("#")} if path.exists() else set()


def known_ids(name):
    """Every id of <name> some list names: judged by a run, argued equivalent, or left."""
    listed = read_ids(JUDGED / f"{name}.txt")
    listed |= {l.partition("\t")[0] for l in read_ids(HERE / "equivalent" / f"{name}.txt")}  # <id>TAB<why>
    listed |= {l.partition("\t")[2] for l in read_ids(SURVIVORS / f"{name}.txt")}  # <verdict>TAB<id>
    return listed


def update_judged(name, planted, verdicts):
    """Adds this run's judged ids to judged/<name>.txt and drops ids no longer planted."""
    path = JUDGED / f"{name}.txt"
    ids = (read_ids(path) | set(verdicts)) & planted
    JUDGED.mkdir(exist_ok=True)
    path.write_text(f"# Generated mutants of {name} that some run of run_generated.py judged (docs/tests.md).\n" +
                    "".join(f"{i}\n" for i in sorted(ids)))


def update_survivors(results, catalogue, how):
    """Merges this run's verdicts into the per-file survivor lists (mutants not judged now keep
    the line they had), so a partial run (--only, --files) never drops what it did not judge.
    A run that judged every mutant of a file marks its list so (score.py counts its kills)."""
    planted = {}
    for m in catalogue.values():
        planted.setdefault(Path(m.file).name, set()).add(m.id)
    by_file = {}
    for r in results:
        if r["verdict"] in ("not run", "not built"):
            continue
        by_file.setdefault(Path(r["file"]).name, {})[r["id"]] = r["verdict"]
    for name, verdicts in by_file.items():
        path = SURVIVORS / f"{name}.txt"
        head, rows = [], {}
        if path.exists():
            for line in path.read_text().splitlines():
                if line.startswith("#") or not line.strip():
                    head.append(line)
                else:
                    verdict, _, mid = line.partition("\t")
                    rows[mid] = verdict
        else:
            head = [f"# Generated mutants of {name} that no test kills yet and nobody has argued equivalent",
                    "# (docs/tests.md, \"Generated operator mutants\"): <verdict><TAB><id> as",
                    "# `python3 tests/mutation/generate.py --list` prints it. Kill one with a test against",
                    f"# independent truth, or move it to ../equivalent/{name}.txt with its reason."]
        for mid, verdict in verdicts.items():
            if verdict in ("survived", "not reached"):
                rows[mid] = verdict
            else:
                rows.pop(mid, None)
        judged_all = set(verdicts) >= planted.get(name, set())
        if judged_all:
            head = [h for h in head if not h.startswith("# every mutant judged:")]
            head.append(f"# every mutant judged: {time.strftime('%Y-%m-%d')} (run_generated.py: {how})")
        if rows or path.exists() or judged_all:
            path.write_text("\n".join(head + [f"{v}\t{i}" for i, v in rows.items()]) + "\n")
        update_judged(name, planted.get(name, set()), verdicts)


VERDICTS = ["killed", "timeout", "survived", "not reached", "equivalent", "not built", "not run"]


def print_table(results):
    rows = {}
    for r in results:
        for key in ((Path(r["file"]).name, "all"), ("all", r["kind"])):
            rows.setdefault(key, {v: 0 for v in VERDICTS})[r["verdict"]] += 1
    log("| file | kind | " + " | ".join(VERDICTS) + " | score |")
    log("| --- | --- | " + " | ".join("---" for _ in VERDICTS) + " | --- |")
    for (f, k), c in sorted(rows.items(), key=lambda kv: (kv[0][0] == "all", kv[0])):
        judged = c["killed"] + c["timeout"] + c["survived"] + c["not reached"]
        score = f"{100 * (c['killed'] + c['timeout']) / judged:.0f} %" if judged else "-"
        log(f"| {f} | {k} | " + " | ".join(str(c[v]) for v in VERDICTS) + f" | {score} |")


if __name__ == "__main__":
    sys.exit(main())

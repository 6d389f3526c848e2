"""Benchmark between two emulated nodes (issue 26; not a test: numbers go to docs/benchmarks.md).

  PYTHONPATH=tests python3 tests/bench_verify_two_node.py [--kernel 6.1] [--rounds 5]
        [--sizes 4096,65536,1048576] [--tools perftest,verify] [--raw FILE]

One boot of a NodePair (switch, IOMMU translated, the dma-buf rxe on each node's e1000e, the
link between them). Server on node a, client on node b, host memory on both sides, the same
sizes and iteration counts (-n) for both tools:
- perftest (Debian's perftest 4.5): `ib_write_bw` and `ib_read_bw` (BW average of the client:
  bytes x iterations / (last completion - first post), MiB/s though it prints "MB/sec"),
  `ib_read_lat` (t_typical = median of the times between consecutive posts, one READ in flight,
  and t_avg), and `ib_send_lat` (half the round trip of a SEND ping-pong: not what verify
  measures, listed because the issue names it);
- `gdrpeer verify --bench` between the same nodes (client `gdrpeer verify ADDR`, server
  `gdrpeer verify --server`), `--source host --method reg_mr -n N`: RDMA WRITE and READ bandwidth
  and RDMA READ latency with perftest's definitions (docs/verify.md, "--bench between two
  nodes").
In flight: verify keeps 16 WRITEs / up to 16 READs in flight; perftest by default min(-n, 128)
WRITEs and 128 READs (`--perftest-depth 16` passes `-t 16` / `-o 16`). Each round runs every measurement once; rounds alternate which tool
goes first (perftest first in even rounds), so slow phases of the shared host hit both. Prints
every raw output, then per measurement the median, min and max over the rounds.

perftest's numbers come from the TSC and its frequency, which perftest calibrates at start by a
linear fit; on a busy host under TCG the fit can fail ("Correlation coefficient r^2 < 0.9") and
perftest then reports 0.00: such a run is counted as lost (shown), never as a number. verify
times with steady_clock.
"""

import argparse
import json
import statistics
import sys
from pathlib import Path

from emunode import NodePair
from emunode import twonode as tn

SIZES = [4096, 65536, 1 << 20]
PERFTEST_PORT = 18515

# A server in the background; once its port listens, the barrier lets the client in.
WAIT_LISTEN = ("wait_listen() { p=$(printf '%04X' $1); i=0; while [ $i -lt 600 ]; do "
               "grep -q \":$p [0-9A-F:]* 0A\" /proc/net/tcp /proc/net/tcp6 2>/dev/null && return 0; "
               "sleep 0.1; i=$((i+1)); done; echo \"nothing listens on $1\"; return 1; }; ")
PERFTEST = ["ib_write_bw", "ib_read_bw", "ib_read_lat"]   # --send-lat adds ib_send_lat


ITERATIONS = None   # --iters: the same -n for every size; default by size below
DEPTH = {}          # --perftest-depth N: tool -> extra perftest arguments


def iterations(size):
    return ITERATIONS or max(20, min(1000, (16 << 20) // size))


def perftest_step(tool, size, step):
    args = f"-d rxe0 -x 0 -s {size} -n {iterations(size)} -F {DEPTH.get(tool, '')}"
    # the barrier even when the server failed: its client then fails at once instead of waiting
    server = (WAIT_LISTEN + f"{tool} {args} >/tmp/srv.log 2>&1 & "
              f"wait_listen {PERFTEST_PORT}; emunode-host barrier {step} >/dev/null; wait; tail -4 /tmp/srv.log")
    client = f"emunode-host barrier {step} >/dev/null && {tool} {args} $GDRPEER_PEER"
    return server, client


def verify_step(size, step):
    server = tn.server_command(step, "--source host --method reg_mr", copy_bar=False)
    client = tn.client_command(step, f"--source host --method reg_mr -s {size} --bench --bench-sizes {size} "
                                     f"-n {iterations(size)} --seed 7 --timeout 120", copy_bar=False)
    return server, client


def parse_perftest(tool, out):
    """{metric: value} from the client's result line, None when the run has no number."""
    for line in out.splitlines():
        f = line.split()
        if len(f) >= 5 and f[0].isdigit() and f[1].isdigit():
            if tool.endswith("_lat"):   # #bytes #iter t_min t_max t_typical t_avg ...
                vals = {"t_typical": float(f[4]), "t_avg": float(f[5])}
                # "inf": the TSC frequency came out 0 (as for BW 0.00 above)
                return vals if all(0 < v < float("inf") for v in vals.values()) else None
            bw = float(f[3])            # #bytes #iter BW_peak BW_average MsgRate
            return {"bw_average": bw} if bw > 0 else None
    return None


def parse_verify(rep):
    """{(kind, metric): value} from verify's JSON bench of its one row."""
    vals = {}
    for row in (rep or {}).get("results", []):
        bench = row.get("bench") or {}
        for p in bench.get("bw", []):
            kind = "write" if "WRITE" in p["op"] else "read"
            vals[(kind, "bw_average")] = p["bw_average_mib_s"]
        for p in bench.get("lat", []):
            vals[("read_lat", "t_typical")] = p["t_typical_us"]
            vals[("read_lat", "t_avg")] = p["t_avg_us"]
    return vals


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kernel", default="6.1")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--sizes", default=",".join(map(str, SIZES)))
    ap.add_argument("--tools", default="perftest,verify")
    ap.add_argument("--raw", help="also write every raw output to this file")
    ap.add_argument("--iters", type=int, help="-n for every measurement (default: 16 MiB / size, 20..1000)")
    ap.add_argument("--perftest-depth", type=int,
                    help="perftest's bandwidth tests with -t N (and ib_read_bw -o N): verify keeps 16 in flight")
    ap.add_argument("--send-lat", action="store_true",
                    help="also ib_send_lat (a SEND ping-pong: another definition; it hung once here)")
    args = ap.parse_args()
    global ITERATIONS
    ITERATIONS = args.iters
    if args.send_lat:
        PERFTEST.append("ib_send_lat")
    if args.perftest_depth:
        d = args.perftest_depth
        DEPTH.update({"ib_write_bw": f"-t {d}", "ib_read_bw": f"-t {d} -o {d}"})
    sizes = [int(s) for s in args.sizes.split(",")]
    tools = args.tools.split(",")
    steps = []   # (round, tool, measurement, size)
    for r in range(args.rounds):
        for tool in (tools if r % 2 == 0 else tools[::-1]):
            for size in sizes:
                if tool == "perftest":
                    steps += [(r, "perftest", t, size) for t in PERFTEST]
                else:
                    steps.append((r, "verify", "bench", size))
    a, b = [], []
    for i, (r, tool, what, size) in enumerate(steps):
        s, c = perftest_step(what, size, f"s{i}") if tool == "perftest" else verify_step(size, f"s{i}")
        a.append(s)
        b.append(c)
    pair = NodePair(args.kernel, "switch", "translated", rxe="dmabuf",
                    log=lambda m: print(m, file=sys.stderr, flush=True))
    # a step that hangs (a lost frame in a ping-pong) is killed after 180 s, not the whole run
    res = pair.run(a, b, timeout=3600, cmd_timeout=180)
    raw, table, lost = [], {}, []
    kinds = {"ib_write_bw": "write", "ib_read_bw": "read", "ib_read_lat": "read_lat", "ib_send_lat": "send_lat"}
    for i, (r, tool, what, size) in enumerate(steps):
        sout, cout = res.a.results[i], res.b.results[i]
        raw.append(f"## round {r} {tool} {what} {size}\n$ node b: {cout.command}\n{cout.output}"
                   f"[exit {cout.status}]\n$ node a (server):\n{sout.output}[exit {sout.status}]\n")
        if tool == "perftest":
            v = parse_perftest(what, cout.output)
            if v is None:
                lost.append(f"{what} {size} round {r}")
                continue
            for k, x in v.items():
                table.setdefault((kinds[what], k, size), {}).setdefault("perftest", []).append(x)
        else:
            rep = tn.report(res.b, f"s{i}", "client")
            raw.append(json.dumps(rep, indent=1) + "\n")
            v = parse_verify(rep)
            if not v:
                lost.append(f"verify {size} round {r}")
            for (kind, k), x in v.items():
                table.setdefault((kind, k, size), {}).setdefault("verify", []).append(x)
    text = "\n".join(raw)
    if args.raw:
        Path(args.raw).write_text(text)
    else:
        print(text)
    print(f"-- kernel {res.a.kernel}, {len(steps)} measurements in {res.seconds:.0f} s "
          f"(node a {res.a.seconds:.0f} s, node b {res.b.seconds:.0f} s); runs without a number: "
          f"{len(lost)} {lost}; problems a {res.a.problems()}, b {res.b.problems()}")
    print("| measurement | size | tool | n | median | min | max | verify / perftest (medians) |")
    print("| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: |")
    for (kind, metric, size), by_tool in sorted(table.items()):
        unit = "µs" if "lat" in kind else "MiB/s"
        meds = {t: statistics.median(xs) for t, xs in by_tool.items()}
        ratio = f"{meds['verify'] / meds['perftest']:.2f}" if len(meds) == 2 and meds["perftest"] else ""
        for tool, xs in sorted(by_tool.items()):
            print(f"| {kind} {metric} ({unit}) | {size} | {tool} | {len(xs)} | {meds[tool]:.2f} | "
                  f"{min(xs):.2f} | {max(xs):.2f} | {ratio if tool == 'verify' else ''} |")


if __name__ == "__main__":
    main()

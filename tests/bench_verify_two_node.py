"""Benchmark between two emulated nodes (issue 26; not a test: numbers go to docs/benchmarks.md).

  PYTHONPATH=tests python3 tests/bench_verify_two_node.py [--kernel 6.1] [--rounds 5]
        [--sizes 4096,65536,1048576] [--tools perftest,verify] [--raw FILE]

One boot of a NodePair (switch, IOMMU translated, the dma-buf rxe on each node's e1000e, the
link between them). Server on node a, client on node b, host memory on both sides:
- perftest (Debian's perftest 4.5): `ib_write_bw`, `ib_read_bw` (-s SIZE -n N, BW average of the
  client), `ib_send_lat` (-s SIZE -n N, t_typical and t_avg: half the round trip of a SEND
  ping-pong, perftest's definition);
- `gdrpeer verify --bench` between the same nodes (client `gdrpeer verify ADDR`, server
  `gdrpeer verify --server`), `--source host -m reg_mr`, the same sizes.
Each round runs every measurement once; rounds alternate which tool goes first (perftest first
in even rounds), so slow phases of the shared host hit both. Prints every raw output, then per
measurement the median, min and max over the rounds, and the ratio of medians.

perftest's BW and latency come from the TSC and its frequency, which perftest calibrates at
start by a linear fit; on a busy host under TCG the fit can fail ("Correlation coefficient r^2
< 0.9") and perftest then reports 0.00: such a run is counted as lost (shown), not as a number.
"""

import argparse
import re
import statistics
import sys
from pathlib import Path

from emunode import NodePair

SIZES = [4096, 65536, 1 << 20]
LAT_SIZES = [4096]
PERFTEST_PORT = 18515
VERIFY_PORT = 18516

# A server in the background; once its port listens, the barrier lets the client in.
WAIT_LISTEN = ("wait_listen() { p=$(printf '%04X' $1); i=0; while [ $i -lt 600 ]; do "
               "grep -q \":$p [0-9A-F:]* 0A\" /proc/net/tcp /proc/net/tcp6 2>/dev/null && return 0; "
               "sleep 0.1; i=$((i+1)); done; echo \"nothing listens on $1\"; return 1; }; ")


def iterations(size):
    return max(20, min(1000, (16 << 20) // size))


def perftest_step(tool, size, step):
    n = iterations(size) if tool != "ib_send_lat" else 200
    args = f"-d rxe0 -x 0 -s {size} -n {n} -F"
    server = (WAIT_LISTEN + f"{tool} {args} >/tmp/srv.log 2>&1 & "
              f"wait_listen {PERFTEST_PORT} && emunode-host barrier {step} >/dev/null; wait; tail -4 /tmp/srv.log")
    client = f"emunode-host barrier {step} >/dev/null && {tool} {args} $GDRPEER_PEER"
    return server, client


def verify_step(size, step, seconds):
    server = (WAIT_LISTEN + f"gdrpeer verify --server --port {VERIFY_PORT} >/tmp/vsrv.log 2>&1 & "
              f"wait_listen {VERIFY_PORT} && emunode-host barrier {step} >/dev/null; wait; tail -4 /tmp/vsrv.log")
    client = (f"emunode-host barrier {step} >/dev/null && gdrpeer verify $GDRPEER_PEER:{VERIFY_PORT} "
              f"--source host -m reg_mr --size {size} --bench --bench-sizes {size} "
              f"--bench-seconds {seconds} --seed 7 --timeout 120")
    return server, client


def parse_perftest(tool, out):
    """(value, unit) from the client's result line, None when the run has no number."""
    for line in out.splitlines():
        f = line.split()
        if len(f) >= 5 and f[0].isdigit() and f[1].isdigit():
            if tool == "ib_send_lat":   # #bytes #iter t_min t_max t_typical t_avg ...
                return {"t_typical": float(f[4]), "t_avg": float(f[5])}
            bw = float(f[3])            # #bytes #iter BW_peak BW_average MsgRate (MB/s)
            return {"bw": bw} if bw > 0 else None
    return None


def parse_verify(out):
    """{'write': MB/s, 'read': MB/s, 'lat': µs} from verify's bench lines (GB/s -> MB/s)."""
    vals = {}
    for line in out.splitlines():
        m = re.search(r"WRITE latency\D*([\d.]+)\s*(µs|us)", line)
        if m:
            vals["lat"] = float(m.group(1))
        m = re.search(r"WRITE bandwidth\D*([\d.]+)\s*GB/s", line)
        if m:
            vals["write"] = float(m.group(1)) * 1000
        m = re.search(r"READ bandwidth\D*([\d.]+)\s*GB/s", line)
        if m:
            vals["read"] = float(m.group(1)) * 1000
    return vals


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kernel", default="6.1")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--sizes", default=",".join(map(str, SIZES)))
    ap.add_argument("--tools", default="perftest,verify")
    ap.add_argument("--seconds", type=float, default=1.0, help="verify --bench-seconds")
    ap.add_argument("--raw", help="also write every raw output to this file")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    tools = args.tools.split(",")
    steps = []   # (round, tool, measurement, size)
    a, b = [], []
    for r in range(args.rounds):
        order = tools if r % 2 == 0 else tools[::-1]
        for tool in order:
            for size in sizes:
                if tool == "perftest":
                    for t in ("ib_write_bw", "ib_read_bw"):
                        steps.append((r, "perftest", t, size))
                else:
                    steps.append((r, "verify", "bench", size))
            if tool == "perftest":
                for size in LAT_SIZES:
                    steps.append((r, "perftest", "ib_send_lat", size))
    for i, (r, tool, what, size) in enumerate(steps):
        name = f"s{i}"
        s, c = perftest_step(what, size, name) if tool == "perftest" else verify_step(size, name, args.seconds)
        a.append(s)
        b.append(c)
    pair = NodePair(args.kernel, "switch", "translated", rxe="dmabuf",
                    log=lambda m: print(m, file=sys.stderr, flush=True))
    res = pair.run(a, b, timeout=3600)
    raw = []
    table = {}   # (measurement, size) -> {tool-metric: [values]}
    lost = 0
    for i, (r, tool, what, size) in enumerate(steps):
        sout, cout = res.a.results[i], res.b.results[i]
        raw.append(f"## round {r} {tool} {what} {size}\n$ node b: {cout.command}\n{cout.output}"
                   f"[exit {cout.status}]\n$ node a (server) tail:\n{sout.output}[exit {sout.status}]\n")
        if tool == "perftest":
            v = parse_perftest(what, cout.output)
            if v is None:
                lost += 1
                continue
            kind = {"ib_write_bw": "write", "ib_read_bw": "read", "ib_send_lat": "lat"}[what]
            for k, x in v.items():
                table.setdefault((kind, size), {}).setdefault(f"perftest {k}", []).append(x)
        else:
            for k, x in parse_verify(cout.output).items():
                table.setdefault((k, size), {}).setdefault("verify", []).append(x)
    text = "\n".join(raw)
    print(text)
    if args.raw:
        Path(args.raw).write_text(text)
    print(f"-- kernel {res.a.kernel}, {len(steps)} measurements in {res.seconds:.0f} s "
          f"(node a {res.a.seconds:.0f} s, node b {res.b.seconds:.0f} s); perftest runs without "
          f"a number (TSC calibration failed): {lost}; problems a {res.a.problems()}, b {res.b.problems()}")
    print("| measurement | size | tool | n | median | min | max |")
    print("| --- | ---: | --- | ---: | ---: | ---: | ---: |")
    for (kind, size), by_tool in sorted(table.items()):
        unit = "µs" if kind == "lat" else "MB/s"
        for tool, xs in sorted(by_tool.items()):
            print(f"| {kind} ({unit}) | {size} | {tool} | {len(xs)} | {statistics.median(xs):.2f} | "
                  f"{min(xs):.2f} | {max(xs):.2f} |")


if __name__ == "__main__":
    main()

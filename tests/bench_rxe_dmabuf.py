"""Benchmark on the dma-buf capable rxe, one boot (not a test: numbers go to docs/benchmarks.md).

  PYTHONPATH=tests python3 tests/bench_rxe_dmabuf.py [--kernel 6.1] [--seconds 1]

In the same boot, on rxe0: perftest's ib_write_bw / ib_read_bw / ib_send_lat (host memory,
the reference), `gdrpeer verify --bench` on host memory (ibv_reg_mr) and on gdrpeer memory
(ibv_reg_dmabuf_mr), sizes 4 KiB .. 4 MiB. Prints the raw outputs; the table is made by hand.
"""

import argparse
import sys

from emunode import Node

SIZES = [4096, 65536, 1 << 20, 4 << 20]


def perftest(tool, size, iters):
    # server and client of the same device in one node; TCP on loopback for the exchange
    return (f"{tool} -d rxe0 -x 0 -s {size} -n {iters} -F >/tmp/srv.log 2>&1 & sleep 2; "
            f"{tool} -d rxe0 -x 0 -s {size} -n {iters} -F 127.0.0.1; wait; echo server:; "
            f"tail -3 /tmp/srv.log")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kernel", default="6.1")
    ap.add_argument("--seconds", type=float, default=1.0)
    args = ap.parse_args()
    sizes = ",".join(str(s) for s in SIZES)
    cmds = ["insmod /gdrpeer/modules/gdrpeer.ko pcibar=$GDRPEER_GPU_BDF dmabuf_vmap=1 && echo loaded"]
    for s in SIZES:
        iters = max(20, min(1000, (64 << 20) // s))
        cmds.append(perftest("ib_write_bw", s, iters))
        cmds.append(perftest("ib_read_bw", s, iters))
    cmds.append(perftest("ib_send_lat", 4096, 500))
    for src, method in (("host", "reg_mr"), ("gdrpeer", "dmabuf")):
        cmds.append(f"gdrpeer verify --source {src} --method {method} --size 4M --bench --bench-sizes {sizes} "
                    f"--bench-seconds {args.seconds} --seed 7 --timeout 120")
    res = Node(args.kernel, "switch", "translated", rxe="dmabuf",
               log=lambda m: print(m, file=sys.stderr)).run(cmds, timeout=3000)
    for r in res.results:
        print(f"$ {r.command}\n{r.output.rstrip()}\n[exit {r.status}]")
    print(f"-- kernel {res.kernel}, {res.seconds:.0f} s, problems: {res.problems()}")


if __name__ == "__main__":
    main()

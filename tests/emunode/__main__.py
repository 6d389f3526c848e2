"""Command line of the emulated node.

  python3 -m emunode fetch [--kernel K]              fetch and unpack a Debian kernel
  python3 -m emunode qemu [--name acs]               build a patched QEMU once (cached), print it
  python3 -m emunode build [--kernel K]              build our modules for it
  python3 -m emunode kcheck [--kernel K]             W=1 + sparse build of them (make kernel-check)
  python3 -m emunode kselftest-headers               print the folder holding kselftest_harness.h
  python3 -m emunode run [options] -- CMD [CMD ...]  boot, run commands, print their results
  python3 -m emunode demo [--kernel K]               the main job: check + verify on the node
  python3 -m emunode demo-two-node [--kernel K]      verify between two nodes on one link
Errors are one line on stderr (exit 2); `run` exits 1 when a guest command failed.
"""

import argparse
import sys

from . import build, kernels, qemu, softroce
from . import twonode as tn
from .errors import HarnessError
from .node import Node
from .pair import NodePair
from .topology import IOMMU_MODES, TOPOLOGIES


def _log(msg):
    print(msg, file=sys.stderr, flush=True)


def _node_args(p):
    p.add_argument("--kernel", default=kernels.DEFAULT_KERNEL, help="5.10, 6.1, 6.12 or 7.2")
    p.add_argument("--topology", default="switch", help=", ".join(TOPOLOGIES))
    p.add_argument("--iommu", default="translated", help=", ".join(IOMMU_MODES))
    p.add_argument("--bar-mib", type=int, default=64, help="GPU BAR size in MiB (power of two)")
    p.add_argument("--timeout", type=int, default=600, help="seconds for the whole boot")
    p.add_argument("--qemu", default="system", help=", ".join(qemu.known_qemus()))


def _print_results(res):
    for r in res.results:
        print(f"$ {r.command}")
        sys.stdout.write(r.output if r.output.endswith("\n") or not r.output else r.output + "\n")
        if r.status != 0:
            print(f"[exit {r.status}]")
    print(f"-- kernel {res.kernel}, topology {res.topology}, iommu {res.iommu}, QEMU {res.qemu}: "
          f"{len(res.results)} commands in {res.seconds:.1f} s; logs in {res.workdir}")


DEMO_COMMANDS = [
    "uname -r",
    "lspci -tv",
    # dmabuf_vmap=1: the dma-buf rxe copies through dma_buf_vmap (docs/driver.md, "vmap contract")
    "insmod /gdrpeer/modules/gdrpeer.ko pcibar=$GDRPEER_GPU_BDF dmabuf_vmap=1 && dmesg | grep gdrpeer | tail -5",
    "gdrpeer check --role GPU=$GDRPEER_GPU_BDF --role NIC=$GDRPEER_NIC_BDF",
    "gdrpeer verify --size 1M",
]
# With the dma-buf capable rxe: one RDMA WRITE, SEND and READ through an ibv_reg_dmabuf_mr of
# gdrpeer memory, which the host then finds in (and, for the READ, took from) the BAR file.
DEMO_DMABUF_COMMANDS = ["gdrpeer_rxe_dmabuf demo"]
DEMO_END = ["rmmod gdrpeer && echo 'gdrpeer unloaded cleanly'"]
DEMO_BAR_FILL = 8 << 20  # covers where gdrpeer_rxe_dmabuf demo allocates (past 4 MiB)


def _demo(args):
    why = softroce.supported(args.kernel)
    rxe = "dmabuf" if why is None else True
    node = Node(args.kernel, args.topology, args.iommu, bar_mib=args.bar_mib, rxe=rxe, log=_log,
                qemu=args.qemu)
    cmds = DEMO_COMMANDS + (DEMO_DMABUF_COMMANDS if rxe == "dmabuf" else []) + DEMO_END
    fill = softroce.host_fill(DEMO_BAR_FILL)
    res = node.run(cmds, timeout=args.timeout, bar_init=fill if rxe == "dmabuf" else b"",
                   bar_host=softroce.HostFill(fill) if rxe == "dmabuf" else None)
    _print_results(res)
    if rxe != "dmabuf":
        print(f"-- no RDMA traffic into device memory on kernel {args.kernel}: {why}")
        return 0
    out = res.results[len(DEMO_COMMANDS)]
    checks = softroce.check_bar(out.output, res.bar_path, fill)
    print(f"-- checked from the host, in the GPU BAR backing file {res.bar_path}:")
    for _, ok, what in checks:
        print(f"   {'ok  ' if ok else 'FAIL'} {what}")
    print("-- rxe (the test bed's soft-RoCE, patched for dma-buf) moves these bytes with the CPU; "
          "a real HCA moves them with DMA, which the edu stand-in proves (make test).")
    return 0 if checks and all(ok for _, ok, _ in checks) and out.status == 0 else 1


# The two-node demo: gdrpeer verify's server on node a, its client on node b. First every
# source x method on both sides (the report as a table), then one RDMA WRITE, one SEND each way
# and one RDMA READ between gdrpeer dma-buf memory on both nodes, whose bytes the host then finds
# in the two BAR files.
DEMO2_SIZE = 64 << 10
DEMO2_G = "--source gdrpeer --method dmabuf"
DEMO2_STEPS = {"write": (11, "--op write"), "send": (13, "--op send"), "read": (17, "--op read")}


def _demo_two_node(args):
    why = softroce.supported(args.kernel)
    if why:
        print(f"emunode: error: no two-node demo on kernel {args.kernel}: {why}", file=sys.stderr)
        return 2
    size = f"-s {DEMO2_SIZE // 1024}K"
    link = "uname -nr; ip addr show eth0 | grep inet; ibv_devinfo -d rxe0 -v | grep 'GID\\['"
    unload = "rmmod gdrpeer && echo 'gdrpeer unloaded cleanly'"
    # (what the output shows, the guest command)
    a = [("the link", link), ("load gdrpeer", tn.LOAD),
         ("gdrpeer verify --server", tn.server_command("matrix", copy_bar=False, json=False))]
    b = [("the link", link), ("load gdrpeer", tn.LOAD),
         (f"gdrpeer verify [$GDRPEER_PEER_IPV6]:{tn.PORT} {size} --seed 7",
          tn.client_command("matrix", f"{size} --seed 7", peer=f"[$GDRPEER_PEER_IPV6]:{tn.PORT}",
                            copy_bar=False, json=False))]
    for name, (seed, op) in DEMO2_STEPS.items():
        a.append((f"gdrpeer verify --server {DEMO2_G} --json", tn.server_command(name, DEMO2_G)))
        cargs = f"{DEMO2_G} {op} {size} --seed {seed}"
        b.append((f"gdrpeer verify $GDRPEER_PEER {cargs} --json", tn.client_command(name, cargs)))
    a.append(("unload", unload))
    b.append(("unload", unload))
    res = NodePair(args.kernel, args.topology, args.iommu, bar_mib=args.bar_mib, rxe="dmabuf",
                   log=_log, qemu=args.qemu).run([c for _, c in a], [c for _, c in b],
                                                 timeout=args.timeout)
    for n, role, cmds in (("a", "server", a), ("b", "client", b)):
        print(f"==== node {n} ({role}), BAR file {res[n].bar_path}")
        for (label, _), r in zip(cmds, res[n].results):
            print(f"$ {label}")
            sys.stdout.write(r.output if r.output.endswith("\n") or not r.output else r.output + "\n")
        print(f"-- {len(cmds)} commands in {res[n].seconds:.1f} s; logs in {res[n].workdir}")
    print(f"-- both nodes in {res.seconds:.1f} s")
    print("-- checked from the host, in the two GPU BAR backing files:")
    checks = []
    for name, (seed, _) in DEMO2_STEPS.items():
        srv, cli = tn.report(res.a, name, "server"), tn.report(res.b, name, "client")
        soff, coff = tn.bar_offset(srv), tn.bar_offset(cli)
        if soff is None or coff is None or cli.get("exit_code") != 0:
            checks.append((False, f"{name}: the run did not pass (client exit "
                                  f"{cli and cli.get('exit_code')}), nothing to check"))
            continue
        if name == "write":
            ok, words = tn.bar_holds(res.a.bar_copy(name), soff, tn.pattern(seed, tn.SALT["write"], DEMO2_SIZE))
            checks.append((ok, f"the client's RDMA WRITE, in node a's BAR file: {words}"))
        elif name == "send":
            ok, words = tn.bar_holds(res.b.bar_copy(name), coff, tn.pattern(seed, tn.SALT["recv"], DEMO2_SIZE))
            checks.append((ok, f"the server's SEND, in node b's BAR file: {words}"))
        else:
            want = tn.pattern(seed, tn.SALT["read"], DEMO2_SIZE)
            ok1, w1 = tn.bar_holds(res.a.bar_copy(name), soff, want)
            ok2, w2 = tn.bar_holds(res.b.bar_copy(name), coff, want)
            checks.append((ok1 and ok2, f"the client's RDMA READ: node a's BAR file: {w1}; "
                                        f"node b's BAR file, where the READ put them: {w2}"))
    for ok, what in checks:
        print(f"   {'ok  ' if ok else 'FAIL'} {what}")
    print("-- the expected bytes are recomputed on the host from each step's seed (std::mt19937_64, "
          "emunode.mt64); rxe moves them with the CPU on both nodes, over the emulated link.")
    return 0 if all(ok for ok, _ in checks) else 1


def main(argv=None):
    ap = argparse.ArgumentParser(prog="emunode", description="The emulated GPU + RDMA node")
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("fetch", help="fetch a Debian kernel into build/cache")
    p.add_argument("--kernel", default=kernels.DEFAULT_KERNEL)
    p = sub.add_parser("build", help="build our kernel modules for a kernel")
    p.add_argument("--kernel", default=kernels.DEFAULT_KERNEL)
    p = sub.add_parser("kcheck", help="W=1 + sparse build of our modules for a kernel (make kernel-check)")
    p.add_argument("--kernel", default=kernels.DEFAULT_KERNEL)
    sub.add_parser("kselftest-headers", help="print the folder with the kselftest headers")
    p = sub.add_parser("qemu", help="build a patched QEMU into build/cache (once) and print it")
    p.add_argument("--name", default="acs", help=", ".join(qemu.BUILDS))
    p = sub.add_parser("kdir", help="print the headers folder of a kernel (fetching it once)")
    p.add_argument("--kernel", default=kernels.DEFAULT_KERNEL)
    p = sub.add_parser("run", help="boot the node and run commands in it")
    _node_args(p)
    p.add_argument("--no-rxe", action="store_true", help="do not create rxe0")
    p.add_argument("--rxe", choices=["stock", "dmabuf"], default="stock",
                   help="Debian's rdma_rxe, or the test bed's dma-buf capable one (emunode.softroce)")
    p.add_argument("--append", action="append", default=[], metavar="WORD",
                   help="extra kernel command-line word (repeatable)")
    p.add_argument("commands", nargs="+", metavar="CMD")
    p = sub.add_parser("demo", help="boot the switch node, load gdrpeer, run check and verify")
    _node_args(p)
    p.set_defaults(iommu="passthrough")
    p = sub.add_parser("demo-two-node", help="two nodes on one link: gdrpeer verify server and client")
    _node_args(p)
    p.set_defaults(timeout=1500)
    args = ap.parse_args(argv)
    try:
        if args.cmd == "fetch":
            k = kernels.ensure_kernel(args.kernel, log=_log)
            print(f"{k.name} {k.release} {k.vmlinuz}")
        elif args.cmd == "build":
            print(build.build_modules(args.kernel, log=_log))
        elif args.cmd == "kcheck":
            build.check_modules(args.kernel, log=_log)
        elif args.cmd == "kdir":
            print(kernels.ensure_kernel(args.kernel, log=_log).kdir)
        elif args.cmd == "qemu":
            q = qemu.ensure_qemu(args.name, log=_log)
            print(f"{q.name} {q.version} {q.binary}")
        elif args.cmd == "kselftest-headers":
            print(build.kselftest_headers(log=_log))
        elif args.cmd == "demo":
            return _demo(args)
        elif args.cmd == "demo-two-node":
            return _demo_two_node(args)
        elif args.cmd == "run":
            node = Node(args.kernel, args.topology, args.iommu, bar_mib=args.bar_mib,
                        rxe=False if args.no_rxe else "dmabuf" if args.rxe == "dmabuf" else True,
                        log=_log, qemu=args.qemu)
            res = node.run(args.commands, timeout=args.timeout, extra_cmdline=args.append)
            _print_results(res)
            return 1 if any(r.status != 0 for r in res.results) else 0
    except HarnessError as e:  # GuestError too: its first line names the problem and the logs
        print(f"emunode: error: {e.args[0]}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())

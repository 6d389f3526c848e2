"""Two emulated nodes joined by one Ethernet link (issue 26): node "a" and node "b".

Each node is a whole emulated GPU node (its own QEMU process, kernel, "GPU BAR" backing file and
soft-RoCE on its e1000e); their NICs are joined by QEMU's `-netdev dgram` backend over two UDP
sockets on 127.0.0.1 that the host opens and connects to each other before QEMU starts, one
handed to each QEMU as a file descriptor (no port is chosen, none can be taken by someone else,
and a frame can go nowhere but to the other QEMU). Inside the link the nodes have IPv6
link-local addresses (from their MACs) and private IPv4 addresses (10.26.0.1 and 10.26.0.2/30);
nothing is routed anywhere else.

    pair = NodePair(kernel="6.1", rxe="dmabuf")
    res = pair.run(a=["...server..."], b=["...client..."])   # both boot at once
    res.a.results[0].output, res.b.bar_path

The guest sees GDRPEER_NODE (a or b), GDRPEER_ADDR, GDRPEER_PEER (the other's IPv4 address),
GDRPEER_PEER_IPV6 (its link-local address, with %eth0) and GDRPEER_PEER_GID (its rxe GID 0).
`emunode-host barrier NAME` in a guest command waits until the other node has asked for the same
barrier (each name once per run): the server says it listens, the client waits for that.
"""

import dataclasses
import socket
import threading
import time

from . import kernels
from .errors import GuestError, HarnessError
from .node import Node

NODES = ("a", "b")
MACS = {"a": "52:54:00:00:00:01", "b": "52:54:00:00:00:02"}
IPV4 = {"a": "10.26.0.1", "b": "10.26.0.2"}
IPV4_PREFIX = 30  # the two addresses and nothing else


def link_local(mac):
    """The IPv6 link-local address the kernel gives a NIC with this MAC (modified EUI-64,
    RFC 4291 appendix A): rxe's GID 0 is the same 16 bytes."""
    b = [int(x, 16) for x in mac.split(":")]
    eui = [b[0] ^ 0x02, b[1], b[2], 0xFF, 0xFE, b[3], b[4], b[5]]
    groups = [f"{eui[i] << 8 | eui[i + 1]:x}" for i in range(0, 8, 2)]
    return "fe80::" + ":".join(groups)


def gid(mac):
    """rxe's GID 0 of that NIC in the form ibv_devinfo prints (fe80:0000:...:xxxx)."""
    host = link_local(mac).removeprefix("fe80::").split(":")
    return ":".join(["fe80", "0000", "0000", "0000"] + [f"{int(g, 16):04x}" for g in host])


class Rendezvous:
    """Named barriers between the nodes of a pair, served to the guests by HostControl."""

    def __init__(self, parties):
        self.parties = frozenset(parties)
        self.arrived = {}
        self.gone = set()
        self.cond = threading.Condition()

    def arrive(self, name, party, timeout):
        """The HostControl reply to `barrier NAME` from `party`: once all parties are there."""
        deadline = time.monotonic() + timeout
        with self.cond:
            self.arrived.setdefault(name, set()).add(party)
            self.cond.notify_all()
            while True:
                missing = self.parties - self.arrived[name]
                if not missing:
                    return f"ok barrier {name}: both nodes"
                if missing & self.gone:
                    return f"error barrier {name}: node {', '.join(sorted(missing))} has ended"
                left = deadline - time.monotonic()
                if left <= 0:
                    return (f"error barrier {name}: node {', '.join(sorted(missing))} did not "
                            f"come within {timeout} s")
                self.cond.wait(left)

    def leave(self, party):
        """`party`'s QEMU has exited: barriers waiting for it fail at once."""
        with self.cond:
            self.gone.add(party)
            self.cond.notify_all()


@dataclasses.dataclass
class LinkEnd:
    """One node's side of the link: what Node.run needs to attach its NIC to it."""
    name: str
    peer: str
    sock: socket.socket
    rendezvous: Rendezvous

    @property
    def mac(self):
        return MACS[self.name]

    def netdev(self):
        return f"dgram,id=n0,local.type=fd,local.str={self.sock.fileno()}"

    def env(self):
        return {"GDRPEER_NODE": self.name, "GDRPEER_PEER_NODE": self.peer,
                "GDRPEER_ADDR": f"{IPV4[self.name]}/{IPV4_PREFIX}", "GDRPEER_PEER": IPV4[self.peer],
                "GDRPEER_PEER_IPV6": f"{link_local(MACS[self.peer])}%eth0",
                "GDRPEER_PEER_GID": gid(MACS[self.peer])}


# A UDP socket drops what arrives while its receive buffer is full, and QEMU stops reading while
# the guest's receive ring is full: with the default 208 KiB a burst of 16 RDMA WRITEs of 64 KiB
# (1,024 frames) loses frames, which rxe must then retransmit. 8 MiB holds such bursts.
LINK_BUFFER = 8 << 20


def _big_buffers(s):
    for force, plain in ((getattr(socket, "SO_RCVBUFFORCE", None), socket.SO_RCVBUF),
                         (getattr(socket, "SO_SNDBUFFORCE", None), socket.SO_SNDBUF)):
        try:
            s.setsockopt(socket.SOL_SOCKET, force if force is not None else plain, LINK_BUFFER)
        except (OSError, TypeError):   # not root: as much as net.core.[rw]mem_max allows
            s.setsockopt(socket.SOL_SOCKET, plain, LINK_BUFFER)


class Link:
    """Two UDP sockets on 127.0.0.1, each connected to the other: one Ethernet cable."""

    def __init__(self):
        self.socks = {}
        for n in NODES:
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            _big_buffers(s)
            s.bind(("127.0.0.1", 0))
            self.socks[n] = s
        self.socks["a"].connect(self.socks["b"].getsockname())
        self.socks["b"].connect(self.socks["a"].getsockname())
        self.rendezvous = Rendezvous(NODES)

    def end(self, name):
        peer = NODES[1 - NODES.index(name)]
        return LinkEnd(name, peer, self.socks[name], self.rendezvous)

    def close(self):
        for s in self.socks.values():
            s.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


@dataclasses.dataclass
class PairResult:
    a: object            # RunResult of node a
    b: object            # RunResult of node b
    seconds: float       # wall time of the two boots together

    def __getitem__(self, name):
        return {"a": self.a, "b": self.b}[name]


class PairError(GuestError):
    """A node of the pair did not finish (GuestError); `results` has what each node gave:
    its RunResult, or the exception it raised."""

    def __init__(self, message, log, results):
        super().__init__(message, log)
        self.results = results


class NodePair:
    """Two nodes of the same kind (kernel, topology, IOMMU, BAR size, rxe) on one link."""

    def __init__(self, kernel=kernels.DEFAULT_KERNEL, topology="switch", iommu="translated",
                 bar_mib=64, rxe="dmabuf", log=print, qemu=None):
        if not rxe:
            raise HarnessError("a pair of nodes without rxe has nothing to do on its link")
        self.log = log
        self.nodes = {n: Node(kernel, topology, iommu, bar_mib=bar_mib, rxe=rxe, qemu=qemu,
                              log=lambda m, n=n: log(f"node {n}: {m}")) for n in NODES}

    def run(self, a, b, timeout=600, cmd_timeout=None, allow_problems=False, files=None,
            bar_init=b"", bar_host=None):
        """Boot both nodes at once; node a runs the commands `a`, node b those of `b` (each
        list in order, as Node.run). The other arguments are Node.run's and apply to both
        (bar_host is called once per node, each with its own BAR file). Returns PairResult;
        raises PairError when either node fails, after both have ended."""
        commands = {"a": list(a), "b": list(b)}
        results = {}
        start = time.monotonic()
        with Link() as link:
            def boot(n):
                try:
                    results[n] = self.nodes[n].run(
                        commands[n], timeout=timeout, cmd_timeout=cmd_timeout,
                        allow_problems=allow_problems, files=files, bar_init=bar_init,
                        bar_host=bar_host, link=link.end(n))
                except Exception as e:  # noqa: BLE001 - handed to the caller below
                    results[n] = e
                finally:
                    link.rendezvous.leave(n)
            threads = [threading.Thread(target=boot, args=(n,), daemon=True) for n in NODES]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        seconds = time.monotonic() - start
        failed = {n: r for n, r in results.items() if isinstance(r, BaseException)}
        if failed:
            n, e = next(iter(sorted(failed.items())))
            if not isinstance(e, HarnessError):
                raise e
            others = "; ".join(f"node {m}: {str(r).splitlines()[0]}" for m, r in sorted(failed.items())
                               if m != n)
            raise PairError(f"node {n}: {e.args[0]}" + (f" (and {others})" if others else ""),
                            getattr(e, "log", ""), results)
        return PairResult(results["a"], results["b"], seconds)

"""Running `gdrpeer verify --server` / `gdrpeer verify HOST` on a NodePair, and what the host
checks in the two BAR files afterwards (tests/test_verify_two_node.py, `make demo-two-node`).

The server runs on node a, the client on node b. server_command()/client_command() make one
guest command each for the same step NAME: the server starts in the background, waits until it
says it listens, takes the barrier NAME and waits for its end; the client takes the barrier and
runs. Each side's JSON report goes to /out/NAME-server.json and /out/NAME-client.json
(RunResult.files), its exit code and stderr to the command's output, and (bar_copy) the node's
BAR file as that step left it to RunResult.bar_copy(NAME).

The data: both sides make their bytes with verify's pattern (docs/verify.md, "Two nodes"),
std::mt19937_64 seeded with seed * 0x9e3779b97f4a7c15 + salt, its 64-bit outputs stored
little-endian; salts WRITE 1, READ 2, SEND client->server 3, SEND server->client 4 (read from
userspace/verify/twonode.cpp). The host recomputes them with its own engine (emunode.mt64,
from the C++ standard) and finds them, or not, in the BAR files.
"""

import json

from .mt64 import MASK, MT19937_64

SALT = {"write": 1, "read": 2, "send": 3, "recv": 4}
PORT = 18516
GAUGES = "allocations exports attachments active_maps vmaps"
GAUGE_DIR = "/sys/class/gdrpeer/gdrpeer/devices/0"
# gdrpeer on the node's "GPU" (dmabuf_vmap=1: the dma-buf rxe copies through dma_buf_vmap), and
# 16 huge pages so verify's hugepage source exists too.
LOAD = ("echo 16 > /proc/sys/vm/nr_hugepages && "
        "insmod /gdrpeer/modules/gdrpeer.ko pcibar=$GDRPEER_GPU_BDF dmabuf_vmap=1 && echo loaded")


def pattern(seed, salt, n):
    """fill_pattern(p, n, seed, salt) of gdrpeer verify, recomputed independently."""
    g = MT19937_64((seed * 0x9E3779B97F4A7C15 + salt) & MASK)
    out = bytearray()
    while len(out) + 8 <= n:
        out += g().to_bytes(8, "little")
    while len(out) < n:
        out.append(g() & 0xFF)
    return bytes(out)


def gauges(path=GAUGE_DIR, names=GAUGES):
    return (f"if [ -d {path} ]; then for g in {names}; do echo gauge $g=$(cat {path}/$g); done; "
            "else echo gauges: device gone; fi")


def server_command(name, args="", during="", copy_bar=True, json=True):
    """Node a's command for step `name`: `during` runs after the barrier, while the client
    runs (it may use $pid, the server's process id). json=False: the report as a table in
    the command's output instead."""
    to = f"--json >/out/{name}-server.json" if json else f">/tmp/{name}-server.out"
    return (f"gdrpeer verify --server --port {PORT} {args} {to} "
            f"2>/tmp/{name}-server.err & pid=$!; i=0; "
            f"while [ $i -lt 600 ] && ! grep -q 'listening on' /tmp/{name}-server.err 2>/dev/null; do "
            "sleep 0.1; i=$((i+1)); done; "
            f"emunode-host barrier {name} >/dev/null || echo 'barrier failed'; {during}"
            f"wait $pid; echo \"server exit $?\"; cat /tmp/{name}-server.err"
            + ("" if json else f"; cat /tmp/{name}-server.out")
            + (f"; emunode-host bar_copy {name} >/dev/null" if copy_bar else ""))


def client_command(name, args, peer="$GDRPEER_PEER", copy_bar=True, json=True):
    """Node b's command for step `name`: waits for the server, runs the client, reports
    `client exit N` and `client seconds S`."""
    to = f"--json >/out/{name}-client.json" if json else f">/tmp/{name}-client.out"
    return (f"emunode-host barrier {name} >/dev/null || echo 'barrier failed'; s=$(date +%s); "
            f"gdrpeer verify {peer} {args} {to} 2>/tmp/{name}-client.err; "
            "rc=$?; echo \"client exit $rc\"; echo \"client seconds $(( $(date +%s) - s ))\"; "
            f"cat /tmp/{name}-client.err"
            + ("" if json else f"; cat /tmp/{name}-client.out")
            + (f"; emunode-host bar_copy {name} >/dev/null" if copy_bar else ""))


def report(res, name, side):
    """The JSON report of `side` ("server" or "client") of step `name`, or None."""
    data = res.files.get(f"{name}-{side}.json", b"")
    try:
        return json.loads(data)
    except ValueError:
        return None


def exit_code(output, side):
    for line in output.splitlines():
        if line.startswith(f"{side} exit "):
            return int(line.split()[2])
    return None


def bar_offset(rep, source="gdrpeer"):
    """BAR offset of this side's `source` memory, from its report's facts (None if absent)."""
    for s in (rep or {}).get("local", {}).get("sources", []):
        if s.get("name") == source and "bar offset" in s.get("facts", {}):
            return int(s["facts"]["bar offset"], 16)
    return None


def bar_holds(path, offset, want):
    """(ok, words) whether the BAR file `path` holds `want` at `offset`."""
    with open(path, "rb") as f:
        f.seek(offset)
        got = f.read(len(want))
    if got == want:
        return True, f"{len(want)} bytes at BAR offset {offset:#x} are the expected ones"
    first = next((i for i in range(len(want)) if i >= len(got) or got[i] != want[i]), 0)
    bad = sum(1 for a, b in zip(got, want) if a != b) + len(want) - len(got)
    return False, (f"{bad} of {len(want)} bytes at BAR offset {offset:#x} differ, first at +{first:#x} "
                   f"(want {want[first]:#04x}, got {got[first] if first < len(got) else None})")

"""`gdrpeer verify` between two emulated nodes (issue 26): server on node a, client on node b,
joined by one emulated Ethernet link (emunode.NodePair), each with its own "GPU BAR" backing file
and the test bed's dma-buf soft-RoCE. One boot of the pair on VM_KERNEL (6.1 in `make test`)
runs every step below in turn; the host then checks what each side reports *and* what landed in
the two BAR files (copied after each step with `emunode-host bar_copy`), with the data pattern
recomputed on the host from the seed (emunode.mt64, from the C++ standard, not from gdrpeer).

- matrix: every memory source x registration method on both sides, all operations, over the
  IPv6 link-local address; both sides report the same rows, gdrpeer dma-buf <-> gdrpeer dma-buf
  and host <-> host pass, nothing fails; the peer's GID is the one its MAC gives;
- write / send / read (gdrpeer dma-buf on both sides): the client's RDMA WRITE is in the server's
  BAR file at the server's gdrpeer offset, the server's SEND is in the client's BAR file, the
  client's RDMA READ brought into its BAR file exactly what is in the server's BAR file;
- version: a server claiming protocol 2 (`--wire-version`, test-only), and a fake server (busybox
  nc) answering a frame built from docs/verify.md's wire format with version 2: exit 76 with the
  reason; the client's own first frame starts with the documented header;
- gid: a wrong GID index (-x 7): every row unsupported with the reason, exit 1, on both sides;
- kill: the server SIGKILLed while the client's WRITE benchmark runs: the client reports it (69)
  within its timeout, no hang, every gdrpeer gauge 0 on both nodes;
- revoke: the server's gdrpeer memory revoked (PCI unbind of gdrpeer) while the client's WRITE
  loop runs into it: a completion error on the client (exit 2), and the bytes the host wrote into
  that range right after the revoke are still there at the end (no later WRITE landed);
- problems() == [] on both nodes.
"""

import ipaddress
import re

import pytest

from conftest import vm_kernel
from emunode import NodePair, softroce
from emunode import twonode as tn
from emunode.pair import IPV4, MACS, link_local

SIZE = 64 << 10
RX = "/sys/class/infiniband/rxe0/ports/1/hw_counters/rcvd_pkts"
# The client's benchmark loop is running once this node has received 200 more packets than at
# the barrier: the checked WRITE of one 64 KiB row (--op write) is 64 packets of 1 KiB.
LOOP_PACKETS = 200
WAIT_LOOP = (f"b0=$(cat {RX}); i=0; while [ $i -lt 900 ] && kill -0 $pid 2>/dev/null && "
             f"[ $(( $(cat {RX}) - b0 )) -lt {LOOP_PACKETS} ]; do sleep 0.2; i=$((i+1)); done; "
             f"n=$(( $(cat {RX}) - b0 )); if [ $n -ge {LOOP_PACKETS} ] && kill -0 $pid 2>/dev/null; then "
             "echo \"loop running: $n packets received, server alive\"; "
             "else echo \"no loop: $n packets received, server $(kill -0 $pid 2>/dev/null && echo alive || echo gone)\"; fi; ")
REVOKE_MARK = 1 << 20   # the host marks the first MiB of the server's BAR after the revoke

# Fake server: a HELLO frame of protocol version 2 built from the wire format in docs/verify.md
# (u32 magic "GDRV", u16 version, u16 type 1 HELLO, u32 payload length, u32 0; payload: the
# gdrpeer version as u32 length + bytes).
FAKE_HELLO_V2 = r"GDRV\002\000\001\000\011\000\000\000\000\000\000\000\005\000\000\0009.9.9"
FAKE_SERVER = (f"printf '{FAKE_HELLO_V2}' >/tmp/hello2; nc -l -p {tn.PORT} </tmp/hello2 >/tmp/fake.in & "
               f"p=$(printf '%04X' {tn.PORT}); i=0; while [ $i -lt 300 ] && "
               "! grep -q \":$p [0-9A-F:]* 0A\" /proc/net/tcp; do sleep 0.1; i=$((i+1)); done; "
               "emunode-host barrier fake >/dev/null; wait; echo \"client sent:$(od -An -tx1 -N8 /tmp/fake.in)\"")

G = "--source gdrpeer --method dmabuf"
STEPS = {
    # name: (server args, what the server side does while the client runs, client args, peer)
    "matrix": ("", "", f"-s 64K --seed 7", f"[$GDRPEER_PEER_IPV6]:{tn.PORT}"),
    "write": (G, "", f"{G} --op write -s 64K --seed 11", None),
    "send": (G, "", f"{G} --op send -s 64K --seed 13", None),
    "read": (G, "", f"{G} --op read -s 64K --seed 17", None),
    "version": ("--source host --method reg_mr --wire-version 2", "",
                "--source host --method reg_mr -s 4K", None),
    "gid": ("--source host --method reg_mr", "", "-x 7 --source host --method reg_mr -s 4K", None),
    "kill": (G, WAIT_LOOP + "kill -9 $pid; ",
             f"{G} --op write --bench -D 40 --bench-sizes 64K -s 64K --timeout 5", None),
    "revoke": (G, WAIT_LOOP + "kill -0 $pid && echo 'server alive at the revoke'; "
               "echo $GDRPEER_GPU_BDF > /sys/bus/pci/drivers/gdrpeer/unbind && "
               f"echo unbound; emunode-host bar_fill 0 {REVOKE_MARK:#x}; ",
               f"{G} --op write --bench -D 40 --bench-sizes 64K -s 64K", None),
}


def commands():
    a, b = {"load": tn.LOAD}, {"load": tn.LOAD}
    for name, (sargs, during, cargs, peer) in STEPS.items():
        if name == "version":
            a["fake"], b["fake"] = FAKE_SERVER, tn.client_command(
                "fake", "--source host --method reg_mr -s 4K --timeout 5", copy_bar=False)
        a[name] = tn.server_command(name, sargs, during)
        b[name] = tn.client_command(name, cargs, **({"peer": peer} if peer else {}))
        if name in ("kill", "revoke"):
            a[name] += "; " + tn.gauges()
            b[name] += "; " + tn.gauges()
    # for the record (no assertion): frames the link or the NIC dropped, rxe's retransmissions
    stats = ("cd /sys/class/net/eth0/statistics && grep . * | tr '\\n' ' '; echo; "
             "cd /sys/class/infiniband/rxe0/ports/1/hw_counters && grep . * | tr '\\n' ' '")
    a["stats"], b["stats"] = stats, stats
    return a, b


@pytest.fixture(scope="module")
def pair(gdrpeer_ko):
    why = softroce.supported(vm_kernel())
    if why:
        pytest.skip(f"kernel {vm_kernel()}: {why}")
    a, b = commands()
    res = NodePair(vm_kernel(), "switch", "translated", rxe="dmabuf").run(
        list(a.values()), list(b.values()), timeout=2400)
    out = {"a": dict(zip(a, res.a.results)), "b": dict(zip(b, res.b.results))}
    return res, out


def reports(pair, name):
    res, _ = pair
    return tn.report(res.a, name, "server"), tn.report(res.b, name, "client")


def exits(pair, name):
    _, out = pair
    return tn.exit_code(out["a"][name].output, "server"), tn.exit_code(out["b"][name].output, "client")


def both_outputs(pair, name):
    _, out = pair
    return f"--- node a (server)\n{out['a'][name].output}\n--- node b (client)\n{out['b'][name].output}"


def test_loaded_on_both_nodes(pair):
    _, out = pair
    assert out["a"]["load"].output.strip().endswith("loaded"), out["a"]["load"].output
    assert out["b"]["load"].output.strip().endswith("loaded"), out["b"]["load"].output


def test_matrix_every_source_and_method_on_both_sides(pair):
    srv, cli = reports(pair, "matrix")
    assert srv and cli, both_outputs(pair, "matrix")
    assert cli["mode"] == "two-node" and cli["role"] == "client" and srv["role"] == "server"
    assert cli["results"] == srv["results"], "the two sides report different rows"
    rows = cli["results"]
    # every source x method either side has: the gdrpeer and host sources on both nodes
    combos = {(r["client_source"], r["client_method"], r["server_source"], r["server_method"]) for r in rows}
    sources = {s["name"] for s in cli["local"]["sources"] if s["state"] == "ready"}
    assert {"host", "hugepage", "gdrpeer"} <= sources, cli["local"]["sources"]
    methods = {r["client_method"] for r in rows}
    assert len(methods) == 2, methods
    want = {(cs, cm, ss, sm) for cs in sources for cm in methods for ss in sources for sm in methods}
    assert want <= combos, sorted(want - combos)
    assert not [r for r in rows if r["result"] == "fail"], [r for r in rows if r["result"] == "fail"]
    passed = {c for c in combos for r in rows
              if r["result"] == "pass" and c == (r["client_source"], r["client_method"],
                                                 r["server_source"], r["server_method"])}
    dmabuf = next(m for m in methods if "dmabuf" in m)
    regmr = next(m for m in methods if "dmabuf" not in m)
    assert ("gdrpeer", dmabuf, "gdrpeer", dmabuf) in passed, rows
    assert ("host", regmr, "host", regmr) in passed, rows
    for r in rows:
        if r["result"] == "pass":
            ops = {t["op"] for t in r["transfers"]}
            assert {"RDMA WRITE", "RDMA READ", "SEND client->server", "SEND server->client"} <= ops, r
            assert all(t["ok"] for t in r["transfers"] if not t.get("unsupported")), r
        else:
            assert r["reason"], r   # unsupported says why
    assert exits(pair, "matrix") == (1, 1) or exits(pair, "matrix") == (0, 0), both_outputs(pair, "matrix")


def test_matrix_peer_gid_is_the_link_partner(pair):
    """Each side's peer GID is one of the other node's: from its MAC (link-local) or from its
    private IPv4 address (IPv4-mapped), as the harness set them up."""
    srv, cli = reports(pair, "matrix")
    for rep, other in ((cli, "a"), (srv, "b")):
        partner = {ipaddress.ip_address(link_local(MACS[other])),
                   ipaddress.ip_address("::ffff:" + IPV4[other])}
        assert ipaddress.ip_address(rep["peer"]["gid"]) in partner, (rep["peer"], partner)
    assert cli["peer_address"].startswith(f"[{link_local(MACS['a'])}%eth0]"), cli["peer_address"]


def host_check(pair, name, node, rep, salt_name, seed):
    res, _ = pair
    off = tn.bar_offset(rep)
    assert off is not None, f"no gdrpeer bar offset in {name}'s report: {rep and rep['local']['sources']}"
    ok, words = tn.bar_holds(res[node].bar_copy(name), off, tn.pattern(seed, tn.SALT[salt_name], SIZE))
    assert ok, f"node {node}, step {name}: {words}"
    return off


def test_write_lands_in_the_servers_bar_file(pair):
    srv, cli = reports(pair, "write")
    assert exits(pair, "write") == (0, 0), both_outputs(pair, "write")
    assert [r["result"] for r in cli["results"]] == ["pass"], cli["results"]
    host_check(pair, "write", "a", srv, "write", 11)


def test_servers_send_lands_in_the_clients_bar_file(pair):
    srv, cli = reports(pair, "send")
    assert exits(pair, "send") == (0, 0), both_outputs(pair, "send")
    host_check(pair, "send", "b", cli, "recv", 13)


def test_read_returns_what_is_in_the_servers_bar_file(pair):
    res, _ = pair
    srv, cli = reports(pair, "read")
    assert exits(pair, "read") == (0, 0), both_outputs(pair, "read")
    soff = host_check(pair, "read", "a", srv, "read", 17)
    coff = host_check(pair, "read", "b", cli, "read", 17)
    with open(res.a.bar_copy("read"), "rb") as f:
        f.seek(soff)
        there = f.read(SIZE)
    with open(res.b.bar_copy("read"), "rb") as f:
        f.seek(coff)
        here = f.read(SIZE)
    assert here == there


def test_version_mismatch_both_sides_say_so(pair):
    srv, cli = reports(pair, "version")
    assert exits(pair, "version") == (76, 76), both_outputs(pair, "version")
    for rep in (srv, cli):
        # "... the client speaks gdrpeer verify protocol 1 (gdrpeer 0.1.0), this server speaks 2 ..."
        assert rep["error"].startswith("protocol version mismatch: "), rep["error"]
        assert re.search(r"speaks (gdrpeer verify protocol )?1\b", rep["error"]), rep["error"]
        assert re.search(r"speaks (gdrpeer verify protocol )?2\b", rep["error"]), rep["error"]


def test_version_mismatch_against_a_fake_server(pair):
    _, out = pair
    cli = tn.report(pair[0].b, "fake", "client")
    assert tn.exit_code(out["b"]["fake"].output, "client") == 76, both_outputs(pair, "fake")
    assert "protocol 2" in cli["error"] and "9.9.9" in cli["error"], cli["error"]
    # the client's own HELLO: magic "GDRV", version 1, type 1 (docs/verify.md)
    assert "client sent: 47 44 52 56 01 00 01 00" in out["a"]["fake"].output, out["a"]["fake"].output


def test_wrong_gid_index_unsupported_on_both_sides(pair):
    srv, cli = reports(pair, "gid")
    assert exits(pair, "gid") == (1, 1), both_outputs(pair, "gid")
    for rep in (srv, cli):
        assert rep["results"] and all(r["result"] == "unsupported" for r in rep["results"]), rep["results"]
        assert all("no GID at index 7" in r["reason"] for r in rep["results"]), rep["results"]


def gauge_values(output):
    return dict(re.findall(r"^gauge (\w+)=(\d+)$", output, re.M))


def test_server_killed_client_reports_it_in_time(pair):
    _, out = pair
    a, b = out["a"]["kill"].output, out["b"]["kill"].output
    assert re.search(r"^loop running: \d+ packets received, server alive$", a, re.M), a
    assert "server exit 137" in a, a
    assert tn.exit_code(b, "client") == 69, b
    secs = int(re.search(r"^client seconds (\d+)$", b, re.M).group(1))
    # the bench alone would run 3 x 40 s; the client must notice within 2 x --timeout + 2 s of
    # the kill (docs/verify.md), plus the time before the kill
    assert secs < 100, b
    cli = tn.report(pair[0].b, "kill", "client")
    assert re.search(r"went away|stopped answering|closed", cli["error"]), cli["error"]
    for node, text in (("a", a), ("b", b)):
        g = gauge_values(text)
        assert g and all(v == "0" for v in g.values()), f"node {node}: {g}\n{text}"


def test_revoke_mid_write_loop_error_and_no_later_byte(pair):
    res, out = pair
    a, b = out["a"]["revoke"].output, out["b"]["revoke"].output
    assert re.search(r"^loop running: \d+ packets received, server alive$", a, re.M), a
    assert "server alive at the revoke" in a and "unbound" in a, a
    assert tn.exit_code(b, "client") == 2, b
    cli = tn.report(res.b, "revoke", "client")
    row = cli["results"][0]
    # rxe's NAK for a WRITE into an MR whose exporter revoked it (docs/testbed.md)
    assert row["result"] == "fail" and "RDMA WRITE (bench) completed with status \"remote access error\"" \
        in row["reason"], row
    srv = tn.report(res.a, "revoke", "server")
    off = tn.bar_offset(srv)
    assert off is not None and off + SIZE <= REVOKE_MARK, srv["local"]["sources"]
    ok, words = tn.bar_holds(res.a.bar_copy("revoke"), off, softroce.host_fill_range(off, SIZE))
    assert ok, f"a WRITE landed after the revoke: {words}"


def test_logs_clean_on_both_nodes(pair):
    res, _ = pair
    assert res.a.problems() == [] and res.b.problems() == []

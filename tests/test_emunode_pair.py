"""The two-node test bed's host side, without booting (emunode.pair, issue 26): the link is two
connected UDP sockets on 127.0.0.1 that carry frames between the two QEMUs and nothing else, the
barrier answers once both nodes asked (an error when one has ended), and each node's QEMU gets
its own MAC and its end of the link. The booted pair is in test_verify_two_node.py."""

import ipaddress
import socket
import threading

from emunode import pair, topology


def test_link_carries_frames_between_the_two_ends_only():
    with pair.Link() as link:
        a, b = link.socks["a"], link.socks["b"]
        assert a.getsockname()[0] == b.getsockname()[0] == "127.0.0.1"
        a.send(b"frame a->b")
        b.settimeout(2)
        assert b.recv(100) == b"frame a->b"
        b.send(b"frame b->a")
        a.settimeout(2)
        assert a.recv(100) == b"frame b->a"
        # a third process on the loopback cannot put a frame on the link
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as stranger:
            stranger.sendto(b"intruder", b.getsockname())
            a.send(b"after")
            assert b.recv(100) == b"after"


def test_each_end_has_its_own_mac_fd_and_peer_addresses():
    with pair.Link() as link:
        ea, eb = link.end("a"), link.end("b")
        assert ea.mac != eb.mac
        assert ea.netdev() == f"dgram,id=n0,local.type=fd,local.str={link.socks['a'].fileno()}"
        env = eb.env()
        assert env["GDRPEER_PEER"] == "10.26.0.1" and env["GDRPEER_ADDR"] == "10.26.0.2/30"
        # both addresses private and on one /30, nothing else on it
        net = ipaddress.ip_interface(env["GDRPEER_ADDR"]).network
        assert net.is_private and net.num_addresses == 4
        assert ipaddress.ip_address(env["GDRPEER_PEER"]) in net
        assert env["GDRPEER_PEER_IPV6"] == "fe80::5054:ff:fe00:1%eth0"


def test_link_local_is_modified_eui64():
    # RFC 4291 appendix A: invert the universal/local bit of the first byte, insert ff:fe
    assert pair.link_local("52:54:00:12:34:56") == "fe80::5054:ff:fe12:3456"
    assert pair.link_local("00:1b:21:aa:bb:cc") == "fe80::21b:21ff:feaa:bbcc"
    assert ipaddress.ip_address(pair.link_local("52:54:00:00:00:02")).is_link_local
    assert pair.gid("52:54:00:00:00:02") == "fe80:0000:0000:0000:5054:00ff:fe00:0002"


def test_qemu_args_put_the_nic_on_the_link():
    args, _ = topology.qemu_args("switch", "off", "/tmp/bar", 64,
                                 netdev="dgram,id=n0,local.type=fd,local.str=7",
                                 mac="52:54:00:00:00:02")
    assert args[args.index("-netdev") + 1] == "dgram,id=n0,local.type=fd,local.str=7"
    assert any(a.startswith("e1000e,netdev=n0,") and a.endswith("mac=52:54:00:00:00:02") for a in args)
    alone, _ = topology.qemu_args("rootports", "off", "/tmp/bar", 64)
    assert alone[alone.index("-netdev") + 1] == "hubport,id=n0,hubid=0"
    assert any(a.endswith("mac=52:54:00:00:00:01") for a in alone)


def test_barrier_waits_for_both_nodes():
    r = pair.Rendezvous(pair.NODES)
    replies = {}
    t = threading.Thread(target=lambda: replies.setdefault("a", r.arrive("ready", "a", 10)))
    t.start()
    t.join(0.3)
    assert t.is_alive(), "the barrier answered before node b came"
    replies["b"] = r.arrive("ready", "b", 10)
    t.join(5)
    assert replies == {"a": "ok barrier ready: both nodes", "b": "ok barrier ready: both nodes"}


def test_barrier_fails_when_the_other_node_ended_or_never_comes():
    r = pair.Rendezvous(pair.NODES)
    r.leave("a")
    assert r.arrive("x", "b", 10) == "error barrier x: node a has ended"
    r2 = pair.Rendezvous(pair.NODES)
    assert r2.arrive("y", "a", 0.2) == "error barrier y: node b did not come within 0.2 s"


def test_mt19937_64_is_the_standard_engine():
    # [rand.predef]: the 10000th consecutive invocation of a default-constructed mt19937_64
    # produces 9981545732273789042
    from emunode.mt64 import MT19937_64
    g = MT19937_64()
    for _ in range(9999):
        g()
    assert g() == 9981545732273789042


def test_bar_fill_writes_the_hosts_bytes_into_the_range_only(tmp_path):
    from emunode import softroce
    from emunode.hostctl import HostControl
    bar = tmp_path / "bar"
    bar.write_bytes(b"\x5a" * 8192)
    host = HostControl(None, None, {}, print, bar_path=bar)
    assert host._serve("bar_fill 0x1000 0x400").startswith("ok bar_fill 0x1000 0x400")
    data = bar.read_bytes()
    assert data[0x1000:0x1400] == softroce.host_fill(0x1400)[0x1000:]
    assert data[:0x1000] == b"\x5a" * 0x1000 and data[0x1400:] == b"\x5a" * (8192 - 0x1400)
    assert host._serve("bar_fill 0x1f00 0x200").startswith("error")   # past the end
    assert host._serve("bar_fill 0x10 0x21").startswith("error")      # not 32-byte aligned


def test_bar_copy_keeps_the_bar_as_it_was(tmp_path):
    from emunode.hostctl import HostControl
    bar = tmp_path / "gpu-bar.bin"
    bar.write_bytes(b"first")
    host = HostControl(None, None, {}, print, bar_path=bar)
    assert host._serve("bar_copy step1") == "ok bar_copy step1: bar-step1.bin"
    bar.write_bytes(b"second")
    assert (tmp_path / "bar-step1.bin").read_bytes() == b"first"
    assert host._serve("bar_copy ../x").startswith("error")

"""`gdrpeer verify` on this machine (no VM): bad input, `--json`, `--help`, and the
"nothing to verify" exit code where the machine has no RDMA device."""

import json
import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
CANDIDATES = [REPO / "build" / "bin" / "gdrpeer", REPO / "build" / "userspace" / "cli" / "gdrpeer"]


@pytest.fixture(scope="module")
def gdrpeer():
    for c in CANDIDATES:
        if c.exists():
            return c
    pytest.fail(f"no gdrpeer binary at {' or '.join(map(str, CANDIDATES))}: run 'make userspace'")


def verify(binary, *args):
    env = dict(os.environ, LC_ALL="C")
    return subprocess.run([str(binary), "verify", *args], capture_output=True, text=True,
                          env=env, timeout=120)


def has_rdma_device():
    p = Path("/sys/class/infiniband")
    return p.is_dir() and any(p.iterdir())


@pytest.mark.parametrize("args,message", [
    (["--size", "0"], "--size: must be greater than 0"),
    (["--size", "3X"], "--size: '3X' has an unknown unit 'X'"),
    (["--size", ""], "--size: '' is empty"),
    (["--size", "2G"], "is more than one transfer may be"),
    (["--size", "99999999999999999999"], "is too large"),
    (["--source", "gpu"], "--source: unknown memory source 'gpu'"),
    (["--method", "mmap"], "--method: unknown method 'mmap'"),
    (["--bench", "--size", "64K", "--bench-sizes", "4K,1M"], "must be between 1 and --size"),
    (["-a", "--bench-sizes", "4K"], "--all-sizes and --bench-sizes both name the sizes"),
    (["-s", "host"], "--size: 'host' is not a size"),
    (["--timeout", "0"], "--timeout: must be greater than 0"),
    (["--device", "nosuchdev0"], "unknown RDMA device 'nosuchdev0'"),
])
def test_bad_input(gdrpeer, args, message):
    r = verify(gdrpeer, *args)
    assert r.returncode == 64, (r.stdout, r.stderr)
    assert message in r.stderr
    assert r.stdout == ""  # no half report


def test_unknown_option_is_a_usage_error(gdrpeer):
    r = verify(gdrpeer, "--no-such-option")
    assert r.returncode == 64


def test_help_documents_exit_codes(gdrpeer):
    r = verify(gdrpeer, "--help")
    assert r.returncode == 0
    assert "3 nothing to verify" in r.stdout and "64 bad input" in r.stdout


def test_nothing_to_verify_without_rdma_device(gdrpeer):
    if has_rdma_device():
        pytest.skip("this machine has an RDMA device; the emulated-node tests cover that case")
    r = verify(gdrpeer, "--json", "--size", "64K", "--seed", "3",
               "--gdrpeer-path", "/nonexistent/gdrpeer", "--libcuda", "libcuda-missing.so.1")
    assert r.returncode == 3, r.stderr
    rep = json.loads(r.stdout)
    assert rep["exit_code"] == 3 and rep["exit_meaning"] == "nothing to verify"
    assert rep["rdma"]["devices"] == [] and rep["results"] == []
    assert rep["seed"] == 3 and rep["size"] == 65536
    sources = {s["name"]: s for s in rep["sources"]}
    # Sources are still prepared and reported, so a GPU node without a NIC shows its memory.
    assert sources["host"]["state"] == "ready"
    assert sources["gdrpeer"]["state"] == "absent"
    assert "ENOENT" in sources["gdrpeer"]["reason"]
    assert sources["cuda"]["state"] == "absent"
    assert "cannot load libcuda-missing.so.1" in sources["cuda"]["reason"]
    table = verify(gdrpeer, "--size", "64K", "--libcuda", "libcuda-missing.so.1")
    assert table.returncode == 3
    assert "nothing to verify" in table.stdout and "(exit 3)" in table.stdout


def test_perftest_short_options(gdrpeer):
    """perftest's meanings (ib_write_bw -d DEV -s SIZE -D SECONDS -a): -s is the size (issue 25;
    it was the memory source), -D the seconds per measurement, -a every power-of-two size."""
    if has_rdma_device():
        pytest.skip("this machine has an RDMA device; the emulated-node tests cover that case")
    r = verify(gdrpeer, "--json", "-s", "64K", "-D", "0.5", "-a", "--libcuda", "libcuda-missing.so.1")
    assert r.returncode == 3, r.stderr
    assert json.loads(r.stdout)["size"] == 65536
    r = verify(gdrpeer, "--source", "host", "--json", "--libcuda", "libcuda-missing.so.1")
    assert r.returncode == 3 and [s["name"] for s in json.loads(r.stdout)["sources"] if s["requested"]] == ["host"]


def test_perftest_gid_index_option(gdrpeer):
    """perftest's -x IDX (ib_write_bw -x 3) is the GID index every port uses (issue 25); before it
    was an unknown option (exit 64). Out-of-range indexes and -x with --p2p are refused."""
    assert "-x,--gid-index" in verify(gdrpeer, "--help").stdout
    r = verify(gdrpeer, "-x", "300")
    assert r.returncode == 64 and "--gid-index: 300 is not a GID index (0-255)" in r.stderr, r.stderr
    r = verify(gdrpeer, "--p2p", "-x", "1")
    assert r.returncode == 64 and "--p2p measures GPU pairs" in r.stderr, r.stderr
    if has_rdma_device():
        pytest.skip("this machine has an RDMA device; the emulated-node tests cover that case")
    for opt in (["-x", "3"], ["--gid-index", "3"], ["--gid-index=3"]):
        r = verify(gdrpeer, "--json", *opt, "--libcuda", "libcuda-missing.so.1")
        assert r.returncode == 3, (opt, r.stderr)


@pytest.mark.parametrize("args,message", [
    (["-m", "1000"], "--mtu: 1000 is not an RDMA MTU (256, 512, 1024, 2048 or 4096)"),
    (["-i", "300"], "--ib-port: 300 is not a port (1-255)"),
    (["-n", "5"], "-n/--iterations: counts the operations of a --bench measurement"),
    (["--op", "write"], "--op belongs to the two-node run"),
    (["--cuda-dmabuf-mapping", "c2c"], "--cuda-dmabuf-mapping: 'c2c' (pcie or default)"),
    (["--server", "node2"], "--server listens for a client; a HOST[:PORT] names the server to connect to: not both"),
    (["--server", "-s", "64K"], "--size: the client chooses the transfer size"),
    (["--server", "--bench"], "are the client's choice"),
    (["[::1"], "server address '[::1': '[' without ']'"),
    (["node2:0"], "server address 'node2:0': the port must be 1-65535"),
    (["node2", "--op", "ping"], "--op: unknown operation 'ping' (write, read, send, atomic)"),
    (["node2", "-d", "a", "-d", "b"], "a two-node run uses one port on each side"),
])
def test_two_node_and_perftest_bad_input(gdrpeer, args, message):
    """Issue 26: perftest's -m (MTU), -i (port), -n (iterations) and the two-node options refuse
    what they cannot mean, before anything is prepared or any connection is made."""
    r = verify(gdrpeer, *args)
    assert r.returncode == 64, (r.stdout, r.stderr)
    assert message in r.stderr, r.stderr
    assert r.stdout == ""


def test_m_is_the_mtu_and_method_is_long_only(gdrpeer):
    """perftest's -m is the MTU (issue 26). Before, -m was --method and `-m reg_mr` chose the
    registration: now it is bad input (CLI11 cannot read 'reg_mr' as an MTU), and --method still works."""
    r = verify(gdrpeer, "-m", "reg_mr")
    assert r.returncode == 64, (r.stdout, r.stderr)
    assert "--mtu" in r.stderr or "-m" in r.stderr, r.stderr
    help_text = verify(gdrpeer, "--help").stdout
    assert "-m,--mtu" in help_text and "-i,--ib-port" in help_text and "-n,--iterations" in help_text
    assert "-m,--method" not in help_text and "--method" in help_text
    if has_rdma_device():
        pytest.skip("this machine has an RDMA device; the emulated-node tests cover that case")
    r = verify(gdrpeer, "--json", "--method", "reg_mr", "-m", "1024", "--libcuda", "libcuda-missing.so.1")
    assert r.returncode == 3, r.stderr


def test_two_node_sides_without_rdma_device_have_nothing_to_verify(gdrpeer):
    """With no RDMA device neither side can run: exit 3 before listening or connecting (no hang)."""
    if has_rdma_device():
        pytest.skip("this machine has an RDMA device; the emulated two-node tests cover that case")
    for args in (["--server", "--port", "0"], ["127.0.0.1:9"]):
        r = verify(gdrpeer, "--json", *args, "--libcuda", "libcuda-missing.so.1")
        assert r.returncode == 3, (args, r.stderr)
        rep = json.loads(r.stdout)
        assert rep["mode"] == "two-node" and rep["exit_code"] == 3
        assert rep["summary"]["text"].startswith("nothing to verify: no RDMA"), rep["summary"]
        assert "listening" not in r.stderr

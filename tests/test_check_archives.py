"""Inputs as people pass them around (issue 25 item 6): compressed snapshots and dumps, `-` for
standard input, open errors with their errno, a directory where a file belongs, and snapshots
taken without root. Host only.

The compressed files are made by the real tools (GNU tar, gzip, xz, zstd, bzip2), and what
`gdrpeer snapshot` writes is checked by the same tools, so neither side is gdrpeer's own word.
"""

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from helpers.check_cli import gdrpeer_bin
from helpers.fake_sysfs import sysfs_node
from helpers.paths import REF

P5EN = REF / "aws-p5en.48xlarge.xml"
H100 = REF / "h100-node-snapshot.tar"
# (suffix, compressor command, GNU tar option, the tool's own integrity test)
KINDS = [(".gz", ["gzip", "-c"], "-z", ["gzip", "-t"]),
         (".xz", ["xz", "-c"], "-J", ["xz", "-t"]),
         (".zst", ["zstd", "-q", "-c"], "--zstd", ["zstd", "-q", "-t"]),
         (".bz2", ["bzip2", "-c"], "-j", ["bzip2", "-t"])]


def gdrpeer(*args, **kw):
    env = {k: v for k, v in os.environ.items() if k != "GDRPEER_DATA_DIR"}
    return subprocess.run([gdrpeer_bin(), *map(str, args)], capture_output=True, text=True, errors="replace",
                          timeout=120, env=env, **kw)


def check_json(*args, **kw):
    p = gdrpeer("check", "--json", *args, **kw)
    assert p.returncode in (0, 1, 2, 3), p.stderr
    return json.loads(p.stdout)


def same_node(a, b):
    for key in ("devices", "matrix", "pairs"):
        assert a[key] == b[key], key
    assert {k: v for k, v in a["summary"].items()} == b["summary"]


@pytest.fixture
def shared_dir():
    """A directory another user can reach (pytest's own tmp_path is below a 0700 folder)."""
    d = Path(tempfile.mkdtemp(prefix="gdrpeer-test-", dir="/tmp"))
    d.chmod(0o777)
    yield d
    shutil.rmtree(d)


def tool(name):
    if not shutil.which(name):
        pytest.fail(f"{name} is missing: install it (make deps)")


@pytest.mark.parametrize("suffix,compress,tar_opt,test_cmd", KINDS, ids=[k[0] for k in KINDS])
def test_compressed_snapshot_made_by_tar(suffix, compress, tar_opt, test_cmd, tmp_path):
    """A sysfs copy packed by GNU tar with each compression reads as the copy itself."""
    tool(compress[0])
    root = sysfs_node(tmp_path / "node")
    packed = tmp_path / f"node.tar{suffix}"
    subprocess.run(["tar", "-C", root, tar_opt, "-cf", packed, "."], check=True)
    same_node(check_json(packed), check_json(root))


@pytest.mark.parametrize("suffix,compress,tar_opt,test_cmd", KINDS, ids=[k[0] for k in KINDS])
def test_compressed_real_snapshot_and_dump(suffix, compress, tar_opt, test_cmd, tmp_path):
    """The real H100 snapshot and an hwloc dump, compressed as files: the same results."""
    tool(compress[0])
    for src in (H100, P5EN):
        out = tmp_path / (src.name + suffix)
        with open(out, "wb") as f:
            subprocess.run([*compress, src], stdout=f, check=True)
        same_node(check_json(out), check_json(src))
    hw = tmp_path / (P5EN.name + suffix)
    same_node(check_json("--hwloc", hw), check_json(P5EN))


@pytest.mark.parametrize("suffix,compress,tar_opt,test_cmd", KINDS, ids=[k[0] for k in KINDS])
def test_snapshot_writes_the_compression_its_name_asks_for(suffix, compress, tar_opt, test_cmd, tmp_path):
    tool(compress[0])
    root = sysfs_node(tmp_path / "node")
    out = tmp_path / f"snap.tar{suffix}"
    p = gdrpeer("snapshot", "--sysfs-root", root, out)
    assert p.returncode == 0, p.stderr
    assert subprocess.run([*test_cmd, out], capture_output=True).returncode == 0, f"{test_cmd[0]} -t refuses it"
    listing = subprocess.run(["tar", tar_opt, "-tf", out], capture_output=True, text=True, check=True).stdout
    assert "sys/bus/pci/devices/" in listing
    same_node(check_json(out), check_json(root))


def test_standard_input(tmp_path):
    with open(P5EN, "rb") as f:
        a = check_json("-", stdin=f)
    same_node(a, check_json(P5EN))
    with open(H100, "rb") as f:
        same_node(check_json("--sysfs-root", "-", stdin=f), check_json(H100))
    gz = tmp_path / "p5en.xml.gz"
    with open(gz, "wb") as f:
        subprocess.run(["gzip", "-c", P5EN], stdout=f, check=True)
    with open(gz, "rb") as f:
        same_node(check_json("--hwloc", "-", stdin=f), a)
    p = gdrpeer("check", "-", "-", stdin=subprocess.DEVNULL)
    assert p.returncode == 64 and "standard input" in p.stderr


def test_open_errors_name_the_errno(tmp_path, shared_dir):
    p = gdrpeer("check", tmp_path / "missing.xml")
    assert p.returncode == 66 and "missing.xml: cannot open input: No such file or directory" in p.stderr, p.stderr
    if os.geteuid() != 0:
        pytest.skip("an unreadable file needs another user to read it (root reads anything)")
    locked = shared_dir / "locked.xml"
    shutil.copy(P5EN, locked)
    locked.chmod(0)
    p = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", gdrpeer_bin(), "check", locked],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 66 and "locked.xml: cannot open input: Permission denied" in p.stderr, p.stderr


def test_directory_given_as_a_file_is_said_so(tmp_path):
    for opt in ("--hwloc", "--nccl-xml", "--lspci"):
        p = gdrpeer("check", opt, tmp_path)
        assert p.returncode == 66, (opt, p.returncode, p.stderr)
        assert f"{tmp_path}: cannot read input: Is a directory" in p.stderr, p.stderr


def test_snapshot_without_root_is_marked_partial(shared_dir):
    """As non-root the kernel gives only 64 bytes of config space (pci_read_config): the snapshot
    says so, and a check of it repeats it. The same snapshot taken as root is not marked."""
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        pytest.skip("needs root and setpriv to take the same snapshot as root and as another user")
    user = shared_dir / "user.tar"
    p = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", gdrpeer_bin(),
                        "snapshot", "--no-cuda", user], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert "warning: taken as uid 65534, not root" in p.stderr, p.stderr
    notes = [n["text"] for n in check_json(user)["notes"]]
    assert any(n.startswith("partial snapshot: taken as uid 65534") and "ACS" in n for n in notes), notes
    rooted = shared_dir / "root.tar"
    assert gdrpeer("snapshot", "--no-cuda", rooted).returncode == 0
    assert not any("partial snapshot" in n["text"] for n in check_json(rooted)["notes"])
    # The live check run without root says the same.
    p = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", gdrpeer_bin(), "check",
                        "--json", "--no-cuda"], capture_output=True, text=True, timeout=120)
    assert any("taken as uid 65534" in n["text"] for n in json.loads(p.stdout)["notes"])

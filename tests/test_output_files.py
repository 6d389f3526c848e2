"""What `gdrpeer check --output PATH` and `gdrpeer snapshot PATH` do to what PATH already is
(issue 25 item 2; userspace/cli/output_file.cpp). Run as root (the systemd unit, NHC), the old
writer renamed a temporary file over anything: a test run replaced the machine's /dev/full.

Every special file here is made by the test inside its temporary directory, never under /dev:
a FIFO, a socket, symlinks, and (as root only) character devices with the numbers of
/dev/null (1,3) and /dev/full (1,7) from the kernel's Documentation/admin-guide/devices.txt.
"""

import os
import select
import socket
import stat
import subprocess
import time

import pytest

from helpers.check_cli import gdrpeer_bin
from helpers.fake_sysfs import sysfs_node
from helpers.paths import REF

NODE = REF / "stelline-asus-esc8000a-e12.md"
VERDICT_EXITS = (0, 1, 2, 3)


def gdrpeer(*args, stdout=subprocess.PIPE):
    env = {k: v for k, v in os.environ.items() if k != "GDRPEER_DATA_DIR"}
    return subprocess.run([gdrpeer_bin(), *map(str, args)], stdout=stdout, stderr=subprocess.PIPE, text=True,
                          errors="replace", timeout=120, env=env)


def nfd_text():
    p = gdrpeer("check", "--format", "nfd", NODE)
    assert p.returncode in VERDICT_EXITS, p.stderr
    return p.stdout.split("\n", 2)[2]  # after the comment and expiry lines (a timestamp)


def char_device(path, major, minor):
    if os.geteuid() != 0:
        pytest.skip("making a device node needs root (mknod)")
    os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(major, minor))
    return path


def assert_char_device(path, major, minor):
    st = os.lstat(path)
    assert stat.S_ISCHR(st.st_mode), f"{path} was replaced: mode {oct(st.st_mode)}"
    assert (os.major(st.st_rdev), os.minor(st.st_rdev)) == (major, minor)


def test_fifo_is_written_in_place(tmp_path):
    fifo = tmp_path / "gdrpeer.fifo"
    os.mkfifo(fifo)
    # O_RDWR: opening never blocks and the writer's open does not wait for us either.
    fd = os.open(fifo, os.O_RDWR | os.O_NONBLOCK)
    try:
        p = gdrpeer("check", "--format", "nfd", "--output", fifo, NODE)
        assert p.returncode in VERDICT_EXITS, p.stderr
        got = b""
        while select.select([fd], [], [], 0.5)[0]:
            got += os.read(fd, 1 << 16)
    finally:
        os.close(fd)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode), "the FIFO was replaced by a file"
    assert got.decode().endswith(nfd_text())
    assert sorted(x.name for x in tmp_path.iterdir()) == ["gdrpeer.fifo"]


def test_device_node_is_written_in_place(tmp_path):
    null = char_device(tmp_path / "null", 1, 3)
    p = gdrpeer("check", "--format", "prometheus", "--output", null, NODE)
    assert p.returncode in VERDICT_EXITS, p.stderr
    assert_char_device(null, 1, 3)
    assert sorted(x.name for x in tmp_path.iterdir()) == ["null"]


def test_write_error_on_a_device_is_exit_73_with_errno(tmp_path):
    full = char_device(tmp_path / "full", 1, 7)
    p = gdrpeer("check", "--format", "nfd", "--output", full, NODE)
    assert p.returncode == 73, (p.returncode, p.stderr)
    assert str(full) in p.stderr and "No space left on device" in p.stderr, p.stderr
    assert_char_device(full, 1, 7)


def test_socket_and_directory_are_refused(tmp_path):
    sock_path = tmp_path / "s.sock"
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(str(sock_path))
    try:
        p = gdrpeer("check", "--format", "nfd", "--output", sock_path, NODE)
        assert p.returncode == 73, (p.returncode, p.stderr)
        assert "socket" in p.stderr
        assert stat.S_ISSOCK(os.lstat(sock_path).st_mode)
    finally:
        s.close()
    d = tmp_path / "dir"
    d.mkdir()
    p = gdrpeer("check", "--format", "nfd", "--output", d, NODE)
    assert p.returncode == 73 and "Is a directory" in p.stderr, (p.returncode, p.stderr)
    assert d.is_dir() and not any(d.iterdir())


def test_symlink_out_of_its_directory_is_not_followed_unless_asked(tmp_path):
    (tmp_path / "spool").mkdir()
    (tmp_path / "elsewhere").mkdir()
    target = tmp_path / "elsewhere" / "victim"
    target.write_text("precious\n")
    link = tmp_path / "spool" / "gdrpeer.prom"
    link.symlink_to("../elsewhere/victim")
    p = gdrpeer("check", "--format", "prometheus", "--output", link, NODE)
    assert p.returncode == 73, (p.returncode, p.stderr)
    assert "symbolic link" in p.stderr and "--follow-symlinks" in p.stderr, p.stderr
    assert link.is_symlink() and target.read_text() == "precious\n"
    assert sorted(x.name for x in (tmp_path / "spool").iterdir()) == ["gdrpeer.prom"]
    # Asked: written through, the link kept, the target's mode kept.
    target.chmod(0o640)
    p = gdrpeer("check", "--format", "prometheus", "--follow-symlinks", "--output", link, NODE)
    assert p.returncode in VERDICT_EXITS, p.stderr
    assert link.is_symlink() and "gdrpeer_check_verdict" in target.read_text()
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    # A dangling link out of the directory is not a way to create files elsewhere either.
    dangling = tmp_path / "spool" / "new.prom"
    dangling.symlink_to("../elsewhere/created")
    p = gdrpeer("check", "--format", "prometheus", "--output", dangling, NODE)
    assert p.returncode == 73 and not (tmp_path / "elsewhere" / "created").exists(), p.stderr


def test_symlink_within_its_directory_writes_the_target(tmp_path):
    """The usual rotation layout (`gdrpeer.prom -> gdrpeer.prom.1`): the target is replaced
    atomically and the link stays a link."""
    target = tmp_path / "gdrpeer.prom.1"
    target.write_text("old\n")
    link = tmp_path / "gdrpeer.prom"
    link.symlink_to("gdrpeer.prom.1")
    p = gdrpeer("check", "--format", "prometheus", "--output", link, NODE)
    assert p.returncode in VERDICT_EXITS, p.stderr
    assert link.is_symlink() and os.readlink(link) == "gdrpeer.prom.1"
    assert "gdrpeer_check_verdict" in target.read_text()
    assert sorted(x.name for x in tmp_path.iterdir()) == ["gdrpeer.prom", "gdrpeer.prom.1"]


def test_snapshot_uses_the_same_writer(tmp_path):
    root = sysfs_node(tmp_path / "node")
    null = char_device(tmp_path / "null", 1, 3)
    p = gdrpeer("snapshot", "--sysfs-root", root, null)
    assert p.returncode == 0, p.stderr
    assert_char_device(null, 1, 3)
    full = char_device(tmp_path / "full", 1, 7)
    p = gdrpeer("snapshot", "--sysfs-root", root, full)
    assert p.returncode == 73 and "No space left on device" in p.stderr, (p.returncode, p.stderr)
    assert_char_device(full, 1, 7)


def test_snapshot_to_stdout_reports_write_errors(tmp_path):
    root = sysfs_node(tmp_path / "node")
    full = char_device(tmp_path / "full", 1, 7)
    with open(full, "w") as out:
        p = gdrpeer("snapshot", "--sysfs-root", root, "-", stdout=out)
    assert p.returncode == 73, (p.returncode, p.stderr)
    assert "stdout" in p.stderr and "No space left on device" in p.stderr, p.stderr


def test_fleet_mode_reports_write_errors(tmp_path):
    full = char_device(tmp_path / "full", 1, 7)
    for fmt in ([], ["--json"]):
        with open(full, "w") as out:
            p = gdrpeer("check", "--fleet", *fmt, NODE, REF / "aws-p5en.48xlarge.xml", stdout=out)
        assert p.returncode == 73, (fmt, p.returncode, p.stderr)
        assert "No space left on device" in p.stderr, p.stderr

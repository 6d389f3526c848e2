"""emunode's host control (QMP client + the guest's request channel) against a fake QEMU on
unix sockets: no boot. The real thing is exercised by test_hotplug.py."""

import json
import shutil
import socket
import tempfile
import threading
from pathlib import Path

import pytest

from emunode.hostctl import HostControl


class FakeQemu(threading.Thread):
    """Serves QMP the way QEMU does for what HostControl sends, recording the commands."""

    def __init__(self, path):
        super().__init__(daemon=True)
        self.srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.srv.bind(str(path))
        self.srv.listen(1)
        self.commands = []

    def run(self):
        conn, _ = self.srv.accept()
        f = conn.makefile("rwb")

        def send(obj):
            f.write(json.dumps(obj).encode() + b"\n")
            f.flush()
        send({"QMP": {"version": {}, "capabilities": []}})
        for line in f:
            msg = json.loads(line)
            self.commands.append(msg)
            if msg["execute"] == "device_add" and msg["arguments"].get("bus") == "nowhere":
                send({"error": {"class": "GenericError", "desc": "Bus 'nowhere' not found"}})
                continue
            if msg["execute"] == "device_del":
                # an unrelated event first, then the answer, then the deletion
                send({"event": "RTC_CHANGE", "data": {"offset": 0}})
                send({"return": {}})
                send({"event": "DEVICE_DELETED", "data": {"device": msg["arguments"]["id"],
                                                          "path": "/machine/peripheral/gpu"}})
                continue
            send({"return": {}})


@pytest.fixture
def sockdir():
    # unix socket paths are limited to 108 bytes: a short folder, not pytest's tmp_path
    d = Path(tempfile.mkdtemp(prefix="hostctl-"))
    yield d
    shutil.rmtree(d, ignore_errors=True)


def test_requests_become_qmp_commands_and_replies(sockdir):
    qmp_path, ctl_path = sockdir / "qmp.sock", sockdir / "ctl.sock"
    qemu = FakeQemu(qmp_path)
    qemu.start()
    ctl_srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    ctl_srv.bind(str(ctl_path))
    ctl_srv.listen(1)
    device = {"driver": "ivshmem-plain", "id": "gpu", "memdev": "gpubar", "bus": "dn1"}
    backend = {"qom-type": "memory-backend-file", "id": "gpubar", "mem-path": "/x", "size": 1 << 20,
               "share": True}
    host = HostControl(qmp_path, ctl_path, {"gpu": {"device": device, "backend": backend},
                                            "bad": {"device": dict(device, id="bad", bus="nowhere")}},
                       log=lambda m: None)
    host.start()
    guest, _ = ctl_srv.accept()
    replies = guest.makefile("rb")

    def ask(line):
        # console noise before the request on the same line is tolerated
        guest.sendall(f"noise @@EMUNODE-HOST {line}\n".encode())
        return replies.readline().decode().strip()

    assert ask("device_del gpu").startswith("@@EMUNODE-HOST-REPLY ok deleted gpu")
    assert ask("device_add gpu") == "@@EMUNODE-HOST-REPLY ok added gpu"
    assert ask("device_add gpu") == "@@EMUNODE-HOST-REPLY ok added gpu"
    bad = ask("device_add bad")
    assert bad.startswith("@@EMUNODE-HOST-REPLY error ") and "Bus 'nowhere' not found" in bad, bad
    assert "unknown device 'tpu'" in ask("device_del tpu")
    assert "unknown request" in ask("reboot now")
    replies.close()
    guest.close()   # as QEMU exits: the channel ends, the thread with it
    host.join(timeout=10)
    assert not host.is_alive() and host.error is None

    cmds = [(c["execute"], c.get("arguments", {})) for c in qemu.commands]
    assert cmds[0] == ("qmp_capabilities", {})
    assert cmds[1] == ("device_del", {"id": "gpu"})
    # each plug: a new backend object over the same file, then the device on it
    assert cmds[2] == ("object-add", dict(backend, id="gpubar-1"))
    assert cmds[3] == ("device_add", dict(device, memdev="gpubar-1"))
    assert cmds[4] == ("object-add", dict(backend, id="gpubar-2"))
    assert cmds[5] == ("device_add", dict(device, memdev="gpubar-2"))
    assert [e[1] for e in host.events] == ["device_del gpu", "device_add gpu", "device_add gpu",
                                           "device_add bad", "device_del tpu", "reboot now"]
    assert host.events[3][2].startswith("error ") and "nowhere" in host.events[3][2]

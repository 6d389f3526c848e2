"""The host side of a running node: QEMU's QMP monitor, and a channel on which a guest command
asks the host to act on the machine mid-run (hot-unplug and re-plug of the "GPU").

Every run starts QEMU with `-qmp unix:<sock>,server=on,wait=off` and a third serial port
(guest ttyS2) on a unix socket. The guest writes one request line on ttyS2,

    @@EMUNODE-HOST device_del gpu
    @@EMUNODE-HOST device_add gpu

    @@EMUNODE-HOST barrier NAME
    @@EMUNODE-HOST bar_fill OFFSET LENGTH
    @@EMUNODE-HOST bar_copy NAME

and the host answers with one line, `@@EMUNODE-HOST-REPLY ok ...` or `@@EMUNODE-HOST-REPLY
error <why>`. `barrier NAME` answers once every node of a pair (emunode.pair) has asked for the
barrier NAME (at once for a node alone), so one node's command can wait for the other's (a
server listening before its client connects); it answers an error when the other node has
ended or has not come within BARRIER_TIMEOUT seconds. `bar_fill OFFSET LENGTH` has the host
write softroce.host_fill_range(OFFSET, LENGTH) into the "GPU BAR" backing file (the guest cannot
reach the BAR once gdrpeer is unbound: a test marks a revoked range this way, and later finds
the marks intact if nothing landed there after the revoke). `bar_copy NAME` copies the BAR file
as it is now to `bar-NAME.bin` beside it (RunResult.bar_copy(NAME)): a command sequence that
reuses the same device memory keeps what each step left there for the host to check. device_del returns once QEMU reports DEVICE_DELETED, i.e. once the guest's
pciehp has powered the slot off and the device is gone; device_add returns once QEMU has
plugged it (the guest then enumerates it on its own, a second or so later). The guest's side
is /usr/bin/emunode-host (emunode-host.sh). Every action is logged in RunResult.host_events.
"""

import json
import os
import re
import shutil
import socket
import threading
import time
from pathlib import Path

REQUEST = "@@EMUNODE-HOST "
REPLY = "@@EMUNODE-HOST-REPLY "
# below emunode-host's 150 s wait for a reply, so the guest hears why
BARRIER_TIMEOUT = 140


class QmpError(Exception):
    pass


class Qmp:
    """A minimal QMP client: capabilities negotiation, commands, events."""

    def __init__(self, path, timeout=30):
        self.sock = _connect(path, timeout)
        self.file = self.sock.makefile("rwb")
        self.events = []
        greeting = self._read(timeout)
        if "QMP" not in greeting:
            raise QmpError(f"not a QMP greeting: {greeting}")
        self.execute("qmp_capabilities")

    def _read(self, timeout):
        self.sock.settimeout(timeout)
        line = self.file.readline()
        if not line:
            raise QmpError("QMP connection closed")
        return json.loads(line)

    def execute(self, command, timeout=30, **arguments):
        msg = {"execute": command}
        if arguments:
            msg["arguments"] = arguments
        self.file.write(json.dumps(msg).encode() + b"\n")
        self.file.flush()
        deadline = time.monotonic() + timeout
        while True:
            r = self._read(max(0.1, deadline - time.monotonic()))
            if "event" in r:
                self.events.append(r)
            elif "error" in r:
                raise QmpError(f"{command}: {r['error'].get('desc', r['error'])}")
            elif "return" in r:
                return r["return"]

    def wait_event(self, name, timeout, **data):
        """The first event `name` whose data has the given items (queued or still to come)."""
        deadline = time.monotonic() + timeout
        while True:
            for ev in self.events:
                if ev["event"] == name and all(ev.get("data", {}).get(k) == v for k, v in data.items()):
                    self.events.remove(ev)
                    return ev
            left = deadline - time.monotonic()
            if left <= 0:
                raise QmpError(f"no {name} event {data or ''} within {timeout} s")
            try:
                r = self._read(left)
            except socket.timeout:
                continue
            if "event" in r:
                self.events.append(r)

    def close(self):
        try:
            self.file.close()
            self.sock.close()
        except OSError:
            pass


def _connect(path, timeout):
    deadline = time.monotonic() + timeout
    while True:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.connect(str(path))
            return s
        except (FileNotFoundError, ConnectionRefusedError):
            s.close()
            if time.monotonic() > deadline:
                raise QmpError(f"cannot connect to {path} within {timeout} s")
            time.sleep(0.05)


class HostControl(threading.Thread):
    """Serves the guest's requests on the control socket with QMP until QEMU exits.

    `plug_devices` maps a name the guest uses ("gpu") to {"device": device_add arguments
    (driver, id, bus, ...), "backend": object-add arguments of its memory backend or None};
    device_del takes the same name as the QEMU id."""

    def __init__(self, qmp_path, ctl_path, plug_devices, log, rendezvous=None, party=None,
                 bar_path=None):
        """`rendezvous` (emunode.pair.Rendezvous) and `party` (this node's name in it): the
        barriers shared with the other node of a pair; None for a node alone."""
        super().__init__(daemon=True)
        self.rendezvous, self.party = rendezvous, party
        self.bar_path = bar_path
        self.qmp_path, self.ctl_path = qmp_path, ctl_path
        self.plug_devices = plug_devices
        self.log = log
        self.events = []          # (seconds since start, request, reply)
        self.plugs = 0
        self.error = None
        self.start_time = time.monotonic()

    def run(self):
        try:
            self.qmp = Qmp(self.qmp_path)
            ctl = _connect(self.ctl_path, 30)
        except (OSError, QmpError) as e:
            self.error = f"host control could not start: {e}"
            return
        buf = b""
        with ctl:
            while True:
                try:
                    data = ctl.recv(4096)
                except OSError:
                    break
                if not data:
                    break
                buf += data
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    text = line.decode(errors="replace").strip()
                    i = text.find(REQUEST)
                    if i < 0:
                        continue
                    request = text[i + len(REQUEST):].strip()
                    reply = self._serve(request)
                    self.events.append((round(time.monotonic() - self.start_time, 2), request, reply))
                    try:
                        ctl.sendall((REPLY + reply + "\n").encode())
                    except OSError:
                        return
        self.qmp.close()

    def _bar_fill(self, offset, length):
        from .softroce import host_fill_range
        try:
            off, n = int(offset, 0), int(length, 0)
            size = os.path.getsize(self.bar_path) if self.bar_path else 0
            if n <= 0 or off < 0 or off + n > size:
                return f"error bar_fill {offset} {length}: outside the {size}-byte BAR file"
            data = host_fill_range(off, n)
        except ValueError as e:
            return f"error bar_fill {offset} {length}: {e}"
        with open(self.bar_path, "r+b") as f:
            f.seek(off)
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        return f"ok bar_fill {off:#x} {n:#x}: the host's bytes are in the BAR file"

    def _bar_copy(self, name):
        if not re.fullmatch(r"[\w.-]{1,64}", name) or not self.bar_path:
            return f"error bar_copy '{name}': a name of letters, digits, '.', '-', '_'"
        dest = Path(self.bar_path).with_name(f"bar-{name}.bin")
        shutil.copyfile(self.bar_path, dest)
        return f"ok bar_copy {name}: {dest.name}"

    def _serve(self, request):
        words = request.split()
        if len(words) == 2 and words[0] == "barrier":
            if self.rendezvous is None:
                return f"ok barrier {words[1]}: this node alone"
            return self.rendezvous.arrive(words[1], self.party, BARRIER_TIMEOUT)
        if len(words) == 3 and words[0] == "bar_fill":
            return self._bar_fill(words[1], words[2])
        if len(words) == 2 and words[0] == "bar_copy":
            return self._bar_copy(words[1])
        if len(words) != 2 or words[0] not in ("device_del", "device_add"):
            return f"error unknown request '{request}' (device_del|device_add|barrier NAME, bar_fill OFFSET LENGTH, bar_copy NAME)"
        verb, name = words
        if name not in self.plug_devices:
            return f"error unknown device '{name}' (known: {', '.join(self.plug_devices)})"
        try:
            if verb == "device_del":
                started = time.monotonic()
                self.qmp.execute("device_del", id=name)
                # pciehp: attention button, 5 s blink, power off, then QEMU drops the device
                self.qmp.wait_event("DEVICE_DELETED", 120, device=name)
                return f"ok deleted {name} after {time.monotonic() - started:.1f} s"
            device = dict(self.plug_devices[name]["device"])
            backend = self.plug_devices[name].get("backend")
            if backend:
                # QEMU 7.2 aborts re-plugging a device onto the memory backend it had before
                # (qemu_ram_set_idstr assertion): each plug gets a new backend object over the
                # same shared file, so the memory's contents carry over.
                self.plugs += 1
                backend = dict(backend, id=f"{backend['id']}-{self.plugs}")
                self.qmp.execute("object-add", **backend)
                device["memdev"] = backend["id"]
            self.qmp.execute("device_add", **device)
            return f"ok added {name}"
        except (OSError, QmpError) as e:
            return f"error {e}"

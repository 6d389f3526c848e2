"""Boot the emulated GPU node under QEMU (TCG), run commands, collect their results."""

import base64
import dataclasses
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from . import initramfs, kernels, softroce
from .debugkernel import debug_kernels
from . import qemu as qemus
from . import topology as topo
from .errors import GuestError, HarnessError
from .hostctl import HostControl
from .paths import build_dir

# Kernel log lines that fail a run: the guest must never pass with one of these. The second
# half is what the debug kernel's checkers print (lockdep, KFENCE, DMA-API debug, debugobjects);
# their start-up lines ("DMA-API: preallocated ...", "kfence: initialized") are not reports,
# but a checker that switched itself off ("DMA-API: debugging out of memory", "turning off the
# locking correctness validator") is: the rest of the run would go unchecked.
PROBLEM = re.compile(r"(\bBUG:|\bWARNING:|\bOops\b|Kernel panic|general protection fault|"
                     r"UBSAN:|KASAN:|soft lockup|hung_task|blocked for more than|"
                     r"RCU detected stall|refcount_t:|list_(add|del) corruption|"
                     r"possible circular locking|possible recursive locking|inconsistent lock state|"
                     r"possible irq lock inversion|suspicious RCU usage|lock held when returning|"
                     r"trying to register non-static key|locking correctness validator|"
                     r"sleeping function called from invalid context|KFENCE:|ODEBUG:|"
                     r"DMA-API: (?!preallocated \d+ debug entries|debugging enabled by kernel config))")


@dataclasses.dataclass(frozen=True)
class KnownReport:
    """A kernel report that is not ours, accepted only as a whole and only in exactly this shape.

    A report is the block from its title line to the end of its stack backtrace ("</TASK>");
    a block cut short, or with another report's line inside, is never accepted. It is accepted
    when the title matches, every `lines` pattern matches some line of it, and
    every call-trace frame and every lock's "at:" function is one of `frames`, in the kernel
    itself: a frame or lock site in gdrpeer, a test module or any other module makes it a
    problem again. Frames marked "? " are left-over stack words the unwinder could not place
    (after a driver's remove() they can name that driver): they are not callers and are not
    checked."""
    name: str
    title: str
    lines: tuple
    frames: frozenset
    why: str

    def matches(self, block):
        # whole: from its title to the end of its backtrace, and no other report inside it
        if self.title not in block[0] or "</TASK>" not in block[-1]:
            return False
        if any(PROBLEM.search(line) for line in block[1:]):
            return False
        if not all(any(re.search(p, line) for line in block) for p in self.lines):
            return False
        for line in block:
            m = _FRAME.match(line) or _LOCK_SITE.search(line)
            if m and (m.group("module") or m.group("func") not in self.frames):
                return False
        return True


_FRAME = re.compile(r"^\s*(?P<func>[\w.]+)\+0x[0-9a-f]+/0x[0-9a-f]+(?: \[(?P<module>\w+)\])?\s*$")
_LOCK_SITE = re.compile(r", at: (?P<func>[\w.]+)\+0x[0-9a-f]+/0x[0-9a-f]+(?: \[(?P<module>\w+)\])?\s*$")
_LOCKDEP_CORE = {"__lock_acquire", "lock_acquire", "check_noncircular", "check_prev_add",
                 "check_prevs_add", "validate_chain", "print_circular_bug", "dump_stack_lvl"}
KNOWN_REPORTS = (
    KnownReport(
        name="pciehp-reset-lock-vs-rescan-remove",
        title="WARNING: possible circular locking dependency detected",
        lines=(r"^irq/\d+-pciehp/\d+ is trying to acquire lock:$",
               r"\(&ctrl->reset_lock/\d\).*, at: pciehp_unconfigure_device\+",
               r"\(pci_rescan_remove_lock\).*, at: pciehp_unconfigure_device\+",
               r"^-> #1 \(pci_rescan_remove_lock\)",
               r"^-> #0 \(&ctrl->reset_lock/\d\)"),
        frames=frozenset(_LOCKDEP_CORE | {
            "__mutex_lock", "mutex_lock_nested", "down_read_nested",
            "pciehp_unconfigure_device", "__pciehp_disable_slot", "pciehp_handle_disable_request",
            "pciehp_ist", "irq_thread_fn", "irq_thread", "kthread", "ret_from_fork"}),
        why="pciehp's own lock order in 6.1 (pciehp_unconfigure_device takes "
            "pci_rescan_remove_lock under ctrl->reset_lock, then drops and retakes reset_lock "
            "around each device's removal), on every hot-unplug with or without a driver; "
            "lockdep switches itself off after it, so the rest of that boot has no lock checking"),
)


def _report_blocks(log_lines):
    """(first, last) line indices of each report that starts with a known report's title."""
    titles = {k.title for k in KNOWN_REPORTS}
    blocks, i = [], 0
    while i < len(log_lines):
        if any(t in log_lines[i] for t in titles):
            end = next((j for j in range(i, len(log_lines)) if "</TASK>" in log_lines[j]),
                       len(log_lines) - 1)
            blocks.append((i, end))
            i = end + 1
        else:
            i += 1
    return blocks


def known_reports(kernel_log):
    """[(known report name, its block of lines)] for each accepted report in `kernel_log`."""
    lines = kernel_log.splitlines()
    found = []
    for first, last in _report_blocks(lines):
        block = [re.sub(r"^\[\s*\d+\.\d+\]\s?", "", l).strip() for l in lines[first:last + 1]]
        for k in KNOWN_REPORTS:
            if k.matches(block):
                found.append((k.name, block))
                break
    return found


# Taint flags allowed in the guest: O (out-of-tree module, bit 12) and E (unsigned, bit 13).
ALLOWED_TAINT = (1 << 12) | (1 << 13)
TAINT_LETTERS = "PFSRMBUDAWCIOELKXTN"


@dataclasses.dataclass
class CommandResult:
    command: str
    output: str
    status: int


@dataclasses.dataclass
class RunResult:
    kernel: str
    topology: str
    iommu: str
    results: list
    setup: CommandResult
    kernel_log: str          # dmesg of the guest (console output if the guest died first)
    console_log: str
    taint: int
    bar_path: Path
    files: dict
    workdir: Path
    seconds: float
    qemu: str = "system"     # which QEMU booted it (Qemu.describe())
    # what the guest asked the host to do (emunode-host): (seconds, request, reply)
    host_events: list = dataclasses.field(default_factory=list)

    def problems(self):
        """BUG/WARNING/Oops lines and taints other than out-of-tree/unsigned; [] when clean.
        The lines of a report in KNOWN_REPORTS (see known_reports()) are not problems."""
        lines = self.kernel_log.splitlines()
        accepted = set()
        for first, last in _report_blocks(lines):
            if known_reports("\n".join(lines[first:last + 1])):
                accepted.update(range(first, last + 1))
        found = [l.strip() for i, l in enumerate(lines) if PROBLEM.search(l) and i not in accepted]
        bad = self.taint & ~ALLOWED_TAINT
        if bad:
            letters = "".join(c for i, c in enumerate(TAINT_LETTERS) if bad & (1 << i))
            found.append(f"kernel tainted {self.taint:#x} (unexpected flags: {letters})")
        return found

    def bar_copy(self, name):
        """The BAR file as it was when the guest ran `emunode-host bar_copy NAME`."""
        return self.bar_path.with_name(f"bar-{name}.bin")

    def known_reports(self):
        """Names of the accepted KNOWN_REPORTS in this boot's kernel log, in order."""
        return [name for name, _ in known_reports(self.kernel_log)]

    def __getitem__(self, i):
        return self.results[i]


class Node:
    """One emulated GPU + RDMA node: a kernel, a topology and an IOMMU mode."""

    def __init__(self, kernel=kernels.DEFAULT_KERNEL, topology="switch", iommu="translated",
                 bar_mib=64, rxe=True, log=print, qemu=None, native_hotplug=False):
        """`rxe`: True (Debian's rdma_rxe, rxe0 on eth0), False (no rxe0), or "dmabuf" (the test
        bed's dma-buf capable rxe from emunode.softroce, module and userspace provider, in place
        of Debian's; refused on kernels it cannot follow, with the reason).
        `qemu`: None (the host's qemu-system-x86_64, what every test uses), the name of a
        cached build from emunode.qemu ("acs": switch downstream ports with ACS), or a
        emunode.qemu.Qemu(binary, datadir) for any other binary and its -L data directory.
        `native_hotplug`: the guest's pciehp (not ACPI) handles hot-unplug/plug of the slots."""
        topo.check(topology, iommu)
        if isinstance(qemu, str) and qemu not in qemus.known_qemus():
            raise HarnessError(f"unknown QEMU '{qemu}': choose one of {', '.join(qemus.known_qemus())}")
        self.qemu = qemu
        if not kernels.is_known(kernel):
            raise HarnessError(f"unknown kernel '{kernel}': choose one of "
                               f"{', '.join(kernels.known_kernels() + debug_kernels())}")
        if rxe not in (True, False, "dmabuf"):
            raise HarnessError(f"rxe={rxe!r}: choose True (Debian's rxe), False or 'dmabuf'")
        if rxe == "dmabuf" and softroce.supported(kernel):
            raise HarnessError(f"no dma-buf rxe on kernel {kernel}: {softroce.supported(kernel)}")
        self.kernel_name, self.topology, self.iommu = kernel, topology, iommu
        self.bar_mib, self.rxe, self.log = bar_mib, rxe, log
        self.native_hotplug = native_hotplug

    def run(self, commands, timeout=600, cmd_timeout=None, allow_problems=False, files=None,
            extra_cmdline=(), bar_init=b"", bar_host=None, link=None):
        """Boot, run `commands` in order (one `sh` script each), power off, return RunResult.

        `files` maps guest paths (e.g. "/in/pattern") to bytes placed there before the commands
        run; `extra_cmdline` adds kernel command-line words; `bar_init` bytes are written at the
        start of the GPU BAR backing file before the guest boots (the rest reads zero);
        `bar_host(bar_path, stop_event)` runs in a thread while the guest runs (the host acting
        on the BAR file during the run, e.g. softroce.HostFill); `link` (emunode.pair.LinkEnd)
        puts the NIC on a link to another node instead of an empty hub (NodePair does this).

        Raises GuestError (with the console log) when the guest does not finish, the RDMA stack
        does not come up, or — unless allow_problems — its kernel log has a BUG/WARNING/Oops or
        an unexpected taint."""
        qemu = qemus.resolve(self.qemu, log=self.log)
        qemu_argv = qemu.argv()
        kernel = kernels.ensure_kernel(self.kernel_name, log=self.log)
        runs = build_dir() / "runs"
        runs.mkdir(parents=True, exist_ok=True)
        _prune(runs, keep=30)
        work = runs / (f"{time.strftime('%Y%m%d-%H%M%S')}-{self.kernel_name}-{self.topology}-"
                       f"{self.iommu}-{os.getpid()}-{time.monotonic_ns() % 100000}"
                       + (f"-node-{link.name}" if link else ""))
        work.mkdir()
        bar = work / "gpu-bar.bin"
        if len(bar_init) > self.bar_mib << 20:
            raise HarnessError(f"bar_init of {len(bar_init)} bytes does not fit the {self.bar_mib} MiB BAR")
        with open(bar, "wb") as f:
            f.write(bar_init)
            f.truncate(self.bar_mib << 20)
        env = {"GDRPEER_TOPOLOGY": self.topology, "GDRPEER_IOMMU": self.iommu,
               "GDRPEER_BAR_MIB": str(self.bar_mib), "GDRPEER_KERNEL": self.kernel_name,
               "EMUNODE_RXE": "1" if self.rxe else "0",
               "GDRPEER_RXE": "dmabuf" if self.rxe == "dmabuf" else "stock" if self.rxe else "none",
               "GDRPEER_DATA_DIR": "/gdrpeer/topology"}
        if link is not None:
            env.update(link.env())
        if cmd_timeout:
            env["EMUNODE_CMD_TIMEOUT"] = str(int(cmd_timeout))
        files = dict(files or {})
        if self.rxe == "dmabuf":
            files.update(softroce.guest_files(self.kernel_name, log=self.log))
        initrd = initramfs.initrd_for_run(kernel, list(commands), env, work, files)
        net = {} if link is None else {"netdev": link.netdev(), "mac": link.mac}
        margs, cmdline = topo.qemu_args(self.topology, self.iommu, bar, self.bar_mib,
                                        self.native_hotplug, **net)
        console, results = work / "console.log", work / "results.log"
        # no_timer_check: under a loaded host TCG can miss the IO-APIC timer check and panic.
        append = " ".join(["console=ttyS0", "panic=-1", "loglevel=6", "nokaslr", "no_timer_check",
                           "net.ifnames=0", *cmdline, *extra_cmdline])
        argv = [*qemu_argv, *margs, "-kernel", str(kernel.vmlinuz), "-initrd", str(initrd),
                "-append", append,
                "-chardev", f"file,id=con,path={console}", "-serial", "chardev:con",
                "-chardev", f"file,id=res,path={results}", "-serial", "chardev:res"]
        # QMP and the guest's request channel (ttyS2) on unix sockets: a short folder of their
        # own, as a socket path is limited to 108 bytes and the work folder can be deeper.
        sockdir = Path(tempfile.mkdtemp(prefix="emunode-"))
        qmp_sock, ctl_sock = sockdir / "qmp.sock", sockdir / "ctl.sock"
        argv += ["-chardev", f"socket,id=ctl,path={ctl_sock},server=on,wait=off",
                 "-serial", "chardev:ctl",
                 "-qmp", f"unix:{qmp_sock},server=on,wait=off", "-monitor", "none"]
        (work / "qemu.cmd").write_text(" ".join(argv) + "\n")
        start = time.monotonic()
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT,
                                pass_fds=() if link is None else (link.sock.fileno(),))
        stop, helper = threading.Event(), None
        if bar_host is not None:
            helper = threading.Thread(target=bar_host, args=(bar, stop), daemon=True)
            helper.start()
        host = HostControl(qmp_sock, ctl_sock, {"gpu": {"device": topo.gpu_device(self.topology),
                                     "backend": topo.gpu_backend(bar, self.bar_mib)}}, self.log,
                           rendezvous=link and link.rendezvous, party=link and link.name,
                           bar_path=bar)
        host.start()
        try:
            qout, _ = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            qout, _ = proc.communicate()
            stop.set()
            raise GuestError(f"guest ({self._what(qemu)}) did not finish within {timeout} s; "
                             f"logs in {work}", _read(console))
        finally:
            host.join(timeout=10)
            shutil.rmtree(sockdir, ignore_errors=True)
        seconds = time.monotonic() - start
        if helper is not None:
            stop.set()
            helper.join()
        if host.error:
            self.log(f"emunode: {host.error}")
        if host.events:
            (work / "host-events.log").write_text(
                "".join(f"{t} {req} -> {rep}\n" for t, req, rep in host.events))
        con = _read(console)
        if proc.returncode != 0:
            raise GuestError(f"QEMU exited with {proc.returncode} ({self._what(qemu)}): "
                             f"{qout.decode(errors='replace').strip()[-300:]}", con)
        records, done = _parse(_read(results))
        if not done:
            raise GuestError(f"guest ({self._what(qemu)}) stopped before finishing its commands "
                             f"(panic or power-off); logs in {work}", con)
        setup = _one(records, "setup", "modules", "setup")
        outs = [records.get(("cmd", f"{i:04d}")) for i in range(len(commands))]
        results_list = [CommandResult(c, o[0].decode(errors="replace"), o[1])
                        for c, o in zip(commands, outs)]
        taint = int(_one(records, "taint", "kernel", "taint").output.strip() or 0)
        dmesg = records.get(("dmesg", "kernel"), (con.encode(), 0))[0].decode(errors="replace")
        files = {name: data for (kind, name), (data, _) in records.items() if kind == "file"}
        res = RunResult(self.kernel_name, self.topology, self.iommu, results_list, setup, dmesg,
                        con, taint, bar, files, work, seconds, qemu.describe(), list(host.events))
        (work / "dmesg.log").write_text(dmesg)
        if setup.status != 0:
            raise GuestError(f"the node's RDMA stack did not come up ({self._what(qemu)}):\n"
                             f"{setup.output.strip()}", dmesg)
        if not allow_problems and res.problems():
            raise GuestError(f"guest kernel log has problems ({self._what(qemu)}): "
                             + "; ".join(res.problems()[:5]), dmesg)
        return res

    def _what(self, qemu=None):
        what = f"kernel {self.kernel_name}, topology {self.topology}, iommu {self.iommu}"
        return what if qemu is None or qemu is qemus.SYSTEM else f"{what}, QEMU {qemu.describe()}"


def _read(path):
    try:
        return Path(path).read_bytes().decode(errors="replace")
    except FileNotFoundError:
        return ""


def _parse(text):
    """Records from the results port: {(kind, name): (payload bytes, status)}, done flag."""
    records, cur, buf, done = {}, None, [], False
    for line in text.splitlines():
        line = line.rstrip("\r")
        if line.startswith("@@EMUNODE BEGIN "):
            cur, buf = tuple(line.split()[2:4]), []
        elif line.startswith("@@EMUNODE END ") and cur is not None:
            parts = line.split()
            records[cur] = (base64.b64decode("".join(buf)), int(parts[4]))
            cur = None
        elif line == "@@EMUNODE DONE":
            done = True
        elif cur is not None:
            buf.append(line.strip())
    return records, done


def _one(records, kind, name, what):
    if (kind, name) not in records:
        raise GuestError(f"guest sent no {what} record", "")
    data, status = records[(kind, name)]
    return CommandResult(what, data.decode(errors="replace"), status)


def _prune(runs, keep):
    old = sorted(runs.iterdir(), key=lambda p: p.stat().st_mtime)[:-keep]
    for p in old:
        shutil.rmtree(p, ignore_errors=True)

"""The emulated GPU node itself: each topology and IOMMU mode is what it claims to be.

One boot per (topology, IOMMU mode) runs every probe below; the tests read its results. What is
checked comes from inside the guest (lspci -tv, sysfs, rdma-core) and, for the "GPU BAR", from
the host file that backs it.
"""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from emunode import GuestError, HarnessError, Node

REPO = Path(__file__).resolve().parents[1]
PATTERN_OFFSET = 0x10000
PATTERN = os.urandom(4096)
# x86 /dev/mem write() stops at the end of RAM; busybox devmem mmaps /dev/mem, which reaches an
# unclaimed BAR (STRICT_DEVMEM allows non-RAM). One 64-bit store per word of the pattern.
DEVMEM_SCRIPT = "".join(
    f"devmem $((b + {i})) 64 0x{int.from_bytes(PATTERN[i:i + 8], 'little'):016x}\n"
    for i in range(0, len(PATTERN), 8)).encode()

PROBE = {
    "lspci_tree": "lspci -tv",
    "paths": 'for d in $GDRPEER_GPU_BDF $GDRPEER_NIC_BDF $GDRPEER_EDU_BDF; do '
             'echo "$d $(readlink -f /sys/bus/pci/devices/$d)"; done',
    "port_types": 'for p in /sys/bus/pci/devices/*; do b=${p##*/}; '
                  'echo "$b $(lspci -s $b -vv | grep -o "Express ([^)]*) [A-Za-z ]*" | head -1)"; done',
    "iommu": 'for d in $GDRPEER_GPU_BDF $GDRPEER_NIC_BDF $GDRPEER_EDU_BDF; do '
             'echo "$d $(cat /sys/bus/pci/devices/$d/iommu_group/type 2>/dev/null || echo none)"; '
             'done; echo "groups $(ls /sys/kernel/iommu_groups | wc -l)"',
    "numa": 'for d in $GDRPEER_GPU_BDF $GDRPEER_NIC_BDF; do '
            'echo "$d $(cat /sys/bus/pci/devices/$d/numa_node)"; done',
    "rxe": "ibv_devinfo -d rxe0",
    # The client starts once the server listens on its TCP port (18515 = 0x4853), not after a sleep.
    "rc_loopback": "ibv_rc_pingpong -d rxe0 -g 0 -n 100 >/tmp/server.log 2>&1 & "
                   "for i in $(seq 300); do cat /proc/net/tcp /proc/net/tcp6 2>/dev/null | "
                   "grep -q ':4853 [0-9A-F:]* 0A ' && break; sleep 0.1; done; "
                   "ibv_rc_pingpong -d rxe0 -g 0 -n 100 127.0.0.1; rc=$?; wait $!; src=$?; "
                   "echo '--- server'; cat /tmp/server.log; [ $rc = 0 ] && [ $src = 0 ]",
    # Write the pattern into BAR2 (memory decoding is off until a driver enables it).
    "bar_write": "start=$(sed -n 3p /sys/bus/pci/devices/$GDRPEER_GPU_BDF/resource | cut -d' ' -f1); "
                 "setpci -s $GDRPEER_GPU_BDF COMMAND=0x0002:0x0002 && "
                 f"b=$((start + {PATTERN_OFFSET})) && set -e && . /in/devmem.sh && echo bar2=$start",
    "module": "insmod /gdrpeer/modules/gdrpeer.ko && test -d /sys/module/gdrpeer && "
              "echo loaded && rmmod gdrpeer && ! test -e /sys/module/gdrpeer && echo unloaded",
}
NAMES = list(PROBE)

CASES = [(t, m) for t in ("switch", "rootports", "twobridges")
         for m in ("off", "translated", "passthrough")]


@pytest.fixture(scope="module", params=CASES, ids=[f"{t}-{m}" for t, m in CASES])
def probe(request, node_factory, gdrpeer_ko):
    topology, iommu = request.param
    res = node_factory(topology, iommu).run(list(PROBE.values()), timeout=400,
                                            files={"/in/devmem.sh": DEVMEM_SCRIPT})
    out = {name: res.results[i] for i, name in enumerate(NAMES)}
    return topology, iommu, res, out


def _kv(text):
    return dict(line.split(" ", 1) for line in text.strip().splitlines() if " " in line)


def _ancestors(sysfs_path):
    """BDFs from the host bridge down to the device, from a /sys/devices/pciDDDD:BB/... path."""
    return re.findall(r"[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]", sysfs_path)


def _siblings_in_tree(tree, a, b):
    """True when the lspci -tv lines naming `a` and `b` hang off the same bus line, i.e. their
    branch markers (+- or \\-) are in the same column with only tree lines between them."""
    lines = tree.splitlines()
    ia = next(i for i, l in enumerate(lines) if a in l)
    ib = next(i for i, l in enumerate(lines) if b in l)
    ca = max(lines[ia].rfind("+-", 0, lines[ia].find(a)), lines[ia].rfind("\\-", 0, lines[ia].find(a)))
    cb = max(lines[ib].rfind("+-", 0, lines[ib].find(b)), lines[ib].rfind("\\-", 0, lines[ib].find(b)))
    if ca != cb or ca < 0:
        return False
    lo, hi = sorted((ia, ib))
    return all(len(l) > ca and l[ca] in "|+\\" for l in lines[lo + 1:hi])


def test_every_probe_ran(probe):
    _, _, res, out = probe
    failed = {n: (r.status, r.output[-500:]) for n, r in out.items() if r.status != 0}
    assert failed == {}
    assert res.problems() == []


def test_pci_placement(probe):
    topology, _, res, out = probe
    paths = _kv(out["paths"].output)
    types = _kv(out["port_types"].output)
    gpu_bdf, nic_bdf = [line.split()[0] for line in out["paths"].output.splitlines()[:2]]
    gpu, nic = _ancestors(paths[gpu_bdf]), _ancestors(paths[nic_bdf])
    tree = out["lspci_tree"].output
    assert "Inter-VM shared memory" in tree and "82574L" in tree
    if topology == "switch":
        # GPU and NIC: device <- downstream port <- one upstream port <- root port
        assert gpu[-2] != nic[-2]
        assert gpu[-3] == nic[-3]
        assert "Downstream Port" in types[gpu[-2]] and "Downstream Port" in types[nic[-2]]
        assert "Upstream Port" in types[gpu[-3]]
        assert "Root Port" in types[gpu[-4]]
        gpu_line = next(l for l in tree.splitlines() if "Inter-VM" in l)
        assert _siblings_in_tree(tree, "Inter-VM", "82574L"), tree
        # the switch's secondary bus range covers both devices' buses
        buses = re.findall(r"\[([0-9a-f]{2})-([0-9a-f]{2})\]", gpu_line)
        g, n = int(gpu_bdf[5:7], 16), int(nic_bdf[5:7], 16)
        assert any(int(lo, 16) <= min(g, n) and max(g, n) <= int(hi, 16) for lo, hi in buses[1:])
    elif topology == "rootports":
        assert len(gpu) == 2 and len(nic) == 2, (gpu, nic)
        assert gpu[0] != nic[0]
        assert "Root Port" in types[gpu[0]] and "Root Port" in types[nic[0]]
        assert paths[gpu_bdf].startswith("/sys/devices/pci0000:00/")
        assert paths[nic_bdf].startswith("/sys/devices/pci0000:00/")
    else:
        assert paths[gpu_bdf].startswith("/sys/devices/pci0000:00/")
        nic_root = re.match(r"/sys/devices/pci0000:([0-9a-f]{2})/", paths[nic_bdf]).group(1)
        assert nic_root != "00"
        assert "Root Port" in types[nic[0]]
        assert f"[0000:{nic_root}]" in tree
        numa = _kv(out["numa"].output)
        assert numa[nic_bdf] == "1"
        assert numa[gpu_bdf] in ("0", "-1")  # pcie.0 carries no proximity domain in QEMU


def test_iommu_mode(probe):
    _, iommu, res, out = probe
    types = _kv(out["iommu"].output)
    groups = int(types.pop("groups"))
    if iommu == "off":
        assert groups == 0 and set(types.values()) == {"none"}
    elif iommu == "translated":
        assert groups > 0 and set(types.values()) <= {"DMA", "DMA-FQ"}, types
    else:
        assert groups > 0 and set(types.values()) == {"identity"}, types


def test_rxe_port_active_and_rc_loopback(probe):
    _, _, _, out = probe
    assert re.search(r"state:\s+PORT_ACTIVE", out["rxe"].output)
    rc = out["rc_loopback"]
    assert rc.status == 0, rc.output
    assert rc.output.count("100 iters in") == 2, rc.output


def test_bar_write_lands_in_backing_file(probe):
    _, _, res, out = probe
    assert out["bar_write"].status == 0, out["bar_write"].output
    data = res.bar_path.read_bytes()
    assert data[PATTERN_OFFSET:PATTERN_OFFSET + len(PATTERN)] == PATTERN
    assert data[:PATTERN_OFFSET] == bytes(PATTERN_OFFSET)  # nothing else was touched
    assert data[PATTERN_OFFSET + len(PATTERN):] == bytes(len(data) - PATTERN_OFFSET - len(PATTERN))


def test_module_loads_and_unloads(probe):
    _, _, _, out = probe
    m = out["module"]
    assert m.status == 0 and "loaded" in m.output and "unloaded" in m.output, m.output


# ---- broken inputs: one line naming the problem, never a traceback ---------------------------

def _emunode_cli(*args, env=None):
    env = dict(os.environ if env is None else env, PYTHONPATH=str(REPO / "tests"))
    return subprocess.run([sys.executable, "-m", "emunode", *args], capture_output=True,
                          text=True, env=env, timeout=600)


@pytest.mark.parametrize("args,message", [
    (["run", "--kernel", "9.9", "--", "true"], "unknown kernel '9.9'"),
    (["run", "--topology", "mesh", "--", "true"], "unknown topology 'mesh'"),
    (["run", "--iommu", "sometimes", "--", "true"], "unknown IOMMU mode 'sometimes'"),
    (["run", "--bar-mib", "48", "--", "true"], "BAR size 48 MiB is not a power of two"),
])
def test_bad_arguments_give_one_line(args, message):
    p = _emunode_cli(*args)
    assert p.returncode == 2
    assert p.stderr.strip().splitlines() == [f"emunode: error: {p.stderr.split('error: ', 1)[1].strip()}"]
    assert message in p.stderr and "Traceback" not in p.stderr


def test_missing_qemu_is_named(tmp_path):
    env = dict(os.environ, PATH=str(tmp_path))  # no qemu-system-x86_64 on this PATH
    p = _emunode_cli("run", "--", "true", env=env)
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert "qemu-system-x86_64 not found" in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1


def test_kernel_that_does_not_boot(kernel_name):
    # No usable init: the kernel panics, QEMU stops (-no-reboot), the run must fail with the log.
    with pytest.raises(GuestError) as err:
        Node(kernel_name, "switch", "off", rxe=False).run(
            ["true"], timeout=300, extra_cmdline=["rdinit=/nonexistent", "root=/dev/nonexistent"])
    assert "stopped before finishing" in err.value.args[0]
    assert "Kernel panic" in err.value.log
    p = _emunode_cli("run", "--kernel", kernel_name, "--no-rxe", "--append", "rdinit=/nonexistent",
                     "--append", "root=/dev/nonexistent", "--", "true")
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1 and "stopped before finishing" in p.stderr


def test_guest_problems_fail_the_run(kernel_name):
    # A WARNING in the guest's kernel log must fail a run that does not allow it.
    node = Node(kernel_name, "switch", "off", rxe=False)
    with pytest.raises(GuestError) as err:
        node.run(["echo 'WARNING: CPU: 0 PID: 1 at fake.c:1 injected by the test' >/dev/kmsg"],
                 timeout=300)
    assert "kernel log has problems" in err.value.args[0]
    res = node.run(["echo 'WARNING: CPU: 0 PID: 1 at fake.c:1 injected' >/dev/kmsg"], timeout=300,
                   allow_problems=True)
    assert any("injected" in p for p in res.problems())


def test_unknown_names_raise_harness_error():
    with pytest.raises(HarnessError, match="unknown kernel"):
        Node("4.19")
    with pytest.raises(HarnessError, match="unknown topology"):
        Node("6.1", "ring")


@pytest.mark.parametrize("line,problem", [
    ("WARNING: possible circular locking dependency detected", True),
    ("BUG: KASAN: slab-use-after-free in gdrpeer_release+0x1c/0x80 [gdrpeer]", True),
    ("BUG: KFENCE: out-of-bounds read in gdrpeer_ioctl+0x2a/0x300", True),
    ("KFENCE: use-after-free read in foo", True),
    ("DMA-API: pci 0000:00:05.0: device driver failed to check map error", True),
    ("DMA-API: debugging out of memory - disabling", True),
    ("ODEBUG: free active (active state 0) object: 0000 object type: timer_list", True),
    ("inconsistent {SOFTIRQ-ON-W} -> {IN-SOFTIRQ-W} usage.", False),
    ("WARNING: inconsistent lock state", True),
    ("BUG: sleeping function called from invalid context at mm/slab.h:742", True),
    ("turning off the locking correctness validator.", True),
    ("=============================", False),
    ("DMA-API: preallocated 65536 debug entries", False),
    ("DMA-API: debugging enabled by kernel config", False),
    ("kfence: initialized - using 2097152 bytes for 255 objects at 0x(____ptrval____)", False),
    ("gdrpeer: 0000:03:00.0 BAR2 bound as device 0", False),
])
def test_kernel_report_lines(line, problem):
    """The lines the debug kernel's checkers print fail a run; their start-up lines do not."""
    from emunode.node import PROBLEM
    assert bool(PROBLEM.search(line)) == problem


KERNEL_REPORTS = Path(__file__).resolve().parent / "kernel-reports"


def _result_with_log(log):
    from emunode.node import RunResult
    return RunResult("6.1-debug", "switch", "translated", [], None, log, log, 0, Path("/dev/null"),
                     {}, Path("/tmp"), 0.0)


def test_known_pciehp_report_is_accepted_only_as_is():
    """pciehp's own lockdep report on hot-unplug (kept from a 6.1-debug boot with no gdrpeer
    module loaded) passes; the same report with a module's frame, a gdrpeer lock or another
    lock does not, and a report after it still fails the run."""
    report = (KERNEL_REPORTS / "pciehp-reset-lock-6.1-debug.txt").read_text()
    log = "pcieport 0000:02:00.0: pciehp: Slot(0): Attention button pressed\n" + report + "ok\n"
    res = _result_with_log(log)
    assert res.known_reports() == ["pciehp-reset-lock-vs-rescan-remove"]
    assert res.problems() == []

    frame = re.search(r"^( +)pciehp_ist\+0x[0-9a-f]+/0x[0-9a-f]+$", report, re.M)
    assert frame, "the kept report has no pciehp_ist frame"
    variants = {
        "module frame": report.replace(frame.group(0), frame.group(1) + "gdrpeer_pci_remove+0x10/0x80 [gdrpeer]\n" + frame.group(0), 1),
        "unknown frame": report.replace(frame.group(0), frame.group(1) + "device_release_driver+0x10/0x80\n" + frame.group(0), 1),
        "other lock": report.replace("pci_rescan_remove_lock", "&gdev->lock"),
        "other task": re.sub(r"irq/\d+-pciehp/\d+ is trying", "gdrpeer_fuzz/123 is trying", report),
    }
    for what, text in variants.items():
        res = _result_with_log(text)
        assert res.known_reports() == [], what
        assert any("possible circular locking" in p for p in res.problems()), what

    cut = report[:report.index("Call Trace:")]
    inside = report.replace(" <TASK>\n", " <TASK>\nBUG: KASAN: wild-memory-access in foo+0x1/0x2\n", 1)
    for what, text in {"cut short": cut, "another report inside": inside}.items():
        res = _result_with_log(text + "ok\n")
        assert res.known_reports() == [], what
        assert res.problems(), what

    later = "BUG: KASAN: slab-use-after-free in gdrpeer_release+0x1c/0x80 [gdrpeer]\n"
    res = _result_with_log(log + later)
    assert res.problems() == [later.strip()]
@pytest.mark.parametrize("checker, says", [("true", "1"), ("false", "")])
def test_checker_probe_answers_for_the_checker(checker, says):
    """The checker-valid.sh the 7.x toolchain chroot gets: kbuild checks with C=1 only when it
    prints 1, so a checker that fails must get no answer (then kcheck.mk fails the check)."""
    probe = Path(__file__).resolve().parent / "emunode" / "checker-valid.sh"
    out = subprocess.run([str(probe), checker, "--arch=x86_64", "-m64"], capture_output=True,
                         text=True).stdout
    assert out.strip() == says

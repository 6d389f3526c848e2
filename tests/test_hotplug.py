"""Real hot-unplug of the "GPU" in the emulated node: QEMU device_del / device_add over QMP,
asked for by the guest mid-run (emunode-host), handled by the guest's pciehp.

One boot (switch topology, IOMMU translating, native PCIe hotplug):
  1. gdrpeer_selftest_hotplug: device_del while a handle and a dma-buf are mapped and the edu
     stand-in HCA runs DMA through an import: everything is revoked, then after re-plug and
     bind the device serves again. It needs gdrpeer to be the device's PCI driver
     (/sys/bus/pci/drivers/gdrpeer); it skips, saying so, where it is not. gdrpeer unloads.
  2. the mechanics, with no driver loaded: the ivshmem device is listed, device_del takes it
     away (gone from lspci and sysfs), device_add brings it back at the same address.
The revocation goes first: on the debug kernel the first hot-unplug of a boot ends lockdep
(below), and gdrpeer's remove() runs before that report, so lockdep still checks it.

On the debug kernel every pciehp hot-unplug gives one lockdep report that is pciehp's own
(emunode.node.KNOWN_REPORTS, "pciehp-reset-lock-vs-rescan-remove"); the harness accepts exactly
that report, and a control boot with no gdrpeer module loaded must still give it (else the entry
has to go). Lockdep switches itself off after any report, so a boot that had it says so.
"""

import re

import pytest

from emunode.debugkernel import debug_kernels
from helpers.guest import say_lockdep_off
from helpers.paths import BIN
from helpers.tap import tap

WAIT = "for i in $(seq 1 100); do test -e /sys/bus/pci/devices/$GDRPEER_GPU_BDF && break; sleep 0.2; done"
COMMANDS = {
    "load": "insmod /gdrpeer/modules/gdrpeer.ko pcibar=$GDRPEER_GPU_BDF && "
            "insmod /gdrpeer/modules/gdrpeer_edu_hca.ko",
    "revoke": "gdrpeer_selftest_hotplug",
    "unload": "rmmod gdrpeer_edu_hca && rmmod gdrpeer && echo unloaded",
    "mechanics": "echo before; lspci -n -d 1af4:1110; "
                 "emunode-host device_del gpu; echo del_rc=$?; "
                 "echo after_del; lspci -n -d 1af4:1110; "
                 "test -e /sys/bus/pci/devices/$GDRPEER_GPU_BDF && echo sysfs_still_there; "
                 "emunode-host device_add gpu; echo add_rc=$?; " + WAIT + "; "
                 "echo after_add; lspci -n -s $GDRPEER_GPU_BDF",
}


PCIEHP_REPORT = "pciehp-reset-lock-vs-rescan-remove"
# the control boot: no gdrpeer or test module loaded, the same device_del
CONTROL = ("cat /proc/modules; echo modules_end; emunode-host device_del gpu; echo del_rc=$?; "
           "test -e /sys/bus/pci/devices/$GDRPEER_GPU_BDF || echo gone")


@pytest.fixture(scope="module")
def run(node_factory, gdrpeer_ko):
    if not (BIN / "gdrpeer_selftest_hotplug").exists():
        pytest.fail(f"{BIN / 'gdrpeer_selftest_hotplug'} is missing (make selftests)")
    res = node_factory("switch", "translated", bar_mib=64, rxe=False,
                       native_hotplug=True).run(list(COMMANDS.values()), timeout=900)
    say_lockdep_off(res)
    return res, dict(zip(COMMANDS, res.results))


def test_device_del_and_add_mechanics(run):
    res, out = run
    text = out["mechanics"].output
    before, rest = text.split("after_del", 1)
    after_del, after_add = rest.split("after_add", 1)
    assert "1af4:1110" in before, text
    assert "del_rc=0" in before and "add_rc=0" in after_del, text
    assert "1af4:1110" not in after_del, "still listed after device_del:\n" + text
    assert "sysfs_still_there" not in after_del, text
    assert "1af4:1110" in after_add, "not back after device_add:\n" + text
    # the guest's pciehp did it: attention button, power off; power on, card present
    assert re.search(r"pciehp: Slot\(\d+\): Powering off due to button press", res.kernel_log)
    assert re.search(r"pciehp: Slot\(\d+\):? Powering on due to button press", res.kernel_log)
    assert [e[1] for e in res.host_events][-2:] == ["device_del gpu", "device_add gpu"]
    assert all(e[2].startswith("ok") for e in res.host_events), res.host_events


def test_revocation_on_hot_unplug(run):
    res, out = run
    assert out["load"].status == 0, out["load"].output
    r = out["revoke"]
    skip = re.search(r"^ok \d+ # SKIP (.*)$|^1\.\.0 # SKIP (.*)$", r.output, re.M)
    if skip:
        pytest.skip("gdrpeer_selftest_hotplug: " + (skip.group(1) or skip.group(2)))
    plan, ok, not_ok, skipped, tot = tap(r.output)
    # the plan the program prints before its first test (ksft_set_plan), every one of them ok
    assert plan and ok == plan, r.output
    assert not not_ok, "\n".join(not_ok) + "\n" + r.output
    assert tot == {"pass": plan, "fail": 0, "skip": 0, "error": 0}, r.output
    assert out["unload"].status == 0 and "unloaded" in out["unload"].output, out["unload"].output
    assert res.problems() == []


def test_unload_after_hotplug(run):
    """gdrpeer unloads after its device was unplugged and re-plugged while it was bound."""
    _, out = run
    assert out["unload"].status == 0 and "unloaded" in out["unload"].output, out["unload"].output


def test_pciehp_lockdep_report_comes_without_gdrpeer(node_factory, kernel_name):
    """The report the harness accepts on hot-unplug is the kernel's own: a boot with no gdrpeer
    (or test) module loaded and the same QMP device_del gives exactly it. If a kernel stops
    giving it, this fails: then the KNOWN_REPORTS entry must go."""
    if kernel_name not in debug_kernels():
        pytest.skip(f"kernel {kernel_name} has no lockdep (the report exists on the debug kernel only)")
    res = node_factory("switch", "translated", bar_mib=64, rxe=False,
                       native_hotplug=True).run([CONTROL], timeout=900, allow_problems=True)
    out = res.results[0].output
    modules = out.split("modules_end", 1)[0]
    assert "gdrpeer" not in modules, modules
    assert "del_rc=0" in out and "gone" in out, out
    assert res.known_reports() == [PCIEHP_REPORT], (
        f"{kernel_name} without gdrpeer no longer gives the accepted pciehp lockdep report "
        f"(got {res.known_reports()}): remove it from emunode.node.KNOWN_REPORTS")
    assert res.problems() == [], "\n".join(res.problems())
    say_lockdep_off(res)

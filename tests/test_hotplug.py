"""Real hot-unplug of the "GPU" in the emulated node: QEMU device_del / device_add over QMP,
asked for by the guest mid-run (emunode-host), handled by the guest's pciehp.

One boot (switch topology, IOMMU translating, native PCIe hotplug):
  1. the mechanics, with no driver loaded: the ivshmem device is listed, device_del takes it
     away (gone from lspci and sysfs), device_add brings it back at the same address;
  2. gdrpeer_selftest_hotplug: the same while a handle and a dma-buf are mapped and the edu
     stand-in HCA runs DMA through an import: everything is revoked, then after re-plug and
     bind the device serves again. It needs gdrpeer to be the device's PCI driver
     (/sys/bus/pci/drivers/gdrpeer); it skips, saying so, where it is not.
"""

import re
from pathlib import Path

import pytest

from test_driver import tap

REPO = Path(__file__).resolve().parents[1]
BIN = REPO / "build" / "bin"

WAIT = "for i in $(seq 1 100); do test -e /sys/bus/pci/devices/$GDRPEER_GPU_BDF && break; sleep 0.2; done"
COMMANDS = {
    "mechanics": "echo before; lspci -n -d 1af4:1110; "
                 "emunode-host device_del gpu; echo del_rc=$?; "
                 "echo after_del; lspci -n -d 1af4:1110; "
                 "test -e /sys/bus/pci/devices/$GDRPEER_GPU_BDF && echo sysfs_still_there; "
                 "emunode-host device_add gpu; echo add_rc=$?; " + WAIT + "; "
                 "echo after_add; lspci -n -s $GDRPEER_GPU_BDF",
    "load": "insmod /gdrpeer/modules/gdrpeer.ko pcibar=$GDRPEER_GPU_BDF && "
            "insmod /gdrpeer/modules/gdrpeer_edu_hca.ko",
    "revoke": "gdrpeer_selftest_hotplug",
    "unload": "rmmod gdrpeer_edu_hca && rmmod gdrpeer && echo unloaded",
}


@pytest.fixture(scope="module")
def run(node_factory, gdrpeer_ko):
    if not (BIN / "gdrpeer_selftest_hotplug").exists():
        pytest.fail(f"{BIN / 'gdrpeer_selftest_hotplug'} is missing (make selftests)")
    res = node_factory("switch", "translated", bar_mib=64, rxe=False,
                       native_hotplug=True).run(list(COMMANDS.values()), timeout=900)
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
    assert [e[1] for e in res.host_events][:2] == ["device_del gpu", "device_add gpu"]
    assert all(e[2].startswith("ok") for e in res.host_events[:2]), res.host_events


def test_revocation_on_hot_unplug(run):
    res, out = run
    assert out["load"].status == 0, out["load"].output
    r = out["revoke"]
    skip = re.search(r"^ok \d+ # SKIP (.*)$|^1\.\.0 # SKIP (.*)$", r.output, re.M)
    if skip:
        pytest.skip("gdrpeer_selftest_hotplug: " + (skip.group(1) or skip.group(2)))
    plan, ok, not_ok, skipped, tot = tap(r.output)
    assert plan == 9, r.output
    assert not not_ok, "\n".join(not_ok) + "\n" + r.output
    assert tot == {"pass": 9, "fail": 0, "skip": 0, "error": 0}, r.output
    assert out["unload"].status == 0 and "unloaded" in out["unload"].output, out["unload"].output
    assert res.problems() == []


def test_unload_after_hotplug(run):
    """gdrpeer bound to a device that was unplugged and re-plugged before it loaded unloads."""
    _, out = run
    assert out["unload"].status == 0 and "unloaded" in out["unload"].output, out["unload"].output

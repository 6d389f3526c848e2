"""`gdrpeer check --sysfs-root` and `gdrpeer snapshot` on synthetic sysfs trees built here (real
config-space bytes with PCIe and ACS capabilities), and on this machine's live sysfs (which, like
the H100 node, has no lspci in use and no IOMMU groups)."""

import json
import os
import subprocess
import tarfile
from pathlib import Path

import pytest

from helpers.check_cli import gdrpeer_bin, run
from helpers.fake_sysfs import make_node

def test_switch_pair_is_pix_and_optimal(tmp_path):
    root = make_node(tmp_path / "n")
    p = run("check", "--json", "--sysfs-root", root, check_rc=0)
    j = json.loads(p.stdout)
    (pair,) = [x for x in j["pairs"] if x["a"] == "GPU0" and x["b"] == "NIC0"]
    assert pair["class"] == "PIX" and pair["cuda_case"] == "switch" and pair["nccl_gdr_default"]
    assert pair["verdict"] == "optimal"
    gpu = j["devices"][0]
    assert gpu["bars"][1]["size"] == 64 << 30
    assert [u["port"] for u in gpu["upstream"]] == ["switch-downstream", "switch-upstream", "root-port"]


def test_numa_node_of_an_offline_node_is_not_taken(tmp_path):
    # The kernel makes /sys/devices/system/node/nodeN for online nodes only (drivers/base/node.c
    # node_dev_init()); arm64 takes a root bus's node from _PXM without x86's node_online() check
    # (arch/arm64/kernel/pci.c against arch/x86/pci/acpi.c), so numa_node may name an offline node:
    # no CPU or memory of the input's one node is known to be local then, and the node is unknown.
    root = make_node(tmp_path / "n")
    (root / "sys/devices/system/node/node0").mkdir(parents=True)
    (root / "sys/devices/system/node/node0/cpulist").write_text("0-15\n")
    for numa in root.glob("sys/devices/pci0000:00/**/numa_node"):
        numa.write_text("1\n")
    j = json.loads(run("check", "--json", "--sysfs-root", root).stdout)
    assert j["node"]["numa_nodes"] == 1
    assert [(d["bdf"], d["numa"], d["cpu_affinity"]) for d in j["devices"]] == [
        ("0000:03:00.0", -1, None), ("0000:04:00.0", -1, None)]
    (said,) = [n["text"] for n in j["notes"] if n["rule"] == "input"]
    assert said.startswith("numa_node names a NUMA node without a /sys/devices/system/node folder (not online) for ")
    assert "0000:03:00.0 (numa_node 1)" in said and "0000:04:00.0 (numa_node 1)" in said


def test_acs_redirect_flips_verdict_and_prints_setpci(tmp_path):
    root = make_node(tmp_path / "n", acs_on_nic_port=0x000D)  # SrcValid ReqRedir CmpltRedir
    p = run("check", "--sysfs-root", root, check_rc=1)
    assert "[unreliable] GPU0-NIC0: ACS ReqRedir+ CmpltRedir+ on 0000:02:01.0 (switch-downstream)" in p.stdout
    assert "fix: setpci -s 0000:02:01.0 ECAP_ACS+0x6.w=0000:002c" in p.stdout
    assert "pci=disable_acs_redir=0000:02:01.0" in p.stdout
    dot = run("check", "--dot", "--sysfs-root", root).stdout
    assert "ACS redirect ON" in dot and "color=red" in dot


def test_translating_iommu_blocks(tmp_path):
    p = run("check", "--sysfs-root", make_node(tmp_path / "n", iommu="DMA-FQ"), check_rc=2)
    assert "(iommu-translating)" in p.stdout and "iommu=pt" in p.stdout
    run("check", "--sysfs-root", make_node(tmp_path / "m", iommu="identity"), check_rc=0)


def test_missing_peer_memory_blocks(tmp_path):
    p = run("check", "--sysfs-root", make_node(tmp_path / "n", modules=("nvidia",)), check_rc=2)
    assert "(software-peer-memory)" in p.stdout and "modprobe nvidia_peermem" in p.stdout
    run("check", "--skip", "software", "--sysfs-root", make_node(tmp_path / "m", modules=("nvidia",)), check_rc=0)


def test_snapshot_round_trip(tmp_path):
    root = make_node(tmp_path / "n", acs_on_nic_port=0x0004)
    snap = tmp_path / "node.tar"
    run("snapshot", snap, "--sysfs-root", root, check_rc=0)
    names = tarfile.open(snap).getnames()
    assert "sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:01.0/config" in names
    assert "sys/bus/pci/devices/0000:04:00.0" in names and "proc/modules" in names
    assert not any(n.endswith("/unrelated") for n in names)
    direct = json.loads(run("check", "--json", "--sysfs-root", root).stdout)
    via_tar = json.loads(run("check", "--json", snap).stdout)
    for j in (direct, via_tar):
        j["node"].pop("source"), j["node"].pop("format")
    assert direct == via_tar
    # /bin/tar reads our archive; the extracted copy checks the same.
    out = tmp_path / "x"
    out.mkdir()
    subprocess.run(["tar", "-xf", snap, "-C", out], check=True)
    extracted = json.loads(run("check", "--json", "--sysfs-root", out).stdout)
    extracted["node"].pop("source"), extracted["node"].pop("format")
    assert extracted == direct


def test_snapshot_not_writable_keeps_target_intact(tmp_path):
    p = subprocess.run([gdrpeer_bin(), "snapshot", str(tmp_path / "no/such/dir/x.tar")], capture_output=True, text=True)
    # One writer for --output and snapshot (issue 25): the path, what failed and the errno.
    assert p.returncode == 73 and "cannot create a file in" in p.stderr and "No such file or directory" in p.stderr


def test_not_a_sysfs_root_is_reported(tmp_path):
    p = run("check", "--sysfs-root", tmp_path)
    assert p.returncode == 66 and "no /sys/bus/pci/devices" in p.stderr


def test_live_check_and_snapshot_on_this_machine(tmp_path):
    """This machine has no GPU, no lspci in use and no IOMMU groups (like the H100 guest)."""
    p = run("check", "--no-cuda")
    assert p.returncode == 3, p.stderr  # no GPU: nothing checked (issue 25; exit 0 before)
    assert "live sysfs (sysfs)" in p.stdout
    snap = tmp_path / "live.tar"
    w = run("snapshot", "--no-cuda", snap, check_rc=0)
    functions = len(os.listdir("/sys/bus/pci/devices"))
    assert f" {functions} PCI functions" in w.stderr, w.stderr  # every function of this machine
    q = run("check", snap)
    assert q.returncode == 3, q.stderr
    # The snapshot carries what the live check read: the same devices, classes, pairs and verdict.
    live = json.loads(run("check", "--no-cuda", "--json", check_rc=3).stdout)
    saved = json.loads(run("check", "--json", snap, check_rc=3).stdout)
    for key in ("devices", "matrix", "pairs", "summary"):
        assert saved[key] == live[key], key

    # Stand-ins by --role, as the emulated node does: two PCI functions of this machine.
    fns = sorted(os.listdir("/sys/bus/pci/devices"))
    endpoints = [f for f in fns if not (Path("/sys/bus/pci/devices") / f / "subordinate_bus_number").exists()]
    if len(endpoints) < 2:
        pytest.skip("this machine has fewer than two PCI endpoints to stand in for a GPU and a NIC")
    r = run("check", "--json", "--skip", "software", "--gpu", endpoints[0], "--nic", endpoints[1], "--no-cuda")
    j = json.loads(r.stdout)
    assert [p["a_bdf"] for p in j["pairs"]] == [endpoints[0]] and j["pairs"][0]["b_bdf"] == endpoints[1]

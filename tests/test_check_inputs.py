"""`gdrpeer check` on the kinds of input people really have (issue 16): NVLink and NVSwitch, the
closest NIC, lspci text as it gets pasted, device roles, missing data, hwloc 3.0 and duplicate
addresses, virtual machines. Fixtures are in tests/reference/kinds/ (sources and the truth each
states: tests/reference/README.md); pasted-text variants and sysfs trees are made here."""

import json
import os
import re
import tarfile

import pytest

from helpers.check_cli import run
from helpers.fake_sysfs import make_node
from helpers.paths import REF

KINDS = REF / "kinds"


def check(path, *extra, rc=None):
    p = run("check", "--json", path, *extra)
    assert p.returncode in (0, 1, 2), p.stdout + p.stderr
    if rc is not None:
        assert p.returncode == rc, p.stdout
    return json.loads(p.stdout)


def pair(j, a, b):
    (p,) = [x for x in j["pairs"] if {x["a"], x["b"]} == {a, b}]
    return p


def cell(j, a, b):
    labels = j["matrix"]["labels"]
    return j["matrix"]["classes"][labels.index(a)][labels.index(b)]


def rules(p):
    return {f["rule"] for f in p["findings"]}


# ---- 1. NVLink and NVSwitch --------------------------------------------------------------------

def test_nccl_direct_nvlink_pairs_use_nvlink_not_the_sys_path():
    j = check(KINDS / "azure-ncv4-nccl-nvlink.xml")
    for a, b in (("GPU0", "GPU1"), ("GPU2", "GPU3")):
        p = pair(j, a, b)
        assert p["class"] == "SYS"  # the PCIe path crosses NUMA nodes ...
        assert p["nvlink"] == {"links": 12, "via": "direct", "bandwidth_mbps": 0, "inferred": False}
        assert p["verdict"] == "optimal" and rules(p) == {"path-nvlink"}  # ... but P2P goes over NVLink
        assert cell(j, a, b) == "NV12" and cell(j, b, a) == "NV12"
    p = pair(j, "GPU0", "GPU2")  # no NVLink there: judged on PCIe as before
    assert "nvlink" not in p and "path-sys" in rules(p) and p["verdict"] != "optimal"
    assert cell(j, "GPU0", "GPU2") == "SYS"
    text = run("check", KINDS / "azure-ncv4-nccl-nvlink.xml").stdout
    assert re.search(r"^GPU0 +X +NV12 +SYS +SYS ", text, re.M), text
    assert "NV# = a bonded set of # NVLinks" in text


def test_nccl_nvswitch_links_every_gpu_pair():
    j = check(KINDS / "h200-nccl-nvswitch.xml")
    gpus = [d["label"] for d in j["devices"] if d["role"] == "gpu"]
    assert len(gpus) == 3
    for i, a in enumerate(gpus):
        for b in gpus[i + 1:]:
            p = pair(j, a, b)
            assert p["nvlink"]["via"] == "nvswitch" and p["nvlink"]["links"] == 18, p
            assert p["verdict"] == "optimal" and cell(j, a, b) == "NV18"
    # GPU-NIC pairs keep their PCIe classes: each GPU shares a Broadcom switch with one NIC.
    pix = [p for p in j["pairs"] if p["b"].startswith("NIC") and p["class"] == "PIX"]
    assert len(pix) == 3


def test_hwloc_nvlinkbandwidth_matrix():
    j = check(KINDS / "hwloc-nvlinkbandwidth.xml")
    by_bdf = {d["bdf"]: d["label"] for d in j["devices"]}
    g0, g1, g2, g3 = (by_bdf[b] for b in ("0000:17:00.0", "0000:2a:00.0", "0000:9a:00.0", "0000:ab:00.0"))
    direct = pair(j, g0, g2)
    assert direct["nvlink"] == {"links": 0, "via": "direct", "bandwidth_mbps": 50000, "inferred": False}
    assert direct["class"] == "SYS" and direct["verdict"] == "optimal" and cell(j, g0, g2) == "NV"
    switched = pair(j, g1, g3)
    assert switched["nvlink"]["via"] == "nvswitch" and switched["nvlink"]["bandwidth_mbps"] == 150000
    for a, b in ((g0, g1), (g0, g3), (g1, g2), (g2, g3)):
        assert "nvlink" not in pair(j, a, b)
    # The NVSwitch (class 0x0680) is neither a GPU nor a NIC.
    assert "0000:05:00.0" not in by_bdf


def test_gpu_pairs_judged_on_pcie_say_nvlink_is_unknown():
    j = check(KINDS / "h200-vm-lspci-tvv.md")
    assert any(n["rule"] == "nvlink-unknown" for n in j["notes"])
    # An input that states NVLink has no such note.
    assert not any(n["rule"] == "nvlink-unknown" for n in check(KINDS / "azure-ncv4-nccl-nvlink.xml")["notes"])


def test_nvswitch_devices_on_the_pci_bus_link_the_gpus(tmp_path):
    tree = ("-[0000:00]-+-01.0-[01]----00.0  NVIDIA Corporation GH100 [H100 SXM5 80GB]\n"
            "           +-02.0-[02]----00.0  NVIDIA Corporation GH100 [H100 SXM5 80GB]\n"
            "           \\-03.0-[03]----00.0  NVIDIA Corporation GH100 [H100 NVSwitch]\n")
    f = tmp_path / "hgx.txt"
    f.write_text(tree)
    j = check(f)
    p = pair(j, "GPU0", "GPU1")
    assert p["nvlink"]["inferred"] and p["nvlink"]["via"] == "nvswitch" and p["verdict"] == "optimal"
    assert "inferred from the NVSwitch devices" in next(x["reason"] for x in p["findings"] if x["rule"] == "path-nvlink")


# ---- 2. the closest NIC ------------------------------------------------------------------------

CLOSEST = """<system version="1">
  <cpu numaid="0" arch="x86_64" vendor="GenuineIntel" familyid="6" modelid="143">
    <pci busid="0000:10:00.0" class="0x060400" vendor="0x1000" device="0xc030">
      <pci busid="0000:11:00.0" class="0x030200" vendor="0x10de" device="0x2330"><gpu dev="0"/></pci>
      <pci busid="0000:12:00.0" class="0x020700" vendor="0x15b3" device="0x1021"><nic><net name="mlx5_0"/></nic></pci>
    </pci>
  </cpu>
  <cpu numaid="1" arch="x86_64" vendor="GenuineIntel" familyid="6" modelid="143">
    <pci busid="0000:80:00.0" class="0x020700" vendor="0x15b3" device="0x1021"><nic><net name="mlx5_1"/></nic></pci>
    <pci busid="0000:90:00.0" class="0x060400" vendor="0x1000" device="0xc030">
      <pci busid="0000:91:00.0" class="0x030200" vendor="0x10de" device="0x2330"><gpu dev="1"/></pci>
      <pci busid="0000:92:00.0" class="0x020700" vendor="0x15b3" device="0x1021"><nic><net name="mlx5_2"/></nic></pci>
    </pci>
  </cpu>
</system>
"""


def test_use_nic_instead_names_the_closest_nic(tmp_path):
    f = tmp_path / "two-sockets.xml"
    f.write_text(CLOSEST)
    j = check(f)
    assert cell(j, "GPU1", "NIC1") == "PHB" and cell(j, "GPU1", "NIC2") == "PIX"
    fix = next(x["fix"] for x in pair(j, "GPU1", "NIC0")["findings"] if x["rule"] == "path-sys")
    assert fix.startswith("# use NIC2 (0000:92:00.0, mlx5_2, PIX) for GPU1 instead"), fix  # not NIC1, the first non-SYS
    fix = next(x["fix"] for x in pair(j, "GPU0", "NIC1")["findings"] if x["rule"] == "path-sys")
    assert fix.startswith("# use NIC0 (0000:12:00.0, mlx5_0, PIX) for GPU0 instead"), fix


# ---- 3. lspci text as people paste it ----------------------------------------------------------

def vm_tree():
    lines = (KINDS / "h200-vm-lspci-tvv.md").read_text().splitlines()
    start = lines.index("root@207-vm:~# lspci -tvv") + 1
    return lines[start:lines.index("```", start)]


def pasted_variants(tree, fragment=True):
    shifted = list(tree)
    i = next(k for k, l in enumerate(tree) if "ConnectX-7" in l and l[0] in " |")
    shifted[i] = shifted[i][1:]  # one branch a column left of its parent's '+'
    out = {
        "prompt": ["root@gpu-node:~# lspci -tv"] + tree,
        "dollar-prompt": ["user@gpu-node:~$ sudo lspci -tv"] + tree,
        "trailing-ellipsis": tree + ["..."],
        "indented-4": ["    " + l for l in tree],
        "tool-noise": ["pcilib: Cannot open /sys/bus/pci/devices/0000:00:01.0/config",
                       "lspci: Unable to load libkmod resources: error -2"] + tree,
        "column-off": shifted,
        "everything": ["root@gpu-node:~# lspci -tv", "pcilib: Error reading /proc/bus/pci/devices"]
                      + ["  " + l for l in shifted] + ["  ..."],
        # Fedora's and RHEL's bash prompt, PS1="[\u@\h \W]\\$ " (/etc/bashrc of Fedora's setup
        # package; bash(1) PROMPTING: \$ is '#' for root, '$' otherwise; \W the directory's base
        # name), in a session of several commands ending at the next, bare prompt.
        "fedora-root-session": ["[root@gpu-node ~]# uname -r", "5.14.0-427.13.1.el9_4.x86_64", "[root@gpu-node ~]# lspci -tv"]
                               + tree + ["[root@gpu-node ~]# cat /etc/redhat-release",
                                         "Red Hat Enterprise Linux release 9.4 (Plow)", "[root@gpu-node ~]#"],
        "fedora-user-session": ["[nvidia@gpu-node my dir]$ nproc", "64", "[nvidia@gpu-node my dir]$ sudo lspci -tv",
                                "[sudo] password for nvidia: "] + tree + ["[nvidia@gpu-node my dir]$"],
    }
    if fragment:
        out["fragment"] = tree[1:]  # cut below the "-[0000:00]-" root line
    return out


@pytest.mark.parametrize("source", ["vm", "holohub"])
def test_pasted_lspci_reads_as_the_clean_tree(tmp_path, source):
    if source == "vm":
        tree, fragment = vm_tree(), True
    else:
        tree, fragment = (REF / "holohub-igx-orin-lspci-tv.txt").read_text().splitlines(), False
    clean = tmp_path / "clean.txt"
    clean.write_text("\n".join(tree) + "\n")
    want = check(clean)
    assert want["matrix"]["labels"]
    for name, lines in pasted_variants(tree, fragment).items():
        f = tmp_path / f"{name}.txt"
        f.write_text("\n".join(lines) + "\n")
        p = run("check", "--json", f)
        assert p.returncode != 65, f"{name}: {p.stderr}"
        got = json.loads(p.stdout)
        assert got["matrix"] == want["matrix"], name
        assert [d["bdf"] for d in got["devices"]] == [d["bdf"] for d in want["devices"]], name
        assert got["summary"] == want["summary"], name
    # What was read differently is said.
    notes = " ".join(n["text"] for n in check(tmp_path / "everything.txt")["notes"])
    assert "not lspci output, skipped: pcilib" in notes and "one column off" in notes
    if fragment:
        assert "without its [domain:bus] root line" in " ".join(n["text"] for n in check(tmp_path / "fragment.txt")["notes"])


# lspci -n prints the ids alone where it would print names (pciutils lib/names.c
# format_name_pair, PCI_LOOKUP_NUMERIC: "%04x:%04x"), in the tree (-tvn: "+-06.0  10de:2335")
# and in -vvv headers with the class number ("00:06.0 0302: 10de:2335 (rev a1)", lspci.c
# show_terse). The files are pciutils 3.9.0 on the real nodes' config space (tests/reference/README.md,
# truth/); the truth is each snapshot's own sysfs vendor, device and class files.
def snapshot_functions(tar):
    out = {}
    with tarfile.open(REF / tar) as t:
        for m in t.getmembers():
            f = re.search(r"sys/devices/pci[0-9a-f:]+/([0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7])/(vendor|device|class)$", m.name)
            if f:
                out.setdefault(f[1], {})[f[2]] = int(t.extractfile(m).read(), 16)
    return out


@pytest.mark.parametrize("numeric,snapshot", [("h200x4-run2-lspci-tvn.txt", "h200x4-run2-snapshot.tar"),
                                              ("h200x4-run2-lspci-vvv-n.txt", "h200x4-run2-snapshot.tar"),
                                              ("h100-node-lspci-tvn.txt", "h100-node-snapshot.tar")])
def test_lspci_numeric_ids_are_the_devices_ids(numeric, snapshot):
    """Before: the numeric names were no ids: no GPU found, exit 3 (incomplete)."""
    p = run("check", "--json", REF / "truth" / numeric)
    assert p.returncode in (0, 1, 2, 3), p.stderr
    j = json.loads(p.stdout)
    fns = snapshot_functions(snapshot)
    gpus = sorted(b for b, f in fns.items() if f["vendor"] == 0x10DE and f["class"] >> 16 == 0x03)
    assert len(gpus) in (1, 4)
    got = [d for d in j["devices"] if d["role"] == "gpu"]
    assert sorted(d["bdf"] for d in got) == gpus
    for d in got:
        f = fns[d["bdf"]]
        assert (int(d["vendor"], 16), int(d["device"], 16)) == (f["vendor"], f["device"]), d
        if "vvv" in numeric:
            assert int(d["class"], 16) >> 8 == f["class"] >> 8, d  # the class number lspci printed


def test_a_branch_under_no_parent_is_still_an_error(tmp_path):
    tree = vm_tree()
    tree[5] = "     " + tree[5].lstrip()  # far off any '+' column
    f = tmp_path / "bad.txt"
    f.write_text("\n".join(tree) + "\n")
    p = run("check", f)
    assert p.returncode == 65 and re.search(r"bad\.txt:6: expected this tree branch to line up", p.stderr), p.stderr


# ---- 4. roles ----------------------------------------------------------------------------------

def test_bmc_consoles_are_not_gpus_and_bluefield_management_is_not_a_nic():
    j = check(KINDS / "server-bmc-bluefield-lspci.txt")
    roles = {d["bdf"]: d["role"] for d in j["devices"]}
    assert roles == {"0000:06:00.0": "gpu", "0000:05:00.0": "nic", "0000:05:00.1": "nic"}


def test_infiniband_class_hca_with_an_rdma_device_is_a_nic(tmp_path):
    root = make_node(tmp_path / "n")
    nic = root / "sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:01.0/0000:04:00.0"
    (nic / "class").write_text("0x0c0600\n")  # InfiniBand (serial bus class), as older HCAs report
    ib = root / "sys/class/infiniband/mlx4_0"
    ib.mkdir(parents=True)
    os.symlink("../../../devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:01.0/0000:04:00.0", ib / "device")
    j = check("--sysfs-root", root)
    (n,) = [d for d in j["devices"] if d["role"] == "nic"]
    assert n["bdf"] == "0000:04:00.0" and n["rdma_name"] == "mlx4_0" and n["class"] == "0x0c0600"


# ---- 5. missing data stays unknown -------------------------------------------------------------

def two_socket_node(root, node_dirs):
    """GPU under host bridge 0000:00, NIC under 0000:80; no numa_node files, only local_cpulist."""
    for bdf, hb, ven, dev, cls, cpus in (("0000:01:00.0", "pci0000:00", 0x10DE, 0x2330, 0x030200, "0-7"),
                                         ("0000:81:00.0", "pci0000:80", 0x15B3, 0x1021, 0x020700, "8-15")):
        d = root / "sys/devices" / hb / bdf
        d.mkdir(parents=True)
        (d / "vendor").write_text(f"0x{ven:04x}\n")
        (d / "device").write_text(f"0x{dev:04x}\n")
        (d / "class").write_text(f"0x{cls:06x}\n")
        (d / "local_cpulist").write_text(cpus + "\n")
        (root / "sys/bus/pci/devices").mkdir(parents=True, exist_ok=True)
        os.symlink(f"../../../devices/{hb}/{bdf}", root / "sys/bus/pci/devices" / bdf)
    if node_dirs:
        for n, cpus in ((0, "0-7"), (1, "8-15")):
            (root / f"sys/devices/system/node/node{n}").mkdir(parents=True)
            (root / f"sys/devices/system/node/node{n}/cpulist").write_text(cpus + "\n")
    return root


@pytest.mark.parametrize("node_dirs", [True, False], ids=["with-node-dirs", "without"])
def test_numa_from_local_cpulist_when_numa_node_is_missing(tmp_path, node_dirs):
    j = check("--sysfs-root", two_socket_node(tmp_path / "n", node_dirs))
    p = pair(j, "GPU0", "NIC0")
    assert p["class"] == "SYS", p  # NODE before: the missing numa_node read as "same node"
    assert [d["numa"] for d in j["devices"]] == [0, 1]
    assert any("local_cpulist" in n["text"] for n in j["notes"])
    # The copy has no /sys/kernel/iommu_groups (hwloc-gather-topology copies none): unknown, not off.
    assert j["node"]["iommu"] == "unknown" and any(n["rule"] == "iommu-unknown" for n in j["notes"])


def test_no_kernel_version_is_a_note_not_blocked(tmp_path):
    root = make_node(tmp_path / "n", modules=("nvidia", "ib_core"))  # no peer-memory client ...
    (root / "proc/driver/nvidia").mkdir(parents=True)  # ... but the open module, which exports dma-buf from 5.12
    (root / "proc/driver/nvidia/version").write_text(
        "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.65.06  Release Build\n")
    (root / "proc/sys/kernel/osrelease").unlink()
    j = check("--sysfs-root", root)
    p = pair(j, "GPU0", "NIC0")
    (f,) = [f for f in p["findings"] if f["rule"] == "software-peer-memory"]
    assert f["severity"] == "note" and "kernel version is not in this input" in f["reason"], f
    assert p["verdict"] == "optimal"
    # With a kernel version below 5.12 it is blocked, as before.
    (root / "proc/sys/kernel/osrelease").write_text("5.10.0\n")
    assert pair(check("--sysfs-root", root), "GPU0", "NIC0")["verdict"] == "blocked"


def test_no_proc_at_all_leaves_the_software_unknown(tmp_path):
    root = make_node(tmp_path / "n")
    for f in sorted((root / "proc").rglob("*"), reverse=True):
        f.unlink() if f.is_file() else f.rmdir()
    (root / "proc").rmdir()
    j = check("--sysfs-root", root)
    p = pair(j, "GPU0", "NIC0")
    assert "software-driver" not in rules(p) and "software-unknown" in rules(p) and p["verdict"] == "optimal", p


# ---- 6. inputs hwloc accepts -------------------------------------------------------------------

def test_hwloc_gather_topology_tarball(tmp_path):
    """hwloc-gather-topology --io writes NODE.tar.bz2 with the copied /sys and /proc inside one
    folder named NODE (checked against hwloc 2.9's script on the development VM)."""
    root = make_node(tmp_path / "gpu-node-1")
    archive = tmp_path / "gpu-node-1.tar.bz2"
    with tarfile.open(archive, "w:bz2") as tar:
        tar.add(root, arcname="gpu-node-1")
    want = check("--sysfs-root", root)
    got = check(archive)
    assert got["node"]["format"] == "hwloc-gather-topology"
    assert got["matrix"] == want["matrix"] and got["pairs"] == want["pairs"]
    assert [d["bdf"] for d in got["devices"]] == ["0000:03:00.0", "0000:04:00.0"]
    # A damaged archive is an input error naming the file, not a crash.
    bad = tmp_path / "cut.tar.bz2"
    bad.write_bytes(archive.read_bytes()[: archive.stat().st_size // 2])
    p = run("check", bad)
    assert p.returncode == 65 and "cut.tar.bz2" in p.stderr and "bzip2" in p.stderr, p.stderr


def test_hwloc3_osdev_bitmask():
    j = check(KINDS / "hwloc3-osdev-bitmask.xml")
    (n,) = [d for d in j["devices"] if d["role"] == "nic"]
    assert n["rdma_name"] == "hns_0" and n["bdf"] == "0000:3b:00.0"  # found by its OpenFabrics device alone
    assert pair(j, "GPU0", "NIC0")["class"] == "NODE"


def test_hwloc_duplicate_bdf_is_read_with_a_warning():
    j = check(KINDS / "hwloc-duplicate-bdf.xml")
    assert [d["bdf"] for d in j["devices"]] == ["0000:17:00.0", "0000:3b:00.0"]
    assert any("duplicate PCI device 0000:3b:00.0" in n["text"] for n in j["notes"])


# ---- 7. virtual machines -----------------------------------------------------------------------

@pytest.mark.parametrize("name,evidence", [("hwloc-qemu-q35-vm.xml", "0000:00:00.0"),
                                           ("h200-vm-lspci-tvv.md", "0000:00:00.0 Intel Corporation 82G33")])
def test_vm_detected_from_emulated_pci_functions(name, evidence):
    j = check(KINDS / name)
    assert j["node"]["virtual_machine"] is True
    (n,) = [n for n in j["notes"] if n["rule"] == "platform-virtual"]
    assert evidence in n["text"] and "belong to the host" in n["text"]


def test_bare_metal_is_not_a_vm():
    j = check(KINDS / "h200-nccl-nvswitch.xml")
    assert j["node"]["virtual_machine"] is False
    assert not any(n["rule"] == "platform-virtual" for n in j["notes"])


# ---- output --------------------------------------------------------------------------------------

def test_json_stays_valid_with_bytes_that_are_not_utf8(tmp_path):
    f = tmp_path / "latin1.txt"
    f.write_bytes(b"-[0000:00]-+-01.0-[01]----00.0  NVIDIA Corporation GH100 \xe9\xff\n"
                  b"           \\-02.0-[02]----00.0  Mellanox Technologies MT2910 Family [ConnectX-7] \x01\n")
    j = check(f)
    names = [d["name"] for d in j["devices"]]
    assert names == ["NVIDIA Corporation GH100 \ufffd\ufffd", "Mellanox Technologies MT2910 Family [ConnectX-7] \x01"]

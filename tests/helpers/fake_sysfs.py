"""Synthetic sysfs trees for `gdrpeer check --sysfs-root`: real config-space bytes with the PCIe
and ACS capabilities, as the kernel shows them under /sys/bus/pci/devices/*/config."""

import os
import struct
from pathlib import Path

ROOT_PORT, UPSTREAM, DOWNSTREAM, ENDPOINT = 4, 5, 6, 0


def config_space(vendor, device, cls, port, secondary=None, acs_ctl=None):
    c = bytearray(4096)
    struct.pack_into("<HH", c, 0, vendor, device)
    c[9:12] = cls.to_bytes(3, "little")
    if secondary is not None:
        c[0x0E], c[0x19] = 1, secondary
    struct.pack_into("<H", c, 0x06, 0x10)
    c[0x34] = 0x40
    c[0x40] = 0x10
    struct.pack_into("<H", c, 0x42, 2 | port << 4)
    struct.pack_into("<I", c, 0x4C, 4 | 16 << 4)   # LnkCap 16 GT/s x16
    struct.pack_into("<H", c, 0x52, 4 | 16 << 4)   # LnkSta 16 GT/s x16
    if acs_ctl is not None:
        struct.pack_into("<IHH", c, 0x100, 0x000D | 1 << 16, 0x7F, acs_ctl)
    return bytes(c)


def make_node(root, acs_on_nic_port=0, iommu=None, modules=("nvidia", "nvidia_peermem", "ib_core")):
    """GPU and ConnectX NIC under one switch: 00:01.0 RP -> 01:00.0 USP -> 02:00.0/02:01.0 DSP."""
    root = Path(root)
    base = "devices/pci0000:00/0000:00:01.0"
    fns = [
        ("0000:00:01.0", base, 0x1022, 0x14AB, 0x060400, ROOT_PORT, 1, 0),
        ("0000:01:00.0", base + "/0000:01:00.0", 0x10B5, 0x9797, 0x060400, UPSTREAM, 2, None),
        ("0000:02:00.0", base + "/0000:01:00.0/0000:02:00.0", 0x10B5, 0x9797, 0x060400, DOWNSTREAM, 3, 0),
        ("0000:02:01.0", base + "/0000:01:00.0/0000:02:01.0", 0x10B5, 0x9797, 0x060400, DOWNSTREAM, 4, acs_on_nic_port),
        ("0000:03:00.0", base + "/0000:01:00.0/0000:02:00.0/0000:03:00.0", 0x10DE, 0x2330, 0x030200, ENDPOINT, None, None),
        ("0000:04:00.0", base + "/0000:01:00.0/0000:02:01.0/0000:04:00.0", 0x15B3, 0x1021, 0x020700, ENDPOINT, None, None),
    ]
    (root / "sys/bus/pci/devices").mkdir(parents=True)
    (root / "sys/kernel/iommu_groups").mkdir(parents=True)
    for bdf, path, ven, dev, cls, port, sec, acs in fns:
        d = root / "sys" / path
        d.mkdir(parents=True, exist_ok=True)
        (d / "vendor").write_text(f"0x{ven:04x}\n")
        (d / "device").write_text(f"0x{dev:04x}\n")
        (d / "class").write_text(f"0x{cls:06x}\n")
        (d / "numa_node").write_text("0\n")
        (d / "config").write_bytes(config_space(ven, dev, cls, port, sec, acs))
        if bdf == "0000:03:00.0":
            (d / "resource").write_text("0x00000000f8000000 0x00000000f8ffffff 0x0000000000040200\n"
                                        "0x0000100000000000 0x0000100fffffffff 0x000000000014220c\n")
        if iommu:
            g = root / "sys/kernel/iommu_groups/3"
            g.mkdir(parents=True, exist_ok=True)
            (g / "type").write_text(iommu + "\n")
            os.symlink("../../../../../../kernel/iommu_groups/3", d / "iommu_group")
        os.symlink("../../../" + path, root / "sys/bus/pci/devices" / bdf)
    (root / "proc/sys/kernel").mkdir(parents=True)
    (root / "proc/modules").write_text("".join(f"{m} 16384 0 - Live 0x0\n" for m in modules))
    (root / "proc/cpuinfo").write_text("vendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 17\n"
                                       "model name\t: AMD EPYC 9374F\nphysical id\t: 0\n")
    (root / "proc/cmdline").write_text("root=/dev/sda1\n")
    (root / "proc/sys/kernel/osrelease").write_text("6.8.0\n")
    return root


def sysfs_node(tmp_path, gpu_device=None):
    """make_node's tree under tmp_path/n; gpu_device: another PCI device id for the GPU."""
    root = make_node(tmp_path / "n")
    if gpu_device is not None:
        d = root / "sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:00.0/0000:03:00.0"
        (d / "device").write_text(f"0x{gpu_device:04x}\n")
        cfg = bytearray((d / "config").read_bytes())
        cfg[2:4] = gpu_device.to_bytes(2, "little")
        (d / "config").write_bytes(bytes(cfg))
    return root

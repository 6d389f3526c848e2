"""QEMU machine descriptions of the emulated GPU node.

Every topology has the same three devices: the "GPU" (ivshmem-plain, whose 64-bit prefetchable
BAR2 is backed by a host file), the NIC (e1000e, rxe runs on it) and QEMU's edu DMA engine on
the root bus (the stand-in HCA DMA). Only where they sit differs. The NIC's network is an
unconnected hub for one node, or a UDP socket to the other node of a pair (emunode.pair).
"""

import os

from .errors import HarnessError

TOPOLOGIES = {
    "switch": "GPU BAR device and NIC under one PCIe switch (nvidia-smi PIX)",
    "rootports": "GPU and NIC each on its own root port of one host bridge (PHB)",
    "twobridges": "NIC behind a pxb-pcie host bridge on NUMA node 1, GPU on node 0 (SYS)",
}
IOMMU_MODES = {
    "off": "no IOMMU (intel_iommu=off)",
    "translated": "intel-iommu translating: DMA domains",
    "passthrough": "intel-iommu with identity (pass-through) domains: iommu=pt",
}


def check(topology, iommu):
    if topology not in TOPOLOGIES:
        raise HarnessError(f"unknown topology '{topology}': choose one of {', '.join(TOPOLOGIES)}")
    if iommu not in IOMMU_MODES:
        raise HarnessError(f"unknown IOMMU mode '{iommu}': choose one of {', '.join(IOMMU_MODES)}")


# The NIC of a node alone: on a hub with nothing else on it (the link is up, nothing answers).
LONE_NETDEV = "hubport,id=n0,hubid=0"
DEFAULT_MAC = "52:54:00:00:00:01"


def qemu_args(topology, iommu, bar_file, bar_mib, native_hotplug=False, netdev=LONE_NETDEV,
              mac=DEFAULT_MAC):
    """Machine, IOMMU and device arguments (not kernel, initrd, serial ports).

    netdev: the -netdev of the NIC (id n0), mac its MAC address (rxe's default GID derives
    from it, so two linked nodes need two).

    native_hotplug: QEMU's q35 hands PCIe hotplug to ACPI (acpiphp) by default; with this the
    firmware leaves it to the OS, so the guest's pciehp driver handles device_del/device_add."""
    check(topology, iommu)
    if bar_mib < 1 or bar_mib & (bar_mib - 1):
        raise HarnessError(f"BAR size {bar_mib} MiB is not a power of two")
    # EMUNODE_TCG_THREAD=single: both vCPUs on one TCG thread (the guest still has two CPUs and
    # preempts between them). QEMU 7.2's multi-threaded TCG crashed (SIGSEGV in
    # memory_region_dispatch_read on a vCPU thread) minutes into the debug kernel's long fuzz.
    tcg = "tcg,thread=single" if os.environ.get("EMUNODE_TCG_THREAD") == "single" else "tcg"
    args = ["-machine", "q35,kernel-irqchip=split", "-accel", tcg, "-cpu", "max",
            "-smp", "2,sockets=2,cores=1,threads=1", "-m", "2G", "-nodefaults", "-display", "none", "-vga", "none",
            "-no-reboot",
            # two NUMA nodes, one CPU each, so a host bridge can sit on node 1
            "-object", "memory-backend-ram,id=ram0,size=1G",
            "-object", "memory-backend-ram,id=ram1,size=1G",
            "-numa", "node,nodeid=0,cpus=0,memdev=ram0",
            "-numa", "node,nodeid=1,cpus=1,memdev=ram1"]
    if native_hotplug:
        args += ["-global", "ICH9-LPC.acpi-pci-hotplug-with-bridge-support=off"]
    cmdline = []
    if iommu == "off":
        cmdline.append("intel_iommu=off")
    else:
        # intel-iommu first: it must exist before the devices it translates for.
        args += ["-device", "intel-iommu,intremap=on,caching-mode=on"]
        cmdline.append("intel_iommu=on")
        if iommu == "passthrough":
            cmdline.append("iommu=pt")

    gpu = ["-object", f"memory-backend-file,id=gpubar,share=on,mem-path={bar_file},size={bar_mib}M",
           "-device"]
    nic = ["-netdev", netdev, "-device"]
    edu = ["-device", "edu,bus=pcie.0,addr=0x5,dma_mask=0xffffffffffffffff"]
    if topology == "switch":
        args += ["-device", "pcie-root-port,id=rp1,bus=pcie.0,addr=0x10,chassis=1,slot=1",
                 "-device", "x3130-upstream,id=up1,bus=rp1",
                 "-device", "xio3130-downstream,id=dn1,bus=up1,chassis=2,slot=0",
                 "-device", "xio3130-downstream,id=dn2,bus=up1,chassis=3,slot=1"]
        gpu += [_device(gpu_device(topology))]
        nic += [f"e1000e,netdev=n0,bus=dn2,mac={mac}"]
    elif topology == "rootports":
        args += ["-device", "pcie-root-port,id=rp1,bus=pcie.0,addr=0x10,chassis=1,slot=1",
                 "-device", "pcie-root-port,id=rp2,bus=pcie.0,addr=0x11,chassis=2,slot=2"]
        gpu += [_device(gpu_device(topology))]
        nic += [f"e1000e,netdev=n0,bus=rp2,mac={mac}"]
    else:  # twobridges
        args += ["-device", "pcie-root-port,id=rp1,bus=pcie.0,addr=0x10,chassis=1,slot=1",
                 "-device", "pxb-pcie,id=pxb1,bus_nr=0x80,numa_node=1,bus=pcie.0,addr=0x12",
                 "-device", "pcie-root-port,id=rp2,bus=pxb1,chassis=2,slot=2"]
        gpu += [_device(gpu_device(topology))]
        nic += [f"e1000e,netdev=n0,bus=rp2,mac={mac}"]
    return args + gpu + nic + edu, cmdline


def gpu_device(topology):
    """QEMU device properties of the "GPU" (id "gpu"): what device_add takes to plug it back
    after a device_del (the memory backend "gpubar" outlives the device)."""
    check(topology, "off")
    return {"driver": "ivshmem-plain", "id": "gpu", "memdev": "gpubar",
            "bus": "dn1" if topology == "switch" else "rp1"}


def gpu_backend(bar_file, bar_mib):
    """object-add arguments of the GPU BAR's memory backend (the host file, shared)."""
    return {"qom-type": "memory-backend-file", "id": "gpubar", "mem-path": str(bar_file),
            "size": bar_mib << 20, "share": True}


def _device(props):
    return ",".join([props["driver"]] + [f"{k}={v}" for k, v in props.items() if k != "driver"])

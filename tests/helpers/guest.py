"""What the emulated-node tests share beyond emunode itself."""

import os
import warnings


def say_lockdep_off(res):
    """One line per accepted report: lockdep checked nothing after it in that boot."""
    for name in res.known_reports():
        msg = (f"{res.kernel}: accepted the kernel's own lockdep report {name}; lockdep is off "
               f"for the rest of this boot (KASAN, KFENCE, DMA-API, ODEBUG and WARN still count)")
        print(msg)
        warnings.warn(msg)


# What the emulated-node test modules share about the guest.
# GDRPEER_ALL_KERNELS=1 (make test-kernels): the other guest kernels too, not only VM_KERNEL.
ALL_KERNELS = os.environ.get("GDRPEER_ALL_KERNELS") == "1"
# The IOMMU modes a test boots once each (emunode's iommu=).
IOMMU_MODES = ["off", "translated", "passthrough"]
# Where the node puts the .ko files inside the guest.
GUEST_MODULES = "/gdrpeer/modules"
# The nvidia stand-in's GPU page and the byte it poisons freed pages with
# (NVSTUB_PAGE_SIZE and NVSTUB_POISON_BYTE of selftests/kmod/gdrpeer_nvstub.h).
NVSTUB_GPU_PAGE = 64 * 1024
NVSTUB_POISON = 0x6B

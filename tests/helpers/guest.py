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


def skip_unless_another_kernel(kernel, covered_by):
    """For a test parametrized over every guest kernel: skip unless `make test-kernels` asked for
    the other kernels (GDRPEER_ALL_KERNELS=1) and KERNEL is not VM_KERNEL, which COVERED_BY
    (the reason, e.g. "test_x covers it") already boot in `make test`."""
    import pytest

    if not ALL_KERNELS:
        pytest.skip("other kernels run in 'make test-kernels' (GDRPEER_ALL_KERNELS=1)")
    if kernel == os.environ.get("VM_KERNEL", "6.1"):
        pytest.skip(f"kernel {kernel} is VM_KERNEL: {covered_by}")

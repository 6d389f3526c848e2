"""pytest fixtures shared by the host-side and emulated-node tests."""

import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from emunode import Node  # noqa: E402


def vm_kernel():
    """The guest kernel the emulated-node tests boot: VM_KERNEL (make test VM_KERNEL=...)."""
    return os.environ.get("VM_KERNEL", "6.1")


@pytest.fixture(scope="session")
def kernel_name():
    return vm_kernel()


@pytest.fixture(scope="session")
def gdrpeer_ko():
    """Path of gdrpeer.ko built for the guest kernel; a test that needs it fails without it."""
    ko = REPO / "build" / "kmod" / vm_kernel() / "gdrpeer.ko"
    if not ko.exists():
        pytest.fail(f"{ko} is missing: build it with 'make vm-modules VM_KERNEL={vm_kernel()}'")
    return ko


@pytest.fixture(scope="session")
def node_factory():
    """Node(kernel=VM_KERNEL, ...) with progress on stderr."""
    def make(topology="switch", iommu="translated", **kw):
        return Node(vm_kernel(), topology, iommu, log=lambda m: print(m, file=sys.stderr), **kw)
    return make


@pytest.fixture(scope="module")
def guest_binary():
    """build/bin/gdrpeer, which the emulated node copies into the guest with the rest of build/bin."""
    if not (REPO / "build" / "bin" / "gdrpeer").exists():
        pytest.fail("build/bin/gdrpeer is missing: run 'make userspace' (the guest runs build/bin/*)")

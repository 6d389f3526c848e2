"""The emulated GPU + RDMA node: Debian kernels booted under QEMU with an emulated PCIe topology.

See docs/design.md for what a test can rely on inside the guest."""

from .errors import GuestError, HarnessError
from .kernels import DEFAULT_KERNEL, ensure_kernel, known_kernels
from .node import CommandResult, Node, RunResult
from .pair import NodePair, PairError, PairResult
from .qemu import FetchError, Qemu, ensure_qemu, known_qemus
from .topology import IOMMU_MODES, TOPOLOGIES

__all__ = ["Node", "NodePair", "PairResult", "PairError", "RunResult", "CommandResult", "HarnessError", "GuestError", "ensure_kernel",
           "known_kernels", "DEFAULT_KERNEL", "TOPOLOGIES", "IOMMU_MODES", "Qemu", "ensure_qemu",
           "known_qemus", "FetchError"]

"""Every supported guest kernel boots the node, brings up rxe0 and loads/unloads gdrpeer.ko.

The default run tests VM_KERNEL only; `make test-kernels` (GDRPEER_ALL_KERNELS=1) builds the
modules for all four kernels and tests each."""

import os
import re
from pathlib import Path

import pytest

from emunode import Node, known_kernels

REPO = Path(__file__).resolve().parents[1]
ALL = os.environ.get("GDRPEER_ALL_KERNELS") == "1"

COMMANDS = [
    "uname -r",
    "insmod /gdrpeer/modules/gdrpeer.ko pcibar=$GDRPEER_GPU_BDF",
    "cat /sys/module/gdrpeer/refcnt; ls -l /dev/gdrpeer",
    "ibv_devinfo -d rxe0",
    "gdrpeer verify --source gdrpeer --method dmabuf --size 64K; echo verify_exit=$?",
    "rmmod gdrpeer && ! test -e /sys/module/gdrpeer",
]


@pytest.mark.parametrize("kernel", known_kernels())
def test_kernel_boots_and_loads_gdrpeer(kernel):
    if not ALL and kernel != os.environ.get("VM_KERNEL", "6.1"):
        pytest.skip(f"kernel {kernel} is tested by 'make test-kernels' (GDRPEER_ALL_KERNELS=1); "
                    f"this run covers VM_KERNEL={os.environ.get('VM_KERNEL', '6.1')}")
    ko = REPO / "build" / "kmod" / kernel / "gdrpeer.ko"
    assert ko.exists(), f"{ko} missing: run 'make vm-modules VM_KERNEL={kernel}'"
    res = Node(kernel, "switch", "translated").run(COMMANDS, timeout=400)
    release = res.results[0].output.strip()
    assert release.startswith(kernel + "."), release
    for r in res.results[1:]:
        assert r.status == 0, f"{r.command}: {r.output}"
    assert "/dev/gdrpeer" in res.results[2].output
    assert re.search(r"state:\s+PORT_ACTIVE", res.results[3].output)
    # Debian's rxe: the dma-buf row is unsupported, in one line saying why; before 5.12 the
    # reason is that the kernel has no dma-buf memory regions at all.
    verify = res.results[4].output
    row = [l for l in verify.splitlines() if "ibv_reg_dmabuf_mr" in l and "gdrpeer" in l]
    assert len(row) == 1 and "unsupported" in row[0] and "verify_exit=1" in verify, verify
    if kernel == "5.10":
        assert (f"ibv_reg_dmabuf_mr does not exist before Linux 5.12 (this kernel is {release}): "
                "no RDMA device can register dma-buf memory here") in row[0], row[0]
    else:
        assert "software RDMA device (rdma_rxe implements no dma-buf registration)" in row[0], row[0]
    assert re.search(rf"gdrpeer: .*bound", res.kernel_log)
    assert res.problems() == []

"""gdrpeer.ko at the bounds tenants control (issue 22, driver review 3): the emulated node runs
selftests/user/gdrpeer_selftest_bounds.c.

One boot of VM_KERNEL in `make test` (the other kernels in `make test-kernels`,
GDRPEER_ALL_KERNELS=1), with slub_debug=P (freed slab objects read 0x6b...), gdrpeer_nvrefuse.ko
(nvidia_p2p_* exports that refuse every pin, no BAR) loaded before gdrpeer.ko, which pcibar binds
to a 4 GiB GPU BAR:
  - 65,537 EXPORT_VA calls refused at the pin, then a handle mapping, unbind, rebind and a second
    tenant's 4 MiB over the same BAR bytes: the old mapping neither reads nor writes them;
  - 524,289 live one-page regions revoked by one unbind: one more than the old revocation's
    4 MiB snapshot of pointers held (it came back NULL: an Oops in remove(); above 1,024 it
    WARNed). GDRPEER_BOUNDS_REGIONS=N runs N instead (on a BAR just large enough);
  - ALLOC and FREE racing on one file for 10 s: no bar_offset read from a freed region.
Node.run fails the boot on any kernel report (WARN, Oops, BUG, lockdep, ...). 65-140 s per boot
on the shared 2-core host (524,289 ALLOCs 43-97 s, their revocation 1-2 s); the BAR file (2 GiB
written) is deleted after the boot. Times per kernel are in docs/driver.md.
"""

import os
from pathlib import Path

import pytest

from emunode import known_kernels
from helpers.tap import check_all_passed, listed_tests

REPO = Path(__file__).resolve().parents[1]
BIN = REPO / "build" / "bin"
ALL = os.environ.get("GDRPEER_ALL_KERNELS") == "1"
M = "/gdrpeer/modules"
LOAD = (f"insmod {M}/gdrpeer_nvrefuse.ko && insmod {M}/gdrpeer.ko pcibar=$GDRPEER_GPU_BDF && "
        "cat /sys/class/gdrpeer/gdrpeer/providers/nvidia/status")
UNLOAD = "rmmod gdrpeer && rmmod gdrpeer_nvrefuse && ! test -e /sys/module/gdrpeer && echo unloaded"
# one more than a 4 MiB array of pointers holds
REGIONS = int(os.environ.get("GDRPEER_BOUNDS_REGIONS", "524289"))


def bar_mib(regions):
    """The smallest power-of-two BAR (MiB, at least 64) for `regions` pages of 4 KiB, plus the
    window test's 4 MiB tenant: 524,289 pages need 4 GiB."""
    need, mib = regions * 4096 + (8 << 20), 64
    while mib << 20 < need:
        mib *= 2
    return mib


def kos(kernel):
    d = REPO / "build" / "kmod" / kernel
    missing = [k for k in ("gdrpeer.ko", "gdrpeer_nvrefuse.ko") if not (d / k).exists()]
    if missing:
        pytest.fail(f"{', '.join(missing)} missing in {d} (make vm-modules VM_KERNEL={kernel})")
    if not (BIN / "gdrpeer_selftest_bounds").exists():
        pytest.fail(f"{BIN / 'gdrpeer_selftest_bounds'} is missing (make selftests)")


def boot(kernel):
    from emunode import Node
    import sys
    cmds = [LOAD, f"GDRPEER_BOUNDS_REGIONS={REGIONS} gdrpeer_selftest_bounds", UNLOAD]
    node = Node(kernel, "switch", "translated", bar_mib=bar_mib(REGIONS), rxe=False,
                log=lambda m: print(m, file=sys.stderr))
    res = node.run(cmds, timeout=900 + REGIONS // 200, extra_cmdline=("slub_debug=P",))
    # the cleared pages of the BAR file are real blocks on disk (2 GiB at 524,289 regions)
    res.bar_path.unlink(missing_ok=True)
    return res


def check(res):
    load, bounds, unload = res.results
    assert load.status == 0 and load.output.startswith("active"), load.output
    check_all_passed(bounds.output, len(listed_tests("gdrpeer_selftest_bounds")))
    assert bounds.status == 0
    assert f"{REGIONS} regions: allocated in" in bounds.output
    assert unload.status == 0 and "unloaded" in unload.output, unload.output
    assert res.problems() == []
    assert "slub_debug=P" in res.kernel_log
    # the times, for docs/driver.md
    print("\n".join(l for l in bounds.output.splitlines() if " in " in l and l.startswith("#")))
    print(f"boot took {res.seconds:.0f} s")


@pytest.fixture(scope="module")
def run(kernel_name):
    kos(kernel_name)
    return boot(kernel_name)


def test_bounds_selftests_all_ok(run):
    check(run)


@pytest.mark.parametrize("kernel", known_kernels())
def test_bounds_other_kernels(kernel, kernel_name):
    if not ALL:
        pytest.skip("the other kernels run in 'make test-kernels' (GDRPEER_ALL_KERNELS=1)")
    if kernel == kernel_name:
        pytest.skip(f"{kernel} is VM_KERNEL: test_bounds_selftests_all_ok covers it")
    kos(kernel)
    check(boot(kernel))

"""dma-buf revocation against tenants acting meanwhile (issue 22: defects 2, 3 and 5).

One boot of the emulated node (switch topology, translated IOMMU) with the test-only build
gdrpeer-testhooks.ko (driver/Kbuild GDRPEER_TEST_HOOKS=1; its hook test_export_hold makes an
EXPORT land inside a revocation deterministically), the edu stand-in HCA as importer, and vivid
(a videobuf2-vmalloc capture driver from the guest kernel's own module tree, loaded with its
dependencies as modules.dep lists them). It runs gdrpeer_selftest_revoke_race:
  - EXPORT inside a revocation: every dma-buf still revoked (CPU mapping SIGBUS, importer told);
  - 3,000 dma-bufs of one region revoked at unbind: no tenant-sized allocation (the old driver
    WARNed from __GFP_NOFAIL above 1,024 pointers), nothing hangs;
  - vb2-vmalloc's dma_buf_vmap with no attachment refused (gdrpeer loaded with dmabuf_vmap off,
    the default; the old driver served it: revocation waited for ever and vb2's release hit
    BUG_ON in dma_buf_vunmap).
The harness fails the boot on any kernel report (BUG/WARNING/Oops, tests/emunode/node.py).
6.1 runs in `make test`; other kernels with VM_KERNEL=... (`make test-kernels`).
"""

import lzma
import re

import pytest

from emunode import kernels
from test_driver import BIN, tap

PROGRAM = "gdrpeer_selftest_revoke_race"
TESTS = 3
VIVID = "vivid"


def module_chain(moddir, name):
    """[(path relative to moddir, module name)] of `name` and its dependencies, load order."""
    deps = {}
    for line in (moddir / "modules.dep").read_text().splitlines():
        mod, _, rest = line.partition(":")
        deps[mod] = rest.split()
    by_name = {re.sub(r"\.ko(\.xz|\.zst|\.gz)?$", "", m.rsplit("/", 1)[-1]).replace("-", "_"): m
               for m in deps}
    order, seen = [], set()

    def visit(path):
        if path in seen:
            return
        seen.add(path)
        for d in deps.get(path, []):
            visit(d)
        order.append(path)

    visit(by_name[name])
    return order


def module_bytes(path):
    data = path.read_bytes()
    if path.name.endswith(".xz"):
        return lzma.decompress(data)
    if path.name.endswith((".zst", ".gz")):
        pytest.fail(f"{path}: compression not handled by this test")
    return data


@pytest.fixture(scope="module")
def run(node_factory, gdrpeer_ko, kernel_name):
    hooks = gdrpeer_ko.parent / "gdrpeer-testhooks.ko"
    for p in (hooks, gdrpeer_ko.parent / "gdrpeer_edu_hca.ko", BIN / PROGRAM):
        if not p.exists():
            pytest.fail(f"{p} is missing (make vm-modules selftests)")
    k = kernels.ensure_kernel(kernel_name)
    files, loads = {}, []
    for i, rel in enumerate(module_chain(k.moddir, VIVID)):
        dest = f"/gdrpeer/vivid/{i:02d}-{rel.rsplit('/', 1)[-1].split('.ko')[0]}.ko"
        files[dest] = module_bytes(k.moddir / rel)
        loads.append(f"insmod {dest}")
    commands = [
        "insmod /gdrpeer/modules/gdrpeer-testhooks.ko pcibar=$GDRPEER_GPU_BDF && "
        "insmod /gdrpeer/modules/gdrpeer_edu_hca.ko && "
        "test -w /sys/module/gdrpeer/parameters/test_export_hold && echo hooks=1",
        " && ".join(loads) + " && ls /sys/class/video4linux",
        PROGRAM,
        "cat /sys/module/gdrpeer/parameters/test_export_hold; "
        "cd /sys/class/gdrpeer/gdrpeer/devices/0 && for f in allocations exports attachments "
        "active_maps vmaps revoked; do echo $f=$(cat $f); done",
        "rmmod gdrpeer_edu_hca && rmmod gdrpeer && echo unloaded",
    ]
    res = node_factory("switch", "translated", bar_mib=64).run(commands, timeout=900, files=files)
    return res


def test_setup(run):
    assert run.results[0].status == 0 and "hooks=1" in run.results[0].output, run.results[0].output
    assert run.results[1].status == 0 and "video" in run.results[1].output, run.results[1].output


def test_selftest_all_ok(run):
    out = run.results[2].output
    plan, ok, not_ok, skipped, tot = tap(out)
    assert plan == TESTS, out
    assert not not_ok and not skipped, out
    assert tot.get("pass") == TESTS, out
    assert run.results[2].status == 0, out


def test_hook_off_and_counters_zero(run):
    out = run.results[3].output
    assert out.splitlines()[0].strip() == "0", out
    for f in ("allocations", "exports", "attachments", "active_maps", "vmaps", "revoked"):
        assert f"{f}=0" in out, out


def test_unload_and_log_clean(run):
    assert "unloaded" in run.results[4].output, run.results[4].output
    assert not run.problems(), run.problems()

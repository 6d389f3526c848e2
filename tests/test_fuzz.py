"""The syscall fuzzer (selftests/user/gdrpeer_fuzz.c) in the emulated node.

One boot of VM_KERNEL (switch topology, IOMMU translating, slub_debug=P so that a read of a freed
region shows as 0x6b...): gdrpeer_nvrefuse.ko (nvidia_p2p_* exports refusing every pin, so the
fuzzer's EXPORT_VA bursts fail at the pin), gdrpeer.ko bound with pcibar=, gdrpeer_edu_hca.ko as
the dma-buf importer, then GDRPEER_FUZZ_OPS random operations (20,000 by default: `make test`;
`make test-debug` runs 1,000,000 on the debug kernel) over 8 threads with bind/unbind (and
remove/rescan once gdrpeer is the device's PCI driver) from a controller thread. Among them the
operations of driver review 3 (issue 22): failing EXPORT_VA bursts, EXPORT bursts with an unbind
asked for at once, 1,025+ one-page allocations before an unbind, ALLOC racing FREE on one file.
The five results: operations (errnos, children, every ALLOC's bar_offset inside the BAR), DMAs,
churn, revoked handle mappings fault, and every gauge 0 at the end; both modules unload and the
kernel log has no report (Node.run fails the run on one). The seed is random per run and printed; GDRPEER_FUZZ_SEED
repeats a run.
"""

import os
import random
import re
from pathlib import Path

import pytest

from helpers.tap import tap

REPO = Path(__file__).resolve().parents[1]
BIN = REPO / "build" / "bin"
OPS = int(os.environ.get("GDRPEER_FUZZ_OPS", "20000"))
SEED = int(os.environ.get("GDRPEER_FUZZ_SEED", "0"), 0) or random.getrandbits(63)
# Each edu DMA takes ~0.1-0.3 s of the guest's time: about 200 tries per run (many find
# their import revoked by the bind churn).
DMA_ONE_IN = max(50, OPS // 200)


@pytest.fixture(scope="module")
def run(node_factory, gdrpeer_ko):
    if not (BIN / "gdrpeer_fuzz").exists():
        pytest.fail(f"{BIN / 'gdrpeer_fuzz'} is missing (make selftests)")
    if not (gdrpeer_ko.parent / "gdrpeer_edu_hca.ko").exists():
        pytest.fail(f"gdrpeer_edu_hca.ko missing next to {gdrpeer_ko} (make vm-modules)")
    cmds = [
        "insmod /gdrpeer/modules/gdrpeer_nvrefuse.ko && "
        "insmod /gdrpeer/modules/gdrpeer.ko pcibar=$GDRPEER_GPU_BDF && "
        "insmod /gdrpeer/modules/gdrpeer_edu_hca.ko",
        f"gdrpeer_fuzz --seed {SEED} --ops {OPS} --threads 8 --dma-one-in {DMA_ONE_IN}",
        "rmmod gdrpeer_edu_hca && rmmod gdrpeer && rmmod gdrpeer_nvrefuse && "
        "! test -e /sys/module/gdrpeer && echo unloaded",
    ]
    # generous: the debug kernel under TCG is ~10x slower than the stock one
    timeout = 600 + OPS // 100
    print(f"gdrpeer_fuzz seed {SEED:#x}, {OPS} operations")
    res = node_factory("switch", "translated", bar_mib=64, rxe=False).run(
        cmds, timeout=timeout, extra_cmdline=("slub_debug=P",))
    return res


def test_fuzz_tap_all_ok(run):
    load, fuzz, _ = run.results
    assert load.status == 0, load.output
    plan, ok, not_ok, skipped, tot = tap(fuzz.output)
    # the plan the program prints before its first test (ksft_set_plan), every one of them ok
    assert plan and ok == plan, fuzz.output[-4000:]
    assert not not_ok, "\n".join(not_ok) + f"\nseed {SEED:#x}\n" + fuzz.output[-4000:]
    assert not skipped, "\n".join(skipped)
    assert tot == {"pass": plan, "fail": 0, "skip": 0, "error": 0}, fuzz.output[-4000:]
    assert fuzz.status == 0
    m = re.search(r"^# (\d+) operations, (\d+) DMAs checked", fuzz.output, re.M)
    assert m and int(m.group(1)) == OPS, fuzz.output[-2000:]
    assert int(m.group(2)) > 0, "no edu DMA went through a fuzzed dma-buf"
    # the review-3 operations ran: bursts refused at the pin, one-page allocations, the race
    for op in ("pin_burst", "tiny_allocs", "alloc_race", "export_burst"):
        ok = re.search(rf"^# {op}\s+ok=(\d+)(.*)$", fuzz.output, re.M)
        assert ok and (int(ok.group(1)) > 0 or ok.group(2).strip()), f"{op} never ran"
    assert re.search(r"^# pin_burst\s+ok=\d+.* EINVAL=\d+", fuzz.output, re.M), \
        "no EXPORT_VA was refused at the pin (is gdrpeer_nvrefuse.ko loaded?)"


def test_fuzz_unload_clean(run):
    unload = run.results[2]
    assert unload.status == 0 and "unloaded" in unload.output, unload.output
    assert run.problems() == []

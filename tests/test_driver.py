"""gdrpeer.ko in the emulated node: kselftests, real DMA through the IOMMU, RDMA boundary, unload.

One boot per IOMMU mode (off, translated, passthrough) on the switch topology runs every guest
command below; the tests read its results. The ground truth for DMA is the host file behind the
"GPU" BAR (res.bar_path): the edu stand-in HCA writes a random pattern through the dma-buf
mapping and the host finds exactly those bytes at the allocation's BAR offset.

Needs build/kmod/<VM_KERNEL>/{gdrpeer,gdrpeer_edu_hca}.ko (make vm-modules) and the selftest
programs in build/bin (make selftests).
"""

import random
import re

import pytest

from helpers.paths import BIN
from helpers.tap import check_edu_dma, keyvals, listed_tests, passed_tests, pattern, tap

PROGRAMS = ["gdrpeer_selftest_abi", "gdrpeer_selftest_lifetime", "gdrpeer_selftest_bind",
            "gdrpeer_selftest_edu", "gdrpeer_selftest_revoke", "gdrpeer_selftest_rdma",
            "gdrpeer_edu_dma"]
# The kselftest programs run here (COMMANDS names): every test each lists (-l) must run and
# pass, none may skip.
KSELFTESTS = ["abi", "lifetime", "bind", "edu", "revoke", "rdma"]

FILL = 0x5A
RNG = random.Random()          # seeded from the OS: a new pattern every run
SIZE = 64 * 1024               # allocation
EXP_OFF = RNG.randrange(0, 4) * 4096
PART = 16 * 1024               # the exported range holds three parts, one per DMA run
EXP_LEN = 3 * PART
LEN = 5 * 1024                 # three edu chunks (2048 + 2048 + 1024)
OFF = RNG.randrange(0, (PART - LEN) // 8) * 8
# The raw (negative) DMA and the stale-address DMA go to the same allocation in the same run,
# other bytes, so all results stay visible in the BAR file (a new allocation would be cleared).
RAW_OFF = PART + RNG.randrange(0, (PART - LEN) // 8) * 8
STALE_LEN = 2048               # one edu chunk (gdrpeer_edu_dma)
STALE_OFF = 2 * PART + RNG.randrange(0, (PART - STALE_LEN) // 8) * 8
SEED = RNG.getrandbits(64)
RAW_SEED = RNG.getrandbits(64)
OLD_SEED = RNG.getrandbits(64)     # written while imported
STALE_SEED = RNG.getrandbits(64)   # written to the same bus address after the unmap

COMMANDS = {
    "load": "insmod /gdrpeer/modules/gdrpeer.ko pcibar=$GDRPEER_GPU_BDF && "
            "ls -l /dev/gdrpeer && cat /sys/class/gdrpeer/gdrpeer/devices/0/bdf",
    # bind runs before gdrpeer_edu_hca.ko is loaded: it needs edu without a driver
    "abi": "gdrpeer_selftest_abi",
    "lifetime": "gdrpeer_selftest_lifetime",
    "bind": "gdrpeer_selftest_bind",
    "load_edu": "insmod /gdrpeer/modules/gdrpeer_edu_hca.ko && ls -l /dev/gdrpeer_edu_hca && "
                "insmod /gdrpeer/modules/gdrpeer_ptebits.ko",
    "edu": "gdrpeer_selftest_edu",
    # unbind, PCI remove/rescan, importers, clearing, read-only opens; leaves the device bound
    "revoke": "gdrpeer_selftest_revoke",
    "rdma": "gdrpeer_selftest_rdma",
    "dma": f"gdrpeer_edu_dma {SIZE} {EXP_OFF} {EXP_LEN} {OFF} {LEN} {SEED} {FILL} "
           f"{RAW_OFF} {RAW_SEED} {STALE_OFF} {OLD_SEED} {STALE_SEED}",
    "counters": "cd /sys/class/gdrpeer/gdrpeer/devices/0 && for f in allocations alloc_bytes "
                "exports attachments active_maps free_bytes bar_size; do echo $f=$(cat $f); done",
    "unload": "rmmod gdrpeer_ptebits && rmmod gdrpeer_edu_hca && rmmod gdrpeer && ! test -e /sys/module/gdrpeer && "
              "! test -e /dev/gdrpeer && echo unloaded",
    # loads that must be refused, then mode and group from the parameters
    "refused_loads": "insmod /gdrpeer/modules/gdrpeer.ko pcibar=$GDRPEER_NIC_BDF; echo rc=$?; "
                     "insmod /gdrpeer/modules/gdrpeer.ko pcibar=bogus; echo rc=$?; "
                     "insmod /gdrpeer/modules/gdrpeer.ko dev_mode=01777; echo rc=$?; "
                     "test -e /sys/module/gdrpeer || echo notloaded",
    "mode_gid": "insmod /gdrpeer/modules/gdrpeer.ko dev_mode=0640 dev_gid=44 && "
                "stat -c 'mode=%a gid=%g' /dev/gdrpeer && rmmod gdrpeer",
    # loads that fail late (the second bind of one device) while a process keeps opening
    # and closing /dev/gdrpeer: no file may reach a module that is then freed
    "load_race": "(while [ ! -e /tmp/stop ]; do { exec 3<>/dev/gdrpeer; exec 3>&-; } "
                 "2>/dev/null; done) & i=0; fails=0; while [ $i -lt 30 ]; do i=$((i+1)); "
                 "insmod /gdrpeer/modules/gdrpeer.ko pcibar=$GDRPEER_GPU_BDF,$GDRPEER_GPU_BDF "
                 "2>/dev/null || fails=$((fails+1)); done; touch /tmp/stop; wait; "
                 "echo fails=$fails; test -e /sys/module/gdrpeer || echo notloaded",
}
NAMES = list(COMMANDS)
MODES = ["off", "translated", "passthrough"]


@pytest.fixture(scope="module", params=MODES)
def run(request, node_factory, gdrpeer_ko):
    missing = [p for p in PROGRAMS if not (BIN / p).exists()]
    if missing:
        pytest.fail(f"missing in {BIN}: {', '.join(missing)} (make selftests)")
    if not (gdrpeer_ko.parent / "gdrpeer_edu_hca.ko").exists():
        pytest.fail(f"gdrpeer_edu_hca.ko missing next to {gdrpeer_ko} (make vm-modules)")
    res = node_factory("switch", request.param, bar_mib=64).run(
        list(COMMANDS.values()), timeout=600)
    return request.param, res, {n: res.results[i] for i, n in enumerate(NAMES)}


def test_module_loads_and_binds(run):
    _, res, out = run
    assert out["load"].status == 0, out["load"].output
    assert "crw-rw----" in out["load"].output          # default dev_mode 0660, root
    assert "bound as device 0" in res.kernel_log


@pytest.mark.parametrize("prog", KSELFTESTS)
def test_kselftest_tap_all_ok(run, prog):
    _, _, out = run
    r = out[prog]
    names = listed_tests(COMMANDS[prog])
    plan, ok, not_ok, skipped, tot = tap(r.output)
    assert plan == len(names), r.output[-3000:]
    assert passed_tests(r.output) == names, r.output[-3000:]
    assert not not_ok, "\n".join(not_ok) + "\n" + r.output[-3000:]
    assert not skipped, "\n".join(skipped)
    assert ok == plan
    assert tot == {"pass": plan, "fail": 0, "skip": 0, "error": 0}
    assert r.status == 0


def test_edu_dma_lands_in_bar(run):
    """edu wrote the pattern through the mapping: the host file has it at the right offset."""
    _, res, out = run
    # only those bytes: the fill around them is untouched
    check_edu_dma(out["dma"], res.bar_path, EXP_OFF + OFF, LEN, SEED, 3 * 5, FILL)


def test_edu_dma_to_unmapped_address(run):
    """Negative: DMA to the buffer's raw physical address, which the exporter never mapped.

    Under translation the IOMMU blocks it: a DMAR fault for edu at that page, the read-back
    differs and the host file still holds the fill. Without translation the same address is
    valid and the bytes land (the check distinguishes the two)."""
    mode, res, out = run
    r = out["dma"]
    assert r.status == 0, r.output
    kv = keyvals(r.output)
    assert kv["raw"] == 1
    at = kv["bar_offset"] + EXP_OFF + RAW_OFF
    data = res.bar_path.read_bytes()[at:at + LEN]
    if mode == "translated":
        assert kv["raw_mismatches"] > LEN // 2
        assert data == bytes([FILL]) * LEN, "blocked DMA changed the BAR"
        page = kv["raw_addr"] & ~0xFFF
        pages = dmar_write_fault_pages(res.kernel_log)
        # The BAR file and edu's read-back above are the proof. The fault line for this page
        # is printed unless the kernel's DMAR ratelimit swallowed it, which it then says.
        suppressed = re.search(r"dmar_fault: \d+ callbacks suppressed", res.kernel_log)
        assert page in pages or (pages and suppressed), \
            f"no DMAR write fault at {page:#x} and none suppressed; faults at {[hex(p) for p in pages]}"
        assert kv["raw_first_dma"] != kv["raw_addr"]
    else:
        assert kv["raw_first_dma"] == kv["raw_addr"]  # identity: mapped address = physical
        assert kv["raw_mismatches"] == 0
        assert data == pattern(RAW_SEED, LEN)
        assert "DMAR: [DMA Write" not in res.kernel_log


def dmar_write_fault_pages(kernel_log):
    """Pages of the DMAR write faults in the log.
    5.10: "[DMA Write] Request device [00:05.0] PASID ffffffff fault addr f4007000"
    6.x:  "[DMA Write NO_PASID] Request device [00:05.0] fault addr 0xf4007000"
    """
    faults = re.findall(r"DMAR: \[DMA Write[^\]]*\] Request device \[[0-9a-f:.]+\]"
                        r"[^\n]*? fault addr (?:0x)?([0-9a-f]+)", kernel_log)
    return [int(f, 16) for f in faults]


def test_importer_address_dies_with_its_mapping(run):
    """After an importer unmaps, a DMA to the address it had must not reach the BAR.

    edu imports the dma-buf, writes OLD_SEED's pattern through the mapping (one chunk, so few
    DMAR faults: the kernel rate-limits their lines and QEMU's VT-d stops showing them after
    a few in a row; the run goes before the raw one for the same reason), drops the import
    (the exporter unmaps it), then writes STALE_SEED's pattern to the same bus address with no
    mapping. Under translation the IOMMU blocks it: a DMAR write fault at that page, the
    read-back differs, and the host file keeps OLD_SEED's bytes. (On kernels whose groups
    read DMA-FQ the IOTLB flush is deferred to a 10 ms timer; edu's write starts ~100 ms into
    the call, after its first transfer.) Without translation the old address is the BAR's
    physical address: nothing can block it and the bytes land; only the importer keeping to
    its unmap protects the memory. Asserting that too shows the DMA itself works, so the
    translated result is the IOMMU's doing."""
    mode, res, out = run
    r = out["dma"]
    assert r.status == 0, r.output
    kv = keyvals(r.output)
    assert kv["stale"] == 1 and kv["stale_off"] == STALE_OFF
    assert kv["stale_old_mismatches"] == 0
    assert kv["stale_transfers"] == 5              # one edu chunk: the fewest DMAR faults
    at = kv["bar_offset"] + EXP_OFF + STALE_OFF
    data = res.bar_path.read_bytes()
    assert data[at - 8:at] == bytes([FILL]) * 8
    assert data[at + STALE_LEN:at + STALE_LEN + 8] == bytes([FILL]) * 8
    data = data[at:at + STALE_LEN]
    if mode == "translated":
        assert data == pattern(OLD_SEED, STALE_LEN), \
            "a DMA to an unmapped importer address changed the BAR"
        assert kv["stale_mismatches"] > STALE_LEN // 2
        page = kv["stale_addr"] & ~0xFFF
        pages = dmar_write_fault_pages(res.kernel_log)
        # The BAR file and edu's read-back above are the proof. The fault line for this page
        # is printed unless the kernel's DMAR ratelimit swallowed it, which it then says.
        suppressed = re.search(r"dmar_fault: \d+ callbacks suppressed", res.kernel_log)
        assert page in pages or (pages and suppressed), \
            f"no DMAR write fault at {page:#x} and none suppressed; faults at {[hex(p) for p in pages]}"
    else:
        assert data == pattern(STALE_SEED, STALE_LEN), "the stale address is physical here: it lands"
        assert kv["stale_mismatches"] == 0


def test_counters_back_to_zero(run):
    _, _, out = run
    kv = keyvals(out["counters"].output)
    assert kv["allocations"] == 0 and kv["alloc_bytes"] == 0
    assert kv["exports"] == 0 and kv["attachments"] == 0 and kv["active_maps"] == 0
    assert kv["free_bytes"] == kv["bar_size"] == 64 << 20


def test_load_refused_with_reason(run):
    """A pcibar device that cannot be bound, or a bad dev_mode, refuses the whole load."""
    _, res, out = run
    r = out["refused_loads"]
    # busybox insmod exits with the errno: EBUSY (the NIC has a driver), EINVAL, EINVAL
    assert re.findall(r"^rc=(\d+)$", r.output, re.M) == ["16", "22", "22"], r.output
    assert "notloaded" in r.output
    assert "already claimed by driver e1000e" in res.kernel_log
    assert "cannot parse 'bogus'" in res.kernel_log
    assert "dev_mode 01777 has bits outside 0777" in res.kernel_log


def test_failed_load_races_with_open(run):
    """30 loads that fail after the first bind, with a process opening /dev/gdrpeer all the
    while: every load is refused, none stays loaded, and the kernel log stays clean (the
    open used to reach a module that was being freed: WARNINGs, then a page fault)."""
    _, res, out = run
    assert "fails=30" in out["load_race"].output, out["load_race"].output
    assert "notloaded" in out["load_race"].output
    assert res.problems() == []


def test_dev_mode_and_gid_params(run):
    _, _, out = run
    r = out["mode_gid"]
    assert r.status == 0, r.output
    assert "mode=640 gid=44" in r.output


def test_rmmod_succeeds_and_log_clean(run):
    _, res, out = run
    assert out["unload"].status == 0, out["unload"].output
    assert "unloaded" in out["unload"].output
    assert res.problems() == []

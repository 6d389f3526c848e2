"""The nvidia provider (issue 6) in the emulated node, against the stand-in gdrpeer_nvstub.ko.

One boot per IOMMU mode (off, translated, passthrough) on VM_KERNEL runs, in this order:
  1. nvidia symbols absent: gdrpeer.ko with pcibar= only; providers/nvidia/status says why the
     provider is unavailable, EXPORT_VA fails with ENODEV (the kselftest's unavailable case), and
     the pcibar provider still exports: edu writes a pattern through it (gdrpeer_edu_dma), found
     by the host in the BAR file.
  2. the 6.5 GPL rule: the stand-in built with EXPORT_SYMBOL (as nvidia.ko) cannot be reached
     by symbol_get() on kernels that have the rule (Debian's 6.1 took it too); the linked build
     (gdrpeer-linked.ko, what DKMS builds after the NVIDIA driver) reaches it.
  3. the stand-in with EXPORT_SYMBOL_GPL + gdrpeer.ko + edu: the nvidia kselftest, every gauge
     back to 0, rmmod of gdrpeer and of the stand-in, no API violation seen by the stand-in.
  4. reload, and `gdrpeer_selftest_nvidia --hold` leaves an allocation that edu wrote a pattern
     into alive until power-off, so the host compares the BAR file byte for byte; the page freed
     under a queued DMA in step 3 must hold nothing but the stand-in's poison byte.
The GPL rule on the other kernels (6.12, 7.2) boots once each with GDRPEER_ALL_KERNELS=1
(the convention of tests/test_kernels.py).

NVIDIA's proprietary modules (issue 12, defect 4): driver/Makefile must never link gdrpeer against
an exporter whose licence is not GPL-compatible (the kernel refuses to load a module that uses
GPL-only symbols and a proprietary module's symbols). Host-side, its decision alone is checked
against the stand-ins' .ko files for every kind of NVIDIA_SYMVERS; one boot (translated) loads
gdrpeer-autoprop.ko (NVIDIA_SYMVERS=auto finding the Module.symvers of gdrpeer_nvstub_prop.ko,
licensed "NVIDIA") next to that stand-in: it loads, pcibar exports, the status says why nvidia is
unavailable; and gdrpeer-proplinked.ko (linked against it anyway, the build the Makefile made
before) is refused by the kernel, which shows the fallback is needed.

Needs build/kmod/<kernel>/{gdrpeer,gdrpeer_nvstub,gdrpeer_nvstub_gpl,gdrpeer_edu_hca}.ko, for the
licence rule also gdrpeer_nvstub_prop.ko, gdrpeer-{autoprop,proplinked}.ko and the build logs
gdrpeer-{linked,autoprop}.log (make vm-modules), and build/bin/{gdrpeer_selftest_nvidia,
gdrpeer_edu_dma} (make selftests).
"""

import random
import re
import shutil
import subprocess

import pytest

from emunode import Node, known_kernels
from emunode.node import ALLOWED_TAINT, PROBLEM
from helpers.guest import ALL_KERNELS as ALL
from helpers.guest import GUEST_MODULES as M
from helpers.guest import IOMMU_MODES as MODES
from helpers.guest import NVSTUB_GPU_PAGE as GPU_PAGE
from helpers.guest import NVSTUB_POISON
from helpers.paths import BIN, REPO
from helpers.tap import check_edu_dma, keyvals, listed_tests, pattern, tap

S = "/sys/class/gdrpeer/gdrpeer/providers"
STUB = "/sys/class/misc/gdrpeer_nvstub"
EDU = "/sys/class/misc/gdrpeer_edu_hca"

# Guest kernels whose symbol_get() reaches only EXPORT_SYMBOL_GPL exports: mainline since 6.5,
# and Debian's 6.1 (the change went to stable). 5.10 is not asserted either way.
GPL_ONLY_SYMBOL_GET = {"6.1", "6.12", "7.2"}
# Guest kernels that refuse to load a module using GPL-only symbols and symbols of a proprietary
# module (mainline added the rule in 5.9); 5.10 is not asserted either way.
REFUSE_GPL_PROPRIETARY_MIX = {"6.1", "6.12", "7.2"}
TAINT_PROPRIETARY = 1 << 0

# The nvidia kselftest's one test that runs only while the provider is unavailable.
UNAVAILABLE_TEST = "global.export_va_when_unavailable_enodev"

RNG = random.Random()
# pcibar run of step 1: an allocation of 40 MiB exported from 36 MiB on, so the bytes sit in
# the middle of the 64 MiB BAR, away from the stand-in's pages of steps 3-4 (handed out from
# both ends of the BAR). "keep": no 40 MiB fill under TCG; the sparse file reads 0 around it.
PC_SIZE, PC_EXP_OFF, PC_EXP_LEN = 40 << 20, 36 << 20, 1 << 20
PC_LEN = 3 * 1024
PC_OFF = RNG.randrange(0, (PC_EXP_LEN - PC_LEN) // 8) * 8
PC_SEED = RNG.getrandbits(64)
PCIBAR_DMA = (f"insmod {M}/gdrpeer_edu_hca.ko && gdrpeer_edu_dma {PC_SIZE} "
              f"{PC_EXP_OFF} {PC_EXP_LEN} {PC_OFF} {PC_LEN} {PC_SEED} keep")


def gauge_dump(prefix, path):
    return f"for f in {path}/*; do [ -f $f ] && [ -r $f ] && echo {prefix}_$(basename $f)=$(cat $f); done"


def commands(linked):
    stub_gpl = f"insmod {M}/gdrpeer_nvstub_gpl.ko bar=$GDRPEER_GPU_BDF"
    # bar_map=0: the stand-in keeps no mapping of its BAR, so the memory type of a pinned page
    # is what gdrpeer reserves (the write-combining test)
    load = (f"{stub_gpl} bar_map=0 && insmod {M}/gdrpeer_ptebits.ko && "
            f"insmod {M}/gdrpeer.ko nvidia_module=gdrpeer_nvstub_gpl")
    return {
        # 1. no nvidia_p2p provider at all
        "absent_load": f"insmod {M}/gdrpeer.ko pcibar=$GDRPEER_GPU_BDF && "
                       f"echo nvidia=$(cat {S}/nvidia/status) && echo pcibar=$(cat {S}/pcibar/status)",
        "absent_kselftest": "gdrpeer_selftest_nvidia",
        "absent_pcibar_dma": PCIBAR_DMA,
        "absent_unload": "rmmod gdrpeer && echo unloaded",
        # 2. EXPORT_SYMBOL stand-in: symbol_get, then linked
        "nongpl_symbol_get": f"insmod {M}/gdrpeer_nvstub.ko bar=$GDRPEER_GPU_BDF && "
                             f"insmod {M}/gdrpeer.ko nvidia_module=gdrpeer_nvstub && "
                             f"echo status=$(cat {S}/nvidia/status) && rmmod gdrpeer && "
                             f"rmmod gdrpeer_nvstub && echo unloaded",
        "nongpl_linked": (f"insmod {M}/gdrpeer_nvstub.ko bar=$GDRPEER_GPU_BDF && "
                          f"insmod {M}/gdrpeer-linked.ko nvidia_module=gdrpeer_nvstub && "
                          f"echo status=$(cat {S}/nvidia/status) && rmmod gdrpeer && "
                          f"rmmod gdrpeer_nvstub && echo unloaded") if linked else "echo missing",
        # 3. the provider active
        "load": f"{load} && echo status=$(cat {S}/nvidia/status) && "
                f"echo persistent=$(cat {S}/nvidia/persistent)",
        "nvidia": "gdrpeer_selftest_nvidia",
        "gauges": " ; ".join([gauge_dump("nv", f"{S}/nvidia"), gauge_dump("stub", STUB),
                              gauge_dump("edu", EDU)]),
        "unload": f"rmmod gdrpeer_ptebits && rmmod gdrpeer && echo violations=$(cat {STUB}/violations) && "
                  f"rmmod gdrpeer_nvstub_gpl && ! test -e /sys/module/gdrpeer && "
                  f"! test -e /sys/module/gdrpeer_nvstub_gpl && echo unloaded",
        # 4. a pattern kept alive for the host
        "hold": f"{load} && (gdrpeer_selftest_nvidia --hold >/tmp/hold.log 2>&1 &) ; "
                f"i=0; while [ $i -lt 600 ] && ! grep -q ready /tmp/hold.log; do "
                f"sleep 0.1; i=$((i+1)); done; cat /tmp/hold.log; grep -q ready /tmp/hold.log",
    }


def check_programs(kdir):
    missing = [p for p in ("gdrpeer_selftest_nvidia", "gdrpeer_selftest_nvstub", "gdrpeer_edu_dma")
               if not (BIN / p).exists()]
    if missing:
        pytest.fail(f"missing in {BIN}: {', '.join(missing)} (make selftests)")
    for ko in ("gdrpeer.ko", "gdrpeer_nvstub.ko", "gdrpeer_nvstub_gpl.ko", "gdrpeer_edu_hca.ko"):
        if not (kdir / ko).exists():
            pytest.fail(f"{kdir / ko} missing (make vm-modules)")


@pytest.fixture(scope="module", params=MODES)
def run(request, node_factory, gdrpeer_ko, kernel_name):
    kdir = gdrpeer_ko.parent
    check_programs(kdir)
    linked = (kdir / "gdrpeer-linked.ko").exists()
    cmds = commands(linked)
    res = node_factory("switch", request.param, bar_mib=64).run(list(cmds.values()), timeout=900)
    out = {n: res.results[i] for i, n in enumerate(cmds)}
    return request.param, kernel_name, linked, res, out


def tap_results(output):
    """{test name: 'ok' | 'skip' | 'fail'} of a kselftest run.

    The 6.1 harness names a skipped test only in its "#  RUN name ..." line ("ok 7 # SKIP why"),
    so each result line is paired with the RUN line before it."""
    found, name = {}, None
    for line in output.splitlines():
        m = re.match(r"^#\s+RUN\s+(\S+) \.\.\.$", line)
        if m:
            name = m.group(1)
            continue
        m = re.match(r"^(ok|not ok) \d+\b(.*)$", line)
        if m and name:
            found[name] = ("fail" if m.group(1) == "not ok" else
                           "skip" if "# SKIP" in m.group(2) else "ok")
            name = None
    return found


# ---- 1. nvidia symbols absent --------------------------------------------------------------

def test_absent_provider_unavailable_with_reason(run):
    _, _, _, res, out = run
    r = out["absent_load"]
    assert r.status == 0, r.output
    kv = dict(re.findall(r"^(\w+)=(.*)$", r.output, re.M))
    assert kv["pcibar"].startswith("active"), kv["pcibar"]
    # no module named nvidia: the reason names it
    assert kv["nvidia"].startswith("unavailable: "), kv["nvidia"]
    assert "nvidia" in kv["nvidia"][len("unavailable: "):], kv["nvidia"]
    assert re.search(r"gdrpeer: ABI 1\.1 loaded,.*providers: pcibar active, nvidia unavailable",
                     res.kernel_log)


def test_absent_export_va_enodev(run):
    """The kselftest's unavailable case runs (EXPORT_VA -> ENODEV, no caps); the rest skip."""
    _, _, _, _, out = run
    r = out["absent_kselftest"]
    res = tap_results(r.output)
    assert list(res) == listed_tests("gdrpeer_selftest_nvidia"), r.output[-3000:]
    assert res.pop(UNAVAILABLE_TEST) == "ok", r.output[-3000:]
    assert set(res.values()) == {"skip"}, r.output[-3000:]
    assert "nvidia provider not active: unavailable: " in r.output
    assert r.status == 0


def check_pcibar_dma(res, r):
    """PCIBAR_DMA's run r: edu wrote through the pcibar dma-buf, the host finds the bytes."""
    check_edu_dma(r, res.bar_path, PC_EXP_OFF + PC_OFF, PC_LEN, PC_SEED, 2 * 5)


def test_absent_pcibar_still_exports(run):
    """pcibar keeps working: edu writes through its dma-buf, the host finds the bytes."""
    _, _, _, res, out = run
    check_pcibar_dma(res, out["absent_pcibar_dma"])
    assert out["absent_unload"].status == 0, out["absent_unload"].output


# ---- 2. symbol_get and the GPL rule, linked build ------------------------------------------

def check_gpl_rule(kernel, r):
    """The EXPORT_SYMBOL stand-in through symbol_get() on `kernel` (command output r)."""
    assert r.status == 0, r.output
    status = re.search(r"^status=(.*)$", r.output, re.M).group(1)
    if kernel not in GPL_ONLY_SYMBOL_GET:
        pytest.skip(f"kernel {kernel}: whether symbol_get() reaches EXPORT_SYMBOL is not "
                    f"asserted (status was: {status})")
    assert status.startswith("unavailable: "), status
    assert re.search(r"not (EXPORT_SYMBOL_)?GPL", status), status
    assert "gdrpeer_nvstub" in status


def test_gpl_rule_nongpl_standin_unreachable(run):
    _, kernel, _, _, out = run
    check_gpl_rule(kernel, out["nongpl_symbol_get"])


def test_gpl_standin_active_symbol_get(run):
    _, _, _, res, out = run
    r = out["load"]
    assert r.status == 0, r.output
    assert "status=active (symbol_get)" in r.output
    assert "persistent=1" in r.output
    assert re.search(r"gdrpeer: ABI 1\.1 loaded,.*providers: pcibar active, "
                     r"nvidia active \(symbol_get\)", res.kernel_log)


def test_linked_build_active(run):
    _, _, linked, _, out = run
    if not linked:
        pytest.skip("gdrpeer-linked.ko was not built for this kernel (make vm-modules)")
    r = out["nongpl_linked"]
    assert r.status == 0, r.output
    # "active (linked against .../Module.symvers: gdrpeer_nvstub is licensed "GPL" ...)"
    assert re.search(r'^status=active \(linked against \S+: gdrpeer_nvstub is licensed "GPL" ',
                     r.output, re.M), r.output


# ---- 3. the provider active: kselftest, gauges, unload -----------------------------------

def test_nvidia_kselftest(run):
    _, _, _, _, out = run
    r = out["nvidia"]
    nv_tests = listed_tests("gdrpeer_selftest_nvidia")
    plan, ok, not_ok, skipped, tot = tap(r.output)
    assert plan == len(nv_tests), r.output[-3000:]
    assert not not_ok, "\n".join(not_ok) + "\n" + r.output[-4000:]
    # only the unavailable case may skip, and it must
    res = tap_results(r.output)
    assert list(res) == nv_tests
    assert res.pop(UNAVAILABLE_TEST) == "skip", "\n".join(skipped)
    assert set(res.values()) == {"ok"}, res
    assert tot == {"pass": len(nv_tests) - 1, "fail": 0, "skip": 1, "error": 0}
    assert r.status == 0


def test_nvstub_kselftest(node_factory, gdrpeer_ko):
    """The stand-in's own rules (gdrpeer_selftest_nvstub, 8 cases), none skipped.

    Its own boot: the stand-in poisons every page it frees, and this program allocates the whole
    BAR, which would wipe the patterns the other phases leave for the host."""
    check_programs(gdrpeer_ko.parent)
    res = node_factory("switch", "translated", bar_mib=64).run(
        [f"insmod {M}/gdrpeer_nvstub_gpl.ko bar=$GDRPEER_GPU_BDF && gdrpeer_selftest_nvstub; "
         f"rc=$?; rmmod gdrpeer_nvstub_gpl && echo unloaded; exit $rc"], timeout=600)
    r = res.results[0]
    assert "unloaded" in r.output, r.output[-2000:]
    assert res.problems() == []
    nvstub_tests = len(listed_tests("gdrpeer_selftest_nvstub"))
    plan, ok, not_ok, skipped, tot = tap(r.output)
    assert plan == nvstub_tests, r.output[-3000:]
    assert not not_ok and not skipped, r.output[-4000:]
    assert tot == {"pass": nvstub_tests, "fail": 0, "skip": 0, "error": 0}
    assert r.status == 0


def test_race_did_its_iterations(run):
    """The race reports >= 10,000 ops over 4 threads, and delete_module was refused each time."""
    _, _, _, _, out = run
    m = re.search(r"(\d+) ops by (\d+) threads in [\d.]+ s; \d+ SIGBUS on revoked mappings; "
                  r"(\d+) delete_module attempts refused", out["nvidia"].output)
    assert m, out["nvidia"].output[-3000:]
    assert int(m.group(1)) >= 10000 and int(m.group(2)) >= 4 and int(m.group(3)) > 0


def test_gauges_zero_and_unload(run):
    _, _, _, _, out = run
    kv = keyvals(out["gauges"].output)
    for name in ("pins", "pins_persistent", "pins_callback", "revoked", "exports",
                 "attachments", "active_maps", "dma_mappings", "pinned_bytes"):
        assert kv[f"nv_{name}"] == 0, name
    for name in ("allocations", "pins", "dma_mappings", "violations"):
        assert kv[f"stub_{name}"] == 0, name
    assert kv["edu_imports"] == 0 and kv["edu_mapped"] == 0
    # the kselftest revoked edu's mappings, and the stand-in ran free callbacks
    assert kv["edu_revocations"] > 0 and kv["stub_callbacks"] > 0
    assert kv["nv_callbacks"] == kv["stub_callbacks"]
    r = out["unload"]
    assert r.status == 0, r.output
    assert "violations=0" in r.output and "unloaded" in r.output


# ---- 4. bytes in the BAR file ------------------------------------------------------------

def parse_hold(text):
    pages = {int(p): int(o, 16) for p, o in re.findall(r"^page=(\d+) bar_offset=(0x[0-9a-f]+)$",
                                                        text, re.M)}
    dmas = [tuple(map(int, d)) for d in
            re.findall(r"^dma offset=(\d+) length=(\d+) seed=(\d+)$", text, re.M)]
    fill = int(re.search(r"^fill=(0x[0-9a-f]+)$", text, re.M).group(1), 16)
    return pages, dmas, fill


def test_export_va_pattern_in_bar(run):
    """edu's pattern through the EXPORT_VA dma-buf is in the BAR file at the stand-in's pages."""
    _, _, _, res, out = run
    assert out["hold"].status == 0, out["hold"].output
    assert "nv_pattern" in res.files, sorted(res.files)
    pages, dmas, fill = parse_hold(res.files["nv_pattern"].decode())
    assert sorted(pages) == [0, 1, 2, 3] and len(dmas) == 2
    data = res.bar_path.read_bytes()

    def bar_bytes(off, length):
        """Bytes [off, off + length) of the dma-buf, gathered page by page from the BAR file."""
        got = bytearray()
        while length:
            page, within = divmod(off, GPU_PAGE)
            n = min(length, GPU_PAGE - within)
            got += data[pages[page] + within:pages[page] + within + n]
            off, length = off + n, length - n
        return bytes(got)

    for off, length, seed in dmas:
        assert bar_bytes(off, length) == pattern(seed, length), \
            f"dma-buf bytes [{off:#x}, +{length}) differ in the BAR file"
        assert bar_bytes(off - 8, 8) == bytes([fill]) * 8
        assert bar_bytes(off + length, 8) == bytes([fill]) * 8
    # the first DMA crossed from GPU page 0 into page 1, which are not adjacent in the BAR
    assert dmas[0][0] // GPU_PAGE != (dmas[0][0] + dmas[0][1] - 1) // GPU_PAGE
    assert pages[1] != pages[0] + GPU_PAGE


def test_poison_after_free_under_queued_dma(run):
    """The page freed while edu's DMA was queued holds only poison: nothing landed after."""
    _, _, _, res, out = run
    assert "nv_poison" in res.files, sorted(res.files)
    kv = dict(re.findall(r"^(\w+)=(\S+)$", res.files["nv_poison"].decode(), re.M))
    poison, off, length = int(kv["poison"], 16), int(kv["bar_offset"], 16), int(kv["length"])
    assert poison == NVSTUB_POISON and length == GPU_PAGE
    held = parse_hold(res.files["nv_pattern"].decode())[0].values()
    assert off not in held, "the held pattern reused the poisoned page: check is void"
    assert res.bar_path.read_bytes()[off:off + length] == bytes([poison]) * length


def test_log_clean(run):
    _, _, _, res, _ = run
    assert res.problems() == []


# ---- the GPL rule on the other kernels ---------------------------------------------------

@pytest.mark.parametrize("kernel", [k for k in known_kernels() if k != "5.10"])
def test_gpl_rule_other_kernels(kernel, kernel_name):
    """Non-GPL stand-in unreachable by symbol_get, the GPL one active, on each such kernel."""
    if kernel == kernel_name:
        pytest.skip(f"kernel {kernel} is VM_KERNEL: test_gpl_rule_nongpl_standin_unreachable "
                    f"and test_gpl_standin_active_symbol_get cover it")
    if not ALL:
        pytest.skip(f"kernel {kernel} is tested by 'make test-kernels' (GDRPEER_ALL_KERNELS=1); "
                    f"this run covers VM_KERNEL={kernel_name}")
    kdir = REPO / "build" / "kmod" / kernel
    for ko in ("gdrpeer.ko", "gdrpeer_nvstub.ko", "gdrpeer_nvstub_gpl.ko"):
        assert (kdir / ko).exists(), f"{kdir / ko} missing: make vm-modules VM_KERNEL={kernel}"
    cmds = commands(False)
    res = Node(kernel, "switch", "translated").run(
        [cmds["nongpl_symbol_get"], cmds["load"], "rmmod gdrpeer && rmmod gdrpeer_nvstub_gpl"],
        timeout=400)
    assert "status=active (symbol_get)" in res.results[1].output, res.results[1].output
    assert res.results[2].status == 0, res.results[2].output
    assert res.problems() == []
    check_gpl_rule(kernel, res.results[0])


# ---- 5. NVIDIA's proprietary modules: never linked (issue 12, defect 4) ----------------------

def built(kdir, *names):
    for n in names:
        if not (kdir / n).exists():
            pytest.fail(f"{kdir / n} missing (make vm-modules)")


def decide(tmp, nvidia_symvers, search=None):
    """driver/Makefile's NVIDIA_SYMVERS decision alone (make nvidia_link.h in a copy of driver/,
    and print the arguments it would give kbuild; KDIR names no kernel, so nothing installed on
    this host is consulted). Returns (exit status, make's output, nvidia_link.h or None,
    {kbuild variable: value} for NVIDIA_SYMVERS and KBUILD_EXTRA_SYMBOLS)."""
    drv = tmp / "driver"
    if drv.exists():
        shutil.rmtree(drv)
    shutil.copytree(REPO / "driver", drv)
    cmd = ["make", "-s", "-C", str(drv), f"KDIR={tmp / 'no-kernel'}",
           f"NVIDIA_SYMVERS={nvidia_symvers}",
           "--eval", "kbuild-args: ; @echo 'kbuild: $(KBUILD_ARGS)'", "nvidia_link.h", "kbuild-args"]
    if search is not None:
        cmd.append(f"NVIDIA_SYMVERS_SEARCH={search}")
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    header = drv / "nvidia_link.h"
    m = re.search(r"^kbuild: (.*)$", p.stdout, re.M)
    args = dict(re.findall(r"\b(NVIDIA_SYMVERS|KBUILD_EXTRA_SYMBOLS)=(\S*)", m.group(1))) if m else {}
    return (p.returncode, p.stdout + p.stderr, header.read_text() if header.exists() else None,
            args)


def fake_dkms(tmp, name, module, ko=None, export="EXPORT_SYMBOL"):
    """tmp/dkms/NAME/Module.symvers naming tmp/dkms/NAME/MODULE as the exporter of nvidia_p2p_*,
    as the NVIDIA driver's DKMS build leaves it, with the .ko `ko` copied there as MODULE.ko."""
    d = tmp / "dkms" / name
    d.mkdir(parents=True)
    lines = [f"0x00000000\t{s}\t{d / module}\t{export}\t\n"
             for s in ("nvidia_p2p_get_pages", "nvidia_p2p_put_pages")]
    (d / "Module.symvers").write_text("".join(lines))
    if ko:
        shutil.copy2(ko, d / f"{module}.ko")
    return d / "Module.symvers"


def test_build_never_links_a_proprietary_exporter(tmp_path, gdrpeer_ko):
    """Every way NVIDIA_SYMVERS can point at an exporter, against the stand-ins' real .ko files."""
    kdir = gdrpeer_ko.parent
    built(kdir, "gdrpeer_nvstub_prop.ko", "gdrpeer_nvstub.ko")
    prop = fake_dkms(tmp_path, "prop", "nvidia", kdir / "gdrpeer_nvstub_prop.ko")
    gpl = fake_dkms(tmp_path, "gpl", "nvidia", kdir / "gdrpeer_nvstub.ko")
    gone = fake_dkms(tmp_path, "gone", "nvidia")                 # .ko cleaned away
    gplexp = fake_dkms(tmp_path, "gplexp", "nvidia", kdir / "gdrpeer_nvstub_prop.ko",
                       export="EXPORT_SYMBOL_GPL")
    line = re.compile(r"^gdrpeer: nvidia provider: (.*)$", re.M)

    # auto, the proprietary exporter: symbol_get, and why
    rc, out, h, kb = decide(tmp_path, "auto", search=str(prop))
    assert rc == 0, out
    why = (f'symbol_get: not linked against {prop}: nvidia is licensed "NVIDIA" '
           f'(modinfo {prop.parent / "nvidia.ko"}), and a module using GPL-only symbols may not '
           f'use symbols of a proprietary module')
    assert line.search(out).group(1) == why, out
    assert "#define GDRPEER_NV_LINK_REFUSED 1" in h
    assert kb == {"NVIDIA_SYMVERS": ""}, out     # kbuild builds the symbol_get variant
    assert '#define GDRPEER_NV_LINK "' + why.replace('"', '\\"') + '"' in h, h
    # explicit: refused, nothing written
    rc, out, h, kb = decide(tmp_path, str(prop))
    assert rc != 0 and h is None, out
    assert f'refusing NVIDIA_SYMVERS={prop}: nvidia is licensed "NVIDIA"' in out, out
    assert "NVIDIA_SYMVERS=none" in out

    # the GPL exporter (licence "GPL"; NVIDIA's open modules say "Dual MIT/GPL"): linked, both
    # ways; auto prefers it to the others found ("gone" comes first and is not GPL-compatible)
    for how, search in (("auto", f"{tmp_path}/dkms/*/Module.symvers"), (str(gpl), None)):
        rc, out, h, kb = decide(tmp_path, how, search)
        assert rc == 0, out
        got = line.search(out).group(1)
        assert got.startswith(f"linked against {gpl}: nvidia is licensed \"GPL\" "), out
        assert got.endswith("GPL-compatible") and "REFUSED" not in h
        assert kb == {"NVIDIA_SYMVERS": str(gpl), "KBUILD_EXTRA_SYMBOLS": str(gpl)}, out

    # licence unknown: taken as not GPL-compatible
    rc, out, h, kb = decide(tmp_path, "auto", search=str(gone))
    assert rc == 0, out
    assert line.search(out).group(1).startswith(
        f"symbol_get: not linked against {gone}: the licence of nvidia is unknown"), out
    assert "taken as not GPL-compatible" in out and "REFUSED 1" in h
    assert kb == {"NVIDIA_SYMVERS": ""}, out
    rc, out, h, kb = decide(tmp_path, str(gone))
    assert rc != 0 and h is None and "the licence of nvidia is unknown" in out, out

    # auto ignores a Module.symvers whose nvidia_p2p_* are GPL exports (symbol_get reaches them)
    rc, out, h, kb = decide(tmp_path, "auto", search=str(gplexp))
    assert rc == 0, out
    assert line.search(out).group(1).startswith(
        "symbol_get: no Module.symvers exporting nvidia_p2p_get_pages without _GPL"), out
    assert kb == {"NVIDIA_SYMVERS": ""}, out
    # and none: symbol_get, said so, and kbuild does not see "none" as a file to link against
    rc, out, h, kb = decide(tmp_path, "none")
    assert rc == 0 and line.search(out).group(1) == "symbol_get: NVIDIA_SYMVERS=none", out
    assert kb == {"NVIDIA_SYMVERS": ""}, out


def test_build_logs_of_the_test_variants(gdrpeer_ko):
    """The builds the guest tests load chose as they must, and modinfo says so."""
    kdir = gdrpeer_ko.parent
    built(kdir, "gdrpeer-linked.ko", "gdrpeer-autoprop.ko", "gdrpeer-linked.log",
          "gdrpeer-autoprop.log")
    logs = {v: (kdir / f"gdrpeer-{v}.log").read_text() for v in ("linked", "autoprop")}
    info = {v: subprocess.run(["modinfo", "-F", "nvidia_link", str(kdir / f"gdrpeer-{v}.ko")],
                              capture_output=True, text=True, check=True).stdout.strip()
            for v in ("linked", "autoprop")}
    # the GPL stand-in: linked, as before
    assert re.search(r'^gdrpeer: nvidia provider: linked against \S+/Module\.symvers: '
                     r'gdrpeer_nvstub is licensed "GPL" ', logs["linked"], re.M), logs["linked"]
    assert info["linked"].startswith("linked against ") and "gdrpeer_nvstub is licensed" in \
        info["linked"]
    # the proprietary one found by auto: symbol_get
    m = re.search(r'^gdrpeer: nvidia provider: (symbol_get: not linked against \S+/Module\.symvers: '
                  r'gdrpeer_nvstub_prop is licensed "NVIDIA" .*)$', logs["autoprop"], re.M)
    assert m, logs["autoprop"]
    assert info["autoprop"] == m.group(1)


def test_proprietary_exporter(node_factory, gdrpeer_ko, kernel_name):
    """gdrpeer-autoprop.ko loads next to the proprietary stand-in, pcibar exports, the status
    says why nvidia is unavailable; the linked build of old is refused by the kernel."""
    kdir = gdrpeer_ko.parent
    check_programs(kdir)
    built(kdir, "gdrpeer-autoprop.ko", "gdrpeer-proplinked.ko", "gdrpeer_nvstub_prop.ko")
    prop = f"insmod {M}/gdrpeer_nvstub_prop.ko"
    cmds = {
        "load": f"{prop} && insmod {M}/gdrpeer-autoprop.ko pcibar=$GDRPEER_GPU_BDF "
                f"nvidia_module=gdrpeer_nvstub_prop && echo nvidia=$(cat {S}/nvidia/status) && "
                f"echo pcibar=$(cat {S}/pcibar/status)",
        "pcibar_dma": PCIBAR_DMA,
        "unload": "rmmod gdrpeer_edu_hca && rmmod gdrpeer && rmmod gdrpeer_nvstub_prop && "
                  "echo unloaded",
        "control": f"{prop} && {{ insmod {M}/gdrpeer-proplinked.ko pcibar=$GDRPEER_GPU_BDF; "
                   f"echo insmod_rc=$?; }}; test -e /sys/module/gdrpeer && echo gdrpeer_loaded; "
                   f"rmmod gdrpeer 2>/dev/null; rmmod gdrpeer_nvstub_prop && echo unloaded",
    }
    # allow_problems: the harness refuses a P taint; the checks below allow that one alone
    res = node_factory("switch", "translated", bar_mib=64).run(list(cmds.values()), timeout=600,
                                                               allow_problems=True)
    out = {n: res.results[i] for i, n in enumerate(cmds)}

    r = out["load"]
    assert r.status == 0, r.output
    kv = dict(re.findall(r"^(\w+)=(.*)$", r.output, re.M))
    assert kv["pcibar"].startswith("active"), kv["pcibar"]
    check_pcibar_dma(res, out["pcibar_dma"])
    assert out["unload"].status == 0 and "unloaded" in out["unload"].output, out["unload"].output
    # the stand-in looked proprietary to the kernel; nothing else went wrong
    assert res.taint & TAINT_PROPRIETARY, f"taint {res.taint:#x}: the stand-in is not proprietary?"
    assert res.taint & ~(ALLOWED_TAINT | TAINT_PROPRIETARY) == 0, f"taint {res.taint:#x}"
    assert [l for l in res.kernel_log.splitlines() if PROBLEM.search(l)] == []
    assert "nothing should reach this module's exports" not in res.kernel_log

    c = out["control"]
    assert "unloaded" in c.output, c.output
    refused = re.search(r"module using GPL-only symbols uses symbols.* from proprietary module "
                        r"gdrpeer_nvstub_prop", res.kernel_log)
    status = kv["nvidia"]
    if kernel_name in GPL_ONLY_SYMBOL_GET:
        assert status.startswith("unavailable: gdrpeer_nvstub_prop is loaded but its "
                                 "nvidia_p2p_* exports are not GPL"), status
        assert "a proprietary exporter cannot be served on this kernel" in status, status
        assert re.search(r'\(build: symbol_get: not linked against \S+: gdrpeer_nvstub_prop is '
                         r'licensed "NVIDIA" .*proprietary module\)$', status), status
    if kernel_name in REFUSE_GPL_PROPRIETARY_MIX:
        assert re.search(r"^insmod_rc=[1-9]", c.output, re.M), c.output
        assert "gdrpeer_loaded" not in c.output, c.output
        assert refused, res.kernel_log[-3000:]
    if kernel_name not in GPL_ONLY_SYMBOL_GET or kernel_name not in REFUSE_GPL_PROPRIETARY_MIX:
        pytest.skip(f"kernel {kernel_name}: the status ({status}) and the linked build's fate "
                    f"({'refused' if refused else 'not refused'}) are not asserted here")

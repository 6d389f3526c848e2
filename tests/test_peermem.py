"""gdrpeer as an OFED peer-memory client (issue 13) in the emulated node.

The test bed has no MLNX_OFED: selftests/kmod/gdrpeer_peerhost.ko plays its ib_core (it exports
ib_register/unregister_peer_memory_client with OFED's ABI and registers user addresses the way
ib_umem_get does, with edu as the HCA), installed as an OFED-style tree
(build/kmod/<kernel>/ofa_kernel: include/rdma/peer_mem.h + Module.symvers) that driver/Makefile's
probe finds through OFA_DIR= exactly as it finds /usr/src/ofa_kernel/<arch>/<kver>; the result is
gdrpeer-ofed.ko (make vm-modules). The plain gdrpeer.ko, built without OFED, leaves the client out.

One boot per IOMMU mode (off, translated, passthrough) on VM_KERNEL runs, in order:
  1. gdrpeer-ofed.ko cannot load before the host (the kernel names the missing symbol);
  2. CUDA addresses (and, with a module named nvidia_peermem loaded, who owns them): the nvidia_p2p stand-in gdrpeer_nvstub_gpl.ko owns the BAR ("GPU memory"
     in 64 KiB pages, NVSTUB_IOCTL_ALLOC/FREE as cuMemAlloc/cuMemFree), gdrpeer-ofed.ko without
     pcibar=; the kselftest's peermem_cuda fixture: 64 KiB page size, entries per contiguous
     range, refusal of addresses that are not the caller's CUDA memory and peermem_cuda=off,
     cudaFree during DMA (free callback -> invalidate, DMA stopped, nothing put afterwards),
     persistent pins outliving cudaFree, process exit, an 8-thread free/register/deregister race;
  3. edu stand-in, host, gdrpeer-ofed.ko: the status line, the host's view of the client;
  4. the kselftest's peermem fixture: contract (order, calls out of order refused, page
     size, one coalesced entry, refusal of memory it does not own, handle lifetime, rmmod
     refused while registered, process exit and fork), invalidation on device revocation
     during DMA, an 8-thread race;
  5. its --proof mode: the data test once more, leaving the bytes edu wrote through the client's
     DMA addresses in the BAR for the host to find;
  6. the host cannot be unloaded before its client; then both unload; a host that refuses the
     client, and one that gives it no invalidate callback: gdrpeer loads, inactive, one line why;
  7. the plain gdrpeer.ko: the client left out, saying why, in sysfs and the kernel log;
  8. --cuda-proof (last: it leaves a CUDA allocation held): bytes edu wrote through a CUDA
     registration are in the BAR file, and the pages of an allocation freed during DMA hold
     nothing but the stand-in's poison (DMA had stopped before they were reused).
Other kernels: GDRPEER_ALL_KERNELS=1 (make test-kernels), translated only.

Two more boots (translated): who owns CUDA addresses seen from a chroot (issue 22, defect 6), and
the client's name in ib_core with the host's memory_peers/<name>/ entries (issue 24, item 4);
test_owner_and_name_other_kernels runs both on the other kernels in make test-kernels.
"""

import os
import re

import pytest

from emunode import Node, known_kernels
from helpers.guest import GUEST_MODULES as M
from helpers.guest import IOMMU_MODES as MODES
from helpers.guest import NVSTUB_GPU_PAGE as GPU_PAGE
from helpers.guest import NVSTUB_POISON, skip_unless_another_kernel
from helpers.paths import BIN, REPO
from helpers.tap import check_all_passed, listed_tests, pattern

PM = "/sys/class/gdrpeer/gdrpeer/providers/peermem"
HOST = "/sys/class/misc/gdrpeer_peerhost"
STUB = f"insmod {M}/gdrpeer_nvstub_gpl.ko bar=$GDRPEER_GPU_BDF"
OFED_CUDA = f"insmod {M}/gdrpeer-ofed.ko nvidia_module=gdrpeer_nvstub_gpl"

COMMANDS = {
    "no_host": f"insmod {M}/gdrpeer-ofed.ko pcibar=$GDRPEER_GPU_BDF; echo rc=$?; "
               "test -e /sys/module/gdrpeer || echo notloaded",
    "cuda": f"insmod {M}/gdrpeer_edu_hca.ko && {STUB} && insmod {M}/gdrpeer_peerhost.ko && "
            f"{OFED_CUDA} && cat {PM}/status && gdrpeer_selftest_peermem --only peermem_cuda; "
            "rc=$?; rmmod gdrpeer && rmmod gdrpeer_peerhost && rmmod gdrpeer_nvstub_gpl && "
            "echo unloaded; exit $rc",
    # a module named nvidia_peermem (name only) loaded first: auto leaves CUDA addresses to it
    "coexist": f"insmod {M}/nvidia_peermem.ko && {STUB} && insmod {M}/gdrpeer_peerhost.ko && "
               f"{OFED_CUDA} && gdrpeer_selftest_peermem --only peermem_coexist; rc=$?; "
               "rmmod gdrpeer && rmmod gdrpeer_peerhost && rmmod gdrpeer_nvstub_gpl && "
               "rmmod nvidia_peermem && echo unloaded; exit $rc",
    "load": f"insmod {M}/gdrpeer_peerhost.ko && "
            f"insmod {M}/gdrpeer-ofed.ko pcibar=$GDRPEER_GPU_BDF && cat {PM}/status && "
            f"cat {HOST}/clients",
    "selftest": "gdrpeer_selftest_peermem --only peermem",
    "proof": "gdrpeer_selftest_peermem --proof /out/peermem_proof",
    "unload": "rmmod gdrpeer_peerhost; echo host_first_rc=$?; rmmod gdrpeer && "
              "rmmod gdrpeer_peerhost && echo unloaded",
    # a core that refuses the client, then one without invalidation: gdrpeer loads, says why
    "refused": f"insmod {M}/gdrpeer_peerhost.ko refuse_clients=1 && "
               f"insmod {M}/gdrpeer-ofed.ko pcibar=$GDRPEER_GPU_BDF && cat {PM}/status && "
               "rmmod gdrpeer && rmmod gdrpeer_peerhost",
    "no_inval": f"insmod {M}/gdrpeer_peerhost.ko no_invalidation=1 && "
                f"insmod {M}/gdrpeer-ofed.ko pcibar=$GDRPEER_GPU_BDF && cat {PM}/status && "
                f"cat {HOST}/clients; echo clients_done; rmmod gdrpeer && rmmod gdrpeer_peerhost && "
                "rmmod gdrpeer_edu_hca",
    "plain": f"insmod {M}/gdrpeer.ko pcibar=$GDRPEER_GPU_BDF && cat {PM}/status && "
             f"ls {PM} && rmmod gdrpeer",
    "cuda_proof": f"insmod {M}/gdrpeer_edu_hca.ko && {STUB} && insmod {M}/gdrpeer_peerhost.ko && "
                  f"{OFED_CUDA} && gdrpeer_selftest_peermem --cuda-proof /out/peermem_cuda_proof",
}
NAMES = list(COMMANDS)


def boot(kernel, iommu):
    kmod = REPO / "build" / "kmod" / kernel
    for ko in ("gdrpeer-ofed.ko", "gdrpeer_peerhost.ko", "gdrpeer_edu_hca.ko", "gdrpeer.ko",
               "gdrpeer_nvstub_gpl.ko", "nvidia_peermem.ko"):
        if not (kmod / ko).exists():
            pytest.fail(f"{kmod / ko} missing (make vm-modules VM_KERNEL={kernel})")
    if not (BIN / "gdrpeer_selftest_peermem").exists():
        pytest.fail(f"{BIN / 'gdrpeer_selftest_peermem'} missing (make selftests)")
    res = Node(kernel, "switch", iommu, bar_mib=64).run(list(COMMANDS.values()), timeout=900)
    return res, {n: res.results[i] for i, n in enumerate(NAMES)}


@pytest.fixture(scope="module", params=MODES)
def run(request, kernel_name):
    return (request.param,) + boot(kernel_name, request.param)


def check_cuda(res, out):
    # 2: CUDA addresses through the nvidia provider: every kselftest ran and passed
    cu = out["cuda"]
    assert "CUDA addresses: claimed through the nvidia provider, callback pins " \
           "(peermem_cuda=auto, nvidia_peermem not loaded)" in cu.output, cu.output[-3000:]
    check_all_passed(cu.output, len(listed_tests("gdrpeer_selftest_peermem", "peermem_cuda")))
    assert cu.status == 0 and "unloaded" in cu.output, cu.output[-3000:]
    race = re.search(r"cuda race: (\d+) registrations, \d+ refused, (\d+) freed underneath, "
                     r"\d+ seen invalidated, (\d+) client invalidations", cu.output)
    assert race and all(int(g) > 0 for g in race.groups()), cu.output[-3000:]
    # the stand-in logged no API violation (a put or unmap gdrpeer must not make)
    assert "API violation" not in res.kernel_log

    # coexistence: with nvidia_peermem loaded, the load line and sysfs say who owns CUDA addresses
    co = out["coexist"]
    check_all_passed(co.output, len(listed_tests("gdrpeer_selftest_peermem", "peermem_coexist")))
    assert co.status == 0 and "unloaded" in co.output, co.output[-3000:]
    assert re.search(r"gdrpeer: ABI .* loaded, 0 device\(s\) bound; providers: .*; peermem active: "
                     r"registered with ib_core .*CUDA addresses: left to nvidia_peermem "
                     r"\(it is loaded; peermem_cuda=auto\)\)", res.kernel_log)

    # 8: the bytes of A are in the BAR file at its two scattered GPU pages; B's pages, freed
    # while edu wrote through them, hold only poison: the DMA stopped before the pages went
    pr = out["cuda_proof"]
    assert pr.status == 0, pr.output[-3000:]
    a_line, b_line = res.files["peermem_cuda_proof"].splitlines()
    a0, a1, seed, off, length = map(int, a_line.split())
    b0, b1, rounds = map(int, b_line.split())
    assert rounds > 0
    with open(res.bar_path, "rb") as f:
        def page(o):
            f.seek(o)
            return f.read(GPU_PAGE)
        a = page(a0) + page(a1)
        assert a[off:off + length] == pattern(seed, length)
        for b in (b0, b1):
            assert page(b) == bytes([NVSTUB_POISON]) * GPU_PAGE, f"BAR page {b:#x}"
    return {a0, a1, b0, b1}


def check_boot(res, out):
    # 1: linked against the host's exports, so the kernel refuses it and names the symbol
    assert "rc=0" not in out["no_host"].output and "notloaded" in out["no_host"].output
    assert re.search(r"gdrpeer: Unknown symbol ib_register_peer_memory_client", res.kernel_log)
    cuda_pages = check_cuda(res, out)

    # 2: registered with the host, with invalidation and INVALIDATE_UNMAPS
    load = out["load"]
    assert load.status == 0, load.output
    assert "active: registered with ib_core as peer-memory client \"gdrpeer\" (gdrpeer handle " \
           "mappings; CUDA addresses: " in load.output
    assert "gdrpeer inval unmaps" in load.output
    assert re.search(r"gdrpeer: ABI .* loaded, 1 device\(s\) bound; providers: pcibar active, "
                     r"nvidia .*; peermem active", res.kernel_log)

    # 3: every kselftest ran and passed
    st = out["selftest"]
    check_all_passed(st.output, len(listed_tests("gdrpeer_selftest_peermem", "peermem")))
    assert st.status == 0
    race = re.search(r"(\d+) registrations, (\d+) refused, (\d+) revocations", st.output)
    assert race and int(race.group(1)) > 0 and int(race.group(3)) > 0, st.output[-3000:]

    # 4: the bytes edu wrote through the client's DMA addresses are in the BAR file
    pr = out["proof"]
    assert pr.status == 0, pr.output[-3000:]
    bar_off, seed, length = map(int, res.files["peermem_proof"].split())
    # the CUDA proof's pages (from the top of the BAR) must not cover these bytes
    assert not any(p <= bar_off < p + GPU_PAGE or p < bar_off + length <= p + GPU_PAGE
                   for p in cuda_pages), (bar_off, cuda_pages)
    with open(res.bar_path, "rb") as f:
        f.seek(bar_off)
        got = f.read(length)
    assert got == pattern(seed, length)

    # 5: the host stays while its client is loaded; then both go
    un = out["unload"]
    assert "host_first_rc=0" not in un.output and "unloaded" in un.output, un.output

    # a refused registration and a core without invalidation: loaded, inactive, one line why
    ref = out["refused"]
    assert ref.status == 0, ref.output
    assert "inactive: ib_core refused the registration" in ref.output
    assert "gdrpeer_peerhost: client gdrpeer refused (refuse_clients=1)" in res.kernel_log
    assert re.search(r"gdrpeer: peermem: ib_register_peer_memory_client refused gdrpeer .*Fix: ",
                     res.kernel_log)
    ni = out["no_inval"]
    assert ni.status == 0, ni.output
    assert "inactive: ib_core gave no invalidate callback" in ni.output
    # it unregistered again: the host's client list (between status and marker) is empty
    lines = ni.output.splitlines()
    assert lines[lines.index("clients_done") - 1].startswith("inactive:"), ni.output
    assert re.search(r"gdrpeer: peermem: ib_core registered gdrpeer but gave no invalidate "
                     r"callback.*Fix: ", res.kernel_log)

    # 6: built without OFED: left out, one line saying why, in sysfs and the kernel log
    plain = out["plain"]
    assert plain.status == 0, plain.output
    why = "left out: no /usr/src/ofa_kernel/"
    assert why in plain.output and "include/rdma/peer_mem.h" in plain.output
    assert "acquired" not in plain.output            # no gauges for a client that is not there
    assert re.search(r"peermem left out: no /usr/src/ofa_kernel/\S+/include/rdma/peer_mem.h",
                     res.kernel_log)
    # the host saw the client come (with invalidation, INVALIDATE_UNMAPS) and go
    assert re.search(r"gdrpeer_peerhost: client gdrpeer 1\.1 registered, invalidation, "
                     r"INVALIDATE_UNMAPS", res.kernel_log)
    assert "gdrpeer_peerhost: client gdrpeer unregistered" in res.kernel_log
    assert res.problems() == []


def test_peermem_client(run):
    _, res, out = run
    check_boot(res, out)


@pytest.mark.parametrize("kernel", known_kernels())
def test_peermem_other_kernels(kernel):
    skip_unless_another_kernel(kernel, "test_peermem_client covers it")
    res, out = boot(kernel, "translated")
    check_boot(res, out)


# Who owns CUDA addresses must not depend on the caller's filesystem view (issue 22, defect 6):
# gdrpeer decides "nvidia_peermem is loaded" from the kernel's module list (a module notifier and
# the module kset), not from a path resolved in the caller's root. The chroot has sysfs mounted at
# /s, so /sys/module is not where the old path lookup looked; a plain directory
# /sys/module/nvidia_peermem in the chroot is what a tenant could plant.
CHROOT = "/tmp/croot"
CUDA_ATTR = "class/gdrpeer/gdrpeer/providers/peermem/cuda"
VIEWS = (f'echo "host: $(cat /sys/{CUDA_ATTR})"; '
         f'echo "chroot: $(chroot {CHROOT} /bin/busybox cat /s/{CUDA_ATTR})"')
LEFT = "left to nvidia_peermem (it is loaded; peermem_cuda=auto)"
CLAIMED = "claimed through the nvidia provider, callback pins (peermem_cuda=auto, " \
          "nvidia_peermem not loaded)"
OWNER_COMMANDS = [
    # nvidia_peermem loaded before gdrpeer (found in the module kset at load)
    f"insmod {M}/nvidia_peermem.ko && insmod {M}/gdrpeer_edu_hca.ko && "
    f"insmod {M}/gdrpeer_peerhost.ko && insmod {M}/gdrpeer-ofed.ko && "
    f"mkdir -p {CHROOT}/bin {CHROOT}/s && cp /bin/busybox {CHROOT}/bin/ && "
    f"mount -t sysfs none {CHROOT}/s && echo ready && {VIEWS}",
    # unloaded (the notifier's GOING), with a planted /sys/module/nvidia_peermem in the chroot
    f"rmmod nvidia_peermem && mkdir -p {CHROOT}/sys/module/nvidia_peermem && {VIEWS}",
    # loaded after gdrpeer (the notifier's COMING/LIVE)
    f"insmod {M}/nvidia_peermem.ko && {VIEWS}",
    f"rmmod gdrpeer && rmmod gdrpeer_peerhost && rmmod nvidia_peermem && "
    "rmmod gdrpeer_edu_hca && echo unloaded",
]


def views(result):
    got = dict(line.split(": ", 1) for line in result.output.splitlines()
               if line.startswith(("host: ", "chroot: ")))
    return got.get("host"), got.get("chroot")


def test_cuda_owner_same_from_chroot(kernel_name):
    check_cuda_owner_from_chroot(kernel_name)


def check_cuda_owner_from_chroot(kernel_name):
    kmod = REPO / "build" / "kmod" / kernel_name
    for ko in ("gdrpeer-ofed.ko", "gdrpeer_peerhost.ko", "gdrpeer_edu_hca.ko",
               "nvidia_peermem.ko"):
        if not (kmod / ko).exists():
            pytest.fail(f"{kmod / ko} missing (make vm-modules VM_KERNEL={kernel_name})")
    res = Node(kernel_name, "switch", "translated", bar_mib=64).run(OWNER_COMMANDS, timeout=300)
    before, gone, after, unload = res.results
    assert "ready" in before.output, before.output
    for r in (before, gone, after):
        assert r.status == 0, r.output
    assert views(before) == (LEFT, LEFT), before.output
    assert views(gone) == (CLAIMED, CLAIMED), gone.output
    assert views(after) == (LEFT, LEFT), after.output
    assert unload.status == 0 and "unloaded" in unload.output, unload.output
    assert res.problems() == []


# The name the client registers under (issue 24, item 4): peermem_name= chooses it; the host makes
# /sys/kernel/mm/memory_peers/<name>/ as MOFED's ib_core does (what NCCL, NVSHMEM and UCX look
# for) and refuses a second client under a name already registered, as MOFED's does. Two clients
# under one name never exist: gdrpeer refuses an NVIDIA client name while nvidia_peermem is
# loaded, and refuses nvidia_peermem while it holds one. gdrpeer_peerclient.ko name=nv_mem plays
# nvidia_peermem's client (the name-only nvidia_peermem.ko plays its module name).
PEERS = "/sys/kernel/mm/memory_peers"
OFED_BAR = f"insmod {M}/gdrpeer-ofed.ko pcibar=$GDRPEER_GPU_BDF"
NAME_COMMANDS = {
    # the default name next to nvidia_peermem's stand-ins: both listed, each with its version
    "default": f"insmod {M}/gdrpeer_edu_hca.ko && insmod {M}/nvidia_peermem.ko && "
               f"insmod {M}/gdrpeer_peerhost.ko && insmod {M}/gdrpeer_peerclient.ko name=nv_mem && "
               f"{OFED_BAR} && cat {PM}/status && ls {PEERS} && "
               f"echo \"gdrpeer $(cat {PEERS}/gdrpeer/version) nv_mem $(cat {PEERS}/nv_mem/version)\"",
    "default_counters": "gdrpeer_selftest_peermem --only peermem_name",
    # nv_mem asked while nvidia_peermem is loaded: gdrpeer refuses it itself, loads inactive
    "nv_loaded": f"rmmod gdrpeer && {OFED_BAR} peermem_name=nv_mem && cat {PM}/status && "
                 f"ls {PEERS}",
    # no NVIDIA module, but a client named nv_mem registered: the host refuses the duplicate
    "duplicate": f"rmmod gdrpeer && rmmod nvidia_peermem && {OFED_BAR} peermem_name=nv_mem && "
                 f"cat {PM}/status && ls {PEERS}",
    # gdrpeer as nv_mem: its entry and counters
    "as_nv_mem": f"rmmod gdrpeer && rmmod gdrpeer_peerclient && {OFED_BAR} peermem_name=nv_mem && "
                 f"cat {PM}/status && cat /sys/module/gdrpeer/parameters/peermem_name && "
                 f"ls {PEERS} && cat {PEERS}/nv_mem/version && "
                 "gdrpeer_selftest_peermem --only peermem_name",
    # while gdrpeer holds nv_mem: a second nv_mem client and nvidia_peermem are refused
    "held": f"insmod {M}/gdrpeer_peerclient.ko name=nv_mem; echo client_rc=$?; "
            f"insmod {M}/nvidia_peermem.ko; echo nvpm_rc=$?; "
            "test -e /sys/module/nvidia_peermem && echo nvpm_loaded; "
            f"test -e /sys/module/gdrpeer_peerclient && echo client_loaded; ls {PEERS}; "
            f"rmmod gdrpeer && insmod {M}/nvidia_peermem.ko && echo nvpm_after_rc=$?",
    # names that cannot be a client's directory: the load is refused
    "bad_names": f"insmod {M}/gdrpeer-ofed.ko peermem_name=a/b; echo slash_rc=$?; "
                 f"insmod {M}/gdrpeer-ofed.ko peermem_name={'x' * 64}; echo long_rc=$?; "
                 f"insmod {M}/gdrpeer-ofed.ko peermem_name=; echo empty_rc=$?; "
                 "test -e /sys/module/gdrpeer || echo notloaded",
    # memory_peers/ goes with the last client, as in MOFED
    "gone": f"test ! -e {PEERS} && echo peers_gone; rmmod gdrpeer_peerhost && "
            "rmmod nvidia_peermem && echo unloaded",
}


def rc(output, name):
    m = re.search(rf"^{name}=(\d+)$", output, re.M)
    assert m, output
    return int(m.group(1))


def peermem_name_tap(result):
    check_all_passed(result.output, len(listed_tests("gdrpeer_selftest_peermem", "peermem_name")))
    assert result.status == 0


def test_peermem_client_name(kernel_name):
    check_client_name(kernel_name)


@pytest.mark.parametrize("kernel", known_kernels())
def test_owner_and_name_other_kernels(kernel):
    skip_unless_another_kernel(kernel, "the two tests above cover it")
    check_cuda_owner_from_chroot(kernel)
    check_client_name(kernel)


def check_client_name(kernel_name):
    kmod = REPO / "build" / "kmod" / kernel_name
    for ko in ("gdrpeer-ofed.ko", "gdrpeer_peerhost.ko", "gdrpeer_peerclient.ko",
               "gdrpeer_edu_hca.ko", "nvidia_peermem.ko"):
        if not (kmod / ko).exists():
            pytest.fail(f"{kmod / ko} missing (make vm-modules VM_KERNEL={kernel_name})")
    if not (BIN / "gdrpeer_selftest_peermem").exists():
        pytest.fail(f"{BIN / 'gdrpeer_selftest_peermem'} missing (make selftests)")
    res = Node(kernel_name, "switch", "translated", bar_mib=64).run(
        list(NAME_COMMANDS.values()), timeout=600)
    out = {n: res.results[i] for i, n in enumerate(NAME_COMMANDS)}
    log = res.kernel_log

    d = out["default"]
    assert d.status == 0, d.output
    assert 'active: registered with ib_core as peer-memory client "gdrpeer"' in d.output
    assert d.output.split().count("gdrpeer") >= 1 and "nv_mem" in d.output.split(), d.output
    assert "gdrpeer 1.1 nv_mem stand-in" in d.output, d.output
    peermem_name_tap(out["default_counters"])

    nv = out["nv_loaded"]
    assert nv.status == 0, nv.output
    assert "inactive: peermem_name=nv_mem refused: nvidia_peermem is loaded and registers " \
           "that name" in nv.output, nv.output
    assert nv.output.split()[-1] == "nv_mem" and "gdrpeer" not in nv.output.split(), nv.output
    assert re.search(r"gdrpeer: peermem: peermem_name=nv_mem refused: nvidia_peermem is loaded "
                     r"and registers its client under that name.*Fix: ", log)

    dup = out["duplicate"]
    assert dup.status == 0, dup.output
    assert "inactive: ib_core refused the registration" in dup.output, dup.output
    assert re.search(r"gdrpeer_peerhost: client nv_mem refused: a client of that name is "
                     r"registered", log)
    assert re.search(r'gdrpeer: peermem: ib_register_peer_memory_client refused gdrpeer as '
                     r'client "nv_mem" .*Fix: ', log)

    nvm = out["as_nv_mem"]
    assert 'active: registered with ib_core as peer-memory client "nv_mem"' in nvm.output, \
        nvm.output
    assert "\nnv_mem\nnv_mem\n1.1\n" in nvm.output, nvm.output     # parameter, ls, version
    peermem_name_tap(nvm)

    held = out["held"]
    assert rc(held.output, "client_rc") != 0 and rc(held.output, "nvpm_rc") != 0, held.output
    assert "nvpm_loaded" not in held.output and "client_loaded" not in held.output, held.output
    assert rc(held.output, "nvpm_after_rc") == 0, held.output   # the name is free again
    assert re.search(r"gdrpeer: peermem: nvidia_peermem refused: gdrpeer's peer-memory client "
                     r'is registered as "nv_mem".*Fix: ', log)

    bad = out["bad_names"]
    for name in ("slash_rc", "long_rc", "empty_rc"):
        assert rc(bad.output, name) != 0, bad.output
    assert "notloaded" in bad.output, bad.output
    gone = out["gone"]
    assert "peers_gone" in gone.output and "unloaded" in gone.output, gone.output
    assert res.problems() == []

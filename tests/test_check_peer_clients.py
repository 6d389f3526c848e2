"""`gdrpeer check` live in the emulated node lists gdrpeer's peer-memory client and says which
consumer sees it (issue 24, "Tests": the client name).

One boot (VM_KERNEL, switch, IOMMU off): the test-only peer-memory host
(selftests/kmod/gdrpeer_peerhost.ko, which makes /sys/kernel/mm/memory_peers/<name>/ with its
version and counters as MOFED's ib_core does) and gdrpeer-ofed.ko, first with the default client
name, then reloaded with peermem_name=nv_mem. After each load the kselftest's peermem_name fixture
registers and deregisters (so the counters are not all zero), the files of memory_peers/ are
printed with cat (the truth the checker must report), and `gdrpeer check` runs in JSON and text.

What each consumer sees is taken from docs/driver.md's table, derived from their sources (NCCL
src/transport/net_ib/gdr.cc, NVSHMEM transport_ib_common.cpp nvshmemt_ib_common_nv_peer_mem_available,
UCX src/uct/ib/base/ib_md.c): a client named nv_mem is seen by all three, one named gdrpeer by none.

The stack stage judges consumers for NVIDIA GPU x NIC pairs only (stack_rules.cpp: by vendor id),
and the node's "GPU" is QEMU's ivshmem (1af4:1110). So the guest bind-mounts a file reading
0x10de over that device's sysfs `vendor` (the one file changed; config space, BARs and the rest
are the device's own) to get the per-pair consumer entries; the node-wide `peer-clients` note
needs no such help. The check runs with the three consumers' dma-buf switches off
(NCCL_DMABUF_ENABLE=0, NVSHMEM_IB_DISABLE_DMABUF=1, UCX_CUDA_COPY_DMABUF=no, which the checker
models): without CUDA in the guest dma-buf is unknown, and with it off the peer-memory client is
the only path, so each consumer's answer turns on the client's name alone.

Last, gdrpeer's peermem_cuda is set to off while it is registered as nv_mem: the consumers still
see nv_mem and turn GDR on, but no client serves CUDA addresses (docs/driver.md), so the checker
must call each consumer's pair blocked; it reads gdrpeer's providers/peermem/cuda line for that."""

import json
import re

import pytest

from emunode import Node
from emunode.paths import build_dir

M = "/gdrpeer/modules"
PEERS = "/sys/kernel/mm/memory_peers"
VENDOR = "/sys/bus/pci/devices/$GDRPEER_GPU_BDF/vendor"
ENV = "NCCL_DMABUF_ENABLE=0 NVSHMEM_IB_DISABLE_DMABUF=1 UCX_CUDA_COPY_DMABUF=no"
CHECK = (f"{ENV} gdrpeer check --no-cuda --data-dir /gdrpeer/topology "
         "--gpu $GDRPEER_GPU_BDF --nic $GDRPEER_NIC_BDF")
# docs/driver.md, "The client's name, and who sees it": consumers recognising each name
SEEN_BY = {"gdrpeer": set(), "nv_mem": {"nccl", "nvshmem", "ucx"}}


def loaded_as(name):
    """Counters moved by one registration, memory_peers as cat reads it, then check twice."""
    return (f"gdrpeer_selftest_peermem --only peermem_name; echo selftest_rc=$?; "
            f"for f in {PEERS}/*/*; do echo \"peerfile $f $(cat $f)\"; done; "
            f"{CHECK} --json > /out/{name}.json; echo json_rc=$?; "
            f"{CHECK} > /out/{name}.txt; echo text_rc=$?")


COMMANDS = [
    # the GPU stand-in as an NVIDIA device for the stack stage (see above)
    f"echo 0x10de > /tmp/nvidia_vendor && mount --bind /tmp/nvidia_vendor {VENDOR} && "
    f"cat {VENDOR} && insmod {M}/gdrpeer_edu_hca.ko && insmod {M}/gdrpeer_peerhost.ko && "
    f"insmod {M}/gdrpeer-ofed.ko pcibar=$GDRPEER_GPU_BDF && "
    "cat /sys/class/gdrpeer/gdrpeer/providers/peermem/status",
    loaded_as("gdrpeer"),
    "rmmod gdrpeer && insmod " + f"{M}/gdrpeer-ofed.ko pcibar=$GDRPEER_GPU_BDF peermem_name=nv_mem && "
    "cat /sys/class/gdrpeer/gdrpeer/providers/peermem/status",
    loaded_as("nv_mem"),
    # the same client serving no CUDA addresses: consumers still see nv_mem, registration fails
    "echo off > /sys/module/gdrpeer/parameters/peermem_cuda && "
    "cat /sys/class/gdrpeer/gdrpeer/providers/peermem/cuda && "
    f"{CHECK} --json > /out/nv_mem_nocuda.json; echo json_rc=$?",
    f"rmmod gdrpeer && rmmod gdrpeer_peerhost && rmmod gdrpeer_edu_hca && test ! -e {PEERS} && "
    "echo unloaded",
]


def peer_files(output):
    """{client: {file: value}} from the `peerfile PATH VALUE` lines (what the kernel says)."""
    got = {}
    for m in re.finditer(rf"^peerfile {PEERS}/([^/\s]+)/(\S+) (.*)$", output, re.M):
        got.setdefault(m.group(1), {})[m.group(2)] = m.group(3).strip()
    return got


def check_client(res, result, name):
    out = result.output
    assert "selftest_rc=0" in out, out[-3000:]
    truth = peer_files(out)
    assert set(truth) == {name}, out[-3000:]
    files = truth[name]
    assert files["version"] == "1.1" and int(files["num_alloc_mrs"]) >= 1, files
    assert f"{name}.json" in res.files and f"{name}.txt" in res.files, out[-3000:]
    j = json.loads(res.files[f"{name}.json"])
    text = res.files[f"{name}.txt"].decode()

    # the registered client as the checker reads it: name, version and every counter as cat reads them
    (client,) = j["node"]["software"]["stack"]["peer_clients"]
    assert client["name"] == name and client["version"] == files["version"], client
    assert client["counters"] == {k: v for k, v in files.items() if k != "version"}, (client, files)

    # the note naming the client, its counters and who sees it
    notes = {n["rule"]: n for n in j["notes"]}
    listing = (f"{name} 1.1, {files['num_alloc_mrs']} MRs, {files['num_reg_bytes']} bytes registered, ")
    seen = SEEN_BY[name]
    listing += "seen by NCCL, NVSHMEM, UCX" if seen else "seen by none of NCCL, NVSHMEM, UCX"
    assert "peer-clients" in notes and listing in notes["peer-clients"]["text"], j["notes"]
    assert listing in text and "(peer-clients)" in text, text
    if seen:
        assert "peer-client-invisible" not in notes, notes
        assert "(peer-client-invisible)" not in text, text
    else:
        inv = notes["peer-client-invisible"]
        assert f"peer-memory client '{name}'" in inv["text"], inv
        assert "peermem_name=nv_mem" in inv["fix"], inv       # the fix names the name they look for
        assert f"peer-memory client '{name}'" in text and "(peer-client-invisible)" in text, text

    # per GPU x NIC: each consumer takes the peer-memory client exactly when it knows the name
    (pair,) = j["pairs"]
    assert pair["class"] == "PIX", pair
    consumers = pair["consumers"]
    rules = {f["rule"] for f in pair["findings"]}
    for c in ("nccl", "nvshmem", "ucx"):
        d = consumers[c]
        if c in seen:
            assert d["gdr"] is True and d["path"] == "peer-memory", (c, d)
            assert f"consumer-{c}" not in rules, pair["findings"]
        else:
            assert d["gdr"] is False and d["path"] == "none" and d["rule"] == f"consumer-{c}", (c, d)
            assert f"consumer-{c}" in rules, pair["findings"]
    for c, word in (("nccl", "NCCL"), ("nvshmem", "NVSHMEM"), ("ucx", "UCX")):
        line = next(l for l in text.splitlines() if re.match(rf"\s+(GPU0 - NIC0)?\s+{c}: ", l))
        assert (f"{c}: GDR on, peer-memory" if c in seen else f"{c}: GDR off, none") in line, line
    if not seen:
        assert "GPU Direct RDMA Disabled for HCA" in consumers["nccl"]["why"], consumers["nccl"]
    return j


def note(j, rule):
    (n,) = [n for n in j["notes"] if n["rule"] == rule]
    return n


def check_unserved(res, result):
    """gdrpeer as nv_mem with peermem_cuda=off (docs/driver.md: the name promises CUDA memory, which
    holds only while gdrpeer serves CUDA addresses): the consumers turn GDR on through it, and their
    ibv_reg_mr of GPU memory finds no client: blocked, with the fix."""
    unserved = "not claimed (peermem_cuda=off)"
    assert result.status == 0 and unserved in result.output, result.output
    j = json.loads(res.files["nv_mem_nocuda.json"])
    (pair,) = j["pairs"]
    for c in ("nccl", "nvshmem", "ucx"):
        d = pair["consumers"][c]
        assert d["gdr"] is True and d["path"] == "peer-memory" and d["rule"] == f"consumer-{c}", (c, d)
        assert f"nv_mem client is gdrpeer's and serves no CUDA addresses ({unserved})" in d["why"], d
        (f,) = [f for f in pair["findings"] if f["rule"] == f"consumer-{c}"]
        assert f["severity"] == "blocked" and "peermem_cuda" in f["fix"], f
    assert f"(gdrpeer's client; CUDA addresses: {unserved})" in note(j, "peer-clients")["text"], j["notes"]


def test_check_lists_the_client_and_who_sees_it(kernel_name):
    kmod = build_dir() / "kmod" / kernel_name
    for ko in ("gdrpeer-ofed.ko", "gdrpeer_peerhost.ko", "gdrpeer_edu_hca.ko"):
        if not (kmod / ko).exists():
            pytest.fail(f"{kmod / ko} missing (make vm-modules VM_KERNEL={kernel_name})")
    for b in ("gdrpeer", "gdrpeer_selftest_peermem"):
        if not (build_dir() / "bin" / b).exists():
            pytest.fail(f"{build_dir() / 'bin' / b} missing (make userspace selftests)")
    res = Node(kernel_name, "switch", "off", bar_mib=64).run(COMMANDS, timeout=600)
    setup, as_gdrpeer, reload, as_nv_mem, no_cuda, unload = res.results
    assert setup.status == 0 and "0x10de" in setup.output, setup.output
    assert 'active: registered with ib_core as peer-memory client "gdrpeer"' in setup.output, setup.output
    assert reload.status == 0, reload.output
    assert 'active: registered with ib_core as peer-memory client "nv_mem"' in reload.output, reload.output
    check_client(res, as_gdrpeer, "gdrpeer")
    j = check_client(res, as_nv_mem, "nv_mem")
    claimed = "claimed through the nvidia provider, callback pins (peermem_cuda=auto, nvidia_peermem not loaded)"
    assert f"(gdrpeer's client; CUDA addresses: {claimed})" in note(j, "peer-clients")["text"], j["notes"]
    check_unserved(res, no_cuda)
    assert unload.status == 0 and "unloaded" in unload.output, unload.output
    assert res.problems() == []

"""The real 4x H200 node (issue 23; tests/reference/README.md says where each file came from):
its snapshot in the reference set checked offline against what nvidia-smi printed on that node,
and `gdrpeer verify --p2p` end to end through the CLI with a fake CUDA driver
(userspace/verify/tests/fake_cuda.cpp) whose GPUs are that node's, predicting from that snapshot."""

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from helpers.check_cli import gdrpeer_bin, run
from helpers.paths import REF, REPO

SNAPSHOT = REF / "h200x4-node-snapshot.tar"
FAKE_CUDA = Path(os.environ.get("GDRPEER_FAKE_CUDA_LIB", REPO / "build/userspace/verify/tests/libfake_cuda.so"))
GPUS = "0000:00:06.0,0000:00:07.0,0000:00:08.0,0000:00:09.0"


def smi_matrix():
    """nvidia-smi topo -m of the node: {(GPUi, GPUj): cell} and each GPU's NUMA Affinity."""
    lines = (REF / "truth" / "h200x4-nvidia-smi-topo-m.txt").read_text().splitlines()
    header = lines[0].split()
    labels = [h for h in header if re.fullmatch(r"GPU\d+", h)]
    cells, numa = {}, {}
    for line in lines[1:]:
        f = line.split()
        if not f or not re.fullmatch(r"GPU\d+", f[0]):
            break
        for col, c in zip(labels, f[1:1 + len(labels)]):
            cells[(f[0], col)] = c
        numa[f[0]] = f[len(labels) + 2]  # after the CPU Affinity column
    return labels, cells, numa


def pair_rows(report):
    """Each pair of a `check --json` report as (a, b, verdict, class, NVLink): what a snapshot
    must carry for the offline check to give the live node's answer."""
    return sorted((p["a_bdf"], p["b_bdf"], p["verdict"], p["class"], json.dumps(p["nvlink"], sort_keys=True))
                  for p in report["pairs"])


def smi_cpu_affinity():
    """nvidia-smi's CPU Affinity column of the node: {GPUi: "0-63"}."""
    lines = (REF / "truth" / "h200x4-nvidia-smi-topo-m.txt").read_text().splitlines()
    header = lines[0].split("\t")
    col = header.index("CPU Affinity")
    return {f[0]: f[col].strip() for f in (l.split("\t") for l in lines[1:]) if re.fullmatch(r"GPU\d+", f[0])}


@pytest.mark.parametrize("snapshot", ["h200x4-node-snapshot.tar", "h200x4-run2-snapshot.tar"])
def test_cpu_affinity_column_matches_nvidia_smi(snapshot):
    """Issue 25 item 9: nvidia-smi topo -m has a CPU Affinity column (the GPU's local CPUs);
    so do the text matrix and JSON devices. The snapshots recorded neither local_cpulist nor the
    node's cpulist: one NUMA node, so every online CPU of /proc/cpuinfo is local."""
    smi = smi_cpu_affinity()
    assert smi and set(smi.values()) == {"0-63"}, smi
    text = run("check", REF / snapshot, check_rc=0).stdout
    header = next(l for l in text.splitlines() if l.lstrip().startswith("GPU0 ") and "BDF" in l)
    assert "CPU Affinity" in header, header
    for gpu, want in smi.items():
        row = next(l for l in text.splitlines() if l.startswith(gpu + " "))
        assert row.split()[-3] == want, row  # CPU Affinity, NUMA, BDF
    j = json.loads(run("check", "--json", REF / snapshot, check_rc=0).stdout)
    gpus = {d["label"]: d["cpu_affinity"] for d in j["devices"] if d["role"] == "gpu"}
    assert gpus == smi, gpus


def test_real_h200_node_snapshot_matches_nvidia_smi():
    labels, smi, numa = smi_matrix()
    p = run("check", "--json", SNAPSHOT, check_rc=0)
    j = json.loads(p.stdout)
    assert j["matrix"]["labels"] == labels
    for i, a in enumerate(labels):
        for k, b in enumerate(labels):
            assert j["matrix"]["classes"][i][k] == smi[(a, b)], (a, b)
    for pair in j["pairs"]:
        assert pair["nvlink"] == {"bandwidth_mbps": 0, "inferred": False, "links": 18, "via": "nvswitch"}, pair
        assert pair["verdict"] == "optimal"
    gpus = [d for d in j["devices"] if d["role"] == "gpu"]
    assert [str(d["numa"]) for d in gpus] == [numa[g] for g in labels]  # 0, as nvidia-smi: one NUMA node
    notes = {n["rule"]: n["text"] for n in j["notes"]}
    assert notes["nvlink-nvml"] == "NVLink from NVML (driver 580.159.04): 4 GPU(s), 72 active link(s), 72 into NVSwitches"
    # The IOMMU note names no part of that VM's command line (it has no IOMMU parameter).
    assert notes["iommu-mode"] == "IOMMU: off (no IOMMU parameter on the kernel command line)"
    text = run("check", SNAPSHOT, check_rc=0).stdout
    assert re.search(r"^GPU0 +X +NV18 +NV18 +NV18 +0-63 +0 +0000:00:06\.0$", text, re.M), text


def fake_cuda():
    if not FAKE_CUDA.exists():
        pytest.fail(f"{FAKE_CUDA} is missing: build userspace first")
    return str(FAKE_CUDA)


def verify(*args, fake="", rc=None):
    env = dict(os.environ, GDRPEER_DATA_DIR=str(REPO / "topology"), GDRPEER_FAKE_CUDA=fake)
    p = subprocess.run([gdrpeer_bin(), "verify", "--p2p", *map(str, args)], capture_output=True, text=True, env=env, timeout=120)
    if rc is not None:
        assert p.returncode == rc, f"rc={p.returncode}\n{p.stdout}\n{p.stderr}"
    return p


def test_verify_p2p_agrees_with_the_real_node_prediction():
    p = verify("--libcuda", fake_cuda(), "--predict-from", SNAPSHOT, "--p2p-size", "1M", "--json",
               fake=f"gpus={GPUS} peer=1 peer_gbps=391 staged_gbps=38", rc=0)
    j = json.loads(p.stdout)
    assert len(j["pairs"]) == 12
    for x in j["pairs"]:
        assert x["outcome"] == "agree"
        assert x["comparison"] == "NV18 via NVSwitch: predicted P2P over NVLink; measured 391 GB/s"
        assert x["bad_bytes"] == 0 and x["can_access_peer"] == 1
    text = verify("--libcuda", fake_cuda(), "--predict-from", SNAPSHOT, "--p2p-size", "1M",
                  "--pair", "0000:00:09.0,00:06.0", fake=f"gpus={GPUS}", rc=0).stdout
    assert "0000:00:09.0 -> 0000:00:06.0: NV18 via NVSwitch: predicted P2P over NVLink; measured 390 GB/s [agree]" in text
    assert "Summary: 1 ordered pairs: 1 agree" in text


def test_verify_p2p_disagreement_exits_1():
    p = verify("--libcuda", fake_cuda(), "--predict-from", SNAPSHOT, "--p2p-size", "1M", "--json",
               fake=f"gpus={GPUS} peer=0", rc=1)
    j = json.loads(p.stdout)
    assert {x["outcome"] for x in j["pairs"]} == {"disagree"}


@pytest.mark.parametrize("args, msg", [
    (["--pair", "0000:00:06.0"], "--pair 0000:00:06.0: expected SRC_BDF,DST_BDF"),
    (["--pair", "0000:00:06.0,0000:00:06.0"], "a GPU with itself is not a peer pair"),
    (["--gpu", "zz"], "--gpu zz: expected a PCI address"),
    (["--p2p-size", "1K"], "--p2p-size: between 4 KiB and 16 GiB"),
    (["--p2p-reps", "0"], "--p2p-reps: between 1 and 10000"),
    (["--size", "4K"], "--p2p measures GPU pairs"),
    (["--device", "mlx5_0"], "--p2p measures GPU pairs"),
    (["--predict-from", "/no/such/file"], "--predict-from /no/such/file: cannot open"),
])
def test_verify_p2p_argument_errors(args, msg):
    p = verify(*args, "--libcuda", fake_cuda(), fake=f"gpus={GPUS}", rc=64)
    assert msg in p.stderr


def test_verify_p2p_pair_cuda_does_not_see_is_a_usage_error():
    p = verify("--libcuda", fake_cuda(), "--pair", "0000:00:06.0,0000:00:0a.0", fake=f"gpus={GPUS}", rc=64)
    assert "no CUDA device at 0000:00:0a.0" in p.stderr


def test_verify_p2p_without_cuda_or_with_one_gpu_exits_3():
    p = verify("--libcuda", "libcuda-gdrpeer-test-missing.so.1", rc=3)
    assert "nothing to verify: cannot load libcuda-gdrpeer-test-missing.so.1" in p.stdout
    p = verify("--libcuda", fake_cuda(), "--json", fake="gpus=0000:00:06.0", rc=3)
    assert json.loads(p.stdout)["not_run"] == "peer-to-peer needs two GPUs; CUDA sees 1"


def test_real_h200_node_snapshot_taken_by_gdrpeer_checks_as_nvidia_smi_saw_it():
    """The snapshot gdrpeer itself took on the node (run 2, no file added by hand): offline it
    gives nvidia-smi's matrix, NV18 through NVSwitches on every pair, and NVML's fabric state."""
    labels, smi, numa = smi_matrix()
    j = json.loads(run("check", "--json", REF / "h200x4-run2-snapshot.tar", check_rc=0).stdout)
    assert j["matrix"]["labels"] == labels
    for i, a in enumerate(labels):
        for k, b in enumerate(labels):
            assert j["matrix"]["classes"][i][k] == smi[(a, b)], (a, b)
    assert len(j["pairs"]) == 6
    for pair in j["pairs"]:
        assert pair["nvlink"]["links"] == 18 and pair["nvlink"]["via"] == "nvswitch", pair
        assert pair["verdict"] == "optimal"
    assert [str(d["numa"]) for d in j["devices"] if d["role"] == "gpu"] == [numa[g] for g in labels]
    notes = {n["rule"]: n["text"] for n in j["notes"]}
    assert notes["nvlink-nvml"].endswith("72 active link(s), 72 into NVSwitches; fabric completed on 4"), notes


def test_snapshots_check_as_the_live_node_did():
    """The live `gdrpeer check --json` of a later 4x H200 machine of the same kind (run 4,
    2026-11-27 07:00 UTC, docs/benchmarks.md; tests/reference/truth/h200x4-run4-live-check.json)
    against the offline check of both snapshots taken on earlier machines: every pair's verdict,
    path class and NVLink the same, so a snapshot carries everything the live verdict used."""
    live = json.loads((REF / "truth" / "h200x4-run4-live-check.json").read_text())

    assert len(live["pairs"]) == 6 and {p["verdict"] for p in live["pairs"]} == {"optimal"}
    for snap in ("h200x4-node-snapshot.tar", "h200x4-run2-snapshot.tar"):
        res = run("check", "--json", REF / snap)
        assert res.returncode == 0, res.stderr
        assert pair_rows(json.loads(res.stdout)) == pair_rows(live), snap


def test_two_gpu_snapshot_checks_as_its_live_node_did():
    """Run 5 (2x H200, driver 580.159.04 open, 2026-11-27 10:40 UTC, docs/benchmarks.md): the
    snapshot that node's gdrpeer took against the live `gdrpeer check --json` run on it minutes
    apart (tests/reference/truth/h200x2-run5-live-check.json). Both took the same NVML answers,
    so every pair, class and NVLink must match; nvidia-smi on such a node shows NV18."""
    live = json.loads((REF / "truth" / "h200x2-run5-live-check.json").read_text())
    res = run("check", "--json", REF / "h200x2-run5-snapshot.tar")
    assert res.returncode == 0, res.stderr
    snap = json.loads(res.stdout)

    assert pair_rows(snap) == pair_rows(live)
    assert [p["nvlink"]["links"] for p in live["pairs"]] == [18]


def smi_p2p(path):
    """nvidia-smi topo -p2p r|w of the node: {(GPUi, GPUj): status} ("OK", "CNS", "TNS", ...)."""
    lines = [re.sub(r"\x1b\[[0-9;]*m", "", l) for l in path.read_text().splitlines()]
    labels = lines[0].split()
    cells = {}
    for line in lines[1:]:
        f = line.split()
        if not f or not re.fullmatch(r"GPU\d+", f[0]):
            break
        for col, c in zip(labels, f[1:]):
            if c != "X":
                cells[(f[0], col)] = c
    return cells


@pytest.mark.parametrize("name,modes", [("run6", ("r", "w")), ("run7", ("r",))])
def test_four_gpu_run_snapshot_checks_as_its_live_node_and_nvidia_smi_did(name, modes):
    """Runs 6 and 7 (4x H200, driver 580.159.04 open, 2026-11-27 12:53 and 15:17 UTC, two
    machines, docs/benchmarks.md): the snapshot gdrpeer took on the node checked offline gives
    the live `gdrpeer check --json` of the same node (every pair, class, NVLink and verdict), and
    its verdicts agree with what nvidia-smi said of peer-to-peer there: every pair OK for reads
    (and, run 6, writes), so every pair optimal, over NV18 through NVSwitches (`verify --p2p`
    measured 395 GB/s on each)."""
    live = json.loads((REF / "truth" / f"h200x4-{name}-live-check.json").read_text())
    res = run("check", "--json", REF / f"h200x4-{name}-snapshot.tar")
    assert res.returncode == 0, res.stderr
    snap = json.loads(res.stdout)

    assert pair_rows(snap) == pair_rows(live)
    label_of = {d["bdf"]: d["label"] for d in snap["devices"] if d["role"] == "gpu"}
    for mode in modes:
        smi = smi_p2p(REF / "truth" / f"h200x4-{name}-nvidia-smi-topo-p2p-{mode}.txt")
        assert len(smi) == 12, smi
        for p in snap["pairs"]:
            a, b = label_of[p["a_bdf"]], label_of[p["b_bdf"]]
            ok = smi[(a, b)] == "OK" and smi[(b, a)] == "OK"
            assert (p["verdict"] == "optimal") == ok, (mode, a, b, p["verdict"], smi[(a, b)])
            assert p["nvlink"]["links"] == 18 and p["nvlink"]["via"] == "nvswitch", p

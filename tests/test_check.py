"""End-to-end tests of `gdrpeer check` on the reference dumps in tests/reference/.

The classes must match what the sources state: the nvidia-smi topo -m matrix printed in the same
report (stelline), the provider's statements (AWS hwloc captures, NCCL topology file headers).
Verdicts are compared with the hand-reviewed baselines in tests/reference/expected/, which
GDRPEER_UPDATE_EXPECTED=1 rewrites (their measured fields only) for review after a rule change.
Bad input must give `file:line: what was expected` and exit 65, never a crash.
"""

import json
import os
import random
import re
import shutil
import subprocess
import warnings
from pathlib import Path

import pytest

from helpers.check_cli import gdrpeer_bin, run
from helpers.fake_sysfs import sysfs_node
from helpers.paths import REF, REPO, RULE_DATA

EXPECTED = sorted((REF / "expected").glob("*.json"))


def check_json(path, *extra):
    p = run("check", "--json", path, *extra)
    assert p.returncode in (0, 1, 2, 3), p.stderr
    return p.returncode, json.loads(p.stdout)


def nvidia_smi_matrix(md_text):
    """The `nvidia-smi topo -m` block of a stelline report: {(row, col): class} for GPU/NIC labels."""
    lines = md_text.splitlines()
    start = next(i for i, l in enumerate(lines) if "nvidia-smi topo -m" in l)
    header = lines[start + 1].split()
    labels = [h for h in header if re.fullmatch(r"(GPU|NIC)\d+", h)]
    out = {}
    for line in lines[start + 2:]:
        cells = line.split()
        if not cells or not re.fullmatch(r"(GPU|NIC)\d+", cells[0]):
            break
        for col, cell in zip(labels, cells[1:1 + len(labels)]):
            out[(cells[0], col)] = cell
    return labels, out


@pytest.mark.parametrize("name", ["stelline-asus-esc8000a-e12.md", "stelline-puget-wrx90.md"])
def test_matrix_equals_published_nvidia_smi(name):
    labels, smi = nvidia_smi_matrix((REF / name).read_text())
    rc, j = check_json(REF / name)
    assert j["matrix"]["labels"] == labels
    ours = j["matrix"]["classes"]
    for i, a in enumerate(labels):
        for k, b in enumerate(labels):
            assert ours[i][k] == smi[(a, b)], f"{a}-{b}: gdrpeer {ours[i][k]}, nvidia-smi {smi[(a, b)]}"
    # The text matrix shows the same rows as nvidia-smi (modulo column spacing).
    text = run("check", REF / name).stdout
    for a in labels:
        row = next(l for l in text.splitlines() if l.startswith(a + " "))
        assert row.split()[1:1 + len(labels)] == [smi[(a, b)] for b in labels]


# The fields of an expected/*.json file that gdrpeer's output gives; the others (input, where
# the truth comes from, why) are kept by hand and never rewritten.
MEASURED = ("exit_code", "worst", "node_verdict", "counts", "labels", "bdfs", "classes", "pair_verdicts")


def measured(j):
    """The MEASURED fields of one `check --json` report."""
    s = j["summary"]
    return {"exit_code": s["exit_code"], "worst": s["worst"], "node_verdict": s["node"]["verdict"],
            "counts": {k: s[k] for k in ("pairs", "optimal", "degraded", "unreliable", "blocked")},
            "labels": j["matrix"]["labels"],
            "bdfs": [d["bdf"] for d in j["devices"] if d["role"] in ("gpu", "nic")],
            "classes": j["matrix"]["classes"],
            "pair_verdicts": {p["a"] + "-" + p["b"]: p["verdict"] for p in j["pairs"]}}


def check_expected(exp):
    """Compares gdrpeer's verdicts on exp's input with exp. With GDRPEER_UPDATE_EXPECTED=1 (as
    hwloc's HWLOC_UPDATE_TEST_TOPOLOGY_OUTPUT) it rewrites exp's MEASURED fields instead, in
    place and in the file's own layout, so that a reviewed rule change is a diff of data files."""
    e = json.loads(exp.read_text())
    rc, j = check_json(REF / e["input"])
    assert rc == j["summary"]["exit_code"]
    got = measured(j)
    if os.environ.get("GDRPEER_UPDATE_EXPECTED") == "1":
        text = json.dumps({**e, **got}, indent=1, ensure_ascii=False) + "\n"
        if text != exp.read_text():
            exp.write_text(text)
            warnings.warn(f"GDRPEER_UPDATE_EXPECTED=1: rewrote {exp}")
        return
    for field in MEASURED:
        assert got[field] == e[field], f"{exp.name}: {field} (GDRPEER_UPDATE_EXPECTED=1 rewrites it, for review)"


@pytest.mark.parametrize("exp", EXPECTED, ids=[e.name[:-5] for e in EXPECTED])
def test_reference_verdicts(exp):
    check_expected(exp)


def test_update_expected_rewrites_only_the_measured_fields(tmp_path, monkeypatch):
    """A stale expected file fails; GDRPEER_UPDATE_EXPECTED=1 rewrites it to the very bytes of the
    reviewed file in the tree (hand-kept fields, key order and layout kept); then it passes."""
    good = REF / "expected" / "azure-ndv4-topo.xml.json"
    stale = json.loads(good.read_text())
    stale["classes"][0][1] = "SYS"
    stale["counts"]["optimal"] += 1
    stale["pair_verdicts"] = {}
    exp = tmp_path / good.name
    exp.write_text(json.dumps(stale, indent=1, ensure_ascii=False) + "\n")
    monkeypatch.delenv("GDRPEER_UPDATE_EXPECTED", raising=False)
    with pytest.raises(AssertionError, match=r"azure-ndv4-topo\.xml\.json: counts"):
        check_expected(exp)
    monkeypatch.setenv("GDRPEER_UPDATE_EXPECTED", "1")
    with pytest.warns(UserWarning, match="rewrote"):
        check_expected(exp)
    assert exp.read_bytes() == good.read_bytes()
    monkeypatch.delenv("GDRPEER_UPDATE_EXPECTED")
    check_expected(exp)


def test_p4d_hwloc_nics_meet_gpus_at_host_bridges():
    """AWS: "p4d EFA NICs and GPUs meet at host bridges, not PCIe switches"."""
    rc, j = check_json(REF / "aws-p4d.24xlarge.xml")
    classes = {(p["a"], p["b"]): p["class"] for p in j["pairs"]}
    nic_pairs = [c for (a, b), c in classes.items() if b.startswith("NIC")]
    assert len(nic_pairs) == 32
    assert all(c in ("PHB", "NODE", "SYS") for c in nic_pairs)
    # and the flat virtual topology is called out with the provider-file fix
    flat = [p for p in j["pairs"] if any(f["rule"] == "platform-virtual" and f["severity"] == "unreliable"
                                         for f in p["findings"])]
    assert flat and all("NCCL_TOPO_FILE" in f["fix"] for p in flat for f in p["findings"]
                        if f["rule"] == "platform-virtual")


def test_p5en_hwloc_every_nic_shares_a_switch_with_a_gpu():
    """AWS: p5en "places all sixteen EFA NICs behind PCIe switches shared with GPUs"."""
    rc, j = check_json(REF / "aws-p5en.48xlarge.xml")
    nics = [d["label"] for d in j["devices"] if d["role"] == "nic"]
    assert len(nics) == 16
    for n in nics:
        assert any(p["b"] == n and p["class"] == "PIX" and p["nccl_gdr_default"] for p in j["pairs"]), n


def test_p4d_nccl_file_groups_two_gpus_and_a_nic_per_switch():
    rc, j = check_json(REF / "aws-p4d-24xl-topo.xml")
    by = {(p["a_bdf"], p["b_bdf"]): p["class"] for p in j["pairs"]}
    for bus in ("10", "20", "90", "a0"):
        g0, g1, nic = f"0000:{bus}:1c.0", f"0000:{bus}:1d.0", f"0000:{bus}:1b.0"
        assert by[(g0, nic)] == "PIX" and by[(g1, nic)] == "PIX" and by[(g0, g1)] == "PIX"
    assert by[("0000:10:1c.0", "0000:90:1b.0")] == "SYS"


def test_azure_ndv4_every_gpu_has_its_own_gdr_nic():
    """Microsoft Learn, ND A100 v4 series: eight A100 GPUs, "each GPU within the VM is provided with its
    own dedicated, topology-agnostic 200 GB/s NVIDIA Mellanox HDR InfiniBand connection" that supports
    GPU Direct RDMA: eight NICs, and each GPU has a NIC of its own with NCCL's GDR on."""
    rc, j = check_json(REF / "azure-ndv4-topo.xml")
    gpus = [d["label"] for d in j["devices"] if d["role"] == "gpu"]
    nics = [d["label"] for d in j["devices"] if d["role"] == "nic"]
    assert len(gpus) == 8 and len(nics) == 8
    gdr = {g: {p["b"] for p in j["pairs"] if p["a"] == g and p["b"].startswith("NIC") and p["nccl_gdr_default"]}
           for g in gpus}
    # A distinct NIC per GPU: a matching of GPUs to GDR-on NICs exists (searched; 8 x 8 is small).
    def match(i, used):
        return i == len(gpus) or any(match(i + 1, used | {n}) for n in gdr[gpus[i]] - used)
    assert match(0, frozenset()), gdr


TRUTH_KINDS = {"independent", "partly independent", "regression baseline"}


@pytest.mark.parametrize("exp", EXPECTED, ids=[e.name[:-5] for e in EXPECTED])
def test_golden_files_say_where_their_truth_comes_from(exp):
    """Each expected file states whether its classes come from a source other than gdrpeer (checked
    against that source by the named tests) or are gdrpeer's own output kept as a regression baseline."""
    e = json.loads(exp.read_text())
    assert e["classes_truth"] in TRUTH_KINDS and e["verdicts_truth"] in TRUTH_KINDS
    assert e["classes_source"].strip() and e["verdicts_source"].strip()
    if e["classes_truth"] == "regression baseline":
        assert e["classes_checked_by"] == []
    else:
        assert e["classes_checked_by"], f"{exp.name}: independent truth without a test that checks it"
        for name in e["classes_checked_by"]:
            assert callable(globals().get(name)), f"{exp.name}: no test {name} in {__file__}"


def test_fleet_one_line_per_node_and_worst_exit():
    inputs = [REF / "holohub-igx-orin-lspci-tv.txt", REF / "stelline-puget-wrx90.md", REF / "azure-ndv4-topo.xml"]
    p = run("check", *inputs)
    lines = p.stdout.strip().splitlines()
    assert len(lines) == 4
    assert lines[0].startswith(str(inputs[0]) + ": optimal")
    assert lines[1].startswith(str(inputs[1]) + ": degraded")
    assert lines[-1].startswith("fleet: 3 nodes: 1 optimal, 2 degraded")
    assert p.returncode == 1
    pj = run("check", "--fleet", "--json", *inputs)
    j = json.loads(pj.stdout)
    assert j["schema"] == "gdrpeer-fleet" and j["version"] == 1
    assert [n["exit_code"] for n in j["nodes"]] == [0, 1, 1]


def test_fleet_reports_a_broken_dump_and_goes_on(tmp_path):
    bad = tmp_path / "bad.xml"
    bad.write_text("<topology>\n<object type=\"Machine\">\n")
    p = run("check", REF / "holohub-igx-orin-lspci-tv.txt", bad)
    assert p.returncode == 65
    assert re.search(r"bad\.xml: error: .*bad\.xml:3: unexpected end of file", p.stdout), p.stdout
    assert "fleet: 2 nodes: 1 optimal, 0 degraded, 0 unreliable, 0 blocked, 0 incomplete, 1 unreadable" in p.stdout


def test_dot_output_renders(tmp_path):
    p = run("check", "--dot", REF / "stelline-asus-esc8000a-e12.md")
    assert p.stdout.startswith("digraph gdrpeer {")
    assert "GPU0 0000:01:00.0" in p.stdout and "#b7e1a1" in p.stdout
    if shutil.which("dot") is None:
        pytest.skip("graphviz 'dot' not installed: DOT syntax not validated")
    d = subprocess.run(["dot", "-Tsvg"], input=p.stdout, capture_output=True, text=True)
    assert d.returncode == 0, d.stderr
    assert "<svg" in d.stdout


def test_topo_tree_shows_roles_and_ports():
    p = run("topo", "--roles-only", REF / "holohub-igx-orin-lspci-tv.txt", check_rc=0)
    assert "[0005:00] host bridge" in p.stdout
    assert re.search(r"0005:09:00\.0 gpu .*RTX A6000", p.stdout)
    assert "0005:01:00.0 switch-upstream(inferred)" in p.stdout
    assert "Realtek" not in p.stdout  # not on a GPU/NIC branch


@pytest.mark.parametrize("args,rc,pattern", [
    (["check", "/nonexistent/dump.xml"], 66, r"/nonexistent/dump\.xml: cannot open input"),
    (["check", "--role", "GPU", "tests/reference/azure-ndv4-topo.xml"], 64, r"--role expects ROLE=BDF"),
    (["check", "--role", "GPU=0000:77:00.0", "tests/reference/azure-ndv4-topo.xml"], 64, r"no PCI device 0000:77:00\.0"),
    (["check", "--pairs", "gpu-cpu", "tests/reference/azure-ndv4-topo.xml"], 64, r"unknown pair kind"),
    (["check", "--no-such-option"], 64, r"no-such-option"),
    (["check", "--data-dir", "/nonexistent", "tests/reference/azure-ndv4-topo.xml"], 78, r"cannot open rule data"),
])
def test_usage_and_missing_input_exit_codes(args, rc, pattern):
    p = subprocess.run([gdrpeer_bin(), *args], capture_output=True, text=True, cwd=REPO)
    assert p.returncode == rc, p.stderr
    assert re.search(pattern, p.stderr + p.stdout), p.stderr


BAD_INPUTS = [
    ("trunc.xml", (REF / "aws-p5en.48xlarge.xml").read_text()[:(REF / "aws-p5en.48xlarge.xml").read_text().rfind("\n", 0, 50000) + 1],
     None, "unexpected end of file"),
    ("bad-attr.xml", '<?xml version="1.0"?>\n<topology>\n  <object type="PCIDev" pci_busid="00:zz.0"/>\n</topology>\n', 3, "expected a PCI address"),
    ("bad-nccl.xml", '<system version="1">\n <cpu numaid="0">\n  <pci busid="0000:01:00.0" class="0x03zz00"/>\n </cpu>\n</system>\n', 3, "expected a hex class"),
    ("bad-tree.txt", "-[0000:00]-+-00.0  Intel\n           +-01.0-[01]--+-00.0  X\n                        \\-0g.0  Y\n", 3, "expected a device"),
    ("bad-vvv.txt", "01:00.0 VGA compatible controller: NVIDIA Corporation X\n\tLnkSta:\tSpeed fast, Width x16\n", 2, "expected a link speed"),
    ("binary.bin", "\x00\x01\x02garbage\xff\n" * 10, 1, "expected"),
]


@pytest.mark.parametrize("name,content,line,what", BAD_INPUTS, ids=[b[0] for b in BAD_INPUTS])
def test_bad_input_names_file_and_line(tmp_path, name, content, line, what):
    f = tmp_path / name
    f.write_bytes(content.encode("latin-1") if isinstance(content, str) else content)
    p = run("check", f)
    assert p.returncode == 65, p.stdout + p.stderr
    m = re.match(rf"gdrpeer: {re.escape(str(f))}:(\d+): (.*)", p.stderr)
    assert m, p.stderr
    if line is not None:
        assert int(m.group(1)) == line, p.stderr
    assert what in m.group(2), p.stderr


def test_mutated_inputs_never_crash(tmp_path):
    """Random byte flips, truncations and line shuffles of every reference dump: each gives a
    verdict or a file:line error, never a crash (the libFuzzer targets go further)."""
    rnd = random.Random(4)
    sources = [p for p in REF.iterdir() if p.is_file()]
    files = []
    for i in range(150):
        src = rnd.choice(sources).read_bytes()
        data = bytearray(src[: rnd.randrange(1, len(src) + 1)])
        for _ in range(rnd.randrange(0, 20)):
            if data:
                data[rnd.randrange(len(data))] = rnd.randrange(256)
        if rnd.random() < 0.3:
            lines = bytes(data).split(b"\n")
            rnd.shuffle(lines)
            data = bytearray(b"\n".join(lines))
        f = tmp_path / f"m{i}"
        f.write_bytes(bytes(data))
        files.append(f)
    p = run("check", "--fleet", *files)
    assert p.returncode in (0, 1, 2, 3, 65), p.returncode
    lines = p.stdout.strip().splitlines()
    assert len(lines) == len(files) + 1
    for line in lines[:-1]:
        # "incomplete": e.g. an NCCL file cut off, read up to there (issue 25).
        assert re.match(r".*/m\d+: (optimal|degraded|unreliable|blocked|incomplete) \(|.*/m\d+: error: .*/m\d+(:\d+)?: ",
                        line), line


def test_real_h100_node_snapshot():
    """A snapshot taken with `gdrpeer snapshot` on the real H100 node (2026-11-21; driver 580,
    Firecracker VM, GPU on the root bus, no NIC, no IOMMU): the CUDA driver's own answers were
    recorded in it and must come back, with no pair to judge: nothing checked, exit 3 (issue 25;
    exit 0 "optimal" before)."""
    p = run("check", "--json", "--sysfs-root", REF / "h100-node-snapshot.tar", check_rc=3)
    j = json.loads(p.stdout)
    (gpu,) = [d for d in j["devices"] if d["role"] == "gpu"]
    assert (gpu["vendor"], gpu["device"], gpu["bdf"]) == ("0x10de", "0x2330", "0000:00:06.0")
    assert {"gts": 32.0, "width": 16} == gpu["link_cap"] == gpu["link_status"]
    assert max(b["size"] for b in gpu["bars"]) == 128 << 30  # BAR1: 131072 MiB
    assert j["node"]["iommu"] == "off" and j["pairs"] == []
    assert j["node"]["software"]["cuda"] == {"error": "", "gpus": [
        {"bdf": "0000:00:06.0", "gpu_direct_rdma_supported": 1, "dma_buf_supported": 1}]}
    assert "nvidia" in j["node"]["software"]["modules_of_interest"]
    assert {n["rule"] for n in j["notes"]} >= {"no-nic", "software-cuda"}
    assert j["summary"]["node"]["verdict"] == "incomplete" and "no RDMA NIC" in j["summary"]["node"]["incomplete"]
    text = run("check", "--sysfs-root", REF / "h100-node-snapshot.tar", check_rc=3).stdout
    assert "GPU_DIRECT_RDMA_SUPPORTED=1 DMA_BUF_SUPPORTED=1" in text


# ---- ID tables and platform rules end to end (topology/gpus.json, devices.json, platforms.json) ----

def test_aws_gb200_hwloc_root_complex_paths_are_grace_c2c():
    _, j = check_json(REF / "aws-p6e-gb200.36xlarge.xml")
    gpu_nic = [p for p in j["pairs"] if p["a"].startswith("GPU") and p["b"].startswith("NIC")]
    through_rc = [p for p in gpu_nic if p["class"] in ("PHB", "NODE")]
    assert through_rc, "the p6e-gb200 capture has GPU-NIC pairs through the root complex"
    for p in through_rc:
        rules = {f["rule"] for f in p["findings"]}
        assert "path-grace" in rules and "path-root-complex" not in rules, p


def test_jetson_device_tree_model_flags_a_node_without_a_pci_gpu(tmp_path):
    root = sysfs_node(tmp_path)
    (root / "proc/device-tree").mkdir(parents=True)
    (root / "proc/device-tree/model").write_bytes(b"NVIDIA Jetson AGX Orin Developer Kit\0")
    # The iGPU is not on PCI: the fake's discrete GPU is dropped with --role NONE.
    p = run("check", "--json", "--sysfs-root", root, "--role", "NONE=0000:03:00.0", check_rc=1)
    j = json.loads(p.stdout)
    assert j["node"]["dmi"]["product"] == "NVIDIA Jetson AGX Orin Developer Kit"
    assert j["summary"]["worst"] == "unreliable" and j["summary"]["pairs"] == 0
    (note,) = [n for n in j["notes"] if n["rule"] == "platform-jetson"]
    assert "nvidia_p2p" in note["text"]
    assert note["severity"] == "unreliable" and note["fix"], note
    # The text report lists it as a node-wide problem with its own fix line, not as a note.
    p = run("check", "--sysfs-root", root, "--role", "NONE=0000:03:00.0", check_rc=1)
    problems = p.stdout.split("\nProblems:\n")[1].split("\n\n")[0]
    assert "[unreliable] node: " in problems and "(platform-jetson)" in problems, p.stdout
    assert "      fix: " + note["fix"] in problems, p.stdout
    notes = p.stdout.split("\nNotes:\n")[1].split("\n\n")[0] if "\nNotes:\n" in p.stdout else ""
    assert "platform-jetson" not in notes, p.stdout
    # A fleet summary names it as the first problem.
    p = run("check", "--fleet", "--sysfs-root", root, "--role", "NONE=0000:03:00.0", check_rc=1)
    assert "first problem: platform-jetson" in p.stdout, p.stdout
    # A snapshot of that node carries the model, and checking it says the same.
    snap = tmp_path / "jetson.tar"
    run("snapshot", "--sysfs-root", root, snap, check_rc=0)
    p = run("check", "--json", snap, "--role", "NONE=0000:03:00.0", check_rc=1)
    assert any(n["rule"] == "platform-jetson" for n in json.loads(p.stdout)["notes"])
    # With the discrete GPU kept (IGX Orin + RTX card): its pairs are judged as usual.
    p = run("check", "--json", "--sysfs-root", root, check_rc=0)
    j = json.loads(p.stdout)
    assert all(f["rule"] != "platform-jetson" for pr in j["pairs"] for f in pr["findings"])
    assert any(n["rule"] == "platform-jetson" and "discrete" in n["text"] and n["severity"] == "note"
               for n in j["notes"])


def test_unknown_nvidia_id_takes_its_family_from_pci_ids(tmp_path, monkeypatch):
    root = sysfs_node(tmp_path, gpu_device=0x3F01)  # an id topology/gpus.json does not list
    ids = tmp_path / "pci.ids"
    ids.write_text("10de  NVIDIA Corporation\n\t3f01  GB999 [GeForce RTX 9090]\n10df  Emulex Corporation\n")
    monkeypatch.setenv("GDRPEER_PCI_IDS", str(ids))
    p = run("check", "--sysfs-root", root, check_rc=2)
    assert "(platform-geforce)" in p.stdout
    assert 'GPU family from the pci.ids name "GB999 [GeForce RTX 9090]"' in p.stdout
    monkeypatch.setenv("GDRPEER_PCI_IDS", "")  # no pci.ids: no family, no GeForce rule
    run("check", "--sysfs-root", root, check_rc=0)
    # A table id needs no pci.ids: the RTX 4090 is GeForce from the table.
    p = run("check", "--sysfs-root", sysfs_node(tmp_path / "t", gpu_device=0x2684), check_rc=2)
    assert "(platform-geforce)" in p.stdout and "pci.ids" not in p.stdout


def test_gb10_gpu_id_blocks_gpudirect_rdma(tmp_path, monkeypatch):
    monkeypatch.setenv("GDRPEER_PCI_IDS", "")
    p = run("check", "--sysfs-root", sysfs_node(tmp_path, gpu_device=0x2E12), check_rc=2)
    assert "(platform-gb10)" in p.stdout and "NCCL_NET_GDR_LEVEL=LOC" in p.stdout


# What `gdrpeer check` makes of each command-line form (CLI11 parses them all): every option,
# greedy repeatable options, repeats, bad --jobs values, a missing value, a subcommand's name
# after an input.
P4D, P5EN = REF / "aws-p4d.24xlarge.xml", REF / "aws-p5en.48xlarge.xml"
CHECK_FORMS = [
    [P4D], ["--hwloc", P4D], ["--hwloc", P4D, P5EN], ["--json", "--hwloc", P4D],
    ["--dot", "--nccl-xml", REF / "azure-ndv4-topo.xml"], ["--fleet", P4D, P5EN],
    ["-j", "1", P4D, P5EN], ["--jobs", "2", "--fleet", P4D], ["--json", "--fleet", P4D, P5EN],
    ["--with-nvme", "--pairs", "all", REF / "stelline-asus-esc8000a-e12.md"],
    ["--lspci", REF / "holohub-igx-orin-lspci-tv.txt"], ["--skip", "software", "platform", P4D],
    ["--skip", "software", "--hwloc", P4D], ["--role", "NONE=0000:00:00.0", "--hwloc", P4D],
    ["--gpu", "0000:10:1c.0", "--nic", "0000:10:1b.0", P4D], ["--nvme", "x", P4D],
    ["--pairs", "gpu-nic", "--pairs", "all", P4D], ["-j", "0", P4D], ["-j", "2000", P4D],
    ["-j", "01", P4D], ["-j", "-1", P4D], ["--hwloc"], ["--hwloc", P4D, "--hwloc"],
    ["--sysfs-root", REPO / "no-such-dir"], [REF / "h100-node-snapshot.tar", "--no-cuda"],
    [REF / "h100-node-snapshot.tar", "--cuda"],
    ["--bogus", P4D], [P4D, "check"],
]
# Exit code of each form above (docs/check.md). A repeatable option takes one value per use (issue
# 25): `--skip software platform P4D` is two inputs, "platform" missing (fleet mode: 65), and the
# --gpu/--nic form checks the dump (before, `--nic` took the dump too and live sysfs was read);
# `check` after a dump is a second input.
CHECK_FORM_EXIT = [1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 65, 1, 1,
                   1, 64, 64, 64, 64, 1, 64, 64, 64, 66, 3, 3, 64, 65]
assert len(CHECK_FORM_EXIT) == len(CHECK_FORMS)


@pytest.mark.parametrize("form", CHECK_FORMS, ids=lambda f: " ".join(Path(str(a)).name for a in f) or "none")
def test_command_line_forms(form):
    p = run("check", "--data-dir", RULE_DATA, *form)
    # A report (0/1 from the dumps' verdicts, pinned by test_reference_verdicts), a usage error
    # (64, stderr only), a missing (66) or malformed (65) input.
    want = CHECK_FORM_EXIT[CHECK_FORMS.index(form)]
    assert p.returncode == want, (p.returncode, p.stderr)
    if want == 64:
        assert p.stdout == "" and p.stderr.strip(), p.stdout
    elif want in (0, 1):
        assert p.stdout.strip() and p.stderr == "", p.stderr

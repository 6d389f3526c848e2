"""`gdrpeer check` as fleet scripts call it (issue 25): options that cannot eat an input,
refused contradictions, rule ids that must exist. Host only, no emulated node.

Each test here failed on the CLI before issue 25 (the binary of main at 26a2bd7).
"""

import json
import os
import re
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

from helpers.check_cli import gdrpeer_bin
from helpers.fake_sysfs import sysfs_node
from helpers.node_verdict import VERDICTS, node_verdict_from_pairs
from helpers.paths import REF, REPO

STELLINE = REF / "stelline-asus-esc8000a-e12.md"  # 4 GPUs, 2 NICs, lspci text
P5EN = REF / "aws-p5en.48xlarge.xml"  # hwloc XML


def gdrpeer(*args, env_extra=None, **kw):
    env = {k: v for k, v in os.environ.items() if k != "GDRPEER_DATA_DIR"}
    env.update(env_extra or {})
    return subprocess.run([gdrpeer_bin(), *map(str, args)], capture_output=True, text=True, errors="replace",
                          timeout=120, env=env, **kw)


def source_of(p):
    """The node a `check --json` run looked at."""
    assert p.returncode in (0, 1, 2, 3), p.stderr
    return json.loads(p.stdout)["node"]["source"]


# ---- 1. a repeatable option must not swallow the input ----------------------------------------

@pytest.mark.parametrize("opts", [
    ["--skip", "path-sys"],
    ["--skip=path-sys"],
    ["--skip", "path-sys", "--skip", "acs-redirect"],
    ["--skip", "path-sys,acs-redirect"],
    ["--role", "NONE=0000:00:00.0"],
    ["--gpu", "0000:01:00.0"],   # stelline's GPU0
    ["--nic", "0000:21:00.0"],   # its NIC0
    ["--nvme", "0000:21:00.1"],
])
def test_repeatable_option_leaves_the_input_alone(opts):
    """`check OPTION VALUE node.md` checks node.md: before, node.md became a second VALUE and the
    live sysfs of the test machine was checked instead (exit 0, "optimal")."""
    p = gdrpeer("check", "--json", *opts, STELLINE)
    assert source_of(p) == str(STELLINE)


@pytest.mark.parametrize("opt", ["--hwloc", "--nccl-xml", "--lspci"])
def test_input_option_takes_one_file(opt):
    """`--hwloc A B` reads A as hwloc and B by its contents (two nodes), never B as hwloc XML."""
    first = {"--hwloc": P5EN, "--nccl-xml": REF / "aws-p4d-24xl-topo.xml", "--lspci": STELLINE}[opt]
    other = STELLINE if opt != "--lspci" else P5EN
    p = gdrpeer("check", "--fleet", "--json", opt, first, other)
    assert p.returncode in (0, 1, 2, 3), p.stderr
    nodes = json.loads(p.stdout)["nodes"]
    assert [n["source"] for n in nodes] == [str(other), str(first)] or \
        sorted(n["source"] for n in nodes) == sorted([str(first), str(other)]), nodes
    assert all("error" not in n for n in nodes), nodes


def rule_ids_in_docs():
    """The rule ids of docs/check.md's rule table (first column, in backquotes)."""
    ids = set()
    for line in (REPO / "docs" / "check.md").read_text().splitlines():
        m = re.match(r"^\| (`[a-z0-9-]+`(?:, `[a-z0-9-]+`)*) \|", line)
        if m:
            ids.update(re.findall(r"`([a-z0-9-]+)`", m.group(1)))
    assert len(ids) > 10, ids
    return ids


def rule_ids_in_rules_source():
    """The ids rules.cpp gives findings and notes (add(..., "id", ...), note("id", ...))."""
    src = (REPO / "userspace" / "topo" / "src" / "rules.cpp").read_text()
    ids = set(re.findall(r'\badd\([^,]+, "([a-z0-9-]+)"', src)) | set(re.findall(r'\bnote\("([a-z0-9-]+)"', src))
    assert len(ids) > 10, ids
    return ids


def test_every_documented_and_emitted_rule_id_can_be_skipped():
    """Every id of docs/check.md and of rules.cpp, and each group, is accepted by --skip."""
    ids = rule_ids_in_docs() | rule_ids_in_rules_source()
    ids |= {i.split("-")[0] for i in ids}
    p = gdrpeer("check", "--json", *[f"--skip={i}" for i in sorted(ids)], STELLINE)
    assert p.returncode in (0, 1, 2), p.stderr


@pytest.mark.parametrize("bad,near", [("path-sy", "path-sys"), ("acs-redirct", "acs-redirect"),
                                      ("node.md", None)])
def test_unknown_skip_id_is_refused(bad, near):
    """An unknown --skip id is a usage error naming the nearest id and listing the valid ones;
    before, it was accepted and skipped nothing."""
    p = gdrpeer("check", "--skip", bad, STELLINE)
    assert p.returncode == 64, (p.returncode, p.stderr)
    assert f'"{bad}"' in p.stderr
    if near:
        assert f'did you mean "{near}"' in p.stderr
    assert "path-root-complex" in p.stderr and "software" in p.stderr  # the list of valid ids


@pytest.mark.parametrize("opts", [["--json", "--dot"], ["--dot", "--json"], ["--json", "--format", "nfd"],
                                  ["--dot", "--format", "prometheus"]])
def test_contradicting_formats_are_refused(opts):
    p = gdrpeer("check", *opts, STELLINE)
    assert p.returncode == 64, (p.returncode, p.stdout[:200], p.stderr)
    assert "--json" in p.stderr or "--dot" in p.stderr


# ---- 3. node verdicts operators can act on ------------------------------------------------------

# Every reference input (tests/reference and kinds/) with the node verdict and exit code an
# operator should get, and why (the sources are in tests/reference/README.md and
# tests/test_check.py). Before issue 25 every multi-GPU node here exited 1 (the worst of all
# GPU x NIC pairs) and the H100 snapshot, which has no NIC, exited 0 "optimal".
REFERENCE_NODES = {
    # AWS states every EFA NIC of p5/p5en shares a PCIe switch with a GPU: each GPU has a PIX NIC.
    "aws-p5.48xl-topo-pr1226.xml": ("optimal", 0),
    "aws-p5en.48xlarge.xml": ("optimal", 0),
    # GPU and NIC pairs of the NVSwitch H200 dump (nccl-tests #256) share switches; GPU pairs NV18.
    "kinds/h200-nccl-nvswitch.xml": ("optimal", 0),
    # IGX Orin: one RTX GPU beside the ConnectX-7 of the same board switch (PIX).
    "holohub-igx-orin-lspci-tv.txt": ("optimal", 0),
    # p4d seen from inside the VM: GPUs and EFA on separate host bridges (NODE): NCCL leaves GDR off.
    "aws-p4d.24xlarge.xml": ("degraded", 1),
    # Workstations and a VM where even the nearest NIC is behind the root complex (NODE, PHB).
    "stelline-asus-esc8000a-e12.md": ("degraded", 1),
    "stelline-puget-wrx90.md": ("degraded", 1),
    "kinds/h200-vm-lspci-tvv.md": ("degraded", 1),
    "kinds/hwloc-qemu-q35-vm.xml": ("degraded", 1),
    "kinds/server-bmc-bluefield-lspci.txt": ("degraded", 1),
    "kinds/hwloc-duplicate-bdf.xml": ("degraded", 1),
    "kinds/hwloc-nvlinkbandwidth.xml": ("degraded", 1),
    "kinds/hwloc3-osdev-bitmask.xml": ("degraded", 1),
    # GPU pairs across sockets (SYS) or root complexes, with no NVLink in the input: each pair counts.
    "azure-ndv4-topo.xml": ("degraded", 1),
    "kinds/azure-ncv4-nccl-nvlink.xml": ("degraded", 1),
    # SXM/HGX GPUs with no NVLink in the input: NVLink inferred from the GPU model (issue 23), so
    # the GPU pairs are not judged by their PCIe path; each GPU has an optimal NIC.
    "aws-p4d-24xl-topo.xml": ("optimal", 0),
    "aws-p6e-gb200.36xlarge.xml": ("optimal", 0),
    # The real 4x H200 node (NV18 through NVSwitches from NVML), no NIC: the GPU pairs are judged.
    "h200x4-node-snapshot.tar": ("optimal", 0),
    "h200x4-run2-snapshot.tar": ("optimal", 0),
    # The real 2x H200 node of run 5: its live check on the node said optimal, exit 0.
    "h200x2-run5-snapshot.tar": ("optimal", 0),
    # The real 4x H200 node of run 6: its live check said optimal, exit 0 (truth/h200x4-run6-live-check.json).
    "h200x4-run6-snapshot.tar": ("optimal", 0),
    # Run 7, another machine of that kind: its live check said optimal, exit 0 (truth/h200x4-run7-live-check.json).
    "h200x4-run7-snapshot.tar": ("optimal", 0),
    # One GPU, no NIC: nothing to judge.
    "h100-node-snapshot.tar": ("incomplete", 3),
}


def reference_inputs():
    top = [p for p in REF.iterdir() if p.is_file() and p.name != "README.md"]
    return sorted(top + list((REF / "kinds").iterdir()))


def test_reference_table_covers_the_whole_reference_set():
    assert sorted(str(p.relative_to(REF)) for p in reference_inputs()) == sorted(REFERENCE_NODES)


@pytest.mark.parametrize("name", sorted(REFERENCE_NODES))
def test_reference_node_verdict_and_exit_code(name):
    status, rc = REFERENCE_NODES[name]
    p = gdrpeer("check", "--json", REF / name)
    j = json.loads(p.stdout)
    assert (j["summary"]["node"]["verdict"], p.returncode) == (status, rc), j["summary"]["node"]["reason"]
    if rc != 3:
        # The same verdict re-derived from the pairs by NCCL's rule (this file, above).
        assert VERDICTS[node_verdict_from_pairs(j)[0]] == status
    # --all-pairs keeps the old judgement: the worst pair.
    q = gdrpeer("check", "--json", "--all-pairs", REF / name)
    worst = json.loads(q.stdout)["summary"]["worst"]
    assert q.returncode == (3 if rc == 3 else {"optimal": 0, "degraded": 1, "unreliable": 1, "blocked": 2}[worst])


def test_fleet_exit_codes_across_the_reference_set():
    """Fleet mode over every reference input: each node's exit code and verdict as in the table,
    the run's exit code the highest of them, the totals counted by node verdict."""
    inputs = reference_inputs()
    p = gdrpeer("check", "--fleet", "--json", *inputs)
    j = json.loads(p.stdout)
    got = {str(Path(n["source"]).relative_to(REF)): (n["verdict"], n["exit_code"]) for n in j["nodes"]}
    assert got == REFERENCE_NODES
    assert p.returncode == max(rc for _, rc in REFERENCE_NODES.values())
    s = j["summary"]
    for status in ("optimal", "degraded", "incomplete"):
        assert s[status] == sum(v == status for v, _ in REFERENCE_NODES.values()), status
    text = gdrpeer("check", "--fleet", *inputs)
    for line, inp in zip(text.stdout.splitlines(), inputs):
        status, rc = REFERENCE_NODES[str(inp.relative_to(REF))]
        assert line.startswith(f"{inp}: {status} (") and f" exit {rc}" in line, line


def nfd_labels(*args):
    p = gdrpeer("check", "--format", "nfd", *args)
    assert p.returncode in (0, 1, 2, 3), p.stderr
    ns = "gdrpeer.feature.node.kubernetes.io/"
    return p.returncode, dict(l[len(ns):].split("=", 1) for l in p.stdout.splitlines() if l.startswith(ns))


@pytest.mark.parametrize("name", sorted(REFERENCE_NODES))
def test_reference_nfd_labels(name):
    """The NFD labels of every reference input: `verdict` is the node verdict, `gpu-nic-verdict`
    each GPU by its best NIC (the documented selector `gpu-nic-verdict: optimal` matches the
    nodes whose GPUs all have an optimal NIC), the all-pairs worst as detail."""
    status, rc = REFERENCE_NODES[name]
    got_rc, labels = nfd_labels(REF / name)
    assert got_rc == rc and labels["verdict"] == status
    j = json.loads(gdrpeer("check", "--json", REF / name).stdout)
    _, best = node_verdict_from_pairs(j)
    assert labels["gpu-nic-verdict"] == (VERDICTS[max(best.values())] if best else "none")
    if name in ("aws-p5.48xl-topo-pr1226.xml", "aws-p5en.48xlarge.xml", "kinds/h200-nccl-nvswitch.xml",
                "holohub-igx-orin-lspci-tv.txt"):
        assert labels["gpu-nic-verdict"] == "optimal"


# ---- nothing checked, hardware missing ---------------------------------------------------------

STELLINE_NICS = ["0000:21:00.0", "0000:21:00.1", "0000:81:00.0", "0000:81:00.1"]
STELLINE_GPUS = ["0000:01:00.0", "0000:41:00.0", "0000:c1:00.0", "0000:e1:00.0"]


def test_no_gpu_is_incomplete_not_optimal():
    roles = [f"--role=NONE={b}" for b in STELLINE_GPUS]
    p = gdrpeer("check", "--reason", *roles, STELLINE)
    assert p.returncode == 3 and p.stdout.startswith("incomplete: no GPU found"), (p.returncode, p.stdout)
    rc, labels = nfd_labels(*roles, STELLINE)
    assert rc == 3 and labels["verdict"] == "incomplete"


def test_no_nic_with_gpu_nic_pairs_is_incomplete():
    roles = [f"--role=NONE={b}" for b in STELLINE_NICS]
    p = gdrpeer("check", "--reason", "--pairs", "gpu-nic", *roles, STELLINE)
    assert p.returncode == 3 and p.stdout.startswith("incomplete: no RDMA NIC found"), (p.returncode, p.stdout)
    # The default pairs still judge the GPU pairs of a NIC-less node (with a no-nic note).
    p = gdrpeer("check", "--reason", *roles, STELLINE)
    assert p.returncode == 1, (p.returncode, p.stdout)


@pytest.mark.parametrize("opts,rc,why", [
    (["--expect-gpus", "8"], 3, "4 GPU(s) found, 8 expected"),
    (["--expect-nics", "5"], 3, "4 NIC(s) found, 5 expected"),
    (["--expect-gpus", "8", "--expect-nics", "8"], 3, "4 GPU(s) found, 8 expected; 4 NIC(s) found, 8 expected"),
    (["--expect-gpus", "4", "--expect-nics", "4"], 1, "best NIC of GPU0"),
])
def test_expected_devices(opts, rc, why):
    p = gdrpeer("check", "--reason", *opts, STELLINE)
    assert p.returncode == rc and why in p.stdout, (p.returncode, p.stdout)
    rc2, labels = nfd_labels(*opts, STELLINE)
    assert rc2 == rc and labels["verdict"] == ("incomplete" if rc == 3 else "degraded")
    assert labels.get("gpus-expected") == (opts[opts.index("--expect-gpus") + 1] if "--expect-gpus" in opts else None)
    prom = gdrpeer("check", "--format", "prometheus", *opts, STELLINE).stdout
    assert f"gdrpeer_check_incomplete {1 if rc == 3 else 0}" in prom
    assert f"gdrpeer_check_exit_code {rc}" in prom
    if "--expect-nics" in opts:
        assert f'gdrpeer_devices_expected{{role="nic"}} {opts[opts.index("--expect-nics") + 1]}' in prom


def test_reason_is_one_line_matching_the_exit_code():
    for name, (status, rc) in REFERENCE_NODES.items():
        p = gdrpeer("check", "--reason", REF / name)
        assert p.returncode == rc, (name, p.returncode, p.stderr)
        assert p.stdout.count("\n") == 1 and p.stdout.startswith(status + ": "), (name, p.stdout)
    p = gdrpeer("check", "--reason", STELLINE, P5EN)
    assert p.returncode == 64 and "needs one node" in p.stderr
    p = gdrpeer("check", "--reason", "--json", STELLINE)
    assert p.returncode == 64


def test_text_output_has_the_per_gpu_digest():
    text = gdrpeer("check", P5EN).stdout
    digest = text.split("GPUs (each with its best NIC, as NCCL binds them):\n")[1].split("\n\n")[0].splitlines()
    assert len(digest) == 8 and all(l.split()[-2:] == ["PIX", "optimal"] for l in digest), digest
    assert re.search(r"^Node: optimal \(.*\), exit 0$", text, re.M), text[-400:]


# ---- 9. conventions: typos, help, -V ----------------------------------------------------------

@pytest.mark.parametrize("word,near", [("chek", "check"), ("snap", "snapshot"), ("verfy", "verify"),
                                       ("tpo", "topo"), ("node.md", None)])
def test_unknown_command_names_the_nearest(word, near):
    """Before: "A subcommand is required" for any mistyped command."""
    p = gdrpeer(word, STELLINE)
    assert p.returncode == 64, p.returncode
    assert f'"{word}" is not a command' in p.stderr, p.stderr
    assert (f'did you mean "{near}"' in p.stderr) == bool(near), p.stderr


@pytest.mark.parametrize("sub", [None, "check", "topo", "snapshot", "verify"])
def test_help_command_is_the_help_flag(sub):
    want = gdrpeer(*([sub] if sub else []), "--help")
    got = gdrpeer("help", *([sub] if sub else []))
    assert got.returncode == 0 == want.returncode and got.stdout == want.stdout


def test_help_lists_exit_codes_and_examples():
    for sub in (None, "check"):
        text = gdrpeer(*([sub] if sub else []), "--help").stdout
        assert "Exit codes (every subcommand):" in text and "3   incomplete" in text, text[-600:]
    assert "Examples:" in gdrpeer("check", "--help").stdout


def test_short_version_flag():
    a, b = gdrpeer("-V"), gdrpeer("--version")
    assert a.returncode == 0 and a.stdout == b.stdout and a.stdout.startswith("gdrpeer ")


# ---- 7. output volume: --summary, --quiet -------------------------------------------------------

@pytest.mark.parametrize("name", sorted(REFERENCE_NODES))
def test_summary_is_one_line_per_gpu_and_the_node(name):
    status, rc = REFERENCE_NODES[name]
    p = gdrpeer("check", "--summary", REF / name)
    assert p.returncode == rc, p.stderr
    lines = p.stdout.splitlines()
    j = json.loads(gdrpeer("check", "--json", REF / name).stdout)
    _, best = node_verdict_from_pairs(j)
    gpus = [d["label"] for d in j["devices"] if d["role"] == "gpu"]
    assert len(lines) == len(gpus) + 1, p.stdout
    for line, gpu in zip(lines, gpus):
        assert line.startswith(gpu + " ")
        if gpu in best:
            assert line.split()[-1] == VERDICTS[best[gpu]], line
        else:
            assert line.endswith("no NIC checked"), line
    assert lines[-1].startswith(f"node: {status} (") and lines[-1].endswith(f"exit {rc}")


def test_summary_of_p5en_names_a_pix_nic_for_every_gpu():
    # AWS: every p5en GPU shares a PCIe switch with EFA NICs.
    lines = gdrpeer("check", "--summary", P5EN).stdout.splitlines()[:-1]
    assert len(lines) == 8 and all(l.split()[-2:] == ["PIX", "optimal"] for l in lines), lines


def test_quiet_prints_nothing_and_keeps_the_exit_code():
    for name, (_, rc) in REFERENCE_NODES.items():
        p = gdrpeer("check", "-q", REF / name)
        assert (p.returncode, p.stdout) == (rc, ""), name
    for opts in (["--json"], ["--format", "nfd"], ["--summary"], ["-o", "/tmp/x"]):
        assert gdrpeer("check", "-q", *opts, STELLINE).returncode == 64, opts


PAIR_LINE = re.compile(r"^  (\[\w+\] )?[A-Z]+\d+-[A-Z]+\d+(, [A-Z]+\d+-[A-Z]+\d+)*( and \d+ more)?: (?P<text>.*)$")
BDF_LIST = re.compile(r"[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7](, [0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7])*")


def problems_and_notes(text):
    """The pair lines of the Problems and Notes sections, each without its list of pairs."""
    out = []
    for section in ("Problems:\n", "Notes:\n"):
        if section in text:
            for line in text.split(section, 1)[1].split("\n\n")[0].splitlines():
                m = PAIR_LINE.match(line)
                if m:
                    out.append(m["text"])
    return out


@pytest.mark.parametrize("name", sorted(REFERENCE_NODES))
def test_a_note_or_problem_with_the_same_text_is_printed_once(name):
    """Issue 25 item 7: a note repeated per pair ("ACS state of <bridges> is not in this input"
    once per GPU-NIC pair, path-sys once per GPU with its own fix) is one line naming its pairs.
    Two lines whose texts differ only in the BDFs they list are the same note."""
    lines = [BDF_LIST.sub("<bdfs>", l) for l in problems_and_notes(gdrpeer("check", REF / name).stdout)]
    repeated = sorted({l for l in lines if lines.count(l) > 1})
    assert not repeated, repeated


def test_deduplicated_notes_keep_every_bdf_and_every_fix():
    """The one acs-unknown line of the p5en names every bridge the per-pair JSON findings name
    (the JSON keeps one finding per pair), and path-sys keeps each GPU's own fix."""
    text = gdrpeer("check", P5EN).stdout
    j = json.loads(gdrpeer("check", "--json", P5EN).stdout)
    findings = [f for p in j["pairs"] for f in p["findings"]]
    acs = [f for f in findings if f["rule"] == "acs-unknown"]
    assert len(acs) == 32, len(acs)  # one per GPU-NIC pair under a shared switch
    acs_lines = [l for l in text.splitlines() if l.endswith("(acs-unknown)")]
    assert len(acs_lines) == 1, acs_lines
    for f in acs:
        for bdf in BDF_LIST.search(f["reason"])[0].split(", "):
            assert bdf in acs_lines[0], (bdf, acs_lines[0])
    sys_lines = [l for l in text.splitlines() if l.endswith("(path-sys)")]
    assert len(sys_lines) == 1, sys_lines
    fixes = {f["fix"] for f in findings if f["rule"] == "path-sys"}
    assert len(fixes) == 8 and all(f"      fix: {fix}\n" in text for fix in fixes), fixes


# ---- 9. CPU affinity, as nvidia-smi's column --------------------------------------------------

def cpu_ranges(cpus):
    """[0, 1, 2, 5] -> "0-2,5", the form of sysfs local_cpulist and nvidia-smi."""
    out, cpus = [], sorted(cpus)
    for c in cpus:
        if out and c == out[-1][1] + 1:
            out[-1][1] = c
        else:
            out.append([c, c])
    return ",".join(f"{a}-{b}" if b > a else str(a) for a, b in out)


HWLOC_INPUTS = [n for n in sorted(REFERENCE_NODES) if n.endswith(".xml")
                and b"<topology" in (REF / n).read_bytes()[:4096]]


@pytest.mark.skipif(not shutil.which("hwloc-calc"), reason="hwloc-calc (Debian hwloc) is the truth here")
@pytest.mark.parametrize("name", HWLOC_INPUTS)
def test_hwloc_cpu_affinity_is_hwloc_calcs(name):
    """Each GPU's and NIC's cpu_affinity in an hwloc input is the CPUs hwloc itself gives that PCI
    device (hwloc-calc pci=BDF, the physical PU indexes), and the text matrix shows the same."""
    j = json.loads(gdrpeer("check", "--json", REF / name).stdout)
    text = gdrpeer("check", REF / name).stdout
    checked = 0
    for d in j["devices"]:
        if d["role"] not in ("gpu", "nic"):
            continue
        if b'cpuset="' not in (REF / name).read_bytes():
            # Excerpts without any cpuset (hwloc-calc cannot load them): unknown, never a guess.
            assert d["cpu_affinity"] is None, d
            checked += 1
            continue
        p = subprocess.run(["hwloc-calc", "--if", "xml", "-i", str(REF / name), f"pci={d['bdf']}", "--po", "-I", "pu"],
                           capture_output=True, text=True, timeout=60)
        assert p.returncode == 0, p.stderr
        want = cpu_ranges(int(c) for c in p.stdout.strip().split(",") if c)
        assert d["cpu_affinity"] == want, (d["label"], d["cpu_affinity"], want)
        row = next(l for l in text.splitlines() if l.startswith(d["label"] + " ") and l.rstrip().endswith(d["bdf"]))
        assert row.split()[-3] == want, row
        checked += 1
    assert checked, name


NCCL_INPUTS = [n for n in sorted(REFERENCE_NODES) if n.endswith(".xml") and n not in HWLOC_INPUTS]


@pytest.mark.parametrize("name", NCCL_INPUTS)
def test_nccl_xml_cpu_affinity_is_its_cpus_affinity_attribute(name):
    """NCCL writes each <cpu>'s affinity (the node's cpumap, sysfs's mask form); every device under
    it has those CPUs, read here with Python's own XML parser; a <cpu> without one leaves them unknown."""
    import xml.etree.ElementTree as ET
    want = {}
    for cpu in ET.parse(REF / name).getroot().iter("cpu"):
        mask = cpu.get("affinity")
        cpus = None
        if mask:
            value = int(mask.replace(",", ""), 16)
            cpus = cpu_ranges(i for i in range(value.bit_length()) if value >> i & 1)
        for pci in cpu.iter("pci"):
            want[pci.get("busid").lower()] = cpus
    j = json.loads(gdrpeer("check", "--json", REF / name).stdout)
    assert j["node"]["format"] == "nccl-xml"
    for d in j["devices"]:
        assert d["cpu_affinity"] == want[d["bdf"]], (d["label"], d["cpu_affinity"], want[d["bdf"]])


def test_cpu_affinity_unknown_is_a_question_mark():
    """lspci text says nothing about local CPUs: "?" in the column, null in JSON."""
    j = json.loads(gdrpeer("check", "--json", STELLINE).stdout)
    assert all(d["cpu_affinity"] is None for d in j["devices"]), j["devices"]
    text = gdrpeer("check", STELLINE).stdout
    assert "CPU Affinity" in text
    assert re.search(r"^GPU0 .* \? +\S+ +[0-9a-f]{4}:", text, re.M), text[:1500]


# ---- 9. device names from pci.ids on sysfs inputs ---------------------------------------------

PCI_IDS = Path("/usr/share/misc/pci.ids")


def pci_ids_names():
    """{vendor: name}, {(vendor, device): name} straight from pci.ids (Debian pci.ids)."""
    vendors, devices, vendor = {}, {}, None
    for line in PCI_IDS.read_text(errors="replace").splitlines():
        if line.startswith("C "):
            break  # the class list follows the vendors
        if not line or line.startswith("#"):
            continue
        if not line.startswith("\t"):
            vid, _, name = line.partition("  ")
            vendor = int(vid, 16)
            vendors[vendor] = name
        elif not line.startswith("\t\t") and vendor is not None:
            did, _, name = line[1:].partition("  ")
            devices[(vendor, int(did, 16))] = name
    return vendors, devices


def lspci_name(vendor, device):
    """The name lspci prints: "Vendor Device-name", "Vendor Device dddd" for an id pci.ids lacks,
    "" for an unknown vendor (then only the ids)."""
    vendors, devices = pci_ids_names()
    if vendor not in vendors:
        return ""
    return f"{vendors[vendor]} {devices.get((vendor, device)) or f'Device {device:04x}'}"


SYSFS_SNAPSHOTS = ["h200x4-node-snapshot.tar", "h200x4-run2-snapshot.tar", "h200x2-run5-snapshot.tar", "h200x4-run6-snapshot.tar", "h200x4-run7-snapshot.tar"]


def snapshot_ids(path):
    """{BDF: (vendor, device)} from the snapshot's own sysfs files."""
    ids = {}
    with tarfile.open(path) as tar:
        for m in tar.getmembers():
            parts = m.name.split("/")  # sys/devices/pci0000:00/[bridges/]0000:00:06.0/vendor
            if parts[:2] == ["sys", "devices"] and parts[-1] in ("vendor", "device") and m.isfile() \
                    and BDF_LIST.fullmatch(parts[-2]):
                ids.setdefault(parts[-2], {})[parts[-1]] = int(tar.extractfile(m).read().decode().strip(), 16)
    return {bdf: (v["vendor"], v["device"]) for bdf, v in ids.items() if len(v) == 2}


@pytest.mark.skipif(not PCI_IDS.exists(), reason="/usr/share/misc/pci.ids (Debian pci.ids) is the truth here")
@pytest.mark.parametrize("name", SYSFS_SNAPSHOTS)
def test_sysfs_inputs_name_devices_from_pci_ids(name):
    """A snapshot carries ids only; every device of the tree (`gdrpeer topo`), the Devices section
    and JSON name them from pci.ids as lspci does (libpci's pci_lookup_name). Before: bare ids."""
    ids = snapshot_ids(REF / name)
    assert ids
    tree = {l.split()[0]: l for l in gdrpeer("topo", REF / name).stdout.splitlines() if BDF_LIST.match(l.strip())}
    named = 0
    for bdf, (v, d) in ids.items():
        want = lspci_name(v, d)
        if bdf in tree and want:
            assert f"  {want} [{v:04x}:{d:04x}]" in tree[bdf], (tree[bdf], want)
            named += 1
    assert named, tree
    j = json.loads(gdrpeer("check", "--json", REF / name).stdout)
    devices = gdrpeer("check", REF / name).stdout.split("\nDevices:\n")[1].split("\n\n")[0]
    for d in j["devices"]:
        want = lspci_name(int(d["vendor"], 16), int(d["device"], 16))
        assert want and d["name"] == want, (d["name"], want)
        assert f"{d['bdf']}  {want} [{d['vendor'][2:]}:{d['device'][2:]}]" in devices, devices


def test_names_without_libpci_are_bare_ids_with_a_note():
    """Where libpci.so.3 is missing (a minimal node), ids stay bare and the Devices section says why."""
    env = {"GDRPEER_LIBPCI": "/nonexistent/libpci.so.3"}
    snap = REF / SYSFS_SNAPSHOTS[1]
    j = json.loads(gdrpeer("check", "--json", snap, env_extra=env).stdout)
    assert all(d["name"] == "" for d in j["devices"]), j["devices"]
    text = gdrpeer("check", snap, env_extra=env).stdout
    assert "(names not looked up: /nonexistent/libpci.so.3 not loadable" in text, text
    assert re.search(r"^  GPU0 +0000:00:06\.0 +10de:[0-9a-f]{4}$", text, re.M), text


# ---- 8. failures not lost in fleet mode --------------------------------------------------------

def test_fleet_unreadable_dump_does_not_hide_a_blocked_node(tmp_path):
    """A blocked node (a GeForce GPU: GPUDirect RDMA unsupported, topology/platforms.json) and an
    unreadable dump: the run exits 2, the dump's error is on stderr too. Before: exit 65, and
    the error only on stdout."""
    blocked = sysfs_node(tmp_path / "geforce", gpu_device=0x2684)  # RTX 4090
    bad = tmp_path / "bad.xml"
    bad.write_text("<topology>\n<object type=\"Machine\">\n")
    p = gdrpeer("check", "--fleet", blocked, bad, P5EN)
    assert p.returncode == 2, (p.returncode, p.stdout, p.stderr)
    assert f"{bad}: error: {bad}:3: " in p.stdout
    assert p.stderr.startswith(f"gdrpeer: {bad}:3: ") and p.stderr.count("\n") == 1, p.stderr
    # Without a blocked or incomplete node the unreadable dump still decides: 65.
    assert gdrpeer("check", "--fleet", bad, P5EN).returncode == 65


# ---- 9. rule data and sysfs copies the CLI refuses -----------------------------------------------

def test_platform_rule_without_condition_is_refused(tmp_path):
    """A --data-dir whose platforms.json has a rule without a condition (it would fire on every
    node) is refused with exit 78 (rule data unusable), naming the file and the rule. Before: the
    rule loaded and fired on every pair."""
    data = tmp_path / "data"
    shutil.copytree(REPO / "topology", data)
    platforms = json.loads((data / "platforms.json").read_text())
    platforms["rules"].append({"id": "platform-everywhere", "severity": "blocked", "reason": "r"})
    (data / "platforms.json").write_text(json.dumps(platforms))
    p = gdrpeer("check", "--data-dir", data, P5EN)
    assert p.returncode == 78, (p.returncode, p.stdout, p.stderr)
    assert f"{data}/platforms.json: rule platform-everywhere: needs at least one condition" in p.stderr, p.stderr


@pytest.mark.parametrize("gone, there", [("device", "vendor"), ("vendor", "device")])
def test_sysfs_function_with_one_id_file_is_refused(tmp_path, gone, there):
    """The kernel creates vendor and device for every PCI function (drivers/pci/pci-sysfs.c) and
    lspci's sysfs backend needs both (pciutils lib/sysfs.c): a copy with one of them is an input
    error naming the missing file (exit 65). Before: the ids were unknown and the vendor file alone
    still made the GPU NVIDIA's."""
    root = sysfs_node(tmp_path / "node")
    fn = root / "sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:00.0/0000:03:00.0"  # the GPU
    assert (fn / "vendor").read_text() == "0x10de\n"
    (fn / gone).unlink()
    p = gdrpeer("check", "--sysfs-root", root)
    assert p.returncode == 65, (p.returncode, p.stdout, p.stderr)
    assert f"/{fn.name}/{gone}: missing, while {there} is there" in p.stderr, p.stderr

"""`gdrpeer check --format prometheus|nfd [--output PATH]` (docs/fleet.md), host only.

The Prometheus text is validated by Prometheus's own `promtool check metrics` (Debian package
`prometheus`) and compared value by value with `--json` of the same input; the NFD feature file
is checked against node-feature-discovery's local-source format and the Kubernetes label syntax.
Writes to a path are atomic: no temporary file is left, a failing check leaves the old file.
"""

import datetime
import json
import os
import re
import shutil
import stat
import subprocess
from collections import Counter

import pytest

from helpers.check_cli import gdrpeer_bin
from helpers.paths import REF
from helpers.node_verdict import node_verdict_from_pairs

INPUTS = [REF / "h100-node-snapshot.tar", REF / "stelline-asus-esc8000a-e12.md",
          REF / "aws-p5en.48xlarge.xml", REF / "holohub-igx-orin-lspci-tv.txt"]
NFD_NS = "gdrpeer.feature.node.kubernetes.io/"
VERDICTS = ["optimal", "degraded", "unreliable", "blocked"]


def gdrpeer(*args, rc=None):
    """The binary with its built-in rule data (no GDRPEER_DATA_DIR from the caller's shell)."""
    env = {k: v for k, v in os.environ.items() if k != "GDRPEER_DATA_DIR"}
    p = subprocess.run([gdrpeer_bin(), *map(str, args)], capture_output=True, text=True, timeout=120, env=env)
    if rc is not None:
        assert p.returncode == rc, f"rc={p.returncode}\nstdout:\n{p.stdout}\nstderr:\n{p.stderr}"
    return p


def check_json(path):
    p = gdrpeer("check", "--json", path)
    assert p.returncode in (0, 1, 2, 3), p.stderr
    return p.returncode, json.loads(p.stdout)


def promtool():
    tool = shutil.which("promtool")
    if not tool:
        pytest.fail("promtool is missing: install the Debian package prometheus (make deps)")
    return tool


SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def samples(text):
    """[(name, {label: value}, float)] of every sample line."""
    out = []
    for line in text.splitlines():
        if line.startswith("#") or not line:
            continue
        m = SAMPLE.match(line)
        assert m, f"not a sample line: {line!r}"
        labels = dict(LABEL.findall(m.group(2) or ""))
        out.append((m.group(1), labels, float(m.group(3))))
    return out


@pytest.mark.parametrize("path", INPUTS, ids=lambda p: p.name)
def test_prometheus_valid_and_true_to_json(path, tmp_path):
    rc, j = check_json(path)
    out = tmp_path / "gdrpeer.prom"
    gdrpeer("check", "--format", "prometheus", "--output", out, path, rc=rc)
    text = out.read_text()
    lint = subprocess.run([promtool(), "check", "metrics"], input=text, capture_output=True, text=True, timeout=60)
    assert lint.returncode == 0, f"promtool check metrics:\n{lint.stdout}{lint.stderr}\n{text}"
    s = samples(text)
    by_name = {}
    for name, labels, value in s:
        by_name.setdefault(name, []).append((labels, value))

    # The node verdict (each GPU by its best NIC), derived here from the JSON pairs; the worst pair
    # as detail (issue 25: before, gdrpeer_check_verdict was the worst pair).
    node, best = node_verdict_from_pairs(j)
    assert by_name["gdrpeer_check_verdict"] == [({}, node)]
    assert by_name["gdrpeer_check_worst_pair_verdict"] == [({}, VERDICTS.index(j["summary"]["worst"]))]
    assert by_name["gdrpeer_check_incomplete"] == [({}, 1 if rc == 3 else 0)]
    assert by_name["gdrpeer_check_exit_code"] == [({}, rc)]
    assert {l["gpu"]: v for l, v in by_name.get("gdrpeer_gpu_verdict", [])} == best
    (info, one), = by_name["gdrpeer_check_info"]
    assert one == 1 and info["source"] == j["node"]["source"] and info["iommu"] == j["node"]["iommu"]
    assert info["rule_data"] == "built-in"

    pairs = {(l["a"], l["b"]): (l, v) for l, v in by_name.get("gdrpeer_pair_verdict", [])}
    assert len(pairs) == len(j["pairs"])
    for p in j["pairs"]:
        labels, value = pairs[(p["a"], p["b"])]
        assert (labels["class"], labels["a_bdf"], labels["b_bdf"]) == (p["class"], p["a_bdf"], p["b_bdf"])
        assert value == VERDICTS.index(p["verdict"]), p
    counts = {l["verdict"]: v for l, v in by_name["gdrpeer_pairs"]}
    assert counts == {v: j["summary"][v] for v in VERDICTS}

    # Findings that lower a verdict, per rule and severity: pairs' findings and node notes.
    want = Counter((f["rule"], f["severity"]) for p in j["pairs"] for f in p["findings"] if f["severity"] != "note")
    want.update((n["rule"], n["severity"]) for n in j["notes"] if n["severity"] != "note")
    got = {(l["rule"], l["severity"]): v for l, v in by_name.get("gdrpeer_problems", [])}
    assert got == dict(want)
    roles = Counter(d["role"] for d in j["devices"])
    assert {l["role"]: v for l, v in by_name["gdrpeer_devices"]} == {r: roles.get(r, 0) for r in ("gpu", "nic", "nvme")}


def test_inputs_exercise_the_formats():
    """The inputs above must include pairs and problems, or the comparisons prove little."""
    reports = [check_json(p)[1] for p in INPUTS]
    assert {r["summary"]["worst"] for r in reports} - {"optimal"}
    assert all(r["pairs"] for r in reports[1:]), "only the H100 snapshot (one GPU, no NIC) has no pairs"


K8S_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
K8S_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$")


def parse_nfd(text):
    """node-feature-discovery's local source format: `# +expiry-time=RFC3339`, `name[=value]`."""
    expiry, labels = None, {}
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        if line.startswith("#"):
            if line.startswith("# +"):
                key, _, value = line[3:].partition("=")
                assert key == "expiry-time", f"unknown NFD directive {line!r}"
                expiry = datetime.datetime.strptime(value.strip(), "%Y-%m-%dT%H:%M:%SZ").replace(
                    tzinfo=datetime.timezone.utc)
            continue
        name, _, value = line.partition("=")
        assert name.startswith(NFD_NS), f"{name}: outside {NFD_NS}"
        assert K8S_NAME.match(name[len(NFD_NS):]), f"not a Kubernetes label name: {name!r}"
        assert K8S_VALUE.match(value), f"not a Kubernetes label value: {value!r}"
        assert name not in labels, f"{name} twice"
        labels[name[len(NFD_NS):]] = value
    return expiry, labels


@pytest.mark.parametrize("path", INPUTS, ids=lambda p: p.name)
def test_nfd_feature_file(path, tmp_path):
    rc, j = check_json(path)
    out = tmp_path / "features.d" / "gdrpeer"
    out.parent.mkdir()
    before = datetime.datetime.now(datetime.timezone.utc)
    gdrpeer("check", "--format", "nfd", "-o", out, path, rc=rc)
    expiry, labels = parse_nfd(out.read_text())
    assert expiry is not None, "no expiry: labels of a node whose refresh stopped would stay"
    ahead = (expiry - before).total_seconds()
    assert 3500 <= ahead <= 3700, f"expiry {expiry} is {ahead} s after the check, expected one hour"
    node, best = node_verdict_from_pairs(j)
    assert labels["verdict"] == ("incomplete" if rc == 3 else VERDICTS[node])
    roles = {d["label"]: d["role"] for d in j["devices"]}
    for kind in ("gpu-nic", "gpu-gpu", "gpu-nvme"):
        verdicts = [p["verdict"] for p in j["pairs"] if f'{roles[p["a"]]}-{roles[p["b"]]}' == kind]
        worst = max(verdicts, key=VERDICTS.index) if verdicts else "none"
        if kind == "gpu-nic":
            # The selector `gpu-nic-verdict: optimal` asks "does every GPU have a good NIC?".
            assert labels["gpu-nic-verdict"] == (VERDICTS[max(best.values())] if best else "none")
            assert labels["gpu-nic-all-pairs-verdict"] == worst
        else:
            assert labels[f"{kind}-verdict"] == worst, kind
    assert labels["gpus"] == str(sum(r == "gpu" for r in roles.values()))
    assert labels["nics"] == str(sum(r == "nic" for r in roles.values()))
    software = j["node"].get("software")
    if path.suffix == ".tar":
        mods = software["modules_of_interest"]
        want = any(m in mods for m in ("nvidia_peermem", "nv_peer_mem")) or bool(software["memory_peers"])
        assert labels["peer-memory"] == str(want).lower()
        assert labels["gdrpeer-module"] == str("gdrpeer" in mods).lower()
    else:
        assert "peer-memory" not in labels, "a dump without module lists must not claim a module state"
    assert sorted(p.name for p in out.parent.iterdir()) == ["gdrpeer"], "temporary file left behind"


def nfd_expiry_ahead(*opts):
    """Seconds between the check and the expiry its feature file names."""
    good = REF / "stelline-asus-esc8000a-e12.md"
    rc, _ = check_json(good)
    before = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)
    p = gdrpeer("check", "--format", "nfd", *opts, good, rc=rc)
    after = datetime.datetime.now(datetime.timezone.utc)
    expiry, labels = parse_nfd(p.stdout)
    assert labels, "no labels"
    return (expiry - before).total_seconds(), (expiry - after).total_seconds()


@pytest.mark.parametrize("value,seconds", [("7200", 7200), ("90m", 5400), ("2h", 7200), ("1d", 86400),
                                           ("60s", 60), ("366d", 366 * 86400)])
def test_nfd_expiry_option(value, seconds):
    """--nfd-expiry: how long NFD keeps the labels after the check (default one hour, above)."""
    from_before, from_after = nfd_expiry_ahead("--nfd-expiry", value)
    assert from_after - 1 <= seconds <= from_before, (value, from_before, from_after)


@pytest.mark.parametrize("value,why", [("59", "out of range"), ("367d", "out of range"), ("0", "out of range"),
                                       ("1w", "unit s, m, h or d"), ("h", "unit s, m, h or d"),
                                       ("-5m", "unit s, m, h or d"), ("1.5h", "unit s, m, h or d"),
                                       ("99999999999", "unit s, m, h or d"), ("", "unit s, m, h or d")])
def test_nfd_expiry_rejects_bad_values(value, why):
    good = REF / "stelline-asus-esc8000a-e12.md"
    p = gdrpeer("check", "--format", "nfd", "--nfd-expiry", value, good, rc=64)
    assert f'--nfd-expiry "{value}"' in p.stderr and why in p.stderr, p.stderr
    assert p.stdout == "", "a rejected option must not write a feature file"


def test_nfd_expiry_needs_nfd_format():
    good = REF / "stelline-asus-esc8000a-e12.md"
    p = gdrpeer("check", "--format", "prometheus", "--nfd-expiry", "2h", good, rc=64)
    assert "--nfd-expiry applies to --format nfd only" in p.stderr, p.stderr
    p = gdrpeer("check", "--nfd-expiry", "2h", good, rc=64)
    assert "--nfd-expiry applies to --format nfd only" in p.stderr, p.stderr


def test_output_is_atomic_and_kept_on_failure(tmp_path):
    out = tmp_path / "gdrpeer.prom"
    good = REF / "stelline-asus-esc8000a-e12.md"
    rc, _ = check_json(good)
    gdrpeer("check", "--format", "prometheus", "--output", out, good, rc=rc)
    assert stat.S_IMODE(out.stat().st_mode) == 0o644
    first = out.read_bytes()
    # A check that fails (malformed input, exit 65) writes nothing: the old file stays whole.
    bad = tmp_path / "bad.xml"
    bad.write_text("<topology><object type=")
    p = gdrpeer("check", "--format", "prometheus", "--output", out, bad, rc=65)
    assert "bad.xml" in p.stderr
    assert out.read_bytes() == first
    assert sorted(x.name for x in tmp_path.iterdir()) == ["bad.xml", "gdrpeer.prom"]


def test_output_errors(tmp_path):
    good = REF / "stelline-asus-esc8000a-e12.md"
    p = gdrpeer("check", "--format", "nfd", "--output", tmp_path / "missing" / "gdrpeer", good, rc=73)
    assert "missing/gdrpeer" in p.stderr and "No such file or directory" in p.stderr, p.stderr
    # A read-only directory (root bypasses permissions, so this checks the non-root case only).
    if os.geteuid() != 0:
        ro = tmp_path / "ro"
        ro.mkdir(mode=0o555)
        gdrpeer("check", "--format", "nfd", "--output", ro / "gdrpeer", good, rc=73)
    p = gdrpeer("check", "--format", "prometheus", good, good, rc=64)
    assert "--format prometheus needs one node" in p.stderr, p.stderr
    p = gdrpeer("check", "--fleet", "--output", tmp_path / "fleet.txt", good, rc=64)
    assert "--output needs one node" in p.stderr and not (tmp_path / "fleet.txt").exists(), p.stderr
    p = gdrpeer("check", "--json", "--format", "nfd", good, rc=64)
    assert "--json" in p.stderr and "nfd" in p.stderr, p.stderr
    p = gdrpeer("check", "--format", "yaml", good, rc=64)
    assert "yaml" in p.stderr, p.stderr


def test_format_names_the_existing_outputs(tmp_path):
    """--format json/dot/text are --json, --dot and the default; --output takes any of them."""
    good = REF / "stelline-asus-esc8000a-e12.md"
    rc, _ = check_json(good)
    for flag, fmt in (("--json", "json"), ("--dot", "dot"), (None, "text")):
        plain = gdrpeer("check", *([flag] if flag else []), good, rc=rc).stdout
        assert gdrpeer("check", "--format", fmt, good, rc=rc).stdout == plain, fmt
        gdrpeer("check", "--format", fmt, "-o", tmp_path / fmt, good, rc=rc)
        assert (tmp_path / fmt).read_text() == plain, fmt

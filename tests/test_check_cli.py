"""`gdrpeer check` as fleet scripts call it (issue 25): options that cannot eat an input,
refused contradictions, rule ids that must exist. Host only, no emulated node.

Each test here failed on the CLI before issue 25 (the binary of main at 26a2bd7).
"""

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from test_check import REF, REPO, gdrpeer_bin

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

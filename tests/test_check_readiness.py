"""`gdrpeer check`'s IBGDA and GDS readiness lines end to end (issue 27; docs/check.md).

The decision tables themselves are tested row by row in userspace/topo/tests/test_readiness.cpp; here
the CLI on the real H100 snapshot of tests/reference (no NIC, no NVMe drive, no
/proc/driver/nvidia/params: it was taken before the checker read them) and the probe's usage rule.
"""

import json

import pytest

from helpers.check_cli import run
from helpers.paths import REF

SNAPSHOT = REF / "h100-node-snapshot.tar"


def test_every_gpu_has_an_ibgda_and_a_gds_line_and_unknown_stays_unknown():
    p = run("check", SNAPSHOT)
    assert "IBGDA and GDS readiness" in p.stdout, p.stdout
    j = json.loads(run("check", "--json", SNAPSHOT).stdout)
    gpus = [d["label"] for d in j["devices"] if d["role"] == "gpu"]
    assert gpus
    entries = j["readiness"]
    assert sorted(e["gpu"] for e in entries if e["kind"] == "ibgda") == sorted(gpus)
    assert sorted(e["gpu"] for e in entries if e["kind"] == "gds") == sorted(gpus)
    for e in entries:
        m = e["mode"]
        if e["kind"] == "ibgda":
            # No NIC in the dump: none, and the software half is unknown without the driver's params.
            assert e["other"] == "" and m["mode"] == "none", e
            assert "no driver parameters in this input" in m["reason"], m["reason"]
            # GPUs with the same line share it: "GPU0, GPU1 - (no NIC)  ibgda: ..."
            line = next(l for l in p.stdout.splitlines()
                        if " - (no NIC)" in l and e["gpu"] in l.strip().split(" - ")[0].split(", "))
            assert "ibgda: none; no RDMA NIC in this input" in line, line
        else:
            assert e["other"] == "" and m["mode"] == "compat", e


def test_probe_needs_the_live_node():
    p = run("check", SNAPSHOT, "--probe", "ibgda", check_rc=64)
    assert "--probe ibgda" in p.stderr and "live node" in p.stderr, p.stderr
    p = run("check", "--probe", "nic", check_rc=64)


def test_a_snapshot_carries_the_kernel_configuration(tmp_path):
    """What the live check read (/boot/config-*, else /proc/config.gz) a snapshot records and gives back."""
    live = json.loads(run("check", "--json").stdout)["node"]["software"]["readiness"]["kernel_config"]
    if not live["known"]:
        pytest.skip("this machine has neither /boot/config-$(uname -r) nor a readable /proc/config.gz")
    tar = tmp_path / "node.tar"
    p = run("snapshot", tar)
    assert p.returncode == 0, p.stderr
    again = json.loads(run("check", "--json", tar).stdout)["node"]["software"]["readiness"]["kernel_config"]
    assert again == live
    assert live["values"].get("CONFIG_PCI_P2PDMA") in ("y", "m", "n"), live


def test_gpus_with_the_same_answer_share_one_line():
    """The real 4x H200 node has no NIC and no NVMe drive: every GPU gets the same IBGDA and GDS
    answer, printed once for the four (issue 25 item 7: no line repeated per GPU), each GPU named."""
    text = run("check", REF / "h200x4-run2-snapshot.tar").stdout
    ibgda = [l for l in text.splitlines() if " ibgda: " in l]
    gds = [l for l in text.splitlines() if " gds: " in l]
    assert len(ibgda) == 1 and len(gds) == 1, text
    for line in ibgda + gds:
        assert line.strip().startswith("GPU0, GPU1, GPU2, GPU3 - "), line

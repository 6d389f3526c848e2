"""The shipped LBNL NHC check, packaging/nhc/gdrpeer.nhc (docs/fleet.md), host only.

Debian does not package NHC (`apt-cache search nhc` on bookworm finds nothing), so the check is
held to NHC's documented contract (README "Writing Checks" of github.com/mej/nhc; the helpers
in its scripts/common.nhc and nhc driver): a `check_*` bash function that returns 0 when the node
is healthy and otherwise calls `die 1 "message"` and returns 1, running commands through
`nhc_cmd_with_timeout SECONDS COMMAND...` (SIGTERM at the limit: status 143). Here `die` and
`nhc_cmd_with_timeout` are stand-ins that record what NHC would. With GDRPEER_NHC_SOURCE set to an
NHC source tree (a checkout of mej/nhc), the same cases also run through the real `nhc` driver.
"""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from helpers.check_cli import gdrpeer_bin
from helpers.paths import REF, REPO

CHECK = REPO / "packaging" / "nhc" / "gdrpeer.nhc"
STELLINE = REF / "stelline-asus-esc8000a-e12.md"  # degraded (exit 1)
P5EN = REF / "aws-p5en.48xlarge.xml"               # optimal (exit 0)
H100 = REF / "h100-node-snapshot.tar"              # one GPU, no NIC: incomplete (exit 3)

# (arguments of check_gdrpeer, healthy?, what the die message must hold)
CASES = [
    (["--", P5EN], True, None),
    (["--", P5EN, "--expect-gpus", "8", "--expect-nics", "16"], True, None),
    (["--", STELLINE], False, "check_gdrpeer:  degraded: best NIC of GPU0"),
    (["-w", "--", STELLINE], True, None),
    (["--", H100], False, "check_gdrpeer:  incomplete: no RDMA NIC found"),
    (["-w", "--", H100], False, "incomplete"),
    (["--", P5EN, "--expect-gpus", "9"], False, "incomplete: 8 GPU(s) found, 9 expected"),
    (["--", REF / "no-such-node.xml"], False, "could not run (exit 66): gdrpeer: "),
    (["--", "--skip", "nonsense", P5EN], False, "could not run (exit 64)"),
    (["-t"], False, "Option -t requires an argument"),
]


def run_contract(args, tmp_path):
    script = f"""
TIMEOUT=60
die() {{ printf '%s\\n' "$1 $2" >> "{tmp_path}/died"; }}
nhc_cmd_with_timeout() {{ local t=$1; shift; timeout --preserve-status "$t" "$@"; }}
source {CHECK}
check_gdrpeer -b {gdrpeer_bin()} {" ".join(repr(str(a)) for a in args)}
echo "status $?"
"""
    env = {k: v for k, v in os.environ.items() if k != "GDRPEER_DATA_DIR"}
    p = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=120, env=env)
    died = (tmp_path / "died").read_text() if (tmp_path / "died").exists() else ""
    return p.stdout.strip().splitlines()[-1], died


@pytest.mark.parametrize("args,healthy,message", CASES, ids=lambda c: str(c)[:60])
def test_check_follows_nhc_contract(args, healthy, message, tmp_path):
    status, died = run_contract(args, tmp_path)
    if healthy:
        assert (status, died) == ("status 0", ""), died
    else:
        assert status == "status 1", (status, died)
        assert died.count("\n") == 1 and died.startswith("1 "), died  # one die, code 1, one line
        assert message in died, died


def test_timeout_is_reported(tmp_path):
    slow = tmp_path / "slow-gdrpeer"
    slow.write_text("#!/bin/sh\nsleep 30\n")
    slow.chmod(0o755)
    script = f"""
TIMEOUT=60
die() {{ printf '%s\\n' "$1 $2" >> "{tmp_path}/died"; }}
nhc_cmd_with_timeout() {{ local t=$1; shift; timeout --preserve-status "$t" "$@"; }}
source {CHECK}
check_gdrpeer -t 1 -b {slow} -- x
echo "status $?"
"""
    p = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60)
    assert p.stdout.strip().endswith("status 1")
    assert "timed out after 1 seconds" in (tmp_path / "died").read_text()


@pytest.mark.parametrize("args,healthy,message", CASES[:8], ids=lambda c: str(c)[:60])
def test_check_under_the_real_nhc(args, healthy, message, tmp_path):
    source = os.environ.get("GDRPEER_NHC_SOURCE")
    if not source:
        pytest.skip("GDRPEER_NHC_SOURCE (an NHC source tree, github.com/mej/nhc) not set; Debian has no NHC package")
    conf = tmp_path / "conf"
    (conf / "scripts").mkdir(parents=True)
    shutil.copy(Path(source) / "scripts" / "common.nhc", conf / "scripts")
    shutil.copy(CHECK, conf / "scripts")
    argv = " ".join(f"'{a}'" for a in args)
    (conf / "nhc.conf").write_text(f"* || check_gdrpeer -t 20 -b {gdrpeer_bin()} {argv}\n")
    log = tmp_path / "log"
    env = {k: v for k, v in os.environ.items() if k != "GDRPEER_DATA_DIR"}
    p = subprocess.run(["bash", str(Path(source) / "nhc"), "-D", str(conf), "-c", str(conf / "nhc.conf"),
                        "-l", str(log), "-t", "60", "NHC_RM=none", "MARK_OFFLINE=0"],
                       capture_output=True, text=True, timeout=120, env=env)
    text = log.read_text() if log.exists() else ""
    if healthy:
        assert p.returncode == 0 and "ERROR" not in text, (p.stdout, p.stderr, text)
    else:
        assert p.returncode != 0 and "Health check failed:  check_gdrpeer:  " in text and message in text, text

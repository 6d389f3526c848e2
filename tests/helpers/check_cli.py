"""Running the `gdrpeer` CLI from the tests, against the source tree's rule data."""

import os
import subprocess
from pathlib import Path

import pytest

from helpers.paths import REPO, RULE_DATA

# docs/check.md, "Outputs and exit codes": anything else (a signal, an abort) is a crash.
EXIT_CODES = {0, 1, 2, 3, 64, 65, 66, 73}


def gdrpeer_bin():
    path = Path(os.environ.get("GDRPEER_BIN", REPO / "build" / "userspace" / "cli" / "gdrpeer"))
    if not path.exists():
        pytest.fail(f"{path} is missing: build userspace first (or set GDRPEER_BIN)")
    return str(path)


def run(*args, check_rc=None):
    """gdrpeer ARGS with GDRPEER_DATA_DIR at the tree's rule data; the exit code must be documented."""
    env = dict(os.environ, GDRPEER_DATA_DIR=str(RULE_DATA))
    p = subprocess.run([gdrpeer_bin(), *map(str, args)], capture_output=True, text=True, errors="replace",
                       env=env, timeout=120)
    assert p.returncode in EXIT_CODES, (f"gdrpeer exited {p.returncode} (not one of docs/check.md's "
                                        f"exit codes {sorted(EXIT_CODES)}): {p.stderr}")
    if check_rc is not None:
        assert p.returncode == check_rc, f"rc={p.returncode}\nstdout:\n{p.stdout}\nstderr:\n{p.stderr}"
    return p

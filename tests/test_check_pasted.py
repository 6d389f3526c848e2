"""Pasted text as people post it (issue 25 item 6): an lspci tree run through `kubectl debug` /
`oc debug` with the pod's start-up lines pasted with it, and a tree inside a markdown code fence
without a prompt. Host only.

The tree is the public IGX Orin `lspci -tv` of topology/reference (holohub); the debug-pod lines
are the ones kubectl and oc print, as posted publicly: kubectl's "Creating debugging pod
node-debugger-worker2-xnmxh with container debugger on node worker2." (kubernetes/kubectl#1230),
oc's "Creating debug namespace/openshift-debug-node-vv26n ...", "Starting pod/worker2-debug ...",
"To use host binaries, run `chroot /host`" (same issue) and "Removing debug pod ..."
(openshift/verification-tests#412).
"""

import json
import os
import subprocess

import pytest

from test_check import REF, gdrpeer_bin

TREE = (REF / "holohub-igx-orin-lspci-tv.txt").read_text()

OC = ("$ oc debug node/worker2 -t --image=ubuntu -- chroot /host lspci -tv\n"
      "Creating debug namespace/openshift-debug-node-vv26n ...\n"
      "Starting pod/worker2-debug ...\n"
      "To use host binaries, run `chroot /host`\n" + TREE + "\nRemoving debug pod ...\n")
KUBECTL = ("$ kubectl debug node/worker2 -it --image=ubuntu -- chroot /host lspci -tv\n"
           "Creating debugging pod node-debugger-worker2-xnmxh with container debugger on node worker2.\n" + TREE)
FENCED = "Output of lspci -tv on the node:\n\n```\n" + TREE + "```\n"


def check(path):
    env = {k: v for k, v in os.environ.items() if k != "GDRPEER_DATA_DIR"}
    p = subprocess.run([gdrpeer_bin(), "check", "--json", str(path)], capture_output=True, text=True, timeout=60, env=env)
    assert p.returncode in (0, 1, 2, 3), p.stderr
    return json.loads(p.stdout)


@pytest.mark.parametrize("name,text,skipped", [("oc.txt", OC, 4), ("kubectl.txt", KUBECTL, 1), ("fenced.md", FENCED, 1)])
def test_pasted_tree_reads_as_the_tree(name, text, skipped, tmp_path):
    """Before: refused at the first debug-pod line (or the fence), exit 65."""
    plain = tmp_path / "plain.txt"
    plain.write_text(TREE)
    pasted = tmp_path / name
    pasted.write_text(text)
    want, got = check(plain), check(pasted)
    for key in ("devices", "matrix", "pairs", "summary"):
        assert got[key] == want[key], key
    notes = [n["text"] for n in got["notes"] if "not lspci output, skipped" in n["text"]]
    assert len(notes) == skipped, notes

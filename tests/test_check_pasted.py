"""Pasted text as people post it (issue 25 item 6): an lspci tree run through `kubectl debug` /
`oc debug` with the pod's start-up lines pasted with it, and a tree inside a markdown code fence
without a prompt. Host only.

The tree is the public IGX Orin `lspci -tv` of tests/reference (holohub); the debug-pod lines
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

from helpers.check_cli import gdrpeer_bin
from helpers.paths import REF

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


NCCL = REF / "kinds" / "h200-nccl-nvswitch.xml"  # nccl-tests#256, NCCL_TOPO_DUMP_FILE of an H200 node


def test_nccl_xml_cut_off_is_read_up_to_the_cut(tmp_path):
    """An NCCL topology dump cut off mid-file (as pasted into issues): the part that is there is
    read, a note says where it ends, and the node is incomplete (exit 3), never a verdict on the
    part alone. Before: exit 65 at the end of the file."""
    whole = NCCL.read_text()
    whole_gpus = [d["bdf"] for d in check(NCCL)["devices"] if d["role"] == "gpu"]
    cuts = 0
    for cut in range(whole.index("<gpu"), len(whole) - len("</system>\n"), 97):
        f = tmp_path / f"cut{cut}.xml"
        f.write_text(whole[:cut])
        env = {k: v for k, v in os.environ.items() if k != "GDRPEER_DATA_DIR"}
        p = subprocess.run([gdrpeer_bin(), "check", "--json", str(f)], capture_output=True, text=True, timeout=60, env=env)
        assert p.returncode == 3, (cut, p.returncode, p.stderr)
        j = json.loads(p.stdout)
        assert "input cut off at" in j["summary"]["node"]["incomplete"]
        assert any("the file is cut off" in n["text"] for n in j["notes"])
        gpus = [d["bdf"] for d in j["devices"] if d["role"] == "gpu"]
        assert gpus == whole_gpus[:len(gpus)], (cut, gpus)  # what is read is what the file says
        cuts += 1
    assert cuts > 10

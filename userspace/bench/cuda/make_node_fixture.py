#!/usr/bin/env python3
"""Build the reference-set snapshot of a real node from the artefacts recon.sh or
real_node.sh collected there (docs/benchmarks.md): the snapshot gdrpeer wrote on the node,
plus what that gdrpeer version did not yet record, taken from the node's own tools:
  gdrpeer-snapshot/nvml        from nvml.json (nvidia-ml-py, NVIDIA's NVML binding)
  proc/driver/nvidia/params    from proc-nvidia.txt (cat of the file on the node)
  sys/devices/system/node/nodeN  one folder per NUMA node nvidia-smi topo -m names
  gdrpeer-snapshot/meta        time and hostname from node.txt, driver from nvml.json
Entries already in the snapshot are kept as they are.
Usage: make_node_fixture.py RECON_DIR OUT.tar"""
import io
import json
import re
import sys
import tarfile
from pathlib import Path


def nvml_record(nvml):
    lines = [f"nvml driver={nvml['driver']} library=nvidia-ml-py"]
    for g in nvml["gpus"]:
        dom, rest = g["bdf"].split(":", 1)
        bus_id = f"{int(dom, 16):08X}:{rest.upper()}"
        fabric = g.get("fabric")
        state = fabric.get("state", -1) if isinstance(fabric, dict) else -1
        status = fabric.get("status", -1) if isinstance(fabric, dict) and state == 3 else -1
        lines.append(f"gpu {bus_id} device={g['pci_device_id']} fabric={state} fabric_status={status}")
        for link in g["links"]:
            if "error" in link:  # the first index NVML refused: the end of the GPU's links
                break
            if link["active"]:
                kind = {0: "gpu", 1: "npu", 2: "switch"}.get(link.get("remote_type"), "unknown")
                lines.append(f"link {bus_id} {link['link']} active=1 remote={link['remote_bdf']} type={kind}")
            else:
                lines.append(f"link {bus_id} {link['link']} active=0")
    return "\n".join(lines) + "\n"


def section(text, name):
    m = re.search(r"^== " + re.escape(name) + r"\n(.*?)(?=^== |\Z)", text, re.S | re.M)
    return m.group(1) if m else None


def main(recon, out):
    recon = Path(recon)
    src = tarfile.open(recon / "node-snapshot.tar")
    members = [(m, src.extractfile(m).read() if m.isfile() else None) for m in src.getmembers()]
    names = {m.name.rstrip("/") for m, _ in members}
    nvml = json.loads((recon / "nvml.json").read_text())
    node = (recon / "node.txt").read_text().splitlines()
    numa = sorted({int(x) for x in re.findall(r"^GPU\d+\s.*?\s(\d+)\s+\S+\s*$", (recon / "topo-m.txt").read_text(), re.M)})
    extra = {
        "gdrpeer-snapshot/nvml": nvml_record(nvml),
        "gdrpeer-snapshot/meta": f"taken {node[0]}\nhostname {node[1]}\ngdrpeer (node snapshot) + make_node_fixture.py\n"
                                 f"nvidia_driver {nvml['driver']}\nkernel {node[2].split()[2]}\ndrivers_asked yes\n",
    }
    params = section((recon / "proc-nvidia.txt").read_text(), "/proc/driver/nvidia/params")
    if params is not None:
        extra["proc/driver/nvidia/params"] = params
    with tarfile.open(out, "w", format=tarfile.GNU_FORMAT) as t:
        for m, data in members:
            m.mtime = 0
            t.addfile(m, io.BytesIO(data) if data is not None else None)
        for n in numa:
            d = f"sys/devices/system/node/node{n}"
            if d not in names:
                ti = tarfile.TarInfo(d)
                ti.type, ti.mode = tarfile.DIRTYPE, 0o755
                t.addfile(ti)
        for name, text in extra.items():
            if name in names:
                continue
            data = text.encode()
            ti = tarfile.TarInfo(name)
            ti.size, ti.mode = len(data), 0o644
            t.addfile(ti, io.BytesIO(data))


if __name__ == "__main__":
    main(*sys.argv[1:3])

#!/usr/bin/env python3
"""Dump what NVML says about each GPU's NVLinks (nvidia-ml-py, NVIDIA's own binding): the
independent truth the fake NVML tests and the snapshot's NVML record are checked against.
Run on a GPU machine: python3 nvml_dump.py > nvml.json"""
import json
import pynvml as n

n.nvmlInit()
out = {"driver": n.nvmlSystemGetDriverVersion(), "nvml": n.nvmlSystemGetNVMLVersion(), "gpus": []}
for i in range(n.nvmlDeviceGetCount()):
    h = n.nvmlDeviceGetHandleByIndex(i)
    pci = n.nvmlDeviceGetPciInfo(h)
    g = {"index": i, "name": n.nvmlDeviceGetName(h), "bdf": pci.busIdLegacy if hasattr(pci, "busIdLegacy") else pci.busId,
         "pci_device_id": hex(pci.pciDeviceId), "pci_subsystem_id": hex(pci.pciSubSystemId), "links": []}
    try:
        g["numa"] = n.nvmlDeviceGetNumaNodeId(h)
    except Exception as e:  # noqa: BLE001
        g["numa"] = str(e)
    try:
        st = n.nvmlDeviceGetGpuFabricInfo(h)
        g["fabric"] = {"state": st.state, "status": st.status}
    except Exception as e:  # noqa: BLE001
        g["fabric"] = str(e)
    for l in range(18 * 2):
        try:
            s = n.nvmlDeviceGetNvLinkState(h, l)
        except n.NVMLError as e:
            g["links"].append({"link": l, "error": str(e)})
            break
        link = {"link": l, "active": s}
        if s:
            try:
                r = n.nvmlDeviceGetNvLinkRemotePciInfo(h, l)
                link["remote_bdf"] = r.busId.decode() if isinstance(r.busId, bytes) else r.busId
            except n.NVMLError as e:
                link["remote_bdf"] = str(e)
            try:
                link["remote_type"] = n.nvmlDeviceGetNvLinkRemoteDeviceType(h, l)
            except Exception as e:  # noqa: BLE001
                link["remote_type"] = str(e)
            try:
                link["version"] = n.nvmlDeviceGetNvLinkVersion(h, l)
            except n.NVMLError as e:
                link["version"] = str(e)
        g["links"].append(link)
    out["gpus"].append(g)
print(json.dumps(out, indent=1))

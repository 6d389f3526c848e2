"""`gdrpeer check --probe ibgda` inside the emulated node (tests/emunode), on its soft-RoCE device.

The probe's verbs half runs against the guest's real rdma-core (libibverbs, libmlx5 from Debian's
ibverbs-providers) and the kernel's rdma_rxe: rxe is no mlx5 device, so mlx5dv_is_supported must
say so and the probe must stop there for it (no DEVX command, no GPU half). The GPU half needs an
mlx5 UAR and an NVIDIA GPU, neither of which exists in the emulated node: it is tested against a
fake in userspace/topo/tests/test_readiness.cpp. One boot (QEMU TCG, ~15-40 s).
"""

import json


PROBE = ("gdrpeer check --json --probe ibgda --data-dir /gdrpeer/topology --gpu $GDRPEER_GPU_BDF "
         "--nic $GDRPEER_NIC_BDF > /out/probe.json; echo rc=$?")


def test_probe_sees_rxe_as_not_mlx5(node_factory, guest_binary):
    res = node_factory("switch", "off").run(["ls /sys/class/infiniband", PROBE], timeout=400)
    assert res.problems() == [], res.problems()
    assert "probe.json" in res.files, res.kernel_log[-3000:]
    j = json.loads(res.files["probe.json"])
    probe = j["node"]["software"]["readiness"]["ibgda_probe"]
    assert probe["ran"] is True and probe["error"] == "", probe
    rdma = res.results[0].output.split()
    assert rdma, "the emulated node has no RDMA device"
    assert sorted(d["rdma_name"] for d in probe["devices"]) == sorted(rdma), probe
    for d in probe["devices"]:
        assert d["mlx5"] == 0, d
        assert d["devx"] == -1 and d["atomics"] == -1 and d["uar_gpu_map"] == -1 and d["gpu_bdf"] == "", d

"""The stack stage of `gdrpeer check` (issue 24): the NVIDIA driver's state, peer clients as
registered, kernel-log causes, the exporter's gate and what NCCL / NVSHMEM / UCX decide.
Inputs are the real artefacts of tests/reference/stack (README there names each source),
placed into the synthetic sysfs trees of helpers.fake_sysfs.make_node."""

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from helpers.check_cli import gdrpeer_bin
from helpers.fake_sysfs import ENDPOINT, ROOT_PORT, config_space, make_node
from helpers.paths import REPO


def run(*args, env=None):
    env = dict(env if env is not None else os.environ, GDRPEER_DATA_DIR=str(REPO / "topology"))
    p = subprocess.run([gdrpeer_bin(), *map(str, args)], capture_output=True, text=True, env=env, timeout=120)
    assert p.returncode in (0, 1, 2), p.stderr
    return p


FIX = REPO / "tests/reference/stack"
PARAMS = (FIX / "h200-580.159.04-open-params.txt").read_text()
OPEN_VERSION = (FIX / "h200-580.159.04-open-version.txt").read_text()
PROPRIETARY_VERSION = (FIX / "proprietary-580.159.04-version.txt").read_text()


def node(tmp_path, *, version=OPEN_VERSION, params=PARAMS, modprobe=None, peers=None, peermem=None,
         kernel_log=None, modules=("nvidia", "ib_core"), kernel="6.8.0", cpuinfo=None, gpu_device=None,
         iommu=None, name="n"):
    root = make_node(tmp_path / name, modules=modules, iommu=iommu)
    (root / "proc/sys/kernel/osrelease").write_text(kernel + "\n")
    nv = root / "proc/driver/nvidia"
    nv.mkdir(parents=True)
    if version is not None:
        (nv / "version").write_text(version)
    if params is not None:
        (nv / "params").write_text(params)
    for fname, text in (modprobe or {}).items():
        d = root / "etc/modprobe.d"
        d.mkdir(parents=True, exist_ok=True)
        (d / fname).write_text(text)
    if peers is not None:
        mp = root / "sys/kernel/mm/memory_peers"
        mp.mkdir(parents=True)
        for pname, files in peers.items():
            (mp / pname).mkdir()
            for f, v in files.items():
                (mp / pname / f).write_text(v + "\n")
    if peermem is not None:
        pm = root / "sys/module/nvidia_peermem"
        (pm / "parameters").mkdir(parents=True)
        (pm / "version").write_text("580.159.04\n")
        for k, v in peermem.items():
            (pm / "parameters" / k).write_text(v + "\n")
    if kernel_log is not None:
        (root / "gdrpeer-snapshot").mkdir()
        shutil.copy(FIX / kernel_log, root / "gdrpeer-snapshot/kernel-log")
    if cpuinfo is not None:
        (root / "proc/cpuinfo").write_text(cpuinfo)
    if gpu_device is not None:
        gpu = root / "sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:00.0/0000:03:00.0"
        (gpu / "device").write_text(gpu_device + "\n")
        cfg = bytearray((gpu / "config").read_bytes())
        cfg[2:4] = int(gpu_device, 16).to_bytes(2, "little")
        (gpu / "config").write_bytes(bytes(cfg))
    return root


def check(root, env=None, rc=None):
    e = {k: v for k, v in os.environ.items() if not k.startswith(("NCCL_", "NVSHMEM_", "UCX_"))}
    e.update(env or {})
    p = run("check", "--json", "--sysfs-root", root, env=e)
    j = json.loads(p.stdout)
    (pair,) = [x for x in j["pairs"] if x["a"] == "GPU0" and x["b"] == "NIC0"]
    return j, pair


def rules(j, pair):
    return {f["rule"] for f in pair["findings"]} | {n["rule"] for n in j["notes"]}


def note(j, rule):
    return [n for n in j["notes"] if n["rule"] == rule]


# A registered nv_mem client as MOFED's ib_core shows it (counters of peer_mem.c; values of the
# NVIDIA GDS guide's memory_peers listing).
NV_MEM = {"version": "580.159.04", "num_alloc_mrs": "1288", "num_dealloc_mrs": "1288", "num_reg_pages": "329728",
          "num_dereg_pages": "329728", "num_reg_bytes": "1350565888", "num_dereg_bytes": "1350565888",
          "num_free_callbacks": "0"}


def test_params_of_the_real_h200_node_are_read(tmp_path):
    j, pair = check(node(tmp_path))
    nv = j["node"]["software"]["stack"]["nvidia"]
    assert nv["flavour"] == "open" and nv["version"] == "580.159.04" and nv["params_known"]
    assert len(nv["params"]) == len([l for l in PARAMS.splitlines() if ": " in l])
    assert nv["params"]["GrdmaPciTopoCheckOverride"] == "0" and nv["params"]["DmaRemapPeerMmio"] == "1"
    assert nv["params"]["RegistryDwords"] == ""
    (d,) = note(j, "nvidia-driver")
    assert "580.159.04 (open kernel module" in d["text"] and "GrdmaPciTopoCheckOverride=0" in d["text"]


def test_registry_dwords_keys_are_split(tmp_path):
    params = PARAMS.replace('RegistryDwords: ""', 'RegistryDwords: "PeerMappingOverride=1;RMForceStaticBar1=1"').replace(
        'RegistryDwordsPerDevice: ""', 'RegistryDwordsPerDevice: "pci=0000:03:00.0;RMPcieP2PType=2"')
    j, _ = check(node(tmp_path, params=params))
    nv = j["node"]["software"]["stack"]["nvidia"]
    assert nv["registry_dwords"] == {"PeerMappingOverride": "1", "RMForceStaticBar1": "1"}
    assert nv["registry_dwords_per_device"] == {"0000:03:00.0": {"RMPcieP2PType": "2"}}
    assert "PeerMappingOverride=1" in note(j, "nvidia-driver")[0]["text"]


def test_without_params_file_params_stay_unknown(tmp_path):
    j, _ = check(node(tmp_path, params=None))
    assert not j["node"]["software"]["stack"]["nvidia"]["params_known"]
    assert "params not in this input" in note(j, "nvidia-driver")[0]["text"]


def test_configured_but_not_active_is_a_finding(tmp_path):
    conf = "# azhpc-images style\noptions nvidia NVreg_GrdmaPciTopoCheckOverride=1 NVreg_EnableStreamMemOPs=1\n"
    j, _ = check(node(tmp_path, modprobe={"nvidia.conf": conf}))
    pend = note(j, "nvidia-params-pending")
    assert {p["text"].split(" is configured")[0] for p in pend} == {"NVreg_GrdmaPciTopoCheckOverride=1", "NVreg_EnableStreamMemOPs=1"}
    assert "/etc/modprobe.d/nvidia.conf:2" in pend[0]["text"] and "next driver load" in pend[0]["text"]
    assert "initramfs" in pend[0]["fix"]
    opts = j["node"]["software"]["stack"]["modprobe"]
    assert {"file": "/etc/modprobe.d/nvidia.conf", "key": "NVreg_EnableStreamMemOPs", "line": 2, "module": "nvidia", "value": "1"} in opts


def test_configured_equal_to_active_is_quiet(tmp_path):
    j, _ = check(node(tmp_path, modprobe={"nvidia.conf": "options nvidia NVreg_GrdmaPciTopoCheckOverride=0 NVreg_DmaRemapPeerMmio=1\n"}))
    assert note(j, "nvidia-params-pending") == []
    assert len(j["node"]["software"]["stack"]["modprobe"]) == 2  # read, and found equal


def test_integer_option_without_a_value_fails_the_next_load(tmp_path):
    # nv-linux.h NV_MODULE_PARAMETER is module_param(x, int, 0) (open-gpu-kernel-modules 595.45.04):
    # the kernel's param_set_int refuses "" (kstrtoint), kernel/params.c parse_args() stops there and
    # load_module() fails. A charp option (RegistryDwords: quoted in the params file) takes "".
    conf = "options nvidia NVreg_RegistryDwords=\noptions nvidia NVreg_EnableStreamMemOPs= NVreg_GrdmaPciTopoCheckOverride=1\n"
    j, _ = check(node(tmp_path, modprobe={"nvidia.conf": conf}))
    (bad,) = note(j, "nvidia-params-invalid")
    assert bad["severity"] == "unreliable"
    assert bad["text"].startswith("NVreg_EnableStreamMemOPs is configured without a value (/etc/modprobe.d/nvidia.conf:2)")
    assert "the next load of nvidia fails" in bad["text"] and "initramfs" in bad["fix"]
    assert [p["text"].split(" is configured")[0] for p in note(j, "nvidia-params-pending")] == ["NVreg_GrdmaPciTopoCheckOverride=1"]
    assert j["summary"]["worst"] == "unreliable"


def test_modprobe_options_of_other_modules_are_left_out(tmp_path):
    j, _ = check(node(tmp_path, modprobe={"alsa.conf": "options snd_pcsp index=-2\n", "mlx.conf": "options mlx5_core prof_sel=2\n"}))
    assert [(o["module"], o["key"]) for o in j["node"]["software"]["stack"]["modprobe"]] == [("mlx5_core", "prof_sel")]


def test_active_override_says_its_security_cost(tmp_path):
    j, _ = check(node(tmp_path, params=PARAMS.replace("GrdmaPciTopoCheckOverride: 0", "GrdmaPciTopoCheckOverride: 1")))
    (o,) = note(j, "nvidia-override")
    assert "security trade-off" in o["text"]
    j, _ = check(node(tmp_path, name="m"))
    assert note(j, "nvidia-override") == []


def test_loaded_but_unregistered_peermem_no_longer_counts(tmp_path):
    """NVIDIA/nccl #1939: lsmod shows nvidia_peermem, memory_peers has no nv_mem, NCCL says Disabled
    (here with the proprietary module, so no dma-buf either)."""
    root = node(tmp_path, version=PROPRIETARY_VERSION, modules=("nvidia", "nvidia_peermem", "ib_core"), peers={},
                peermem={"peerdirect_support": "0", "persistent_api_support": "1"})
    j, pair = check(root)
    sp = [f for f in pair["findings"] if f["rule"] == "software-peer-memory"]
    assert sp and sp[0]["severity"] == "blocked" and "loaded but no peer-memory client is registered" in sp[0]["reason"]
    assert note(j, "peermem-unregistered")
    nccl = pair["consumers"]["nccl"]
    assert nccl["gdr"] is True and nccl["path"] == "peer-memory" and "memory registration fails" in nccl["why"]
    assert "persistent_api_support=1" in note(j, "peermem-params")[0]["text"]


def test_registered_nv_mem_is_peer_memory(tmp_path):
    root = node(tmp_path, version=PROPRIETARY_VERSION, modules=("nvidia", "nvidia_peermem", "ib_core"), peers={"nv_mem": NV_MEM},
                peermem={"peerdirect_support": "0", "persistent_api_support": "1"})
    j, pair = check(root)
    assert "software-peer-memory" not in rules(j, pair) and not note(j, "peermem-unregistered")
    for c in ("nccl", "nvshmem", "ucx"):
        assert pair["consumers"][c]["path"] == "peer-memory" and pair["consumers"][c]["gdr"] is True, c
    assert "nv_mem 580.159.04, 1288 MRs" in note(j, "peer-clients")[0]["text"]
    assert "seen by NCCL, NVSHMEM, UCX" in note(j, "peer-clients")[0]["text"]


def test_gdrpeer_client_is_invisible_to_consumers(tmp_path):
    root = node(tmp_path, version=PROPRIETARY_VERSION, modules=("nvidia", "gdrpeer", "ib_core"), peers={"gdrpeer": {"version": "0.1"}})
    j, pair = check(root)
    assert note(j, "peer-client-invisible")
    nccl = pair["consumers"]["nccl"]
    assert nccl["gdr"] is False and "Disabled for HCA" in nccl["why"]
    assert any(f["rule"] == "consumer-nccl" and f["severity"] == "degraded" for f in pair["findings"])
    assert pair["consumers"]["nvshmem"]["path"] == "none" and pair["consumers"]["ucx"]["path"] == "none"
    assert {"consumer-nvshmem", "consumer-ucx"} <= {f["rule"] for f in pair["findings"]}
    root = node(tmp_path, version=PROPRIETARY_VERSION, modules=("nvidia", "gdrpeer", "ib_core"), peers={"nv_mem": {"version": "0.1"}}, name="m")
    j, pair = check(root)
    assert not note(j, "peer-client-invisible") and pair["consumers"]["nccl"]["gdr"] is True


# gdrpeer's own client as its sysfs shows it (driver/exporter_peermem.c, pm_cuda_claimed)
GDRPEER_CUDA = {"off": "not claimed (peermem_cuda=off)",
                "auto": "claimed through the nvidia provider, callback pins (peermem_cuda=auto, nvidia_peermem not loaded)"}


@pytest.mark.parametrize("cuda", ["off", "auto"])
def test_gdrpeer_client_named_nv_mem_without_cuda_addresses_fails_registration(tmp_path, cuda):
    """docs/driver.md: naming gdrpeer's client nv_mem tells NCCL, NVSHMEM and UCX that CUDA memory can
    be registered, which holds only while gdrpeer serves CUDA addresses; with peermem_cuda=off they
    turn GDR on and ibv_reg_mr of GPU memory fails (no client claims it)."""
    root = node(tmp_path, version=PROPRIETARY_VERSION, modules=("nvidia", "gdrpeer", "ib_core"), peers={"nv_mem": {"version": "1.1"}})
    (root / "sys/module/gdrpeer/parameters").mkdir(parents=True)
    (root / "sys/module/gdrpeer/parameters/peermem_name").write_text("nv_mem\n")
    (root / "sys/class/gdrpeer/gdrpeer/providers/peermem").mkdir(parents=True)
    (root / "sys/class/gdrpeer/gdrpeer/providers/peermem/cuda").write_text(GDRPEER_CUDA[cuda] + "\n")
    j, pair = check(root)
    assert f"(gdrpeer's client; CUDA addresses: {GDRPEER_CUDA[cuda]})" in note(j, "peer-clients")[0]["text"]
    stack = j["node"]["software"]["stack"]
    assert (stack["gdrpeer_client"], stack["gdrpeer_cuda"]) == ("nv_mem", GDRPEER_CUDA[cuda])
    for c in ("nccl", "nvshmem", "ucx"):
        d = pair["consumers"][c]
        assert d["gdr"] is True and d["path"] == "peer-memory", (c, d)
        found = [f for f in pair["findings"] if f["rule"] == f"consumer-{c}"]
        if cuda == "off":
            assert d["rule"] == f"consumer-{c}" and "gdrpeer's and serves no CUDA addresses" in d["why"], d
            assert len(found) == 1 and found[0]["severity"] == "blocked" and "peermem_cuda" in found[0]["fix"], found
        else:
            assert d["rule"] == "" and not found, (d, found)
    # a snapshot carries gdrpeer's two files and gives the same answers
    snap = tmp_path / "s.tar"
    run("snapshot", "--sysfs-root", root, snap)
    b = json.loads(run("check", "--json", snap).stdout)
    assert b["node"]["software"]["stack"] == stack
    assert [p["consumers"] for p in b["pairs"]] == [p["consumers"] for p in j["pairs"]]


@pytest.mark.parametrize("log, kind, module, fix_word", [
    ("kmsg-gpu-operator-2868.txt", "symbol-version", "nvidia_peermem", "rebuild nvidia_peermem against the running OFED"),
    ("kmsg-nv-peer-memory-84.txt", "unknown-symbol", "nv_peer_mem", "openibd"),
    ("kmsg-gpl-symbol-get.txt", "gpl-symbol-get", "", "rebuild the module against the OFED tree"),
])
def test_kernel_log_names_why_peer_memory_did_not_load(tmp_path, log, kind, module, fix_word):
    j, _ = check(node(tmp_path, kernel_log=log))
    causes = j["node"]["software"]["stack"]["kernel_log"]
    assert [(c["kind"], c["module"]) for c in causes] == [(kind, module)]  # one cause: the err -22 line is the same one
    (n,) = note(j, "peermem-load-failed")
    assert fix_word in n["fix"]


def test_kernel_log_without_peer_lines_gives_no_cause(tmp_path):
    (tmp_path / "quiet").write_text("[    1.0] mlx5_core 0000:04:00.0: firmware version: 28.39.1002\n")
    root = node(tmp_path)
    (root / "gdrpeer-snapshot").mkdir()
    shutil.copy(tmp_path / "quiet", root / "gdrpeer-snapshot/kernel-log")
    j, _ = check(root)
    assert j["node"]["software"]["stack"]["kernel_log_read"] and not note(j, "peermem-load-failed")


def test_kernel_log_not_read_to_its_end_is_said(tmp_path):
    # A snapshot whose live reader stopped at its cap (docs/check.md: 200,000 /dev/kmsg records;
    # `gdrpeer snapshot` writes why into gdrpeer-snapshot/kernel-log-cut): no cause in the part
    # read is no evidence, and the check says so in an input note; without the file, no such note.
    (tmp_path / "quiet").write_text("[    1.0] mlx5_core 0000:04:00.0: firmware version: 28.39.1002\n")
    why = "stopped after its first 200000 records (a log printed as fast as it is read)"
    for cut in (False, True):
        root = node(tmp_path, name=f"n{cut}")
        (root / "gdrpeer-snapshot").mkdir()
        shutil.copy(tmp_path / "quiet", root / "gdrpeer-snapshot/kernel-log")
        if cut:
            (root / "gdrpeer-snapshot/kernel-log-cut").write_text(why + "\n")
        j, _ = check(root)
        said = [n["text"] for n in note(j, "input") if n["text"].startswith("kernel log not read to its end")]
        assert said == ([f"kernel log not read to its end: {why}; a peer-memory load failure or dma-buf refusal logged after "
                         "that is not in these findings"] if cut else [])
        assert j["node"]["software"]["stack"]["kernel_log_read"] and not note(j, "peermem-load-failed")


GRACE = "processor\t: 0\nCPU implementer\t: 0x41\nCPU architecture: 8\nCPU variant\t: 0x0\nCPU part\t: 0xd4f\n"

# The exporter's gate, derived by hand from open-gpu-kernel-modules 580.142 (table in
# tests/reference/stack/README.md): flavour x platform x IOMMU -> (dma-buf default,
# PCIe mapping type, nvidia_p2p); True allowed, False refused.
GATE = [
    ("open", "x86", None, (True, False, True)),
    ("proprietary", "x86", None, (False, False, True)),
    ("open", "grace-pcie-gpu", None, (True, False, True)),            # distrusted chipset, common bridge (the switch)
    ("open", "gh200", None, (True, True, True)),                      # coherent; no IOMMU: NULL groups compare equal
    ("open", "gh200", "DMA", (True, True, True)),                     # one IOMMU group for the whole tree here
    ("proprietary", "gh200", None, (False, False, True)),
]


@pytest.mark.parametrize("flavour, platform, iommu, want", GATE)
def test_exporter_gate_matrix(tmp_path, flavour, platform, iommu, want):
    cpu = GRACE if platform != "x86" else None
    dev = "0x2342" if platform == "gh200" else None  # GH200's GPU (grace-c2c family)
    root = node(tmp_path, version=OPEN_VERSION if flavour == "open" else PROPRIETARY_VERSION, cpuinfo=cpu, gpu_device=dev, iommu=iommu)
    if platform == "grace-pcie-gpu":
        # Grace's chipset is known to the driver by its TH500 root ports (nvcst.h: 10de:22b2 RP x16),
        # not by the Neoverse V2 cores alone.
        port = root / "sys/devices/pci0000:00/0000:00:01.0"
        (port / "vendor").write_text("0x10de\n")
        (port / "device").write_text("0x22b2\n")
        cfg = bytearray((port / "config").read_bytes())
        cfg[0:4] = (0x10DE).to_bytes(2, "little") + (0x22B2).to_bytes(2, "little")
        (port / "config").write_bytes(bytes(cfg))
    _, pair = check(root)
    g = pair["consumers"]["nvidia_driver"]
    assert (g["dmabuf_default"]["allowed"], g["dmabuf_pcie"]["allowed"], g["nvidia_p2p"]["allowed"]) == want
    if platform == "grace-pcie-gpu" and flavour == "open":
        assert "distrusts" in g["dmabuf_default"]["why"], g


def test_override_two_denies_and_override_one_allows(tmp_path):
    j, pair = check(node(tmp_path, params=PARAMS.replace("GrdmaPciTopoCheckOverride: 0", "GrdmaPciTopoCheckOverride: 2")))
    g = pair["consumers"]["nvidia_driver"]
    assert g["dmabuf_default"]["allowed"] is False and g["nvidia_p2p"]["allowed"] is False
    gate = [f for f in pair["findings"] if f["rule"] == "exporter-gate"]
    assert gate and gate[0]["severity"] == "blocked" and "=2" in gate[0]["reason"] and "remove" in gate[0]["fix"]


def test_proprietary_without_peer_memory_is_disabled_for_hca(tmp_path):
    j, pair = check(node(tmp_path, version=PROPRIETARY_VERSION, peers={}))
    nccl = pair["consumers"]["nccl"]
    assert nccl["gdr"] is False and "DMA_BUF_SUPPORTED=0" in nccl["why"]
    assert pair["consumers"]["nvidia_driver"]["dmabuf_default"]["allowed"] is False
    sp = [f for f in pair["findings"] if f["rule"] == "software-peer-memory"]
    assert sp and sp[0]["severity"] == "blocked"


def test_open_module_takes_dma_buf(tmp_path):
    j, pair = check(node(tmp_path, peers={}))
    for c in ("nccl", "nvshmem", "ucx"):
        assert pair["consumers"][c]["path"] == "dma-buf", c
    assert pair["consumers"]["nccl"]["level"].startswith("PIX vs P2C") and pair["consumers"]["version"] == 1
    j, pair = check(node(tmp_path, peers={}, name="m"), env={"NCCL_DMABUF_ENABLE": "0", "NVSHMEM_IB_DISABLE_DMABUF": "1"})
    assert pair["consumers"]["nccl"]["gdr"] is False and pair["consumers"]["nvshmem"]["path"] == "none"


def test_nccl_ib_hca_excludes_the_nic(tmp_path):
    root = node(tmp_path, peers={})
    (root / "sys/class/infiniband/mlx5_0").mkdir(parents=True)
    os.symlink("../../../devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:01.0/0000:04:00.0", root / "sys/class/infiniband/mlx5_0/device")
    _, pair = check(root, env={"NCCL_IB_HCA": "^mlx5_0"})
    assert pair["consumers"]["nccl"]["path"] == "none" and "leaves mlx5_0 out" in pair["consumers"]["nccl"]["why"]
    _, pair = check(root, env={"NCCL_IB_HCA": "=mlx5_0:1"})
    assert pair["consumers"]["nccl"]["path"] == "dma-buf"


def test_text_output_has_one_line_per_consumer(tmp_path):
    p = run("check", "--sysfs-root", node(tmp_path, peers={}))
    assert "GPU0 - NIC0  nccl: GDR on, dma-buf (default mapping), PIX vs P2C" in p.stdout
    assert "  nvshmem: GDR on, dma-buf" in p.stdout and "  ucx: GDR on, dma-buf" in p.stdout


# NCCL topology XML with <c2c> and <net gdr> (DGX Spark GB10 dump, README).
def xml_check(path, env=None):
    e = {k: v for k, v in os.environ.items() if not k.startswith(("NCCL_", "NVSHMEM_", "UCX_"))}
    e.update(env or {})
    p = run("check", "--json", "--nccl-xml", path, env=e)
    return json.loads(p.stdout)


def test_nccl_xml_gdr_zero_of_gb10_is_read(tmp_path):
    j = xml_check(FIX / "nccl-dgx-spark-gb10-c2c.xml")
    pairs = [p for p in j["pairs"] if p["a"] == "GPU0" and p["b"].startswith("NIC")]
    assert len(pairs) == 2
    for p in pairs:
        assert p["consumers"]["nccl"]["gdr"] is False and "gdr=0" in p["consumers"]["nccl"]["why"]


def test_nccl_xml_c2c_turns_p2c_on(tmp_path):
    x = tmp_path / "gdr1.xml"
    x.write_text((FIX / "nccl-dgx-spark-gb10-c2c.xml").read_text().replace('gdr="0"', 'gdr="1"'))
    p = [p for p in xml_check(x)["pairs"] if p["b"] == "NIC0"][0]["consumers"]["nccl"]
    assert p["gdr"] is True and p["level"].startswith("P2C vs P2C") and p["mapping"] == "default"
    assert p["path"] == "unknown"  # <net gdr=1> does not say whether dma-buf or peer memory
    p = [p for p in xml_check(x, {"NCCL_NET_GDR_C2C": "0"})["pairs"] if p["b"] == "NIC0"][0]["consumers"]["nccl"]
    assert p["gdr"] is False and p["level"].startswith("P2C vs PXB")
    y = tmp_path / "noc2c.xml"
    y.write_text(x.read_text().replace('<c2c bw="43125" count="8"/>', ""))
    p = [p for p in xml_check(y)["pairs"] if p["b"] == "NIC0"][0]["consumers"]["nccl"]
    assert p["gdr"] is False and p["level"].startswith("PHB vs P2C")
    p = [p for p in xml_check(y, {"NCCL_NET_GDR_LEVEL": "PHB"})["pairs"] if p["b"] == "NIC0"][0]["consumers"]["nccl"]
    assert p["gdr"] is True


def nic_in_own_iommu_group(root):
    """make_node(iommu=...) puts every function in group 3: move the NIC to group 4."""
    nic = root / "sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:01.0/0000:04:00.0"
    g = root / "sys/kernel/iommu_groups/4"
    g.mkdir()
    (g / "type").write_text((root / "sys/kernel/iommu_groups/3/type").read_text())
    os.remove(nic / "iommu_group")
    os.symlink("../../../../../../kernel/iommu_groups/4", nic / "iommu_group")
    return root


def two_root_ports(root, cpuinfo, version=OPEN_VERSION, gpu_device="0x2330", port=(0x10DE, 0x22B2)):
    """GPU and NIC each under a root port of its own (by default NVIDIA TH500 RP x16, nvcst.h): no
    bridge in common (PHB)."""
    fns = [("0000:00:01.0", "devices/pci0000:00/0000:00:01.0", *port, 0x060400, ROOT_PORT, 1),
           ("0000:00:02.0", "devices/pci0000:00/0000:00:02.0", *port, 0x060400, ROOT_PORT, 2),
           ("0000:01:00.0", "devices/pci0000:00/0000:00:01.0/0000:01:00.0", 0x10DE, int(gpu_device, 16), 0x030200, ENDPOINT, None),
           ("0000:02:00.0", "devices/pci0000:00/0000:00:02.0/0000:02:00.0", 0x15B3, 0x1021, 0x020700, ENDPOINT, None)]
    (root / "sys/bus/pci/devices").mkdir(parents=True)
    for bdf, path, ven, dev, cls, port, sec in fns:
        d = root / "sys" / path
        d.mkdir(parents=True, exist_ok=True)
        for f, v in (("vendor", f"0x{ven:04x}"), ("device", f"0x{dev:04x}"), ("class", f"0x{cls:06x}"), ("numa_node", "0")):
            (d / f).write_text(v + "\n")
        (d / "config").write_bytes(config_space(ven, dev, cls, port, sec, 0 if sec else None))
        os.symlink("../../../" + path, root / "sys/bus/pci/devices" / bdf)
    (root / "proc/sys/kernel").mkdir(parents=True)
    (root / "proc/driver/nvidia").mkdir(parents=True)
    (root / "proc/driver/nvidia/version").write_text(version)
    (root / "proc/driver/nvidia/params").write_text(PARAMS)
    (root / "proc/modules").write_text("nvidia 16384 0 - Live 0x0\nib_core 16384 0 - Live 0x0\n")
    (root / "proc/cpuinfo").write_text(cpuinfo)
    (root / "proc/cmdline").write_text("root=/dev/sda1\n")
    (root / "proc/sys/kernel/osrelease").write_text("6.8.0\n")
    (root / "sys/kernel/mm/memory_peers").mkdir(parents=True)
    return root


def test_grace_with_a_pcie_gpu_needs_a_common_bridge(tmp_path):
    """osinit.c: TH500 (Grace) is on RM's list of chipsets without PCIe P2P; without a bridge
    common to GPU and NIC the default dma-buf type and nvidia_p2p are refused."""
    j, pair = check(two_root_ports(tmp_path / "n", GRACE))
    g = pair["consumers"]["nvidia_driver"]
    assert g["dmabuf_default"]["allowed"] is False and g["nvidia_p2p"]["allowed"] is False
    assert "distrusts" in g["dmabuf_default"]["why"]
    assert pair["consumers"]["nvshmem"]["rule"] == "exporter-gate"
    gate = [f for f in pair["findings"] if f["rule"] == "exporter-gate"]
    assert gate and gate[0]["severity"] == "blocked" and "security trade-off" in gate[0]["fix"]
    # The same tree on x86: the chipset is trusted.
    _, pair = check(two_root_ports(tmp_path / "m", "vendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 17\nmodel name\t: AMD EPYC 9374F\n"))
    assert pair["consumers"]["nvidia_driver"]["dmabuf_default"]["allowed"] is True
    assert "exporter-gate" not in {f["rule"] for f in pair["findings"]}


def test_neoverse_v2_cores_without_a_th500_root_port_are_not_grace(tmp_path):
    """Grace's cores are Arm Neoverse V2 (MIDR 0x41/0xd4f, util-linux lscpu-arm.c), and so are AWS
    Graviton4's and Google Axion's. The NVIDIA driver knows Grace by its TH500 root ports
    (open-gpu-kernel-modules nvcst.h: 10de:22b1-22b4, 22b8, 22b9 CS_NVIDIA_TH500; chipset.c matches
    the table against the node's PCI functions), so under Amazon's root ports (vendor 0x1d0f; the
    device id stands for any id outside RM's TH500 rows: no public Graviton4 lspci was found) the
    chipset is not on RM's list: no bridge in common is allowed, and the path is not Grace's."""
    _, pair = check(two_root_ports(tmp_path / "g4", GRACE, port=(0x1D0F, 0x0201)))
    g = pair["consumers"]["nvidia_driver"]
    assert g["dmabuf_default"]["allowed"] is True and g["nvidia_p2p"]["allowed"] is True, g
    assert "distrusts" not in g["nvidia_p2p"]["why"]
    rules = {f["rule"] for f in pair["findings"]}
    assert "exporter-gate" not in rules and "path-grace" not in rules and "platform-arm64" in rules
    # The same cores under TH500 root ports: Grace, refused without a common bridge.
    _, pair = check(two_root_ports(tmp_path / "gr", GRACE))
    assert pair["consumers"]["nvidia_driver"]["nvidia_p2p"]["allowed"] is False
    assert "path-grace" in {f["rule"] for f in pair["findings"]}
    # A hand-made tree without the root ports' vendor and device files: their ids are not known,
    # so whether a TH500 one is there is not known, and neither is what the driver decides.
    root = two_root_ports(tmp_path / "noids", GRACE)
    for port in ("0000:00:01.0", "0000:00:02.0"):
        for f in ("vendor", "device"):
            os.remove(root / "sys/devices/pci0000:00" / port / f)
    _, pair = check(root)
    g = pair["consumers"]["nvidia_driver"]
    assert g["dmabuf_default"]["allowed"] is None and g["nvidia_p2p"]["allowed"] is None, g
    assert "TH500" in g["nvidia_p2p"]["why"]


def test_grace_without_the_params_file_leaves_the_gate_unknown(tmp_path):
    """nv-pci.c nv_grdma_pci_topology_supported: NVreg_GrdmaPciTopoCheckOverride=1 allows every
    topology, 2 denies it, before the chipset list is looked at. Without /proc/driver/nvidia/params
    the override is not known, so a Grace node without a common bridge is not refused (it was,
    and blocked the pair): the answer is unknown, and so it is in a passthrough VM."""
    for name, cpu in (("n", GRACE), ("v", GRACE + "flags\t\t: fp hypervisor\n")):
        root = two_root_ports(tmp_path / name, cpu)
        os.remove(root / "proc/driver/nvidia/params")
        _, pair = check(root)
        g = pair["consumers"]["nvidia_driver"]
        assert g["dmabuf_default"]["allowed"] is None and g["nvidia_p2p"]["allowed"] is None, g
        assert "GrdmaPciTopoCheckOverride not in this input" in g["nvidia_p2p"]["why"]
        assert "exporter-gate" not in {f["rule"] for f in pair["findings"]}


def test_gb200_nic_in_another_iommu_group_refuses_the_pcie_mapping_type(tmp_path):
    """azhpc-images #589 / AICR's GB200 preflight: NCCL takes the PCIe mapping type on a C2C
    system for a NIC off the P2C path; different IOMMU groups make the driver refuse it (524)."""
    root = nic_in_own_iommu_group(node(tmp_path, cpuinfo=GRACE, gpu_device="0x2941", iommu="identity", peers={}))
    j, pair = check(root)
    nccl = pair["consumers"]["nccl"]
    assert nccl["gdr"] is True and nccl["path"] == "dma-buf" and nccl["mapping"] == "pcie" and nccl["rule"] == "exporter-gate"
    gate = [f for f in pair["findings"] if f["rule"] == "exporter-gate"]
    assert gate and "different IOMMU groups" in gate[0]["reason"] and "NVreg_GrdmaPciTopoCheckOverride=1" in gate[0]["fix"]
    assert "security trade-off" in gate[0]["fix"]
    # With the override the driver allows it (and the override note says what it costs).
    root = nic_in_own_iommu_group(node(tmp_path, cpuinfo=GRACE, gpu_device="0x2941", iommu="identity", peers={}, name="m",
                                       params=PARAMS.replace("GrdmaPciTopoCheckOverride: 0", "GrdmaPciTopoCheckOverride: 1")))
    j, pair = check(root)
    assert pair["consumers"]["nvidia_driver"]["dmabuf_pcie"]["allowed"] is True
    assert "exporter-gate" not in {f["rule"] for f in pair["findings"]} and note(j, "nvidia-override")


def test_passthrough_vm_is_allowed_by_default(tmp_path):
    """nv-pci.c: NV_FLAG_PASSTHRU allows RDMA by default, before the distrusted-chipset check
    (modelled as: the CPU's hypervisor flag). A Grace guest without a common bridge: allowed;
    the same without the flag: refused."""
    _, pair = check(two_root_ports(tmp_path / "n", GRACE + "flags\t\t: fp hypervisor\n"))
    assert pair["consumers"]["nvidia_driver"]["nvidia_p2p"]["allowed"] is True
    assert "passed through" in pair["consumers"]["nvidia_driver"]["nvidia_p2p"]["why"]
    _, pair = check(two_root_ports(tmp_path / "m", GRACE))
    assert pair["consumers"]["nvidia_driver"]["nvidia_p2p"]["allowed"] is False


def test_snapshot_carries_the_stack(tmp_path):
    conf = "options nvidia NVreg_GrdmaPciTopoCheckOverride=1\n"
    root = node(tmp_path, modprobe={"nvidia.conf": conf}, peers={"nv_mem": NV_MEM}, modules=("nvidia", "nvidia_peermem", "ib_core"),
                peermem={"peerdirect_support": "0", "persistent_api_support": "1"}, kernel_log="kmsg-gpu-operator-2868.txt")
    snap = tmp_path / "s.tar"
    run("snapshot", "--sysfs-root", root, snap)
    import tarfile
    names = set(tarfile.open(snap).getnames())
    for want in ("proc/driver/nvidia/params", "proc/driver/nvidia/version", "etc/modprobe.d/nvidia.conf",
                 "sys/kernel/mm/memory_peers/nv_mem/version", "sys/kernel/mm/memory_peers/nv_mem/num_reg_bytes",
                 "sys/module/nvidia_peermem/parameters/persistent_api_support", "gdrpeer-snapshot/kernel-log", "proc/modules"):
        assert want in names, want
    a, _ = check(root)
    b = json.loads(run("check", "--json", snap).stdout)
    assert a["node"]["software"]["stack"] == b["node"]["software"]["stack"]
    assert [n for n in a["notes"] if n["rule"] != "iommu-mode"] == [n for n in b["notes"] if n["rule"] != "iommu-mode"]


def test_translating_iommu_works_through_the_iommu_with_dma_remap(tmp_path):
    """nv-dma.c nv_dma_map_peer: NVreg_DmaRemapPeerMmio=1 (the H200 node's value) maps BAR1 into
    the NIC's IOMMU domain: degraded, prove with gdrpeer verify. With 0: blocked, as before."""
    _, pair = check(node(tmp_path, iommu="DMA", peers={}))
    (f,) = [f for f in pair["findings"] if f["rule"] == "iommu-translating" and "0000:04:00.0" in f["reason"]]
    assert f["severity"] == "degraded" and f["fix"].startswith("gdrpeer verify") and "DmaRemapPeerMmio=1" in f["reason"]
    assert pair["verdict"] == "degraded"
    _, pair = check(node(tmp_path, iommu="DMA", peers={}, name="m", params=PARAMS.replace("DmaRemapPeerMmio: 1", "DmaRemapPeerMmio: 0")))
    f = [f for f in pair["findings"] if f["rule"] == "iommu-translating"]
    assert f and all(x["severity"] == "blocked" for x in f) and "bus addresses" in f[0]["reason"]
    assert pair["verdict"] == "blocked"


# ---- item 5: ACS redirect on root ports, ATS -------------------------------------------------

def phb_gpus(root, rp_acs):
    """NVIDIA/nccl #2079: two RTX 5880 Ada (10de:26b9) at 41:00.0 and 61:00.0, each behind an AMD
    GPP bridge (root port, 1022:1483) with ACSCtl 0x001d = SrcValid+ ReqRedir+ CmpltRedir+ UpstreamFwd+."""
    fns = [("0000:40:01.1", "devices/pci0000:40/0000:40:01.1", 0x1022, 0x1483, 0x060400, ROOT_PORT, 0x41, rp_acs),
           ("0000:40:03.1", "devices/pci0000:40/0000:40:03.1", 0x1022, 0x1483, 0x060400, ROOT_PORT, 0x61, rp_acs),
           ("0000:41:00.0", "devices/pci0000:40/0000:40:01.1/0000:41:00.0", 0x10DE, 0x26B9, 0x030000, ENDPOINT, None, None),
           ("0000:61:00.0", "devices/pci0000:40/0000:40:03.1/0000:61:00.0", 0x10DE, 0x26B9, 0x030000, ENDPOINT, None, None)]
    (root / "sys/bus/pci/devices").mkdir(parents=True)
    for bdf, path, ven, dev, cls, port, sec, acs in fns:
        d = root / "sys" / path
        d.mkdir(parents=True, exist_ok=True)
        for f, v in (("vendor", f"0x{ven:04x}"), ("device", f"0x{dev:04x}"), ("class", f"0x{cls:06x}"), ("numa_node", "0")):
            (d / f).write_text(v + "\n")
        (d / "config").write_bytes(config_space(ven, dev, cls, port, sec, acs))
        os.symlink("../../../" + path, root / "sys/bus/pci/devices" / bdf)
    (root / "proc/sys/kernel").mkdir(parents=True)
    (root / "proc/modules").write_text("nvidia 16384 0 - Live 0x0\n")
    (root / "proc/cpuinfo").write_text("vendor_id\t: AuthenticAMD\ncpu family\t: 23\nmodel\t\t: 49\nmodel name\t: AMD Ryzen Threadripper PRO 3975WX\n")
    (root / "proc/cmdline").write_text("root=/dev/sda1\n")
    (root / "proc/sys/kernel/osrelease").write_text("6.8.0\n")
    return root


def gpu_pair(root):
    p = run("check", "--json", "--sysfs-root", root)
    j = json.loads(p.stdout)
    (pair,) = [x for x in j["pairs"] if x["a"] == "GPU0" and x["b"] == "GPU1"]
    return j, pair


def test_acs_redirect_on_root_ports_of_a_phb_gpu_pair(tmp_path):
    j, pair = gpu_pair(phb_gpus(tmp_path / "n", 0x001D))
    assert pair["class"] == "PHB"
    (f,) = [f for f in pair["findings"] if f["rule"] == "acs-root-port"]
    assert f["severity"] == "unreliable" and "0000:40:01.1 (ACSCtl 0x001d)" in f["reason"] and "0000:40:03.1" in f["reason"]
    assert "setpci -s 0000:40:01.1 ECAP_ACS+0x6.w=0000:002c; setpci -s 0000:40:03.1 ECAP_ACS+0x6.w=0000:002c" in f["fix"]
    # config_acs flags are written bit 6 first: clear EgressCtrl (5), CmpltRedir (3), ReqRedir (2).
    assert 'pci=config_acs="x0x00xx@0000:40:01.1;x0x00xx@0000:40:03.1"' in f["fix"]
    assert pair["verdict"] == "unreliable"
    # The negative cases: root ports with SrcValid only; a PIX pair does not cross its root port.
    _, pair = gpu_pair(phb_gpus(tmp_path / "q", 0x0001))
    assert "acs-root-port" not in {f["rule"] for f in pair["findings"]}
    # and a PIX pair does not cross its root port: make_node's root port is not judged
    root = make_node(tmp_path / "m")
    _, pair = check(root)
    assert "acs-root-port" not in {f["rule"] for f in pair["findings"]}


def with_ats(root, enabled):
    """Give the NIC of make_node an ATS extended capability (PCIe ATS, ID 0x000F) at 0x100."""
    import struct
    nic = root / "sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:01.0/0000:04:00.0"
    c = bytearray((nic / "config").read_bytes())
    struct.pack_into("<IHH", c, 0x100, 0x000F | 1 << 16, 0, 0x8000 if enabled else 0)
    (nic / "config").write_bytes(bytes(c))
    return root


def test_ats_under_a_translating_iommu(tmp_path):
    _, pair = check(with_ats(make_node(tmp_path / "n", iommu="DMA"), True))
    (f,) = [f for f in pair["findings"] if f["rule"] == "ats-translated"]
    assert "Direct Translated P2P is off on 0000:02:00.0, 0000:02:01.0" in f["reason"] and "1xxxxxx@" in f["fix"]
    _, pair = check(with_ats(make_node(tmp_path / "m", iommu="DMA"), False))
    (f,) = [f for f in pair["findings"] if f["rule"] == "ats-translated"]
    assert "ATS is off" in f["reason"]
    _, pair = check(with_ats(make_node(tmp_path / "o"), True))  # no IOMMU: ATS does not matter
    assert "ats-translated" not in {f["rule"] for f in pair["findings"]}


def test_ats_in_a_virtual_machine(tmp_path):
    root = with_ats(make_node(tmp_path / "n"), True)
    (root / "proc/cpuinfo").write_text("vendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 143\nmodel name\t: Intel Xeon\nflags\t\t: fpu hypervisor\n")
    _, pair = check(root)
    assert "ats-vm" in {f["rule"] for f in pair["findings"]}
    _, pair = check(with_ats(make_node(tmp_path / "m"), True))
    assert "ats-vm" not in {f["rule"] for f in pair["findings"]}


def test_nccl_gdr_default_on_gb200_is_p2c():
    """The issue: gdrpeer said "NCCL leaves GDR off" on GB200 where NCCL turns it on (P2C).
    AWS p6e-gb200 (hwloc, tests/reference): GPU0-NIC2 meets in the root complex (NODE)."""
    j = json.loads(run("check", "--json", REPO / "tests/reference/aws-p6e-gb200.36xlarge.xml").stdout)
    by = {(p["a"], p["b"]): p for p in j["pairs"]}
    node_pair, sys_pair = by[("GPU0", "NIC2")], by[("GPU0", "NIC8")]
    assert node_pair["class"] == "NODE" and node_pair["nccl_gdr_default"] is True
    assert node_pair["consumers"]["nccl"]["level"].startswith("P2C vs P2C")
    assert sys_pair["class"] == "SYS" and sys_pair["nccl_gdr_default"] is False
    pix = by[("GPU0", "NIC0")]["consumers"]["nccl"]
    assert pix["mapping"] == "pcie"  # C2C GPU off the P2C path: the PCIe mapping type


def test_nvidia_peermem_option_configured_but_not_active(tmp_path):
    root = node(tmp_path, modules=("nvidia", "nvidia_peermem", "ib_core"), peers={"nv_mem": NV_MEM},
                peermem={"peerdirect_support": "0", "persistent_api_support": "1"},
                modprobe={"nvidia-peermem.conf": "options nvidia-peermem persistent_api_support=0 peerdirect_support=0\n"})
    j, _ = check(root)
    (p,) = [n for n in note(j, "nvidia-params-pending") if n["text"].startswith("nvidia_peermem")]
    assert "persistent_api_support=0 is configured (/etc/modprobe.d/nvidia-peermem.conf:1)" in p["text"]
    assert "runs with persistent_api_support=1" in p["text"]


def test_registry_dwords_configured_but_not_active(tmp_path):
    conf = 'options nvidia NVreg_RegistryDwords="PeerMappingOverride=1"\n'
    j, _ = check(node(tmp_path, modprobe={"nvidia.conf": conf}))
    (p,) = note(j, "nvidia-params-pending")
    assert p["text"].startswith("NVreg_RegistryDwords PeerMappingOverride=1 is configured") and "(unset)" in p["text"]


def test_kernel_log_nvidia_p2p_mismatch_says_rebuild_against_the_driver(tmp_path):
    """Mellanox/nv_peer_memory #8: nv_peer_mem built against another nvidia.ko."""
    j, _ = check(node(tmp_path, kernel_log="kmsg-nv-peer-memory-8.txt"))
    (n,) = note(j, "peermem-load-failed")
    assert "another NVIDIA driver" in n["text"] and "against the running NVIDIA driver" in n["fix"]


def test_consumers_json_keys_in_byte_order(tmp_path):
    """The writer keeps nlohmann's dump(2) layout (json_writer.hpp): keys in byte order."""
    p = run("check", "--json", "--sysfs-root", node(tmp_path, peers={}))
    assert '"nvidia_driver"' in p.stdout and '"stack"' in p.stdout
    assert p.stdout == json.dumps(json.loads(p.stdout), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def test_ampere_chipsets_are_on_the_driver_list(tmp_path):
    """osinit.c: CS_AMPERE_ALTRA and CS_AMPERE_AMPEREONE160 are distrusted like Grace. AmpereOne is
    known by Ampere's implementer id 0xc0; Altra (Neoverse N1 cores, ARM's id 0x41, like Graviton2)
    only by its DMI name."""
    one = "processor\t: 0\nCPU implementer\t: 0xc0\nCPU part\t: 0xac3\n"
    n1 = "processor\t: 0\nCPU implementer\t: 0x41\nCPU part\t: 0xd0c\n"
    _, pair = check(two_root_ports(tmp_path / "a", one))
    assert pair["consumers"]["nvidia_driver"]["dmabuf_default"]["allowed"] is False
    _, pair = check(two_root_ports(tmp_path / "b", n1))
    assert pair["consumers"]["nvidia_driver"]["dmabuf_default"]["allowed"] is True
    root = two_root_ports(tmp_path / "c", n1)
    (root / "sys/class/dmi/id").mkdir(parents=True)
    (root / "sys/class/dmi/id/sys_vendor").write_text("Ampere Computing\n")
    (root / "sys/class/dmi/id/product_name").write_text("Mt.Jade Ampere Altra\n")
    _, pair = check(root)
    assert pair["consumers"]["nvidia_driver"]["dmabuf_default"]["allowed"] is False


def test_without_the_stack_the_stack_notes_are_absent(tmp_path):
    """The negative cases of the node notes: no NVIDIA driver files, no peer clients, no nvidia_peermem."""
    j, pair = check(node(tmp_path, version=None, params=None, peers={}))
    for rule in ("nvidia-driver", "nvidia-override", "peer-clients", "peermem-params", "peermem-unregistered", "peer-client-invisible"):
        assert note(j, rule) == [], rule
    assert not {"consumer-nccl", "consumer-nvshmem", "consumer-ucx", "exporter-gate"} & {f["rule"] for f in pair["findings"]}
    # and the same node with the driver's files has them
    j, _ = check(node(tmp_path, peers={"nv_mem": NV_MEM}, name="m"))
    assert note(j, "nvidia-driver") and note(j, "peer-clients")


def test_reference_dump_without_stack_states_nccl_distance_decision():
    """stelline ASUS ESC8000A-E12 (lspci text, tests/reference): GPU0-NIC0 meet between host
    bridges of one socket (NODE = NCCL's PHB): NCCL leaves GDR off by distance; with
    NCCL_NET_GDR_LEVEL=PHB it is within the level, and whether dma-buf or peer memory is unknown."""
    ref = REPO / "tests/reference/stelline-asus-esc8000a-e12.md"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NCCL_", "NVSHMEM_", "UCX_"))}
    j = json.loads(run("check", "--json", ref, env=env).stdout)
    (p,) = [p for p in j["pairs"] if p["a"] == "GPU0" and p["b"] == "NIC0"]
    nccl = p["consumers"]["nccl"]
    assert p["class"] == "NODE" and nccl["gdr"] is False and nccl["level"].startswith("PHB vs P2C")
    assert p["consumers"]["nvshmem"]["path"] == "unknown" and p["consumers"]["ucx"]["gdr"] is None
    j = json.loads(run("check", "--json", ref, env=dict(env, NCCL_NET_GDR_LEVEL="PHB")).stdout)
    (p,) = [p for p in j["pairs"] if p["a"] == "GPU0" and p["b"] == "NIC0"]
    assert p["consumers"]["nccl"]["gdr"] is None and p["consumers"]["nccl"]["level"].startswith("PHB vs PHB (NCCL_NET_GDR_LEVEL)")

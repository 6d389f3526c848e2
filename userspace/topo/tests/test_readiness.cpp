// IBGDA and GDS readiness (issue 27): the decision tables derived from NVSHMEM's and
// GDS's sources (rows cite them), the facts read from real artefacts
// (tests/reference/readiness/README.md), and the live probe against a fake.
#include <gtest/gtest.h>

#include <algorithm>

#include "gdrpeer/topo/inputs.hpp"
#include "gdrpeer/topo/model.hpp"
#include "gdrpeer/topo/readiness.hpp"
#include "gdrpeer/topo/render.hpp"
#include "gdrpeer/topo/rule_data.hpp"
#include "gdrpeer/topo/rules.hpp"
#include "test_gzip.hpp"
#include "test_topo_support.hpp"

using namespace gdrpeer::topo;
namespace fake = gdrpeer::topo::testing;
using fake::FakeNode;
using fake::gzip;
using fake::kb;
using fake::slurp;

namespace {

std::string fixture(const std::string& name) { return slurp(fake::reference("readiness/" + name)); }

// ---------------------------------------------------------------------------------------
// The IBGDA table. Each row: the facts, the mode NVSHMEM 3.5.1 / the NVIDIA driver give,
// and where in the source that comes from.
struct IbgdaRow {
  const char* source;  // the line of the source the row follows
  int rdma, mlx5, devx, atomics, dmabuf, peer, uar;
  const char* mode;
  // The columns are IbgdaFacts' first seven members, in its order; the rest as its defaults
  // (dma-buf umem unknown, not probed, no NIC model).
  IbgdaFacts facts() const { return {rdma, mlx5, devx, atomics, dmabuf, peer, uar, -1, false, ""}; }
};

const IbgdaRow kIbgdaRows[] = {
    // ibgda.cpp nvshmemt_init: dmabuf_support_for_data_buffers false and nv_peer_mem absent -> "Skipping transport."
    {"ibgda.cpp: neither nv_peer_mem, or nvidia_peermem detected", 1, 1, 1, 1, 0, 0, 1, "none"},
    {"no verbs device: no IB transport at all", 0, 1, 1, 1, 1, 1, 1, "none"},
    // device name not mlx5/ibp, or not mlx5dv: "not supported" / "not enumerated as an mlx5 device"
    {"ibgda.cpp: device is not supported (expected HCA interface: mlx5 or ibp)", 1, 0, -1, -1, 1, 0, 1, "proxy-only"},
    // transport_mlx5_common.cpp nvshmemt_ib_common_query_mlx5_caps: general cmd fails
    {"transport_mlx5_common.cpp: QUERY_HCA_CAP fails -> not enumerated as mlx5", 1, 1, 0, 1, 1, 0, 1, "proxy-only"},
    // nvshmemt_ib_common_check_nic_ext_atomic_support fails -> Skipping
    {"transport_mlx5_common.cpp: atomic caps lack CAS/FA/masked -> Skipping", 1, 1, 1, 0, 1, 0, 1, "proxy-only"},
    // ibgda_check_gpu_mapping_nic_uar succeeds -> IBGDA_NIC_HANDLER_GPU
    {"ibgda.cpp: cudaHostRegister(IoMemory) of the UAR succeeds -> NIC handler GPU (dma-buf)", 1, 1, 1, 1, 1, 0, 1, "gpu-initiated"},
    {"ibgda.cpp: the same with peer memory only", 1, 1, 1, 1, 0, 1, 1, "gpu-initiated"},
    // osmemdesc.c: without PeerMappingOverride only administrators may register IO memory
    {"osmemdesc.c: PeerMappingOverride unset -> unprivileged jobs fall back (3.4.5 CPU-assisted)", 1, 1, 1, 1, 1, 0, 2, "cpu-assisted"},
    {"ibgda.cpp: cudaHostRegister with IoMemory failed -> CPU fallback path", 1, 1, 1, 1, 1, 1, 0, "cpu-assisted"},
    // unknowns stay unknown
    {"no driver parameters: PeerMappingOverride unknown", 1, 1, 1, 1, 1, 0, -1, "unknown"},
    {"data path unknown (no modules, no flavour)", 1, 1, 1, 1, -1, -1, 1, "unknown"},
    {"DEVX / atomics unknown without the probe (ConnectX-4)", 1, 1, -1, -1, 1, 0, 1, "unknown"},
    {"not mlx5, RDMA device unknown (hwloc input): proxy-only or none", -1, 0, -1, -1, 1, 0, 1, "unknown"},
    {"not mlx5, data path unknown (hwloc input with EFA): proxy-only or none", 1, 0, -1, -1, -1, -1, -1, "unknown"},
    // ibgda.cpp nvshmemt_init: only the verbs devices get_device_list returns are candidates; a NIC
    // whose RDMA device is not in the input (mlx5_ib not known to be bound) may have none: none then.
    {"ibgda.cpp get_device_list: RDMA device unknown, gpu-initiated with one", -1, 1, 1, 1, 1, 0, 1, "unknown"},
    {"ibgda.cpp get_device_list: RDMA device unknown, cpu-assisted with one", -1, 1, 1, 1, 1, 0, 2, "unknown"},
    {"ibgda.cpp get_device_list: RDMA device unknown, proxy-only with one (no atomics)", -1, 1, 1, 0, 1, 0, 1, "unknown"},
    {"ibgda.cpp: no data path is none with or without an RDMA device", -1, 1, 1, 1, 0, 0, 1, "none"},
};

TEST(ReadinessTable, IbgdaModesFollowNvshmemAndTheDriver) {
  for (const auto& row : kIbgdaRows) {
    ReadinessMode m = decide_ibgda(row.facts());
    EXPECT_EQ(m.mode, row.mode) << row.source << ": " << m.reason;
    EXPECT_EQ(m.unknown, std::string(row.mode) == "unknown") << row.source;
    EXPECT_FALSE(m.reason.empty()) << row.source;
    // Every mode short of gpu-initiated names a fix for the next better one.
    if (std::string(row.mode) != "gpu-initiated" && std::string(row.mode) != "unknown") {
      EXPECT_FALSE(m.fix.empty()) << row.source;
    }
    if (std::string(row.mode) == "gpu-initiated") {
      EXPECT_TRUE(m.fix.empty()) << row.source;
    }
  }
  // The regkey's fix carries its security cost.
  IbgdaFacts f{1, 1, 1, 1, 1, 0, 2, -1, false, ""};
  ReadinessMode m = decide_ibgda(f);
  EXPECT_NE(m.fix.find("PeerMappingOverride=1"), std::string::npos);
  EXPECT_NE(m.fix.find("security"), std::string::npos);
  EXPECT_NE(m.reason.find("CAP_SYS_ADMIN"), std::string::npos);
}

// An RDMA device not in the input: unknown; the reason says what it would be with one, or, where
// that too is unknown, gives the rest's reason as it is.
TEST(ReadinessTable, AnUnknownRdmaDeviceSaysWhatItWouldBeWithOne) {
  ReadinessMode m = decide_ibgda(IbgdaFacts{-1, 1, 1, 1, 1, 0, 1, -1, false, "ConnectX-7"});
  EXPECT_TRUE(m.unknown);
  EXPECT_NE(m.reason.find("RDMA (verbs) device is not in this input"), std::string::npos) << m.reason;
  EXPECT_NE(m.reason.find("none without one, gpu-initiated with one"), std::string::npos) << m.reason;
  m = decide_ibgda(IbgdaFacts{-1, 1, 1, 1, -1, -1, 1, -1, false, "ConnectX-7"});
  EXPECT_TRUE(m.unknown);
  EXPECT_NE(m.reason.rfind("unknown: whether GPU memory can be registered", 0), std::string::npos) << m.reason;
  EXPECT_EQ(m.reason.find("none without one"), std::string::npos) << m.reason;
}

// The GDS table. Source: GDS Troubleshooting Guide §14 and "GDS Support for NVMe Drives
// Using Linux PCI P2PDMA Support" (release 615); GDS Installation Guide §1.
struct GdsRow {
  const char* source;
  int kernel62, p2pdma, open, drv565, gpu, x86, bar1, wc, multipath_off, bridge, nvfs;
  const char* mode;
  // The columns are GdsFacts' members after `nvme`, in its order; every row has the NVMe drive.
  GdsFacts facts() const { return {1, kernel62, p2pdma, open, drv565, gpu, x86, bar1, wc, multipath_off, bridge, nvfs}; }
};

const GdsRow kGdsRows[] = {
    {"all P2PDMA prerequisites (x86)", 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, "p2pdma"},
    {"§14.1 kernel < 6.2", 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, "compat"},
    {"§14.1 PCI P2PDMA not compiled in (Debian)", 1, 0, 1, 1, 1, 1, 1, 1, 1, 1, 0, "compat"},
    {"§3.4 open RM driver 565 or above: proprietary", 1, 1, 0, 1, 1, 1, 1, 1, 1, 1, 0, "compat"},
    {"§3.4 driver < 565", 1, 1, 1, 0, 1, 1, 1, 1, 1, 1, 0, "compat"},
    {"§14.2 GPU not on the list", 1, 1, 1, 1, 0, 1, 1, 1, 1, 1, 0, "compat"},
    {"§14.3 x86: RMForceStaticBar1 missing", 1, 1, 1, 1, 1, 1, 0, 1, 1, 1, 0, "compat"},
    {"§14.3 x86: RmForceDisableIomapWC missing", 1, 1, 1, 1, 1, 1, 1, 0, 1, 1, 0, "compat"},
    {"§14.3 multipath not disabled", 1, 1, 1, 1, 1, 1, 1, 1, 0, 1, 0, "compat"},
    {"Intro: Arm64 Grace not supported", 1, 1, 1, 1, 1, 0, -1, -1, -1, 1, 0, "compat"},
    {"Installation §1: nvidia-fs.ko loaded, P2PDMA prerequisites missing", 0, 0, 1, 1, 1, 1, 0, 0, 0, 1, 1, "nvidia-fs"},
    {"P2PDMA prerequisites unknown (no kernel config), nvidia-fs absent", 1, -1, 1, 1, 1, 1, 1, 1, 1, 1, 0, "unknown"},
    {"p2pdma.c: path through an Intel host bridge (whitelist not modelled)", 1, 1, 1, 1, 1, 1, 1, 1, 1, -1, 0, "unknown"},
};

TEST(ReadinessTable, GdsModesFollowTheGdsGuides) {
  for (const auto& row : kGdsRows) {
    ReadinessMode m = decide_gds(row.facts());
    EXPECT_EQ(m.mode, row.mode) << row.source << ": " << m.reason;
    EXPECT_EQ(m.unknown, std::string(row.mode) == "unknown") << row.source;
    if (std::string(row.mode) == "compat") {
      EXPECT_FALSE(m.fix.empty()) << row.source;
    }
  }
  GdsFacts f{1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 1, 0};
  ReadinessMode m = decide_gds(f);
  EXPECT_EQ(m.mode, "compat");
  EXPECT_NE(m.fix.find("RMForceStaticBar1=1;RmForceDisableIomapWC=1;"), std::string::npos) << m.fix;
  EXPECT_NE(m.fix.find("multipath=N"), std::string::npos) << m.fix;
}

TEST(ReadinessTable, ConnectXGenerationsFromPciIds) {
  // pci.ids (pciutils/pciids c1c1254), vendor 15b3.
  EXPECT_EQ(connectx_model(0x1017), "ConnectX-5");
  EXPECT_EQ(connectx_model(0x101b), "ConnectX-6");
  EXPECT_EQ(connectx_model(0x101d), "ConnectX-6 Dx");
  EXPECT_EQ(connectx_model(0x1021), "ConnectX-7");
  EXPECT_EQ(connectx_model(0x1023), "ConnectX-8");
  EXPECT_EQ(connectx_model(0xa2dc), "BlueField-3 (ConnectX-7)");
  EXPECT_EQ(connectx_model(0x1024), "");  // the ConnectX-8's PCIe switch is no NIC
}

// ---------------------------------------------------------------------------------------
// Kernel configurations (Debian's own, README).
TEST(ReadinessInputs, DebianKernelConfigsLackP2pdma) {
  for (const char* name : {"debian-config-6.1.0-56-amd64.excerpt", "debian-config-6.12.107+deb12-amd64.excerpt",
                           "debian-config-6.12.107+deb12-cloud-amd64.excerpt"}) {
    KernelConfig kc;
    parse_kernel_config(fixture(name), name, kc);
    EXPECT_TRUE(kc.known);
    EXPECT_EQ(kc.values["CONFIG_PCI_P2PDMA"], "n") << name;
    EXPECT_EQ(kc.values["CONFIG_NVME_MULTIPATH"], "y") << name;
    EXPECT_EQ(kc.values["CONFIG_ZONE_DEVICE"], "y") << name;
  }
  // The whole 6.1 file (the lead's kernel cache) parses to the same options as its excerpt.
  const std::string whole = "/work/main/build/cache/kernels/6.1/root/boot/config-6.1.0-56-amd64";
  std::string text = slurp(whole);
  if (text.empty()) GTEST_SKIP() << whole << " is not on this machine (the excerpt was checked above)";
  KernelConfig a, b;
  parse_kernel_config(text, whole, a);
  parse_kernel_config(fixture("debian-config-6.1.0-56-amd64.excerpt"), "excerpt", b);
  EXPECT_EQ(a.values, b.values);
}

// ---------------------------------------------------------------------------------------
// Nodes: FakeNode sysfs trees plus the real files.
struct Extra {
  std::vector<TarEntry> e;
  void file(const std::string& p, const std::string& d) { e.push_back({TarEntry::Type::File, p.substr(1), d}); }
  void link(const std::string& p, const std::string& d) { e.push_back({TarEntry::Type::Symlink, p.substr(1), d}); }
};

Topology node(const FakeNode& n, const Extra& x) { return fake::from_fake(n, x.e); }

// One H200 (10de:2335) behind a root port, no NIC, no NVMe: the real node's software.
FakeNode h200_alone() {
  FakeNode n;
  fake::add_port(n, "0000:00:01.0", "/sys/devices/pci0000:00/0000:00:01.0", fake::kRootPort, 1);
  fake::add_endpoint(n, "0000:01:00.0", "/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0", 0x10de, 0x2335, 0x030200);
  n.modules = fixture("proc-modules.h200.txt");
  n.osrelease = "6.18.44-fc\n";
  n.nvidia_version = fixture("proc-driver-nvidia-version.h200-580.159.04-open.txt");
  n.cpuinfo =
      "vendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 1\nmodel name\t: AMD EPYC\nphysical id\t: 0\nflags\t\t: fpu hypervisor\n";
  return n;
}

const ReadinessEntry* entry(const Report& r, const std::string& kind, int gpu, int other) {
  for (const auto& e : r.readiness)
    if (e.kind == kind && e.gpu == gpu && e.other == other) return &e;
  return nullptr;
}

TEST(ReadinessNode, RealH200ParamsWithoutRegkeysGiveCpuAssistedAndCompat) {
  Extra x;
  x.file("/proc/driver/nvidia/params", fixture("proc-driver-nvidia-params.h200-580.159.04-open.txt"));
  Topology t = node(h200_alone(), x);
  ASSERT_TRUE(t.sw.stack.params_known);
  Report r = check(t, kb(), CheckOptions{});
  ASSERT_EQ(r.gpus.size(), 1u);
  const ReadinessEntry* ib = entry(r, "ibgda", r.gpus[0], -1);
  ASSERT_TRUE(ib);
  EXPECT_EQ(ib->m.mode, "none");
  EXPECT_NE(ib->m.reason.find("no RDMA NIC in this input"), std::string::npos) << ib->m.reason;
  // The open module on 6.18 gives dma-buf; RegistryDwords is empty: the doorbell needs
  // CAP_SYS_ADMIN, so an mlx5 NIC would get cpu-assisted.
  EXPECT_NE(ib->m.reason.find("would give cpu-assisted"), std::string::npos) << ib->m.reason;
  EXPECT_NE(ib->m.reason.find("data buffers through dma-buf"), std::string::npos) << ib->m.reason;
  const ReadinessEntry* gds = entry(r, "gds", r.gpus[0], -1);
  ASSERT_TRUE(gds);
  EXPECT_EQ(gds->m.mode, "compat");
  EXPECT_NE(gds->m.reason.find("RMForceStaticBar1=1"), std::string::npos) << gds->m.reason;
  std::string text = render_matrix(t, r, false);
  EXPECT_NE(text.find("GPU0 - (no NIC)"), std::string::npos) << text;
  EXPECT_NE(text.find("ibgda: none; no RDMA NIC in this input"), std::string::npos) << text;
  EXPECT_NE(text.find("gds: compat"), std::string::npos) << text;
  std::string json = render_json(t, r);
  EXPECT_NE(json.find("\"readiness\": ["), std::string::npos);
  EXPECT_NE(json.find("\"kind\": \"ibgda\""), std::string::npos);
}

// The live check's driver note quotes the version and the module kind from
// /proc/driver/nvidia/version's first line: the real H200 node's (open module, 580.159.04), and
// the proprietary module's line as 535.183.01 prints it ("NVIDIA UNIX x86_64 Kernel Module");
// with no such file, it says so. Found by the generated mutants (issue 28): every condition of
// nvidia_driver_summary could be flipped or dropped without a host test noticing.
TEST(ReadinessNode, DriverNoteQuotesTheVersionFile) {
  struct Case {
    std::string version_file, want;
  };
  const Case cases[] = {
      {fixture("proc-driver-nvidia-version.h200-580.159.04-open.txt"), "NVIDIA driver 580.159.04 (open kernel module)"},
      {"NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.183.01  Sun May 12 19:39:15 UTC 2024\n"
       "GCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n",
       "NVIDIA driver 535.183.01 (proprietary kernel module)"},
      {"NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  Release Build\n", "NVIDIA driver (version not read) (open kernel module)"},
      {"", "NVIDIA driver: /proc/driver/nvidia/version not in this input"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.want);
    FakeNode n = h200_alone();
    n.nvidia_version = c.version_file;
    Topology t = node(n, Extra{});
    ASSERT_EQ(t.format, "sysfs");
    Report r = check(t, kb(), CheckOptions{});
    const Finding* note = nullptr;
    for (const auto& f : r.node_findings)
      if (f.rule == "software-cuda") note = &f;
    ASSERT_TRUE(note);
    EXPECT_EQ(note->reason.substr(0, c.want.size() + 1), c.want + ";") << note->reason;
  }
}

TEST(ReadinessNode, RegkeysMakeGpuInitiatedAndClearTheGdsKeys) {
  Extra x;
  x.file("/proc/driver/nvidia/params", fixture("proc-driver-nvidia-params.h200-with-regkeys.derived.txt"));
  x.file("/boot/config-6.18.44-fc", fixture("debian-config-6.12.107+deb12-amd64.excerpt"));
  x.file("/sys/module/nvme_core/parameters/multipath", "N\n");
  Topology t = node(h200_alone(), x);
  EXPECT_EQ(t.sw.readiness.kconfig.source, "/boot/config-6.18.44-fc");
  Report r = check(t, kb(), CheckOptions{});
  const ReadinessEntry* ib = entry(r, "ibgda", r.gpus[0], -1);
  ASSERT_TRUE(ib);
  EXPECT_NE(ib->m.reason.find("would give gpu-initiated"), std::string::npos) << ib->m.reason;
  const ReadinessEntry* gds = entry(r, "gds", r.gpus[0], -1);
  ASSERT_TRUE(gds);
  // Only the kernel is left: Debian's configuration lacks CONFIG_PCI_P2PDMA.
  EXPECT_NE(gds->m.reason.find("CONFIG_PCI_P2PDMA=y"), std::string::npos) << gds->m.reason;
  EXPECT_EQ(gds->m.reason.find("RMForceStaticBar1"), std::string::npos) << gds->m.reason;
  EXPECT_EQ(gds->m.reason.find("multipath"), std::string::npos) << gds->m.reason;
}

TEST(ReadinessNode, ProcConfigGzIsReadWhenBootHasNone) {
  Extra x;
  x.file("/proc/config.gz", gzip(fixture("debian-config-6.1.0-56-amd64.excerpt")));
  Topology t = node(h200_alone(), x);
  EXPECT_TRUE(t.sw.readiness.kconfig.known);
  EXPECT_EQ(t.sw.readiness.kconfig.source, "/proc/config.gz");
  EXPECT_EQ(t.sw.readiness.kconfig.values["CONFIG_PCI_P2PDMA"], "n");
}

TEST(ReadinessNode, SnapshotCarriesTheKeptOptionsWithTheirSource) {
  KernelConfig live;
  parse_kernel_config(fixture("debian-config-6.12.107+deb12-amd64.excerpt"), "/boot/config-6.12.107+deb12-amd64", live);
  Extra x;
  x.file("/gdrpeer-snapshot/kernel-config", kernel_config_text(live));
  x.file("/proc/config.gz", gzip("CONFIG_PCI_P2PDMA=y\n"));  // the snapshot's own entry wins
  Topology t = node(h200_alone(), x);
  EXPECT_EQ(t.sw.readiness.kconfig.source, "/boot/config-6.12.107+deb12-amd64");
  EXPECT_EQ(t.sw.readiness.kconfig.values, live.values);
}

TEST(ReadinessNode, NoParamsStaysUnknown) {
  Topology t = node(h200_alone(), Extra{});
  ASSERT_FALSE(t.sw.stack.params_known);
  Report r = check(t, kb(), CheckOptions{});
  const ReadinessEntry* ib = entry(r, "ibgda", r.gpus[0], -1);
  ASSERT_TRUE(ib);
  EXPECT_NE(ib->m.reason.find("would give unknown (no driver parameters in this input"), std::string::npos) << ib->m.reason;
}

// The switch node (H100 + ConnectX-7 under one switch) with an RDMA device.
Topology switch_node_with(const std::string& params, uint16_t nic_vendor = 0x15b3, uint16_t nic_device = 0x1021,
                          const std::string& rdma = "mlx5_0") {
  FakeNode n = fake::switch_node();
  for (auto& f : n.fns)
    if (f.bdf == "0000:04:00.0") {
      f.vendor = nic_vendor;
      f.device = nic_device;
    }
  n.nvidia_version = fixture("proc-driver-nvidia-version.h200-580.159.04-open.txt");
  Extra x;
  if (!params.empty()) x.file("/proc/driver/nvidia/params", params);
  if (!rdma.empty())
    x.link("/sys/class/infiniband/" + rdma + "/device", "../../../devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:01.0/0000:04:00.0");
  else
    x.e.push_back({TarEntry::Type::Directory, "sys/class/infiniband", ""});
  return node(n, x);
}

TEST(ReadinessNode, PairsGetOneModeEach) {
  {
    Topology t = switch_node_with(fixture("proc-driver-nvidia-params.h200-with-regkeys.derived.txt"));
    Report r = check(t, kb(), CheckOptions{});
    ASSERT_EQ(r.nics.size(), 1u);
    const ReadinessEntry* e = entry(r, "ibgda", r.gpus[0], r.nics[0]);
    ASSERT_TRUE(e);
    EXPECT_EQ(e->m.mode, "gpu-initiated") << e->m.reason;
    EXPECT_NE(e->m.reason.find("ConnectX-7"), std::string::npos) << e->m.reason;
    EXPECT_NE(e->m.reason.find("assumed"), std::string::npos) << e->m.reason;
    std::string json = render_json(t, r);
    EXPECT_NE(json.find("\"ibgda\": {"), std::string::npos);
  }
  {
    Topology t = switch_node_with(fixture("proc-driver-nvidia-params.h200-580.159.04-open.txt"));
    Report r = check(t, kb(), CheckOptions{});
    EXPECT_EQ(entry(r, "ibgda", r.gpus[0], r.nics[0])->m.mode, "cpu-assisted");
  }
  {
    // A Broadcom NIC (14e4:1750, BCM57508): not mlx5.
    Topology t = switch_node_with(fixture("proc-driver-nvidia-params.h200-580.159.04-open.txt"), 0x14e4, 0x1750, "bnxt_re0");
    Report r = check(t, kb(), CheckOptions{});
    EXPECT_EQ(entry(r, "ibgda", r.gpus[0], r.nics[0])->m.mode, "proxy-only");
  }
  {
    // mlx5_ib not loaded: no RDMA device for the NIC.
    Topology t = switch_node_with(fixture("proc-driver-nvidia-params.h200-580.159.04-open.txt"), 0x15b3, 0x1021, "");
    Report r = check(t, kb(), CheckOptions{});
    EXPECT_EQ(entry(r, "ibgda", r.gpus[0], r.nics[0])->m.mode, "none");
  }
}

// GPU and a Samsung NVMe drive (144d:a80a) under the switch node's switch, Debian 6.12's
// kernel configuration (no CONFIG_PCI_P2PDMA), the registry keys and multipath=N set.
Topology switch_node_with_nvme(const std::string& modules) {
  FakeNode n = fake::switch_node();
  const std::string up = "/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0";
  fake::add_port(n, "0000:02:02.0", up + "/0000:02:02.0", fake::kDownstream, 5, 0x10b5, 0x9797);
  fake::add_endpoint(n, "0000:05:00.0", up + "/0000:02:02.0/0000:05:00.0", 0x144d, 0xa80a, 0x010802);
  n.modules = modules;
  n.osrelease = "6.12.107+deb12-amd64\n";
  n.nvidia_version = fixture("proc-driver-nvidia-version.h200-580.159.04-open.txt");
  Extra x;
  x.file("/proc/driver/nvidia/params", fixture("proc-driver-nvidia-params.h200-with-regkeys.derived.txt"));
  x.file("/boot/config-6.12.107+deb12-amd64", fixture("debian-config-6.12.107+deb12-amd64.excerpt"));
  x.file("/sys/module/nvme_core/parameters/multipath", "N\n");
  return node(n, x);
}

TEST(ReadinessNode, GdsPerGpuNvmePair) {
  {
    Topology t = switch_node_with_nvme("nvidia 1 0 - Live 0x0\nnvme 1 0 - Live 0x0\n");
    CheckOptions o;
    o.gpu_nvme = true;
    Report r = check(t, kb(), o);
    ASSERT_EQ(r.nvmes.size(), 1u);
    const ReadinessEntry* e = entry(r, "gds", r.gpus[0], r.nvmes[0]);
    ASSERT_TRUE(e);
    // H100 (10de:2330) is on the list, the keys and multipath are set: only the kernel lacks P2PDMA.
    EXPECT_EQ(e->m.mode, "compat") << e->m.reason;
    EXPECT_NE(e->m.reason.find("needs CONFIG_PCI_P2PDMA=y in the kernel; nvidia_fs not loaded"), std::string::npos) << e->m.reason;
    std::string json = render_json(t, r);
    EXPECT_NE(json.find("\"gds\": {"), std::string::npos);
  }
  {
    Topology t = switch_node_with_nvme("nvidia 1 0 - Live 0x0\nnvidia_fs 1 0 - Live 0x0\nnvme 1 0 - Live 0x0\n");
    Report r = check(t, kb(), CheckOptions{});
    const ReadinessEntry* e = entry(r, "gds", r.gpus[0], r.nvmes[0]);
    ASSERT_TRUE(e);
    EXPECT_EQ(e->m.mode, "nvidia-fs") << e->m.reason;
  }
}

TEST(ReadinessNode, RegistryDwordsPerDeviceAppliesToItsGpuOnly) {
  // nv-reg.h: NVreg_RegistryDwordsPerDevice="pci=DDDD:BB:DD.F;Key=Value;..." sets keys for one GPU.
  std::string params = fixture("proc-driver-nvidia-params.h200-580.159.04-open.txt");
  const std::string empty = "RegistryDwordsPerDevice: \"\"";
  ASSERT_NE(params.find(empty), std::string::npos);
  for (const char* bdf : {"03:00.0", "0000:03:00.0"}) {
    std::string p = params;
    p.replace(p.find(empty), empty.size(), std::string("RegistryDwordsPerDevice: \"pci=") + bdf + ";PeerMappingOverride=1\"");
    Report r = check(switch_node_with(p), kb(), CheckOptions{});
    EXPECT_EQ(entry(r, "ibgda", r.gpus[0], r.nics[0])->m.mode, "gpu-initiated") << bdf;
  }
  std::string other = params;
  other.replace(other.find(empty), empty.size(), "RegistryDwordsPerDevice: \"pci=0000:81:00.0;PeerMappingOverride=1\"");
  Report r = check(switch_node_with(other), kb(), CheckOptions{});
  EXPECT_EQ(entry(r, "ibgda", r.gpus[0], r.nics[0])->m.mode, "cpu-assisted");
  // Keys before any pci= select no GPU: os-registry.c nv_parse_per_device_option_string() skips
  // them (`if (!nv) continue`), so they set nothing.
  std::string none = params;
  none.replace(none.find(empty), empty.size(), "RegistryDwordsPerDevice: \"PeerMappingOverride=1\"");
  Report n = check(switch_node_with(none), kb(), CheckOptions{});
  EXPECT_EQ(entry(n, "ibgda", n.gpus[0], n.nics[0])->m.mode, "cpu-assisted");
}

TEST(ReadinessNode, RealH100SnapshotSaysWhatItLacks) {
  // The real 8x H100 snapshot in tests/reference (no NIC; taken before params were read).
  std::string tar = slurp(fake::reference("h100-node-snapshot.tar"));
  ASSERT_FALSE(tar.empty());
  auto fs = make_tar_fs(tar, "h100-node-snapshot.tar");
  Topology t = parse_sysfs(*fs, "h100-node-snapshot.tar");
  assign_roles(t, kb());
  Report r = check(t, kb(), CheckOptions{});
  ASSERT_FALSE(r.gpus.empty());
  int lines = 0;
  for (const auto& e : r.readiness)
    if (e.kind == "ibgda") {
      ++lines;
      if (r.nics.empty()) {
        EXPECT_EQ(e.m.mode, "none");
        EXPECT_NE(e.m.reason.find("no driver parameters in this input"), std::string::npos) << e.m.reason;
      }
    }
  EXPECT_EQ(lines, static_cast<int>(r.gpus.size() * std::max<size_t>(1, r.nics.size())));
}

// ---------------------------------------------------------------------------------------
// The live probe against a fake verbs + CUDA.
struct FakeProbe : IbgdaProbeOps {
  std::string load_error;
  IbgdaProbeResult caps;
  int umem = 1, uar = 1;
  std::vector<std::string> gpu_calls;
  std::string load() override { return load_error; }
  std::vector<std::pair<std::string, std::string>> devices() override { return {{"mlx5_0", "0000:04:00.0"}}; }
  IbgdaProbeResult query_caps(const std::string&) override { return caps; }
  void gpu_checks(const std::string& name, const std::string& gpu, IbgdaProbeResult& r) override {
    gpu_calls.push_back(name + "@" + gpu);
    r.dmabuf_umem = umem;
    r.uar_gpu_map = uar;
    if (!uar) r.why = "cuMemHostRegister(IOMEMORY) of the UAR page: CUDA_ERROR_NOT_PERMITTED";
  }
};

TEST(ReadinessProbe, OverridesThePredictionAndSaysSo) {
  Topology t = switch_node_with(fixture("proc-driver-nvidia-params.h200-with-regkeys.derived.txt"));
  FakeProbe fake;
  fake.caps.mlx5 = fake.caps.devx = fake.caps.atomics = 1;
  fake.uar = 0;
  t.sw.ibgda_probe = run_ibgda_probe(t, fake);
  ASSERT_TRUE(t.sw.ibgda_probe.ran);
  ASSERT_EQ(fake.gpu_calls.size(), 1u);
  EXPECT_EQ(fake.gpu_calls[0], "mlx5_0@0000:03:00.0");  // the GPU under the NIC's switch
  Report r = check(t, kb(), CheckOptions{});
  const ReadinessEntry* e = entry(r, "ibgda", r.gpus[0], r.nics[0]);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->m.mode, "cpu-assisted");
  EXPECT_TRUE(e->m.probed);
  EXPECT_NE(e->m.probe_note.find("overrides the prediction (gpu-initiated)"), std::string::npos) << e->m.probe_note;
  EXPECT_NE(e->m.probe_note.find("CUDA_ERROR_NOT_PERMITTED"), std::string::npos) << e->m.probe_note;
}

TEST(ReadinessProbe, AtomicsMissingMeansProxyOnlyAndNoGpuHalf) {
  Topology t = switch_node_with(fixture("proc-driver-nvidia-params.h200-with-regkeys.derived.txt"));
  FakeProbe fake;
  fake.caps.mlx5 = 1;
  fake.caps.devx = 0;
  t.sw.ibgda_probe = run_ibgda_probe(t, fake);
  EXPECT_TRUE(fake.gpu_calls.empty());  // no DEVX: the GPU half is not tried
  Report r = check(t, kb(), CheckOptions{});
  EXPECT_EQ(entry(r, "ibgda", r.gpus[0], r.nics[0])->m.mode, "proxy-only");
}

TEST(ReadinessProbe, UnloadableLibrariesLeaveThePrediction) {
  Topology t = switch_node_with(fixture("proc-driver-nvidia-params.h200-with-regkeys.derived.txt"));
  FakeProbe fake;
  fake.load_error = "cannot load libmlx5.so.1";
  t.sw.ibgda_probe = run_ibgda_probe(t, fake);
  EXPECT_FALSE(t.sw.ibgda_probe.ran);
  Report r = check(t, kb(), CheckOptions{});
  const ReadinessEntry* e = entry(r, "ibgda", r.gpus[0], r.nics[0]);
  EXPECT_FALSE(e->m.probed);
  EXPECT_EQ(e->m.mode, "gpu-initiated");
}

}  // namespace

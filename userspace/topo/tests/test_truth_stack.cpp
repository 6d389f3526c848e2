// The stack stage against independent truth (issue 28: the generated mutants of stack_gate.cpp
// and stack_rules.cpp that the other tests let through).
//
// The exporter's gate: every input combination against an oracle written line by line from
// NVIDIA/open-gpu-kernel-modules tag 580.142 (kernel-open/nvidia/nv-pci.c
// nv_grdma_pci_topology_supported() and nv_pci_is_valid_topology_for_direct_pci(),
// kernel-open/nvidia/nv-dmabuf.c nv_dma_buf_attach(), src/nvidia/arch/nvalloc/unix/src/osapi.c
// nvidia_p2p_dma_map_pages(), kernel-open/nvidia/nv-reg.h for the override's values 0/1/2),
// and the same functions in the other versions' tags (stack.hpp DriverGate): 575.64.05 (FORCE_PCIE
// checked only, "override != 0 || one IOMMU group"), 565.77 (nothing checked, no FORCE_PCIE) and
// 595.45.04 (FORCE_PCIE by the IOMMU group alone). An input the check does not know (-1, a driver
// version not known) is every value it can take; the gate's answer is known only where the
// driver decides the same for all of them, and never the wrong one.
//
// The stage on synthetic nodes (test_topo_support.hpp's switch node, with the stack's files
// added): which consumer sees which peer-memory client name, from the paths their sources test
// (NVIDIA/nccl 5067397 src/transport/net_ib/gdr.cc ncclIbGdrSupport: memory_peers/nv_mem,
// memory_peers/nv_mem_nc, /sys/module/nvidia_peermem; NVIDIA/nvshmem 2d7d25f
// src/modules/transport/common/transport_ib_common.cpp nvshmemt_ib_common_nv_peer_mem_available:
// memory_peers/nv_mem, memory_peers/nvidia-peermem, /sys/module/nvidia_peermem; openucx/ucx
// 9466d10 src/uct/ib/base/ib_md.c: memory_peers/nv_mem, /sys/module/nvidia_peermem,
// /sys/module/nv_peer_mem), and the kernel release that has RDMA dma-buf (Linux 5.12:
// drivers/infiniband/core/umem_dmabuf.c and the uverbs REG_DMABUF_MR method first appear there).
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "gdrpeer/topo/inputs.hpp"
#include "gdrpeer/topo/rules.hpp"
#include "gdrpeer/topo/stack.hpp"
#include "test_topo_support.hpp"

namespace gdrpeer::topo {
namespace {

// ---- the driver, as its C reads (true: allowed) --------------------------------------------

struct Driver {
  DriverGate version;  // which checks the version has
  bool open;           // the open kernel module (only it exports dma-buf)
  bool coherent;
  int override_value;  // NVreg_GrdmaPciTopoCheckOverride: 1 ALLOW_ACCESS, 2 DENY_ACCESS, else default
  bool passthru, unsupported_chipset, common_switch, same_group;
};

// nv-pci.c nv_grdma_pci_topology_supported(), from 580.65.06; before it neither
// rm_p2p_dma_map_pages (osapi.c) nor nv_dma_buf_map (nv-dmabuf.c) checks a topology.
bool grdma_topology_supported(const Driver& d) {
  if (d.version == DriverGate::None || d.version == DriverGate::DirectPci) return true;
  if (d.coherent) return true;
  switch (d.override_value) {
    case 1: return true;
    case 2: return false;
    default: break;
  }
  if (d.passthru) return true;
  if (d.unsupported_chipset) return d.common_switch;
  return true;
}

// nv-pci.c nv_pci_is_valid_topology_for_direct_pci(), from 570.86.15.
bool valid_topology_for_direct_pci(const Driver& d) {
  if (!d.coherent) return false;
  if (d.version == DriverGate::DirectPci) return d.override_value != 0 || d.same_group;  // 575.64.05
  if (d.version == DriverGate::PcieByGroup) return d.same_group;                         // 595.45.04
  switch (d.override_value) {
    case 1: return true;
    case 2: return false;
    default: return d.same_group;
  }
}

// nv_dma_buf_attach(): the default mapping type and FORCE_PCIE; the proprietary module exports none.
bool dmabuf_default(const Driver& d) { return d.open && grdma_topology_supported(d); }
bool dmabuf_pcie(const Driver& d) { return d.open && d.version != DriverGate::None && valid_topology_for_direct_pci(d); }
// osapi.c nvidia_p2p_dma_map_pages(): coherent maps; else the same topology check (either flavour).
bool nvidia_p2p(const Driver& d) { return d.coherent || grdma_topology_supported(d); }

// Every driver state a GateInput allows (its -1 fields take each value).
std::vector<Driver> completions(const GateInput& in) {
  auto tri = [](int v) { return v == -1 ? std::vector<bool>{false, true} : std::vector<bool>{v == 1}; };
  const std::vector<int> overrides = in.override_value == -1 ? std::vector<int>{0, 1, 2} : std::vector<int>{in.override_value};
  const std::vector<DriverGate> versions =
      in.driver == DriverGate::Unknown
          ? std::vector<DriverGate>{DriverGate::None, DriverGate::DirectPci, DriverGate::Full, DriverGate::PcieByGroup}
          : std::vector<DriverGate>{in.driver};
  std::vector<Driver> out;
  for (DriverGate version : versions)
    for (bool open : tri(in.flavour))
      for (bool coherent : tri(in.coherent))
        for (int ov : overrides)
          for (bool chipset : tri(in.unsupported_chipset))
            for (bool sw : tri(in.common_bridge))
              for (bool group : tri(in.same_iommu_group))
                out.push_back({version, open, coherent, ov, in.passthrough_vm, chipset, sw, group});
  return out;
}

// 1 / 0 when every completion agrees, else -1.
int decided(const std::vector<Driver>& ds, bool (*f)(const Driver&)) {
  std::set<bool> seen;
  for (const Driver& d : ds) seen.insert(f(d));
  return seen.size() == 1 ? (*seen.begin() ? 1 : 0) : -1;
}

std::string describe(const GateInput& in) {
  return "flavour=" + std::to_string(in.flavour) + " coherent=" + std::to_string(in.coherent) +
         " override=" + std::to_string(in.override_value) + " vm=" + std::to_string(in.passthrough_vm) +
         " chipset=" + std::to_string(in.unsupported_chipset) + " bridge=" + std::to_string(in.common_bridge) +
         " group=" + std::to_string(in.same_iommu_group) + " driver=" + std::to_string(static_cast<int>(in.driver));
}

// Known inputs: the gate says exactly what the driver decides. Unknown inputs: a known answer
// must be the driver's for every completion (never a guess); where all of them agree and the
// gate still says unknown, that is allowed only where noted below.
TEST(TruthGate, EveryInputAgainstTheDriverSource) {
  int checked = 0;
  for (int flavour : {-1, 0, 1})
    for (int coherent : {-1, 0, 1})
      for (int ov : {-1, 0, 1, 2, 3})
        for (bool vm : {false, true})
          for (int chipset : {-1, 0, 1})  // on RM's chipset list: -1 where the input cannot say
            for (int bridge : {-1, 0, 1})
              for (int group : {-1, 0, 1})
                for (DriverGate version :
                     {DriverGate::Unknown, DriverGate::None, DriverGate::DirectPci, DriverGate::Full, DriverGate::PcieByGroup}) {
                  const GateInput in{flavour, coherent, ov, vm, chipset, bridge, group, version};
                  SCOPED_TRACE(describe(in));
                  const GateResult g = exporter_gate(in);
                  const std::vector<Driver> ds = completions(in);
                  const std::pair<const GateAnswer*, bool (*)(const Driver&)> answers[] = {
                      {&g.dmabuf_default, dmabuf_default}, {&g.dmabuf_pcie, dmabuf_pcie}, {&g.nvidia_p2p, nvidia_p2p}};
                  for (const auto& [got, truth] : answers) {
                    const int want = decided(ds, truth);
                    EXPECT_FALSE(got->why.empty());
                    if (got->allowed != -1) {
                      EXPECT_EQ(got->allowed, want) << got->why;  // never a guess
                    }
                    const bool all_known = flavour != -1 && coherent != -1 && ov != -1 && chipset != -1 && bridge != -1 && group != -1 &&
                                           version != DriverGate::Unknown;
                    if (all_known) {
                      EXPECT_EQ(got->allowed, want) << got->why;
                    }
                  }
                  ++checked;
                }
  EXPECT_EQ(checked, 3 * 3 * 5 * 2 * 3 * 3 * 3 * 5);
}

// The unknowns that decide alone: the answer the driver gives depends on them, so it is unknown.
TEST(TruthGate, AnUnknownThatDecidesStaysUnknown) {
  GateInput chipset;  // Grace with a PCIe GPU, open module, override 0: nv_pci_has_common_pci_switch decides
  chipset.flavour = 1;
  chipset.coherent = 0;
  chipset.override_value = 0;
  chipset.unsupported_chipset = true;
  chipset.same_iommu_group = 0;
  const GateResult a = exporter_gate(chipset);  // common_bridge -1
  EXPECT_EQ(a.dmabuf_default.allowed, -1) << a.dmabuf_default.why;
  EXPECT_EQ(a.nvidia_p2p.allowed, -1) << a.nvidia_p2p.why;
  EXPECT_EQ(a.dmabuf_pcie.allowed, 0) << a.dmabuf_pcie.why;  // non-coherent: FORCE_PCIE refused whatever the bridge

  GateInput gh200;  // coherent, override 0: FORCE_PCIE needs the GPU's and the NIC's IOMMU group to be one
  gh200.flavour = 1;
  gh200.coherent = 1;
  gh200.override_value = 0;
  gh200.common_bridge = 1;
  const GateResult b = exporter_gate(gh200);  // same_iommu_group -1
  EXPECT_EQ(b.dmabuf_pcie.allowed, -1) << b.dmabuf_pcie.why;
  EXPECT_EQ(b.dmabuf_default.allowed, 1);  // coherent: the PCIe topology is not checked
  EXPECT_EQ(b.nvidia_p2p.allowed, 1);
}

// Whether the chipset is on RM's list unknown (Neoverse V2 cores, no root port's ids in the input):
// nv_grdma_pci_topology_supported allows a GPU and a NIC with an upstream bridge in common either
// way (distrusted: nv_pci_has_common_pci_switch; trusted: allowed), so that answer is known; without
// one, or where the bridge is not known, the chipset decides and the answer is unknown.
TEST(TruthGate, AnUnknownChipsetDecidesOnlyWithoutACommonBridge) {
  for (int bridge : {1, 0, -1}) {
    SCOPED_TRACE(bridge);
    GateInput in;
    in.flavour = 1;
    in.coherent = 0;
    in.override_value = 0;
    in.unsupported_chipset = -1;
    in.common_bridge = bridge;
    in.same_iommu_group = 1;
    in.driver = DriverGate::Full;
    const GateResult g = exporter_gate(in);
    const int want = bridge == 1 ? 1 : -1;
    EXPECT_EQ(g.dmabuf_default.allowed, want) << g.dmabuf_default.why;
    EXPECT_EQ(g.nvidia_p2p.allowed, want) << g.nvidia_p2p.why;
    EXPECT_EQ(g.dmabuf_pcie.allowed, 0) << g.dmabuf_pcie.why;  // not coherent
  }
}

// Where the override is what is unknown, the answer says what the driver's default (0) decides
// for this topology, from the oracle with the override fixed at 0.
TEST(TruthGate, AnUnknownOverrideSaysWhatTheDefaultDecides) {
  const char* verb[] = {"refuses", "allows"};
  for (bool vm : {false, true})
    for (bool chipset : {false, true})
      for (int bridge : {-1, 0, 1}) {
        GateInput in;
        in.flavour = 1;
        in.coherent = 0;
        in.override_value = -1;
        in.passthrough_vm = vm;
        in.unsupported_chipset = chipset;
        in.common_bridge = bridge;
        in.same_iommu_group = 1;
        in.driver = DriverGate::Full;  // 580.142's wording
        SCOPED_TRACE(describe(in));
        GateInput zero = in;
        zero.override_value = 0;
        const int by_default = decided(completions(zero), nvidia_p2p);
        const std::string want = std::string("(default 0 ") + (by_default == -1 ? "leaves open" : verb[by_default]) + " this topology)";
        const GateResult g = exporter_gate(in);
        EXPECT_EQ(g.nvidia_p2p.allowed, -1);
        EXPECT_NE(g.nvidia_p2p.why.find("NVreg_GrdmaPciTopoCheckOverride not in this input " + want), std::string::npos)
            << g.nvidia_p2p.why;
      }
  for (int group : {0, 1}) {
    GateInput in;
    in.flavour = 1;
    in.coherent = 1;
    in.override_value = -1;
    in.same_iommu_group = group;
    in.driver = DriverGate::Full;
    SCOPED_TRACE(describe(in));
    GateInput zero = in;
    zero.override_value = 0;
    const int by_default = decided(completions(zero), dmabuf_pcie);
    const GateResult g = exporter_gate(in);
    EXPECT_EQ(g.dmabuf_pcie.allowed, -1);
    const std::string want = std::string("(default 0 ") + verb[by_default] + " the PCIe mapping type: GPU and NIC in " +
                             (group ? "one IOMMU group)" : "different IOMMU groups)");
    EXPECT_NE(g.dmabuf_pcie.why.find(want), std::string::npos) << g.dmabuf_pcie.why;
  }
}

// ---- the stage on a synthetic node ---------------------------------------------------------

using testing::FakeNode;
using testing::from_fake;
using testing::kb;

const std::string kOpen = "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build\n";
const std::string kProprietary = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.159.04  Wed Apr 29 17:32:45 UTC 2026\n";

// The switch node (GPU 03:00.0 and NIC 04:00.0 under one PCIe switch) with the nvidia module only.
FakeNode stack_node(const std::string& version, const std::string& kernel = "6.8.0") {
  FakeNode n = testing::switch_node();
  n.modules = "nvidia 1 0 - Live 0x0\nib_core 1 0 - Live 0x0\n";
  n.nvidia_version = version;
  n.osrelease = kernel + "\n";
  n.memory_peers_dir = true;  // MOFED's ib_core: the directory exists, clients as given
  return n;
}

// A GH200 GPU (10de:2342) and the NIC on a Grace CPU (ARM implementer 0x41, Neoverse V2 part
// 0xd4f), each in an IOMMU group of its own: the node the FORCE_PCIE group rule refuses.
FakeNode gh200_split_groups(const std::string& version) {
  FakeNode n = stack_node(version);
  n.cpuinfo = "processor\t: 0\nCPU implementer\t: 0x41\nCPU architecture: 8\nCPU variant\t: 0x0\nCPU part\t: 0xd4f\n";
  n.groups = {{3, "identity"}, {4, "identity"}};
  for (auto& f : n.fns) {
    if (f.bdf == "0000:03:00.0") f.device = 0x2342;
    f.iommu_group = f.bdf == "0000:04:00.0" ? 4 : 3;
  }
  return n;
}

Report run_check(const FakeNode& n, const std::vector<TarEntry>& extra = {}, std::map<std::string, std::string> env = {}) {
  CheckOptions o;
  o.env = std::move(env);
  return check(from_fake(n, extra), kb(), o);
}

const PairResult& gpu_nic(const Report& r) {
  for (const auto& p : r.pairs)
    if (p.stack) return p;
  throw std::runtime_error("no GPU x NIC pair with the stack judged");
}

const ConsumerDecision& consumer(const PairResult& p, const std::string& name) {
  for (const auto& d : p.stack->consumers)
    if (d.consumer == name) return d;
  throw std::runtime_error("no decision of " + name);
}

std::vector<const Finding*> notes(const Report& r, const std::string& rule) {
  std::vector<const Finding*> out;
  for (const auto& f : r.node_findings)
    if (f.rule == rule) out.push_back(&f);
  return out;
}

// The names each consumer's source tests under /sys/kernel/mm/memory_peers (header comment).
const std::set<std::string> kNcclNames = {"nv_mem", "nv_mem_nc"};
const std::set<std::string> kNvshmemNames = {"nv_mem", "nvidia-peermem"};
const std::set<std::string> kUcxNames = {"nv_mem"};

TEST(TruthPeerClients, EachConsumerSeesTheNamesItsSourceTests) {
  for (const std::string name : {"nv_mem", "nv_mem_nc", "nvidia-peermem", "gdrpeer", "amdgpu"}) {
    SCOPED_TRACE(name);
    // The proprietary module exports no dma-buf: a consumer has GPUDirect RDMA only through a client it sees.
    FakeNode n = stack_node(kProprietary);
    n.memory_peers = {name};
    const Report r = run_check(n);
    const PairResult& p = gpu_nic(r);
    EXPECT_EQ(consumer(p, "nccl").gdr, kNcclNames.count(name) ? 1 : 0) << consumer(p, "nccl").why;
    EXPECT_EQ(consumer(p, "nvshmem").path, kNvshmemNames.count(name) ? "peer-memory" : "none") << consumer(p, "nvshmem").why;
    EXPECT_EQ(consumer(p, "ucx").path, kUcxNames.count(name) ? "peer-memory" : "none") << consumer(p, "ucx").why;
    // The peer-clients note names them, in the order NCCL, NVSHMEM, UCX.
    std::string who;
    for (const auto& [c, names] :
         {std::pair<const char*, const std::set<std::string>*>{"NCCL", &kNcclNames}, {"NVSHMEM", &kNvshmemNames}, {"UCX", &kUcxNames}})
      if (names->count(name)) who += (who.empty() ? "" : ", ") + std::string(c);
    const auto pc = notes(r, "peer-clients");
    ASSERT_EQ(pc.size(), 1u);
    if (who.empty()) {
      EXPECT_NE(pc[0]->reason.find(name + " 1.0, seen by none of NCCL, NVSHMEM, UCX"), std::string::npos) << pc[0]->reason;
      EXPECT_EQ(notes(r, "peer-client-invisible").size(), 1u);
    } else {
      const std::string tail = name + " 1.0, seen by " + who;  // one client: the text ends with it
      EXPECT_TRUE(pc[0]->reason.size() > tail.size() && pc[0]->reason.compare(pc[0]->reason.size() - tail.size(), tail.size(), tail) == 0)
          << pc[0]->reason;
      EXPECT_TRUE(notes(r, "peer-client-invisible").empty());
    }
  }
}

// RDMA dma-buf (ibv_reg_dmabuf_mr) needs Linux 5.12; the open module exports dma-buf; no peer client.
TEST(TruthPeerClients, DmaBufNeedsLinux512) {
  const std::pair<const char*, bool> kernels[] = {{"3.10.0-1160.el7.x86_64", false},
                                                  {"4.14.0", false},
                                                  {"4.18.0-553.el8_10.x86_64", false},
                                                  {"4.19.0-26-amd64", false},
                                                  {"5.4.0-150-generic", false},
                                                  {"5.11.0-27-generic", false},
                                                  {"5.12.0", true},
                                                  {"5.15.0-91-generic", true},
                                                  {"6.1.0-18-amd64", true},
                                                  {"6.8.0", true},
                                                  {"10.0.0", true}};
  for (const auto& [kernel, dmabuf] : kernels) {
    SCOPED_TRACE(kernel);
    const Report r = run_check(stack_node(kOpen, kernel));
    const PairResult& p = gpu_nic(r);
    for (const char* c : {"nccl", "nvshmem", "ucx"})
      EXPECT_EQ(consumer(p, c).path, dmabuf ? "dma-buf" : "none") << c << ": " << consumer(p, c).why;
  }
}

// The consumers' decisions are about a NIC registering GPU memory (NCCL's net transport,
// NVSHMEM's and UCX's IB transports): a GPU x GPU pair (NCCL's p2p transport) gets none of them,
// nor does a GPU of another vendor (AMD's MI300X, 1002:74a1: its memory is not NVIDIA's to gate).
TEST(TruthPairs, OnlyNvidiaGpuAndNicPairsGetTheStack) {
  FakeNode n = stack_node(kProprietary);  // no peer client, no dma-buf: every consumer has something to say
  const std::string up = "/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0";
  testing::add_port(n, "0000:02:02.0", up + "/0000:02:02.0", testing::kDownstream, 5, 0x10b5, 0x9797).acs = true;
  testing::add_endpoint(n, "0000:05:00.0", up + "/0000:02:02.0/0000:05:00.0", 0x10de, 0x2330, 0x030200);
  testing::add_port(n, "0000:02:03.0", up + "/0000:02:03.0", testing::kDownstream, 6, 0x10b5, 0x9797).acs = true;
  testing::add_endpoint(n, "0000:06:00.0", up + "/0000:02:03.0/0000:06:00.0", 0x1002, 0x74a1, 0x038000);
  const Topology t = from_fake(n);
  const Report r = check(t, kb(), CheckOptions{});
  int nvidia_nic = 0;
  for (const auto& p : r.pairs) {
    const Device& a = t.devices[p.a];
    const Device& b = t.devices[p.b];
    SCOPED_TRACE(a.bdf + " - " + b.bdf);
    const bool judged = a.vendor == 0x10de && b.role == Role::NIC;
    EXPECT_EQ(p.stack != nullptr, judged);
    bool consumer_finding = false;
    for (const auto& f : p.findings) consumer_finding = consumer_finding || f.rule.rfind("consumer-", 0) == 0 || f.rule == "exporter-gate";
    EXPECT_EQ(consumer_finding, judged);
    nvidia_nic += judged;
  }
  EXPECT_EQ(nvidia_nic, 2);       // 03:00.0 and 05:00.0 with the NIC
  EXPECT_GE(r.pairs.size(), 4u);  // and the GPU pairs, the AMD GPU's with the NIC
}

// ---- what the consumers' access(2) calls find, from the files of the input ----------------

TarEntry dir(const std::string& path) { return {TarEntry::Type::Directory, path.substr(1), ""}; }
TarEntry file(const std::string& path, const std::string& data) { return {TarEntry::Type::File, path.substr(1), data}; }

Topology read_as(const FakeNode& n, const std::vector<TarEntry>& extra, const std::string& source) {
  std::vector<TarEntry> e = n.entries();
  e.insert(e.end(), extra.begin(), extra.end());
  auto fs = make_tar_fs(write_tar(e), source);
  Topology t = parse_sysfs(*fs, source);
  assign_roles(t, kb());
  return t;
}

// They test /sys/kernel/mm/memory_peers/<name>/version: a client directory without its version
// file is no client to any of them.
TEST(TruthFacts, AClientWithoutItsVersionFileIsNone) {
  const Report r = run_check(stack_node(kProprietary), {dir("/sys/kernel/mm/memory_peers/nv_mem")});
  const PairResult& p = gpu_nic(r);
  EXPECT_EQ(consumer(p, "nccl").gdr, 0) << consumer(p, "nccl").why;
  EXPECT_EQ(consumer(p, "nvshmem").path, "none");
  EXPECT_EQ(consumer(p, "ucx").path, "none");
}

// /sys/module/nvidia_peermem/version is what NCCL, NVSHMEM and UCX test for the module, whatever
// /proc/modules lists.
TEST(TruthFacts, NvidiaPeermemBySysModule) {
  const Report r = run_check(stack_node(kProprietary), {file("/sys/module/nvidia_peermem/version", "580.159.04\n")});
  const PairResult& p = gpu_nic(r);
  EXPECT_EQ(consumer(p, "nccl").gdr, 1) << consumer(p, "nccl").why;
  EXPECT_EQ(consumer(p, "nvshmem").path, "peer-memory");
  EXPECT_EQ(consumer(p, "ucx").path, "peer-memory");
}

// A copy of sysfs without /sys/kernel/mm/memory_peers cannot tell whether a loaded peer module
// registered nv_mem there (the directory may just not have been copied): unknown. On the live
// node the directory's absence is the answer (ib_core is the kernel's own): no client. Without a
// peer module loaded there is none either way. UCX also tests /sys/module/nv_peer_mem/version.
TEST(TruthFacts, MemoryPeersNotInTheInput) {
  FakeNode n = stack_node(kProprietary);
  n.memory_peers_dir = false;
  n.modules = "nvidia 1 0 - Live 0x0\nnv_peer_mem 1 0 - Live 0x0\nib_core 1 0 - Live 0x0\n";
  const std::vector<TarEntry> module = {file("/sys/module/nv_peer_mem/version", "1.3-0\n")};
  {
    const Topology t = read_as(n, module, "node.tar");
    const Report r = check(t, kb(), CheckOptions{});
    const PairResult& p = gpu_nic(r);
    EXPECT_EQ(consumer(p, "nccl").gdr, -1) << consumer(p, "nccl").why;
    EXPECT_EQ(consumer(p, "nvshmem").path, "unknown") << consumer(p, "nvshmem").why;
    EXPECT_EQ(consumer(p, "ucx").path, "peer-memory") << consumer(p, "ucx").why;
  }
  {
    const Topology t = read_as(n, module, "live sysfs");
    const Report r = check(t, kb(), CheckOptions{});
    const PairResult& p = gpu_nic(r);
    EXPECT_EQ(consumer(p, "nccl").gdr, 0) << consumer(p, "nccl").why;
    EXPECT_EQ(consumer(p, "nvshmem").path, "none") << consumer(p, "nvshmem").why;
    EXPECT_EQ(consumer(p, "ucx").path, "peer-memory") << consumer(p, "ucx").why;
  }
  n.modules = "nvidia 1 0 - Live 0x0\nib_core 1 0 - Live 0x0\n";
  const Topology t = read_as(n, {}, "node.tar");
  const Report r = check(t, kb(), CheckOptions{});
  const PairResult& p = gpu_nic(r);
  EXPECT_EQ(consumer(p, "nccl").gdr, 0) << consumer(p, "nccl").why;
  EXPECT_EQ(consumer(p, "nvshmem").path, "none");
  EXPECT_EQ(consumer(p, "ucx").path, "none");
}

// A kernel release the input does not give (or that is not "major.minor...") leaves RDMA dma-buf
// unknown, and with it the consumers' GPUDirect RDMA through the open module.
TEST(TruthFacts, KernelReleaseNotReadLeavesDmaBufUnknown) {
  for (const char* kernel : {"", "6", "linux"}) {
    SCOPED_TRACE(kernel);
    const Report r = run_check(stack_node(kOpen, kernel));
    const PairResult& p = gpu_nic(r);
    EXPECT_EQ(consumer(p, "nccl").gdr, -1) << consumer(p, "nccl").why;
    for (const char* c : {"nvshmem", "ucx"}) EXPECT_NE(consumer(p, c).path, "dma-buf") << c;
    for (const char* c : {"nvshmem", "ucx"}) EXPECT_NE(consumer(p, c).path, "none") << c;
  }
}

// ---- a translating IOMMU with the NVIDIA driver's DmaRemapPeerMmio --------------------------

// The real params file of the project's H200 node (tests/reference/stack: DmaRemapPeerMmio: 1).
std::string h200_params() { return testing::slurp(testing::reference("stack/h200-580.159.04-open-params.txt")); }

FakeNode translated(const std::string& modules) {
  FakeNode n = stack_node(kOpen);
  n.modules = modules;
  n.groups = {{3, "DMA"}};
  for (auto& f : n.fns) f.iommu_group = 3;
  return n;
}

const Finding* iommu_finding(const PairResult& p) {
  for (const auto& f : p.findings)
    if (f.rule == "iommu-translating") return &f;
  return nullptr;
}

// open-gpu-kernel-modules 580.142 nv-reg.h / nv-dma.c nv_dma_map_peer: with DmaRemapPeerMmio=1
// (the default) the driver maps the GPU's BAR for the peer with dma_map_resource(), creating the
// IOMMU mappings, for nvidia_p2p_dma_map_pages (nvidia_peermem) and dma-buf; with 0 it hands out
// CPU physical addresses and creates none. The legacy nv_peer_mem takes nvidia_p2p_get_pages'
// physical pages, never mapped for the NIC. Where the PCIe rules block a translating IOMMU, only
// the mapped paths make it work (at a cost: degraded).
TEST(TruthIommu, DmaRemapPeerMmioDecidesWhetherTheIommuBlocks) {
  const std::string params = h200_params();
  ASSERT_NE(params.find("DmaRemapPeerMmio: 1"), std::string::npos);
  struct Case {
    const char* what;
    std::string modules, params;
    bool params_file;
    Verdict want;
  };
  const std::string base = "nvidia 1 0 - Live 0x0\nib_core 1 0 - Live 0x0\n";
  const std::string legacy = base + "nv_peer_mem 1 0 - Live 0x0\n";
  const std::string both = legacy + "nvidia_peermem 1 0 - Live 0x0\n";
  std::string remap0 = params;
  remap0.replace(remap0.find("DmaRemapPeerMmio: 1"), 19, "DmaRemapPeerMmio: 0");
  std::string unset = params;
  unset.erase(unset.find("DmaRemapPeerMmio: 1"), 20);
  const Case cases[] = {
      {"remap 1, dma-buf / nvidia_peermem", base, params, true, Verdict::Degraded},
      {"remap 1, legacy nv_peer_mem alone", legacy, params, true, Verdict::Blocked},
      {"remap 1, nvidia_peermem beside nv_peer_mem", both, params, true, Verdict::Degraded},
      {"remap 0", base, remap0, true, Verdict::Blocked},
      {"remap not listed", base, unset, true, Verdict::Blocked},
      {"no params file", base, "", false, Verdict::Blocked},
  };
  std::string plain_reason;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    std::vector<TarEntry> extra;
    if (c.params_file) extra.push_back(file("/proc/driver/nvidia/params", c.params));
    const Report r = run_check(translated(c.modules), extra);
    const PairResult& p = gpu_nic(r);
    const Finding* f = iommu_finding(p);
    ASSERT_TRUE(f);
    EXPECT_EQ(f->severity, c.want) << f->reason;
    EXPECT_EQ(p.verdict, std::max(c.want, p.verdict));
    if (c.want == Verdict::Degraded) {
      EXPECT_EQ(f->fix.rfind("gdrpeer verify", 0), 0u) << f->fix;
      // the PCIe rule's own fix follows (AMD CPU: amd_iommu=on, kernel-parameters.txt)
      EXPECT_NE(f->fix.find("; for full speed: amd_iommu=on iommu=pt"), std::string::npos) << f->fix;
      EXPECT_NE(f->reason.find("NVreg_DmaRemapPeerMmio=1"), std::string::npos) << f->reason;
    } else {
      EXPECT_EQ(f->fix.find("gdrpeer verify"), std::string::npos) << f->fix;
      EXPECT_EQ(f->reason.find("NVreg_DmaRemapPeerMmio=0") != std::string::npos, c.params == remap0) << f->reason;
    }
    if (!c.params_file) plain_reason = f->reason;
  }
  // Without the parameter the PCIe rule's finding stands as it is.
  const Report r = run_check(translated(base), {file("/proc/driver/nvidia/params", unset)});
  EXPECT_EQ(iommu_finding(gpu_nic(r))->reason, plain_reason);
}

// ---- --skip and the fixes of a refused registration -----------------------------------------

// A Grace CPU (ARM's implementer 0x41, Neoverse V2 0xd4f: TH500, on RM's list of chipsets without
// PCIe P2P, osinit.c) with the GPU and the NIC each under a root port of its own: no bridge in
// common, so nv_grdma_pci_topology_supported refuses dma-buf and nvidia_p2p alike.
FakeNode grace_two_root_ports(const std::string& version) {
  FakeNode n;
  const std::string r1 = "/sys/devices/pci0000:00/0000:00:01.0", r2 = "/sys/devices/pci0000:00/0000:00:02.0";
  testing::add_port(n, "0000:00:01.0", r1, testing::kRootPort, 1, 0x10de, 0x22b2);
  testing::add_port(n, "0000:00:02.0", r2, testing::kRootPort, 2, 0x10de, 0x22b2);
  testing::add_endpoint(n, "0000:01:00.0", r1 + "/0000:01:00.0", 0x10de, 0x2330, 0x030200);
  testing::add_endpoint(n, "0000:02:00.0", r2 + "/0000:02:00.0", 0x15b3, 0x1021, 0x020700);
  n.modules = "nvidia 1 0 - Live 0x0\nib_core 1 0 - Live 0x0\n";
  n.cpuinfo = "processor\t: 0\nCPU implementer\t: 0x41\nCPU architecture: 8\nCPU variant\t: 0x0\nCPU part\t: 0xd4f\n";
  n.nvidia_version = version;
  n.memory_peers_dir = true;
  return n;
}

const Finding* pair_finding(const PairResult& p, const std::string& rule) {
  for (const auto& f : p.findings)
    if (f.rule == rule) return &f;
  return nullptr;
}

std::vector<TarEntry> params_with_override(const std::string& v) {
  std::string params = h200_params();
  params.replace(params.find("GrdmaPciTopoCheckOverride: 0"), 28, "GrdmaPciTopoCheckOverride: " + v);
  return {file("/proc/driver/nvidia/params", params)};
}

// The fix says what lifts the refusal the driver's condition names: override 2 is removed; a
// topology the driver does not vouch for needs override 1 (whose security cost it says); the
// proprietary module (which has no dma-buf export) is replaced by the open one.
TEST(TruthGateFix, TheFixLiftsTheConditionThatRefused) {
  {
    const Report r = run_check(grace_two_root_ports(kOpen), params_with_override("0"));
    const Finding* f = pair_finding(gpu_nic(r), "exporter-gate");
    ASSERT_TRUE(f);
    EXPECT_EQ(f->severity, Verdict::Blocked);
    EXPECT_NE(f->fix.find("NVreg_GrdmaPciTopoCheckOverride=1"), std::string::npos) << f->fix;
    EXPECT_NE(f->fix.find("security trade-off"), std::string::npos) << f->fix;
  }
  {
    const Report r = run_check(stack_node(kOpen), params_with_override("2"));
    const Finding* f = pair_finding(gpu_nic(r), "exporter-gate");
    ASSERT_TRUE(f);
    EXPECT_NE(f->fix.find("remove NVreg_GrdmaPciTopoCheckOverride=2"), std::string::npos) << f->fix;
    EXPECT_EQ(f->fix.find("=1"), std::string::npos) << f->fix;
  }
  {
    // A snapshot whose CUDA probe says DMA_BUF_SUPPORTED=1 while the version file names the
    // proprietary module: the consumers take dma-buf and the driver has none to export.
    const Report r = run_check(stack_node(kProprietary), {file("/gdrpeer-snapshot/cuda-probe", "0000:03:00.0 gdr=1 dmabuf=1\n")});
    const PairResult& p = gpu_nic(r);
    EXPECT_EQ(consumer(p, "nccl").path, "dma-buf");
    const Finding* f = pair_finding(p, "exporter-gate");
    ASSERT_TRUE(f);
    EXPECT_NE(f->fix.find("install the open NVIDIA kernel module"), std::string::npos) << f->fix;
  }
}

// --skip takes a rule id or its group (the id's part before the first dash; docs/check.md).
TEST(TruthSkip, ARuleOrItsGroup) {
  auto skipping = [](const FakeNode& n, std::set<std::string> skip, const std::vector<TarEntry>& extra = {}) {
    CheckOptions o;
    o.skip = std::move(skip);
    return check(from_fake(n, extra), kb(), o);
  };
  auto rules_of = [](const Report& r) {
    std::set<std::string> out;
    for (const auto& p : r.pairs)
      for (const auto& f : p.findings) out.insert(f.rule);
    for (const auto& f : r.node_findings) out.insert(f.rule);
    return out;
  };
  const FakeNode grace = grace_two_root_ports(kOpen);
  const std::vector<TarEntry> params = params_with_override("0");
  ASSERT_TRUE(rules_of(skipping(grace, {}, params)).count("exporter-gate"));
  EXPECT_FALSE(rules_of(skipping(grace, {"exporter-gate"}, params)).count("exporter-gate"));
  EXPECT_FALSE(rules_of(skipping(grace, {"exporter"}, params)).count("exporter-gate"));
  const FakeNode none = stack_node(kProprietary);  // no client, no dma-buf: consumer-nccl, -nvshmem, -ucx
  const std::set<std::string> all = rules_of(skipping(none, {}));
  for (const char* c : {"consumer-nccl", "consumer-nvshmem", "consumer-ucx", "nvidia-driver"}) ASSERT_TRUE(all.count(c)) << c;
  const std::set<std::string> group = rules_of(skipping(none, {"consumer"}));
  for (const char* c : {"consumer-nccl", "consumer-nvshmem", "consumer-ucx"}) EXPECT_FALSE(group.count(c)) << c;
  EXPECT_TRUE(group.count("nvidia-driver"));
  const std::set<std::string> one = rules_of(skipping(none, {"consumer-ucx"}));
  EXPECT_TRUE(one.count("consumer-nccl") && one.count("consumer-nvshmem") && !one.count("consumer-ucx"));
  EXPECT_FALSE(rules_of(skipping(none, {"nvidia-driver"})).count("nvidia-driver"));
  EXPECT_FALSE(rules_of(skipping(none, {"nvidia"})).count("nvidia-driver"));
}

// ---- the node notes: the driver as its files give it -------------------------------------

// "Name: value" lines of a params file, as the driver prints them (nv-procfs.c: "%s: %u" / "%s: \"%s\"").
std::map<std::string, std::string> params_of(const std::string& text) {
  std::map<std::string, std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    const size_t colon = line.find(": ");
    if (colon == std::string::npos) continue;
    std::string v = line.substr(colon + 2);
    if (v.size() >= 2 && v.front() == '"' && v.back() == '"') v = v.substr(1, v.size() - 2);
    out[line.substr(0, colon)] = v;
  }
  return out;
}

// text with its one `from` replaced by `to` (the test fails where `from` is not there).
std::string replaced(std::string text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

std::string only_note(const Report& r, const std::string& rule) {
  const auto n = notes(r, rule);
  EXPECT_EQ(n.size(), 1u) << rule;
  return n.empty() ? "" : n[0]->reason;
}

// The driver note: the version and flavour /proc/driver/nvidia/version names, the GPUDirect
// parameters as the real H200 params file gives them ("(unset)" where it has none or ""), the
// RegistryDwords keys (nv-reg.h: they override the static option), and what is not in the input.
TEST(TruthNotes, TheDriverAsItsFilesSayIt) {
  const std::string text = h200_params();
  const auto file_params = params_of(text);
  ASSERT_EQ(file_params.size(), 42u);
  std::string want_params = "; GPUDirect parameters:";
  for (const char* p : {"GrdmaPciTopoCheckOverride", "DmaRemapPeerMmio", "EnableStreamMemOPs", "PeerMappingOverride", "RMForceStaticBar1",
                        "EnableResizableBar", "CoherentGPUMemoryMode"}) {
    auto it = file_params.find(p);
    want_params += std::string(" ") + p + "=" + (it == file_params.end() || it->second.empty() ? "(unset)" : it->second);
  }
  const std::vector<TarEntry> params = {file("/proc/driver/nvidia/params", text)};
  EXPECT_EQ(only_note(run_check(stack_node(kOpen), params), "nvidia-driver"),
            "NVIDIA driver 580.159.04 (open kernel module: exports dma-buf)" + want_params);
  EXPECT_EQ(only_note(run_check(stack_node(kProprietary)), "nvidia-driver"),
            "NVIDIA driver 580.159.04 (proprietary kernel module: no dma-buf export); /proc/driver/nvidia/params not in this input");
  EXPECT_EQ(only_note(run_check(stack_node(""), params), "nvidia-driver"),
            "NVIDIA driver (version not read) (flavour not read)" + want_params);
  EXPECT_TRUE(notes(run_check(stack_node("")), "nvidia-driver").empty());
  // RegistryDwords: its keys, and per device by pci= ("" when a key comes before any pci=).
  const std::string dwords =
      replaced(replaced(text, "RegistryDwords: \"\"", "RegistryDwords: \"PeerMappingOverride=1;RMForceStaticBar1=1\""),
               "RegistryDwordsPerDevice: \"\"", "RegistryDwordsPerDevice: \"RMPcieP2PType=1;pci=0000:03:00.0;RMPcieP2PType=2\"");
  const std::string note = only_note(run_check(stack_node(kOpen), {file("/proc/driver/nvidia/params", dwords)}), "nvidia-driver");
  EXPECT_NE(note.find(" PeerMappingOverride=1 RMForceStaticBar1=1 EnableResizableBar="), std::string::npos) << note;
  EXPECT_NE(note.find("; RegistryDwords keys: PeerMappingOverride=1 RMForceStaticBar1=1"), std::string::npos) << note;
  EXPECT_NE(note.find("; RegistryDwordsPerDevice (no pci=): RMPcieP2PType=1"), std::string::npos) << note;
  EXPECT_NE(note.find("; RegistryDwordsPerDevice 0000:03:00.0: RMPcieP2PType=2"), std::string::npos) << note;
}

// The override note appears while GrdmaPciTopoCheckOverride=1 is active, as the option or as a
// RegistryDwords key (which overrides the option, nv-reg.h), and not for 0 or 2.
TEST(TruthNotes, ActiveOverrideOne) {
  const std::string text = h200_params();
  auto with = [&](const std::string& option, const std::string& dwords) {
    const std::string t = replaced(replaced(text, "GrdmaPciTopoCheckOverride: 0", "GrdmaPciTopoCheckOverride: " + option),
                                   "RegistryDwords: \"\"", "RegistryDwords: \"" + dwords + "\"");
    const Report r = run_check(stack_node(kOpen), {file("/proc/driver/nvidia/params", t)});
    return notes(r, "nvidia-override").size();
  };
  EXPECT_EQ(with("1", ""), 1u);
  EXPECT_EQ(with("0", ""), 0u);
  EXPECT_EQ(with("2", ""), 0u);
  EXPECT_EQ(with("0", "GrdmaPciTopoCheckOverride=1"), 1u);
  EXPECT_EQ(with("1", "GrdmaPciTopoCheckOverride=0"), 0u);
}

// modprobe.d(5): `options nvidia NVreg_X=v`; repeated, the later one is what the kernel applies
// (parse_args() assigns each in turn). A configured value other than the running one applies at
// the next load; options of other modules, blacklists and keys the driver does not list are no
// pending parameter.
TEST(TruthNotes, ConfiguredButNotActive) {
  const std::vector<TarEntry> params = {file("/proc/driver/nvidia/params", h200_params())};  // Override 0, DmaRemapPeerMmio 1
  auto pending = [&](const std::string& conf, bool with_params = true) {
    std::vector<TarEntry> e = {file("/etc/modprobe.d/nvidia.conf", conf)};
    if (with_params) e.insert(e.end(), params.begin(), params.end());
    const Report r = run_check(stack_node(kOpen), e);
    std::vector<std::string> out;
    for (const Finding* f : notes(r, "nvidia-params-pending")) out.push_back(f->reason.substr(0, f->reason.find(" is configured")));
    return out;
  };
  using V = std::vector<std::string>;
  EXPECT_EQ(pending("options nvidia NVreg_GrdmaPciTopoCheckOverride=1\n"), V{"NVreg_GrdmaPciTopoCheckOverride=1"});
  EXPECT_EQ(pending("options nvidia NVreg_GrdmaPciTopoCheckOverride=1\noptions nvidia NVreg_GrdmaPciTopoCheckOverride=0\n"), V{});
  EXPECT_EQ(pending("options nvidia NVreg_GrdmaPciTopoCheckOverride=0\noptions nvidia NVreg_GrdmaPciTopoCheckOverride=1\n"),
            V{"NVreg_GrdmaPciTopoCheckOverride=1"});
  EXPECT_EQ(pending("options nvidia NVreg_DmaRemapPeerMmio=1 NVreg_GrdmaPciTopoCheckOverride=0\n"), V{});
  EXPECT_EQ(pending("options nvidia_drm NVreg_GrdmaPciTopoCheckOverride=1\noptions nvidia GrdmaPciTopoCheckOverride=1\n"), V{});
  EXPECT_EQ(pending("options nvidia NVreg_NoSuchParameter=1\nblacklist nvidia\n"), V{});
  EXPECT_EQ(pending("options nvidia NVreg_GrdmaPciTopoCheckOverride=1\n", false), V{});  // the running value is not in the input
  EXPECT_EQ(pending("options nvidia NVreg_RegistryDwords=\"PeerMappingOverride=1\"\n", false), V{});
  // Parameter names are case-sensitive (the kernel's parse_args): nvreg_ is not the driver's option.
  EXPECT_EQ(pending("options nvidia nvreg_GrdmaPciTopoCheckOverride=1 NVREG_EnableStreamMemOPs=1\n"), V{});
  // A value against an empty running one (CoherentGPUMemoryMode: "" in the H200 file) is pending.
  EXPECT_EQ(pending("options nvidia NVreg_CoherentGPUMemoryMode=driver\n"), V{"NVreg_CoherentGPUMemoryMode=driver"});
  // A RegistryDwords key configured as it runs is not pending.
  {
    const std::string running = replaced(h200_params(), "RegistryDwords: \"\"", "RegistryDwords: \"PeerMappingOverride=1\"");
    const Report r = run_check(stack_node(kOpen),
                               {file("/etc/modprobe.d/nvidia.conf", "options nvidia NVreg_RegistryDwords=\"PeerMappingOverride=1\"\n"),
                                file("/proc/driver/nvidia/params", running)});
    EXPECT_TRUE(notes(r, "nvidia-params-pending").empty());
  }
  // RegistryDwords keys against the running ones ("(unset)" when it has none).
  EXPECT_EQ(pending("options nvidia NVreg_RegistryDwords=\"PeerMappingOverride=1\"\n"), V{"NVreg_RegistryDwords PeerMappingOverride=1"});
  const Report r =
      run_check(stack_node(kOpen),
                {file("/etc/modprobe.d/nvidia.conf", "options nvidia NVreg_RegistryDwords=\"PeerMappingOverride=1\"\n"), params[0]});
  const auto n = notes(r, "nvidia-params-pending");
  ASSERT_EQ(n.size(), 1u);
  EXPECT_NE(n[0]->reason.find("runs with RegistryDwords PeerMappingOverride=(unset)"), std::string::npos) << n[0]->reason;
  EXPECT_NE(n[0]->reason.find("(/etc/modprobe.d/nvidia.conf:1)"), std::string::npos) << n[0]->reason;
}

// ---- peer-memory clients as MOFED's ib_core lists them ------------------------------------

// A client directory as ib_core's peer_mem.c makes it: version and counters (values from the
// memory_peers listing in NVIDIA's GDS troubleshooting guide, as tests/reference/stack/README.md).
std::vector<TarEntry> client_dir(const std::string& name, bool version, bool counters) {
  const std::string d = "/sys/kernel/mm/memory_peers/" + name;
  std::vector<TarEntry> e = {dir(d)};
  if (version) e.push_back(file(d + "/version", "580.159.04\n"));
  if (counters)
    for (const auto& [k, v] :
         {std::pair<const char*, const char*>{"num_alloc_mrs", "1288"}, {"num_reg_bytes", "1350565888"}, {"num_free_callbacks", "0"}})
      e.push_back(file(d + "/" + k, std::string(v) + "\n"));
  return e;
}

TEST(TruthPeerClients, TheNoteListsEachClientWithItsCounters) {
  std::vector<TarEntry> e = client_dir("nv_mem", true, true);
  for (const auto& x : client_dir("nvidia-fs", false, false)) e.push_back(x);
  const Report r = run_check(stack_node(kOpen), e);
  EXPECT_EQ(only_note(r, "peer-clients"),
            "peer-memory clients registered in /sys/kernel/mm/memory_peers: nv_mem 580.159.04, 1288 MRs, 1350565888 bytes registered, "
            "seen by NCCL, NVSHMEM, UCX; nvidia-fs (no version file), seen by none of NCCL, NVSHMEM, UCX (they look for nv_mem, nv_mem_nc, "
            "nvidia-peermem)");
  // nvidia-fs is GPUDirect Storage's client (the GDS guide's listing): not one the RDMA consumers are meant to see.
  EXPECT_TRUE(notes(r, "peer-client-invisible").empty());
  EXPECT_TRUE(notes(run_check(stack_node(kOpen)), "peer-clients").empty());  // no client: no note
}

// An unseen client's note: gdrpeer's own says how to register it under nv_mem; another has no fix.
TEST(TruthPeerClients, InvisibleClientFix) {
  for (const std::string name : {"gdrpeer", "amdgpu"}) {
    FakeNode n = stack_node(kOpen);
    n.memory_peers = {name};
    const Report r = run_check(n);
    const auto inv = notes(r, "peer-client-invisible");
    ASSERT_EQ(inv.size(), 1u) << name;
    EXPECT_EQ(inv[0]->fix.find("peermem_name=nv_mem") != std::string::npos, name == "gdrpeer") << inv[0]->fix;
    EXPECT_EQ(inv[0]->fix.empty(), name != "gdrpeer") << inv[0]->fix;
  }
}

// gdrpeer's client is named in the note with its CUDA line only under the name it registered.
TEST(TruthPeerClients, GdrpeerClientLine) {
  FakeNode n = stack_node(kOpen);
  n.memory_peers = {"gdrpeer", "nv_mem"};
  const std::string line = "claimed through the nvidia provider, callback pins (peermem_cuda=auto, nvidia_peermem not loaded)";
  const std::vector<TarEntry> e = {file("/sys/module/gdrpeer/parameters/peermem_name", "gdrpeer\n"),
                                   file("/sys/class/gdrpeer/gdrpeer/providers/peermem/cuda", line + "\n")};
  const std::string note = only_note(run_check(n, e), "peer-clients");
  EXPECT_NE(note.find("gdrpeer 1.0, seen by none of NCCL, NVSHMEM, UCX (they look for nv_mem, nv_mem_nc, nvidia-peermem) (gdrpeer's "
                      "client; CUDA addresses: " +
                      line + ")"),
            std::string::npos)
      << note;
  EXPECT_EQ(note.find("seen by NCCL, NVSHMEM, UCX (gdrpeer's"), std::string::npos) << note;  // not on nv_mem's entry
  // Without the cuda line, no such remark.
  const std::string bare = only_note(run_check(n, {e[0]}), "peer-clients");
  EXPECT_EQ(bare.find("gdrpeer's client"), std::string::npos) << bare;
}

// nvidia-peermem.c registers its client as "nv_mem" (DRV_NAME), and with
// persistent_api_support=0 also "nv_mem_nc"; nv_peer_mem registers nv_mem. A loaded module with
// neither registered is a module whose ib_register_peer_memory_client found no PeerDirect
// ib_core. A copy of sysfs without memory_peers cannot say; the live node can.
TEST(TruthPeerClients, LoadedButUnregistered) {
  struct Case {
    const char* what;
    std::string modules;
    std::vector<std::string> clients;
    bool dir;
    std::string source;
    int want;  // 0 none, 1 the note naming nvidia_peermem, 2 naming nv_peer_mem
  };
  const std::string base = "nvidia 1 0 - Live 0x0\nib_core 1 0 - Live 0x0\n";
  const std::string peermem = base + "nvidia_peermem 1 0 - Live 0x0\n", legacy = base + "nv_peer_mem 1 0 - Live 0x0\n";
  const Case cases[] = {
      {"nvidia_peermem, none registered", peermem, {}, true, "node.tar", 1},
      {"nv_peer_mem, none registered", legacy, {}, true, "node.tar", 2},
      {"nvidia_peermem, nv_mem", peermem, {"nv_mem"}, true, "node.tar", 0},
      {"nvidia_peermem, nv_mem_nc", peermem, {"nv_mem_nc"}, true, "node.tar", 0},
      {"nvidia_peermem, another client only", peermem, {"gdrpeer"}, true, "node.tar", 1},
      {"no peer module", base, {}, true, "node.tar", 0},
      {"nvidia_peermem, memory_peers not in the copy", peermem, {}, false, "node.tar", 0},
      {"nvidia_peermem, live node without memory_peers", peermem, {}, false, "live sysfs", 1},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    FakeNode n = stack_node(kOpen);
    n.modules = c.modules;
    n.memory_peers = c.clients;
    n.memory_peers_dir = c.dir;
    const Topology t = read_as(n, {}, c.source);
    const Report r = check(t, kb(), CheckOptions{});
    const auto u = notes(r, "peermem-unregistered");
    ASSERT_EQ(u.size(), c.want ? 1u : 0u);
    if (!c.want) continue;
    EXPECT_EQ(u[0]->reason.rfind(c.want == 1 ? "nvidia_peermem is loaded" : "nv_peer_mem is loaded", 0), 0u) << u[0]->reason;
    EXPECT_EQ(u[0]->reason.find("(the directory is absent") != std::string::npos, !c.dir) << u[0]->reason;
  }
}

// /sys/module/nvidia_peermem/parameters: the note says which clients persistent_api_support gives.
TEST(TruthPeerClients, PeermemParameters) {
  auto note_for = [](const std::vector<TarEntry>& e) {
    const Report r = run_check(stack_node(kOpen), e);
    const auto n = notes(r, "peermem-params");
    return n.empty() ? std::string() : n[0]->reason;
  };
  const std::string d = "/sys/module/nvidia_peermem/";
  EXPECT_EQ(note_for({file(d + "version", "580.159.04\n"), file(d + "parameters/peerdirect_support", "0\n"),
                      file(d + "parameters/persistent_api_support", "0\n")}),
            "nvidia_peermem parameters: peerdirect_support=0 persistent_api_support=0 (legacy: clients nv_mem and nv_mem_nc)");
  EXPECT_EQ(note_for({file(d + "version", "580.159.04\n"), file(d + "parameters/persistent_api_support", "1\n")}),
            "nvidia_peermem parameters: persistent_api_support=1 (client nv_mem, persistent pages)");
  EXPECT_EQ(note_for({file(d + "version", "580.159.04\n")}), "");  // no parameters directory: no note
  // Without persistent_api_support listed the driver's default (1, nvidia-peermem.c) holds.
  EXPECT_EQ(note_for({file(d + "version", "580.159.04\n"), file(d + "parameters/peerdirect_support", "0\n")}),
            "nvidia_peermem parameters: peerdirect_support=0 (client nv_mem, persistent pages)");
}

// ---- kernel-log causes -------------------------------------------------------------------

// Each kind of line says its cause; the lines are the kernel's and the modules' own messages:
// nvidia-peermem.c peer_err() ("nvidia-peermem %s:%d ERROR "), nv-dmabuf.c's attach refusal,
// kernel/module's "disagrees about version of symbol" / "Unknown symbol" (see README there).
TEST(TruthLog, EachKindNamesItsCause) {
  struct Case {
    const char* line;
    const char* why;  // part of the note
    const char* fix;  // part of its fix
  };
  const Case cases[] = {
      {"[   9.1] nvidia_peermem: disagrees about version of symbol ib_register_peer_memory_client", "another ib_core than the one running",
       "against the running OFED"},
      {"[   9.1] nv_peer_mem: disagrees about version of symbol nvidia_p2p_get_pages", "another NVIDIA driver than the one running",
       "against the running NVIDIA driver"},
      {"[   9.2] nvidia_peermem: Unknown symbol ib_register_peer_memory_client (err -2)", "needs the PeerDirect API", "openibd"},
      {"[   9.3] failing symbol_get of non-GPLONLY symbol ib_register_peer_memory_client.", "EXPORT_SYMBOL_GPL",
       "links ib_register_peer_memory_client directly"},
      {"[   9.4] nvidia-peermem nv_mem_param_peerdirect_conf_check:619 ERROR invalid peerdirect_support param value 2",
       "nvidia-peermem's init failed", "peerdirect_support 0|1"},
      {"[   9.5] NVRM: dma-buf attach failed: PCI topology not supported for dma-buf", "refused a dma-buf attach",
       "exporter-gate findings"},
      // kernel/module: "Unknown symbol" = no loaded module exports it; nvidia_p2p_* are nvidia.ko's.
      {"[   9.6] nv_peer_mem: Unknown symbol nvidia_p2p_get_pages (err -2)", "found no nvidia_p2p_* symbols",
       "modprobe nvidia && modprobe nv_peer_mem"},
      // symbol_get() of a symbol exported without _GPL is refused whichever module exports it
      {"[   9.7] failing symbol_get of non-GPLONLY symbol nvidia_p2p_get_pages.", "EXPORT_SYMBOL_GPL", "rebuild the module"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.line);
    const Report r = run_check(stack_node(kOpen), {file("/gdrpeer-snapshot/kernel-log", std::string(c.line) + "\n")});
    const auto n = notes(r, "peermem-load-failed");
    ASSERT_EQ(n.size(), 1u);
    EXPECT_NE(n[0]->reason.find(c.why), std::string::npos) << n[0]->reason;
    EXPECT_NE(n[0]->fix.find(c.fix), std::string::npos) << n[0]->fix;
  }
}

// ---- the gate's node inputs: the chipset list, a passthrough VM, the override ---------------

// GPU and NIC under root ports of their own (no bridge in common) on the CPU `cpuinfo` names,
// with the DMI strings given and the params file with GrdmaPciTopoCheckOverride=`ov` ("" none).
GateResult gate_on(const std::string& cpuinfo, const std::string& dmi_vendor, const std::string& dmi_product, const std::string& ov) {
  FakeNode n = grace_two_root_ports(kOpen);
  n.cpuinfo = cpuinfo;
  std::vector<TarEntry> e;
  if (!ov.empty()) e = params_with_override(ov);
  if (!dmi_vendor.empty()) e.push_back(file("/sys/class/dmi/id/sys_vendor", dmi_vendor + "\n"));
  if (!dmi_product.empty()) e.push_back(file("/sys/class/dmi/id/product_name", dmi_product + "\n"));
  const Report r = run_check(n, e);
  return gpu_nic(r).stack->gate;
}

// osinit.c _checkP2pChipsetSupport: CS_NVIDIA_TH500 (Grace), CS_AMPERE_ALTRA, CS_AMPERE_AMPEREONE160
// have no PCIe P2P: without a common bridge nv_grdma_pci_topology_supported refuses, unless the
// GPU runs passed through to a VM (NV_FLAG_PASSTHRU, set from RM's IS_PASSTHRU: the hypervisor the
// guest sees, not the DMI vendor of a cloud's bare-metal machine) or the override says 1; with no
// params file the override is not known.
TEST(TruthPlatform, ChipsetListPassthroughAndOverride) {
  const std::string grace = "processor\t: 0\nCPU implementer\t: 0x41\nCPU architecture: 8\nCPU variant\t: 0x0\nCPU part\t: 0xd4f\n";
  const std::string ampere_one = "processor\t: 0\nCPU implementer\t: 0xc0\nCPU part\t: 0xac3\n";
  const std::string neoverse_n1 = "processor\t: 0\nCPU implementer\t: 0x41\nCPU part\t: 0xd0c\n";
  const std::string no_ids = "processor\t: 0\nBogoMIPS\t: 50.00\n";
  struct Case {
    const char* what;
    std::string cpu, vendor, product, ov;
    int want;  // dma-buf default type and nvidia_p2p
  };
  const Case cases[] = {
      {"Grace", grace, "", "", "0", 0},
      {"Grace, override 1", grace, "", "", "1", 1},
      {"Grace, override 2", grace, "", "", "2", 0},
      {"Grace, no params file", grace, "", "", "", -1},
      {"Grace guest (hypervisor flag)", grace + "flags\t\t: fp asimd hypervisor\n", "", "", "0", 1},
      {"Grace on a cloud's bare metal (DMI, no hypervisor flag)", grace, "Amazon EC2", "", "0", 0},
      {"AmpereOne by its implementer", ampere_one, "", "", "0", 0},
      {"AmpereOne by DMI", no_ids, "Ampere Computing", "AmpereOne A192-32X", "0", 0},
      {"Altra by DMI", neoverse_n1, "Ampere Computing", "Mt.Jade Ampere Altra", "0", 0},
      {"Neoverse N1 elsewhere (Graviton2)", neoverse_n1, "", "", "0", 1},
      {"x86", "vendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 17\nmodel name\t: AMD EPYC 9374F\n", "", "", "0", 1},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    const GateResult g = gate_on(c.cpu, c.vendor, c.product, c.ov);
    EXPECT_EQ(g.dmabuf_default.allowed, c.want) << g.dmabuf_default.why;
    EXPECT_EQ(g.nvidia_p2p.allowed, c.want) << g.nvidia_p2p.why;
    EXPECT_EQ(g.dmabuf_pcie.allowed, 0) << g.dmabuf_pcie.why;  // none of them is coherent
  }
}

// nv_grdma_pci_topology_supported on a Grace CPU with a PCIe GPU: a PCIe switch above both is
// the common bridge nv_pci_has_common_pci_switch finds. The root port is a TH500 one (10de:22b2,
// nvcst.h), which is what makes the chipset Grace's for the driver.
TEST(TruthPlatform, GraceWithACommonSwitchIsAllowed) {
  FakeNode n = testing::switch_node();
  n.modules = "nvidia 1 0 - Live 0x0\nib_core 1 0 - Live 0x0\n";
  n.nvidia_version = kOpen;
  n.cpuinfo = "processor\t: 0\nCPU implementer\t: 0x41\nCPU architecture: 8\nCPU variant\t: 0x0\nCPU part\t: 0xd4f\n";
  for (auto& f : n.fns)
    if (f.bdf == "0000:00:01.0") f.vendor = 0x10de, f.device = 0x22b2;
  const Report r = run_check(n, params_with_override("0"));
  const GateResult& g = gpu_nic(r).stack->gate;
  EXPECT_EQ(g.dmabuf_default.allowed, 1) << g.dmabuf_default.why;
  EXPECT_EQ(g.nvidia_p2p.allowed, 1) << g.nvidia_p2p.why;
  EXPECT_NE(g.nvidia_p2p.why.find("distrusts"), std::string::npos) << g.nvidia_p2p.why;
}

// RM knows Grace by a PCI function of its chipset table, not by the CPU cores: nvcst.h
// (open-gpu-kernel-modules 595.45.04, src/nvidia/arch/nvalloc/common/inc/nvcst.h chipsetInfo)
// lists NVIDIA 0x22B1, 0x22B2, 0x22B3, 0x22B4, 0x22B8, 0x22B9 as CS_NVIDIA_TH500 root ports;
// chipset.c clFindFHBAndGetChipsetInfoIndex matches the table against the node's PCI functions, and
// osinit.c _checkP2pChipsetSupport distrusts CS_NVIDIA_TH500. Grace's cores are Arm Neoverse V2
// (MIDR implementer 0x41, part 0xd4f: util-linux sys-utils/lscpu-arm.c "Neoverse-V2"), and so are
// AWS Graviton4's and Google Axion's, whose root ports are their own (Amazon's PCI vendor is 0x1d0f,
// nvdevid.h PCI_VENDOR_ID_AMAZON; no public Graviton4 lspci was found, so the Amazon device id
// below stands for any id outside RM's TH500 rows). The same GPU and NIC under root ports of
// their own (no common bridge, override 0, open module) on Neoverse V2 cores:
TEST(TruthPlatform, NeoverseV2CoresAloneDoNotMakeTheChipsetGraces) {
  struct Case {
    const char* what;
    uint16_t vendor, device;  // both root ports; 0: GPU and NIC straight on the root bus, no root port
    int want;                 // dma-buf default type and nvidia_p2p
  };
  const Case cases[] = {
      {"TH500 RP for GH100 in GH180", 0x10de, 0x22b1, 0},
      {"TH500 RP x16", 0x10de, 0x22b2, 0},
      {"TH500 RP x4", 0x10de, 0x22b3, 0},
      {"TH500 RP x1", 0x10de, 0x22b4, 0},
      {"TH500 RP x8", 0x10de, 0x22b8, 0},
      {"TH500 RP x2", 0x10de, 0x22b9, 0},
      {"an NVIDIA id next to them, not in the table", 0x10de, 0x22b5, 1},
      {"Graviton4-like: Amazon's root ports", 0x1d0f, 0x0201, 1},
      {"no root port in the input: a TH500 one may be there or not", 0, 0, -1},
  };
  const std::string epyc = "vendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 17\nmodel name\t: AMD EPYC 9374F\n";
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    FakeNode n = grace_two_root_ports(kOpen);
    if (c.vendor == 0) {
      n.fns.clear();
      testing::add_endpoint(n, "0000:00:01.0", "/sys/devices/pci0000:00/0000:00:01.0", 0x10de, 0x2330, 0x030200);
      testing::add_endpoint(n, "0000:00:02.0", "/sys/devices/pci0000:00/0000:00:02.0", 0x15b3, 0x1021, 0x020700);
    }
    for (auto& f : n.fns)
      if (c.vendor != 0 && (f.bdf == "0000:00:01.0" || f.bdf == "0000:00:02.0")) {
        f.vendor = c.vendor;
        f.device = c.device;
      }
    const Report r = run_check(n, params_with_override("0"));
    const PairResult& p = gpu_nic(r);
    const GateResult& g = p.stack->gate;
    EXPECT_EQ(g.dmabuf_default.allowed, c.want) << g.dmabuf_default.why;
    EXPECT_EQ(g.nvidia_p2p.allowed, c.want) << g.nvidia_p2p.why;
    EXPECT_EQ(g.dmabuf_pcie.allowed, 0) << g.dmabuf_pcie.why;  // a PCIe GPU: not coherent
    // The path rules call the node Grace only where the driver would.
    EXPECT_EQ(pair_finding(p, "path-grace") != nullptr, c.want == 0);
    EXPECT_EQ(pair_finding(p, "platform-arm64") != nullptr, c.want != 0);
    // An x86 CPU (AMD EPYC) there: no chipset of RM's list, whether the input has root ports or not.
    n.cpuinfo = epyc;
    const Report on_x86 = run_check(n, params_with_override("0"));
    const GateResult& x = gpu_nic(on_x86).stack->gate;
    EXPECT_EQ(x.dmabuf_default.allowed, 1) << x.dmabuf_default.why;
    EXPECT_EQ(x.nvidia_p2p.allowed, 1) << x.nvidia_p2p.why;
  }
}

// GH200's GPU (10de:2342, the grace-c2c family) is coherent: the PCIe topology is not checked for
// the default type and nvidia_p2p, and the PCIe mapping type (FORCE_PCIE) needs the GPU and the NIC
// in one IOMMU group; without an IOMMU both devices' groups are NULL and compare equal
// (nv_pci_is_valid_topology_for_direct_pci).
TEST(TruthPlatform, Gh200PcieMappingTypeByIommuGroup) {
  struct Case {
    const char* what;
    std::vector<std::pair<int, std::string>> groups;
    int gpu_group, nic_group;
    int want_pcie;
  };
  const Case cases[] = {
      {"no IOMMU", {}, -1, -1, 1},
      {"one group", {{3, "identity"}}, 3, 3, 1},
      {"two groups", {{3, "identity"}, {4, "identity"}}, 3, 4, 0},
      {"the NIC's group not in the input", {{3, "identity"}}, 3, -1, -1},
      {"the GPU's group not in the input", {{3, "identity"}}, -1, 3, -1},
      {"both in group 0 (a group number like any other)", {{0, "identity"}}, 0, 0, 1},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    FakeNode n = stack_node(kOpen);
    n.cpuinfo = "processor\t: 0\nCPU implementer\t: 0x41\nCPU architecture: 8\nCPU variant\t: 0x0\nCPU part\t: 0xd4f\n";
    n.groups = c.groups;
    for (auto& f : n.fns) {
      if (f.bdf == "0000:03:00.0") f.device = 0x2342;
      f.iommu_group = f.bdf == "0000:04:00.0" ? c.nic_group : c.gpu_group;
    }
    const Report r = run_check(n, params_with_override("0"));
    const GateResult& g = gpu_nic(r).stack->gate;
    EXPECT_EQ(g.dmabuf_default.allowed, 1) << g.dmabuf_default.why;
    EXPECT_EQ(g.nvidia_p2p.allowed, 1) << g.nvidia_p2p.why;
    EXPECT_EQ(g.dmabuf_pcie.allowed, c.want_pcie) << g.dmabuf_pcie.why;
  }
}

// ---- per pair: CUDA's answers by GPU, NVLink-C2C, another blocked finding ---------------

// NCCL reads CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED per CUDA device (src/init.cc dmaBufSupported):
// a snapshot's CUDA probe answers per GPU by its bus id, and decides over what the driver's flavour
// suggests; a GPU the probe does not list falls back to the flavour.
TEST(TruthPairs, CudaAnswersPerGpuByBusId) {
  FakeNode n = stack_node(kOpen);
  const std::string up = "/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0";
  testing::add_port(n, "0000:02:02.0", up + "/0000:02:02.0", testing::kDownstream, 5, 0x10b5, 0x9797).acs = true;
  testing::add_endpoint(n, "0000:05:00.0", up + "/0000:02:02.0/0000:05:00.0", 0x10de, 0x2330, 0x030200);
  testing::add_port(n, "0000:02:03.0", up + "/0000:02:03.0", testing::kDownstream, 6, 0x10b5, 0x9797).acs = true;
  testing::add_endpoint(n, "0000:06:00.0", up + "/0000:02:03.0/0000:06:00.0", 0x10de, 0x2330, 0x030200);
  const Topology t = from_fake(n, {file("/gdrpeer-snapshot/cuda-probe", "0000:03:00.0 gdr=1 dmabuf=0\n0000:05:00.0 gdr=1 dmabuf=1\n")});
  const Report r = check(t, kb(), CheckOptions{});
  std::map<std::string, std::string> nccl_path;
  for (const auto& p : r.pairs)
    if (p.stack) nccl_path[t.devices[p.a].bdf] = consumer(p, "nccl").path;
  EXPECT_EQ(nccl_path["0000:03:00.0"], "none");     // CUDA says no dma-buf, and no peer client
  EXPECT_EQ(nccl_path["0000:05:00.0"], "dma-buf");  // CUDA says yes
  EXPECT_EQ(nccl_path["0000:06:00.0"], "dma-buf");  // not probed: the open module exports dma-buf
}

// A GPU on NVLink-C2C (GH200, 10de:2342): NCCL's level is P2C by default (NCCL_NET_GDR_C2C=1), so
// a NIC that meets it only at the CPU still gets GDR (paths.cc ncclTopoCheckGdr), and a NIC off
// the P2C path is reached with the PCIe mapping type (net.cc). An H100 PCIe GPU (10de:2330) there
// is PHB, beyond NCCL's default level.
TEST(TruthPairs, C2cGpuGetsP2cAndThePcieMappingType) {
  const std::string grace = "processor\t: 0\nCPU implementer\t: 0x41\nCPU architecture: 8\nCPU variant\t: 0x0\nCPU part\t: 0xd4f\n";
  for (const uint16_t device : {uint16_t{0x2342}, uint16_t{0x2330}}) {
    SCOPED_TRACE(device);
    const bool c2c = device == 0x2342;
    FakeNode two = grace_two_root_ports(kOpen);
    for (auto& f : two.fns)
      if (f.bdf == "0000:01:00.0") f.device = device;
    const Report r = run_check(two, params_with_override("0"));
    const PairResult& p = gpu_nic(r);
    EXPECT_EQ(p.path.nccl_gdr, c2c);
    EXPECT_EQ(consumer(p, "nccl").gdr, c2c ? 1 : 0) << consumer(p, "nccl").why;
    FakeNode sw = stack_node(kOpen);
    sw.cpuinfo = grace;
    for (auto& f : sw.fns)
      if (f.bdf == "0000:03:00.0") f.device = device;
    const Report q = run_check(sw, params_with_override("0"));
    EXPECT_EQ(consumer(gpu_nic(q), "nccl").mapping, c2c ? "pcie" : "default");
  }
}

// The NVIDIA driver's DmaRemapPeerMmio changes what the IOMMU does to peer mappings only: another
// blocked finding of the pair (no peer client and no dma-buf) stays as it is.
TEST(TruthIommu, OtherBlockedFindingsStay) {
  FakeNode n = translated("nvidia 1 0 - Live 0x0\nib_core 1 0 - Live 0x0\n");
  n.nvidia_version = kProprietary;
  const Report r = run_check(n, {file("/proc/driver/nvidia/params", h200_params())});
  const PairResult& p = gpu_nic(r);
  const Finding* sw = pair_finding(p, "software-peer-memory");
  ASSERT_TRUE(sw);
  EXPECT_EQ(sw->severity, Verdict::Blocked);
  EXPECT_EQ(sw->reason.find("DmaRemapPeerMmio"), std::string::npos) << sw->reason;
  EXPECT_EQ(sw->fix.find("gdrpeer verify"), std::string::npos) << sw->fix;
  EXPECT_EQ(p.verdict, Verdict::Blocked);
  EXPECT_EQ(iommu_finding(p)->severity, Verdict::Degraded);
}

// ---- the consumers' findings: severity by what the job meets, the fix by the cause ----------

// GPUDirect RDMA on with a registration that will fail stops the job (blocked); GPUDirect RDMA
// off stages through host memory (degraded). The fix lifts the cause the consumer's why names.
TEST(TruthConsumerFindings, SeverityAndFixByCause) {
  const std::string peermem = "nvidia 1 0 - Live 0x0\nnvidia_peermem 1 0 - Live 0x0\nib_core 1 0 - Live 0x0\n";
  {  // nvidia_peermem loaded, no nv_mem registered: NCCL says Enabled (it tests /sys/module) and fails
    FakeNode n = stack_node(kProprietary);
    n.modules = peermem;
    const Report r = run_check(n, {file("/sys/module/nvidia_peermem/version", "580.159.04\n")});
    const Finding* f = pair_finding(gpu_nic(r), "consumer-nccl");
    ASSERT_TRUE(f);
    EXPECT_EQ(f->severity, Verdict::Blocked);
    EXPECT_EQ(f->reason.rfind("nccl: GPUDirect RDMA on, but ", 0), 0u) << f->reason;
    EXPECT_NE(f->fix.find("install MLNX_OFED / DOCA-OFED and reload nvidia_peermem"), std::string::npos) << f->fix;
  }
  {  // no client, proprietary module: off for every consumer, the fix names the open module
    const Report r = run_check(stack_node(kProprietary));
    for (const char* rule : {"consumer-nccl", "consumer-nvshmem", "consumer-ucx"}) {
      const Finding* f = pair_finding(gpu_nic(r), rule);
      ASSERT_TRUE(f) << rule;
      EXPECT_EQ(f->severity, Verdict::Degraded) << rule;
      EXPECT_NE(f->reason.find(": GPUDirect RDMA off for this pair: "), std::string::npos) << f->reason;
      EXPECT_EQ(f->fix, "modprobe nvidia_peermem   # needs MLNX_OFED / DOCA-OFED; or install the open NVIDIA module for dma-buf") << rule;
    }
  }
  // no client on Linux 5.4 (no RDMA dma-buf), the open module or a flavour the input does not say:
  // the fix names the kernel too
  for (const std::string& version : {kOpen, std::string()}) {
    const Report r = run_check(stack_node(version, "5.4.0"));
    const Finding* f = pair_finding(gpu_nic(r), "consumer-nccl");
    ASSERT_TRUE(f);
    EXPECT_NE(f->fix.find("Linux >= 5.12"), std::string::npos) << f->fix;
  }
  {  // CUDA says the GPU has no GPUDirect RDMA (GeForce): no peer module helps
    const Report r = run_check(stack_node(kOpen), {file("/gdrpeer-snapshot/cuda-probe", "0000:03:00.0 gdr=0 dmabuf=1\n")});
    const Finding* f = pair_finding(gpu_nic(r), "consumer-nccl");
    ASSERT_TRUE(f);
    EXPECT_NE(f->fix.find("datacenter or professional GPU"), std::string::npos) << f->fix;
  }
  {  // gdrpeer's client under nv_mem serving no CUDA addresses (docs/driver.md): GDR on, registration fails
    FakeNode n = stack_node(kProprietary);
    n.modules = "nvidia 1 0 - Live 0x0\ngdrpeer 1 0 - Live 0x0\nib_core 1 0 - Live 0x0\n";
    n.memory_peers = {"nv_mem"};
    const Report r = run_check(n, {file("/sys/module/gdrpeer/parameters/peermem_name", "nv_mem\n"),
                                   file("/sys/class/gdrpeer/gdrpeer/providers/peermem/cuda", "not claimed (peermem_cuda=off)\n")});
    for (const char* rule : {"consumer-nccl", "consumer-nvshmem", "consumer-ucx"}) {
      const Finding* f = pair_finding(gpu_nic(r), rule);
      ASSERT_TRUE(f) << rule;
      EXPECT_EQ(f->severity, Verdict::Blocked) << rule;
      EXPECT_EQ(f->fix.rfind("echo auto > /sys/module/gdrpeer/parameters/peermem_cuda", 0), 0u) << f->fix;
    }
  }
}

// A refused registration names every consumer that takes the refused path, and the PCIe mapping
// type where NCCL takes it.
TEST(TruthConsumerFindings, ExporterGateNamesTheConsumers) {
  {
    const Report r = run_check(grace_two_root_ports(kOpen), params_with_override("0"));
    const Finding* f = pair_finding(gpu_nic(r), "exporter-gate");
    ASSERT_TRUE(f);
    EXPECT_NE(f->reason.find("registration nvshmem (dma-buf), ucx (dma-buf) take: chipset the driver distrusts"), std::string::npos)
        << f->reason;  // NCCL: PHB is beyond its default level, it takes no path
  }
  {
    FakeNode n = gh200_split_groups(kOpen);
    const Report r = run_check(n, params_with_override("0"));
    const Finding* f = pair_finding(gpu_nic(r), "exporter-gate");
    ASSERT_TRUE(f);
    EXPECT_NE(f->reason.find("registration nccl (dma-buf, PCIe mapping type) take: GPU and NIC are in different IOMMU groups"),
              std::string::npos)
        << f->reason;
    EXPECT_NE(f->fix.find("NVreg_GrdmaPciTopoCheckOverride=1"), std::string::npos) << f->fix;
    int gate_findings = 0;
    for (const auto& x : gpu_nic(r).findings) gate_findings += x.rule == "exporter-gate";
    EXPECT_EQ(gate_findings, 1);  // one finding for the refusal, not one more per consumer
  }
}

// A GPU whose ids the input leaves out (NCCL topology files of clouds: AWS p5, NVIDIA/nccl PR 1226,
// tests/reference) takes coherence from the CPU: an x86 CPU (by NCCL's arch or by its vendor,
// Intel or AMD) has no NVLink-C2C, so the PCIe mapping type (FORCE_PCIE) is refused; a CPU the file
// does not name leaves coherence, and with it the answer, unknown.
TEST(TruthPlatform, CoherenceFromTheCpuWhereTheGpuIdsAreMissing) {
  const std::string text = testing::slurp(testing::reference("aws-p5.48xl-topo-pr1226.xml"));
  const std::string cpu = "arch=\"x86_64\" vendor=\"AuthenticAMD\"";
  ASSERT_NE(text.find(cpu), std::string::npos);
  const std::pair<std::string, int> cases[] = {
      {cpu, 0}, {"vendor=\"AuthenticAMD\"", 0}, {"vendor=\"GenuineIntel\"", 0}, {"arch=\"x86_64\"", 0}, {"", -1}};
  for (const auto& [attrs, want] : cases) {
    SCOPED_TRACE(attrs);
    Topology t = parse_nccl_xml(replaced(text, cpu, attrs), "p5.xml");
    assign_roles(t, kb());
    const Report r = check(t, kb(), CheckOptions{});
    int judged = 0;
    for (const auto& p : r.pairs) {
      if (!p.stack) continue;
      ++judged;
      EXPECT_FALSE(t.devices[p.a].ids_known);
      EXPECT_EQ(p.stack->gate.dmabuf_pcie.allowed, want) << p.stack->gate.dmabuf_pcie.why;
    }
    EXPECT_GT(judged, 0);
  }
}

// nvidia-peermem.c has MODULE_VERSION, so a loaded nvidia_peermem has /sys/module/nvidia_peermem/version,
// which NCCL, NVSHMEM and UCX test: listed in /proc/modules, it counts even where the copy of sysfs
// left /sys/module out. Where neither /proc/modules nor /sys/module is in the input, whether
// it is loaded is unknown, and so is NCCL's peer path.
TEST(TruthFacts, LoadedNvidiaPeermemByProcModules) {
  FakeNode n = stack_node(kProprietary);
  n.modules = "nvidia 1 0 - Live 0x0\nnvidia_peermem 1 0 - Live 0x0\nib_core 1 0 - Live 0x0\n";
  {
    const Report r = run_check(n);  // memory_peers without nv_mem: NCCL turns GDR on and registration fails
    const PairResult& p = gpu_nic(r);
    EXPECT_EQ(consumer(p, "nccl").gdr, 1) << consumer(p, "nccl").why;
    EXPECT_EQ(consumer(p, "ucx").path, "peer-memory") << consumer(p, "ucx").why;
  }
  FakeNode none = stack_node(kProprietary);
  none.memory_peers_dir = false;
  std::vector<TarEntry> e;
  for (const auto& x : none.entries())
    if (x.path != "proc/modules") e.push_back(x);
  const Topology t = testing::from_entries(e);
  ASSERT_FALSE(t.sw.modules_known);
  const Report r = check(t, kb(), CheckOptions{});
  EXPECT_EQ(consumer(gpu_nic(r), "nccl").gdr, -1) << consumer(gpu_nic(r), "nccl").why;
}

// gdrpeer's client serving no CUDA addresses matters only under the name it registered: named
// nvidia-peermem by peermem_name but not registered (memory_peers has another client's nv_mem),
// NVSHMEM registers through nv_mem and meets no gdrpeer client.
TEST(TruthPeerClients, AnUnregisteredGdrpeerNameIsNoConsumersConcern) {
  FakeNode n = stack_node(kProprietary);
  n.modules = "nvidia 1 0 - Live 0x0\ngdrpeer 1 0 - Live 0x0\nib_core 1 0 - Live 0x0\n";
  n.memory_peers = {"nv_mem"};
  const std::vector<TarEntry> e = {file("/sys/module/gdrpeer/parameters/peermem_name", "nvidia-peermem\n"),
                                   file("/sys/class/gdrpeer/gdrpeer/providers/peermem/cuda", "not claimed (peermem_cuda=off)\n")};
  const Report r = run_check(n, e);
  const PairResult& p = gpu_nic(r);
  EXPECT_EQ(consumer(p, "nvshmem").path, "peer-memory");
  EXPECT_EQ(consumer(p, "nvshmem").rule, "") << consumer(p, "nvshmem").why;
  EXPECT_EQ(pair_finding(p, "consumer-nvshmem"), nullptr);
}

// modprobe.d(5): `options MODULE key=value` applies to that module only. nvidia_peermem's running
// parameters are compared with its own options, not with another module's option of the same name.
TEST(TruthNotes, PeermemOptionsOfItsOwn) {
  FakeNode n = stack_node(kOpen);
  n.modules = "nvidia 1 0 - Live 0x0\nnvidia_peermem 1 0 - Live 0x0\nib_core 1 0 - Live 0x0\n";
  n.memory_peers = {"nv_mem"};
  const std::string d = "/sys/module/nvidia_peermem/";
  auto pending = [&](const std::string& conf) {
    const Report r = run_check(n, {file(d + "version", "580.159.04\n"), file(d + "parameters/persistent_api_support", "1\n"),
                                   file("/etc/modprobe.d/x.conf", conf)});
    return notes(r, "nvidia-params-pending").size();
  };
  EXPECT_EQ(pending("options nvidia-peermem persistent_api_support=0\n"), 1u);
  EXPECT_EQ(pending("options nvidia-peermem persistent_api_support=1\n"), 0u);
  EXPECT_EQ(pending("options mlx5_core persistent_api_support=0\n"), 0u);
  EXPECT_EQ(pending("blacklist nvidia_peermem\n"), 0u);
  EXPECT_EQ(pending("options nvidia-peermem no_such_parameter=1\n"), 0u);  // not one it runs with
}

// nv_pci_has_common_pci_switch: any upstream bridge both reach. Two functions below one root port
// (GPU 01:00.0 and NIC 01:00.1) share that root port, the first device of the tree.
TEST(TruthPlatform, ARootPortAboveBothIsACommonBridge) {
  FakeNode n = grace_two_root_ports(kOpen);
  n.fns.clear();
  const std::string r1 = "/sys/devices/pci0000:00/0000:00:01.0";
  testing::add_port(n, "0000:00:01.0", r1, testing::kRootPort, 1, 0x10de, 0x22b2);
  testing::add_endpoint(n, "0000:01:00.0", r1 + "/0000:01:00.0", 0x10de, 0x2330, 0x030200);
  testing::add_endpoint(n, "0000:01:00.1", r1 + "/0000:01:00.1", 0x15b3, 0x1021, 0x020700);
  const Topology t = from_fake(n, params_with_override("0"));
  ASSERT_EQ(t.devices[0].bdf, "0000:00:01.0");
  const Report r = check(t, kb(), CheckOptions{});
  const PairResult& p = gpu_nic(r);
  ASSERT_EQ(p.path.lca, 0);
  EXPECT_EQ(p.stack->gate.nvidia_p2p.allowed, 1) << p.stack->gate.nvidia_p2p.why;
}

// The exporter-gate finding quotes the refusal of the path the refused consumers take. Grace with
// a PCIe GPU and no common bridge, the proprietary module and nvidia_peermem: NVSHMEM and UCX take
// peer memory, which nvidia_p2p_dma_map_pages refuses by the chipset rule (osapi.c); NCCL takes
// nothing (PHB is beyond its level). The reason is the chipset, not the missing dma-buf export, and
// the open module would not lift it.
TEST(TruthConsumerFindings, TheReasonIsThePathTheRefusedConsumersTake) {
  FakeNode n = grace_two_root_ports(kProprietary);
  n.modules = "nvidia 1 0 - Live 0x0\nnvidia_peermem 1 0 - Live 0x0\nib_core 1 0 - Live 0x0\n";
  n.memory_peers = {"nv_mem"};
  const Report r = run_check(n, params_with_override("0"));
  const PairResult& p = gpu_nic(r);
  EXPECT_EQ(consumer(p, "nccl").path, "none");
  EXPECT_EQ(consumer(p, "nvshmem").path, "peer-memory");
  const Finding* f = pair_finding(p, "exporter-gate");
  ASSERT_TRUE(f);
  EXPECT_NE(f->reason.find("registration nvshmem (peer-memory), ucx (peer-memory) take: chipset the driver distrusts"), std::string::npos)
      << f->reason;
  EXPECT_EQ(f->fix.find("install the open NVIDIA kernel module"), std::string::npos) << f->fix;
  EXPECT_NE(f->fix.find("NVreg_GrdmaPciTopoCheckOverride=1"), std::string::npos) << f->fix;
}

// ---- the driver's version decides which checks exist ----------------------------------------

// The checks by version, from the open module's tags (git grep of NVIDIA/open-gpu-kernel-modules):
// NVreg_GrdmaPciTopoCheckOverride, nv_pci_is_valid_topology_for_direct_pci and the FORCE_PCIE
// mapping type first appear in 570.86.15, nv_grdma_pci_topology_supported (called from
// nv_dma_buf_attach and rm_p2p_dma_map_pages) in 580.65.06, and 595.44.02's
// nv_pci_is_valid_topology_for_direct_pci no longer reads the override. 575.64.05's
// rm_p2p_dma_map_pages maps every peer (nv_dma_map_peer) and its nv_dma_buf_map checks only
// FORCE_PCIE. A node whose version file is missing may run any of them.
std::string version_line(const std::string& version, bool open = true) {
  return open ? "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  " + version + "  Release Build\n"
              : "NVRM version: NVIDIA UNIX x86_64 Kernel Module  " + version + "  Wed Apr 29 17:32:45 UTC 2026\n";
}

// A PCIe GPU and a NIC under root ports of their own on Grace (RM's chipset list), override 0:
// 580.142's nv_grdma_pci_topology_supported refuses (no common bridge); older drivers check nothing.
TEST(TruthGateVersion, OlderDriversRefuseNoTopologyAndAnUnknownVersionStaysUnknown) {
  struct Case {
    const char* what;
    std::string version;  // the version file's line, "" none
    int want_p2p, want_dmabuf;
  };
  const Case cases[] = {
      {"580.159.04 (the real H200 node's)", kOpen, 0, 0},
      {"580.65.06, the first 580 tag", version_line("580.65.06"), 0, 0},
      {"595.45.04", version_line("595.45.04"), 0, 0},
      {"575.64.05: no nv_grdma_pci_topology_supported yet", version_line("575.64.05"), 1, 1},
      {"570.86.15", version_line("570.86.15"), 1, 1},
      {"565.77", version_line("565.77"), 1, 1},
      {"535.288.01 proprietary: no dma-buf, nvidia_p2p unchecked", version_line("535.288.01", false), 1, 0},
      {"no version file: any driver", "", -1, -1},
      {"578.10: a branch never published", version_line("578.10"), -1, -1},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    const Report r = run_check(grace_two_root_ports(c.version), params_with_override("0"));
    const GateResult& g = gpu_nic(r).stack->gate;
    EXPECT_EQ(g.nvidia_p2p.allowed, c.want_p2p) << g.nvidia_p2p.why;
    EXPECT_EQ(g.dmabuf_default.allowed, c.want_dmabuf) << g.dmabuf_default.why;
    if (c.want_p2p == -1) {
      EXPECT_NE(g.nvidia_p2p.why.find("version"), std::string::npos) << g.nvidia_p2p.why;
    }
  }
}

// GH200 (coherent) with NVreg_GrdmaPciTopoCheckOverride=1 and GPU and NIC in two IOMMU groups:
// FORCE_PCIE is allowed by 570.86.15's "override != 0" and 580.142's ALLOW_ACCESS, refused by
// 595.44.02 (one IOMMU group, whatever the override) and missing before 570.86.15.
TEST(TruthGateVersion, ThePcieMappingTypeByVersion) {
  struct Case {
    const char* what;
    std::string version;
    int want_pcie;
  };
  const Case cases[] = {
      {"580.159.04", kOpen, 1},
      {"595.45.04", version_line("595.45.04"), 0},
      {"575.64.05", version_line("575.64.05"), 1},
      {"565.77: no FORCE_PCIE mapping type", version_line("565.77"), 0},
      {"no version file", "", -1},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    FakeNode n = gh200_split_groups(c.version);
    const Report r = run_check(n, params_with_override("1"));
    const GateResult& g = gpu_nic(r).stack->gate;
    EXPECT_EQ(g.dmabuf_pcie.allowed, c.want_pcie) << g.dmabuf_pcie.why;
    EXPECT_NE(g.nvidia_p2p.allowed, 0) << g.nvidia_p2p.why;  // coherent: every version maps
  }
}

// 570.86.15 .. 575.64.05's nv_pci_is_valid_topology_for_direct_pci: "override != 0 || one IOMMU
// group" on a coherent platform; the answer names which of the two allowed it, and which driver
// lacks which check.
TEST(TruthGateVersion, OlderDriversSayWhichConditionDecided) {
  GateInput in;
  in.flavour = 1;
  in.coherent = 1;
  in.driver = DriverGate::DirectPci;
  in.override_value = 0;
  in.same_iommu_group = 1;
  GateResult g = exporter_gate(in);
  EXPECT_EQ(g.dmabuf_pcie.allowed, 1);
  EXPECT_EQ(g.dmabuf_pcie.why, "GPU and NIC are in one IOMMU group");
  EXPECT_NE(g.nvidia_p2p.why.find("570.86.15 to 575"), std::string::npos) << g.nvidia_p2p.why;
  for (int ov : {1, 2}) {
    in.override_value = ov;
    for (int group : {0, 1}) {
      in.same_iommu_group = group;
      g = exporter_gate(in);
      EXPECT_EQ(g.dmabuf_pcie.allowed, 1);
      EXPECT_NE(g.dmabuf_pcie.why.find("NVreg_GrdmaPciTopoCheckOverride != 0"), std::string::npos) << g.dmabuf_pcie.why;
    }
  }
  in.driver = DriverGate::None;
  g = exporter_gate(in);
  EXPECT_EQ(g.dmabuf_pcie.allowed, 0);
  EXPECT_NE(g.nvidia_p2p.why.find("before 570.86.15"), std::string::npos) << g.nvidia_p2p.why;
  EXPECT_NE(g.dmabuf_default.why.find("before 570.86.15"), std::string::npos) << g.dmabuf_default.why;
}

// With the version not known, an answer that differs between versions says so once, after the
// reason it has for 580.142 (however many versions differ; no repeated sentence).
TEST(TruthGateVersion, AnUnknownVersionIsSaidOnce) {
  GateInput in;  // Grace, PCIe GPU, no common bridge, the override not known, the version neither
  in.flavour = 1;
  in.coherent = 0;
  in.unsupported_chipset = true;
  in.common_bridge = 0;
  in.same_iommu_group = 0;
  for (int ov : {-1, 0}) {
    in.override_value = ov;
    const GateResult g = exporter_gate(in);
    EXPECT_EQ(g.nvidia_p2p.allowed, -1);
    const std::string& why = g.nvidia_p2p.why;
    const std::string said = "driver's version is not in this input";
    const size_t first = why.find(said);
    EXPECT_TRUE(first == std::string::npos || why.find(said, first + 1) == std::string::npos) << why;
    if (ov == 0) {
      EXPECT_NE(first, std::string::npos) << why;
    }
  }
}

// Where no override lifts the refusal, the fix does not offer one: 595.44.02 checks the IOMMU
// groups for FORCE_PCIE whatever the override (nv_pci_is_valid_topology_for_direct_pci), and a
// driver before 570.86.15 has no FORCE_PCIE at all. NCCL takes the PCIe mapping type for this
// C2C GPU off the P2C path (paths.cc), so the refusal is its.
TEST(TruthGateVersion, TheFixOffersNoOverrideWhereNoneLiftsTheRefusal) {
  const std::pair<std::string, std::string> cases[] = {{"595.45.04", "one IOMMU group"}, {"565.77", "570.86.15"}};
  for (const auto& [version, says] : cases) {
    SCOPED_TRACE(version);
    FakeNode n = gh200_split_groups(version_line(version));
    const Report r = run_check(n, params_with_override("1"));
    const Finding* f = pair_finding(gpu_nic(r), "exporter-gate");
    ASSERT_TRUE(f);
    EXPECT_NE(f->fix.find(says), std::string::npos) << f->fix;
    EXPECT_EQ(f->fix.find("GrdmaPciTopoCheckOverride=1"), std::string::npos) << f->fix;
  }
}

// The version table against the tags of NVIDIA/open-gpu-kernel-modules (the first and last tag of
// each behaviour; a version below a branch's first tag, or of a branch never published, has no
// source to read).
TEST(TruthGateVersion, VersionsByTheTagsThatIntroducedEachCheck) {
  const std::pair<const char*, DriverGate> rows[] = {
      {"515.43.04", DriverGate::None},
      {"535.288.01", DriverGate::None},
      {"550.163.01", DriverGate::None},
      {"565.77", DriverGate::None},
      {"570.86.15", DriverGate::DirectPci},
      {"570.211.01", DriverGate::DirectPci},
      {"575.64.05", DriverGate::DirectPci},
      {"580.65.06", DriverGate::Full},
      {"580.142", DriverGate::Full},
      {"580.159.04", DriverGate::Full},
      {"590.48.01", DriverGate::Full},
      {"595.44.02", DriverGate::PcieByGroup},
      {"595.45.04", DriverGate::PcieByGroup},
      {"570.86.10", DriverGate::Unknown},
      {"578.10", DriverGate::Unknown},
      {"580.65.05", DriverGate::Unknown},
      {"593.10", DriverGate::Unknown},
      {"595.44.01", DriverGate::Unknown},
      {"", DriverGate::Unknown},
      {"580", DriverGate::Unknown},
      {"580.x", DriverGate::Unknown},
      {"v580.65.06", DriverGate::Unknown},
      // Only "N.N" or "N.N.N" of decimal digits: anything else is no version this table can place.
      {"580.95.05", DriverGate::Full},
      {"565", DriverGate::Unknown},
      {"580.65.06.1", DriverGate::Unknown},
      {"580.+65.06", DriverGate::Unknown},
      {"580-65-06", DriverGate::Unknown},
      {"580. 65.06", DriverGate::Unknown},
      // Branches never published, next to published ones.
      {"576.10", DriverGate::Unknown},
      {"591.10", DriverGate::Unknown},
  };
  for (const auto& [version, want] : rows) {
    SCOPED_TRACE(version);
    EXPECT_EQ(static_cast<int>(driver_gate_of(version)), static_cast<int>(want));
  }
}

// ---- session 9: the five stack survivors decided ------------------------------------------

// An integer option configured without a value (`options nvidia NVreg_X=`, or `NVreg_X` alone):
// nv-linux.h NV_MODULE_PARAMETER is module_param(x, int, 0) (open-gpu-kernel-modules 580.142 and
// 595.45.04); the kernel's param_set_int() runs kstrtoint(""), which fails with -EINVAL, and
// kernel/params.c parse_args() prints "nvidia: `' invalid for parameter `NVreg_X'" and returns the
// error at the first such option, so load_module() fails: the next load of nvidia fails, wherever
// a valid value for it stands. The charp options (NV_MODULE_STRING_PARAMETER) take "" (param_set_charp).
// Which option is which comes from the real H200 params file itself: nv-procfs.c prints every
// integer "%s: %u" and every charp quoted. nv-reg.h lists RmProfilingAdminOnly for the option
// NVreg_RestrictProfilingToAdminUsers (NV_DEFINE_PARAMS_TABLE_ENTRY_CUSTOM_NAME): the name it prints
// is no parameter of the module, which the kernel ignores ("unknown parameter ... ignored").
TEST(TruthNotes, AnIntegerOptionWithoutAValueFailsTheNextLoad) {
  const std::string text = h200_params();
  auto run = [&](const std::string& conf, const std::string& params) {
    return run_check(stack_node(kOpen),
                     {file("/etc/modprobe.d/nvidia.conf", "# GPUDirect\n" + conf), file("/proc/driver/nvidia/params", params)});
  };
  int integers = 0, strings = 0;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    const size_t colon = line.find(": ");
    ASSERT_NE(colon, std::string::npos) << line;
    const std::string name = line.substr(0, colon);
    const bool quoted = line[colon + 2] == '"';
    const std::string option = "NVreg_" + (name == "RmProfilingAdminOnly" ? std::string("RestrictProfilingToAdminUsers") : name);
    SCOPED_TRACE(option);
    const Report r = run("options nvidia " + option + "=\n", text);
    const auto bad = notes(r, "nvidia-params-invalid");
    if (quoted) {
      ++strings;
      EXPECT_TRUE(bad.empty());
      EXPECT_TRUE(notes(r, "nvidia-params-pending").empty());  // "" as it runs
      continue;
    }
    ++integers;
    ASSERT_EQ(bad.size(), 1u);
    EXPECT_EQ(bad[0]->severity, Verdict::Unreliable);
    EXPECT_EQ(bad[0]->reason.rfind(option + " is configured without a value (/etc/modprobe.d/nvidia.conf:2)", 0), 0u) << bad[0]->reason;
    EXPECT_NE(bad[0]->reason.find("the next load of nvidia fails (kernel log: \"nvidia: `' invalid for parameter `" + option + "'\")"),
              std::string::npos)
        << bad[0]->reason;
    EXPECT_NE(bad[0]->fix.find("remove it from /etc/modprobe.d/nvidia.conf"), std::string::npos) << bad[0]->fix;
    EXPECT_TRUE(notes(r, "nvidia-params-pending").empty());  // it never applies
  }
  EXPECT_EQ(integers, 35);
  EXPECT_EQ(strings, 7);
  // The first error ends parse_args(): a later valid value does not save the load; the bare name
  // (no '=') fails as well (parse_one(): no value for an option that needs one).
  EXPECT_EQ(notes(run("options nvidia NVreg_EnableMSI=\noptions nvidia NVreg_EnableMSI=0\n", text), "nvidia-params-invalid").size(), 1u);
  EXPECT_EQ(notes(run("options nvidia NVreg_EnableMSI\n", text), "nvidia-params-invalid").size(), 1u);
  // The printed name of NVreg_RestrictProfilingToAdminUsers is no option: ignored, never pending.
  for (const char* v : {"", "1"}) {
    const Report r = run(std::string("options nvidia NVreg_RmProfilingAdminOnly=") + v + "\n", text);
    EXPECT_TRUE(notes(r, "nvidia-params-invalid").empty()) << v;
    EXPECT_TRUE(notes(r, "nvidia-params-pending").empty()) << v;
  }
  {
    const Report r = run("options nvidia NVreg_RestrictProfilingToAdminUsers=1\n", text);
    const auto n = notes(r, "nvidia-params-pending");
    ASSERT_EQ(n.size(), 1u);
    EXPECT_EQ(
        n[0]->reason.rfind("NVreg_RestrictProfilingToAdminUsers=1 is configured (/etc/modprobe.d/nvidia.conf:2) but the loaded nvidia "
                           "module runs with RmProfilingAdminOnly=0",
                           0),
        0u)
        << n[0]->reason;
  }
  // A charp option running with a value and configured empty: the next load sets "" (pending).
  {
    const std::string running = replaced(text, "CoherentGPUMemoryMode: \"\"", "CoherentGPUMemoryMode: \"driver\"");
    const Report r = run("options nvidia NVreg_CoherentGPUMemoryMode=\n", running);
    const auto n = notes(r, "nvidia-params-pending");
    ASSERT_EQ(n.size(), 1u);
    EXPECT_NE(n[0]->reason.find("runs with CoherentGPUMemoryMode=driver"), std::string::npos) << n[0]->reason;
    EXPECT_TRUE(notes(run("options nvidia NVreg_CoherentGPUMemoryMode=\n", running), "nvidia-params-invalid").empty());
  }
  // Options of another module (nvidia_drm has no NVreg_ parameters), names in another case
  // (parse_args compares them exactly), names the driver does not list: the kernel ignores them
  // ("unknown parameter ... ignored"). A value the kernel reads is no failure.
  for (const char* conf : {"options nvidia_drm NVreg_EnableMSI=\n", "options nvidia nvreg_EnableMSI=\n",
                           "options nvidia NVreg_NoSuchParameter=\n", "options nvidia NVreg_EnableMSI=0\n"})
    EXPECT_TRUE(notes(run(conf, text), "nvidia-params-invalid").empty()) << conf;
  // A quoted option a later driver may add ("" or a word once the quotes are gone) is no integer
  // either, and neither is a charp option running with digits.
  EXPECT_TRUE(
      notes(run("options nvidia NVreg_LaterStringOption=\n", text + "LaterStringOption: \"on\"\n"), "nvidia-params-invalid").empty());
  EXPECT_TRUE(notes(run("options nvidia NVreg_LaterStringOption=\n", text + "LaterStringOption: \"\"\n"), "nvidia-params-invalid").empty());
  EXPECT_TRUE(notes(run("options nvidia NVreg_RmMsg=\n", replaced(text, "RmMsg: \"\"", "RmMsg: \"1\"")), "nvidia-params-invalid").empty());
}

// An integer option's value as the kernel reads it: param_set_int runs lib/kstrtox.c
// kstrtoint(value, 0, ...). The values are lib/test-kstrtox.c's (torvalds/linux) for kstrtos32 and
// for base 0 (kstrtoull/kstrtoll) that a modprobe.d option can carry (no blank, no newline), with
// their results; "+1", "-2147483648", "-2147483649" and "08", "0xg" from kstrtoll's sign and
// _parse_integer_fixup_radix's base rules. A value it reads fails nothing and is compared with the
// running one as the driver stores it (an NvU32 written as an int, printed "%u": -1 runs as
// 4294967295, 0666 as 438); one it refuses fails the next load.
TEST(TruthNotes, IntegerValuesAsTheKernelReadsThem) {
  const std::string text = h200_params();
  auto run = [&](const std::string& value, long long running) {
    const std::string params = replaced(text, "EnableMSI: 1\n", "EnableMSI: " + std::to_string(static_cast<uint32_t>(running)) + "\n");
    return run_check(stack_node(kOpen), {file("/etc/modprobe.d/nvidia.conf", "options nvidia NVreg_EnableMSI=" + value + "\n"),
                                         file("/proc/driver/nvidia/params", params)});
  };
  const std::pair<const char*, long long> read[] = {{"-128", -128},
                                                    {"-127", -127},
                                                    {"-1", -1},
                                                    {"0", 0},
                                                    {"1", 1},
                                                    {"126", 126},
                                                    {"127", 127},
                                                    {"128", 128},
                                                    {"129", 129},
                                                    {"254", 254},
                                                    {"255", 255},
                                                    {"256", 256},
                                                    {"257", 257},
                                                    {"32766", 32766},
                                                    {"32767", 32767},
                                                    {"32768", 32768},
                                                    {"32769", 32769},
                                                    {"65534", 65534},
                                                    {"65535", 65535},
                                                    {"65536", 65536},
                                                    {"65537", 65537},
                                                    {"2147483646", 2147483646},
                                                    {"2147483647", 2147483647},
                                                    {"-0", 0},
                                                    {"00", 0},
                                                    {"01", 1},
                                                    {"0177", 127},
                                                    {"0200", 128},
                                                    {"017777777777", 2147483647},
                                                    {"0x0", 0},
                                                    {"0x1", 1},
                                                    {"0x7f", 127},
                                                    {"0x80", 128},
                                                    {"0xff", 255},
                                                    {"0x7fffffff", 2147483647},
                                                    {"0XA", 10},
                                                    {"0xaBcDeF", 0xabcdef},
                                                    {"+1", 1},
                                                    {"-2147483648", -2147483648LL},
                                                    {"9", 9},
                                                    {"0x9", 9}};
  for (const auto& [value, want] : read) {
    SCOPED_TRACE(value);
    Report r = run(value, want);
    EXPECT_TRUE(notes(r, "nvidia-params-invalid").empty());
    EXPECT_TRUE(notes(r, "nvidia-params-pending").empty());
    r = run(value, want + 1);
    EXPECT_TRUE(notes(r, "nvidia-params-invalid").empty());
    EXPECT_EQ(notes(r, "nvidia-params-pending").size(), 1u);
  }
  const char* refused[] = {"2147483648",
                           "2147483649",
                           "4294967294",
                           "4294967295",
                           "4294967296",
                           "4294967297",
                           "9223372036854775806",
                           "9223372036854775807",
                           "9223372036854775808",
                           "9223372036854775809",
                           "18446744073709551614",
                           "18446744073709551615",
                           "18446744073709551616",
                           "18446744073709551617",
                           "569202370375329612767",
                           "+",
                           "-",
                           "0x",
                           "0X",
                           "1+",
                           "1-",
                           "0x0z",
                           "0z",
                           "a",
                           "-+1",
                           "-2147483649",
                           "-9223372036854775809",
                           "08",
                           "0xg",
                           "0xffffffff",
                           "1a"};
  for (const char* value : refused) {
    SCOPED_TRACE(value);
    const Report r = run(value, 1);
    const auto bad = notes(r, "nvidia-params-invalid");
    ASSERT_EQ(bad.size(), 1u);
    EXPECT_EQ(bad[0]->reason.rfind(std::string("NVreg_EnableMSI=") + value + " is configured, which is no int the kernel reads", 0), 0u)
        << bad[0]->reason;
    EXPECT_NE(bad[0]->reason.find(std::string("\"nvidia: `") + value + "' invalid for parameter `NVreg_EnableMSI'\""), std::string::npos)
        << bad[0]->reason;
    EXPECT_TRUE(notes(r, "nvidia-params-pending").empty());
  }
  // A charp option keeps its text: "0" against "" is pending (no number is compared).
  const Report r = run_check(stack_node(kOpen), {file("/etc/modprobe.d/nvidia.conf", "options nvidia NVreg_CoherentGPUMemoryMode=0\n"),
                                                 file("/proc/driver/nvidia/params", text)});
  EXPECT_EQ(notes(r, "nvidia-params-pending").size(), 1u);
}

// A params file without GrdmaPciTopoCheckOverride: nv-reg.h's nv_parms (printed by nv-procfs.c)
// lists it in every tag from 570.86.15 and in none before (git grep over all 193 tags of
// NVIDIA/open-gpu-kernel-modules, 515.43.04 to 595.45.04), so such a file comes from a driver before
// 570.86.15, which checks no topology (DriverGate::None). The 565.77 file here is the real H200 file
// with the lines 565.77's nv_parms and nv_procfs_read_params() print and 580.159.04's do not (it has
// TCEBypassMode after IgnoreMMIOCheck; no GrdmaPciTopoCheckOverride, no CoherentGPUMemoryMode line).
std::string params_565_77() {
  std::string t = replaced(h200_params(), "IgnoreMMIOCheck: 0\n", "IgnoreMMIOCheck: 0\nTCEBypassMode: 0\n");
  t = replaced(t, "GrdmaPciTopoCheckOverride: 0\n", "");
  return replaced(t, "CoherentGPUMemoryMode: \"\"\n", "");
}

TEST(TruthGateVersion, AParamsFileWithoutTheOverrideIsAnOlderDriver) {
  struct Case {
    const char* what;
    std::string version;
    std::vector<TarEntry> params;
    int want_p2p;
  };
  const std::vector<TarEntry> old_params = {file("/proc/driver/nvidia/params", params_565_77())};
  const Case cases[] = {
      {"no version file, 565.77's params: a driver before 570.86.15", "", old_params, 1},
      {"565.77's version and params", version_line("565.77"), old_params, 1},
      {"no version file, 580.159.04's params: 570.86.15 or later, which differ", "", params_with_override("0"), -1},
      {"no version file, no params: any driver", "", {}, -1},
      // The version file says 580.159.04, the params file a driver without the override: the
      // override the 580 gate reads is not in the input.
      {"580.159.04's version, 565.77's params", kOpen, old_params, -1},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    const Report r = run_check(grace_two_root_ports(c.version), c.params);
    const GateResult& g = gpu_nic(r).stack->gate;
    EXPECT_EQ(g.nvidia_p2p.allowed, c.want_p2p) << g.nvidia_p2p.why;
    if (c.version == kOpen) {
      EXPECT_NE(g.nvidia_p2p.why.find("NVreg_GrdmaPciTopoCheckOverride not in this input"), std::string::npos) << g.nvidia_p2p.why;
    }
  }
}

// The table's boundaries are the tags: the last tag of a behaviour and the first of the next are
// neighbours in the table's order (565.77 | 570.86.15, 575.64.05 | 580.65.06, 590.48.01 |
// 595.44.02); a version between them has no source (566-569 were never published, like 576-579 and
// 591-594); an older, closed-source driver (470.x) predates every check.
TEST(TruthGateVersion, BetweenTwoBehavioursIsUnknown) {
  const std::pair<const char*, DriverGate> rows[] = {
      {"470.256.02", DriverGate::None},    {"565.77", DriverGate::None},         {"566.10", DriverGate::Unknown},
      {"569.10", DriverGate::Unknown},     {"570.86.15", DriverGate::DirectPci}, {"575.64.05", DriverGate::DirectPci},
      {"575.99", DriverGate::DirectPci},   {"576.10", DriverGate::Unknown},      {"580.65.06", DriverGate::Full},
      {"590.48.01", DriverGate::Full},     {"590.99", DriverGate::Full},         {"595.44.02", DriverGate::PcieByGroup},
      {"600.10", DriverGate::PcieByGroup},
  };
  for (const auto& [version, want] : rows) {
    SCOPED_TRACE(version);
    EXPECT_EQ(static_cast<int>(driver_gate_of(version)), static_cast<int>(want));
  }
}

// An hwloc dump knows the kernel release (OSRelease) but not the loaded modules nor the RDMA driver
// bound to the NIC: Linux 5.12's ib_core has the dma-buf MR method, but
// drivers/infiniband/core/uverbs_std_types_mr.c (UVERBS_METHOD_REG_DMABUF_MR) answers -EOPNOTSUPP
// unless that driver implements reg_user_mr_dmabuf. Even with CUDA's answers given (a library
// caller's own probe), no consumer's dma-buf path is known from such a dump.
TEST(TruthFacts, AnHwlocDumpLeavesRdmaDmaBufUnknown) {
  Topology t = parse_hwloc_xml(testing::slurp(testing::reference("aws-p5en.48xlarge.xml")), "p5en.xml");
  assign_roles(t, kb());
  ASSERT_EQ(t.sw.kernel_release, "6.14.0-1018-aws");
  ASSERT_FALSE(t.sw.inspected);
  for (const auto& d : t.devices)
    if (d.role == Role::GPU) t.sw.cuda.push_back({d.bdf, 1, 1});
  ASSERT_FALSE(t.sw.cuda.empty());
  const Report r = check(t, kb(), CheckOptions{});
  int judged = 0;
  for (const auto& p : r.pairs) {
    if (!p.stack) continue;
    ++judged;
    for (const auto& d : p.stack->consumers) EXPECT_NE(d.path, "dma-buf") << d.consumer << ": " << d.why;
  }
  EXPECT_GT(judged, 0);
}

// Each refused consumer is quoted with the answer for its own path. Contradictory files make two
// answers: a CUDA probe saying DMA_BUF_SUPPORTED=1 (NVSHMEM takes dma-buf) under a version file of
// the proprietary module (which exports none), and UCX on nvidia_peermem (UCX_CUDA_COPY_DMABUF=no)
// on Grace without a common bridge (nv_grdma_pci_topology_supported refuses nvidia_p2p).
TEST(TruthConsumerFindings, EachRefusedConsumerIsQuotedWithItsOwnReason) {
  FakeNode n = grace_two_root_ports(kProprietary);
  n.modules = "nvidia 1 0 - Live 0x0\nnvidia_peermem 1 0 - Live 0x0\nib_core 1 0 - Live 0x0\n";
  n.memory_peers = {"nv_mem"};
  n.osrelease = "6.8.0\n";
  Topology t = read_as(n, params_with_override("0"), "node.tar");
  t.sw.cuda.push_back({"0000:01:00.0", 1, 1});
  CheckOptions o;
  o.env = {{"UCX_CUDA_COPY_DMABUF", "no"}};
  const Report r = check(t, kb(), o);
  const PairResult& p = gpu_nic(r);
  ASSERT_EQ(consumer(p, "nvshmem").path, "dma-buf");
  ASSERT_EQ(consumer(p, "ucx").path, "peer-memory");
  std::vector<std::string> reasons;
  for (const auto& f : p.findings)
    if (f.rule == "exporter-gate") reasons.push_back(f.reason.substr(0, f.reason.find(" ('NVRM")));
  const std::vector<std::string> want = {
      "the NVIDIA driver will refuse the GPU memory registration nvshmem (dma-buf) take: " + p.stack->gate.dmabuf_default.why,
      "the NVIDIA driver will refuse the GPU memory registration ucx (peer-memory) take: " + p.stack->gate.nvidia_p2p.why};
  EXPECT_EQ(reasons, want);
  EXPECT_NE(p.stack->gate.dmabuf_default.why.find("proprietary"), std::string::npos);
  EXPECT_NE(p.stack->gate.nvidia_p2p.why.find("chipset the driver distrusts"), std::string::npos);
}

}  // namespace
}  // namespace gdrpeer::topo

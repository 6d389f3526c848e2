// The stack stage against independent truth (issue 28: the generated mutants of stack_gate.cpp
// and stack_rules.cpp that the other tests let through).
//
// The exporter's gate: every input combination against an oracle written line by line from
// NVIDIA/open-gpu-kernel-modules tag 580.142 (kernel-open/nvidia/nv-pci.c
// nv_grdma_pci_topology_supported() and nv_pci_is_valid_topology_for_direct_pci(),
// kernel-open/nvidia/nv-dmabuf.c nv_dma_buf_attach(), src/nvidia/arch/nvalloc/unix/src/osapi.c
// nvidia_p2p_dma_map_pages(), kernel-open/nvidia/nv-reg.h for the override's values 0/1/2).
// An input the check does not know (-1) is every value it can take; the gate's answer is
// known only where the driver decides the same for all of them, and never the wrong one.
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
  bool open;  // the open kernel module (only it exports dma-buf)
  bool coherent;
  int override_value;  // NVreg_GrdmaPciTopoCheckOverride: 1 ALLOW_ACCESS, 2 DENY_ACCESS, else default
  bool passthru, unsupported_chipset, common_switch, same_group;
};

// nv-pci.c nv_grdma_pci_topology_supported()
bool grdma_topology_supported(const Driver& d) {
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

// nv-pci.c nv_pci_is_valid_topology_for_direct_pci()
bool valid_topology_for_direct_pci(const Driver& d) {
  if (!d.coherent) return false;
  switch (d.override_value) {
    case 1: return true;
    case 2: return false;
    default: return d.same_group;
  }
}

// nv_dma_buf_attach(): the default mapping type and FORCE_PCIE; the proprietary module exports none.
bool dmabuf_default(const Driver& d) { return d.open && grdma_topology_supported(d); }
bool dmabuf_pcie(const Driver& d) { return d.open && valid_topology_for_direct_pci(d); }
// osapi.c nvidia_p2p_dma_map_pages(): coherent maps; else the same topology check (either flavour).
bool nvidia_p2p(const Driver& d) { return d.coherent || grdma_topology_supported(d); }

// Every driver state a GateInput allows (its -1 fields take each value).
std::vector<Driver> completions(const GateInput& in) {
  auto tri = [](int v) { return v == -1 ? std::vector<bool>{false, true} : std::vector<bool>{v == 1}; };
  const std::vector<int> overrides = in.override_value == -1 ? std::vector<int>{0, 1, 2} : std::vector<int>{in.override_value};
  std::vector<Driver> out;
  for (bool open : tri(in.flavour))
    for (bool coherent : tri(in.coherent))
      for (int ov : overrides)
        for (bool sw : tri(in.common_bridge))
          for (bool group : tri(in.same_iommu_group))
            out.push_back({open, coherent, ov, in.passthrough_vm, in.unsupported_chipset, sw, group});
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
         " group=" + std::to_string(in.same_iommu_group);
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
          for (bool chipset : {false, true})
            for (int bridge : {-1, 0, 1})
              for (int group : {-1, 0, 1}) {
                GateInput in;
                in.flavour = flavour;
                in.coherent = coherent;
                in.override_value = ov;
                in.passthrough_vm = vm;
                in.unsupported_chipset = chipset;
                in.common_bridge = bridge;
                in.same_iommu_group = group;
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
                  const bool all_known = flavour != -1 && coherent != -1 && ov != -1 && bridge != -1 && group != -1;
                  if (all_known) {
                    EXPECT_EQ(got->allowed, want) << got->why;
                  }
                }
                ++checked;
              }
  EXPECT_EQ(checked, 3 * 3 * 5 * 2 * 2 * 3 * 3);
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

}  // namespace
}  // namespace gdrpeer::topo

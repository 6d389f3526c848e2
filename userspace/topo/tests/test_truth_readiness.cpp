// The IBGDA and GDS modes and the node verdict against oracles written from their sources,
// over every combination of the facts (issue 28: the generated mutants of readiness_ibgda.cpp,
// readiness_gds.cpp and node_verdict.cpp). The oracles restate the sources, not the program:
//  - IBGDA: NVSHMEM 3.5.1 (NVIDIA/nvshmem 2d7d25f) ibgda.cpp nvshmemt_init's order (verbs
//    device; dma-buf or a peer client for data buffers, else "Skipping transport"; mlx5 + DEVX
//    QUERY_HCA_CAP + the atomic caps, else IBGDA skips the NIC and only the proxy transports
//    remain; cudaHostRegister(IoMemory) of the UAR, else the CPU-assisted NIC handler) and
//    open-gpu-kernel-modules osmemdesc.c (IO memory refused without PeerMappingOverride unless
//    CAP_SYS_ADMIN). A fact the input lacks leaves every value it may take open: the mode is
//    known only when all of them give the same one (docs/check.md: "unknown is a mode: the
//    input lacks a fact that decides it"). Only a device the probe read DEVX or the atomic caps
//    through is certainly a verbs device: an mlx5 function without mlx5_ib bound has none.
//  - GDS: GDS Troubleshooting Guide §14, "GDS Support for NVMe Drives Using Linux PCI P2PDMA
//    Support" (release 615), Installation Guide §1, as docs/check.md's GDS table orders them.
//  - Node verdict: docs/check.md "Rules and verdicts" (each GPU by its best NIC as NCCL's
//    ncclTopoGetLocalNet binds it; every other pair and node finding counts; --all-pairs the
//    worst pair; incomplete when nothing was checked or fewer devices than expected).
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "gdrpeer/topo/model.hpp"
#include "gdrpeer/topo/readiness.hpp"
#include "gdrpeer/topo/rules.hpp"
#include "test_topo_support.hpp"

using namespace gdrpeer::topo;

namespace {

using gdrpeer::topo::testing::has;

size_t count_of(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

// ---------------------------------------------------------------------------------------
// IBGDA

// One world where every fact is known (uar: 0 refused, 1 every process, 2 CAP_SYS_ADMIN only).
std::string ibgda_world(int rdma, int mlx5, int devx, int atomics, int dmabuf, int peer, int uar) {
  if (rdma == 0) return "none";                                     // no verbs device: no IB transport
  if (dmabuf == 0 && peer == 0) return "none";                      // "neither nv_peer_mem, or nvidia_peermem detected"
  if (mlx5 == 0 || devx == 0 || atomics == 0) return "proxy-only";  // IBGDA skips the NIC; IBRC remains
  return uar == 1 ? "gpu-initiated" : "cpu-assisted";               // NIC handler GPU, else CPU (3.4.5)
}

std::vector<int> values(int v, std::vector<int> all = {0, 1}) { return v < 0 ? all : std::vector<int>{v}; }

// DEVX and the atomic caps are known only for an mlx5 device (the probe queries them after
// mlx5dv_is_supported; the input assumes them for ConnectX-5+ / BlueField ids).
bool caps_known(const IbgdaFacts& f) { return f.devx >= 0 || f.atomics >= 0; }

// A verbs device is certain only where the input says so (rdma_nic): an mlx5 function (ConnectX
// ids, mlx5_core) has one only with mlx5_ib bound, and caps assumed from a ConnectX-5+ id say
// nothing of that. NVSHMEM enumerates the verbs devices (ibgda.cpp nvshmemt_init:
// ftable.get_device_list, open_device), and a NIC without one is none.

std::set<std::string> ibgda_worlds(const IbgdaFacts& f) {
  std::set<std::string> modes;
  for (int mlx5 : values(f.mlx5, caps_known(f) ? std::vector<int>{1} : std::vector<int>{0, 1}))
    for (int rdma : values(f.rdma_nic))
      for (int devx : values(f.devx))
        for (int atomics : values(f.atomics))
          for (int dmabuf : values(f.dmabuf_data))
            for (int peer : values(f.peer_mem))
              for (int uar : values(f.uar_gpu_map, {0, 1, 2})) modes.insert(ibgda_world(rdma, mlx5, devx, atomics, dmabuf, peer, uar));
  return modes;
}

std::string describe(const IbgdaFacts& f) {
  return "rdma=" + std::to_string(f.rdma_nic) + " mlx5=" + std::to_string(f.mlx5) + " devx=" + std::to_string(f.devx) +
         " atomics=" + std::to_string(f.atomics) + " dmabuf=" + std::to_string(f.dmabuf_data) + " peer=" + std::to_string(f.peer_mem) +
         " uar=" + std::to_string(f.uar_gpu_map) + " umem=" + std::to_string(f.dmabuf_umem) + " probed=" + std::to_string(f.probed) +
         " model='" + f.nic_model + "'";
}

// Every combination of the facts: the mode is the one all possible worlds agree on, else unknown.
TEST(TruthIbgda, EveryFactCombinationGivesTheModeAllWorldsAgreeOn) {
  const int tri[] = {-1, 0, 1};
  int checked = 0;
  for (int rdma : tri)
    for (int mlx5 : tri)
      for (int devx : tri)
        for (int atomics : tri)
          for (int dmabuf : tri)
            for (int peer : tri)
              for (int uar : {-1, 0, 1, 2}) {
                IbgdaFacts f;
                f.rdma_nic = rdma;
                f.mlx5 = mlx5;
                f.devx = devx;
                f.atomics = atomics;
                f.dmabuf_data = dmabuf;
                f.peer_mem = peer;
                f.uar_gpu_map = uar;
                if (mlx5 != 1 && caps_known(f)) continue;  // no such input
                const std::set<std::string> worlds = ibgda_worlds(f);
                const std::string want = worlds.size() == 1 ? *worlds.begin() : "unknown";
                const ReadinessMode m = decide_ibgda(f);
                ASSERT_EQ(m.mode, want) << describe(f) << ": " << m.reason;
                ASSERT_EQ(m.unknown, want == "unknown") << describe(f);
                ASSERT_FALSE(m.reason.empty()) << describe(f);
                ASSERT_FALSE(m.modelled.empty()) << describe(f);
                // The fix is for the next better mode: none at the best one, one below it.
                if (want == "gpu-initiated") {
                  ASSERT_TRUE(m.fix.empty()) << describe(f) << ": " << m.fix;
                }
                if (want == "none" || want == "proxy-only" || want == "cpu-assisted") {
                  ASSERT_FALSE(m.fix.empty()) << describe(f);
                }
                if (want == "unknown") {
                  ASSERT_TRUE(m.reason.rfind("unknown: ", 0) == 0) << describe(f) << ": " << m.reason;
                }
                ++checked;
              }
  EXPECT_GT(checked, 800);
}

// What each mode's reason and fix must say, from the fact that decided it.
TEST(TruthIbgda, ReasonsAndFixesNameTheDecidingFact) {
  auto base = [] {
    IbgdaFacts f;
    f.rdma_nic = f.mlx5 = f.devx = f.atomics = 1;
    f.dmabuf_data = 1;
    f.peer_mem = 0;
    f.uar_gpu_map = 1;
    return f;
  };
  // Row 1: no verbs device: the fix asks for an RDMA NIC.
  IbgdaFacts f = base();
  f.rdma_nic = 0;
  ReadinessMode m = decide_ibgda(f);
  EXPECT_TRUE(has(m.reason, "no RDMA device")) << m.reason;
  EXPECT_TRUE(has(m.fix, "mlx5_ib")) << m.fix;
  // Row 2: no data path: NVSHMEM's message and both ways out.
  f = base();
  f.dmabuf_data = 0;
  m = decide_ibgda(f);
  EXPECT_TRUE(has(m.reason, "neither nv_peer_mem, or nvidia_peermem detected")) << m.reason;
  EXPECT_TRUE(has(m.fix, "nvidia_peermem") && has(m.fix, "dma-buf")) << m.fix;
  // Row 3: not mlx5, data path known.
  f = base();
  f.mlx5 = 0;
  m = decide_ibgda(f);
  EXPECT_TRUE(has(m.reason, "expected HCA interface: mlx5 or ibp")) << m.reason;
  EXPECT_TRUE(has(m.fix, "ConnectX-5")) << m.fix;
  // Not mlx5 with the RDMA device unknown: the reason says which fact is missing.
  f.rdma_nic = -1;
  m = decide_ibgda(f);
  EXPECT_TRUE(has(m.reason, "not mlx5") && has(m.reason, "RDMA device")) << m.reason;
  // Rows 4 and 5 name NVSHMEM's message, "(live probe)" only when the probe said so.
  for (bool probed : {false, true}) {
    f = base();
    f.devx = 0;
    f.probed = probed;
    m = decide_ibgda(f);
    EXPECT_TRUE(has(m.reason, "not enumerated as an mlx5 device")) << m.reason;
    EXPECT_EQ(has(m.reason, "(live probe)"), probed) << m.reason;
    EXPECT_TRUE(has(m.fix, "DEVX")) << m.fix;
    f = base();
    f.atomics = 0;
    f.probed = probed;
    m = decide_ibgda(f);
    EXPECT_TRUE(has(m.reason, "does not support all necessary atomic operations")) << m.reason;
    EXPECT_EQ(has(m.reason, "(live probe)"), probed) << m.reason;
    EXPECT_TRUE(has(m.fix, "PCI_ATOMIC_MODE")) << m.fix;
    // Row 9: the probe's UAR registration failed.
    f = base();
    f.uar_gpu_map = 0;
    f.probed = probed;
    m = decide_ibgda(f);
    EXPECT_EQ(m.mode, "cpu-assisted");
    EXPECT_TRUE(has(m.reason, "cudaHostRegister(IoMemory) of the UAR failed")) << m.reason;
    EXPECT_EQ(has(m.reason, "(live probe)"), probed) << m.reason;
    EXPECT_TRUE(has(m.fix, "PeerMappingOverride=1")) << m.fix;
    // Row 7: the doorbell maps: probed, or the regkey.
    f = base();
    f.probed = probed;
    m = decide_ibgda(f);
    EXPECT_EQ(m.mode, "gpu-initiated");
    EXPECT_EQ(has(m.reason, "(probed)"), probed) << m.reason;
    EXPECT_EQ(has(m.reason, "(PeerMappingOverride=1)"), !probed) << m.reason;
  }
  // Row 8: the regkey unset: CAP_SYS_ADMIN and the regkey with its security cost.
  f = base();
  f.uar_gpu_map = 2;
  m = decide_ibgda(f);
  EXPECT_TRUE(has(m.reason, "PeerMappingOverride is not set") && has(m.reason, "CAP_SYS_ADMIN")) << m.reason;
  EXPECT_TRUE(has(m.fix, "PeerMappingOverride=1") && has(m.fix, "security")) << m.fix;
  // Row 10: no params.
  f = base();
  f.uar_gpu_map = -1;
  m = decide_ibgda(f);
  EXPECT_TRUE(has(m.reason, "no driver parameters")) << m.reason;
  // Row 6: which fact is unknown, and the probe that reads it.
  f = base();
  f.mlx5 = -1;
  m = decide_ibgda(f);
  EXPECT_TRUE(has(m.reason, "NIC model is not in this input")) << m.reason;
  EXPECT_TRUE(has(m.fix, "--probe ibgda")) << m.fix;
  f = base();
  f.devx = -1;
  m = decide_ibgda(f);
  EXPECT_FALSE(has(m.reason, "NIC model is not in this input")) << m.reason;
  EXPECT_TRUE(has(m.reason, "DEVX and the atomic caps are not known")) << m.reason;
  f = base();
  f.atomics = -1;
  m = decide_ibgda(f);
  EXPECT_TRUE(has(m.reason, "DEVX and the atomic caps are not known")) << m.reason;
  f = base();
  f.dmabuf_data = -1;
  f.peer_mem = -1;
  m = decide_ibgda(f);
  EXPECT_TRUE(has(m.reason, "whether GPU memory can be registered")) << m.reason;
  // mlx5 with DEVX and atomics: IBGDA does not skip this NIC, only the data path is open.
  EXPECT_FALSE(has(m.reason, "IBGDA skips this NIC")) << m.reason;
  // Not mlx5, or DEVX / atomics missing, and the data path open: IBGDA skips it, proxy-only or none.
  for (int* fact : {&f.mlx5, &f.devx, &f.atomics}) {
    f = base();
    f.dmabuf_data = -1;
    f.peer_mem = -1;
    const int saved = *fact;
    *fact = 0;
    m = decide_ibgda(f);
    EXPECT_TRUE(has(m.reason, "IBGDA skips this NIC") && has(m.reason, "proxy-only with it, none without")) << m.reason;
    *fact = saved;
  }
}

// Data and control buffers as NVSHMEM places them (dma-buf first for data when CUDA supports
// it; control buffers through a dma-buf umem, else the peer client's umem of the GPU VA, else
// host memory: ibgda_check_nic_mapping_memtypes), and the NIC's name.
TEST(TruthIbgda, BuffersAndModelFollowTheFacts) {
  for (int uar : {1, 2, 0})
    for (int dmabuf : {0, 1})
      for (int peer : {0, 1})
        for (int umem : {-1, 0, 1})
          for (const char* model : {"", "ConnectX-7"}) {
            if (dmabuf == 0 && peer == 0) continue;
            IbgdaFacts f;
            f.rdma_nic = f.mlx5 = f.devx = f.atomics = 1;
            f.dmabuf_data = dmabuf;
            f.peer_mem = peer;
            f.uar_gpu_map = uar;
            f.dmabuf_umem = umem;
            f.nic_model = model;
            const ReadinessMode m = decide_ibgda(f);
            ASSERT_EQ(m.mode, uar == 1 ? "gpu-initiated" : "cpu-assisted") << describe(f);
            EXPECT_TRUE(m.reason.rfind(*model ? std::string(model) + ": " : std::string("mlx5: "), 0) == 0) << describe(f) << m.reason;
            EXPECT_EQ(has(m.reason, "data buffers through dma-buf"), dmabuf == 1) << describe(f) << m.reason;
            EXPECT_EQ(has(m.reason, "data buffers through peer memory"), dmabuf == 0) << describe(f) << m.reason;
            EXPECT_EQ(has(m.reason, "through a dma-buf umem"), umem == 1) << describe(f) << m.reason;
            EXPECT_EQ(has(m.reason, "through the peer client"), umem != 1 && peer == 1) << describe(f) << m.reason;
            EXPECT_EQ(has(m.reason, "in host memory (the dma-buf umem failed"), umem == 0 && peer == 0) << describe(f) << m.reason;
            EXPECT_EQ(has(m.reason, "(dma-buf umem) or in host memory"), umem == -1 && peer == 0) << describe(f) << m.reason;
          }
}

// ---------------------------------------------------------------------------------------
// GDS

struct GdsNeed {
  int GdsFacts::*fact;
  bool x86_only;     // a requirement on x86 only (§14.3: the registry keys, multipath=N)
  const char* name;  // in the reason
  const char* fix;   // a word of its fix, "" when it is the hardware
};

const GdsNeed kGdsNeeds[] = {
    {&GdsFacts::x86, false, "x86_64", ""},
    {&GdsFacts::kernel_ge_6_2, false, "Linux >= 6.2", "boot Linux >= 6.2"},
    {&GdsFacts::p2pdma_config, false, "CONFIG_PCI_P2PDMA=y in the kernel", "built with CONFIG_PCI_P2PDMA=y"},
    {&GdsFacts::open_module, false, "the open NVIDIA kernel module", "nvidia-open"},
    {&GdsFacts::driver_ge_565, false, "NVIDIA driver >= 565", "driver 565 or newer"},
    {&GdsFacts::gpu_supported, false, "a GPU on the P2PDMA list", ""},
    {&GdsFacts::static_bar1, true, "RMForceStaticBar1=1", "RMForceStaticBar1=1;RmForceDisableIomapWC=1;"},
    {&GdsFacts::iomap_wc_off, true, "RmForceDisableIomapWC=1", "RMForceStaticBar1=1;RmForceDisableIomapWC=1;"},
    {&GdsFacts::multipath_off, true, "nvme_core multipath=N", "options nvme_core multipath=N"},
    {&GdsFacts::host_bridge_ok, false, "pci_p2pdma_distance", "under one PCIe switch"},
};

// The eleven facts near three corners (all hold, all missing, all unknown) with up to three
// (two) of them changed to each other value: every fact alone, with every other one and in
// threes, in 2,049 combinations instead of 3^11 (the -O0 mutant build runs this per mutant).
std::vector<std::vector<int>> gds_combinations(int n) {
  std::vector<std::vector<int>> out;
  for (int corner : {1, 0, -1}) {
    const int depth = corner == 1 ? 3 : 2;
    std::vector<int> v(static_cast<size_t>(n), corner);
    auto vary = [&](auto&& self, int from, int left) -> void {
      out.push_back(v);
      if (left == 0) return;
      for (int i = from; i < n; ++i)
        for (int other : {-1, 0, 1}) {
          if (other == corner) continue;
          v[static_cast<size_t>(i)] = other;
          self(self, i + 1, left - 1);
          v[static_cast<size_t>(i)] = corner;
        }
    };
    vary(vary, 0, depth);
  }
  return out;
}

// docs/check.md's GDS table, first that applies.
TEST(TruthGds, FactCombinationsFollowTheGdsGuides) {
  const int n = static_cast<int>(std::size(kGdsNeeds)) + 1;  // + nvidia_fs
  const auto combinations = gds_combinations(n);
  ASSERT_EQ(combinations.size(), 2049u);
  for (const auto& v : combinations) {
    GdsFacts f;
    for (size_t i = 0; i < std::size(kGdsNeeds); ++i) f.*kGdsNeeds[i].fact = v[i];
    f.nvidia_fs = v.back();
    std::string d;
    for (int x : v) d += std::to_string(x) + " ";
    // Which prerequisites are missing or unknown (the x86-only ones do not apply off x86).
    std::vector<const GdsNeed*> missing, unknown;
    for (const auto& need : kGdsNeeds) {
      if (need.x86_only && f.x86 == 0) continue;
      if (f.*need.fact == 0) missing.push_back(&need);
      if (f.*need.fact < 0) unknown.push_back(&need);
    }
    const std::string want = missing.empty() && unknown.empty() ? "p2pdma"
                             : f.nvidia_fs == 1                 ? "nvidia-fs"
                             : !missing.empty()                 ? "compat"
                                                                : "unknown";
    const ReadinessMode m = decide_gds(f);
    ASSERT_EQ(m.mode, want) << d << m.reason;
    ASSERT_EQ(m.unknown, want == "unknown") << d;
    ASSERT_FALSE(m.modelled.empty());
    if (want == "p2pdma") {
      ASSERT_TRUE(has(m.reason, "use_pci_p2pdma")) << m.reason;  // cufile.json not read
      continue;
    }
    // Each missing prerequisite is named, with its fix (once); the unknown ones are named as unknown.
    for (const GdsNeed* need : missing) {
      ASSERT_TRUE(has(m.reason, need->name)) << d << m.reason;
      if (want != "unknown" && *need->fix) {
        ASSERT_TRUE(has(m.fix, need->fix)) << d << m.fix;
      }
    }
    for (const auto& need : kGdsNeeds) {
      const bool listed = std::find(missing.begin(), missing.end(), &need) != missing.end() ||
                          std::find(unknown.begin(), unknown.end(), &need) != unknown.end();
      if (!listed && need.x86_only) {
        ASSERT_FALSE(has(m.reason, need.name)) << d << m.reason;
      }
      if (std::find(missing.begin(), missing.end(), &need) == missing.end() && *need.fix && need.fix != kGdsNeeds[6].fix) {
        ASSERT_FALSE(has(m.fix, need.fix)) << d << need.name << ": " << m.fix;
      }
    }
    const bool keys_missing =
        std::any_of(missing.begin(), missing.end(), [](const GdsNeed* x) { return x->fact != &GdsFacts::multipath_off && x->x86_only; });
    ASSERT_EQ(count_of(m.fix, "> /etc/modprobe.d/nvidia-p2pdma.conf"), keys_missing ? 1u : 0u) << d << m.fix;
    // The lists as one reads them: "a; b; c", in the guides' order.
    for (const auto* list : {&missing, &unknown}) {
      if (list->empty() || (list == &unknown && want == "nvidia-fs" && !missing.empty())) continue;  // not shown there
      ASSERT_FALSE(has(m.reason, ": ; ") || has(m.reason, "; ;") || has(m.reason, "(and unknown: ;")) << d << m.reason;
      for (size_t i = 1; i < list->size(); ++i) {
        const std::string a = (*list)[i - 1]->name, b = (*list)[i]->name;
        const size_t pa = m.reason.find(a), pb = m.reason.find(b);
        ASSERT_TRUE(pa != std::string::npos && pb != std::string::npos && pa < pb) << d << m.reason;
        ASSERT_NE(m.reason.substr(pa, pb - pa).find("; "), std::string::npos) << d << m.reason;
      }
    }
    if (want == "nvidia-fs") {
      ASSERT_TRUE(has(m.reason, "nvidia_fs is loaded")) << m.reason;
      ASSERT_TRUE(has(m.reason, missing.empty() ? "P2PDMA mode unknown: " : "P2PDMA mode not available: ")) << d << m.reason;
      if (missing.empty()) {
        ASSERT_TRUE(m.fix.empty()) << d << m.fix;
      }
    }
    if (want == "unknown") {
      for (const GdsNeed* need : unknown) ASSERT_TRUE(has(m.reason, need->name)) << d << m.reason;
      ASSERT_TRUE(has(m.reason, f.nvidia_fs == 0 ? "nvidia_fs not loaded" : "nvidia_fs state unknown")) << d << m.reason;
      ASSERT_TRUE(m.fix.empty()) << d << m.fix;
    }
    if (want == "compat") {
      ASSERT_TRUE(has(m.reason, "CPU bounce buffer")) << m.reason;
      ASSERT_EQ(has(m.reason, "(and unknown: "), !unknown.empty()) << d << m.reason;
      for (const GdsNeed* need : unknown)
        if (!need->x86_only || f.x86 != 0) {
          ASSERT_TRUE(has(m.reason, need->name)) << d << m.reason;
        }
      ASSERT_TRUE(has(m.reason, f.nvidia_fs == 0 ? "nvidia_fs not loaded" : "nvidia_fs state unknown")) << d << m.reason;
      ASSERT_TRUE(has(m.fix, "modprobe nvidia_fs")) << m.fix;  // the nvidia-fs route
      // One fix per line, the nvidia-fs route last; no empty line.
      ASSERT_FALSE(has(m.fix, "\n\n")) << m.fix;
      ASSERT_NE(m.fix.front(), '\n') << m.fix;
    }
  }
}

// No NVMe drive: compat (cuFile's compatibility mode for other storage), whatever else holds.
TEST(TruthGds, NoNvmeIsCompat) {
  GdsFacts f{0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
  const ReadinessMode m = decide_gds(f);
  EXPECT_EQ(m.mode, "compat");
  EXPECT_FALSE(m.unknown);
  EXPECT_TRUE(has(m.reason, "no local NVMe drive")) << m.reason;
}

// ---------------------------------------------------------------------------------------
// Node verdict

const char* const kVerdictNames[] = {"optimal", "degraded", "unreliable", "blocked"};

struct RandomNode {
  Topology t;
  Report rep;
  CheckOptions opt;
};

// A node of 0-3 GPUs, 0-3 NICs and 0-2 NVMe drives, pairs in the order check() makes them
// (each GPU with every NIC, every later GPU, every drive; some left out, as --pairs and
// --skip do), random verdicts, classes, findings and options.
RandomNode random_node(std::mt19937& rng) {
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
  RandomNode r;
  const int gpus = pick(4), nics = pick(4), nvmes = pick(3);
  auto add = [&](Role role, const std::string& label) {
    Device d;
    d.role = role;
    r.t.devices.push_back(d);
    r.rep.labels.push_back(label);
    return static_cast<int>(r.t.devices.size()) - 1;
  };
  // Device indices as the BDF order gives them: a NIC (or a bridge) may come first.
  if (pick(3) == 0) add(Role::None, "");
  const bool nics_first = pick(2) != 0;
  if (nics_first)
    for (int i = 0; i < nics; ++i) r.rep.nics.push_back(add(Role::NIC, "NIC" + std::to_string(i)));
  for (int i = 0; i < gpus; ++i) r.rep.gpus.push_back(add(Role::GPU, "GPU" + std::to_string(i)));
  if (!nics_first)
    for (int i = 0; i < nics; ++i) r.rep.nics.push_back(add(Role::NIC, "NIC" + std::to_string(i)));
  for (int i = 0; i < nvmes; ++i) r.rep.nvmes.push_back(add(Role::NVMe, "NVME" + std::to_string(i)));
  r.opt.gpu_nic = pick(4) != 0;
  r.opt.gpu_nvme = pick(2) != 0;
  r.opt.gpu_gpu = pick(3) != 0;
  r.opt.all_pairs = pick(3) == 0;
  r.opt.gpu_nic_required = pick(3) == 0;
  r.opt.expect_gpus = pick(3) == 0 ? pick(5) : -1;
  r.opt.expect_nics = pick(3) == 0 ? pick(5) : -1;
  if (pick(8) == 0) r.t.cut_off = "input.xml:12 inside <gpu>";
  auto pair = [&](int a, int b) {
    if (pick(6) == 0) return;  // left out
    PairResult p;
    p.a = a;
    p.b = b;
    p.label_a = r.rep.labels[static_cast<size_t>(a)];
    p.label_b = r.rep.labels[static_cast<size_t>(b)];
    p.path.cls = static_cast<PathClass>(pick(5));
    p.verdict = static_cast<Verdict>(pick(3) == 0 ? 0 : pick(4));
    // A lower finding first, then the one that sets the verdict (the reason names the latter).
    if (p.verdict > Verdict::Optimal && pick(2)) p.findings.push_back({"low-" + p.label_a + p.label_b, Verdict::Optimal, "a note", ""});
    if (p.verdict > Verdict::Optimal)
      p.findings.push_back({"rule-" + p.label_a + p.label_b, p.verdict, "why-" + p.label_a + p.label_b, ""});
    r.rep.pairs.push_back(p);
    r.rep.worst = std::max(r.rep.worst, p.verdict);
  };
  for (size_t g = 0; g < r.rep.gpus.size(); ++g) {
    if (r.opt.gpu_nic)
      for (int n : r.rep.nics) pair(r.rep.gpus[g], n);
    if (r.opt.gpu_gpu)
      for (size_t h = g + 1; h < r.rep.gpus.size(); ++h) pair(r.rep.gpus[g], r.rep.gpus[h]);
    if (r.opt.gpu_nvme)
      for (int n : r.rep.nvmes) pair(r.rep.gpus[g], n);
  }
  for (int i = pick(3); i > 0; --i) {
    const Verdict v = static_cast<Verdict>(pick(2) ? 0 : pick(4));
    r.rep.node_findings.push_back({"node-" + std::to_string(i), v, "node-why-" + std::to_string(i), ""});
  }
  return r;
}

bool gpu_nic(const RandomNode& r, const PairResult& p) {
  return r.t.devices[static_cast<size_t>(p.a)].role == Role::GPU && r.t.devices[static_cast<size_t>(p.b)].role == Role::NIC;
}

// The docs' rule, restated: each GPU by its best NIC (lowest verdict, then nearest class, then
// the first NIC), every other pair and every node finding; --all-pairs every pair.
TEST(TruthNodeVerdict, RandomNodesFollowTheDocumentedRule) {
  std::mt19937 rng(28);
  int judged = 0, incomplete = 0, by_best_nic = 0;
  for (int iter = 0; iter < 8000; ++iter) {
    RandomNode r = random_node(rng);
    // Best NIC per GPU.
    std::vector<const PairResult*> best(r.rep.gpus.size(), nullptr);
    for (size_t g = 0; g < r.rep.gpus.size(); ++g)
      for (const auto& p : r.rep.pairs) {
        if (p.a != r.rep.gpus[g] || !gpu_nic(r, p)) continue;
        const PairResult* b = best[g];
        if (!b || p.verdict < b->verdict || (p.verdict == b->verdict && p.path.cls < b->path.cls)) best[g] = &p;
      }
    // Where the verdict may come from: (verdict, the text that names it).
    std::vector<std::pair<Verdict, std::string>> sources;
    auto pair_text = [](const PairResult& p) {
      std::string s = p.label_a + "-" + p.label_b + " " + to_string(p.path.cls) + " " + to_string(p.verdict);
      for (const auto& f : p.findings)
        if (f.severity == p.verdict) return s + " (" + f.rule + ": " + f.reason + ")";
      return s;
    };
    if (r.opt.all_pairs) {
      for (const auto& p : r.rep.pairs) sources.emplace_back(p.verdict, "worst pair: " + pair_text(p));
    } else {
      for (size_t g = 0; g < best.size(); ++g)
        if (best[g]) sources.emplace_back(best[g]->verdict, "best NIC of " + best[g]->label_a + ": " + pair_text(*best[g]));
      for (const auto& p : r.rep.pairs)
        if (!gpu_nic(r, p)) sources.emplace_back(p.verdict, pair_text(p));
    }
    for (const auto& f : r.rep.node_findings) sources.emplace_back(f.severity, "node: " + f.rule + ": " + f.reason);
    Verdict want = Verdict::Optimal;
    for (const auto& s : sources) want = std::max(want, s.first);
    // Incomplete: nothing checked, or fewer devices than expected, or the input cut off.
    const bool node_judged =
        std::any_of(r.rep.node_findings.begin(), r.rep.node_findings.end(), [](const Finding& f) { return f.severity > Verdict::Optimal; });
    std::vector<std::string> missing;
    if (r.opt.expect_gpus >= 0 && static_cast<int>(r.rep.gpus.size()) < r.opt.expect_gpus)
      missing.push_back(std::to_string(r.rep.gpus.size()) + " GPU(s) found, " + std::to_string(r.opt.expect_gpus) + " expected");
    if (r.opt.expect_nics >= 0 && static_cast<int>(r.rep.nics.size()) < r.opt.expect_nics)
      missing.push_back(std::to_string(r.rep.nics.size()) + " NIC(s) found, " + std::to_string(r.opt.expect_nics) + " expected");
    if (!r.t.cut_off.empty()) missing.push_back("input cut off at " + r.t.cut_off);
    if (!node_judged) {
      if (r.rep.gpus.empty())
        missing.push_back("no GPU found");
      else if (r.rep.nics.empty() && r.opt.gpu_nic && (r.opt.gpu_nic_required || r.rep.pairs.empty()))
        missing.push_back("no RDMA NIC found");
      else if (r.rep.pairs.empty())
        missing.push_back("no pair to check");
    }
    judge_node(r.t, r.opt, r.rep);
    const NodeVerdict& n = r.rep.node;
    const std::string d = "iteration " + std::to_string(iter) + ": " + n.reason;
    ASSERT_EQ(n.all_pairs, r.opt.all_pairs) << d;
    ASSERT_EQ(n.expect_gpus, r.opt.expect_gpus) << d;
    ASSERT_EQ(n.expect_nics, r.opt.expect_nics) << d;
    // The digests: one per GPU in order, with its best NIC.
    ASSERT_EQ(n.gpus.size(), r.rep.gpus.size()) << d;
    for (size_t g = 0; g < best.size(); ++g) {
      ASSERT_EQ(n.gpus[g].gpu, r.rep.gpus[g]) << d;
      ASSERT_EQ(n.gpus[g].best_nic, best[g] ? best[g]->b : -1) << d;
      if (best[g]) {
        ASSERT_EQ(n.gpus[g].cls, best[g]->path.cls) << d;
        ASSERT_EQ(n.gpus[g].verdict, best[g]->verdict) << d;
      }
    }
    ASSERT_EQ(n.incomplete, !missing.empty()) << d;
    if (!missing.empty()) {
      ++incomplete;
      ASSERT_EQ(n.incomplete_reason, n.reason) << d;
      for (const auto& m : missing) ASSERT_TRUE(has(n.reason, m)) << d << " lacks " << m;
      ASSERT_EQ(count_of(n.reason, "; "), missing.size() - 1) << d;
      ASSERT_EQ(r.rep.exit_code(), 3) << d;
      ASSERT_STREQ(node_status(r.rep), "incomplete") << d;
      continue;
    }
    ++judged;
    ASSERT_EQ(n.verdict, want) << d;
    ASSERT_STREQ(node_status(r.rep), kVerdictNames[static_cast<int>(want)]) << d;
    ASSERT_TRUE(n.incomplete_reason.empty()) << d;
    if (!r.opt.all_pairs && want > Verdict::Optimal &&
        std::any_of(best.begin(), best.end(), [&](const PairResult* b) { return b && b->verdict == want; }))
      ++by_best_nic;
    const std::string counts = std::to_string(r.rep.gpus.size()) + " GPU(s), " + std::to_string(r.rep.nics.size()) + " NIC(s)";
    if (want == Verdict::Optimal) {
      if (r.opt.all_pairs) {
        ASSERT_EQ(n.reason, "all " + std::to_string(r.rep.pairs.size()) + " pairs optimal (" + counts + ")") << d;
      } else if (r.rep.nics.empty() || !r.opt.gpu_nic) {
        ASSERT_EQ(n.reason, counts + ": every checked pair optimal") << d;
      } else {
        ASSERT_TRUE(n.reason.rfind(counts + ": every GPU has an optimal NIC", 0) == 0) << d;
        ASSERT_EQ(has(n.reason, std::string("(worst other pair: ") + kVerdictNames[static_cast<int>(r.rep.worst)] + ")"),
                  r.rep.worst > Verdict::Optimal)
            << d;
      }
    } else {
      // The first source at the verdict, in the order GPUs, other pairs, node findings.
      std::string first;
      for (const auto& s : sources)
        if (s.first == want) {
          first = s.second;
          break;
        }
      ASSERT_EQ(n.reason, first) << d;
    }
  }
  EXPECT_GT(judged, 2000) << incomplete << " " << by_best_nic;
  EXPECT_GT(incomplete, 800) << judged << " " << by_best_nic;
  EXPECT_GT(by_best_nic, 400) << judged << " " << incomplete;
}

}  // namespace

// What NCCL, NVSHMEM and UCX decide for one GPU x NIC pair (stack_consumers.cpp), against the
// consumers' own decision code rather than gdrpeer's output (issue 28: the generated operator
// mutants of stack_consumers.cpp that no test killed). Each expectation cites its source:
//  - NCCL 2.30.7, src/graph/paths.cc: ncclTopoCheckGdr() ("if (net->net.gdrSupport == 0)",
//    "if (gpu->gpu.gdrSupport == 0)" return disabled; netGdrLevel = ncclParamNetGdrC2c() ?
//    PATH_P2C : PATH_PXB, NCCL_PARAM(NetGdrC2c, "NET_GDR_C2C", 1); a user level != -2 replaces
//    it; "if (distance > netGdrLevel)" disabled; mode PCI when the GPU's CPU path is C2C and
//    distance != PATH_P2C), ncclGetLevel() (names topoPathTypeStr LOC..SYS by strcmp, else a
//    leading digit: levelsOldToNew = {LOC, PIX, PXB, PHB, SYS, SYS}, clamped to 5; anything
//    else leaves the level unset), mergePathType() (PHB + C2C = P2C);
//    src/include/graph.h path order LOC NVL NVB C2C PIX PXB P2C PXN PHB SYS;
//    src/transport/net_ib: NCCL_IB_HCA "^" excludes, "=" matches exactly, else a prefix
//    (matchIfList/matchIf in src/misc/utils.cc, "matchIfList(...) ^ searchNot");
//    src/graph/topo.cc: <net gdr> = NCCL_PTR_CUDA || (dmaBufSupport && NCCL_PTR_DMABUF); the
//    NCCL_PTR_CUDA files nv_mem, nv_mem_nc, /sys/module/nvidia_peermem; NCCL_DMABUF_ENABLE read
//    with strtol (default 1).
//  - NVSHMEM 3.5.1, ibrc.cpp/ibdevx.cpp/ibgda.cpp and transport_ib_common.cpp
//    nvshmemt_ib_common_nv_peer_mem_available(): dma-buf first when CUDA says DMA_BUF_SUPPORTED
//    and NVSHMEM_IB_DISABLE_DMABUF is not set; else nv_mem, nvidia-peermem or
//    /sys/module/nvidia_peermem; else "Skipping transport".
//  - UCX 1.23.0, src/uct/ib/base/ib_md.c: peer memory through memory_peers/nv_mem,
//    /sys/module/nvidia_peermem or /sys/module/nv_peer_mem; dma-buf; UCX_IB_GPU_DIRECT_RDMA=no
//    off; both variables UCS_CONFIG_TYPE_TERNARY (src/ucs/config/parser.c
//    ucs_config_sscanf_ternary: "try"/"maybe", else ucs_config_sscanf_bool: y/yes/1, n/no/0,
//    letters in any case; anything else refused).
//  - NVSHMEM's nvshmemi_getenv_bool (env_defs_internal.h): a set variable is false when it
//    starts with 0, N, n, F or f, else true ("" included).
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "stack_internal.hpp"

using namespace gdrpeer::topo;
using namespace gdrpeer::topo::stack;

namespace {

using Env = std::map<std::string, std::string>;

struct Pair {
  Device gpu, nic;
  PairFacts p;
  NodeFacts n;
  Pair() {
    nic.rdma_name = "mlx5_0";
    p.gpu = &gpu;
    p.nic = &nic;
    p.cls = PathClass::PIX;
    n.inspected = true;
    // A node where nothing is known unless a test says so.
  }
  // Peer memory through NVIDIA's nv_mem client only (nvidia_peermem loaded, which registers it).
  // The two paths set together: nvidia_peermem loaded and registered as ib_core's nv_mem (or no
  // peer client at all), the kernel's dma-buf import, and CUDA's DMA_BUF_SUPPORTED.
  Pair& paths(int nv_mem, int kernel_dmabuf, int cuda_dmabuf) {
    n.mp_nv_mem = n.mod_nvidia_peermem = nv_mem;
    n.mp_nv_mem_nc = n.mp_nvidia_peermem = n.mod_nv_peer_mem = 0;
    n.kernel_dmabuf = kernel_dmabuf;
    p.cuda_dmabuf = cuda_dmabuf;
    return *this;
  }
  Pair& peer_only() { return paths(1, 0, 0); }
  Pair& dmabuf_only() { return paths(0, 1, 1); }
  Pair& nothing() { return paths(0, 1, 0); }
  Pair& allowed() {
    p.gate.dmabuf_default.allowed = p.gate.dmabuf_pcie.allowed = p.gate.nvidia_p2p.allowed = 1;
    return *this;
  }
  ConsumerDecision nccl(const Env& e = {}) const { return decide_nccl(n, p, e); }
  ConsumerDecision nvshmem(const Env& e = {}) const { return decide_nvshmem(n, p, e); }
  ConsumerDecision ucx(const Env& e = {}) const { return decide_ucx(n, p, e); }
};

// ncclTopoCheckGdr: on iff distance <= level. Levels per ncclGetLevel, path types per graph.h.
TEST(TruthNcclLevel, DistanceAgainstEveryLevelName) {
  const char* names[] = {"LOC", "NVL", "NVB", "C2C", "PIX", "PXB", "P2C", "PXN", "PHB", "SYS"};
  struct Cls {
    PathClass c;
    int nccl;  // graph.h index of NCCL's path type for it (NODE is PHB: one CPU per NUMA node)
  } classes[] = {{PathClass::PIX, 4}, {PathClass::PXB, 5}, {PathClass::PHB, 8}, {PathClass::NODE, 8}, {PathClass::SYS, 9}};
  for (int lvl = 0; lvl < 10; ++lvl)
    for (auto c : classes) {
      Pair x;
      x.allowed().dmabuf_only();
      x.p.cls = c.c;
      auto d = x.nccl({{"NCCL_NET_GDR_LEVEL", names[lvl]}});
      EXPECT_EQ(d.gdr, c.nccl <= lvl ? 1 : 0) << names[lvl] << " class " << c.nccl;
      EXPECT_NE(d.level.find(std::string(" vs ") + names[lvl] + " (NCCL_NET_GDR_LEVEL)"), std::string::npos) << d.level;
    }
}

TEST(TruthNcclLevel, OldNumbersAndNonsense) {
  // levelsOldToNew = {LOC, PIX, PXB, PHB, SYS, SYS}; >5 clamps to 5; leading digit only.
  struct Case {
    const char* v;
    const char* level;
  } cases[] = {{"0", "LOC"}, {"1", "PIX"}, {"2", "PXB"},  {"3", "PHB"},   {"4", "SYS"},   {"5", "SYS"},
               {"6", "SYS"}, {"9", "SYS"}, {"42", "SYS"}, {"0x3", "PHB"}, {"3abc", "PHB"}};
  for (auto c : cases) {
    Pair x;
    x.allowed().dmabuf_only();
    auto d = x.nccl({{"NCCL_NET_GDR_LEVEL", c.v}});
    EXPECT_EQ(d.level, std::string("PIX vs ") + c.level + " (NCCL_NET_GDR_LEVEL)") << c.v;
  }
  // Not a name, no leading digit (or a lower-case name: strcmp): the level stays the default.
  for (const char* v : {"pix", "PHBX", "-1", " 3", "x"}) {
    Pair x;
    x.allowed().dmabuf_only();
    EXPECT_EQ(x.nccl({{"NCCL_NET_GDR_LEVEL", v}}).level, "PIX vs P2C (default, NCCL_NET_GDR_C2C=1)") << v;
  }
}

TEST(TruthNcclLevel, OldNumberZeroIsLocOnly) {
  Pair x;
  x.allowed().dmabuf_only();
  EXPECT_EQ(x.nccl({{"NCCL_NET_GDR_LEVEL", "0"}}).gdr, 0);  // PIX > LOC
  EXPECT_EQ(x.nccl({{"NCCL_NET_GDR_LEVEL", "1"}}).gdr, 1);  // PIX <= PIX
}

TEST(TruthNcclLevel, C2cDefault) {
  // NCCL_NET_GDR_C2C (default 1): P2C; 0: PXB. strtol, so "00" and "0x0" are 0, "2" is on.
  for (auto [v, lvl] : std::initializer_list<std::pair<const char*, const char*>>{
           {"", "P2C"}, {"1", "P2C"}, {"2", "P2C"}, {"0", "PXB"}, {"00", "PXB"}, {"0x0", "PXB"}}) {
    Pair x;
    x.allowed().dmabuf_only();
    Env e;
    if (*v) e["NCCL_NET_GDR_C2C"] = v;
    auto d = x.nccl(e);
    EXPECT_EQ(d.level.substr(0, 10), std::string("PIX vs ") + lvl) << v;
    EXPECT_NE(d.level.find(*v == 0                     ? "(default, NCCL_NET_GDR_C2C=1)"
                           : std::string(lvl) == "PXB" ? "(NCCL_NET_GDR_C2C=0)"
                                                       : "(default"),
              std::string::npos)
        << v << ": " << d.level;
  }
}

TEST(TruthNcclLevel, C2cGpuPhbNicIsP2cAndDefaultMode) {
  // mergePathType(C2C, PHB) = P2C <= P2C (default level): on, mode Default (distance == P2C).
  Pair x;
  x.allowed().dmabuf_only();
  x.p.c2c = true;
  x.p.cls = PathClass::PHB;
  auto d = x.nccl();
  EXPECT_EQ(d.gdr, 1);
  EXPECT_EQ(d.level, "P2C vs P2C (default, NCCL_NET_GDR_C2C=1)");
  EXPECT_EQ(d.mapping, "default");
  // NCCL_NET_GDR_C2C=0: PXB level, P2C > PXB: off.
  EXPECT_EQ(x.nccl({{"NCCL_NET_GDR_C2C", "0"}}).gdr, 0);
  // The same NIC on a GPU without C2C is PHB > P2C: off.
  x.p.c2c = false;
  EXPECT_EQ(x.nccl().gdr, 0);
  EXPECT_EQ(x.nccl().level, "PHB vs P2C (default, NCCL_NET_GDR_C2C=1)");
}

TEST(TruthNcclLevel, C2cGpuBehindSwitchIsPciMode) {
  // C2C GPU, NIC under a switch (PIX): distance != P2C, so ncclTopoGdrModePci (dma-buf with the
  // PCIe mapping type): the driver's PCIe-type gate decides, not the default one.
  Pair x;
  x.allowed().dmabuf_only();
  x.p.c2c = true;
  x.p.gate.dmabuf_pcie.allowed = 0;
  x.p.gate.dmabuf_pcie.why = "different IOMMU groups";
  auto d = x.nccl();
  EXPECT_EQ(d.mapping, "pcie");
  EXPECT_EQ(d.gdr, 1);
  EXPECT_EQ(d.path, "dma-buf");
  EXPECT_EQ(d.rule, "exporter-gate");
  EXPECT_NE(d.why.find("PCIe mapping type"), std::string::npos);
  // Non-C2C GPU: default mode, the default gate (allowed) decides: no finding.
  x.p.c2c = false;
  auto e = x.nccl();
  EXPECT_EQ(e.mapping, "default");
  EXPECT_EQ(e.rule, "");
  // The PCIe mapping type is named only where NCCL uses it.
  EXPECT_EQ(e.why.find("PCIe"), std::string::npos) << e.why;
  x.p.c2c = true;
  x.p.gate.dmabuf_pcie.allowed = 1;
  auto a = x.nccl();
  EXPECT_NE(a.why.find("dma-buf with the PCIe mapping type"), std::string::npos) << a.why;
  EXPECT_EQ(a.why.find("unknown"), std::string::npos) << a.why;  // an allowed gate adds nothing
  x.p.gate.dmabuf_pcie.allowed = 0;
  EXPECT_NE(x.nccl().why.find("refuse the PCIe mapping type (FORCE_PCIE)"), std::string::npos);
  x.p.c2c = false;
  x.p.gate.dmabuf_default.allowed = 0;
  EXPECT_NE(x.nccl().why.find("refuse the dma-buf attach"), std::string::npos) << x.nccl().why;
  x.p.gate.dmabuf_default.allowed = 1;
  // And the default gate refusing is what a default-mode pair reports.
  x.p.gate.dmabuf_default.allowed = 0;
  EXPECT_EQ(x.nccl().rule, "exporter-gate");
  x.p.gate.dmabuf_default.allowed = -1;
  auto u = x.nccl();
  EXPECT_EQ(u.rule, "");
  EXPECT_NE(u.why.find("is unknown"), std::string::npos);
}

// ncclTopoCheckGdr returns Disabled first on the NIC's and the GPU's gdrSupport.
TEST(TruthNcclSupport, GpuOrNicWithoutGdr) {
  Pair x;
  x.allowed().dmabuf_only();
  x.p.cuda_gdr = 0;
  auto d = x.nccl();
  EXPECT_EQ(d.gdr, 0);
  EXPECT_EQ(d.rule, "consumer-nccl");
  x.p.cuda_gdr = -1;  // unknown GPU side is taken as supported (docs/check.md)
  EXPECT_EQ(x.nccl().gdr, 1);
  x.p.cuda_gdr = 1;
  x.p.xml_gpu_gdr = 0;  // <gpu gdr=0> wins over CUDA
  EXPECT_EQ(x.nccl().gdr, 0);
  x.p.cuda_gdr = 0;
  x.p.xml_gpu_gdr = 1;
  EXPECT_EQ(x.nccl().gdr, 1);
  // Even beyond the level, a GPU without gdr is the reason (checked before the distance).
  x.p.xml_gpu_gdr = 0;
  x.p.cls = PathClass::SYS;
  EXPECT_EQ(x.nccl().rule, "consumer-nccl");
}

TEST(TruthNcclSupport, NetGdrFromPeerFilesOrDmabuf) {
  // NCCL_PTR_CUDA: any of nv_mem, nv_mem_nc, /sys/module/nvidia_peermem; NCCL_PTR_DMABUF with
  // dmaBufSupport; <net gdr> = either.
  struct Case {
    Tri nv_mem, nv_mem_nc, mod, kdmabuf, cdmabuf;
    int gdr;
    const char* path;
  } cases[] = {
      {1, 0, 0, 0, 0, 1, "peer-memory"}, {0, 1, 0, 0, 0, 1, "peer-memory"}, {0, 0, 1, 0, 0, 1, "peer-memory"},
      {0, 0, 0, 1, 1, 1, "dma-buf"},     {1, 1, 1, 1, 1, 1, "dma-buf"},     {0, 0, 0, 1, 0, 0, "none"},
      {0, 0, 0, 0, 1, 0, "none"},        {0, 0, 0, -1, 1, -1, "unknown"},   {-1, 0, 0, 0, 0, -1, "unknown"},
      {0, -1, 0, 0, 0, -1, "unknown"},   {0, 0, -1, 0, 0, -1, "unknown"},   {1, 0, 0, -1, -1, 1, "peer-memory"},
      {0, 0, 0, 1, -1, -1, "unknown"},
  };
  for (auto c : cases) {
    Pair x;
    x.allowed();
    x.n.mp_nv_mem = c.nv_mem;
    x.n.mp_nv_mem_nc = c.nv_mem_nc;
    x.n.mod_nvidia_peermem = c.mod;
    x.n.kernel_dmabuf = c.kdmabuf;
    x.p.cuda_dmabuf = c.cdmabuf;
    auto d = x.nccl();
    EXPECT_EQ(d.gdr, c.gdr) << c.nv_mem << c.nv_mem_nc << c.mod << c.kdmabuf << c.cdmabuf;
    if (c.gdr != -1 || std::string(c.path) == "unknown") {
      EXPECT_EQ(d.path, c.path) << c.nv_mem << c.nv_mem_nc << c.mod << c.kdmabuf << c.cdmabuf;
    }
    EXPECT_EQ(d.rule, c.gdr == 0 ? "consumer-nccl"
                      : (c.mod == 1 && c.nv_mem == 0 && c.nv_mem_nc == 0 && c.gdr == 1 && std::string(c.path) == "peer-memory")
                          ? "consumer-nccl"
                          : "")
        << c.nv_mem << c.nv_mem_nc << c.mod << c.kdmabuf << c.cdmabuf;
  }
}

TEST(TruthNcclSupport, DmabufEnableIsStrtol) {
  // NCCL_DMABUF_ENABLE (default 1) through ncclParam (strtoll base 0): "0", "00", "0x0" off.
  for (auto [v, on] : std::initializer_list<std::pair<const char*, bool>>{
           {"0", false}, {"00", false}, {"0x0", false}, {"1", true}, {"2", true}, {"", true}}) {
    Pair x;
    x.allowed().dmabuf_only();
    Env e;
    if (*v) e["NCCL_DMABUF_ENABLE"] = v;
    auto d = x.nccl(e);
    EXPECT_EQ(d.gdr, on ? 1 : 0) << v;
    if (!on) {
      EXPECT_NE(d.why.find("NCCL_DMABUF_ENABLE=0"), std::string::npos) << d.why;
    }
  }
}

TEST(TruthNcclSupport, WhyTheNicSideIsOff) {
  Pair x;
  x.allowed().nothing();
  x.n.kernel_dmabuf = 0;
  EXPECT_NE(x.nccl().why.find("Linux < 5.12"), std::string::npos);
  x.n.kernel_dmabuf = 1;
  EXPECT_NE(x.nccl().why.find("DMA_BUF_SUPPORTED=0"), std::string::npos);
}

TEST(TruthNcclSupport, XmlNetGdrOverrides) {
  Pair x;
  x.allowed().nothing();
  x.p.xml_net_gdr = 1;  // NCCL's own file says the NIC side is on: no way (dma-buf or peer) known
  auto d = x.nccl();
  EXPECT_EQ(d.gdr, 1);
  EXPECT_EQ(d.path, "unknown");
  x.p.xml_net_gdr = 0;
  x.dmabuf_only();
  auto e = x.nccl();
  EXPECT_EQ(e.gdr, 0);
  EXPECT_NE(e.why.find("gdr=0"), std::string::npos);
  x.p.xml_net_gdr = 1;
  x.p.cuda_dmabuf = -1;  // net gdr=1 from the file, dma-buf unknown: on, path unknown
  EXPECT_EQ(x.nccl().gdr, 1);
  EXPECT_EQ(x.nccl().path, "unknown");
}

TEST(TruthNcclSupport, PeerMemoryGateAndModuleOnly) {
  // Peer memory: the nvidia_p2p gate decides; /sys/module/nvidia_peermem alone (no nv_mem client
  // registered) makes NCCL say Enabled while registration fails.
  Pair x;
  x.allowed().peer_only();
  auto d = x.nccl();
  EXPECT_EQ(d.path, "peer-memory");
  EXPECT_EQ(d.rule, "");
  x.p.gate.nvidia_p2p.allowed = 0;
  EXPECT_EQ(x.nccl().rule, "exporter-gate");
  x.p.gate.nvidia_p2p.allowed = 1;
  x.n.mp_nv_mem = 0;
  auto m = x.nccl();
  EXPECT_EQ(m.gdr, 1);
  EXPECT_EQ(m.rule, "consumer-nccl");
  x.n.mp_nv_mem_nc = 1;
  EXPECT_EQ(x.nccl().rule, "");
  x.n.mp_nv_mem_nc = -1;  // unknown is not "no client"
  EXPECT_EQ(x.nccl().rule, "");
  x.n.mp_nv_mem_nc = 0;
  x.n.mp_nv_mem = -1;
  EXPECT_EQ(x.nccl().rule, "");
}

TEST(TruthNcclHca, MatchIfListPrefixExactExclude) {
  struct Case {
    const char* spec;
    const char* dev;
    bool used;
  } cases[] = {
      {"mlx5", "mlx5_0", true},
      {"mlx5_1", "mlx5_0", false},
      {"=mlx5", "mlx5_0", false},
      {"=mlx5_0", "mlx5_0", true},
      {"^mlx5_0", "mlx5_0", false},
      {"^mlx5_1", "mlx5_0", true},
      {"^=mlx5", "mlx5_0", true},
      {"^=mlx5_0", "mlx5_0", false},
      {"mlx5_1,mlx5_0:1", "mlx5_0", true},
      {"mlx5_0:1", "mlx5_0", true},
      {"mlx5_00", "mlx5_0", false},
      {"bnxt,mlx", "mlx5_0", true},
      {"=mlx5_0,mlx5_1", "mlx5_1", true},
      {",mlx5_0", "mlx5_0", true},
      // parseStringList drops entries with no name (",", ":1"); matchIfList with no entry at all
      // matches every device, then "^" inverts it.
      {"mlx5_1,", "mlx5_0", false},
      {",mlx5_1", "mlx5_0", false},
      {"mlx5_1,:1", "mlx5_0", false},
      {"^", "mlx5_0", false},
      {"^=", "mlx5_0", false},
      {"^,", "mlx5_0", false},
      {"=", "mlx5_0", true},
      {":1", "mlx5_0", true},
      {",", "mlx5_0", true},
      {"^:1", "mlx5_0", false},
  };
  for (auto c : cases) {
    Pair x;
    x.allowed().dmabuf_only();
    x.nic.rdma_name = c.dev;
    auto d = x.nccl({{"NCCL_IB_HCA", c.spec}});
    if (c.used) {
      EXPECT_EQ(d.gdr, 1) << c.spec << " " << c.dev;
    } else {
      EXPECT_EQ(d.gdr, 0) << c.spec << " " << c.dev;
      EXPECT_EQ(d.path, "none");
      EXPECT_NE(d.why.find("leaves " + std::string(c.dev) + " out"), std::string::npos);
    }
  }
  // A NIC with no RDMA name cannot be matched: unknown, so the rest of the decision stands.
  Pair x;
  x.allowed().dmabuf_only();
  x.nic.rdma_name = "";
  EXPECT_EQ(x.nccl({{"NCCL_IB_HCA", "^mlx5_0"}}).gdr, 1);
  EXPECT_EQ(x.nccl({{"NCCL_IB_HCA", "mlx5_0"}}).gdr, 1);
}

// NVSHMEM: dma-buf first, else peer memory (nv_mem, nvidia-peermem, the module), else skipped.
TEST(TruthNvshmem, Table) {
  struct Case {
    Tri cdmabuf, kdmabuf, nv_mem, nvpm, mod;
    const char* off;
    int gdr;
    const char* path;
  } cases[] = {
      {1, 1, 0, 0, 0, nullptr, 1, "dma-buf"},
      {1, 1, 1, 0, 0, "1", 1, "peer-memory"},
      {1, 1, 0, 0, 0, "1", 0, "none"},
      {1, 1, 0, 0, 0, "0", 1, "dma-buf"},
      {1, 1, 0, 0, 0, "false", 1, "dma-buf"},
      {1, 1, 0, 0, 0, "n", 1, "dma-buf"},
      {1, 1, 0, 0, 0, "no", 1, "dma-buf"},
      {1, 1, 0, 0, 0, "", 0, "none"},
      {1, 1, 0, 0, 0, "yes", 0, "none"},
      // nvshmemi_getenv_bool: set and starting with 0, N, n, F or f is false, anything else true.
      {1, 1, 0, 0, 0, "FALSE", 1, "dma-buf"},
      {1, 1, 0, 0, 0, "No", 1, "dma-buf"},
      {1, 1, 0, 0, 0, "0x1", 1, "dma-buf"},
      {1, 1, 0, 0, 0, "nope", 1, "dma-buf"},
      {1, 1, 0, 0, 0, "f", 1, "dma-buf"},
      {1, 1, 0, 0, 0, "off", 0, "none"},
      {1, 1, 0, 0, 0, "true", 0, "none"},
      {0, 1, 1, 0, 0, nullptr, 1, "peer-memory"},
      {0, 1, 0, 1, 0, nullptr, 1, "peer-memory"},
      {0, 1, 0, 0, 1, nullptr, 1, "peer-memory"},
      {1, 0, 0, 0, 1, nullptr, 1, "peer-memory"},
      {0, 1, 0, 0, 0, nullptr, 0, "none"},
      {-1, 1, 1, 0, 0, nullptr, -1, "unknown"},
      {0, 1, -1, 0, 0, nullptr, -1, "unknown"},
      {0, 1, 0, -1, 0, nullptr, -1, "unknown"},
      {0, 1, 0, 0, -1, nullptr, -1, "unknown"},
      {1, -1, 0, 0, 0, nullptr, -1, "unknown"},
  };
  for (auto c : cases) {
    Pair x;
    x.allowed();
    x.p.cuda_dmabuf = c.cdmabuf;
    x.n.kernel_dmabuf = c.kdmabuf;
    x.n.mp_nv_mem = c.nv_mem;
    x.n.mp_nvidia_peermem = c.nvpm;
    x.n.mod_nvidia_peermem = c.mod;
    x.n.mp_nv_mem_nc = 1;     // NCCL's own client name: NVSHMEM does not look for it
    x.n.mod_nv_peer_mem = 1;  // nor for nv_peer_mem's module
    Env e;
    if (c.off) e["NVSHMEM_IB_DISABLE_DMABUF"] = c.off;
    auto d = x.nvshmem(e);
    std::string tag = std::to_string(c.cdmabuf) + std::to_string(c.kdmabuf) + std::to_string(c.nv_mem) + std::to_string(c.nvpm) +
                      std::to_string(c.mod) + (c.off ? c.off : "-");
    EXPECT_EQ(d.gdr, c.gdr) << tag;
    EXPECT_EQ(d.path, c.path) << tag;
    EXPECT_EQ(d.rule, c.gdr == 0 ? "consumer-nvshmem" : "") << tag;
  }
}

TEST(TruthNvshmem, WhyAndGates) {
  Pair x;
  x.allowed().peer_only();
  EXPECT_NE(x.nvshmem().why.find("dma-buf not available"), std::string::npos);
  x.p.cuda_dmabuf = 1;
  x.n.kernel_dmabuf = 1;
  EXPECT_NE(x.nvshmem({{"NVSHMEM_IB_DISABLE_DMABUF", "1"}}).why.find("NVSHMEM_IB_DISABLE_DMABUF set"), std::string::npos);
  // dma-buf goes through the default attach gate; peer memory through nvidia_p2p.
  x.p.gate.dmabuf_default.allowed = 0;
  EXPECT_EQ(x.nvshmem().rule, "exporter-gate");
  EXPECT_EQ(x.nvshmem({{"NVSHMEM_IB_DISABLE_DMABUF", "1"}}).rule, "");
  x.p.gate.nvidia_p2p.allowed = 0;
  EXPECT_EQ(x.nvshmem({{"NVSHMEM_IB_DISABLE_DMABUF", "1"}}).rule, "exporter-gate");
}

// UCX: UCX_IB_GPU_DIRECT_RDMA=no off; dma-buf unless UCX_CUDA_COPY_DMABUF=no; peer memory
// through nv_mem, /sys/module/nvidia_peermem or /sys/module/nv_peer_mem.
TEST(TruthUcx, Table) {
  struct Case {
    Tri cdmabuf, kdmabuf, nv_mem, mod, nvpm_mod;
    const char* gdr_env;
    const char* copy_env;
    int gdr;
    const char* path;
  } cases[] = {
      {1, 1, 0, 0, 0, nullptr, nullptr, 1, "dma-buf"},
      {1, 1, 1, 1, 1, "no", nullptr, 0, "none"},
      {1, 1, 0, 0, 0, "n", nullptr, 0, "none"},
      {1, 1, 0, 0, 0, "0", nullptr, 0, "none"},
      {1, 1, 0, 0, 0, "NO", nullptr, 0, "none"},
      {1, 1, 0, 0, 0, "N", nullptr, 0, "none"},
      {1, 1, 0, 0, 0, "Yes", nullptr, 1, "dma-buf"},
      {1, 1, 0, 0, 0, "y", nullptr, 1, "dma-buf"},
      {1, 1, 0, 0, 0, "Y", nullptr, 1, "dma-buf"},
      {1, 1, 0, 0, 0, nullptr, "y", 1, "dma-buf"},
      {1, 1, 0, 0, 0, "maybe", nullptr, 1, "dma-buf"},
      {1, 1, 0, 0, 0, "TRY", nullptr, 1, "dma-buf"},
      {1, 1, 0, 0, 0, "1", nullptr, 1, "dma-buf"},
      {1, 1, 1, 0, 0, nullptr, "No", 1, "peer-memory"},
      // Refused by ucs_config_sscanf_ternary: UCX does not start, nothing is known.
      {1, 1, 0, 0, 0, "off", nullptr, -1, "unknown"},
      {1, 1, 0, 0, 0, "", nullptr, -1, "unknown"},
      {1, 1, 0, 0, 0, "false", nullptr, -1, "unknown"},
      {1, 1, 0, 0, 0, nullptr, "off", -1, "unknown"},
      {1, 1, 0, 0, 0, "no", "bogus", -1, "unknown"},
      {1, 1, 0, 0, 0, nullptr, "", -1, "unknown"},
      {1, 1, 0, 0, 0, "yes", nullptr, 1, "dma-buf"},
      {1, 1, 0, 0, 0, "try", nullptr, 1, "dma-buf"},
      {1, 1, 1, 0, 0, nullptr, "no", 1, "peer-memory"},
      {1, 1, 0, 0, 0, nullptr, "no", 0, "none"},
      {1, 1, 0, 0, 0, nullptr, "yes", 1, "dma-buf"},
      {0, 1, 1, 0, 0, nullptr, nullptr, 1, "peer-memory"},
      {0, 1, 0, 1, 0, nullptr, nullptr, 1, "peer-memory"},
      {0, 1, 0, 0, 1, nullptr, nullptr, 1, "peer-memory"},
      {1, 0, 0, 0, 1, nullptr, nullptr, 1, "peer-memory"},
      {0, 1, 0, 0, 0, nullptr, nullptr, 0, "none"},
      {-1, 1, 1, 0, 0, nullptr, nullptr, -1, "unknown"},
      {0, 1, -1, 0, 0, nullptr, nullptr, -1, "unknown"},
      {0, 1, 0, -1, 0, nullptr, nullptr, -1, "unknown"},
      {0, 1, 0, 0, -1, nullptr, nullptr, -1, "unknown"},
      {1, -1, 0, 0, 0, nullptr, nullptr, -1, "unknown"},
  };
  for (auto c : cases) {
    Pair x;
    x.allowed();
    x.p.cuda_dmabuf = c.cdmabuf;
    x.n.kernel_dmabuf = c.kdmabuf;
    x.n.mp_nv_mem = c.nv_mem;
    x.n.mod_nvidia_peermem = c.mod;
    x.n.mod_nv_peer_mem = c.nvpm_mod;
    x.n.mp_nv_mem_nc = 1;       // NCCL's client name: UCX does not look for it
    x.n.mp_nvidia_peermem = 1;  // NVSHMEM's: nor this one
    Env e;
    if (c.gdr_env) e["UCX_IB_GPU_DIRECT_RDMA"] = c.gdr_env;
    if (c.copy_env) e["UCX_CUDA_COPY_DMABUF"] = c.copy_env;
    auto d = x.ucx(e);
    std::string tag = std::to_string(c.cdmabuf) + std::to_string(c.kdmabuf) + std::to_string(c.nv_mem) + std::to_string(c.mod) +
                      std::to_string(c.nvpm_mod) + (c.gdr_env ? c.gdr_env : "-") + (c.copy_env ? c.copy_env : "-");
    EXPECT_EQ(d.gdr, c.gdr) << tag;
    EXPECT_EQ(d.path, c.path) << tag;
    EXPECT_EQ(d.rule, c.gdr == 0 && !c.gdr_env ? "consumer-ucx" : "") << tag;
  }
}

TEST(TruthTri, Words) {
  // Tri is -1 unknown, 0 no, 1 yes (stack_internal.hpp).
  EXPECT_STREQ(tri_word(1), "yes");
  EXPECT_STREQ(tri_word(0), "no");
  EXPECT_STREQ(tri_word(-1), "unknown");
}

TEST(TruthUcx, Gates) {
  Pair x;
  x.allowed().dmabuf_only();
  x.p.gate.dmabuf_default.allowed = 0;
  EXPECT_EQ(x.ucx().rule, "exporter-gate");
  x.p.gate.dmabuf_default.allowed = 1;
  x.p.gate.dmabuf_pcie.allowed = 0;  // UCX maps with the default type
  EXPECT_EQ(x.ucx().rule, "");
  x.peer_only();
  x.p.gate.nvidia_p2p.allowed = 0;
  EXPECT_EQ(x.ucx().rule, "exporter-gate");
}

// gdrpeer's client under a consumer's name with peermem_cuda=off: that consumer's GPU memory
// finds no client (docs/check.md: nv_mem NCCL, NVSHMEM, UCX; nv_mem_nc NCCL; nvidia-peermem
// NVSHMEM), unless NVIDIA's own peer module is loaded to serve it.
TEST(TruthUnserved, WhichConsumerSeesWhichName) {
  struct Case {
    const char* name;
    bool nccl, nvshmem, ucx;
  } cases[] = {{"nv_mem", true, true, true},
               {"nv_mem_nc", true, false, false},
               {"nvidia-peermem", false, true, false},
               {"gdrpeer", false, false, false}};
  for (auto c : cases) {
    Pair x;
    x.allowed();
    x.n.kernel_dmabuf = 0;
    x.p.cuda_dmabuf = 0;
    x.n.mod_nvidia_peermem = 0;
    x.n.mod_nv_peer_mem = 0;
    // Another client answers to nv_mem, so every consumer takes peer memory: only the one that
    // looks for the unserved name is affected.
    x.n.mp_nv_mem = 1;
    x.n.mp_nv_mem_nc = std::string(c.name) == "nv_mem_nc";
    x.n.mp_nvidia_peermem = std::string(c.name) == "nvidia-peermem";
    x.n.unserved_client = c.name;
    x.n.unserved_why = "not claimed";
    auto n = x.nccl(), s = x.nvshmem(), u = x.ucx();
    const std::string says = "serves no CUDA addresses (not claimed)";
    EXPECT_EQ(n.why.find(says) != std::string::npos, c.nccl) << c.name << n.why;
    EXPECT_EQ(s.why.find(says) != std::string::npos, c.nvshmem) << c.name << s.why;
    EXPECT_EQ(u.why.find(says) != std::string::npos, c.ucx) << c.name << u.why;
    if (c.nccl) {
      EXPECT_EQ(n.rule, "consumer-nccl");
    }
    if (c.nvshmem) {
      EXPECT_EQ(s.rule, "consumer-nvshmem");
    }
    if (c.ucx) {
      EXPECT_EQ(u.rule, "consumer-ucx");
    }
    // nvidia_peermem (or nv_peer_mem) loaded serves the addresses: no finding.
    for (Tri* mod : {&x.n.mod_nvidia_peermem, &x.n.mod_nv_peer_mem}) {
      *mod = 1;
      EXPECT_EQ(x.nvshmem().why.find("serves no CUDA"), std::string::npos) << c.name;
      EXPECT_EQ(x.ucx().why.find("serves no CUDA"), std::string::npos) << c.name;
      EXPECT_EQ(x.nccl().why.find("serves no CUDA"), std::string::npos) << c.name;
      *mod = 0;
    }
  }
}

}  // namespace

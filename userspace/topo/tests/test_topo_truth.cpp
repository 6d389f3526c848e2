// The checker against independent truth, category by category, on synthetic
// sysfs trees (and lspci text) built here:
//  - path classes by nvidia-smi's definitions (PIX: at most one PCIe switch;
//    PXB: several, not through the host bridge; PHB: through one host bridge;
//    NODE: between host bridges of one NUMA node; SYS: across sockets), for
//    every depth of either device, both argument orders and both roles;
//  - NCCL's default GDR level (on up to PXB, off beyond) and CUDA's three
//    cases, for every class;
//  - ACS: each of the seven control bits alone, on every port of the peer
//    path (PCIe base spec: Request Redirect, Completion Redirect and Egress
//    Control send peer traffic up to the root complex; the other four do not);
//  - IOMMU group types as kernels name them (DMA on 5.x, DMA-FQ on 6.x,
//    identity, mixed): translating groups block, identity does not;
//  - unknown NUMA on either side; the software and root-complex rules.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <tuple>

#include "gdrpeer/topo/inputs.hpp"
#include "gdrpeer/topo/render.hpp"
#include "gdrpeer/topo/rule_data.hpp"
#include "gdrpeer/topo/rules.hpp"
#include "test_topo_support.hpp"

namespace gdrpeer::topo {
namespace {

using testing::add_device;
using testing::add_tree_device;
using testing::FakeFn;
using testing::FakeNode;
using testing::from_fake;
using testing::kb;

constexpr uint16_t kPlx = 0x10b5;  // PLX/Broadcom PEX 9797: a switch NCCL does not flatten

// A synthetic node built port by port; bus numbers are handed out in order.
struct Builder {
  FakeNode node;
  std::map<std::string, std::string> path;  // BDF -> sysfs directory
  int next_bus = 1;

  Builder() { node.modules = "nvidia 1 0 - Live 0x0\nnvidia_peermem 1 0 - Live 0x0\nib_core 1 0 - Live 0x0\n"; }

  FakeFn& add(const std::string& bdf, const std::string& parent, uint16_t vendor, uint16_t device, uint32_t cls, int port_type,
              int secondary, int numa) {
    const std::string dir = (parent.empty() ? "/sys/devices/pci" + bdf.substr(0, 7) : path.at(parent)) + "/" + bdf;
    path[bdf] = dir;
    FakeFn& f = testing::add_fn(node, bdf, dir, vendor, device, cls, port_type, secondary);
    f.numa = numa;
    return f;
  }
  static std::string addr(int domain, int bus, int dev) {
    char b[32];
    std::snprintf(b, sizeof b, "%04x:%02x:%02x.0", domain, bus, dev);
    return b;
  }
  // A root port on host bridge `root_bus` (0x00, 0x80, ...); returns its BDF.
  std::string root_port(int root_bus, int dev, int numa = 0) {
    std::string b = addr(0, root_bus, dev);
    int sec = root_bus + next_bus++;
    add(b, "", 0x1022, 0x14ab, 0x060400, testing::kRootPort, sec, numa);
    return b;
  }
  int secondary(const std::string& bridge) const {
    for (const auto& f : node.fns)
      if (f.bdf == bridge) return f.secondary_bus;
    ADD_FAILURE() << "no bridge " << bridge;
    return 0;
  }
  // A switch below `port`: its upstream port and `dsps` downstream ports; returns the downstream BDFs.
  std::vector<std::string> switch_below(const std::string& port, int dsps, int numa = 0) {
    std::string usp = addr(0, secondary(port), 0);
    // Buses come from a wide counter so that nested switches never collide.
    int inner = 0x10 * next_bus++ + 1;
    add(usp, port, kPlx, 0x9797, 0x060400, testing::kUpstream, inner, numa);
    std::vector<std::string> out;
    for (int i = 0; i < dsps; ++i) {
      std::string d = addr(0, inner, i);
      add(d, usp, kPlx, 0x9797, 0x060400, testing::kDownstream, 0x10 * next_bus++ + 2, numa).acs = true;
      out.push_back(d);
    }
    return out;
  }
  std::string endpoint_below(const std::string& port, bool gpu, int numa = 0) {
    std::string b = addr(0, secondary(port), 0);
    if (gpu) {
      // H100 PCIe (10de:2331): a PCIe card, so GPU pairs are judged on their PCIe path
      // (an SXM part would have NVLink inferred from its model, gpus.json nvlink_baseboards).
      add(b, port, 0x10de, 0x2331, 0x030200, testing::kEndpoint, -1, numa).resource =
          "0x00000000f8000000 0x00000000f8ffffff 0x0000000000040200\n"
          "0x0000100000000000 0x0000100fffffffff 0x000000000014220c\n";
    } else {
      add(b, port, 0x15b3, 0x1021, 0x020700, testing::kEndpoint, -1, numa);
    }
    return b;
  }
  FakeFn& fn(const std::string& bdf) {
    for (auto& f : node.fns)
      if (f.bdf == bdf) return f;
    throw std::runtime_error("no function " + bdf);
  }
};

const PairResult& only_pair(const Report& r) {
  EXPECT_EQ(r.pairs.size(), 1u);
  return r.pairs.at(0);
}

bool has_rule(const PairResult& p, const std::string& rule) {
  return std::any_of(p.findings.begin(), p.findings.end(), [&](const Finding& f) { return f.rule == rule; });
}

const Finding* finding(const PairResult& p, const std::string& rule) {
  for (const auto& f : p.findings)
    if (f.rule == rule) return &f;
  return nullptr;
}

// ---- classes: switch depth on either side ---------------------------------

// Below one root port, one switch; on each of two of its downstream ports a
// chain of `extra_a` / `extra_b` further switches, then an endpoint. nvidia-smi:
// PIX when both endpoints sit on downstream ports of that one switch, PXB as
// soon as either side crosses a second switch.
struct Branches {
  Builder b;
  std::string a, b_end;
  std::vector<std::string> below_a, below_b;  // downstream ports below the meeting switch's upstream port
  std::string meeting_usp, root;
};

Branches branches(int extra_a, int extra_b, bool gpu_on_a) {
  Branches x;
  x.root = x.b.root_port(0, 1);
  auto top = x.b.switch_below(x.root, 2);
  x.meeting_usp = Builder::addr(0, x.b.secondary(x.root), 0);
  auto chain = [&](std::string port, int extra, std::vector<std::string>& below) {
    below.push_back(port);
    for (int i = 0; i < extra; ++i) {
      port = x.b.switch_below(port, 1)[0];
      below.push_back(port);
    }
    return port;
  };
  std::string pa = chain(top[0], extra_a, x.below_a);
  std::string pb = chain(top[1], extra_b, x.below_b);
  x.a = x.b.endpoint_below(pa, gpu_on_a);
  x.b_end = x.b.endpoint_below(pb, !gpu_on_a);
  return x;
}

TEST(TruthClass, SwitchDepthOnEitherSideBothOrdersBothRoles) {
  for (int ea = 0; ea <= 2; ++ea)
    for (int eb = 0; eb <= 2; ++eb)
      for (bool gpu_on_a : {true, false}) {
        SCOPED_TRACE("extra switches a=" + std::to_string(ea) + " b=" + std::to_string(eb) + (gpu_on_a ? " GPU on a" : " GPU on b"));
        Branches x = branches(ea, eb, gpu_on_a);
        Topology t = from_fake(x.b.node);
        const PathClass want = ea == 0 && eb == 0 ? PathClass::PIX : PathClass::PXB;
        const int ia = t.find(x.a), ib = t.find(x.b_end);
        ASSERT_GE(ia, 0);
        ASSERT_GE(ib, 0);
        EXPECT_EQ(classify(t, ia, ib, kb()).cls, want);
        EXPECT_EQ(classify(t, ib, ia, kb()).cls, want);
        Report r = check(t, kb(), CheckOptions{});
        const PairResult& p = only_pair(r);
        EXPECT_EQ(p.path.cls, want);
        EXPECT_TRUE(p.path.nccl_gdr);
        EXPECT_EQ(p.verdict, Verdict::Optimal) << (p.findings.empty() ? "" : p.findings[0].reason);
        EXPECT_EQ(r.exit_code(), 0);
        // The matrix says the same from either row.
        EXPECT_EQ(r.path_class(ia, ib), want);
        EXPECT_EQ(r.path_class(ib, ia), want);
      }
}

TEST(TruthClass, SwitchOnOneRootPortDeviceOnAnotherIsPhbBothWays) {
  for (bool gpu_behind_switch : {true, false}) {
    Builder b;
    std::string rp1 = b.root_port(0, 1), rp2 = b.root_port(0, 2);
    auto dsp = b.switch_below(rp1, 1);
    std::string x = b.endpoint_below(dsp[0], gpu_behind_switch);
    std::string y = b.endpoint_below(rp2, !gpu_behind_switch);
    Topology t = from_fake(b.node);
    EXPECT_EQ(classify(t, t.find(x), t.find(y), kb()).cls, PathClass::PHB);
    EXPECT_EQ(classify(t, t.find(y), t.find(x), kb()).cls, PathClass::PHB);
  }
}

// A switch below a switch: root port 00:01.0 (AMD) -> outer switch 01:00.0 -> its downstream
// ports 02:00.0 and 02:01.0; 02:00.0 -> inner switch 03:00.0 -> 04:00.0 -> 05:00.0 (the deep
// endpoint); 02:01.0 -> 06:00.0. The deep endpoint is the GPU (H100) when gpu_deep, else the NIC
// (ConnectX-6 Dx). DevIds: vendor, device, subsystem device (the subsystem vendor is the
// vendor).
struct DevIds {
  uint16_t vendor, device, subsys_device;
};
Topology two_level_switch(DevIds outer, DevIds inner, bool gpu_deep) {
  Topology t;
  t.format = "test";
  const int hb = t.host_bridge_index("0000:00");
  auto add = [&](const std::string& bdf, int parent, PortType pt, Role role, DevIds id) {
    return add_device(t, bdf, parent, pt, role, id.vendor, id.device, id.vendor, id.subsys_device, hb);
  };
  const int rp = add("0000:00:01.0", -1, PortType::RootPort, Role::None, {0x1022, 1, 0});
  const int ua = add("0000:01:00.0", rp, PortType::SwitchUpstream, Role::None, outer);
  const int da = add("0000:02:00.0", ua, PortType::SwitchDownstream, Role::None, outer);
  const int da2 = add("0000:02:01.0", ua, PortType::SwitchDownstream, Role::None, outer);
  const int ub = add("0000:03:00.0", da, PortType::SwitchUpstream, Role::None, inner);
  const int db = add("0000:04:00.0", ub, PortType::SwitchDownstream, Role::None, inner);
  add("0000:05:00.0", db, PortType::Endpoint, gpu_deep ? Role::GPU : Role::NIC, {0x10de, 0x2330, 0});
  add("0000:06:00.0", da2, PortType::Endpoint, gpu_deep ? Role::NIC : Role::GPU, {0x15b3, 0x1021, 0});
  t.finalize();
  return t;
}

TEST(TruthClass, TwoLevelBroadcomIsOneSwitchOnlyWhenBothLevelsAreBroadcom) {
  // NCCL flattens Broadcom PEX Gen4/Gen5 two-level switches (both levels of the
  // family); an inner Broadcom switch under a PLX switch stays two switches.
  auto build = [](uint16_t outer_vendor, uint16_t outer_device, uint16_t outer_sd, bool gpu_deep) {
    return two_level_switch({outer_vendor, outer_device, outer_sd}, {0x1000, 0xc010, 0xa064}, gpu_deep);
  };
  for (bool gpu_deep : {true, false}) {
    Topology both = build(0x1000, 0xc010, 0xa064, gpu_deep);
    EXPECT_EQ(classify(both, both.find("0000:05:00.0"), both.find("0000:06:00.0"), kb()).cls, PathClass::PIX);
    EXPECT_EQ(classify(both, both.find("0000:06:00.0"), both.find("0000:05:00.0"), kb()).cls, PathClass::PIX);
    Topology mixed = build(kPlx, 0x9797, 0x9797, gpu_deep);
    EXPECT_EQ(classify(mixed, mixed.find("0000:05:00.0"), mixed.find("0000:06:00.0"), kb()).cls, PathClass::PXB);
    EXPECT_EQ(classify(mixed, mixed.find("0000:06:00.0"), mixed.find("0000:05:00.0"), kb()).cls, PathClass::PXB);
  }
}

// ---- NUMA: NODE vs SYS, known or not on either side ------------------------

struct NumaCase {
  int gpu, nic, nodes;
  PathClass cls;
  bool guessed;
};

TEST(TruthNuma, TwoHostBridgesEveryCombinationOfKnownAndUnknown) {
  const NumaCase cases[] = {
      {0, 0, 2, PathClass::NODE, false},  {1, 1, 2, PathClass::NODE, false},  {0, 1, 2, PathClass::SYS, false},
      {1, 0, 2, PathClass::SYS, false},   {-1, 1, 2, PathClass::NODE, true},  {1, -1, 2, PathClass::NODE, true},
      {-1, 0, 2, PathClass::NODE, true},  {0, -1, 2, PathClass::NODE, true},  {-1, -1, 2, PathClass::NODE, true},
      {-1, 0, 1, PathClass::NODE, false}, {0, -1, 1, PathClass::NODE, false}, {-1, -1, 0, PathClass::NODE, true},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE("GPU numa " + std::to_string(c.gpu) + ", NIC numa " + std::to_string(c.nic) + ", " + std::to_string(c.nodes) + " nodes");
    Builder b;
    b.node.numa_nodes = c.nodes;
    std::string g = b.endpoint_below(b.root_port(0x00, 1, c.gpu), true, c.gpu);
    std::string n = b.endpoint_below(b.root_port(0x80, 1, c.nic), false, c.nic);
    Topology t = from_fake(b.node);
    ASSERT_EQ(t.numa_nodes, c.nodes);
    for (auto [x, y] : {std::pair{g, n}, std::pair{n, g}}) {
      PathInfo p = classify(t, t.find(x), t.find(y), kb());
      EXPECT_EQ(p.cls, c.cls);
      EXPECT_EQ(p.numa_guessed, c.guessed);
    }
    Report r = check(t, kb(), CheckOptions{});
    const PairResult& p = only_pair(r);
    // EPYC Genoa (the fake's CPU): a good root complex, slow across sockets -- degraded either way.
    EXPECT_EQ(p.verdict, Verdict::Degraded);
    if (c.cls == PathClass::SYS) {
      ASSERT_TRUE(finding(p, "path-sys"));
      EXPECT_FALSE(has_rule(p, "path-root-complex"));
    } else {
      const Finding* f = finding(p, "path-root-complex");
      ASSERT_TRUE(f);
      EXPECT_NE(f->reason.find("(NODE)"), std::string::npos) << f->reason;
      EXPECT_EQ(f->reason.find("could be SYS") != std::string::npos, c.guessed) << f->reason;
    }
  }
}

// ---- every class: NCCL's GDR default, CUDA's case, the path rule -----------

TEST(TruthClass, EveryClassGivesNcclDefaultCudaCaseAndPathRule) {
  // GPU0 and five NICs, one per class:
  // on the GPU's switch (PIX), one switch further (PXB), on another root port (PHB),
  // on another host bridge of node 0 (NODE), on node 1 (SYS). The SYS pair's fix
  // names the GPU's closest NIC, the PIX one, not the first usable one by index.
  Builder b;
  b.node.numa_nodes = 2;
  std::string rp = b.root_port(0x00, 1);
  auto dsp = b.switch_below(rp, 3);
  std::string gpu = b.endpoint_below(dsp[0], true);
  std::string pix = b.endpoint_below(dsp[1], false);
  std::string pxb = b.endpoint_below(b.switch_below(dsp[2], 1)[0], false);
  std::string phb = b.endpoint_below(b.root_port(0x00, 2), false);
  std::string node = b.endpoint_below(b.root_port(0x40, 1), false);
  std::string sys = b.endpoint_below(b.root_port(0x80, 1, 1), false, 1);
  Topology t = from_fake(b.node);
  Report r = check(t, kb(), CheckOptions{});
  nlohmann::json j = nlohmann::json::parse(render_json(t, r));
  struct Want {
    std::string nic;
    PathClass cls;
    bool gdr;
    CudaCase cuda;
    const char* rule;  // the path finding, "" for none
  };
  const Want wants[] = {
      {pix, PathClass::PIX, true, CudaCase::SwitchOnly, ""},
      {pxb, PathClass::PXB, true, CudaCase::SwitchOnly, ""},
      {phb, PathClass::PHB, false, CudaCase::RootComplex, "path-root-complex"},
      {node, PathClass::NODE, false, CudaCase::RootComplex, "path-root-complex"},
      {sys, PathClass::SYS, false, CudaCase::CpuInterconnect, "path-sys"},
  };
  ASSERT_EQ(r.pairs.size(), 5u);
  for (const auto& w : wants) {
    SCOPED_TRACE(std::string(to_string(w.cls)) + " " + w.nic);
    const PairResult* p = nullptr;
    for (const auto& x : r.pairs)
      if (t.devices[x.b].bdf == w.nic) p = &x;
    ASSERT_TRUE(p);
    EXPECT_EQ(p->path.cls, w.cls);
    EXPECT_EQ(p->path.nccl_gdr, w.gdr);
    EXPECT_EQ(p->path.cuda, w.cuda);
    const bool switched = w.cls == PathClass::PIX || w.cls == PathClass::PXB;
    EXPECT_EQ(p->verdict, switched ? Verdict::Optimal : Verdict::Degraded);
    if (*w.rule) {
      const Finding* f = finding(*p, w.rule);
      ASSERT_TRUE(f);
      EXPECT_EQ(f->severity, Verdict::Degraded);
      if (w.cls != PathClass::SYS)
        EXPECT_NE(f->fix.find("NCCL_NET_GDR_LEVEL=PHB"), std::string::npos) << f->fix;
      else
        EXPECT_NE(f->fix.find("(" + pix + ", PIX)"), std::string::npos) << f->fix;  // the closest NIC
    } else {
      EXPECT_TRUE(p->findings.empty()) << p->findings[0].rule;
    }
    // The JSON carries the same, for both values of nccl_gdr_default.
    const nlohmann::json* e = nullptr;
    for (const auto& x : j["pairs"])
      if (x["b_bdf"] == w.nic) e = &x;
    ASSERT_TRUE(e);
    EXPECT_EQ((*e)["class"], to_string(w.cls));
    EXPECT_EQ((*e)["nccl_gdr_default"], w.gdr);
    EXPECT_EQ((*e)["cuda_case"], to_string(w.cuda));
    EXPECT_EQ((*e)["verdict"], to_string(p->verdict));
    // And so does the text table: class, CUDA case, NCCL GDR on/off, verdict.
    const std::string text = render_matrix(t, r, false);
    const std::string row = "  " + p->label_a + " - " + p->label_b + " ";
    const size_t at = text.find(row);
    ASSERT_NE(at, std::string::npos) << text;
    std::istringstream cells(text.substr(at + row.size(), text.find('\n', at) - at - row.size()));
    std::vector<std::string> got{std::istream_iterator<std::string>(cells), std::istream_iterator<std::string>()};
    const std::vector<std::string> want{to_string(w.cls), to_string(w.cuda), w.gdr ? "on" : "off", to_string(p->verdict)};
    EXPECT_EQ(got, want) << text;
  }
  // The node verdict judges GPU0 by its best NIC, the PIX one: optimal (issue 25); the worst
  // pair stays as detail and decides with --all-pairs (exit 1 before issue 25).
  EXPECT_EQ(r.exit_code(), 0);
  EXPECT_EQ(r.node.gpus.size(), 1u);
  EXPECT_EQ(t.devices[static_cast<size_t>(r.node.gpus[0].best_nic)].bdf, pix);
  EXPECT_NE(r.worst, Verdict::Optimal);
  CheckOptions all_pairs;
  all_pairs.all_pairs = true;
  EXPECT_EQ(check(t, kb(), all_pairs).exit_code(), 1);
}

// ---- the node verdict: nothing checked is never optimal (issue 25) ----------

TEST(TruthNode, NothingCheckedOrMissingHardwareIsIncompleteNeverOptimal) {
  Builder b;
  std::string rp = b.root_port(0x00, 1);
  auto dsp = b.switch_below(rp, 2);
  std::string gpu = b.endpoint_below(dsp[0], true);
  std::string nic = b.endpoint_below(dsp[1], false);
  Topology t = from_fake(b.node);
  EXPECT_EQ(check(t, kb(), CheckOptions{}).exit_code(), 0);  // GPU and NIC on one switch: PIX
  CheckOptions two_gpus;
  two_gpus.expect_gpus = 2;
  Report missing = check(t, kb(), two_gpus);
  EXPECT_EQ(missing.exit_code(), 3);
  EXPECT_EQ(missing.node.incomplete_reason, "1 GPU(s) found, 2 expected");
  // The NIC gone: one GPU and nothing to pair it with.
  Topology no_nic = t;
  no_nic.devices[static_cast<size_t>(no_nic.find(nic))].role = Role::None;
  Report r = check(no_nic, kb(), CheckOptions{});
  EXPECT_EQ(r.exit_code(), 3);
  EXPECT_TRUE(r.node.incomplete) << r.node.reason;
  // The GPU gone: nothing at all.
  Topology no_gpu = t;
  no_gpu.devices[static_cast<size_t>(no_gpu.find(gpu))].role = Role::None;
  EXPECT_EQ(check(no_gpu, kb(), CheckOptions{}).exit_code(), 3);
}

TEST(TruthRules, RootComplexQualityDecidesTheVerdictBeyondTheSwitch) {
  // Broadwell-EP (family 6 model 79): P2P through the root complex is poor and
  // not carried across QPI (root_complexes.json, from NVIDIA's and Intel's notes).
  Builder b;
  b.node.numa_nodes = 2;
  b.node.cpuinfo = "vendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 79\nmodel name\t: Intel(R) Xeon(R) CPU E5-2698 v4\n";
  std::string gpu = b.endpoint_below(b.root_port(0x00, 1), true);
  std::string gpu2 = b.endpoint_below(b.root_port(0x80, 1, 1), true, 1);
  std::string phb = b.endpoint_below(b.root_port(0x00, 2), false);
  std::string sys = b.endpoint_below(b.root_port(0x80, 2, 1), false, 1);
  Topology t = from_fake(b.node);
  Report r = check(t, kb(), CheckOptions{});
  auto pair = [&](const std::string& x, const std::string& y) -> const PairResult& {
    for (const auto& p : r.pairs)
      if (t.devices[p.a].bdf == x && t.devices[p.b].bdf == y) return p;
    throw std::runtime_error("no pair " + x + " " + y);
  };
  EXPECT_EQ(pair(gpu, phb).path.cls, PathClass::PHB);
  EXPECT_EQ(pair(gpu, phb).verdict, Verdict::Unreliable);
  EXPECT_EQ(pair(gpu, sys).path.cls, PathClass::SYS);
  EXPECT_EQ(pair(gpu, sys).verdict, Verdict::Unreliable);
  EXPECT_EQ(pair(gpu, gpu2).path.cls, PathClass::SYS);
  EXPECT_EQ(pair(gpu, gpu2).verdict, Verdict::Blocked);  // GPU P2P across QPI: not supported
  EXPECT_EQ(r.exit_code(), 2);
}

// ---- ACS: each control bit alone, on each port of the path -----------------

struct AcsBit {
  uint16_t bit;
  const char* lspci;  // the flag's name in lspci -vvv
  bool redirects;
};
const AcsBit kAcsBits[] = {
    {acs::kSourceValidation, "SrcValid", false},      {acs::kTranslationBlocking, "TransBlk", false},
    {acs::kRequestRedirect, "ReqRedir", true},        {acs::kCompletionRedirect, "CmpltRedir", true},
    {acs::kUpstreamForwarding, "UpstreamFwd", false}, {acs::kEgressControl, "EgressCtrl", true},
    {acs::kDirectTranslated, "DirectTrans", false},
};

void expect_acs_verdict(const Topology& t, const AcsBit& bit, bool on_path, const std::string& port) {
  Report r = check(t, kb(), CheckOptions{});
  const PairResult& p = only_pair(r);
  const bool redirected = bit.redirects && on_path;
  EXPECT_EQ(has_rule(p, "acs-redirect"), redirected);
  EXPECT_EQ(p.verdict, redirected ? Verdict::Unreliable : Verdict::Optimal);
  EXPECT_EQ(r.exit_code(), redirected ? 1 : 0);
  if (const Finding* f = finding(p, "acs-redirect")) {
    EXPECT_NE(f->reason.find(std::string(bit.lspci) + "+"), std::string::npos) << f->reason;
    EXPECT_NE(f->reason.find(port), std::string::npos) << f->reason;
    // Only the bit that is set, in lspci's words, then the port (generated mutants of
    // acs_flags, issue 28, added the other redirect bits or left a trailing blank).
    EXPECT_NE(f->reason.find("ACS " + std::string(bit.lspci) + "+ on " + port), std::string::npos) << f->reason;
    for (const auto& other : kAcsBits) {
      if (other.bit != bit.bit) {
        EXPECT_EQ(f->reason.find(std::string(other.lspci) + "+"), std::string::npos) << f->reason;
      }
    }
    EXPECT_NE(f->fix.find("setpci -s " + port), std::string::npos) << f->fix;
  }
}

TEST(TruthAcs, EachControlBitAloneOnEveryPortOfASwitchPath) {
  for (int ea : {0, 1})
    for (const auto& bit : kAcsBits) {
      Branches x = branches(ea, 0, true);
      std::vector<std::pair<std::string, bool>> ports;  // port, on the peer path
      for (const auto& p : x.below_a) ports.emplace_back(p, true);
      for (const auto& p : x.below_b) ports.emplace_back(p, true);
      ports.emplace_back(x.meeting_usp, false);  // the meeting switch's upstream port: traffic turns below it
      ports.emplace_back(x.root, false);         // above the switch: not on the path
      for (const auto& [port, on_path] : ports)
        for (bool aer_first : {false, true}) {
          SCOPED_TRACE(std::string(bit.lspci) + " on " + port + (aer_first ? " (after AER)" : "") + " extra switches " +
                       std::to_string(ea));
          Branches y = branches(ea, 0, true);
          FakeFn& f = y.b.fn(port);
          f.acs = true;
          f.aer_before_acs = aer_first;
          f.acs_ctl = bit.bit;
          Topology t = from_fake(y.b.node);
          const Device& d = t.devices[t.find(port)];
          ASSERT_TRUE(d.acs_present);
          ASSERT_EQ(d.acs_ctl, bit.bit);
          expect_acs_verdict(t, bit, on_path, port);
        }
    }
}

TEST(TruthAcs, EveryRedirectBitFromLspciText) {
  // The same switch as lspci -vvv prints it: bus numbers give the tree, ACSCtl the bits.
  for (const auto& bit : kAcsBits)
    for (int port : {0, 1}) {
      SCOPED_TRACE(std::string(bit.lspci) + " on downstream port " + std::to_string(port));
      auto flags = [&](int which) {
        std::string s;
        for (const auto& b : kAcsBits) s += std::string(b.lspci) + (b.bit == bit.bit && which == port ? "+ " : "- ");
        s.pop_back();
        return s;
      };
      auto bridge = [](const std::string& bdf, int pri, int sec, const char* type) {
        char b[256];
        std::snprintf(b, sizeof b,
                      "%s PCI bridge [0604]: PLX Technology, Inc. PEX 9797 [10b5:9797]\n"
                      "\tBus: primary=%02x, secondary=%02x, subordinate=%02x, sec-latency=0\n"
                      "\tCapabilities: [68] Express (v2) %s, MSI 00\n",
                      bdf.c_str(), pri, sec, sec, type);
        return std::string(b);
      };
      std::string vvv = bridge("00:01.0", 0, 1, "Root Port (Slot+)") + "\n" + bridge("01:00.0", 1, 2, "Upstream Port") + "\n";
      for (int i = 0; i < 2; ++i)
        vvv += bridge("02:0" + std::to_string(i) + ".0", 2, 3 + i, "Downstream Port (Slot+)") +
               "\tCapabilities: [f24 v1] Access Control Services\n\t\tACSCap:\tSrcValid+ TransBlk+ ReqRedir+ "
               "CmpltRedir+ UpstreamFwd+ EgressCtrl+ DirectTrans+\n\t\tACSCtl:\t" +
               flags(i) + "\n\n";
      vvv +=
          "03:00.0 3D controller [0302]: NVIDIA Corporation GH100 [H100 PCIe] [10de:2331] (rev a1)\n\n"
          "04:00.0 Infiniband controller [0207]: Mellanox Technologies MT2910 Family [ConnectX-7] [15b3:1021]\n";
      Topology t = parse_lspci({{"vvv.txt", vvv}});
      assign_roles(t, kb());
      const std::string dsp = port == 0 ? "0000:02:00.0" : "0000:02:01.0";
      ASSERT_GE(t.find(dsp), 0);
      EXPECT_EQ(t.devices[t.find(dsp)].acs_ctl, bit.bit);
      Report r = check(t, kb(), CheckOptions{});
      const PairResult& p = only_pair(r);
      EXPECT_EQ(p.path.cls, PathClass::PIX);
      EXPECT_EQ(has_rule(p, "acs-redirect"), bit.redirects);
      EXPECT_EQ(p.verdict >= Verdict::Unreliable, bit.redirects);
    }
}

TEST(TruthAcs, UnknownAcsIsANoteNotAVerdict) {
  // A port whose config space was not readable past 256 bytes (non-root read): ACS unknown.
  Branches x = branches(0, 0, true);
  Topology t = from_fake(x.b.node);
  Device& d = t.devices[t.find(x.below_b[0])];
  d.acs_known = false;
  d.acs_present = false;
  Report r = check(t, kb(), CheckOptions{});
  const PairResult& p = only_pair(r);
  const Finding* f = finding(p, "acs-unknown");
  ASSERT_TRUE(f);
  EXPECT_EQ(f->severity, Verdict::Optimal);
  EXPECT_NE(f->reason.find(x.below_b[0]), std::string::npos);
  EXPECT_EQ(p.verdict, Verdict::Optimal);
}

TEST(TruthAcs, SkipByRuleIdAndByGroup) {
  Branches x = branches(0, 0, true);
  x.b.fn(x.below_b[0]).acs_ctl = acs::kRequestRedirect;
  Topology t = from_fake(x.b.node);
  EXPECT_EQ(check(t, kb(), CheckOptions{}).worst, Verdict::Unreliable);
  for (const char* skip : {"acs-redirect", "acs"}) {
    CheckOptions o;
    o.skip = {skip};
    Report r = check(t, kb(), o);
    EXPECT_EQ(r.worst, Verdict::Optimal) << skip;
    EXPECT_FALSE(has_rule(only_pair(r), "acs-redirect")) << skip;
  }
  CheckOptions other;
  other.skip = {"link", "iommu-translating"};
  EXPECT_EQ(check(t, kb(), other).worst, Verdict::Unreliable);
}

// ---- IOMMU group types -----------------------------------------------------

struct IommuCase {
  const char* gpu_type;  // "" : no groups at all
  const char* nic_type;
  IommuMode mode;
  bool gpu_translating, nic_translating;
};

TEST(TruthIommu, GroupTypesDmaDmaFqIdentityAndMixed) {
  const IommuCase cases[] = {
      {"", "", IommuMode::Off, false, false},
      {"DMA", "DMA", IommuMode::Translating, true, true},
      {"DMA-FQ", "DMA-FQ", IommuMode::Translating, true, true},
      {"DMA", "DMA-FQ", IommuMode::Translating, true, true},
      {"identity", "identity", IommuMode::Identity, false, false},
      {"DMA-FQ", "identity", IommuMode::Mixed, true, false},
      {"identity", "DMA", IommuMode::Mixed, false, true},
      {"identity", "DMA-FQ", IommuMode::Mixed, false, true},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(std::string("GPU group ") + c.gpu_type + ", NIC group " + c.nic_type);
    FakeNode n = testing::switch_node();
    if (*c.gpu_type) {
      for (auto& f : n.fns) f.iommu_group = f.bdf == "0000:03:00.0" ? 11 : f.bdf == "0000:04:00.0" ? 12 : 13;
      n.groups = {{11, c.gpu_type}, {12, c.nic_type}, {13, c.nic_type}};
    }
    Topology t = from_fake(n);
    EXPECT_EQ(t.iommu, c.mode);
    Report r = check(t, kb(), CheckOptions{});
    const PairResult& p = only_pair(r);
    const bool blocked = c.gpu_translating || c.nic_translating;
    EXPECT_EQ(p.verdict, blocked ? Verdict::Blocked : Verdict::Optimal);
    EXPECT_EQ(r.exit_code(), blocked ? 2 : 0);
    // One finding per translating device, naming its group, its address and the group type.
    std::vector<std::string> reasons;
    for (const auto& f : p.findings)
      if (f.rule == "iommu-translating") reasons.push_back(f.reason);
    EXPECT_EQ(reasons.size(), static_cast<size_t>(c.gpu_translating) + static_cast<size_t>(c.nic_translating));
    auto named = [&](const std::string& what) {
      return std::any_of(reasons.begin(), reasons.end(), [&](const std::string& s) { return s.find(what) != std::string::npos; });
    };
    EXPECT_EQ(named("IOMMU group 11 of 0000:03:00.0 is translating (type " + std::string(c.gpu_type) + ")"), c.gpu_translating);
    EXPECT_EQ(named("IOMMU group 12 of 0000:04:00.0 is translating (type " + std::string(c.nic_type) + ")"), c.nic_translating);
    // The node note names the mode.
    const std::string mode = to_string(c.mode);
    EXPECT_TRUE(std::any_of(r.node_findings.begin(), r.node_findings.end(), [&](const Finding& f) {
      // Only the IOMMU parameters of the command line are named, never the rest (root=...).
      return f.rule == "iommu-mode" && f.reason == "IOMMU: " + mode + " (no IOMMU parameter on the kernel command line)";
    })) << mode;
  }
}

// ---- software stack -------------------------------------------------------

TEST(TruthSoftware, PeerMemoryClientOrDmaBufPath) {
  struct Case {
    const char* what;
    std::string modules;
    std::vector<std::string> peers;
    std::string kernel;
    std::string nvidia_version;
    Verdict verdict;
    const char* rule;  // expected software finding, "" none
  };
  const std::string open = "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04\n";
  const std::string closed = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.54.03\n";
  const Case cases[] = {
      {"nvidia_peermem", "nvidia 1 0 - Live 0x0\nnvidia_peermem 1 0 - Live 0x0\n", {}, "5.4.0", closed, Verdict::Optimal, ""},
      {"nv_peer_mem", "nvidia 1 0 - Live 0x0\nnv_peer_mem 1 0 - Live 0x0\n", {}, "5.4.0", closed, Verdict::Optimal, ""},
      {"MOFED memory_peers", "nvidia 1 0 - Live 0x0\n", {"nv_mem"}, "5.4.0", closed, Verdict::Optimal, ""},
      {"no client, 5.11, open", "nvidia 1 0 - Live 0x0\n", {}, "5.11.0", open, Verdict::Blocked, "software-peer-memory"},
      {"no client, 5.12, open", "nvidia 1 0 - Live 0x0\n", {}, "5.12.0", open, Verdict::Optimal, "software-peer-memory"},
      {"no client, 6.8, closed", "nvidia 1 0 - Live 0x0\n", {}, "6.8.0", closed, Verdict::Blocked, "software-peer-memory"},
      // Degraded since issue 24: gdrpeer gives ibv_reg_mr a dma-buf path, but NCCL, NVSHMEM and UCX
      // get their dma-buf from CUDA (none with the proprietary module) and see no nv_mem client:
      // they turn GPUDirect RDMA off (consumer-nccl, consumer-nvshmem, consumer-ucx).
      {"no client, 6.8, gdrpeer",
       "nvidia 1 0 - Live 0x0\ngdrpeer 1 0 - Live 0x0\n",
       {},
       "6.8.0",
       closed,
       Verdict::Degraded,
       "software-peer-memory"},
      {"no nvidia module", "nvidia_peermem 1 0 - Live 0x0\n", {}, "6.8.0", open, Verdict::Blocked, "software-driver"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what);
    FakeNode n = testing::switch_node();
    n.modules = c.modules;
    n.memory_peers = c.peers;
    n.osrelease = c.kernel + "\n";
    n.nvidia_version = c.nvidia_version;
    Report r = check(from_fake(n), kb(), CheckOptions{});
    const PairResult& p = only_pair(r);
    EXPECT_EQ(p.verdict, c.verdict);
    if (*c.rule) {
      const Finding* f = finding(p, c.rule);
      ASSERT_TRUE(f);
      // The software finding itself; the consumers' findings may add to the pair's verdict.
      EXPECT_EQ(f->severity, std::string(c.what) == "no client, 6.8, gdrpeer" ? Verdict::Optimal : c.verdict);
    } else {
      EXPECT_FALSE(has_rule(p, "software-peer-memory"));
      EXPECT_FALSE(has_rule(p, "software-driver"));
    }
  }
}

// NVIDIA/nccl #1939: lsmod shows nvidia_peermem, /sys/kernel/mm/memory_peers has no client. Loaded
// is not registered: with the proprietary module (no dma-buf) nothing registers GPU memory.
TEST(TruthSoftware, LoadedPeermemWithoutARegisteredClientIsNoClient) {
  FakeNode n = testing::switch_node();
  n.modules = "nvidia 1 0 - Live 0x0\nnvidia_peermem 1 0 - Live 0x0\n";
  n.memory_peers_dir = true;
  n.osrelease = "6.8.0\n";
  n.nvidia_version = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.54.03\n";
  const PairResult p = only_pair(check(from_fake(n), kb(), CheckOptions{}));
  const Finding* f = finding(p, "software-peer-memory");
  ASSERT_TRUE(f);
  EXPECT_EQ(f->severity, Verdict::Blocked);
  EXPECT_NE(f->reason.find("loaded but no peer-memory client is registered"), std::string::npos) << f->reason;
  // The same with nv_mem registered (MOFED's ib_core writes memory_peers/nv_mem/version).
  n.memory_peers = {"nv_mem"};
  const PairResult q = only_pair(check(from_fake(n), kb(), CheckOptions{}));
  EXPECT_FALSE(has_rule(q, "software-peer-memory"));
}

// ---- links and BARs --------------------------------------------------------

TEST(TruthLinks, TrainedWidthIsJudgedAgainstBothEndsOfTheLink) {
  // A x16 NIC in a x8 slot (the downstream port's capability) trains at x8: nothing wrong.
  FakeNode n = testing::switch_node();
  for (auto& f : n.fns) {
    if (f.bdf == "0000:02:01.0") f.cap_width = f.sta_width = 8;
    if (f.bdf == "0000:04:00.0") f.sta_width = 8;
  }
  const PairResult p = only_pair(check(from_fake(n), kb(), CheckOptions{}));
  EXPECT_FALSE(has_rule(p, "link-width"));
  EXPECT_EQ(p.verdict, Verdict::Optimal);
  // The same NIC at x4 in that x8 slot is downtrained; so is a NIC at 8 GT/s of 16.
  for (auto& f : n.fns)
    if (f.bdf == "0000:04:00.0") f.sta_width = 4;
  const PairResult q = only_pair(check(from_fake(n), kb(), CheckOptions{}));
  const Finding* w = finding(q, "link-width");
  ASSERT_TRUE(w);
  EXPECT_NE(w->reason.find("trained at x4 below its x8 capability"), std::string::npos) << w->reason;
  FakeNode s = testing::switch_node();
  for (auto& f : s.fns)
    if (f.bdf == "0000:04:00.0") f.sta_speed = 3;
  const PairResult sp = only_pair(check(from_fake(s), kb(), CheckOptions{}));
  ASSERT_TRUE(finding(sp, "link-speed"));
  EXPECT_EQ(finding(sp, "link-speed")->severity, Verdict::Degraded);
}

TEST(TruthBars, Bar1SizeAgainstTheTableThresholdAndBarFlags) {
  // gpus.json bar1_min_mib: 1024. 256 MiB is small, 1 GiB is not.
  ASSERT_EQ(kb().min_bar1_bytes, 1024ull << 20);
  for (auto [end, small] : {std::pair{"0x000000000fffffff", true}, std::pair{"0x000000003fffffff", false}}) {
    FakeNode n = testing::switch_node();
    for (auto& f : n.fns)
      if (f.bdf == "0000:03:00.0")
        f.resource =
            "0x00000000f8000000 0x00000000f8ffffff 0x0000000000040200\n0x0000000000000000 " + std::string(end) + " 0x000000000014220c\n";
    Topology t = from_fake(n);
    const Device& g = t.devices[t.find("0000:03:00.0")];
    ASSERT_EQ(g.bars.size(), 2u);
    EXPECT_EQ(g.bars[0].index, 0);
    EXPECT_FALSE(g.bars[0].prefetchable);  // flags 0x40200: memory, 32-bit, not prefetchable
    EXPECT_FALSE(g.bars[0].is64);
    EXPECT_TRUE(g.bars[1].prefetchable && g.bars[1].is64);
    EXPECT_EQ(has_rule(only_pair(check(t, kb(), CheckOptions{})), "bar1-small"), small) << end;
  }
}

}  // namespace
}  // namespace gdrpeer::topo

namespace gdrpeer::topo {
namespace {

// ---- roles: only network-class functions are RDMA NICs ----------------------

TEST(TruthRoles, RdmaNicsAreNetworkClassFunctionsOfKnownIds) {
  // devices.json: a NIC is a function of an RDMA NIC id (or bound to an RDMA device) whose
  // PCI class is network (0x02); the other functions of the same chips (BlueField's DMA
  // engine and management functions, EFA's non-network functions) are not.
  struct Case {
    uint16_t vendor, device;
    uint32_t cls;
    const char* rdma_name;
    Role want;
  };
  const Case cases[] = {
      {0x15b3, 0x1021, 0x020700, "", Role::NIC},   // ConnectX-7, InfiniBand class
      {0x15b3, 0x1021, 0x020000, "", Role::NIC},   // ConnectX-7, Ethernet class
      {0x15b3, 0xc2d5, 0x080100, "", Role::None},  // BlueField DMA function
      {0x1d0f, 0xefa1, 0x020000, "", Role::NIC},   // EFA (device mask efa0/fff0)
      {0x1d0f, 0xefa1, 0x088000, "", Role::None},  // same id, system peripheral class
      {0x1d0f, 0xec20, 0x020000, "", Role::None},  // ENA: Ethernet, not RDMA
      {0x14e4, 0x1750, 0x020000, "", Role::NIC},   // Broadcom Thor (bnxt_re)
      {0x14e4, 0x1750, 0x088000, "", Role::None},         {0x8086, 0x1234, 0x020000, "rdmap1s0", Role::NIC},  // bound to an RDMA device
      {0x8086, 0x1234, 0x088000, "rdmap1s0", Role::None}, {0x10de, 0x2330, 0x030200, "", Role::GPU},
      {0x10de, 0x22a3, 0x068000, "", Role::None},  // NVSwitch: bridge-class, not a GPU
  };
  for (const auto& c : cases) {
    Topology t;
    t.format = "test";
    testing::add_pci_function(t, "0000:01:00.0", t.host_bridge_index("0000:01"), c.vendor, c.device, c.cls).rdma_name = c.rdma_name;
    t.finalize();
    assign_roles(t, kb());
    char what[64];
    std::snprintf(what, sizeof what, "%04x:%04x class %06x %s", c.vendor, c.device, c.cls, c.rdma_name);
    EXPECT_EQ(t.devices[0].role, c.want) << what;
  }
}

// ---- hwloc: NUMA locality of host bridges, both XML layouts ------------------

std::string hwloc_node(bool hwloc2) {
  // Node 0: GPU under root port 00:01.0, NIC A under host bridge 40; node 1: NIC B under host bridge 80.
  auto io = [](const char* hb, const char* rp, const char* dev, const char* type) {
    return std::string("<object type=\"Bridge\" bridge_type=\"0-1\" depth=\"0\" bridge_pci=\"0000:[") + hb +
           "]\">\n"
           "<object type=\"Bridge\" bridge_type=\"1-1\" depth=\"1\" bridge_pci=\"0000:[" +
           hb + "]\" pci_busid=\"" + rp +
           "\" pci_type=\"0604 [1022:14ab] [0000:0000] 00\" pci_link_speed=\"0.000000\">\n"
           "<object type=\"PCIDev\" pci_busid=\"" +
           dev + "\" pci_type=\"" + type +
           "\" pci_link_speed=\"31.5\"/>\n"
           "</object>\n</object>\n";
  };
  const std::string gpu = io("01-01", "0000:00:01.0", "0000:01:00.0", "0302 [10de:2330] [10de:16c1] a1");
  const std::string nic_a = io("41-41", "0000:40:01.0", "0000:41:00.0", "0207 [15b3:1021] [15b3:0041] 00");
  const std::string nic_b = io("81-81", "0000:80:01.0", "0000:81:00.0", "0207 [15b3:1021] [15b3:0041] 00");
  std::string x = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  if (hwloc2) {
    // hwloc 2: NUMA nodes are memory children; I/O hangs below the package.
    x += "<!DOCTYPE topology SYSTEM \"hwloc2.dtd\">\n<topology version=\"2.0\">\n"
         "<object type=\"Machine\" os_index=\"0\" cpuset=\"0x0000000f\" nodeset=\"0x00000003\">\n"
         "<object type=\"Package\" os_index=\"0\" cpuset=\"0x00000003\" nodeset=\"0x00000001\">\n"
         "<object type=\"NUMANode\" os_index=\"0\" cpuset=\"0x00000003\" nodeset=\"0x00000001\"/>\n" +
         gpu + nic_a +
         "</object>\n<object type=\"Package\" os_index=\"1\" cpuset=\"0x0000000c\" nodeset=\"0x00000002\">\n"
         "<object type=\"NUMANode\" os_index=\"1\" cpuset=\"0x0000000c\" nodeset=\"0x00000002\"/>\n" +
         nic_b + "</object>\n</object>\n</topology>\n";
  } else {
    // hwloc 1: the NUMA node encloses its package and its I/O.
    x += "<!DOCTYPE topology SYSTEM \"hwloc.dtd\">\n<topology>\n"
         "<object type=\"Machine\" os_index=\"0\" cpuset=\"0x0000000f\" nodeset=\"0x00000003\">\n"
         "<object type=\"NUMANode\" os_index=\"0\" cpuset=\"0x00000003\" nodeset=\"0x00000001\">\n"
         "<object type=\"Package\" os_index=\"0\" cpuset=\"0x00000003\" nodeset=\"0x00000001\"/>\n" +
         gpu + nic_a +
         "</object>\n<object type=\"NUMANode\" os_index=\"1\" cpuset=\"0x0000000c\" nodeset=\"0x00000002\">\n"
         "<object type=\"Package\" os_index=\"1\" cpuset=\"0x0000000c\" nodeset=\"0x00000002\"/>\n" +
         nic_b + "</object>\n</object>\n</topology>\n";
  }
  return x;
}

TEST(TruthHwloc, HostBridgesTakeTheNumaNodeTheyHangBelowInBothLayouts) {
  for (bool hwloc2 : {true, false}) {
    SCOPED_TRACE(hwloc2 ? "hwloc 2" : "hwloc 1");
    Topology t = parse_hwloc_xml(hwloc_node(hwloc2), "node.xml");
    assign_roles(t, kb());
    EXPECT_EQ(t.numa_nodes, 2);
    const int gpu = t.find("0000:01:00.0"), a = t.find("0000:41:00.0"), b = t.find("0000:81:00.0");
    ASSERT_TRUE(gpu >= 0 && a >= 0 && b >= 0);
    EXPECT_EQ(t.devices[gpu].role, Role::GPU);
    EXPECT_EQ(t.devices[a].role, Role::NIC);
    EXPECT_EQ(t.host_bridges[t.devices[t.devices[gpu].parent].host_bridge].numa, 0);
    EXPECT_EQ(t.host_bridges[t.devices[t.devices[b].parent].host_bridge].numa, 1);
    PathInfo node = classify(t, gpu, a, kb());
    EXPECT_EQ(node.cls, PathClass::NODE);
    EXPECT_FALSE(node.numa_guessed);
    EXPECT_EQ(classify(t, gpu, b, kb()).cls, PathClass::SYS);
    EXPECT_EQ(classify(t, b, gpu, kb()).cls, PathClass::SYS);
    EXPECT_EQ(classify(t, a, b, kb()).cls, PathClass::SYS);
  }
}

}  // namespace
}  // namespace gdrpeer::topo

namespace gdrpeer::topo {
namespace {

// ---- pair kinds: GPU-GPU and GPU-NVMe beyond the switch ------------------------

TEST(TruthRules, GpuGpuAndGpuNvmeThroughTheRootComplexAndAcrossSockets) {
  // Two GPUs and an NVMe drive on root ports of node 0, a GPU and a drive on node 1.
  // A root complex known good for P2P (EPYC Genoa) leaves GPU-GPU and GPU-NVMe PHB
  // pairs optimal (NCCL's GDR level concerns NICs only); across sockets they are degraded.
  // With a CPU the tables do not know, the PHB pairs are degraded: P2P there is unverified.
  for (bool known_cpu : {true, false}) {
    SCOPED_TRACE(known_cpu ? "EPYC Genoa" : "unknown CPU");
    Builder b;
    b.node.numa_nodes = 2;
    if (!known_cpu) b.node.cpuinfo = "vendor_id\t: HygonGenuine\ncpu family\t: 24\nmodel\t\t: 1\nmodel name\t: Hygon C86 7285\n";
    std::string g0 = b.endpoint_below(b.root_port(0x00, 1), true);
    std::string g1 = b.endpoint_below(b.root_port(0x00, 2), true);
    std::string g2 = b.endpoint_below(b.root_port(0x80, 1, 1), true, 1);
    auto nvme = [&](const std::string& port, int numa) {
      std::string a = Builder::addr(0, b.secondary(port), 0);
      b.add(a, port, 0x144d, 0xa80a, 0x010802, testing::kEndpoint, -1, numa);
      return a;
    };
    std::string d0 = nvme(b.root_port(0x00, 3), 0);
    std::string d1 = nvme(b.root_port(0x80, 2, 1), 1);
    Topology t = from_fake(b.node);
    CheckOptions o;
    o.gpu_nvme = true;
    Report r = check(t, kb(), o);
    auto pair = [&](const std::string& x, const std::string& y) -> const PairResult& {
      for (const auto& p : r.pairs)
        if (t.devices[p.a].bdf == x && t.devices[p.b].bdf == y) return p;
      throw std::runtime_error("no pair " + x + " " + y);
    };
    const Verdict phb = known_cpu ? Verdict::Optimal : Verdict::Degraded;
    for (const auto& [x, y] : {std::pair{g0, g1}, std::pair{g0, d0}}) {
      SCOPED_TRACE(x + " - " + y);
      const PairResult& p = pair(x, y);
      EXPECT_EQ(p.path.cls, PathClass::PHB);
      EXPECT_FALSE(p.path.nccl_gdr);
      EXPECT_EQ(p.verdict, phb);
      EXPECT_EQ(has_rule(p, "path-root-complex"), !known_cpu);
    }
    for (const auto& [x, y, fix] : {std::tuple{g0, g2, "keep P2P peers on one socket"},
                                    std::tuple{g0, d1, "place the NVMe drive on the GPU's socket (NUMA node 0)"}}) {
      SCOPED_TRACE(x + " - " + y);
      const PairResult& p = pair(x, y);
      EXPECT_EQ(p.path.cls, PathClass::SYS);
      EXPECT_EQ(p.verdict, Verdict::Degraded);
      const Finding* f = finding(p, "path-sys");
      ASSERT_TRUE(f);
      EXPECT_NE(f->fix.find(fix), std::string::npos) << f->fix;
    }
    EXPECT_EQ(pair(g0, d0).label_b, "NVME0");
  }
}

// ---- classes: the switch's own ports wherever they sit in the device list ----------------------

// A tree whose inputs list no root port (NCCL's XML and hwloc can start at the switch) puts the
// switch's upstream port first: index 0. nvidia-smi's PIX ("at most a single PCIe bridge") does
// not depend on where a port sits in our list, nor on whether a parent was listed at all.
// Found by the generated mutants (issue 28): `d.parent >= 0` as `> 0` or `>= 1` in unit_of.
TEST(TruthClass, OneSwitchIsPixWhateverIndexItsPortsHave) {
  auto add = [](Topology& t, const std::string& bdf, int parent, PortType pt, Role role) {
    return add_tree_device(t, bdf, parent, pt, role);
  };
  {
    SCOPED_TRACE("upstream port first, no root port listed");
    Topology t;
    t.format = "test";
    int usp = add(t, "0000:01:00.0", -1, PortType::SwitchUpstream, Role::None);
    ASSERT_EQ(usp, 0);
    int d1 = add(t, "0000:02:00.0", usp, PortType::SwitchDownstream, Role::None);
    int d2 = add(t, "0000:02:01.0", usp, PortType::SwitchDownstream, Role::None);
    int gpu = add(t, "0000:03:00.0", d1, PortType::Endpoint, Role::GPU);
    int nic = add(t, "0000:04:00.0", d2, PortType::Endpoint, Role::NIC);
    t.finalize();
    EXPECT_EQ(classify(t, gpu, nic, kb()).cls, PathClass::PIX);
    EXPECT_EQ(classify(t, nic, gpu, kb()).cls, PathClass::PIX);
  }
  {
    SCOPED_TRACE("a downstream port whose parent the input did not list");
    Topology t;
    t.format = "test";
    int dsp = add(t, "0000:02:00.0", -1, PortType::SwitchDownstream, Role::None);
    int gpu = add(t, "0000:03:00.0", dsp, PortType::Endpoint, Role::GPU);
    int nic = add(t, "0000:03:00.1", dsp, PortType::Endpoint, Role::NIC);
    t.finalize();
    EXPECT_EQ(classify(t, gpu, nic, kb()).cls, PathClass::PIX);
    EXPECT_EQ(classify(t, nic, gpu, kb()).cls, PathClass::PIX);
  }
}

// NCCL flattens a Broadcom PEX Gen4/Gen5 switch with the sub-switches of its own kind below it
// (topo.cc, ncclTopoFlattenBcmSwitches: a sub-switch of another device id is skipped), so a PLX
// switch below a Broadcom one stays a second switch: PXB, as nvidia-smi counts two switches.
// Found by the generated mutants (issue 28): the inner switch's `!k.flattens(usp)` dropped.
TEST(TruthClass, PlxSwitchBelowABroadcomOneIsNotFlattened) {
  for (bool gpu_deep : {true, false}) {
    // outer: Broadcom PEX Gen4 (the family devices.json flatten_switches lists); inner: PLX PEX 9797
    Topology t = two_level_switch({0x1000, 0xc010, 0xa064}, {kPlx, 0x9797, 0x9797}, gpu_deep);
    const int ua = t.find("0000:01:00.0"), ub = t.find("0000:03:00.0");
    const int deep = t.find("0000:05:00.0"), flat = t.find("0000:06:00.0");
    ASSERT_TRUE(kb().flattens(t.devices[ua]));
    ASSERT_FALSE(kb().flattens(t.devices[ub]));
    EXPECT_EQ(classify(t, deep, flat, kb()).cls, PathClass::PXB);
    EXPECT_EQ(classify(t, flat, deep, kb()).cls, PathClass::PXB);
  }
}

// The same flattening wherever the two-level switch's ports sit in the list and whether or not
// their parents were listed (NCCL's XML and hwloc can start below the root port): one switch,
// PIX, as nvidia-smi counts NCCL's flattened switch. Found by the generated mutants (issue 28):
// unit_of's `dsp.parent < 0` and `usp.parent < 0` as `<= 0` (a port at index 0 ends the flattening),
// and the parent checks dropped or made never true (an index of -1 read).
TEST(TruthClass, BroadcomTwoLevelFlattensWhereverItsPortsSitInTheList) {
  auto add = [](Topology& t, const std::string& bdf, int parent, PortType pt, Role role) {
    const bool bcm = role == Role::None;
    const uint16_t vendor = bcm ? 0x1000 : role == Role::GPU ? 0x10de : 0x15b3;
    return add_device(t, bdf, parent, pt, role, vendor, bcm ? 0xc010 : role == Role::GPU ? 0x2330 : 0x1021, vendor, bcm ? 0xa064 : 0);
  };
  // Each layout lists its functions in input order (0xBBDD: function 0000:BB:DD.0); a parent is
  // an index into that list.
  enum Kind { usp, dsp, gpu, nic };
  struct Fn {
    int bus_dev, parent;
    Kind kind;
  };
  const std::pair<const char*, std::vector<Fn>> layouts[] = {
      {"outer upstream port first, no root port listed",
       {{0x0100, -1, usp}, {0x0200, 0, dsp}, {0x0201, 0, dsp}, {0x0300, 1, usp}, {0x0400, 3, dsp}, {0x0500, 4, gpu}, {0x0600, 2, nic}}},
      {"a one-level Broadcom switch whose upstream port has no parent",
       {{0x0100, -1, usp}, {0x0200, 0, dsp}, {0x0201, 0, dsp}, {0x0300, 1, gpu}, {0x0400, 2, nic}}},
      {"the outer downstream port first, its upstream port listed after it",
       {{0x0200, 1, dsp}, {0x0100, -1, usp}, {0x0201, 1, dsp}, {0x0300, 0, usp}, {0x0400, 3, dsp}, {0x0500, 4, gpu}, {0x0600, 2, nic}}},
      {"the inner switch below a downstream port whose parent is not listed",
       {{0x0200, -1, dsp}, {0x0300, 0, usp}, {0x0400, 1, dsp}, {0x0401, 1, dsp}, {0x0500, 2, gpu}, {0x0600, 3, nic}}},
  };
  for (const auto& [what, fns] : layouts) {
    SCOPED_TRACE(what);
    Topology t;
    int g = -1, n = -1;
    for (size_t i = 0; i < fns.size(); ++i) {
      const Fn& f = fns[i];
      char bdf[16];
      std::snprintf(bdf, sizeof bdf, "0000:%02x:%02x.0", f.bus_dev >> 8, f.bus_dev & 0xff);
      const PortType pt = f.kind == usp ? PortType::SwitchUpstream : f.kind == dsp ? PortType::SwitchDownstream : PortType::Endpoint;
      const Role role = f.kind == gpu ? Role::GPU : f.kind == nic ? Role::NIC : Role::None;
      ASSERT_EQ(add(t, bdf, f.parent, pt, role), static_cast<int>(i));  // the list order is the table's
      if (f.kind == gpu) g = static_cast<int>(i);
      if (f.kind == nic) n = static_cast<int>(i);
    }
    t.finalize();
    EXPECT_EQ(classify(t, g, n, kb()).cls, PathClass::PIX);
    EXPECT_EQ(classify(t, n, g, kb()).cls, PathClass::PIX);
  }
}

// Two devices on two host bridges: SYS when their NUMA nodes differ (nvidia-smi). A device's own
// NUMA node (sysfs numa_node) decides; its host bridge's (hwloc, NCCL XML give only that) is the
// fallback when the device's is unknown. Found by the generated mutants (issue 28): numa_of's
// `if (d.numa >= 0)` as true, false or `> 0` survived (the sysfs fake gives both the same node).
TEST(TruthNuma, DeviceNodeFirstHostBridgeNodeAsFallback) {
  struct Case {
    int dev_a, dev_b, hb_a, hb_b;
    PathClass want;
  };
  const Case cases[] = {
      {0, 1, -1, -1, PathClass::SYS}, {-1, -1, 0, 1, PathClass::SYS}, {0, 0, 0, 1, PathClass::NODE},
      {1, 0, 0, 0, PathClass::SYS},   {-1, 1, 0, 0, PathClass::SYS},  {0, -1, 1, 0, PathClass::NODE},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE("device nodes " + std::to_string(c.dev_a) + "/" + std::to_string(c.dev_b) + ", host bridge nodes " +
                 std::to_string(c.hb_a) + "/" + std::to_string(c.hb_b));
    Topology t;
    t.numa_nodes = 2;
    int ha = t.host_bridge_index("0000:00"), hb = t.host_bridge_index("0000:80");
    t.host_bridges[ha].numa = c.hb_a;
    t.host_bridges[hb].numa = c.hb_b;
    auto add = [&](const std::string& bdf, int host_bridge, int numa, Role role) {
      Device x;
      x.bdf = bdf;
      x.host_bridge = host_bridge;
      x.numa = numa;
      x.port = PortType::Endpoint;
      x.role = role;
      x.ids_known = true;
      x.vendor = role == Role::GPU ? 0x10de : 0x15b3;
      x.device = role == Role::GPU ? 0x2330 : 0x1021;
      t.devices.push_back(x);
      return static_cast<int>(t.devices.size() - 1);
    };
    int a = add("0000:01:00.0", ha, c.dev_a, Role::GPU), b = add("0000:81:00.0", hb, c.dev_b, Role::NIC);
    t.finalize();
    EXPECT_EQ(classify(t, a, b, kb()).cls, c.want);
    EXPECT_EQ(classify(t, b, a, kb()).cls, c.want);
  }
}

// The meeting point is the nearest common bridge, whatever the list order: a parent may be
// listed after its child (an input's order is not the tree's), so the switch's upstream port can
// be index 0 with its root port after it. One switch: PIX (nvidia-smi). Found by the generated
// mutants (issue 28): classify's search loop `lca < 0` as `lca <= 0` / `< 1` went on past a
// meeting point at index 0 to the root port above it (PXB).
TEST(TruthClass, NearestCommonBridgeWhateverTheListOrder) {
  Topology t;
  auto add = [&](const std::string& bdf, int parent, PortType pt, Role role) { return add_tree_device(t, bdf, parent, pt, role); };
  int usp = add("0000:01:00.0", 1, PortType::SwitchUpstream, Role::None);  // its root port comes next
  int rp = add("0000:00:01.0", -1, PortType::RootPort, Role::None);
  ASSERT_EQ(usp, 0);
  ASSERT_EQ(rp, 1);
  int d1 = add("0000:02:00.0", usp, PortType::SwitchDownstream, Role::None);
  int d2 = add("0000:02:01.0", usp, PortType::SwitchDownstream, Role::None);
  int gpu = add("0000:03:00.0", d1, PortType::Endpoint, Role::GPU);
  int nic = add("0000:04:00.0", d2, PortType::Endpoint, Role::NIC);
  t.finalize();
  for (auto [x, y] : {std::pair{gpu, nic}, std::pair{nic, gpu}}) {
    PathInfo p = classify(t, x, y, kb());
    EXPECT_EQ(p.cls, PathClass::PIX);
    EXPECT_EQ(p.lca, usp);
  }
}

// One NUMA node: a path between host bridges cannot cross NUMA nodes, so an unknown node makes
// no "could be SYS" guess (nvidia-smi's SYS crosses NUMA nodes). Found by the generated mutants
// (issue 28): `&& t.numa_nodes != 1` dropped.
TEST(TruthNuma, OneNodeNeverGuessesSys) {
  for (int nodes : {1, 2}) {
    SCOPED_TRACE(std::to_string(nodes) + " NUMA nodes");
    Topology t;
    t.numa_nodes = nodes;
    int ha = t.host_bridge_index("0000:00"), hb = t.host_bridge_index("0000:80");
    auto add = [&](const std::string& bdf, int host_bridge, Role role) {
      Device x;
      x.bdf = bdf;
      x.host_bridge = host_bridge;
      x.port = PortType::Endpoint;
      x.role = role;
      t.devices.push_back(x);
      return static_cast<int>(t.devices.size() - 1);
    };
    int a = add("0000:01:00.0", ha, Role::GPU), b = add("0000:81:00.0", hb, Role::NIC);
    // A device the input gives no root bus for: its NUMA node is unknown too, not a crash
    // (generated mutant: numa_of's `host_bridge >= 0 ? ... : -1` swapped read index -1).
    int c = add("0000:c1:00.0", -1, Role::NIC);
    t.finalize();
    PathInfo p = classify(t, a, b, kb());
    EXPECT_EQ(p.cls, PathClass::NODE);
    EXPECT_EQ(p.numa_guessed, nodes != 1);
    PathInfo q = classify(t, a, c, kb());
    EXPECT_EQ(q.cls, PathClass::NODE);
    EXPECT_EQ(q.numa_guessed, nodes != 1);
  }
}

// An NVSwitch on the PCI bus is an NVIDIA function of class 0680 (bridge, other): the H100
// NVSwitch 10de:22a3 of aws-p5en.48xlarge.xml (topology/reference) has "0680 [10de:22a3]", and
// Debian's pci.ids does not know 22a3, so its name does not say NVSwitch. Without ids, a name
// from pci.ids ("GA100 [A100 NVSwitch]", 10de:1af1) says it. A GPU (class 0302) or another
// vendor's 0680 function is no NVSwitch. Found by the generated mutants (issue 28): is_nvswitch's
// conditions joined by the other operator or dropped survived every host test (the reference
// SXM GPUs get NVLink from their model anyway).
TEST(TruthNvlink, NvswitchOnTheBusByVendorAndClassOrByName) {
  struct Case {
    const char* what;
    bool ids_known, class_known;
    uint16_t vendor, device;
    uint32_t class_code;
    const char* name;
    bool nvswitch;
  };
  const Case cases[] = {
      {"H100 NVSwitch, not in pci.ids", true, true, 0x10de, 0x22a3, 0x068000, "NVIDIA Corporation Device 22a3", true},
      {"A100 NVSwitch named, no ids", false, false, 0, 0, 0, "NVIDIA Corporation GA100 [A100 NVSwitch]", true},
      {"H100 PCIe GPU", true, true, 0x10de, 0x2331, 0x030200, "NVIDIA Corporation GH100 [H100 PCIe]", false},
      {"NVIDIA function of unknown class", true, false, 0x10de, 0x22a3, 0, "NVIDIA Corporation Device 22a3", false},
      {"another vendor's 0680 bridge", true, true, 0x8086, 0x0998, 0x068000, "Intel Corporation Device 0998", false},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what);
    Topology t;
    Device& d = testing::add_pci_function(t, "0000:05:00.0", t.host_bridge_index("0000:00"), c.vendor, c.device, c.class_code);
    d.ids_known = c.ids_known;
    d.class_known = c.class_known;
    d.name = c.name;
    t.finalize();
    EXPECT_EQ(nvswitch_on_pci_bus(t), c.nvswitch);
  }
}

// With NVSwitches on the bus and no link list, NVIDIA GPUs reach each other through the switch
// fabric (HGX/DGX baseboards); a GPU of another vendor does not. NVIDIA by vendor id, or by the
// name when the ids are unknown (lspci text without -n). Found by the generated mutants (issue
// 28): is_nvidia's tests flipped or swapped survived every host test.
TEST(TruthNvlink, SwitchFabricJoinsNvidiaGpusOnly) {
  struct Case {
    const char* what;
    bool ids_known;
    uint16_t vendor;
    const char* name;
    bool linked;
  };
  const Case cases[] = {
      {"H100 SXM by ids", true, 0x10de, "NVIDIA Corporation Device 2330", true},
      {"NVIDIA by name, no ids", false, 0, "NVIDIA Corporation GH100 [H100 SXM5 80GB]", true},
      {"AMD Instinct MI300X by ids", true, 0x1002, "Advanced Micro Devices, Inc. [AMD/ATI] Aqua Vanjaram [Instinct MI300X]", false},
      {"AMD by name, no ids", false, 0, "Advanced Micro Devices, Inc. [AMD/ATI] Aqua Vanjaram [Instinct MI300X]", false},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what);
    Topology t;
    const int hb = t.host_bridge_index("0000:00");
    auto add = [&](const std::string& bdf, bool ids_known, uint16_t vendor, const std::string& name) {
      Device d;
      d.bdf = bdf;
      d.host_bridge = hb;
      d.role = Role::GPU;
      d.ids_known = ids_known;
      d.vendor = vendor;
      d.name = name;
      t.devices.push_back(d);
      return static_cast<int>(t.devices.size() - 1);
    };
    const int h100 = add("0000:18:00.0", true, 0x10de, "NVIDIA Corporation Device 2330");
    const int other = add("0000:2a:00.0", c.ids_known, c.vendor, c.name);
    t.finalize();
    EXPECT_EQ(nvlink_between(t, h100, other, true).linked, c.linked);
    EXPECT_EQ(nvlink_between(t, other, h100, true).linked, c.linked);
    EXPECT_FALSE(nvlink_between(t, h100, other, false).linked);
  }
}

// NVLink from a link list, as nvidia-smi topo -m prints it: NV# is the number of bonded links
// between two GPUs, read from either GPU's end (DGX-1's hybrid cube mesh: NV1 and NV2); through
// NVSwitches every GPU's links end at a switch and the pair gets the smaller count (the real
// 4x H200 node: 18 links each, NV18 in topology/reference/truth/h200x4-nvidia-smi-topo-m.txt);
// a GPU with no link is not linked; a link's far end may be known by address only (not in the
// PCI tree we read). Found by the generated mutants (issue 28): nearly every condition of
// nvlink_between's loop could be flipped or dropped without a host test noticing.
TEST(TruthNvlink, LinkListGivesNvidiaSmiCounts) {
  Topology t;
  const int hb = t.host_bridge_index("0000:00");
  for (const char* bdf : {"0000:18:00.0", "0000:2a:00.0", "0000:3a:00.0", "0000:5d:00.0", "0000:9a:00.0"})
    add_device(t, bdf, -1, PortType::Unknown, Role::GPU, 0x10de, 0x2335, 0, 0, hb);  // H200 SXM
  auto link = [&](int gpu, int peer, const std::string& peer_bdf, bool sw, int links) {
    t.nvlinks.push_back({gpu, peer, peer_bdf, sw, links, 0});  // NvLink in its order; bandwidth unknown
  };
  // GPUs 0-2: direct links, each given from one end (0-1 two; 0-2 one, GPU 2 known by address only)
  link(0, 1, "0000:2a:00.0", false, 2);
  link(0, -1, "0000:3a:00.0", false, 1);
  // GPUs 3 and 4: through NVSwitches, 18 and 12 links
  link(3, -1, "0000:05:00.0", true, 18);
  link(4, -1, "0000:06:00.0", true, 12);
  t.finalize();
  struct Want {
    int a, b;
    bool linked, via_switch;
    int links;
    const char* cell;
  };
  const Want wants[] = {
      {0, 1, true, false, 2, "NV2"},  {0, 2, true, false, 1, "NV1"}, {1, 2, false, false, 0, ""},
      {3, 4, true, true, 12, "NV12"}, {0, 3, false, false, 0, ""},   {2, 4, false, false, 0, ""},
  };
  for (const auto& w : wants)
    for (auto [x, y] : {std::pair{w.a, w.b}, std::pair{w.b, w.a}}) {
      SCOPED_TRACE("GPU" + std::to_string(x) + "-GPU" + std::to_string(y));
      const NvLinkPath p = nvlink_between(t, x, y, false);
      EXPECT_EQ(p.linked, w.linked);
      EXPECT_EQ(p.via_switch, w.via_switch);
      EXPECT_EQ(p.links, w.links);
      EXPECT_EQ(nvlink_cell(p), w.cell);
      EXPECT_FALSE(p.inferred);
    }
  // Linked with the count unknown (inferred from the GPU model or the NVSwitches on the bus):
  // "NV", never a made-up NV0 (unknown stays unknown).
  NvLinkPath inferred;
  inferred.linked = inferred.inferred = true;
  EXPECT_EQ(nvlink_cell(inferred), "NV");
}

// NVLink through NVSwitches works once the fabric manager registered the GPU: NVML's
// nvmlGpuFabricInfo_t (nvml.h) gives the state NOT_SUPPORTED 0, NOT_STARTED 1, IN_PROGRESS 2,
// COMPLETED 3 and, once completed, an nvmlReturn_t status (NVML_SUCCESS 0). Not started or in
// progress, or completed with an error, makes the pair unreliable; completed with success or
// not supported (pre-Hopper) does not. The reason quotes nvidia-smi's NV# and the bandwidth.
// Found by the generated mutants (issue 28): fabric_check's and nvlink_rules' conditions could be
// flipped or dropped without a host test noticing.
TEST(TruthNvlink, FabricStateFromNvmlDecidesTheNvlinkPair) {
  struct Case {
    int state, status;
    bool unreliable;
    const char* words;
  };
  const Case cases[] = {
      {0, -1, false, ""},
      {1, -1, true, "not started"},
      {2, -1, true, "in progress"},
      {3, 0, false, ""},
      {3, 3, true, "completed with error nvmlReturn_t 3"},
      {3, 1, true, "completed with error nvmlReturn_t 1"},
      {-1, -1, false, ""},
  };
  for (const auto& c : cases)
    for (bool on_a : {true, false}) {
      SCOPED_TRACE("fabric state " + std::to_string(c.state) + " status " + std::to_string(c.status) +
                   (on_a ? " on the first GPU" : " on the second GPU"));
      Topology t;
      const int hb = t.host_bridge_index("0000:00");
      for (const char* bdf : {"0000:18:00.0", "0000:2a:00.0"}) {
        Device& d = t.devices[add_device(t, bdf, -1, PortType::Unknown, Role::GPU, 0x10de, 0x2330, 0, 0, hb)];  // H100 SXM5
        d.fabric_state = 3;
        d.fabric_status = 0;
      }
      Device& x = t.devices[on_a ? 0 : 1];
      x.fabric_state = c.state;
      x.fabric_status = c.status;
      for (int g : {0, 1}) {
        NvLink l;
        l.gpu = g;
        l.peer_bdf = "0000:05:00.0";
        l.peer_is_switch = true;
        l.links = 18;
        l.bandwidth_mbps = 477000;
        t.nvlinks.push_back(l);
      }
      t.nvlink_known = true;
      t.finalize();
      Report r = check(t, kb(), CheckOptions{});
      ASSERT_EQ(r.pairs.size(), 1u);
      const PairResult& p = r.pairs[0];
      const Finding* nv = finding(p, "path-nvlink");
      ASSERT_TRUE(nv);
      EXPECT_NE(nv->reason.find("18 bonded NVLinks (NV18), 477 GB/s through NVSwitch"), std::string::npos) << nv->reason;
      EXPECT_EQ(nv->reason.find("inferred"), std::string::npos) << nv->reason;
      const Finding* f = finding(p, "nvlink-fabric");
      EXPECT_EQ(f != nullptr, c.unreliable);
      EXPECT_EQ(p.verdict, c.unreliable ? Verdict::Unreliable : Verdict::Optimal);
      if (f) {
        EXPECT_NE(f->reason.find(c.words), std::string::npos) << f->reason;
        EXPECT_NE(f->reason.find(x.bdf), std::string::npos) << f->reason;
      }
    }
}

// The path-nvlink reason says what the link list says and nothing it does not: one link is NV1
// (nvidia-smi), an unknown count or bandwidth is left out (never "NV0" or "0 GB/s"). Found by the
// generated mutants (issue 28): nvlink_rules' `> 0` tests as `>= 0`, `> 1`, or always true.
TEST(TruthNvlink, NvlinkReasonLeavesUnknownCountsOut) {
  struct Case {
    int links;
    uint64_t mbps;
    const char* want;
    const char* never;
  };
  const Case cases[] = {
      {1, 25000, "over 1 bonded NVLinks (NV1), 25 GB/s, GPU to GPU", "NV0"},
      {0, 0, "over NVLink, GPU to GPU", " GB/s"},
      {2, 0, "over 2 bonded NVLinks (NV2), GPU to GPU", " GB/s"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.want);
    Topology t;
    const int hb = t.host_bridge_index("0000:00");
    for (const char* bdf : {"0000:18:00.0", "0000:2a:00.0"})
      add_device(t, bdf, -1, PortType::Unknown, Role::GPU, 0x10de, 0x1db1, 0, 0, hb);  // V100 SXM2 (DGX-1: direct NVLinks)
    NvLink l;
    l.gpu = 0;
    l.peer = 1;
    l.peer_bdf = "0000:2a:00.0";
    l.links = c.links;
    l.bandwidth_mbps = c.mbps;
    t.nvlinks.push_back(l);
    t.nvlink_known = true;
    t.finalize();
    Report r = check(t, kb(), CheckOptions{});
    ASSERT_EQ(r.pairs.size(), 1u);
    const Finding* nv = finding(r.pairs[0], "path-nvlink");
    ASSERT_TRUE(nv);
    EXPECT_NE(nv->reason.find(c.want), std::string::npos) << nv->reason;
    EXPECT_EQ(nv->reason.find(c.never), std::string::npos) << nv->reason;
  }
}

// Every root complex of topology/root_complexes.json (the rule data, with its sources) on a
// two-socket node: a SYS pair's reason and verdict follow the entry's cross_socket value, a
// PHB pair's its p2p value, and a GPU beyond its socket is pointed at the closest NIC, the
// first by index among equals. Found by the generated mutants (issue 28): the cross_socket
// and p2p branches of sys_rules/phb_rules and the closest-NIC search could be flipped.
TEST(TruthRules, EveryRootComplexEntryGivesItsCrossSocketAndP2pWords) {
  RootComplex unknown;  // a CPU no entry matches: its root complex is not judged
  unknown.name = "(not in root_complexes.json)";
  std::vector<const RootComplex*> entries;
  for (const RootComplex& rc : kb().root_complexes) entries.push_back(&rc);
  entries.push_back(&unknown);
  for (const RootComplex* entry : entries) {
    const RootComplex& rc = *entry;
    SCOPED_TRACE(rc.name);
    Topology t;
    t.numa_nodes = 2;
    t.cpu.arch = rc.arch.empty() ? "x86_64" : rc.arch;
    t.cpu.vendor = rc.vendor;
    t.cpu.family = rc.family;
    t.cpu.model = rc.models.empty() ? -1 : rc.models[0];
    if (rc.arch == "aarch64" && rc.models.size() == 2) {
      t.cpu.arm_implementer = rc.models[0];
      t.cpu.arm_part = rc.models[1];
    }
    t.cpu.model_name = rc.model_patterns.empty() ? "" : rc.model_patterns[0];
    if (entry == &unknown) {
      t.cpu.arch = "riscv64";
      t.cpu.vendor = "";
      t.cpu.model_name = "SiFive U74-MC";
      ASSERT_EQ(kb().root_complex(t, {}), nullptr);
    } else if (kb().root_complex(t, {}) != &rc) {
      continue;  // an earlier entry wins for this CPU
    }
    const int h0 = t.host_bridge_index("0000:00"), h1 = t.host_bridge_index("0000:80");
    t.host_bridges[h0].numa = 0;
    t.host_bridges[h1].numa = 1;
    auto add = [&](const std::string& bdf, int hb, Role role) {
      const bool gpu = role == Role::GPU;
      return add_device(t, bdf, -1, PortType::Unknown, role, gpu ? 0x10de : 0x15b3, gpu ? 0x2331 : 0x1021, 0, 0,
                        hb);  // H100 PCIe, ConnectX-7
    };
    const int nic0 = add("0000:01:00.0", h0, Role::NIC);
    const int gpu0 = add("0000:02:00.0", h0, Role::GPU);
    const int gpu1 = add("0000:81:00.0", h1, Role::GPU);
    const int nic1 = add("0000:82:00.0", h1, Role::NIC);
    add("0000:03:00.0", h0, Role::NIC);  // as close to GPU0 as NIC0, later in the list
    ASSERT_EQ(nic0, 0);
    t.finalize();
    Report r = check(t, kb(), CheckOptions{});
    auto pair = [&](int a, int b) -> const PairResult& {
      for (const auto& p : r.pairs)
        if ((p.a == a && p.b == b) || (p.a == b && p.b == a)) return p;
      throw std::runtime_error("no pair");
    };
    const char* cross = rc.cross_socket == "unsupported" ? "does not carry PCIe peer-to-peer across sockets"
                        : rc.cross_socket == "slow"      ? "peer-to-peer across sockets is slow on"
                                                         : "cross-socket peer-to-peer is unknown";
    for (auto [a, b, gpu_gpu] : {std::tuple{gpu0, gpu1, true}, std::tuple{gpu0, nic1, false}}) {
      const PairResult& p = pair(a, b);
      ASSERT_EQ(p.path.cls, PathClass::SYS);
      if (rc.note.find("NVLink-C2C") != std::string::npos && !gpu_gpu) continue;  // Grace
      const Finding* f = finding(p, "path-sys");
      ASSERT_TRUE(f) << rc.name;
      EXPECT_NE(f->reason.find(cross), std::string::npos) << f->reason;
      EXPECT_EQ(f->severity, rc.cross_socket == "unsupported" ? (gpu_gpu ? Verdict::Blocked : Verdict::Unreliable) : Verdict::Degraded);
      if (!gpu_gpu) {
        EXPECT_NE(f->fix.find("# use " + r.labels[static_cast<size_t>(nic0)] + " (0000:01:00.0, PHB)"), std::string::npos) << f->fix;
      }
    }
    if (rc.note.find("NVLink-C2C") != std::string::npos) continue;  // Grace: path-grace instead
    const Finding* f = finding(pair(gpu0, nic0), "path-root-complex");
    ASSERT_TRUE(f);
    if (rc.p2p == "unsupported") {
      EXPECT_EQ(f->severity, Verdict::Blocked);
      EXPECT_NE(f->reason.find("does not forward PCIe peer-to-peer"), std::string::npos) << f->reason;
    } else if (rc.p2p == "poor") {
      EXPECT_EQ(f->severity, Verdict::Unreliable);
      EXPECT_NE(f->reason.find("forwards peer-to-peer poorly" + (rc.note.empty() ? "" : " (" + rc.note + ")")), std::string::npos)
          << f->reason;
    } else if (rc.p2p == "good") {
      EXPECT_EQ(f->severity, Verdict::Degraded);
      EXPECT_NE(f->fix.find("export NCCL_NET_GDR_LEVEL=PHB   #"), std::string::npos) << f->fix;
    } else {  // unknown: measure first
      EXPECT_EQ(f->severity, Verdict::Degraded);
      EXPECT_NE(f->fix.find("is not in topology/root_complexes.json: measure with `gdrpeer verify`"), std::string::npos) << f->fix;
    }
  }
}

// The IOMMU fix names the kernel parameter of the CPU's IOMMU (Documentation/admin-guide/
// kernel-parameters.txt: amd_iommu= for AMD-Vi, intel_iommu= for Intel VT-d), for the real
// cpuinfo vendor strings. Found by the generated mutants (issue 28): the vendor test flipped
// or its branches swapped survived (every fake node was an AMD EPYC).
TEST(TruthIommu, FixNamesTheCpuVendorsKernelParameter) {
  struct Case {
    const char* cpuinfo;
    const char* param;
    const char* other;
  };
  const Case cases[] = {
      {"vendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 17\nmodel name\t: AMD EPYC 9374F\nphysical id\t: 0\n",
       "amd_iommu=on iommu=pt", "intel_iommu"},
      {"vendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 143\nmodel name\t: Intel(R) Xeon(R) Platinum 8480+\nphysical id\t: 0\n",
       "intel_iommu=on iommu=pt", "amd_iommu"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.param);
    FakeNode n = testing::switch_node();
    n.cpuinfo = c.cpuinfo;
    for (auto& f : n.fns) f.iommu_group = f.bdf == "0000:03:00.0" ? 11 : f.bdf == "0000:04:00.0" ? 12 : 13;
    n.groups = {{11, "DMA"}, {12, "identity"}, {13, "identity"}};
    Topology t = from_fake(n);
    Report r = check(t, kb(), CheckOptions{});
    const Finding* f = finding(only_pair(r), "iommu-translating");
    ASSERT_TRUE(f);
    EXPECT_NE(f->fix.find(c.param), std::string::npos) << f->fix;
    EXPECT_EQ(f->fix.find(c.other), std::string::npos) << f->fix;
  }
}

// ACS redirect sends peer requests up to the root complex; a path that goes through the root
// complex anyway (PHB) loses nothing to it (PCIe base spec, ACS P2P Request Redirect), so only
// PIX/PXB paths are judged. Ports whose ACS state the input lacks are listed once, in path
// order. Found by the generated mutants (issue 28): acs_rules' class test as false, and its
// list separator's branches swapped.
TEST(TruthAcs, RedirectMattersBelowASwitchOnlyAndUnknownPortsAreListed) {
  auto add = [](Topology& t, const std::string& bdf, int parent, PortType pt, Role role, int hb) {
    return add_tree_device(t, bdf, parent, pt, role, hb, 0x2331);
  };
  {
    SCOPED_TRACE("PHB: redirect on both root ports");
    Topology t;
    const int hb = t.host_bridge_index("0000:00");
    int r1 = add(t, "0000:00:01.0", -1, PortType::RootPort, Role::None, hb);
    int r2 = add(t, "0000:00:02.0", -1, PortType::RootPort, Role::None, hb);
    for (int r : {r1, r2}) {
      t.devices[r].acs_known = t.devices[r].acs_present = true;
      t.devices[r].acs_ctl = acs::kRequestRedirect | acs::kCompletionRedirect;
    }
    int gpu = add(t, "0000:01:00.0", r1, PortType::Endpoint, Role::GPU, hb);
    int nic = add(t, "0000:02:00.0", r2, PortType::Endpoint, Role::NIC, hb);
    t.finalize();
    ASSERT_EQ(classify(t, gpu, nic, kb()).cls, PathClass::PHB);
    Report r = check(t, kb(), CheckOptions{});
    EXPECT_FALSE(has_rule(only_pair(r), "acs-redirect"));
  }
  {
    SCOPED_TRACE("PIX: ACS of both downstream ports unknown");
    Topology t;
    const int hb = t.host_bridge_index("0000:00");
    int rp = add(t, "0000:00:01.0", -1, PortType::RootPort, Role::None, hb);
    int usp = add(t, "0000:01:00.0", rp, PortType::SwitchUpstream, Role::None, hb);
    int d1 = add(t, "0000:02:00.0", usp, PortType::SwitchDownstream, Role::None, hb);
    int d2 = add(t, "0000:02:01.0", usp, PortType::SwitchDownstream, Role::None, hb);
    add(t, "0000:03:00.0", d1, PortType::Endpoint, Role::GPU, hb);
    add(t, "0000:04:00.0", d2, PortType::Endpoint, Role::NIC, hb);
    t.finalize();
    Report r = check(t, kb(), CheckOptions{});
    const Finding* f = finding(only_pair(r), "acs-unknown");
    ASSERT_TRUE(f);
    EXPECT_EQ(f->reason, "ACS state of 0000:02:00.0, 0000:02:01.0 is not in this input");
  }
}

// A link trains to what both ends can do (PCIe base spec, link training): a Gen5 x16 NIC in a
// slot whose root port is Gen4 x8 at Gen4 x8 is as good as it gets; at x4 or 8 GT/s it is not.
// The root port at index 0 of the list counts like any other. Found by the generated mutants
// (issue 28): link_check's `d.parent >= 0` as `> 0` and its speed cap test as true/false.
TEST(TruthLinks, SpeedAndWidthAreCappedByThePortAboveAtAnyIndex) {
  struct Case {
    double sta_speed;
    int sta_width;
    bool width_low, speed_low;
  };
  const Case cases[] = {{16, 8, false, false}, {16, 4, true, false}, {8, 8, false, true}};
  for (const auto& c : cases) {
    SCOPED_TRACE(std::to_string(c.sta_speed) + " GT/s x" + std::to_string(c.sta_width));
    Topology t;
    const int hb = t.host_bridge_index("0000:00");
    Device rp;
    rp.bdf = "0000:00:01.0";
    rp.host_bridge = hb;
    rp.port = PortType::RootPort;
    rp.is_bridge = true;
    rp.link_cap = {16, 8};
    rp.link_sta = {16, 8};
    t.devices.push_back(rp);
    for (const auto& [bdf, role] : {std::pair{"0000:01:00.0", Role::NIC}, std::pair{"0000:02:00.0", Role::GPU}}) {
      Device d;
      d.bdf = bdf;
      d.parent = role == Role::NIC ? 0 : -1;
      d.host_bridge = role == Role::NIC ? -1 : hb;
      d.port = PortType::Endpoint;
      d.role = role;
      d.ids_known = true;
      d.vendor = role == Role::GPU ? 0x10de : 0x15b3;
      d.device = role == Role::GPU ? 0x2331 : 0x1021;
      if (role == Role::NIC) {
        d.link_cap = {32, 16};
        d.link_sta = {c.sta_speed, c.sta_width};
      }
      t.devices.push_back(d);
    }
    t.finalize();
    Report r = check(t, kb(), CheckOptions{});
    const PairResult& p = only_pair(r);
    const Finding* w = finding(p, "link-width");
    const Finding* sp = finding(p, "link-speed");
    EXPECT_EQ(w != nullptr, c.width_low);
    EXPECT_EQ(sp != nullptr, c.speed_low);
    if (w) {
      EXPECT_NE(w->reason.find("below its x8 capability"), std::string::npos) << w->reason;
    }
    if (sp) {
      EXPECT_NE(sp->reason.find("below its 16GT/s capability"), std::string::npos) << sp->reason;
    }
  }
}

}  // namespace
}  // namespace gdrpeer::topo

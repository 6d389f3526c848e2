// Unit tests of the topology checker: parsers (sysfs/snapshot, lspci, hwloc,
// NCCL XML, tar), classification and rules.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <tuple>

#include "gdrpeer/topo/errors.hpp"
#include "gdrpeer/topo/inputs.hpp"
#include "gdrpeer/topo/render.hpp"
#include "gdrpeer/topo/rule_data.hpp"
#include "gdrpeer/topo/rules.hpp"
#include "test_topo_support.hpp"

namespace gdrpeer::topo {
namespace {

using testing::FakeNode;
using testing::find_pair;
using testing::from_fake;
using testing::kb;
using testing::reference;
using testing::slurp;

bool has_rule(const PairResult& p, const std::string& rule) {
  return std::any_of(p.findings.begin(), p.findings.end(), [&](const Finding& f) { return f.rule == rule; });
}

PathClass cls(const Topology& t, const std::string& a, const std::string& b) {
  int ia = t.find(a), ib = t.find(b);
  EXPECT_GE(ia, 0) << a;
  EXPECT_GE(ib, 0) << b;
  return classify(t, ia, ib, kb()).cls;
}

// ---- small pieces ---------------------------------------------------------

TEST(Bdf, ParsesShortLongAndRejectsGarbage) {
  EXPECT_EQ(parse_bdf("01:00.0"), "0000:01:00.0");
  EXPECT_EQ(parse_bdf("0005:09:1F.7"), "0005:09:1f.7");
  EXPECT_EQ(parse_bdf("10000:e0:06.0"), "10000:e0:06.0");
  EXPECT_FALSE(parse_bdf("01:00.8"));
  EXPECT_FALSE(parse_bdf("01:20.0"));
  EXPECT_FALSE(parse_bdf("zz:00.0"));
  EXPECT_FALSE(parse_bdf(""));
}

TEST(Tar, RoundTripsFilesLinksAndLongNames) {
  std::string long_path(180, 'a');
  long_path = "sys/" + long_path + "/config";
  std::vector<TarEntry> in{{TarEntry::Type::Directory, "sys/kernel/iommu_groups", ""},
                           {TarEntry::Type::File, long_path, std::string("\0\x01\x02", 3)},
                           {TarEntry::Type::Symlink, "sys/bus/pci/devices/0000:00:00.0", "../../../devices/pci0000:00/0000:00:00.0"}};
  auto out = parse_tar(write_tar(in), "t.tar");
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[1].path, long_path);
  EXPECT_EQ(out[1].data, std::string("\0\x01\x02", 3));
  EXPECT_EQ(out[2].type, TarEntry::Type::Symlink);
  EXPECT_EQ(out[2].data, in[2].data);
  auto fs = make_tar_fs(write_tar(in), "t.tar");
  auto empty = fs->list("/sys/kernel/iommu_groups");
  ASSERT_TRUE(empty);
  EXPECT_TRUE(empty->empty());
}

TEST(Tar, CorruptHeaderIsAnInputError) {
  std::string bytes = write_tar({{TarEntry::Type::File, "proc/cmdline", "x\n"}});
  bytes[10] ^= 0x55;  // name changes, checksum no longer matches
  EXPECT_THROW(parse_tar(bytes, "bad.tar"), InputError);
  EXPECT_THROW(parse_tar(bytes.substr(0, 700), "short.tar"), InputError);
}

TEST(Detect, FormatsByContent) {
  EXPECT_EQ(detect_format("<?xml version=\"1.0\"?>\n<!DOCTYPE topology SYSTEM \"hwloc2.dtd\">\n<topology>"), InputFormat::HwlocXml);
  EXPECT_EQ(detect_format("<!-- header -->\n<system version=\"1\">"), InputFormat::NcclXml);
  EXPECT_EQ(detect_format("-[0000:00]-+-00.0  Intel"), InputFormat::Lspci);
  EXPECT_EQ(detect_format("<html>"), InputFormat::Unknown);
  EXPECT_EQ(detect_format(write_tar({{TarEntry::Type::File, "a", "b"}})), InputFormat::SnapshotTar);
}

// ---- lspci ----------------------------------------------------------------

TEST(Lspci, StellineEsc8000MatchesPublishedNvidiaSmiMatrix) {
  std::string text = slurp(reference("stelline-asus-esc8000a-e12.md"));
  Topology t = parse_lspci({{"esc8000.md", text}});
  assign_roles(t, kb());
  // nvidia-smi topo -m of the same machine (in the same report).
  EXPECT_EQ(cls(t, "0000:01:00.0", "0000:41:00.0"), PathClass::NODE);
  EXPECT_EQ(cls(t, "0000:01:00.0", "0000:c1:00.0"), PathClass::SYS);
  EXPECT_EQ(cls(t, "0000:01:00.0", "0000:21:00.0"), PathClass::NODE);
  EXPECT_EQ(cls(t, "0000:c1:00.0", "0000:81:00.1"), PathClass::NODE);
  EXPECT_EQ(cls(t, "0000:21:00.0", "0000:21:00.1"), PathClass::PIX);
  EXPECT_EQ(cls(t, "0000:21:00.0", "0000:81:00.0"), PathClass::SYS);
  const Device& gpu = t.devices[t.find("0000:01:00.0")];
  EXPECT_EQ(gpu.role, Role::GPU);
  EXPECT_EQ(gpu.numa, 0);
  EXPECT_EQ(gpu.link_cap.speed_gts, 16);
  EXPECT_EQ(gpu.link_sta.speed_gts, 2.5);
  EXPECT_EQ(gpu.mps, 256);
  EXPECT_EQ(gpu.mrrs, 512);
  auto bar1 = std::find_if(gpu.bars.begin(), gpu.bars.end(), [](const Bar& b) { return b.index == 1; });
  ASSERT_NE(bar1, gpu.bars.end());
  EXPECT_EQ(bar1->size, 64ull << 30);
  EXPECT_TRUE(bar1->prefetchable && bar1->is64);
  const Device& nic = t.devices[t.find("0000:21:00.0")];
  EXPECT_EQ(nic.role, Role::NIC);
  EXPECT_TRUE(nic.acs_present);
  EXPECT_EQ(nic.acs_ctl, 0);
  // SR-IOV VF BAR lines inside the capability are not the device's BARs.
  EXPECT_EQ(nic.bars.size(), 1u);
  EXPECT_EQ(t.devices[t.find("0000:01:00.1")].role, Role::None);  // HDMI audio function
  EXPECT_EQ(t.numa_nodes, 2);
  EXPECT_EQ(t.cpu.vendor, "AuthenticAMD");
}

TEST(Lspci, TreeGivesSwitchLevelsAndHolohubPairIsPxb) {
  Topology t = parse_lspci({{"igx.txt", slurp(reference("holohub-igx-orin-lspci-tv.txt"))}});
  assign_roles(t, kb());
  EXPECT_EQ(t.devices[t.find("0005:09:00.0")].role, Role::GPU);
  EXPECT_EQ(t.devices[t.find("0005:03:00.0")].role, Role::NIC);
  EXPECT_EQ(t.devices[t.find("0005:01:00.0")].port, PortType::SwitchUpstream);
  EXPECT_EQ(t.devices[t.find("0005:02:02.0")].port, PortType::SwitchDownstream);
  // NIC under the first switch, GPU one switch further down: two bridges.
  EXPECT_EQ(cls(t, "0005:09:00.0", "0005:03:00.0"), PathClass::PXB);
  EXPECT_EQ(cls(t, "0005:03:00.0", "0005:03:00.1"), PathClass::PIX);
  // Different domains are different host bridges.
  EXPECT_NE(t.devices[t.find("0005:09:00.0")].host_bridge, t.devices[t.find("0004:01:00.0")].host_bridge);
}

TEST(Lspci, NnFormsGiveIds) {
  std::string tree =
      "-[0000:00]-+-00.0  Intel Corporation Device [8086:0998]\n"
      "           \\-01.0-[01]----00.0  NVIDIA Corporation GH100 [H100 PCIe] [10de:2331]\n";
  std::string vvv =
      "01:00.0 3D controller [0302]: NVIDIA Corporation GH100 [H100 PCIe] [10de:2331] (rev a1)\n"
      "\tNUMA node: 1\n\tRegion 1: Memory at 38000000000 (64-bit, prefetchable) [size=128G]\n";
  Topology t = parse_lspci({{"tree", tree}, {"vvv", vvv}});
  assign_roles(t, kb());
  const Device& g = t.devices[t.find("0000:01:00.0")];
  EXPECT_TRUE(g.ids_known);
  EXPECT_EQ(g.vendor, 0x10de);
  EXPECT_EQ(g.device, 0x2331);
  EXPECT_EQ(g.class_code >> 8, 0x0302u);
  EXPECT_EQ(g.role, Role::GPU);
  EXPECT_EQ(g.numa, 1);
  EXPECT_EQ(g.parent, t.find("0000:00:01.0"));
}

TEST(Lspci, VerboseOnlyBuildsTreeFromBusNumbers) {
  std::string vvv =
      "00:01.0 PCI bridge: Intel Corporation Device\n\tBus: primary=00, secondary=01, subordinate=01, sec-latency=0\n"
      "\tCapabilities: [40] Express (v2) Root Port (Slot+), MSI 00\n"
      "\t\tLnkCap:\tPort #0, Speed 16GT/s, Width x16, ASPM L1\n\t\tLnkSta:\tSpeed 16GT/s, Width x8\n"
      "\tCapabilities: [220 v1] Access Control Services\n"
      "\t\tACSCap:\tSrcValid+ TransBlk+ ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-\n"
      "\t\tACSCtl:\tSrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-\n\n"
      "01:00.0 Ethernet controller: Mellanox Technologies MT2910 Family [ConnectX-7]\n\tNUMA node: 0\n";
  Topology t = parse_lspci({{"v", vvv}});
  int rp = t.find("0000:00:01.0");
  ASSERT_GE(rp, 0);
  EXPECT_EQ(t.devices[rp].port, PortType::RootPort);
  EXPECT_EQ(t.devices[rp].acs_ctl, acs::kSourceValidation | acs::kRequestRedirect | acs::kCompletionRedirect | acs::kUpstreamForwarding);
  EXPECT_EQ(t.devices[rp].link_sta.width, 8);
  EXPECT_EQ(t.devices[t.find("0000:01:00.0")].parent, rp);
}

TEST(Lspci, GarbageGivesFileAndLine) {
  try {
    parse_lspci({{"bad.txt", "-[0000:00]-+-00.0  Intel\n           +-zz.0  Oops\n"}});
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_EQ(e.file(), "bad.txt");
    EXPECT_EQ(e.line(), 2);
    EXPECT_NE(std::string(e.what()).find("bad.txt:2: expected"), std::string::npos) << e.what();
  }
  try {
    parse_lspci({{"acs.txt", "00:01.0 PCI bridge: X\n\tACSCtl:\tSrcValid+ Bogus+\n"}});
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_EQ(e.line(), 2);
  }
  EXPECT_THROW(parse_lspci({{"empty.txt", "\n\n"}}), InputError);
  EXPECT_THROW(parse_lspci({{"orphan.txt", "\tNUMA node: 0\n"}}), InputError);
}

// ---- hwloc / NCCL ---------------------------------------------------------

TEST(Hwloc, P4dNicsMeetGpusAtHostBridges) {
  Topology t = parse_hwloc_xml(slurp(reference("aws-p4d.24xlarge.xml")), "p4d.xml");
  assign_roles(t, kb());
  Report r = check(t, kb(), CheckOptions{});
  EXPECT_EQ(r.gpus.size(), 8u);
  EXPECT_EQ(r.nics.size(), 4u);
  for (const auto& p : r.pairs) {
    if (t.devices[p.b].role != Role::NIC) continue;
    // Source: "p4d EFA NICs and GPUs meet at host bridges, not PCIe switches".
    EXPECT_NE(p.path.cls, PathClass::PIX) << p.label_a << "-" << p.label_b;
    EXPECT_NE(p.path.cls, PathClass::PXB) << p.label_a << "-" << p.label_b;
  }
  EXPECT_EQ(t.dmi_vendor, "Amazon EC2");
  EXPECT_EQ(t.cpu.model, 85);
  EXPECT_EQ(t.host_bridges[t.devices[t.find("0000:10:1c.0")].host_bridge].numa, 0);
  EXPECT_EQ(t.host_bridges[t.devices[t.find("0000:90:1c.0")].host_bridge].numa, 1);
  // Flat virtual topology: flagged as unreliable, with the provider-file fix.
  const PairResult* p = find_pair(r, "GPU0", "NIC0");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->path.cls, PathClass::PHB);
  EXPECT_TRUE(has_rule(*p, "platform-virtual"));
  EXPECT_EQ(p->verdict, Verdict::Unreliable);
}

TEST(Hwloc, P5enEveryNicSharesASwitchWithAGpu) {
  Topology t = parse_hwloc_xml(slurp(reference("aws-p5en.48xlarge.xml")), "p5en.xml");
  assign_roles(t, kb());
  Report r = check(t, kb(), CheckOptions{});
  ASSERT_EQ(r.nics.size(), 16u);
  for (int n : r.nics) {
    bool shared = false;
    for (int g : r.gpus) shared = shared || classify(t, g, n, kb()).cls == PathClass::PIX;
    EXPECT_TRUE(shared) << t.devices[n].bdf;
  }
}

// Fleet mode hands the previous node's device vector to the parser: none of its
// devices may show up in the next node.
TEST(Hwloc, ParsesIntoAnotherNodesDeviceVector) {
  const std::string p4d = slurp(reference("aws-p4d.24xlarge.xml"));
  Topology big = parse_hwloc_xml(slurp(reference("aws-p5en.48xlarge.xml")), "p5en.xml");
  ASSERT_GT(big.devices.size(), 0u);
  Topology fresh = parse_hwloc_xml(p4d, "p4d.xml");
  Topology reused = parse_hwloc_xml(p4d, "p4d.xml", std::move(big.devices));
  ASSERT_EQ(reused.devices.size(), fresh.devices.size());
  for (size_t i = 0; i < fresh.devices.size(); ++i) {
    EXPECT_EQ(reused.devices[i].bdf, fresh.devices[i].bdf);
    EXPECT_EQ(reused.devices[i].parent, fresh.devices[i].parent);
    EXPECT_EQ(reused.devices[i].children, fresh.devices[i].children);
  }
}

// check() classifies every labelled pair into one reused PathInfo: each result
// must equal a fresh classify(), whatever pair came before (SYS and NODE pairs
// fill the ports vectors, PIX pairs leave them short).
TEST(Classify, IntoAReusedPathInfoMatchesAFreshOne) {
  Topology t = parse_hwloc_xml(slurp(reference("aws-p5en.48xlarge.xml")), "p5en.xml");
  assign_roles(t, kb());
  Report r = check(t, kb(), CheckOptions{});
  std::vector<int> labelled = r.gpus;
  labelled.insert(labelled.end(), r.nics.begin(), r.nics.end());
  std::set<PathClass> seen;
  PathInfo reused;
  for (int a : labelled)
    for (int b : labelled) {
      if (a == b) continue;
      const PathInfo fresh = classify(t, a, b, kb());
      classify(t, a, b, kb(), reused);
      seen.insert(fresh.cls);
      // Every field of PathInfo at once.
      const auto fields = [](const PathInfo& p) {
        return std::tie(p.cls, p.cuda, p.nccl_gdr, p.numa_guessed, p.lca, p.ports_a, p.ports_b);
      };
      EXPECT_EQ(fields(reused), fields(fresh)) << a << " " << b;
    }
  EXPECT_GE(seen.size(), 2u);  // the pairs mix classes, so a stale field would show
}

TEST(Hwloc, TruncatedAndMalformedXmlGiveLines) {
  std::string x = slurp(reference("aws-p4d.24xlarge.xml"));
  try {
    parse_hwloc_xml(x.substr(0, x.size() / 2), "half.xml");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_GT(e.line(), 1);
    EXPECT_NE(std::string(e.what()).find("expected"), std::string::npos);
  }
  EXPECT_THROW(parse_hwloc_xml("<topology><object type=\"PCIDev\" pci_busid=\"zz\"/></topology>", "b.xml"), InputError);
  EXPECT_THROW(parse_hwloc_xml("<topology><object type=\"Machine\"></objec></topology>", "c.xml"), InputError);
  EXPECT_THROW(parse_hwloc_xml("<system/>", "d.xml"), InputError);
  EXPECT_THROW(parse_hwloc_xml("<topology a=\"&bogus;\"/>", "e.xml"), InputError);
}

TEST(NcclXml, P4dFileDeclaresGpuPairsAndNicUnderOneSwitch) {
  Topology t = parse_nccl_xml(slurp(reference("aws-p4d-24xl-topo.xml")), "p4d-topo.xml");
  assign_roles(t, kb());
  // Header: "Each group has 2 GPUs and 1 NIC behind a PCIe switch".
  EXPECT_EQ(cls(t, "0000:10:1c.0", "0000:10:1b.0"), PathClass::PIX);
  EXPECT_EQ(cls(t, "0000:10:1c.0", "0000:10:1d.0"), PathClass::PIX);
  EXPECT_EQ(cls(t, "0000:10:1c.0", "0000:20:1b.0"), PathClass::PHB);
  EXPECT_EQ(cls(t, "0000:10:1c.0", "0000:90:1b.0"), PathClass::SYS);
  EXPECT_TRUE(t.placeholder_switches);
  EXPECT_EQ(t.devices[t.find("0000:10:1b.0")].role, Role::NIC);
}

TEST(NcclXml, AzureNdv4RolesFromClassWithoutVendorIds) {
  Topology t = parse_nccl_xml(slurp(reference("azure-ndv4-topo.xml")), "ndv4.xml");
  assign_roles(t, kb());
  EXPECT_EQ(t.devices[t.find("0003:00:00.0")].role, Role::GPU);
  EXPECT_EQ(t.devices[t.find("0103:00:00.0")].role, Role::NIC);
  EXPECT_EQ(cls(t, "0003:00:00.0", "0103:00:00.0"), PathClass::PIX);
  EXPECT_EQ(cls(t, "0003:00:00.0", "0001:00:00.0"), PathClass::SYS);
}

TEST(NcclXml, StructureErrors) {
  EXPECT_THROW(parse_nccl_xml("<system><pci busid=\"0000:01:00.0\"/></system>", "a.xml"), InputError);
  EXPECT_THROW(parse_nccl_xml("<system><cpu numaid=\"x\"/></system>", "b.xml"), InputError);
  EXPECT_THROW(parse_nccl_xml("<system><cpu><pci busid=\"0000:01:00.0\" class=\"0xZZ\"/></cpu></system>", "c.xml"), InputError);
  EXPECT_THROW(parse_nccl_xml("<system><cpu><pci busid=\"1:2\"/></cpu></system>", "d.xml"), InputError);
}

// ---- sysfs / snapshot, classification, rules ------------------------------

TEST(Sysfs, ReadsPortTypesAcsBarsAndStack) {
  Topology t = from_fake(testing::switch_node());
  const Device& dsp = t.devices[t.find("0000:02:00.0")];
  EXPECT_EQ(dsp.port, PortType::SwitchDownstream);
  EXPECT_FALSE(dsp.port_inferred);
  EXPECT_TRUE(dsp.acs_known && dsp.acs_present);
  EXPECT_EQ(dsp.acs_cap, 0x7f);
  const Device& gpu = t.devices[t.find("0000:03:00.0")];
  EXPECT_EQ(gpu.role, Role::GPU);
  EXPECT_EQ(gpu.parent, t.find("0000:02:00.0"));
  ASSERT_EQ(gpu.bars.size(), 2u);
  EXPECT_EQ(gpu.bars[1].size, 64ull << 30);
  EXPECT_TRUE(gpu.bars[1].prefetchable && gpu.bars[1].is64);
  EXPECT_EQ(t.devices[t.find("0000:04:00.0")].role, Role::NIC);
  EXPECT_EQ(t.iommu, IommuMode::Off);
  EXPECT_TRUE(t.sw.has_module("nvidia_peermem"));
  EXPECT_EQ(t.cpu.family, 25);
}

TEST(Classify, SwitchIsOneBridge) {
  Topology t = from_fake(testing::switch_node());
  EXPECT_EQ(cls(t, "0000:03:00.0", "0000:04:00.0"), PathClass::PIX);
  Report r = check(t, kb(), CheckOptions{});
  const PairResult* p = find_pair(r, "GPU0", "NIC0");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->verdict, Verdict::Optimal) << (p->findings.empty() ? "" : p->findings[0].reason);
  EXPECT_TRUE(p->path.nccl_gdr);
  EXPECT_EQ(p->path.cuda, CudaCase::SwitchOnly);
  EXPECT_EQ(r.exit_code(), 0);
}

TEST(Classify, RootPortsHostBridgesAndNuma) {
  FakeNode n;
  auto add = [&](const std::string& bdf, const std::string& path, uint16_t v, uint16_t d, uint32_t cc, int pt, int sec, int numa) {
    testing::add_fn(n, bdf, path, v, d, cc, pt, sec).numa = numa;
  };
  add("0000:00:01.0", "/sys/devices/pci0000:00/0000:00:01.0", 0x1022, 1, 0x060400, testing::kRootPort, 1, 0);
  add("0000:00:02.0", "/sys/devices/pci0000:00/0000:00:02.0", 0x1022, 1, 0x060400, testing::kRootPort, 2, 0);
  add("0000:01:00.0", "/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0", 0x10de, 0x2330, 0x030200, 0, -1, 0);
  add("0000:02:00.0", "/sys/devices/pci0000:00/0000:00:02.0/0000:02:00.0", 0x15b3, 0x1021, 0x020700, 0, -1, 0);
  add("0000:40:01.0", "/sys/devices/pci0000:40/0000:40:01.0", 0x1022, 1, 0x060400, testing::kRootPort, 0x41, 0);
  add("0000:41:00.0", "/sys/devices/pci0000:40/0000:40:01.0/0000:41:00.0", 0x15b3, 0x1021, 0x020700, 0, -1, 0);
  add("0000:80:01.0", "/sys/devices/pci0000:80/0000:80:01.0", 0x1022, 1, 0x060400, testing::kRootPort, 0x81, 1);
  add("0000:81:00.0", "/sys/devices/pci0000:80/0000:80:01.0/0000:81:00.0", 0x15b3, 0x1021, 0x020700, 0, -1, 1);
  n.modules = "nvidia 1 0 - Live 0x0\nnvidia_peermem 1 0 - Live 0x0\n";
  Topology t = from_fake(n);
  EXPECT_EQ(cls(t, "0000:01:00.0", "0000:02:00.0"), PathClass::PHB);
  EXPECT_EQ(cls(t, "0000:01:00.0", "0000:41:00.0"), PathClass::NODE);
  EXPECT_EQ(cls(t, "0000:01:00.0", "0000:81:00.0"), PathClass::SYS);
  Report r = check(t, kb(), CheckOptions{});
  const PairResult* sys = find_pair(r, "GPU0", "NIC2");
  ASSERT_TRUE(sys);
  EXPECT_TRUE(has_rule(*sys, "path-sys"));
  EXPECT_EQ(sys->path.cuda, CudaCase::CpuInterconnect);
  // The fix names the better NIC on the GPU's socket.
  auto f2 = std::find_if(sys->findings.begin(), sys->findings.end(), [](const Finding& x) { return x.rule == "path-sys"; });
  EXPECT_NE(f2->fix.find("NIC0"), std::string::npos) << f2->fix;
  const PairResult* phb = find_pair(r, "GPU0", "NIC0");
  EXPECT_EQ(phb->verdict, Verdict::Degraded);
  EXPECT_NE(phb->findings[0].fix.find("NCCL_NET_GDR_LEVEL=PHB"), std::string::npos);
}

TEST(Classify, BroadcomTwoLevelSwitchIsFlattenedLikeNccl) {
  // RP -> USP(a) -> DSP(a) -> USP(b) -> DSP(b) -> GPU ; DSP(a') -> NIC
  auto build = [](uint16_t vendor, uint16_t device, uint16_t sv, uint16_t sd) {
    Topology t;
    t.format = "test";
    int hb = t.host_bridge_index("0000:00");
    auto add = [&](const std::string& bdf, int parent, PortType pt, Role role) {
      return testing::add_device(t, bdf, parent, pt, role, vendor, device, sv, sd, hb);
    };
    int rp = add("0000:00:01.0", -1, PortType::RootPort, Role::None);
    int ua = add("0000:01:00.0", rp, PortType::SwitchUpstream, Role::None);
    int da = add("0000:02:00.0", ua, PortType::SwitchDownstream, Role::None);
    int da2 = add("0000:02:01.0", ua, PortType::SwitchDownstream, Role::None);
    int ub = add("0000:03:00.0", da, PortType::SwitchUpstream, Role::None);
    int db = add("0000:04:00.0", ub, PortType::SwitchDownstream, Role::None);
    add("0000:05:00.0", db, PortType::Endpoint, Role::GPU);
    add("0000:06:00.0", da2, PortType::Endpoint, Role::NIC);
    t.finalize();
    return t;
  };
  Topology bcm = build(0x1000, 0xc010, 0x1000, 0xa064);
  EXPECT_EQ(classify(bcm, bcm.find("0000:05:00.0"), bcm.find("0000:06:00.0"), kb()).cls, PathClass::PIX);
  Topology plx = build(0x10b5, 0x8796, 0x10b5, 0x8796);
  EXPECT_EQ(classify(plx, plx.find("0000:05:00.0"), plx.find("0000:06:00.0"), kb()).cls, PathClass::PXB);
}

TEST(Rules, AcsRedirectOnADownstreamPortFlipsTheVerdict) {
  FakeNode n = testing::switch_node();
  for (auto& f : n.fns)
    if (f.bdf == "0000:02:01.0") f.acs_ctl = acs::kSourceValidation | acs::kRequestRedirect | acs::kCompletionRedirect;
  Topology t = from_fake(n);
  Report r = check(t, kb(), CheckOptions{});
  const PairResult* p = find_pair(r, "GPU0", "NIC0");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->path.cls, PathClass::PIX);
  EXPECT_EQ(p->verdict, Verdict::Unreliable);
  ASSERT_TRUE(has_rule(*p, "acs-redirect"));
  auto f = std::find_if(p->findings.begin(), p->findings.end(), [](const Finding& x) { return x.rule == "acs-redirect"; });
  EXPECT_NE(f->fix.find("setpci -s 0000:02:01.0 ECAP_ACS+0x6.w=0000:002c"), std::string::npos) << f->fix;
  EXPECT_NE(f->reason.find("ReqRedir+"), std::string::npos);
  EXPECT_EQ(r.exit_code(), 1);
  // --skip silences exactly that rule.
  CheckOptions o;
  o.skip = {"acs-redirect"};
  EXPECT_EQ(check(t, kb(), o).worst, Verdict::Optimal);
}

TEST(Rules, TranslatingIommuBlocksIdentityDoesNot) {
  FakeNode n = testing::switch_node();
  for (auto& f : n.fns) f.iommu_group = 7;
  n.groups = {{7, "DMA"}};
  Topology t = from_fake(n);
  EXPECT_EQ(t.iommu, IommuMode::Translating);
  Report r = check(t, kb(), CheckOptions{});
  EXPECT_EQ(r.worst, Verdict::Blocked);
  EXPECT_EQ(r.exit_code(), 2);
  EXPECT_TRUE(has_rule(*find_pair(r, "GPU0", "NIC0"), "iommu-translating"));
  n.groups = {{7, "identity"}};
  Topology t2 = from_fake(n);
  EXPECT_EQ(t2.iommu, IommuMode::Identity);
  EXPECT_EQ(check(t2, kb(), CheckOptions{}).worst, Verdict::Optimal);
}

TEST(Rules, DowntrainedWidthDegradesIdleGpuSpeedIsANote) {
  FakeNode n = testing::switch_node();
  for (auto& f : n.fns) {
    if (f.bdf == "0000:04:00.0") f.sta_width = 8;  // NIC at x8 of x16
    if (f.bdf == "0000:03:00.0") f.sta_speed = 1;  // GPU idle at 2.5 GT/s
  }
  Report r = check(from_fake(n), kb(), CheckOptions{});
  const PairResult* p = find_pair(r, "GPU0", "NIC0");
  EXPECT_TRUE(has_rule(*p, "link-width"));
  EXPECT_TRUE(has_rule(*p, "link-speed-idle"));
  EXPECT_FALSE(has_rule(*p, "link-speed"));
  EXPECT_EQ(p->verdict, Verdict::Degraded);
}

TEST(Rules, SmallBar1AndMissingPeerMemory) {
  FakeNode n = testing::switch_node();
  for (auto& f : n.fns)
    if (f.bdf == "0000:03:00.0")
      f.resource = "0x00000000f8000000 0x00000000f8ffffff 0x0000000000040200\n0x00000000e0000000 0x00000000efffffff 0x000000000014220c\n";
  n.modules = "nvidia 1 0 - Live 0x0\n";
  n.osrelease = "5.4.0\n";
  Report r = check(from_fake(n), kb(), CheckOptions{});
  const PairResult* p = find_pair(r, "GPU0", "NIC0");
  EXPECT_TRUE(has_rule(*p, "bar1-small"));
  EXPECT_TRUE(has_rule(*p, "software-peer-memory"));
  EXPECT_EQ(p->verdict, Verdict::Blocked);
  // Open NVIDIA module on a dma-buf capable kernel: the dma-buf path counts.
  n.osrelease = "6.8.0\n";
  n.nvidia_version = "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04\n";
  Report r2 = check(from_fake(n), kb(), CheckOptions{});
  EXPECT_EQ(find_pair(r2, "GPU0", "NIC0")->verdict, Verdict::Degraded);  // BAR1 only
}

TEST(Rules, PlatformDataGeforceAndPower8) {
  FakeNode n = testing::switch_node();
  for (auto& f : n.fns)
    if (f.bdf == "0000:03:00.0") f.device = 0x2684;  // GeForce RTX 4090
  Report r = check(from_fake(n), kb(), CheckOptions{});
  EXPECT_TRUE(has_rule(*find_pair(r, "GPU0", "NIC0"), "platform-geforce"));
  EXPECT_EQ(r.worst, Verdict::Blocked);
  FakeNode p8 = testing::switch_node();
  p8.cpuinfo = "processor\t: 0\ncpu\t\t: POWER8E (raw), altivec supported\n";
  Topology t = from_fake(p8);
  EXPECT_EQ(t.cpu.arch, "ppc64le");
  EXPECT_TRUE(has_rule(*find_pair(check(t, kb(), CheckOptions{}), "GPU0", "NIC0"), "platform-power8"));
}

TEST(Rules, RoleOverrideMakesStandInsCount) {
  FakeNode n = testing::switch_node();
  for (auto& f : n.fns) {
    if (f.bdf == "0000:03:00.0") {
      f.vendor = 0x1af4;
      f.device = 0x1110;
      f.class_code = 0x050000;
    }  // ivshmem
    if (f.bdf == "0000:04:00.0") {
      f.vendor = 0x8086;
      f.device = 0x10d3;
      f.class_code = 0x020000;
    }  // e1000e
  }
  Topology t = from_fake(n);
  EXPECT_EQ(check(t, kb(), CheckOptions{}).gpus.size(), 0u);
  apply_role_override(t, "GPU=03:00.0");
  apply_role_override(t, "nic=0000:04:00.0");
  Report r = check(t, kb(), CheckOptions{});
  ASSERT_EQ(r.gpus.size(), 1u);
  ASSERT_EQ(r.nics.size(), 1u);
  EXPECT_EQ(r.pairs[0].path.cls, PathClass::PIX);
  EXPECT_THROW(apply_role_override(t, "GPU=0000:09:00.0"), std::invalid_argument);
  EXPECT_THROW(apply_role_override(t, "TPU=0000:03:00.0"), std::invalid_argument);
  EXPECT_THROW(apply_role_override(t, "GPU"), std::invalid_argument);
}

TEST(RuleData, RootComplexTable) {
  auto cpu = [](const std::string& vendor, int family, int model) {
    CpuInfo c;
    c.vendor = vendor;
    c.family = family;
    c.model = model;
    return c;
  };
  // A node with this CPU and no PCI functions or GPUs.
  auto root_complex_of = [](const CpuInfo& c) {
    Topology t;
    t.cpu = c;
    return kb().root_complex(t, {});
  };
  const CpuInfo genoa = cpu("AuthenticAMD", 25, 17);
  ASSERT_TRUE(root_complex_of(genoa));
  EXPECT_EQ(root_complex_of(genoa)->p2p, "good");
  const CpuInfo bdw = cpu("GenuineIntel", 6, 79);
  ASSERT_TRUE(root_complex_of(bdw));
  EXPECT_EQ(root_complex_of(bdw)->cross_socket, "unsupported");
  EXPECT_EQ(root_complex_of(CpuInfo{}), nullptr);
  EXPECT_THROW(RuleData::load("/nonexistent-dir"), DataError);
}

TEST(Render, JsonHasVersionAndDotIsWellFormed) {
  Topology t = from_fake(testing::switch_node());
  Report r = check(t, kb(), CheckOptions{});
  std::string j = render_json(t, r);
  EXPECT_NE(j.find("\"schema\": \"gdrpeer-check\""), std::string::npos);
  EXPECT_NE(j.find("\"version\": 1"), std::string::npos);
  std::string d = render_dot(t, r);
  EXPECT_EQ(d.rfind("digraph gdrpeer {", 0), 0u);
  EXPECT_EQ(std::count(d.begin(), d.end(), '{'), std::count(d.begin(), d.end(), '}'));
  std::string m = render_matrix(t, r, false);
  EXPECT_NE(m.find("GPU0     X      PIX"), std::string::npos) << m;
}

}  // namespace
}  // namespace gdrpeer::topo

namespace gdrpeer::topo {
namespace {
// Found by fuzz_lspci: a tree that puts a bridge's bus under the bridge itself
// made every walk up the hierarchy loop forever.
TEST(Lspci, BridgeBelowItselfIsAnInputErrorNotAHang) {
  std::string tree = "-[0000:00]-+-01.0-[01]----00.0-[00]----01.0  Loop\n";
  EXPECT_THROW(parse_lspci({{"loop.txt", tree}}), InputError);
}
}  // namespace
}  // namespace gdrpeer::topo

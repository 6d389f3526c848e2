// The ID tables and platform rules in topology/*.json, as the checker uses
// them: a GPU id per family, the pci.ids fallback for NVIDIA ids the table
// lacks, Broadcom bnxt_re and Intel irdma NICs, and each platform rule the
// issue lists (POWER8, ARM64, GB10/DGX Spark, Jetson, GeForce, Grace C2C,
// cloud VMs) on synthetic sysfs trees.
#include <gtest/gtest.h>

#include <unistd.h>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <optional>
#include <set>
#include <string>

#include "gdrpeer/topo/errors.hpp"
#include "gdrpeer/topo/inputs.hpp"
#include "gdrpeer/topo/rule_data.hpp"
#include "gdrpeer/topo/rules.hpp"
#include "test_topo_support.hpp"

namespace gdrpeer::topo {
namespace {

using testing::FakeFn;
using testing::FakeNode;
using testing::find_pair;
using testing::from_entries;
using testing::from_fake;
using testing::kb;

// Sets (or, with nullptr, unsets) an environment variable for one scope.
class EnvGuard {
 public:
  EnvGuard(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value)
      ::setenv(name, value, 1);
    else
      ::unsetenv(name);
  }
  ~EnvGuard() {
    if (old_)
      ::setenv(name_, old_->c_str(), 1);
    else
      ::unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

// A pci.ids excerpt in the real file's layout: a vendor before and after
// NVIDIA's block, a subsystem line and a comment inside it.
class FakePciIds {
 public:
  FakePciIds() {
    char tmpl[] = "/tmp/gdrpeer-pciids-XXXXXX";
    int fd = ::mkstemp(tmpl);
    EXPECT_GE(fd, 0);
    path_ = tmpl;
    const std::string text =
        "#\tList of PCI ID's (synthetic excerpt for tests)\n"
        "10dd  Evans & Sutherland\n"
        "\t3f01  Not NVIDIA: a GeForce-looking name of another vendor\n"
        "10de  NVIDIA Corporation\n"
        "\t2330  GH100 [H100 SXM5 80GB]\n"
        "# a comment inside the vendor block\n"
        "\t3f01  GB999 [GeForce RTX 9090]\n"
        "\t\t10de 3f05  Subsystem line: [GeForce RTX 9095] (must not match device 3f05)\n"
        "\t3f02  GB999GL [RTX PRO 9000 Blackwell]\n"
        "\t3f03  GB999 [Mystery Accelerator]\n"
        "10df  Emulex Corporation\n"
        "\t3f04  Not NVIDIA either [GeForce]\n"
        "C 03  Display controller\n";
    EXPECT_EQ(::write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
    ::close(fd);
  }
  ~FakePciIds() { ::unlink(path_.c_str()); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

Device nvidia_gpu(uint16_t device, std::string name = "") {
  Device d;
  d.bdf = "0000:03:00.0";
  d.ids_known = true;
  d.vendor = 0x10de;
  d.device = device;
  d.class_known = true;
  d.class_code = 0x030200;
  d.role = Role::GPU;
  d.name = std::move(name);
  return d;
}

TarEntry file(const std::string& path, const std::string& data) { return {TarEntry::Type::File, path, data}; }

const Finding* finding(const PairResult& p, const std::string& rule) {
  for (const auto& f : p.findings)
    if (f.rule == rule) return &f;
  return nullptr;
}

const Finding* node_finding(const Report& r, const std::string& rule) {
  for (const auto& f : r.node_findings)
    if (f.rule == rule) return &f;
  return nullptr;
}

FakeNode with_gpu(uint16_t device) {
  FakeNode n = testing::switch_node();
  for (auto& f : n.fns)
    if (f.bdf == "0000:03:00.0") f.device = device;
  return n;
}

// GPU and NIC below two different root ports of one host bridge: PHB.
FakeNode two_root_ports(uint16_t gpu_device) {
  FakeNode n;
  testing::add_port(n, "0000:00:01.0", "/sys/devices/pci0000:00/0000:00:01.0", testing::kRootPort, 1);
  testing::add_port(n, "0000:00:02.0", "/sys/devices/pci0000:00/0000:00:02.0", testing::kRootPort, 2);
  testing::add_endpoint(n, "0000:01:00.0", "/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0", 0x10de, gpu_device, 0x030200);
  testing::add_endpoint(n, "0000:02:00.0", "/sys/devices/pci0000:00/0000:00:02.0/0000:02:00.0", 0x15b3, 0x1021, 0x020700);
  n.modules = "nvidia 1 0 - Live 0x0\nnvidia_peermem 1 0 - Live 0x0\nib_core 1 0 - Live 0x0\n";
  return n;
}

const char* kGraceCpuinfo =
    "processor\t: 0\nBogoMIPS\t: 2000.00\nCPU implementer\t: 0x41\nCPU architecture: 8\nCPU variant\t: 0x0\nCPU part\t: 0xd4f\n";
const char* kAltraCpuinfo =
    "processor\t: 0\nBogoMIPS\t: 50.00\nCPU implementer\t: 0x41\nCPU architecture: 8\nCPU variant\t: 0x3\nCPU part\t: 0xd0c\n";
const char* kOrinCpuinfo =
    "processor\t: 0\nBogoMIPS\t: 62.50\nCPU implementer\t: 0x41\nCPU architecture: 8\nCPU variant\t: 0x1\nCPU part\t: 0xd42\n";

// ---- GPU families by id ---------------------------------------------------------

TEST(GpuTable, OneIdPerFamilyComesFromTheTable) {
  EnvGuard no_pci_ids("GDRPEER_PCI_IDS", "");  // the table alone
  struct Case {
    uint16_t id;
    const char* family;
    const char* what;
  } cases[] = {
      {0x1db1, "datacenter", "V100 SXM2"},
      {0x20b0, "datacenter", "A100 SXM4"},
      {0x2330, "datacenter", "H100 SXM5"},
      {0x2335, "datacenter", "H200"},
      {0x26b9, "datacenter", "L40S"},
      {0x2901, "datacenter", "B200"},
      {0x3182, "datacenter", "B300"},
      {0x1e30, "professional", "Quadro RTX 6000/8000"},
      {0x2230, "professional", "RTX A6000"},
      {0x26b1, "professional", "RTX 6000 Ada"},
      {0x2bb1, "professional", "RTX PRO 6000 Blackwell"},
      {0x2342, "grace-c2c", "GH200"},
      {0x2941, "grace-c2c", "GB200"},
      {0x31c2, "grace-c2c", "GB300"},
      {0x1e04, "geforce", "RTX 2080 Ti"},
      {0x2182, "geforce", "GTX 1660 Ti"},
      {0x2204, "geforce", "RTX 3090"},
      {0x2684, "geforce", "RTX 4090"},
      {0x2757, "geforce", "RTX 4090 Laptop"},
      {0x2b85, "geforce", "RTX 5090"},
      {0x2c58, "geforce", "RTX 5090 Laptop"},
      {0x2e12, "gb10", "GB10 (DGX Spark)"},
  };
  for (const auto& c : cases) {
    GpuFamilyMatch m = kb().gpu_family_match(nvidia_gpu(c.id));
    ASSERT_NE(m.family, nullptr) << c.what;
    EXPECT_EQ(m.family->family, c.family) << c.what;
    EXPECT_EQ(m.from, GpuFamilyMatch::From::Table) << c.what;
    EXPECT_EQ(m.provenance(), "") << c.what;
  }
  // An id no table lists, with no name and no pci.ids: no family.
  EXPECT_EQ(kb().gpu_family_match(nvidia_gpu(0x3f01)).family, nullptr);
  // Ids are NVIDIA's: the same number from another vendor is not a family.
  Device amd = nvidia_gpu(0x2684);
  amd.vendor = 0x1002;
  EXPECT_EQ(kb().gpu_family(amd), nullptr);
}

TEST(GpuTable, EveryIdIsInOneFamilyOnly) {
  std::set<uint16_t> seen;
  size_t total = 0;
  for (const auto& f : kb().gpu_families)
    for (uint16_t id : f.devices) {
      EXPECT_TRUE(seen.insert(id).second) << "device id " << std::hex << id << " listed twice (" << f.family << ")";
      ++total;
    }
  EXPECT_GT(total, 300u);  // Volta..Blackwell: the tables are not a sample
}

TEST(GpuTable, NamesWithoutIdsFollowFamilyOrder) {
  EnvGuard no_pci_ids("GDRPEER_PCI_IDS", "");
  struct Case {
    const char* name;
    const char* family;
  } cases[] = {
      {"NVIDIA Corporation GB100 [GB200]", "grace-c2c"},  // not "datacenter" for its "B200"
      {"NVIDIA Corporation GB20B [GB10]", "gb10"},
      {"NVIDIA Corporation GA100 [A100 SXM4 40GB]", "datacenter"},
      {"NVIDIA Corporation GA102GL [A40]", "datacenter"},
      {"NVIDIA Corporation GA104GL [RTX A4000]", "professional"},  // not "[A40": the bracket anchors it
      {"NVIDIA Corporation GA107GLM [RTX A1000 Laptop GPU]", "professional"},
      {"NVIDIA Corporation GV100 [TITAN V]", "geforce"},
      {"NVIDIA Corporation AD102 [GeForce RTX 4090]", "geforce"},
  };
  for (const auto& c : cases) {
    Device d;
    d.name = c.name;  // lspci -tv without -nn: no ids
    GpuFamilyMatch m = kb().gpu_family_match(d);
    ASSERT_NE(m.family, nullptr) << c.name;
    EXPECT_EQ(m.family->family, c.family) << c.name;
    EXPECT_EQ(m.from, GpuFamilyMatch::From::InputName) << c.name;
  }
}

// ---- pci.ids fallback -----------------------------------------------------------

TEST(PciIds, DeviceNameLookupStaysInsideTheVendorBlock) {
  FakePciIds ids;
  EXPECT_EQ(pci_ids_device_name(ids.path(), 0x10de, 0x3f01), "GB999 [GeForce RTX 9090]");
  EXPECT_EQ(pci_ids_device_name(ids.path(), 0x10de, 0x2330), "GH100 [H100 SXM5 80GB]");
  EXPECT_EQ(pci_ids_device_name(ids.path(), 0x10de, 0x3f05), std::nullopt);  // only a subsystem line
  EXPECT_EQ(pci_ids_device_name(ids.path(), 0x10de, 0x3f04), std::nullopt);  // the next vendor's device
  EXPECT_EQ(pci_ids_device_name(ids.path(), 0x10dd, 0x3f01), "Not NVIDIA: a GeForce-looking name of another vendor");
  EXPECT_EQ(pci_ids_device_name(ids.path(), 0x1234, 0x3f01), std::nullopt);
  EXPECT_EQ(pci_ids_device_name("/nonexistent/pci.ids", 0x10de, 0x3f01), std::nullopt);
  // The vendor on the file's first line (no comment header).
  char tmpl[] = "/tmp/gdrpeer-pciids-XXXXXX";
  int fd = ::mkstemp(tmpl);
  ASSERT_GE(fd, 0);
  const std::string first = "10de  NVIDIA Corporation\n\t3f01  GB999 [GeForce RTX 9090]\n";
  ASSERT_EQ(::write(fd, first.data(), first.size()), static_cast<ssize_t>(first.size()));
  ::close(fd);
  EXPECT_EQ(pci_ids_device_name(tmpl, 0x10de, 0x3f01), "GB999 [GeForce RTX 9090]");
  ::unlink(tmpl);
}

TEST(PciIds, UnknownNvidiaIdTakesItsFamilyFromPciIds) {
  FakePciIds ids;
  EnvGuard env("GDRPEER_PCI_IDS", ids.path().c_str());
  EXPECT_EQ(kb().pci_ids_path(), ids.path());
  GpuFamilyMatch g = kb().gpu_family_match(nvidia_gpu(0x3f01));
  ASSERT_NE(g.family, nullptr);
  EXPECT_EQ(g.family->family, "geforce");
  EXPECT_EQ(g.from, GpuFamilyMatch::From::PciIds);
  EXPECT_EQ(g.name, "GB999 [GeForce RTX 9090]");
  EXPECT_NE(g.provenance().find("pci.ids name \"GB999 [GeForce RTX 9090]\""), std::string::npos) << g.provenance();
  GpuFamilyMatch p = kb().gpu_family_match(nvidia_gpu(0x3f02));
  ASSERT_NE(p.family, nullptr);
  EXPECT_EQ(p.family->family, "professional");
  // A pci.ids name no family pattern knows, and an id pci.ids lacks: no family.
  EXPECT_EQ(kb().gpu_family_match(nvidia_gpu(0x3f03)).family, nullptr);
  EXPECT_EQ(kb().gpu_family_match(nvidia_gpu(0x3f06)).family, nullptr);
  // The table wins over pci.ids, and pci.ids is not consulted for other vendors.
  EXPECT_EQ(kb().gpu_family_match(nvidia_gpu(0x2330)).from, GpuFamilyMatch::From::Table);
  Device other = nvidia_gpu(0x3f01);
  other.vendor = 0x10dd;
  EXPECT_EQ(kb().gpu_family_match(other).family, nullptr);
}

TEST(PciIds, GeforceRuleNamesWhereTheFamilyCameFrom) {
  FakePciIds ids;
  FakeNode n = with_gpu(0x3f01);  // not in gpus.json
  {
    EnvGuard env("GDRPEER_PCI_IDS", ids.path().c_str());
    Report r = check(from_fake(n), kb(), CheckOptions{});
    const PairResult* p = find_pair(r, "GPU0", "NIC0");
    ASSERT_NE(p, nullptr);
    const Finding* f = finding(*p, "platform-geforce");
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->severity, Verdict::Blocked);
    EXPECT_NE(f->reason.find("pci.ids name \"GB999 [GeForce RTX 9090]\""), std::string::npos) << f->reason;
    EXPECT_EQ(r.worst, Verdict::Blocked);
  }
  {
    EnvGuard env("GDRPEER_PCI_IDS", "");  // fallback off: the same node has no family, no rule
    Report r = check(from_fake(n), kb(), CheckOptions{});
    EXPECT_EQ(finding(*find_pair(r, "GPU0", "NIC0"), "platform-geforce"), nullptr);
  }
  {
    EnvGuard env("GDRPEER_PCI_IDS", ids.path().c_str());  // a table id: no provenance text
    Report r = check(from_fake(with_gpu(0x2684)), kb(), CheckOptions{});
    const Finding* f = finding(*find_pair(r, "GPU0", "NIC0"), "platform-geforce");
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->reason.find("GPU family from"), std::string::npos) << f->reason;
  }
}

// ---- RDMA NICs by id ------------------------------------------------------------

Role role_of(uint16_t vendor, uint16_t device, uint32_t class_code) {
  Topology t;
  testing::add_pci_function(t, "0000:05:00.0", -1, vendor, device, class_code);
  assign_roles(t, kb());
  return t.devices[0].role;
}

TEST(NicTable, BroadcomBnxtReAndIntelIrdmaAreRdmaNics) {
  struct Case {
    uint16_t vendor, device;
    const char* what;
  } nics[] = {
      {0x14e4, 0x16d7, "BCM57414 NetXtreme-E"}, {0x14e4, 0x16f1, "BCM57452"},         {0x14e4, 0x1614, "BCM57454"},
      {0x14e4, 0x1750, "BCM57508 Thor P5"},     {0x14e4, 0x1752, "BCM57502 Thor P5"}, {0x14e4, 0x1802, "BCM57508 NPAR"},
      {0x14e4, 0x1760, "BCM57608 Thor2 P7"},    {0x14e4, 0x1763, "BCM57601 Thor2"},   {0x14e4, 0x1806, "BCM5750x VF"},
      {0x14e4, 0x1819, "BCM5760x VF"},          {0x8086, 0x1592, "E810-C QSFP"},      {0x8086, 0x159b, "E810-XXV SFP"},
      {0x8086, 0x188b, "E823-C QSFP"},          {0x8086, 0x1891, "E822-C QSFP"},      {0x8086, 0x124d, "E823-L SFP"},
      {0x8086, 0x12d2, "E830-CC QSFP56"},       {0x8086, 0x12dd, "E830-XXV QSFP"},    {0x8086, 0x37d2, "X722 10GBASE-T"},
      {0x15b3, 0x1021, "ConnectX-7"},           {0x1d0f, 0xefa3, "EFA gen 4"},
  };
  for (const auto& c : nics) EXPECT_EQ(role_of(c.vendor, c.device, 0x020000), Role::NIC) << c.what;
  struct Case not_nics[] = {
      {0x14e4, 0x16c8, "BCM57301 NetXtreme-C (no RoCE)"},
      {0x14e4, 0x165f, "BCM5720 (tg3)"},
      {0x8086, 0x1572, "X710 (no irdma)"},
      {0x8086, 0x10d3, "82574L e1000e"},
  };
  for (const auto& c : not_nics) EXPECT_EQ(role_of(c.vendor, c.device, 0x020000), Role::None) << c.what;
  // An irdma id on a non-network function (base class rule) is not a NIC.
  EXPECT_EQ(role_of(0x8086, 0x1592, 0x0c0000), Role::None);
}

// ---- platform rules -------------------------------------------------------------

TEST(Platform, EveryRuleInTheDataIsOneThisFileTests) {
  std::set<std::string> ids;
  for (const auto& p : kb().platforms) ids.insert(p.id);
  EXPECT_EQ(ids, (std::set<std::string>{"platform-power8", "platform-gb10", "platform-jetson", "platform-geforce"}))
      << "a new platform rule needs a test here";
}

TEST(Platform, Power8BlocksEveryPair) {
  FakeNode n = testing::switch_node();
  n.cpuinfo = "processor\t: 0\ncpu\t\t: POWER8E (raw), altivec supported\n";
  Report r = check(from_fake(n), kb(), CheckOptions{});
  const Finding* f = finding(*find_pair(r, "GPU0", "NIC0"), "platform-power8");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->severity, Verdict::Blocked);
  n.cpuinfo = "processor\t: 0\ncpu\t\t: POWER9 (raw), altivec supported\n";
  EXPECT_EQ(finding(*find_pair(check(from_fake(n), kb(), CheckOptions{}), "GPU0", "NIC0"), "platform-power8"), nullptr);
}

TEST(Platform, Gb10BlocksGpuDirectRdmaByIdAndByDmi) {
  EnvGuard no_pci_ids("GDRPEER_PCI_IDS", "");
  Report r = check(from_fake(with_gpu(0x2e12)), kb(), CheckOptions{});
  const Finding* f = finding(*find_pair(r, "GPU0", "NIC0"), "platform-gb10");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->severity, Verdict::Blocked);
  EXPECT_EQ(r.exit_code(), 2);
  // The Founders Edition names itself in DMI with underscores.
  FakeNode n = testing::switch_node();  // an H100 id: only DMI can tell
  Report d =
      check(from_fake(n, {file("sys/class/dmi/id/sys_vendor", "NVIDIA\n"), file("sys/class/dmi/id/product_name", "NVIDIA_DGX_Spark\n")}),
            kb(), CheckOptions{});
  EXPECT_NE(finding(*find_pair(d, "GPU0", "NIC0"), "platform-gb10"), nullptr);
  Report h = check(from_fake(n), kb(), CheckOptions{});
  EXPECT_EQ(finding(*find_pair(h, "GPU0", "NIC0"), "platform-gb10"), nullptr);
  EXPECT_EQ(h.worst, Verdict::Optimal);
}

// A Jetson: the iGPU is not on PCI, the NIC is; the board names itself in the device tree.
FakeNode jetson_nic_only() {
  FakeNode n;
  const std::string rp = "/sys/devices/platform/14180000.pcie/pci0001:00/0001:00:00.0";
  testing::add_port(n, "0001:00:00.0", rp, testing::kRootPort, 1, 0x10de, 0x229e);
  testing::add_endpoint(n, "0001:01:00.0", rp + "/0001:01:00.0", 0x15b3, 0x1021, 0x020000);
  n.cpuinfo = kOrinCpuinfo;
  return n;
}

TEST(Platform, JetsonFromTheDeviceTreeModel) {
  const TarEntry model = file("proc/device-tree/model", std::string("NVIDIA Jetson AGX Orin Developer Kit") + '\0');
  Topology t = from_fake(jetson_nic_only(), {model});
  EXPECT_EQ(t.dmi_product, "NVIDIA Jetson AGX Orin Developer Kit");  // NUL cut off
  Report r = check(t, kb(), CheckOptions{});
  EXPECT_TRUE(r.gpus.empty());
  const Finding* f = node_finding(r, "platform-jetson");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->severity, Verdict::Unreliable);
  EXPECT_NE(f->reason.find("nvidia_p2p"), std::string::npos) << f->reason;
  EXPECT_NE(f->reason.find("Jetson AGX Orin"), std::string::npos) << f->reason;
  EXPECT_EQ(r.worst, Verdict::Unreliable);
  EXPECT_EQ(r.exit_code(), 1);
  // --skip platform drops it like any platform rule.
  CheckOptions skip;
  skip.skip = {"platform"};
  EXPECT_EQ(node_finding(check(t, kb(), skip), "platform-jetson"), nullptr);
  // The same node without the device-tree model: nothing Jetson about it.
  Report plain = check(from_fake(jetson_nic_only()), kb(), CheckOptions{});
  EXPECT_EQ(node_finding(plain, "platform-jetson"), nullptr);
  EXPECT_EQ(plain.worst, Verdict::Optimal);
}

TEST(Platform, JetsonFromDmiAndDmiWinsOverTheDeviceTree) {
  Topology t = from_fake(jetson_nic_only(), {file("sys/class/dmi/id/product_name", "Jetson AGX Thor Developer Kit\n")});
  EXPECT_NE(node_finding(check(t, kb(), CheckOptions{}), "platform-jetson"), nullptr);
  Topology s = from_fake(jetson_nic_only(), {file("sys/class/dmi/id/product_name", "ProLiant DL380 Gen11\n"),
                                             file("proc/device-tree/model", std::string("NVIDIA Jetson AGX Orin") + '\0')});
  EXPECT_EQ(s.dmi_product, "ProLiant DL380 Gen11");
  EXPECT_EQ(node_finding(check(s, kb(), CheckOptions{}), "platform-jetson"), nullptr);
}

TEST(Platform, IgxOrinWithADiscreteGpuIsNotJetsonLimited) {
  FakeNode n = testing::switch_node();  // H100 + ConnectX-7 under one switch
  Topology t = from_fake(n, {file("proc/device-tree/model", std::string("NVIDIA IGX Orin Development Kit") + '\0')});
  Report r = check(t, kb(), CheckOptions{});
  ASSERT_EQ(r.gpus.size(), 1u);
  const PairResult* p = find_pair(r, "GPU0", "NIC0");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(finding(*p, "platform-jetson"), nullptr);
  EXPECT_EQ(p->verdict, Verdict::Optimal);
  const Finding* note = node_finding(r, "platform-jetson");
  ASSERT_NE(note, nullptr);
  EXPECT_EQ(note->severity, Verdict::Optimal);
  EXPECT_NE(note->reason.find("discrete"), std::string::npos) << note->reason;
  EXPECT_EQ(r.worst, Verdict::Optimal);
}

TEST(Platform, SnapshotRecordsTheDeviceTreeModel) {
  std::vector<TarEntry> e = jetson_nic_only().entries();
  e.push_back(file("proc/device-tree/model", std::string("NVIDIA Jetson Orin Nano Developer Kit") + '\0'));
  auto inner = make_tar_fs(write_tar(e), "node.tar");
  RecordingFs rec(*inner);
  Topology t = parse_sysfs(rec, "node.tar");
  EXPECT_EQ(t.dmi_product, "NVIDIA Jetson Orin Nano Developer Kit");
  std::vector<TarEntry> out = rec.entries();
  EXPECT_TRUE(std::any_of(out.begin(), out.end(), [](const TarEntry& x) { return x.path == "proc/device-tree/model"; }));
  // ... and a check of that snapshot sees the same platform.
  EXPECT_NE(node_finding(check(from_entries(out), kb(), CheckOptions{}), "platform-jetson"), nullptr);
}

TEST(Platform, GeforceBlocksGpuNicButNotThroughIdsOfOtherFamilies) {
  EnvGuard no_pci_ids("GDRPEER_PCI_IDS", "");
  for (uint16_t id : std::initializer_list<uint16_t>{0x1e04, 0x2204, 0x2684, 0x2b85, 0x2c58}) {
    Report r = check(from_fake(with_gpu(id)), kb(), CheckOptions{});
    const Finding* f = finding(*find_pair(r, "GPU0", "NIC0"), "platform-geforce");
    ASSERT_NE(f, nullptr) << std::hex << id;
    EXPECT_EQ(f->severity, Verdict::Blocked);
  }
  for (uint16_t id : std::initializer_list<uint16_t>{0x2230, 0x26b1, 0x2bb1, 0x2330, 0x2901}) {  // professional, data-center
    Report r = check(from_fake(with_gpu(id)), kb(), CheckOptions{});
    EXPECT_EQ(finding(*find_pair(r, "GPU0", "NIC0"), "platform-geforce"), nullptr) << std::hex << id;
  }
}

TEST(Platform, GraceC2cRootComplexPathIsTheDesignedOne) {
  EnvGuard no_pci_ids("GDRPEER_PCI_IDS", "");
  // By GPU id (an x86 CPU in the fake: the family alone makes it a Grace system).
  Report gh = check(from_fake(two_root_ports(0x2342)), kb(), CheckOptions{});
  const PairResult* p = find_pair(gh, "GPU0", "NIC0");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->path.cls, PathClass::PHB);
  const Finding* f = finding(*p, "path-grace");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->severity, Verdict::Optimal);
  EXPECT_EQ(finding(*p, "path-root-complex"), nullptr);
  EXPECT_EQ(p->verdict, Verdict::Optimal);
  // The same path with an H100 on that CPU: NCCL leaves GDR off, degraded.
  Report h = check(from_fake(two_root_ports(0x2330)), kb(), CheckOptions{});
  EXPECT_NE(finding(*find_pair(h, "GPU0", "NIC0"), "path-root-complex"), nullptr);
  EXPECT_EQ(find_pair(h, "GPU0", "NIC0")->verdict, Verdict::Degraded);
  // By CPU and chipset: Neoverse V2 cores under NVIDIA TH500 root ports (10de:22b2, RP x16 in
  // open-gpu-kernel-modules nvcst.h), whatever the GPU; and no ARM64 warning for it.
  FakeNode g = two_root_ports(0x2330);
  g.cpuinfo = kGraceCpuinfo;
  for (auto& port : g.fns)
    if (port.port_type == testing::kRootPort) port.vendor = 0x10de, port.device = 0x22b2;
  Report gc = check(from_fake(g), kb(), CheckOptions{});
  const PairResult* q = find_pair(gc, "GPU0", "NIC0");
  EXPECT_NE(finding(*q, "path-grace"), nullptr);
  EXPECT_EQ(finding(*q, "platform-arm64"), nullptr);
  // The cores alone are also AWS Graviton4's and Google Axion's (Neoverse V2): under root ports
  // that are not TH500 ones the node is not Grace, and its root complex is not rated.
  FakeNode v2 = two_root_ports(0x2330);
  v2.cpuinfo = kGraceCpuinfo;
  Report vr = check(from_fake(v2), kb(), CheckOptions{});
  const PairResult* w = find_pair(vr, "GPU0", "NIC0");
  EXPECT_EQ(finding(*w, "path-grace"), nullptr);
  EXPECT_NE(finding(*w, "platform-arm64"), nullptr);
}

TEST(Platform, Arm64WithoutAKnownRootComplexIsUnreliable) {
  FakeNode n = testing::switch_node();
  n.cpuinfo = kAltraCpuinfo;  // Neoverse N1: not in root_complexes.json
  Topology t = from_fake(n);
  EXPECT_EQ(t.cpu.arch, "aarch64");
  Report r = check(t, kb(), CheckOptions{});
  const Finding* f = finding(*find_pair(r, "GPU0", "NIC0"), "platform-arm64");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->severity, Verdict::Unreliable);
  EXPECT_EQ(r.worst, Verdict::Unreliable);
}

TEST(Platform, CloudVmFromDmiVendor) {
  // A switch the hypervisor exposes: a note. Both devices on the root bus: unreliable.
  Report sw = check(from_fake(testing::switch_node(), {file("sys/class/dmi/id/sys_vendor", "Amazon EC2\n")}), kb(), CheckOptions{});
  const Finding* note = finding(*find_pair(sw, "GPU0", "NIC0"), "platform-virtual");
  ASSERT_NE(note, nullptr);
  EXPECT_EQ(note->severity, Verdict::Optimal);
  FakeNode flat;
  testing::add_endpoint(flat, "0000:00:05.0", "/sys/devices/pci0000:00/0000:00:05.0", 0x10de, 0x2330, 0x030200);
  testing::add_endpoint(flat, "0000:00:06.0", "/sys/devices/pci0000:00/0000:00:06.0", 0x1d0f, 0xefa1, 0x020000);
  flat.modules = "nvidia 1 0 - Live 0x0\nnvidia_peermem 1 0 - Live 0x0\n";
  Report vm = check(from_fake(flat, {file("sys/class/dmi/id/sys_vendor", "Amazon EC2\n")}), kb(), CheckOptions{});
  const Finding* bad = finding(*find_pair(vm, "GPU0", "NIC0"), "platform-virtual");
  ASSERT_NE(bad, nullptr);
  EXPECT_EQ(bad->severity, Verdict::Unreliable);
  // Bare metal, same flat tree: no virtual-machine finding.
  Report metal = check(from_fake(flat, {file("sys/class/dmi/id/sys_vendor", "Supermicro\n")}), kb(), CheckOptions{});
  EXPECT_EQ(finding(*find_pair(metal, "GPU0", "NIC0"), "platform-virtual"), nullptr);
}

TEST(PlatformData, UnknownAppliesToIsADataError) {
  char tmpl[] = "/tmp/gdrpeer-data-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  for (const char* f : {"devices.json", "gpus.json", "root_complexes.json"}) {
    std::string text = testing::slurp(testing::data_dir() + "/" + f);
    FILE* out = std::fopen((dir + "/" + f).c_str(), "w");
    ASSERT_NE(out, nullptr);
    std::fwrite(text.data(), 1, text.size(), out);
    std::fclose(out);
  }
  FILE* out = std::fopen((dir + "/platforms.json").c_str(), "w");
  ASSERT_NE(out, nullptr);
  std::fputs(R"({"schema": 1, "rules": [{"id": "platform-x", "severity": "blocked", "applies_to": "gpu-gpu", "reason": "r"}]})", out);
  std::fclose(out);
  try {
    RuleData::load(dir);
    ADD_FAILURE() << "loaded a rule with applies_to gpu-gpu";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("applies_to must be"), std::string::npos) << e.what();
  }
  for (const char* f : {"devices.json", "gpus.json", "root_complexes.json", "platforms.json"}) ::unlink((dir + "/" + f).c_str());
  ::rmdir(dir.c_str());
}

// A platforms.json rule must say where it applies: one with no condition (arch, cpu_patterns,
// dmi_patterns, gpu_families; an empty list is none) would fire on every node, and an
// integrated-gpu rule is judged on the node fields alone (an integrated GPU is in no pair, so
// gpu_families is never checked for it) and without one would fire nowhere. The loader refuses
// both, naming the file and the rule (docs/check.md, "Rule data"); a rule with a condition loads.
TEST(PlatformData, RuleWithoutConditionIsADataError) {
  struct Case {
    const char* rule;
    const char* error;  // "" loads
  };
  const Case cases[] = {
      {R"({"id": "platform-x", "severity": "blocked", "reason": "r"})", "rule platform-x: needs at least one condition"},
      {R"({"id": "platform-x", "severity": "degraded", "applies_to": "gpu-nic", "cpu_patterns": [], "dmi_patterns": [], "arch": "",
          "reason": "r"})",
       "rule platform-x: needs at least one condition"},
      {R"({"id": "platform-i", "severity": "blocked", "applies_to": "integrated-gpu", "gpu_families": ["datacenter"], "reason": "r"})",
       "rule platform-i: an integrated-gpu rule needs arch, cpu_patterns or dmi_patterns"},
      {R"({"id": "platform-f", "severity": "blocked", "gpu_families": ["geforce"], "reason": "r"})", ""},
      {R"({"id": "platform-a", "severity": "blocked", "arch": "ppc64le", "reason": "r"})", ""},
      {R"({"id": "platform-j", "severity": "blocked", "applies_to": "integrated-gpu", "dmi_patterns": ["Jetson"], "reason": "r"})", ""},
  };
  char tmpl[] = "/tmp/gdrpeer-data-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  auto write = [&](const std::string& f, const std::string& text) {
    FILE* out = std::fopen((dir + "/" + f).c_str(), "w");
    ASSERT_NE(out, nullptr);
    std::fwrite(text.data(), 1, text.size(), out);
    std::fclose(out);
  };
  for (const char* f : {"devices.json", "gpus.json", "root_complexes.json"}) write(f, testing::slurp(testing::data_dir() + "/" + f));
  for (const auto& c : cases) {
    SCOPED_TRACE(c.rule);
    write("platforms.json", std::string(R"({"schema": 1, "rules": [)") + c.rule + "]}");
    try {
      const RuleData k = RuleData::load(dir);
      EXPECT_EQ(*c.error, '\0') << "loaded";
      EXPECT_EQ(k.platforms.size(), 1u);
    } catch (const DataError& e) {
      EXPECT_NE(*c.error, '\0') << e.what();
      EXPECT_NE(std::string(e.what()).find(dir + "/platforms.json: " + c.error), std::string::npos) << e.what();
    }
  }
  for (const char* f : {"devices.json", "gpus.json", "root_complexes.json", "platforms.json"}) ::unlink((dir + "/" + f).c_str());
  ::rmdir(dir.c_str());
}

}  // namespace
}  // namespace gdrpeer::topo

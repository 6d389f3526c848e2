// The PCIe rules (rules.cpp, rules_root_port.cpp) against independent truth, for the cases the
// generated operator mutants (tests/mutation/generate.py, issue 28) showed no other test pins:
//  - BAR1 sizes named as lspci names them (pciutils lspci.c show_size: the largest unit that
//    divides the size), and the BAR1 rule kept to NVIDIA GPUs (AMD GPUs expose VRAM through
//    BAR0: amdgpu's gmc.aper_base is pci_resource_start(pdev, 0));
//  - the driver version read from /proc/driver/nvidia/version's NVRM line;
//  - the node notes check() adds (no GPU, no NIC, IOMMU, software, CPU, NVLink unknown);
//  - the link, software, platform and root-port rules on crafted nodes whose expected answer
//    follows from the PCIe spec or the upstream rule each test names.
// Each test names, in its comment, what it pins; run_generated.py --only checks each kill.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "gdrpeer/topo/inputs.hpp"
#include "gdrpeer/topo/rule_data.hpp"
#include "gdrpeer/topo/rules.hpp"
#include "test_topo_support.hpp"

namespace gdrpeer::topo {
namespace {

using testing::from_fake;
using testing::kb;
using FakeNode = testing::FakeNode;
using FakeFn = testing::FakeFn;

const PairResult& only_pair(const Report& r) {
  EXPECT_EQ(r.pairs.size(), 1u);
  return r.pairs.at(0);
}

const Finding* finding(const PairResult& p, const std::string& rule) {
  for (const auto& f : p.findings)
    if (f.rule == rule) return &f;
  return nullptr;
}

std::vector<const Finding*> notes(const Report& r, const std::string& rule) {
  std::vector<const Finding*> out;
  for (const auto& f : r.node_findings)
    if (f.rule == rule) out.push_back(&f);
  return out;
}

FakeFn& fn(FakeNode& n, const std::string& bdf) {
  for (auto& f : n.fns)
    if (f.bdf == bdf) return f;
  throw std::runtime_error("no function " + bdf);
}

// switch_node(): 00:01.0 root port -> 01:00.0 switch -> 02:00.0 / 02:01.0 -> GPU 03:00.0 / NIC 04:00.0.
constexpr const char* kGpu = "0000:03:00.0";
constexpr const char* kNic = "0000:04:00.0";

FakeNode two_root_ports(uint16_t acs_ctl_1, uint16_t acs_ctl_2);
FakeNode gpu_pair(uint16_t first, uint16_t second, bool nvswitch);

// ---- BAR1 -------------------------------------------------------------------

// The BAR1 size in the bar1-small finding is the one `lspci -vvv -s BDF | grep 'Region 1'` (the
// finding's own fix) shows: pciutils' show_size divides by 1024 while the size stays a whole
// number of the next unit (K, M, G). The sysfs resource line "start end flags" gives the size as
// end - start + 1 (Documentation/PCI/sysfs-pci.rst). The threshold is raised to 1 PiB, as
// --data-dir with gpus.json "bar1_min_mib": 1073741824 would (2^30 MiB, the loader's maximum), so
// that BAR1s of a GiB and more, up to TiBs, are judged too.
TEST(TruthBar1, SizeIsNamedAsLspciShowsIt) {
  struct Case {
    const char* end;    // resource line of region 1, start 0x0000100000000000
    const char* lspci;  // lspci's [size=...] for that region
    const char* want;   // in the finding
  };
  const Case cases[] = {
      {"0x000010000fffffff", "256M", "256 MiB"},
      {"0x000010003fffffff", "1G", "1 GiB"},
      {"0x000010005fffffff", "1536M", "1536 MiB"},
      {"0x000010007fffffff", "2G", "2 GiB"},
      {"0x0000100fffffffff", "64G", "64 GiB"},
      {"0x0000100000ffffff", "16M", "16 MiB"},
      // Below 1 MiB lspci counts in K, then in bytes: never "0 MiB".
      {"0x000010000003ffff", "256K", "256 KiB"},
      {"0x000010000017ffff", "1536K", "1536 KiB"},
      {"0x00001000000001ff", "512", "512 bytes"},
      // lspci's last unit is T (show_size's suffixes "", K, M, G, T): never "1024 GiB".
      {"0x000010ffffffffff", "1T", "1 TiB"},
      {"0x000011ffffffffff", "2T", "2 TiB"},
      {"0x0000107fffffffff", "512G", "512 GiB"},
  };
  RuleData k = kb();
  k.min_bar1_bytes = 1ull << 50;
  for (const auto& c : cases) {
    SCOPED_TRACE(c.lspci);
    FakeNode n = testing::switch_node();
    fn(n, kGpu).resource =
        "0x00000000f8000000 0x00000000f8ffffff 0x0000000000040200\n0x0000100000000000 " + std::string(c.end) + " 0x000000000014220c\n";
    Report r = check(from_fake(n), k, CheckOptions{});
    const Finding* f = finding(only_pair(r), "bar1-small");
    ASSERT_TRUE(f);
    EXPECT_EQ(f->severity, Verdict::Degraded);
    EXPECT_NE(f->reason.find("BAR1 of 0000:03:00.0 is " + std::string(c.want) + ":"), std::string::npos) << f->reason;
  }
}

// BAR1 as the GPUDirect RDMA window is NVIDIA's (NVIDIA's GPUDirect RDMA guide: "the GPU's BAR1
// ... maps GPU memory"); an AMD GPU's VRAM aperture is BAR0 (amdgpu_gmc: aper_base =
// pci_resource_start(pdev, 0)), so a small region 1 of an AMD Instinct MI300X (1002:74a1) says
// nothing about peer access: no bar1-small. The NVIDIA GPU with the same regions gets it.
TEST(TruthBar1, OnlyNvidiaGpusAreJudgedByTheirBar1) {
  for (bool amd : {true, false}) {
    SCOPED_TRACE(amd ? "AMD MI300X" : "NVIDIA H100");
    FakeNode n = testing::switch_node();
    FakeFn& g = fn(n, kGpu);
    if (amd) {
      g.vendor = 0x1002;
      g.device = 0x74a1;
      g.class_code = 0x038000;
    }
    g.resource = "0x00000000f8000000 0x00000000f8ffffff 0x0000000000040200\n0x0000100000000000 0x000010000fffffff 0x000000000014220c\n";
    n.modules += "amdgpu 1 0 - Live 0x0\n";
    Topology t = from_fake(n);
    ASSERT_EQ(t.devices[t.find(kGpu)].role, Role::GPU);
    Report r = check(t, kb(), CheckOptions{});
    EXPECT_EQ(finding(only_pair(r), "bar1-small") != nullptr, !amd);
  }
}

// `--role NIC=BDF` makes a function a NIC whatever its ids (docs/check.md: --role overrides the
// tables), and GPUDirect RDMA exposes the GPU's BAR1 to the NIC (NVIDIA's GPUDirect RDMA guide),
// not the NIC's: an NVIDIA function declared a NIC, here a GH200 (10de:2342, gpus.json family
// grace-c2c) with a 256 MiB region 1 on the other root port of a PHB pair with an H100 PCIe, is
// judged as the NIC of that pair: no bar1-small for it, and the node is no Grace system (the
// GPU, an H100 on this x86 root complex, reaches the root over PCIe: path-root-complex, not
// path-grace).
TEST(TruthBar1, AFunctionDeclaredANicIsNotJudgedAsAGpu) {
  FakeNode n = two_root_ports(0, 0);
  FakeFn& other = fn(n, "0000:02:00.0");
  other.vendor = 0x10de;
  other.device = 0x2342;
  other.class_code = 0x030200;
  other.resource = "0x00000000f9000000 0x00000000f9ffffff 0x0000000000040200\n0x0000200000000000 0x000020000fffffff 0x000000000014220c\n";
  Topology t = from_fake(n);
  apply_role_override(t, "NIC=0000:02:00.0");
  const Report r = check(t, kb(), CheckOptions{});
  const PairResult& p = only_pair(r);
  EXPECT_EQ(t.devices[p.b].bdf, "0000:02:00.0");
  EXPECT_EQ(p.path.cls, PathClass::PHB);
  EXPECT_FALSE(finding(p, "bar1-small")) << finding(p, "bar1-small")->reason;
  EXPECT_FALSE(finding(p, "path-grace"));
  EXPECT_TRUE(finding(p, "path-root-complex"));
}

// ---- paths ------------------------------------------------------------------

// path-grace is about GPUDirect RDMA between a GPU and a NIC or drive on a Grace system: its fix,
// NCCL_DMABUF_ENABLE=1, is NCCL's switch for registering GPU buffers with the network through
// dma-buf (NCCL environment variables, NCCL_DMABUF_ENABLE). Two H100 PCIe (10de:2331, no NVLink
// baseboard part) on two root ports of a Grace CPU (Neoverse V2, CPU part 0xd4f; root_complexes.json:
// p2p good) reach each other through that root complex: a GPU-GPU pair gets no path-grace, and,
// the root complex being a good peer-to-peer one, no finding for its path either.
TEST(TruthPaths, GpuPairOnAGraceRootComplexIsNoGpuDirectRdmaPath) {
  FakeNode n = two_root_ports(0, 0);
  FakeFn& second = fn(n, "0000:02:00.0");
  second.vendor = 0x10de;
  second.device = 0x2331;
  second.class_code = 0x030200;
  n.cpuinfo = "processor\t: 0\nBogoMIPS\t: 2000.00\nCPU implementer\t: 0x41\nCPU architecture: 8\nCPU variant\t: 0x0\nCPU part\t: 0xd4f\n";
  for (auto& f : n.fns)
    if (f.port_type == testing::kRootPort) f.vendor = 0x10de, f.device = 0x22b2;  // TH500 RP x16 (nvcst.h): Grace's chipset
  const Report r = check(from_fake(n), kb(), CheckOptions{});
  const PairResult& p = only_pair(r);
  ASSERT_EQ(r.gpus.size(), 2u);
  ASSERT_FALSE(p.nvlink.linked);
  ASSERT_EQ(p.path.cls, PathClass::PHB);
  EXPECT_FALSE(finding(p, "path-grace"));
  EXPECT_FALSE(finding(p, "path-root-complex"));
}

// A platform rule on the CPU alone (platforms.json platform-power8: IBM POWER8's host bridges carry
// no GPUDirect RDMA/P2P) says what the rule says: the GPU family's provenance (" (GPU family from
// its name ...)") belongs to GPU-family rules only. An IBM S822LC for HPC ("Minsky": POWER8, Tesla
// P100 SXM2, ConnectX-4) as lspci -tv names its devices, without ids, with lscpu's model line
// ("POWER8 (raw), altivec supported", as lscpu prints it on ppc64le).
TEST(TruthPaths, CpuPlatformRuleReasonCarriesNoGpuFamilyProvenance) {
  const std::string text =
      "$ lspci -tv\n"
      "-+-[0000:00]---00.0-[01]----00.0  NVIDIA Corporation GP100GL [Tesla P100 SXM2 16GB]\n"
      " \\-[0001:00]---00.0-[01]----00.0  Mellanox Technologies MT27700 Family [ConnectX-4]\n"
      "$ lscpu\nArchitecture:                       ppc64le\nModel name:                         POWER8 (raw), altivec supported\n";
  Topology t = parse_lspci({{"minsky.txt", text}});
  assign_roles(t, kb());
  const Report r = check(t, kb(), CheckOptions{});
  const PairResult& p = only_pair(r);
  ASSERT_FALSE(t.devices[p.a].ids_known);
  const Finding* f = finding(p, "platform-power8");
  ASSERT_TRUE(f);
  EXPECT_EQ(f->reason, "IBM POWER8 does not support GPUDirect RDMA/P2P through its PCIe host bridges");
  EXPECT_EQ(f->severity, Verdict::Blocked);
}

// NVLink joins GPUs to GPUs (and NVSwitches); GPUDirect RDMA between a GPU and a NIC goes over
// PCIe (NVIDIA's GPUDirect RDMA guide: the NIC reads GPU memory through the BAR over PCIe). A
// function declared a NIC with --role is that pair's NIC even where it is an NVIDIA NVLink
// baseboard part (H100 SXM5, 10de:2330): in a VM with a flat root bus (hypervisor flag; all three
// functions on bus 00, as tests/reference/kinds/h200-vm-lspci-tvv.md's guest shows its GPUs), the
// GPU x NIC pairs infer no NVLink from the model and get the flat-VM note for devices (unreliable),
// not the one for two GPUs whose NVLink is unknown; the GPU pair itself infers NVLink.
TEST(TruthPaths, GpuNicPairIsJudgedOnPcieWhateverTheNicIs) {
  FakeNode n;
  n.modules = testing::switch_node().modules;
  n.cpuinfo += "flags\t\t: fpu hypervisor\n";
  for (const char* bdf : {"0000:00:05.0", "0000:00:06.0", "0000:00:07.0"})
    testing::add_endpoint(n, bdf, std::string("/sys/devices/pci0000:00/") + bdf, 0x10de, 0x2330, 0x030200).resource =
        testing::switch_node().fns[4].resource;
  Topology t = from_fake(n);
  apply_role_override(t, "NIC=0000:00:07.0");
  const Report r = check(t, kb(), CheckOptions{});
  ASSERT_EQ(r.gpus.size(), 2u);
  ASSERT_EQ(r.nics.size(), 1u);
  ASSERT_TRUE(r.virtual_machine);
  int gpu_nic = 0;
  for (const auto& p : r.pairs) {
    SCOPED_TRACE(p.label_a + "-" + p.label_b);
    if (p.label_b == "GPU1") {
      EXPECT_TRUE(p.nvlink.linked);
      continue;
    }
    ++gpu_nic;
    EXPECT_FALSE(p.nvlink.linked);
    EXPECT_FALSE(finding(p, "path-nvlink"));
    const Finding* v = finding(p, "platform-virtual");
    ASSERT_TRUE(v);
    EXPECT_EQ(v->severity, Verdict::Unreliable);
    EXPECT_EQ(v->reason.rfind("virtual machine with a flat virtual PCIe topology: both devices sit on the hypervisor's root bus", 0), 0u)
        << v->reason;
  }
  EXPECT_EQ(gpu_nic, 2);
}

// A GH200 is a Grace Hopper superchip (NVIDIA: Grace CPU and Hopper GPU joined by NVLink-C2C), so
// an aarch64 node whose GPU lspci names "GH200" is a Grace system even where its CPU, named as
// lscpu prints it on GH200 ("Vendor ID: ARM", "Model name: Neoverse-V2"), is not matched to a
// root complex: path-grace, and no platform-arm64 warning about an unknown ARM root complex.
TEST(TruthPaths, Gh200NamedByLspciIsAGraceSystem) {
  const std::string text =
      "$ lspci -tv\n"
      "-[0000:00]---00.0-[01]----00.0  NVIDIA Corporation GH100 [GH200 120GB / 480GB]\n"
      "-[0002:00]---00.0-[01]----00.0  Mellanox Technologies MT2910 Family [ConnectX-7]\n"
      "$ lscpu\nArchitecture:                       aarch64\nVendor ID:                          ARM\n"
      "Model name:                         Neoverse-V2\n";
  Topology t = parse_lspci({{"gh200.txt", text}});
  assign_roles(t, kb());
  ASSERT_EQ(t.cpu.arch, "aarch64");
  const Report r = check(t, kb(), CheckOptions{});
  const PairResult& p = only_pair(r);
  EXPECT_TRUE(finding(p, "path-grace"));
  EXPECT_FALSE(finding(p, "platform-arm64")) << finding(p, "platform-arm64")->reason;
}

// Grace's root complex (topology/root_complexes.json: cross-socket P2P slow) needs the chipset on
// the node beside the Neoverse V2 cores (MIDR 0x41/0xd4f), which AWS Graviton4 and Google Axion
// share: a GPU of the grace-c2c family (GH200 10de:2342, gpus.json) or an NVIDIA TH500 root port
// (open-gpu-kernel-modules nvcst.h: 10de:22b1-22b4, 22b8, 22b9). Two GPUs on two sockets, each
// under a root port of its own; the SYS pair's reason names the root complex it was judged by.
TEST(TruthPaths, GracesRootComplexNeedsItsChipsetOnTheNode) {
  using testing::add_device;
  struct Case {
    const char* what;
    uint16_t gpu, port_vendor, port_device;
    bool grace;
  };
  const Case cases[] = {
      {"GH200 GPUs (grace-c2c) under root ports whose ids say nothing", 0x2342, 0x8086, 0x1234, true},
      {"H100 PCIe GPUs (10de:2331) under TH500 RP x16", 0x2331, 0x10de, 0x22b2, true},
      {"H100 PCIe GPUs under TH500 RP x2", 0x2331, 0x10de, 0x22b9, true},
      {"H100 PCIe GPUs under Amazon's root ports (Graviton4-like)", 0x2331, 0x1d0f, 0x0201, false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    Topology t;
    t.numa_nodes = 2;
    t.cpu.arch = "aarch64";
    t.cpu.vendor = "ARM";
    t.cpu.arm_implementer = 0x41;
    t.cpu.arm_part = 0xd4f;
    const int h0 = t.host_bridge_index("0000:00"), h1 = t.host_bridge_index("0000:80");
    t.host_bridges[h0].numa = 0;
    t.host_bridges[h1].numa = 1;
    const int r0 = add_device(t, "0000:00:01.0", -1, PortType::RootPort, Role::None, c.port_vendor, c.port_device, 0, 0, h0);
    const int r1 = add_device(t, "0000:80:01.0", -1, PortType::RootPort, Role::None, c.port_vendor, c.port_device, 0, 0, h1);
    add_device(t, "0000:01:00.0", r0, PortType::Endpoint, Role::GPU, 0x10de, c.gpu);
    add_device(t, "0000:81:00.0", r1, PortType::Endpoint, Role::GPU, 0x10de, c.gpu);
    t.finalize();
    const Report r = check(t, kb(), CheckOptions{});
    const PairResult& p = only_pair(r);
    ASSERT_EQ(p.path.cls, PathClass::SYS);
    const Finding* f = finding(p, "path-sys");
    ASSERT_TRUE(f);
    const std::string grace_words = "peer-to-peer across sockets is slow on NVIDIA Grace (Neoverse V2)";
    EXPECT_EQ(f->reason.find(grace_words) != std::string::npos, c.grace) << f->reason;
    EXPECT_EQ(f->reason.find("cross-socket peer-to-peer is unknown") != std::string::npos, !c.grace) << f->reason;
  }
}

// ---- the NVIDIA driver's version -----------------------------------------------

// /proc/driver/nvidia/version's first line is "NVRM version: " and the driver's id string: "NVIDIA
// UNIX [Open ]Kernel Module[ for <arch>]  <version>  [Release Build  (<builder>@<host>)]  <date>"
// (open-gpu-kernel-modules nv-procfs.c prints NVRM_ID; the real lines of the H200 node and of
// NVIDIA forum posts in test_readiness have that layout). The version is the dotted number after
// the module words; the date's day ("16") and anything after the version are not it.
TEST(TruthDriverVersion, TheDottedNumberAfterTheModuleWords) {
  struct Case {
    const char* line;
    const char* want;
  };
  const Case cases[] = {
      // The layout of the open module's builds, with a builder host that has dots in its name.
      {"NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.65.06  Release Build  (dvs-builder@ci.example.com)  Wed Jul 16 "
       "22:25:28 UTC 2025\n",
       "NVIDIA driver 580.65.06 (open kernel module)"},
      // No version field: the day and the host are not versions.
      {"NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  Release Build  (dvs-builder@ci.example.com)  Wed Jul 16 22:25:28 UTC "
       "2025\n",
       "NVIDIA driver (version not read) (open kernel module)"},
      // A later dotted number (a build tag) does not replace the version.
      {"NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.183.01  Sun May 12 19:39:15 UTC 2024 1.2\n",
       "NVIDIA driver 535.183.01 (proprietary kernel module)"},
      // The version's first character is a digit (a word with a digit second is not a version).
      {"NVRM version: NVIDIA UNIX x86_64 Kernel Module v1.2  535.183.01  Sun May 12 19:39:15 UTC 2024\n",
       "NVIDIA driver 535.183.01 (proprietary kernel module)"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.line);
    FakeNode n = testing::switch_node();
    n.nvidia_version = c.line;
    Report r = check(from_fake(n), kb(), CheckOptions{});
    auto cuda = notes(r, "software-cuda");
    ASSERT_EQ(cuda.size(), 1u);
    EXPECT_EQ(cuda[0]->reason.substr(0, std::string(c.want).size() + 1), std::string(c.want) + ";") << cuda[0]->reason;
  }
}

// ---- links -------------------------------------------------------------------

// PCIe link training (PCIe base spec, LTSSM Configuration): a link trains to the widest width and
// the highest rate both of its ends support, so "downtrained" means below min(the two ends' Max
// Link Width / Max Link Speed, Link Capabilities). Link Status of a root or switch downstream port
// describes the link below it, that of an endpoint or upstream port the link above; both ends
// read the same trained link. Here the NIC's link: downstream port 02:01.0 above, NIC 04:00.0
// below (switch_node). Speeds are the sysfs codes of test_topo_support (3 = 8 GT/s, 4 = 16 GT/s).
TEST(TruthLinks, DowntrainedMeansBelowWhatBothEndsSupport) {
  struct Case {
    const char* what;
    int port_cap_w, nic_cap_w, trained_w;
    int port_cap_s, nic_cap_s, trained_s;
    bool width, speed;  // link-width / link-speed expected
  };
  const Case cases[] = {
      {"x16 NIC in a x16 slot at x16", 16, 16, 16, 4, 4, 4, false, false},
      {"x16 NIC in a x16 slot at x8", 16, 16, 8, 4, 4, 4, true, false},
      {"x16 NIC in a x8 slot at x8", 8, 16, 8, 4, 4, 4, false, false},
      {"x8 NIC in a x16 slot at x8", 16, 8, 8, 4, 4, 4, false, false},
      {"x8 NIC in a x16 slot at x4", 16, 8, 4, 4, 4, 4, true, false},
      {"16 GT/s NIC and port at 8 GT/s", 16, 16, 16, 4, 4, 3, false, true},
      {"16 GT/s NIC in an 8 GT/s slot at 8 GT/s", 16, 16, 16, 3, 4, 3, false, false},
      {"8 GT/s NIC in a 16 GT/s slot at 8 GT/s", 16, 16, 16, 4, 3, 3, false, false},
      {"x1 NIC in a x1 slot at x1", 1, 1, 1, 4, 4, 4, false, false},
      // An x1 slot (or x1 riser) caps an x16 card at x1: LnkCap Max Link Width 000001b at the port.
      {"x16 NIC in a x1 slot at x1", 1, 16, 1, 4, 4, 4, false, false},
      {"x16 NIC in a x4 slot at x1", 4, 16, 1, 4, 4, 4, true, false},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what);
    FakeNode n = testing::switch_node();
    FakeFn& port = fn(n, "0000:02:01.0");
    FakeFn& nic = fn(n, kNic);
    port.cap_width = c.port_cap_w;
    nic.cap_width = c.nic_cap_w;
    port.sta_width = nic.sta_width = c.trained_w;
    port.cap_speed = c.port_cap_s;
    nic.cap_speed = c.nic_cap_s;
    port.sta_speed = nic.sta_speed = c.trained_s;
    const PairResult p = only_pair(check(from_fake(n), kb(), CheckOptions{}));
    EXPECT_EQ(finding(p, "link-width") != nullptr, c.width);
    EXPECT_EQ(finding(p, "link-speed") != nullptr, c.speed);
    EXPECT_EQ(p.verdict, c.width || c.speed ? Verdict::Degraded : Verdict::Optimal);
  }
}

// The same rule on each kind of port of switch_node (root port 00:01.0 -> upstream port 01:00.0 ->
// downstream ports 02:00.0 / 02:01.0 -> GPU 03:00.0 / NIC 04:00.0), and what is not a trained link:
// a Negotiated Link Width of 0 is reserved (the link is down: lspci prints "Width x0"), and an
// "Unknown" current_link_speed (the kernel's word for a speed it cannot name) is no reading at all. GPUs lower their link speed when idle
// (nvidia-smi -q: "Link Gen Current" below "Max" at idle): a slower GPU link is a note to recheck under load, not a downtrained link.
TEST(TruthLinks, EachPortKindAndWhatIsNotATrainedLink) {
  struct Case {
    const char* what;
    std::function<void(FakeNode&)> set;
    std::vector<std::string> want;  // "rule bdf" of every link finding
  };
  auto at = [](FakeNode& n, const char* bdf, int cap_w, int sta_w, int cap_s, int sta_s) {
    FakeFn& f = fn(n, bdf);
    f.cap_width = cap_w;
    f.sta_width = sta_w;
    f.cap_speed = cap_s;
    f.sta_speed = sta_s;
  };
  const std::vector<Case> cases = {
      {"all x16 at 16 GT/s", [](FakeNode&) {}, {}},
      {"NIC link down (Width x0) at both ends", [&](FakeNode& n) { at(n, "0000:02:01.0", 16, 0, 4, 4), at(n, kNic, 16, 0, 4, 4); }, {}},
      {"x1 NIC in a x16 slot at x1", [&](FakeNode& n) { at(n, "0000:02:01.0", 16, 1, 4, 4), at(n, kNic, 1, 1, 4, 4); }, {}},
      {"x16 NIC at x8 below an x8 switch uplink",
       [&](FakeNode& n) {
         at(n, "0000:01:00.0", 8, 8, 4, 4), at(n, "0000:00:01.0", 8, 8, 4, 4), at(n, "0000:02:01.0", 16, 8, 4, 4), at(n, kNic, 16, 8, 4, 4);
       },
       {"link-width 0000:02:01.0", "link-width 0000:04:00.0"}},
      {"switch uplink x8 to a x8 root port",
       [&](FakeNode& n) { at(n, "0000:01:00.0", 16, 8, 4, 4), at(n, "0000:00:01.0", 8, 8, 4, 4); },
       {}},
      {"switch uplink x8 of x16 at both ends",
       [&](FakeNode& n) {
         at(n, "0000:01:00.0", 16, 8, 4, 4), at(n, "0000:00:01.0", 16, 8, 4, 4), at(n, "0000:02:00.0", 8, 8, 4, 4),
             at(n, "0000:02:01.0", 8, 8, 4, 4), at(n, kGpu, 16, 8, 4, 4), at(n, kNic, 16, 8, 4, 4);
       },
       {"link-width 0000:01:00.0"}},
      {"GPU at 8 GT/s of 16", [&](FakeNode& n) { at(n, kGpu, 16, 16, 4, 3); }, {"link-speed-idle 0000:03:00.0"}},
      // An idle GPU's link read at both ends: the GPU and its downstream port 02:00.0 both at
      // 2.5 GT/s x16 of 16 GT/s x16 (the GPUs of tests/reference/stelline-asus-esc8000a-e12.md, idle
      // in P8 at 0 % in that file's nvidia-smi, read "LnkSta: Speed 2.5GT/s (downgraded), Width
      // x16"; hwloc issue 385, Brice Goglin: NVIDIA GPUs lower their link speed when idle and keep
      // their lanes; PCIe base spec, Link Status: Current Link Speed is the link's negotiated speed,
      // the same at its two ends). The port's reading is the GPU's idle note, not a downtrained link.
      {"idle GPU and its downstream port at 2.5 GT/s of 16",
       [&](FakeNode& n) { at(n, "0000:02:00.0", 16, 16, 4, 1), at(n, kGpu, 16, 16, 4, 1); },
       {"link-speed-idle 0000:02:00.0", "link-speed-idle 0000:03:00.0"}},
      // Only the speed: a GPU link trained at x8 of x16 stays a fault at both ends, idle or not.
      {"idle GPU and its downstream port at 2.5 GT/s x8 of 16 GT/s x16",
       [&](FakeNode& n) { at(n, "0000:02:00.0", 16, 8, 4, 1), at(n, kGpu, 16, 8, 4, 1); },
       {"link-speed-idle 0000:02:00.0", "link-speed-idle 0000:03:00.0", "link-width 0000:02:00.0", "link-width 0000:03:00.0"}},
      // The NIC's downstream port at a lower speed is no GPU's idle link: still link-speed.
      {"NIC and its downstream port at 2.5 GT/s of 16",
       [&](FakeNode& n) { at(n, "0000:02:01.0", 16, 16, 4, 1), at(n, kNic, 16, 16, 4, 1); },
       {"link-speed 0000:02:01.0", "link-speed 0000:04:00.0"}},
      // The switch's uplink (read at its upstream port 01:00.0, the pair's meeting point) is no
      // GPU's own link: a GPU below the switch does not excuse it.
      {"switch uplink at 2.5 GT/s of 16 above an idle GPU",
       [&](FakeNode& n) { at(n, "0000:01:00.0", 16, 16, 4, 1), at(n, "0000:02:00.0", 16, 16, 4, 1), at(n, kGpu, 16, 16, 4, 1); },
       {"link-speed 0000:01:00.0", "link-speed-idle 0000:02:00.0", "link-speed-idle 0000:03:00.0"}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what);
    FakeNode n = testing::switch_node();
    c.set(n);
    const PairResult p = only_pair(check(from_fake(n), kb(), CheckOptions{}));
    std::vector<std::string> got;
    for (const auto& f : p.findings)
      if (f.rule.rfind("link-", 0) == 0) got.push_back(f.rule + " " + f.reason.substr(f.reason.find("0000:"), 12));
    std::sort(got.begin(), got.end());
    EXPECT_EQ(got, c.want);
  }
  // Two functions of one device below a root port (00:01.0, the first device): the pair meets at
  // the root port, whose link to them trained x8 of x16 at both ends.
  FakeNode mf;
  mf.modules = testing::switch_node().modules;
  FakeFn& rport = testing::add_port(mf, "0000:00:01.0", "/sys/devices/pci0000:00/0000:00:01.0", testing::kRootPort, 1);
  rport.sta_width = 8;
  for (const auto& [bdf, vendor, device, cls] :
       {std::tuple{"0000:01:00.0", 0x10de, 0x2331, 0x030200}, std::tuple{"0000:01:00.1", 0x15b3, 0x1021, 0x020700}}) {
    FakeFn& f = testing::add_endpoint(mf, bdf, std::string("/sys/devices/pci0000:00/0000:00:01.0/") + bdf, static_cast<uint16_t>(vendor),
                                      static_cast<uint16_t>(device), static_cast<uint32_t>(cls));
    f.sta_width = 8;
  }
  const PairResult m = only_pair(check(from_fake(mf), kb(), CheckOptions{}));
  ASSERT_GE(m.path.lca, 0);
  bool port_named = false;
  for (const auto& f : m.findings) port_named = port_named || (f.rule == "link-width" && f.reason.find("link of 0000:00:01.0 ") == 0);
  EXPECT_TRUE(port_named);
  // "Unknown" current_link_speed on the NIC and its port, and Current Link Speed 0 in their Link
  // Status registers (a reserved encoding): no speed reading, no speed finding.
  FakeNode n = testing::switch_node();
  for (auto& f : n.fns)
    if (f.bdf == kNic || f.bdf == "0000:02:01.0") f.sta_speed = 0;
  std::vector<TarEntry> e = n.entries();
  for (auto& x : e)
    if (x.path.find("0000:04:00.0/current_link_speed") != std::string::npos ||
        x.path.find("0000:02:01.0/current_link_speed") != std::string::npos)
      x.data = "Unknown\n";
  const PairResult q = only_pair(check(testing::from_entries(e), kb(), CheckOptions{}));
  EXPECT_FALSE(finding(q, "link-speed"));
  // A Max Link Speed this reader cannot name: LnkCap encoding 0111b (128 GT/s in PCIe 7.0; no rate
  // in speed_from_code's table), which the kernel's max_link_speed then prints as "Unknown"
  // (pci_speed_string). That end's speed capability is unknown, not 0 GT/s: the link is judged by
  // the other end's capability. NIC (32 GT/s capable) and port both at 16 GT/s, x16: with the
  // port's speed capability unknown, the NIC is still below its own 32 GT/s; with the NIC's
  // unknown, the port is below its 32 GT/s.
  for (const char* unknown_end : {"0000:02:01.0", kNic}) {
    SCOPED_TRACE(std::string("speed capability unknown at ") + unknown_end);
    FakeNode u = testing::switch_node();
    for (auto& f : u.fns)
      if (f.bdf == kNic || f.bdf == "0000:02:01.0") {
        f.cap_speed = f.bdf == unknown_end ? 7 : 5;
        f.sta_speed = 4;
      }
    std::vector<TarEntry> ue = u.entries();
    for (auto& x : ue)
      if (x.path.find(std::string(unknown_end).substr(5) + "/max_link_speed") != std::string::npos) x.data = "Unknown\n";
    const Topology ut = testing::from_entries(ue);
    ASSERT_EQ(ut.devices[ut.find(unknown_end)].link_cap.speed_gts, 0);
    ASSERT_EQ(ut.devices[ut.find(unknown_end)].link_cap.width, 16);
    const PairResult up = only_pair(check(ut, kb(), CheckOptions{}));
    std::vector<std::string> got;
    for (const auto& f : up.findings)
      if (f.rule.rfind("link-", 0) == 0) got.push_back(f.rule + " " + f.reason.substr(f.reason.find("0000:"), 12));
    const std::string other = std::string(unknown_end) == kNic ? "0000:02:01.0" : kNic;
    EXPECT_EQ(got, std::vector<std::string>{"link-speed " + other});
  }
  // The same for the width: Max Link Width 000000b is a reserved encoding (PCIe base spec, Link
  // Capabilities; the kernel's max_link_width prints the field as read: "0"), so that end's width
  // capability is unknown. NIC (x16 capable) and port both trained x8 at 16 GT/s.
  for (const char* unknown_end : {"0000:02:01.0", kNic}) {
    SCOPED_TRACE(std::string("width capability unknown at ") + unknown_end);
    FakeNode u = testing::switch_node();
    for (auto& f : u.fns)
      if (f.bdf == kNic || f.bdf == "0000:02:01.0") {
        f.cap_width = f.bdf == unknown_end ? 0 : 16;
        f.sta_width = 8;
      }
    const Topology ut = from_fake(u);
    ASSERT_EQ(ut.devices[ut.find(unknown_end)].link_cap.width, 0);
    ASSERT_EQ(ut.devices[ut.find(unknown_end)].link_cap.speed_gts, 16);
    const PairResult up = only_pair(check(ut, kb(), CheckOptions{}));
    std::vector<std::string> got;
    for (const auto& f : up.findings)
      if (f.rule.rfind("link-", 0) == 0) got.push_back(f.rule + " " + f.reason.substr(f.reason.find("0000:"), 12));
    const std::string other = std::string(unknown_end) == kNic ? "0000:02:01.0" : kNic;
    EXPECT_EQ(got, std::vector<std::string>{"link-width " + other});
  }
  // Root ports on a root-complex path: an x8 NIC in an x16 root port at x8 is not downtrained.
  FakeNode rp = two_root_ports(0, 0);
  fn(rp, "0000:00:02.0").sta_width = 8;
  fn(rp, "0000:02:00.0").cap_width = 8;
  fn(rp, "0000:02:00.0").sta_width = 8;
  EXPECT_FALSE(finding(only_pair(check(from_fake(rp), kb(), CheckOptions{})), "link-width"));
  // An idle GPU straight below a root port, as the RTX 6000 Adas of stelline-asus-esc8000a-e12.md
  // sit below root ports 00:01.1, 40:01.1...: the root port reads the GPU's idle 2.5 GT/s too.
  FakeNode idle = two_root_ports(0, 0);
  fn(idle, "0000:00:01.0").sta_speed = 1;
  fn(idle, "0000:01:00.0").sta_speed = 1;
  const PairResult ip = only_pair(check(from_fake(idle), kb(), CheckOptions{}));
  EXPECT_FALSE(finding(ip, "link-speed")) << finding(ip, "link-speed")->reason;
  std::vector<std::string> idle_notes;
  for (const auto& f : ip.findings)
    if (f.rule == "link-speed-idle") idle_notes.push_back(f.reason);
  EXPECT_EQ(
      idle_notes,
      (std::vector<std::string>{
          "GPU 0000:01:00.0 link at 2.5GT/s of 16GT/s: GPUs lower the link speed when idle; recheck while it is busy",
          "link of 0000:00:01.0 to GPU 0000:01:00.0 at 2.5GT/s of 16GT/s: GPUs lower the link speed when idle; recheck while it is busy"}));
}

// ---- software: driver, peer memory, dma-buf, CUDA's answers ------------------------

constexpr const char* kOpen = "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build  (nixbld@)  \n";
constexpr const char* kProprietary = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.183.01  Sun May 12 19:39:15 UTC 2024\n";

struct SoftwareCase {
  const char* what;
  uint16_t gpu_vendor = 0x10de;  // 0x1002: AMD Instinct MI300X (1002:74a1), 0x8086: Intel Data Center GPU Max (8086:0bd5)
  std::string modules;
  std::vector<std::string> peers;  // registered clients (/sys/kernel/mm/memory_peers/<name>/version)
  bool peers_dir = false;
  std::string kernel = "6.8.0";
  std::string nvidia_version = kProprietary;
  std::string cuda_probe;  // gdrpeer-snapshot/cuda-probe, "" none
};

SoftwareCase sc(const char* what, uint16_t gpu_vendor, std::string modules, std::vector<std::string> peers = {}, bool peers_dir = false,
                std::string kernel = "6.8.0", std::string nvidia_version = kProprietary, std::string cuda_probe = "") {
  return SoftwareCase{what,      gpu_vendor,        std::move(modules),        std::move(peers),
                      peers_dir, std::move(kernel), std::move(nvidia_version), std::move(cuda_probe)};
}

PairResult software_pair(const SoftwareCase& c) {
  FakeNode n = testing::switch_node();
  FakeFn& g = fn(n, kGpu);
  if (c.gpu_vendor == 0x1002) {
    g.vendor = 0x1002;
    g.device = 0x74a1;
    g.class_code = 0x038000;
  } else if (c.gpu_vendor == 0x8086) {
    g.vendor = 0x8086;
    g.device = 0x0bd5;
    g.class_code = 0x038000;
  }
  n.modules = c.modules;
  n.memory_peers = c.peers;
  n.memory_peers_dir = c.peers_dir;
  n.osrelease = c.kernel + "\n";
  n.nvidia_version = c.nvidia_version;
  std::vector<TarEntry> extra;
  if (!c.cuda_probe.empty()) extra.push_back({TarEntry::Type::File, "gdrpeer-snapshot/cuda-probe", c.cuda_probe});
  Topology t = from_fake(n, extra);
  EXPECT_EQ(t.devices[t.find(kGpu)].role, Role::GPU);
  Report r = check(t, kb(), CheckOptions{});
  return only_pair(r);
}

// What the peer-memory and dma-buf rows of docs/check.md's rule table say, per GPU vendor:
//  - the nvidia module drives NVIDIA GPUs only; an AMD GPU needs amdgpu, not nvidia;
//  - GPU memory reaches ib_core through a registered peer-memory client (nv_mem, MOFED's
//    memory_peers/<name>/; nvidia-fs is GDS's client, not a NIC's: NVIDIA/nccl #1939) or through a
//    dma-buf exporter on Linux >= 5.12 (ib_umem_dmabuf, kernel commit "RDMA/umem: Support importing
//    dma-buf as user memory region", v5.12): the open NVIDIA module for NVIDIA GPUs, amdgpu for
//    AMD GPUs (amdgpu_dma_buf.c), gdrpeer for any;
//  - CUDA's CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED 0 means no GPUDirect RDMA for that GPU,
//    DMA_BUF_SUPPORTED 0 no dma-buf from CUDA for it (CUDA driver API, CUdevice_attribute).
TEST(TruthSoftware, DriverPeerClientAndDmabufPerGpuVendor) {
  const std::string nv = "nvidia 1 0 - Live 0x0\n";
  struct Want {
    const char* rule;  // the software finding, "" none
    Verdict severity;
    const char* reason_part;  // in its reason, "" any
  };
  const std::pair<SoftwareCase, Want> cases[] = {
      // AMD: amdgpu exports VRAM as dma-buf; without it, nothing does.
      {sc("AMD, amdgpu, 6.8", 0x1002, "amdgpu 1 0 - Live 0x0\n"),
       {"software-peer-memory", Verdict::Optimal, "the dma-buf path is available"}},
      {sc("AMD, no amdgpu, 6.8", 0x1002, "ib_core 1 0 - Live 0x0\n"), {"software-peer-memory", Verdict::Blocked, "needs gdrpeer"}},
      // The open NVIDIA module exports NVIDIA memory only.
      {sc("AMD, open nvidia loaded, no amdgpu", 0x1002, nv, {}, false, "6.8.0", kOpen),
       {"software-peer-memory", Verdict::Blocked, "needs gdrpeer"}},
      // amdgpu exports AMD memory only.
      {sc("NVIDIA proprietary, amdgpu loaded", 0x10de, nv + "amdgpu 1 0 - Live 0x0\n"),
       {"software-peer-memory", Verdict::Blocked, "needs the open NVIDIA kernel module or gdrpeer"}},
      {sc("Intel GPU, amdgpu loaded", 0x8086, "amdgpu 1 0 - Live 0x0\n"), {"software-peer-memory", Verdict::Blocked, "needs gdrpeer"}},
      // Only NVIDIA GPUs need the nvidia module.
      {sc("AMD, no nvidia module, amdgpu", 0x1002, "amdgpu 1 0 - Live 0x0\n", {}, false, "6.8.0", ""),
       {"software-peer-memory", Verdict::Optimal, "the dma-buf path is available"}},
      {sc("NVIDIA, no nvidia module", 0x10de, "amdgpu 1 0 - Live 0x0\n"),
       {"software-driver", Verdict::Blocked, "nvidia kernel module is not loaded"}},
      // nv_mem registered beside GDS's nvidia-fs: a NIC's peer client is there.
      {sc("nv_mem and nvidia-fs registered", 0x10de, nv + "nvidia_peermem 1 0 - Live 0x0\n", {"nv_mem", "nvidia-fs"}, true, "5.4.0"),
       {"", Verdict::Optimal, ""}},
      {sc("nvidia-fs only registered", 0x10de, nv + "nvidia_peermem 1 0 - Live 0x0\n", {"nvidia-fs"}, true, "5.4.0"),
       {"software-peer-memory", Verdict::Blocked, "nvidia_peermem is loaded but no peer-memory client is registered"}},
      // memory_peers there (MOFED's ib_core) but no peermem module loaded: "not loaded", not "loaded but unregistered".
      {sc("memory_peers dir, nothing loaded", 0x10de, nv, {}, true, "5.4.0"),
       {"software-peer-memory", Verdict::Blocked,
        "no peer-memory client (nvidia_peermem, nv_peer_mem or MOFED memory_peers) and no dma-buf path"}},
      {sc("no memory_peers dir, nothing loaded", 0x10de, nv, {}, false, "5.4.0"),
       {"software-peer-memory", Verdict::Blocked,
        "no peer-memory client (nvidia_peermem, nv_peer_mem or MOFED memory_peers) and no dma-buf path (kernel 5.4.0 < 5.12)"}},
      // Below 5.12 no dma-buf MR, whatever exports one.
      {sc("open module, 5.11", 0x10de, nv, {}, false, "5.11.0", kOpen), {"software-peer-memory", Verdict::Blocked, "kernel 5.11.0 < 5.12"}},
      {sc("open module, 4.14", 0x10de, nv, {}, false, "4.14.0", kOpen), {"software-peer-memory", Verdict::Blocked, "kernel 4.14.0 < 5.12"}},
      {sc("open module, 5.12", 0x10de, nv, {}, false, "5.12.0", kOpen),
       {"software-peer-memory", Verdict::Optimal, "the dma-buf path is available"}},
      // Kernel version not in the input: the dma-buf path is unknown, not absent (a note).
      // A registered client needs no dma-buf path, whatever the kernel.
      {sc("peer client, open module, kernel unknown", 0x10de, nv + "nvidia_peermem 1 0 - Live 0x0\n", {}, false, "unknown", kOpen),
       {"", Verdict::Optimal, ""}},
      // gdrpeer gives a dma-buf path only on Linux >= 5.12 too, also where CUDA says DMA_BUF_SUPPORTED=0.
      {sc("gdrpeer, CUDA dmabuf=0, 5.4", 0x10de, nv + "gdrpeer 1 0 - Live 0x0\n", {}, false, "5.4.0", kProprietary,
          "0000:03:00.0 gdr=1 dmabuf=0\n"),
       {"software-peer-memory", Verdict::Blocked, "kernel 5.4.0 < 5.12"}},
      // The fix loads what the GPU's vendor needs.
      {sc("NVIDIA blocked: the fix", 0x10de, nv, {}, false, "6.8.0"),
       {"software-peer-memory", Verdict::Blocked, "| modprobe nvidia_peermem"}},
      {sc("AMD blocked: the fix", 0x1002, "ib_core 1 0 - Live 0x0\n"), {"software-peer-memory", Verdict::Blocked, "| modprobe gdrpeer"}},
      {sc("open module, kernel unknown", 0x10de, nv, {}, false, "unknown", kOpen),
       {"software-peer-memory", Verdict::Optimal, "whether the dma-buf path (Linux >= 5.12) is there is unknown"}},
      // No exporter: no dma-buf path on any kernel, so the reason names the missing exporter, not
      // a kernel "unknown < 5.12" the input never gave.
      {sc("proprietary, kernel unknown", 0x10de, nv, {}, false, "unknown", kProprietary),
       {"software-peer-memory", Verdict::Blocked, "and no dma-buf path (needs the open NVIDIA kernel module or gdrpeer)"}},
      {sc("AMD, no amdgpu, kernel unknown", 0x1002, "ib_core 1 0 - Live 0x0\n", {}, false, "unknown"),
       {"software-peer-memory", Verdict::Blocked, "and no dma-buf path (needs gdrpeer)"}},
      {sc("AMD amdgpu, kernel unknown", 0x1002, "amdgpu 1 0 - Live 0x0\n", {}, false, "unknown"),
       {"software-peer-memory", Verdict::Optimal, "modprobe amdgpu or gdrpeer"}},
      // CUDA's answers for the pair's GPU (and only for it).
      {sc("CUDA gdr=0", 0x10de, nv + "nvidia_peermem 1 0 - Live 0x0\n", {}, false, "6.8.0", kOpen, "0000:03:00.0 gdr=0 dmabuf=1\n"),
       {"software-cuda", Verdict::Blocked, "GPU_DIRECT_RDMA_SUPPORTED=0 for 0000:03:00.0"}},
      {sc("CUDA gdr=0 for another GPU", 0x10de, nv + "nvidia_peermem 1 0 - Live 0x0\n", {}, false, "6.8.0", kOpen,
          "0000:09:00.0 gdr=0 dmabuf=0\n"),
       {"", Verdict::Optimal, ""}},
      {sc("CUDA dmabuf=0, open module, no client", 0x10de, nv, {}, false, "6.8.0", kOpen, "0000:03:00.0 gdr=1 dmabuf=0\n"),
       {"software-peer-memory", Verdict::Blocked, "needs the open NVIDIA kernel module or gdrpeer"}},
      {sc("CUDA dmabuf=1, open module, no client", 0x10de, nv, {}, false, "6.8.0", kOpen, "0000:03:00.0 gdr=1 dmabuf=1\n"),
       {"software-peer-memory", Verdict::Optimal, "the dma-buf path is available"}},
      {sc("CUDA dmabuf=0 for another GPU", 0x10de, nv, {}, false, "6.8.0", kOpen, "0000:09:00.0 gdr=1 dmabuf=0\n"),
       {"software-peer-memory", Verdict::Optimal, "the dma-buf path is available"}},
  };
  for (const auto& [c, want] : cases) {
    SCOPED_TRACE(c.what);
    const PairResult p = software_pair(c);
    const Finding* f = nullptr;
    for (const auto& x : p.findings)
      if (x.rule.rfind("software-", 0) == 0) {
        EXPECT_EQ(f, nullptr) << "a second software finding: " << x.rule << ": " << x.reason;
        f = &x;
      }
    if (!*want.rule) {
      EXPECT_EQ(f, nullptr) << f->rule << ": " << f->reason;
      continue;
    }
    ASSERT_TRUE(f);
    EXPECT_EQ(f->rule, want.rule) << f->reason;
    EXPECT_EQ(f->severity, want.severity) << f->reason;
    EXPECT_NE((f->reason + " | " + f->fix).find(want.reason_part), std::string::npos) << f->reason << " | " << f->fix;
  }
}

// ---- node notes ----------------------------------------------------------------

// A fake node's tree as a snapshot holds it, with `extra` entries added and every entry under a
// `drop` prefix left out (a copy that lacks those files).
Topology snapshot_of(const FakeNode& n, const std::vector<TarEntry>& extra = {}, const std::vector<std::string>& drop = {}) {
  std::vector<TarEntry> e;
  for (const auto& x : n.entries())
    if (std::none_of(drop.begin(), drop.end(), [&](const std::string& d) { return x.path.rfind(d, 0) == 0; })) e.push_back(x);
  e.insert(e.end(), extra.begin(), extra.end());
  return testing::from_entries(e);
}

TarEntry file(const std::string& path, const std::string& text) { return TarEntry{TarEntry::Type::File, path, text}; }

bool has_note(const Report& r, const std::string& rule, const std::string& part = "") {
  return std::any_of(r.node_findings.begin(), r.node_findings.end(),
                     [&](const Finding& f) { return f.rule == rule && f.reason.find(part) != std::string::npos; });
}

// switch_node() with the GPU, the NIC or both taken out (their downstream ports stay).
FakeNode without(const std::vector<std::string>& bdfs) {
  FakeNode n = testing::switch_node();
  n.fns.erase(
      std::remove_if(n.fns.begin(), n.fns.end(), [&](const FakeFn& f) { return std::find(bdfs.begin(), bdfs.end(), f.bdf) != bdfs.end(); }),
      n.fns.end());
  return n;
}

// The pairs and notes follow what the node holds and what was asked (docs/check.md: --pairs
// gpu-nic,gpu-gpu,gpu-nvme; --skip RULE): no GPU, no NIC; a pair per asked kind; the class matrix
// has one entry per two distinct labelled devices (nvidia-smi topo -m's diagonal is X, not a class).
TEST(TruthNotes, WhatTheNodeHoldsAndWhatWasAsked) {
  {
    FakeNode nic_only = without({kGpu});
    nic_only.cpuinfo = "vendor_id\t: HygonGenuine\ncpu family\t: 24\nmodel\t\t: 1\nmodel name\t: Hygon C86 7285 32-core Processor\n";
    Report r = check(from_fake(nic_only), kb(), CheckOptions{});
    EXPECT_TRUE(r.pairs.empty());
    EXPECT_TRUE(has_note(r, "no-gpu", "no GPU found in fake.tar"));
    EXPECT_FALSE(has_note(r, "no-nic"));
    EXPECT_FALSE(has_note(r, "root-complex-unknown"));  // no GPU: nothing depends on the root complex
  }
  {
    Report r = check(from_fake(without({kNic})), kb(), CheckOptions{});
    EXPECT_FALSE(has_note(r, "no-gpu"));
    EXPECT_TRUE(has_note(r, "no-nic", "no RDMA NIC found in fake.tar"));
    CheckOptions no_nic_pairs;
    no_nic_pairs.gpu_nic = false;
    EXPECT_FALSE(has_note(check(from_fake(without({kNic})), kb(), no_nic_pairs), "no-nic"));
    CheckOptions skip;
    skip.skip = {"no-nic"};
    EXPECT_FALSE(has_note(check(from_fake(without({kNic})), kb(), skip), "no-nic"));
  }
  {
    Report r = check(from_fake(testing::switch_node()), kb(), CheckOptions{});
    EXPECT_FALSE(has_note(r, "no-gpu"));
    EXPECT_FALSE(has_note(r, "no-nic"));
  }
  // Two GPUs, a NIC and an NVMe drive (Samsung PM1733, 144d:a824, class 0x010802) under one switch.
  FakeNode n = testing::switch_node();
  const std::string up = "/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0";
  testing::add_port(n, "0000:02:02.0", up + "/0000:02:02.0", testing::kDownstream, 5, 0x10b5, 0x9797).acs = true;
  testing::add_port(n, "0000:02:03.0", up + "/0000:02:03.0", testing::kDownstream, 6, 0x10b5, 0x9797).acs = true;
  testing::add_endpoint(n, "0000:05:00.0", up + "/0000:02:02.0/0000:05:00.0", 0x10de, 0x2331, 0x030200).resource = fn(n, kGpu).resource;
  testing::add_endpoint(n, "0000:06:00.0", up + "/0000:02:03.0/0000:06:00.0", 0x144d, 0xa824, 0x010802);
  fn(n, kGpu).device = 0x2331;  // H100 PCIe: no NVLink inferred from the model
  const Topology t = from_fake(n);
  auto kinds = [&](const CheckOptions& o) {
    std::vector<std::string> out;
    for (const auto& p : check(t, kb(), o).pairs) out.push_back(p.label_a + "-" + p.label_b);
    return out;
  };
  CheckOptions all;
  all.gpu_nvme = true;
  EXPECT_EQ(kinds(all), (std::vector<std::string>{"GPU0-NIC0", "GPU0-GPU1", "GPU0-NVME0", "GPU1-NIC0", "GPU1-NVME0"}));
  CheckOptions o = all;
  o.gpu_nic = false;
  EXPECT_EQ(kinds(o), (std::vector<std::string>{"GPU0-GPU1", "GPU0-NVME0", "GPU1-NVME0"}));
  o = all;
  o.gpu_gpu = false;
  EXPECT_EQ(kinds(o), (std::vector<std::string>{"GPU0-NIC0", "GPU0-NVME0", "GPU1-NIC0", "GPU1-NVME0"}));
  EXPECT_EQ(kinds(CheckOptions{}), (std::vector<std::string>{"GPU0-NIC0", "GPU0-GPU1", "GPU1-NIC0"}));
  const Report r = check(t, kb(), all);
  EXPECT_EQ(r.classes.size(), 6u);  // 4 labelled devices: 4 * 3 / 2
  for (const auto& [k, cls] : r.classes) EXPECT_NE(k.first, k.second);
}

// The IOMMU note says what the input holds (docs/check.md): a copy without
// /sys/kernel/iommu_groups says nothing (iommu-unknown); an empty one means no IOMMU (the kernel
// creates a group per device when one is active: Documentation/ABI/testing/sysfs-kernel-iommu_groups);
// lspci text never holds it. Groups read but of types that name no mode ("unmanaged": a VFIO
// domain) are in the input: never "not in this input".
TEST(TruthNotes, IommuStateAsTheInputHoldsIt) {
  const FakeNode n = testing::switch_node();
  const Report copy = check(snapshot_of(n, {}, {"sys/kernel/iommu_groups"}), kb(), CheckOptions{});
  EXPECT_TRUE(has_note(copy, "iommu-unknown", "IOMMU state is not in this input ("));
  EXPECT_FALSE(has_note(copy, "iommu-mode"));
  const Report off = check(from_fake(n), kb(), CheckOptions{});
  EXPECT_TRUE(has_note(off, "iommu-mode", "IOMMU: off"));
  EXPECT_FALSE(has_note(off, "iommu-unknown"));
  FakeNode v = n;
  for (auto& f : v.fns) f.iommu_group = 7;
  v.groups = {{7, "unmanaged"}};
  const Report vfio = check(from_fake(v), kb(), CheckOptions{});
  EXPECT_FALSE(has_note(vfio, "iommu-unknown"));
  // ... yet they say an IOMMU is on (no groups without one), and the note says so rather than
  // nothing; the same where the groups' type files hold nothing (read as no type).
  EXPECT_TRUE(has_note(vfio, "iommu-mode", "IOMMU: on, its mode named by no /sys/kernel/iommu_groups/*/type ("));
  v.groups = {{7, ""}};
  const Report untyped = check(from_fake(v), kb(), CheckOptions{});
  EXPECT_FALSE(has_note(untyped, "iommu-unknown"));
  EXPECT_TRUE(has_note(untyped, "iommu-mode", "IOMMU: on, its mode named by no /sys/kernel/iommu_groups/*/type ("));
  const std::string text = testing::slurp(testing::reference("stelline-puget-wrx90.md"));
  Topology lt = parse_lspci({{"stelline-puget-wrx90.md", text}});
  assign_roles(lt, kb());
  const Report lspci = check(lt, kb(), CheckOptions{});
  EXPECT_TRUE(has_note(lspci, "iommu-unknown", "IOMMU state is not in this input (lspci)"));
  EXPECT_FALSE(has_note(lspci, "iommu-mode"));
  // lspci text has no module list: the software stack is not inspected, and said so once per node
  // (docs/check.md: the software rules are live/snapshot only), not per pair.
  EXPECT_TRUE(has_note(lspci, "software-unknown", "not inspected for lspci input"));
  EXPECT_FALSE(has_note(off, "software-unknown"));
  ASSERT_FALSE(lspci.pairs.empty());
  for (const auto& p : lspci.pairs)
    for (const auto& f : p.findings) EXPECT_NE(f.rule.rfind("software-", 0), 0u) << f.rule << ": " << f.reason;
  // No /proc/driver/nvidia/version in lspci text: no driver note, no advice to ask CUDA there.
  EXPECT_FALSE(has_note(lspci, "software-cuda"));
}

// A snapshot whose copy lacks /proc/modules (and /sys/module): the modules are unknown, so the pair
// gets the software-unknown note, never "the nvidia kernel module is not loaded".
TEST(TruthNotes, ModulesNotInTheCopyAreUnknownNotAbsent) {
  const Report r = check(snapshot_of(testing::switch_node(), {}, {"proc/modules"}), kb(), CheckOptions{});
  const PairResult& p = only_pair(r);
  const Finding* f = finding(p, "software-unknown");
  ASSERT_TRUE(f);
  EXPECT_EQ(f->severity, Verdict::Optimal);
  EXPECT_FALSE(finding(p, "software-driver"));
  EXPECT_FALSE(finding(p, "software-peer-memory"));
}

// CUDA's answers as gdrpeer snapshot records them (gdrpeer-snapshot/cuda-probe): an error line is
// a node note; per-GPU answers are notes; without a probe, a sysfs node of NVIDIA GPUs gets the
// driver note that says what --cuda would add, a node of other GPUs does not (CUDA is NVIDIA's).
TEST(TruthNotes, CudaProbeAndDriverNotes) {
  const FakeNode n = testing::switch_node();
  const Report err =
      check(snapshot_of(n, {file("gdrpeer-snapshot/cuda-probe", "error cuInit: CUDA_ERROR_NO_DEVICE (100)\n")}), kb(), CheckOptions{});
  EXPECT_TRUE(has_note(err, "software-cuda", "CUDA probe: cuInit: CUDA_ERROR_NO_DEVICE (100)"));
  const Report ok = check(snapshot_of(n, {file("gdrpeer-snapshot/cuda-probe", "0000:03:00.0 gdr=1 dmabuf=1\n")}), kb(), CheckOptions{});
  EXPECT_FALSE(has_note(ok, "software-cuda", "CUDA probe:"));
  EXPECT_FALSE(has_note(ok, "software-cuda", "not asked"));
  EXPECT_TRUE(has_note(ok, "software-cuda", "CUDA on 0000:03:00.0: GPU_DIRECT_RDMA_SUPPORTED=1 DMA_BUF_SUPPORTED=1"));
  const Report none = check(from_fake(n), kb(), CheckOptions{});
  EXPECT_TRUE(has_note(none, "software-cuda", "not asked (gdrpeer check --cuda asks"));
  FakeNode amd = n;
  fn(amd, kGpu).vendor = 0x1002;
  fn(amd, kGpu).device = 0x74a1;
  fn(amd, kGpu).class_code = 0x038000;
  const Report a = check(from_fake(amd), kb(), CheckOptions{});
  ASSERT_EQ(a.gpus.size(), 1u);
  EXPECT_FALSE(has_note(a, "software-cuda"));
  // An NVIDIA GPU beside an AMD one (the AMD one last): the note is there.
  FakeNode mixed = n;
  fn(mixed, kNic).vendor = 0x1002;
  fn(mixed, kNic).device = 0x74a1;
  fn(mixed, kNic).class_code = 0x038000;
  const Report m = check(from_fake(mixed), kb(), CheckOptions{});
  ASSERT_EQ(m.gpus.size(), 2u);
  EXPECT_TRUE(has_note(m, "software-cuda", "not asked (gdrpeer check --cuda asks"));
  // An hwloc dump (AWS p4d.24xlarge, 8 A100 by id) is no live node: nothing about CUDA or the driver.
  Topology h = parse_hwloc_xml(testing::slurp(testing::reference("aws-p4d.24xlarge.xml")), "aws-p4d.24xlarge.xml");
  assign_roles(h, kb());
  const Report hr = check(h, kb(), CheckOptions{});
  ASSERT_FALSE(hr.gpus.empty());
  ASSERT_TRUE(h.devices[hr.gpus[0]].ids_known);
  EXPECT_FALSE(has_note(hr, "software-cuda"));
}

// root-complex-unknown names the CPU the input gives (Hygon C86 7285: vendor HygonGenuine, family
// 24, model 1, as its /proc/cpuinfo reads; not in topology/root_complexes.json), or says the CPU
// is not in the input; a PHB pair's reason names the same CPU.
TEST(TruthNotes, UnknownRootComplexNamesTheCpuTheInputGives) {
  FakeNode n = testing::switch_node();
  // The NIC on a second root port: the pair meets in the root complex (PHB).
  n.fns.erase(std::remove_if(n.fns.begin(), n.fns.end(), [](const FakeFn& f) { return f.bdf == kNic || f.bdf == "0000:02:01.0"; }),
              n.fns.end());
  testing::add_port(n, "0000:00:02.0", "/sys/devices/pci0000:00/0000:00:02.0", testing::kRootPort, 5).acs = true;
  testing::add_endpoint(n, "0000:05:00.0", "/sys/devices/pci0000:00/0000:00:02.0/0000:05:00.0", 0x15b3, 0x1021, 0x020700);
  struct Case {
    std::string cpuinfo;
    const char* note;   // in root-complex-unknown
    const char* where;  // in the PHB pair's path-root-complex fix
  };
  const Case cases[] = {
      {"vendor_id\t: HygonGenuine\ncpu family\t: 24\nmodel\t\t: 1\nmodel name\t: Hygon C86 7285 32-core Processor\nphysical id\t: 0\n",
       "CPU Hygon C86 7285 32-core Processor is not in topology/root_complexes.json", "root complex of Hygon C86 7285 32-core Processor"},
      {"vendor_id\t: HygonGenuine\ncpu family\t: 24\nmodel\t\t: 1\nphysical id\t: 0\n", "CPU HygonGenuine family 24 model 1 is not in",
       "root complex of this CPU"},
      {"model name\t: Hygon C86 7285 32-core Processor\nphysical id\t: 0\n", "CPU Hygon C86 7285 32-core Processor is not in",
       "root complex of Hygon C86 7285 32-core Processor"},
      {"", "CPU identity is not in this input", "root complex of this CPU"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.note);
    FakeNode m = n;
    m.cpuinfo = c.cpuinfo;
    const Report r = check(c.cpuinfo.empty() ? snapshot_of(m, {}, {"proc/cpuinfo"}) : from_fake(m), kb(), CheckOptions{});
    EXPECT_TRUE(has_note(r, "root-complex-unknown", c.note));
    const PairResult& p = only_pair(r);
    ASSERT_EQ(p.path.cls, PathClass::PHB);
    const Finding* f = finding(p, "path-root-complex");
    ASSERT_TRUE(f);
    EXPECT_NE(f->fix.find(c.where), std::string::npos) << f->fix;
  }
  // A CPU the table knows (AMD EPYC 9374F, family 25: Genoa): no note.
  EXPECT_FALSE(has_note(check(from_fake(n), kb(), CheckOptions{}), "root-complex-unknown"));
}

// nvlink-unknown: only GPU pairs of NVIDIA GPUs (NVLink is NVIDIA's; AMD's is xGMI) judged on PCIe
// with a verdict worse than optimal, only while NVLink is unknown (no NVML answer, not a failed
// one, which has its own nvlink-nvml note). H100 PCIe (10de:2331) cards on two root ports of an
// unknown root complex (Hygon): degraded on PCIe, NVLink unknown.
TEST(TruthNotes, NvlinkUnknownOnlyWhereNvidiaGpuPairsAreJudgedOnPcie) {
  auto two_gpus = [](uint16_t vendor, uint16_t device, bool one_switch) {
    FakeNode n = testing::switch_node();
    n.cpuinfo =
        "vendor_id\t: HygonGenuine\ncpu family\t: 24\nmodel\t\t: 1\nmodel name\t: Hygon C86 7285 32-core Processor\nphysical id\t: 0\n";
    FakeFn& g = fn(n, kGpu);
    g.vendor = vendor;
    g.device = device;
    g.class_code = vendor == 0x10de ? 0x030200 : 0x038000;
    if (one_switch) {
      FakeFn& other = fn(n, kNic);
      other.vendor = vendor;
      other.device = device;
      other.class_code = g.class_code;
      other.resource = g.resource;
    } else {
      testing::add_port(n, "0000:00:02.0", "/sys/devices/pci0000:00/0000:00:02.0", testing::kRootPort, 5).acs = true;
      testing::add_endpoint(n, "0000:05:00.0", "/sys/devices/pci0000:00/0000:00:02.0/0000:05:00.0", vendor, device, g.class_code).resource =
          g.resource;
    }
    n.modules += "amdgpu 1 0 - Live 0x0\n";
    return n;
  };
  const FakeNode h100s = two_gpus(0x10de, 0x2331, false);
  const Report r = check(from_fake(h100s), kb(), CheckOptions{});
  ASSERT_EQ(r.gpus.size(), 2u);
  const PairResult* gg = nullptr;
  for (const auto& p : r.pairs)
    if (p.label_b == "GPU1") gg = &p;
  ASSERT_TRUE(gg);
  ASSERT_NE(gg->verdict, Verdict::Optimal);
  EXPECT_TRUE(has_note(r, "nvlink-unknown", "GPU-GPU verdicts judge the PCIe path"));
  EXPECT_FALSE(has_note(r, "nvlink-nvml"));
  // Under one switch: optimal on PCIe, nothing to say.
  const Report pix = check(from_fake(two_gpus(0x10de, 0x2331, true)), kb(), CheckOptions{});
  ASSERT_EQ(pix.pairs.size(), 1u);
  ASSERT_EQ(pix.pairs[0].verdict, Verdict::Optimal);
  EXPECT_FALSE(has_note(pix, "nvlink-unknown"));
  // AMD Instinct MI300X cards: not NVLink.
  const Report amd = check(from_fake(two_gpus(0x1002, 0x74a1, false)), kb(), CheckOptions{});
  ASSERT_EQ(amd.gpus.size(), 2u);
  ASSERT_NE(amd.worst, Verdict::Optimal);
  EXPECT_FALSE(has_note(amd, "nvlink-unknown"));
  // NVML answered (no links) or failed: no nvlink-unknown; the failure has its nvlink-nvml note.
  const Report answered =
      check(snapshot_of(h100s, {file("gdrpeer-snapshot/nvml",
                                     "nvml driver=580.159.04 library=libnvidia-ml.so.1\ngpu 00000000:03:00.0 device=0x233110de\n"
                                     "gpu 00000000:05:00.0 device=0x233110de\n")}),
            kb(), CheckOptions{});
  EXPECT_FALSE(has_note(answered, "nvlink-unknown"));
  EXPECT_TRUE(has_note(answered, "nvlink-nvml", "NVLink from NVML (driver 580.159.04): 2 GPU(s), 0 active link(s)"));
  const Report failed = check(
      snapshot_of(h100s, {file("gdrpeer-snapshot/nvml", "nvml driver=- library=libnvidia-ml.so.1\nerror NVML_ERROR_DRIVER_NOT_LOADED\n")}),
      kb(), CheckOptions{});
  EXPECT_FALSE(has_note(failed, "nvlink-unknown"));
  EXPECT_TRUE(has_note(failed, "nvlink-nvml", "NVML could not be asked (NVML_ERROR_DRIVER_NOT_LOADED)"));
  // A GPU and a NIC through the root complex: degraded, but not a GPU pair.
  FakeNode gn = h100s;
  fn(gn, "0000:05:00.0").vendor = 0x15b3;
  fn(gn, "0000:05:00.0").device = 0x1021;
  fn(gn, "0000:05:00.0").class_code = 0x020700;
  gn.fns.erase(std::remove_if(gn.fns.begin(), gn.fns.end(), [](const FakeFn& f) { return f.bdf == kNic; }), gn.fns.end());
  const Report nic = check(from_fake(gn), kb(), CheckOptions{});
  ASSERT_EQ(nic.pairs.size(), 1u);
  ASSERT_NE(nic.worst, Verdict::Optimal);
  EXPECT_FALSE(has_note(nic, "nvlink-unknown"));
  EXPECT_FALSE(has_note(nic, "nvlink-nvml"));  // NVML not asked: no note at all
  // Two H100 SXM (NVLink inferred from the model) with a GPU link at x8 of x16: degraded, but
  // their peer traffic is judged on NVLink, not on PCIe.
  FakeNode sxm = gpu_pair(0x2330, 0x2330, false);
  fn(sxm, kGpu).sta_width = 8;
  const Report sr = check(from_fake(sxm), kb(), CheckOptions{});
  ASSERT_TRUE(only_pair(sr).nvlink.linked);
  ASSERT_NE(only_pair(sr).verdict, Verdict::Optimal);
  EXPECT_FALSE(has_note(sr, "nvlink-unknown"));
}

// The same from lspci -tv text without ids: NVIDIA known by the vendor name lspci prints; two H100
// PCIe on two root ports of a CPU the input does not name (no lscpu): unverified root complex.
TEST(TruthNotes, NvlinkUnknownForNvidiaGpusNamedOnly) {
  const std::string text =
      "-[0000:00]-+-01.0-[01]----00.0  NVIDIA Corporation GH100 [H100 PCIe]\n"
      "           \\-02.0-[02]----00.0  NVIDIA Corporation GH100 [H100 PCIe]\n";
  Topology t = parse_lspci({{"two.txt", text}});
  assign_roles(t, kb());
  const Report r = check(t, kb(), CheckOptions{});
  ASSERT_EQ(r.gpus.size(), 2u);
  ASSERT_FALSE(t.devices[r.gpus[0]].ids_known);
  ASSERT_NE(only_pair(r).verdict, Verdict::Optimal);
  EXPECT_TRUE(has_note(r, "nvlink-unknown", "NVLink is not in this input (lspci)"));
}

// What gives a virtual machine away (docs/check.md, platform-virtual): the CPU's hypervisor flag,
// a cloud DMI vendor (Amazon EC2's sys_vendor), an emulated PCI function (virtio-blk 1af4:1042);
// each alone is enough, and a bare-metal node has none.
TEST(TruthNotes, EachSignOfAVirtualMachineAlone) {
  const FakeNode bare = testing::switch_node();
  const Report metal = check(from_fake(bare), kb(), CheckOptions{});
  EXPECT_FALSE(metal.virtual_machine);
  EXPECT_FALSE(has_note(metal, "platform-virtual"));
  FakeNode hv = bare;
  hv.cpuinfo += "flags\t\t: fpu hypervisor\n";
  EXPECT_TRUE(check(from_fake(hv), kb(), CheckOptions{}).virtual_machine);
  const Report dmi = check(snapshot_of(bare, {file("sys/class/dmi/id/sys_vendor", "Amazon EC2\n")}), kb(), CheckOptions{});
  EXPECT_TRUE(dmi.virtual_machine);
  FakeNode vio = bare;
  testing::add_port(vio, "0000:00:05.0", "/sys/devices/pci0000:00/0000:00:05.0", -1, -1);
  fn(vio, "0000:00:05.0").vendor = 0x1af4;
  fn(vio, "0000:00:05.0").device = 0x1042;
  fn(vio, "0000:00:05.0").class_code = 0x010000;
  const Report emu = check(from_fake(vio), kb(), CheckOptions{});
  EXPECT_TRUE(emu.virtual_machine);
  EXPECT_TRUE(has_note(emu, "platform-virtual", "virtual machine: 0000:00:05.0"));
  // An NCCL topology file with placeholder switches (aws-p4d-24xl-topo.xml: ffff:ff:.. switches).
  const std::string xml = testing::slurp(testing::reference("aws-p4d-24xl-topo.xml"));
  Topology nccl = parse_nccl_xml(xml, "aws-p4d-24xl-topo.xml");
  assign_roles(nccl, kb());
  ASSERT_TRUE(nccl.placeholder_switches);
  ASSERT_FALSE(nccl.cpu.hypervisor);
  EXPECT_TRUE(check(nccl, kb(), CheckOptions{}).virtual_machine);
}

// hwloc's NVML backend writes NVLinkBandwidth in MB/s (doc/hwloc.doxy "NVLinkBandwidth (NVML)";
// topology-nvml.c adds 20000, 25000 or 50000 per link by NVLink version). The path-nvlink reason
// gives it in GB/s (1 GB = 1000 MB) exactly, never rounded down to "0 GB/s": the reference hwloc
// input (kinds/hwloc-nvlinkbandwidth.xml: GPU0-GPU2 one direct link, GPU1 and GPU3 into an
// NVSwitch) with its matrix values replaced, down to 1 MB/s. Found by the generated mutants
// (issue 28): nvlink_rules' bandwidth_mbps > 0 as > 1 differed only at 1 MB/s, which the old
// code wrote as "0 GB/s".
TEST(TruthNvlink, HwlocBandwidthInGbPerSecondExactly) {
  const std::string fixture = testing::slurp(testing::reference("kinds/hwloc-nvlinkbandwidth.xml"));
  const size_t cut = fixture.find("<distances2hetero");
  ASSERT_NE(cut, std::string::npos);
  struct Case {
    uint64_t direct, via_switch;
    const char *direct_words, *switch_words;
  };
  const Case cases[] = {
      {50000, 150000, "over NVLink, 50 GB/s, GPU to GPU", "over NVLink, 150 GB/s through NVSwitch"},  // the file as it is
      {1, 1, "over NVLink, 0.001 GB/s, GPU to GPU", "over NVLink, 0.001 GB/s through NVSwitch"},
      {12500, 100, "over NVLink, 12.5 GB/s, GPU to GPU", "over NVLink, 0.1 GB/s through NVSwitch"},
      {25000, 1010, "over NVLink, 25 GB/s, GPU to GPU", "over NVLink, 1.01 GB/s through NVSwitch"},
      {999, 20001, "over NVLink, 0.999 GB/s, GPU to GPU", "over NVLink, 20.001 GB/s through NVSwitch"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.direct_words);
    const std::string d = std::to_string(c.direct), s = std::to_string(c.via_switch);
    const std::string xml = fixture.substr(0, cut) +
                            "<distances2hetero nbobjs=\"5\" kind=\"25\" name=\"NVLinkBandwidth\">\n"
                            "<indexes length=\"0\">OSDev:13 OSDev:23 OSDev:33 OSDev:43 PCIDev:52 </indexes>\n"
                            "<u64values length=\"0\">1000000 0 " +
                            d + " 0 0 0 1000000 0 0 " + s + " " + d + " 0 1000000 0 0 0 0 0 1000000 " + s + " 0 " + s + " 0 " + s +
                            " 1000000 </u64values>\n</distances2hetero>\n</topology>\n";
    Topology t = parse_hwloc_xml(xml, "hwloc-nvlinkbandwidth.xml");
    assign_roles(t, kb());
    const Report r = check(t, kb(), CheckOptions{});
    const Finding* direct = finding(testing::pair_of(r, "GPU0", "GPU2"), "path-nvlink");
    const Finding* switched = finding(testing::pair_of(r, "GPU1", "GPU3"), "path-nvlink");
    ASSERT_TRUE(direct && switched);
    EXPECT_NE(direct->reason.find(c.direct_words), std::string::npos) << direct->reason;
    EXPECT_NE(switched->reason.find(c.switch_words), std::string::npos) << switched->reason;
  }
}

// ---- platform rules --------------------------------------------------------------

// topology/platforms.json's definition of a rule: "A rule matches when every field it gives
// matches (arch exact; *_patterns: any substring of the CPU model name / DMI vendor+product / the
// GPU's family in gpus.json). applies_to: gpu-nic (GPUDirect RDMA and GDS pairs), all (also GPU-GPU
// P2P)". Rules as a --data-dir's platforms.json would give them, on an x86_64 node (AMD EPYC
// 9374F, DMI "Supermicro SYS-421GE") with an H100 PCIe (datacenter family) and a GeForce RTX 4090
// (10de:2684, geforce family) under one switch, and a NIC.
TEST(TruthPlatform, EveryGivenFieldMustMatch) {
  FakeNode n = testing::switch_node();
  n.cpuinfo += "flags\t\t: fpu\n";
  fn(n, kGpu).device = 0x2331;
  const std::string up = "/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0";
  testing::add_port(n, "0000:02:02.0", up + "/0000:02:02.0", testing::kDownstream, 5, 0x10b5, 0x9797).acs = true;
  testing::add_endpoint(n, "0000:05:00.0", up + "/0000:02:02.0/0000:05:00.0", 0x10de, 0x2684, 0x030000).resource = fn(n, kGpu).resource;
  const std::vector<TarEntry> dmi = {file("sys/class/dmi/id/sys_vendor", "Supermicro\n"),
                                     file("sys/class/dmi/id/product_name", "SYS-421GE\n")};
  const Topology t = snapshot_of(n, dmi);
  ASSERT_EQ(t.cpu.arch, "x86_64");
  auto rule = [](const char* id, const char* applies_to) {
    PlatformRule p;
    p.id = id;
    p.severity = "degraded";
    p.applies_to = applies_to;
    p.reason = std::string("reason of ") + id;
    return p;
  };
  struct Case {
    PlatformRule p;
    // expected on GPU0-NIC0 (the H100), GPU0-GPU1, GPU1-NIC0 (the RTX 4090)
    bool h100_nic, gpu_gpu, rtx_nic;
  };
  std::vector<Case> cases;
  {
    PlatformRule p = rule("t-arch", "all");
    p.arch = "x86_64";
    cases.push_back({p, true, true, true});
    p.arch = "ppc64le";
    cases.push_back({p, false, false, false});
    p.cpu_patterns = {"EPYC"};  // the CPU matches, the arch does not
    cases.push_back({p, false, false, false});
  }
  {
    PlatformRule p = rule("t-cpu", "all");
    p.cpu_patterns = {"Xeon", "EPYC 93"};
    cases.push_back({p, true, true, true});
    p.cpu_patterns = {"Xeon"};
    cases.push_back({p, false, false, false});
    p.cpu_patterns = {"EPYC"};
    p.dmi_patterns = {"Dell"};  // the CPU matches, the DMI does not
    cases.push_back({p, false, false, false});
    p.dmi_patterns = {"SYS-421"};
    cases.push_back({p, true, true, true});
    p.arch = "aarch64";  // CPU and DMI match, the arch does not
    cases.push_back({p, false, false, false});
  }
  {
    PlatformRule p = rule("t-dmi", "gpu-nic");
    p.dmi_patterns = {"Supermicro SYS"};  // vendor + product
    cases.push_back({p, true, false, true});
  }
  {
    PlatformRule p = rule("t-family", "all");
    p.gpu_families = {"geforce"};
    cases.push_back({p, false, true, true});  // either GPU of a GPU pair
    p.applies_to = "gpu-nic";
    cases.push_back({p, false, false, true});
    p.applies_to = "all";
    p.cpu_patterns = {"Xeon"};  // the family matches, the CPU does not
    cases.push_back({p, false, false, false});
    p.cpu_patterns = {"EPYC"};
    p.gpu_families = {"datacenter"};
    cases.push_back({p, true, true, false});
  }
  for (const auto& c : cases) {
    SCOPED_TRACE(c.p.id + " arch=" + c.p.arch + " cpu=" + (c.p.cpu_patterns.empty() ? "" : c.p.cpu_patterns[0]) +
                 " dmi=" + (c.p.dmi_patterns.empty() ? "" : c.p.dmi_patterns[0]) +
                 " family=" + (c.p.gpu_families.empty() ? "" : c.p.gpu_families[0]) + " " + c.p.applies_to);
    RuleData k = kb();
    k.platforms = {c.p};
    const Report r = check(t, k, CheckOptions{});
    ASSERT_EQ(r.pairs.size(), 3u);
    std::map<std::string, const Finding*> got;
    for (const auto& p : r.pairs) got[p.label_a + "-" + p.label_b] = finding(p, c.p.id);
    EXPECT_EQ(got["GPU0-NIC0"] != nullptr, c.h100_nic);
    EXPECT_EQ(got["GPU0-GPU1"] != nullptr, c.gpu_gpu);
    EXPECT_EQ(got["GPU1-NIC0"] != nullptr, c.rtx_nic);
    for (const auto& [pair, f] : got) {
      if (f && c.p.gpu_families.empty()) {
        EXPECT_EQ(f->reason, c.p.reason) << pair;  // no GPU family to name
      }
    }
  }
}

// platform-arm64 (docs/check.md): an aarch64 server whose root complex is not known good in
// root_complexes.json. An Ampere Altra entry given good (as a --data-dir could) silences it;
// given poor, it stays. Two GPUs under one switch, an unknown aarch64 CPU: the finding once per
// pair although both GPUs' platform rules run (one finding per rule and reason).
TEST(TruthPlatform, Arm64NeedsARootComplexKnownGood) {
  FakeNode n = testing::switch_node();
  n.cpuinfo = "processor\t: 0\nBogoMIPS\t: 50.00\nCPU implementer\t: 0x41\nCPU architecture: 8\nCPU variant\t: 0x3\nCPU part\t: 0xd0c\n";
  FakeFn& other = fn(n, kNic);
  other.vendor = 0x10de;
  other.device = 0x2331;
  other.class_code = 0x030200;
  other.resource = fn(n, kGpu).resource;
  fn(n, kGpu).device = 0x2331;
  const Topology t = from_fake(n);
  ASSERT_EQ(t.cpu.arch, "aarch64");
  const Report unknown = check(t, kb(), CheckOptions{});
  const PairResult& p = only_pair(unknown);
  EXPECT_EQ(std::count_if(p.findings.begin(), p.findings.end(), [](const Finding& f) { return f.rule == "platform-arm64"; }), 1);
  for (const char* q : {"good", "poor"}) {
    SCOPED_TRACE(q);
    RuleData k = kb();
    RootComplex rc;
    rc.name = "Ampere Altra (Neoverse N1)";
    rc.arch = "aarch64";
    rc.p2p = q;
    rc.cross_socket = "slow";
    k.root_complexes.insert(k.root_complexes.begin(), rc);
    const Report r = check(t, k, CheckOptions{});
    ASSERT_FALSE(has_note(r, "root-complex-unknown"));
    EXPECT_EQ(finding(only_pair(r), "platform-arm64") != nullptr, std::string(q) != "good");
  }
}

// ---- GPU pairs: NVLink evidence, the second GPU's rules -----------------------------

// Two NVIDIA GPUs under one PCIe switch (`first` at 03:00.0, `second` at 04:00.0), an H100 NVSwitch
// (10de:22a3, class 0x0680, as aws-p5en.48xlarge.xml lists it) on the root bus when `nvswitch`.
FakeNode gpu_pair(uint16_t first, uint16_t second, bool nvswitch) {
  FakeNode n = testing::switch_node();
  fn(n, kGpu).device = first;
  FakeFn& g = fn(n, kNic);
  g.vendor = 0x10de;
  g.device = second;
  g.class_code = 0x030200;
  g.resource = fn(n, kGpu).resource;
  if (nvswitch) testing::add_fn(n, "0000:00:05.0", "/sys/devices/pci0000:00/0000:00:05.0", 0x10de, 0x22a3, 0x068000, testing::kEndpoint);
  return n;
}

// NVLink evidence, strongest first (docs/check.md "NVLink"): an NVSwitch in the PCI tree means an
// HGX/DGX baseboard whose GPUs reach each other through it (said so, "inferred from the NVSwitch
// devices"); without one, only two SXM parts (gpus.json nvlink_baseboards: H100 SXM 10de:2330) are
// inferred NVLink-connected from their model; an H100 PCIe card (10de:2331) is not, whatever its
// partner is, in either order.
TEST(TruthNvlinkEvidence, NvswitchOnTheBusThenTheModelOfBothGpus) {
  struct Case {
    const char* what;
    uint16_t first, second;
    bool nvswitch;
    const char* inferred_from;  // "" not linked
  };
  const Case cases[] = {
      {"two SXM, NVSwitch on the bus", 0x2330, 0x2330, true, "nvswitch"},
      {"two PCIe cards, NVSwitch on the bus", 0x2331, 0x2331, true, "nvswitch"},
      {"two SXM, no NVSwitch", 0x2330, 0x2330, false, "gpu-model"},
      {"SXM then PCIe, no NVSwitch", 0x2330, 0x2331, false, ""},
      {"PCIe then SXM, no NVSwitch", 0x2331, 0x2330, false, ""},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what);
    const Report r = check(from_fake(gpu_pair(c.first, c.second, c.nvswitch)), kb(), CheckOptions{});
    ASSERT_EQ(r.gpus.size(), 2u);
    const PairResult& p = only_pair(r);
    EXPECT_EQ(p.nvlink.linked, *c.inferred_from != '\0');
    const Finding* f = finding(p, "path-nvlink");
    EXPECT_EQ(f != nullptr, *c.inferred_from != '\0');
    if (!f) continue;
    if (std::string(c.inferred_from) == "nvswitch") {
      EXPECT_NE(f->reason.find("inferred from the NVSwitch devices in the PCI tree"), std::string::npos) << f->reason;
      EXPECT_FALSE(has_note(r, "nvlink-inferred"));
    } else {
      EXPECT_NE(f->reason.find("inferred from the GPU model"), std::string::npos) << f->reason;
      EXPECT_TRUE(has_note(r, "nvlink-inferred"));
    }
  }
  // NVML's link list says which pairs are linked: with it, the NVSwitch on the bus adds nothing.
  // Here NVML answered with no active link: the pair is judged on PCIe.
  const Report listed = check(snapshot_of(gpu_pair(0x2331, 0x2331, true), {file("gdrpeer-snapshot/nvml",
                                                                                "nvml driver=580.159.04 library=libnvidia-ml.so.1\n"
                                                                                "gpu 00000000:03:00.0 device=0x233110de\n"
                                                                                "gpu 00000000:04:00.0 device=0x233110de\n")}),
                              kb(), CheckOptions{});
  EXPECT_FALSE(only_pair(listed).nvlink.linked);
}

// A GPU pair on PCIe is judged for both GPUs: the second GPU's small BAR1 and its GPU family's
// platform rule count as the first's do; the software rules (peer-memory clients, dma-buf) are
// for a NIC or drive reaching GPU memory, not for GPU-GPU P2P (CUDA's own).
TEST(TruthGpuPair, BothGpusAreJudgedAndPeerMemoryIsNotAsked) {
  for (bool small_second : {true, false}) {
    FakeNode n = gpu_pair(0x2331, 0x2331, false);
    fn(n, small_second ? kNic : kGpu).resource =
        "0x00000000f8000000 0x00000000f8ffffff 0x0000000000040200\n0x0000100000000000 0x000010000fffffff 0x000000000014220c\n";
    n.modules = "nvidia 1 0 - Live 0x0\n";  // no peer-memory client, proprietary module: a NIC pair would be blocked
    n.nvidia_version = kProprietary;
    const PairResult p = only_pair(check(from_fake(n), kb(), CheckOptions{}));
    const Finding* f = finding(p, "bar1-small");
    ASSERT_TRUE(f);
    EXPECT_NE(f->reason.find(small_second ? "BAR1 of 0000:04:00.0" : "BAR1 of 0000:03:00.0"), std::string::npos) << f->reason;
    for (const auto& x : p.findings) EXPECT_NE(x.rule.rfind("software-", 0), 0u) << x.rule << ": " << x.reason;
  }
  // The GeForce platform rule (platforms.json platform-geforce, applies_to gpu-nic) and a family
  // rule for all pairs, on whichever GPU is the GeForce (RTX 4090, 10de:2684).
  RuleData k = kb();
  PlatformRule all;
  all.id = "t-geforce-p2p";
  all.severity = "unreliable";
  all.applies_to = "all";
  all.gpu_families = {"geforce"};
  all.reason = "GeForce P2P";
  k.platforms.push_back(all);
  for (bool geforce_second : {true, false}) {
    SCOPED_TRACE(geforce_second ? "GeForce second" : "GeForce first");
    const PairResult p =
        only_pair(check(from_fake(gpu_pair(geforce_second ? 0x2331 : 0x2684, geforce_second ? 0x2684 : 0x2331, false)), k, CheckOptions{}));
    EXPECT_TRUE(finding(p, "t-geforce-p2p"));
    EXPECT_FALSE(finding(p, "platform-geforce"));  // gpu-nic only
  }
}

// NVML's fabric state (nvmlGpuFabricInfo_t): the status is meaningful only once the state is
// COMPLETED (3); a GPU whose state is NOT_SUPPORTED (0) carries no fabric finding whatever status
// the record holds; COMPLETED with an error status does.
TEST(TruthNvlinkEvidence, FabricStatusCountsOnlyOnceCompleted) {
  for (int state : {0, 3}) {
    SCOPED_TRACE(state);
    std::string nvml = "nvml driver=580.159.04 library=libnvidia-ml.so.1\n";
    for (const char* bdf : {"00000000:03:00.0", "00000000:04:00.0"}) {
      nvml += std::string("gpu ") + bdf + " device=0x233010de fabric=" + std::to_string(state) + " fabric_status=5\n";
      for (int l = 0; l < 18; ++l)
        nvml += std::string("link ") + bdf + " " + std::to_string(l) + " active=1 remote=FFFFFFFF:FF:FF.0 type=switch\n";
    }
    const Report r = check(snapshot_of(gpu_pair(0x2330, 0x2330, false), {file("gdrpeer-snapshot/nvml", nvml)}), kb(), CheckOptions{});
    const PairResult& p = only_pair(r);
    ASSERT_TRUE(p.nvlink.linked);
    EXPECT_EQ(finding(p, "nvlink-fabric") != nullptr, state == 3);
  }
}

// ---- paths -------------------------------------------------------------------------

// Across sockets with no NIC on the GPU's socket: the fix names the GPU's NUMA node (sysfs
// numa_node), the only place a closer NIC could go. Two sockets: GPU on node 1, NIC on node 0.
TEST(TruthPaths, SysFixNamesTheGpusSocketWhenNoNicIsCloser) {
  FakeNode n;
  n.modules = testing::switch_node().modules;
  n.numa_nodes = 2;
  testing::add_port(n, "0000:00:01.0", "/sys/devices/pci0000:00/0000:00:01.0", testing::kRootPort, 1).acs = true;
  testing::add_port(n, "0000:80:01.0", "/sys/devices/pci0000:80/0000:80:01.0", testing::kRootPort, 0x81).acs = true;
  testing::add_endpoint(n, "0000:01:00.0", "/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0", 0x15b3, 0x1021, 0x020700);
  testing::add_endpoint(n, "0000:81:00.0", "/sys/devices/pci0000:80/0000:80:01.0/0000:81:00.0", 0x10de, 0x2331, 0x030200).resource =
      testing::switch_node().fns[4].resource;
  for (auto& f : n.fns) f.numa = f.bdf.rfind("0000:8", 0) == 0 ? 1 : 0;
  const PairResult p = only_pair(check(from_fake(n), kb(), CheckOptions{}));
  ASSERT_EQ(p.path.cls, PathClass::SYS);
  const Finding* f = finding(p, "path-sys");
  ASSERT_TRUE(f);
  EXPECT_EQ(f->fix, "# put a NIC on NUMA node 1 (the GPU's socket)");
  // The same two sockets of a Grace node (two Grace CPUs, Neoverse V2, CPU part 0xd4f, under TH500
  // root ports, 10de:22b2 in nvcst.h): the pair crosses the socket link, which path-grace (a
  // root-complex path over NVLink-C2C being the designed one) does not cover: path-sys, with
  // root_complexes.json's "slow" for Grace.
  n.cpuinfo = "processor\t: 0\nBogoMIPS\t: 2000.00\nCPU implementer\t: 0x41\nCPU architecture: 8\nCPU variant\t: 0x0\nCPU part\t: 0xd4f\n";
  for (auto& port : n.fns)
    if (port.port_type == testing::kRootPort) port.vendor = 0x10de, port.device = 0x22b2;
  const PairResult g = only_pair(check(from_fake(n), kb(), CheckOptions{}));
  ASSERT_EQ(g.path.cls, PathClass::SYS);
  EXPECT_FALSE(finding(g, "path-grace"));
  const Finding* gs = finding(g, "path-sys");
  ASSERT_TRUE(gs);
  EXPECT_NE(gs->reason.find("peer-to-peer across sockets is slow on NVIDIA Grace"), std::string::npos) << gs->reason;
}

// A virtual machine's flat bus (docs/check.md platform-virtual): devices straight on the
// hypervisor's root bus hide the physical path (unreliable); behind virtual root ports (q35
// pcie-root-port, as in tests/reference/kinds/h200-vm-lspci-tvv.md) the classes reflect what the
// hypervisor exposes (a note); two NVIDIA GPUs on the flat bus with NVLink unknown: a note, since
// NVLink may carry their traffic; with NVLink known absent (NVML answered) or other GPUs, the flat
// bus is unreliable again.
TEST(TruthVirtual, FlatBusHidesThePathExceptWhereNvlinkMayCarryIt) {
  auto vm = [](bool gpu_port, bool other_port, uint16_t other_vendor, uint16_t other_device, uint32_t other_class) {
    FakeNode n;
    n.modules = testing::switch_node().modules;
    n.cpuinfo += "flags\t\t: fpu hypervisor\n";
    const std::string res = testing::switch_node().fns[4].resource;
    if (gpu_port) {
      testing::add_port(n, "0000:00:02.0", "/sys/devices/pci0000:00/0000:00:02.0", testing::kRootPort, 1);
      testing::add_endpoint(n, "0000:01:00.0", "/sys/devices/pci0000:00/0000:00:02.0/0000:01:00.0", 0x10de, 0x2331, 0x030200).resource =
          res;
    } else {
      testing::add_endpoint(n, "0000:00:06.0", "/sys/devices/pci0000:00/0000:00:06.0", 0x10de, 0x2331, 0x030200).resource = res;
    }
    if (other_port) {
      testing::add_port(n, "0000:00:03.0", "/sys/devices/pci0000:00/0000:00:03.0", testing::kRootPort, 2);
      testing::add_endpoint(n, "0000:02:00.0", "/sys/devices/pci0000:00/0000:00:03.0/0000:02:00.0", other_vendor, other_device, other_class)
          .resource = res;
    } else {
      testing::add_endpoint(n, "0000:00:07.0", "/sys/devices/pci0000:00/0000:00:07.0", other_vendor, other_device, other_class).resource =
          res;
    }
    return n;
  };
  struct Case {
    const char* what;
    FakeNode n;
    std::vector<TarEntry> extra;
    Verdict want;  // of the platform-virtual finding
    const char* reason_part;
  };
  const std::string nvml_none =
      "nvml driver=580.159.04 library=libnvidia-ml.so.1\ngpu 00000000:00:06.0 device=0x233110de\n"
      "gpu 00000000:00:07.0 device=0x233110de\n";
  FakeNode amd_first = vm(false, false, 0x10de, 0x2331, 0x030200);
  fn(amd_first, "0000:00:06.0").vendor = 0x1002;
  fn(amd_first, "0000:00:06.0").device = 0x74a1;
  fn(amd_first, "0000:00:06.0").class_code = 0x038000;
  const Case cases[] = {
      {"GPU and NIC on the root bus", vm(false, false, 0x15b3, 0x1021, 0x020700), {}, Verdict::Unreliable, "flat virtual PCIe topology"},
      {"AMD then NVIDIA GPU on the root bus", amd_first, {}, Verdict::Unreliable, "flat virtual PCIe topology"},
      {"two NVIDIA GPUs behind root ports", vm(true, true, 0x10de, 0x2331, 0x030200), {}, Verdict::Optimal, "the classes reflect"},
      {"GPU and NIC behind root ports",
       vm(true, true, 0x15b3, 0x1021, 0x020700),
       {},
       Verdict::Optimal,
       "virtual machine: the classes reflect the PCIe topology the hypervisor exposes"},
      {"GPU behind a root port, NIC on the root bus",
       vm(true, false, 0x15b3, 0x1021, 0x020700),
       {},
       Verdict::Optimal,
       "the classes reflect"},
      {"GPU on the root bus, NIC behind a root port",
       vm(false, true, 0x15b3, 0x1021, 0x020700),
       {},
       Verdict::Optimal,
       "the classes reflect"},
      {"two NVIDIA GPUs on the root bus",
       vm(false, false, 0x10de, 0x2331, 0x030200),
       {},
       Verdict::Optimal,
       "NVLink between them is unknown"},
      {"two NVIDIA GPUs, NVML answered",
       vm(false, false, 0x10de, 0x2331, 0x030200),
       {file("gdrpeer-snapshot/nvml", nvml_none)},
       Verdict::Unreliable,
       "flat virtual PCIe topology"},
      {"NVIDIA and AMD GPUs on the root bus",
       vm(false, false, 0x1002, 0x74a1, 0x038000),
       {},
       Verdict::Unreliable,
       "flat virtual PCIe topology"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what);
    CheckOptions o;
    o.gpu_nic = true;
    const Report r = check(snapshot_of(c.n, c.extra), kb(), o);
    ASSERT_TRUE(r.virtual_machine);
    const PairResult& p = only_pair(r);
    const Finding* f = finding(p, "platform-virtual");
    ASSERT_TRUE(f);
    EXPECT_EQ(f->severity, c.want) << f->reason;
    EXPECT_NE(f->reason.find(c.reason_part), std::string::npos) << f->reason;
  }
}

// The same flat bus from lspci -tv text without ids (NVIDIA known by the vendor name lspci prints):
// q35's host bridge (82G33, QEMU's q35 machine) gives the VM away; two H100 PCIe on the root bus.
TEST(TruthVirtual, FlatBusNvidiaByNameFromLspci) {
  const std::string text =
      "-[0000:00]-+-00.0  Intel Corporation 82G33/G31/P35/P31 Express DRAM Controller\n"
      "           +-05.0  NVIDIA Corporation GH100 [H100 PCIe]\n"
      "           \\-06.0  NVIDIA Corporation GH100 [H100 PCIe]\n";
  Topology t = parse_lspci({{"vm.txt", text}});
  assign_roles(t, kb());
  const Report r = check(t, kb(), CheckOptions{});
  ASSERT_TRUE(r.virtual_machine);
  ASSERT_EQ(r.gpus.size(), 2u);
  ASSERT_FALSE(t.devices[r.gpus[0]].ids_known);
  const Finding* f = finding(only_pair(r), "platform-virtual");
  ASSERT_TRUE(f);
  EXPECT_EQ(f->severity, Verdict::Optimal) << f->reason;
  EXPECT_NE(f->reason.find("NVLink between them is unknown (not in this input)"), std::string::npos) << f->reason;
}

// ---- IOMMU note: the command line's IOMMU parameters --------------------------------

// The iommu-mode note names the kernel command line's IOMMU parameters: every key naming the IOMMU
// or the Arm SMMU (Documentation/admin-guide/kernel-parameters.txt: intel_iommu=, iommu.passthrough=,
// arm-smmu.disable_bypass= ...), nothing else; with no /proc/cmdline in the copy, nothing about it.
TEST(TruthNotes, IommuNoteNamesTheIommuAndSmmuParametersOnly) {
  const FakeNode n = testing::switch_node();
  struct Case {
    const char* cmdline;  // nullptr: no /proc/cmdline
    const char* want;
  };
  const Case cases[] = {
      {"BOOT_IMAGE=/vmlinuz root=/dev/nvme0n1p2 arm-smmu.disable_bypass=0 iommu.passthrough=1 quiet\n",
       "IOMMU: off (kernel command line: arm-smmu.disable_bypass=0 iommu.passthrough=1)"},
      {"root=/dev/sda1 quiet\n", "IOMMU: off (no IOMMU parameter on the kernel command line)"},
      {nullptr, "IOMMU: off"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.want);
    const Report r = c.cmdline ? check(snapshot_of(n, {file("proc/cmdline", c.cmdline)}, {"proc/cmdline"}), kb(), CheckOptions{})
                               : check(snapshot_of(n, {}, {"proc/cmdline"}), kb(), CheckOptions{});
    auto mode = notes(r, "iommu-mode");
    ASSERT_EQ(mode.size(), 1u);
    EXPECT_EQ(mode[0]->reason, c.want);
  }
}

// Integrated-GPU platforms (platforms.json platform-jetson: DMI "Jetson" or "IGX Orin"; docs/check.md):
// judged once per node, a finding when no discrete NVIDIA GPU is there, a note when one is (any of
// the node's GPUs; NVIDIA by vendor id, or by the vendor name lspci prints when ids are unknown).
// The platform is named as DMI gives it. Rules of other kinds never give node findings, and an
// integrated-gpu rule needs a node field (arch, CPU, DMI) to name a platform at all.
TEST(TruthPlatform, IntegratedGpuPlatformsAreJudgedOncePerNode) {
  auto igx = [](std::vector<uint16_t> gpu_vendors, const std::string& vendor, const std::string& product) {
    FakeNode n = testing::switch_node();
    n.fns.erase(std::remove_if(n.fns.begin(), n.fns.end(), [](const FakeFn& f) { return f.bdf == kGpu; }), n.fns.end());
    const std::string up = "/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0";
    int i = 0;
    for (uint16_t v : gpu_vendors) {
      const std::string port = "0000:02:0" + std::to_string(2 + i) + ".0", bdf = "0000:0" + std::to_string(5 + i) + ":00.0";
      testing::add_port(n, port, up + "/" + port, testing::kDownstream, 5 + i, 0x10b5, 0x9797).acs = true;
      testing::add_endpoint(n, bdf, up + "/" + port + "/" + bdf, v, v == 0x10de ? 0x2230 : 0x74a1, v == 0x10de ? 0x030000 : 0x038000);
      ++i;
    }
    std::vector<TarEntry> dmi;
    if (!vendor.empty()) dmi.push_back(file("sys/class/dmi/id/sys_vendor", vendor + "\n"));
    if (!product.empty()) dmi.push_back(file("sys/class/dmi/id/product_name", product + "\n"));
    return snapshot_of(n, dmi);
  };
  struct Case {
    const char* what;
    std::vector<uint16_t> gpus;
    std::string vendor, product;
    bool note;  // Optimal note (a discrete NVIDIA GPU is there) or the rule's finding
    const char* where;
  };
  const Case cases[] = {
      {"IGX Orin, no discrete GPU", {}, "NVIDIA", "IGX Orin Developer Kit", false, "platform NVIDIA IGX Orin Developer Kit: "},
      {"IGX Orin with an RTX A6000", {0x10de}, "NVIDIA", "IGX Orin Developer Kit", true, "platform NVIDIA IGX Orin Developer Kit: "},
      {"IGX Orin, RTX A6000 then an AMD GPU", {0x10de, 0x1002}, "NVIDIA", "IGX Orin Developer Kit", true, "platform NVIDIA IGX Orin"},
      {"IGX Orin with an AMD GPU only", {0x1002}, "NVIDIA", "IGX Orin Developer Kit", false, "platform NVIDIA IGX Orin"},
      {"vendor string only", {}, "NVIDIA IGX Orin", "", false, "platform NVIDIA IGX Orin: "},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what);
    const Report r = check(igx(c.gpus, c.vendor, c.product), kb(), CheckOptions{});
    auto f = notes(r, "platform-jetson");
    ASSERT_EQ(f.size(), 1u);
    EXPECT_EQ(f[0]->severity, c.note ? Verdict::Optimal : Verdict::Unreliable);
    EXPECT_EQ(f[0]->reason.rfind(c.where, 0), 0u) << f[0]->reason;
  }
  // A rule of another kind: no node finding. (An integrated-gpu rule without a node field the
  // loader refuses: PlatformData.RuleWithoutConditionIsADataError.)
  RuleData k = kb();
  PlatformRule all;
  all.id = "t-all";
  all.severity = "blocked";
  all.applies_to = "all";
  all.dmi_patterns = {"IGX Orin"};
  all.reason = "a pair rule";
  k.platforms.push_back(all);
  const Report r = check(igx({0x10de}, "NVIDIA", "IGX Orin Developer Kit"), k, CheckOptions{});
  EXPECT_TRUE(notes(r, "t-all").empty());
  // The lspci -tv of a real IGX Orin with a discrete RTX A6000 (holohub, tests/reference/README.md),
  // named only (no ids), with lscpu's lines of its CPU (IGX Orin: 12 Arm Cortex-A78AE cores) and an
  // integrated-gpu rule on that CPU: the RTX A6000 is a discrete NVIDIA GPU, so only a note.
  const std::string text = "$ lspci -tv\n" + testing::slurp(testing::reference("holohub-igx-orin-lspci-tv.txt")) +
                           "$ lscpu\nArchitecture:                       aarch64\nModel name:                         Cortex-A78AE\n";
  Topology t = parse_lspci({{"igx.txt", text}});
  assign_roles(t, kb());
  ASSERT_EQ(t.cpu.model_name, "Cortex-A78AE");
  RuleData ki = kb();
  PlatformRule orin;
  orin.id = "t-orin";
  orin.severity = "unreliable";
  orin.applies_to = "integrated-gpu";
  orin.cpu_patterns = {"Cortex-A78AE"};
  orin.reason = "integrated GPU";
  ki.platforms.push_back(orin);
  const Report h = check(t, ki, CheckOptions{});
  ASSERT_EQ(h.gpus.size(), 1u);
  ASSERT_FALSE(t.devices[h.gpus[0]].ids_known);
  auto j = notes(h, "t-orin");
  ASSERT_EQ(j.size(), 1u);
  EXPECT_EQ(j[0]->severity, Verdict::Optimal) << j[0]->reason;
  EXPECT_EQ(j[0]->reason.rfind("platform Cortex-A78AE: ", 0), 0u) << j[0]->reason;  // no DMI: the CPU names it
}

// One finding per rule and reason: two rules (--data-dir) with one reason and different ids are
// two findings, each skippable by its id.
TEST(TruthPlatform, SameReasonDifferentRulesAreTwoFindings) {
  RuleData k = kb();
  for (const char* id : {"t-one", "t-two"}) {
    PlatformRule p;
    p.id = id;
    p.severity = "degraded";
    p.applies_to = "all";
    p.cpu_patterns = {"EPYC"};
    p.reason = "the same reason";
    k.platforms.push_back(p);
  }
  const PairResult p = only_pair(check(from_fake(testing::switch_node()), k, CheckOptions{}));
  EXPECT_TRUE(finding(p, "t-one"));
  EXPECT_TRUE(finding(p, "t-two"));
}

// ---- rules_root_port.cpp: ACS on CPU root ports, ATS -------------------------------------

// A GPU below root port 00:01.0 and a NIC below root port 00:02.0: the pair meets in the root
// complex (PHB) and crosses both root ports.
// A CPU root port with an ACS capability whose control register holds acs_ctl.
FakeFn& add_acs_root_port(FakeNode& n, const std::string& bdf, int secondary_bus, uint16_t acs_ctl) {
  const std::string host_bridge = "pci" + bdf.substr(0, 7);
  FakeFn& rp = testing::add_port(n, bdf, "/sys/devices/" + host_bridge + "/" + bdf, testing::kRootPort, secondary_bus);
  rp.acs = true;
  rp.acs_ctl = acs_ctl;
  return rp;
}

FakeNode two_root_ports(uint16_t acs_ctl_1, uint16_t acs_ctl_2) {
  FakeNode n;
  n.modules = testing::switch_node().modules;
  const std::string res = testing::switch_node().fns[4].resource;
  add_acs_root_port(n, "0000:00:01.0", 1, acs_ctl_1);
  add_acs_root_port(n, "0000:00:02.0", 2, acs_ctl_2);
  testing::add_endpoint(n, "0000:01:00.0", "/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0", 0x10de, 0x2331, 0x030200).resource = res;
  testing::add_endpoint(n, "0000:02:00.0", "/sys/devices/pci0000:00/0000:00:02.0/0000:02:00.0", 0x15b3, 0x1021, 0x020700);
  return n;
}

// A GPU below root port 00:01.0 (host bridge 0000:00, NUMA node 0) and a NIC below root port
// 80:01.0 (host bridge 0000:80, NUMA node nic_numa): NODE when nic_numa is 0, SYS otherwise.
FakeNode two_host_bridges(uint16_t acs_ctl_1, uint16_t acs_ctl_2, int nic_numa) {
  FakeNode n;
  n.modules = testing::switch_node().modules;
  add_acs_root_port(n, "0000:00:01.0", 1, acs_ctl_1);
  add_acs_root_port(n, "0000:80:01.0", 0x81, acs_ctl_2).numa = nic_numa;
  testing::add_endpoint(n, "0000:01:00.0", "/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0", 0x10de, 0x2331, 0x030200).resource =
      testing::switch_node().fns[4].resource;
  testing::add_endpoint(n, "0000:81:00.0", "/sys/devices/pci0000:80/0000:80:01.0/0000:81:00.0", 0x15b3, 0x1021, 0x020700).numa = nic_numa;
  n.numa_nodes = nic_numa + 1;
  return n;
}

// ACS Request Redirect (bit 2), Completion Redirect (bit 3) and Egress Control (bit 5) on a root
// port send peer requests to the root complex / IOMMU (PCIe base spec, ACS Control register;
// NVIDIA/nccl #2079: ACSCtl 0x001d on AMD GPP bridges deadlocked NCCL); Source Validation (0),
// Translation Blocking (1), Upstream Forwarding (4) and Direct Translated P2P (6) do not. The fix
// clears bits 2, 3 and 5 (setpci's value:mask 0000:002c on ECAP_ACS+0x6) now, and at boot with
// pci=config_acs, whose flags run from bit 6 to bit 0, x keeping a bit and 0 clearing it
// (Documentation/admin-guide/kernel-parameters.txt): keep 6, clear 5, keep 4, clear 3 and 2, keep 1
// and 0: "x0x00xx".
TEST(TruthRootPort, AcsRedirectOnTheRootPortsOfARootComplexPath) {
  struct Case {
    uint16_t ctl1, ctl2;
    const char* ports;  // "" no finding
  };
  const Case cases[] = {
      {0x001d, 0x0000, "0000:00:01.0 (ACSCtl 0x001d)"},
      {0x0000, 0x0004, "0000:00:02.0 (ACSCtl 0x0004)"},
      {0x0008, 0x0000, "0000:00:01.0 (ACSCtl 0x0008)"},
      {0x0000, 0x0020, "0000:00:02.0 (ACSCtl 0x0020)"},
      {0x001d, 0x002c, "0000:00:01.0 (ACSCtl 0x001d), 0000:00:02.0 (ACSCtl 0x002c)"},
      {0x0053, 0x0053, ""},  // SrcValid, TransBlk, UpstreamFwd, DirectTrans: no redirect
      {0x0000, 0x0000, ""},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.ports);
    const PairResult p = only_pair(check(from_fake(two_root_ports(c.ctl1, c.ctl2)), kb(), CheckOptions{}));
    ASSERT_EQ(p.path.cls, PathClass::PHB);
    const Finding* f = finding(p, "acs-root-port");
    ASSERT_EQ(f != nullptr, *c.ports != '\0');
    if (!f) continue;
    EXPECT_EQ(f->severity, Verdict::Unreliable);
    EXPECT_EQ(f->reason.rfind(std::string("ACS redirect on the CPU root port(s) ") + c.ports + " of this root-complex path", 0), 0u)
        << f->reason;
    std::string setpci, boot;
    for (const char* bdf : {"0000:00:01.0", "0000:00:02.0"})
      if (std::string(c.ports).find(bdf) != std::string::npos) {
        setpci += (setpci.empty() ? "" : "; ") + std::string("setpci -s ") + bdf + " ECAP_ACS+0x6.w=0000:002c";
        boot += (boot.empty() ? "" : ";") + std::string("x0x00xx@") + bdf;
      }
    EXPECT_EQ(f->fix, setpci + "   # now; at boot: pci=config_acs=\"" + boot +
                          "\" (Linux >= 6.11) or the BIOS ACS setting; clearing it merges IOMMU groups");
    EXPECT_EQ(p.verdict, Verdict::Unreliable);
  }
  // Without the ACS capability (or with it unread) there is nothing to judge; --skip by id or group.
  FakeNode none = two_root_ports(0x001d, 0x001d);
  for (auto& f : none.fns) f.acs = false;
  EXPECT_FALSE(finding(only_pair(check(from_fake(none), kb(), CheckOptions{})), "acs-root-port"));
  for (const char* skip : {"acs-root-port", "acs"}) {
    CheckOptions o;
    o.skip = {skip};
    EXPECT_FALSE(finding(only_pair(check(from_fake(two_root_ports(0x001d, 0)), kb(), o)), "acs-root-port")) << skip;
  }
  // Below one switch the pair does not reach the root ports: acs-redirect judges the switch ports.
  FakeNode pix = testing::switch_node();
  fn(pix, "0000:00:01.0").acs_ctl = 0x001d;
  EXPECT_FALSE(finding(only_pair(check(from_fake(pix), kb(), CheckOptions{})), "acs-root-port"));
  // A switch downstream port with redirect on a root-complex path is not a root port.
  FakeNode sw = two_root_ports(0, 0);
  sw.fns.erase(std::remove_if(sw.fns.begin(), sw.fns.end(), [](const FakeFn& f) { return f.bdf == "0000:01:00.0"; }), sw.fns.end());
  testing::add_port(sw, "0000:01:00.0", "/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0", testing::kUpstream, 3, 0x10b5, 0x9797);
  FakeFn& dsp = testing::add_port(sw, "0000:03:00.0", "/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:03:00.0",
                                  testing::kDownstream, 4, 0x10b5, 0x9797);
  dsp.acs = true;
  dsp.acs_ctl = 0x001d;
  testing::add_endpoint(sw, "0000:04:00.0", "/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:03:00.0/0000:04:00.0", 0x10de, 0x2331,
                        0x030200)
      .resource = testing::switch_node().fns[4].resource;
  const PairResult q = only_pair(check(from_fake(sw), kb(), CheckOptions{}));
  ASSERT_EQ(q.path.cls, PathClass::PHB);
  EXPECT_FALSE(finding(q, "acs-root-port"));
}

// An lspci -vvv text need not start at the root ports (`lspci -vvv -s 02:` or `-d 10b5:` print a
// part of the tree): here two switch downstream ports (Express capability "Downstream Port", PCIe
// base spec port type 0110b) are the topmost bridges, each with a device below and ACS redirect
// set (lspci ls-ecaps.c prints ACSCtl as "ReqRedir+ CmpltRedir+"). They have no parent in the
// input, yet they are not root ports: acs-root-port names none of them.
TEST(TruthRootPort, TopmostBridgeOfAFragmentIsNoRootPortUnlessItsTypeSaysSo) {
  auto port = [](const char* bdf, const char* sec) {
    return std::string(bdf) +
           " PCI bridge: PLX Technology, Inc. PEX 9797 97-lane, 25-port PCI Express Gen 4 ExpressFabric Platform (rev b0) (prog-if 00 "
           "[Normal decode])\n"
           "\tBus: primary=" +
           std::string(bdf).substr(0, 2) + ", secondary=" + sec + ", subordinate=" + sec +
           ", sec-latency=0\n"
           "\tCapabilities: [68] Express (v2) Downstream Port (Slot+), MSI 00\n"
           "\t\tLnkCap:\tPort #8, Speed 16GT/s, Width x16, ASPM L1, Exit Latency L1 <4us\n"
           "\t\tLnkSta:\tSpeed 16GT/s, Width x16\n"
           "\tCapabilities: [f24 v1] Access Control Services\n"
           "\t\tACSCap:\tSrcValid+ TransBlk+ ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl+ DirectTrans+\n"
           "\t\tACSCtl:\tSrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-\n\n";
  };
  const std::string text = port("02:00.0", "03") +
                           "03:00.0 3D controller: NVIDIA Corporation GH100 [H100 PCIe] (rev a1)\n"
                           "\tCapabilities: [60] Express (v2) Endpoint, MSI 00\n"
                           "\t\tLnkCap:\tPort #0, Speed 16GT/s, Width x16, ASPM not supported\n"
                           "\t\tLnkSta:\tSpeed 16GT/s, Width x16\n\n" +
                           port("05:00.0", "06") +
                           "06:00.0 Infiniband controller: Mellanox Technologies MT2910 Family [ConnectX-7]\n"
                           "\tCapabilities: [60] Express (v2) Endpoint, MSI 00\n"
                           "\t\tLnkCap:\tPort #0, Speed 16GT/s, Width x16, ASPM not supported\n"
                           "\t\tLnkSta:\tSpeed 16GT/s, Width x16\n";
  Topology t = parse_lspci({{"fragment.txt", text}});
  assign_roles(t, kb());
  const Report r = check(t, kb(), CheckOptions{});
  const PairResult& p = only_pair(r);
  ASSERT_TRUE(p.path.cls == PathClass::PHB || p.path.cls == PathClass::NODE) << to_string(p.path.cls);
  for (const char* bdf : {"0000:02:00.0", "0000:05:00.0"}) {
    const Device& d = t.devices[t.find(bdf)];
    ASSERT_LT(d.parent, 0) << bdf;
    ASSERT_EQ(d.port, PortType::SwitchDownstream) << bdf;
    ASSERT_TRUE(d.acs_known && d.acs_present) << bdf;
  }
  EXPECT_FALSE(finding(p, "acs-root-port")) << finding(p, "acs-root-port")->reason;
}

// The same across two host bridges of one NUMA node (NODE: the pair crosses both root ports too),
// and never for GPUs whose peer traffic takes NVLink (two H100 SXM: NVLink inferred from their
// model) rather than the root ports.
TEST(TruthRootPort, NodePathsTooNvlinkPairsNever) {
  const FakeNode node = two_host_bridges(0x001d, 0, 0);
  const PairResult p = only_pair(check(from_fake(node), kb(), CheckOptions{}));
  ASSERT_EQ(p.path.cls, PathClass::NODE);
  const Finding* f = finding(p, "acs-root-port");
  ASSERT_TRUE(f);
  EXPECT_NE(f->reason.find("0000:00:01.0 (ACSCtl 0x001d)"), std::string::npos) << f->reason;
  FakeNode sxm = two_root_ports(0x001d, 0x001d);
  FakeFn& nic = fn(sxm, "0000:02:00.0");
  nic.vendor = 0x10de;
  nic.device = 0x2330;
  nic.class_code = 0x030200;
  nic.resource = testing::switch_node().fns[4].resource;
  fn(sxm, "0000:01:00.0").device = 0x2330;
  const PairResult q = only_pair(check(from_fake(sxm), kb(), CheckOptions{}));
  ASSERT_TRUE(q.nvlink.linked);
  EXPECT_FALSE(finding(q, "acs-root-port"));
}

// A cross-socket (SYS) pair crosses its root ports as a NODE pair does: the kernel routes every
// pair without a common upstream bridge through the host bridge alike, root-port ACS or not
// (drivers/pci/p2pdma.c calc_map_type_and_dist), and NCCL does P2P up to SYS between the two GPUs
// of an AMD system (src/graph/paths.cc ncclTopoCheckP2p), #2079's platform, whose hang came from
// ReqRedir/CmpltRedir on the root ports of a NODE pair. So acs-root-port names the redirecting
// root ports of a SYS pair too, next to path-sys; a pair whose path has no redirect gets path-sys
// alone. Below a switch meeting point the traffic turns before the root complex: a port there
// that claims to be a Root Port (a wrong port type; the kernel's set_pcie_port_type corrects
// some) is judged by acs-redirect, not as a CPU root port.
TEST(TruthRootPort, SysPathsTooAndNeverBelowASwitch) {
  for (const uint16_t ctl : {uint16_t{0x001d}, uint16_t{0x0053}}) {
    SCOPED_TRACE(ctl);
    FakeNode two = two_host_bridges(ctl, ctl, 1);
    const PairResult p = only_pair(check(from_fake(two), kb(), CheckOptions{}));
    ASSERT_EQ(p.path.cls, PathClass::SYS);
    EXPECT_TRUE(finding(p, "path-sys"));
    const Finding* f = finding(p, "acs-root-port");
    if (ctl == 0x0053) {  // SrcValid, TransBlk, UpstreamFwd, DirectTrans: no redirect
      EXPECT_FALSE(f);
      continue;
    }
    ASSERT_TRUE(f);
    EXPECT_EQ(f->severity, Verdict::Unreliable);
    EXPECT_EQ(f->reason.rfind("ACS redirect on the CPU root port(s) 0000:00:01.0 (ACSCtl 0x001d), 0000:80:01.0 (ACSCtl 0x001d) of", 0), 0u)
        << f->reason;
    EXPECT_EQ(p.verdict, Verdict::Unreliable);
  }
  // The switch's GPU-side downstream port claiming Root Port leaves it out of the switch's unit:
  // PXB (classify.cpp unit_of; a PIX path holds switch ports only).
  FakeNode pxb = testing::switch_node();
  FakeFn& dsp = fn(pxb, "0000:02:00.0");
  dsp.port_type = testing::kRootPort;
  dsp.acs_ctl = 0x001d;
  const PairResult q = only_pair(check(from_fake(pxb), kb(), CheckOptions{}));
  ASSERT_EQ(q.path.cls, PathClass::PXB);
  const Finding* redirect = finding(q, "acs-redirect");
  ASSERT_TRUE(redirect);
  EXPECT_NE(redirect->reason.find("0000:02:00.0"), std::string::npos) << redirect->reason;
  EXPECT_FALSE(finding(q, "acs-root-port"));
}

// The NIC's ATS capability (extended capability 0x000f; ATS Control bit 15 enables it; PCIe base
// spec) written into its config space.
std::vector<TarEntry> with_ats(const FakeNode& n, const std::string& bdf, bool enabled) {
  std::vector<TarEntry> e = n.entries();
  for (const auto& f : n.fns)
    if (f.bdf == bdf)
      for (auto& x : e)
        if (x.path == f.sysfs_path.substr(1) + "/config") {
          x.data[0x100] = 0x0f;
          x.data[0x101] = 0x00;
          x.data[0x102] = 0x01;  // version 1, next 0
          x.data[0x103] = 0x00;
          x.data[0x106] = 0x00;
          x.data[0x107] = static_cast<char>(enabled ? 0x80 : 0x00);
        }
  return e;
}

// Where ATS matters (rules_root_port.cpp's header): under a translating IOMMU (group type DMA) a
// NIC with ATS off sends every peer request up to be translated; with ATS on, translated requests
// can stay below the switch unless a port on the path has ACS Direct Translated P2P (bit 6)
// capable but off; in a VM, ATS answers come from the vIOMMU (ats-vm).
TEST(TruthRootPort, AtsWhereTheIommuTranslates) {
  struct Case {
    const char* what;
    bool ats, enabled, translating, vm, direct_on, phb;
    const char* translated;  // ats-translated reason part, "" none
    bool ats_vm;
  };
  const Case cases[] = {
      {"no ATS", false, false, true, false, false, false, "", false},
      {"ATS off, translating", true, false, true, false, false, false, "and its ATS is off", false},
      {"ATS on, translating, DirectTrans off", true, true, true, false, false, false,
       "but ACS Direct Translated P2P is off on 0000:02:00.0, 0000:02:01.0", false},
      {"ATS on, translating, DirectTrans on", true, true, true, false, true, false, "translated peer requests can stay below the switch",
       false},
      {"ATS on, translating, PHB", true, true, true, false, false, true, "", false},
      {"ATS on, identity", true, true, false, false, false, false, "", false},
      {"ATS on, VM, identity", true, true, false, true, false, false, "", true},
      {"ATS off, VM", true, false, false, true, false, false, "", false},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what);
    FakeNode n = c.phb ? two_root_ports(0, 0) : testing::switch_node();
    const std::string nic = c.phb ? "0000:02:00.0" : kNic;
    if (c.vm) n.cpuinfo += "flags\t\t: fpu hypervisor\n";
    for (auto& f : n.fns) {
      f.iommu_group = static_cast<int>(&f - &n.fns[0]);
      n.groups.push_back({f.iommu_group, f.bdf == nic && c.translating ? "DMA" : "identity"});
      if (f.port_type == testing::kDownstream) f.acs_ctl = c.direct_on ? 0x0040 : 0x0000;
    }
    const Report r = check(c.ats ? testing::from_entries(with_ats(n, nic, c.enabled)) : from_fake(n), kb(), CheckOptions{});
    const PairResult& p = only_pair(r);
    const Finding* f = finding(p, "ats-translated");
    ASSERT_EQ(f != nullptr, *c.translated != '\0') << (f ? f->reason : "");
    if (f) {
      EXPECT_NE(f->reason.find(c.translated), std::string::npos) << f->reason;
      EXPECT_EQ(f->severity, Verdict::Optimal);
    }
    EXPECT_EQ(finding(p, "ats-vm") != nullptr, c.ats_vm);
  }
  // --skip by id; a PXB path (the NIC below a second switch) is judged as PIX is; a port whose
  // ACS cannot do Direct Translated P2P (capability bit 6 clear) routes translated requests by the
  // redirect bits, so it is not "off"; ATS on a GPU is not the NIC's (ats-* judge the NIC).
  auto ats_node = [](bool vm, uint16_t dsp_cap, bool pxb) {
    FakeNode n = testing::switch_node();
    if (vm) n.cpuinfo += "flags\t\t: fpu hypervisor\n";
    if (pxb) {
      const std::string dsp = "/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:01.0";
      n.fns.erase(std::remove_if(n.fns.begin(), n.fns.end(), [](const FakeFn& f) { return f.bdf == kNic; }), n.fns.end());
      testing::add_port(n, "0000:04:00.0", dsp + "/0000:04:00.0", testing::kUpstream, 5, 0x10b5, 0x9797);
      testing::add_port(n, "0000:05:00.0", dsp + "/0000:04:00.0/0000:05:00.0", testing::kDownstream, 6, 0x10b5, 0x9797).acs = true;
      testing::add_endpoint(n, "0000:06:00.0", dsp + "/0000:04:00.0/0000:05:00.0/0000:06:00.0", 0x15b3, 0x1021, 0x020700);
    }
    const std::string nic = pxb ? "0000:06:00.0" : kNic;
    for (auto& f : n.fns) {
      f.iommu_group = static_cast<int>(&f - &n.fns[0]);
      n.groups.push_back({f.iommu_group, f.bdf == nic ? "DMA" : "identity"});
      if (f.port_type == testing::kDownstream) f.acs_cap = dsp_cap;
    }
    return testing::from_entries(with_ats(n, nic, true));
  };
  for (const char* skip : {"ats-vm", "ats-translated", "ats"}) {
    SCOPED_TRACE(skip);
    CheckOptions o;
    o.skip = {skip};
    const PairResult p = only_pair(check(ats_node(true, 0x7f, false), kb(), o));
    EXPECT_EQ(finding(p, "ats-vm") != nullptr, std::string(skip) == "ats-translated");
    EXPECT_EQ(finding(p, "ats-translated") != nullptr, std::string(skip) == "ats-vm");
  }
  const PairResult pxb = only_pair(check(ats_node(false, 0x7f, true), kb(), CheckOptions{}));
  ASSERT_EQ(pxb.path.cls, PathClass::PXB);
  const Finding* f = finding(pxb, "ats-translated");
  ASSERT_TRUE(f);
  EXPECT_NE(f->reason.find("but ACS Direct Translated P2P is off on "), std::string::npos) << f->reason;
  for (const char* port : {"0000:02:00.0", "0000:02:01.0", "0000:05:00.0"}) EXPECT_NE(f->reason.find(port), std::string::npos) << port;
  const PairResult nodt = only_pair(check(ats_node(false, 0x3f, false), kb(), CheckOptions{}));
  const Finding* g = finding(nodt, "ats-translated");
  ASSERT_TRUE(g);
  EXPECT_NE(g->reason.find("translated peer requests can stay below the switch"), std::string::npos) << g->reason;
  FakeNode gpus = gpu_pair(0x2331, 0x2331, false);
  gpus.cpuinfo += "flags\t\t: fpu hypervisor\n";
  const PairResult gg = only_pair(check(testing::from_entries(with_ats(gpus, kNic, true)), kb(), CheckOptions{}));
  EXPECT_FALSE(finding(gg, "ats-vm"));
}

}  // namespace
}  // namespace gdrpeer::topo

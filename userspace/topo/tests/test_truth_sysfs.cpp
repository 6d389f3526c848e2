// The sysfs reader (sysfs_pci.cpp, sysfs_cpu.cpp, parse_sysfs.cpp) against independent truth:
//  - the real snapshots of tests/reference (a 4x H200 and an H100 node) against what lspci 3.9
//    decodes from the same config-space bytes (truth/*-lspci-vvv.txt) and what nvidia-smi
//    printed on the node (truth/h200x4-nvidia-smi-topo-m.txt);
//  - synthetic trees whose files are written the way the kernel writes them, the expected
//    reading following from the cited code: drivers/pci/pci-sysfs.c (resource_show,
//    pci_read_config: 64 bytes unprivileged; config, local_cpulist, numa_node), drivers/pci/pci.c
//    (__pci_find_next_cap_ttl, pci_find_next_ext_capability), include/linux/ioport.h (resource
//    flags), include/uapi/linux/pci_regs.h (register offsets), lib/bitmap-str.c (cpulist and
//    cpumask formats), arch/{x86,arm64,powerpc} /proc/cpuinfo printers, kernel/module/procfs.c
//    (/proc/modules), drivers/iommu/iommu.c (iommu_groups and their type names) and the RDMA
//    core's /sys/class/infiniband.
// Each test names the generated mutants (tests/mutation/generate.py) it was written to kill.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "gdrpeer/topo/errors.hpp"
#include "gdrpeer/topo/inputs.hpp"
#include "gdrpeer/topo/stack.hpp"
#include "sysfs_readers.hpp"
#include "test_topo_support.hpp"

namespace gdrpeer::topo {
namespace {

using testing::reference;
using testing::slurp;

// ---- synthetic trees ----

std::string hex_attr(unsigned v, int digits) {
  char b[32];
  std::snprintf(b, sizeof b, "0x%0*x\n", digits, v);  // pci-sysfs.c: "0x%04x\n", class "0x%06x\n"
  return b;
}

// A config space (4 KiB unless cut), written register by register as pci_regs.h lays it out.
struct Config {
  std::string b = std::string(4096, '\0');
  void u8(size_t off, unsigned v) { b[off] = static_cast<char>(v & 0xff); }
  void u16(size_t off, unsigned v) {
    u8(off, v);
    u8(off + 1, v >> 8);
  }
  void u32(size_t off, uint32_t v) {
    u16(off, v & 0xffff);
    u16(off + 2, v >> 16);
  }
  Config(uint16_t vendor = 0x15b3, uint16_t device = 0x1021) {
    u16(0x00, vendor);  // PCI_VENDOR_ID
    u16(0x02, device);  // PCI_DEVICE_ID
  }
  // Status bit 4 (PCI_STATUS_CAP_LIST) and the first capability (PCI_CAPABILITY_LIST, 0x34).
  void cap_list(unsigned first) {
    u16(0x06, 0x10);
    u8(0x34, first);
  }
  // A PCI Express capability (PCI_CAP_ID_EXP 0x10) at `at`: flags with the port type in bits 7:4
  // (PCI_EXP_FLAGS_TYPE), DevCap (+4, payload size bits 2:0), DevCtl (+8, payload bits 7:5,
  // read request bits 14:12), LnkCap (+0x0c, speed 3:0, width 9:4), LnkSta (+0x12, same).
  void pcie(size_t at, unsigned type, unsigned next = 0, unsigned lnk_speed = 4, unsigned lnk_width = 16) {
    u8(at, 0x10);
    u8(at + 1, next);
    u16(at + 2, 2u | (type << 4));
    u32(at + 4, 1);                       // MaxPayload 256 supported
    u16(at + 8, (1u << 5) | (2u << 12));  // MaxPayload 256, MaxReadReq 512
    u32(at + 0x0c, lnk_speed | (lnk_width << 4));
    u16(at + 0x12, lnk_speed | (lnk_width << 4));
  }
  // An extended capability header: id 15:0, version 19:16, next 31:20 (PCI_EXT_CAP_NEXT).
  void ext(size_t at, unsigned id, unsigned next) { u32(at, id | (1u << 16) | (next << 20)); }
  // A PCI Express function of port type `type` whose capability list starts with its PCI Express
  // capability at `at` (laid out as pcie() does): where most configs here start.
  static Config express(size_t at, unsigned type, unsigned next = 0, unsigned lnk_speed = 4, unsigned lnk_width = 16) {
    Config c;
    c.cap_list(static_cast<unsigned>(at));
    c.pcie(at, type, next, lnk_speed, lnk_width);
    return c;
  }
};

struct Node {
  std::vector<TarEntry> e{{TarEntry::Type::Directory, "sys/bus/pci/devices", ""}};
  void file(const std::string& p, const std::string& d) { e.push_back({TarEntry::Type::File, p, d}); }
  void link(const std::string& p, const std::string& d) { e.push_back({TarEntry::Type::Symlink, p, d}); }
  void dir(const std::string& p) { e.push_back({TarEntry::Type::Directory, p, ""}); }
  // A function at sysfs path `path` (below /sys/devices), linked from /sys/bus/pci/devices as
  // the kernel links it, with vendor/device/class attributes and its config file.
  void fn(const std::string& bdf, const std::string& path, const std::string& config, unsigned cls = 0x020000,
          const std::string& target = "") {
    link("sys/bus/pci/devices/" + bdf, target.empty() ? "../../../devices/" + path : target);
    const std::string d = "sys/devices/" + path;
    file(d + "/vendor", hex_attr(static_cast<uint8_t>(config[0]) | static_cast<uint8_t>(config[1]) << 8, 4));
    file(d + "/device", hex_attr(static_cast<uint8_t>(config[2]) | static_cast<uint8_t>(config[3]) << 8, 4));
    file(d + "/class", hex_attr(cls, 6));
    file(d + "/config", config);
  }
  // A function on root bus 0000:00 (sysfs path pci0000:00/<bdf>).
  void root_fn(const std::string& bdf, const std::string& config, unsigned cls = 0x020000) { fn(bdf, "pci0000:00/" + bdf, config, cls); }
  Topology read() const {
    auto fs = make_tar_fs(write_tar(e), "node.tar");
    return parse_sysfs(*fs, "node.tar");
  }
};

const Device& dev(const Topology& t, const std::string& bdf) {
  const int i = t.find(bdf);
  if (i < 0) throw std::runtime_error("no " + bdf);
  return t.devices[static_cast<size_t>(i)];
}

// ---- the real snapshots against lspci's decoding of the same bytes ----

struct LspciFunction {
  std::string bdf;
  std::string text;
};

// `lspci -F dump -vvv -nn` output, one block per function ("00:06.0 3D controller ...").
std::vector<LspciFunction> lspci_blocks(const std::string& text) {
  std::vector<LspciFunction> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line[0] != '\t' && line.size() > 7 && line[2] == ':' && line[5] == '.')
      out.push_back({"0000:" + line.substr(0, 7), ""});
    if (!out.empty()) out.back().text += line + "\n";
  }
  return out;
}

int match_int(const std::string& text, const std::string& re, int otherwise = -1) {
  std::smatch m;
  return std::regex_search(text, m, std::regex(re)) ? std::stoi(m[1]) : otherwise;
}

double gts(const std::string& s) { return s == "2.5" ? 2.5 : std::stod(s); }

// Every function of a real snapshot read as lspci decodes its config space: PCIe port type,
// payload sizes, link capability and status, ACS and ATS, whether the extended list was
// readable, bridge headers, and the memory BARs with their 64-bit and prefetchable flags.
void expect_as_lspci(const std::string& snapshot, const std::string& lspci) {
  auto fs = make_tar_fs(slurp(reference(snapshot)), snapshot);
  const Topology t = parse_sysfs(*fs, snapshot);
  const auto blocks = lspci_blocks(slurp(reference("truth/" + lspci)));
  ASSERT_EQ(blocks.size(), t.devices.size());
  for (const auto& b : blocks) {
    SCOPED_TRACE(snapshot + " " + b.bdf);
    const Device& d = dev(t, b.bdf);
    const bool express = b.text.find("Express (v2) Endpoint") != std::string::npos;
    ASSERT_EQ(b.text.find("Express ("), express ? b.text.find("Express (v2) Endpoint") : std::string::npos)
        << "only endpoints in these files";
    EXPECT_EQ(d.port, express ? PortType::Endpoint : PortType::Unknown);
    EXPECT_EQ(d.is_bridge, b.text.find("Bus: primary=") != std::string::npos);
    EXPECT_EQ(d.mps_cap, express ? match_int(b.text, R"(DevCap:\s+MaxPayload (\d+) bytes)") : 0);
    EXPECT_EQ(d.mps, express ? match_int(b.text, R"(\n\s+MaxPayload (\d+) bytes, MaxReadReq)") : 0);
    EXPECT_EQ(d.mrrs, express ? match_int(b.text, R"(MaxReadReq (\d+) bytes)") : 0);
    // LnkCap and LnkSta: speed and width as lspci prints them, 0 where it shows no such line.
    for (const auto& [got, re] : {std::pair{d.link_cap, R"(LnkCap:.*Speed ([\d.]+)GT/s, Width x(\d+))"},
                                  std::pair{d.link_sta, R"(LnkSta:\s+Speed ([\d.]+)GT/s, Width x(\d+))"}}) {
      SCOPED_TRACE(re);
      std::smatch m;
      const bool shown = std::regex_search(b.text, m, std::regex(re));
      EXPECT_EQ(got.speed_gts, shown ? gts(m[1]) : 0);
      EXPECT_EQ(got.width, shown ? std::stoi(m[2]) : 0);
    }
    // The extended list was read when lspci shows one ("Capabilities: [100 v0] Null" counts).
    const bool extended = std::regex_search(b.text, std::regex(R"(Capabilities: \[[1-9a-f][0-9a-f]{2} v)"));
    EXPECT_EQ(d.acs_known, express && extended);
    EXPECT_EQ(d.acs_present, b.text.find("Access Control Services") != std::string::npos);
    EXPECT_EQ(d.ats_present, b.text.find("Address Translation Service") != std::string::npos);
    // Memory regions lspci shows assigned ("Region 2: Memory at 100000000000 (64-bit, prefetchable)").
    std::vector<std::tuple<int, bool, bool>> want, got;
    const std::regex region(R"(Region (\d): Memory at [0-9a-f]+ \((32|64)-bit, (non-)?prefetchable\))");
    for (auto it = std::sregex_iterator(b.text.begin(), b.text.end(), region); it != std::sregex_iterator(); ++it)
      want.emplace_back(std::stoi((*it)[1]), (*it)[2] == "64", !(*it)[3].matched);
    for (const auto& bar : d.bars) got.emplace_back(bar.index, bar.is64, bar.prefetchable);
    EXPECT_EQ(got, want);
  }
}

TEST(TruthSysfsReal, H200SnapshotReadsAsLspciDecodesItsConfigSpace) {
  // Mutants: sysfs_pci.cpp u16le/u32le/load offsets, parse_config's capability offsets,
  // the extended walk (Null capabilities first, as this GPU has), the ACS/ATS branches.
  expect_as_lspci("h200x4-run2-snapshot.tar", "h200x4-run2-lspci-vvv.txt");
}

TEST(TruthSysfsReal, H100SnapshotReadsAsLspciDecodesItsConfigSpace) {
  expect_as_lspci("h100-node-snapshot.tar", "h100-node-lspci-vvv.txt");
}

// BAR sizes as resource_show writes them: "start end flags" per resource, size end - start + 1.
TEST(TruthSysfsReal, H200BarSizesFromTheResourceFile) {
  auto fs = make_tar_fs(slurp(reference("h200x4-run2-snapshot.tar")), "run2");
  const Topology t = parse_sysfs(*fs, "run2");
  const Device& gpu = dev(t, "0000:00:06.0");
  // sys/devices/pci0000:00/0000:00:06.0/resource of the snapshot: BAR0 0x104002000000-0x104002ffffff,
  // BAR2 0x100000000000-0x103fffffffff, BAR4 0x104000000000-0x104001ffffff.
  ASSERT_EQ(gpu.bars.size(), 3u);
  EXPECT_EQ(gpu.bars[0].size, 16ull << 20);
  EXPECT_EQ(gpu.bars[1].size, 256ull << 30);
  EXPECT_EQ(gpu.bars[2].size, 32ull << 20);
}

// nvidia-smi topo -m on the node: NUMA Affinity 0 and CPU Affinity 0-63 for every GPU, though
// sysfs says numa_node -1 (no SRAT in the VM) and node0 has no cpulist in the snapshot: one NUMA
// node, so every function is on it, and its CPUs are the online ones (a cpuinfo block each).
TEST(TruthSysfsReal, H200NumaAndCpuAffinityAsNvidiaSmiPrintsThem) {
  // Mutants: read_cpus n == 1 / d.numa < 0 / the online-CPU fallback and its conditions.
  auto fs = make_tar_fs(slurp(reference("h200x4-run2-snapshot.tar")), "run2");
  const Topology t = parse_sysfs(*fs, "run2");
  std::istringstream smi(slurp(reference("truth/h200x4-nvidia-smi-topo-m.txt")));
  std::vector<std::pair<std::string, int>> want;  // CPU Affinity, NUMA Affinity per GPUn row
  for (std::string line; std::getline(smi, line);) {
    std::istringstream w(line);
    std::vector<std::string> cols;
    for (std::string c; w >> c;) cols.push_back(c);
    if (cols.size() == 8 && cols[0].rfind("GPU", 0) == 0) want.emplace_back(cols[5], std::stoi(cols[6]));
  }
  ASSERT_EQ(want.size(), 4u);
  std::vector<std::string> gpus;  // nvidia-smi numbers GPUs in PCI bus order
  for (const auto& d : t.devices)
    if (d.vendor == 0x10de) gpus.push_back(d.bdf);
  std::sort(gpus.begin(), gpus.end());
  ASSERT_EQ(gpus.size(), 4u);
  for (size_t i = 0; i < gpus.size(); ++i) {
    EXPECT_EQ(dev(t, gpus[i]).cpu_affinity, want[i].first) << gpus[i];
    EXPECT_EQ(dev(t, gpus[i]).numa, want[i].second) << gpus[i];
  }
  // /proc/cpuinfo of the node (arch/x86/kernel/cpu/proc.c show_cpuinfo): the first block's
  // identity, one "physical id", and the hypervisor flag of a VM.
  EXPECT_EQ(testing::cpu_fields(t.cpu), testing::CpuFields("x86_64", "GenuineIntel", "Intel(R) Xeon(R) Processor", 6, 207, 1));
  EXPECT_TRUE(t.cpu.hypervisor);
  EXPECT_EQ(t.numa_nodes, 1);
}

// ---- symlinks as the kernel makes them, resolved as the file system would ----

// /sys/bus/pci/devices/<bdf> is a relative link into /sys/devices; "." components and doubled
// slashes name the same directory (path_resolution(7)), ".." at the root stays at the root.
TEST(TruthSysfsLinks, DotsDoubledSlashesAndAbsoluteTargetsResolveLikeTheFileSystem) {
  // Mutants: resolve's "." and empty components, ".." at the root, absolute targets, target[0].
  Node n;
  Config rp;
  rp.u8(0x0e, 1);
  rp.u8(0x19, 1);
  n.fn("0000:00:01.0", "pci0000:00/0000:00:01.0", rp.b, 0x060400, "../../.././devices/pci0000:00//0000:00:01.0/");
  n.fn("0000:01:00.0", "pci0000:00/0000:00:01.0/0000:01:00.0", Config().b, 0x020000,
       "/../sys/./devices/pci0000:00/0000:00:01.0/0000:01:00.0");
  const Topology t = n.read();
  const Device& port = dev(t, "0000:00:01.0");
  EXPECT_TRUE(port.ids_known);
  EXPECT_TRUE(port.is_bridge);
  const Device& nic = dev(t, "0000:01:00.0");
  EXPECT_TRUE(nic.ids_known);
  EXPECT_EQ(nic.vendor, 0x15b3);
  EXPECT_EQ(nic.parent, t.find("0000:00:01.0"));
}

// Without /sys/bus/pci/devices the input is not a sysfs tree: said so, not read as an empty node.
TEST(TruthSysfsLinks, NoPciDevicesFolderIsMissingInput) {
  // Mutants: read_pci_functions if (!entries) -> if (false).
  Node n;
  n.e.clear();
  n.file("proc/cpuinfo", "processor\t: 0\n");
  EXPECT_THROW(n.read(), MissingInput);
}

// A copy whose /sys/bus/pci/devices holds directories (no links) and a stray non-address name;
// a function whose parent bridge is missing from the copy: its root bus is still pci0000:00.
TEST(TruthSysfsLinks, HostBridgeFromThePathOrTheAddressAndStrayNames) {
  // Mutants: read_pci_functions !bdf, r.host_bridge.empty(), p >= 0 (parent absent).
  Node n;
  Config c;
  // A plain directory (cp -r without -P): the address gives the root bus 0000:00.
  n.file("sys/bus/pci/devices/0000:00:05.0/vendor", "0x15b3\n");
  n.file("sys/bus/pci/devices/0000:00:05.0/device", "0x1021\n");
  n.file("sys/bus/pci/devices/0000:00:05.0/class", "0x020000\n");
  n.file("sys/bus/pci/devices/README", "not a function\n");
  // Below a root port the copy lacks.
  n.fn("0000:03:00.0", "pci0000:00/0000:00:01.0/0000:03:00.0", c.b);
  const Topology t = n.read();
  ASSERT_EQ(t.devices.size(), 2u);
  const Device& flat = dev(t, "0000:00:05.0");
  ASSERT_GE(flat.host_bridge, 0);
  EXPECT_EQ(t.host_bridges[static_cast<size_t>(flat.host_bridge)].name, "0000:00");
  const Device& orphan = dev(t, "0000:03:00.0");
  EXPECT_EQ(orphan.parent, -1);
  ASSERT_GE(orphan.host_bridge, 0);
  EXPECT_EQ(t.host_bridges[static_cast<size_t>(orphan.host_bridge)].name, "0000:00");
}

// ---- config space as pci_regs.h lays it out, walked as drivers/pci/pci.c walks it ----

// The header type's bit 7 says multi-function; bits 6:0 the layout (1: PCI-to-PCI bridge with
// PCI_SECONDARY_BUS at 0x19). A 64-byte config file is what pci_read_config gives a reader
// without CAP_SYS_ADMIN: the header is there, the capabilities are not.
TEST(TruthSysfsConfig, MultiFunctionBridgeHeaderAndTheUnprivilegedSixtyFourBytes) {
  Node n;
  Config br = Config::express(0x40, 4);
  br.u8(0x0e, 0x81);
  br.u8(0x19, 0x42);
  br.b.resize(64);
  n.root_fn("0000:00:01.0", br.b, 0x060400);
  const Topology t = n.read();
  const Device& d = dev(t, "0000:00:01.0");
  EXPECT_TRUE(d.is_bridge);
  EXPECT_EQ(d.secondary_bus, 0x42);
  EXPECT_TRUE(d.port_inferred);  // not read: Topology::finalize() infers a root port
  EXPECT_FALSE(d.acs_known);
  EXPECT_EQ(d.link_cap.width, 0);
}

// __pci_bus_find_cap_start: without PCI_STATUS_CAP_LIST there is no capability list, whatever
// 0x34 holds; __pci_find_next_cap_ttl: a pointer below 0x40 ends the list.
TEST(TruthSysfsConfig, CapabilityListNeedsTheStatusBitAndPointersFrom0x40) {
  // Mutants: parse_config c.has(256) && status & 0x10 (its operands, if (true)); ptr >= 0x40
  // dropped or joined by ||.
  Node n;
  Config no_status;
  no_status.u8(0x34, 0x40);  // pointer set, status bit clear
  no_status.pcie(0x40, 0);
  n.root_fn("0000:00:02.0", no_status.b);
  Config low = Config::express(0x20, 0);  // below 0x40: the list is empty
  n.root_fn("0000:00:03.0", low.b);
  Config ok = Config::express(0x40, 0);
  n.root_fn("0000:00:04.0", ok.b);
  const Topology t = n.read();
  EXPECT_EQ(dev(t, "0000:00:02.0").port, PortType::Unknown);
  EXPECT_FALSE(dev(t, "0000:00:02.0").acs_known);
  EXPECT_EQ(dev(t, "0000:00:03.0").port, PortType::Unknown);
  EXPECT_EQ(dev(t, "0000:00:04.0").port, PortType::Endpoint);
  EXPECT_TRUE(dev(t, "0000:00:04.0").acs_known);
}

// The last capability slot of a 256-byte config: a PCI Express capability at 0xec ends at 0xff
// (LnkSta is its last register, 0x12-0x13) and is read whole; one cut by the end of a shorter
// (truncated) file is not read at all, so its port type stays unknown.
TEST(TruthSysfsConfig, PcieCapabilityAtTheEndOfTheStandardSpace) {
  // Mutants: parse_config ptr + 0x14 -> + 0x15 / + 0x13; has()'s byte arithmetic.
  Node n;
  Config end = Config::express(0xec, 4);
  end.b.resize(256);
  n.root_fn("0000:00:02.0", end.b, 0x060400);
  Config cut = Config::express(0xf0, 0);
  cut.b.resize(0xf0 + 0x13);  // LnkSta's high byte missing
  n.root_fn("0000:00:03.0", cut.b);
  const Topology t = n.read();
  EXPECT_EQ(dev(t, "0000:00:02.0").port, PortType::RootPort);
  EXPECT_EQ(dev(t, "0000:00:02.0").link_sta.width, 16);
  EXPECT_FALSE(dev(t, "0000:00:02.0").acs_known);  // 256 bytes: no extended space
  EXPECT_EQ(dev(t, "0000:00:03.0").port, PortType::Unknown);
}

// Every port type PCI_EXP_FLAGS_TYPE names (pci_regs.h: 0 endpoint, 1 legacy endpoint, 4 root
// port, 5 upstream, 6 downstream, 7 PCIe-to-PCI bridge, 8 PCI-to-PCIe bridge, 9 RC integrated
// endpoint, 10 RC event collector; 2, 3 and 11-15 reserved), and the link registers only where
// the device has a link (RC integrated endpoints and event collectors have none: LnkCap reads 0).
TEST(TruthSysfsConfig, EveryPortTypeAndLinkRegistersOnlyWithALink) {
  // Mutants: parse_config pt < 11 bound, kTypes index, the RC endpoint/event collector test.
  const std::map<unsigned, PortType> want = {{0, PortType::Endpoint},
                                             {1, PortType::LegacyEndpoint},
                                             {2, PortType::Unknown},
                                             {3, PortType::Unknown},
                                             {4, PortType::RootPort},
                                             {5, PortType::SwitchUpstream},
                                             {6, PortType::SwitchDownstream},
                                             {7, PortType::PcieToPciBridge},
                                             {8, PortType::PciToPcieBridge},
                                             {9, PortType::RootComplexEndpoint},
                                             {10, PortType::RootComplexEventCollector},
                                             {11, PortType::Unknown},
                                             {15, PortType::Unknown}};
  Node n;
  for (const auto& [type, port] : want) {
    Config c = Config::express(0x40, type, 0, 3, 8);
    char bdf[16], path[64];
    std::snprintf(bdf, sizeof bdf, "0000:00:%02x.0", type + 1);
    std::snprintf(path, sizeof path, "pci0000:00/%s", bdf);
    n.fn(bdf, path, c.b);
  }
  const Topology t = n.read();
  for (const auto& [type, port] : want) {
    char bdf[16];
    std::snprintf(bdf, sizeof bdf, "0000:00:%02x.0", type + 1);
    SCOPED_TRACE(bdf);
    const Device& d = dev(t, bdf);
    EXPECT_EQ(d.port, port);
    const bool link = port != PortType::RootComplexEndpoint && port != PortType::RootComplexEventCollector;
    EXPECT_EQ(d.link_cap.speed_gts, link ? 8.0 : 0);
    EXPECT_EQ(d.link_sta.width, link ? 8 : 0);
    EXPECT_EQ(d.mps, 256);
    EXPECT_EQ(d.mrrs, 512);
  }
}

// The sysfs link attributes win over LnkCap/LnkSta (the kernel's own reading, which knows
// speeds newer than the parser's table); "Unknown" leaves the config space's value.
TEST(TruthSysfsConfig, LinkAttributesFirstConfigSpaceForWhatTheyLeaveUnknown) {
  // Mutants: parse_config link_cap/link_sta == 0 guards and their literals; parse_speed.
  Node n;
  Config c = Config::express(0x40, 0, 0, 3, 8);  // config: 8 GT/s x8
  n.root_fn("0000:00:02.0", c.b);
  const std::string d = "sys/devices/pci0000:00/0000:00:02.0";
  n.file(d + "/max_link_speed", "64.0 GT/s PCIe\n");  // PCIE_SPEED2STR: Gen6
  n.file(d + "/max_link_width", "16\n");
  n.file(d + "/current_link_speed", "Unknown\n");  // pci_speed_string(PCI_SPEED_UNKNOWN)
  n.file(d + "/current_link_width", "4\n");
  // PCIe 7.0: 128 GT/s, Supported/Current Link Speed encoding 0111b, which the config-space
  // table does not know (it reads 0) and the kernel's attribute names.
  Config gen7 = Config::express(0x40, 0, 0, 7, 16);
  n.root_fn("0000:00:03.0", gen7.b);
  const std::string d7 = "sys/devices/pci0000:00/0000:00:03.0";
  n.file(d7 + "/max_link_speed", "128.0 GT/s PCIe\n");
  n.file(d7 + "/current_link_speed", "128.0 GT/s PCIe\n");
  const Topology t = n.read();
  EXPECT_EQ(dev(t, "0000:00:03.0").link_cap.speed_gts, 128.0);
  EXPECT_EQ(dev(t, "0000:00:03.0").link_sta.speed_gts, 128.0);
  EXPECT_EQ(dev(t, "0000:00:03.0").link_sta.width, 16);
  const Device& x = dev(t, "0000:00:02.0");
  EXPECT_EQ(x.link_cap.speed_gts, 64.0);
  EXPECT_EQ(x.link_cap.width, 16);
  EXPECT_EQ(x.link_sta.speed_gts, 8.0);
  EXPECT_EQ(x.link_sta.width, 4);
}

// pci_find_next_ext_capability: the list starts at 0x100, a next pointer below 0x100 ends it,
// a header of 0 (no capabilities) or all ones ends it. An ACS capability's registers: capability
// at +4, control at +6; ATS: control at +6 with Enable in bit 15 (PCIe base spec 7.8.7, 10.5.1).
TEST(TruthSysfsConfig, ExtendedListAcsAndAtsAsTheKernelWalksIt) {
  // Mutants: parse_config extended-walk bounds (off >= 0x100, has(off + 8), the loop's &&),
  // id == 0x0d / 0x0f and their branches, the ATS enable bit, off == 0.
  Node n;
  auto port = [&](const std::string& bdf, const Config& c) { n.fn(bdf, "pci0000:00/" + bdf, c.b, 0x060400); };
  Config acs_then_ats = Config::express(0x40, 6);  // AER -> ACS -> ATS (enabled)
  acs_then_ats.ext(0x100, 0x0001, 0x148);
  acs_then_ats.ext(0x148, 0x000d, 0x200);
  acs_then_ats.u16(0x14c, 0x005f);
  acs_then_ats.u16(0x14e, 0x001d);
  acs_then_ats.ext(0x200, 0x000f, 0);
  acs_then_ats.u16(0x206, 0x8000);
  port("0000:00:02.0", acs_then_ats);
  Config ats_off = Config::express(0x40, 0);  // ATS first, not enabled; no ACS
  ats_off.ext(0x100, 0x000f, 0);
  ats_off.u16(0x106, 0x001f);  // STU set, Enable clear
  port("0000:00:03.0", ats_off);
  // A next pointer into the standard space (0x60, where an SSVID capability, id 0x0d, sits):
  // pci_find_next_ext_capability stops there.
  Config below = Config::express(0x40, 6, 0x60);
  below.u8(0x60, 0x0d);
  below.ext(0x100, 0x0001, 0x060);
  port("0000:00:04.0", below);
  // ACS in the last 8 bytes of the 4 KiB (0xff8-0xfff): read; the header "all ones" after it ends.
  Config last = Config::express(0x40, 6);
  last.ext(0x100, 0x0001, 0xff8);
  last.ext(0xff8, 0x000d, 0);
  last.u16(0xffc, 0x0001);
  last.u16(0xffe, 0x0001);
  port("0000:00:05.0", last);
  // An ACS header at 0xffc has no room for its registers: not a capability.
  Config over = Config::express(0x40, 6);
  over.ext(0x100, 0x0001, 0xffc);
  over.ext(0xffc, 0x000d, 0);
  port("0000:00:06.0", over);
  // A looping list (AER pointing to itself) ends.
  Config loop = Config::express(0x40, 6);
  loop.ext(0x100, 0x0001, 0x100);
  port("0000:00:07.0", loop);
  const Topology t = n.read();
  const Device& a = dev(t, "0000:00:02.0");
  EXPECT_TRUE(a.acs_known && a.acs_present);
  EXPECT_EQ(a.acs_cap, 0x005f);
  EXPECT_EQ(a.acs_ctl, 0x001d);
  EXPECT_TRUE(a.ats_present && a.ats_enabled);
  const Device& b = dev(t, "0000:00:03.0");
  EXPECT_TRUE(b.acs_known);
  EXPECT_FALSE(b.acs_present);
  EXPECT_TRUE(b.ats_present);
  EXPECT_FALSE(b.ats_enabled);
  EXPECT_TRUE(dev(t, "0000:00:04.0").acs_known);
  EXPECT_FALSE(dev(t, "0000:00:04.0").acs_present);
  EXPECT_TRUE(dev(t, "0000:00:05.0").acs_present);
  EXPECT_EQ(dev(t, "0000:00:05.0").acs_cap, 0x0001);
  EXPECT_EQ(dev(t, "0000:00:05.0").acs_ctl, 0x0001);
  EXPECT_TRUE(dev(t, "0000:00:06.0").acs_known);
  EXPECT_FALSE(dev(t, "0000:00:06.0").acs_present);
  EXPECT_FALSE(dev(t, "0000:00:07.0").acs_present);
}

// __pci_find_next_cap_ttl follows at most 48 pointers (PCI_FIND_CAP_TTL) and
// pci_find_capability answers the first capability of the id: a PCI Express capability in the
// 48th and last slot (0xfc) of a chain through every slot from 0x40 is found; of two, the first.
TEST(TruthSysfsConfig, FirstPcieCapabilityWithinFortyEightHops) {
  // Mutants: parse_config guard < 48 -> < 47; the first-found rule (sysfs_pci.cpp's break).
  Node n;
  Config chain;
  chain.cap_list(0x40);
  for (unsigned at = 0x40; at < 0xfc; at += 4) {
    chain.u8(at, 0x09);  // vendor-specific
    chain.u8(at + 1, at + 4);
  }
  chain.pcie(0xfc, 6);
  n.root_fn("0000:00:02.0", chain.b, 0x060400);
  Config two = Config::express(0x40, 0, 0x60, 3, 8);
  two.pcie(0x60, 4, 0, 4, 16);
  n.root_fn("0000:00:03.0", two.b);
  Config loop;  // a list pointing back at itself, without a PCI Express capability: ends
  loop.cap_list(0x40);
  loop.u8(0x40, 0x09);
  loop.u8(0x41, 0x40);
  n.root_fn("0000:00:04.0", loop.b);
  const Topology t = n.read();
  EXPECT_EQ(dev(t, "0000:00:04.0").port, PortType::Unknown);
  EXPECT_EQ(dev(t, "0000:00:02.0").port, PortType::SwitchDownstream);
  EXPECT_EQ(dev(t, "0000:00:03.0").port, PortType::Endpoint);
  EXPECT_EQ(dev(t, "0000:00:03.0").link_cap.width, 8);
}

// pci_find_next_ext_capability: at most (4096 - 256) / 8 = 480 headers. An ACS capability as
// the 480th header of a chain is found, as the 481st it is not.
TEST(TruthSysfsConfig, ExtendedListEndsAfterFourHundredEightyHeaders) {
  // Mutants: parse_config guard < 480 -> <= 480, < 481, < 479.
  Node n;
  for (unsigned hops : {480u, 481u}) {
    Config c = Config::express(0x40, 6);
    const unsigned last = 0x100 + 4 * (hops - 1);
    for (unsigned at = 0x100; at < last; at += 4) c.ext(at, 0x000b, at + 4);  // vendor-specific, 4 apart
    c.ext(last, 0x000d, 0);
    c.u16(last + 4, 0x001f);
    char bdf[16];
    std::snprintf(bdf, sizeof bdf, "0000:00:%02x.0", hops == 480 ? 2 : 3);
    n.fn(bdf, std::string("pci0000:00/") + bdf, c.b, 0x060400);
  }
  const Topology t = n.read();
  EXPECT_TRUE(dev(t, "0000:00:02.0").acs_present);
  EXPECT_EQ(dev(t, "0000:00:02.0").acs_cap, 0x001f);
  EXPECT_TRUE(dev(t, "0000:00:03.0").acs_known);
  EXPECT_FALSE(dev(t, "0000:00:03.0").acs_present);
}

// The reader reads config space a dword at a time and each dword once ("Several chips lock up
// trying to read undefined config space", pci-sysfs.c pci_read_config): on the real H200 GPU
// every read is an aligned dword, none twice.
TEST(TruthSysfsConfig, ConfigSpaceReadADwordAtATimeEachOnce) {
  // Mutants: ConfigSpace::load got_[dword] < 0 -> if (true), < -1.
  struct Counting : InputFs {
    std::unique_ptr<InputFs> in;
    std::map<size_t, int> reads;
    bool aligned = true;
    struct Range : FileRange {
      std::unique_ptr<FileRange> r;
      Counting* owner;
      size_t read(size_t off, char* buf, size_t len) override {
        owner->reads[off]++;
        owner->aligned = owner->aligned && off % 4 == 0 && len == 4;
        return r->read(off, buf, len);
      }
    };
    std::unique_ptr<FileRange> open_range(const std::string& p, size_t m) override {
      auto r = in->open_range(p, m);
      if (!r || p.find("0000:00:06.0/config") == std::string::npos) return r;
      auto c = std::make_unique<Range>();
      c->r = std::move(r);
      c->owner = this;
      return c;
    }
    std::optional<std::string> read(const std::string& p, size_t m) override { return in->read(p, m); }
    std::optional<std::string> readlink(const std::string& p) override { return in->readlink(p); }
    std::optional<std::vector<std::string>> list(const std::string& p) override { return in->list(p); }
    std::string describe() const override { return "counting"; }
  } fs;
  fs.in = make_tar_fs(slurp(reference("h200x4-run2-snapshot.tar")), "run2");
  const Topology t = parse_sysfs(fs, "run2");
  EXPECT_EQ(dev(t, "0000:00:06.0").port, PortType::Endpoint);
  EXPECT_TRUE(fs.aligned);
  ASSERT_FALSE(fs.reads.empty());
  for (const auto& [off, times] : fs.reads) EXPECT_EQ(times, 1) << "dword at " << off;
}

// A config file shorter than any the kernel writes (64, 128 for CardBus, 256 or 4096 bytes) is
// a damaged copy: with the standard space incomplete its capability list is not read, with the
// header incomplete nothing is.
TEST(TruthSysfsConfig, DamagedStandardSpaceGivesNoCapabilities) {
  // Mutants: ConfigSpace::has load(last / 4) > last % 4 -> >=, n - 1 -> n - 2 / n; if (!c.has(64)) -> if (false).
  Node n;
  Config c = Config::express(0x40, 4);
  c.b.resize(255);
  n.root_fn("0000:00:02.0", c.b, 0x060400);
  Config header;  // cut inside the 64-byte header: not even the header type is taken from it
  header.u8(0x0e, 1);
  header.u8(0x19, 5);
  header.b.resize(32);
  n.root_fn("0000:00:03.0", header.b, 0x060400);
  const Topology t = n.read();
  EXPECT_EQ(dev(t, "0000:00:02.0").port, PortType::Unknown);
  EXPECT_EQ(dev(t, "0000:00:02.0").mps, 0);
  EXPECT_FALSE(dev(t, "0000:00:03.0").is_bridge);
  EXPECT_EQ(dev(t, "0000:00:03.0").secondary_bus, -1);
}

// ---- attributes ----

// resource_show: one "0x%016llx 0x%016llx 0x%016llx\n" line per resource; the first six are
// the BARs, then the ROM (6) and a bridge's windows. ioport.h: IORESOURCE_IO 0x100,
// IORESOURCE_MEM 0x200, IORESOURCE_PREFETCH 0x2000, IORESOURCE_MEM_64 0x100000.
TEST(TruthSysfsAttrs, ResourceLinesBarsOnlyMemoryOnlyTheFirstSix) {
  // Mutants: read_pci_functions idx < 6 and its &&, flags & 0x200 && end > start, the size's + 1,
  // prefetchable and 64-bit tests.
  Node n;
  n.root_fn("0000:00:02.0", Config().b);
  n.file("sys/devices/pci0000:00/0000:00:02.0/resource",
         "0x000000000000e000 0x000000000000e01f 0x0000000000040101\n"  // BAR0: I/O ports
         "0x00000000f8000000 0x00000000f8ffffff 0x0000000000040200\n"  // BAR1: 16 MiB, 32-bit, not prefetchable
         "0x0000000000000000 0x0000000000000000 0x0000000000000200\n"  // BAR2: memory, empty
         "0x0000000000000000 0x0000000000000000 0x0000000000000000\n"  // BAR3: none
         "0x0000000000000000 0x0000000000000000 0x0000000000000000\n"  // BAR4: none
         "0x0000200000000000 0x00002000000fffff 0x000000000014220c\n"  // BAR5: 1 MiB, 64-bit prefetchable
         "0x00000000fb000000 0x00000000fb0fffff 0x0000000000046200\n"  // ROM
         "0x0000000000000000 0x0000000000000000 0x0000000000000000\n");
  const Topology t = n.read();
  const auto& bars = dev(t, "0000:00:02.0").bars;
  ASSERT_EQ(bars.size(), 2u);
  EXPECT_EQ(bars[0].index, 1);
  EXPECT_EQ(bars[0].size, 16ull << 20);
  EXPECT_FALSE(bars[0].prefetchable);
  EXPECT_FALSE(bars[0].is64);
  EXPECT_EQ(bars[1].index, 5);
  EXPECT_EQ(bars[1].size, 1ull << 20);
  EXPECT_TRUE(bars[1].prefetchable);
  EXPECT_TRUE(bars[1].is64);
}

// A resource file not in resource_show's format, and hex attributes that are not hex, are
// input errors naming the file (and the resource's line). The kernel creates vendor and device
// for every function (drivers/pci/pci-sysfs.c pci_dev_attrs), and lspci refuses a function
// without either (pciutils lib/sysfs.c sysfs_fill_info reads both as mandatory): a copy holding
// one of the two is incomplete, an error naming the missing file; one holding neither (a
// hand-made tree) leaves the ids unknown.
TEST(TruthSysfsAttrs, MalformedResourceAndIdsAreErrorsMissingIdsAreUnknown) {
  // Mutants: sscanf != 3 and its throw, idx + 1, hex()'s s.empty() || *e, !v.
  {
    Node n;
    n.root_fn("0000:00:02.0", Config().b);
    n.file("sys/devices/pci0000:00/0000:00:02.0/resource",
           "0x0000000000000000 0x0000000000000000 0x0000000000000000\n0x00000000f8000000 0x00000000f8ffffff\n");
    try {
      n.read();
      FAIL() << "no error";
    } catch (const InputError& e) {
      EXPECT_EQ(e.line(), 2);
      EXPECT_NE(std::string(e.what()).find("0000:00:02.0/resource"), std::string::npos) << e.what();
    }
  }
  for (const std::string bad : {"0x15g3\n", "\n", "0x15b3 0x1021\n"}) {
    Node n;
    n.root_fn("0000:00:02.0", Config().b);
    n.e.erase(std::remove_if(n.e.begin(), n.e.end(), [](const TarEntry& x) { return x.path.ends_with("/vendor"); }), n.e.end());
    n.file("sys/devices/pci0000:00/0000:00:02.0/vendor", bad);
    EXPECT_THROW(n.read(), InputError) << bad;
  }
  for (const auto& [gone, there] : {std::pair<std::string, std::string>{"device", "vendor"}, {"vendor", "device"}}) {
    Node n;
    n.root_fn("0000:00:02.0", Config().b);
    n.e.erase(std::remove_if(n.e.begin(), n.e.end(), [&](const TarEntry& x) { return x.path.ends_with("/" + gone); }), n.e.end());
    try {
      n.read();
      ADD_FAILURE() << "no error without " << gone;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("0000:00:02.0/" + gone + ": missing, while " + there + " is there"), std::string::npos)
          << e.what();
    }
  }
  Node n;
  n.root_fn("0000:00:02.0", Config().b);
  n.e.erase(std::remove_if(
                n.e.begin(), n.e.end(),
                [](const TarEntry& x) { return x.path.ends_with("/vendor") || x.path.ends_with("/device") || x.path.ends_with("/class"); }),
            n.e.end());
  n.file("sys/devices/pci0000:00/0000:00:02.0/subsystem_vendor", "0x10de\n");
  n.file("sys/devices/pci0000:00/0000:00:02.0/subsystem_device", "0x1234\n");
  const Topology t = n.read();
  const Device& d = dev(t, "0000:00:02.0");
  EXPECT_FALSE(d.ids_known);  // vendor and device missing
  EXPECT_EQ(d.vendor, 0);
  EXPECT_FALSE(d.class_known);
  EXPECT_EQ(d.subsys_vendor, 0x10de);
  EXPECT_EQ(d.subsys_device, 0x1234);
}

// ---- CPU lists and masks as lib/bitmap-str.c prints and parses them ----

using sysfs::CpuSet;
using sysfs::format_cpulist;
using sysfs::parse_cpulist;
using sysfs::parse_cpumask;

CpuSet cpus(std::initializer_list<int> ids) {
  CpuSet s;
  for (int i : ids) {
    if (s.size() <= static_cast<size_t>(i)) s.resize(static_cast<size_t>(i) + 1);
    s[static_cast<size_t>(i)] = true;
  }
  return s;
}

// "%*pbl": ranges of two or more as a-b, single CPUs alone, comma-separated, ascending.
TEST(TruthCpuLists, ListFormatAsTheKernelPrintsIt) {
  // Mutants: format_cpulist's bounds, the range test j > i, the separators.
  EXPECT_EQ(format_cpulist(cpus({0, 1, 2, 3, 8, 9, 10, 11})), "0-3,8-11");
  EXPECT_EQ(format_cpulist(cpus({5})), "5");
  EXPECT_EQ(format_cpulist(cpus({0, 1})), "0-1");
  EXPECT_EQ(format_cpulist(cpus({1, 3, 4, 6})), "1,3-4,6");
  EXPECT_EQ(format_cpulist(cpus({63})), "63");
  EXPECT_EQ(format_cpulist(CpuSet(8, false)), "");
}

// bitmap_parselist: "a", "a-b" (b >= a; a reversed range is -EINVAL), comma-separated in any
// order; anything else is not a list.
TEST(TruthCpuLists, ListParseAcceptsTheKernelsFormOnly) {
  // Mutants: parse_cpulist's strtoul checks, '-', hi < lo, the size bound, c <= hi.
  EXPECT_EQ(parse_cpulist("0-3,8-11"), cpus({0, 1, 2, 3, 8, 9, 10, 11}));
  EXPECT_EQ(parse_cpulist("7"), cpus({7}));
  EXPECT_EQ(parse_cpulist("2-2"), cpus({2}));
  EXPECT_EQ(parse_cpulist("0,2-3"), cpus({0, 2, 3}));
  EXPECT_EQ(parse_cpulist("65535").size(), 65536u);
  EXPECT_EQ(parse_cpulist("5,2"), cpus({2, 5}));  // any order
  for (const char* bad : {"3-1", "0,3-1", "x", "0-", "1-", "1-x", "1,,2", "1 2", "65536", "0-65536", "-1", "4a"})
    EXPECT_TRUE(parse_cpulist(bad).empty()) << bad;
}

// "%*pb": 32-bit words in hex, most significant first, comma-separated (cpumap_print_to_pagebuf).
TEST(TruthCpuLists, MaskWordsMostSignificantFirst) {
  // Mutants: parse_cpumask's word count bound, base index, the bit loop.
  EXPECT_EQ(parse_cpumask("ffffffff,00000000"), [] {
    CpuSet s(64);
    for (size_t i = 32; i < 64; ++i) s[i] = true;
    return s;
  }());
  EXPECT_EQ(parse_cpumask("00000001,80000000"), cpus({31, 32}));
  EXPECT_EQ(parse_cpumask("0000000f"), cpus({0, 1, 2, 3}));
  EXPECT_EQ(parse_cpumask("80000000"), cpus({31}));
  std::string full(2048 * 9 - 1, '0');  // 2048 words = 65536 CPUs: the most accepted
  for (size_t i = 8; i < full.size(); i += 9) full[i] = ',';
  full[full.size() - 1] = '1';
  EXPECT_EQ(parse_cpumask(full), cpus({0}));
  EXPECT_TRUE(parse_cpumask(full + ",00000001").empty());  // 2049 words
  for (const char* bad : {"", "xyz", "ff,,ff", "ffffffff,zz"}) EXPECT_TRUE(parse_cpumask(bad).empty()) << bad;
}

// ---- NUMA nodes and the CPUs (Documentation/ABI/stable/sysfs-devices-node) ----

Node numa_node_tree(int nodes, const std::vector<std::string>& cpulists) {
  Node n;
  n.dir("sys/devices/system/node");
  for (int i = 0; i < nodes; ++i) {
    n.dir("sys/devices/system/node/node" + std::to_string(i));
    if (static_cast<size_t>(i) < cpulists.size())
      n.file("sys/devices/system/node/node" + std::to_string(i) + "/cpulist", cpulists[static_cast<size_t>(i)] + "\n");
  }
  // The node directory's other entries are not nodes: the kernel's (has_*, online, possible,
  // power, uevent), and any other name that is not node<N>.
  for (const char* f : {"has_cpu", "has_memory", "has_normal_memory", "online", "possible", "misc0", "nodemask"})
    n.file(std::string("sys/devices/system/node/") + f, "0-1\n");
  n.dir("sys/devices/system/node/power");
  return n;
}

TEST(TruthNumaNodes, NodeFoldersCountAndGiveTheirCpusToTheirFunctions) {
  // Mutants: read_cpus' "node" prefix/size/digit tests and e.c_str() + 4, node_cpus lookup;
  // locality_from_cpus placed > 0 -> > 1 (one function placed).
  Node n = numa_node_tree(2, {"0-15", "16-31"});
  n.fn("0000:20:00.0", "pci0000:20/0000:20:00.0", Config().b);
  n.file("sys/devices/pci0000:20/0000:20:00.0/numa_node", "1\n");
  n.fn("0000:30:00.0", "pci0000:30/0000:30:00.0", Config().b);  // on a root bus of its own
  n.file("sys/devices/pci0000:30/0000:30:00.0/numa_node", "-1\n");
  n.fn("0000:40:00.0", "pci0000:40/0000:40:00.0", Config().b);  // no numa_node: its CPUs say node 0
  n.file("sys/devices/pci0000:40/0000:40:00.0/local_cpulist", "0-15\n");
  const Topology t = n.read();
  EXPECT_EQ(dev(t, "0000:40:00.0").numa, 0);
  ASSERT_EQ(t.notes.size(), 1u);
  EXPECT_NE(t.notes[0].find("numa_node missing for 1 device(s): NUMA node of 1 taken"), std::string::npos) << t.notes[0];
  EXPECT_EQ(t.numa_nodes, 2);
  EXPECT_EQ(dev(t, "0000:20:00.0").numa, 1);
  EXPECT_EQ(dev(t, "0000:20:00.0").cpu_affinity, "16-31");
  EXPECT_EQ(dev(t, "0000:30:00.0").numa, -1);  // two nodes: -1 stays unknown
  EXPECT_EQ(dev(t, "0000:30:00.0").cpu_affinity, "");
}

// Functions 0000:20:00.0, 0000:30:00.0 and 0000:40:00.0, one per host bridge, with these
// numa_node files in that order.
void add_functions_with_numa_nodes(Node& n, const std::array<const char*, 3>& numa_nodes) {
  const char* buses[] = {"20", "30", "40"};
  for (size_t i = 0; i < 3; ++i) {
    const std::string path = std::string("pci0000:") + buses[i] + "/0000:" + buses[i] + ":00.0";
    n.fn(std::string("0000:") + buses[i] + ":00.0", path, Config().b);
    n.file("sys/devices/" + path + "/numa_node", std::string(numa_nodes[i]) + "\n");
  }
}

// The kernel makes a node folder for each online node only (drivers/base/node.c node_dev_init():
// for_each_online_node() register_one_node(); memory hotplug's try_offline_node() unregisters it).
// x86 never hands a function an offline node (arch/x86/pci/acpi.c: !node_online() -> NUMA_NO_NODE,
// as pci-sysfs.c numa_node_store() refuses one), arm64 takes a root bus's node from _PXM
// (arch/arm64/kernel/pci.c, acpi_get_node()) without that check. So a numa_node naming a node
// without a folder names a node that is not online: no CPUs or memory this input knows are local
// to the function, and its node is unknown (with a note), not the one node there is nor the
// number it names. numa_node -1 on a one-node machine is that node's, whatever its number.
TEST(TruthNumaNodes, NumaNodeOfANodeWithoutAFolderIsUnknown) {
  // Mutants: read_cpus' one-node fill (if (d.numa < 0) -> if (true), <= 0) and the folder check.
  Node one = numa_node_tree(1, {"0-15"});
  one.fn("0000:20:00.0", "pci0000:20/0000:20:00.0", Config().b);
  one.file("sys/devices/pci0000:20/0000:20:00.0/numa_node", "1\n");  // node1: no folder
  one.fn("0000:30:00.0", "pci0000:30/0000:30:00.0", Config().b);
  one.file("sys/devices/pci0000:30/0000:30:00.0/numa_node", "-1\n");
  const Topology t = one.read();
  EXPECT_EQ(t.numa_nodes, 1);
  EXPECT_EQ(dev(t, "0000:20:00.0").numa, -1);
  EXPECT_EQ(dev(t, "0000:20:00.0").cpu_affinity, "");
  EXPECT_EQ(dev(t, "0000:30:00.0").numa, 0);
  EXPECT_EQ(dev(t, "0000:30:00.0").cpu_affinity, "0-15");
  ASSERT_EQ(t.notes.size(), 1u);
  EXPECT_EQ(t.notes[0],
            "numa_node names a NUMA node without a /sys/devices/system/node folder (not online) for 0000:20:00.0 (numa_node 1): "
            "not taken as their NUMA node");
  // The one online node is node1 (node 0 offline): numa_node -1 is on node1, numa_node 0 on no
  // node this input has; node1's CPUs are the online ones of /proc/cpuinfo without its cpulist.
  for (const bool listed : {true, false}) {
    Node n;
    n.dir("sys/devices/system/node/node1");
    if (listed) n.file("sys/devices/system/node/node1/cpulist", "0-3\n");
    n.file("proc/cpuinfo", "processor\t: 0\n\nprocessor\t: 1\n\nprocessor\t: 2\n\nprocessor\t: 3\n");
    add_functions_with_numa_nodes(n, {"-1", "0", "1"});
    const Topology u = n.read();
    EXPECT_EQ(u.numa_nodes, 1);
    EXPECT_EQ(dev(u, "0000:20:00.0").numa, 1) << listed;
    EXPECT_EQ(dev(u, "0000:20:00.0").cpu_affinity, "0-3") << listed;
    EXPECT_EQ(dev(u, "0000:30:00.0").numa, -1) << listed;
    EXPECT_EQ(dev(u, "0000:40:00.0").numa, 1) << listed;
    ASSERT_EQ(u.notes.size(), 1u);
    EXPECT_NE(u.notes[0].find(" 0000:30:00.0 (numa_node 0): "), std::string::npos) << u.notes[0];
  }
  // Two nodes, a function naming a third: unknown too; two such functions, one note naming both.
  Node two = numa_node_tree(2, {"0-15", "16-31"});
  add_functions_with_numa_nodes(two, {"3", "1", "2"});
  const Topology w = two.read();
  EXPECT_EQ(dev(w, "0000:20:00.0").numa, -1);
  EXPECT_EQ(dev(w, "0000:30:00.0").numa, 1);
  EXPECT_EQ(dev(w, "0000:30:00.0").cpu_affinity, "16-31");
  EXPECT_EQ(dev(w, "0000:40:00.0").numa, -1);
  ASSERT_EQ(w.notes.size(), 1u);
  EXPECT_NE(w.notes[0].find(" for 0000:20:00.0 (numa_node 3), 0000:40:00.0 (numa_node 2): "), std::string::npos) << w.notes[0];
  // A node directory without any node folder (a copy that skipped them) says nothing of which
  // nodes are online: numa_node stays as read, no note.
  Node bare;
  bare.dir("sys/devices/system/node");
  bare.file("sys/devices/system/node/online", "0-1\n");
  bare.fn("0000:20:00.0", "pci0000:20/0000:20:00.0", Config().b);
  bare.file("sys/devices/pci0000:20/0000:20:00.0/numa_node", "1\n");
  const Topology b = bare.read();
  EXPECT_EQ(b.numa_nodes, 0);
  EXPECT_EQ(dev(b, "0000:20:00.0").numa, 1);
  EXPECT_TRUE(b.notes.empty());
}

// A function's own local_cpulist (or, without it, local_cpus as a mask) is its CPU affinity;
// without numa_node its node is the one node its CPUs meet (hwloc's placement). CPUs meeting two
// nodes, or none, leave the node unknown.
TEST(TruthNumaNodes, NodeFromLocalCpusWhereNumaNodeIsMissing) {
  // Mutants: read_pci_functions if (local) (both), locality_from_cpus with node folders:
  // intersects, count == 1, placed > 0 and the note.
  Node n = numa_node_tree(2, {"0-15", "16-31"});
  auto fn = [&](const std::string& bus, const std::string& file, const std::string& v) {  // a root bus each
    const std::string path = "pci0000:" + bus + "/0000:" + bus + ":00.0";
    n.fn("0000:" + bus + ":00.0", path, Config().b);
    n.file("sys/devices/" + path + "/" + file, v + "\n");
  };
  fn("20", "local_cpulist", "16-23");
  fn("30", "local_cpus", "00000000,0000ff00");  // CPUs 8-15
  fn("40", "local_cpulist", "8-23");            // both nodes
  fn("50", "local_cpulist", "40-47");           // neither
  const Topology t = n.read();
  EXPECT_EQ(dev(t, "0000:20:00.0").numa, 1);
  EXPECT_EQ(dev(t, "0000:20:00.0").cpu_affinity, "16-23");
  EXPECT_EQ(dev(t, "0000:30:00.0").numa, 0);
  EXPECT_EQ(dev(t, "0000:30:00.0").cpu_affinity, "8-15");
  EXPECT_EQ(dev(t, "0000:40:00.0").numa, -1);
  EXPECT_EQ(dev(t, "0000:50:00.0").numa, -1);
  ASSERT_EQ(t.notes.size(), 1u);
  EXPECT_NE(t.notes[0].find("numa_node missing for 4 device(s): NUMA node of 2 taken"), std::string::npos) << t.notes[0];
  EXPECT_EQ(t.notes[0].find("first appearance"), std::string::npos);
}

// Without node folders (a copy that skipped them): pairwise disjoint CPU sets are distinct
// nodes, numbered by first appearance; overlapping sets, an empty set or a single set say
// nothing. Nothing placed, no note.
TEST(TruthNumaNodes, WithoutNodeFoldersOnlyDisjointSetsAreNodes) {
  // Mutants: locality_from_cpus' no-folder branch: empty_set, *d == cpus, intersects, seen,
  // disjoint && distinct.size() > 1, numbering, t.numa_nodes == 0 (node folders without cpulist).
  auto tree = [](const std::vector<std::string>& lists) {
    Node n;
    for (size_t i = 0; i < lists.size(); ++i) {
      char path[64];  // a root bus each
      std::snprintf(path, sizeof path, "pci0000:%02zx/0000:%02zx:00.0", 0x20 + i, 0x20 + i);
      n.fn(std::string(path).substr(11), path, Config().b);
      n.file(std::string("sys/devices/") + path + "/local_cpulist", lists[i] + "\n");
    }
    return n.read();
  };
  const Topology two = tree({"32-63", "0-31", "32-63"});
  EXPECT_EQ(two.devices[0].numa, 0);
  EXPECT_EQ(two.devices[1].numa, 1);
  EXPECT_EQ(two.devices[2].numa, 0);
  EXPECT_EQ(two.numa_nodes, 2);
  ASSERT_EQ(two.notes.size(), 1u);
  EXPECT_NE(two.notes[0].find("numa_node missing for 3 device(s): NUMA node of 3 taken"), std::string::npos);
  EXPECT_NE(two.notes[0].find("numbered by first appearance"), std::string::npos);
  // Node folders without cpulist files: the folders still count the nodes.
  Node folders = numa_node_tree(2, {});
  for (const char* bus : {"20", "30", "40"}) {
    const std::string path = std::string("pci0000:") + bus + "/0000:" + bus + ":00.0";
    folders.fn(std::string("0000:") + bus + ":00.0", path, Config().b);
    folders.file("sys/devices/" + path + "/local_cpulist", std::string(bus) + "\n");
  }
  const Topology f = folders.read();
  EXPECT_EQ(f.numa_nodes, 2);
  EXPECT_EQ(f.devices[1].numa, 1);
  for (const auto& lists : std::vector<std::vector<std::string>>{{"0-31", "16-47"}, {"0-31", "0-31"}, {"0-31"}, {"0-31", "x"}}) {
    const Topology t = tree(lists);
    for (const auto& d : t.devices) EXPECT_EQ(d.numa, -1) << lists[0] << " " << lists.back();
    EXPECT_TRUE(t.notes.empty());
    EXPECT_EQ(t.numa_nodes, 0);
  }
}

// ---- /proc/cpuinfo as each architecture prints it ----

Topology with_cpuinfo(const std::string& cpuinfo) {
  Node n;
  n.root_fn("0000:00:02.0", Config().b);
  n.file("proc/cpuinfo", cpuinfo);
  return n.read();
}

// arch/x86/kernel/cpu/proc.c show_cpuinfo: "processor\t: %u", "vendor_id\t: %s",
// "cpu family\t: %d", "model\t\t: %u", "model name\t: %s", "physical id\t: %d", flags as
// "flags\t\t:" followed by " %s" per flag; a block per online CPU.
std::string x86_block(int cpu, int package, const std::string& flags) {
  return "processor\t: " + std::to_string(cpu) +
         "\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 17\nmodel name\t: AMD EPYC 9654 96-Core Processor\n"
         "stepping\t: 1\nphysical id\t: " +
         std::to_string(package) + "\nsiblings\t: 2\ncore id\t\t: 0\nflags\t\t:" + flags + "\nbugs\t\t: sysret_ss_attrs\n\n";
}

TEST(TruthCpuinfo, X86TwoSocketsBareMetal) {
  // Mutants: read_cpus' key tests, first-block-wins guards, physical id, the hypervisor flag.
  const Topology t = with_cpuinfo(x86_block(0, 0, " fpu vme sse2 avx512f") + x86_block(1, 1, " fpu vme sse2 avx512f"));
  EXPECT_EQ(testing::cpu_fields(t.cpu), testing::CpuFields("x86_64", "AuthenticAMD", "AMD EPYC 9654 96-Core Processor", 25, 17, 2));
  EXPECT_FALSE(t.cpu.hypervisor);
  EXPECT_EQ(t.cpu.arm_implementer, -1);
  // As on arm64, the first block (CPU 0) names the CPU when blocks differ.
  std::string second = x86_block(1, 0, " fpu");
  for (const auto& [from, to] :
       std::vector<std::pair<std::string, std::string>>{{"AuthenticAMD", "GenuineIntel"},
                                                        {"family\t: 25", "family\t: 6"},
                                                        {"model\t\t: 17", "model\t\t: 143"},
                                                        {"AMD EPYC 9654 96-Core Processor", "Intel(R) Xeon(R) Platinum 8480+"}})
    second.replace(second.find(from), from.size(), to);
  const Topology first = with_cpuinfo(x86_block(0, 0, " fpu") + second);
  EXPECT_EQ(first.cpu.vendor, "AuthenticAMD");
  EXPECT_EQ(first.cpu.family, 25);
  EXPECT_EQ(first.cpu.model, 17);
  EXPECT_EQ(first.cpu.model_name, "AMD EPYC 9654 96-Core Processor");
  // X86_FEATURE_HYPERVISOR prints " hypervisor" among the flags of a guest.
  EXPECT_TRUE(with_cpuinfo(x86_block(0, 0, " fpu hypervisor lahf_lm")).cpu.hypervisor);
  // Only the flags line says so, and lines without a colon are no fields.
  EXPECT_FALSE(with_cpuinfo(x86_block(0, 0, " fpu") + "bugs\t\t: spectre_v1 hypervisor_leak\n").cpu.hypervisor);
  const Topology bare = with_cpuinfo("vendor_id\nmodel name\nflags hypervisor\nmachine\t\t: POWER9 system\n");
  EXPECT_EQ(bare.cpu.vendor, "");
  EXPECT_EQ(bare.cpu.model_name, "");
  EXPECT_FALSE(bare.cpu.hypervisor);
  EXPECT_EQ(bare.cpu.arch, "");
}

// The first block's values are kept whatever they are, 0 included (x86 "model : 0", as the
// Pentium 4 "Willamette" prints; MIDR fields of 0), not replaced by a later block's.
TEST(TruthCpuinfo, FirstBlockKeptEvenWhereItsValuesAreZero) {
  // Mutants: read_cpus family/model/arm_implementer/arm_part < 0 -> <= 0, < 1.
  const Topology x86 = with_cpuinfo(
      "processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 0\nmodel\t\t: 0\n\n"
      "processor\t: 1\nvendor_id\t: GenuineIntel\ncpu family\t: 15\nmodel\t\t: 2\n\n");
  EXPECT_EQ(x86.cpu.family, 0);
  EXPECT_EQ(x86.cpu.model, 0);
  const Topology arm = with_cpuinfo(
      "processor\t: 0\nCPU implementer\t: 0x00\nCPU part\t: 0x000\n\n"
      "processor\t: 1\nCPU implementer\t: 0x41\nCPU part\t: 0xd4f\n\n");
  EXPECT_EQ(arm.cpu.arm_implementer, 0);
  EXPECT_EQ(arm.cpu.arm_part, 0);
}

// arch/arm64/kernel/cpuinfo.c c_show: "CPU implementer\t: 0x%02x", "CPU part\t: 0x%03x" per
// CPU (NVIDIA Grace: implementer 0x41 Arm, part 0xd4f Neoverse V2); no vendor_id line.
// A heterogeneous SoC prints each core's own MIDR; the CPU is named by the first block's
// (CPU 0, lscpu's first line).
TEST(TruthCpuinfo, Arm64ImplementerAndPart) {
  auto block = [](int cpu, const char* impl, const char* part) {
    return "processor\t: " + std::to_string(cpu) +
           "\nBogoMIPS\t: 2000.00\nFeatures\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics\n"
           "CPU implementer\t: " +
           impl + "\nCPU architecture: 8\nCPU variant\t: 0x0\nCPU part\t: " + part + "\nCPU revision\t: 0\n\n";
  };
  const std::string ci = block(0, "0x41", "0xd4f") + block(1, "0x41", "0xd4f");
  const Topology hetero = with_cpuinfo(block(0, "0x41", "0xd05") + block(1, "0x51", "0x802"));
  EXPECT_EQ(hetero.cpu.arm_implementer, 0x41);
  EXPECT_EQ(hetero.cpu.arm_part, 0xd05);
  const Topology t = with_cpuinfo(ci);
  EXPECT_EQ(t.cpu.arch, "aarch64");
  EXPECT_EQ(t.cpu.arm_implementer, 0x41);
  EXPECT_EQ(t.cpu.arm_part, 0xd4f);
  EXPECT_EQ(t.cpu.vendor, "");
  EXPECT_EQ(t.cpu.family, -1);
}

// arch/powerpc/kernel/setup-common.c show_cpuinfo: "cpu\t\t: %s" with the cpu_spec name
// ("POWER9 (raw), altivec supported").
TEST(TruthCpuinfo, PowerCpuLine) {
  const Topology t = with_cpuinfo(
      "processor\t: 0\ncpu\t\t: POWER9 (raw), altivec supported\nclock\t\t: 3800.000000MHz\nrevision\t: 2.2 (pvr 004e 1202)\n\n"
      "processor\t: 1\ncpu\t\t: POWER10 (raw), altivec supported\n\ntimebase\t: 512000000\nplatform\t: PowerNV\n");
  EXPECT_EQ(t.cpu.arch, "ppc64le");
  EXPECT_EQ(t.cpu.vendor, "IBM");
  EXPECT_EQ(t.cpu.model_name, "POWER9 (raw), altivec supported");  // the first block's, as elsewhere
  // An x86 "cpu" key that is not a POWER name (none exists, but a crafted one) names nothing.
  EXPECT_EQ(with_cpuinfo("cpu\t\t: Cortex\n").cpu.model_name, "");
}

// One NUMA node without cpulist files (an older snapshot): its CPUs are the online ones, which
// /proc/cpuinfo lists a block each (c_start/c_next walk cpu_online_mask): CPUs 0 and 4-6 offline
// here, whatever order the blocks come in.
TEST(TruthCpuinfo, OneNodeTakesTheOnlineCpusOfCpuinfo) {
  // Mutants: read_cpus "processor" parsing (digit test, n < kMaxCpus, resize), the one-node
  // fallback's conditions and node_cpus[0].
  Node n = numa_node_tree(1, {});
  n.root_fn("0000:00:02.0", Config().b);
  n.file("sys/devices/pci0000:00/0000:00:02.0/numa_node", "-1\n");
  std::string ci;
  for (int c : {7, 1, 2, 3}) ci += x86_block(c, 0, " fpu");     // CPU 0 offline (cpu0 hotplug)
  ci += "processor\t: \nprocessor\t: x\nprocessor\t: 65536\n";  // not CPU numbers (65536: beyond any list)
  n.file("proc/cpuinfo", ci);
  const Topology t = n.read();
  EXPECT_EQ(t.numa_nodes, 1);
  EXPECT_EQ(dev(t, "0000:00:02.0").numa, 0);
  EXPECT_EQ(dev(t, "0000:00:02.0").cpu_affinity, "1-3,7");
  // node0's own cpulist, where the snapshot has it, is the node's CPUs (not cpuinfo's blocks).
  Node listed = numa_node_tree(1, {"0-7"});
  listed.root_fn("0000:00:02.0", Config().b);
  listed.file("sys/devices/pci0000:00/0000:00:02.0/numa_node", "-1\n");
  listed.file("proc/cpuinfo", ci);
  EXPECT_EQ(dev(listed.read(), "0000:00:02.0").cpu_affinity, "0-7");
  // Two nodes: the online CPUs are not any one node's.
  Node two = numa_node_tree(2, {});
  two.root_fn("0000:00:02.0", Config().b);
  two.file("sys/devices/pci0000:00/0000:00:02.0/numa_node", "0\n");
  two.file("proc/cpuinfo", ci);
  EXPECT_EQ(dev(two.read(), "0000:00:02.0").cpu_affinity, "");
}

// ---- procfs and the other sysfs classes (parse_sysfs.cpp) ----

// kernel/module/procfs.c m_show: "name size refcount deps state address" per loaded module; a
// copy without /proc falls back on /sys/module (Documentation/ABI/stable/sysfs-module: a folder
// per module, built-in ones included), which is not read when /proc/modules is there.
TEST(TruthProcfs, ModulesFromProcModulesElseSysModule) {
  // Mutants: read_software sp != npos && sp > 0 (all forms), if (!sw.modules_known).
  {
    Node n;
    n.root_fn("0000:00:02.0", Config().b);
    n.file("proc/modules",
           "nvidia_peermem 16384 0 - Live 0x0000000000000000 (POE)\n\n nvidia 1 0 - Live 0x0\nx 4096 0 - Live 0x0\n"
           "ib_core 1 0 - Live 0x0\n");
    n.dir("sys/module/vt");
    const Topology t = n.read();
    EXPECT_TRUE(t.sw.modules_known);
    EXPECT_EQ(t.sw.modules, (std::vector<std::string>{"nvidia_peermem", "x", "ib_core"}));  // a blank name is none
  }
  Node n;
  n.root_fn("0000:00:02.0", Config().b);
  n.dir("sys/module/nvidia_peermem");
  n.dir("sys/module/ib_core");
  const Topology t = n.read();
  EXPECT_TRUE(t.sw.modules_known);
  EXPECT_TRUE(t.sw.has_module("nvidia_peermem"));
}

// /sys/class/infiniband/<dev>/device is the parent device's folder: a PCI function for an HCA,
// absent for a software device (rxe/siw on some kernels), a non-PCI folder for others. The
// function's first RDMA device in name order is its name.
TEST(TruthRdma, DeviceLinksToFunctionsOthersIgnored) {
  // Mutants: read_rdma !link, !bdf, i >= 0 (and its literal and &&), rdma_name.empty().
  Node n;
  n.root_fn("0000:00:02.0", Config().b, 0x020700);
  n.root_fn("0000:00:03.0", Config().b, 0x020000);
  n.dir("sys/class/infiniband/rxe0");
  n.link("sys/class/infiniband/mlx5_0/device", "../../../devices/pci0000:00/0000:00:02.0");
  n.link("sys/class/infiniband/mlx5_1/device", "../../../devices/pci0000:00/0000:00:02.0");
  n.link("sys/class/infiniband/siw0/device", "../../../devices/virtual/net/eth0");
  n.link("sys/class/infiniband/mlx5_9/device", "../../../devices/pci0000:00/0000:00:09.0");
  const Topology t = n.read();
  EXPECT_EQ(t.find("0000:00:02.0"), 0);
  EXPECT_EQ(dev(t, "0000:00:02.0").rdma_name, "mlx5_0");
  EXPECT_EQ(dev(t, "0000:00:03.0").rdma_name, "");
}

// drivers/iommu/iommu.c: /sys/kernel/iommu_groups exists whenever the kernel has the IOMMU API
// (iommu_init creates it), each group's type one of "blocked", "identity", "unmanaged", "DMA",
// "DMA-FQ", "unknown" (iommu_group_show_type). Live, no folder: no IOMMU API, so no
// translation. Groups whose type names no DMA domain say nothing of translation, though the
// groups themselves were read.
TEST(TruthIommu, LiveWithoutGroupsIsOffUnmanagedGroupsAreNotTranslating) {
  // Mutants: read_iommu !groups && describe() != "/", !groups || empty, ty.rfind("DMA") branch,
  // iommu_known_per_device's !groups->empty().
  struct LiveTar : InputFs {
    std::unique_ptr<InputFs> in;
    std::optional<std::string> read(const std::string& p, size_t m) override { return in->read(p, m); }
    std::optional<std::string> readlink(const std::string& p) override { return in->readlink(p); }
    std::optional<std::vector<std::string>> list(const std::string& p) override { return in->list(p); }
    std::string describe() const override { return "/"; }  // what the live root says
  };
  Node n;
  n.root_fn("0000:00:02.0", Config().b);
  LiveTar live;
  live.in = make_tar_fs(write_tar(n.e), "live");
  Topology lt;
  lt.devices.resize(1);
  sysfs::read_iommu(live, {"/sys/devices/pci0000:00/0000:00:02.0"}, lt);
  EXPECT_EQ(lt.iommu, IommuMode::Off);
  EXPECT_EQ(n.read().iommu, IommuMode::Unknown);  // a copy without the folder says nothing

  Node u;
  u.root_fn("0000:00:02.0", Config().b);
  u.root_fn("0000:00:03.0", Config().b);
  u.link("sys/devices/pci0000:00/0000:00:02.0/iommu_group", "../../../kernel/iommu_groups/7");
  u.link("sys/devices/pci0000:00/0000:00:03.0/iommu_group", "../../../kernel/iommu_groups/8");
  u.file("sys/kernel/iommu_groups/7/type", "unmanaged\n");
  u.file("sys/kernel/iommu_groups/8/type", "blocked\n");
  const Topology t = u.read();
  EXPECT_EQ(t.iommu, IommuMode::Unknown);
  EXPECT_TRUE(t.iommu_known_per_device);
  EXPECT_EQ(dev(t, "0000:00:02.0").iommu_group, 7);
  EXPECT_EQ(dev(t, "0000:00:02.0").iommu_type, "unmanaged");
}

// The NVIDIA driver drops every blank (' ', '\t' through '\r') from RegistryDwords before
// splitting it at ';' and '=' (open-gpu-kernel-modules, src/nvidia/arch/nvalloc/unix/src/osapi.c,
// rm_remove_spaces / rm_parse_option_string): keys and values around blanks are the same keys
// and values, as /proc/driver/nvidia/params shows the string given.
TEST(TruthProcfs, RegistryDwordsBlanksAsTheDriverDropsThem) {
  // Mutants: parse_sysfs.cpp trimmed: trailing ' ' and '\r', leading '\t'.
  StackState s;
  parse_nvidia_params("RegistryDwords: \"RMForceP2P = 1 ;\tPeerMappingOverride=1\r;RmFoo=\t2 \"\n", s);
  EXPECT_EQ(s.registry_dwords.at("RMForceP2P"), "1");
  EXPECT_EQ(s.registry_dwords.at("PeerMappingOverride"), "1");
  EXPECT_EQ(s.registry_dwords.at("RmFoo"), "2");
}

TEST(TruthSysfsAttrs, LinkWidthAttributesAreLaneCountsOrUnknown) {
  // drivers/pci/pci-sysfs.c prints current_link_width as "%u" of the Negotiated Link Width field
  // and max_link_width as "%u" of pcie_get_width_cap(), which is PCIE_LNK_WIDTH_UNKNOWN (0xff,
  // include/linux/pci.h) without a Link Capabilities register: 255 is unknown, and a width the
  // kernel cannot print ("-1") is an error naming the file, as a malformed id is.
  {
    Node n;
    n.root_fn("0000:00:02.0", Config().b);
    n.file("sys/devices/pci0000:00/0000:00:02.0/max_link_width", "255\n");
    n.file("sys/devices/pci0000:00/0000:00:02.0/current_link_width", "8\n");
    const Topology t = n.read();
    EXPECT_EQ(dev(t, "0000:00:02.0").link_cap.width, 0);
    EXPECT_EQ(dev(t, "0000:00:02.0").link_sta.width, 8);
  }
  for (const int lanes : {1, 9, 19, 32}) {  // the Negotiated Link Width field's widths (x1 to x32)
    Node n;
    n.root_fn("0000:00:02.0", Config().b);
    n.file("sys/devices/pci0000:00/0000:00:02.0/current_link_width", std::to_string(lanes) + "\n");
    const Topology t = n.read();
    EXPECT_EQ(dev(t, "0000:00:02.0").link_sta.width, lanes);
  }
  // "%u" prints decimal digits, no leading zeros: no character that only adds up like a digit
  // (':' is '9' + 1, '/' is '0' - 1), no "0032".
  for (const std::string bad : {"-1\n", "x16\n", "\n", "33\n", "0032\n", "1234\n", ":\n", "1/\n", "/1\n", "1a\n", "a1\n"}) {
    Node n;
    n.root_fn("0000:00:02.0", Config().b);
    n.file("sys/devices/pci0000:00/0000:00:02.0/current_link_width", bad);
    try {
      n.read();
      ADD_FAILURE() << "no error for " << bad;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("0000:00:02.0/current_link_width"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace gdrpeer::topo

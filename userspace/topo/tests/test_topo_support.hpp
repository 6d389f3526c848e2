// Helpers for the topology tests: synthetic sysfs trees held in memory (as tar
// entries, read through the same TarFs a snapshot uses) and paths to the
// reference data in topology/.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "gdrpeer/topo/inputs.hpp"
#include "gdrpeer/topo/rule_data.hpp"
#include "gdrpeer/topo/rules.hpp"

namespace gdrpeer::topo::testing {

inline std::string data_dir() { return GDRPEER_TEST_TOPOLOGY_DIR; }
inline std::string reference(const std::string& name) { return std::string(GDRPEER_TEST_REFERENCE_DIR) + "/" + name; }

// Whether text holds part: the tests' check of a reason, note or rendered output.
inline bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

inline std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The result of the pair a-b (labels as the report gives them, either order); nullptr when the
// report has none.
inline const PairResult* find_pair(const Report& r, const std::string& a, const std::string& b) {
  for (const auto& p : r.pairs)
    if ((p.label_a == a && p.label_b == b) || (p.label_a == b && p.label_b == a)) return &p;
  return nullptr;
}

// The same for a pair the report must have: a test failure, and an empty result, when it has not.
inline const PairResult& pair_of(const Report& r, const std::string& a, const std::string& b) {
  if (const PairResult* p = find_pair(r, a, b)) return *p;
  ADD_FAILURE() << "no pair " << a << "-" << b;
  static const PairResult none;
  return none;
}

// The CPU fields an input names, in this order: architecture, vendor, model name, family, model,
// sockets (EXPECT_EQ(cpu_fields(t.cpu), CpuFields(...)) prints both sides when they differ).
using CpuFields = std::tuple<std::string, std::string, std::string, int, int, int>;
inline CpuFields cpu_fields(const CpuInfo& c) { return {c.arch, c.vendor, c.model_name, c.family, c.model, c.sockets}; }

// PCIe port types as in the PCI Express Capabilities register.
enum : uint8_t { kEndpoint = 0, kRootPort = 4, kUpstream = 5, kDownstream = 6 };

struct FakeFn {
  std::string bdf;         // "0000:01:00.0"
  std::string sysfs_path;  // "/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0"
  uint16_t vendor = 0x8086, device = 0x1234;
  uint32_t class_code = 0x060400;
  int port_type = -1;                                                // -1: no PCIe capability
  int secondary_bus = -1;                                            // bridges
  int cap_speed = 4, cap_width = 16, sta_speed = 4, sta_width = 16;  // codes: 1=2.5 .. 5=32 GT/s
  bool acs = false;
  uint16_t acs_cap = 0x7f, acs_ctl = 0;
  bool aer_before_acs = false;  // ACS second in the extended list, after AER (as on most ports)
  int numa = 0;
  int iommu_group = -1;
  std::string resource;  // sysfs "resource" text
};

// 4 KiB config space with the capabilities the parser reads.
inline std::string config_space(const FakeFn& f) {
  std::string c(4096, '\0');
  auto put16 = [&](size_t off, uint32_t v) {
    c[off] = static_cast<char>(v & 0xff);
    c[off + 1] = static_cast<char>((v >> 8) & 0xff);
  };
  auto put32 = [&](size_t off, uint32_t v) {
    put16(off, v & 0xffff);
    put16(off + 2, v >> 16);
  };
  put16(0, f.vendor);
  put16(2, f.device);
  c[0x09] = static_cast<char>(f.class_code & 0xff);
  c[0x0a] = static_cast<char>((f.class_code >> 8) & 0xff);
  c[0x0b] = static_cast<char>((f.class_code >> 16) & 0xff);
  if (f.secondary_bus >= 0) {
    c[0x0e] = 1;
    c[0x19] = static_cast<char>(f.secondary_bus);
  }
  if (f.port_type >= 0) {
    put16(0x06, 0x10);  // capabilities list present
    c[0x34] = 0x40;
    c[0x40] = 0x10;  // PCI Express capability, last in the list
    put16(0x42, 2u | (static_cast<uint32_t>(f.port_type) << 4));
    put32(0x44, 1);  // MPS supported 256
    put16(0x48, (1u << 5) | (2u << 12));
    put32(0x4c, static_cast<uint32_t>(f.cap_speed) | (static_cast<uint32_t>(f.cap_width) << 4));
    put16(0x52, static_cast<uint32_t>(f.sta_speed) | (static_cast<uint32_t>(f.sta_width) << 4));
    if (f.acs) {
      const size_t at = f.aer_before_acs ? 0x148 : 0x100;
      if (f.aer_before_acs) put32(0x100, 0x0001 | (1u << 16) | (0x148u << 20));  // AER -> ACS
      put32(at, 0x000d | (1u << 16));                                            // ACS, version 1, end of list
      put16(at + 4, f.acs_cap);
      put16(at + 6, f.acs_ctl);
    }
  }
  return c;
}

inline const char* speed_text(int code) {
  switch (code) {
    case 1: return "2.5 GT/s PCIe";
    case 2: return "5.0 GT/s PCIe";
    case 3: return "8.0 GT/s PCIe";
    case 4: return "16.0 GT/s PCIe";
    default: return "32.0 GT/s PCIe";
  }
}

struct FakeNode {
  std::vector<FakeFn> fns;
  std::vector<std::pair<int, std::string>> groups;  // iommu group -> type
  std::string modules = "ib_core 1 0 - Live 0x0\n";
  std::string cpuinfo = "vendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 17\nmodel name\t: AMD EPYC 9374F\nphysical id\t: 0\n";
  std::string osrelease = "6.8.0\n";
  std::string nvidia_version;
  std::vector<std::string> memory_peers;  // MOFED peer-memory clients (/sys/kernel/mm/memory_peers/*)
  bool memory_peers_dir = false;          // the directory even without clients (MOFED's ib_core loaded)
  int numa_nodes = 0;                     // /sys/devices/system/node/node*; 0: no such folder

  std::vector<TarEntry> entries() const {
    std::vector<TarEntry> e;
    auto file = [&](const std::string& p, const std::string& d) { e.push_back({TarEntry::Type::File, p.substr(1), d}); };
    auto link = [&](const std::string& p, const std::string& d) { e.push_back({TarEntry::Type::Symlink, p.substr(1), d}); };
    e.push_back({TarEntry::Type::Directory, "sys/bus/pci/devices", ""});
    e.push_back({TarEntry::Type::Directory, "sys/kernel/iommu_groups", ""});
    for (const auto& f : fns) {
      char hex[16];
      link("/sys/bus/pci/devices/" + f.bdf, "../../.." + f.sysfs_path.substr(4));
      const std::string& d = f.sysfs_path;
      std::snprintf(hex, sizeof hex, "0x%04x\n", f.vendor);
      file(d + "/vendor", hex);
      std::snprintf(hex, sizeof hex, "0x%04x\n", f.device);
      file(d + "/device", hex);
      std::snprintf(hex, sizeof hex, "0x%06x\n", f.class_code);
      file(d + "/class", hex);
      file(d + "/numa_node", std::to_string(f.numa) + "\n");
      if (f.port_type >= 0) {
        file(d + "/max_link_speed", std::string(speed_text(f.cap_speed)) + "\n");
        file(d + "/max_link_width", std::to_string(f.cap_width) + "\n");
        file(d + "/current_link_speed", std::string(speed_text(f.sta_speed)) + "\n");
        file(d + "/current_link_width", std::to_string(f.sta_width) + "\n");
      }
      file(d + "/config", config_space(f));
      if (!f.resource.empty()) file(d + "/resource", f.resource);
      if (f.iommu_group >= 0) link(d + "/iommu_group", "../../../../kernel/iommu_groups/" + std::to_string(f.iommu_group));
    }
    for (const auto& [g, type] : groups) file("/sys/kernel/iommu_groups/" + std::to_string(g) + "/type", type + "\n");
    file("/proc/modules", modules);
    file("/proc/cpuinfo", cpuinfo);
    file("/proc/sys/kernel/osrelease", osrelease);
    file("/proc/cmdline", "root=/dev/sda1\n");
    if (!nvidia_version.empty()) file("/proc/driver/nvidia/version", nvidia_version);
    if (memory_peers_dir) e.push_back({TarEntry::Type::Directory, "sys/kernel/mm/memory_peers", ""});
    // As MOFED's ib_core creates them: a directory per registered client with its version file.
    for (const auto& p : memory_peers) {
      e.push_back({TarEntry::Type::Directory, "sys/kernel/mm/memory_peers/" + p, ""});
      file("/sys/kernel/mm/memory_peers/" + p + "/version", "1.0\n");
    }
    for (int i = 0; i < numa_nodes; ++i) e.push_back({TarEntry::Type::Directory, "sys/devices/system/node/node" + std::to_string(i), ""});
    return e;
  }
};

// A PCI function appended to a fake node; the reference it returns (to the node's last function)
// lets the caller set what else it has before the next one is added.
inline FakeFn& add_fn(FakeNode& n, const std::string& bdf, const std::string& sysfs_path, uint16_t vendor, uint16_t device,
                      uint32_t class_code, int port_type, int secondary_bus = -1) {
  FakeFn f;
  f.bdf = bdf;
  f.sysfs_path = sysfs_path;
  f.vendor = vendor;
  f.device = device;
  f.class_code = class_code;
  f.port_type = port_type;
  f.secondary_bus = secondary_bus;
  n.fns.push_back(f);
  return n.fns.back();
}

// A PCIe port (a PCI bridge, class 0604) with its secondary bus; FakeFn's placeholder ids unless given.
inline FakeFn& add_port(FakeNode& n, const std::string& bdf, const std::string& sysfs_path, int port_type, int secondary_bus,
                        uint16_t vendor = FakeFn{}.vendor, uint16_t device = FakeFn{}.device) {
  return add_fn(n, bdf, sysfs_path, vendor, device, FakeFn{}.class_code, port_type, secondary_bus);
}

// A PCIe endpoint.
inline FakeFn& add_endpoint(FakeNode& n, const std::string& bdf, const std::string& sysfs_path, uint16_t vendor, uint16_t device,
                            uint32_t class_code) {
  return add_fn(n, bdf, sysfs_path, vendor, device, class_code, kEndpoint);
}

// GPU (NVIDIA, 64 GiB BAR1) and ConnectX NIC under one switch below one root port:
//   00:01.0 root port -> 01:00.0 upstream -> 02:00.0 / 02:01.0 downstream -> 03:00.0 GPU / 04:00.0 NIC
inline FakeNode switch_node() {
  FakeNode n;
  const std::string rp = "/sys/devices/pci0000:00/0000:00:01.0";
  const std::string up = rp + "/0000:01:00.0";
  add_port(n, "0000:00:01.0", rp, kRootPort, 1).acs = true;
  add_port(n, "0000:01:00.0", up, kUpstream, 2, 0x10b5, 0x9797);
  add_port(n, "0000:02:00.0", up + "/0000:02:00.0", kDownstream, 3, 0x10b5, 0x9797).acs = true;
  add_port(n, "0000:02:01.0", up + "/0000:02:01.0", kDownstream, 4, 0x10b5, 0x9797).acs = true;
  add_endpoint(n, "0000:03:00.0", up + "/0000:02:00.0/0000:03:00.0", 0x10de, 0x2330, 0x030200).resource =
      "0x00000000f8000000 0x00000000f8ffffff 0x0000000000040200\n0x0000100000000000 0x0000100fffffffff 0x000000000014220c\n";
  add_endpoint(n, "0000:04:00.0", up + "/0000:02:01.0/0000:04:00.0", 0x15b3, 0x1021, 0x020700);
  n.modules = "nvidia 1 0 - Live 0x0\nnvidia_peermem 1 0 - Live 0x0\nib_core 1 0 - Live 0x0\n";
  return n;
}

// A device of a synthetic tree, appended to t with its ids known: a bridge when its port type is
// one (PortType::Unknown, as from an input that gives no port type, is none); one without a
// parent sits on host bridge hb (0000:00 when hb < 0). Returns its index.
inline int add_device(Topology& t, const std::string& bdf, int parent, PortType pt, Role role, uint16_t vendor, uint16_t device,
                      uint16_t subsys_vendor = 0, uint16_t subsys_device = 0, int hb = -1) {
  Device x;
  x.bdf = bdf;
  x.parent = parent;
  x.host_bridge = parent >= 0 ? -1 : hb >= 0 ? hb : t.host_bridge_index("0000:00");
  x.port = pt;
  x.is_bridge = pt == PortType::RootPort || pt == PortType::SwitchUpstream || pt == PortType::SwitchDownstream ||
                pt == PortType::PcieToPciBridge || pt == PortType::PciToPcieBridge;
  x.role = role;
  x.ids_known = true;
  x.vendor = vendor;
  x.device = device;
  x.subsys_vendor = subsys_vendor;
  x.subsys_device = subsys_device;
  t.devices.push_back(x);
  return static_cast<int>(t.devices.size() - 1);
}

// A function with its ids and class code known (no port type, no parent), appended to t on host
// bridge host_bridge (-1: none); the reference, to t's last device, is for setting the rest.
inline Device& add_pci_function(Topology& t, const std::string& bdf, int host_bridge, uint16_t vendor, uint16_t device,
                                uint32_t class_code) {
  Device d;
  d.bdf = bdf;
  d.host_bridge = host_bridge;
  d.ids_known = d.class_known = true;
  d.vendor = vendor;
  d.device = device;
  d.class_code = class_code;
  t.devices.push_back(d);
  return t.devices.back();
}

// The same with ids from its role: a GPU is NVIDIA 10de:gpu_device (H100), a NIC ConnectX-6 Dx
// 15b3:1021, anything else a PLX PEX 9797 switch port 10b5:9797 (a switch NCCL does not flatten).
inline int add_tree_device(Topology& t, const std::string& bdf, int parent, PortType pt, Role role, int hb = -1,
                           uint16_t gpu_device = 0x2330) {
  const uint16_t vendor = role == Role::GPU ? 0x10de : role == Role::NIC ? 0x15b3 : 0x10b5;
  const uint16_t device = role == Role::GPU ? gpu_device : role == Role::NIC ? 0x1021 : 0x9797;
  return add_device(t, bdf, parent, pt, role, vendor, device, 0, 0, hb);
}

// The rule data in topology/, loaded once per test program.
inline const RuleData& kb() {
  static const RuleData k = RuleData::load(data_dir());
  return k;
}

// A synthetic sysfs tree read as a snapshot would be: parsed, its devices' roles assigned.
inline Topology from_entries(const std::vector<TarEntry>& e) {
  auto fs = make_tar_fs(write_tar(e), "fake.tar");
  Topology t = parse_sysfs(*fs, "fake.tar");
  assign_roles(t, kb());
  return t;
}

// A fake node's tree, with `extra` entries added to it, read the same way.
inline Topology from_fake(const FakeNode& n, const std::vector<TarEntry>& extra = {}) {
  std::vector<TarEntry> e = n.entries();
  e.insert(e.end(), extra.begin(), extra.end());
  return from_entries(e);
}

}  // namespace gdrpeer::topo::testing

// Live sysfs (or a copy/snapshot of it). Reads only what the rules need; every
// path read here is what `gdrpeer snapshot` captures.
#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <map>
#include <sstream>
#include <string>

#include "gdrpeer/topo/cuda_probe.hpp"
#include "gdrpeer/topo/errors.hpp"
#include "gdrpeer/topo/parsers.hpp"

namespace gdrpeer::topo {

namespace {

std::string trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\r' || s.back() == '\t')) s.pop_back();
  size_t b = 0;
  while (b < s.size() && (s[b] == ' ' || s[b] == '\t')) ++b;
  return s.substr(b);
}

// Lexically resolve a relative symlink target against the link's directory.
std::string resolve(const std::string& dir, const std::string& target) {
  std::vector<std::string> parts;
  auto push = [&](const std::string& p) {
    std::stringstream ss(p);
    std::string c;
    while (std::getline(ss, c, '/')) {
      if (c.empty() || c == ".") continue;
      if (c == "..") {
        if (!parts.empty()) parts.pop_back();
      } else {
        parts.push_back(c);
      }
    }
  };
  if (target.empty() || target[0] != '/') push(dir);
  push(target);
  std::string out;
  for (auto& p : parts) out += "/" + p;
  return out.empty() ? "/" : out;
}

// A set of CPUs from a cpulist ("0-23,48-71") or a cpumask ("ffffff,00000000",
// 32-bit words, most significant first), as sysfs writes them; empty when malformed.
using CpuSet = std::vector<bool>;
constexpr size_t kMaxCpus = 1 << 16;

CpuSet parse_cpulist(const std::string& s) {
  CpuSet set;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    char* e = nullptr;
    unsigned long lo = std::strtoul(item.c_str(), &e, 10), hi = lo;
    if (e == item.c_str()) return {};
    if (*e == '-') {
      const char* h = e + 1;
      hi = std::strtoul(h, &e, 10);
      if (e == h) return {};
    }
    if (*e || hi < lo || hi >= kMaxCpus) return {};
    if (set.size() <= hi) set.resize(hi + 1);
    for (unsigned long c = lo; c <= hi; ++c) set[c] = true;
  }
  return set;
}

CpuSet parse_cpumask(const std::string& s) {
  std::vector<std::string> words;
  std::stringstream ss(s);
  std::string w;
  while (std::getline(ss, w, ',')) words.push_back(w);
  if (words.size() * 32 > kMaxCpus) return {};
  CpuSet set(words.size() * 32);
  for (size_t i = 0; i < words.size(); ++i) {
    char* e = nullptr;
    unsigned long v = std::strtoul(words[i].c_str(), &e, 16);
    if (words[i].empty() || *e) return {};
    const size_t base = (words.size() - 1 - i) * 32;
    for (size_t b = 0; b < 32; ++b) set[base + b] = (v >> b) & 1;
  }
  return set;
}

// Without trailing unset CPUs, so that a list and a mask of one set compare equal.
CpuSet trimmed_set(CpuSet set) {
  while (!set.empty() && !set.back()) set.pop_back();
  return set;
}

bool intersects(const CpuSet& a, const CpuSet& b) {
  for (size_t i = 0; i < a.size() && i < b.size(); ++i)
    if (a[i] && b[i]) return true;
  return false;
}

bool empty_set(const CpuSet& a) { return std::find(a.begin(), a.end(), true) == a.end(); }

std::string basename_of(const std::string& p) {
  size_t s = p.rfind('/');
  return s == std::string::npos ? p : p.substr(s + 1);
}

// Config space read on demand, a dword at a time and each dword once (see
// FileRange): the checker walks two capability lists, not 4 KiB.
class ConfigSpace {
 public:
  static constexpr size_t kMax = 4096;
  explicit ConfigSpace(FileRange& f) : f_(f) { got_.fill(-1); }
  // Whether the first n bytes are readable (unprivileged readers get 64, root 256 or 4096).
  bool has(size_t n) {
    if (n == 0) return true;
    if (n > kMax) return false;
    size_t last = n - 1;
    return load(last / 4) > static_cast<int>(last % 4);
  }
  uint32_t u8(size_t off) {
    if (off >= kMax) return 0;
    load(off / 4);
    return static_cast<uint8_t>(bytes_[off]);
  }
  uint32_t u16le(size_t off) { return u8(off) | (u8(off + 1) << 8); }
  uint32_t u32le(size_t off) { return u16le(off) | (u16le(off + 2) << 16); }

 private:
  int load(size_t dword) {
    if (got_[dword] < 0) got_[dword] = static_cast<int8_t>(f_.read(dword * 4, bytes_.data() + dword * 4, 4));
    return got_[dword];
  }
  FileRange& f_;
  std::array<char, kMax> bytes_{};
  std::array<int8_t, kMax / 4> got_;  // bytes readable per dword, -1 not read yet
};

double speed_from_code(uint32_t code) {
  switch (code) {
    case 1: return 2.5;
    case 2: return 5.0;
    case 3: return 8.0;
    case 4: return 16.0;
    case 5: return 32.0;
    case 6: return 64.0;
    default: return 0;
  }
}

// Capabilities from config space: PCIe port type, link, MPS/MRRS, ACS, ATS.
void parse_config(ConfigSpace& c, Device& d) {
  if (!c.has(64)) return;
  uint32_t header_type = c.u8(0x0e) & 0x7f;
  if (header_type == 1) {
    d.is_bridge = true;
    d.secondary_bus = c.u8(0x19);
  }
  bool pcie = false;
  if (c.has(256) && (c.u16le(0x06) & 0x10)) {
    uint32_t ptr = c.u8(0x34) & 0xfc;
    for (int guard = 0; ptr >= 0x40 && c.has(ptr + 0x14) && guard < 48; ++guard) {
      uint32_t id = c.u8(ptr);
      if (id == 0x10) {
        pcie = true;
        uint32_t flags = c.u16le(ptr + 2);
        static const PortType kTypes[] = {PortType::Endpoint, PortType::LegacyEndpoint, PortType::Unknown,
                                          PortType::Unknown, PortType::RootPort, PortType::SwitchUpstream,
                                          PortType::SwitchDownstream, PortType::PcieToPciBridge,
                                          PortType::PciToPcieBridge, PortType::RootComplexEndpoint,
                                          PortType::RootComplexEventCollector};
        uint32_t pt = (flags >> 4) & 0xf;
        if (pt < sizeof kTypes / sizeof kTypes[0]) d.port = kTypes[pt];
        uint32_t devcap = c.u32le(ptr + 4), devctl = c.u16le(ptr + 8);
        d.mps_cap = 128 << (devcap & 7);
        d.mps = 128 << ((devctl >> 5) & 7);
        d.mrrs = 128 << ((devctl >> 12) & 7);
        if (d.port != PortType::RootComplexEndpoint && d.port != PortType::RootComplexEventCollector) {
          uint32_t lnkcap = c.u32le(ptr + 0x0c), lnksta = c.u16le(ptr + 0x12);
          if (d.link_cap.speed_gts == 0) d.link_cap.speed_gts = speed_from_code(lnkcap & 0xf);
          if (d.link_cap.width == 0) d.link_cap.width = static_cast<int>((lnkcap >> 4) & 0x3f);
          if (d.link_sta.speed_gts == 0) d.link_sta.speed_gts = speed_from_code(lnksta & 0xf);
          if (d.link_sta.width == 0) d.link_sta.width = static_cast<int>((lnksta >> 4) & 0x3f);
        }
      }
      ptr = c.u8(ptr + 1) & 0xfc;
    }
  }
  // Extended capabilities need the full 4 KiB (root can read it).
  if (pcie && c.has(4096)) {
    d.acs_known = true;
    uint32_t off = 0x100;
    for (int guard = 0; off >= 0x100 && c.has(off + 8) && guard < 512; ++guard) {
      uint32_t h = c.u32le(off);
      if (h == 0 || h == 0xffffffff) break;
      uint32_t id = h & 0xffff;
      if (id == 0x0d) {
        d.acs_present = true;
        d.acs_cap = static_cast<uint16_t>(c.u16le(off + 4));
        d.acs_ctl = static_cast<uint16_t>(c.u16le(off + 6));
      } else if (id == 0x0f) {
        d.ats_present = true;
        d.ats_enabled = (c.u16le(off + 6) & 0x8000) != 0;
      }
      off = (h >> 20) & 0xffc;
      if (off == 0) break;
    }
  }
}

double parse_speed(const std::string& s) {
  // "16.0 GT/s PCIe", "8 GT/s", "Unknown"
  char* e = nullptr;
  double v = std::strtod(s.c_str(), &e);
  return e == s.c_str() ? 0 : v;
}

// Devices whose numa_node file is missing (copies of /sys made with cp or tar
// that skipped it): hwloc places them by their local CPUs, and so does this.
// A device's CPUs meeting exactly one node's CPUs are that node's; without node
// directories, devices with pairwise disjoint CPU sets are on distinct nodes,
// numbered in order of appearance. Anything else stays unknown.
void locality_from_cpus(Topology& t, const std::map<size_t, CpuSet>& local, const std::map<int, CpuSet>& nodes) {
  if (local.empty()) return;
  int placed = 0;
  if (!nodes.empty()) {
    for (const auto& [i, cpus] : local) {
      int found = -1, count = 0;
      for (const auto& [n, ncpus] : nodes)
        if (intersects(cpus, ncpus)) {
          found = n;
          ++count;
        }
      if (count == 1) {
        t.devices[i].numa = found;
        ++placed;
      }
    }
  } else {
    std::vector<const CpuSet*> distinct;
    bool disjoint = true;
    for (const auto& [i, cpus] : local) {
      if (empty_set(cpus)) {
        disjoint = false;
        break;
      }
      bool seen = false;
      for (const CpuSet* d : distinct) {
        if (*d == cpus) seen = true;
        else if (intersects(*d, cpus)) disjoint = false;
      }
      if (!seen) distinct.push_back(&cpus);
    }
    if (disjoint && distinct.size() > 1) {
      for (const auto& [i, cpus] : local)
        for (size_t n = 0; n < distinct.size(); ++n)
          if (intersects(*distinct[n], cpus)) t.devices[i].numa = static_cast<int>(n);
      placed = static_cast<int>(local.size());
      if (t.numa_nodes == 0) t.numa_nodes = static_cast<int>(distinct.size());
    }
  }
  if (placed > 0)
    t.notes.push_back("numa_node missing for " + std::to_string(local.size()) + " device(s): NUMA node of " + std::to_string(placed) +
                      " taken from their local CPUs (local_cpulist/local_cpus)" + (nodes.empty() ? ", numbered by first appearance" : ""));
}

}  // namespace

Topology parse_sysfs(FileSource& fs, const std::string& name) {
  Topology t;
  t.source = name;
  t.format = "sysfs";
  auto entries = fs.list("/sys/bus/pci/devices");
  if (!entries) throw MissingInput(name + ": no /sys/bus/pci/devices (not a sysfs root or snapshot)");
  struct Raw {
    std::string dir;
    std::string bdf;
    std::string parent_bdf;
    std::string host_bridge;
  };
  std::vector<Raw> raws;
  for (const auto& e : *entries) {
    auto bdf = parse_bdf(e);
    if (!bdf) continue;
    auto link = fs.readlink("/sys/bus/pci/devices/" + e);
    std::string dir = link ? resolve("/sys/bus/pci/devices", *link) : "/sys/bus/pci/devices/" + e;
    Raw r{dir, *bdf, "", ""};
    // Components: .../pci0000:00/0000:00:01.0/0000:01:00.0
    std::stringstream ss(dir);
    std::string comp, prev_bdf;
    bool prev_was_bdf = false;
    while (std::getline(ss, comp, '/')) {
      if (comp.rfind("pci", 0) == 0 && comp.find(':') != std::string::npos && comp.size() <= 13) {
        r.host_bridge = comp.substr(3);
        prev_bdf.clear();
        prev_was_bdf = false;
        continue;
      }
      auto cb = parse_bdf(comp);
      if (cb) {
        if (*cb == *bdf) r.parent_bdf = prev_was_bdf ? prev_bdf : "";
        prev_bdf = *cb;
        prev_was_bdf = true;
      } else {
        prev_was_bdf = false;
      }
    }
    if (r.host_bridge.empty()) r.host_bridge = bdf->substr(0, 7);
    raws.push_back(std::move(r));
  }
  std::map<int, std::string> group_types;
  std::map<size_t, CpuSet> local_cpus;  // device index -> local CPUs, where numa_node is missing
  auto groups = fs.list("/sys/kernel/iommu_groups");
  for (const auto& raw : raws) {
    Device d;
    d.bdf = raw.bdf;
    auto rd = [&](const char* f) { return fs.read(raw.dir + "/" + f, 4096); };
    auto hex = [&](const char* f, bool& ok) -> unsigned long {
      auto v = rd(f);
      if (!v) {
        ok = false;
        return 0;
      }
      char* e = nullptr;
      std::string s = trimmed(*v);
      unsigned long x = std::strtoul(s.c_str(), &e, 16);
      if (s.empty() || *e) throw InputError(name, 0, raw.dir + "/" + f + ": expected a hex number, found \"" + s + "\"");
      return x;
    };
    bool ok = true;
    d.vendor = static_cast<uint16_t>(hex("vendor", ok));
    d.device = static_cast<uint16_t>(hex("device", ok));
    d.ids_known = ok;
    bool sok = true;
    d.subsys_vendor = static_cast<uint16_t>(hex("subsystem_vendor", sok));
    d.subsys_device = static_cast<uint16_t>(hex("subsystem_device", sok));
    bool cok = true;
    d.class_code = static_cast<uint32_t>(hex("class", cok));
    d.class_known = cok;
    if (auto n = rd("numa_node")) {
      d.numa = std::atoi(trimmed(*n).c_str());
    } else if (auto l = rd("local_cpulist")) {
      local_cpus[t.devices.size()] = trimmed_set(parse_cpulist(trimmed(*l)));  // numa_node missing: locality from the CPUs
    } else if (auto m = rd("local_cpus")) {
      local_cpus[t.devices.size()] = trimmed_set(parse_cpumask(trimmed(*m)));
    }
    if (auto v = rd("max_link_speed")) d.link_cap.speed_gts = parse_speed(trimmed(*v));
    if (auto v = rd("max_link_width")) d.link_cap.width = std::atoi(trimmed(*v).c_str());
    if (auto v = rd("current_link_speed")) d.link_sta.speed_gts = parse_speed(trimmed(*v));
    if (auto v = rd("current_link_width")) d.link_sta.width = std::atoi(trimmed(*v).c_str());
    if (auto res = rd("resource")) {
      std::stringstream ss(*res);
      std::string line;
      int idx = 0;
      while (std::getline(ss, line) && idx < 6) {
        unsigned long long start = 0, end = 0, flags = 0;
        if (std::sscanf(line.c_str(), "%llx %llx %llx", &start, &end, &flags) != 3)
          throw InputError(name, idx + 1, raw.dir + "/resource: expected \"start end flags\" in hex");
        if ((flags & 0x200) && end > start) {
          Bar b;
          b.index = idx;
          b.size = end - start + 1;
          b.prefetchable = (flags & 0x2000) != 0;
          b.is64 = (flags & 0x100000) != 0;
          d.bars.push_back(b);
        }
        ++idx;
      }
    }
    if (auto cfg = fs.open_range(raw.dir + "/config", ConfigSpace::kMax)) {
      ConfigSpace space(*cfg);
      parse_config(space, d);
    }
    if (auto drv = fs.readlink(raw.dir + "/driver")) d.driver = basename_of(*drv);
    if (auto grp = fs.readlink(raw.dir + "/iommu_group")) {
      std::string g = basename_of(*grp);
      d.iommu_group = std::atoi(g.c_str());
      auto it = group_types.find(d.iommu_group);
      if (it == group_types.end()) {
        auto ty = fs.read("/sys/kernel/iommu_groups/" + g + "/type", 256);
        it = group_types.emplace(d.iommu_group, ty ? trimmed(*ty) : std::string()).first;
      }
      d.iommu_type = it->second;
    }
    d.host_bridge = t.host_bridge_index(raw.host_bridge);
    t.devices.push_back(std::move(d));
  }
  for (size_t i = 0; i < raws.size(); ++i) {
    if (raws[i].parent_bdf.empty()) continue;
    int p = t.find(raws[i].parent_bdf);
    t.devices[i].parent = p;
    if (p >= 0) t.devices[i].host_bridge = -1;
  }
  // Node-wide IOMMU mode.
  t.iommu_known_per_device = groups && !groups->empty();
  if (!groups && fs.describe() != "/") {
    t.iommu = IommuMode::Unknown;  // a copy without /sys/kernel/iommu_groups (hwloc-gather-topology's) says nothing
  } else if (!groups || groups->empty()) {
    t.iommu = IommuMode::Off;
  } else {
    bool translating = false, identity = false;
    for (const auto& [g, ty] : group_types) {
      if (ty == "identity") identity = true;
      else if (ty.rfind("DMA", 0) == 0) translating = true;
    }
    t.iommu = translating && identity ? IommuMode::Mixed : translating ? IommuMode::Translating : identity ? IommuMode::Identity : IommuMode::Unknown;
  }
  // RDMA devices: /sys/class/infiniband/<name>/device -> PCI function.
  if (auto ibs = fs.list("/sys/class/infiniband")) {
    for (const auto& ib : *ibs) {
      auto link = fs.readlink("/sys/class/infiniband/" + ib + "/device");
      if (!link) continue;
      auto bdf = parse_bdf(basename_of(*link));
      if (!bdf) continue;
      int i = t.find(*bdf);
      if (i >= 0 && t.devices[i].rdma_name.empty()) t.devices[i].rdma_name = ib;
    }
  }
  // Software stack and CPU identity.
  Software& sw = t.sw;
  sw.inspected = true;
  if (auto c = fs.read("/proc/cmdline", 65536)) sw.cmdline = trimmed(*c);
  if (auto r = fs.read("/proc/sys/kernel/osrelease", 4096)) sw.kernel_release = trimmed(*r);
  if (auto m = fs.read("/proc/modules", 1 << 20)) {
    sw.modules_known = true;
    std::stringstream ss(*m);
    std::string line;
    while (std::getline(ss, line)) {
      size_t sp = line.find(' ');
      if (sp != std::string::npos && sp > 0) sw.modules.push_back(line.substr(0, sp));
    }
  }
  // A copy of /sys without /proc still names the loaded (and built-in) modules.
  if (!sw.modules_known)
    if (auto mods = fs.list("/sys/module")) {
      sw.modules_known = true;
      sw.modules = *mods;
    }
  if (auto v = fs.read("/proc/driver/nvidia/version", 4096)) {
    std::string s = *v;
    sw.nvidia_version = trimmed(s.substr(0, s.find('\n')));
  }
  if (auto mp = fs.list("/sys/kernel/mm/memory_peers")) {
    sw.memory_peers_dir = true;
    sw.memory_peers = *mp;
  }
  // A snapshot carries the CUDA probe's answers from the node it was taken on.
  if (auto c = fs.read("/gdrpeer-snapshot/cuda-probe", 65536)) parse_cuda_probe_text(*c, sw);
  if (auto v = fs.read("/sys/class/dmi/id/sys_vendor", 4096)) t.dmi_vendor = trimmed(*v);
  if (auto v = fs.read("/sys/class/dmi/id/product_name", 4096)) t.dmi_product = trimmed(*v);
  // Boards without DMI (Jetson and other device-tree systems) name themselves in
  // the device tree ("NVIDIA Jetson AGX Orin Developer Kit\0"): the platform
  // rules match it as the product. Read only when DMI gave none.
  if (t.dmi_product.empty())
    if (auto v = fs.read("/proc/device-tree/model", 4096)) t.dmi_product = trimmed(v->substr(0, v->find('\0')));
  std::map<int, CpuSet> node_cpus;
  if (auto nodes = fs.list("/sys/devices/system/node")) {
    int n = 0;
    for (const auto& e : *nodes)
      if (e.rfind("node", 0) == 0 && e.size() > 4 && std::isdigit(static_cast<unsigned char>(e[4]))) {
        ++n;
        if (!local_cpus.empty())
          if (auto l = fs.read("/sys/devices/system/node/" + e + "/cpulist", 65536))
            node_cpus[std::atoi(e.c_str() + 4)] = parse_cpulist(trimmed(*l));
      }
    t.numa_nodes = n;
  }
  locality_from_cpus(t, local_cpus, node_cpus);
  if (auto ci = fs.read("/proc/cpuinfo", 8 << 20)) {
    std::stringstream ss(*ci);
    std::string line;
    std::map<std::string, bool> packages;
    while (std::getline(ss, line)) {
      size_t c = line.find(':');
      if (c == std::string::npos) continue;
      std::string k = trimmed(line.substr(0, c)), v = trimmed(line.substr(c + 1));
      CpuInfo& cpu = t.cpu;
      if (k == "vendor_id" && cpu.vendor.empty()) {
        cpu.vendor = v;
        cpu.arch = "x86_64";
      } else if (k == "cpu family" && cpu.family < 0) cpu.family = std::atoi(v.c_str());
      else if (k == "model" && cpu.model < 0) cpu.model = std::atoi(v.c_str());
      else if (k == "model name" && cpu.model_name.empty()) cpu.model_name = v;
      else if (k == "physical id") packages[v] = true;
      else if (k == "flags" && v.find(" hypervisor") != std::string::npos) cpu.hypervisor = true;
      else if (k == "CPU implementer" && cpu.arm_implementer < 0) {
        cpu.arm_implementer = static_cast<int>(std::strtol(v.c_str(), nullptr, 0));
        cpu.arch = "aarch64";
      } else if (k == "CPU part" && cpu.arm_part < 0) cpu.arm_part = static_cast<int>(std::strtol(v.c_str(), nullptr, 0));
      else if (k == "cpu" && v.rfind("POWER", 0) == 0 && cpu.model_name.empty()) {
        cpu.model_name = v;
        cpu.vendor = "IBM";
        cpu.arch = "ppc64le";
      }
    }
    t.cpu.sockets = static_cast<int>(packages.size());
  }
  t.finalize();
  return t;
}

}  // namespace gdrpeer::topo

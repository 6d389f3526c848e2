// PCI functions in sysfs: /sys/bus/pci/devices/* with their attributes,
// config space (capabilities: port type, link, MPS/MRRS, ACS, ATS), BARs and
// the hierarchy their directory paths give.
#include <array>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <sstream>

#include "gdrpeer/topo/errors.hpp"
#include "gdrpeer/topo/inputs.hpp"
#include "sysfs_readers.hpp"

namespace gdrpeer::topo::sysfs {

namespace {

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
    // As drivers/pci/pci.c __pci_find_next_cap_ttl walks it: pointers from 0x40, at most 48
    // hops (PCI_FIND_CAP_TTL), the first PCI Express capability is the one (pci_find_capability).
    for (int guard = 0; ptr >= 0x40 && c.has(ptr + 0x14) && guard < 48; ++guard) {
      uint32_t id = c.u8(ptr);
      if (id == 0x10) {
        pcie = true;
        uint32_t flags = c.u16le(ptr + 2);
        static const std::array<PortType, 11> kTypes = {PortType::Endpoint,
                                                        PortType::LegacyEndpoint,
                                                        PortType::Unknown,
                                                        PortType::Unknown,
                                                        PortType::RootPort,
                                                        PortType::SwitchUpstream,
                                                        PortType::SwitchDownstream,
                                                        PortType::PcieToPciBridge,
                                                        PortType::PciToPcieBridge,
                                                        PortType::RootComplexEndpoint,
                                                        PortType::RootComplexEventCollector};
        uint32_t pt = (flags >> 4) & 0xf;
        if (pt < kTypes.size()) d.port = kTypes[pt];
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
        break;
      }
      ptr = c.u8(ptr + 1) & 0xfc;
    }
  }
  // Extended capabilities need the full 4 KiB (root can read it).
  if (pcie && c.has(4096)) {
    d.acs_known = true;
    uint32_t off = 0x100;
    // pci_find_next_ext_capability: from 0x100, a next pointer below 0x100 ends the list, and
    // at most (4096 - 256) / 8 = 480 hops (a capability takes 8 bytes at least).
    for (int guard = 0; off >= 0x100 && c.has(off + 8) && guard < 480; ++guard) {
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

}  // namespace

std::optional<int> lane_count(std::string_view s) {
  unsigned long w = 0;
  bool digits = !s.empty() && s.size() <= 3;
  for (char c : s) {
    digits = digits && c >= '0' && c <= '9';
    w = w * 10 + static_cast<unsigned long>(c - '0');
  }
  if (!digits || (w > 32 && w != 255)) return std::nullopt;
  return w == 255 ? 0 : static_cast<int>(w);
}

PciFunctions read_pci_functions(InputFs& fs, const std::string& name, Topology& t) {
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
  PciFunctions out;
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
    // The kernel's pci-sysfs creates vendor and device together for every function
    // (drivers/pci/pci-sysfs.c pci_dev_attrs), and lspci's sysfs backend needs both (pciutils
    // lib/sysfs.c sysfs_fill_info: sysfs_get_value(d, "vendor"/"device", mandatory)): a copy with
    // one of them is incomplete, an error naming the missing file. A copy with neither (a
    // hand-made tree) leaves the ids unknown.
    bool vok = true, dok = true;
    d.vendor = static_cast<uint16_t>(hex("vendor", vok));
    d.device = static_cast<uint16_t>(hex("device", dok));
    if (vok != dok)
      throw InputError(name, 0,
                       raw.dir + "/" + (vok ? "device" : "vendor") + ": missing, while " + (vok ? "vendor" : "device") +
                           " is there (the kernel creates both for every PCI function)");
    d.ids_known = vok;
    bool sok = true;
    d.subsys_vendor = static_cast<uint16_t>(hex("subsystem_vendor", sok));
    d.subsys_device = static_cast<uint16_t>(hex("subsystem_device", sok));
    bool cok = true;
    d.class_code = static_cast<uint32_t>(hex("class", cok));
    d.class_known = cok;
    // The local CPUs: the affinity column, and the locality of a function without numa_node.
    std::optional<CpuSet> local;
    if (auto l = rd("local_cpulist"))
      local = parse_cpulist(trimmed(*l));
    else if (auto m = rd("local_cpus"))
      local = parse_cpumask(trimmed(*m));
    if (local) d.cpu_affinity = format_cpulist(*local);
    if (auto n = rd("numa_node"))
      d.numa = std::atoi(trimmed(*n).c_str());
    else if (local)
      out.local_cpus[t.devices.size()] = *local;  // numa_node missing: locality from the CPUs
    if (auto v = rd("max_link_speed")) d.link_cap.speed_gts = parse_speed(trimmed(*v));
    // The kernel prints both as "%u" (drivers/pci/pci-sysfs.c): current_link_width the Negotiated
    // Link Width field, max_link_width pcie_get_width_cap(), PCIE_LNK_WIDTH_UNKNOWN (0xff,
    // include/linux/pci.h) without a Link Capabilities register: 255 is unknown; what the kernel
    // cannot print is an error naming the file, as a malformed id is.
    auto width = [&](const char* f, const std::string& v) {
      const std::string s = trimmed(v);
      if (const std::optional<int> w = lane_count(s)) return *w;
      throw InputError(name, 0, raw.dir + "/" + f + ": expected a link width of 0 to 32 lanes or 255 (unknown), found \"" + s + "\"");
    };
    if (auto v = rd("max_link_width")) d.link_cap.width = width("max_link_width", *v);
    if (auto v = rd("current_link_speed")) d.link_sta.speed_gts = parse_speed(trimmed(*v));
    if (auto v = rd("current_link_width")) d.link_sta.width = width("current_link_width", *v);
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
    d.host_bridge = t.host_bridge_index(raw.host_bridge);
    t.devices.push_back(std::move(d));
    out.dirs.push_back(raw.dir);
  }
  for (size_t i = 0; i < raws.size(); ++i) {
    if (raws[i].parent_bdf.empty()) continue;
    int p = t.find(raws[i].parent_bdf);
    t.devices[i].parent = p;
    if (p >= 0) t.devices[i].host_bridge = -1;
  }
  return out;
}

}  // namespace gdrpeer::topo::sysfs

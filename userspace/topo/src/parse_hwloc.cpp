// hwloc XML (lstopo --of xml): I/O objects (Bridge, PCIDev, OSDev) nest under
// the CPU-side object that is local to them; host bridges are Bridge objects
// with bridge_type "0-1". The NUMA locality of a host bridge is the nodeset of
// its nearest ancestor (hwloc 2) or the enclosing NUMANode (hwloc 1).
#include <algorithm>
#include <bit>
#include <cstdlib>
#include <string>
#include <unordered_map>

#include "gdrpeer/topo/errors.hpp"
#include "gdrpeer/topo/inputs.hpp"
#include "hex.hpp"
#include "sysfs_readers.hpp"
#include "xml_reader.hpp"
#include "xml_walk.hpp"

namespace gdrpeer::topo {

using detail::XmlReader;

namespace {

struct Frame {
  std::string_view type;    // object type, "" for non-object elements
  int numa = -2;            // -2: this object says nothing; -1: several nodes
  std::string_view cpuset;  // "0x0000ffff,0xffffffff"; "" when the object has none (I/O objects)
  int device = -1;          // device index for PCIDev / PCI bridge
  int host_bridge = -1;     // host bridge index for bridge_type 0-1
  bool is_machine = false, is_package = false;
};

bool parse_hex(std::string_view s, unsigned long& out) { return detail::parse_hex_digits(s, 16, out); }

// A cpuset as hwloc writes it ("0x000000ff,0xffffffff": 32-bit words, most significant
// first, an empty word is zero) as a CPU list ("0-39"); "" for an infinite set
// ("0xf...f,...", whose first word is no hex number) or a malformed one.
std::string cpuset_list(std::string_view cs) {
  const size_t words = static_cast<size_t>(std::count(cs.begin(), cs.end(), ',')) + 1;
  std::vector<bool> set(words * 32);
  size_t b = 0;
  for (size_t w = 0; w < words; ++w) {
    size_t c = cs.find(',', b);
    std::string_view word = cs.substr(b, c == std::string_view::npos ? std::string_view::npos : c - b);
    b = c == std::string_view::npos ? cs.size() : c + 1;
    if (word.substr(0, 2) == "0x") word.remove_prefix(2);
    if (word.empty()) continue;
    unsigned long v = 0;
    if (word.size() > 8 || !parse_hex(word, v)) return "";
    for (size_t k = 0; k < 32; ++k)
      if ((v >> k) & 1) set[(words - 1 - w) * 32 + k] = true;
  }
  return sysfs::format_cpulist(set);
}

// "0x00000001" or "0xffffffff,0x0000000f" (most significant word first).
// Returns the only set bit's index, -1 when several/none are set, -3 on error.
int single_node(std::string_view ns) {
  int found = -1, count = 0;
  // Word w of `words` (0 = first written = most significant) covers bits from (words-1-w)*32.
  const size_t words = static_cast<size_t>(std::count(ns.begin(), ns.end(), ',')) + 1;
  size_t b = 0;
  for (size_t w = 0; w < words; ++w) {
    size_t c = ns.find(',', b);
    std::string_view word = ns.substr(b, c == std::string_view::npos ? std::string_view::npos : c - b);
    b = c + 1;
    if (word.substr(0, 2) == "0x") word.remove_prefix(2);
    if (word.empty()) continue;  // hwloc writes ",," for all-zero words
    unsigned long v = 0;
    if (word.size() > 8 || !parse_hex(word, v)) return -3;  // a word is 32 bits (bitmap.c), as in cpuset_list
    if (v == 0) continue;
    count += std::popcount(v);
    found = static_cast<int>((words - 1 - w) * 32) + std::countr_zero(v);
  }
  return count == 1 ? found : -1;
}

// pci_type as hwloc writes it (topology-xml.c, "%04x [%04x:%04x] [%04x:%04x] %02x", hwloc 3
// adding " %02x", the prog-if): class, vendor:device, subsystem vendor:device, revision.
// "0302 [10de:20b0] [10de:134f] a1"
bool parse_pci_type(std::string_view s, Device& d) {
  unsigned long cls, v, dv, sv, sd, rev;
  if (s.size() < 31 || s.substr(4, 2) != " [" || s[10] != ':' || s.substr(15, 3) != "] [" || s[22] != ':' || s.substr(27, 2) != "] ")
    return false;
  if (!parse_hex(s.substr(0, 4), cls) || !parse_hex(s.substr(6, 4), v) || !parse_hex(s.substr(11, 4), dv) ||
      !parse_hex(s.substr(18, 4), sv) || !parse_hex(s.substr(23, 4), sd) || !parse_hex(s.substr(29, 2), rev))
    return false;
  d.class_code = static_cast<uint32_t>(cls << 8);
  d.class_known = true;
  d.vendor = static_cast<uint16_t>(v);
  d.device = static_cast<uint16_t>(dv);
  d.subsys_vendor = static_cast<uint16_t>(sv);
  d.subsys_device = static_cast<uint16_t>(sd);
  d.ids_known = true;
  return true;
}

// "0000:[10-10]" -> domain, first bus
bool parse_bridge_pci(std::string_view s, unsigned long& domain, unsigned long& sec) {
  size_t c = s.find(":[");
  if (c == std::string_view::npos || s.back() != ']') return false;
  size_t dash = s.find('-', c);
  if (dash == std::string_view::npos) return false;
  return parse_hex(s.substr(0, c), domain) && parse_hex(s.substr(c + 2, dash - c - 2), sec);
}

// A GPU's row of the NVLinkBandwidth matrix: a non-zero value to another GPU is a
// direct NVLink, to an NVSwitch port a link into the switch fabric. The diagonal
// and objects outside the PCI tree (POWER CPU ports) are skipped.
void nvlinks_from_matrix(Topology& t, const std::vector<std::pair<uint64_t, bool>>& objs, const std::vector<uint64_t>& values,
                         const std::unordered_map<uint64_t, std::pair<int, bool>>& gp_objects, const std::string& name, long line) {
  const size_t n = objs.size();
  if (n == 0 || values.size() != n * n)
    throw InputError(name, line,
                     "expected an NVLinkBandwidth matrix of " + std::to_string(n) + "x" + std::to_string(n) + " values, found " +
                         std::to_string(values.size()));
  t.nvlink_known = true;
  std::vector<std::pair<int, bool>> dev(n, {-1, false});
  for (size_t i = 0; i < n; ++i) {
    auto it = gp_objects.find(objs[i].first);
    if (objs[i].second && it != gp_objects.end()) dev[i] = it->second;
  }
  for (size_t i = 0; i < n; ++i) {
    if (dev[i].first < 0 || dev[i].second) continue;  // rows of GPUs only
    for (size_t j = 0; j < n; ++j) {
      if (j == i || dev[j].first < 0 || dev[j].first == dev[i].first || values[i * n + j] == 0) continue;
      NvLink l;
      l.gpu = dev[i].first;
      l.peer = dev[j].first;
      l.peer_bdf = t.devices[static_cast<size_t>(l.peer)].bdf;
      l.peer_is_switch = dev[j].second;
      l.bandwidth_mbps = values[i * n + j];
      t.nvlinks.push_back(std::move(l));
    }
  }
}

// NVLink (hwloc's NVML backend): a "NVLinkBandwidth" distances matrix over GPU
// OS devices and NVSwitch ports, objects named by gp_index.
struct GpObject {
  std::string_view gp_index;  // as written; read as a number only when a matrix needs it
  int device;
  bool nvswitch;
};
struct NvMatrix {
  std::vector<std::pair<uint64_t, bool>> objs;  // gp_index, known object type (OSDev/PCIDev)
  std::vector<uint64_t> values;
  long line = 0;
};

// What the walk over one hwloc XML document builds up.
struct HwlocRead {
  HwlocRead(Topology& topo, const std::string& file) : t(topo), name(file) {}
  Topology& t;
  const std::string& name;
  int numa_objects = 0, packages = 0;
  // Duplicate check without a scan per device, keyed by the normalized address's
  // hex digits and length (no string hashing, no string per node).
  std::unordered_map<std::string, int> bdfs;               // -> device index
  std::unordered_map<const char*, std::string> cpu_lists;  // cpuset attribute (by its place in the text) -> CPU list
  // hwloc 3 writes an OS device's types as a bit mask (OpenFabrics 1<<5, network
  // 1<<4); hwloc 2 as one number (OpenFabrics 3, network 2).
  bool osdev_mask = false;
  std::vector<GpObject> gp_objects;  // PCI devices and the OS devices under them
  std::vector<NvMatrix> nv;
  bool in_nv = false;  // inside an NVLinkBandwidth <distances2>
};

using Walk = detail::XmlWalk<HwlocRead, Frame>;

void on_topology(HwlocRead& s, const Walk& w, Frame& f) {
  std::string_view version;
  s.osdev_mask = w.reader().attr("version", version) && std::atoi(std::string(version).c_str()) >= 3;
  // hwloc 3 writes the machine-wide infos (OSRelease, Architecture) at the root.
  f.type = w.reader().tag();
  f.is_machine = true;
}

// <info name=.. value=..> annotates the element it is in (hwloc__xml_import_info): an object or
// the root; the infos of other elements (a <cpukind>'s, a <distances2>'s) are not the node's.
// The value is decoded only when it is used: most of the ~1,000 infos are not.
void on_info(HwlocRead& s, const Walk& w, Frame&) {
  const XmlReader& r = w.reader();
  Topology& t = s.t;
  // Never empty: the walk's first element is <topology>, and the reader refuses elements after it.
  const Frame& f = w.stack().back().frame;
  std::string_view key;
  std::string key_decoded;
  if (r.attr("name", key) && key.find('&') != std::string_view::npos) key = key_decoded = r.attr_str("name");
  if (f.device >= 0) {
    Device& d = t.devices[f.device];
    if (key == "PCIVendor") d.name = r.attr_str("value") + (d.name.empty() ? "" : " " + d.name);
    if (key == "PCIDevice") d.name = d.name.empty() ? r.attr_str("value") : d.name + " " + r.attr_str("value");
    return;
  }
  std::string* text = nullptr;
  int* number = nullptr;
  if (f.is_machine) {
    text = key == "DMIProductName" ? &t.dmi_product
           : key == "DMISysVendor" ? &t.dmi_vendor
           : key == "Architecture" ? &t.cpu.arch
           : key == "OSRelease"    ? &t.sw.kernel_release
                                   : nullptr;
  } else if (f.is_package && s.packages == 1) {  // the first package's: a second one's come when packages is 2
    text = key == "CPUVendor" ? &t.cpu.vendor : key == "CPUModel" ? &t.cpu.model_name : nullptr;
    number = key == "CPUFamilyNumber" ? &t.cpu.family : key == "CPUModelNumber" ? &t.cpu.model : nullptr;
  }
  if (text) *text = r.attr_str("value");
  if (number) *number = std::atoi(r.attr_str("value").c_str());
}

void on_distances(HwlocRead& s, const Walk& w, Frame&) {
  s.in_nv = w.reader().attr_str("name") == "NVLinkBandwidth";
  if (s.in_nv) {
    s.nv.emplace_back();
    s.nv.back().line = w.reader().line();
  }
}
void on_distances_end(HwlocRead& s) { s.in_nv = false; }

// A bound on what garbage can make this parser hold; hwloc refuses a matrix with more values
// than nbobjs x nbobjs.
constexpr size_t kMaxNvValues = size_t{1} << 20;

// <indexes> and <u64values> of an NVLinkBandwidth matrix: "35 36 ..." (distances2, gp
// indexing) or "OSDev:35 PCIDev:12 ..." (distances2hetero).
void on_values(HwlocRead& s, const Walk& w, Frame&) {
  if (!s.in_nv) return;  // in_nv: inside an NVLinkBandwidth matrix, which on_distances opened in s.nv
  const XmlReader& r = w.reader();
  const std::string_view tag = r.tag();
  std::string_view body = r.text();
  size_t p = 0;
  for (;;) {  // ends at the first empty token: the end of the body
    while (p < body.size() && (body[p] == ' ' || body[p] == '\n' || body[p] == '\t' || body[p] == '\r')) ++p;
    size_t e = p;
    while (e < body.size() && body[e] != ' ' && body[e] != '\n' && body[e] != '\t' && body[e] != '\r') ++e;
    if (e == p) break;
    std::string_view tok = body.substr(p, e - p);
    p = e;
    size_t colon = tok.find(':');
    std::string_view num = colon == std::string_view::npos ? tok : tok.substr(colon + 1);
    char* end = nullptr;
    const std::string n(num);
    const unsigned long long v = std::strtoull(n.c_str(), &end, 10);
    if (n.empty() || *end) r.fail("expected a number in <" + std::string(tag) + ">, found \"" + std::string(tok) + "\"");
    if (tag == "indexes")
      s.nv.back().objs.emplace_back(v,
                                    colon == std::string_view::npos || tok.substr(0, colon) == "OSDev" || tok.substr(0, colon) == "PCIDev");
    else if (s.nv.back().values.size() == kMaxNvValues)
      r.fail("expected at most " + std::to_string(kMaxNvValues) + " values in an NVLinkBandwidth matrix (1024 objects)");
    else
      s.nv.back().values.push_back(v);
  }
}

// What an object finds above it: the nearest enclosing PCI object or host bridge, and its
// NUMA locality.
struct Enclosing {
  int dev = -1, hb = -1, numa = -1;
};
Enclosing enclosing(const Walk& w) {
  Enclosing e;
  for (auto o = w.stack().rbegin(); o != w.stack().rend(); ++o) {
    const Frame& f = o->frame;
    if (e.dev < 0 && e.hb < 0) {
      if (f.device >= 0)
        e.dev = f.device;
      else if (f.host_bridge >= 0)
        e.hb = f.host_bridge;
    }
    if (f.numa != -2) {  // only normal and memory objects carry a nodeset (on_object)
      e.numa = f.numa;
      break;
    }
  }
  return e;
}

void add_host_bridge(HwlocRead& s, const XmlReader& r, Frame& f, int numa) {
  std::string_view bp;
  unsigned long dom, sec;
  if (!r.attr("bridge_pci", bp) || !parse_bridge_pci(bp, dom, sec)) r.fail("expected bridge_pci=\"dddd:[bb-bb]\" on a host bridge object");
  char buf[16];
  std::snprintf(buf, sizeof buf, "%04lx:%02lx", dom & 0xffff, sec & 0xff);
  Topology& t = s.t;
  f.host_bridge = t.host_bridge_index(buf);
  if (numa >= 0) t.host_bridges[f.host_bridge].numa = numa;
}

// The attributes of a PCIDev or (PCI-to-PCI) Bridge object as a device.
Device read_pci_object(const XmlReader& r, std::string_view type) {
  std::string_view busid, ptype;
  if (!r.attr("pci_busid", busid)) r.fail("expected pci_busid on a " + std::string(type) + " object");
  auto bdf = parse_bdf(busid);
  if (!bdf) r.fail("expected a PCI address dddd:bb:dd.f in pci_busid=\"" + std::string(busid) + "\"");
  Device d;
  d.bdf = *bdf;
  if (r.attr("pci_type", ptype) && !parse_pci_type(ptype, d))
    r.fail("expected pci_type=\"cccc [vvvv:dddd] [ssss:ssss] rr\", found \"" + std::string(ptype) + "\"");
  std::string_view ls;
  if (r.attr("pci_link_speed", ls)) d.link_gbps = std::atof(std::string(ls).c_str());
  if (type == "Bridge") {
    d.is_bridge = true;
    std::string_view bp;
    unsigned long dom, sec;
    if (r.attr("bridge_pci", bp)) {
      if (!parse_bridge_pci(bp, dom, sec)) r.fail("expected bridge_pci=\"dddd:[bb-bb]\"");
      d.secondary_bus = static_cast<int>(sec);
    }
  }
  return d;
}

void add_pci_device(HwlocRead& s, const Walk& w, Frame& f, Enclosing up) {
  const XmlReader& r = w.reader();
  Topology& t = s.t;
  Device d = read_pci_object(r, f.type);
  // I/O objects carry no cpuset; the object they hang below (package, group, NUMA node,
  // machine) does, as nvidia-smi's CPU Affinity is the device's node's.
  // Converted once per cpuset (hundreds of devices share a few packages): fleet speed.
  std::string_view cs;
  for (auto o = w.stack().rbegin(); o != w.stack().rend() && cs.empty(); ++o) cs = o->frame.cpuset;
  if (!cs.empty()) {
    auto [list, fresh] = s.cpu_lists.try_emplace(cs.data());
    if (fresh) list->second = cpuset_list(cs);
    d.cpu_affinity = list->second;
  }
  // A PCI device sits on a bus, which only a bridge (or a host bridge) provides.
  if (up.dev >= 0 && !t.devices[up.dev].is_bridge)
    r.fail("expected a PCI object below a bridge, a host bridge or a CPU-side object, not below PCIDev " + t.devices[up.dev].bdf);
  d.parent = up.dev;
  if (up.dev < 0) {
    // A PCI object outside any host bridge (hwloc without bridges kept).
    if (up.hb < 0) up.hb = t.host_bridge_index(d.bdf.substr(0, 7));
    d.host_bridge = up.hb;
  }
  std::string_view sub;
  const bool nvswitch = r.attr("subtype", sub) && sub == "NVSwitch";
  auto [seen, fresh] = s.bdfs.try_emplace(d.bdf, static_cast<int>(t.devices.size()));
  if (fresh) {
    t.devices.push_back(std::move(d));
  } else {
    // hwloc loads such a file with a warning; so does this: the first object
    // stands, what nests in the second (devices, OS devices) is placed under it.
    t.notes.push_back(s.name + ":" + std::to_string(r.line()) + ": duplicate PCI device " + d.bdf +
                      ": the first object with this address is used");
  }
  f.device = seen->second;
  if (std::string_view gp; r.attr("gp_index", gp)) s.gp_objects.push_back({gp, f.device, nvswitch});
}

// OpenFabrics (type 3) marks an RDMA device; CoProcessor "CUDA" a GPU.
void add_osdev(HwlocRead& s, const Walk& w) {
  const XmlReader& r = w.reader();
  std::string_view ot, sub, nm;
  r.attr("osdev_type", ot);
  r.attr("subtype", sub);
  r.attr("name", nm);
  for (auto o = w.stack().rbegin(); o != w.stack().rend(); ++o) {
    if (o->frame.device < 0) continue;
    if (std::string_view gp; r.attr("gp_index", gp)) s.gp_objects.push_back({gp, o->frame.device, false});
    Device& d = s.t.devices[o->frame.device];
    const long types = std::atol(std::string(ot).c_str());
    const bool rdma = s.osdev_mask ? (types & (1 << 5)) != 0 : ot == "3";
    // An hwloc 3 RDMA device is network and OpenFabrics; the interface is network only
    // (topology-xml.c writes the first "3" for hwloc 2, the second "2").
    const bool net = s.osdev_mask ? (types & (1 << 4)) != 0 && !rdma : ot == "2";
    if (rdma) d.rdma_name = std::string(nm);
    if (net && d.net_name.empty()) d.net_name = std::string(nm);
    break;
  }
}

void on_object(HwlocRead& s, const Walk& w, Frame& f) {
  const XmlReader& r = w.reader();
  std::string_view type;
  if (!r.attr("type", type) || type.empty()) r.fail("expected a type attribute on <object>");
  f.type = type;
  const bool io = type == "Bridge" || type == "PCIDev" || type == "OSDev";
  std::string_view ns;
  // hwloc refuses these (hwloc__xml_import_object: "invalid special object with cpuset or
  // nodeset"; hwloc.h: I/O objects have NULL CPU and node sets): no locality is taken from them.
  if (io && (r.attr("cpuset", ns) || r.attr("nodeset", ns)))
    r.fail("expected no cpuset or nodeset on an I/O object (" + std::string(type) + ")");
  if (r.attr("nodeset", ns)) {
    const int n = single_node(ns);
    if (n == -3) r.fail("expected a hex bitmap in nodeset=\"" + std::string(ns) + "\"");
    f.numa = n;
  }
  // hwloc 2 hangs I/O below the highest object whose cpuset is the device's locality
  // (pci-common.c hwloc__pci_find_insert_io_parent_by_cpuset), which can be an L3Cache (AMD's
  // LLC-as-NUMA) or a Core: any normal object's cpuset may be the one wanted (I/O has none, above).
  r.attr("cpuset", f.cpuset);
  if (type == "Machine") f.is_machine = true;
  if (type == "Package") {
    f.is_package = true;
    ++s.packages;
  }
  if (type == "NUMANode") {
    ++s.numa_objects;
    std::string_view os;
    if (r.attr("os_index", os)) f.numa = std::atoi(std::string(os).c_str());
  }
  const Enclosing up = enclosing(w);
  if (type == "Bridge" || type == "PCIDev") {
    std::string_view bt;
    if (type == "Bridge" && r.attr("bridge_type", bt) && bt.substr(0, 2) == "0-")
      add_host_bridge(s, r, f, up.numa);
    else
      add_pci_device(s, w, f, up);
  } else if (type == "OSDev") {
    add_osdev(s, w);
  }
}

constexpr Walk::Element kRoot{"topology", on_topology};
constexpr Walk::Element kElements[] = {
    {"object", on_object},
    {"info", on_info},
    {"distances2", on_distances, on_distances_end},
    {"distances2hetero", on_distances, on_distances_end},
    {"indexes", on_values},
    {"u64values", on_values},
};
constexpr Walk::Element kOther{"", nullptr};  // page_type, other distances, userdata...: not needed

}  // namespace

Topology parse_hwloc_xml(std::string_view text, const std::string& name, std::vector<Device> storage) {
  Topology t = new_topology(name, "hwloc", std::move(storage));
  XmlReader r(text, name);
  HwlocRead s{t, name};
  Walk walk(r, kRoot, "hwloc XML", kElements, kOther);
  walk.run(s);
  if (!walk.root_seen()) throw InputError(name, 1, "expected <topology> (hwloc XML)");
  if (!s.nv.empty()) {
    std::unordered_map<uint64_t, std::pair<int, bool>> by_gp;  // gp_index -> device, is an NVSwitch
    for (const auto& o : s.gp_objects) by_gp[std::strtoull(std::string(o.gp_index).c_str(), nullptr, 10)] = {o.device, o.nvswitch};
    for (const NvMatrix& m : s.nv) nvlinks_from_matrix(t, m.objs, m.values, by_gp, name, m.line);
  }
  t.cpu.sockets = s.packages;
  t.numa_nodes = s.numa_objects;
  t.finalize();
  return t;
}

}  // namespace gdrpeer::topo

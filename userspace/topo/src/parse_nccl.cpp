// NCCL topology XML (<system><cpu><pci>...). NCCL models each PCI switch as one
// <pci> node of class 0x0604 and every CPU (NUMA node) as the root of its PCI
// trees, so each <cpu> becomes one "host bridge" here: two devices under one
// CPU meet at PHB, under two CPUs at SYS (NCCL has no NODE level).
#include <algorithm>
#include <cstdlib>
#include <map>
#include <string>

#include "gdrpeer/topo/errors.hpp"
#include "gdrpeer/topo/inputs.hpp"
#include "hex.hpp"
#include "sysfs_readers.hpp"
#include "xml_reader.hpp"
#include "xml_walk.hpp"

namespace gdrpeer::topo {

using detail::XmlReader;

namespace {

bool hex_attr(std::string_view s, unsigned long& out) {
  if (s.substr(0, 2) == "0x" || s.substr(0, 2) == "0X") s.remove_prefix(2);
  return detail::parse_hex_digits(s, 8, out);
}

struct Frame {
  int device = -1;
  int host_bridge = -1;
};

struct NcclRead {
  explicit NcclRead(Topology& topo) : t(topo) {}
  Topology& t;
  int cpus = 0;
  std::map<int, std::string> cpu_affinity;  // host bridge ("cpuN") -> its CPUs as a list
};

using Walk = detail::XmlWalk<NcclRead, Frame>;

// The nearest enclosing <pci> (device) or else <cpu> (host bridge); -1 for the other.
struct Enclosing {
  int dev = -1, hb = -1;
};
Enclosing enclosing(const Walk& w) {
  Enclosing e;
  for (auto it = w.stack().rbegin(); it != w.stack().rend(); ++it) {
    if (it->frame.device >= 0) {
      e.dev = it->frame.device;
      break;
    }
    if (it->frame.host_bridge >= 0) {
      e.hb = it->frame.host_bridge;
      break;
    }
  }
  return e;
}

// The GPU a <nvlink> or <c2c> belongs to: its parent <gpu>'s PCI device, else -1.
int enclosing_gpu(const Walk& w) {
  // The stack holds <system> at least: handlers run only for elements below the document element.
  return w.stack().back().tag == "gpu" ? enclosing(w).dev : -1;
}

void on_cpu(NcclRead& s, const Walk& w, Frame& f) {
  const XmlReader& r = w.reader();
  Topology& t = s.t;
  const int cpus = s.cpus;
  if (w.stack().size() != 1) r.fail("expected <cpu> directly inside <system>");
  std::string numaid = r.attr_str("numaid");
  char* end = nullptr;
  long n = numaid.empty() ? cpus : std::strtol(numaid.c_str(), &end, 10);
  // strtol leaves `end` at the first byte it did not use: a non-empty numaid is a number when that is its end.
  if (!numaid.empty() && *end) r.fail("expected a number in numaid=\"" + numaid + "\"");
  f.host_bridge = t.host_bridge_index("cpu" + std::to_string(cpus));
  t.host_bridges[f.host_bridge].numa = static_cast<int>(n);
  // affinity="00000000,00ffffff": the node's cpumap as sysfs writes it (NCCL reads it there).
  if (std::string aff = r.attr_str("affinity"); !aff.empty())
    s.cpu_affinity[f.host_bridge] = sysfs::format_cpulist(sysfs::parse_cpumask(aff));
  if (cpus == 0) {
    t.cpu.arch = r.attr_str("arch");
    t.cpu.vendor = r.attr_str("vendor");
    std::string fam = r.attr_str("familyid"), mod = r.attr_str("modelid");
    if (!fam.empty()) t.cpu.family = std::atoi(fam.c_str());
    if (!mod.empty()) t.cpu.model = std::atoi(mod.c_str());
  }
  ++s.cpus;
}

// class, vendor, device and subsystem ids of a <pci> into d.
void read_pci_ids(const XmlReader& r, Device& d) {
  unsigned long v;
  std::string_view a;
  if (r.attr("class", a)) {
    if (!hex_attr(a, v)) r.fail("expected a hex class like 0x030200, found \"" + std::string(a) + "\"");
    d.class_code = static_cast<uint32_t>(v);
    d.class_known = true;
    d.is_bridge = d.base_class() == 0x06 && d.sub_class() == 0x04;
  }
  struct {
    const char* key;
    uint16_t* dst;
  } ids[] = {{"vendor", &d.vendor}, {"device", &d.device}, {"subsystem_vendor", &d.subsys_vendor}, {"subsystem_device", &d.subsys_device}};
  for (auto& id : ids) {
    if (!r.attr(id.key, a)) continue;
    if (!hex_attr(a, v) || v > 0xffff) r.fail(std::string("expected a 16-bit hex ") + id.key + ", found \"" + std::string(a) + "\"");
    *id.dst = static_cast<uint16_t>(v);
    if (id.dst == &d.vendor) d.ids_known = true;
  }
}

// link_width: NCCL writes the lanes NVML reports, or the smaller of sysfs max_link_width of the
// device and of its port, or "" when it has neither (src/graph/xml.cc ncclTopoGetXmlFromSys); the
// kernel prints PCIE_LNK_WIDTH_UNKNOWN (0xff, include/linux/pci.h) in max_link_width of a function
// without the capability. "", 0 and 255 are unknown (0); a width is otherwise 1 to 32 lanes.
int link_width(const XmlReader& r, std::string_view a) {
  if (a.empty()) return 0;
  if (const std::optional<int> w = sysfs::lane_count(a)) return *w;
  r.fail("expected a link width of 1 to 32 lanes (0, 255 or empty: unknown) in link_width=\"" + std::string(a) + "\"");
}

void on_pci(NcclRead& s, const Walk& w, Frame& f) {
  const XmlReader& r = w.reader();
  Topology& t = s.t;
  const Enclosing up = enclosing(w);
  if (up.dev < 0 && up.hb < 0) r.fail("expected <pci> inside a <cpu> or another <pci>");
  if (up.dev >= 0 && !t.devices[up.dev].is_bridge) {
    // Hand-written files often omit the class of switches: nesting says it.
    if (t.devices[up.dev].class_known) r.fail("expected <pci> only inside a <cpu> or a bridge <pci> (class 0x0604)");
    t.devices[up.dev].is_bridge = true;
  }
  std::string_view busid;
  if (!r.attr("busid", busid)) r.fail("expected a busid attribute on <pci>");
  auto bdf = parse_bdf(busid);
  if (!bdf) r.fail("expected a PCI address dddd:bb:dd.f in busid=\"" + std::string(busid) + "\"");
  Device d;
  d.bdf = *bdf;
  read_pci_ids(r, d);
  if (d.bdf.rfind("ffff:ff:", 0) == 0 || d.vendor == 0xffff) {  // a vendor of 0xffff was read (0: none given)
    t.placeholder_switches = true;
    d.ids_known = false;  // placeholder IDs say nothing about the hardware
  }
  std::string_view a;
  if (r.attr("link_speed", a)) d.link_sta.speed_gts = std::atof(std::string(a).c_str());
  if (r.attr("link_width", a)) d.link_sta.width = link_width(r, a);
  d.parent = up.dev;
  d.host_bridge = up.hb;  // -1 below a <pci>: enclosing() stops at the nearest of the two
  // Below <system> and its <cpu> (on_cpu allows <cpu> there only, and up says there is one).
  const int cpu = w.stack()[1].frame.host_bridge;
  if (auto it = s.cpu_affinity.find(cpu); it != s.cpu_affinity.end()) d.cpu_affinity = it->second;
  if (t.find(d.bdf) >= 0) r.fail("duplicate PCI device " + d.bdf);
  t.devices.push_back(std::move(d));
  f.device = static_cast<int>(t.devices.size() - 1);
}

// <nvlink target="BDF" count="N" tclass="0x068000"> inside <gpu>: to another GPU, to an
// NVSwitch (class 0x0680, "other bridge"), or to a CPU (POWER9, 0x068001), which is not a GPU
// peer path (NCCL src/graph/topo.cc kvDictPciClass: 0x068000 NVS, 0x068001 CPU).
constexpr unsigned long kNvlinkToCpu = 0x068001;
void on_nvlink(NcclRead& s, const Walk& w, Frame&) {
  const XmlReader& r = w.reader();
  const int gpu = enclosing_gpu(w);
  std::string_view a;
  unsigned long tclass = 0;
  if (gpu >= 0 && (!r.attr("tclass", a) || hex_attr(a, tclass))) {
    NvLink l;
    l.gpu = gpu;
    l.peer_bdf = r.attr_str("target");
    l.peer_is_switch = (tclass >> 8) == 0x0680 && tclass != kNvlinkToCpu;
    l.links = std::atoi(r.attr_str("count").c_str());
    const bool to_gpu = tclass == 0 || (tclass >> 16) == 0x03;
    if (l.peer_is_switch || to_gpu) s.t.nvlinks.push_back(std::move(l));
  } else if (gpu >= 0) {
    r.fail("expected a hex class like 0x068000 in tclass=\"" + std::string(a) + "\"");
  }
}

// <gpu>, <nic>, <net>: the role of the enclosing <pci>. A <nic> straight under <cpu> (no
// PCI device, e.g. a virtual NIC) has no path to judge.
void on_endpoint(NcclRead& s, const Walk& w, Frame&) {
  const XmlReader& r = w.reader();
  const int dev = enclosing(w).dev;
  if (dev < 0) return;
  const std::string_view tag = r.tag();
  Device& d = s.t.devices[dev];
  if (tag == "gpu") d.role = Role::GPU;
  if (tag == "nic") d.role = Role::NIC;
  if (tag == "net" && d.rdma_name.empty()) d.rdma_name = r.attr_str("name");
  // NCCL's own GPUDirect RDMA answer: <gpu gdr> (the GPU side) and <net gdr> (the NIC's
  // peer memory or dma-buf support), NCCL src/graph/topo.cc ncclTopoAddNet/AddGpu.
  std::string_view g;
  if ((tag == "gpu" || tag == "net") && r.attr("gdr", g))
    (tag == "gpu" ? s.t.sw.stack.nccl_gpu_gdr : s.t.sw.stack.nccl_net_gdr)[dev] = std::atoi(std::string(g).c_str());
}

// <c2c bw count> inside <gpu>: the GPU reaches its CPU over NVLink-C2C (NCCL 2.27+,
// src/graph/xml.cc), which is what turns NCCL's P2C path on.
void on_c2c(NcclRead& s, const Walk& w, Frame&) {
  if (const int gpu = enclosing_gpu(w); gpu >= 0)
    s.t.sw.stack.nccl_gpu_c2c[gpu] = std::max(1, std::atoi(w.reader().attr_str("count").c_str()));
}

constexpr Walk::Element kRoot{"system", nullptr};
constexpr Walk::Element kElements[] = {
    {"pci", on_pci},       {"gpu", on_endpoint}, {"nic", on_endpoint}, {"net", on_endpoint},
    {"nvlink", on_nvlink}, {"c2c", on_c2c},      {"cpu", on_cpu},
};
constexpr Walk::Element kOther{"", nullptr};

}  // namespace

Topology parse_nccl_xml(std::string_view text, const std::string& name, std::vector<Device> storage) {
  Topology t = new_topology(name, "nccl-xml", std::move(storage));
  // An NCCL topology dump pasted into an issue is often cut off: read it up to its last
  // complete tag, note where it ends, and leave the node incomplete (Topology::cut_off).
  const size_t last = text.find_last_not_of(" \t\r\n");
  const bool whole = last != std::string_view::npos && text.substr(0, last + 1).ends_with("</system>");
  if (!whole && text.rfind('>') != std::string_view::npos) text = text.substr(0, text.rfind('>') + 1);
  XmlReader r(text, name);
  if (!whole) r.allow_truncation();
  NcclRead s{t};
  Walk(r, kRoot, "NCCL topology XML", kElements, kOther).run(s);
  const int cpus = s.cpus;
  // NCCL files list only the GPUs and NICs NCCL uses: the class says the role
  // even where vendor ids are missing (cloud files with synthetic ids).
  // (An unknown class is 0 and a bridge's is 0x0604 here: neither base class matches.)
  for (auto& d : t.devices) {
    if (d.role != Role::None) continue;
    if (d.base_class() == 0x03)
      d.role = Role::GPU;
    else if (d.base_class() == 0x02)
      d.role = Role::NIC;
  }
  // NVLink peers by address, now that every <pci> is known. (A file without any
  // <nvlink> may be a provider's hand-written one that leaves NVLink out: unknown.)
  for (auto& l : t.nvlinks)
    if (auto bdf = parse_bdf(l.peer_bdf)) l.peer = t.find(*bdf);
  t.nvlink_known = !t.nvlinks.empty();
  t.numa_nodes = cpus;
  t.cpu.sockets = 0;
  // NCCL gives no port types, and its switch nodes are whole switches: every port type stays
  // unknown, so that each switch is its own unit in the path classification (an unknown-type
  // bridge is one bridge), whatever finalize() infers from depth.
  t.finalize();
  for (auto& d : t.devices) {
    d.port = PortType::Unknown;
    d.port_inferred = false;
  }
  if (r.truncated()) {
    t.cut_off = name + ":" + std::to_string(r.line_of(text.size())) + " inside <" + std::string(r.cut_inside()) + ">";
    t.notes.push_back(t.cut_off +
                      ": the file is cut off; read up to its last complete tag, what came after (GPUs, NICs, "
                      "NVLinks) is missing");
  }
  return t;
}

}  // namespace gdrpeer::topo

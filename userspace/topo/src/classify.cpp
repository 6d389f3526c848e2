// nvidia-smi/NCCL path classes from the PCI tree. A PCIe switch (its upstream
// port and all its downstream ports) counts as ONE bridge, as nvidia-smi and
// NCCL count it; Broadcom switches that NCCL flattens count as one too.
#include <algorithm>

#include "gdrpeer/topo/classify.hpp"

namespace gdrpeer::topo {

namespace {

// Bridges above x, nearest first, into out[]; returns how many. A bounded
// array (no heap): classify runs for every pair and matrix cell.
constexpr size_t kMaxDepth = 256;
size_t ancestors(const Topology& t, int x, int* out) {
  size_t n = 0;
  for (int p = t.devices[x].parent; p >= 0 && n < kMaxDepth; p = t.devices[p].parent) out[n++] = p;
  return n;
}

// The "bridge unit" a port belongs to.
int unit_of(const Topology& t, const RuleData& k, int x) {
  const Device& d = t.devices[x];
  int u = x;
  if (d.port == PortType::SwitchDownstream && d.parent >= 0 && t.devices[d.parent].port == PortType::SwitchUpstream) u = d.parent;
  // Flatten two-level switches NCCL treats as one (Broadcom PEX Gen4/Gen5):
  // USP(inner) <- DSP(outer) <- USP(outer), same switch family.
  for (int guard = 0; guard < 8; ++guard) {
    const Device& usp = t.devices[u];
    if (usp.port != PortType::SwitchUpstream || !k.flattens(usp) || usp.parent < 0) break;
    const Device& dsp = t.devices[usp.parent];
    if (dsp.port != PortType::SwitchDownstream || dsp.parent < 0) break;
    const Device& outer = t.devices[dsp.parent];
    if (outer.port != PortType::SwitchUpstream || !k.flattens(outer)) break;
    u = dsp.parent;
  }
  return u;
}

int numa_of(const Topology& t, int x) {
  const Device& d = t.devices[x];
  if (d.numa >= 0) return d.numa;
  return d.host_bridge >= 0 ? t.host_bridges[d.host_bridge].numa : -1;
}

}  // namespace

PathInfo classify(const Topology& t, int a, int b, const RuleData& k) {
  PathInfo p;
  classify(t, a, b, k, p);
  return p;
}

void classify(const Topology& t, int a, int b, const RuleData& k, PathInfo& p) {
  std::vector<int> ports_a = std::move(p.ports_a), ports_b = std::move(p.ports_b);  // their memory, reused
  p = PathInfo{};
  p.ports_a = std::move(ports_a);
  p.ports_b = std::move(ports_b);
  p.ports_a.clear();
  p.ports_b.clear();
  int up_a[kMaxDepth], up_b[kMaxDepth];
  size_t na_up = ancestors(t, a, up_a), nb_up = ancestors(t, b, up_b);
  const Device& da = t.devices[a];
  const Device& db = t.devices[b];
  if (da.host_bridge != db.host_bridge) {
    int na = numa_of(t, a), nb = numa_of(t, b);
    if (na >= 0 && nb >= 0 && na != nb) {
      p.cls = PathClass::SYS;
    } else {
      p.cls = PathClass::NODE;
      p.numa_guessed = (na < 0 || nb < 0) && t.numa_nodes != 1;
    }
    p.ports_a.assign(up_a, up_a + na_up);
    p.ports_b.assign(up_b, up_b + nb_up);
  } else {
    int lca = -1;
    size_t ia = 0, ib = 0;
    for (ia = 0; ia < na_up && lca < 0; ++ia)
      for (ib = 0; ib < nb_up; ++ib)
        if (up_a[ia] == up_b[ib]) {
          lca = up_a[ia];
          break;
        }
    if (lca < 0) {
      p.cls = PathClass::PHB;
      p.ports_a.assign(up_a, up_a + na_up);
      p.ports_b.assign(up_b, up_b + nb_up);
    } else {
      p.lca = lca;
      --ia;  // loop advanced past the match
      p.ports_a.assign(up_a, up_a + ia);
      p.ports_b.assign(up_b, up_b + ib);
      // PIX when every bridge on the path belongs to the meeting point's unit.
      int unit = unit_of(t, k, lca);
      bool one = true;
      for (int x : p.ports_a) one = one && unit_of(t, k, x) == unit;
      for (int x : p.ports_b) one = one && unit_of(t, k, x) == unit;
      p.cls = one ? PathClass::PIX : PathClass::PXB;
    }
  }
  switch (p.cls) {
    case PathClass::PIX:
    case PathClass::PXB: p.cuda = CudaCase::SwitchOnly; break;
    case PathClass::PHB:
    case PathClass::NODE: p.cuda = CudaCase::RootComplex; break;
    case PathClass::SYS: p.cuda = CudaCase::CpuInterconnect; break;
  }
  p.nccl_gdr = p.cls == PathClass::PIX || p.cls == PathClass::PXB;
}

namespace {

bool is_nvswitch(const Device& d) {
  return (d.ids_known && d.vendor == 0x10de && d.class_known && (d.class_code >> 8) == 0x0680) ||
         d.name.find("NVSwitch") != std::string::npos;
}

bool is_nvidia(const Device& d) { return d.ids_known ? d.vendor == 0x10de : d.name.find("NVIDIA") != std::string::npos; }

}  // namespace

bool nvswitch_on_pci_bus(const Topology& t) { return std::any_of(t.devices.begin(), t.devices.end(), is_nvswitch); }

NvLinkPath nvlink_between(const Topology& t, int a, int b, bool nvswitch_on_bus) {
  NvLinkPath p;
  if (t.nvlinks.empty()) {
    // No link list, but NVSwitches on the PCI bus (HGX/DGX baseboards): their NVIDIA GPUs
    // reach each other through the switch fabric.
    if (nvswitch_on_bus && is_nvidia(t.devices[a]) && is_nvidia(t.devices[b])) {
      p.linked = p.via_switch = p.inferred = true;
      p.inferred_from = "nvswitch-on-bus";
    }
    return p;
  }
  int direct_ab = 0, direct_ba = 0, switch_a = 0, switch_b = 0;
  bool any_ab = false, any_a_switch = false, any_b_switch = false;
  uint64_t bw_ab = 0, bw_ba = 0, sbw_a = 0, sbw_b = 0;
  for (const auto& l : t.nvlinks) {
    const bool to_b = l.peer == b || (l.peer < 0 && l.peer_bdf == t.devices[b].bdf);
    const bool to_a = l.peer == a || (l.peer < 0 && l.peer_bdf == t.devices[a].bdf);
    if (l.gpu == a && !l.peer_is_switch && to_b) {
      any_ab = true;
      direct_ab += l.links;
      bw_ab += l.bandwidth_mbps;
    } else if (l.gpu == b && !l.peer_is_switch && to_a) {
      any_ab = true;
      direct_ba += l.links;
      bw_ba += l.bandwidth_mbps;
    } else if (l.gpu == a && l.peer_is_switch) {
      any_a_switch = true;
      switch_a += l.links;
      sbw_a += l.bandwidth_mbps;
    } else if (l.gpu == b && l.peer_is_switch) {
      any_b_switch = true;
      switch_b += l.links;
      sbw_b += l.bandwidth_mbps;
    }
  }
  if (any_ab) {
    p.linked = true;
    p.links = std::max(direct_ab, direct_ba);
    p.bandwidth_mbps = std::max(bw_ab, bw_ba);
  } else if (any_a_switch && any_b_switch) {
    p.linked = p.via_switch = true;
    p.links = std::min(switch_a, switch_b);
    p.bandwidth_mbps = std::min(sbw_a, sbw_b);
  }
  return p;
}

std::string nvlink_cell(const NvLinkPath& l) {
  if (!l.linked) return "";
  return l.links > 0 ? "NV" + std::to_string(l.links) : "NV";
}

const char* to_string(PathClass c) {
  switch (c) {
    case PathClass::PIX: return "PIX";
    case PathClass::PXB: return "PXB";
    case PathClass::PHB: return "PHB";
    case PathClass::NODE: return "NODE";
    case PathClass::SYS: return "SYS";
  }
  return "?";
}

const char* to_string(CudaCase c) {
  switch (c) {
    case CudaCase::SwitchOnly: return "switch";
    case CudaCase::RootComplex: return "root-complex";
    case CudaCase::CpuInterconnect: return "cpu-interconnect";
  }
  return "?";
}

}  // namespace gdrpeer::topo

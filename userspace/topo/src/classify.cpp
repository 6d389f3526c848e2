// nvidia-smi/NCCL path classes from the PCI tree. A PCIe switch (its upstream
// port and all its downstream ports) counts as ONE bridge, as nvidia-smi and
// NCCL count it; Broadcom switches that NCCL flattens count as one too.
#include <algorithm>
#include <set>

#include "gdrpeer/topo/check.hpp"

namespace gdrpeer::topo {

namespace {

std::vector<int> ancestors(const Topology& t, int x) {
  std::vector<int> out;
  for (int p = t.devices[x].parent; p >= 0 && out.size() < 256; p = t.devices[p].parent) out.push_back(p);
  return out;
}

// The "bridge unit" a port belongs to.
int unit_of(const Topology& t, const Knowledge& k, int x) {
  const Device& d = t.devices[x];
  int u = x;
  if (d.port == PortType::SwitchDownstream && d.parent >= 0 && t.devices[d.parent].port == PortType::SwitchUpstream)
    u = d.parent;
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

PathInfo classify(const Topology& t, int a, int b, const Knowledge& k) {
  PathInfo p;
  std::vector<int> up_a = ancestors(t, a), up_b = ancestors(t, b);
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
    p.ports_a = up_a;
    p.ports_b = up_b;
  } else {
    int lca = -1;
    size_t ia = 0, ib = 0;
    for (ia = 0; ia < up_a.size() && lca < 0; ++ia)
      for (ib = 0; ib < up_b.size(); ++ib)
        if (up_a[ia] == up_b[ib]) {
          lca = up_a[ia];
          break;
        }
    if (lca < 0) {
      p.cls = PathClass::PHB;
      p.ports_a = up_a;
      p.ports_b = up_b;
    } else {
      p.lca = lca;
      --ia;  // loop advanced past the match
      p.ports_a.assign(up_a.begin(), up_a.begin() + static_cast<long>(ia));
      p.ports_b.assign(up_b.begin(), up_b.begin() + static_cast<long>(ib));
      std::set<int> units{unit_of(t, k, lca)};
      for (int x : p.ports_a) units.insert(unit_of(t, k, x));
      for (int x : p.ports_b) units.insert(unit_of(t, k, x));
      p.cls = units.size() <= 1 ? PathClass::PIX : PathClass::PXB;
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
  return p;
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

const char* to_string(Verdict v) {
  switch (v) {
    case Verdict::Optimal: return "optimal";
    case Verdict::Degraded: return "degraded";
    case Verdict::Unreliable: return "unreliable";
    case Verdict::Blocked: return "blocked";
  }
  return "?";
}

int Report::exit_code() const {
  switch (worst) {
    case Verdict::Optimal: return 0;
    case Verdict::Degraded:
    case Verdict::Unreliable: return 1;
    case Verdict::Blocked: return 2;
  }
  return 2;
}

}  // namespace gdrpeer::topo

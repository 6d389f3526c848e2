#include "gdrpeer/topo/model.hpp"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <utility>

#include "gdrpeer/topo/errors.hpp"
#include "hex.hpp"

namespace gdrpeer::topo {

bool Software::has_module(const std::string& name) const { return std::find(modules.begin(), modules.end(), name) != modules.end(); }

Topology new_topology(const std::string& source, const std::string& format, std::vector<Device> storage) {
  Topology t;
  t.devices = std::move(storage);
  t.devices.clear();
  t.source = source;
  t.format = format;
  return t;
}

int Topology::find(const std::string& bdf) const {
  for (size_t i = 0; i < devices.size(); ++i)
    if (devices[i].bdf == bdf) return static_cast<int>(i);
  return -1;
}

int Topology::host_bridge_index(const std::string& name) {
  for (size_t i = 0; i < host_bridges.size(); ++i)
    if (host_bridges[i].name == name) return static_cast<int>(i);
  host_bridges.push_back(HostBridge{name, -1, {}});
  return static_cast<int>(host_bridges.size() - 1);
}

void Topology::finalize() {
  // A malformed input can make a device its own ancestor (a tree that lists
  // one bus under itself); every walk up the tree relies on there being none.
  for (size_t i = 0; i < devices.size(); ++i) {
    size_t steps = 0;
    for (int p = devices[i].parent; p >= 0; p = devices[p].parent) {
      if (p >= static_cast<int>(devices.size()) || ++steps > devices.size())
        throw InputError(source, 0, "the PCI hierarchy has a cycle through " + devices[i].bdf + " (a bridge listed below itself)");
    }
  }
  for (auto& d : devices) d.children.clear();
  for (auto& h : host_bridges) h.devices.clear();
  for (size_t i = 0; i < devices.size(); ++i) {
    Device& d = devices[i];
    if (d.parent >= 0) {
      devices[d.parent].children.push_back(static_cast<int>(i));
    } else if (d.host_bridge >= 0) {
      host_bridges[d.host_bridge].devices.push_back(static_cast<int>(i));
    }
  }
  // Children inherit the host bridge of their ancestors.
  for (size_t i = 0; i < devices.size(); ++i) {
    int p = devices[i].parent;
    int guard = 0;
    while (p >= 0 && devices[p].parent >= 0 && guard++ < 256) p = devices[p].parent;
    if (p >= 0) devices[i].host_bridge = devices[p].host_bridge;
  }
  // Infer port types of bridges whose type the input did not give.
  for (size_t i = 0; i < devices.size(); ++i) {
    Device& d = devices[i];
    if (!d.is_bridge || d.port != PortType::Unknown) continue;
    d.port_inferred = true;
    if (d.parent < 0) {
      d.port = PortType::RootPort;
      continue;
    }
    // Walk up until an ancestor's type is known (or read), alternating below it.
    const Device& p = devices[d.parent];
    PortType pt = p.port;
    if (pt == PortType::Unknown) {
      // Parents precede children in every parser's order, so this is rare;
      // fall back to depth parity from the root bus.
      int depth = 0;
      for (int q = d.parent; q >= 0; q = devices[q].parent) ++depth;
      d.port = depth % 2 == 1 ? PortType::SwitchUpstream : PortType::SwitchDownstream;
    } else if (pt == PortType::SwitchUpstream) {
      d.port = PortType::SwitchDownstream;
    } else {
      d.port = PortType::SwitchUpstream;
    }
  }
  // Host bridge NUMA: the node of any device below it that knows its node.
  for (auto& h : host_bridges) {
    if (h.numa >= 0) continue;
    for (size_t i = 0; i < devices.size(); ++i) {
      const Device& d = devices[i];
      if (d.host_bridge >= 0 && &host_bridges[d.host_bridge] == &h && d.numa >= 0) {
        h.numa = d.numa;
        break;
      }
    }
  }
  for (auto& d : devices)
    if (d.numa < 0 && d.host_bridge >= 0) d.numa = host_bridges[d.host_bridge].numa;
}

const char* to_string(Role r) {
  switch (r) {
    case Role::GPU: return "gpu";
    case Role::NIC: return "nic";
    case Role::NVMe: return "nvme";
    case Role::None: break;
  }
  return "none";
}

const char* to_string(PortType p) {
  switch (p) {
    case PortType::Endpoint: return "endpoint";
    case PortType::LegacyEndpoint: return "legacy-endpoint";
    case PortType::RootPort: return "root-port";
    case PortType::SwitchUpstream: return "switch-upstream";
    case PortType::SwitchDownstream: return "switch-downstream";
    case PortType::PcieToPciBridge: return "pcie-to-pci-bridge";
    case PortType::PciToPcieBridge: return "pci-to-pcie-bridge";
    case PortType::RootComplexEndpoint: return "rc-integrated-endpoint";
    case PortType::RootComplexEventCollector: return "rc-event-collector";
    case PortType::Unknown: break;
  }
  return "unknown";
}

const char* to_string(IommuMode m) {
  switch (m) {
    case IommuMode::Off: return "off";
    case IommuMode::Identity: return "identity";
    case IommuMode::Translating: return "translating";
    case IommuMode::Mixed: return "mixed";
    case IommuMode::Unknown: break;
  }
  return "unknown";
}

std::string make_bdf(unsigned domain, unsigned bus, unsigned dev, unsigned fn) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%04x:%02x:%02x.%x", domain & 0xffffu, bus & 0xffu, dev & 0x1fu, fn & 7u);
  return buf;
}

namespace {
bool hex_field(std::string_view s, size_t n, unsigned& out) {
  unsigned long v = 0;
  if (s.size() != n || !detail::parse_hex_digits(s, n, v)) return false;
  out = static_cast<unsigned>(v);
  return true;
}
}  // namespace

std::optional<std::string> parse_bdf(std::string_view s) {
  unsigned domain = 0, bus, dev, fn;
  // [dddd:]bb:dd.f ; domain may have 4 (or more, VMD uses 5) hex digits.
  size_t dot = s.rfind('.');
  if (dot == std::string_view::npos || dot + 2 != s.size()) return std::nullopt;
  if (!hex_field(s.substr(dot + 1), 1, fn) || fn > 7) return std::nullopt;
  std::string_view head = s.substr(0, dot);
  size_t c2 = head.rfind(':');
  if (c2 == std::string_view::npos) return std::nullopt;
  if (!hex_field(head.substr(c2 + 1), 2, dev) || dev > 0x1f) return std::nullopt;
  std::string_view hb = head.substr(0, c2);
  size_t c1 = hb.rfind(':');
  if (c1 == std::string_view::npos) {
    if (!hex_field(hb, 2, bus)) return std::nullopt;
  } else {
    if (!hex_field(hb.substr(c1 + 1), 2, bus)) return std::nullopt;
    std::string_view d = hb.substr(0, c1);
    if (d.size() < 4 || d.size() > 5 || !hex_field(d, d.size(), domain)) return std::nullopt;
  }
  // The fields are checked above (7, 12 or 13 characters), so the canonical form is the
  // input in lower case, with domain 0000 added where it is missing and a fifth domain
  // digit kept only when the domain needs it ("0001a:..." is domain 001a).
  std::string out(s.size() == 13 && domain <= 0xffff ? s.substr(1) : s);
  if (s.size() == 7) out.insert(0, "0000:");
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace gdrpeer::topo

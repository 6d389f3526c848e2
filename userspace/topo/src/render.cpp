// Outputs: the nvidia-smi-like matrix with verdicts and problems, JSON (schema
// in docs/check.md), Graphviz DOT, and the annotated tree of `gdrpeer topo`.
#include <algorithm>
#include <cstdio>
#include <functional>
#include <cstdint>
#include <map>
#include <set>
#include <sstream>
#include <string_view>
#include <tuple>
#include <type_traits>

#include <nlohmann/json.hpp>

#include "gdrpeer/topo/check.hpp"

namespace gdrpeer::topo {

namespace {

// A column: the text, then spaces up to width w (at least one).
struct Pad {
  std::string_view s;
  size_t w;
};
Pad pad(std::string_view s, size_t w) { return {s, w}; }

// Appends to one string. ostringstream's sentry, locale and virtual calls per
// insertion were a visible share of a `gdrpeer check` process.
struct Text {
  std::string s;
  Text& operator<<(std::string_view v) {
    s.append(v);
    return *this;
  }
  Text& operator<<(char c) {
    s.push_back(c);
    return *this;
  }
  Text& operator<<(Pad p) {  // no temporary string per cell
    s.append(p.s);
    s.append(p.s.size() >= p.w ? 1 : p.w - p.s.size(), ' ');
    return *this;
  }
  template <typename I>
    requires std::is_integral_v<I>
  Text& operator<<(I v) {
    s += std::to_string(v);
    return *this;
  }
  Text& operator<<(double) = delete;  // would convert to char silently
  std::string str() { return std::move(s); }
};


std::string hex4(uint16_t v) {
  char b[8];
  std::snprintf(b, sizeof b, "%04x", v);
  return b;
}

std::string link_str(const Link& l) {
  if (!l.known()) return "";
  char b[48];
  if (l.speed_gts > 0) std::snprintf(b, sizeof b, "%gGT/s x%d", l.speed_gts, l.width);
  else std::snprintf(b, sizeof b, "x%d", l.width);
  return b;
}

std::string dev_desc(const Device& d) {
  std::string s = d.name;
  if (s.empty() && d.ids_known) s = hex4(d.vendor) + ":" + hex4(d.device);
  else if (d.ids_known) s += " [" + hex4(d.vendor) + ":" + hex4(d.device) + "]";
  if (!d.rdma_name.empty()) s += " (" + d.rdma_name + ")";
  return s;
}

struct Group {
  Verdict sev;
  std::string rule, reason, fix;
  std::vector<std::string> who;
};

std::vector<Group> group_findings(const Report& r, bool notes) {
  std::vector<Group> out;
  // Keyed by views into the findings (they outlive this call): no key strings built.
  std::map<std::tuple<std::string_view, std::string_view, std::string_view>, size_t> index;
  // The groups found last, tried first by equality (a length differs or a few bytes
  // do): pairs repeat the same few findings, and the ordered map's comparisons of
  // long reasons cost several times more.
  size_t recent[4] = {SIZE_MAX, SIZE_MAX, SIZE_MAX, SIZE_MAX};
  for (const auto& p : r.pairs)
    for (const auto& f : p.findings) {
      if ((f.severity == Verdict::Optimal) != notes) continue;
      size_t g = SIZE_MAX;
      for (size_t i : recent)
        if (i != SIZE_MAX && out[i].rule == f.rule && out[i].reason == f.reason && out[i].fix == f.fix) {
          g = i;
          break;
        }
      if (g == SIZE_MAX) {
        auto [it, fresh] = index.try_emplace({f.rule, f.reason, f.fix}, out.size());
        if (fresh) out.push_back(Group{f.severity, f.rule, f.reason, f.fix, {}});
        g = it->second;
      }
      if (recent[0] != g) {
        size_t k = 1;
        while (k < 3 && recent[k] != g) ++k;
        for (; k > 0; --k) recent[k] = recent[k - 1];
        recent[0] = g;
      }
      out[g].who.push_back(p.label_a + "-" + p.label_b);
    }
  std::stable_sort(out.begin(), out.end(), [](const Group& a, const Group& b) { return a.sev > b.sev; });
  return out;
}

std::string who_list(const std::vector<std::string>& who) {
  std::string s;
  size_t shown = 0;
  for (const auto& w : who) {
    if (shown == 8) {
      s += " and " + std::to_string(who.size() - shown) + " more";
      break;
    }
    s += (s.empty() ? "" : ", ") + w;
    ++shown;
  }
  return s;
}

// nvidia-smi's NV# cells: GPU pairs NVLink connects, both orders.
std::map<std::pair<int, int>, std::string> nvlink_cells(const Report& r) {
  std::map<std::pair<int, int>, std::string> out;
  for (const auto& p : r.pairs)
    if (p.nvlink.linked) out[{p.a, p.b}] = out[{p.b, p.a}] = nvlink_cell(p.nvlink);
  return out;
}

}  // namespace

std::string render_matrix(const Report& r, bool include_nvme) {
  const Topology& t = *r.topo;
  Text o;
  o.s.reserve(8192);
  o << "gdrpeer check: " << t.source << " (" << t.format << ")\n";
  std::vector<int> cols = r.gpus;
  cols.insert(cols.end(), r.nics.begin(), r.nics.end());
  if (include_nvme) cols.insert(cols.end(), r.nvmes.begin(), r.nvmes.end());
  if (!cols.empty()) {
    const auto nv = nvlink_cells(r);
    o << "\n" << pad("", 8);
    for (int c : cols) o << pad(r.labels[c], 8);
    o << pad("NUMA", 6) << "BDF\n";
    for (int a : cols) {
      o << pad(r.labels[a], 8);
      for (int b : cols) {
        auto it = nv.find({a, b});
        o << pad(a == b ? " X" : it != nv.end() ? std::string_view(it->second) : std::string_view(to_string(r.path_class(a, b))), 8);
      }
      const Device& d = t.devices[a];
      o << pad(d.numa >= 0 ? std::to_string(d.numa) : "?", 6) << d.bdf << "\n";
    }
    o << "\nLegend: PIX = at most one PCIe bridge (switch), PXB = several bridges, PHB = through a PCIe host bridge,\n"
         "        NODE = between host bridges of one NUMA node, SYS = across the NUMA interconnect\n";
    if (!nv.empty()) o << "        NV# = a bonded set of # NVLinks (NV: count not in this input); the Pairs class is the PCIe path\n";
  }
  if (!r.gpus.empty() && !r.pairs.empty()) {
    std::vector<int> vcols = r.gpus;
    vcols.insert(vcols.end(), r.nics.begin(), r.nics.end());
    if (include_nvme) vcols.insert(vcols.end(), r.nvmes.begin(), r.nvmes.end());
    // Pair of two labelled devices, by their rows in the class table.
    const size_t m = r.labelled;
    std::vector<const PairResult*> by(m * m, nullptr);
    auto cell = [&](int a, int b) -> const PairResult*& {
      return by[static_cast<size_t>(r.slot[a]) * m + static_cast<size_t>(r.slot[b])];
    };
    for (const auto& p : r.pairs) cell(p.a, p.b) = cell(p.b, p.a) = &p;
    o << "\nVerdicts:\n" << pad("", 8);
    for (int c : vcols) o << pad(r.labels[c], 11);
    o << "\n";
    for (int g : r.gpus) {
      o << pad(r.labels[g], 8);
      for (int c : vcols) {
        const PairResult* p = cell(g, c);
        o << pad(g == c ? " X" : !p ? " -" : to_string(p->verdict), 11);
      }
      o << "\n";
    }
    o << "\nPairs:              class  CUDA case         NCCL GDR  verdict\n";
    for (const auto& p : r.pairs)
      o << "  " << pad(p.label_a + " - " + p.label_b, 18) << pad(to_string(p.path.cls), 7) << pad(to_string(p.path.cuda), 18)
        << pad(p.path.nccl_gdr ? "on" : "off", 10) << to_string(p.verdict) << "\n";
  }
  auto problems = group_findings(r, false);
  const bool node_problems = std::any_of(r.node_findings.begin(), r.node_findings.end(),
                                         [](const Finding& f) { return f.severity != Verdict::Optimal; });
  if (!problems.empty() || node_problems) {
    o << "\nProblems:\n";
    // Node-wide problems (a platform whose GPU is in no pair) first: they concern every pair.
    for (const auto& f : r.node_findings) {
      if (f.severity == Verdict::Optimal) continue;
      o << "  [" << to_string(f.severity) << "] node: " << f.reason << " (" << f.rule << ")\n";
      if (!f.fix.empty()) o << "      fix: " << f.fix << "\n";
    }
    for (const auto& g : problems) {
      o << "  [" << to_string(g.sev) << "] " << who_list(g.who) << ": " << g.reason << " (" << g.rule << ")\n";
      if (!g.fix.empty()) o << "      fix: " << g.fix << "\n";
    }
  }
  auto notes = group_findings(r, true);
  const bool node_notes = std::any_of(r.node_findings.begin(), r.node_findings.end(),
                                      [](const Finding& f) { return f.severity == Verdict::Optimal; });
  if (!notes.empty() || node_notes) {
    o << "\nNotes:\n";
    for (const auto& g : notes) {
      o << "  " << who_list(g.who) << ": " << g.reason << " (" << g.rule << ")\n";
      if (!g.fix.empty()) o << "      hint: " << g.fix << "\n";
    }
    for (const auto& f : r.node_findings)
      if (f.severity == Verdict::Optimal) o << "  " << f.reason << " (" << f.rule << ")\n";
  }
  std::vector<int> devs = r.gpus;
  devs.insert(devs.end(), r.nics.begin(), r.nics.end());
  if (include_nvme) devs.insert(devs.end(), r.nvmes.begin(), r.nvmes.end());
  if (!devs.empty()) {
    o << "\nDevices:\n";
    for (int i : devs) {
      const Device& d = t.devices[i];
      o << "  " << pad(r.labels[i], 7) << pad(d.bdf, 14) << dev_desc(d);
      if (d.role_overridden) o << " [role set by --role]";
      o << "\n";
    }
  }
  std::map<Verdict, int> counts;
  for (const auto& p : r.pairs) ++counts[p.verdict];
  o << "\nSummary: " << r.pairs.size() << " pairs: " << counts[Verdict::Optimal] << " optimal, " << counts[Verdict::Degraded]
    << " degraded, " << counts[Verdict::Unreliable] << " unreliable, " << counts[Verdict::Blocked] << " blocked; worst "
    << to_string(r.worst) << ", exit " << r.exit_code() << "\n";
  return o.str();
}

std::string render_summary_line(const Report& r) {
  std::map<Verdict, int> counts;
  for (const auto& p : r.pairs) ++counts[p.verdict];
  Text o;
  o << r.topo->source << ": " << to_string(r.worst) << " (" << r.gpus.size() << " GPU, " << r.nics.size() << " NIC, "
    << r.pairs.size() << " pairs: " << counts[Verdict::Optimal] << " optimal, " << counts[Verdict::Degraded] << " degraded, "
    << counts[Verdict::Unreliable] << " unreliable, " << counts[Verdict::Blocked] << " blocked) exit " << r.exit_code();
  // The most severe problem, so a fleet summary says why.
  const Finding* top = nullptr;
  for (const auto& f : r.node_findings)
    if (f.severity != Verdict::Optimal && (!top || f.severity > top->severity)) top = &f;
  for (const auto& p : r.pairs)
    for (const auto& f : p.findings)
      if (f.severity != Verdict::Optimal && (!top || f.severity > top->severity)) top = &f;
  if (top) o << " first problem: " << top->rule;
  return o.str();
}

std::string render_json(const Report& r) {
  using nlohmann::json;
  const Topology& t = *r.topo;
  json j;
  j["schema"] = "gdrpeer-check";
  j["version"] = 1;
  json node;
  node["source"] = t.source;
  node["format"] = t.format;
  node["cpu"] = {{"arch", t.cpu.arch}, {"vendor", t.cpu.vendor}, {"model_name", t.cpu.model_name},
                 {"family", t.cpu.family}, {"model", t.cpu.model}, {"sockets", t.cpu.sockets}};
  node["numa_nodes"] = t.numa_nodes;
  node["iommu"] = to_string(t.iommu);
  node["virtual_machine"] = r.virtual_machine;
  node["dmi"] = {{"vendor", t.dmi_vendor}, {"product", t.dmi_product}};
  if (t.sw.inspected) {
    node["software"] = {{"kernel", t.sw.kernel_release}, {"modules_of_interest", json::array()},
                        {"memory_peers", t.sw.memory_peers}, {"nvidia_version", t.sw.nvidia_version}};
    for (const char* m : {"nvidia", "nvidia_peermem", "nv_peer_mem", "gdrpeer", "ib_core", "ib_uverbs", "mlx5_ib", "rdma_rxe"})
      if (t.sw.has_module(m)) node["software"]["modules_of_interest"].push_back(m);
    // What the CUDA driver itself says per GPU (live mode or a snapshot that recorded it);
    // -1 means the attribute could not be read.
    if (t.sw.cuda_probed) {
      json cuda = {{"error", t.sw.cuda_error}, {"gpus", json::array()}};
      for (const auto& g : t.sw.cuda)
        cuda["gpus"].push_back({{"bdf", g.bdf}, {"gpu_direct_rdma_supported", g.gdr_supported},
                                {"dma_buf_supported", g.dmabuf_supported}});
      node["software"]["cuda"] = cuda;
    }
  }
  j["node"] = node;
  json devs = json::array();
  std::vector<int> all = r.gpus;
  all.insert(all.end(), r.nics.begin(), r.nics.end());
  all.insert(all.end(), r.nvmes.begin(), r.nvmes.end());
  for (int i : all) {
    const Device& d = t.devices[i];
    json e;
    e["label"] = r.labels[i];
    e["bdf"] = d.bdf;
    e["role"] = to_string(d.role);
    e["role_overridden"] = d.role_overridden;
    e["vendor"] = d.ids_known ? json("0x" + hex4(d.vendor)) : json(nullptr);
    e["device"] = d.ids_known ? json("0x" + hex4(d.device)) : json(nullptr);
    char cls[16];
    std::snprintf(cls, sizeof cls, "0x%06x", d.class_code);
    e["class"] = d.class_known ? json(cls) : json(nullptr);
    e["name"] = d.name;
    e["numa"] = d.numa;
    e["host_bridge"] = d.host_bridge >= 0 ? json(t.host_bridges[d.host_bridge].name) : json(nullptr);
    json path = json::array();
    for (int p = d.parent; p >= 0; p = t.devices[p].parent) path.push_back({{"bdf", t.devices[p].bdf}, {"port", to_string(t.devices[p].port)}});
    e["upstream"] = path;
    e["link_cap"] = {{"gts", d.link_cap.speed_gts}, {"width", d.link_cap.width}};
    e["link_status"] = {{"gts", d.link_sta.speed_gts}, {"width", d.link_sta.width}};
    json bars = json::array();
    for (const auto& b : d.bars) bars.push_back({{"index", b.index}, {"size", b.size}, {"is64", b.is64}, {"prefetchable", b.prefetchable}});
    e["bars"] = bars;
    e["iommu_group"] = d.iommu_group;
    e["iommu_type"] = d.iommu_type;
    e["rdma_name"] = d.rdma_name;
    e["driver"] = d.driver;
    devs.push_back(e);
  }
  j["devices"] = devs;
  json labels = json::array(), matrix = json::array();
  std::vector<int> cols = r.gpus;
  cols.insert(cols.end(), r.nics.begin(), r.nics.end());
  for (int c : cols) labels.push_back(r.labels[c]);
  const auto nv = nvlink_cells(r);
  for (int a : cols) {
    json row = json::array();
    for (int b : cols) {
      auto it = nv.find({a, b});
      row.push_back(a == b ? "X" : it != nv.end() ? it->second : to_string(r.path_class(a, b)));
    }
    matrix.push_back(row);
  }
  j["matrix"] = {{"labels", labels}, {"classes", matrix}};
  json pairs = json::array();
  for (const auto& p : r.pairs) {
    json e;
    e["a"] = p.label_a;
    e["b"] = p.label_b;
    e["a_bdf"] = t.devices[p.a].bdf;
    e["b_bdf"] = t.devices[p.b].bdf;
    e["class"] = to_string(p.path.cls);
    e["cuda_case"] = to_string(p.path.cuda);
    e["nccl_gdr_default"] = p.path.nccl_gdr;
    e["verdict"] = to_string(p.verdict);
    if (p.nvlink.linked)
      e["nvlink"] = {{"links", p.nvlink.links}, {"via", p.nvlink.via_switch ? "nvswitch" : "direct"},
                     {"bandwidth_mbps", p.nvlink.bandwidth_mbps}, {"inferred", p.nvlink.inferred}};
    json fs = json::array();
    for (const auto& f : p.findings)
      fs.push_back({{"rule", f.rule}, {"severity", f.severity == Verdict::Optimal ? "note" : to_string(f.severity)}, {"reason", f.reason}, {"fix", f.fix}});
    e["findings"] = fs;
    pairs.push_back(e);
  }
  j["pairs"] = pairs;
  json notes = json::array();
  // Node-wide findings: "severity" note for remarks, or the verdict of a node problem (which
  // counts in summary.worst and the exit code); "fix" where there is one.
  for (const auto& f : r.node_findings)
    notes.push_back({{"rule", f.rule}, {"text", f.reason},
                     {"severity", f.severity == Verdict::Optimal ? "note" : to_string(f.severity)}, {"fix", f.fix}});
  j["notes"] = notes;
  std::map<Verdict, int> counts;
  for (const auto& p : r.pairs) ++counts[p.verdict];
  j["summary"] = {{"worst", to_string(r.worst)}, {"exit_code", r.exit_code()}, {"pairs", r.pairs.size()},
                  {"optimal", counts[Verdict::Optimal]}, {"degraded", counts[Verdict::Degraded]},
                  {"unreliable", counts[Verdict::Unreliable]}, {"blocked", counts[Verdict::Blocked]}};
  return j.dump(2) + "\n";
}

std::string render_dot(const Report& r) {
  const Topology& t = *r.topo;
  // Only the devices on paths of the checked roles, so big nodes stay readable.
  std::set<int> keep;
  for (size_t i = 0; i < t.devices.size(); ++i)
    if (!r.labels[i].empty())
      for (int p = static_cast<int>(i); p >= 0; p = t.devices[p].parent) keep.insert(p);
  std::set<int> bad;
  for (const auto& p : r.pairs)
    for (const auto& f : p.findings)
      if (f.severity != Verdict::Optimal)
        for (size_t i = 0; i < t.devices.size(); ++i)
          if (keep.count(static_cast<int>(i)) && f.reason.find(t.devices[i].bdf) != std::string::npos) bad.insert(static_cast<int>(i));
  std::ostringstream o;
  o << "digraph gdrpeer {\n  rankdir=TB;\n  node [shape=box, fontname=\"monospace\", fontsize=10];\n";
  o << "  label=\"" << t.source << " (" << t.format << "): worst " << to_string(r.worst) << "\";\n";
  std::set<int> hbs;
  for (int i : keep)
    if (t.devices[i].parent < 0 && t.devices[i].host_bridge >= 0) hbs.insert(t.devices[i].host_bridge);
  std::map<int, std::vector<int>> by_numa;
  for (int h : hbs) by_numa[t.host_bridges[h].numa].push_back(h);
  for (const auto& [numa, list] : by_numa) {
    o << "  subgraph cluster_numa" << (numa < 0 ? std::string("_unknown") : std::to_string(numa)) << " {\n    label=\"NUMA "
      << (numa < 0 ? std::string("?") : std::to_string(numa)) << "\";\n";
    for (int h : list) o << "    hb" << h << " [label=\"host bridge " << t.host_bridges[h].name << "\", shape=ellipse];\n";
    o << "  }\n";
  }
  for (int i : keep) {
    const Device& d = t.devices[i];
    std::string lab = d.bdf;
    if (!r.labels[i].empty()) lab = r.labels[i] + " " + lab;
    if (d.is_bridge) lab += std::string("\\n") + to_string(d.port);
    if (d.link_sta.known()) lab += "\\n" + link_str(d.link_sta) + (d.link_cap.known() ? " of " + link_str(d.link_cap) : "");
    if (d.acs_known && (d.acs_ctl & acs::kRedirectMask)) lab += "\\nACS redirect ON";
    std::string style;
    if (d.role == Role::GPU) style = ", style=filled, fillcolor=\"#b7e1a1\"";
    else if (d.role == Role::NIC) style = ", style=filled, fillcolor=\"#a9cce3\"";
    else if (d.role == Role::NVMe) style = ", style=filled, fillcolor=\"#f9e79f\"";
    if (bad.count(i)) style += ", color=red, penwidth=2";
    o << "  d" << i << " [label=\"" << lab << "\"" << style << "];\n";
    if (d.parent >= 0) o << "  d" << d.parent << " -> d" << i << ";\n";
    else if (d.host_bridge >= 0) o << "  hb" << d.host_bridge << " -> d" << i << ";\n";
  }
  o << "}\n";
  return o.str();
}

std::string render_tree(const Topology& t, bool roles_only) {
  std::set<int> keep;
  if (roles_only)
    for (size_t i = 0; i < t.devices.size(); ++i)
      if (t.devices[i].role != Role::None)
        for (int p = static_cast<int>(i); p >= 0; p = t.devices[p].parent) keep.insert(p);
  std::ostringstream o;
  o << "topology of " << t.source << " (" << t.format << ")";
  if (!t.cpu.model_name.empty() || !t.cpu.vendor.empty()) o << ", CPU " << (t.cpu.model_name.empty() ? t.cpu.vendor : t.cpu.model_name);
  o << ", IOMMU " << to_string(t.iommu) << "\n";
  std::function<void(int, int)> walk = [&](int i, int depth) {
    const Device& d = t.devices[i];
    if (roles_only && !keep.count(i)) return;
    o << std::string(static_cast<size_t>(depth) * 2, ' ') << d.bdf;
    if (d.role != Role::None) o << " " << to_string(d.role) << (d.role_overridden ? "(override)" : "");
    if (d.is_bridge) o << " " << to_string(d.port) << (d.port_inferred ? "(inferred)" : "");
    std::string desc = dev_desc(d);
    if (!desc.empty()) o << "  " << desc;
    if (d.link_sta.known()) o << "  link " << link_str(d.link_sta) << (d.link_cap.known() ? "/" + link_str(d.link_cap) : "");
    if (d.acs_present) {
      o << "  ACSCtl";
      if (d.acs_ctl & acs::kRequestRedirect) o << " ReqRedir+";
      if (d.acs_ctl & acs::kCompletionRedirect) o << " CmpltRedir+";
      if (d.acs_ctl & acs::kEgressControl) o << " EgressCtrl+";
      if (!(d.acs_ctl & acs::kRedirectMask)) o << " no-redirect";
    }
    if (d.iommu_group >= 0) o << "  iommu " << d.iommu_group << (d.iommu_type.empty() ? "" : "/" + d.iommu_type);
    if (d.numa >= 0) o << "  numa " << d.numa;
    o << "\n";
    for (int c : d.children) walk(c, depth + 1);
  };
  for (size_t h = 0; h < t.host_bridges.size(); ++h) {
    const HostBridge& hb = t.host_bridges[h];
    bool any = !roles_only;
    for (int d : hb.devices) any = any || keep.count(d);
    if (!any) continue;
    o << "[" << hb.name << "] host bridge" << (hb.numa >= 0 ? ", NUMA " + std::to_string(hb.numa) : std::string()) << "\n";
    for (int d : hb.devices) walk(d, 1);
  }
  return o.str();
}

}  // namespace gdrpeer::topo

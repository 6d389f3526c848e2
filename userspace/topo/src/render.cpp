// Outputs: the nvidia-smi-like matrix with verdicts and problems, JSON (schema
// in docs/check.md), Graphviz DOT, and the annotated tree of `gdrpeer topo`.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <string_view>
#include <tuple>
#include <type_traits>

#include "gdrpeer/topo/render.hpp"
#include "json_writer.hpp"
#include "pci_names.hpp"
#include "readiness_internal.hpp"
#include "stack_render.hpp"

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
  requires std::is_integral_v<I> Text& operator<<(I v) {
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
  // A width of 0 is unknown (no lane count in the input, or the kernel's PCIE_LNK_WIDTH_UNKNOWN).
  if (l.speed_gts > 0 && l.width > 0)
    std::snprintf(b, sizeof b, "%gGT/s x%d", l.speed_gts, l.width);
  else if (l.speed_gts > 0)
    std::snprintf(b, sizeof b, "%gGT/s x?", l.speed_gts);
  else
    std::snprintf(b, sizeof b, "x%d", l.width);
  return b;
}

// Inputs read from sysfs carry ids, not names: those come from pci.ids (libpci), as lspci's.
bool named_by_pci_ids(const Topology& t) {
  return t.format == "sysfs" || t.format == "sysfs-root" || t.format == "snapshot" || t.format == "hwloc-gather-topology";
}

// The name the input gives, else pci.ids' for sysfs inputs; "" unknown. `why` says why
// names could not be looked up at all.
std::string display_name(const Topology& t, const Device& d, std::string* why = nullptr) {
  if (!d.name.empty() || !d.ids_known || !named_by_pci_ids(t)) return d.name;
  std::string err;
  const std::string* n = pci_ids_name(d.vendor, d.device, err);
  if (!n && why) *why = err;
  return n ? *n : std::string();
}

std::string dev_desc(const Topology& t, const Device& d) {
  std::string s = display_name(t, d);
  if (s.empty() && d.ids_known)
    s = hex4(d.vendor) + ":" + hex4(d.device);
  else if (d.ids_known)
    s += " [" + hex4(d.vendor) + ":" + hex4(d.device) + "]";
  if (!d.rdma_name.empty()) s += " (" + d.rdma_name + ")";
  return s;
}

// One line of Problems or Notes: every pair whose finding has the same rule,
// severity and text. A text whose only difference between pairs is one list of
// BDFs ("ACS state of A, B is not in this input") counts as the same text; the
// line then names the union of those BDFs. Fixes that differ (each names its
// GPU's closest NIC) are kept, each once.
struct Group {
  Verdict sev;
  std::string rule;
  std::string before, after;  // the text around the BDF list (all of it in `before` if none)
  bool has_list = false;
  std::vector<std::string> bdfs;   // the union of the lists, sorted
  std::vector<std::string> fixes;  // distinct, in first-seen order
  std::vector<std::string> who;
  std::string reason() const {
    if (!has_list) return before;
    std::string s = before;
    for (size_t i = 0; i < bdfs.size(); ++i) s += (i ? ", " : "") + bdfs[i];
    return s + after;
  }
};

bool hexdigit(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); }

// "0000:46:02.2" at s[i]: domain:bus:device.function as sysfs spells it.
bool bdf_at(std::string_view s, size_t i) {
  static constexpr std::string_view shape = "hhhh:hh:hh.h";
  if (i + shape.size() > s.size()) return false;
  for (size_t k = 0; k < shape.size(); ++k)
    if (shape[k] == 'h' ? !hexdigit(s[i + k]) : s[i + k] != shape[k]) return false;
  return i + shape.size() == s.size() || !hexdigit(s[i + shape.size()]);
}

// Splits a text with exactly one run of BDFs ("A, B, C") into the text around it
// and the run. Texts with none or with several runs ("from A to B": the pairing
// matters) are left whole: only identical texts group then.
bool split_bdf_list(std::string_view s, std::string_view& before, std::string_view& after, std::vector<std::string_view>& list) {
  constexpr size_t kLen = 12;
  size_t start = std::string_view::npos, end = 0, runs = 0;
  std::vector<std::string_view> got;
  for (size_t i = 0; i < s.size();) {
    if ((i == 0 || !hexdigit(s[i - 1])) && bdf_at(s, i)) {
      if (++runs > 1) return false;
      start = i;
      got.push_back(s.substr(i, kLen));
      i += kLen;
      while (s.substr(i, 2) == ", " && bdf_at(s, i + 2)) {
        got.push_back(s.substr(i + 2, kLen));
        i += 2 + kLen;
      }
      end = i;
      continue;
    }
    ++i;
  }
  if (runs != 1) return false;
  before = s.substr(0, start);
  after = s.substr(end);
  list = std::move(got);
  return true;
}

std::vector<Group> group_findings(const Report& r, bool notes) {
  std::vector<Group> out;
  // Keyed by views into the findings, which outlive this call.
  std::map<std::tuple<int, std::string_view, bool, std::string_view, std::string_view>, size_t> index;
  std::vector<std::string_view> list;
  for (const auto& p : r.pairs)
    for (const auto& f : p.findings) {
      if ((f.severity == Verdict::Optimal) != notes) continue;
      std::string_view before = f.reason, after;
      list.clear();
      const bool has_list = split_bdf_list(f.reason, before, after, list);
      auto [it, fresh] = index.try_emplace({static_cast<int>(f.severity), f.rule, has_list, before, after}, out.size());
      if (fresh) out.push_back(Group{f.severity, f.rule, std::string(before), std::string(after), has_list, {}, {}, {}});
      Group& g = out[it->second];
      for (auto b : list)
        if (std::find(g.bdfs.begin(), g.bdfs.end(), b) == g.bdfs.end()) g.bdfs.emplace_back(b);
      if (!f.fix.empty() && std::find(g.fixes.begin(), g.fixes.end(), f.fix) == g.fixes.end()) g.fixes.push_back(f.fix);
      g.who.push_back(p.label_a + "-" + p.label_b);
    }
  for (auto& g : out) std::sort(g.bdfs.begin(), g.bdfs.end());  // the bridges of one switch side by side
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

std::string render_matrix(const Topology& t, const Report& r, bool include_nvme) {
  Text o;
  o.s.reserve(8192);
  o << "gdrpeer check: " << t.source << " (" << t.format << ")\n";
  std::vector<int> cols = r.gpus;
  cols.insert(cols.end(), r.nics.begin(), r.nics.end());
  if (include_nvme) cols.insert(cols.end(), r.nvmes.begin(), r.nvmes.end());
  if (!cols.empty()) {
    const auto nv = nvlink_cells(r);
    // nvidia-smi's "CPU Affinity": the device's local CPUs; "?" where the input does not say.
    size_t cpu_w = 14;
    for (int c : cols) cpu_w = std::max(cpu_w, t.devices[c].cpu_affinity.size() + 2);
    o << "\n" << pad("", 8);
    for (int c : cols) o << pad(r.labels[c], 8);
    o << pad("CPU Affinity", cpu_w) << pad("NUMA", 6) << "BDF\n";
    for (int a : cols) {
      o << pad(r.labels[a], 8);
      for (int b : cols) {
        auto it = nv.find({a, b});
        o << pad(a == b ? " X" : it != nv.end() ? std::string_view(it->second) : std::string_view(to_string(r.path_class(a, b))), 8);
      }
      const Device& d = t.devices[a];
      o << pad(d.cpu_affinity.empty() ? "?" : std::string_view(d.cpu_affinity), cpu_w) << pad(d.numa >= 0 ? std::to_string(d.numa) : "?", 6)
        << d.bdf << "\n";
    }
    o << "\nLegend: PIX = at most one PCIe bridge (switch), PXB = several bridges, PHB = through a PCIe host bridge,\n"
         "        NODE = between host bridges of one NUMA node, SYS = across the NUMA interconnect\n";
    if (!nv.empty()) o << "        NV# = a bonded set of # NVLinks (NV: count not in this input); the Pairs class is the PCIe path\n";
  }
  if (!r.gpus.empty() && !r.pairs.empty()) {
    std::vector<int> vcols = r.gpus;
    vcols.insert(vcols.end(), r.nics.begin(), r.nics.end());
    if (include_nvme) vcols.insert(vcols.end(), r.nvmes.begin(), r.nvmes.end());
    std::map<std::pair<int, int>, const PairResult*> checked;  // both orders
    for (const auto& p : r.pairs) checked[{p.a, p.b}] = checked[{p.b, p.a}] = &p;
    o << "\nVerdicts:\n" << pad("", 8);
    for (int c : vcols) o << pad(r.labels[c], 11);
    o << "\n";
    for (int g : r.gpus) {
      o << pad(r.labels[g], 8);
      for (int c : vcols) {
        const auto it = checked.find({g, c});
        o << pad(g == c ? " X" : it == checked.end() ? " -" : to_string(it->second->verdict), 11);
      }
      o << "\n";
    }
    o << "\nPairs:              class  CUDA case         NCCL GDR  verdict\n";
    for (const auto& p : r.pairs)
      o << "  " << pad(p.label_a + " - " + p.label_b, 18) << pad(to_string(p.path.cls), 7) << pad(to_string(p.path.cuda), 18)
        << pad(p.path.nccl_gdr ? "on" : "off", 10) << to_string(p.verdict) << "\n";
  }
  o << render_consumers_text(r);
  o << render_readiness_text(r);
  auto problems = group_findings(r, false);
  const bool node_problems =
      std::any_of(r.node_findings.begin(), r.node_findings.end(), [](const Finding& f) { return f.severity != Verdict::Optimal; });
  if (!problems.empty() || node_problems) {
    o << "\nProblems:\n";
    // Node-wide problems (a platform whose GPU is in no pair) first: they concern every pair.
    for (const auto& f : r.node_findings) {
      if (f.severity == Verdict::Optimal) continue;
      o << "  [" << to_string(f.severity) << "] node: " << f.reason << " (" << f.rule << ")\n";
      if (!f.fix.empty()) o << "      fix: " << f.fix << "\n";
    }
    for (const auto& g : problems) {
      o << "  [" << to_string(g.sev) << "] " << who_list(g.who) << ": " << g.reason() << " (" << g.rule << ")\n";
      for (const auto& fix : g.fixes) o << "      fix: " << fix << "\n";
    }
  }
  auto notes = group_findings(r, true);
  const bool node_notes =
      std::any_of(r.node_findings.begin(), r.node_findings.end(), [](const Finding& f) { return f.severity == Verdict::Optimal; });
  if (!notes.empty() || node_notes) {
    o << "\nNotes:\n";
    for (const auto& g : notes) {
      o << "  " << who_list(g.who) << ": " << g.reason() << " (" << g.rule << ")\n";
      for (const auto& fix : g.fixes) o << "      hint: " << fix << "\n";
    }
    for (const auto& f : r.node_findings)
      if (f.severity == Verdict::Optimal) {
        o << "  " << f.reason << " (" << f.rule << ")\n";
        if (!f.fix.empty()) o << "      hint: " << f.fix << "\n";
      }
  }
  std::vector<int> devs = r.gpus;
  devs.insert(devs.end(), r.nics.begin(), r.nics.end());
  if (include_nvme) devs.insert(devs.end(), r.nvmes.begin(), r.nvmes.end());
  if (!devs.empty()) {
    o << "\nDevices:\n";
    std::string why;
    if (named_by_pci_ids(t))
      for (int i : devs) display_name(t, t.devices[i], &why);
    if (!why.empty()) o << "  (names not looked up: " << why << "; vendor:device ids only)\n";
    for (int i : devs) {
      const Device& d = t.devices[i];
      o << "  " << pad(r.labels[i], 7) << pad(d.bdf, 14) << dev_desc(t, d);
      if (d.role_overridden) o << " [role set by --role]";
      o << "\n";
    }
  }
  o << render_gpu_digest(t, r);
  std::map<Verdict, int> counts;
  for (const auto& p : r.pairs) ++counts[p.verdict];
  o << "\nSummary: " << r.pairs.size() << " pairs: " << counts[Verdict::Optimal] << " optimal, " << counts[Verdict::Degraded]
    << " degraded, " << counts[Verdict::Unreliable] << " unreliable, " << counts[Verdict::Blocked] << " blocked; worst pair "
    << to_string(r.worst) << "\nNode: " << node_status(r) << " (" << r.node.reason << "; "
    << (r.node.all_pairs ? "judged by every pair, --all-pairs" : "each GPU judged by its best NIC") << "), exit " << r.exit_code() << "\n";
  return o.str();
}

std::string render_gpu_digest(const Topology& t, const Report& r) {
  const bool any = std::any_of(r.node.gpus.begin(), r.node.gpus.end(), [](const GpuDigest& d) { return d.best_nic >= 0; });
  if (!any) return "";
  Text o;
  o.s.reserve(64 + 64 * r.node.gpus.size());
  o << "\nGPUs (each with its best NIC, as NCCL binds them):\n";
  for (const auto& d : r.node.gpus) {
    o << "  " << pad(r.labels[d.gpu], 7) << pad(t.devices[d.gpu].bdf, 14);
    if (d.best_nic < 0)
      o << "no NIC checked\n";
    else
      o << "-> " << pad(r.labels[d.best_nic], 7) << pad(t.devices[d.best_nic].bdf, 14) << pad(to_string(d.cls), 6) << to_string(d.verdict)
        << "\n";
  }
  return o.str();
}

std::string render_summary_line(const Topology& t, const Report& r) {
  std::map<Verdict, int> counts;
  for (const auto& p : r.pairs) ++counts[p.verdict];
  Text o;
  o << t.source << ": " << node_status(r) << " (" << r.gpus.size() << " GPU, " << r.nics.size() << " NIC, " << r.pairs.size()
    << " pairs: " << counts[Verdict::Optimal] << " optimal, " << counts[Verdict::Degraded] << " degraded, " << counts[Verdict::Unreliable]
    << " unreliable, " << counts[Verdict::Blocked] << " blocked; worst pair " << to_string(r.worst) << ") exit " << r.exit_code();
  if (r.node.incomplete) return o.str() + " " + r.node.incomplete_reason;
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

std::string render_json(const Topology& t, const Report& r) {
  // Keys in byte order within each object (the layout nlohmann's dump(2) gave; see json_writer.hpp).
  detail::JsonWriter j(4096 + 700 * r.pairs.size() + 900 * (r.gpus.size() + r.nics.size() + r.nvmes.size()));
  const auto severity = [](Verdict v) { return v == Verdict::Optimal ? "note" : to_string(v); };
  j.begin_object();

  j.key("devices").begin_array();
  std::vector<int> all = r.gpus;
  all.insert(all.end(), r.nics.begin(), r.nics.end());
  all.insert(all.end(), r.nvmes.begin(), r.nvmes.end());
  for (int i : all) {
    const Device& d = t.devices[i];
    j.begin_object();
    j.key("bars").begin_array();
    for (const auto& b : d.bars)
      j.begin_object()
          .key("index")
          .value(b.index)
          .key("is64")
          .value(b.is64)
          .key("prefetchable")
          .value(b.prefetchable)
          .key("size")
          .value(static_cast<unsigned long long>(b.size))
          .end_object();
    j.end_array();
    j.key("bdf").value(d.bdf);
    char cls[16];
    std::snprintf(cls, sizeof cls, "0x%06x", d.class_code);
    j.key("class");
    d.class_known ? j.value(cls) : j.null();
    j.key("cpu_affinity");  // "0-63" as local_cpulist; null unknown
    d.cpu_affinity.empty() ? j.null() : j.value(d.cpu_affinity);
    j.key("device");
    d.ids_known ? j.value("0x" + hex4(d.device)) : j.null();
    j.key("driver").value(d.driver);
    if (d.fabric_state >= 0)
      j.key("fabric").begin_object().key("state").value(d.fabric_state).key("status").value(d.fabric_status).end_object();
    j.key("host_bridge");
    d.host_bridge >= 0 ? j.value(t.host_bridges[d.host_bridge].name) : j.null();
    j.key("iommu_group").value(d.iommu_group);
    j.key("iommu_type").value(d.iommu_type);
    j.key("label").value(r.labels[i]);
    j.key("link_cap").begin_object().key("gts").value(d.link_cap.speed_gts).key("width").value(d.link_cap.width).end_object();
    j.key("link_status").begin_object().key("gts").value(d.link_sta.speed_gts).key("width").value(d.link_sta.width).end_object();
    j.key("name").value(display_name(t, d));  // from pci.ids for sysfs inputs
    j.key("numa").value(d.numa);
    j.key("rdma_name").value(d.rdma_name);
    j.key("role").value(to_string(d.role));
    j.key("role_overridden").value(d.role_overridden);
    j.key("upstream").begin_array();
    for (int p = d.parent; p >= 0; p = t.devices[p].parent)
      j.begin_object().key("bdf").value(t.devices[p].bdf).key("port").value(to_string(t.devices[p].port)).end_object();
    j.end_array();
    j.key("vendor");
    d.ids_known ? j.value("0x" + hex4(d.vendor)) : j.null();
    j.end_object();
  }
  j.end_array();

  std::vector<int> cols = r.gpus;
  cols.insert(cols.end(), r.nics.begin(), r.nics.end());
  const auto nv = nvlink_cells(r);
  j.key("matrix").begin_object();
  j.key("classes").begin_array();
  for (int a : cols) {
    j.begin_array();
    for (int b : cols) {
      auto it = nv.find({a, b});
      j.value(a == b           ? std::string_view("X")
              : it != nv.end() ? std::string_view(it->second)
                               : std::string_view(to_string(r.path_class(a, b))));
    }
    j.end_array();
  }
  j.end_array();
  j.key("labels").begin_array();
  for (int c : cols) j.value(r.labels[c]);
  j.end_array();
  j.end_object();

  j.key("node").begin_object();
  j.key("cpu")
      .begin_object()
      .key("arch")
      .value(t.cpu.arch)
      .key("family")
      .value(t.cpu.family)
      .key("model")
      .value(t.cpu.model)
      .key("model_name")
      .value(t.cpu.model_name)
      .key("sockets")
      .value(t.cpu.sockets)
      .key("vendor")
      .value(t.cpu.vendor)
      .end_object();
  j.key("dmi").begin_object().key("product").value(t.dmi_product).key("vendor").value(t.dmi_vendor).end_object();
  j.key("format").value(t.format);
  j.key("iommu").value(to_string(t.iommu));
  j.key("numa_nodes").value(t.numa_nodes);
  if (t.sw.inspected) {
    j.key("software").begin_object();
    // What the CUDA driver itself says per GPU (live mode or a snapshot that recorded it);
    // -1 means the attribute could not be read.
    if (t.sw.cuda_probed) {
      j.key("cuda").begin_object().key("error").value(t.sw.cuda_error).key("gpus").begin_array();
      for (const auto& g : t.sw.cuda)
        j.begin_object()
            .key("bdf")
            .value(g.bdf)
            .key("dma_buf_supported")
            .value(g.dmabuf_supported)
            .key("gpu_direct_rdma_supported")
            .value(g.gdr_supported)
            .end_object();
      j.end_array().end_object();
    }
    j.key("kernel").value(t.sw.kernel_release);
    j.key("memory_peers").begin_array();
    for (const auto& m : t.sw.memory_peers) j.value(m);
    j.end_array();
    j.key("modules_of_interest").begin_array();
    for (const char* m : {"nvidia", "nvidia_peermem", "nv_peer_mem", "gdrpeer", "ib_core", "ib_uverbs", "mlx5_ib", "rdma_rxe"})
      if (t.sw.has_module(m)) j.value(m);
    j.end_array();
    j.key("nvidia_version").value(t.sw.nvidia_version);
    render_readiness_inputs_json(j, t.sw);
    render_stack_json(j, t.sw);
    j.end_object();
  }
  j.key("source").value(t.source);
  j.key("virtual_machine").value(r.virtual_machine);
  j.end_object();

  // Node-wide findings: "severity" note for remarks, or the verdict of a node problem (which
  // counts in summary.worst and the exit code); "fix" where there is one.
  j.key("notes").begin_array();
  for (const auto& f : r.node_findings)
    j.begin_object()
        .key("fix")
        .value(f.fix)
        .key("rule")
        .value(f.rule)
        .key("severity")
        .value(severity(f.severity))
        .key("text")
        .value(f.reason)
        .end_object();
  j.end_array();

  j.key("pairs").begin_array();
  for (const auto& p : r.pairs) {
    j.begin_object();
    j.key("a").value(p.label_a).key("a_bdf").value(t.devices[p.a].bdf).key("b").value(p.label_b).key("b_bdf").value(t.devices[p.b].bdf);
    j.key("class").value(to_string(p.path.cls));
    render_consumers_json(j, p);
    j.key("cuda_case").value(to_string(p.path.cuda));
    j.key("findings").begin_array();
    for (const auto& f : p.findings)
      j.begin_object()
          .key("fix")
          .value(f.fix)
          .key("reason")
          .value(f.reason)
          .key("rule")
          .value(f.rule)
          .key("severity")
          .value(severity(f.severity))
          .end_object();
    j.end_array();
    render_readiness_pair_json(j, r, p);
    j.key("nccl_gdr_default").value(p.path.nccl_gdr);
    if (p.nvlink.linked) {
      j.key("nvlink")
          .begin_object()
          .key("bandwidth_mbps")
          .value(static_cast<unsigned long long>(p.nvlink.bandwidth_mbps))
          .key("inferred")
          .value(p.nvlink.inferred);
      if (p.nvlink.inferred) j.key("inferred_from").value(p.nvlink.inferred_from);  // nvswitch-on-bus | gpu-model
      j.key("links")
          .value(p.nvlink.links)
          .key("via")
          .value(p.nvlink.inferred_from == "gpu-model" ? "unknown"
                 : p.nvlink.via_switch                 ? "nvswitch"
                                                       : "direct")
          .end_object();
    }
    j.key("verdict").value(to_string(p.verdict));
    j.end_object();
  }
  j.end_array();
  render_readiness_json(j, t, r);

  j.key("schema").value("gdrpeer-check");
  int counts[4] = {0, 0, 0, 0};
  for (const auto& p : r.pairs) ++counts[static_cast<int>(p.verdict)];
  j.key("summary").begin_object().key("blocked").value(counts[3]).key("degraded").value(counts[1]).key("exit_code").value(r.exit_code());
  // The node verdict (node_verdict.cpp) that sets exit_code; "worst" below is the worst pair.
  j.key("node").begin_object().key("gpus").begin_array();
  for (const auto& d : r.node.gpus) {
    const bool nic = d.best_nic >= 0;
    j.begin_object().key("best_nic").value(nic ? r.labels[d.best_nic] : std::string());
    j.key("class").value(nic ? to_string(d.cls) : "").key("gpu").value(r.labels[d.gpu]);
    j.key("verdict").value(nic ? to_string(d.verdict) : "").end_object();
  }
  j.end_array().key("incomplete").value(r.node.incomplete_reason).key("judged_by").value(r.node.all_pairs ? "all-pairs" : "best-nic");
  j.key("reason").value(r.node.reason).key("verdict").value(node_status(r)).end_object();
  j.key("optimal")
      .value(counts[0])
      .key("pairs")
      .value(static_cast<unsigned long long>(r.pairs.size()))
      .key("unreliable")
      .value(counts[2])
      .key("worst")
      .value(to_string(r.worst))
      .end_object();
  j.key("version").value(1);
  j.end_object();
  return j.take() + "\n";
}

std::string render_dot(const Topology& t, const Report& r) {
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
  o << "  label=\"" << t.source << " (" << t.format << "): node " << node_status(r) << ", worst pair " << to_string(r.worst) << "\";\n";
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
    if (d.role == Role::GPU)
      style = ", style=filled, fillcolor=\"#b7e1a1\"";
    else if (d.role == Role::NIC)
      style = ", style=filled, fillcolor=\"#a9cce3\"";
    else if (d.role == Role::NVMe)
      style = ", style=filled, fillcolor=\"#f9e79f\"";
    if (bad.count(i)) style += ", color=red, penwidth=2";
    o << "  d" << i << " [label=\"" << lab << "\"" << style << "];\n";
    if (d.parent >= 0)
      o << "  d" << d.parent << " -> d" << i << ";\n";
    else if (d.host_bridge >= 0)
      o << "  hb" << d.host_bridge << " -> d" << i << ";\n";
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
    std::string desc = dev_desc(t, d);
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

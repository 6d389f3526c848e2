// Outputs of the readiness stage: one text line per GPU x NIC (IBGDA) and GPU x NVMe
// (GDS), GPUs with the same answer on one line, and JSON objects "ibgda" / "gds" (keys in byte order, as the writer keeps them).
#include <algorithm>
#include <string>
#include <vector>

#include "readiness_internal.hpp"

namespace gdrpeer::topo {

namespace {

std::string one_line(const std::string& s) {
  std::string out;
  for (char c : s) out += c == '\n' ? std::string("; ") : std::string(1, c);
  return out;
}

void mode_json(detail::JsonWriter& j, const ReadinessMode& m) {
  j.begin_object()
      .key("fix")
      .value(m.fix)
      .key("mode")
      .value(m.mode)
      .key("modelled")
      .value(m.modelled)
      .key("probe_note")
      .value(m.probe_note)
      .key("probed")
      .value(m.probed)
      .key("reason")
      .value(m.reason)
      .key("unknown")
      .value(m.unknown)
      .key("version")
      .value(1)
      .end_object();
}

std::string label(const Report& r, int i) { return i >= 0 && i < static_cast<int>(r.labels.size()) ? r.labels[i] : std::string(); }

}  // namespace

std::string render_readiness_text(const Report& r) {
  if (r.readiness.empty()) return "";
  // GPUs whose line would be the same (same kind, other end, mode, reason and fix: typically
  // every GPU of a node without a NIC or an NVMe drive) share one line, so an 8-GPU node says
  // it once, not eight times (issue 25: notes repeated per pair).
  struct Group {
    std::string gpus, other, text;
  };
  std::vector<Group> groups;
  for (const auto& e : r.readiness) {
    const std::string other = e.other >= 0 ? label(r, e.other) : e.kind == "ibgda" ? "(no NIC)" : "(no NVMe)";
    std::string text = e.kind + ": " + e.m.mode + "; " + e.m.reason;
    if (!e.m.probe_note.empty()) text += " {" + e.m.probe_note + "}";
    if (!e.m.fix.empty()) text += "\n      fix: " + one_line(e.m.fix);
    auto same = std::find_if(groups.begin(), groups.end(), [&](const Group& g) { return g.other == other && g.text == text; });
    if (same == groups.end())
      groups.push_back({label(r, e.gpu), other, text});
    else
      same->gpus += ", " + label(r, e.gpu);
  }
  std::string o = "\nIBGDA and GDS readiness (modes and the sources modelled: docs/check.md):\n";
  for (const auto& g : groups) {
    const std::string who = g.gpus + " - " + g.other;
    o += "  " + who + std::string(who.size() < 16 ? 16 - who.size() : 1, ' ') + g.text + "\n";
  }
  return o;
}

void render_readiness_pair_json(detail::JsonWriter& j, const Report& r, const PairResult& p) {
  const ReadinessEntry* gds = nullptr;
  const ReadinessEntry* ibgda = nullptr;
  for (const auto& e : r.readiness)
    if ((e.gpu == p.a && e.other == p.b) || (e.gpu == p.b && e.other == p.a)) (e.kind == "gds" ? gds : ibgda) = &e;
  if (gds) {
    j.key("gds");
    mode_json(j, gds->m);
  }
  if (ibgda) {
    j.key("ibgda");
    mode_json(j, ibgda->m);
  }
}

void render_readiness_json(detail::JsonWriter& j, const Topology& t, const Report& r) {
  j.key("readiness").begin_array();
  for (const auto& e : r.readiness) {
    j.begin_object().key("gpu").value(label(r, e.gpu)).key("gpu_bdf").value(t.devices[e.gpu].bdf).key("kind").value(e.kind);
    j.key("mode");
    mode_json(j, e.m);
    j.key("other")
        .value(e.other >= 0 ? label(r, e.other) : "")
        .key("other_bdf")
        .value(e.other >= 0 ? t.devices[e.other].bdf : "")
        .end_object();
  }
  j.end_array();
}

}  // namespace gdrpeer::topo

namespace gdrpeer::topo {

void render_readiness_inputs_json(detail::JsonWriter& j, const Software& sw) {
  const ReadinessInputs& in = sw.readiness;
  j.key("readiness").begin_object();
  j.key("ibgda_probe").begin_object().key("devices").begin_array();
  for (const auto& d : sw.ibgda_probe.devices)
    j.begin_object()
        .key("atomics")
        .value(d.atomics)
        .key("bdf")
        .value(d.bdf)
        .key("devx")
        .value(d.devx)
        .key("dmabuf_umem")
        .value(d.dmabuf_umem)
        .key("gpu_bdf")
        .value(d.gpu_bdf)
        .key("mlx5")
        .value(d.mlx5)
        .key("rdma_name")
        .value(d.rdma_name)
        .key("uar_gpu_map")
        .value(d.uar_gpu_map)
        .key("why")
        .value(d.why)
        .end_object();
  j.end_array().key("error").value(sw.ibgda_probe.error).key("ran").value(sw.ibgda_probe.ran).end_object();
  j.key("kernel_config")
      .begin_object()
      .key("known")
      .value(in.kconfig.known)
      .key("source")
      .value(in.kconfig.source)
      .key("values")
      .begin_object();
  for (const auto& [k, v] : in.kconfig.values) j.key(k).value(v);
  j.end_object().end_object();
  j.key("nvidia_fs").value(in.nvidia_fs_version).key("nvme_multipath").value(in.nvme_multipath);
  j.end_object();
}

}  // namespace gdrpeer::topo

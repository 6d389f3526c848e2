// Outputs of the stack stage (stack_render.hpp). JSON keys in byte order within
// each object, as the rest of the writer keeps them.
#include "stack_render.hpp"

namespace gdrpeer::topo {

namespace {

const char* gdr_word(int g) { return g == 1 ? "GDR on" : g == 0 ? "GDR off" : "GDR unknown"; }
const char* allowed_word(int a) { return a == 1 ? "allowed" : a == 0 ? "refused" : "unknown"; }

void gate_json(detail::JsonWriter& j, const GateAnswer& g) {
  j.begin_object().key("allowed");
  if (g.allowed < 0)
    j.null();
  else
    j.value(g.allowed == 1);
  j.key("why").value(g.why).end_object();
}

}  // namespace

std::string render_consumers_text(const Report& r) {
  std::string o;
  for (const auto& p : r.pairs) {
    if (!p.stack) continue;
    const std::string who = p.label_a + " - " + p.label_b;
    bool first = true;
    for (const ConsumerDecision& d : p.stack->consumers) {
      // A consumer the input says nothing about (an input without the software stack) is left
      // out of the text; one known to be unknown (UCX refusing its configuration) is not, nor
      // NCCL (its distance rule needs only the topology). JSON has all.
      if (d.nothing_known) continue;
      std::string line = "  " + (first ? who : std::string(who.size(), ' ')) + "  " + d.consumer + ": " + gdr_word(d.gdr) + ", " + d.path;
      first = false;
      if (!d.mapping.empty() && d.path == "dma-buf") line += " (" + d.mapping + " mapping)";
      if (!d.level.empty()) line += ", " + d.level;
      if (!d.why.empty()) line += "; " + d.why;
      o += line + "\n";
    }
    const GateResult& g = p.stack->gate;
    if (g.dmabuf_default.allowed >= 0 || g.nvidia_p2p.allowed >= 0)  // (the PCIe type alone: "needs coherent")
      o += "  " + std::string(who.size(), ' ') + "  nvidia driver: dma-buf " + allowed_word(g.dmabuf_default.allowed) +
           ", PCIe mapping type " + allowed_word(g.dmabuf_pcie.allowed) + ", nvidia_p2p " + allowed_word(g.nvidia_p2p.allowed) + "\n";
  }
  if (o.empty()) return o;
  return "\nConsumers (what each will do for the pair; models in docs/check.md):\n" + o;
}

void render_consumers_json(detail::JsonWriter& j, const PairResult& p) {
  if (!p.stack) return;
  j.key("consumers").begin_object();
  // Keys in byte order: "nccl", then NVIDIA's exporter gate "nvidia_driver", then "nvshmem", "ucx".
  for (const auto& d : p.stack->consumers) {
    j.key(d.consumer).begin_object();
    j.key("gdr");
    if (d.gdr < 0)
      j.null();
    else
      j.value(d.gdr == 1);
    j.key("level").value(d.level).key("mapping").value(d.mapping).key("modelled").value(d.modelled);
    j.key("path").value(d.path).key("rule").value(d.rule).key("why").value(d.why).end_object();
    if (d.consumer != "nccl") continue;
    j.key("nvidia_driver").begin_object();
    j.key("dmabuf_default");
    gate_json(j, p.stack->gate.dmabuf_default);
    j.key("dmabuf_pcie");
    gate_json(j, p.stack->gate.dmabuf_pcie);
    // The rules by the node's driver version (DriverGate): every tag from 515.43.04 to 595.45.04 read.
    j.key("modelled").value("open-gpu-kernel-modules nv-dmabuf.c, nv-pci.c, by the node's driver version (tags 515.43.04 to 595.45.04)");
    j.key("nvidia_p2p");
    gate_json(j, p.stack->gate.nvidia_p2p);
    j.end_object();
  }
  j.key("version").value(1);
  j.end_object();
}

void render_stack_json(detail::JsonWriter& j, const Software& sw) {
  const StackState& s = sw.stack;
  j.key("stack").begin_object();
  j.key("gdrpeer_client").value(s.gdrpeer_client).key("gdrpeer_cuda").value(s.gdrpeer_cuda);
  j.key("kernel_log").begin_array();
  for (const auto& c : s.log_causes)
    j.begin_object().key("kind").value(c.kind).key("line").value(c.line).key("module").value(c.module).end_object();
  j.end_array();
  j.key("kernel_log_read").value(s.kernel_log_read);
  j.key("modprobe").begin_array();
  for (const auto& o : s.modprobe)
    j.begin_object()
        .key("file")
        .value(o.file)
        .key("key")
        .value(o.key)
        .key("line")
        .value(o.line)
        .key("module")
        .value(o.module)
        .key("value")
        .value(o.value)
        .end_object();
  j.end_array();
  j.key("nvidia").begin_object();
  j.key("flavour").value(!s.nvidia_version_known ? "unknown" : s.nvidia_open ? "open" : "proprietary");
  j.key("params").begin_object();
  for (const auto& [k, v] : s.params) j.key(k).value(v);
  j.end_object();
  j.key("params_known").value(s.params_known);
  j.key("registry_dwords").begin_object();
  for (const auto& [k, v] : s.registry_dwords) j.key(k).value(v);
  j.end_object();
  j.key("registry_dwords_per_device").begin_object();
  for (const auto& [bdf, kv] : s.registry_per_device) {
    j.key(bdf).begin_object();
    for (const auto& [k, v] : kv) j.key(k).value(v);
    j.end_object();
  }
  j.end_object();
  j.key("version").value(s.nvidia_version);
  j.end_object();
  j.key("peer_clients").begin_array();
  for (const auto& c : s.peer_clients) {
    j.begin_object().key("counters").begin_object();
    for (const auto& [k, v] : c.counters) j.key(k).value(v);
    j.end_object().key("name").value(c.name).key("version").value(c.version).end_object();
  }
  j.end_array();
  j.key("peermem").begin_object().key("loaded").value(s.peermem_sysfs).key("params").begin_object();
  for (const auto& [k, v] : s.peermem_params) j.key(k).value(v);
  j.end_object().key("version").value(s.peermem_version).end_object();
  j.end_object();
}

}  // namespace gdrpeer::topo

// `gdrpeer check --format prometheus|nfd|summary`: one node's check result in the formats
// fleet tooling already collects -- node_exporter's textfile collector and
// node-feature-discovery's local feature files (docs/fleet.md). The CLI writes them
// atomically (cli/output_file.hpp): a collector must never read a half-written file.
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <map>
#include <tuple>
#include <utility>
#include <vector>

#include "gdrpeer/topo/render.hpp"

namespace gdrpeer::topo {

namespace {

// "gpu-nic", "gpu-gpu", "gpu-nvme": the --pairs kind a pair belongs to.
std::string pair_kind(const Topology& t, const PairResult& p) {
  return std::string(to_string(t.devices[static_cast<size_t>(p.a)].role)) + "-" + to_string(t.devices[static_cast<size_t>(p.b)].role);
}

// A label value: backslash, double quote and newline escaped (exposition format 0.0.4).
std::string label_value(std::string_view v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

using Labels = std::vector<std::pair<const char*, std::string>>;

// Metric families are written whole (HELP, TYPE, samples), as the format requires.
class Exposition {
 public:
  void family(const char* name, const char* help) {
    name_ = name;
    out_ += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " gauge\n";
  }
  void sample(const Labels& labels, double value) {
    out_ += name_;
    if (!labels.empty()) {
      out_ += '{';
      for (size_t i = 0; i < labels.size(); ++i)
        out_ += std::string(i ? "," : "") + labels[i].first + "=\"" + label_value(labels[i].second) + "\"";
      out_ += '}';
    }
    char num[32];
    std::snprintf(num, sizeof num, " %.17g\n", value);
    out_ += num;
  }
  std::string take() { return std::move(out_); }

 private:
  std::string name_, out_;
};

struct Problem {
  std::string rule, severity;
  bool operator<(const Problem& o) const { return std::tie(rule, severity) < std::tie(o.rule, o.severity); }
};

// Findings that count against the verdict (severity above optimal), by rule and severity.
std::map<Problem, int> problem_counts(const Report& r) {
  std::map<Problem, int> counts;
  auto count = [&](const Finding& f) {
    if (f.severity != Verdict::Optimal) ++counts[{f.rule, to_string(f.severity)}];
  };
  for (const auto& p : r.pairs)
    for (const auto& f : p.findings) count(f);
  for (const auto& f : r.node_findings) count(f);
  return counts;
}

size_t count_role(const Report& r, Role role) {
  return role == Role::GPU ? r.gpus.size() : role == Role::NIC ? r.nics.size() : r.nvmes.size();
}

}  // namespace

std::string render_prometheus(const Topology& t, const RuleData& k, const Report& r, std::time_t now, std::string_view tool_version) {
  Exposition e;
  e.family("gdrpeer_check_info", "The checked node's facts and the gdrpeer that checked it (always 1).");
  e.sample({{"version", std::string(tool_version)},
            {"rule_data", k.data_dir},
            {"source", t.source},
            {"kernel", t.sw.kernel_release},
            {"nvidia_driver", t.sw.nvidia_version},
            {"cpu", t.cpu.model_name},
            {"iommu", to_string(t.iommu)},
            {"virtual_machine", r.virtual_machine ? "true" : "false"}},
           1);
  e.family("gdrpeer_check_verdict",
           "Node verdict (each GPU by its best NIC, every GPU pair; --all-pairs: the worst pair): 0 optimal, 1 degraded, "
           "2 unreliable, 3 blocked.");
  e.sample({}, static_cast<int>(r.node.verdict));
  e.family("gdrpeer_check_incomplete", "1 when nothing was checked (no GPU, no NIC) or fewer GPUs/NICs than expected.");
  e.sample({}, r.node.incomplete ? 1 : 0);
  e.family("gdrpeer_check_worst_pair_verdict", "Worst verdict of any checked pair (detail): 0 optimal ... 3 blocked.");
  e.sample({}, static_cast<int>(r.worst));
  e.family("gdrpeer_check_exit_code", "Exit code of this gdrpeer check: 0 optimal, 1 degraded or unreliable, 2 blocked, 3 incomplete.");
  e.sample({}, r.exit_code());
  e.family("gdrpeer_check_timestamp_seconds", "When this check ran (seconds since the epoch); a stale value means the refresh stopped.");
  e.sample({}, static_cast<double>(now));
  e.family("gdrpeer_devices", "Devices found, by role.");
  for (Role role : {Role::GPU, Role::NIC, Role::NVMe}) e.sample({{"role", to_string(role)}}, static_cast<double>(count_role(r, role)));
  if (r.node.expect_gpus >= 0 || r.node.expect_nics >= 0) {
    e.family("gdrpeer_devices_expected", "Devices expected (--expect-gpus, --expect-nics), by role.");
    if (r.node.expect_gpus >= 0) e.sample({{"role", "gpu"}}, r.node.expect_gpus);
    if (r.node.expect_nics >= 0) e.sample({{"role", "nic"}}, r.node.expect_nics);
  }
  e.family("gdrpeer_gpu_verdict", "Verdict of each GPU with its best NIC (the NIC NCCL binds it to), 0 optimal ... 3 blocked.");
  for (const auto& d : r.node.gpus)
    if (d.best_nic >= 0)
      e.sample({{"gpu", r.labels[static_cast<size_t>(d.gpu)]},
                {"gpu_bdf", t.devices[static_cast<size_t>(d.gpu)].bdf},
                {"nic", r.labels[static_cast<size_t>(d.best_nic)]},
                {"nic_bdf", t.devices[static_cast<size_t>(d.best_nic)].bdf},
                {"class", to_string(d.cls)}},
               static_cast<int>(d.verdict));
  e.family("gdrpeer_pair_verdict",
           "Verdict per checked pair (0 optimal, 1 degraded, 2 unreliable, 3 blocked); class is the nvidia-smi path class.");
  for (const auto& p : r.pairs)
    e.sample({{"a", p.label_a},
              {"b", p.label_b},
              {"a_bdf", t.devices[static_cast<size_t>(p.a)].bdf},
              {"b_bdf", t.devices[static_cast<size_t>(p.b)].bdf},
              {"kind", pair_kind(t, p)},
              {"class", to_string(p.path.cls)}},
             static_cast<int>(p.verdict));
  e.family("gdrpeer_pairs", "Checked pairs by verdict.");
  for (Verdict v : {Verdict::Optimal, Verdict::Degraded, Verdict::Unreliable, Verdict::Blocked})
    e.sample({{"verdict", to_string(v)}},
             static_cast<double>(std::count_if(r.pairs.begin(), r.pairs.end(), [v](const auto& p) { return p.verdict == v; })));
  e.family("gdrpeer_problems", "Findings that lower a verdict, by rule id (docs/check.md) and severity; node-wide findings count once.");
  for (const auto& [problem, n] : problem_counts(r)) e.sample({{"rule", problem.rule}, {"severity", problem.severity}}, n);
  return e.take();
}

std::string render_gpu_summary(const Topology& t, const Report& r) {
  std::string out;
  for (const auto& d : r.node.gpus) {
    const auto& gpu = t.devices[static_cast<size_t>(d.gpu)];
    out += r.labels[static_cast<size_t>(d.gpu)] + " " + gpu.bdf + " -> ";
    if (d.best_nic < 0) {
      out += "no NIC checked\n";
      continue;
    }
    out += r.labels[static_cast<size_t>(d.best_nic)] + " " + t.devices[static_cast<size_t>(d.best_nic)].bdf + " " + to_string(d.cls) + " " +
           to_string(d.verdict) + "\n";
  }
  return out + "node: " + node_status(r) + " (" + r.node.reason + "), exit " + std::to_string(r.exit_code()) + "\n";
}

std::string render_nfd(const Topology& t, const Report& r, std::time_t now, long expiry_s, std::string_view tool_version) {
  constexpr const char* ns = "gdrpeer.feature.node.kubernetes.io/";
  std::string source = t.source;  // a comment line: a newline in a file name must not end it
  std::replace(source.begin(), source.end(), '\n', ' ');
  std::string out = "# gdrpeer " + std::string(tool_version) + " check of " + source + " (node-feature-discovery local features)\n";
  const std::time_t expiry = now + expiry_s;
  std::tm tm{};
  ::gmtime_r(&expiry, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%SZ", &tm);
  out += std::string("# +expiry-time=") + stamp + "\n";
  auto label = [&](const std::string& name, const std::string& value) { out += ns + name + "=" + value + "\n"; };
  label("verdict", node_status(r));
  // GPU-NIC: each GPU with its best NIC (NCCL binds it there), the worst GPU of those; with
  // --all-pairs the worst pair. What a scheduler asks: "can this node do GPUDirect RDMA?".
  bool any_nic = false;
  Verdict gpu_nic = Verdict::Optimal;
  for (const auto& d : r.node.gpus)
    if (d.best_nic >= 0) {
      any_nic = true;
      gpu_nic = std::max(gpu_nic, d.verdict);
    }
  // The worst verdict per pair kind, the GPU-NIC one under its own name as detail.
  for (const char* kind : {"gpu-nic", "gpu-gpu", "gpu-nvme"}) {
    bool any = false;
    Verdict worst = Verdict::Optimal;
    for (const auto& p : r.pairs)
      if (pair_kind(t, p) == kind) {
        any = true;
        worst = std::max(worst, p.verdict);
      }
    if (std::string_view(kind) == "gpu-nic") {
      label("gpu-nic-verdict", !any ? "none" : r.node.all_pairs || !any_nic ? to_string(worst) : to_string(gpu_nic));
      label("gpu-nic-all-pairs-verdict", any ? to_string(worst) : "none");
    } else {
      label(std::string(kind) + "-verdict", any ? to_string(worst) : "none");
    }
  }
  label("gpus", std::to_string(r.gpus.size()));
  label("nics", std::to_string(r.nics.size()));
  if (r.node.expect_gpus >= 0) label("gpus-expected", std::to_string(r.node.expect_gpus));
  if (r.node.expect_nics >= 0) label("nics-expected", std::to_string(r.node.expect_nics));
  // Only what the input shows: a dump without the module list gets no module labels.
  if (t.sw.inspected && t.sw.modules_known) {
    const bool peer = t.sw.has_module("nvidia_peermem") || t.sw.has_module("nv_peer_mem") || !t.sw.memory_peers.empty();
    label("peer-memory", peer ? "true" : "false");
    label("gdrpeer-module", t.sw.has_module("gdrpeer") ? "true" : "false");
  }
  return out;
}

}  // namespace gdrpeer::topo

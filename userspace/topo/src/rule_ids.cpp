#include "gdrpeer/topo/rule_ids.hpp"

#include <algorithm>
#include <vector>

namespace gdrpeer::topo {

namespace {

// Every id the rule stages (rules.cpp, rules_root_port.cpp, stack_rules.cpp) give a finding or a note. tests/test_check_cli.py reads the
// ids out of rules.cpp and docs/check.md and fails when this list misses one.
constexpr const char* kRuleIds[] = {
    "path-nvlink", "path-grace", "path-sys", "path-root-complex", "acs-redirect", "acs-unknown", "iommu-translating", "iommu-unknown",
    "iommu-mode", "link-width", "link-speed", "link-speed-idle", "bar1-small", "software-unknown", "software-driver", "software-cuda",
    "software-peer-memory", "platform-arm64", "platform-virtual", "no-gpu", "no-nic", "root-complex-unknown", "nvlink-unknown",
    // NVLink from NVML and the GPU model (nvml_probe.cpp, rules.cpp; issue 23)
    "nvlink-nvml", "nvlink-fabric", "nvlink-inferred",
    // the stack stage (stack_rules.cpp, rules_root_port.cpp; issue 24)
    "acs-root-port", "ats-translated", "ats-vm", "consumer-nccl", "consumer-nvshmem", "consumer-ucx", "exporter-gate", "nvidia-driver",
    "nvidia-override", "nvidia-params-pending", "nvidia-params-invalid", "peer-client-invisible", "peer-clients", "peermem-load-failed",
    "peermem-params", "peermem-unregistered",
    "input",  // what a parser noted about the input (t.notes)
};

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

}  // namespace

std::set<std::string> known_rule_ids(const RuleData& k) {
  std::set<std::string> ids(std::begin(kRuleIds), std::end(kRuleIds));
  for (const auto& p : k.platforms) ids.insert(p.id);
  std::set<std::string> groups;
  for (const auto& id : ids)
    if (const size_t dash = id.find('-'); dash != std::string::npos) groups.insert(id.substr(0, dash));
  ids.insert(groups.begin(), groups.end());
  return ids;
}

std::string nearest_rule_id(std::string_view id, const std::set<std::string>& known) {
  std::string best;
  size_t best_d = SIZE_MAX;
  for (const auto& k : known) {
    const size_t d = edit_distance(id, k);
    if (d < best_d) best_d = d, best = k;
  }
  const size_t longer = std::max(id.size(), best.size());
  return best_d * 3 <= longer ? best : "";
}

}  // namespace gdrpeer::topo

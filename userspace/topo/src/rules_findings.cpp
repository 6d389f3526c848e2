// The per-pair rules' common step: --skip, duplicate findings, NVIDIA by ids (rules_findings.hpp).
#include "rules_findings.hpp"

#include <string>

namespace gdrpeer::topo {

bool rule_skipped(const CheckOptions& o, std::string_view rule) {
  if (o.skip.count(std::string(rule))) return true;
  size_t dash = rule.find('-');
  return dash != std::string_view::npos && o.skip.count(std::string(rule.substr(0, dash)));
}

void add_finding(const CheckOptions& o, std::vector<Finding>& out, std::string_view rule, Verdict v, std::string reason, std::string fix) {
  if (rule_skipped(o, rule)) return;
  for (const auto& f : out)
    if (f.rule == rule && f.reason == reason) return;
  out.push_back(Finding{std::string(rule), v, std::move(reason), std::move(fix)});
}

bool nvidia_by_ids(const Device& d) { return d.ids_known && d.vendor == 0x10de; }

}  // namespace gdrpeer::topo

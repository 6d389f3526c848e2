#include "option_checks.hpp"

#include <stdexcept>

#include "gdrpeer/topo/rule_ids.hpp"

namespace gdrpeer::cli {

void check_skip_ids(const std::vector<std::string>& skip, const topo::RuleData& k) {
  if (skip.empty()) return;
  const std::set<std::string> known = topo::known_rule_ids(k);
  for (const auto& id : skip) {
    if (known.count(id)) continue;
    std::string msg = "--skip \"" + id + "\": not a rule id or group";
    if (const std::string near = topo::nearest_rule_id(id, known); !near.empty()) msg += " (did you mean \"" + near + "\"?)";
    msg += "; valid:";
    for (const auto& k_id : known) msg += " " + k_id;
    throw std::invalid_argument(msg);
  }
}

}  // namespace gdrpeer::cli

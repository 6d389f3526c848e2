// Checks of `gdrpeer check` options that CLI11 cannot express: values that must
// name something the rule data knows, and options that contradict each other.
// Each throws std::invalid_argument (exit 64, usage) with what would be valid.
#pragma once

#include <string>
#include <vector>

#include "gdrpeer/topo/rule_data.hpp"

namespace gdrpeer::cli {

// Every --skip value must be a rule id or group of docs/check.md (or of the
// loaded platform rules): an unknown one names the nearest id and lists them all.
void check_skip_ids(const std::vector<std::string>& skip, const topo::RuleData& k);

}  // namespace gdrpeer::cli

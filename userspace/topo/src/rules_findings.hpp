// What every part of the per-pair rules (rules.cpp, rules_root_port.cpp, rules_software.cpp)
// does with a finding: --skip (a rule id, or the family before its first dash) and one
// finding per (rule, reason) in a pair; and which GPUs they judge as NVIDIA's by their ids.
#pragma once

#include <string_view>
#include <vector>

#include "gdrpeer/topo/rules.hpp"

namespace gdrpeer::topo {

// True when --skip names the rule or its family ("acs" skips "acs-redirect").
bool rule_skipped(const CheckOptions& o, std::string_view rule);

// Appends the finding unless --skip names it or the same rule already gave the same reason.
void add_finding(const CheckOptions& o, std::vector<Finding>& out, std::string_view rule, Verdict v, std::string reason, std::string fix);

// True when the function's PCI ids are known and its vendor is NVIDIA (0x10de): the rules that
// need an NVIDIA function for sure (BAR1 size, the nvidia module, the CUDA probe note), where a
// name alone does not do.
bool nvidia_by_ids(const Device& d);

}  // namespace gdrpeer::topo

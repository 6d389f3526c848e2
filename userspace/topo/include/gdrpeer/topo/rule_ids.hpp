// The rule ids `gdrpeer check --skip` accepts: every id a finding or note can
// carry (docs/check.md's rule table) and the groups they form (the part before
// the first '-': "path", "software", "platform", ...). --skip refuses anything
// else, so a typo or a swallowed file name cannot silently skip nothing.
#pragma once

#include <set>
#include <string>
#include <string_view>

#include "gdrpeer/topo/rule_data.hpp"

namespace gdrpeer::topo {

// Ids of rules.cpp plus the platform rules of the loaded rule data, and their groups.
std::set<std::string> known_rule_ids(const RuleData& k);

// The known id nearest to `id` by edit distance, or "" when none is close
// (more than a third of the longer name would have to change).
std::string nearest_rule_id(std::string_view id, const std::set<std::string>& known);

}  // namespace gdrpeer::topo

// Fleet mode of `gdrpeer check` (several inputs or --fleet): every node checked, one line
// (or JSON object) per node in input order, a summary line, and one exit code for the run.
#pragma once

#include <cstddef>
#include <vector>

#include "gdrpeer/topo/rule_data.hpp"
#include "gdrpeer/topo/rules.hpp"
#include "inputs.hpp"

namespace gdrpeer::cli {

struct FleetFlags {
  bool json = false;  // --json: one gdrpeer-fleet document instead of lines
  int jobs = 0;       // --jobs; 0: one thread per CPU
};

// --jobs, or one thread per CPU this process may run on.
size_t fleet_jobs(int requested);

// Checks every node of `specs` (--jobs threads; one for the live node) and prints as it goes.
// Exit: the worst node's, except that an unreadable dump (65) outranks optimal and degraded.
int run_fleet(const std::vector<NodeSpec>& specs, const InputOptions& in, const FleetFlags& f, const topo::CheckOptions& opt,
              const topo::RuleData& k);

}  // namespace gdrpeer::cli

// A part of the PCIe rules (rules.cpp) kept in a file of its own: node-wide findings about
// the CPU root ports. check() runs it after the per-pair rules, before the stack stage.
#pragma once

#include "gdrpeer/topo/rules.hpp"

namespace gdrpeer::topo {

// ACS redirect on the CPU root ports of PHB/NODE pairs, and where ATS matters (rules_root_port.cpp).
void root_port_rules(const Topology& t, const CheckOptions& o, Report& rep);

}  // namespace gdrpeer::topo

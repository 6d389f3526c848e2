// A part of the per-pair rules (rules.cpp) kept in a file of its own: what the node's software
// (kernel modules, peer-memory clients, the dma-buf path, CUDA's own answer) allows for one
// GPU's pairs with a NIC or an NVMe drive. The pair rules call it between the BAR1 and the
// platform rules, so the findings keep their order.
#pragma once

#include <vector>

#include "gdrpeer/topo/rules.hpp"

namespace gdrpeer::topo {

// software-unknown, software-driver, software-cuda, software-peer-memory for GPU g (rules_software.cpp).
void software_rules(const Topology& t, const CheckOptions& o, const Device& g, std::vector<Finding>& out);

}  // namespace gdrpeer::topo

// Reading the nodes `gdrpeer check` and `gdrpeer topo` are asked about: the input options both
// take, which node each input names (node_specs), and loading one node: parse, roles, the
// operator's overrides and the live probe (load_node), with the memory fleet mode reuses.
#pragma once

#include <string>
#include <vector>

#include "gdrpeer/topo/model.hpp"
#include "gdrpeer/topo/rule_data.hpp"

namespace gdrpeer::cli {

namespace topo = gdrpeer::topo;

struct InputOptions {
  std::vector<std::string> positional;
  std::string sysfs_root;
  std::vector<std::string> hwloc, nccl, lspci;
  std::vector<std::string> roles;
  std::vector<std::string> gpus, nics, nvmes;
  std::string data_dir;
  bool no_cuda = false;             // snapshot: do not record the CUDA driver's answers
  bool cuda = false;                // live check/topo: ask the CUDA driver (cuInit: ~1 s on a 4-GPU node)
  std::vector<std::string> probes;  // --probe ibgda (readiness.hpp)
};

// What one node is read from.
struct NodeSpec {
  enum class Kind { Live, Path, Hwloc, Nccl, Lspci } kind = Kind::Live;
  std::vector<std::string> paths;
};

// One spec per input (positional, --sysfs-root, --hwloc, --nccl-xml; all --lspci texts form one), or the
// live node when none is given; throws std::invalid_argument when "-" is named twice.
std::vector<NodeSpec> node_specs(const InputOptions& in);

// Memory one fleet worker reuses from node to node: the input file's bytes and the
// device vector of the previous node (emptied by the parser). Without it every dump
// grows and frees a few hundred KiB, and glibc hands that back to the kernel after
// each node and faults it in again for the next.
struct NodeBuffers {
  std::string input;
  std::vector<topo::Device> devices;
};

// The node `spec` names, with roles assigned and the overrides of `in` applied. Throws the
// errors of topo/errors.hpp and std::invalid_argument (usage).
topo::Topology load_node(const NodeSpec& spec, const InputOptions& in, const topo::RuleData& k, NodeBuffers* reuse = nullptr);

// The rule data --data-dir names, else RuleData::default_dir().
topo::RuleData load_rule_data(const InputOptions& in);

}  // namespace gdrpeer::cli

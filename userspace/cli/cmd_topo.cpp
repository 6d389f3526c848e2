// `gdrpeer topo`: the PCI topology model of each node, as a tree or as DOT.
#include <cstdio>
#include <memory>
#include <vector>

#include <CLI/CLI.hpp>

#include "commands.hpp"
#include "gdrpeer/topo/render.hpp"
#include "gdrpeer/topo/rule_data.hpp"
#include "gdrpeer/topo/rules.hpp"
#include "guarded.hpp"
#include "input_options.hpp"
#include "inputs.hpp"

namespace gdrpeer::cli {

namespace {

struct TopoFlags {
  bool dot = false, roles_only = false;
};

int run_topo(const InputOptions& in, const TopoFlags& f) {
  return guarded([&] {
    topo::RuleData k = load_rule_data(in);
    std::vector<NodeSpec> specs = node_specs(in);
    for (const auto& s : specs) {
      topo::Topology t = load_node(s, in, k);
      if (f.dot) {
        topo::CheckOptions opt;
        topo::Report r = topo::check(t, k, opt);
        std::fputs(topo::render_dot(t, r).c_str(), stdout);
      } else {
        std::fputs(topo::render_tree(t, f.roles_only).c_str(), stdout);
      }
    }
    return 0;
  });
}

}  // namespace

void add_topo_command(CLI::App& app, int& exit_code) {
  auto topo_in = std::make_shared<InputOptions>();
  auto topo_flags = std::make_shared<TopoFlags>();
  CLI::App* t = app.add_subcommand("topo", "Show the PCI topology model (tree with roles, ports, links, ACS, IOMMU)");
  add_input_options(t, *topo_in);
  t->add_flag("--dot", topo_flags->dot, "Graphviz DOT of the paths between GPUs, NICs and NVMe drives");
  t->add_flag("--roles-only", topo_flags->roles_only, "Only the branches that lead to GPUs, NICs or NVMe drives");
  t->callback([topo_in, topo_flags, &exit_code] { exit_code = run_topo(*topo_in, *topo_flags); });
}

}  // namespace gdrpeer::cli

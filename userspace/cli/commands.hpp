// Each concern registers its own subcommands on the one `gdrpeer` CLI.
// A callback stores its process exit code in `exit_code`; usage errors exit 64.
#pragma once

#include <string_view>

#include <CLI/CLI.hpp>

namespace gdrpeer::cli {

// topo, check, snapshot (userspace/cli/cmd_topology.cpp); `only` names the one
// to register, empty for all three.
void add_topology_commands(CLI::App& app, int& exit_code, std::string_view only = {});
// verify (userspace/cli/cmd_verify.cpp)
void add_verify_command(CLI::App& app, int& exit_code);

}  // namespace gdrpeer::cli

// Each concern registers its own subcommands on the one `gdrpeer` CLI.
// A callback stores its process exit code in `exit_code`; usage errors exit 64.
#pragma once

#include <string_view>

#include <CLI/CLI.hpp>

namespace gdrpeer::cli {

// topo, check, snapshot (userspace/cli/cmd_topology.cpp); `only` names the one
// to register, empty for all three.
void add_topology_commands(CLI::App& app, int& exit_code, std::string_view only = {});
// `gdrpeer check ...` run at once when its command line is plain (no CLI11 setup);
// false, with nothing run, when CLI11 must parse it.
bool run_check_plain(int argc, char** argv, int& exit_code);
// verify (userspace/cli/cmd_verify.cpp)
void add_verify_command(CLI::App& app, int& exit_code);

}  // namespace gdrpeer::cli

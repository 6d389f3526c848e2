#include <cstdio>
#include <exception>
#include <string_view>

#include "commands.hpp"
#include "gdrpeer/topo/knowledge.hpp"

#ifndef GDRPEER_VERSION
#define GDRPEER_VERSION "unknown"
#endif

int main(int argc, char** argv) {
  // The common case, `gdrpeer check` with plain arguments, skips CLI11's setup
  // (it is started once per node dump by fleet scripts).
  try {
    int rc = 0;
    if (gdrpeer::cli::run_check_plain(argc, argv, rc)) return rc;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gdrpeer: %s\n", e.what());
    return 70;  // EX_SOFTWARE, as below
  }
  // Deliberately never destroyed: tearing down the ~50 options and subcommands
  // costs more than a whole `gdrpeer check` of a small node, and exit frees it.
  CLI::App& app = *new CLI::App{"gdrpeer: GPUDirect RDMA topology check, snapshot and on-node verification"};
  app.set_version_flag("--version", [] {
    return "gdrpeer " GDRPEER_VERSION "\nrule data: " + gdrpeer::topo::Knowledge::describe_dir(gdrpeer::topo::Knowledge::default_dir());
  });
  app.require_subcommand(1);
  int exit_code = 0;
  // Only the subcommand named first on the command line is built: CLI11 spends
  // several microseconds per option, and fleet scripts start `gdrpeer check` once
  // per node dump. A sibling's name later on the line is a positional argument
  // either way. Without a subcommand first (--help, --version, a typo) all are
  // built, so help and errors list them all.
  const std::string_view first = argc > 1 ? argv[1] : "";
  const bool topology = first == "topo" || first == "check" || first == "snapshot";
  const bool all = !topology && first != "verify";
  if (all || topology) gdrpeer::cli::add_topology_commands(app, exit_code, all ? "" : first);
  if (all || first == "verify") gdrpeer::cli::add_verify_command(app, exit_code);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version are "errors" with exit code 0; everything else is a usage error.
    const int rc = app.exit(e);
    return rc == 0 ? 0 : 64;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gdrpeer: %s\n", e.what());
    return 70;  // EX_SOFTWARE: an internal error, never expected
  }
  return exit_code;
}

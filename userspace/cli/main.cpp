#include <cstdio>
#include <exception>
#include <string_view>

#include "commands.hpp"
#include "gdrpeer/topo/knowledge.hpp"

#ifndef GDRPEER_VERSION
#define GDRPEER_VERSION "unknown"
#endif

int main(int argc, char** argv) {
  CLI::App app{"gdrpeer: GPUDirect RDMA topology check, snapshot and on-node verification"};
  app.set_version_flag("--version", [] {
    return "gdrpeer " GDRPEER_VERSION "\nrule data: " + gdrpeer::topo::Knowledge::describe_dir(gdrpeer::topo::Knowledge::default_dir());
  });
  app.require_subcommand(1);
  int exit_code = 0;
  // Only the subcommand named first is built: setting up every option of all four
  // took a tenth of a `gdrpeer check` of a large node, which fleet scripts start
  // once per dump. Without a subcommand first (--help, --version, a typo) all are
  // built, so that help and errors list them all.
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

#include <cstdio>
#include <exception>

#include "commands.hpp"

#ifndef GDRPEER_VERSION
#define GDRPEER_VERSION "unknown"
#endif

int main(int argc, char** argv) {
  CLI::App app{"gdrpeer: GPUDirect RDMA topology check, snapshot and on-node verification"};
  app.set_version_flag("--version", GDRPEER_VERSION);
  app.require_subcommand(1);
  int exit_code = 0;
  gdrpeer::cli::add_topology_commands(app, exit_code);
  gdrpeer::cli::add_verify_command(app, exit_code);
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

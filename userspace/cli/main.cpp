#include <cstdio>
#include <exception>
#include <string>
#include <string_view>
#include <vector>

#include "commands.hpp"
#include "exit_codes.hpp"
#include "gdrpeer/topo/rule_data.hpp"
#include "subcommand_names.hpp"

#ifndef GDRPEER_VERSION
#define GDRPEER_VERSION "unknown"
#endif

int main(int argc, char** argv) {
  // `gdrpeer help [COMMAND]` is `gdrpeer [COMMAND] --help`, as git and systemctl users type it.
  std::vector<char*> args(argv, argv + argc);
  static char help_flag[] = "--help";
  if (args.size() > 1 && std::string_view(args[1]) == "help") {
    args.erase(args.begin() + 1);
    args.push_back(help_flag);
  }
  // A first word that is no command: say which one was meant, not "A subcommand is required".
  if (args.size() > 1 && args[1][0] != '-' && !gdrpeer::cli::is_subcommand(args[1])) {
    const std::string near = gdrpeer::cli::nearest_subcommand(args[1]);
    std::fprintf(stderr, "gdrpeer: \"%s\" is not a command%s; commands: topo, check, snapshot, verify, help (gdrpeer --help)\n", args[1],
                 near.empty() ? "" : (" (did you mean \"" + near + "\"?)").c_str());
    return gdrpeer::cli::exit_code::kUsage;
  }
  argc = static_cast<int>(args.size());
  argv = args.data();

  CLI::App app{"gdrpeer: GPUDirect RDMA topology check, snapshot and on-node verification"};
  app.set_version_flag("-V,--version", [] {
    return "gdrpeer " GDRPEER_VERSION "\nrule data: " + gdrpeer::topo::RuleData::describe_dir(gdrpeer::topo::RuleData::default_dir());
  });
  app.require_subcommand(1);
  app.footer("Commands: gdrpeer help COMMAND (or COMMAND --help) for its options and examples.\n\n" + gdrpeer::cli::exit_code_help());
  int exit_code = 0;
  // Only the subcommand named first is built: setting up every option of all four
  // took a tenth of a `gdrpeer check` of a large node, which fleet scripts start
  // once per dump. Without a subcommand first (--help, --version) all are
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
    return rc == 0 ? 0 : gdrpeer::cli::exit_code::kUsage;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gdrpeer: %s\n", e.what());
    return gdrpeer::cli::exit_code::kSoftware;  // an internal error, never expected
  }
  return exit_code;
}

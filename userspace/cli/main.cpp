#include <cstdio>
#include <exception>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>

#include "commands.hpp"
#include "exit_codes.hpp"
#include "gdrpeer/topo/rule_data.hpp"

#ifndef GDRPEER_VERSION
#define GDRPEER_VERSION "unknown"
#endif

int main(int argc, char** argv) {
  namespace cli = gdrpeer::cli;
  // `gdrpeer help [COMMAND]` is `gdrpeer [COMMAND] --help`, as git and systemctl users type it.
  std::vector<char*> args(argv, argv + argc);
  static char help_flag[] = "--help";
  if (args.size() > 1 && std::string_view(args[1]) == cli::kHelpWord) {
    args.erase(args.begin() + 1);
    args.push_back(help_flag);
  }
  // A first word that is no command: say which one was meant, not "A subcommand is required".
  if (args.size() > 1 && args[1][0] != '-' && !cli::is_subcommand(args[1])) {
    const std::string near = cli::nearest_subcommand(args[1]);
    std::fprintf(stderr, "gdrpeer: \"%s\" is not a command%s; commands: %s (gdrpeer --help)\n", args[1],
                 near.empty() ? "" : (" (did you mean \"" + near + "\"?)").c_str(), cli::subcommand_list().c_str());
    return cli::exit_code::kUsage;
  }
  argc = static_cast<int>(args.size());
  argv = args.data();

  CLI::App app{"gdrpeer: GPUDirect RDMA topology check, snapshot and on-node verification"};
  app.set_version_flag("-V,--version", [] {
    return "gdrpeer " GDRPEER_VERSION "\nrule data: " + gdrpeer::topo::RuleData::describe_dir(gdrpeer::topo::RuleData::default_dir());
  });
  app.require_subcommand(1);
  app.footer("Commands: gdrpeer help COMMAND (or COMMAND --help) for its options and examples.\n\n" + cli::exit_code_help());
  int exit_code = 0;
  // Only the subcommand named first is built (commands.hpp says why). Without one first
  // (--help, --version) all are built, so that help and errors list them all.
  if (const cli::Command* named = cli::find_command(argc > 1 ? argv[1] : ""))
    named->add(app, exit_code);
  else
    for (const cli::Command& c : cli::kCommands) c.add(app, exit_code);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version are "errors" with exit code 0; everything else is a usage error.
    const int rc = app.exit(e);
    return rc == 0 ? 0 : cli::exit_code::kUsage;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gdrpeer: %s\n", e.what());
    return cli::exit_code::kSoftware;  // an internal error, never expected
  }
  return exit_code;
}

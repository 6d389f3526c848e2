// The `gdrpeer` subcommands: one table, read by main.cpp's fast path (build only the
// subcommand named first: setting up every option of all of them took a tenth of a
// `gdrpeer check` of a large node, which fleet scripts start once per dump) and by the full
// help (build them all, in this order). Each name is written here once.
//
// An add_X_command registers its subcommand on the one `gdrpeer` CLI; the option storage
// must outlive parsing, so it is owned by the callback's closure. The callback stores its
// process exit code in `exit_code`; usage errors exit 64 (exit_codes.hpp). Include CLI11
// (this header) only where options are built, main.cpp and cmd_X.cpp: each file that includes
// it runs the static constructors of CLI11's validators at every start.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>

namespace gdrpeer::cli {

void add_topo_command(CLI::App& app, int& exit_code);      // cmd_topo.cpp
void add_check_command(CLI::App& app, int& exit_code);     // cmd_check.cpp
void add_snapshot_command(CLI::App& app, int& exit_code);  // cmd_snapshot.cpp
void add_verify_command(CLI::App& app, int& exit_code);    // cmd_verify.cpp

struct Command {
  std::string_view name;
  void (*add)(CLI::App& app, int& exit_code);
};

inline constexpr std::array<Command, 4> kCommands = {{
    {"topo", add_topo_command},
    {"check", add_check_command},
    {"snapshot", add_snapshot_command},
    {"verify", add_verify_command},
}};

// `gdrpeer help [COMMAND]`, which main.cpp turns into `gdrpeer [COMMAND] --help`.
inline constexpr std::string_view kHelpWord = "help";

// The command named `word`, or nullptr.
inline const Command* find_command(std::string_view word) {
  for (const Command& c : kCommands)
    if (c.name == word) return &c;
  return nullptr;
}

// The words `gdrpeer` takes first: every command, then "help".
inline std::vector<std::string_view> first_words() {
  std::vector<std::string_view> words;
  for (const Command& c : kCommands) words.push_back(c.name);
  words.push_back(kHelpWord);
  return words;
}

inline bool is_subcommand(std::string_view word) { return word == kHelpWord || find_command(word) != nullptr; }

// "topo, check, snapshot, verify, help": the list an unknown first word is answered with.
inline std::string subcommand_list() {
  std::string out;
  for (std::string_view w : first_words()) out += (out.empty() ? "" : ", ") + std::string(w);
  return out;
}

// The command `word` begins ("snap" -> "snapshot"), else the one at the smallest edit
// distance when at most a third of the longer word differs ("chek" -> "check").
inline std::string nearest_subcommand(std::string_view word) {
  const std::vector<std::string_view> words = first_words();
  if (word.size() >= 2)
    for (std::string_view c : words)
      if (c.substr(0, word.size()) == word) return std::string(c);
  std::string best;
  size_t best_d = SIZE_MAX;
  for (std::string_view c : words) {
    std::vector<size_t> row(c.size() + 1);
    for (size_t j = 0; j <= c.size(); ++j) row[j] = j;
    for (size_t i = 1; i <= word.size(); ++i) {
      size_t diag = row[0];
      row[0] = i;
      for (size_t j = 1; j <= c.size(); ++j) {
        const size_t up = row[j];
        row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (word[i - 1] == c[j - 1] ? 0 : 1)});
        diag = up;
      }
    }
    if (row[c.size()] < best_d) best_d = row[c.size()], best = std::string(c);
  }
  return best_d * 3 <= std::max(word.size(), best.size()) ? best : "";
}

}  // namespace gdrpeer::cli

// The names `gdrpeer` takes as its first word, and the nearest one to a typo.
#pragma once

#include <algorithm>
#include <array>
#include <string>
#include <string_view>
#include <vector>

namespace gdrpeer::cli {

inline constexpr std::array<std::string_view, 5> kSubcommands = {"topo", "check", "snapshot", "verify", "help"};

inline bool is_subcommand(std::string_view word) { return std::find(kSubcommands.begin(), kSubcommands.end(), word) != kSubcommands.end(); }

// The command `word` begins ("snap" -> "snapshot"), else the one at the smallest edit
// distance when at most a third of the longer word differs ("chek" -> "check").
inline std::string nearest_subcommand(std::string_view word) {
  if (word.size() >= 2)
    for (std::string_view c : kSubcommands)
      if (c.substr(0, word.size()) == word) return std::string(c);
  std::string best;
  size_t best_d = SIZE_MAX;
  for (std::string_view c : kSubcommands) {
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

// Hex digits for the parsers and the rule-data reader: one table, one loop.
#pragma once

#include <array>
#include <cstddef>
#include <string_view>

namespace gdrpeer::topo::detail {

// Digit values, -1 for anything else: a table, since the parsers look up every
// digit of every id and bitmap of an input.
inline constexpr std::array<signed char, 256> kHexDigit = [] {
  std::array<signed char, 256> t{};
  t.fill(-1);
  for (int c = 0; c < 10; ++c) t['0' + c] = static_cast<signed char>(c);
  for (int c = 0; c < 6; ++c) t['a' + c] = t['A' + c] = static_cast<signed char>(10 + c);
  return t;
}();

constexpr int hex_digit(char c) { return kHexDigit[static_cast<unsigned char>(c)]; }

// `s` as a hex number of 1 to max_digits digits and nothing else (no "0x", sign
// or blanks); false, with `out` undefined, for anything else.
inline bool parse_hex_digits(std::string_view s, size_t max_digits, unsigned long& out) {
  if (s.empty() || s.size() > max_digits) return false;
  out = 0;
  for (char c : s) {
    const int v = hex_digit(c);
    if (v < 0) return false;
    out = out * 16 + static_cast<unsigned long>(v);
  }
  return true;
}

}  // namespace gdrpeer::topo::detail

// A small JSON reader for the rule data in topology/*.json. Every `gdrpeer
// check` process reads those files; nlohmann's DOM took ~180 us for their
// 8 KiB, more than checking a small node (docs/benchmarks.md), this reader
// ~10 us. Strict RFC 8259 syntax; errors name file, line and column.
// nlohmann-json stays the project's JSON library for output (--json).
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gdrpeer::topo::detail {

struct JsonValue {
  enum class Kind { Null, Bool, Number, String, Array, Object } kind = Kind::Null;
  bool boolean = false;
  double number = 0;
  std::string text;              // String
  std::vector<JsonValue> items;  // Array
  // Object members in file order: names[i] is the name of items[i]. (Two vectors,
  // not one of pairs: std::pair of this still incomplete type does not compile
  // with every standard library.)
  std::vector<std::string> names;

  // The member named key of an object, or nullptr (also when not an object).
  const JsonValue* find(std::string_view key) const;
};

// Throws DataError("NAME:LINE:COL: expected ...") on malformed text.
JsonValue parse_json(std::string_view text, const std::string& name);

}  // namespace gdrpeer::topo::detail

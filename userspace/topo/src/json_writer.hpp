// Writes JSON straight into a string, laid out as nlohmann::json's dump(2) lays
// it out (two-space indent, "key": value, empty containers as {} and []), so the
// `--json` output stays what it was when it was built as a DOM first: building
// that DOM (a std::map per object, a node per value) cost twice the whole text
// check on a 16-GPU node (docs/benchmarks.md). nlohmann sorts object keys:
// callers write each object's keys in byte order.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace gdrpeer::topo::detail {

class JsonWriter {
 public:
  explicit JsonWriter(size_t reserve = 0) { out_.reserve(reserve); }

  JsonWriter& begin_object() { return open('{'); }
  JsonWriter& end_object() { return close('}'); }
  JsonWriter& begin_array() { return open('['); }
  JsonWriter& end_array() { return close(']'); }
  // The next member's name; its value follows.
  JsonWriter& key(std::string_view k);

  JsonWriter& value(std::string_view s);
  JsonWriter& value(const char* s) { return value(std::string_view(s)); }
  JsonWriter& value(const std::string& s) { return value(std::string_view(s)); }
  JsonWriter& value(bool b);
  JsonWriter& value(int v) { return integer(v < 0, v < 0 ? 0 - static_cast<uint64_t>(v) : static_cast<uint64_t>(v)); }
  JsonWriter& value(long v) { return integer(v < 0, v < 0 ? 0 - static_cast<uint64_t>(v) : static_cast<uint64_t>(v)); }
  JsonWriter& value(unsigned long v) { return integer(false, v); }
  JsonWriter& value(unsigned long long v) { return integer(false, v); }
  JsonWriter& value(double v);
  JsonWriter& null();

  std::string take() { return std::move(out_); }

 private:
  JsonWriter& open(char c);
  JsonWriter& close(char c);
  JsonWriter& integer(bool negative, uint64_t magnitude);
  void before_value();
  void write_string(std::string_view s);
  void indent(size_t level) { out_.append(2 * level, ' '); }

  struct Level {
    bool array;
    bool empty = true;
  };
  std::string out_;
  std::vector<Level> stack_;
  bool after_key_ = false;
};

// nlohmann's text of a double (its Grisu2 digits; fixed notation for decimal
// exponents -4 .. 15 with ".0" on integers, else d.ddde+XX); "null" for NaN and
// infinities, as dump() writes them.
std::string json_double(double v);

}  // namespace gdrpeer::topo::detail

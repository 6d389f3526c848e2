#include "json_writer.hpp"

#include <charconv>
#include <cmath>
#include <cstdio>

#include <nlohmann/json.hpp>

namespace gdrpeer::topo::detail {

namespace {

// Length of the UTF-8 sequence starting at s[i] (1-4), or 0 when it is not a
// well-formed one (stray continuation byte, overlong form, surrogate, > U+10FFFF).
size_t utf8_length(std::string_view s, size_t i) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = b(i);
  if (c < 0x80) return 1;
  size_t n = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 ? 2 : 0;
  if (n == 0 || c > 0xf4 || i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k)
    if ((b(i + k) & 0xc0) != 0x80) return 0;
  if (c == 0xe0 && b(i + 1) < 0xa0) return 0;   // overlong
  if (c == 0xed && b(i + 1) >= 0xa0) return 0;  // UTF-16 surrogate
  if (c == 0xf0 && b(i + 1) < 0x90) return 0;   // overlong
  if (c == 0xf4 && b(i + 1) >= 0x90) return 0;  // above U+10FFFF
  return n;
}

}  // namespace

void JsonWriter::before_value() {
  if (after_key_) {
    after_key_ = false;
    return;
  }
  if (stack_.empty()) return;
  Level& l = stack_.back();
  out_.append(l.empty ? "\n" : ",\n");
  l.empty = false;
  indent(stack_.size());
}

JsonWriter& JsonWriter::open(char c) {
  before_value();
  out_.push_back(c);
  stack_.push_back(Level{c == '['});
  return *this;
}

JsonWriter& JsonWriter::close(char c) {
  const bool empty = stack_.back().empty;
  stack_.pop_back();
  if (!empty) {
    out_.push_back('\n');
    indent(stack_.size());
  }
  out_.push_back(c);
  return *this;
}

JsonWriter& JsonWriter::key(std::string_view k) {
  before_value();
  write_string(k);
  out_.append(": ");
  after_key_ = true;
  return *this;
}

JsonWriter& JsonWriter::value(std::string_view s) {
  before_value();
  write_string(s);
  return *this;
}

void JsonWriter::write_string(std::string_view s) {
  out_.push_back('"');
  size_t plain = 0;  // start of the run of bytes copied as they are
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c != '"' && c != '\\' && c < 0x80) {
      ++i;
      continue;
    }
    const size_t n = c >= 0x80 ? utf8_length(s, i) : 0;
    if (n > 0) {  // well-formed multi-byte character: as is
      i += n;
      continue;
    }
    out_.append(s.substr(plain, i - plain));
    switch (c) {
      case '"': out_.append("\\\""); break;
      case '\\': out_.append("\\\\"); break;
      case '\b': out_.append("\\b"); break;
      case '\f': out_.append("\\f"); break;
      case '\n': out_.append("\\n"); break;
      case '\r': out_.append("\\r"); break;
      case '\t': out_.append("\\t"); break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out_.append(buf);
        } else {
          out_.append("\xef\xbf\xbd");  // a byte that is not UTF-8: U+FFFD, as nlohmann's "replace" handler
        }
    }
    plain = ++i;
  }
  out_.append(s.substr(plain));
  out_.push_back('"');
}

JsonWriter& JsonWriter::value(bool b) {
  before_value();
  out_.append(b ? "true" : "false");
  return *this;
}

JsonWriter& JsonWriter::null() {
  before_value();
  out_.append("null");
  return *this;
}

JsonWriter& JsonWriter::integer(bool negative, uint64_t magnitude) {
  before_value();
  if (negative) out_.push_back('-');
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof buf, magnitude);
  out_.append(buf, r.ptr);
  return *this;
}

JsonWriter& JsonWriter::value(double v) {
  before_value();
  out_.append(json_double(v));
  return *this;
}

std::string json_double(double v) {
  if (!std::isfinite(v)) return "null";
  // nlohmann's own formatter (Grisu2, which is not always the shortest form: 503.289434
  // comes out as 503.28943400000003), so that the numbers stay what dump() wrote.
  char buf[64];
  return std::string(buf, nlohmann::detail::to_chars(buf, buf + sizeof buf, v));
}

}  // namespace gdrpeer::topo::detail

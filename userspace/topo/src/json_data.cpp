#include "json_data.hpp"

#include <locale.h>  // newlocale, strtod_l (POSIX 2008 / glibc)
#include <stdlib.h>
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "gdrpeer/topo/errors.hpp"
#include "hex.hpp"

namespace gdrpeer::topo::detail {

namespace {

class Parser {
 public:
  Parser(std::string_view s, const std::string& name) : s_(s), name_(name) {}

  JsonValue document() {
    JsonValue v;
    value(0, v);
    ws();
    if (p_ != s_.size()) fail("expected the end of the document");
    return v;
  }

 private:
  static constexpr int kMaxDepth = 64;  // rule data nests 3 deep; bounds the recursion

  [[noreturn]] void fail(const std::string& what) const {
    size_t at = std::min(p_, s_.size());
    long line = 1 + static_cast<long>(std::count(s_.begin(), s_.begin() + static_cast<long>(at), '\n'));
    size_t nl = s_.rfind('\n', at == 0 ? 0 : at - 1);
    size_t col = nl == std::string_view::npos || at == 0 ? at + 1 : at - nl;
    throw DataError(name_ + ":" + std::to_string(line) + ":" + std::to_string(col) + ": " + what);
  }

  void ws() {
    while (p_ < s_.size() && (s_[p_] == ' ' || s_[p_] == '\n' || s_[p_] == '\r' || s_[p_] == '\t')) ++p_;
  }

  bool literal(std::string_view word) {
    if (s_.substr(p_, word.size()) != word) return false;
    p_ += word.size();
    return true;
  }

  // Parses into v (default-constructed by the caller): members and items are built
  // in place in their vectors, not returned and moved there.
  void value(int depth, JsonValue& v) {
    if (depth > kMaxDepth) fail("nesting deeper than 64 levels");
    ws();
    if (p_ >= s_.size()) fail("expected a value, found the end of the file");
    char c = s_[p_];
    if (c == '{') {
      v.kind = JsonValue::Kind::Object;
      ++p_;
      ws();
      if (p_ < s_.size() && s_[p_] == '}') {
        ++p_;
        return;
      }
      for (;;) {
        ws();
        if (p_ >= s_.size() || s_[p_] != '"') fail("expected a quoted member name");
        std::string key = string();
        ws();
        if (p_ >= s_.size() || s_[p_] != ':') fail("expected ':' after a member name");
        ++p_;
        v.names.push_back(std::move(key));
        value(depth + 1, v.items.emplace_back());
        ws();
        if (p_ < s_.size() && s_[p_] == ',') {
          ++p_;
          continue;
        }
        if (p_ < s_.size() && s_[p_] == '}') {
          ++p_;
          return;
        }
        fail("expected ',' or '}' in an object");
      }
    }
    if (c == '[') {
      v.kind = JsonValue::Kind::Array;
      ++p_;
      ws();
      if (p_ < s_.size() && s_[p_] == ']') {
        ++p_;
        return;
      }
      for (;;) {
        value(depth + 1, v.items.emplace_back());
        ws();
        if (p_ < s_.size() && s_[p_] == ',') {
          ++p_;
          continue;
        }
        if (p_ < s_.size() && s_[p_] == ']') {
          ++p_;
          return;
        }
        fail("expected ',' or ']' in an array");
      }
    }
    if (c == '"') {
      v.kind = JsonValue::Kind::String;
      v.text = string();
      return;
    }
    if (literal("true")) {
      v.kind = JsonValue::Kind::Bool;
      v.boolean = true;
      return;
    }
    if (literal("false")) {
      v.kind = JsonValue::Kind::Bool;
      return;
    }
    if (literal("null")) return;
    if (c == '-' || (c >= '0' && c <= '9')) {
      v.kind = JsonValue::Kind::Number;
      v.number = number();
      return;
    }
    fail(std::string("expected a value, found '") + c + "'");
  }

  double number() {
    size_t b = p_;
    if (s_[p_] == '-') ++p_;
    auto digits = [&] {
      size_t d = p_;
      while (p_ < s_.size() && s_[p_] >= '0' && s_[p_] <= '9') ++p_;
      if (p_ == d) fail("expected a digit in a number");
    };
    if (p_ < s_.size() && s_[p_] == '0')
      ++p_;
    else
      digits();
    if (p_ < s_.size() && s_[p_] == '.') {
      ++p_;
      digits();
    }
    if (p_ < s_.size() && (s_[p_] == 'e' || s_[p_] == 'E')) {
      ++p_;
      if (p_ < s_.size() && (s_[p_] == '+' || s_[p_] == '-')) ++p_;
      digits();
    }
    // strtod_l in the C locale: a library user's setlocale must not turn '.' into a
    // syntax error. The syntax is checked above, so it reads exactly [b, p_), from a
    // NUL-terminated copy.
    const size_t len = p_ - b;
    static const locale_t c_locale = ::newlocale(LC_ALL_MASK, "C", static_cast<locale_t>(nullptr));
    std::string z(s_.data() + b, len);
    errno = 0;
    char* end = nullptr;
    const double out = c_locale ? ::strtod_l(z.c_str(), &end, c_locale) : std::strtod(z.c_str(), &end);
    // Out of range as from_chars judged it: overflow, or a non-zero number that
    // underflows to zero (a subnormal result is in range).
    if (end != z.c_str() + len || (errno == ERANGE && (out == 0 || std::isinf(out)))) fail("expected a number in range");
    return out;
  }

  static void put_utf8(std::string& out, unsigned cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xc0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xe0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    } else {
      out += static_cast<char>(0xf0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    }
  }

  unsigned hex4() {
    if (s_.size() - p_ < 4) fail("expected 4 hex digits after \\u");
    unsigned v = 0;
    for (int i = 0; i < 4; ++i) {
      char h = s_[p_];
      int d = hex_digit(h);
      if (d < 0) fail("expected 4 hex digits after \\u");
      ++p_;
      v = v * 16 + static_cast<unsigned>(d);
    }
    return v;
  }

  // At the opening quote; returns the decoded string.
  std::string string() {
    ++p_;
    std::string out;
    for (;;) {
      const size_t b = p_;  // a run of plain characters, appended at once
      while (p_ < s_.size() && s_[p_] != '"' && s_[p_] != '\\' && static_cast<unsigned char>(s_[p_]) >= 0x20) ++p_;
      out.append(s_, b, p_ - b);
      if (p_ >= s_.size()) fail("unterminated string: expected '\"'");
      char c = s_[p_];
      if (c == '"') {
        ++p_;
        return out;
      }
      if (c != '\\') fail("control character inside a string: expected \\n, \\t or \\u escapes");
      if (++p_ >= s_.size()) fail("unterminated escape in a string");
      char e = s_[p_++];
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          unsigned cp = hex4();
          if (cp >= 0xd800 && cp < 0xdc00) {
            if (s_.substr(p_, 2) != "\\u") fail("expected a low surrogate \\uDC00-\\uDFFF after a high surrogate");
            p_ += 2;
            unsigned lo = hex4();
            if (lo < 0xdc00 || lo > 0xdfff) fail("expected a low surrogate \\uDC00-\\uDFFF after a high surrogate");
            cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
          } else if (cp >= 0xdc00 && cp < 0xe000) {
            fail("unpaired low surrogate in a \\u escape");
          }
          put_utf8(out, cp);
          break;
        }
        default: --p_; fail(std::string("unknown escape \\") + e + " in a string");
      }
    }
  }

  std::string_view s_;
  const std::string& name_;
  size_t p_ = 0;
};

}  // namespace

const JsonValue* JsonValue::find(std::string_view key) const {
  if (kind != Kind::Object) return nullptr;
  for (size_t i = 0; i < names.size(); ++i)
    if (names[i] == key) return &items[i];
  return nullptr;
}

JsonValue parse_json(std::string_view text, const std::string& name) { return Parser(text, name).document(); }

}  // namespace gdrpeer::topo::detail

#include "xml_reader.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <cstring>
#if defined(__SSE2__)
#include <emmintrin.h>  // part of every x86-64 CPU; other targets take the portable loops
#endif

#include "gdrpeer/topo/errors.hpp"
#include "hex.hpp"

namespace gdrpeer::topo::detail {

namespace {
// Byte classes, one table lookup per byte: the reader walks every byte of
// 250 KiB hwloc files, so branches per character matter.
constexpr unsigned char kName = 1, kWs = 2;
constexpr auto kClass = [] {
  std::array<unsigned char, 256> t{};
  for (int c = 'a'; c <= 'z'; ++c) t[c] = kName;
  for (int c = 'A'; c <= 'Z'; ++c) t[c] = kName;
  for (int c = '0'; c <= '9'; ++c) t[c] = kName;
  for (char c : {'_', '-', '.', ':'}) t[static_cast<unsigned char>(c)] = kName;
  for (char c : {' ', '\t', '\n', '\r'}) t[static_cast<unsigned char>(c)] = kWs;
  return t;
}();
inline bool is_name_char(char c) { return kClass[static_cast<unsigned char>(c)] & kName; }
inline bool is_ws(char c) { return kClass[static_cast<unsigned char>(c)] & kWs; }

// The two scans that see most bytes of an hwloc file (attribute names, and values:
// cpusets and nodesets are most of the file) look at 16 bytes per step where the
// CPU has SSE2, and byte by byte only in the last 15 bytes of the input.

// First index in [p, n) that is not a name character, n if none.
inline size_t name_end(const char* d, size_t p, size_t n) {
#if defined(__SSE2__)
  const __m128i lower = _mm_set1_epi8(0x20), a = _mm_set1_epi8('a'), z_a = _mm_set1_epi8('z' - 'a');
  const __m128i dash = _mm_set1_epi8('-'), colon_dash = _mm_set1_epi8(':' - '-'), slash = _mm_set1_epi8('/');
  const __m128i under = _mm_set1_epi8('_');
  while (p + 16 <= n) {
    const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(d + p));
    // Letters: x | 0x20 in 'a'..'z' (unsigned range test as min(t, hi) == t).
    const __m128i tl = _mm_sub_epi8(_mm_or_si128(x, lower), a);
    const __m128i letter = _mm_cmpeq_epi8(_mm_min_epu8(tl, z_a), tl);
    // '-' '.' '0'..'9' ':' are the range '-'..':' without '/'.
    const __m128i tp = _mm_sub_epi8(x, dash);
    const __m128i punct = _mm_andnot_si128(_mm_cmpeq_epi8(x, slash), _mm_cmpeq_epi8(_mm_min_epu8(tp, colon_dash), tp));
    const __m128i ok = _mm_or_si128(_mm_or_si128(letter, punct), _mm_cmpeq_epi8(x, under));
    const unsigned bits = static_cast<unsigned>(_mm_movemask_epi8(ok));
    if (bits != 0xffff) return p + static_cast<size_t>(std::countr_one(bits));
    p += 16;
  }
#endif
  while (p < n && is_name_char(d[p])) ++p;
  return p;
}

#if !defined(__SSE2__)
// Whether any byte of x equals c (the classic SWAR zero-byte test).
inline bool has_byte(uint64_t x, unsigned char c) {
  const uint64_t ones = 0x0101010101010101ull, v = x ^ (ones * c);
  return ((v - ones) & ~v & (ones << 7)) != 0;
}
#endif

// First index in [p, n) holding a, b or c; n if none.
inline size_t find_any3(const char* d, size_t p, size_t n, char a, char b, char c) {
#if defined(__SSE2__)
  const __m128i va = _mm_set1_epi8(a), vb = _mm_set1_epi8(b), vc = _mm_set1_epi8(c);
  while (p + 16 <= n) {
    const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(d + p));
    const __m128i hit = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(x, va), _mm_cmpeq_epi8(x, vb)), _mm_cmpeq_epi8(x, vc));
    const unsigned bits = static_cast<unsigned>(_mm_movemask_epi8(hit));
    if (bits) return p + static_cast<size_t>(std::countr_zero(bits));
    p += 16;
  }
#else
  while (p + 8 <= n) {
    uint64_t x;
    std::memcpy(&x, d + p, 8);
    if (has_byte(x, static_cast<unsigned char>(a)) || has_byte(x, static_cast<unsigned char>(b)) ||
        has_byte(x, static_cast<unsigned char>(c)))
      break;
    p += 8;
  }
#endif
  while (p < n && d[p] != a && d[p] != b && d[p] != c) ++p;
  return p;
}
}  // namespace

long XmlReader::line_of(size_t pos) const {
  pos = std::min(pos, s_.size());
  return 1 + static_cast<long>(std::count(s_.begin(), s_.begin() + static_cast<long>(pos), '\n'));
}

void XmlReader::fail_at(size_t pos, const std::string& what) const {
  throw InputError(name_, line_of(pos), what);
}

void XmlReader::skip_ws() {
  while (pos_ < s_.size() && is_ws(s_[pos_])) ++pos_;
}

bool XmlReader::attr(std::string_view name, std::string_view& out) const {
  for (const auto& [k, v] : attrs_) {
    // Attribute names are never empty, so k[0] exists when the sizes are equal.
    if (k.size() != name.size() || k[0] != name[0]) continue;
    size_t i = 1;  // names are short: a loop, not a call to memcmp
    while (i < k.size() && k[i] == name[i]) ++i;
    if (i == k.size()) {
      out = v;
      return true;
    }
  }
  out = {};
  return false;
}

std::string XmlReader::attr_str(std::string_view name) const {
  std::string_view raw;
  if (!attr(name, raw)) return {};
  if (raw.find('&') == std::string_view::npos) return std::string(raw);
  return xml_decode(raw, *this);
}

std::string_view XmlReader::text() const {
  if (pending_end_) return {};
  const size_t e = s_.find('<', pos_);
  return s_.substr(pos_, e == std::string_view::npos ? std::string_view::npos : e - pos_);
}

XmlReader::Event XmlReader::next() {
  if (pending_end_) {
    pending_end_ = false;
    tag_ = stack_.back();
    stack_.pop_back();
    return Event::End;
  }
  for (;;) {
    // Skip text up to the next markup.
    const void* lt = pos_ < s_.size() ? std::memchr(s_.data() + pos_, '<', s_.size() - pos_) : nullptr;
    if (!lt) {
      if (!stack_.empty())
        fail_at(s_.size(), "unexpected end of file: expected </" + std::string(stack_.back()) + ">");
      if (!seen_root_) fail_at(s_.size(), "expected an XML element, found none");
      return Event::Eof;
    }
    size_t start = static_cast<size_t>(static_cast<const char*>(lt) - s_.data());
    if (stack_.empty() && seen_root_) {
      // Only comments/whitespace may follow the root element.
      for (size_t i = pos_; i < start; ++i)
        if (!is_ws(s_[i])) fail_at(i, "expected end of document after the root element");
    }
    pos_ = start;
    tag_pos_ = start;
    std::string_view rest = s_.substr(pos_);
    const char second = rest.size() > 1 ? rest[1] : '\0';
    if (second == '!' && rest.substr(0, 4) == "<!--") {
      size_t e = s_.find("-->", pos_ + 4);
      if (e == std::string_view::npos) fail_at(pos_, "unterminated comment: expected -->");
      pos_ = e + 3;
      continue;
    }
    if (second == '?') {
      size_t e = s_.find("?>", pos_ + 2);
      if (e == std::string_view::npos) fail_at(pos_, "unterminated processing instruction: expected ?>");
      pos_ = e + 2;
      continue;
    }
    if (second == '!') {
      if (seen_root_) fail_at(pos_, "unexpected <! declaration inside the document");
      size_t e = s_.find('>', pos_ + 2);
      if (e == std::string_view::npos) fail_at(pos_, "unterminated declaration: expected >");
      pos_ = e + 1;
      continue;
    }
    if (second == '/') {
      size_t p = pos_ + 2;
      size_t b = p;
      p = name_end(s_.data(), p, s_.size());
      std::string_view name = s_.substr(b, p - b);
      while (p < s_.size() && is_ws(s_[p])) ++p;
      if (p >= s_.size() || s_[p] != '>') fail_at(pos_, "expected > to close </" + std::string(name));
      if (stack_.empty()) fail_at(pos_, "unexpected </" + std::string(name) + "> with no open element");
      if (stack_.back() != name)
        fail_at(pos_, "expected </" + std::string(stack_.back()) + ">, found </" + std::string(name) + ">");
      stack_.pop_back();
      tag_ = name;
      pos_ = p + 1;
      return Event::End;
    }
    // Start tag.
    if (stack_.empty() && seen_root_) fail_at(pos_, "expected end of document, found a second root element");
    // Locals, not members: the stores into attrs_ would make the compiler reload s_.
    const char* const d = s_.data();
    const size_t n = s_.size();
    size_t p = pos_ + 1;
    size_t b = p;
    p = name_end(d, p, n);
    if (p == b) fail_at(pos_, "expected an element name after <");
    tag_ = std::string_view(d + b, p - b);
    attrs_.clear();
    for (;;) {
      size_t ws = p;
      // One space before the next attribute is what hwloc and NCCL write.
      if (p + 1 < n && d[p] == ' ' && !is_ws(d[p + 1])) ++p;
      else
        while (p < n && is_ws(d[p])) ++p;
      if (p >= n) fail_at(pos_, "unexpected end of file inside <" + std::string(tag_) + ">");
      char c = d[p];
      if (c == '>') {
        ++p;
        stack_.push_back(tag_);
        seen_root_ = true;
        pos_ = p;
        return Event::Start;
      }
      if (c == '/') {
        if (p + 1 >= n || d[p + 1] != '>') fail_at(p, "expected /> in <" + std::string(tag_) + ">");
        p += 2;
        stack_.push_back(tag_);
        pending_end_ = true;
        seen_root_ = true;
        pos_ = p;
        return Event::Start;
      }
      if (ws == p) fail_at(p, "expected whitespace before attribute in <" + std::string(tag_) + ">");
      size_t nb = p;
      p = name_end(d, p, n);
      if (p == nb) fail_at(p, "expected an attribute name in <" + std::string(tag_) + ">");
      std::string_view an(d + nb, p - nb);
      char q;
      if (p + 1 < n && d[p] == '=' && d[p + 1] == '"') {  // name="value": what hwloc and NCCL write
        q = '"';
        p += 2;
      } else {
        while (p < n && is_ws(d[p])) ++p;
        if (p >= n || d[p] != '=') fail_at(p, "expected = after attribute " + std::string(an));
        ++p;
        while (p < n && is_ws(d[p])) ++p;
        if (p >= n || (d[p] != '"' && d[p] != '\''))
          fail_at(p, "expected a quoted value for attribute " + std::string(an));
        q = d[p++];
      }
      size_t vb = p;
      // Stops at the closing quote, noting on the way bytes that need a closer look.
      bool has_lt = false, has_amp = false;
      for (;;) {
        p = find_any3(d, p, n, q, '<', '&');
        if (p >= n || d[p] == q) break;
        if (d[p] == '<') has_lt = true;
        else has_amp = true;
        ++p;
      }
      if (p >= n) fail_at(vb, "unterminated value of attribute " + std::string(an));
      std::string_view v(d + vb, p - vb);
      if (has_lt) fail_at(vb, "'<' inside the value of attribute " + std::string(an));
      if (has_amp) {
        tag_pos_ = vb;
        (void)xml_decode(v, *this);  // reject malformed entities where they are
        tag_pos_ = start;
      }
      attrs_.emplace_back(an, v);
      ++p;
    }
  }
}

std::string xml_decode(std::string_view raw, const XmlReader& r) {
  std::string out;
  out.reserve(raw.size());
  for (size_t i = 0; i < raw.size(); ++i) {
    char c = raw[i];
    if (c != '&') {
      out += c;
      continue;
    }
    size_t semi = raw.find(';', i);
    if (semi == std::string_view::npos || semi - i > 10) r.fail("expected ; to end a character entity");
    std::string_view ent = raw.substr(i + 1, semi - i - 1);
    if (ent == "lt") out += '<';
    else if (ent == "gt") out += '>';
    else if (ent == "amp") out += '&';
    else if (ent == "quot") out += '"';
    else if (ent == "apos") out += '\'';
    else if (!ent.empty() && ent[0] == '#') {
      unsigned long v = 0;
      bool hex = ent.size() > 1 && (ent[1] == 'x' || ent[1] == 'X');
      std::string_view digits = ent.substr(hex ? 2 : 1);
      if (digits.empty()) r.fail("expected digits in a numeric character entity");
      for (char d : digits) {
        const int dv = hex ? hex_digit(d) : (d >= '0' && d <= '9') ? d - '0' : -1;
        if (dv < 0 || v > 0x10ffff) r.fail("malformed numeric character entity");
        v = v * (hex ? 16 : 10) + static_cast<unsigned long>(dv);
      }
      if (v < 0x80) out += static_cast<char>(v);
      else out += '?';  // names only; non-ASCII is not needed for the checks
    } else {
      r.fail("unknown character entity &" + std::string(ent) + ";");
    }
    i = semi;
  }
  return out;
}

}  // namespace gdrpeer::topo::detail

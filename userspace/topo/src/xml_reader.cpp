#include "xml_reader.hpp"

#include <algorithm>
#include <array>

#include "gdrpeer/topo/errors.hpp"
#include "hex.hpp"

namespace gdrpeer::topo::detail {

namespace {
// Characters of element and attribute names, by byte value: one lookup per byte
// of every name in a file of thousands of elements.
constexpr auto kNameChar = [] {
  std::array<bool, 256> t{};
  for (int c = 'a'; c <= 'z'; ++c) t[c] = true;
  for (int c = 'A'; c <= 'Z'; ++c) t[c] = true;
  for (int c = '0'; c <= '9'; ++c) t[c] = true;
  for (char c : {'_', '-', '.', ':'}) t[static_cast<unsigned char>(c)] = true;
  return t;
}();
bool is_name_char(char c) { return kNameChar[static_cast<unsigned char>(c)]; }
bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// First index at or after p that is not a name character, s.size() if none.
size_t name_end(std::string_view s, size_t p) {
  while (p < s.size() && is_name_char(s[p])) ++p;
  return p;
}

// End of the Name ([5]) that starts at p, or p when none does: a digit, '-' or '.' may go on
// a name but not start one ([4] NameStartChar).
size_t name_at(std::string_view s, size_t p) {
  if (p >= s.size() || !is_name_char(s[p]) || (s[p] >= '0' && s[p] <= '9') || s[p] == '-' || s[p] == '.') return p;
  return name_end(s, p + 1);
}
}  // namespace

long XmlReader::line_of(size_t pos) const {
  pos = std::min(pos, s_.size());
  return 1 + static_cast<long>(std::count(s_.begin(), s_.begin() + static_cast<long>(pos), '\n'));
}

void XmlReader::fail_at(size_t pos, const std::string& what) const { throw InputError(name_, line_of(pos), what); }

bool XmlReader::attr(std::string_view name, std::string_view& out) const {
  for (const auto& [k, v] : attrs_)
    if (k == name) {
      out = v;
      return true;
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
    const size_t start = s_.find('<', pos_);
    if (stack_.empty()) {
      // Outside the root element only whitespace may stand between the markup (XML 1.0 [1]
      // document, [22] prolog, [27] Misc); a UTF-8 byte order mark may open the file (4.3.3).
      size_t i = pos_ == 0 && s_.starts_with("\xEF\xBB\xBF") ? 3 : pos_;
      for (const size_t e = std::min(start, s_.size()); i < e; ++i)
        if (!is_ws(s_[i]))
          fail_at(i, seen_root_ ? "expected end of document after the root element" : "expected an XML element, found text");
    }
    if (start == std::string_view::npos) {
      if (!stack_.empty() && lenient_) {
        truncated_ = true;
        cut_inside_ = stack_.back();
        stack_.clear();
        return Event::Eof;
      }
      if (!stack_.empty()) fail_at(s_.size(), "unexpected end of file: expected </" + std::string(stack_.back()) + ">");
      if (!seen_root_) fail_at(s_.size(), "expected an XML element, found none");
      return Event::Eof;
    }
    pos_ = start;
    tag_pos_ = start;
    std::string_view rest = s_.substr(pos_);
    const char second = rest.size() > 1 ? rest[1] : '\0';
    if (second == '!' && rest.substr(0, 4) == "<!--") {
      // [15] Comment: no "--" inside, so the first "--" must be that of "-->".
      size_t e = s_.find("--", pos_ + 4);
      if (e == std::string_view::npos || e + 2 >= s_.size()) fail_at(pos_, "unterminated comment: expected -->");
      if (s_[e + 2] != '>') fail_at(e, "'--' inside a comment");
      pos_ = e + 3;
      continue;
    }
    if (second == '?') {
      // [16] PI ::= '<?' PITarget (S (Char* - (Char* '?>' Char*)))? '?>': a name first.
      const size_t target = name_at(s_, pos_ + 2);
      if (target == pos_ + 2) fail_at(pos_, "expected a name after <? (a processing instruction)");
      size_t e = s_.find("?>", target);
      if (e == std::string_view::npos) fail_at(pos_, "unterminated processing instruction: expected ?>");
      pos_ = e + 2;
      continue;
    }
    if (second == '!') {
      if (seen_root_) fail_at(pos_, "unexpected <! declaration inside the document");
      if (seen_doctype_) fail_at(pos_, "expected one <!DOCTYPE, found a second");
      // [28] doctypedecl ::= '<!DOCTYPE' S Name (S ExternalID)? S? ('[' intSubset ']' S?)? '>'
      // is the only <! markup before the root element but comments.
      size_t p = pos_ + 9;
      if (rest.substr(0, 9) != "<!DOCTYPE" || p >= s_.size() || !is_ws(s_[p])) fail_at(pos_, "expected <!-- or <!DOCTYPE");
      while (p < s_.size() && is_ws(s_[p])) ++p;
      const size_t name = name_at(s_, p);
      if (name == p) fail_at(pos_, "expected a name after <!DOCTYPE");
      seen_doctype_ = true;
      size_t e = s_.find('>', name);
      // The internal subset holds '>'s of its own: the declaration ends at the first '>' after
      // its ']' (the declarations in it are skipped).
      if (const size_t subset = s_.find('[', name); subset < e) {
        const size_t close = s_.find(']', subset);
        e = close == std::string_view::npos ? close : s_.find('>', close);
      }
      if (e == std::string_view::npos) fail_at(pos_, "unterminated declaration: expected >");
      pos_ = e + 1;
      continue;
    }
    if (second == '/') {
      const size_t b = pos_ + 2;
      size_t p = name_end(s_, b);
      std::string_view name = s_.substr(b, p - b);
      while (p < s_.size() && is_ws(s_[p])) ++p;
      if (p >= s_.size() || s_[p] != '>') fail_at(pos_, "expected > to close </" + std::string(name));
      if (stack_.empty()) fail_at(pos_, "unexpected </" + std::string(name) + "> with no open element");
      if (stack_.back() != name) fail_at(pos_, "expected </" + std::string(stack_.back()) + ">, found </" + std::string(name) + ">");
      stack_.pop_back();
      tag_ = name;
      pos_ = p + 1;
      return Event::End;
    }
    // Start tag.
    if (stack_.empty() && seen_root_) fail_at(pos_, "expected end of document, found a second root element");
    const size_t b = pos_ + 1;
    size_t p = name_at(s_, b);
    if (p == b) fail_at(pos_, "expected an element name after <");
    tag_ = s_.substr(b, p - b);
    attrs_.clear();
    for (;;) {
      const size_t ws = p;
      while (p < s_.size() && is_ws(s_[p])) ++p;
      if (p >= s_.size()) fail_at(pos_, "unexpected end of file inside <" + std::string(tag_) + ">");
      if (s_[p] == '>') {
        stack_.push_back(tag_);
        seen_root_ = true;
        pos_ = p + 1;
        return Event::Start;
      }
      if (s_[p] == '/') {
        if (p + 1 >= s_.size() || s_[p + 1] != '>') fail_at(p, "expected /> in <" + std::string(tag_) + ">");
        stack_.push_back(tag_);
        pending_end_ = true;
        seen_root_ = true;
        pos_ = p + 2;
        return Event::Start;
      }
      if (ws == p) fail_at(p, "expected whitespace before attribute in <" + std::string(tag_) + ">");
      const size_t nb = p;
      p = name_at(s_, p);
      if (p == nb) fail_at(p, "expected an attribute name in <" + std::string(tag_) + ">");
      const std::string_view an = s_.substr(nb, p - nb);
      while (p < s_.size() && is_ws(s_[p])) ++p;
      if (p >= s_.size() || s_[p] != '=') fail_at(p, "expected = after attribute " + std::string(an));
      ++p;
      while (p < s_.size() && is_ws(s_[p])) ++p;
      if (p >= s_.size() || (s_[p] != '"' && s_[p] != '\'')) fail_at(p, "expected a quoted value for attribute " + std::string(an));
      const char quote = s_[p++];
      const size_t vb = p;
      const size_t ve = s_.find(quote, vb);
      if (ve == std::string_view::npos) fail_at(vb, "unterminated value of attribute " + std::string(an));
      const std::string_view v = s_.substr(vb, ve - vb);
      if (v.find('<') != std::string_view::npos) fail_at(vb, "'<' inside the value of attribute " + std::string(an));
      if (v.find('&') != std::string_view::npos) {
        tag_pos_ = vb;
        (void)xml_decode(v, *this);  // reject malformed entities where they are
        tag_pos_ = start;
      }
      attrs_.emplace_back(an, v);
      p = ve + 1;
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
    // XML 1.0 [67] Reference: '&' Name ';' (EntityRef, [68]) or '&#' digits ';' / '&#x' hex
    // digits ';' (CharRef, [66]); digits and 'x' are name characters, so one scan finds the ';'.
    const bool numeric = i + 1 < raw.size() && raw[i + 1] == '#';
    const size_t name = numeric ? i + 2 : i + 1;
    const size_t semi = name_end(raw, name);
    if (semi == name) r.fail(numeric ? "expected digits in a numeric character entity" : "expected a name after & (an entity reference)");
    if (semi >= raw.size() || raw[semi] != ';') r.fail("expected ; to end a character entity");
    std::string_view ent = raw.substr(i + 1, semi - i - 1);
    if (ent == "lt")
      out += '<';
    else if (ent == "gt")
      out += '>';
    else if (ent == "amp")
      out += '&';
    else if (ent == "quot")
      out += '"';
    else if (ent == "apos")
      out += '\'';
    else if (numeric) {
      unsigned long v = 0;
      const bool hex = ent[1] == 'x';  // [66]: '&#x', lower case only (ent is '#' and 1+ more)
      std::string_view digits = ent.substr(hex ? 2 : 1);
      if (digits.empty()) r.fail("expected digits in a numeric character entity");
      for (char d : digits) {
        const int dv = hex ? hex_digit(d) : (d >= '0' && d <= '9') ? d - '0' : -1;
        if (dv < 0) r.fail("malformed numeric character entity");
        // Past U+10FFFF it names no Char whatever follows: stop adding before v overflows (the
        // digits are still checked: a malformed reference is refused as malformed).
        if (v <= 0x10ffff) v = v * (hex ? 16 : 10) + static_cast<unsigned long>(dv);
      }
      // WFC Legal Character: the reference must name a Char of [2].
      const bool is_char =
          v == 0x9 || v == 0xa || v == 0xd || (v >= 0x20 && v <= 0xd7ff) || (v >= 0xe000 && v <= 0xfffd) || (v >= 0x10000 && v <= 0x10ffff);
      if (!is_char) r.fail("numeric character entity &" + std::string(ent) + "; names no XML character");
      if (v < 0x80)
        out += static_cast<char>(v);
      else
        out += '?';  // names only; non-ASCII is not needed for the checks
    } else {
      r.fail("unknown character entity &" + std::string(ent) + ";");
    }
    i = semi;
  }
  return out;
}

}  // namespace gdrpeer::topo::detail

// A small pull parser for the XML that hwloc and NCCL write: elements,
// attributes, comments, <?xml?>, <!DOCTYPE>, character entities. Text content
// is skipped (neither format uses it). Nesting is checked; every error names
// the file and line. No external XML library: the project takes deps only from
// its fixed list, and this keeps `gdrpeer check` fast.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gdrpeer::topo::detail {

class XmlReader {
 public:
  enum class Event { Start, End, Eof };

  XmlReader(std::string_view text, std::string name) : s_(text), name_(std::move(name)) {}

  // Start for <tag ...> and for <tag .../> (then End follows at once), End for
  // </tag>, Eof at the end of a well-formed document.
  Event next();
  std::string_view tag() const { return tag_; }
  int depth() const { return static_cast<int>(stack_.size()); }
  // Raw attribute value (entities not decoded), or empty view + false.
  bool attr(std::string_view name, std::string_view& out) const;
  // Decoded attribute value; "" when absent.
  std::string attr_str(std::string_view name) const;
  [[noreturn]] void fail(const std::string& what) const { fail_at(tag_pos_, what); }
  [[noreturn]] void fail_at(size_t pos, const std::string& what) const;
  const std::string& name() const { return name_; }
  long line_of(size_t pos) const;
  long line() const { return line_of(tag_pos_); }  // of the current element
  // Raw character data right after the current start tag, up to the next markup
  // (hwloc's <indexes> and <u64values>); empty after a self-closing tag.
  std::string_view text() const;
  // A document cut off after a complete tag ends with Eof instead of an error; then
  // truncated() is true and cut_inside() names the innermost element left open.
  void allow_truncation() { lenient_ = true; }
  bool truncated() const { return truncated_; }
  std::string_view cut_inside() const { return cut_inside_; }

 private:
  std::string_view s_;
  std::string name_;
  size_t pos_ = 0;
  size_t tag_pos_ = 0;
  std::string_view tag_;
  bool pending_end_ = false;
  bool seen_root_ = false;
  bool seen_doctype_ = false;
  bool lenient_ = false, truncated_ = false;
  std::string_view cut_inside_;
  std::vector<std::string_view> stack_;
  std::vector<std::pair<std::string_view, std::string_view>> attrs_;
};

// Decode XML character entities; throws via reader.fail on an unknown one.
std::string xml_decode(std::string_view raw, const XmlReader& r);

}  // namespace gdrpeer::topo::detail

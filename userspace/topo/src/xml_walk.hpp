// One walk over an XML document for the hwloc and NCCL parsers, in the style of
// hwloc (the tokenizer apart in topology-xml-nolibxml.c, one import function per
// element in topology-xml.c): XmlWalk owns the stack of open elements and hands
// each start tag to the handler its name picks from a small table. What a parser
// keeps about an element (its Frame) is filled by that handler, pushed when the
// handler returns and popped at the element's end tag, after which the element's
// end handler (if any) runs. Character data is read by the start handler through
// reader().text(). No depth limit of its own: the walk is a loop, not a recursion,
// so nesting costs one frame per level, like the reader's own stack.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "xml_reader.hpp"

namespace gdrpeer::topo::detail {

template <typename State, typename Frame>
class XmlWalk {
 public:
  using OnStart = void (*)(State&, const XmlWalk&, Frame&);
  using OnEnd = void (*)(State&);
  struct Element {
    std::string_view tag;  // "" in the entry for elements the table does not name
    OnStart start;
    OnEnd end = nullptr;
  };
  struct Open {
    std::string_view tag;
    OnEnd end;
    Frame frame;
  };

  // root: the document element (its tag, its handlers); what: the format, for the
  // error when the document element is another one; elements: the elements below
  // it that mean something, most frequent first; other: every other element.
  XmlWalk(XmlReader& r, const Element& root, std::string_view what, std::span<const Element> elements, const Element& other)
      : r_(r), root_(root), what_(what), elements_(elements), other_(other) {}

  // Reads the document to its end (or its cut, when the reader allows one).
  void run(State& s) {
    for (;;) {
      const XmlReader::Event ev = r_.next();
      if (ev == XmlReader::Event::Eof) return;
      if (ev == XmlReader::Event::End) {
        const OnEnd end = stack_.back().end;
        stack_.pop_back();
        if (end) end(s);
        continue;
      }
      const Element& el = element();
      Open o{r_.tag(), el.end, Frame{}};
      if (el.start) el.start(s, *this, o.frame);
      stack_.push_back(o);
    }
  }

  const XmlReader& reader() const { return r_; }
  // The open elements, outermost first; the one being started is not on it yet.
  const std::vector<Open>& stack() const { return stack_; }
  bool root_seen() const { return root_seen_; }

 private:
  const Element& element() {
    const std::string_view tag = r_.tag();
    if (!root_seen_) {
      if (tag != root_.tag)
        r_.fail("expected <" + std::string(root_.tag) + "> (" + std::string(what_) + "), found <" + std::string(tag) + ">");
      root_seen_ = true;
      return root_;
    }
    for (const Element& e : elements_)
      if (e.tag == tag) return e;
    return other_;
  }

  XmlReader& r_;
  const Element& root_;
  std::string_view what_;
  std::span<const Element> elements_;
  const Element& other_;
  bool root_seen_ = false;
  std::vector<Open> stack_;
};

}  // namespace gdrpeer::topo::detail

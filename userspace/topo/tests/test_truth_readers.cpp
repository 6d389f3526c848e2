// The hand-written XML reader (xml_reader.cpp; docs/design.md, "Libraries, and the
// hand-written parts that stay") against independent truth: libexpat (Debian libexpat1-dev, a
// test-only dependency) on documents written from the XML 1.0 (Fifth Edition) productions and
// on the reference dumps. The reader must give the elements, lines, attributes and text expat
// reports, refuse what expat refuses (on expat's line), and read a cut document as far as
// expat reads it, for the subset the reader promises (xml_reader.hpp: elements, attributes,
// comments, processing instructions, a DOCTYPE, character and predefined entity references).
// Each case names the production it comes from; no expectation here is the reader's output.
#include <expat.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "gdrpeer/topo/errors.hpp"
#include "xml_reader.hpp"

namespace gdrpeer::topo {
namespace {

using detail::XmlReader;
using Event = XmlReader::Event;

// What expat reports of a document: its elements in order (start and end), each start's
// attributes and the character data right after it (up to the next markup), the line of
// each, and its verdict.
struct ExpatEvent {
  bool start;
  std::string tag;
  long line;
  std::vector<std::pair<std::string, std::string>> attrs;
  std::string text;
};
struct ExpatDoc {
  std::vector<ExpatEvent> events;
  std::vector<std::string> open;  // elements open where the parse stopped, outermost first
  bool ok = false;
  long error_line = 0;
  std::string error;
};

struct ExpatRun {
  XML_Parser p;
  ExpatDoc doc;
  std::vector<long> start_lines;  // of the open elements
  bool in_text = false;           // character data goes to the last start event
};

void on_start(void* u, const XML_Char* name, const XML_Char** atts) {
  auto* x = static_cast<ExpatRun*>(u);
  ExpatEvent e{true, name, static_cast<long>(XML_GetCurrentLineNumber(x->p)), {}, {}};
  for (; *atts; atts += 2) e.attrs.emplace_back(atts[0], atts[1]);
  x->doc.events.push_back(std::move(e));
  x->doc.open.emplace_back(name);
  x->start_lines.push_back(x->doc.events.back().line);
  x->in_text = true;
}
void on_end(void* u, const XML_Char* name) {
  auto* x = static_cast<ExpatRun*>(u);
  // An end tag's line is where its "</" is; an empty element (<a/>) ends where it starts.
  // (expat reports the end of an empty element as an event of 0 bytes after its "/>".)
  long line = static_cast<long>(XML_GetCurrentLineNumber(x->p));
  if (XML_GetCurrentByteCount(x->p) == 0) line = x->start_lines.back();
  x->start_lines.pop_back();
  x->doc.events.push_back({false, name, line, {}, {}});
  x->doc.open.pop_back();
  x->in_text = false;
}
void on_text(void* u, const XML_Char* s, int len) {
  auto* x = static_cast<ExpatRun*>(u);
  if (x->in_text) x->doc.events.back().text.append(s, static_cast<size_t>(len));
}
void on_comment(void* u, const XML_Char*) { static_cast<ExpatRun*>(u)->in_text = false; }
void on_pi(void* u, const XML_Char*, const XML_Char*) { static_cast<ExpatRun*>(u)->in_text = false; }

// final = false: the text is the start of a longer document (a cut one), so the end of the
// text is no error.
ExpatDoc expat_read(const std::string& text, bool final = true) {
  ExpatRun x{XML_ParserCreate(nullptr), {}, {}};
  XML_SetUserData(x.p, &x);
  XML_SetElementHandler(x.p, on_start, on_end);
  XML_SetCharacterDataHandler(x.p, on_text);
  XML_SetCommentHandler(x.p, on_comment);
  XML_SetProcessingInstructionHandler(x.p, on_pi);
  x.doc.ok = XML_Parse(x.p, text.data(), static_cast<int>(text.size()), final ? 1 : 0) == XML_STATUS_OK;
  if (!x.doc.ok) {
    x.doc.error_line = static_cast<long>(XML_GetCurrentLineNumber(x.p));
    x.doc.error = XML_ErrorString(XML_GetErrorCode(x.p));
  }
  XML_ParserFree(x.p);
  return std::move(x.doc);
}

// The reader promises names only for non-ASCII character references ('?' for each); expat
// decodes them to UTF-8. So expat's value with each UTF-8 sequence as one '?' is the
// reader's. (The documents below put non-ASCII into values only through references.)
std::string non_ascii_as_question_marks(const std::string& s) {
  std::string out;
  for (unsigned char c : s)
    if (c < 0x80)
      out += static_cast<char>(c);
    else if (c >= 0xc0)
      out += '?';  // a lead byte; continuation bytes (0x80-0xbf) add nothing
  return out;
}

// Reads the whole document with the reader and holds it to expat's events: same elements in
// the same order, same lines, same attributes (decoded, and raw values that decode to them;
// the names expat does not give an element are absent from it), same text after each start.
void expect_reads_as_expat(const std::string& text) {
  SCOPED_TRACE(text);
  const ExpatDoc want = expat_read(text);
  ASSERT_TRUE(want.ok) << "expat: " << want.error << " at line " << want.error_line << " (the case is not well-formed)";
  std::set<std::string> names;  // every attribute name of the document
  for (const auto& e : want.events)
    for (const auto& [k, v] : e.attrs) names.insert(k);
  XmlReader r(text, "t.xml");
  size_t i = 0;
  try {
    for (;; ++i) {
      const Event ev = r.next();
      if (ev == Event::Eof) break;
      ASSERT_LT(i, want.events.size()) << "an event expat does not report: <" << r.tag() << ">";
      const ExpatEvent& w = want.events[i];
      ASSERT_EQ(ev == Event::Start, w.start) << "event " << i << ": " << w.tag;
      EXPECT_EQ(r.tag(), w.tag) << "event " << i;
      EXPECT_EQ(r.line(), w.line) << "event " << i << ": " << w.tag;
      if (!w.start) continue;
      EXPECT_EQ(detail::xml_decode(r.text(), r), w.text) << "text after <" << w.tag << ">";
      for (const auto& [k, v] : w.attrs) {
        std::string_view raw;
        EXPECT_TRUE(r.attr(k, raw)) << w.tag << " " << k;
        EXPECT_EQ(r.attr_str(k), non_ascii_as_question_marks(v)) << w.tag << " " << k;
        EXPECT_EQ(detail::xml_decode(raw, r), r.attr_str(k)) << w.tag << " " << k;
      }
      for (const auto& n : names) {
        bool has = false;
        for (const auto& [k, v] : w.attrs) has = has || k == n;
        if (has) continue;
        std::string_view raw = "not cleared";
        EXPECT_FALSE(r.attr(n, raw)) << w.tag << " has no " << n;
        EXPECT_TRUE(raw.empty()) << w.tag << " has no " << n;
        EXPECT_EQ(r.attr_str(n), "") << w.tag << " has no " << n;
      }
    }
  } catch (const InputError& e) {
    FAIL() << "the reader refuses it: " << e.what();
  }
  EXPECT_EQ(i, want.events.size()) << "the reader stopped early";
  EXPECT_FALSE(r.truncated());
}

struct XmlDoc {
  const char* production;  // the XML 1.0 production (or section) the document exercises
  std::string text;
};

// Well-formed documents of the reader's subset.
const std::vector<XmlDoc> kXmlValid = {
    // [1] document ::= prolog element Misc*; [22] prolog ::= XMLDecl? Misc* (doctypedecl
    // Misc*)?; [27] Misc ::= Comment | PI | S; [3] S ::= (#x20 | #x9 | #xD | #xA)+
    {"[1]", "<a/>"},
    {"[1]", "<a></a>"},
    {"[1]", "<a/>\n"},
    {"[22]", "<?xml version=\"1.0\"?>\n<a/>\n"},
    {"[22]",
     "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<!DOCTYPE topology SYSTEM \"hwloc2.dtd\">\n<topology version=\"2.0\">\n</topology>\n"},
    {"[27]", "<!-- before -->\n<?pi before?>\n<a>\n</a>\n<!-- after -->\n<?pi after?>\n \t\r\n"},
    {"[27]", "<a/> \t\r\n <!--x-->\t<?p?>\r\n"},
    {"[27]", "<a/><!-- the file ends with the comment -->"},
    {"[3]", "\n\n\n<a\n\nb='1'\n\n/>"},
    {"[3]", " \t\r\n<a/>"},
    // 4.3.3: a UTF-8 entity may begin with the byte order mark (then F.1's autodetection).
    {"4.3.3", "\xEF\xBB\xBF<?xml version=\"1.0\"?>\n<a/>"},
    {"4.3.3", "\xEF\xBB\xBF\n<a>\n</a>\n"},
    // [15] Comment ::= '<!--' ((Char - '-') | ('-' (Char - '-')))* '-->'
    {"[15]", "<!----><a/>"},
    {"[15]", "<!-- - -><a/> - -><b/> --><a><!-- <b> </b> --></a>"},
    {"[15]", "<a><!--\nline 2\nline 3\n--><b/>\n<!---x-y-z-->\n<c/></a>"},
    // [16] PI ::= '<?' PITarget (S (Char* - (Char* '?>' Char*)))? '?>'
    {"[16]", "<?pi?><a/>"},
    {"[16]", "<?p?><a/><?q x?>"},
    {"[16]", "<a><?pi a > b ? c?><b/><?pi\n\n?>\n<c/></a>"},
    // [28] doctypedecl ::= '<!DOCTYPE' S Name (S ExternalID)? S? ('[' intSubset ']' S?)? '>'
    {"[28]", "<!DOCTYPE a>\n<a/>"},
    {"[28]", "<!DOCTYPE a><a/>"},
    {"[28]", "<!DOCTYPE\ta\n><a/>"},
    {"[28]", "<!DOCTYPE a[<!ELEMENT a EMPTY>]><a/>"},
    {"[28]", "<!DOCTYPE a SYSTEM \"a.dtd\">\n<!-- c -->\n<a/>"},
    {"[28]", "<!DOCTYPE\na\nPUBLIC \"-//x//y//EN\" \"a.dtd\"\n>\n<a/>"},
    {"[28]", "<!DOCTYPE a [\n<!ELEMENT a ANY>\n<!-- > -->\n]>\n<a>\n<b/></a>"},
    {"[28]", "<!DOCTYPE a SYSTEM \"a.dtd\" [<!ELEMENT a EMPTY>] >\n<a/>"},
    // [39] element ::= EmptyElemTag | STag content ETag; [43] content; [14] CharData
    {"[39]", "<a><b/><b></b><c><d/></c></a>"},
    {"[39]", "<a>\n  <b>\n    <c/>\n  </b>\n  <b/>\n</a>"},
    {"[39]", "<a><a><a/></a></a>"},
    {"[14]", "<a>text</a>"},
    {"[14]", "<a>0-3,8-11</a>"},
    {"[14]", "<a>  two words > one  <b/>tail</a>"},
    {"[14]", "<a>&lt;b&gt; &amp; &quot;q&quot; &apos;s&apos; &#65;&#x42;</a>"},
    {"[14]", "<a>\nline 2\n<b>x</b>\n</a>"},
    {"[14]", "<a>x<!--c-->y</a>"},
    {"[14]", "<a>x<?p?>y</a>"},
    {"[14]", "<a>caf\xc3\xa9</a>"},
    // [40] STag ::= '<' Name (S Attribute)* S? '>'; [44] EmptyElemTag ::= '<' Name (S
    // Attribute)* S? '/>'; [41] Attribute ::= Name Eq AttValue; [25] Eq ::= S? '=' S?;
    // [42] ETag ::= '</' Name S? '>'
    {"[40]", "<a x=\"1\"></a>"},
    {"[40]", "<a x=\"1\" y='2' z=\"\"></a>"},
    {"[40]", "<a  x = \"1\"\n\ty\t=\t'2'\r\n></a >"},
    {"[40]", "<a x=\"1\"\n></a\n\n>"},
    {"[44]", "<a x=\"1\"/>"},
    {"[44]", "<a x=\"1\" />"},
    {"[44]", "<a\tx='1'\r\n\t/>"},
    {"[44]", "<a ><b\n/></a\t>"},
    {"[41]", "<a type=\"Bridge\" os_index=\"0\" attr=\"1\"><b os_index=\"1\"/><c type=\"x\"/></a>"},
    // [4] NameStartChar, [4a] NameChar (the ASCII ones), [5] Name
    {"[5]", "<_a.b-c:d e_f.1-2:3='v' Z9=\"w\" _='u'/>"},
    {"[5]", "<A1><b.c/><d-e/><f:g/><h_i/></A1>"},
    {"[5]", "<x y:z=\"1\" y=\"2\" yz=\"3\"/>"},
    {"[4]", "<:a _b='1' :c='2'><_z/></:a>"},
    {"[4]", "<?a9?><!DOCTYPE _x>\n<_x/>"},
    // [10] AttValue ::= '"' ([^<&"] | Reference)* '"' | "'" ([^<&'] | Reference)* "'"
    {"[10]", "<a x=\"it's\" y='say \"hi\"' z=\"a > b\" w='/'/>"},
    {"[10]", "<a x='' y=\"\"/>"},
    {"[10]", "<a x=\"PCI 0000:3b:00.0\" y=\"10de:2330\"/>"},
    // [67] Reference; [68] EntityRef ::= '&' Name ';' (the five of 4.6); [66] CharRef ::=
    // '&#' [0-9]+ ';' | '&#x' [0-9a-fA-F]+ ';'
    {"[68]", "<a x=\"&lt;&gt;&amp;&quot;&apos;\" y='&amp;amp;' z=\"a&amp;b&lt;c\"/>"},
    {"[66]", "<a x=\"&#65;&#x42;&#x4a;&#x4A;&#0065;&#x00041;&#x00000041;\"/>"},
    {"[66]", "<a x=\"&#9;&#10;&#13;&#32;&#x7f;&#126;\"/>"},
    {"[66]", "<a x=\"&#x80;&#xe9;&#233;&#x20AC;&#x1F600;&#xD7FF;&#xE000;&#xFFFD;&#x10000;&#x10FFFF;&#1114111;\"/>"},
    {"[66]", "<a x=\"A&#x42;C&#68;E\" y=\"&#x3c;&#60;&#x26;&#38;\"/>"},
    // 2.4 Character Data: '>' may appear in content; [10] in attribute values.
    {"2.4", "<a x=\">\">></a>"},
};

TEST(XmlTruth, ReadsEveryWellFormedDocumentAsExpatDoes) {
  for (const auto& d : kXmlValid) {
    SCOPED_TRACE(std::string("XML 1.0 ") + d.production);
    expect_reads_as_expat(d.text);
  }
}

// A deep document (the reader keeps its own stack, no recursion) and a long one.
TEST(XmlLarge, DeepAndWideDocumentsReadAsExpatDoes) {
  std::string deep;
  for (int i = 0; i < 1000; ++i) deep += "<d n=\"" + std::to_string(i) + "\">";
  for (int i = 0; i < 1000; ++i) deep += "</d>\n";
  expect_reads_as_expat(deep);
  std::string wide = "<?xml version=\"1.0\"?>\n<root>\n";
  for (int i = 0; i < 500; ++i)
    wide += "  <obj type=\"PU\" os_index=\"" + std::to_string(i) + "\" name=\"x&amp;" + std::to_string(i) + "\"/>\n";
  expect_reads_as_expat(wide + "</root>\n");
}

// The real hwloc and NCCL files of tests/reference (their sources: tests/reference/README.md).
TEST(XmlLarge, ReadsTheReferenceDumpsAsExpatDoes) {
  const std::string ref = GDRPEER_TEST_REFERENCE_DIR;
  int files = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(ref)) {
    if (e.path().extension() != ".xml" || e.file_size() > 150 * 1024) continue;  // p5en, p6e: p4d's format, 2.4x its size
    std::ifstream in(e.path(), std::ios::binary);
    std::ostringstream ss;
    ss << in.rdbuf();
    SCOPED_TRACE(e.path().string());
    expect_reads_as_expat(ss.str());
    ++files;
  }
  EXPECT_GE(files, 15);
}

// A cut document (an NCCL dump written by a process that died: parse_nccl's
// allow_truncation): cut after a complete tag or inside text, the reader gives the elements
// expat gives for that much of a longer document, then Eof, naming the innermost element
// expat has open; cut inside a tag, comment or PI it fails. Cut before the root element,
// or with nothing cut, it is an ordinary document.
void expect_cut_reads_as_expat(const std::string& whole, size_t cut) {
  const std::string text = whole.substr(0, cut);
  SCOPED_TRACE("cut at byte " + std::to_string(cut) + ": ..." + text.substr(text.size() - std::min<size_t>(text.size(), 30)));
  const ExpatDoc want = expat_read(text, /*final=*/false);
  ASSERT_TRUE(want.ok) << want.error;
  const size_t lt = text.rfind('<');
  const bool inside_markup = lt != std::string::npos && text.find('>', lt) == std::string::npos;
  const bool any_element = !want.events.empty();
  XmlReader r(text, "cut.xml");
  r.allow_truncation();
  size_t i = 0;
  try {
    for (Event ev; (ev = r.next()) != Event::Eof; ++i) {
      ASSERT_LT(i, want.events.size()) << "an event expat does not report: " << r.tag();
      EXPECT_EQ(ev == Event::Start, want.events[i].start) << i;
      EXPECT_EQ(r.tag(), want.events[i].tag) << i;
      EXPECT_EQ(r.line(), want.events[i].line) << i;
    }
  } catch (const InputError& e) {
    EXPECT_TRUE(inside_markup || !any_element) << "refused: " << e.what();
    return;
  }
  EXPECT_FALSE(inside_markup) << "a cut tag read as complete";
  EXPECT_TRUE(any_element) << "no element, yet read";
  EXPECT_EQ(i, want.events.size());
  EXPECT_EQ(r.truncated(), !want.open.empty());
  EXPECT_EQ(r.cut_inside(), want.open.empty() ? "" : want.open.back());
}

TEST(XmlLarge, ACutDocumentReadsAsFarAsExpatDoes) {
  const std::string nccl =
      "<?xml version=\"1.0\"?>\n<!-- NCCL_TOPO_DUMP_FILE -->\n<system version=\"1\">\n"
      "  <cpu numaid=\"0\" arch=\"x86_64\">\n"
      "    <pci busid=\"0000:4f:00.0\" class=\"0x030200\"><gpu dev=\"0\" sm=\"90\"/></pci>\n"
      "    <pci busid=\"0000:50:00.0\"><nic><net name=\"mlx5_0\" dev=\"0\"/></nic></pci>\n"
      "  </cpu>\n</system>\n";
  for (size_t cut = 0; cut <= nccl.size(); ++cut) expect_cut_reads_as_expat(nccl, cut);
  std::ifstream in(std::string(GDRPEER_TEST_REFERENCE_DIR) + "/aws-p5.48xl-topo-pr1226.xml", std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  const std::string real = ss.str();
  ASSERT_GT(real.size(), 10000u);
  for (size_t cut = 0; cut <= real.size(); cut += 97) expect_cut_reads_as_expat(real, cut);
}

// Documents of the reader's subset that are not well-formed: expat's verdict, on its line.
const std::vector<XmlDoc> kXmlMalformed = {
    // [1] exactly one root element, only Misc around it.
    {"[1]", ""},
    {"[1]", "   \n  "},
    {"[1]", "<!-- c -->"},
    {"[1]", "<?xml version=\"1.0\"?>\n"},
    {"[1]", "<!DOCTYPE a>\n"},
    {"[1]", "<a/><b/>"},
    {"[1]", "<a/>\n\n<b/>"},
    {"[1]", "<a></a>\n<a></a>"},
    {"[1]", "<a/>x"},
    {"[1]", "<a/>\n\n  x\n"},
    {"[1]", "<a/><!-- c -->\n.\n"},
    {"[1]", "x<a/>"},
    {"[1]", "\n\nx\n<a/>"},
    {"[1]", "<?xml version=\"1.0\"?>\ntext\n<a/>"},
    {"[1]", "<a/>\n<!DOCTYPE a>"},
    {"4.3.3", "\xEF\xBB\xBF\n<a/>\n\njunk"},
    {"4.3.3", "\xEF\xBB\xBFx<a/>"},
    {"4.3.3", "\xEF\xBB\xBF\xEF\xBB\xBF<a/>"},
    {"4.3.3", "<a/>\n\xEF\xBB\xBF"},
    {"4.3.3", "\n\xEF\xBB\xBF<a/>"},
    // [39] every element closed, in order.
    {"[39]", "<a>"},
    {"[39]", "<a>\n<b>\n</b>\n"},
    {"[39]", "<a><b></a>"},
    {"[39]", "<a>\n<b>\n</a>\n</b>"},
    {"[39]", "</a>"},
    {"[39]", "\n</a>"},
    {"[39]", "<a></a></a>"},
    {"[39]", "<a></b>"},
    {"[39]", "<a></ab>"},
    {"[39]", "<ab></a>"},
    // [40], [44] the tags.
    {"[40]", "<"},
    // [4] NameStartChar: no digit, '-' or '.' first.
    {"[4]", "<1a/>"},
    {"[4]", "<0a/>"},
    {"[4]", "<9/>"},
    {"[4]", "<-a/>"},
    {"[4]", "<.a/>"},
    {"[4]", "<a\n1x='1'/>"},
    {"[4]", "<a -x='1'/>"},
    {"[4]", "<a .x='1'/>"},
    {"[4]", "<a x='1' 9='2'/>"},
    {"[4]", "<?1x?><a/>"},
    {"[4]", "<!DOCTYPE 1a><a/>"},
    {"[4]", "<!DOCTYPE -a><a/>"},
    {"[40]", "<a"},
    {"[40]", "<a\n"},
    {"[40]", "<>"},
    {"[40]", "< a/>"},
    {"[40]", "<a x/>"},
    {"[40]", "<a x>"},
    {"[40]", "<a x=/>"},
    {"[40]", "<a x="},
    {"[40]", "<a x=1/>"},
    {"[40]", "<a x#\"1\"/>"},
    {"[40]", "<a x \"1\"/>"},
    {"[40]", "<a x=|1|/>"},
    {"[40]", "<a x=#1#/>"},
    {"[40]", "<a x=\"1/>"},
    {"[40]", "<a x=\"1'/>"},
    {"[40]", "<a x=\"1\"y=\"2\"/>"},
    {"[40]", "<a x='1'y='2'/>"},
    {"[40]", "<a =\"1\"/>"},
    {"[40]", "<a \"1\"/>"},
    {"[40]", "<a x==\"1\"/>"},
    {"[40]", "<a\n\nx\n\n\"1\"/>"},
    {"[44]", "<a/ >"},
    {"[44]", "<r><a/ ></r>"},
    {"[44]", "<r><a/x></r>"},
    {"[44]", "<a /"},
    {"[44]", "<a/"},
    {"[44]", "<a x=\"1\"/x>"},
    {"[44]", "<a //>"},
    // [42] ETag ::= '</' Name S? '>'
    {"[42]", "<a></a"},
    {"[42]", "<a></"},
    {"[42]", "<a></>"},
    {"[42]", "<a></a b>"},
    {"[42]", "<a><b></b x></a>"},
    {"[42]", "<a></a/>"},
    {"[42]", "<a></ a>"},
    {"[42]", "<a>\n</a\n\n"},
    // [10] no '<' in an attribute value
    {"[10]", "<a x=\"<\"/>"},
    {"[10]", "<a x='a<b'/>"},
    // [15] comments closed by '-->'; [16] PIs by '?>'; [28] the DOCTYPE by '>' and before the root.
    {"[15]", "<!-- open <a/>"},
    {"[15]", "<a><!-- open </a>"},
    {"[15]", "<!---><a/>"},
    {"[15]", "<!--><a/>"},
    {"[15]", "<!-- a -- b --><a/>"},
    {"[15]", "<!-- a ---><a/>"},
    {"[15]", "<a>\n<!-- a\n--\n--></a>"},
    {"[15]", "<!-- a --"},
    {"[15]", "<!-- a -"},
    {"[15]", "<a/><!--x--"},
    {"[15]", "<a>\n\n<!-- open\n\n</a>"},
    {"[16]", "<?pi <a/>"},
    {"[16]", "<?><a/>"},
    {"[16]",
     "<?"
     "?><a/>"},  // "<??>": split, not a trigraph
    {"[16]", "<? pi?><a/>"},
    {"[16]",
     "<a>\n<?"
     "?></a>"},
    {"[16]", "<a>\n<?pi\n</a>"},
    {"[16]", "<a><?pi ?</a>"},
    {"[28]", "<!DOCTYPE a"},
    {"[28]", "<!DOCTYPE a>\n<!DOCTYPE a>\n<a/>"},
    {"[28]", "<!DOCTYPE a [<!ELEMENT a ANY>]>\n<!-- c -->\n<!DOCTYPE a>\n<a/>"},
    {"[28]", "<!>\n<a/>"},
    {"[28]", "<!x>\n<a/>"},
    {"[28]", "<!ELEMENT a ANY>\n<a/>"},
    {"[28]", "<!DOCTYPE>\n<a/>"},
    {"[28]", "<!DOCTYPEa>\n<a/>"},
    {"[28]", "<!DOCTYPE >\n<a/>"},
    {"[28]", "<!DOCTYPE []>\n<a/>"},
    {"[28]", "<!doctype a>\n<a/>"},
    {"[28]", "<!DOCTYPE"},
    {"[28]", "<!DOCTYPE "},
    {"[28]", "\n<!DOCTYP"},
    {"[28]", "<!DOCTYPE a [<!ELEMENT a ANY>"},
    {"[28]", "<!DOCTYPE a [<!ELEMENT a ANY>]\n<a/>"},
    {"[28]", "<a><!DOCTYPE a></a>"},
    {"[28]", "<a>\n<!DOCTYPE a>\n</a>"},
    // [68] only the five predefined entities (no DTD declares others); [66] digits then ';';
    // [2] Char ::= #x9 | #xA | #xD | [#x20-#xD7FF] | [#xE000-#xFFFD] | [#x10000-#x10FFFF]
    // (WFC: Legal Character).
    {"[68]", "<a x=\"&bogus;\"/>"},
    {"[68]", "<a x=\"&lt\"/>"},
    {"[68]", "<a x=\"&;\"/>"},
    {"[68]", "<a x=\"&\"/>"},
    {"[68]", "<a x=\"AT&T\"/>"},
    {"[68]", "<a x=\"AT&T mobile; x\"/>"},
    {"[68]", "<a x=\"& b;\"/>"},
    {"[68]", "<a x=\"&LT;\"/>"},
    {"[68]", "<a\n\nx=\"&amp\"/>"},
    {"[66]", "<a x=\"&#;\"/>"},
    {"[66]", "<a x=\"&#x;\"/>"},
    {"[66]", "<a x=\"&#xg;\"/>"},
    {"[66]", "<a x=\"&#12a;\"/>"},
    {"[66]", "<a x=\"&#-1;\"/>"},
    {"[66]", "<a x=\"&#x41 ;\"/>"},
    {"[66]", "<a x=\"&# 65;\"/>"},
    {"[66]", "<a x=\"&#X41;\"/>"},
    {"[66]", "<a x=\"&#65\"/>"},
    {"[2]", "<a x=\"&#0;\"/>"},
    {"[2]", "<a x=\"&#x1;\"/>"},
    {"[2]", "<a x=\"&#8;\"/>"},
    {"[2]", "<a x=\"&#x1f;\"/>"},
    {"[2]", "<a x=\"&#xD800;\"/>"},
    {"[2]", "<a x=\"&#xDFFF;\"/>"},
    {"[2]", "<a x=\"&#xFFFE;\"/>"},
    {"[2]", "<a x=\"&#xFFFF;\"/>"},
    {"[2]", "<a x=\"&#x110000;\"/>"},
    {"[2]", "<a x=\"&#1114112;\"/>"},
    {"[2]", "<a x=\"&#x100000000000000041;\"/>"},
    {"[2]", "<a x=\"&#99999999999999999999999;\"/>"},
};

TEST(XmlTruth, RefusesWhatExpatRefusesOnItsLine) {
  for (const auto& d : kXmlMalformed) {
    SCOPED_TRACE(std::string("XML 1.0 ") + d.production + ": " + d.text);
    const ExpatDoc want = expat_read(d.text);
    ASSERT_FALSE(want.ok) << "expat accepts it: the case is well-formed";
    XmlReader r(d.text, "t.xml");
    try {
      while (r.next() != Event::Eof) {
        (void)r.attr_str("x");  // decoding values is part of reading them
      }
      ADD_FAILURE() << "accepted; expat: " << want.error << " at line " << want.error_line;
    } catch (const InputError& e) {
      EXPECT_EQ(e.file(), "t.xml");
      EXPECT_EQ(e.line(), want.error_line) << e.what() << "; expat: " << want.error;
      // Where the reader says no element has come yet, expat must not say the root element is
      // over.
      const std::string msg = e.what();
      const bool after_root = want.error == XML_ErrorString(XML_ERROR_JUNK_AFTER_DOC_ELEMENT);
      if (msg.find("found text") != std::string::npos) {
        EXPECT_FALSE(after_root) << msg << "; expat: " << want.error;
      }
    }
  }
}

// Every error names the markup it is in (xml_reader.hpp: "every error names the file and line";
// docs/design.md: the errors say what was expected): the construct the text has entered where
// it goes wrong, by the grammar. Expat must refuse each text too.
struct XmlNamedError {
  const char* production;
  std::string text;
  const char* names;  // what the message must contain
};
const std::vector<XmlNamedError> kXmlNamedErrors = {
    {"[42] ETag", "<a></", "</"},
    {"[42] ETag", "<a></a", "</a"},
    {"[42] ETag", "<a></b>", "</a"},
    {"[16] PI", "<a><?", "processing instruction"},
    {"[16] PI", "<?", "processing instruction"},
    {"[16] PI", "<?x", "processing instruction"},
    {"[15] Comment", "<a><!--", "comment"},
    {"[15] Comment", "<!-- -- -->", "comment"},
    {"[15] Comment", "<!-- --", "comment"},
    {"[28] doctypedecl", "<!DOCTYPE a><!DOCTYPE a>", "<!DOCTYPE"},
    {"[4] NameStartChar", "<1a/>", "element name"},
    {"[4] NameStartChar", "<a 1x='1'/>", "attribute name"},
    {"[15] Comment", "<!-", "<!--"},
    {"[28] doctypedecl", "<!", "<!DOCTYPE"},
    {"[28] doctypedecl", "<!DOCTYPE", "<!DOCTYPE"},
    {"[28] doctypedecl", "<!DOCTYPE a", "declaration"},
    {"[42] ETag", "<a></a b>", "</a"},
    {"[44] EmptyElemTag", "<a/ >", "/>"},
    {"[28] doctypedecl", "<a><!", "<!"},
    {"[28] doctypedecl", "<a/><!", "<!"},
    {"[40] STag", "<a><", "element name"},
    {"[40] STag", "<a>\n<b", "<b>"},
    {"[41] Attribute", "<a x", "attribute x"},
    {"[41] Attribute", "<a x=", "attribute x"},
    {"[10] AttValue", "<a x=\"", "attribute x"},
    {"[68] EntityRef", "<a x=\"&bogus;\"/>", "entity &bogus;"},
    {"[66] CharRef", "<a x=\"&#xD800;\"/>", "&#xD800;"},
    {"[66] CharRef", "<a x=\"&#x110000;\"/>", "&#x110000;"},
    {"[66] CharRef", "<a x=\"&#x10FFFF0;\"/>", "&#x10FFFF0;"},
    {"[66] CharRef", "<a x=\"&#;\"/>", "digits"},
    {"[66] CharRef", "<a x=\"&#x;\"/>", "digits"},
    {"[66] CharRef", "<a x=\"&#\"/>", "digits"},
    {"[66] CharRef", "<a x=\"&#1a;\"/>", "malformed"},
    {"[66] CharRef", "<a x=\"&#x10FFFF0g;\"/>", "malformed"},
    {"[66] CharRef", "<a x=\"&#x1100000g;\"/>", "malformed"},
    {"[66] CharRef", "<a x=\"&#11141110a;\"/>", "malformed"},
    {"[68] EntityRef", "<a x=\"&;\"/>", "name"},
    {"[68] EntityRef", "<a x=\"& b;\"/>", "name"},
    {"[68] EntityRef", "<a x=\"&a;\"/>", "&a;"},
    {"[1] document", "<a/>x", "end of document"},
    {"[1] document", "<a/><b/>", "end of document"},
    {"[1] document", "x<a/>", "expected an XML element"},
    {"[1] document", "", "expected an XML element"},
};

TEST(XmlTruth, EachErrorNamesTheMarkupItIsIn) {
  for (const auto& d : kXmlNamedErrors) {
    SCOPED_TRACE(std::string("XML 1.0 ") + d.production + ": " + d.text);
    ASSERT_FALSE(expat_read(d.text).ok) << "expat accepts it: the case is well-formed";
    XmlReader r(d.text, "t.xml");
    try {
      while (r.next() != Event::Eof) {
        (void)r.attr_str("x");
      }
      ADD_FAILURE() << "accepted";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(d.names), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace gdrpeer::topo

// lspci text: the tree (`lspci -tv`, `-t`, `-tvnn`) gives the hierarchy, the
// verbose listing (`lspci -vvv`, `-nn`, `-D`) gives classes, IDs, NUMA node,
// BARs, link, ACS/ATS, MPS/MRRS and the bridges' bus numbers. Either alone
// works; together they give the fullest model. Shell transcripts and markdown
// reports are accepted too: only the output after a "$ ... lspci ..." prompt
// (and numactl/lscpu outputs) is read, everything else is prose.
#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <map>
#include <string>

#include "gdrpeer/topo/errors.hpp"
#include "gdrpeer/topo/inputs.hpp"
#include "hex.hpp"

namespace gdrpeer::topo {

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}
bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }
using detail::hex_digit;
bool parse_hex(std::string_view s, unsigned long& out) { return detail::parse_hex_digits(s, 8, out); }

struct Line {
  std::string_view text;
  long no;
};

// Class names lspci prints without -nn (pci.ids class/subclass names).
struct ClassName {
  const char* name;
  uint32_t code;
};
constexpr ClassName kClassNames[] = {
    {"VGA compatible controller", 0x030000},
    {"3D controller", 0x030200},
    {"Display controller", 0x038000},
    {"XGA compatible controller", 0x030100},
    {"Ethernet controller", 0x020000},
    {"Infiniband controller", 0x020700},
    {"Network controller", 0x028000},
    {"Fabric controller", 0x020800},
    {"Non-Volatile memory controller", 0x010802},
    {"RAID bus controller", 0x010400},
    {"SATA controller", 0x010600},
    {"Serial Attached SCSI controller", 0x010700},
    {"PCI bridge", 0x060400},
    {"Host bridge", 0x060000},
    {"ISA bridge", 0x060100},
    {"Bridge", 0x068000},
    {"Audio device", 0x040300},
    {"RAM memory", 0x050000},
    {"Memory controller", 0x058000},
    {"System peripheral", 0x088000},
    {"Processing accelerators", 0x120000},
    {"Co-processor", 0x0b4000},
    {"Encryption controller", 0x108000},
    {"USB controller", 0x0c0300},
    {"SMBus", 0x0c0500},
    {"Serial bus controller", 0x0c8000},
    {"Non-Essential Instrumentation", 0x130000},
    {"Signal processing controller", 0x118000},
    {"InfiniBand", 0x0c0600},
};

class LspciParser {
 public:
  Topology t;

  void parse_input(const TextInput& in) {
    name_ = in.name;
    root_seen_ = false;
    std::vector<Line> lines;
    size_t b = 0;
    long no = 1;
    std::string_view s = in.text;
    while (b < s.size()) {
      size_t e = s.find('\n', b);
      if (e == std::string_view::npos) e = s.size();
      std::string_view l = s.substr(b, e - b);
      if (!l.empty() && l.back() == '\r') l.remove_suffix(1);
      lines.push_back({l, no++});
      b = e + 1;
    }
    bool transcript = false;
    for (const auto& l : lines)
      if (is_prompt(l.text)) {
        transcript = true;
        break;
      }
    if (transcript)
      parse_transcript(lines);
    else
      parse_plain(lines);
  }

  void finish() {
    // Devices only the verbose listing named: hang them under the bridge whose secondary bus
    // they sit on, else on their root bus. A bridge forwards only to buses above its own (Linux,
    // drivers/pci/probe.c pci_scan_bridge_extend: "secondary <= bus->number" is "bridge
    // configuration invalid"): one showing "secondary=00", left unconfigured, has nothing behind
    // it. Addresses are "dddd:bb:dd.f", or "ddddd:bb:dd.f" in a VMD domain (0x10000 and up), so
    // the bus is counted from the end.
    auto bus_of = [](const std::string& bdf) { return static_cast<int>(std::strtol(bdf.substr(bdf.size() - 7, 2).c_str(), nullptr, 16)); };
    auto domain_of = [](const std::string& bdf) { return bdf.substr(0, bdf.size() - 8); };
    for (size_t i = 0; i < t.devices.size(); ++i) {
      Device& d = t.devices[i];
      if (placed_.count(d.bdf)) continue;
      int parent = -1;
      for (size_t j = 0; j < t.devices.size(); ++j) {
        const Device& p = t.devices[j];
        if (p.secondary_bus > bus_of(p.bdf) && p.secondary_bus == bus_of(d.bdf) && domain_of(p.bdf) == domain_of(d.bdf)) {
          parent = static_cast<int>(j);
          break;
        }
      }
      d.parent = parent;
      if (parent < 0) d.host_bridge = t.host_bridge_index(d.bdf.substr(0, d.bdf.size() - 5));
    }
    t.finalize();
  }

 private:
  std::string name_;
  std::map<int, std::tuple<unsigned, unsigned, int, int>> cols_;  // column -> domain, bus, parent, hb
  std::map<std::string, bool> placed_;
  int current_ = -1;        // device of the current verbose block
  bool root_seen_ = false;  // a "[dddd:bb]" root line was read
  int base_indent_ = -1;

  [[noreturn]] void fail(long line, const std::string& what) { throw InputError(name_, line, what); }

  // Fedora's and RHEL's bash prompt, PS1="[\u@\h \W]\\$ " (/etc/bashrc of Fedora's setup
  // package): "[root@host ~]# cmd", "[user@host my dir]$ cmd". bash prints \$ as '#' for uid 0,
  // else '$', and \W is the working directory's base name, which may hold spaces (bash(1),
  // PROMPTING). Returns where the command starts (the line's end for a bare prompt), or npos.
  static size_t bracket_prompt_command(std::string_view l) {
    if (l.empty() || l[0] != '[') return std::string_view::npos;
    const size_t sp = l.find(' ');
    const size_t at = l.find('@');
    if (at == std::string_view::npos || at < 2 || sp == std::string_view::npos || sp < at + 2) return std::string_view::npos;
    for (size_t e = l.find(']', sp); e != std::string_view::npos; e = l.find(']', e + 1))
      if (e + 1 < l.size() && (l[e + 1] == '#' || l[e + 1] == '$') && (e + 2 == l.size() || l[e + 2] == ' '))
        return std::min(e + 3, l.size());
    return std::string_view::npos;
  }

  static bool is_prompt(std::string_view l) {
    if (bracket_prompt_command(l) != std::string_view::npos) return true;
    size_t p = l.find("$ ");
    if (p != std::string_view::npos) {
      // "$ cmd" at line start, or "user@host:~$ cmd"
      return p == 0 || l.substr(0, p).find(' ') == std::string_view::npos || l[p - 1] == '$' ||
             l.substr(0, p).find('@') != std::string_view::npos;
    }
    // root's prompt: "root@host:~# cmd", or "# lspci ..." (a bare '#' only before lspci:
    // elsewhere it is a markdown heading or a comment).
    p = l.find("# ");
    if (p == std::string_view::npos) return false;
    std::string_view before = l.substr(0, p);
    if (before.find(' ') != std::string_view::npos) return false;
    return before.find('@') != std::string_view::npos || (p == 0 && l.substr(2, 5) == "lspci") ||
           (!before.empty() && before.find(':') != std::string_view::npos && l.find("lspci", p) != std::string_view::npos);
  }

  // What a paste adds around lspci's output: an elision ("...", "[...]", "…").
  static bool is_elision(std::string_view ts) { return ts == "..." || ts == "[...]" || ts == "\xe2\x80\xa6" || ts == "(...)"; }

  // What `kubectl debug node/N -- ...` and `oc debug node/N -- chroot /host ...` print
  // around the command's output (their stderr, pasted with it): kubectl's "Creating debugging
  // pod node-debugger-... with container debugger on node N." and oc's "Creating debug
  // namespace/...", "Starting pod/N-debug ...", "To use host binaries, run `chroot /host`"
  // (or "`nsenter -a -t 1`"), "Removing debug pod ...", "Removing debug namespace/...".
  static bool is_debug_pod_line(std::string_view s) {
    for (std::string_view p :
         {"Creating debugging pod ", "Creating debug namespace/", "Starting pod/", "To use host binaries, run ", "Removing debug pod",
          "Removing debug namespace/", "If you don't see a command prompt", "Waiting for pod to start", "Debugging with pod/"})
      if (starts_with(s, p)) return true;
    return false;
  }

  // Lines tools print before or among lspci's output ("pcilib: Cannot open ...",
  // "lspci: Unable to load libkmod resources", "Warning: ..."): "word: text".
  static bool is_tool_noise(std::string_view s) {
    if (is_debug_pod_line(s)) return true;
    size_t n = 0;
    while (n < s.size() && (std::isalpha(static_cast<unsigned char>(s[n])) || s[n] == '_' || s[n] == '-')) ++n;
    if (n == 0 || n + 1 >= s.size() || s[n] != ':' || s[n + 1] != ' ') return starts_with(s, "[sudo] ");  // sudo's prompt
    // Not a -vvv header ("00:1f.0 ...") nor a hex-looking BDF start.
    bool hex = true;
    for (size_t i = 0; i < n; ++i) hex = hex && hex_digit(s[i]) >= 0;
    return !hex;
  }

  void parse_transcript(const std::vector<Line>& lines) {
    enum class Sec { None, Tree, Verbose, Numactl, Lscpu } sec = Sec::None;
    for (const auto& l : lines) {
      std::string_view s = l.text;
      if (is_prompt(s)) {
        // The command follows the prompt's "$ " or, for root's prompts, its "# ".
        const size_t dollar = s.find("$ ");
        const size_t bracket = bracket_prompt_command(s);
        std::string_view cmd = bracket != std::string_view::npos ? s.substr(bracket)
                                                                 : s.substr((dollar != std::string_view::npos ? dollar : s.find("# ")) + 2);
        sec = Sec::None;
        current_ = -1;
        if (cmd.find('|') != std::string_view::npos || cmd.find('>') != std::string_view::npos) continue;  // filtered output: unknown shape
        size_t lp = cmd.find("lspci");
        if (lp != std::string_view::npos) {
          bool tree = false;
          for (size_t i = lp + 5; i < cmd.size(); ++i)
            if (cmd[i] == '-' && (i == 0 || cmd[i - 1] == ' ')) {
              size_t j = i + 1;
              if (j < cmd.size() && cmd[j] == '-') continue;  // long option
              for (; j < cmd.size() && cmd[j] != ' '; ++j)
                if (cmd[j] == 't') tree = true;
            }
          sec = tree ? Sec::Tree : Sec::Verbose;
        } else if (cmd.find("numactl") != std::string_view::npos && cmd.find("-H") != std::string_view::npos) {
          sec = Sec::Numactl;
        } else if (cmd.find("numactl --hardware") != std::string_view::npos) {
          sec = Sec::Numactl;
        } else if (cmd.find("lscpu") != std::string_view::npos && cmd.find("-e") == std::string_view::npos) {
          sec = Sec::Lscpu;
        }
        continue;
      }
      if (starts_with(trim(s), "```")) {
        sec = Sec::None;
        current_ = -1;
        continue;
      }
      if (is_elision(trim(s))) continue;
      if ((sec == Sec::Tree || sec == Sec::Verbose) && starts_with(s, "[sudo] ")) continue;  // sudo's prompt
      if ((sec == Sec::Tree || sec == Sec::Verbose) && is_tool_noise(s)) {
        t.notes.push_back(name_ + ":" + std::to_string(l.no) + ": not lspci output, skipped: " + std::string(trim(s).substr(0, 80)));
        continue;
      }
      switch (sec) {
        case Sec::None: break;
        case Sec::Tree:
          if (!trim(s).empty()) tree_line(s, l.no);
          break;
        case Sec::Verbose:
          if (!starts_with(s, "[sudo] ")) verbose_line(s, l.no);  // sudo's prompt is not lspci output
          break;
        case Sec::Numactl:
          if (starts_with(s, "available: ")) t.numa_nodes = std::atoi(std::string(s.substr(11)).c_str());
          break;
        case Sec::Lscpu: lscpu_line(s); break;
      }
    }
  }

  void parse_plain(const std::vector<Line>& lines) {
    // A block pasted from a document or docstring is indented as a whole: the
    // indentation every line shares is not lspci's.
    size_t common = std::string_view::npos;
    for (const auto& l : lines) {
      std::string_view s = l.text;
      // Fences and tool lines are not part of the indented block.
      if (trim(s).empty() || is_elision(trim(s)) || starts_with(trim(s), "```") || is_tool_noise(trim(s))) continue;
      size_t sp = 0;
      while (sp < s.size() && s[sp] == ' ') ++sp;
      common = std::min(common, sp);
    }
    if (common == std::string_view::npos) common = 0;
    // A markdown paste with code fences: lspci's output is inside them, prose outside.
    const bool fenced = std::any_of(lines.begin(), lines.end(), [](const Line& l) { return starts_with(trim(l.text), "```"); });
    bool inside = false;
    long prose = 0, prose_first = 0;
    for (const auto& l : lines) {
      std::string_view s = l.text;
      if (starts_with(trim(s), "```")) {
        inside = !inside;
        current_ = -1;
        continue;
      }
      if (fenced && !inside) {
        if (!trim(s).empty() && prose++ == 0) prose_first = l.no;
        continue;
      }
      if (trim(s).empty()) {
        current_ = -1;
        continue;
      }
      if (is_elision(trim(s))) continue;
      s.remove_prefix(std::min(common, s.size()));
      if (is_tool_noise(s)) {
        t.notes.push_back(name_ + ":" + std::to_string(l.no) + ": not lspci output, skipped: " + std::string(trim(s).substr(0, 80)));
        continue;
      }
      char c = s[0];
      if (c == ' ' || c == '\t') {
        std::string_view ts = trim(s);
        if (current_ >= 0 && (s[0] == '\t' || !is_tree_start(ts))) {
          verbose_line(s, l.no);
        } else if (is_tree_start(ts)) {
          tree_line(s, l.no);
        } else {
          fail(l.no, "expected an lspci -tv tree line or an indented lspci -vvv detail under a device header");
        }
      } else if (c == '-' || c == '+' || c == '\\' || c == '|') {
        tree_line(s, l.no);
      } else if (hex_digit(c) >= 0) {
        verbose_line(s, l.no);
      } else {
        fail(l.no, "expected an lspci -tv tree line or an lspci -vvv device header \"bb:dd.f class: name\"");
      }
    }
    if (prose)
      t.notes.push_back(name_ + ":" + std::to_string(prose_first) + ": " + std::to_string(prose) +
                        " line(s) outside the markdown code fences, not lspci output, skipped");
  }

  static bool is_tree_start(std::string_view ts) {
    return starts_with(ts, "+-") || starts_with(ts, "\\-") || starts_with(ts, "|") || starts_with(ts, "-+-") || starts_with(ts, "-[");
  }

  // ---- tree --------------------------------------------------------------
  int add_device(const std::string& bdf) {
    int i = t.find(bdf);
    if (i >= 0) return i;
    Device d;
    d.bdf = bdf;
    t.devices.push_back(std::move(d));
    return static_cast<int>(t.devices.size() - 1);
  }

  // "vvvv:dddd": the ids pci_lookup_name prints for PCI_LOOKUP_VENDOR | PCI_LOOKUP_DEVICE
  // (pciutils lib/names.c: sprintf "%04x:%04x").
  static bool id_pair(std::string_view s, unsigned long& v, unsigned long& dv) {
    return s.size() == 9 && s[4] == ':' && parse_hex(s.substr(0, 4), v) && parse_hex(s.substr(5, 4), dv);
  }

  void set_name(Device& d, std::string_view nm) {
    nm = trim(nm);
    // The names lspci prints (lib/names.c format_name_pair): with -n (PCI_LOOKUP_NUMERIC) the ids
    // alone, "10de:2330" (`lspci -tvn`, `lspci -vvv -n`): no name; without -n, for ids pci.ids
    // does not know, "Device 1c00:3450": a name that carries the ids.
    unsigned long v = 0, dv = 0;
    const bool numeric = id_pair(nm, v, dv);
    if (numeric || (starts_with(nm, "Device ") && id_pair(nm.substr(7), v, dv))) {
      d.vendor = static_cast<uint16_t>(v);
      d.device = static_cast<uint16_t>(dv);
      d.ids_known = true;
      if (d.name.empty() && !numeric) d.name = std::string(nm);
      return;
    }
    // -nn appends "[vvvv:dddd]"
    if (nm.size() >= 11 && nm.back() == ']' && nm[nm.size() - 6] == ':' && nm[nm.size() - 11] == '[') {
      if (parse_hex(nm.substr(nm.size() - 10, 4), v) && parse_hex(nm.substr(nm.size() - 5, 4), dv)) {
        d.vendor = static_cast<uint16_t>(v);
        d.device = static_cast<uint16_t>(dv);
        d.ids_known = true;
        nm = trim(nm.substr(0, nm.size() - 11));
      }
    }
    if (d.name.empty()) d.name = std::string(nm);
  }

  void tree_line(std::string_view s, long no) {
    size_t n = s.size();
    size_t i = 0;
    while (i < n && (s[i] == ' ' || s[i] == '|')) ++i;
    if (i == n) return;
    bool top = false;
    std::tuple<unsigned, unsigned, int, int> ctx{0, 0, -1, -1};
    if (s[i] == '-' && i + 1 < n && s[i + 1] == '[') {
      i += 1;
      top = true;
    } else if (s.substr(i, 3) == "-+-") {
      i += 3;
      top = true;
    } else if ((s[i] == '+' || s[i] == '\\') && i + 1 < n && s[i + 1] == '-') {
      size_t col = i;
      i += 2;
      if (i < n && s[i] == '[') {
        top = true;
      } else {
        ctx = branch_parent(col, no);
      }
    } else {
      fail(no, "expected a tree connector (+-, \\-, |) or [domain:bus]");
    }
    if (top) {
      root_seen_ = true;
      // [dddd:bb]
      if (i >= n || s[i] != '[') fail(no, "expected [domain:bus] at the top of the tree");
      size_t close = s.find(']', i);
      unsigned long dom, bus;
      if (close == std::string_view::npos || close - i != 8 || s[i + 5] != ':' || !parse_hex(s.substr(i + 1, 4), dom) ||
          !parse_hex(s.substr(i + 6, 2), bus))
        fail(no, "expected [dddd:bb] (PCI domain and root bus)");
      char buf[16];
      std::snprintf(buf, sizeof buf, "%04lx:%02lx", dom, bus);
      int hb = t.host_bridge_index(buf);
      ctx = {static_cast<unsigned>(dom), static_cast<unsigned>(bus), -1, hb};
      i = close + 1;
      if (!children(s, i, no, ctx)) return;
    }
    // Items, each possibly followed by its single/first child on this line.
    for (;;) {
      auto [dom, bus, parent, hb] = ctx;
      if (i + 4 > n || hex_digit(s[i]) < 0 || hex_digit(s[i + 1]) < 0 || s[i + 2] != '.' || s[i + 3] < '0' || s[i + 3] > '7')
        fail(no, "expected a device \"dd.f\" in the tree");
      unsigned dev = static_cast<unsigned>(hex_digit(s[i]) * 16 + hex_digit(s[i + 1]));
      if (dev > 0x1f) fail(no, "expected a device number 00-1f");
      std::string bdf = make_bdf(dom, bus, dev, static_cast<unsigned>(s[i + 3] - '0'));
      int di = add_device(bdf);
      placed_[bdf] = true;
      {
        Device& d = t.devices[di];
        d.parent = parent;
        d.host_bridge = parent < 0 ? hb : -1;
      }
      i += 4;
      if (i >= n) return;
      if (s.substr(i, 2) == "  " || s[i] == ' ') {
        set_name(t.devices[di], s.substr(i));
        return;
      }
      if (s.substr(i, 2) != "-[") fail(no, "expected \"  name\" or \"-[bus]\" after the device");
      size_t close = s.find(']', i);
      if (close == std::string_view::npos) fail(no, "expected ] after the bridge's bus range");
      std::string_view range = s.substr(i + 2, close - i - 2);
      unsigned long sec, sub;
      size_t dash = range.find('-');
      if (!parse_hex(range.substr(0, dash == std::string_view::npos ? range.size() : dash), sec) ||
          (dash != std::string_view::npos && !parse_hex(range.substr(dash + 1), sub)) || sec > 0xff)
        fail(no, "expected a bus range [bb] or [bb-bb] after the bridge");
      Device& d = t.devices[di];
      d.is_bridge = true;
      d.secondary_bus = static_cast<int>(sec);
      ctx = {dom, static_cast<unsigned>(sec), di, hb};
      i = close + 1;
      if (!children(s, i, no, ctx)) return;
    }
  }

  // The device a branch at `col` hangs from: the '+' in that column above it. A
  // paste may shift a line by one column (a tab, an edited line): the neighbouring
  // column is taken, with a note. A fragment cut below the "-[dddd:bb]-" root line
  // starts with branches of an unnamed root bus: it is read as one, with a note.
  std::tuple<unsigned, unsigned, int, int> branch_parent(size_t col, long no) {
    auto it = cols_.find(static_cast<int>(col));
    if (it != cols_.end()) return it->second;
    for (int off : {-1, 1}) {
      auto near = cols_.find(static_cast<int>(col) + off);
      if (near == cols_.end()) continue;
      t.notes.push_back(name_ + ":" + std::to_string(no) + ": tree branch one column off its parent's '+': read as under it");
      return near->second;
    }
    if (!root_seen_) {
      const int hb = t.host_bridge_index("0000:00");
      std::tuple<unsigned, unsigned, int, int> ctx{0, 0, -1, hb};
      cols_[static_cast<int>(col)] = ctx;
      root_seen_ = true;
      t.notes.push_back(name_ + ":" + std::to_string(no) +
                        ": tree without its [domain:bus] root line: the top branches are read as on root bus 0000:00");
      return ctx;
    }
    fail(no, "expected this tree branch to line up under a parent's '+' (column " + std::to_string(col + 1) + ")");
  }

  // After "]" of a host bridge or bridge: "-+-" (several children, the first
  // inline), "--...-" + item (one child), or "-"/"--" at the end (none).
  // Returns true when an item follows at i.
  bool children(std::string_view s, size_t& i, long no, const std::tuple<unsigned, unsigned, int, int>& ctx) {
    size_t n = s.size();
    size_t d = i;
    while (d < n && s[d] == '-') ++d;
    if (d == n) {
      i = d;
      return false;
    }
    if (d == i) fail(no, "expected '-' after ']'");
    if (s[d] == '+' && d + 1 < n && s[d + 1] == '-') {
      cols_[static_cast<int>(d)] = ctx;
      i = d + 2;
      return true;
    }
    if (hex_digit(s[d]) >= 0) {
      i = d;
      return true;
    }
    fail(no, "expected a child device, \"+-\" or the end of the line after the bus range");
  }

  // ---- verbose -----------------------------------------------------------
  void verbose_line(std::string_view s, long no) {
    if (s.empty()) return;
    if (s[0] != ' ' && s[0] != '\t') {
      header(s, no);
      return;
    }
    std::string_view ts = trim(s);
    if (ts.empty()) return;
    if (current_ < 0) fail(no, "expected a device header \"bb:dd.f class: name\" before indented details");
    Device& d = t.devices[current_];
    int indent = 0;
    for (char ch : s) {
      if (ch == ' ')
        ++indent;
      else if (ch == '\t')
        indent = (indent / 8 + 1) * 8;
      else
        break;
    }
    if (base_indent_ < 0) base_indent_ = indent;
    // Device-level lines (regions, NUMA node, driver) sit at the block's first
    // indentation; deeper ones belong to a capability (e.g. SR-IOV VF BARs).
    bool top_level = indent <= base_indent_;
    if (starts_with(ts, "NUMA node:")) {
      std::string v(trim(ts.substr(10)));
      char* e = nullptr;
      long nn = std::strtol(v.c_str(), &e, 10);
      if (v.empty() || *e) fail(no, "expected a number after \"NUMA node:\"");
      d.numa = static_cast<int>(nn);
    } else if (starts_with(ts, "Region ") && top_level) {
      region(d, ts, no);
    } else if (starts_with(ts, "Capabilities: [")) {
      if (ts.find("Express (") != std::string_view::npos) {
        static const std::pair<const char*, PortType> kPorts[] = {{"Root Complex Integrated Endpoint", PortType::RootComplexEndpoint},
                                                                  {"Root Complex Event Collector", PortType::RootComplexEventCollector},
                                                                  {"Legacy Endpoint", PortType::LegacyEndpoint},
                                                                  {"Endpoint", PortType::Endpoint},
                                                                  {"Root Port", PortType::RootPort},
                                                                  {"Upstream Port", PortType::SwitchUpstream},
                                                                  {"Downstream Port", PortType::SwitchDownstream},
                                                                  {"PCI-Express to PCI/PCI-X Bridge", PortType::PcieToPciBridge},
                                                                  {"PCI/PCI-X to PCI-Express Bridge", PortType::PciToPcieBridge}};
        for (auto& [k, v] : kPorts)
          if (ts.find(k) != std::string_view::npos) {
            d.port = v;
            break;
          }
      } else if (ts.find("Access Control Services") != std::string_view::npos) {
        d.acs_present = true;
        d.acs_known = true;
      } else if (ts.find("Address Translation Service") != std::string_view::npos) {
        d.ats_present = true;
      }
    } else if (starts_with(ts, "Capabilities: <access denied>")) {
      t.notes.push_back(name_ + ":" + std::to_string(no) + ": lspci ran without root; ACS and link details of " + d.bdf + " are unknown");
    } else if (starts_with(ts, "DevCap:")) {
      d.mps_cap = bytes_after(ts, "MaxPayload ", no);
    } else if (starts_with(ts, "MaxPayload ") && ts.find("MaxReadReq") != std::string_view::npos) {
      d.mps = bytes_after(ts, "MaxPayload ", no);
      d.mrrs = bytes_after(ts, "MaxReadReq ", no);
    } else if (starts_with(ts, "LnkCap:")) {
      link(d.link_cap, ts, no);
    } else if (starts_with(ts, "LnkSta:")) {
      link(d.link_sta, ts, no);
    } else if (starts_with(ts, "ACSCap:")) {
      d.acs_cap = acs_bits(ts.substr(7), no);
      d.acs_present = d.acs_known = true;
    } else if (starts_with(ts, "ACSCtl:")) {
      d.acs_ctl = acs_bits(ts.substr(7), no);
      d.acs_present = d.acs_known = true;
    } else if (starts_with(ts, "ATSCtl:")) {
      d.ats_present = true;
      d.ats_enabled = ts.find("Enable+") != std::string_view::npos;
    } else if (starts_with(ts, "Kernel driver in use:")) {
      d.driver = std::string(trim(ts.substr(21)));
    } else if (starts_with(ts, "IOMMU group:")) {
      std::string v(trim(ts.substr(12)));
      char* e = nullptr;
      long g = std::strtol(v.c_str(), &e, 10);
      if (v.empty() || *e) fail(no, "expected a number after \"IOMMU group:\"");
      d.iommu_group = static_cast<int>(g);
    } else if (starts_with(ts, "Bus: primary=")) {
      size_t p = ts.find("secondary=");
      unsigned long sec;
      if (p == std::string_view::npos || !parse_hex(ts.substr(p + 10, 2), sec))
        fail(no, "expected \"Bus: primary=bb, secondary=bb, subordinate=bb\"");
      d.is_bridge = true;
      d.secondary_bus = static_cast<int>(sec);
    }
  }

  void header(std::string_view s, long no) {
    size_t sp = s.find(' ');
    auto bdf = parse_bdf(s.substr(0, sp));
    if (sp == std::string_view::npos || !bdf) fail(no, "expected a device header \"[dddd:]bb:dd.f class: name\"");
    std::string_view rest = s.substr(sp + 1);
    size_t colon = rest.find(": ");
    if (colon == std::string_view::npos) fail(no, "expected \"class: name\" after the device address");
    std::string_view cls = rest.substr(0, colon);
    std::string_view nm = rest.substr(colon + 2);
    current_ = add_device(*bdf);
    base_indent_ = -1;
    Device& d = t.devices[current_];
    // -nn: "VGA compatible controller [0300]"
    if (cls.size() > 7 && cls.back() == ']' && cls[cls.size() - 6] == '[') {
      unsigned long cc;
      if (!parse_hex(cls.substr(cls.size() - 5, 4), cc)) fail(no, "expected a hex class code [cccc]");
      d.class_code = static_cast<uint32_t>(cc << 8);
      d.class_known = true;
      cls = trim(cls.substr(0, cls.size() - 6));
    } else if (unsigned long cc = 0; cls.size() == 4 && parse_hex(cls, cc)) {
      // -n: the class number alone, "0302" (lib/names.c PCI_LOOKUP_CLASS: "%04x").
      d.class_code = static_cast<uint32_t>(cc << 8);
      d.class_known = true;
    } else {
      for (const auto& c : kClassNames)
        if (cls == c.name) {
          d.class_code = c.code;
          d.class_known = true;
        }
    }
    d.class_name = std::string(cls);
    // Strip "(prog-if 02 [NVM Express])" and "(rev a1)"
    size_t pi = nm.find(" (prog-if ");
    if (pi != std::string_view::npos) {
      unsigned long pif;
      if (parse_hex(nm.substr(pi + 10, 2), pif) && d.class_known) d.class_code = (d.class_code & 0xffff00u) | static_cast<uint32_t>(pif);
      nm = nm.substr(0, pi);
    }
    size_t rv = nm.find(" (rev ");
    if (rv != std::string_view::npos) nm = nm.substr(0, rv);
    d.name.clear();
    set_name(d, nm);
    if (d.class_known && d.base_class() == 0x06 && d.sub_class() == 0x04) d.is_bridge = true;
  }

  int bytes_after(std::string_view ts, std::string_view key, long no) {
    size_t p = ts.find(key);
    if (p == std::string_view::npos) return 0;
    std::string v(ts.substr(p + key.size()));
    char* e = nullptr;
    long b = std::strtol(v.c_str(), &e, 10);
    if (e == v.c_str() || std::string_view(e).substr(0, 6) != " bytes") fail(no, "expected \"" + std::string(key) + "<n> bytes\"");
    return static_cast<int>(b);
  }

  void link(Link& out, std::string_view ts, long no) {
    size_t sp = ts.find("Speed ");
    size_t wp = ts.find("Width x");
    if (sp == std::string_view::npos || wp == std::string_view::npos)
      fail(no, "expected \"Speed <n>GT/s\" and \"Width x<n>\" in the link line");
    std::string sv(ts.substr(sp + 6));
    if (starts_with(sv, "unknown")) {
      out.speed_gts = 0;
    } else {
      char* e = nullptr;
      double g = std::strtod(sv.c_str(), &e);
      if (e == sv.c_str() || std::string_view(e).substr(0, 4) != "GT/s") fail(no, "expected a link speed like 16GT/s");
      out.speed_gts = g;
    }
    std::string wv(ts.substr(wp + 7));
    char* e = nullptr;
    long w = std::strtol(wv.c_str(), &e, 10);
    if (e == wv.c_str() || w <= 0 || w > 32) fail(no, "expected a link width like x16");
    out.width = static_cast<int>(w);
  }

  uint16_t acs_bits(std::string_view v, long no) {
    static const std::pair<const char*, uint16_t> kBits[] = {
        {"SrcValid", acs::kSourceValidation},     {"TransBlk", acs::kTranslationBlocking},   {"ReqRedir", acs::kRequestRedirect},
        {"CmpltRedir", acs::kCompletionRedirect}, {"UpstreamFwd", acs::kUpstreamForwarding}, {"EgressCtrl", acs::kEgressControl},
        {"DirectTrans", acs::kDirectTranslated}};
    uint16_t bits = 0;
    v = trim(v);
    int seen = 0;
    while (!v.empty()) {
      size_t sp = v.find(' ');
      std::string_view tok = v.substr(0, sp);
      v = sp == std::string_view::npos ? std::string_view{} : trim(v.substr(sp));
      if (tok.size() < 2 || (tok.back() != '+' && tok.back() != '-'))
        fail(no, "expected ACS flags like ReqRedir+ or ReqRedir-, found \"" + std::string(tok) + "\"");
      std::string_view key = tok.substr(0, tok.size() - 1);
      bool found = false;
      for (auto& [k, b] : kBits)
        if (key == k) {
          found = true;
          if (tok.back() == '+') bits |= b;
        }
      if (!found) fail(no, "unknown ACS flag \"" + std::string(key) + "\"");
      ++seen;
    }
    if (seen == 0) fail(no, "expected ACS flags after the colon");
    return bits;
  }

  void region(Device& d, std::string_view ts, long no) {
    // "Region 1: Memory at 3f000000000 (64-bit, prefetchable) [size=64G]"
    std::string v(ts.substr(7));
    char* e = nullptr;
    long idx = std::strtol(v.c_str(), &e, 10);
    if (e == v.c_str() || *e != ':' || idx < 0 || idx > 5) fail(no, "expected \"Region <0-5>: ...\"");
    if (ts.find("Memory at") == std::string_view::npos) return;  // I/O ports
    size_t sz = ts.find("[size=");
    // lspci.c show_size prints nothing for a size it does not know (an access method without
    // sizes, a dump read with -F): the BAR's size is unknown, so it is not recorded.
    if (sz == std::string_view::npos) return;
    std::string szs(ts.substr(sz + 6));
    char* se = nullptr;
    unsigned long long n = std::strtoull(szs.c_str(), &se, 10);
    if (se == szs.c_str()) fail(no, "expected a region size like [size=64G]");
    unsigned long long mult = 1;
    switch (*se) {
      case 'K': mult = 1ull << 10; break;
      case 'M': mult = 1ull << 20; break;
      case 'G': mult = 1ull << 30; break;
      case 'T': mult = 1ull << 40; break;
      case ']': break;
      default: fail(no, "expected a size unit K, M, G or T");
    }
    Bar b;
    b.index = static_cast<int>(idx);
    b.size = n * mult;
    b.is64 = ts.find("64-bit") != std::string_view::npos;
    b.prefetchable = ts.find(", prefetchable") != std::string_view::npos;
    for (auto& old : d.bars)
      if (old.index == b.index) {
        old = b;
        return;
      }
    d.bars.push_back(b);
  }

  void lscpu_line(std::string_view s) {
    size_t c = s.find(':');
    if (c == std::string_view::npos) return;
    std::string_view k = trim(s.substr(0, c)), v = trim(s.substr(c + 1));
    if (k == "Architecture")
      t.cpu.arch = std::string(v);
    else if (k == "Vendor ID")
      t.cpu.vendor = std::string(v);
    else if (k == "Model name")
      t.cpu.model_name = std::string(v);
    else if (k == "CPU family")
      t.cpu.family = std::atoi(std::string(v).c_str());
    else if (k == "Model")
      t.cpu.model = std::atoi(std::string(v).c_str());
    else if (k == "Socket(s)")
      t.cpu.sockets = std::atoi(std::string(v).c_str());
    else if (k == "Hypervisor vendor")
      t.cpu.hypervisor = true;
  }
};

}  // namespace

Topology parse_lspci(const std::vector<TextInput>& inputs) {
  LspciParser p;
  std::string names;
  for (const auto& in : inputs) {
    p.parse_input(in);
    names += (names.empty() ? "" : "+") + in.name;
  }
  if (p.t.devices.empty()) {
    throw InputError(inputs.empty() ? "lspci" : inputs.front().name, 0, "expected lspci -tv or lspci -vvv output, found no PCI device");
  }
  p.t.source = names;
  p.finish();
  p.t.format = "lspci";
  return std::move(p.t);
}

}  // namespace gdrpeer::topo

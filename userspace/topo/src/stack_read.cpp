// Reading the GPUDirect software stack (stack.hpp) from a sysfs source: the
// NVIDIA driver's parameters and flavour, the modprobe configuration, MOFED's
// peer-memory clients, nvidia_peermem's parameters and the kernel log. Every
// path goes through the InputFs, so `gdrpeer snapshot` records it; the kernel
// log is the one exception (a character device): read live, carried in
// snapshots as gdrpeer-snapshot/kernel-log.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <sstream>

#include "gdrpeer/topo/stack.hpp"
#include "sysfs_readers.hpp"

namespace gdrpeer::topo {

namespace {

std::string unquote(std::string v) {
  v = sysfs::trimmed(v);
  if (v.size() >= 2 && v.front() == '"' && v.back() == '"') v = v.substr(1, v.size() - 2);
  return v;
}

// "K=V;K2=V2": RegistryDwords is a semicolon-separated list (nv-reg.h, Option: RegistryDwords).
void split_dwords(const std::string& s, std::map<std::string, std::string>& out) {
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ';')) {
    item = sysfs::trimmed(item);
    size_t eq = item.find('=');
    if (item.empty() || eq == std::string::npos || eq == 0) continue;
    out[sysfs::trimmed(item.substr(0, eq))] = sysfs::trimmed(item.substr(eq + 1));
  }
}

bool contains(const std::string& s, const char* what) { return s.find(what) != std::string::npos; }

// The kernel's isspace() (lib/ctype.c): tab, newline, vertical tab, form feed, carriage
// return, blank, and Latin-1's no-break space 0xa0.
const std::string kKernelSpaces = " \t\n\v\f\r\xa0";

// Where the next token starts: at or after i, past the kernel's spaces (find_first_not_of
// gives npos at the end, and for any i past it).
size_t skip_kernel_spaces(const std::string& s, size_t i) { return std::min(s.find_first_not_of(kKernelSpaces, i), s.size()); }

// One module option as lib/cmdline.c next_arg() takes it from the options text, starting at
// `at` (not a space): a token ends at a space outside double quotes, and every '"' in it opens
// or closes a quoted part; the name runs to the first '=' that is not the token's first
// character; a value that starts with '"' loses that quote, and then its last character too
// if it is a '"'; a token that starts with '"' loses that quote, and its last character if
// that is a '"' the value's own quotes left. `next` is where the following token starts.
struct ModuleArg {
  std::string name, value;
  bool has_value = false;
  size_t next = 0;
};

ModuleArg next_module_arg(const std::string& s, size_t at) {
  const bool quoted = s[at] == '"';
  if (quoted) ++at;
  bool in_quote = quoted;
  size_t end = at, equals = std::string::npos;
  for (; end < s.size() && (in_quote || kKernelSpaces.find(s[end]) == std::string::npos); ++end) {
    if (equals == std::string::npos && end > at && s[end] == '=') equals = end;
    if (s[end] == '"') in_quote = !in_quote;
  }
  ModuleArg a;
  a.next = skip_kernel_spaces(s, end);  // s[end], where there is one, is a space
  if (equals == std::string::npos) {
    a.name = s.substr(at, end - at);
    if (quoted && !a.name.empty() && a.name.back() == '"') a.name.pop_back();
    return a;
  }
  a.has_value = true;
  a.name = s.substr(at, equals - at);
  std::string& v = a.value = s.substr(equals + 1, end - equals - 1);
  if (!v.empty() && v.front() == '"') {
    v.erase(0, 1);
    if (!v.empty() && v.back() == '"') v.pop_back();
  } else if (quoted && !v.empty() && v.back() == '"') {
    v.pop_back();
  }
  return a;
}

// Where the text of a /dev/kmsg record starts: after "prio,seq,usec,flag;"
// (Documentation/ABI/testing/dev-kmsg), or after the fields later kernels add before the ';'
// ("Unknown fields and values should be gracefully ignored"; CONFIG_PRINTK_CALLER adds
// ",caller=T123": kernel/printk/printk.c info_print_ext_header()). 0 for any other line
// (dmesg's text, a snapshot's kept lines); a line without ';' gives npos + 1, also 0.
size_t kmsg_text_at(const std::string& line) {
  size_t at = 0;
  for (int field = 0; field < 3; ++field) {  // prio, seq and usec: decimal, each before a ','
    const size_t end = line.find_first_not_of("0123456789", at);
    if (end == at || end == std::string::npos || line[end] != ',') return 0;
    at = end + 1;
  }
  return line.find(';', at) + 1;
}

// The module a kernel-log line is about: "nvidia_peermem: Unknown symbol ..." or
// "nvidia-peermem nv_mem_client_init:..." -> the leading word without its colon.
std::string module_of(const std::string& line) {
  size_t end = line.find_first_of(": ");
  return end == std::string::npos ? line : line.substr(0, end);
}

}  // namespace

std::string StackState::active_param(const std::string& key) const {
  // nv-reg.h, Option: RegistryDwords: "if a match is found, the static option value is
  // overridden"; keys that match no static option go to RM (PeerMappingOverride, ...).
  auto r = registry_dwords.find(key);
  if (r != registry_dwords.end()) return r->second;
  auto p = params.find(key);
  return p != params.end() ? p->second : std::string();
}

void parse_nvidia_params(const std::string& text, StackState& s) {
  s.params_known = true;
  std::stringstream ss(text);
  std::string line;
  while (std::getline(ss, line)) {
    size_t colon = line.find(':');
    if (colon == std::string::npos || colon == 0) continue;
    std::string name = sysfs::trimmed(line.substr(0, colon));
    if (name.find(' ') != std::string::npos) continue;  // not a "Name: value" line
    s.params[name] = unquote(line.substr(colon + 1));
  }
  if (auto it = s.params.find("RegistryDwords"); it != s.params.end()) split_dwords(it->second, s.registry_dwords);
  if (auto it = s.params.find("RegistryDwordsPerDevice"); it != s.params.end()) {
    // "pci=0000:01:00.0;Key=Value;pci=...;Key=Value": keys after a pci= apply to that device.
    std::string current;
    std::stringstream ds(it->second);
    std::string item;
    while (std::getline(ds, item, ';')) {
      item = sysfs::trimmed(item);
      size_t eq = item.find('=');
      if (eq == std::string::npos || eq == 0) continue;
      std::string k = sysfs::trimmed(item.substr(0, eq)), v = sysfs::trimmed(item.substr(eq + 1));
      if (k == "pci")
        current = v;
      else
        s.registry_per_device[current][k] = v;
    }
  }
}

void parse_nvidia_version(const std::string& first_line, StackState& s) {
  if (first_line.empty()) return;
  s.nvidia_version_known = true;
  s.nvidia_open = contains(first_line, "Open Kernel Module");
  std::istringstream words(first_line);
  for (std::string w; words >> w;)
    if (s.nvidia_version.empty() && !w.empty() && w[0] >= '0' && w[0] <= '9' && w.find('.') != std::string::npos) s.nvidia_version = w;
}

void parse_modprobe_conf(const std::string& text, const std::string& file, StackState& s) {
  s.modprobe_read = true;
  std::stringstream ss(text);
  std::string raw, line;
  int lineno = 0, start = 0;
  while (std::getline(ss, raw)) {
    ++lineno;
    if (line.empty()) start = lineno;
    // A trailing backslash continues the line (modprobe.d(5)); kmod drops the backslash and the
    // newline and adds nothing (shared/util.c freadline_wrapped()).
    if (!raw.empty() && raw.back() == '\\') {
      line += raw.substr(0, raw.size() - 1);
      continue;
    }
    line += raw;
    std::string l = sysfs::trimmed(line);
    line.clear();
    if (l.empty() || l[0] == '#') continue;
    std::istringstream words(l);
    std::string cmd, module;
    words >> cmd >> module;
    for (char& c : module)
      if (c == '-') c = '_';  // modprobe treats - and _ alike
    // Only the modules of the GPUDirect stack: NVIDIA's, peer memory, RDMA core and mlx5.
    static const char* const kStack[] = {"nvidia", "nv_", "gdrpeer", "gdrdrv", "ib_", "mlx5", "rdma", "amdgpu"};
    bool of_interest = false;
    for (const char* pfx : kStack) of_interest = of_interest || module.rfind(pfx, 0) == 0;
    if (!of_interest) continue;
    if (cmd == "blacklist") {
      s.modprobe.push_back({file, start, module, "(blacklist)", ""});
      continue;
    }
    if (cmd != "options") continue;
    std::string rest;
    std::getline(words, rest);
    // kmod hands the rest of the line to the kernel as it is (libkmod-config.c
    // kmod_config_add_options()), which splits it with next_arg() (below).
    for (size_t i = skip_kernel_spaces(rest, 0); i < rest.size();) {
      ModuleArg a = next_module_arg(rest, i);
      i = a.next;
      // kernel/params.c parse_args(): a bare "--" ends the options; load_module() warns that
      // the ones after it are ignored.
      if (!a.has_value && a.name == "--") break;
      // A name "" (from `""`) is no parameter of any module: parse_one() ignores it.
      if (!a.name.empty()) s.modprobe.push_back({file, start, module, a.name, a.value});
    }
  }
}

void parse_kernel_log(const std::string& text, StackState& s) {
  s.kernel_log_read = true;
  std::stringstream ss(text);
  std::string line;
  while (std::getline(ss, line)) {
    // /dev/kmsg records are "prio,seq,usec,flags;message"; dmesg lines "[  12.3] message".
    if (!line.empty() && line[0] == ' ') continue;  // /dev/kmsg key=value continuation
    line = line.substr(kmsg_text_at(line));
    if (!line.empty() && line[0] == '[') {
      size_t e = line.find("] ");
      if (e != std::string::npos) line = line.substr(e + 2);
    }
    line = sysfs::trimmed(line);
    KernelLogCause c;
    c.line = line;
    const bool peer_symbol = contains(line, "peer_memory") || contains(line, "nvidia_p2p");
    if (contains(line, "disagrees about version of symbol") && peer_symbol) c.kind = "symbol-version";
    // "(err -22)" follows a version mismatch (the symbol is there, its CRC differs): the
    // line above says so. "(err 0)" / "(err -2)": the symbol is not exported at all.
    else if (contains(line, "Unknown symbol") && peer_symbol && !contains(line, "(err -22)"))
      c.kind = "unknown-symbol";
    else if (contains(line, "failing symbol_get of non-GPLONLY symbol"))
      c.kind = "gpl-symbol-get";
    // peer_err() in nvidia-peermem.c prints the literal "nvidia-peermem" (" ERROR " after it
    // from 535.43.24 on) in every open-gpu-kernel-modules tag, 515.43.04 to 595.45.04; no line
    // with the module's name nvidia_peermem says ERROR.
    else if (contains(line, "nvidia-peermem") && contains(line, "ERROR"))
      c.kind = "peermem-init";
    else if (contains(line, "NVRM: dma-buf attach failed"))
      c.kind = "dmabuf-attach";
    else
      continue;
    c.module = c.kind == "dmabuf-attach" ? "nvidia" : c.kind == "gpl-symbol-get" ? "" : module_of(line);
    s.kernel_log.push_back(line);
    // One cause per kind and module: a module retried at every boot repeats its lines.
    bool seen = false;
    for (const auto& o : s.log_causes)
      seen = seen || (o.kind == c.kind && o.module == c.module && (c.kind != "dmabuf-attach" || o.line == c.line));
    if (!seen) s.log_causes.push_back(std::move(c));
  }
}

namespace sysfs {

KmsgText read_kmsg(const std::function<ssize_t(char*, size_t)>& read_record) {
  KmsgText out;
  char buf[8192];
  // The end: EAGAIN, no record left (a plain file bind-mounted over /dev/kmsg ends with 0).
  const auto at_end = [](ssize_t n) { return n == 0 || (n < 0 && errno == EAGAIN); };
  for (int records = 0; records < 200000; ++records) {  // a log written as fast as it is read ends
    ssize_t n = read_record(buf, sizeof buf);
    // devkmsg_read() (kernel/printk/printk.c): EPIPE when the next record this reader wanted
    // was overwritten; it has moved on to the oldest one left, so the next read goes on.
    if (n < 0 && errno == EPIPE) continue;
    if (at_end(n)) return out;
    if (n < 0) {  // EINVAL (a record larger than the buffer), EFAULT: the rest is unread
      out.stopped = "a read() of /dev/kmsg failed after " + std::to_string(records) + " reads (errno " + std::to_string(errno) + ")";
      return out;
    }
    out.text.append(buf, static_cast<size_t>(n));
    if (out.text.back() != '\n') out.text.push_back('\n');
  }
  // At the cap: one more read says whether the log ended with the last record taken.
  if (!at_end(read_record(buf, sizeof buf))) out.stopped = "stopped after its first 200000 records (a log printed as fast as it is read)";
  return out;
}

namespace {

// The kernel log on the live node: /dev/kmsg, without blocking at its end. Needs
// root or kernel.dmesg_restrict=0; unreadable leaves kernel_log_read false.
void read_live_kernel_log(StackState& s) {
  int fd = ::open("/dev/kmsg", O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return;
  const KmsgText log = read_kmsg([fd](char* buf, size_t size) { return ::read(fd, buf, size); });
  ::close(fd);
  parse_kernel_log(log.text, s);
  s.kernel_log_cut = log.stopped;
}

}  // namespace

void read_stack(InputFs& fs, Software& sw) {
  StackState& s = sw.stack;
  if (auto p = fs.read("/proc/driver/nvidia/params", 1 << 16)) parse_nvidia_params(*p, s);
  if (!sw.nvidia_version.empty()) parse_nvidia_version(sw.nvidia_version, s);
  // modprobe.d(5): these directories, *.conf files; kmod skips hidden files and a name that is
  // only ".conf" (libkmod-config.c conf_files_filter_out(): fn[0] == '.', len < 6), reads the
  // files of all directories in the order of their names, and of two files with one name only
  // the earlier directory's (conf_files_insert_sorted(): "Ignoring duplicate config file"), so
  // /etc/modprobe.d/x.conf masks /usr/lib/modprobe.d/x.conf.
  std::map<std::string, std::string> conf_files;  // name -> path
  for (const char* dir : {"/etc/modprobe.d", "/run/modprobe.d", "/usr/lib/modprobe.d", "/lib/modprobe.d"})
    if (auto names = fs.list(dir)) {
      s.modprobe_read = true;
      for (const auto& n : *names) {
        if (n.size() < 6 || n[0] == '.' || n.compare(n.size() - 5, 5, ".conf") != 0) continue;
        conf_files.emplace(n, std::string(dir) + "/" + n);
      }
    }
  for (const auto& [name, path] : conf_files)
    if (auto text = fs.read(path, 1 << 16)) parse_modprobe_conf(*text, path, s);
  if (auto clients = fs.list("/sys/kernel/mm/memory_peers")) {
    for (const auto& name : *clients) {
      PeerClient c;
      c.name = name;
      const std::string dir = "/sys/kernel/mm/memory_peers/" + name;
      if (auto v = fs.read(dir + "/version", 4096)) {
        c.has_version = true;
        c.version = trimmed(*v);
      }
      if (auto files = fs.list(dir))
        for (const auto& f : *files)
          if (f != "version")
            if (auto v = fs.read(dir + "/" + f, 4096)) c.counters[f] = trimmed(*v);
      s.peer_clients.push_back(std::move(c));
    }
  }
  if (auto v = fs.read("/sys/module/gdrpeer/parameters/peermem_name", 4096)) s.gdrpeer_client = trimmed(*v);
  if (auto v = fs.read("/sys/class/gdrpeer/gdrpeer/providers/peermem/cuda", 4096)) s.gdrpeer_cuda = trimmed(*v);
  if (auto files = fs.list("/sys/module/nvidia_peermem")) {
    s.peermem_sysfs = true;
    if (auto v = fs.read("/sys/module/nvidia_peermem/version", 4096)) s.peermem_version = trimmed(*v);
    if (auto params = fs.list("/sys/module/nvidia_peermem/parameters"))
      for (const auto& p : *params)
        if (auto v = fs.read("/sys/module/nvidia_peermem/parameters/" + p, 4096)) s.peermem_params[p] = trimmed(*v);
  }
  if (fs.describe() == "/")
    read_live_kernel_log(s);
  else if (auto log = fs.read("/gdrpeer-snapshot/kernel-log", (1 << 20) + 1)) {
    // The live reader's cut, as the snapshot recorded it (cmd_snapshot.cpp).
    if (auto cut = fs.read("/gdrpeer-snapshot/kernel-log-cut", 4096)) s.kernel_log_cut = trimmed(*cut);
    // gdrpeer writes only the lines it kept; a longer file (a whole dmesg put there) is read up
    // to 1 MiB, and the rest is said to be unread.
    if (log->size() > 1 << 20) {
      log->resize(1 << 20);
      s.kernel_log_cut += (s.kernel_log_cut.empty() ? "" : "; ") +
                          std::string("gdrpeer-snapshot/kernel-log is longer than 1 MiB: only its first 1 MiB read");
    }
    parse_kernel_log(*log, s);
  }
}

}  // namespace sysfs

std::string kernel_log_text(const StackState& s) {
  std::string out;
  for (const auto& l : s.kernel_log) out += l + "\n";
  return out;
}

}  // namespace gdrpeer::topo

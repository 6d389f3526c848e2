#include "gdrpeer/topo/rule_data.hpp"

#include <sys/stat.h>
#include <unistd.h>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>

#include "builtin_data.hpp"
#include "gdrpeer/topo/errors.hpp"
#include "gdrpeer/topo/inputs.hpp"
#include "hex.hpp"

namespace gdrpeer::topo {

namespace {

bool is_dir(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// The rule data is read by nlohmann_json (strict RFC 8259; its parser keeps its own stack, so
// no nesting depth can overflow ours). ordered_json: members stay in file order, which
// vendor_names' tie-breaking relies on.
using Json = nlohmann::ordered_json;

// A syntax error as every input error of the project is given: NAME:LINE:COL first. nlohmann's
// parse_error carries the 1-based offset of the byte it stopped at.
[[noreturn]] void syntax_error(std::string_view text, const std::string& name, const Json::parse_error& e) {
  const std::string_view before = text.substr(0, e.byte > 0 ? e.byte - 1 : 0);  // the text ahead of that byte
  const size_t line = 1 + static_cast<size_t>(std::count(before.begin(), before.end(), '\n'));
  const size_t last_nl = before.rfind('\n');
  const size_t col = before.size() - (last_nl == std::string_view::npos ? 0 : last_nl + 1) + 1;
  // what() is "[json.exception.parse_error.101] parse error at line L, column C: <reason>"
  std::string why = e.what();
  if (size_t c = why.find(": "); c != std::string::npos) why = why.substr(c + 2);
  throw DataError(name + ":" + std::to_string(line) + ":" + std::to_string(col) + ": " + why);
}

Json parse_rule_file(std::string_view text, const std::string& name) {
  try {
    return Json::parse(text);
  } catch (const Json::parse_error& e) {
    syntax_error(text, name, e);
  } catch (const Json::exception& e) {  // out_of_range: a number beyond a double
    throw DataError(name + ": " + e.what());
  }
}

// Typed access to the rule data with errors naming the file and the key.
struct Doc {
  std::string path;
  Json root;
};

// The member named key of an object, or nullptr (also when not an object).
const Json* member(const Json& obj, const char* key) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(key);
  return it == obj.end() ? nullptr : &*it;
}

// dir "": the data built into the binary, named "built-in:FILE" in errors.
Doc load_file(const std::string& dir, const std::string& file) {
  Doc d{dir.empty() ? "built-in:" + file : dir + "/" + file, {}};
  if (dir.empty()) {
    const auto& files = detail::builtin_rule_files();
    auto f = std::find_if(files.begin(), files.end(), [&](const detail::BuiltinFile& b) { return b.name == file; });
    if (f == files.end()) throw DataError(d.path + ": not built into this binary (set --data-dir or GDRPEER_DATA_DIR)");
    d.root = parse_rule_file(f->text, d.path);
  } else {
    std::optional<InputFile> in;
    try {
      in.emplace(d.path);
    } catch (const MissingInput&) {
      throw DataError(d.path + ": cannot open rule data (set --data-dir or GDRPEER_DATA_DIR)");
    }
    d.root = parse_rule_file(in->bytes(), d.path);
  }
  const Json* schema = member(d.root, "schema");
  if (!schema || !schema->is_number() || schema->get<double>() != 1)
    throw DataError(d.path + ": expected a JSON object with \"schema\": 1");
  return d;
}

// Where a value sits: the file and a key path, joined only when an error is
// thrown (building these strings eagerly cost more than parsing the files).
struct Where {
  const std::string& file;
  const char* ctx = nullptr;
  std::string str() const { return ctx ? file + " " + ctx : file; }
};

[[noreturn]] void bad(const Where& where, const std::string& what) { throw DataError(where.str() + ": " + what); }

const Json& at(const Json& obj, const char* key, const Where& where) {
  const Json* v = member(obj, key);
  if (!v) bad(where, std::string("missing \"") + key + "\"");
  return *v;
}

const Json& list_at(const Json& obj, const char* key, const Where& where) {
  const Json& v = at(obj, key, where);
  if (!v.is_array()) bad(where, std::string("\"") + key + "\" must be a list");
  return v;
}

const std::string& str(const Json& v, const Where& where) {
  if (!v.is_string()) bad(where, "expected a string");
  return v.get_ref<const std::string&>();
}

std::string str_or(const Json& obj, const char* key, const std::string& def, const Where& where) {
  const Json* v = member(obj, key);
  return v ? str(*v, {where.file, key}) : def;
}

long integer(const Json& v, const Where& where) {
  // As a double, as RFC 8259 numbers are (1.0 is the integer 1). Range first: converting a
  // double beyond long's range is undefined behaviour.
  const double x = v.is_number() ? v.get<double>() : 0.5;
  if (!v.is_number() || !(x >= -1e15 && x <= 1e15) || x != static_cast<double>(static_cast<long>(x))) bad(where, "expected an integer");
  return static_cast<long>(x);
}

long int_or(const Json& obj, const char* key, long def, const Where& where) {
  const Json* v = member(obj, key);
  return v ? integer(*v, {where.file, key}) : def;
}

uint16_t hex16(const Json& v, const Where& where) {
  if (!v.is_string()) bad(where, "expected a hex string");
  const std::string& s = v.get_ref<const std::string&>();
  char* e = nullptr;
  unsigned long x = std::strtoul(s.c_str(), &e, 16);
  if (s.empty() || *e || x > 0xffff) bad(where, "expected a 16-bit hex id, found \"" + s + "\"");
  return static_cast<uint16_t>(x);
}

std::vector<std::string> strings(const Json& j, const char* key, const Where& where) {
  std::vector<std::string> out;
  const Json* v = member(j, key);
  if (!v) return out;
  if (!v->is_array()) bad(where, std::string("\"") + key + "\" must be a list of strings");
  for (const auto& x : *v) {
    if (!x.is_string()) bad(where, std::string("\"") + key + "\" must be a list of strings");
    out.push_back(x.get<std::string>());
  }
  return out;
}

// "ids": ["vvvv", "vvvv:dddd", ...]
std::vector<std::pair<uint16_t, std::optional<uint16_t>>> id_list(const Json& j, const Where& where, const char* key = "ids") {
  std::vector<std::pair<uint16_t, std::optional<uint16_t>>> out;
  for (const auto& id : strings(j, key, where)) {
    const size_t colon = id.find(':');
    const uint16_t vendor = hex16(Json(id.substr(0, colon)), where);
    std::optional<uint16_t> device;
    if (colon != std::string::npos) device = hex16(Json(id.substr(colon + 1)), where);
    out.emplace_back(vendor, device);
  }
  return out;
}

bool id_listed(const std::vector<std::pair<uint16_t, std::optional<uint16_t>>>& ids, const Device& d) {
  if (!d.ids_known) return false;
  for (const auto& [v, dev] : ids)
    if (d.vendor == v && (!dev || d.device == *dev)) return true;
  return false;
}

}  // namespace

bool contains_any(std::string_view hay, const std::vector<std::string>& needles) {
  for (const auto& n : needles)
    if (!n.empty() && hay.find(n) != std::string_view::npos) return true;
  return false;
}

bool IdMatch::matches(const Device& d) const {
  if (!d.ids_known || d.vendor != vendor) return false;
  if (device) {
    uint16_t mask = device_mask.value_or(0xffff);
    if ((d.device & mask) != (*device & mask)) return false;
  }
  if (subsys_vendor && d.subsys_vendor != *subsys_vendor) return false;
  if (subsys_device) {
    uint16_t mask = subsys_device_mask.value_or(0xffff);
    if ((d.subsys_device & mask) != (*subsys_device & mask)) return false;
  }
  return true;
}

std::string RuleData::default_dir() {
  if (const char* env = std::getenv("GDRPEER_DATA_DIR"); env && *env) return env;
  // Installed with the binary: <prefix>/bin/gdrpeer -> <prefix>/share/gdrpeer/topology,
  // wherever the prefix was moved. Only relative to the binary: a fixed install path
  // would let a stale installed copy override a newer build's data.
  char exe[4096];
  ssize_t n = ::readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n > 0) {
    exe[n] = '\0';
    std::string bin(exe);
    bin = bin.substr(0, bin.rfind('/'));
    const std::string installed = bin.substr(0, bin.rfind('/')) + "/share/gdrpeer/topology";
    if (is_dir(installed)) return installed;
  }
  return {};
}

std::string RuleData::describe_dir(const std::string& dir) {
  if (dir.empty()) return std::string("built-in (topology/*.json of this build, fingerprint ") + detail::builtin_rule_fingerprint() + ")";
  const char* env = std::getenv("GDRPEER_DATA_DIR");
  return dir + (env && dir == env ? " (from GDRPEER_DATA_DIR)" : "");
}

RuleData RuleData::load(const std::string& dir) {
  RuleData k;
  k.data_dir = dir.empty() ? "built-in" : dir;

  Doc devf = load_file(dir, "devices.json");
  const Json& dev = devf.root;
  std::string w = devf.path;
  for (const auto& v : list_at(dev, "gpu_vendors", Where{w})) k.gpu_vendors.push_back(hex16(v, Where{w, "gpu_vendors"}));
  const Json& vn = at(dev, "vendor_names", Where{w});
  if (!vn.is_object()) bad(Where{w}, "\"vendor_names\" must be an object of id: [names]");
  for (const auto& [id, names] : vn.items()) {
    uint16_t vid = hex16(Json(id), Where{w, "vendor_names"});
    if (!names.is_array()) bad(Where{w}, "vendor_names." + id + " must be a list of strings");
    for (const auto& n : names) k.vendor_names.emplace_back(str(n, Where{w, "vendor_names"}), vid);
  }
  // Longest names first so "Advanced Micro Devices, Inc. [AMD/ATI]" wins over "[AMD]".
  std::stable_sort(k.vendor_names.begin(), k.vendor_names.end(),
                   [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
  for (const auto& r : list_at(dev, "rdma_nics", Where{w})) {
    NicRule n;
    n.id.vendor = hex16(at(r, "vendor", Where{w, "rdma_nics"}), Where{w, "rdma_nics.vendor"});
    if (const Json* v = member(r, "device")) n.id.device = hex16(*v, Where{w, "rdma_nics.device"});
    if (const Json* v = member(r, "device_mask")) n.id.device_mask = hex16(*v, Where{w, "rdma_nics.device_mask"});
    if (const Json* v = member(r, "base_class")) n.base_class = static_cast<uint8_t>(hex16(*v, Where{w, "rdma_nics.base_class"}));
    n.family = str_or(r, "family", "", Where{w, "rdma_nics"});
    if (const Json* v = member(r, "devices")) {
      if (!v->is_array()) bad(Where{w}, "\"devices\" must be a list of strings");
      for (const auto& d : *v) n.devices.push_back(hex16(d, Where{w, "rdma_nics.devices"}));
    }
    k.nics.push_back(n);
  }
  k.rdma_name_patterns = strings(dev, "rdma_name_patterns", Where{w});
  if (const Json* g = member(dev, "gpu_name_patterns")) {
    k.gpu_name_include = strings(*g, "include", Where{w});
    k.gpu_name_exclude = strings(*g, "exclude", Where{w});
  }
  if (const Json* g = member(dev, "bmc_vga")) {
    k.bmc_vga_ids = id_list(*g, Where{w, "bmc_vga"});
    k.bmc_vga_name_patterns = strings(*g, "name_patterns", Where{w, "bmc_vga"});
  }
  if (const Json* g = member(dev, "virtual_hardware")) {
    k.virtual_ids = id_list(*g, Where{w, "virtual_hardware"});
    k.virtual_name_patterns = strings(*g, "name_patterns", Where{w, "virtual_hardware"});
  }
  k.not_rdma_name_patterns = strings(dev, "not_rdma_name_patterns", Where{w});
  if (const Json* g = member(dev, "nvme_name_patterns")) {
    k.nvme_name_include = strings(*g, "include", Where{w});
    k.nvme_name_exclude = strings(*g, "exclude", Where{w});
  }
  for (const auto& sw : list_at(dev, "flatten_switches", Where{w})) {
    IdMatch m;
    m.vendor = hex16(at(sw, "vendor", Where{w, "flatten_switches"}), Where{w, "flatten_switches"});
    m.device = hex16(at(sw, "device", Where{w, "flatten_switches"}), Where{w, "flatten_switches"});
    if (const Json* v = member(sw, "subsys_vendor")) m.subsys_vendor = hex16(*v, Where{w});
    if (const Json* v = member(sw, "subsys_device")) m.subsys_device = hex16(*v, Where{w});
    if (const Json* v = member(sw, "subsys_device_mask")) m.subsys_device_mask = hex16(*v, Where{w});
    k.flatten_switches.push_back(m);
  }

  Doc gpuf = load_file(dir, "gpus.json");
  const Json& gpus = gpuf.root;
  w = gpuf.path;
  long bar1 = int_or(gpus, "bar1_min_mib", 0, Where{w});
  if (bar1 < 0 || bar1 > (1L << 30)) bad(Where{w}, "bar1_min_mib must be 0 .. 2^30");
  k.min_bar1_bytes = static_cast<uint64_t>(bar1) << 20;
  for (const auto& f : list_at(gpus, "families", Where{w})) {
    GpuFamily g;
    g.family = str(at(f, "family", Where{w, "families"}), Where{w, "families.family"});
    g.name = str_or(f, "name", g.family, Where{w, "families"});
    if (const Json* v = member(f, "devices")) {
      if (!v->is_array()) bad(Where{w}, "\"devices\" must be a list of strings");
      for (const auto& d : *v) g.devices.push_back(hex16(d, Where{w, "devices"}));
    }
    g.name_patterns = strings(f, "name_patterns", Where{w});
    k.gpu_families.push_back(g);
  }
  k.pci_ids_paths = strings(gpus, "pci_ids_paths", Where{w});
  if (const Json* nb = member(gpus, "nvlink_baseboards")) {
    const Where bw{w, "nvlink_baseboards"};
    const std::string common_source = str_or(*nb, "source", "", bw);
    for (const auto& e : list_at(*nb, "devices", bw)) {
      NvlinkBaseboardPart part;
      part.device = hex16(at(e, "id", Where{w, "nvlink_baseboards.devices"}), Where{w, "nvlink_baseboards.devices.id"});
      part.name = str(at(e, "name", Where{w, "nvlink_baseboards.devices"}), Where{w, "nvlink_baseboards.devices.name"});
      part.source = str_or(e, "source", common_source, Where{w, "nvlink_baseboards.devices"});
      k.nvlink_baseboard_parts.push_back(part);
    }
  }

  Doc rcf = load_file(dir, "root_complexes.json");
  w = rcf.path;
  for (const auto& r : list_at(rcf.root, "root_complexes", Where{w})) {
    RootComplex rc;
    rc.name = str(at(r, "name", Where{w, "root_complexes"}), Where{w, "root_complexes.name"});
    const Where rw{w, "root_complexes"};
    rc.vendor = str_or(r, "vendor", "", rw);
    rc.family = static_cast<int>(int_or(r, "family", -1, rw));
    if (member(r, "models"))
      for (const auto& m : list_at(r, "models", rw)) rc.models.push_back(static_cast<int>(integer(m, Where{w, "root_complexes.models"})));
    rc.arch = str_or(r, "arch", "", rw);
    rc.model_patterns = strings(r, "model_patterns", Where{w});
    rc.p2p = str_or(r, "p2p", "", rw);
    rc.cross_socket = str_or(r, "cross_socket", "", rw);
    rc.note = str_or(r, "note", "", rw);
    if (const Json* v = member(r, "arm_implementer"))
      rc.models = {static_cast<int>(integer(*v, Where{w, "root_complexes.arm_implementer"})),
                   static_cast<int>(int_or(r, "arm_part", -1, rw))};
    rc.chipset_ids = id_list(r, rw, "chipset_ids");
    rc.chipset_gpu_families = strings(r, "chipset_gpu_families", Where{w});
    if (rc.p2p != "good" && rc.p2p != "poor" && rc.p2p != "unsupported")
      throw DataError(w + ": root complex \"" + rc.name + "\": p2p must be good, poor or unsupported");
    k.root_complexes.push_back(rc);
  }

  Doc platf = load_file(dir, "platforms.json");
  const Json& plats = platf.root;
  w = platf.path;
  k.cloud_dmi_vendors = strings(plats, "cloud_dmi_vendors", Where{w});
  for (const auto& r : list_at(plats, "rules", Where{w})) {
    PlatformRule p;
    p.id = str(at(r, "id", Where{w, "rules"}), Where{w, "rules.id"});
    const Where pw{w, "rules"};
    p.severity = str(at(r, "severity", pw), Where{w, "rules.severity"});
    if (p.severity != "degraded" && p.severity != "unreliable" && p.severity != "blocked")
      throw DataError(w + ": rule " + p.id + ": severity must be degraded, unreliable or blocked");
    p.applies_to = str_or(r, "applies_to", "all", pw);
    if (p.applies_to != "all" && p.applies_to != "gpu-nic" && p.applies_to != "integrated-gpu")
      throw DataError(w + ": rule " + p.id + ": applies_to must be all, gpu-nic or integrated-gpu");
    p.arch = str_or(r, "arch", "", pw);
    p.cpu_patterns = strings(r, "cpu_patterns", Where{w});
    p.dmi_patterns = strings(r, "dmi_patterns", Where{w});
    p.gpu_families = strings(r, "gpu_families", Where{w});
    // A rule says where it applies: without a condition it would fire on every node (or, for an
    // integrated GPU, which is in no pair, on none), neither of which a rule file means.
    const bool node_condition = !p.arch.empty() || !p.cpu_patterns.empty() || !p.dmi_patterns.empty();
    if (p.applies_to == "integrated-gpu" && !node_condition)
      throw DataError(w + ": rule " + p.id +
                      ": an integrated-gpu rule needs arch, cpu_patterns or dmi_patterns (gpu_families is not checked for it)");
    if (!node_condition && p.gpu_families.empty())
      throw DataError(w + ": rule " + p.id + ": needs at least one condition: arch, cpu_patterns, dmi_patterns or gpu_families");
    p.reason = str(at(r, "reason", pw), Where{w, "rules.reason"});
    p.fix = str_or(r, "fix", "", pw);
    k.platforms.push_back(p);
  }
  return k;
}

std::string GpuFamilyMatch::provenance() const {
  switch (from) {
    case From::InputName: return " (GPU family from its name \"" + name + "\")";
    case From::PciIds: return " (GPU family from the pci.ids name \"" + name + "\": the device id is not in topology/gpus.json)";
    case From::None:
    case From::Table: break;
  }
  return "";
}

const GpuFamily* RuleData::gpu_family_by_name(std::string_view name) const {
  if (name.empty()) return nullptr;
  for (const auto& f : gpu_families)
    if (contains_any(name, f.name_patterns)) return &f;
  return nullptr;
}

const NvlinkBaseboardPart* RuleData::nvlink_baseboard_part(const Device& d) const {
  if (!d.ids_known || d.vendor != 0x10de) return nullptr;
  for (const auto& p : nvlink_baseboard_parts)
    if (p.device == d.device) return &p;
  return nullptr;
}

std::string RuleData::pci_ids_path() const {
  if (const char* env = std::getenv("GDRPEER_PCI_IDS")) return env;  // "" turns the fallback off
  for (const auto& p : pci_ids_paths)
    if (::access(p.c_str(), R_OK) == 0) return p;
  return "";
}

GpuFamilyMatch RuleData::gpu_family_match(const Device& d) const {
  GpuFamilyMatch m;
  const bool nvidia = d.ids_known && d.vendor == 0x10de;
  if (nvidia)
    for (const auto& f : gpu_families)
      if (std::find(f.devices.begin(), f.devices.end(), d.device) != f.devices.end()) {
        m.family = &f;
        m.from = GpuFamilyMatch::From::Table;
        return m;
      }
  if (const GpuFamily* f = gpu_family_by_name(d.name)) {
    m.family = f;
    m.from = GpuFamilyMatch::From::InputName;
    m.name = d.name;
    return m;
  }
  // Only an NVIDIA id the table lacks costs a pci.ids lookup (a newer GPU than
  // the table, or a sysfs input, which carries no names).
  if (!nvidia) return m;
  std::string path = pci_ids_path();
  if (path.empty()) return m;
  if (auto name = pci_ids_device_name(path, d.vendor, d.device))
    if (const GpuFamily* f = gpu_family_by_name(*name)) {
      m.family = f;
      m.from = GpuFamilyMatch::From::PciIds;
      m.name = *name;
    }
  return m;
}

// pci.ids' vendor name of `vendor` and device name of vendor:device ("" when the vendor has no such
// device), or nullopt when the file or the vendor is missing.
static std::optional<std::pair<std::string, std::string>> pci_ids_names(const std::string& path, uint16_t vendor, uint16_t device) {
  std::optional<InputFile> in;
  try {
    in.emplace(path);
  } catch (const MissingInput&) {
    return std::nullopt;
  }
  // pci.ids: "VVVV  Vendor name" at column 0, then "\tDDDD  Device name" lines
  // (and "\t\tSSSS SSSS  Subsystem" lines) until the next vendor line.
  char vid_line[8], did_line[8];
  std::snprintf(vid_line, sizeof vid_line, "\n%04x ", vendor);
  std::snprintf(did_line, sizeof did_line, "\n\t%04x ", device);
  const std::string_view vid = vid_line, did = did_line;
  std::string_view b = in->bytes();
  // The vendor line, also when it is the file's first line (no newline before it).
  size_t v = b.substr(0, vid.size() - 1) == vid.substr(1) ? 0 : b.find(vid);
  if (v == std::string_view::npos) return std::nullopt;
  auto text_after = [&](size_t at) {
    while (at < b.size() && b[at] == ' ') ++at;
    const size_t eol = b.find('\n', at);
    std::string t(b.substr(at, eol == std::string_view::npos ? std::string_view::npos : eol - at));
    while (!t.empty() && (t.back() == '\r' || t.back() == ' ')) t.pop_back();
    return t;
  };
  std::pair<std::string, std::string> names{text_after(v + (v == 0 ? vid.size() - 1 : vid.size())), ""};
  // The vendor's block ends at the next line that does not start with a tab
  // (another vendor, or the "C xx" class section); comments and blank lines do not end it.
  size_t end = v + 1;
  for (;;) {
    end = b.find('\n', end);
    if (end == std::string_view::npos || end + 1 >= b.size()) {
      end = b.size();
      break;
    }
    char c = b[end + 1];
    if (c != '\t' && c != '#' && c != '\n' && c != '\r') break;
    ++end;
  }
  std::string_view block = b.substr(v, end - v);
  const size_t at = block.find(did);
  if (at != std::string_view::npos) names.second = text_after(v + at + did.size());
  return names;
}

std::optional<std::string> pci_ids_device_name(const std::string& path, uint16_t vendor, uint16_t device) {
  const auto names = pci_ids_names(path, vendor, device);
  if (!names || names->second.empty()) return std::nullopt;
  return names->second;
}

std::string pci_ids_lspci_name(const std::string& path, uint16_t vendor, uint16_t device) {
  char ids[16];
  std::snprintf(ids, sizeof ids, "%04x:%04x", vendor, device);
  const auto names = pci_ids_names(path, vendor, device);
  if (!names || names->first.empty()) return std::string("Device ") + ids;
  if (names->second.empty()) return names->first + " Device " + (ids + 5);
  return names->first + " " + names->second;
}

namespace {

// The entry's CPU fields (arch, vendor, family/models or ARM implementer/part, model names) all
// match this CPU, and it gives at least one.
bool cpu_matches(const RootComplex& rc, const CpuInfo& cpu) {
  bool any = false;
  if (!rc.arch.empty()) {
    if (cpu.arch != rc.arch) return false;
    any = true;
  }
  if (!rc.vendor.empty()) {
    if (cpu.vendor != rc.vendor) return false;
    any = true;
  }
  if (rc.arch == "aarch64" && rc.models.size() == 2) {
    // ARM entries: models = {implementer, part}
    if (cpu.arm_implementer != rc.models[0] || cpu.arm_part != rc.models[1]) return false;
    any = true;
  } else {
    if (rc.family >= 0) {
      if (cpu.family != rc.family) return false;
      any = true;
    }
    if (!rc.models.empty()) {
      if (std::find(rc.models.begin(), rc.models.end(), cpu.model) == rc.models.end()) return false;
      any = true;
    }
  }
  if (!rc.model_patterns.empty()) {
    if (!contains_any(cpu.model_name, rc.model_patterns)) return false;
    any = true;
  }
  return any;
}

bool needs_chipset(const RootComplex& rc) { return !rc.chipset_ids.empty() || !rc.chipset_gpu_families.empty(); }

}  // namespace

const RootComplex* RuleData::root_complex(const Topology& t, const std::vector<std::string>& node_families, bool* cores_only) const {
  for (const auto& rc : root_complexes) {
    if (!cpu_matches(rc, t.cpu)) continue;
    if (!needs_chipset(rc)) return &rc;
    bool seen = false;
    for (const Device& d : t.devices) seen = seen || id_listed(rc.chipset_ids, d);
    for (const std::string& f : node_families)
      seen = seen || std::find(rc.chipset_gpu_families.begin(), rc.chipset_gpu_families.end(), f) != rc.chipset_gpu_families.end();
    if (seen) return &rc;
    if (cores_only) *cores_only = true;  // e.g. Neoverse V2 cores without a TH500 root port or a C2C GPU
  }
  return nullptr;
}

bool RuleData::flattens(const Device& d) const {
  for (const auto& m : flatten_switches)
    if (m.matches(d)) return true;
  return false;
}

std::optional<uint16_t> RuleData::vendor_from_name(std::string_view name) const {
  for (const auto& [n, id] : vendor_names)
    if (name.substr(0, n.size()) == n) return id;
  return std::nullopt;
}

std::string RuleData::virtual_hardware(const Topology& t) const {
  for (const auto& d : t.devices)
    if (d.ids_known ? id_listed(virtual_ids, d) : contains_any(d.name, virtual_name_patterns)) {
      std::string what = d.name;
      if (d.ids_known) {
        char ids[16];
        std::snprintf(ids, sizeof ids, "%04x:%04x", d.vendor, d.device);
        what += std::string(what.empty() ? "" : " ") + "[" + ids + "]";
      }
      return d.bdf + (what.empty() ? "" : " " + what);
    }
  return "";
}

void assign_roles(Topology& t, const RuleData& k) {
  for (auto& d : t.devices) {
    if (d.role_overridden || d.is_bridge) continue;
    if (d.role != Role::None) continue;  // the input said so (NCCL <gpu>/<nic>)
    std::optional<uint16_t> vendor = d.ids_known ? std::optional<uint16_t>(d.vendor) : k.vendor_from_name(d.name);
    bool gpu_vendor = vendor && std::find(k.gpu_vendors.begin(), k.gpu_vendors.end(), *vendor) != k.gpu_vendors.end();
    // Without a class the name decides. `lspci -tvn` names a device by its ids alone (the parser
    // keeps no name): the name `lspci -tv` prints from pci.ids is read instead.
    std::string name = d.name;
    if (!d.class_known && d.ids_known && name.empty())
      if (const std::string path = k.pci_ids_path(); !path.empty()) name = pci_ids_lspci_name(path, d.vendor, d.device);
    // GPU; a BMC's VGA console (ASPEED, Matrox, ATI ES1000) is a display function but not one.
    const bool bmc = contains_any(name, k.bmc_vga_name_patterns) || id_listed(k.bmc_vga_ids, d);
    if (bmc) continue;
    if (d.class_known) {
      if (d.base_class() == 0x03 && gpu_vendor) d.role = Role::GPU;
    } else if (gpu_vendor && contains_any(name, k.gpu_name_include) && !contains_any(name, k.gpu_name_exclude)) {
      d.role = Role::GPU;
    }
    if (d.role != Role::None) continue;
    // InfiniBand HCAs come as network controllers (0x0207) or, older ones, as the
    // serial-bus class InfiniBand (0x0c06).
    const bool network_class = d.class_known && (d.base_class() == 0x02 || (d.class_code >> 8) == 0x0c06);
    // RDMA NIC: a bound RDMA device, an id rule, or (without ids) a name pattern.
    bool nic = !d.rdma_name.empty();
    if (!nic && d.ids_known) {
      for (const auto& r : k.nics) {
        if (r.id.vendor != d.vendor) continue;
        if (r.id.device) {
          uint16_t mask = r.id.device_mask.value_or(0xffff);
          if ((d.device & mask) != (*r.id.device & mask)) continue;
        }
        if (!r.devices.empty() && std::find(r.devices.begin(), r.devices.end(), d.device) == r.devices.end()) continue;
        if (r.base_class && d.class_known && d.base_class() != *r.base_class && !(*r.base_class == 0x02 && network_class)) continue;
        if (r.base_class && !d.class_known && !contains_any(name, k.rdma_name_patterns)) continue;
        nic = true;
        break;
      }
    }
    if (!nic && !d.ids_known && contains_any(d.name, k.rdma_name_patterns)) nic = true;
    if (nic && d.class_known && !network_class) nic = false;  // e.g. BlueField DMA/bridge functions
    // BlueField's SoC Management Interface (rshim) carries no RDMA; in lspci -tv text, which
    // has no classes, only its name tells (a bound RDMA device still makes a function a NIC).
    if (nic && d.rdma_name.empty() && contains_any(name, k.not_rdma_name_patterns)) nic = false;
    if (nic) {
      d.role = Role::NIC;
      continue;
    }
    if (d.class_known ? (d.class_code >> 8) == 0x0108 : contains_any(name, k.nvme_name_include) && !contains_any(name, k.nvme_name_exclude))
      d.role = Role::NVMe;
  }
}

void apply_role_override(Topology& t, const std::string& spec) {
  size_t eq = spec.find('=');
  if (eq == std::string::npos) throw std::invalid_argument("--role expects ROLE=BDF, got \"" + spec + "\"");
  std::string role = spec.substr(0, eq);
  std::transform(role.begin(), role.end(), role.begin(), [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  Role r;
  if (role == "GPU")
    r = Role::GPU;
  else if (role == "NIC")
    r = Role::NIC;
  else if (role == "NVME")
    r = Role::NVMe;
  else if (role == "NONE")
    r = Role::None;
  else
    throw std::invalid_argument("--role: unknown role \"" + spec.substr(0, eq) + "\" (expected GPU, NIC, NVME or NONE)");
  auto bdf = parse_bdf(spec.substr(eq + 1));
  if (!bdf) throw std::invalid_argument("--role: expected a PCI address like 0000:01:00.0, got \"" + spec.substr(eq + 1) + "\"");
  int i = t.find(*bdf);
  if (i < 0) throw std::invalid_argument("--role: no PCI device " + *bdf + " in " + t.source);
  t.devices[i].role = r;
  t.devices[i].role_overridden = true;
}

}  // namespace gdrpeer::topo

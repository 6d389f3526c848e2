#include "gdrpeer/topo/knowledge.hpp"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "gdrpeer/topo/errors.hpp"

#ifndef GDRPEER_DATA_INSTALL_DIR
#define GDRPEER_DATA_INSTALL_DIR "/usr/local/share/gdrpeer/topology"
#endif
#ifndef GDRPEER_DATA_SOURCE_DIR
#define GDRPEER_DATA_SOURCE_DIR ""
#endif

namespace gdrpeer::topo {

using nlohmann::json;

namespace {

bool is_dir(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

json load_file(const std::string& dir, const std::string& file) {
  std::string path = dir + "/" + file;
  std::ifstream in(path);
  if (!in) throw DataError(path + ": cannot open rule data (set --data-dir or GDRPEER_DATA_DIR)");
  std::stringstream ss;
  ss << in.rdbuf();
  try {
    json j = json::parse(ss.str());
    if (!j.is_object() || j.value("schema", 0) != 1) throw DataError(path + ": expected a JSON object with \"schema\": 1");
    return j;
  } catch (const json::parse_error& e) {
    throw DataError(path + ": " + e.what());
  }
}

uint16_t hex16(const json& v, const std::string& where) {
  if (!v.is_string()) throw DataError(where + ": expected a hex string");
  std::string s = v.get<std::string>();
  char* e = nullptr;
  unsigned long x = std::strtoul(s.c_str(), &e, 16);
  if (s.empty() || *e || x > 0xffff) throw DataError(where + ": expected a 16-bit hex id, found \"" + s + "\"");
  return static_cast<uint16_t>(x);
}

std::vector<std::string> strings(const json& j, const char* key, const std::string& where) {
  std::vector<std::string> out;
  if (!j.contains(key)) return out;
  if (!j[key].is_array()) throw DataError(where + ": \"" + key + "\" must be a list of strings");
  for (const auto& v : j[key]) {
    if (!v.is_string()) throw DataError(where + ": \"" + key + "\" must be a list of strings");
    out.push_back(v.get<std::string>());
  }
  return out;
}

bool contains_any(const std::string& hay, const std::vector<std::string>& needles) {
  for (const auto& n : needles)
    if (!n.empty() && hay.find(n) != std::string::npos) return true;
  return false;
}

}  // namespace

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

std::string Knowledge::default_dir() {
  if (const char* env = std::getenv("GDRPEER_DATA_DIR"); env && *env) return env;
  // Installed next to the binary: <prefix>/bin/gdrpeer -> <prefix>/share/gdrpeer/topology
  char exe[4096];
  ssize_t n = ::readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n > 0) {
    exe[n] = '\0';
    std::string p(exe);
    p = p.substr(0, p.rfind('/'));
    std::string prefix = p.substr(0, p.rfind('/'));
    for (const std::string& cand : {prefix + "/share/gdrpeer/topology", p + "/topology", p + "/../topology"})
      if (is_dir(cand)) return cand;
  }
  if (is_dir(GDRPEER_DATA_INSTALL_DIR)) return GDRPEER_DATA_INSTALL_DIR;
  return GDRPEER_DATA_SOURCE_DIR;
}

Knowledge Knowledge::load(const std::string& dir) {
  Knowledge k;
  k.data_dir = dir;
  try {
    json dev = load_file(dir, "devices.json");
    std::string w = dir + "/devices.json";
    for (const auto& v : dev.at("gpu_vendors")) k.gpu_vendors.push_back(hex16(v, w + " gpu_vendors"));
    for (auto& [id, names] : dev.at("vendor_names").items())
      for (const auto& n : names) k.vendor_names.emplace_back(n.get<std::string>(), hex16(json(id), w + " vendor_names"));
    // Longest names first so "Advanced Micro Devices, Inc. [AMD/ATI]" wins over "[AMD]".
    std::sort(k.vendor_names.begin(), k.vendor_names.end(),
              [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
    for (const auto& r : dev.at("rdma_nics")) {
      NicRule n;
      n.id.vendor = hex16(r.at("vendor"), w + " rdma_nics.vendor");
      if (r.contains("device")) n.id.device = hex16(r["device"], w + " rdma_nics.device");
      if (r.contains("device_mask")) n.id.device_mask = hex16(r["device_mask"], w + " rdma_nics.device_mask");
      if (r.contains("base_class")) n.base_class = static_cast<uint8_t>(hex16(r["base_class"], w + " rdma_nics.base_class"));
      n.family = r.value("family", "");
      for (const auto& d : strings(r, "devices", w)) n.devices.push_back(hex16(json(d), w + " rdma_nics.devices"));
      k.nics.push_back(n);
    }
    k.rdma_name_patterns = strings(dev, "rdma_name_patterns", w);
    if (dev.contains("gpu_name_patterns")) {
      k.gpu_name_include = strings(dev["gpu_name_patterns"], "include", w);
      k.gpu_name_exclude = strings(dev["gpu_name_patterns"], "exclude", w);
    }
    if (dev.contains("nvme_name_patterns")) {
      k.nvme_name_include = strings(dev["nvme_name_patterns"], "include", w);
      k.nvme_name_exclude = strings(dev["nvme_name_patterns"], "exclude", w);
    }
    for (const auto& s : dev.at("flatten_switches")) {
      IdMatch m;
      m.vendor = hex16(s.at("vendor"), w + " flatten_switches");
      m.device = hex16(s.at("device"), w + " flatten_switches");
      if (s.contains("subsys_vendor")) m.subsys_vendor = hex16(s["subsys_vendor"], w);
      if (s.contains("subsys_device")) m.subsys_device = hex16(s["subsys_device"], w);
      if (s.contains("subsys_device_mask")) m.subsys_device_mask = hex16(s["subsys_device_mask"], w);
      k.flatten_switches.push_back(m);
    }

    json gpus = load_file(dir, "gpus.json");
    w = dir + "/gpus.json";
    k.min_bar1_bytes = gpus.value("bar1_min_mib", 0ull) << 20;
    for (const auto& f : gpus.at("families")) {
      GpuFamily g;
      g.family = f.at("family").get<std::string>();
      g.name = f.value("name", g.family);
      for (const auto& d : strings(f, "devices", w)) g.devices.push_back(hex16(json(d), w + " devices"));
      g.name_patterns = strings(f, "name_patterns", w);
      k.gpu_families.push_back(g);
    }

    json rcs = load_file(dir, "root_complexes.json");
    w = dir + "/root_complexes.json";
    for (const auto& r : rcs.at("root_complexes")) {
      RootComplex rc;
      rc.name = r.at("name").get<std::string>();
      rc.vendor = r.value("vendor", "");
      rc.family = r.value("family", -1);
      if (r.contains("models")) rc.models = r["models"].get<std::vector<int>>();
      rc.arch = r.value("arch", "");
      rc.model_patterns = strings(r, "model_patterns", w);
      rc.p2p = r.value("p2p", "");
      rc.cross_socket = r.value("cross_socket", "");
      rc.note = r.value("note", "");
      if (r.contains("arm_implementer")) rc.models = {r["arm_implementer"].get<int>(), r.value("arm_part", -1)};
      if (rc.p2p != "good" && rc.p2p != "poor" && rc.p2p != "unsupported")
        throw DataError(w + ": root complex \"" + rc.name + "\": p2p must be good, poor or unsupported");
      k.root_complexes.push_back(rc);
    }

    json plats = load_file(dir, "platforms.json");
    w = dir + "/platforms.json";
    k.cloud_dmi_vendors = strings(plats, "cloud_dmi_vendors", w);
    for (const auto& r : plats.at("rules")) {
      PlatformRule p;
      p.id = r.at("id").get<std::string>();
      p.severity = r.at("severity").get<std::string>();
      if (p.severity != "degraded" && p.severity != "unreliable" && p.severity != "blocked")
        throw DataError(w + ": rule " + p.id + ": severity must be degraded, unreliable or blocked");
      p.applies_to = r.value("applies_to", "all");
      p.arch = r.value("arch", "");
      p.cpu_patterns = strings(r, "cpu_patterns", w);
      p.dmi_patterns = strings(r, "dmi_patterns", w);
      p.gpu_families = strings(r, "gpu_families", w);
      p.reason = r.at("reason").get<std::string>();
      p.fix = r.value("fix", "");
      k.platforms.push_back(p);
    }
  } catch (const json::exception& e) {
    throw DataError(dir + ": malformed rule data: " + e.what());
  }
  return k;
}


const GpuFamily* Knowledge::gpu_family(const Device& d) const {
  if (d.ids_known && d.vendor == 0x10de)
    for (const auto& f : gpu_families)
      if (std::find(f.devices.begin(), f.devices.end(), d.device) != f.devices.end()) return &f;
  for (const auto& f : gpu_families)
    if (contains_any(d.name, f.name_patterns)) return &f;
  return nullptr;
}

const RootComplex* Knowledge::root_complex(const CpuInfo& cpu) const {
  for (const auto& rc : root_complexes) {
    bool any = false;
    if (!rc.arch.empty()) {
      if (cpu.arch != rc.arch) continue;
      any = true;
    }
    if (!rc.vendor.empty()) {
      if (cpu.vendor != rc.vendor) continue;
      any = true;
    }
    if (rc.arch == "aarch64" && rc.models.size() == 2) {
      // ARM entries: models = {implementer, part}
      if (cpu.arm_implementer != rc.models[0] || cpu.arm_part != rc.models[1]) continue;
      any = true;
    } else {
      if (rc.family >= 0) {
        if (cpu.family != rc.family) continue;
        any = true;
      }
      if (!rc.models.empty()) {
        if (std::find(rc.models.begin(), rc.models.end(), cpu.model) == rc.models.end()) continue;
        any = true;
      }
    }
    if (!rc.model_patterns.empty()) {
      if (!contains_any(cpu.model_name, rc.model_patterns)) continue;
      any = true;
    }
    if (any) return &rc;
  }
  return nullptr;
}

bool Knowledge::flattens(const Device& d) const {
  for (const auto& m : flatten_switches)
    if (m.matches(d)) return true;
  return false;
}

std::optional<uint16_t> Knowledge::vendor_from_name(std::string_view name) const {
  for (const auto& [n, id] : vendor_names)
    if (name.substr(0, n.size()) == n) return id;
  return std::nullopt;
}

void assign_roles(Topology& t, const Knowledge& k) {
  for (auto& d : t.devices) {
    if (d.role_overridden || d.is_bridge) continue;
    if (d.role != Role::None) continue;  // the input said so (NCCL <gpu>/<nic>)
    std::optional<uint16_t> vendor = d.ids_known ? std::optional<uint16_t>(d.vendor) : k.vendor_from_name(d.name);
    bool gpu_vendor = vendor && std::find(k.gpu_vendors.begin(), k.gpu_vendors.end(), *vendor) != k.gpu_vendors.end();
    // GPU
    if (d.class_known) {
      if (d.base_class() == 0x03 && gpu_vendor) d.role = Role::GPU;
    } else if (gpu_vendor && contains_any(d.name, k.gpu_name_include) && !contains_any(d.name, k.gpu_name_exclude)) {
      d.role = Role::GPU;
    }
    if (d.role != Role::None) continue;
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
        if (r.base_class && d.class_known && d.base_class() != *r.base_class) continue;
        if (r.base_class && !d.class_known && !contains_any(d.name, k.rdma_name_patterns)) continue;
        nic = true;
        break;
      }
    }
    if (!nic && !d.ids_known && contains_any(d.name, k.rdma_name_patterns)) nic = true;
    if (nic && d.class_known && d.base_class() != 0x02) nic = false;  // e.g. BlueField DMA/bridge functions
    if (nic) {
      d.role = Role::NIC;
      continue;
    }
    if (d.class_known ? (d.class_code >> 8) == 0x0108
                      : contains_any(d.name, k.nvme_name_include) && !contains_any(d.name, k.nvme_name_exclude))
      d.role = Role::NVMe;
  }
}

void apply_role_override(Topology& t, const std::string& spec) {
  size_t eq = spec.find('=');
  if (eq == std::string::npos) throw std::invalid_argument("--role expects ROLE=BDF, got \"" + spec + "\"");
  std::string role = spec.substr(0, eq);
  std::transform(role.begin(), role.end(), role.begin(), [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  Role r;
  if (role == "GPU") r = Role::GPU;
  else if (role == "NIC") r = Role::NIC;
  else if (role == "NVME") r = Role::NVMe;
  else if (role == "NONE") r = Role::None;
  else throw std::invalid_argument("--role: unknown role \"" + spec.substr(0, eq) + "\" (expected GPU, NIC, NVME or NONE)");
  auto bdf = parse_bdf(spec.substr(eq + 1));
  if (!bdf) throw std::invalid_argument("--role: expected a PCI address like 0000:01:00.0, got \"" + spec.substr(eq + 1) + "\"");
  int i = t.find(*bdf);
  if (i < 0) throw std::invalid_argument("--role: no PCI device " + *bdf + " in " + t.source);
  t.devices[i].role = r;
  t.devices[i].role_overridden = true;
}

}  // namespace gdrpeer::topo

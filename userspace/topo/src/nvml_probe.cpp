// NVML's NVLink facts as one record (nvml_probe.hpp): asked live, carried by
// snapshots as text, applied to the model by one function either way.
#include "gdrpeer/topo/nvml_probe.hpp"

#include <cstdio>
#include <cstdlib>
#include <future>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <vector>

#include "gdrpeer/dynload/nvml.hpp"

namespace gdrpeer::topo {

namespace {

// "00000000:06:00.0" -> "0000:06:00.0"; "" when malformed or hidden (a VM shows a link's
// far end it does not expose as "FFFFFFFF:FF:FF.0").
std::string nvml_bdf(const std::string& id) {
  unsigned dom = 0, bus = 0, slot = 0, fn = 0;
  if (std::sscanf(id.c_str(), "%x:%x:%x.%x", &dom, &bus, &slot, &fn) != 4) return "";
  if (dom == 0xffffffffu) return "";
  return make_bdf(dom, bus, slot, fn);
}

std::string nvml_error(const nvml::Api& nv, nvml::nvmlReturn_t rc) {
  std::string s = "nvmlReturn_t " + std::to_string(rc);
  if (nv.nvmlErrorString != nullptr)
    if (const char* text = nv.nvmlErrorString(rc)) s += " (" + std::string(text) + ")";
  return s;
}

// nvmlInit once per process and library: its result is kept for later callers.
nvml::nvmlReturn_t init_once(const nvml::Api& nv, const std::string& library) {
  static std::mutex mu;
  static std::map<std::string, nvml::nvmlReturn_t> done;
  std::lock_guard lock(mu);
  auto it = done.find(library);
  if (it == done.end()) it = done.emplace(library, nv.nvmlInit()).first;
  return it->second;
}

const char* type_word(int t) {
  switch (t) {
    case nvml::NVML_NVLINK_DEVICE_TYPE_GPU: return "gpu";
    case nvml::NVML_NVLINK_DEVICE_TYPE_IBMNPU: return "npu";
    case nvml::NVML_NVLINK_DEVICE_TYPE_SWITCH: return "switch";
    default: return "unknown";
  }
}

int type_of_word(const std::string& w) {
  if (w == "gpu") return nvml::NVML_NVLINK_DEVICE_TYPE_GPU;
  if (w == "npu") return nvml::NVML_NVLINK_DEVICE_TYPE_IBMNPU;
  if (w == "switch") return nvml::NVML_NVLINK_DEVICE_TYPE_SWITCH;
  return -1;
}

const char* fabric_word(int s) {
  switch (s) {
    case nvml::NVML_GPU_FABRIC_STATE_NOT_SUPPORTED: return "not-supported";
    case nvml::NVML_GPU_FABRIC_STATE_NOT_STARTED: return "not-started";
    case nvml::NVML_GPU_FABRIC_STATE_IN_PROGRESS: return "in-progress";
    case nvml::NVML_GPU_FABRIC_STATE_COMPLETED: return "completed";
    default: return "unknown";
  }
}

// One GPU's facts, or nothing when NVML cannot open it (fallen off the bus: nothing to say
// about its links). NVML is thread-safe; each call here touches only device @p index.
std::optional<NvmlGpu> probe_gpu(const nvml::Api& nv, unsigned index) {
  nvml::nvmlDevice_t dev = nullptr;
  nvml::nvmlPciInfo_t info{};
  if (nv.nvmlDeviceGetHandleByIndex(index, &dev) != nvml::NVML_SUCCESS || nv.nvmlDeviceGetPciInfo(dev, &info) != nvml::NVML_SUCCESS)
    return std::nullopt;
  NvmlGpu g;
  g.bus_id = info.busId;
  g.pci_device_id = info.pciDeviceId;
  if (nv.nvmlDeviceGetGpuFabricInfo) {
    nvml::nvmlGpuFabricInfo_t fi{};
    if (nv.nvmlDeviceGetGpuFabricInfo(dev, &fi) == nvml::NVML_SUCCESS) {
      g.fabric_state = fi.state;
      if (fi.state == nvml::NVML_GPU_FABRIC_STATE_COMPLETED) g.fabric_status = fi.status;
    }
  }
  // Link indices are dense from 0; NVML refuses the first one past the GPU's last
  // (Invalid Argument at 18 on an H200), and a GPU without NVLink refuses link 0.
  for (unsigned link = 0; link < 64; ++link) {
    int active = 0;
    if (nv.nvmlDeviceGetNvLinkState(dev, link, &active) != nvml::NVML_SUCCESS) break;
    NvmlLink l;
    l.index = link;
    l.active = active == nvml::NVML_FEATURE_ENABLED;
    if (l.active) {
      nvml::nvmlPciInfo_t peer{};
      if (nv.nvmlDeviceGetNvLinkRemotePciInfo(dev, link, &peer) == nvml::NVML_SUCCESS) l.remote_bus_id = peer.busId;
      int kind = -1;
      if (nv.nvmlDeviceGetNvLinkRemoteDeviceType && nv.nvmlDeviceGetNvLinkRemoteDeviceType(dev, link, &kind) == nvml::NVML_SUCCESS)
        l.remote_type = kind;
    }
    g.links.push_back(l);
  }
  return g;
}

}  // namespace

bool has_nvidia_gpu_function(const Topology& t) {
  for (const auto& d : t.devices)
    if (d.ids_known && d.vendor == 0x10de && d.class_known && d.base_class() == 0x03) return true;
  return false;
}

NvmlRecord probe_nvml(const char* library) {
  NvmlRecord r;
  r.asked = true;
  r.library = library;
  std::string why;
  const nvml::Api* nv = nvml::load(&why, library);
  if (!nv) {
    r.error = why;
    return r;
  }
  if (const nvml::nvmlReturn_t rc = init_once(*nv, library); rc != nvml::NVML_SUCCESS) {
    r.error = "nvmlInit failed: " + nvml_error(*nv, rc);
    return r;
  }
  if (nv->nvmlSystemGetDriverVersion) {
    char v[96] = {};
    if (nv->nvmlSystemGetDriverVersion(v, sizeof v - 1) == nvml::NVML_SUCCESS) r.driver_version = v;
  }
  unsigned n = 0;
  if (const nvml::nvmlReturn_t rc = nv->nvmlDeviceGetCount(&n); rc != nvml::NVML_SUCCESS) {
    r.error = "nvmlDeviceGetCount failed: " + nvml_error(*nv, rc);
    return r;
  }
  // One thread per GPU: opening a device handle costs NVML several milliseconds per GPU
  // (about 7 ms each on a 4x H200 node, 28 ms in a row), and NVML lets the GPUs be opened
  // in parallel (12 ms for the four there; docs/benchmarks.md, "Real multi-GPU node").
  std::vector<std::future<std::optional<NvmlGpu>>> per_gpu;
  per_gpu.reserve(n);
  for (unsigned i = 0; i < n; ++i) per_gpu.push_back(std::async(std::launch::async, [nv, i] { return probe_gpu(*nv, i); }));
  for (auto& f : per_gpu)
    if (auto g = f.get()) r.gpus.push_back(std::move(*g));
  return r;
}

// Text, one fact per line:
//   nvml driver=580.159.04 library=libnvidia-ml.so.1
//   error <why>
//   gpu <busId> device=0x233510de fabric=3 fabric_status=0
//   link <busId> <index> active=1 remote=<busId> type=switch
std::string nvml_record_text(const NvmlRecord& r) {
  std::ostringstream o;
  if (!r.asked) return "";
  o << "nvml driver=" << (r.driver_version.empty() ? "-" : r.driver_version) << " library=" << r.library << "\n";
  if (!r.error.empty()) o << "error " << r.error << "\n";
  for (const auto& g : r.gpus) {
    char dev[16];
    std::snprintf(dev, sizeof dev, "0x%08x", g.pci_device_id);
    o << "gpu " << g.bus_id << " device=" << dev << " fabric=" << g.fabric_state << " fabric_status=" << g.fabric_status << "\n";
    for (const auto& l : g.links) {
      o << "link " << g.bus_id << " " << l.index << " active=" << (l.active ? 1 : 0);
      if (l.active) o << " remote=" << (l.remote_bus_id.empty() ? "-" : l.remote_bus_id) << " type=" << type_word(l.remote_type);
      o << "\n";
    }
  }
  return o.str();
}

NvmlRecord parse_nvml_record_text(const std::string& text) {
  NvmlRecord r;
  std::istringstream in(text);
  std::string line;
  auto value = [](const std::string& word, const char* key) -> std::string {
    const std::string k = std::string(key) + "=";
    return word.rfind(k, 0) == 0 ? word.substr(k.size()) : std::string();
  };
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::string kind;
    words >> kind;
    if (kind == "nvml") {
      r.asked = true;
      for (std::string w; words >> w;) {
        if (auto v = value(w, "driver"); !v.empty() && v != "-") r.driver_version = v;
        if (auto v = value(w, "library"); !v.empty()) r.library = v;
      }
    } else if (kind == "error") {
      r.error = line.size() > 6 ? line.substr(6) : "NVML error (not recorded)";
    } else if (kind == "gpu") {
      NvmlGpu g;
      words >> g.bus_id;
      for (std::string w; words >> w;) {
        if (auto v = value(w, "device"); !v.empty()) g.pci_device_id = static_cast<unsigned>(std::strtoul(v.c_str(), nullptr, 16));
        if (auto v = value(w, "fabric"); !v.empty()) g.fabric_state = std::atoi(v.c_str());
        if (auto v = value(w, "fabric_status"); !v.empty()) g.fabric_status = std::atoi(v.c_str());
      }
      if (!g.bus_id.empty()) r.gpus.push_back(std::move(g));
    } else if (kind == "link") {
      std::string bus;
      NvmlLink l;
      words >> bus >> l.index;
      if (!words || r.gpus.empty() || r.gpus.back().bus_id != bus) continue;  // links follow their GPU's line
      for (std::string w; words >> w;) {
        if (auto v = value(w, "active"); !v.empty()) l.active = v == "1";
        if (auto v = value(w, "remote"); !v.empty() && v != "-") l.remote_bus_id = v;
        if (auto v = value(w, "type"); !v.empty()) l.remote_type = type_of_word(v);
      }
      r.gpus.back().links.push_back(l);
    }
  }
  return r;
}

void apply_nvml(const NvmlRecord& r, Topology& t) {
  if (!r.asked) return;
  if (!r.error.empty()) {
    t.nvml_failed = true;
    t.nvml_note = "NVLink unknown: NVML could not be asked (" + r.error +
                  "); the PCIe path is known, whether GPUs reach each other over NVLink is not (nvidia-smi topo -m shows NV#)";
    return;
  }
  t.nvlink_known = true;  // NVML answered: GPUs without active links have none
  int gpus = 0, active = 0, to_switch = 0;
  std::map<std::string, int> fabric;  // state word -> GPUs
  for (const auto& g : r.gpus) {
    const int gpu = t.find(nvml_bdf(g.bus_id));
    if (gpu < 0) continue;
    ++gpus;
    t.devices[gpu].fabric_state = g.fabric_state;
    t.devices[gpu].fabric_status = g.fabric_status;
    if (g.fabric_state >= 0) ++fabric[fabric_word(g.fabric_state)];
    for (const auto& l : g.links) {
      if (!l.active) continue;
      ++active;
      const bool sw = l.remote_type == nvml::NVML_NVLINK_DEVICE_TYPE_SWITCH;
      to_switch += sw ? 1 : 0;
      const std::string peer_bdf = nvml_bdf(l.remote_bus_id);
      bool merged = false;  // one edge per peer (and per kind), counting its links
      for (auto& e : t.nvlinks)
        if (e.gpu == gpu && e.peer_bdf == peer_bdf && e.peer_is_switch == sw) {
          ++e.links;
          merged = true;
        }
      if (!merged) t.nvlinks.push_back(NvLink{gpu, peer_bdf.empty() ? -1 : t.find(peer_bdf), peer_bdf, sw, 1, 0});
    }
  }
  std::string note = "NVLink from NVML" + (r.driver_version.empty() ? std::string() : " (driver " + r.driver_version + ")") + ": " +
                     std::to_string(gpus) + " GPU(s), " + std::to_string(active) + " active link(s)";
  if (active > 0) note += ", " + std::to_string(to_switch) + " into NVSwitches";
  if (!fabric.empty()) {
    note += "; fabric";
    for (const auto& [word, count] : fabric) note += " " + word + " on " + std::to_string(count);
  }
  t.nvml_note = note;
}

}  // namespace gdrpeer::topo

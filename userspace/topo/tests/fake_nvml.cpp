// A stand-in for libnvidia-ml.so.1 with the entry points gdrpeer asks for NVLinks
// (gdrpeer/dynload/nvml.hpp). Its GPUs and links come from $GDRPEER_FAKE_NVML, read at
// every nvmlDeviceGetCount (so one process can ask about several nodes):
//   GPU>PEER,PEER,...;GPU>...   one entry per link of GPU, in link order
// with bus ids as NVML writes them ("00000000:01:00.0"); a peer written
// "switch:BUSID" is an NVSwitch port, "off:BUSID" an inactive link. A GPU written
// "GPU@fabric=S/T" has fabric state S (nvmlGpuFabricState_t) and status T.
// $GDRPEER_FAKE_NVML_INIT=N makes nvmlInit_v2 return N (9: NVML_ERROR_DRIVER_NOT_LOADED).
// gdrpeer_fake_nvml_calls("nvmlInit_v2") and friends count the calls, so tests can hold
// gdrpeer to one nvmlInit per process and to no question past a GPU's last link.
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

namespace {

struct Link {
  std::string peer;
  bool active = true, to_switch = false;
};
struct Gpu {
  std::string bus_id;
  int fabric_state = -1, fabric_status = 0;
  std::vector<Link> links;
};
std::vector<Gpu> gpus;
std::map<std::string, int> calls;
// NVML is thread-safe and gdrpeer asks it from one thread per GPU: so is the fake's call count.
std::mutex calls_mu;
void count(const char* name) {
  std::lock_guard lock(calls_mu);
  ++calls[name];
}

struct PciInfo {  // nvmlPciInfo_t
  char bus_id_legacy[16];
  unsigned domain, bus, device, pci_device_id, pci_subsystem_id;
  char bus_id[32];
};

struct FabricInfo {  // nvmlGpuFabricInfo_t
  unsigned char cluster_uuid[16];
  int status;
  unsigned clique_id;
  unsigned char state;
};

constexpr int kSuccess = 0, kInvalidArgument = 2, kNotSupported = 3;

bool parse_spec() {
  gpus.clear();
  const char* spec = std::getenv("GDRPEER_FAKE_NVML");
  std::stringstream entries(spec ? spec : "");
  for (std::string entry; std::getline(entries, entry, ';');) {
    const size_t gt = entry.find('>');
    if (gt == std::string::npos) return false;
    Gpu g;
    g.bus_id = entry.substr(0, gt);
    if (const size_t at = g.bus_id.find("@fabric="); at != std::string::npos) {
      const std::string f = g.bus_id.substr(at + 8);
      g.fabric_state = std::atoi(f.c_str());
      if (const size_t slash = f.find('/'); slash != std::string::npos) g.fabric_status = std::atoi(f.c_str() + slash + 1);
      g.bus_id.erase(at);
    }
    std::stringstream peers(entry.substr(gt + 1));
    for (std::string p; std::getline(peers, p, ',');) {
      Link l;
      if (p.rfind("off:", 0) == 0) {
        l.active = false;
        p.erase(0, 4);
      } else if (p.rfind("switch:", 0) == 0) {
        l.to_switch = true;
        p.erase(0, 7);
      }
      l.peer = p;
      g.links.push_back(l);
    }
    gpus.push_back(g);
  }
  return true;
}

const Gpu* gpu_of(void* dev) {
  const size_t i = reinterpret_cast<size_t>(dev);
  return i >= 1 && i <= gpus.size() ? &gpus[i - 1] : nullptr;
}

const Link* link_of(void* dev, unsigned link) {
  const Gpu* g = gpu_of(dev);
  return g && link < g->links.size() ? &g->links[link] : nullptr;
}

void fill(PciInfo* info, const std::string& bus_id) {
  std::memset(info, 0, sizeof *info);
  std::strncpy(info->bus_id, bus_id.c_str(), sizeof info->bus_id - 1);
}

}  // namespace

extern "C" {

int gdrpeer_fake_nvml_calls(const char* name) {
  std::lock_guard lock(calls_mu);
  return calls[name];
}

int nvmlInit_v2() {
  count("nvmlInit_v2");
  const char* rc = std::getenv("GDRPEER_FAKE_NVML_INIT");
  return rc ? std::atoi(rc) : kSuccess;
}

const char* nvmlErrorString(int rc) { return rc == 9 ? "Driver Not Loaded" : "Unknown Error"; }

int nvmlSystemGetDriverVersion(char* v, unsigned len) {
  std::strncpy(v, "580.159.04", len);
  return kSuccess;
}

int nvmlDeviceGetCount_v2(unsigned* n) {
  count("nvmlDeviceGetCount_v2");
  if (!parse_spec()) return kInvalidArgument;
  *n = static_cast<unsigned>(gpus.size());
  return kSuccess;
}

int nvmlDeviceGetHandleByIndex_v2(unsigned i, void** dev) {
  if (i >= gpus.size()) return kInvalidArgument;
  *dev = reinterpret_cast<void*>(static_cast<size_t>(i) + 1);
  return kSuccess;
}

int nvmlDeviceGetPciInfo_v3(void* dev, PciInfo* info) {
  const Gpu* g = gpu_of(dev);
  if (!g) return kInvalidArgument;
  fill(info, g->bus_id);
  return kSuccess;
}

int nvmlDeviceGetGpuFabricInfo(void* dev, FabricInfo* info) {
  const Gpu* g = gpu_of(dev);
  if (!g) return kInvalidArgument;
  if (g->fabric_state < 0) return kNotSupported;
  std::memset(info, 0, sizeof *info);
  info->state = static_cast<unsigned char>(g->fabric_state);
  info->status = g->fabric_status;
  return kSuccess;
}

// Past a GPU's last link NVML answers Invalid Argument, as the real one does (link 18 of an H200).
int nvmlDeviceGetNvLinkState(void* dev, unsigned link, int* active) {
  count("nvmlDeviceGetNvLinkState");
  const Link* l = link_of(dev, link);
  if (!l) return kInvalidArgument;
  *active = l->active ? 1 : 0;
  return kSuccess;
}

int nvmlDeviceGetNvLinkRemotePciInfo_v2(void* dev, unsigned link, PciInfo* info) {
  const Link* l = link_of(dev, link);
  if (!l) return kInvalidArgument;
  fill(info, l->peer);
  return kSuccess;
}

int nvmlDeviceGetNvLinkRemoteDeviceType(void* dev, unsigned link, int* type) {
  const Link* l = link_of(dev, link);
  if (!l) return kInvalidArgument;
  *type = l->to_switch ? 2 : 0;  // NVML_NVLINK_DEVICE_TYPE_SWITCH : _GPU
  return kSuccess;
}

}  // extern "C"

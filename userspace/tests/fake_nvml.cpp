// A stand-in for libnvidia-ml.so.1 with the entry points `gdrpeer check --cuda`
// asks for NVLinks (gdrpeer/dynload/nvml.hpp). Its GPUs and links come from
// $GDRPEER_FAKE_NVML, read at nvmlInit_v2:
//   GPU>PEER,PEER,...;GPU>...   one entry per link of GPU, in link order
// with bus ids as NVML writes them ("00000000:01:00.0"); a peer written
// "switch:BUSID" is an NVSwitch port, "off:BUSID" an inactive link.
#include <cstdlib>
#include <cstring>
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
  std::vector<Link> links;
};
std::vector<Gpu> gpus;

struct PciInfo {  // nvmlPciInfo_t
  char bus_id_legacy[16];
  unsigned domain, bus, device, pci_device_id, pci_subsystem_id;
  char bus_id[32];
};

constexpr int kSuccess = 0, kInvalidArgument = 2, kNotSupported = 3;

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

int nvmlInit_v2() {
  gpus.clear();
  const char* spec = std::getenv("GDRPEER_FAKE_NVML");
  std::stringstream entries(spec ? spec : "");
  for (std::string entry; std::getline(entries, entry, ';');) {
    const size_t gt = entry.find('>');
    if (gt == std::string::npos) return kInvalidArgument;
    Gpu g{entry.substr(0, gt), {}};
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
  return kSuccess;
}

int nvmlDeviceGetCount_v2(unsigned* n) {
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

// Past a GPU's last link NVML answers an error, as the real one does past NVML_NVLINK_MAX_LINKS.
int nvmlDeviceGetNvLinkState(void* dev, unsigned link, int* active) {
  const Link* l = link_of(dev, link);
  if (!l) return kNotSupported;
  *active = l->active ? 1 : 0;
  return kSuccess;
}

int nvmlDeviceGetNvLinkRemotePciInfo_v2(void* dev, unsigned link, PciInfo* info) {
  const Link* l = link_of(dev, link);
  if (!l) return kNotSupported;
  fill(info, l->peer);
  return kSuccess;
}

int nvmlDeviceGetNvLinkRemoteDeviceType(void* dev, unsigned link, int* type) {
  const Link* l = link_of(dev, link);
  if (!l) return kNotSupported;
  *type = l->to_switch ? 2 : 0;  // NVML_NVLINK_DEVICE_TYPE_SWITCH : _GPU
  return kSuccess;
}

}  // extern "C"

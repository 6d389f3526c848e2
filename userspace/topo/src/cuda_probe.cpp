#include "gdrpeer/topo/cuda_probe.hpp"

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <sstream>

namespace gdrpeer::topo {

namespace {
// CUdevice_attribute values from cuda.h (CUDA 11.3+ / 11.7+).
constexpr int kAttrGpuDirectRdmaSupported = 116;
constexpr int kAttrDmaBufSupported = 124;
using CuInit = int (*)(unsigned);
using CuDeviceGetCount = int (*)(int*);
using CuDeviceGet = int (*)(int*, int);
using CuDeviceGetPCIBusId = int (*)(char*, int, int);
using CuDeviceGetAttribute = int (*)(int*, int, int);
}  // namespace

void probe_cuda(Software& sw) {
  sw.cuda_probed = true;
  void* h = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    sw.cuda_error = "libcuda.so.1 not loadable (no CUDA driver here)";
    return;
  }
  auto init = reinterpret_cast<CuInit>(::dlsym(h, "cuInit"));
  auto count = reinterpret_cast<CuDeviceGetCount>(::dlsym(h, "cuDeviceGetCount"));
  auto get = reinterpret_cast<CuDeviceGet>(::dlsym(h, "cuDeviceGet"));
  auto busid = reinterpret_cast<CuDeviceGetPCIBusId>(::dlsym(h, "cuDeviceGetPCIBusId"));
  auto attr = reinterpret_cast<CuDeviceGetAttribute>(::dlsym(h, "cuDeviceGetAttribute"));
  if (!init || !count || !get || !busid || !attr) {
    sw.cuda_error = "libcuda.so.1 lacks the driver API entry points";
    ::dlclose(h);
    return;
  }
  int rc = init(0);
  int n = 0;
  if (rc != 0 || count(&n) != 0) {
    sw.cuda_error = "cuInit failed with CUresult " + std::to_string(rc);
    ::dlclose(h);
    return;
  }
  for (int i = 0; i < n; ++i) {
    int dev = 0;
    char id[64] = {};
    if (get(&dev, i) != 0 || busid(id, sizeof id, dev) != 0) continue;
    // "00000000:06:00.0" -> "0000:06:00.0"
    unsigned dom = 0, bus = 0, slot = 0, fn = 0;
    if (std::sscanf(id, "%x:%x:%x.%x", &dom, &bus, &slot, &fn) != 4) continue;
    Software::CudaGpu g;
    g.bdf = make_bdf(dom, bus, slot, fn);
    int v = -1;
    if (attr(&v, kAttrGpuDirectRdmaSupported, dev) == 0) g.gdr_supported = v;
    v = -1;
    if (attr(&v, kAttrDmaBufSupported, dev) == 0) g.dmabuf_supported = v;
    sw.cuda.push_back(g);
  }
  // libcuda stays loaded: unloading a CUDA driver mid-process is not supported.
}

namespace {
// nvml.h: nvmlPciInfo_t as the _v2/_v3 entry points fill it; NVML_NVLINK_MAX_LINKS is 18
// since Hopper (12 before; asking past a GPU's last link returns an error, not a crash).
struct NvmlPciInfo {
  char bus_id_legacy[16];
  unsigned domain, bus, device, pci_device_id, pci_subsystem_id;
  char bus_id[32];
};
constexpr unsigned kNvmlMaxLinks = 18;
constexpr int kNvmlRemoteSwitch = 2;  // nvmlIntNvLinkDeviceType_t: GPU 0, IBMNPU 1, SWITCH 2
using NvmlDevice = void*;
using NvmlInit = int (*)();
using NvmlCount = int (*)(unsigned*);
using NvmlHandle = int (*)(unsigned, NvmlDevice*);
using NvmlPci = int (*)(NvmlDevice, NvmlPciInfo*);
using NvmlLinkState = int (*)(NvmlDevice, unsigned, int*);
using NvmlLinkPci = int (*)(NvmlDevice, unsigned, NvmlPciInfo*);
using NvmlLinkType = int (*)(NvmlDevice, unsigned, int*);

// "00000000:06:00.0" -> "0000:06:00.0"; "" when malformed.
std::string nvml_bdf(const char* id) {
  unsigned dom = 0, bus = 0, slot = 0, fn = 0;
  if (std::sscanf(id, "%x:%x:%x.%x", &dom, &bus, &slot, &fn) != 4) return "";
  return make_bdf(dom, bus, slot, fn);
}
}  // namespace

std::string probe_nvlink(Topology& t) {
  void* h = ::dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!h) return "libnvidia-ml.so.1 not loadable";
  auto init = reinterpret_cast<NvmlInit>(::dlsym(h, "nvmlInit_v2"));
  auto count = reinterpret_cast<NvmlCount>(::dlsym(h, "nvmlDeviceGetCount_v2"));
  auto handle = reinterpret_cast<NvmlHandle>(::dlsym(h, "nvmlDeviceGetHandleByIndex_v2"));
  auto pci = reinterpret_cast<NvmlPci>(::dlsym(h, "nvmlDeviceGetPciInfo_v3"));
  auto state = reinterpret_cast<NvmlLinkState>(::dlsym(h, "nvmlDeviceGetNvLinkState"));
  auto remote = reinterpret_cast<NvmlLinkPci>(::dlsym(h, "nvmlDeviceGetNvLinkRemotePciInfo_v2"));
  auto type = reinterpret_cast<NvmlLinkType>(::dlsym(h, "nvmlDeviceGetNvLinkRemoteDeviceType"));
  if (!init || !count || !handle || !pci || !state || !remote) return "libnvidia-ml.so.1 lacks the NVLink entry points";
  unsigned n = 0;
  if (int rc = init(); rc != 0) return "nvmlInit failed with nvmlReturn_t " + std::to_string(rc);
  if (count(&n) != 0) return "nvmlDeviceGetCount failed";
  t.nvlink_known = true;  // NVML answered: GPUs without active links have none
  for (unsigned i = 0; i < n; ++i) {
    NvmlDevice dev = nullptr;
    NvmlPciInfo info{};
    if (handle(i, &dev) != 0 || pci(dev, &info) != 0) continue;
    const int gpu = t.find(nvml_bdf(info.bus_id));
    if (gpu < 0) continue;
    for (unsigned link = 0; link < kNvmlMaxLinks; ++link) {
      int active = 0, kind = -1;
      NvmlPciInfo peer{};
      if (state(dev, link, &active) != 0 || !active || remote(dev, link, &peer) != 0) continue;
      const std::string peer_bdf = nvml_bdf(peer.bus_id);
      const bool to_switch = type && type(dev, link, &kind) == 0 && kind == kNvmlRemoteSwitch;
      bool merged = false;  // one edge per peer, counting its links
      for (auto& l : t.nvlinks)
        if (l.gpu == gpu && l.peer_bdf == peer_bdf) {
          ++l.links;
          merged = true;
        }
      if (!merged) t.nvlinks.push_back(NvLink{gpu, t.find(peer_bdf), peer_bdf, to_switch, 1, 0});
    }
  }
  // libnvidia-ml stays loaded, as libcuda does.
  return "";
}

std::string cuda_probe_text(const Software& sw) {
  std::ostringstream o;
  if (!sw.cuda_error.empty()) o << "error " << sw.cuda_error << "\n";
  for (const auto& g : sw.cuda) o << g.bdf << " gdr=" << g.gdr_supported << " dmabuf=" << g.dmabuf_supported << "\n";
  return o.str();
}

void parse_cuda_probe_text(const std::string& text, Software& sw) {
  sw.cuda_probed = true;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("error ", 0) == 0) {
      sw.cuda_error = line.substr(6);
      continue;
    }
    char bdf[32];
    int gdr = -1, dmabuf = -1;
    if (std::sscanf(line.c_str(), "%31s gdr=%d dmabuf=%d", bdf, &gdr, &dmabuf) == 3)
      sw.cuda.push_back(Software::CudaGpu{bdf, gdr, dmabuf});
  }
}

}  // namespace gdrpeer::topo

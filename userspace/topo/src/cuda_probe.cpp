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

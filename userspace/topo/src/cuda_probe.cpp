#include "gdrpeer/topo/cuda_probe.hpp"

#include <cstdio>
#include <sstream>

#include "gdrpeer/dynload/cuda.hpp"
#include "gdrpeer/topo/nvml_probe.hpp"

namespace gdrpeer::topo {

namespace {
// "00000000:06:00.0" (CUDA's and NVML's bus ids) -> "0000:06:00.0"; "" when malformed.
std::string bus_id_bdf(const char* id) {
  unsigned dom = 0, bus = 0, slot = 0, fn = 0;
  if (std::sscanf(id, "%x:%x:%x.%x", &dom, &bus, &slot, &fn) != 4) return "";
  return make_bdf(dom, bus, slot, fn);
}
}  // namespace

void probe_cuda(Software& sw, const char* library) {
  sw.cuda_probed = true;
  std::string why;
  const cuda::Api* cu = cuda::load(&why, library);
  if (!cu) {
    sw.cuda_error = why;
    return;
  }
  int n = 0;
  if (const cuda::CUresult rc = cu->cuInit(0); rc != cuda::CUDA_SUCCESS) {
    sw.cuda_error = "cuInit failed: " + cu->error_text(rc);
    return;
  }
  if (const cuda::CUresult rc = cu->cuDeviceGetCount(&n); rc != cuda::CUDA_SUCCESS) {
    sw.cuda_error = "cuDeviceGetCount failed: " + cu->error_text(rc);
    return;
  }
  for (int i = 0; i < n; ++i) {
    cuda::CUdevice dev = 0;
    char id[64] = {};
    if (cu->cuDeviceGet(&dev, i) != cuda::CUDA_SUCCESS || cu->cuDeviceGetPCIBusId(id, sizeof id, dev) != cuda::CUDA_SUCCESS) continue;
    Software::CudaGpu g;
    g.bdf = bus_id_bdf(id);
    if (g.bdf.empty()) continue;
    int v = -1;
    if (cu->cuDeviceGetAttribute(&v, cuda::CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED, dev) == cuda::CUDA_SUCCESS) g.gdr_supported = v;
    v = -1;
    if (cu->cuDeviceGetAttribute(&v, cuda::CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED, dev) == cuda::CUDA_SUCCESS) g.dmabuf_supported = v;
    sw.cuda.push_back(g);
  }
}

std::string probe_nvlink(Topology& t, const char* library) {
  const NvmlRecord r = probe_nvml(library);
  apply_nvml(r, t);
  return r.error;
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
    if (std::sscanf(line.c_str(), "%31s gdr=%d dmabuf=%d", bdf, &gdr, &dmabuf) == 3) sw.cuda.push_back(Software::CudaGpu{bdf, gdr, dmabuf});
  }
}

}  // namespace gdrpeer::topo

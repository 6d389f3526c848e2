#include "gdrpeer/dynload/nvml.hpp"

#include <dlfcn.h>

#include "gdrpeer/dynload/dl.hpp"

namespace gdrpeer::nvml {

namespace {

dl::Loaded<Api> load_now(const char* library) {
  dl::Loaded<Api> l;
  void* lib = ::dlopen(library, RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    l.why = std::string(library) + " not loadable";
    return l;
  }
  Api& a = l.api;
  a.handle = lib;
  std::string missing;
  dl::bind(lib, a.nvmlInit, "nvmlInit_v2", true, &missing);
  dl::bind(lib, a.nvmlDeviceGetCount, "nvmlDeviceGetCount_v2", true, &missing);
  dl::bind(lib, a.nvmlDeviceGetHandleByIndex, "nvmlDeviceGetHandleByIndex_v2", true, &missing);
  dl::bind(lib, a.nvmlDeviceGetPciInfo, "nvmlDeviceGetPciInfo_v3", true, &missing);
  dl::bind(lib, a.nvmlDeviceGetNvLinkState, "nvmlDeviceGetNvLinkState", true, &missing);
  dl::bind(lib, a.nvmlDeviceGetNvLinkRemotePciInfo, "nvmlDeviceGetNvLinkRemotePciInfo_v2", true, &missing);
  dl::bind(lib, a.nvmlDeviceGetNvLinkRemoteDeviceType, "nvmlDeviceGetNvLinkRemoteDeviceType", false, &missing);
  dl::bind(lib, a.nvmlSystemGetDriverVersion, "nvmlSystemGetDriverVersion", false, &missing);
  dl::bind(lib, a.nvmlDeviceGetGpuFabricInfo, "nvmlDeviceGetGpuFabricInfo", false, &missing);
  dl::bind(lib, a.nvmlErrorString, "nvmlErrorString", false, &missing);
  if (!missing.empty()) {
    l.why = std::string(library) + " lacks the NVLink entry points (" + missing + ")";
    ::dlclose(lib);
    a.handle = nullptr;
    return l;
  }
  l.ok = true;
  return l;
}

}  // namespace

const Api* load(std::string* why, const char* library) { return dl::cached_load<Api>(why, library, load_now); }

}  // namespace gdrpeer::nvml

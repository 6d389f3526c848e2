#include "gdrpeer/dynload/cuda.hpp"

#include <dlfcn.h>

#include "gdrpeer/dynload/dl.hpp"

namespace gdrpeer::cuda {

std::string Api::error_text(CUresult r) const {
  const char* name = nullptr;
  const char* text = nullptr;
  if (cuGetErrorName != nullptr) cuGetErrorName(r, &name);
  if (cuGetErrorString != nullptr) cuGetErrorString(r, &text);
  std::string s = name != nullptr ? name : "CUresult " + std::to_string(r);
  if (text != nullptr) s += std::string(" (") + text + ")";
  return s;
}

namespace {

using dl::bind;
using Loaded = dl::Loaded<Api>;

Loaded load_now(const char* library) {
  Loaded l;
  void* lib = ::dlopen(library, RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* e = ::dlerror();
    l.why = std::string("cannot load ") + library + ": " + (e != nullptr ? e : "unknown error") +
            " (no NVIDIA driver on this node)";
    return l;
  }
  Api& a = l.api;
  a.handle = lib;
  std::string missing;
  bind(lib, a.cuInit, "cuInit", true, &missing);
  bind(lib, a.cuDriverGetVersion, "cuDriverGetVersion", true, &missing);
  bind(lib, a.cuGetErrorName, "cuGetErrorName", false, &missing);
  bind(lib, a.cuGetErrorString, "cuGetErrorString", false, &missing);
  bind(lib, a.cuDeviceGetCount, "cuDeviceGetCount", true, &missing);
  bind(lib, a.cuDeviceGet, "cuDeviceGet", true, &missing);
  bind(lib, a.cuDeviceGetName, "cuDeviceGetName", true, &missing);
  bind(lib, a.cuDeviceGetAttribute, "cuDeviceGetAttribute", true, &missing);
  bind(lib, a.cuDeviceGetPCIBusId, "cuDeviceGetPCIBusId", true, &missing);
  bind(lib, a.cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", true, &missing);
  bind(lib, a.cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2", true, &missing);
  bind(lib, a.cuCtxSetCurrent, "cuCtxSetCurrent", true, &missing);
  bind(lib, a.cuCtxSynchronize, "cuCtxSynchronize", true, &missing);
  bind(lib, a.cuMemAlloc, "cuMemAlloc_v2", true, &missing);
  bind(lib, a.cuMemFree, "cuMemFree_v2", true, &missing);
  bind(lib, a.cuMemGetInfo, "cuMemGetInfo_v2", true, &missing);
  bind(lib, a.cuMemcpyHtoD, "cuMemcpyHtoD_v2", true, &missing);
  bind(lib, a.cuMemcpyDtoH, "cuMemcpyDtoH_v2", true, &missing);
  bind(lib, a.cuPointerSetAttribute, "cuPointerSetAttribute", true, &missing);
  bind(lib, a.cuMemGetAllocationGranularity, "cuMemGetAllocationGranularity", false, &missing);
  bind(lib, a.cuMemCreate, "cuMemCreate", false, &missing);
  bind(lib, a.cuMemRelease, "cuMemRelease", false, &missing);
  bind(lib, a.cuMemAddressReserve, "cuMemAddressReserve", false, &missing);
  bind(lib, a.cuMemAddressFree, "cuMemAddressFree", false, &missing);
  bind(lib, a.cuMemMap, "cuMemMap", false, &missing);
  bind(lib, a.cuMemUnmap, "cuMemUnmap", false, &missing);
  bind(lib, a.cuMemSetAccess, "cuMemSetAccess", false, &missing);
  bind(lib, a.cuMemGetHandleForAddressRange, "cuMemGetHandleForAddressRange", false, &missing);
  bind(lib, a.cuFlushGPUDirectRDMAWrites, "cuFlushGPUDirectRDMAWrites", false, &missing);
  std::string& p2p = a.p2p_missing;  // optional as a group: verify --p2p says which are missing
  bind(lib, a.cuDeviceCanAccessPeer, "cuDeviceCanAccessPeer", true, &p2p);
  bind(lib, a.cuDeviceGetP2PAttribute, "cuDeviceGetP2PAttribute", true, &p2p);
  bind(lib, a.cuCtxEnablePeerAccess, "cuCtxEnablePeerAccess", true, &p2p);
  bind(lib, a.cuCtxDisablePeerAccess, "cuCtxDisablePeerAccess", true, &p2p);
  bind(lib, a.cuStreamCreate, "cuStreamCreate", true, &p2p);
  bind(lib, a.cuStreamDestroy, "cuStreamDestroy_v2", true, &p2p);
  bind(lib, a.cuStreamWaitEvent, "cuStreamWaitEvent", true, &p2p);
  bind(lib, a.cuStreamSynchronize, "cuStreamSynchronize", true, &p2p);
  bind(lib, a.cuEventCreate, "cuEventCreate", true, &p2p);
  bind(lib, a.cuEventRecord, "cuEventRecord", true, &p2p);
  bind(lib, a.cuEventSynchronize, "cuEventSynchronize", true, &p2p);
  bind(lib, a.cuEventElapsedTime, "cuEventElapsedTime", true, &p2p);
  bind(lib, a.cuEventDestroy, "cuEventDestroy_v2", true, &p2p);
  bind(lib, a.cuMemcpyPeerAsync, "cuMemcpyPeerAsync", true, &p2p);
  bind(lib, a.cuMemsetD8, "cuMemsetD8_v2", true, &p2p);
  if (!missing.empty()) {
    l.why = std::string(library) + " lacks " + missing + " (driver too old)";
    ::dlclose(lib);
    a.handle = nullptr;
    return l;
  }
  l.ok = true;
  return l;
}

}  // namespace

const Api* load(std::string* why, const char* library) {
  return dl::cached_load<Api>(why, library, load_now);
}

}  // namespace gdrpeer::cuda

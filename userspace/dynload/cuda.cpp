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

// The entry points and whether each is required. The P2P group (`verify --p2p`) is optional
// as a group: a missing one is listed in Api::p2p_missing and only --p2p says so.
constexpr dl::Sym<Api> kSymbols[] = {
    dl::sym<&Api::cuInit>("cuInit", true),
    dl::sym<&Api::cuDriverGetVersion>("cuDriverGetVersion", true),
    dl::sym<&Api::cuGetErrorName>("cuGetErrorName", false),
    dl::sym<&Api::cuGetErrorString>("cuGetErrorString", false),
    dl::sym<&Api::cuDeviceGetCount>("cuDeviceGetCount", true),
    dl::sym<&Api::cuDeviceGet>("cuDeviceGet", true),
    dl::sym<&Api::cuDeviceGetName>("cuDeviceGetName", true),
    dl::sym<&Api::cuDeviceGetAttribute>("cuDeviceGetAttribute", true),
    dl::sym<&Api::cuDeviceGetPCIBusId>("cuDeviceGetPCIBusId", true),
    dl::sym<&Api::cuDevicePrimaryCtxRetain>("cuDevicePrimaryCtxRetain", true),
    dl::sym<&Api::cuDevicePrimaryCtxRelease>("cuDevicePrimaryCtxRelease_v2", true),
    dl::sym<&Api::cuCtxSetCurrent>("cuCtxSetCurrent", true),
    dl::sym<&Api::cuCtxSynchronize>("cuCtxSynchronize", true),
    dl::sym<&Api::cuMemAlloc>("cuMemAlloc_v2", true),
    dl::sym<&Api::cuMemFree>("cuMemFree_v2", true),
    dl::sym<&Api::cuMemGetInfo>("cuMemGetInfo_v2", true),
    dl::sym<&Api::cuMemcpyHtoD>("cuMemcpyHtoD_v2", true),
    dl::sym<&Api::cuMemcpyDtoH>("cuMemcpyDtoH_v2", true),
    dl::sym<&Api::cuPointerSetAttribute>("cuPointerSetAttribute", true),
    dl::sym<&Api::cuMemGetAllocationGranularity>("cuMemGetAllocationGranularity", false),
    dl::sym<&Api::cuMemCreate>("cuMemCreate", false),
    dl::sym<&Api::cuMemRelease>("cuMemRelease", false),
    dl::sym<&Api::cuMemAddressReserve>("cuMemAddressReserve", false),
    dl::sym<&Api::cuMemAddressFree>("cuMemAddressFree", false),
    dl::sym<&Api::cuMemMap>("cuMemMap", false),
    dl::sym<&Api::cuMemUnmap>("cuMemUnmap", false),
    dl::sym<&Api::cuMemSetAccess>("cuMemSetAccess", false),
    dl::sym<&Api::cuMemGetHandleForAddressRange>("cuMemGetHandleForAddressRange", false),
    dl::sym<&Api::cuFlushGPUDirectRDMAWrites>("cuFlushGPUDirectRDMAWrites", false),
    // GPU peer-to-peer
    dl::sym<&Api::cuDeviceCanAccessPeer>("cuDeviceCanAccessPeer", true, &Api::p2p_missing),
    dl::sym<&Api::cuDeviceGetP2PAttribute>("cuDeviceGetP2PAttribute", true, &Api::p2p_missing),
    dl::sym<&Api::cuCtxEnablePeerAccess>("cuCtxEnablePeerAccess", true, &Api::p2p_missing),
    dl::sym<&Api::cuCtxDisablePeerAccess>("cuCtxDisablePeerAccess", true, &Api::p2p_missing),
    dl::sym<&Api::cuStreamCreate>("cuStreamCreate", true, &Api::p2p_missing),
    dl::sym<&Api::cuStreamDestroy>("cuStreamDestroy_v2", true, &Api::p2p_missing),
    dl::sym<&Api::cuStreamWaitEvent>("cuStreamWaitEvent", true, &Api::p2p_missing),
    dl::sym<&Api::cuStreamSynchronize>("cuStreamSynchronize", true, &Api::p2p_missing),
    dl::sym<&Api::cuEventCreate>("cuEventCreate", true, &Api::p2p_missing),
    dl::sym<&Api::cuEventRecord>("cuEventRecord", true, &Api::p2p_missing),
    dl::sym<&Api::cuEventSynchronize>("cuEventSynchronize", true, &Api::p2p_missing),
    dl::sym<&Api::cuEventElapsedTime>("cuEventElapsedTime", true, &Api::p2p_missing),
    dl::sym<&Api::cuEventDestroy>("cuEventDestroy_v2", true, &Api::p2p_missing),
    dl::sym<&Api::cuMemcpyPeerAsync>("cuMemcpyPeerAsync", true, &Api::p2p_missing),
    dl::sym<&Api::cuMemsetD8>("cuMemsetD8_v2", true, &Api::p2p_missing),
};

constexpr dl::Hint kHint = {
    RTLD_NOW | RTLD_LOCAL,
    "cannot load {library}: {dlerror} (no NVIDIA driver on this node)",
    "{library} lacks {missing} (driver too old)",
};

dl::Loaded<Api> load_now(const char* library) { return dl::open_api<Api>(library, kHint, kSymbols); }

}  // namespace

const Api* load(std::string* why, const char* library) { return dl::cached_load<Api>(why, library, load_now); }

}  // namespace gdrpeer::cuda

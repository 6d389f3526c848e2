// NVML (libnvidia-ml.so.1), loaded at run time: the entry points `gdrpeer check
// --cuda` asks for each GPU's active NVLinks. Types and values are declared from
// NVIDIA's public NVML API reference (docs.nvidia.com/deploy/nvml-api); no
// build-time dependency on the driver.
#pragma once

#include <string>

namespace gdrpeer::nvml {

using nvmlReturn_t = int;
using nvmlDevice_t = struct nvmlDevice_st*;

inline constexpr nvmlReturn_t NVML_SUCCESS = 0;
inline constexpr int NVML_FEATURE_ENABLED = 1;  // nvmlEnableState_t
// NVML_NVLINK_MAX_LINKS: 18 since Hopper (12 before; asking past a GPU's last link
// returns an error, not a crash).
inline constexpr unsigned NVML_NVLINK_MAX_LINKS = 18;
// nvmlIntNvLinkDeviceType_t
inline constexpr int NVML_NVLINK_DEVICE_TYPE_GPU = 0;
inline constexpr int NVML_NVLINK_DEVICE_TYPE_IBMNPU = 1;
inline constexpr int NVML_NVLINK_DEVICE_TYPE_SWITCH = 2;

// nvmlPciInfo_t as the _v2/_v3 entry points fill it.
struct nvmlPciInfo_t {
  char busIdLegacy[16];
  unsigned domain, bus, device, pciDeviceId, pciSubSystemId;
  char busId[32];  // "00000000:06:00.0"
};

// The loaded library. Missing optional entry points are nullptr.
struct Api {
  void* handle = nullptr;
  nvmlReturn_t (*nvmlInit)() = nullptr;                                             // _v2
  nvmlReturn_t (*nvmlDeviceGetCount)(unsigned*) = nullptr;                          // _v2
  nvmlReturn_t (*nvmlDeviceGetHandleByIndex)(unsigned, nvmlDevice_t*) = nullptr;    // _v2
  nvmlReturn_t (*nvmlDeviceGetPciInfo)(nvmlDevice_t, nvmlPciInfo_t*) = nullptr;     // _v3
  nvmlReturn_t (*nvmlDeviceGetNvLinkState)(nvmlDevice_t, unsigned, int*) = nullptr;  // nvmlEnableState_t
  nvmlReturn_t (*nvmlDeviceGetNvLinkRemotePciInfo)(nvmlDevice_t, unsigned, nvmlPciInfo_t*) = nullptr;  // _v2
  // Optional (R460+): whether a link ends at a GPU or an NVSwitch.
  nvmlReturn_t (*nvmlDeviceGetNvLinkRemoteDeviceType)(nvmlDevice_t, unsigned, int*) = nullptr;
};

// Loads the library once per process. Returns nullptr and sets *why when it
// cannot be loaded or lacks a required entry point. `library` overrides the
// soname (tests point it at a fake NVML).
const Api* load(std::string* why, const char* library = "libnvidia-ml.so.1");

}  // namespace gdrpeer::nvml

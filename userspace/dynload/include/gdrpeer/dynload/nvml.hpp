// NVML (libnvidia-ml.so.1), loaded at run time: the entry points `gdrpeer check`
// (every live check of a node with an NVIDIA GPU) and `gdrpeer snapshot` ask for each
// GPU's NVLinks and fabric state. NVML creates no CUDA context: asking it costs tens of
// milliseconds where cuInit costs about a second on a 4-GPU node. Types and values are declared from
// NVIDIA's public NVML API reference (docs.nvidia.com/deploy/nvml-api); no
// build-time dependency on the driver.
#pragma once

#include <string>

namespace gdrpeer::nvml {

using nvmlReturn_t = int;
using nvmlDevice_t = struct nvmlDevice_st*;

inline constexpr nvmlReturn_t NVML_SUCCESS = 0;
inline constexpr nvmlReturn_t NVML_ERROR_INVALID_ARGUMENT = 2;  // e.g. a link index past the GPU's last
inline constexpr nvmlReturn_t NVML_ERROR_NOT_SUPPORTED = 3;
inline constexpr int NVML_FEATURE_ENABLED = 1;  // nvmlEnableState_t
// NVML_NVLINK_MAX_LINKS: 18 since Hopper (12 before; asking past a GPU's last link
// returns an error, not a crash).
inline constexpr unsigned NVML_NVLINK_MAX_LINKS = 18;
// nvmlIntNvLinkDeviceType_t
inline constexpr int NVML_NVLINK_DEVICE_TYPE_GPU = 0;
inline constexpr int NVML_NVLINK_DEVICE_TYPE_IBMNPU = 1;
inline constexpr int NVML_NVLINK_DEVICE_TYPE_SWITCH = 2;

// nvmlGpuFabricState_t (nvmlDeviceGetGpuFabricInfo, R525+): the NVSwitch fabric's
// registration of this GPU (Hopper and later on NVSwitch systems; the fabric manager does it).
inline constexpr int NVML_GPU_FABRIC_STATE_NOT_SUPPORTED = 0;
inline constexpr int NVML_GPU_FABRIC_STATE_NOT_STARTED = 1;
inline constexpr int NVML_GPU_FABRIC_STATE_IN_PROGRESS = 2;
inline constexpr int NVML_GPU_FABRIC_STATE_COMPLETED = 3;

// nvmlGpuFabricInfo_t (the unversioned v1 layout nvmlDeviceGetGpuFabricInfo fills).
struct nvmlGpuFabricInfo_t {
  unsigned char clusterUuid[16];
  nvmlReturn_t status;  // registration result once COMPLETED
  unsigned cliqueId;
  unsigned char state;  // nvmlGpuFabricState_t
};

// nvmlPciInfo_t as the _v2/_v3 entry points fill it.
struct nvmlPciInfo_t {
  char busIdLegacy[16];
  unsigned domain, bus, device, pciDeviceId, pciSubSystemId;
  char busId[32];  // "00000000:06:00.0"
};

// The loaded library. Missing optional entry points are nullptr.
struct Api {
  void* handle = nullptr;
  nvmlReturn_t (*nvmlInit)() = nullptr;                                                                // _v2
  nvmlReturn_t (*nvmlDeviceGetCount)(unsigned*) = nullptr;                                             // _v2
  nvmlReturn_t (*nvmlDeviceGetHandleByIndex)(unsigned, nvmlDevice_t*) = nullptr;                       // _v2
  nvmlReturn_t (*nvmlDeviceGetPciInfo)(nvmlDevice_t, nvmlPciInfo_t*) = nullptr;                        // _v3
  nvmlReturn_t (*nvmlDeviceGetNvLinkState)(nvmlDevice_t, unsigned, int*) = nullptr;                    // nvmlEnableState_t
  nvmlReturn_t (*nvmlDeviceGetNvLinkRemotePciInfo)(nvmlDevice_t, unsigned, nvmlPciInfo_t*) = nullptr;  // _v2
  // Optional (R460+): whether a link ends at a GPU or an NVSwitch.
  nvmlReturn_t (*nvmlDeviceGetNvLinkRemoteDeviceType)(nvmlDevice_t, unsigned, int*) = nullptr;
  // Optional: the driver version (recorded in snapshots) and the fabric state (R525+).
  nvmlReturn_t (*nvmlSystemGetDriverVersion)(char*, unsigned) = nullptr;
  nvmlReturn_t (*nvmlDeviceGetGpuFabricInfo)(nvmlDevice_t, nvmlGpuFabricInfo_t*) = nullptr;
  const char* (*nvmlErrorString)(nvmlReturn_t) = nullptr;
};

// Loads the library once per process. Returns nullptr and sets *why when it
// cannot be loaded or lacks a required entry point. `library` overrides the
// soname (tests point it at a fake NVML).
const Api* load(std::string* why, const char* library = "libnvidia-ml.so.1");

}  // namespace gdrpeer::nvml

// The CUDA driver API, loaded at run time with dlopen("libcuda.so.1"): for
// `gdrpeer check --cuda` (topo/src/cuda_probe.cpp) and `gdrpeer verify`.
//
// gdrpeer has no build-time dependency on CUDA: the few types, enum values and
// entry points used here are declared from NVIDIA's public CUDA Driver API
// reference (docs.nvidia.com/cuda/cuda-driver-api). Versioned entry points are
// looked up by their exported names (cuMemAlloc_v2 and friends), as cuda.h maps them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace gdrpeer::cuda {

using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
using CUcontext = struct CUctx_st*;
using CUmemGenericAllocationHandle = unsigned long long;
using CUstream = struct CUstream_st*;
using CUevent = struct CUevent_st*;

inline constexpr CUresult CUDA_SUCCESS = 0;

// CUdevice_attribute values used here.
enum DeviceAttribute : int {
  CU_DEVICE_ATTRIBUTE_PCI_BUS_ID = 33,
  CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID = 34,
  CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID = 50,
  CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED = 102,
  CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED = 110,
  CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED = 116,
  CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_FLUSH_WRITES_OPTIONS = 117,
  CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WRITES_ORDERING = 118,
  CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED = 124,
};

// CUdevice_P2PAttribute (cuDeviceGetP2PAttribute).
enum P2PAttribute : int {
  CU_DEVICE_P2P_ATTRIBUTE_PERFORMANCE_RANK = 1,
  CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED = 2,
  CU_DEVICE_P2P_ATTRIBUTE_NATIVE_ATOMIC_SUPPORTED = 3,
  CU_DEVICE_P2P_ATTRIBUTE_CUDA_ARRAY_ACCESS_SUPPORTED = 4,
};
inline constexpr unsigned CU_STREAM_NON_BLOCKING = 1;
inline constexpr unsigned CU_EVENT_DEFAULT = 0;
inline constexpr CUresult CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED = 704;
inline constexpr CUresult CUDA_ERROR_PEER_ACCESS_NOT_ENABLED = 705;

inline constexpr int CU_POINTER_ATTRIBUTE_SYNC_MEMOPS = 6;
inline constexpr int CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD = 1;
inline constexpr int CU_MEM_ALLOCATION_TYPE_PINNED = 1;
inline constexpr int CU_MEM_HANDLE_TYPE_NONE = 0;
inline constexpr int CU_MEM_LOCATION_TYPE_DEVICE = 1;
inline constexpr int CU_MEM_ACCESS_FLAGS_PROT_READWRITE = 3;
inline constexpr int CU_MEM_ALLOC_GRANULARITY_RECOMMENDED = 1;
inline constexpr int CU_FLUSH_GPU_DIRECT_RDMA_WRITES_TARGET_CURRENT_CTX = 0;
inline constexpr int CU_FLUSH_GPU_DIRECT_RDMA_WRITES_TO_OWNER = 100;

struct CUmemLocation {
  int type;
  int id;
};

struct CUmemAllocationProp {
  int type;                  // CUmemAllocationType
  int requestedHandleTypes;  // CUmemAllocationHandleType
  CUmemLocation location;
  void* win32HandleMetaData;
  struct {
    unsigned char compressionType;
    unsigned char gpuDirectRDMACapable;
    unsigned short usage;
    unsigned char reserved[4];
  } allocFlags;
};

struct CUmemAccessDesc {
  CUmemLocation location;
  int flags;  // CUmemAccess_flags
};

// The loaded driver. Missing optional entry points are nullptr.
struct Api {
  void* handle = nullptr;

  CUresult (*cuInit)(unsigned int) = nullptr;
  CUresult (*cuDriverGetVersion)(int*) = nullptr;
  CUresult (*cuGetErrorName)(CUresult, const char**) = nullptr;
  CUresult (*cuGetErrorString)(CUresult, const char**) = nullptr;
  CUresult (*cuDeviceGetCount)(int*) = nullptr;
  CUresult (*cuDeviceGet)(CUdevice*, int) = nullptr;
  CUresult (*cuDeviceGetName)(char*, int, CUdevice) = nullptr;
  CUresult (*cuDeviceGetAttribute)(int*, int, CUdevice) = nullptr;
  CUresult (*cuDeviceGetPCIBusId)(char*, int, CUdevice) = nullptr;
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext*, CUdevice) = nullptr;
  CUresult (*cuDevicePrimaryCtxRelease)(CUdevice) = nullptr;  // _v2
  CUresult (*cuCtxSetCurrent)(CUcontext) = nullptr;
  CUresult (*cuCtxSynchronize)() = nullptr;
  CUresult (*cuMemAlloc)(CUdeviceptr*, size_t) = nullptr;                // _v2
  CUresult (*cuMemFree)(CUdeviceptr) = nullptr;                          // _v2
  CUresult (*cuMemGetInfo)(size_t*, size_t*) = nullptr;                  // _v2
  CUresult (*cuMemcpyHtoD)(CUdeviceptr, const void*, size_t) = nullptr;  // _v2
  CUresult (*cuMemcpyDtoH)(void*, CUdeviceptr, size_t) = nullptr;        // _v2
  CUresult (*cuPointerSetAttribute)(const void*, int, CUdeviceptr) = nullptr;
  // VMM
  CUresult (*cuMemGetAllocationGranularity)(size_t*, const CUmemAllocationProp*, int) = nullptr;
  CUresult (*cuMemCreate)(CUmemGenericAllocationHandle*, size_t, const CUmemAllocationProp*, unsigned long long) = nullptr;
  CUresult (*cuMemRelease)(CUmemGenericAllocationHandle) = nullptr;
  CUresult (*cuMemAddressReserve)(CUdeviceptr*, size_t, size_t, CUdeviceptr, unsigned long long) = nullptr;
  CUresult (*cuMemAddressFree)(CUdeviceptr, size_t) = nullptr;
  CUresult (*cuMemMap)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long) = nullptr;
  CUresult (*cuMemUnmap)(CUdeviceptr, size_t) = nullptr;
  CUresult (*cuMemSetAccess)(CUdeviceptr, size_t, const CUmemAccessDesc*, size_t) = nullptr;
  // dma-buf export (CUDA 11.7+) and the GPUDirect RDMA write flush (CUDA 11.3+): optional.
  CUresult (*cuMemGetHandleForAddressRange)(void*, CUdeviceptr, size_t, int, unsigned long long) = nullptr;
  CUresult (*cuFlushGPUDirectRDMAWrites)(int, int) = nullptr;
  // GPU peer-to-peer (`gdrpeer verify --p2p`), optional: streams, events, peer access and
  // the copy cudaMemcpyPeerAsync is built on.
  CUresult (*cuDeviceCanAccessPeer)(int*, CUdevice, CUdevice) = nullptr;
  CUresult (*cuDeviceGetP2PAttribute)(int*, int, CUdevice, CUdevice) = nullptr;
  CUresult (*cuCtxEnablePeerAccess)(CUcontext, unsigned) = nullptr;
  CUresult (*cuCtxDisablePeerAccess)(CUcontext) = nullptr;
  CUresult (*cuStreamCreate)(CUstream*, unsigned) = nullptr;
  CUresult (*cuStreamDestroy)(CUstream) = nullptr;  // _v2
  CUresult (*cuStreamWaitEvent)(CUstream, CUevent, unsigned) = nullptr;
  CUresult (*cuStreamSynchronize)(CUstream) = nullptr;
  CUresult (*cuEventCreate)(CUevent*, unsigned) = nullptr;
  CUresult (*cuEventRecord)(CUevent, CUstream) = nullptr;
  CUresult (*cuEventSynchronize)(CUevent) = nullptr;
  CUresult (*cuEventElapsedTime)(float*, CUevent, CUevent) = nullptr;
  CUresult (*cuEventDestroy)(CUevent) = nullptr;  // _v2
  CUresult (*cuMemcpyPeerAsync)(CUdeviceptr, CUcontext, CUdeviceptr, CUcontext, size_t, CUstream) = nullptr;
  CUresult (*cuMemsetD8)(CUdeviceptr, unsigned char, size_t) = nullptr;  // _v2
  // Whether every P2P entry point above was found ("" or the missing names).
  std::string p2p_missing;

  // "CUDA_ERROR_OUT_OF_MEMORY (out of memory)"
  std::string error_text(CUresult r) const;
};

// Loads libcuda once per process. Returns nullptr and sets *why when it cannot
// be loaded or lacks a required entry point. `library` overrides the soname
// (tests use it to point at a library that does not exist).
const Api* load(std::string* why, const char* library = "libcuda.so.1");

}  // namespace gdrpeer::cuda

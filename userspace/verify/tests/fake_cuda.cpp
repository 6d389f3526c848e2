// A stand-in for libcuda.so.1 with the entry points gdrpeer loads (gdrpeer/dynload/cuda.hpp):
// enough of the driver API for `gdrpeer verify --p2p` (userspace/verify/p2p.cpp) and for
// `check --cuda`'s probe. Device memory is host memory; copies are memcpy; time is
// simulated per stream from a model, so that the measurement and its comparison with
// check's prediction can be tested without a GPU. Configured by $GDRPEER_FAKE_CUDA, read
// at cuInit, words separated by blanks:
//   gpus=BDF,BDF,...   the GPUs in CUDA order ("0000:00:06.0")
//   peer=1|0           cuDeviceCanAccessPeer and cuCtxEnablePeerAccess succeed or not
//   peer_gbps=N        copy rate with peer access on; staged_gbps=N with it off
//   lat_peer_us=N lat_staged_us=N   added to copies of at most 4 KiB
//   corrupt=1          a copy with peer access on flips one byte (the byte check must see it)
//   init=N             cuInit returns N (100: CUDA_ERROR_NO_DEVICE)
//   dmabuf=N           cuMemGetHandleForAddressRange returns N (0: it exports)
//   host_register=N    cuMemHostRegister_v2 returns N (0: it registers; `check --probe ibgda`'s UAR page)
//   mem_alloc=N        cuMemAlloc_v2 returns N (0: it allocates)
//   strict_range=1     cuMemGetHandleForAddressRange refuses (CUDA_ERROR_INVALID_VALUE) a range that is not
//                      whole host pages inside one cuMemAlloc allocation (the form NVSHMEM's ibgda.cpp exports)
// Built with GDRPEER_FAKE_CUDA_OLD it lacks cuMemGetHandleForAddressRange and cuMemHostRegister;
// with GDRPEER_FAKE_CUDA_NO_HOST_REGISTER / _NO_HOST_UNREGISTER it lacks only that one entry point.
// gdrpeer_fake_cuda_inits() counts cuInit calls (a test can also ask the dynamic loader).
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace {

struct Config {
  std::vector<std::string> gpus;
  bool peer = true, corrupt = false;
  double peer_gbps = 390, staged_gbps = 38, lat_peer_us = 2.5, lat_staged_us = 17;
  int init = 0, dmabuf = 0, host_register = 0, mem_alloc = 0;
  bool strict_range = false;
};
Config cfg;
int inits = 0;

// Each stream has its own clock; a synchronisation brings every stream to the latest
// (everything issued has finished), as the wall clock would.
struct Stream {
  double t_us = 0;
};
std::set<Stream*> streams;
void sync_all() {
  double now = 0;
  for (Stream* s : streams) now = std::max(now, s->t_us);
  for (Stream* s : streams) s->t_us = now;
}
struct Event {
  double t_us = 0;
};
struct Alloc {
  int device = -1;
  size_t size = 0;
};
std::map<uintptr_t, Alloc> allocs;
std::set<std::pair<uintptr_t, uintptr_t>> peer_on;  // (from ctx, to ctx)
thread_local uintptr_t current = 0;                 // context = device ordinal + 1

constexpr int kSuccess = 0, kInvalidValue = 1, kOutOfMemory = 2, kInvalidDevice = 101, kPeerUnsupported = 217, kPeerAlreadyEnabled = 704,
              kPeerNotEnabled = 705;

void configure() {
  cfg = Config{};
  const char* spec = std::getenv("GDRPEER_FAKE_CUDA");
  std::istringstream words(spec ? spec : "");
  for (std::string w; words >> w;) {
    const size_t eq = w.find('=');
    if (eq == std::string::npos) continue;
    const std::string k = w.substr(0, eq), v = w.substr(eq + 1);
    if (k == "gpus") {
      std::istringstream list(v);
      for (std::string b; std::getline(list, b, ',');) cfg.gpus.push_back(b);
    } else if (k == "peer")
      cfg.peer = v == "1";
    else if (k == "corrupt")
      cfg.corrupt = v == "1";
    else if (k == "peer_gbps")
      cfg.peer_gbps = std::atof(v.c_str());
    else if (k == "staged_gbps")
      cfg.staged_gbps = std::atof(v.c_str());
    else if (k == "lat_peer_us")
      cfg.lat_peer_us = std::atof(v.c_str());
    else if (k == "lat_staged_us")
      cfg.lat_staged_us = std::atof(v.c_str());
    else if (k == "init")
      cfg.init = std::atoi(v.c_str());
    else if (k == "dmabuf")
      cfg.dmabuf = std::atoi(v.c_str());
    else if (k == "host_register")
      cfg.host_register = std::atoi(v.c_str());
    else if (k == "mem_alloc")
      cfg.mem_alloc = std::atoi(v.c_str());
    else if (k == "strict_range")
      cfg.strict_range = v == "1";
  }
}

bool valid_device(int d) { return d >= 0 && static_cast<size_t>(d) < cfg.gpus.size(); }

}  // namespace

extern "C" {

int gdrpeer_fake_cuda_inits() { return inits; }

int cuInit(unsigned) {
  ++inits;
  configure();
  return cfg.init;
}
int cuDriverGetVersion(int* v) {
  // GDRPEER_FAKE_CUDA="driver=12040 ...": the version a test wants (read here: callers ask before cuInit).
  const char* spec = std::getenv("GDRPEER_FAKE_CUDA");
  const char* d = spec ? std::strstr(spec, "driver=") : nullptr;
  *v = d ? std::atoi(d + 7) : 12080;
  return kSuccess;
}
#ifndef GDRPEER_FAKE_CUDA_OLD  // a driver before CUDA 11.7: no dma-buf export (nor, here, cuMemHostRegister)
// The dma-buf export of `verify`'s cuda source: an fd of an empty memfd stands in for NVIDIA's
// dma-buf; the flags are kept for the test (CU_MEM_RANGE_FLAG_DMA_BUF_MAPPING_TYPE_PCIE = 1).
unsigned long long last_range_flags = ~0ull;
unsigned long long gdrpeer_fake_cuda_last_range_flags() { return last_range_flags; }
int cuMemGetHandleForAddressRange(void* handle, unsigned long long dptr, size_t size, int type, unsigned long long flags) {
  last_range_flags = flags;
  if (type != 1 || (flags & ~1ull) != 0) return kInvalidValue;
  if (cfg.dmabuf != kSuccess) return cfg.dmabuf;
  if (cfg.strict_range) {
    const auto page = static_cast<unsigned long long>(::sysconf(_SC_PAGESIZE));
    bool inside = false;
    for (const auto& [at, a] : allocs) inside = inside || (dptr >= at && dptr + size <= at + a.size);
    if (dptr % page != 0 || size % page != 0 || size == 0 || !inside) return kInvalidValue;
  }
  const int fd = static_cast<int>(::syscall(SYS_memfd_create, "fake-cuda-dmabuf", 0u));
  if (fd < 0) return kOutOfMemory;
  *static_cast<int*>(handle) = fd;
  return kSuccess;
}
// cuMemHostRegister: the registered ranges and flags are kept for the test (the CUDA Driver API's
// CU_MEMHOSTREGISTER_PORTABLE 0x01, DEVICEMAP 0x02, IOMEMORY 0x04); an unregister of a pointer
// never registered is CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED (713), as the API documents.
std::map<uintptr_t, std::pair<size_t, unsigned>> host_registered;
unsigned last_host_register_flags = 0;
void* last_host_register_ptr = nullptr;
size_t last_host_register_size = 0;
size_t gdrpeer_fake_cuda_host_registered() { return host_registered.size(); }
unsigned gdrpeer_fake_cuda_last_host_register_flags() { return last_host_register_flags; }
void* gdrpeer_fake_cuda_last_host_register_ptr() { return last_host_register_ptr; }
size_t gdrpeer_fake_cuda_last_host_register_size() { return last_host_register_size; }
#ifndef GDRPEER_FAKE_CUDA_NO_HOST_REGISTER
int cuMemHostRegister_v2(void* p, size_t n, unsigned flags) {
  last_host_register_flags = flags;
  last_host_register_ptr = p;
  last_host_register_size = n;
  if (cfg.host_register != kSuccess) return cfg.host_register;
  host_registered[reinterpret_cast<uintptr_t>(p)] = {n, flags};
  return kSuccess;
}
#endif
#ifndef GDRPEER_FAKE_CUDA_NO_HOST_UNREGISTER
int cuMemHostUnregister(void* p) { return host_registered.erase(reinterpret_cast<uintptr_t>(p)) ? kSuccess : 713; }
#endif
#endif
int cuGetErrorName(int rc, const char** s) {
  static thread_local std::string text;
  text = "CUDA_FAKE_ERROR_" + std::to_string(rc);
  *s = text.c_str();
  return kSuccess;
}
int cuGetErrorString(int, const char** s) {
  *s = "fake driver error";
  return kSuccess;
}
int cuDeviceGetCount(int* n) {
  *n = static_cast<int>(cfg.gpus.size());
  return kSuccess;
}
int cuDeviceGet(int* d, int i) {
  if (!valid_device(i)) return kInvalidDevice;
  *d = i;
  return kSuccess;
}
int cuDeviceGetName(char* name, int len, int d) {
  if (!valid_device(d)) return kInvalidDevice;
  std::snprintf(name, static_cast<size_t>(len), "Fake GPU %d", d);
  return kSuccess;
}
int cuDeviceGetAttribute(int* v, int, int d) {
  if (!valid_device(d)) return kInvalidDevice;
  *v = 1;
  return kSuccess;
}
int cuDeviceGetPCIBusId(char* id, int len, int d) {
  if (!valid_device(d)) return kInvalidDevice;
  std::snprintf(id, static_cast<size_t>(len), "%s", cfg.gpus[static_cast<size_t>(d)].c_str());
  return kSuccess;
}
int cuDevicePrimaryCtxRetain(void** ctx, int d) {
  if (!valid_device(d)) return kInvalidDevice;
  *ctx = reinterpret_cast<void*>(static_cast<uintptr_t>(d) + 1);
  return kSuccess;
}
int cuDevicePrimaryCtxRelease_v2(int) { return kSuccess; }
int cuCtxSetCurrent(void* ctx) {
  current = reinterpret_cast<uintptr_t>(ctx);
  return kSuccess;
}
int cuCtxSynchronize() {
  sync_all();
  return kSuccess;
}
int cuMemAlloc_v2(unsigned long long* p, size_t n) {
  if (current == 0) return kInvalidValue;
  if (cfg.mem_alloc != kSuccess) return cfg.mem_alloc;
  void* m = std::malloc(n);
  if (!m) return kOutOfMemory;
  *p = reinterpret_cast<uintptr_t>(m);
  allocs[*p] = Alloc{static_cast<int>(current - 1), n};
  return kSuccess;
}
int cuMemFree_v2(unsigned long long p) {
  allocs.erase(p);
  std::free(reinterpret_cast<void*>(p));
  return kSuccess;
}
int cuMemGetInfo_v2(size_t* free_bytes, size_t* total) {
  *free_bytes = *total = size_t{80} << 30;
  return kSuccess;
}
int cuMemcpyHtoD_v2(unsigned long long dst, const void* src, size_t n) {
  std::memcpy(reinterpret_cast<void*>(dst), src, n);
  return kSuccess;
}
int cuMemcpyDtoH_v2(void* dst, unsigned long long src, size_t n) {
  std::memcpy(dst, reinterpret_cast<const void*>(src), n);
  return kSuccess;
}
int cuMemsetD8_v2(unsigned long long dst, unsigned char v, size_t n) {
  std::memset(reinterpret_cast<void*>(dst), v, n);
  return kSuccess;
}
int cuPointerSetAttribute(const void*, int, unsigned long long) { return kSuccess; }

// ---- peer-to-peer -------------------------------------------------------------------
int cuDeviceCanAccessPeer(int* can, int a, int b) {
  if (!valid_device(a) || !valid_device(b)) return kInvalidDevice;
  *can = cfg.peer && a != b ? 1 : 0;
  return kSuccess;
}
int cuDeviceGetP2PAttribute(int* v, int attr, int a, int b) {
  if (!valid_device(a) || !valid_device(b)) return kInvalidDevice;
  *v = attr == 1 ? 0 : (cfg.peer ? 1 : 0);  // performance rank 0; access, atomics, arrays
  return kSuccess;
}
int cuCtxEnablePeerAccess(void* peer, unsigned) {
  if (!cfg.peer) return kPeerUnsupported;
  const auto key = std::make_pair(current, reinterpret_cast<uintptr_t>(peer));
  if (peer_on.count(key)) return kPeerAlreadyEnabled;
  peer_on.insert(key);
  return kSuccess;
}
int cuCtxDisablePeerAccess(void* peer) { return peer_on.erase({current, reinterpret_cast<uintptr_t>(peer)}) ? kSuccess : kPeerNotEnabled; }
int cuStreamCreate(Stream** s, unsigned) {
  *s = new Stream;
  streams.insert(*s);
  sync_all();
  return kSuccess;
}
int cuStreamDestroy_v2(Stream* s) {
  streams.erase(s);
  delete s;
  return kSuccess;
}
int cuStreamWaitEvent(Stream* s, Event* e, unsigned) {
  if (e->t_us > s->t_us) s->t_us = e->t_us;
  return kSuccess;
}
int cuStreamSynchronize(Stream*) {
  sync_all();
  return kSuccess;
}
int cuEventCreate(Event** e, unsigned) {
  *e = new Event;
  return kSuccess;
}
int cuEventDestroy_v2(Event* e) {
  delete e;
  return kSuccess;
}
int cuEventRecord(Event* e, Stream* s) {
  e->t_us = s->t_us;
  return kSuccess;
}
int cuEventSynchronize(Event*) {
  sync_all();
  return kSuccess;
}
int cuEventElapsedTime(float* ms, Event* a, Event* b) {
  *ms = static_cast<float>((b->t_us - a->t_us) / 1000.0);
  return kSuccess;
}
int cuMemcpyPeerAsync(unsigned long long dst, void* dst_ctx, unsigned long long src, void* src_ctx, size_t n, Stream* s) {
  const auto d = reinterpret_cast<uintptr_t>(dst_ctx), c = reinterpret_cast<uintptr_t>(src_ctx);
  const bool peer = peer_on.count({c, d}) || peer_on.count({d, c});
  std::memmove(reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), n);
  if (peer && cfg.corrupt && n > 4) reinterpret_cast<unsigned char*>(dst)[n / 2] ^= 0x5a;
  const double gbps = peer ? cfg.peer_gbps : cfg.staged_gbps;
  s->t_us += static_cast<double>(n) / (gbps * 1e3) + (n <= 4096 ? (peer ? cfg.lat_peer_us : cfg.lat_staged_us) : 0);
  return kSuccess;
}

}  // extern "C"

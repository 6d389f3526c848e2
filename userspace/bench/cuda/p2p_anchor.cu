// p2p_anchor: the independent measurement that `gdrpeer verify --p2p` is compared with
// (docs/benchmarks.md). Written in the manner of cuda-samples' p2pBandwidthLatencyTest and
// NVIDIA's nvbandwidth copy-engine tests, with the plain CUDA runtime API, so it shares no code
// with gdrpeer. Built and run only on a machine with CUDA (the device tool's GPU machines):
//   nvcc -O2 -o p2p_anchor p2p_anchor.cu && ./p2p_anchor [MiB] [reps]
// Prints one JSON object per ordered GPU pair on stdout.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#define CK(x)                                                                            \
  do {                                                                                   \
    cudaError_t e_ = (x);                                                                \
    if (e_ != cudaSuccess) {                                                             \
      fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      exit(2);                                                                           \
    }                                                                                    \
  } while (0)

static char g_bdf[16][32];

// One non-blocking stream of the source device, with an event recorded where timing starts
// and the elapsed milliseconds up to now.
struct Timed {
  cudaStream_t st;
  cudaEvent_t a, b;
  explicit Timed(int src) {
    CK(cudaSetDevice(src));
    CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
  }
  void start() { CK(cudaEventRecord(a, st)); }
  float ms() {
    CK(cudaEventRecord(b, st));
    CK(cudaEventSynchronize(b));
    float m = 0;
    CK(cudaEventElapsedTime(&m, a, b));
    return m;
  }
  ~Timed() {
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    cudaStreamDestroy(st);
  }
};

// Unidirectional: reps copies src->dst on one stream of the source device, timed with events.
static double uni_gbps(int src, int dst, void* s, void* d, size_t bytes, int reps) {
  Timed t(src);
  CK(cudaMemcpyPeerAsync(d, dst, s, src, bytes, t.st));  // warm-up
  t.start();
  for (int i = 0; i < reps; i++) CK(cudaMemcpyPeerAsync(d, dst, s, src, bytes, t.st));
  return (double)bytes * reps / (t.ms() / 1e3) / 1e9;
}

// Bidirectional: both directions at once, one stream on each device; total bytes / wall time.
static double bidi_gbps(int i, int j, void* bi, void* bj, void* ci, void* cj, size_t bytes, int reps) {
  cudaStream_t si, sj;
  cudaEvent_t start, stop, donej;
  CK(cudaSetDevice(j));
  CK(cudaStreamCreateWithFlags(&sj, cudaStreamNonBlocking));
  CK(cudaEventCreate(&donej));
  CK(cudaSetDevice(i));
  CK(cudaStreamCreateWithFlags(&si, cudaStreamNonBlocking));
  CK(cudaEventCreate(&start));
  CK(cudaEventCreate(&stop));
  CK(cudaDeviceSynchronize());
  CK(cudaEventRecord(start, si));
  CK(cudaStreamWaitEvent(sj, start, 0));
  for (int r = 0; r < reps; r++) {
    CK(cudaMemcpyPeerAsync(cj, j, bi, i, bytes, si));
    CK(cudaMemcpyPeerAsync(ci, i, bj, j, bytes, sj));
  }
  CK(cudaSetDevice(j));
  CK(cudaEventRecord(donej, sj));
  CK(cudaSetDevice(i));
  CK(cudaStreamWaitEvent(si, donej, 0));
  CK(cudaEventRecord(stop, si));
  CK(cudaEventSynchronize(stop));
  float ms = 0;
  CK(cudaEventElapsedTime(&ms, start, stop));
  cudaStreamDestroy(si);
  cudaStreamDestroy(sj);
  return 2.0 * bytes * reps / (ms / 1e3) / 1e9;
}

// Latency of a 4-byte copy src->dst: mean over n, after warm-up, in microseconds.
static double lat_us(int src, int dst, void* s, void* d, int n) {
  Timed t(src);
  for (int i = 0; i < 100; i++) CK(cudaMemcpyPeerAsync(d, dst, s, src, 4, t.st));
  t.start();
  for (int i = 0; i < n; i++) CK(cudaMemcpyPeerAsync(d, dst, s, src, 4, t.st));
  return t.ms() * 1e3 / n;
}

// Byte check: a pattern unique to the pair, copied src->dst, read back and compared.
static long bad_bytes(int src, int dst, void* s, void* d, size_t bytes) {
  std::vector<unsigned char> h(bytes), r(bytes);
  for (size_t k = 0; k < bytes; k++) h[k] = (unsigned char)(k * 131 + src * 17 + dst * 7 + (k >> 12));
  CK(cudaSetDevice(src));
  CK(cudaMemcpy(s, h.data(), bytes, cudaMemcpyHostToDevice));
  CK(cudaSetDevice(dst));
  CK(cudaMemset(d, 0, bytes));
  CK(cudaDeviceSynchronize());
  CK(cudaMemcpyPeer(d, dst, s, src, bytes));
  CK(cudaMemcpy(r.data(), d, bytes, cudaMemcpyDeviceToHost));
  long bad = 0;
  for (size_t k = 0; k < bytes; k++) bad += h[k] != r[k];
  return bad;
}

int main(int argc, char** argv) {
  size_t mib = argc > 1 ? strtoul(argv[1], nullptr, 0) : 256;
  int reps = argc > 2 ? atoi(argv[2]) : 10;
  size_t bytes = mib << 20;
  int n = 0;
  CK(cudaGetDeviceCount(&n));
  if (n > 16) n = 16;
  std::vector<void*> a(n), b(n);
  for (int i = 0; i < n; i++) {
    CK(cudaSetDevice(i));
    CK(cudaDeviceGetPCIBusId(g_bdf[i], sizeof(g_bdf[i]), i));
    CK(cudaMalloc(&a[i], bytes));
    CK(cudaMalloc(&b[i], bytes));
  }
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++) {
      if (i == j) continue;
      int can = 0, rank = 0, access = 0, atom = 0, arr = 0;
      CK(cudaDeviceCanAccessPeer(&can, i, j));
      CK(cudaDeviceGetP2PAttribute(&rank, cudaDevP2PAttrPerformanceRank, i, j));
      CK(cudaDeviceGetP2PAttribute(&access, cudaDevP2PAttrAccessSupported, i, j));
      CK(cudaDeviceGetP2PAttribute(&atom, cudaDevP2PAttrNativeAtomicSupported, i, j));
      CK(cudaDeviceGetP2PAttribute(&arr, cudaDevP2PAttrCudaArrayAccessSupported, i, j));
      // Peer access off first: the copy is staged through the host.
      double uni_off = uni_gbps(i, j, a[i], b[j], bytes, reps);
      double bidi_off = bidi_gbps(i, j, a[i], a[j], b[i], b[j], bytes, reps);
      double lat_off = lat_us(i, j, a[i], b[j], 1000);
      double uni_on = 0, bidi_on = 0, lat_on = 0;
      long bad = -1;
      if (can) {
        CK(cudaSetDevice(i));
        CK(cudaDeviceEnablePeerAccess(j, 0));
        CK(cudaSetDevice(j));
        CK(cudaDeviceEnablePeerAccess(i, 0));
        bad = bad_bytes(i, j, a[i], b[j], bytes);
        uni_on = uni_gbps(i, j, a[i], b[j], bytes, reps);
        bidi_on = bidi_gbps(i, j, a[i], a[j], b[i], b[j], bytes, reps);
        lat_on = lat_us(i, j, a[i], b[j], 1000);
        CK(cudaSetDevice(i));
        CK(cudaDeviceDisablePeerAccess(j));
        CK(cudaSetDevice(j));
        CK(cudaDeviceDisablePeerAccess(i));
      }
      printf(
          "{\"src\":%d,\"dst\":%d,\"src_bdf\":\"%s\",\"dst_bdf\":\"%s\",\"can_access_peer\":%d,"
          "\"perf_rank\":%d,\"access\":%d,\"native_atomics\":%d,\"cuda_arrays\":%d,"
          "\"bytes\":%zu,\"reps\":%d,\"uni_gbps_peer\":%.1f,\"bidi_gbps_peer\":%.1f,"
          "\"uni_gbps_staged\":%.1f,\"bidi_gbps_staged\":%.1f,\"lat_us_peer\":%.2f,"
          "\"lat_us_staged\":%.2f,\"bad_bytes\":%ld}\n",
          i, j, g_bdf[i], g_bdf[j], can, rank, access, atom, arr, bytes, reps, uni_on, bidi_on, uni_off, bidi_off, lat_on, lat_off, bad);
      fflush(stdout);
    }
  return 0;
}

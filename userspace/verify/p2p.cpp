// `gdrpeer verify --p2p` (p2p.hpp): the measurement, the comparison with check's
// prediction, and the two outputs.
#include "gdrpeer/verify/p2p.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <iomanip>
#include <memory>
#include <sstream>

#include "gdrpeer/dynload/cuda.hpp"

namespace gdrpeer::verify {

namespace {

namespace cu = gdrpeer::cuda;

// "00000000:06:00.0" or "0000:06:00.0" -> "0000:06:00.0" (lower case); "" when malformed.
std::string canonical_bdf(const std::string& s) {
  unsigned dom = 0, bus = 0, dev = 0, fn = 0;
  char end = 0;
  if (std::sscanf(s.c_str(), "%x:%x:%x.%x%c", &dom, &bus, &dev, &fn, &end) == 4 && dom <= 0xffff && bus <= 0xff && dev <= 0x1f && fn <= 7) {
  } else if (std::sscanf(s.c_str(), "%x:%x.%x%c", &bus, &dev, &fn, &end) == 3 && bus <= 0xff && dev <= 0x1f && fn <= 7) {
    dom = 0;
  } else {
    return "";
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%04x:%02x:%02x.%x", dom, bus, dev, fn);
  return buf;
}

std::string gbps(double v) {
  char b[32];
  std::snprintf(b, sizeof b, v >= 100 ? "%.0f GB/s" : "%.1f GB/s", v);
  return b;
}

// One GPU as the measurement uses it: primary context, two buffers, a stream and events.
struct Gpu {
  int ordinal = -1;
  cu::CUdevice dev = 0;
  cu::CUcontext ctx = nullptr;
  std::string bdf, name;
  cu::CUdeviceptr src = 0, dst = 0;
  cu::CUstream stream = nullptr;
  cu::CUevent ev_a = nullptr, ev_b = nullptr;
};

// A CUDA call that failed: the measurement of the pair stops there.
struct CudaError {
  std::string what;
};

class Bench {
 public:
  Bench(const cu::Api& api, size_t bytes, int reps, int lat) : cu_(api), bytes_(bytes), reps_(reps), lat_(lat) {}

  void ck(cu::CUresult rc, const char* call) const {
    if (rc != cu::CUDA_SUCCESS) throw CudaError{std::string(call) + ": " + cu_.error_text(rc)};
  }
  void use(const Gpu& g) const { ck(cu_.cuCtxSetCurrent(g.ctx), "cuCtxSetCurrent"); }

  void setup(Gpu& g) const {
    use(g);
    ck(cu_.cuMemAlloc(&g.src, bytes_), "cuMemAlloc");
    ck(cu_.cuMemAlloc(&g.dst, bytes_), "cuMemAlloc");
    ck(cu_.cuStreamCreate(&g.stream, cu::CU_STREAM_NON_BLOCKING), "cuStreamCreate");
    ck(cu_.cuEventCreate(&g.ev_a, cu::CU_EVENT_DEFAULT), "cuEventCreate");
    ck(cu_.cuEventCreate(&g.ev_b, cu::CU_EVENT_DEFAULT), "cuEventCreate");
  }

  void teardown(Gpu& g) const {
    if (!g.ctx) return;
    cu_.cuCtxSetCurrent(g.ctx);
    if (g.ev_a) cu_.cuEventDestroy(g.ev_a);
    if (g.ev_b) cu_.cuEventDestroy(g.ev_b);
    if (g.stream) cu_.cuStreamDestroy(g.stream);
    if (g.src) cu_.cuMemFree(g.src);
    if (g.dst) cu_.cuMemFree(g.dst);
    cu_.cuDevicePrimaryCtxRelease(g.dev);
    g = Gpu{};
  }

  float elapsed_ms(cu::CUevent a, cu::CUevent b) const {
    ck(cu_.cuEventSynchronize(b), "cuEventSynchronize");
    float ms = 0;
    ck(cu_.cuEventElapsedTime(&ms, a, b), "cuEventElapsedTime");
    return ms;
  }

  // reps copies src -> dst on the source GPU's stream after one warm-up copy, timed by events.
  double uni_gbps(const Gpu& s, const Gpu& d) const {
    use(s);
    ck(cu_.cuMemcpyPeerAsync(d.dst, d.ctx, s.src, s.ctx, bytes_, s.stream), "cuMemcpyPeerAsync");
    ck(cu_.cuEventRecord(s.ev_a, s.stream), "cuEventRecord");
    for (int i = 0; i < reps_; ++i) ck(cu_.cuMemcpyPeerAsync(d.dst, d.ctx, s.src, s.ctx, bytes_, s.stream), "cuMemcpyPeerAsync");
    ck(cu_.cuEventRecord(s.ev_b, s.stream), "cuEventRecord");
    const float ms = elapsed_ms(s.ev_a, s.ev_b);
    return ms > 0 ? static_cast<double>(bytes_) * reps_ / (ms / 1e3) / 1e9 : 0;
  }

  // Both directions at once, one stream on each GPU: total bytes over the wall time.
  double bidi_gbps(const Gpu& a, const Gpu& b) const {
    use(b);
    ck(cu_.cuCtxSynchronize(), "cuCtxSynchronize");
    use(a);
    ck(cu_.cuCtxSynchronize(), "cuCtxSynchronize");
    ck(cu_.cuEventRecord(a.ev_a, a.stream), "cuEventRecord");
    use(b);
    ck(cu_.cuStreamWaitEvent(b.stream, a.ev_a, 0), "cuStreamWaitEvent");
    for (int i = 0; i < reps_; ++i) {
      use(a);
      ck(cu_.cuMemcpyPeerAsync(b.dst, b.ctx, a.src, a.ctx, bytes_, a.stream), "cuMemcpyPeerAsync");
      use(b);
      ck(cu_.cuMemcpyPeerAsync(a.dst, a.ctx, b.src, b.ctx, bytes_, b.stream), "cuMemcpyPeerAsync");
    }
    use(b);
    ck(cu_.cuEventRecord(b.ev_b, b.stream), "cuEventRecord");
    use(a);
    ck(cu_.cuStreamWaitEvent(a.stream, b.ev_b, 0), "cuStreamWaitEvent");
    ck(cu_.cuEventRecord(a.ev_b, a.stream), "cuEventRecord");
    const float ms = elapsed_ms(a.ev_a, a.ev_b);
    return ms > 0 ? 2.0 * static_cast<double>(bytes_) * reps_ / (ms / 1e3) / 1e9 : 0;
  }

  // Mean time of a 4-byte copy src -> dst after 100 warm-up copies, in microseconds.
  double latency_us(const Gpu& s, const Gpu& d) const {
    use(s);
    for (int i = 0; i < 100; ++i) ck(cu_.cuMemcpyPeerAsync(d.dst, d.ctx, s.src, s.ctx, 4, s.stream), "cuMemcpyPeerAsync");
    ck(cu_.cuEventRecord(s.ev_a, s.stream), "cuEventRecord");
    for (int i = 0; i < lat_; ++i) ck(cu_.cuMemcpyPeerAsync(d.dst, d.ctx, s.src, s.ctx, 4, s.stream), "cuMemcpyPeerAsync");
    ck(cu_.cuEventRecord(s.ev_b, s.stream), "cuEventRecord");
    return elapsed_ms(s.ev_a, s.ev_b) * 1e3 / lat_;
  }

  // A pattern unique to the pair and seed, copied src -> dst with peer access on, read back
  // and compared byte for byte. Returns the number of bytes that differ.
  long long bad_bytes(const Gpu& s, const Gpu& d, uint64_t seed) {
    const size_t words = bytes_ / 8;
    if (!pattern_) {  // host buffers allocated once (not cleared: every word is written before it is read)
      pattern_.reset(new uint64_t[words]);
      back_.reset(new uint64_t[words]);
    }
    uint64_t* pattern = pattern_.get();
    uint64_t* back = back_.get();
    uint64_t x = seed ^ (static_cast<uint64_t>(s.ordinal) << 32) ^ static_cast<uint64_t>(d.ordinal + 1) * 0x9e3779b97f4a7c15ull;
    for (size_t w = 0; w < words; ++w) {  // splitmix64
      x += 0x9e3779b97f4a7c15ull;
      uint64_t z = x;
      z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
      z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
      pattern[w] = z ^ (z >> 31);
    }
    const size_t n = words * 8;
    use(s);
    ck(cu_.cuMemcpyHtoD(s.src, pattern, n), "cuMemcpyHtoD");
    use(d);
    ck(cu_.cuMemsetD8(d.dst, 0, n), "cuMemsetD8");
    ck(cu_.cuCtxSynchronize(), "cuCtxSynchronize");
    use(s);
    ck(cu_.cuMemcpyPeerAsync(d.dst, d.ctx, s.src, s.ctx, n, s.stream), "cuMemcpyPeerAsync");
    ck(cu_.cuStreamSynchronize(s.stream), "cuStreamSynchronize");
    use(d);
    ck(cu_.cuMemcpyDtoH(back, d.dst, n), "cuMemcpyDtoH");
    long long bad = 0;
    const auto* p = reinterpret_cast<const unsigned char*>(pattern);
    const auto* q = reinterpret_cast<const unsigned char*>(back);
    for (size_t w = 0; w < words; ++w)
      if (pattern[w] != back[w])
        for (size_t k = 0; k < 8; ++k) bad += p[w * 8 + k] != q[w * 8 + k];
    return bad;
  }

  void peer_access(const Gpu& a, const Gpu& b, bool on) const {
    for (const auto& [from, to] : {std::pair<const Gpu*, const Gpu*>{&a, &b}, {&b, &a}}) {
      use(*from);
      if (on) {
        const cu::CUresult rc = cu_.cuCtxEnablePeerAccess(to->ctx, 0);
        if (rc != cu::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED) ck(rc, "cuCtxEnablePeerAccess");
      } else {
        const cu::CUresult rc = cu_.cuCtxDisablePeerAccess(to->ctx);
        if (rc != cu::CUDA_ERROR_PEER_ACCESS_NOT_ENABLED) ck(rc, "cuCtxDisablePeerAccess");
      }
    }
  }

 private:
  const cu::Api& cu_;
  size_t bytes_;
  int reps_, lat_;
  std::unique_ptr<uint64_t[]> pattern_, back_;
};

int attribute(const cu::Api& api, int attr, cu::CUdevice a, cu::CUdevice b) {
  int v = -1;
  return api.cuDeviceGetP2PAttribute(&v, attr, a, b) == cu::CUDA_SUCCESS ? v : -1;
}

}  // namespace

std::pair<std::string, std::string> compare_p2p(const P2pPrediction& p, const P2pAttributes& a, const P2pMeasurement& m) {
  if (!m.error.empty()) return {"fail", "CUDA error: " + m.error};
  if (m.bad_bytes > 0) return {"fail", std::to_string(m.bad_bytes) + " byte(s) differ after a peer copy"};
  const bool peer = a.can_access_peer == 1 && m.uni_gbps_peer > 0;
  // Peer access that moves data no faster than the staged copy is not direct peer-to-peer.
  const bool faster_than_staged = peer && m.uni_gbps_peer > 1.2 * m.uni_gbps_staged;
  const std::string measured = peer ? "measured " + gbps(m.uni_gbps_peer) + " with peer access (staged " + gbps(m.uni_gbps_staged) + ")"
                                    : "measured no peer access (cuDeviceCanAccessPeer=" + std::to_string(a.can_access_peer) +
                                          "), staged through the host at " + gbps(m.uni_gbps_staged);
  switch (p.path) {
    case P2pPrediction::Path::Unknown: return {"no-prediction", "no prediction from check (" + p.why + "); " + measured};
    case P2pPrediction::Path::NvLink: {
      const std::string said = p.summary + ": predicted P2P over NVLink; ";
      if (!peer) return {"disagree", said + measured + ": NVLink is not used"};
      if (!faster_than_staged) return {"disagree", said + measured + ": only the staged rate"};
      if (p.pcie_gbps > 0 && m.uni_gbps_peer <= p.pcie_gbps)
        return {"disagree", said + measured + ": no more than the PCIe link carries (" + gbps(p.pcie_gbps) + "), not NVLink"};
      return {"agree", said + "measured " + gbps(m.uni_gbps_peer)};
    }
    case P2pPrediction::Path::Pcie: {
      const std::string said = p.summary + ": predicted P2P over PCIe (" + p.verdict + "); ";
      if (!peer) return {"disagree", said + measured};
      if (!faster_than_staged) return {"disagree", said + measured + ": only the staged rate"};
      return {"agree", said + measured};
    }
    case P2pPrediction::Path::None: {
      const std::string said = p.summary + ": check said " + p.verdict + " for peer-to-peer; ";
      if (peer && faster_than_staged) return {"disagree", said + measured + ": direct peer-to-peer works"};
      return {"agree", said + measured};
    }
  }
  return {"no-prediction", measured};
}

int p2p_exit_code(const P2pReport& r) {
  if (!r.usage_error.empty()) return 64;
  if (!r.not_run.empty()) return 3;
  // The meanings of every subcommand (docs/check.md): 2 failed, 1 works but not as predicted.
  int rc = 0;
  for (const auto& p : r.pairs) {
    if (p.outcome == "fail") return 2;
    if (p.outcome == "disagree") rc = 1;
  }
  return rc;
}

P2pReport run_p2p(const P2pOptions& o, const P2pPredictor& predict) {
  P2pReport r;
  r.bytes = o.bytes;
  r.reps = o.reps;
  const auto t0 = std::chrono::steady_clock::now();
  auto finish = [&] {
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    r.exit_code = p2p_exit_code(r);
    return r;
  };
  std::string why;
  const cu::Api* api = cu::load(&why, o.libcuda.c_str());
  if (!api) {
    r.not_run = why;
    return finish();
  }
  if (!api->p2p_missing.empty()) {
    r.not_run = o.libcuda + " lacks the peer-to-peer entry points " + api->p2p_missing + " (driver too old)";
    return finish();
  }
  if (const cu::CUresult rc = api->cuInit(0); rc != cu::CUDA_SUCCESS) {
    r.not_run = "cuInit failed: " + api->error_text(rc);
    return finish();
  }
  int version = 0;
  if (api->cuDriverGetVersion(&version) == cu::CUDA_SUCCESS) r.driver = "CUDA driver " + std::to_string(version);
  int n = 0;
  if (const cu::CUresult rc = api->cuDeviceGetCount(&n); rc != cu::CUDA_SUCCESS) {
    r.not_run = "cuDeviceGetCount failed: " + api->error_text(rc);
    return finish();
  }
  std::vector<Gpu> all;
  for (int i = 0; i < n; ++i) {
    Gpu g;
    g.ordinal = i;
    char id[64] = {}, name[256] = {};
    if (api->cuDeviceGet(&g.dev, i) != cu::CUDA_SUCCESS || api->cuDeviceGetPCIBusId(id, sizeof id, g.dev) != cu::CUDA_SUCCESS) continue;
    api->cuDeviceGetName(name, sizeof name, g.dev);
    g.bdf = canonical_bdf(id);
    g.name = name;
    all.push_back(g);
    r.gpus.emplace_back(g.bdf, g.name);
  }
  // The selection, by BDF as check prints them.
  auto by_bdf = [&](const std::string& bdf) -> int {
    const std::string c = canonical_bdf(bdf);
    for (size_t i = 0; i < all.size(); ++i)
      if (!c.empty() && all[i].bdf == c) return static_cast<int>(i);
    return -1;
  };
  std::vector<std::pair<int, int>> order;
  std::vector<int> chosen;
  for (const auto& b : o.gpus) {
    const int i = by_bdf(b);
    if (i < 0) {
      r.usage_error = "--gpu " + b + ": no CUDA device at that PCI address";
      return finish();
    }
    if (std::find(chosen.begin(), chosen.end(), i) == chosen.end()) chosen.push_back(i);
  }
  if (o.gpus.empty())
    for (size_t i = 0; i < all.size(); ++i) chosen.push_back(static_cast<int>(i));
  if (!o.pairs.empty()) {
    for (const auto& [a, b] : o.pairs) {
      const int i = by_bdf(a), j = by_bdf(b);
      if (i < 0 || j < 0) {
        r.usage_error = "--pair " + a + "," + b + ": no CUDA device at " + (i < 0 ? a : b);
        return finish();
      }
      order.emplace_back(i, j);
    }
  } else {
    for (int i : chosen)
      for (int j : chosen)
        if (i != j) order.emplace_back(i, j);
  }
  if (order.empty()) {
    r.not_run = all.size() < 2 ? "peer-to-peer needs two GPUs; CUDA sees " + std::to_string(all.size()) : "no GPU pair selected";
    return finish();
  }
  Bench bench(*api, o.bytes, o.reps, o.latency_copies);
  std::vector<char> used(all.size(), 0);
  for (const auto& [i, j] : order) used[i] = used[j] = 1;
  std::string setup_error;
  for (size_t i = 0; i < all.size() && setup_error.empty(); ++i) {
    if (!used[i]) continue;
    try {
      bench.ck(api->cuDevicePrimaryCtxRetain(&all[i].ctx, all[i].dev), "cuDevicePrimaryCtxRetain");
      bench.setup(all[i]);
    } catch (const CudaError& e) {
      setup_error = all[i].bdf + ": " + e.what;
    }
  }
  for (const auto& [i, j] : order) {
    Gpu& s = all[i];
    Gpu& d = all[j];
    P2pPair p;
    p.src = s.ordinal;
    p.dst = d.ordinal;
    p.src_bdf = s.bdf;
    p.dst_bdf = d.bdf;
    if (o.progress) o.progress("GPU " + s.bdf + " -> " + d.bdf);
    int can = -1;
    if (api->cuDeviceCanAccessPeer(&can, s.dev, d.dev) == cu::CUDA_SUCCESS) p.attrs.can_access_peer = can;
    p.attrs.perf_rank = attribute(*api, cu::CU_DEVICE_P2P_ATTRIBUTE_PERFORMANCE_RANK, s.dev, d.dev);
    p.attrs.access = attribute(*api, cu::CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED, s.dev, d.dev);
    p.attrs.native_atomics = attribute(*api, cu::CU_DEVICE_P2P_ATTRIBUTE_NATIVE_ATOMIC_SUPPORTED, s.dev, d.dev);
    p.attrs.cuda_arrays = attribute(*api, cu::CU_DEVICE_P2P_ATTRIBUTE_CUDA_ARRAY_ACCESS_SUPPORTED, s.dev, d.dev);
    if (!setup_error.empty()) {
      p.m.error = setup_error;
    } else {
      bool enabled = false;
      try {
        // Peer access off first: the driver stages the copies through host memory.
        p.m.uni_gbps_staged = bench.uni_gbps(s, d);
        p.m.bidi_gbps_staged = bench.bidi_gbps(s, d);
        p.m.lat_us_staged = bench.latency_us(s, d);
        if (p.attrs.can_access_peer == 1) {
          bench.peer_access(s, d, true);
          enabled = true;
          p.m.bad_bytes = bench.bad_bytes(s, d, o.seed);
          p.m.uni_gbps_peer = bench.uni_gbps(s, d);
          p.m.bidi_gbps_peer = bench.bidi_gbps(s, d);
          p.m.lat_us_peer = bench.latency_us(s, d);
          enabled = false;
          bench.peer_access(s, d, false);
        }
      } catch (const CudaError& e) {
        p.m.error = e.what;
        if (enabled) try {
            bench.peer_access(s, d, false);
          } catch (const CudaError&) {
          }
      }
    }
    p.predicted = predict ? predict(s.bdf, d.bdf) : P2pPrediction{};
    if (!predict) p.predicted.why = "no check run";
    std::tie(p.outcome, p.comparison) = compare_p2p(p.predicted, p.attrs, p.m);
    r.pairs.push_back(std::move(p));
  }
  for (auto& g : all) bench.teardown(g);
  return finish();
}

namespace {
const char* path_word(P2pPrediction::Path p) {
  switch (p) {
    case P2pPrediction::Path::NvLink: return "nvlink";
    case P2pPrediction::Path::Pcie: return "pcie";
    case P2pPrediction::Path::None: return "none";
    case P2pPrediction::Path::Unknown: break;
  }
  return "unknown";
}

double round2(double v) { return static_cast<double>(static_cast<long long>(v * 100 + (v >= 0 ? 0.5 : -0.5))) / 100; }
}  // namespace

nlohmann::ordered_json p2p_to_json(const P2pReport& r) {
  nlohmann::ordered_json j;
  j["schema"] = "gdrpeer-verify-p2p";
  j["version"] = 1;
  j["exit_code"] = r.exit_code;
  if (!r.not_run.empty()) j["not_run"] = r.not_run;
  if (!r.usage_error.empty()) j["usage_error"] = r.usage_error;
  j["driver"] = r.driver;
  j["bytes"] = r.bytes;
  j["reps"] = r.reps;
  j["seconds"] = round2(r.seconds);
  j["gpus"] = nlohmann::ordered_json::array();
  for (const auto& [bdf, name] : r.gpus) j["gpus"].push_back({{"bdf", bdf}, {"name", name}});
  j["pairs"] = nlohmann::ordered_json::array();
  for (const auto& p : r.pairs) {
    // Field names as userspace/bench/cuda/p2p_anchor.cu prints them, for a direct comparison.
    nlohmann::ordered_json x;
    x["src"] = p.src;
    x["dst"] = p.dst;
    x["src_bdf"] = p.src_bdf;
    x["dst_bdf"] = p.dst_bdf;
    x["can_access_peer"] = p.attrs.can_access_peer;
    x["perf_rank"] = p.attrs.perf_rank;
    x["access"] = p.attrs.access;
    x["native_atomics"] = p.attrs.native_atomics;
    x["cuda_arrays"] = p.attrs.cuda_arrays;
    x["bytes"] = r.bytes;
    x["reps"] = r.reps;
    x["uni_gbps_peer"] = round2(p.m.uni_gbps_peer);
    x["bidi_gbps_peer"] = round2(p.m.bidi_gbps_peer);
    x["uni_gbps_staged"] = round2(p.m.uni_gbps_staged);
    x["bidi_gbps_staged"] = round2(p.m.bidi_gbps_staged);
    x["lat_us_peer"] = round2(p.m.lat_us_peer);
    x["lat_us_staged"] = round2(p.m.lat_us_staged);
    x["bad_bytes"] = p.m.bad_bytes;
    if (!p.m.error.empty()) x["error"] = p.m.error;
    x["predicted"] = {{"path", path_word(p.predicted.path)},
                      {"summary", p.predicted.summary},
                      {"verdict", p.predicted.verdict},
                      {"pcie_gbps", round2(p.predicted.pcie_gbps)}};
    if (!p.predicted.why.empty()) x["predicted"]["why"] = p.predicted.why;
    x["outcome"] = p.outcome;
    x["comparison"] = p.comparison;
    j["pairs"].push_back(std::move(x));
  }
  return j;
}

void print_p2p_table(const P2pReport& r, std::ostream& out) {
  if (!r.usage_error.empty()) {
    out << "gdrpeer verify --p2p: " << r.usage_error << "\n";
    return;
  }
  if (!r.not_run.empty()) {
    out << "gdrpeer verify --p2p: nothing to verify: " << r.not_run << "\n";
    return;
  }
  out << "GPU peer-to-peer, " << (r.bytes >> 20) << " MiB x " << r.reps << " copies per measurement"
      << (r.driver.empty() ? "" : ", " + r.driver) << "\n";
  for (size_t i = 0; i < r.gpus.size(); ++i) out << "  GPU " << i << "  " << r.gpus[i].first << "  " << r.gpus[i].second << "\n";
  out << "\n";
  char line[256];
  std::snprintf(line, sizeof line, "%-27s %4s %4s %4s %4s %9s %9s %9s %9s %8s %8s %6s  %s\n", "src -> dst", "peer", "atom", "arr", "rank",
                "uni GB/s", "bidi", "staged", "st.bidi", "lat us", "st.lat", "bad", "outcome");
  out << line;
  for (const auto& p : r.pairs) {
    std::snprintf(line, sizeof line, "%-27s %4d %4d %4d %4d %9.1f %9.1f %9.1f %9.1f %8.2f %8.2f %6lld  %s\n",
                  (p.src_bdf + " -> " + p.dst_bdf).c_str(), p.attrs.can_access_peer, p.attrs.native_atomics, p.attrs.cuda_arrays,
                  p.attrs.perf_rank, p.m.uni_gbps_peer, p.m.bidi_gbps_peer, p.m.uni_gbps_staged, p.m.bidi_gbps_staged, p.m.lat_us_peer,
                  p.m.lat_us_staged, p.m.bad_bytes, p.outcome.c_str());
    out << line;
  }
  out << "\nPrediction (gdrpeer check) next to measurement:\n";
  for (const auto& p : r.pairs) out << "  " << p.src_bdf << " -> " << p.dst_bdf << ": " << p.comparison << " [" << p.outcome << "]\n";
  int agree = 0, disagree = 0, fail = 0, none = 0;
  for (const auto& p : r.pairs) {
    if (p.outcome == "agree")
      ++agree;
    else if (p.outcome == "disagree")
      ++disagree;
    else if (p.outcome == "fail")
      ++fail;
    else
      ++none;
  }
  std::snprintf(line, sizeof line, "%.1f", r.seconds);
  out << "\nSummary: " << r.pairs.size() << " ordered pairs: " << agree << " agree, " << disagree << " disagree, " << fail << " failed, "
      << none << " without prediction; " << line << " s; exit " << r.exit_code << "\n";
}

}  // namespace gdrpeer::verify

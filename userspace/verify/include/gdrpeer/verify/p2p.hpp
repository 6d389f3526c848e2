// `gdrpeer verify --p2p`: GPU-to-GPU peer-to-peer proven on the node, in the manner of
// cuda-samples' p2pBandwidthLatencyTest and nvbandwidth's copy-engine tests, through the
// CUDA driver API loaded at run time (gdrpeer/dynload/cuda.hpp). Per ordered GPU pair:
// cuDeviceCanAccessPeer and the P2P attributes, a byte-checked copy with peer access on,
// unidirectional and bidirectional bandwidth with peer access on and off (staged through
// the host), the latency of a small copy; then what `gdrpeer check` predicted for the pair
// next to the measurement, and a verdict where they disagree.
//
// The timing is the plain cudaMemcpyPeerAsync loop (cuMemcpyPeerAsync on a non-blocking
// stream of the source GPU's primary context, events around `reps` copies after one
// warm-up copy), so that userspace/bench/cuda/p2p_anchor.cu measures the same thing.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

namespace gdrpeer::verify {

// What `gdrpeer check` said about a GPU pair, in the terms the measurement can test.
struct P2pPrediction {
  enum class Path { Unknown, NvLink, Pcie, None };
  Path path = Path::Unknown;
  std::string summary;   // "NV18 via NVSwitch", "PIX (one PCIe switch)", ...
  std::string verdict;   // check's verdict for the pair ("optimal", ...), "" when unknown
  std::string why;       // Unknown: why there is no prediction
  double pcie_gbps = 0;  // what the narrower PCIe link of the two GPUs carries per direction, 0 unknown
};

struct P2pAttributes {
  int can_access_peer = -1;                                                // cuDeviceCanAccessPeer
  int access = -1, native_atomics = -1, cuda_arrays = -1, perf_rank = -1;  // cuDeviceGetP2PAttribute
};

struct P2pMeasurement {
  double uni_gbps_peer = 0, bidi_gbps_peer = 0;      // peer access on (0: not measured)
  double uni_gbps_staged = 0, bidi_gbps_staged = 0;  // peer access off: staged through the host
  double lat_us_peer = 0, lat_us_staged = 0;         // one small copy, mean
  long long bad_bytes = -1;                          // -1: no peer access, so no byte check
  std::string error;                                 // a CUDA call that failed
};

struct P2pPair {
  int src = -1, dst = -1;  // CUDA ordinals
  std::string src_bdf, dst_bdf;
  P2pAttributes attrs;
  P2pMeasurement m;
  P2pPrediction predicted;
  std::string outcome;     // agree, disagree, fail, no-prediction
  std::string comparison;  // one line: prediction next to measurement
};

struct P2pOptions {
  std::string libcuda = "libcuda.so.1";
  // Ordered pairs to test ("src BDF", "dst BDF"); empty: every ordered pair of `gpus`.
  std::vector<std::pair<std::string, std::string>> pairs;
  std::vector<std::string> gpus;  // BDFs; empty: every GPU CUDA sees
  size_t bytes = size_t{256} << 20;
  int reps = 10;
  int latency_copies = 1000;
  uint64_t seed = 1;
  std::function<void(const std::string&)> progress;
};

struct P2pReport {
  std::string not_run;                                    // why nothing was measured (no CUDA, fewer than two GPUs); exit 3
  std::string usage_error;                                // a selected BDF CUDA does not see; exit 64
  std::string driver;                                     // "CUDA driver 12080"
  std::vector<std::pair<std::string, std::string>> gpus;  // (BDF, name) in CUDA order
  size_t bytes = 0;
  int reps = 0;
  double seconds = 0;
  std::vector<P2pPair> pairs;
  int exit_code = 3;
};

// Predicts a pair from its BDFs ("0000:00:06.0"); supplied by the CLI (it runs `check`).
using P2pPredictor = std::function<P2pPrediction(const std::string& src_bdf, const std::string& dst_bdf)>;

P2pReport run_p2p(const P2pOptions& o, const P2pPredictor& predict);

// The comparison alone (outcome, line): pure, tested on its own.
std::pair<std::string, std::string> compare_p2p(const P2pPrediction& p, const P2pAttributes& a, const P2pMeasurement& m);

// Exit code of a finished report: 0 every pair agrees (or has no prediction), 1 a pair
// failed or disagrees with check, 3 nothing measured, 64 a bad selection.
int p2p_exit_code(const P2pReport& r);

void print_p2p_table(const P2pReport& r, std::ostream& out);
nlohmann::ordered_json p2p_to_json(const P2pReport& r);

}  // namespace gdrpeer::verify

// `gdrpeer verify --p2p` against a fake CUDA driver (tests/fake_cuda.cpp: device memory in
// host memory, copy times from a model), loaded through the same dlopen seam as libcuda.
// The truth: the fake's configured rates and its deliberately corrupted copies; what check
// predicted is handed in, so each way the two can disagree is exercised.
#include <gtest/gtest.h>

#include <cstdlib>
#include <sstream>
#include <string>

#include "gdrpeer/verify/p2p.hpp"

namespace v = gdrpeer::verify;

namespace {

const char* kTwo = "gpus=0000:00:06.0,0000:00:07.0";

v::P2pOptions options(const std::string& fake) {
  ::setenv("GDRPEER_FAKE_CUDA", fake.c_str(), 1);
  v::P2pOptions o;
  o.libcuda = GDRPEER_FAKE_CUDA_PATH;
  o.bytes = size_t{4} << 20;
  o.reps = 10;
  o.latency_copies = 100;
  return o;
}

v::P2pPrediction nvlink18() {
  v::P2pPrediction p;
  p.path = v::P2pPrediction::Path::NvLink;
  p.summary = "NV18 via NVSwitch";
  p.verdict = "optimal";
  p.pcie_gbps = 63;
  return p;
}

v::P2pPrediction pcie(const std::string& verdict) {
  v::P2pPrediction p;
  p.path = verdict == "optimal" || verdict == "degraded" ? v::P2pPrediction::Path::Pcie : v::P2pPrediction::Path::None;
  p.summary = "PIX";
  p.verdict = verdict;
  return p;
}

v::P2pPredictor always(const v::P2pPrediction& p) {
  return [p](const std::string&, const std::string&) { return p; };
}

}  // namespace

TEST(VerifyP2p, NvSwitchNodeAgreesAndMeasuresTheConfiguredRates) {
  v::P2pReport r = v::run_p2p(options(std::string(kTwo) + " peer=1 peer_gbps=390 staged_gbps=38"), always(nvlink18()));
  ASSERT_TRUE(r.not_run.empty()) << r.not_run;
  ASSERT_EQ(r.pairs.size(), 2u);  // both ordered pairs
  for (const auto& p : r.pairs) {
    EXPECT_EQ(p.attrs.can_access_peer, 1);
    EXPECT_EQ(p.attrs.access, 1);
    EXPECT_EQ(p.attrs.native_atomics, 1);
    EXPECT_EQ(p.m.bad_bytes, 0);
    EXPECT_NEAR(p.m.uni_gbps_peer, 390, 1);
    EXPECT_NEAR(p.m.bidi_gbps_peer, 780, 2);  // both directions at once, as p2p_anchor.cu counts them
    EXPECT_NEAR(p.m.uni_gbps_staged, 38, 0.5);
    EXPECT_NEAR(p.m.lat_us_peer, 2.5, 0.1);
    EXPECT_NEAR(p.m.lat_us_staged, 17, 0.1);
    EXPECT_EQ(p.outcome, "agree") << p.comparison;
    EXPECT_EQ(p.comparison, "NV18 via NVSwitch: predicted P2P over NVLink; measured 390 GB/s");
  }
  EXPECT_EQ(r.pairs[0].src_bdf, "0000:00:06.0");
  EXPECT_EQ(r.pairs[0].dst_bdf, "0000:00:07.0");
  EXPECT_EQ(r.exit_code, 0);
  // JSON names the fields as p2p_anchor.cu does.
  const auto j = v::p2p_to_json(r);
  for (const char* k : {"src_bdf", "dst_bdf", "can_access_peer", "perf_rank", "access", "native_atomics", "cuda_arrays", "uni_gbps_peer",
                        "bidi_gbps_peer", "uni_gbps_staged", "bidi_gbps_staged", "lat_us_peer", "lat_us_staged", "bad_bytes"})
    EXPECT_TRUE(j["pairs"][0].contains(k)) << k;
  EXPECT_EQ(j["pairs"][0]["outcome"], "agree");
}

TEST(VerifyP2p, CorruptedPeerCopyFails) {
  v::P2pReport r = v::run_p2p(options(std::string(kTwo) + " corrupt=1"), always(nvlink18()));
  ASSERT_EQ(r.pairs.size(), 2u);
  EXPECT_EQ(r.pairs[0].m.bad_bytes, 1);
  EXPECT_EQ(r.pairs[0].outcome, "fail");
  EXPECT_EQ(r.pairs[0].comparison, "1 byte(s) differ after a peer copy");
  EXPECT_EQ(r.exit_code, 2);  // failed, as in every subcommand (docs/check.md)
}

TEST(VerifyP2p, NvLinkPredictedButNoPeerAccessDisagrees) {
  v::P2pReport r = v::run_p2p(options(std::string(kTwo) + " peer=0"), always(nvlink18()));
  ASSERT_EQ(r.pairs.size(), 2u);
  EXPECT_EQ(r.pairs[0].attrs.can_access_peer, 0);
  EXPECT_EQ(r.pairs[0].m.bad_bytes, -1);     // no peer access: no peer copy to check
  EXPECT_EQ(r.pairs[0].m.uni_gbps_peer, 0);  // nor to time
  EXPECT_EQ(r.pairs[0].outcome, "disagree");
  EXPECT_EQ(r.pairs[0].comparison,
            "NV18 via NVSwitch: predicted P2P over NVLink; measured no peer access (cuDeviceCanAccessPeer=0), staged through the "
            "host at 38.0 GB/s: NVLink is not used");
  EXPECT_EQ(r.exit_code, 1);
  // check said blocked: no peer access agrees with it.
  r = v::run_p2p(options(std::string(kTwo) + " peer=0"), always(pcie("blocked")));
  EXPECT_EQ(r.pairs[0].outcome, "agree") << r.pairs[0].comparison;
  EXPECT_EQ(r.exit_code, 0);
}

TEST(VerifyP2p, PeerAccessAtTheStagedRateDisagreesWithAnOptimalVerdict) {
  // Peer access granted, but data moves no faster than through the host (what a root
  // complex that does not forward peer traffic, or a hypervisor, can do).
  v::P2pReport r = v::run_p2p(options(std::string(kTwo) + " peer_gbps=20 staged_gbps=20"), always(pcie("optimal")));
  EXPECT_EQ(r.pairs[0].outcome, "disagree");
  EXPECT_NE(r.pairs[0].comparison.find("only the staged rate"), std::string::npos) << r.pairs[0].comparison;
}

TEST(VerifyP2p, NvLinkPredictedButOnlyPcieRateDisagrees) {
  v::P2pReport r = v::run_p2p(options(std::string(kTwo) + " peer_gbps=50 staged_gbps=20"), always(nvlink18()));
  EXPECT_EQ(r.pairs[0].outcome, "disagree");
  EXPECT_NE(r.pairs[0].comparison.find("no more than the PCIe link carries (63.0 GB/s), not NVLink"), std::string::npos)
      << r.pairs[0].comparison;
}

TEST(VerifyP2p, BlockedPredictedButPeerWorksDisagrees) {
  v::P2pReport r = v::run_p2p(options(std::string(kTwo) + " peer_gbps=50 staged_gbps=20"), always(pcie("blocked")));
  EXPECT_EQ(r.pairs[0].outcome, "disagree");
  EXPECT_NE(r.pairs[0].comparison.find("direct peer-to-peer works"), std::string::npos) << r.pairs[0].comparison;
}

TEST(VerifyP2p, NoPredictionIsSaidNotGuessed) {
  v::P2pPrediction unknown;
  unknown.why = "NVLink unknown and the PCIe path hidden by the VM";
  v::P2pReport r = v::run_p2p(options(kTwo), always(unknown));
  EXPECT_EQ(r.pairs[0].outcome, "no-prediction");
  EXPECT_EQ(
      r.pairs[0].comparison.rfind("no prediction from check (NVLink unknown and the PCIe path hidden by the VM); measured 390 GB/s", 0), 0u)
      << r.pairs[0].comparison;
  EXPECT_EQ(r.exit_code, 0);
}

TEST(VerifyP2p, SelectionByBdfAndItsErrors) {
  const std::string three = "gpus=0000:00:06.0,0000:00:07.0,0000:00:08.0";
  v::P2pOptions o = options(three);
  v::P2pReport r = v::run_p2p(o, always(nvlink18()));
  EXPECT_EQ(r.pairs.size(), 6u);  // every ordered pair of three GPUs
  o.pairs = {{"0000:00:08.0", "00:06.0"}};
  r = v::run_p2p(o, always(nvlink18()));
  ASSERT_EQ(r.pairs.size(), 1u);
  EXPECT_EQ(r.pairs[0].src_bdf, "0000:00:08.0");
  EXPECT_EQ(r.pairs[0].dst_bdf, "0000:00:06.0");
  o.pairs.clear();
  o.gpus = {"0000:00:07.0", "0000:00:08.0"};
  r = v::run_p2p(o, always(nvlink18()));
  EXPECT_EQ(r.pairs.size(), 2u);
  o.gpus = {"0000:00:0a.0"};
  r = v::run_p2p(o, always(nvlink18()));
  EXPECT_EQ(r.usage_error, "--gpu 0000:00:0a.0: no CUDA device at that PCI address");
  EXPECT_EQ(r.exit_code, 64);
}

TEST(VerifyP2p, OneGpuOrNoCudaIsNothingToVerify) {
  v::P2pReport r = v::run_p2p(options("gpus=0000:00:06.0"), always(nvlink18()));
  EXPECT_EQ(r.not_run, "peer-to-peer needs two GPUs; CUDA sees 1");
  EXPECT_EQ(r.exit_code, 3);
  r = v::run_p2p(options(std::string(kTwo) + " init=100"), always(nvlink18()));
  EXPECT_EQ(r.not_run, "cuInit failed: CUDA_FAKE_ERROR_100 (fake driver error)");
  EXPECT_EQ(r.exit_code, 3);
  v::P2pOptions o = options(kTwo);
  o.libcuda = "libcuda-gdrpeer-test-missing.so.1";
  r = v::run_p2p(o, always(nvlink18()));
  EXPECT_EQ(r.not_run.rfind("cannot load libcuda-gdrpeer-test-missing.so.1", 0), 0u) << r.not_run;
  EXPECT_EQ(r.exit_code, 3);
  std::ostringstream text;
  v::print_p2p_table(r, text);
  EXPECT_EQ(text.str().rfind("gdrpeer verify --p2p: nothing to verify: cannot load", 0), 0u) << text.str();
}

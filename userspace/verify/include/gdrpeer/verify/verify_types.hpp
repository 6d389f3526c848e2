// Results of `gdrpeer verify`: one per (memory source x RDMA port x registration method).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace gdrpeer::verify {

enum class Method { reg_mr, dmabuf };
std::string method_name(Method m);  // "ibv_reg_mr", "ibv_reg_dmabuf_mr"

// Ordered from best to worst: the exit code reflects the worst.
enum class Outcome { pass, unsupported, fail };
std::string outcome_name(Outcome o);  // "pass", "unsupported", "fail"

struct TransferCheck {
  std::string op;  // "RDMA WRITE", "RDMA READ", "SEND"
  size_t bytes = 0;
  bool ok = false;
  std::string detail;  // what went wrong, or "all N bytes match"
  // Two nodes only: which side compared the bytes ("client", "server", "client and server"),
  // and an operation that could not run (atomics on a device without them): not ok, not failed.
  std::string checked_by;
  bool unsupported = false;
};

struct BenchPoint {
  size_t size = 0;
  double write_latency_us = 0;  // one RDMA WRITE, posted and completed
  double write_gbps = 0;        // GB/s (1e9 bytes), 16 in flight
  double read_gbps = 0;
  unsigned iterations = 0;
};

struct ComboResult {
  std::string source;
  std::string device;
  int port = 1;
  Method method = Method::reg_mr;
  Outcome outcome = Outcome::fail;
  std::string reason;  // always filled: why it passed, was unsupported or failed
  std::vector<TransferCheck> transfers;
  std::vector<BenchPoint> bench;
  std::string bench_problem;
};

// Process exit codes of `gdrpeer verify` (documented in docs/verify.md).
inline constexpr int kExitPass = 0;  // every combination passed
// The same meanings as `gdrpeer check` (userspace/cli/exit_codes.hpp, issue 25): 1 works with
// reservations (check: degraded; here: some combination unsupported), 2 does not work (check:
// blocked; here: a combination failed), 3 nothing to check. Before issue 25, 1 and 2 were swapped.
inline constexpr int kExitUnsupported = 1;  // none failed, at least one unsupported
inline constexpr int kExitFail = 2;         // at least one combination failed
inline constexpr int kExitNothing = 3;      // nothing to verify: no RDMA device (or no stack)
inline constexpr int kExitUsage = 64;       // bad input (unknown device, bad size, ...)
// Two nodes only (sysexits.h meanings): the peer could not be reached or went away before
// the run ended (EX_UNAVAILABLE), or it speaks another protocol version (EX_PROTOCOL).
inline constexpr int kExitPeerUnavailable = 69;
inline constexpr int kExitProtocol = 76;

int exit_code_for(const std::vector<ComboResult>& results);
std::string exit_meaning(int code);

}  // namespace gdrpeer::verify

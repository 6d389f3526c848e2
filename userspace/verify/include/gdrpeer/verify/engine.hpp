// `gdrpeer verify`: the matrix of memory sources x RDMA ports x registration
// methods, run one combination at a time.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "gdrpeer/verify/memory_source.hpp"
#include "gdrpeer/verify/rdma.hpp"
#include "gdrpeer/verify/verify_types.hpp"

namespace gdrpeer::verify {

namespace verbs {
struct Api;
}

struct VerifyOptions {
  std::vector<SourceKind> sources;   // empty: every source this node has
  std::vector<std::string> devices;  // "rxe0" or "rxe0:1"; empty: every device, all ports
  std::vector<Method> methods{Method::reg_mr, Method::dmabuf};
  SourceOptions source;
  uint64_t seed = 1;
  int timeout_ms = 10000;
  int mtu = 0;  // -m: the largest path MTU in bytes (256..4096); 0: the port's active MTU
  bool bench = false;
  std::vector<size_t> bench_sizes;
  double bench_seconds = 0.2;
  uint64_t iterations = 0;                           // -n: operations per measurement instead of bench_seconds
  std::function<void(const std::string&)> progress;  // may be empty
  const verbs::Api* api = nullptr;                   // tests: a fake libibverbs; nullptr: the real library
};

struct SourceReport {
  SourceKind kind{};
  SourceSetup::State state = SourceSetup::State::absent;
  bool requested = false;   // named on the command line
  std::string description;  // when ready
  std::string reason;       // when not ready
  std::string dmabuf_problem;
  Facts facts;
};

// What the report says of a prepared source (shared by the loopback and the two-node run).
SourceReport source_report(SourceKind kind, const SourceSetup& s, bool requested);

struct VerifyReport {
  RdmaInventory rdma;
  std::vector<SourceReport> sources;
  std::vector<ComboResult> results;
  size_t size = 0;
  uint64_t seed = 0;
  int exit_code = kExitNothing;
  std::string summary;  // one line
};

// Checks --device names against the inventory; returns the problem in words.
std::optional<std::string> check_device_selection(const RdmaInventory& inv, const std::vector<std::string>& selection);

// Runs everything. Sources and registrations are released before it returns.
VerifyReport run_verify(const VerifyOptions& opt, const RdmaInventory& inv);

}  // namespace gdrpeer::verify

// An RC loopback on one RDMA port: two queue pairs of this process, connected to
// each other, move data between a host staging buffer and the memory under test.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "gdrpeer/verify/memory_source.hpp"
#include "gdrpeer/verify/rdma.hpp"
#include "gdrpeer/verify/verify_types.hpp"

namespace gdrpeer::verify {

namespace verbs {
struct Api;
}

struct LoopbackOptions {
  uint64_t seed = 1;
  int timeout_ms = 10000;  // per completion
  int mtu = 0;             // -m: the largest path MTU in bytes; 0: the port's active MTU
  bool bench = false;
  std::vector<size_t> bench_sizes;
  double bench_seconds = 0.2;                        // per measurement
  uint64_t iterations = 0;                           // -n: operations per measurement instead of bench_seconds
  std::function<void(const std::string&)> progress;  // may be empty
  const verbs::Api* api = nullptr;                   // libibverbs entry points; nullptr: load the real library
};

// Registers `target` with `method` on (device, port), runs RDMA WRITE into it,
// RDMA READ back and a SEND into it, checks every byte, optionally measures.
// Everything it registers or creates is released before it returns.
ComboResult run_loopback(const RdmaDevice& device, const PortInfo& port, MemorySource& target, Method method, const LoopbackOptions& opt);

// The words for a failed registration (exposed for unit tests).
struct RegistrationFailure {
  Outcome outcome;
  std::string reason;
};
RegistrationFailure explain_registration_failure(int err, Method method, const RdmaDevice& device, const MemorySource& target);

// Why no ibv_reg_dmabuf_mr can work on a kernel of this release ("5.10.0-33-amd64"): dma-buf
// memory regions (the REG_DMABUF_MR uverbs method) arrived in Linux 5.12. Empty when it can.
std::string dmabuf_mr_kernel_problem(const std::string& release);

}  // namespace gdrpeer::verify

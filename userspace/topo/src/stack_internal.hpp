// Shared by the stack stage's files (stack_rules.cpp, stack_consumers.cpp): the
// node-wide facts the consumers' detection reads, and one GPU x NIC pair's inputs.
#pragma once

#include <map>
#include <string>

#include "gdrpeer/topo/rules.hpp"
#include "gdrpeer/topo/stack.hpp"

namespace gdrpeer::topo::stack {

// -1 unknown, 0 no, 1 yes.
using Tri = int;

struct NodeFacts {
  bool inspected = false;  // sysfs or snapshot (else XML/lspci: the stack is unknown)
  // The files the consumers test with access(2).
  Tri mp_nv_mem = -1, mp_nv_mem_nc = -1, mp_nvidia_peermem = -1;  // /sys/kernel/mm/memory_peers/<name>/version
  Tri mod_nvidia_peermem = -1, mod_nv_peer_mem = -1;              // /sys/module/<name>/version
  Tri kernel_dmabuf = -1;                                         // ib_core imports dma-buf (Linux >= 5.12)
  Tri open_module = -1;                                           // NVIDIA open kernel module (exports dma-buf)
  // gdrpeer's client, registered under this name, serves no CUDA addresses (peermem_cuda=off):
  // a consumer that takes the name for nvidia_peermem's turns GDR on and ibv_reg_mr of GPU
  // memory fails (no client claims it). "" otherwise.
  std::string unserved_client;
  std::string unserved_why;  // gdrpeer's providers/peermem/cuda line
  std::string kernel;
};

struct PairFacts {
  const Device* gpu = nullptr;
  const Device* nic = nullptr;
  PathClass cls = PathClass::SYS;
  bool c2c = false;      // the GPU reaches its CPU over NVLink-C2C (Grace family or NCCL <c2c>)
  Tri cuda_dmabuf = -1;  // CUDA DMA_BUF_SUPPORTED for this GPU (probe), else from the flavour
  Tri cuda_gdr = -1;     // CUDA GPU_DIRECT_RDMA_SUPPORTED
  int xml_net_gdr = -1;  // NCCL XML <net gdr>
  int xml_gpu_gdr = -1;  // NCCL XML <gpu gdr>
  GateResult gate;
};

ConsumerDecision decide_nccl(const NodeFacts& n, const PairFacts& p, const std::map<std::string, std::string>& env);
ConsumerDecision decide_nvshmem(const NodeFacts& n, const PairFacts& p, const std::map<std::string, std::string>& env);
ConsumerDecision decide_ucx(const NodeFacts& n, const PairFacts& p, const std::map<std::string, std::string>& env);

// "yes"/"no"/"unknown".
const char* tri_word(Tri t);

// An NVSHMEM boolean variable as nvshmemi_getenv_bool (NVSHMEM's env_defs_internal.h) reads it:
// unset is false; set, it is false when its first character is 0, N, n, F or f, and true
// otherwise, "" included ("true", "yes" and "" are true, "01" is false).
bool nvshmem_env_true(const std::map<std::string, std::string>& env, const std::string& name);

}  // namespace gdrpeer::topo::stack

namespace gdrpeer::topo {
// The stage check() runs after the PCIe rules: node findings about the stack, and per
// NVIDIA GPU x NIC pair the exporter's gate, the consumers' decisions and their findings.
void stack_stage(const Topology& t, const RuleData& k, const CheckOptions& o, Report& rep);
}  // namespace gdrpeer::topo

// Stage 2 of the checker, classification: per pair of devices the path class (nvidia-smi's
// classes), CUDA's three cases and NCCL's GDR default, and the NVLinks between two GPUs
// (classify.cpp). Pure functions of the model and the rule data.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gdrpeer/topo/model.hpp"
#include "gdrpeer/topo/rule_data.hpp"

namespace gdrpeer::topo {

// Same meaning as `nvidia-smi topo -m`:
//  PIX  at most one PCIe bridge (a switch counts as one bridge)
//  PXB  several bridges, not through the host bridge
//  PHB  through one PCIe host bridge (root complex)
//  NODE between host bridges of one NUMA node
//  SYS  across the inter-socket (NUMA) interconnect
enum class PathClass { PIX, PXB, PHB, NODE, SYS };
// The CUDA GPUDirect RDMA guide's three cases.
enum class CudaCase { SwitchOnly, RootComplex, CpuInterconnect };

struct PathInfo {
  PathClass cls = PathClass::SYS;
  CudaCase cuda = CudaCase::CpuInterconnect;
  bool nccl_gdr = false;              // NCCL's default NCCL_NET_GDR_LEVEL (PXB)
  bool numa_guessed = false;          // NODE vs SYS decided without NUMA data
  int lca = -1;                       // lowest common bridge device, -1 if none
  std::vector<int> ports_a, ports_b;  // bridges strictly below the meeting point
};

// NVLink between two GPUs, as the input states it (or infers it from NVSwitches in the PCI tree).
struct NvLinkPath {
  bool linked = false;
  bool via_switch = false;
  bool inferred = false;      // from NVSwitch devices in the PCI tree or the GPU model, not from a link list
  std::string inferred_from;  // "nvswitch-on-bus" or "gpu-model" when inferred
  int links = 0;              // nvidia-smi's NV#; 0 unknown
  uint64_t bandwidth_mbps = 0;
};

PathInfo classify(const Topology& t, int a, int b, const RuleData& k);
// The same into `p`, whose ports vectors' memory is reused: check() classifies
// every pair of labelled devices for the class table.
void classify(const Topology& t, int a, int b, const RuleData& k, PathInfo& p);
// nvswitch_on_bus: nvswitch_on_pci_bus(t), computed once per node.
bool nvswitch_on_pci_bus(const Topology& t);
NvLinkPath nvlink_between(const Topology& t, int a, int b, bool nvswitch_on_bus);
// "NV12", "NV" (count unknown), or "" when not linked: nvidia-smi's matrix cell.
std::string nvlink_cell(const NvLinkPath& l);
const char* to_string(PathClass c);
const char* to_string(CudaCase c);

}  // namespace gdrpeer::topo

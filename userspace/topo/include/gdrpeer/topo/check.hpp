// Per-pair classification (nvidia-smi classes, CUDA's three cases, NCCL's GDR
// default) and the rules that turn a model into verdicts with fixes.
#pragma once

#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "gdrpeer/topo/knowledge.hpp"
#include "gdrpeer/topo/model.hpp"

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
  bool nccl_gdr = false;        // NCCL's default NCCL_NET_GDR_LEVEL (PXB)
  bool numa_guessed = false;    // NODE vs SYS decided without NUMA data
  int lca = -1;                 // lowest common bridge device, -1 if none
  std::vector<int> ports_a, ports_b;  // bridges strictly below the meeting point
};

// NVLink between two GPUs, as the input states it (or infers it from NVSwitches in the PCI tree).
struct NvLinkPath {
  bool linked = false;
  bool via_switch = false;
  bool inferred = false;  // from NVSwitch devices in the PCI tree or the GPU model, not from a link list
  std::string inferred_from;  // "nvswitch-on-bus" or "gpu-model" when inferred
  int links = 0;          // nvidia-smi's NV#; 0 unknown
  uint64_t bandwidth_mbps = 0;
};

PathInfo classify(const Topology& t, int a, int b, const Knowledge& k);
// The same into `p`, whose ports vectors' memory is reused: check() classifies
// every pair of labelled devices for the class table.
void classify(const Topology& t, int a, int b, const Knowledge& k, PathInfo& p);
// nvswitch_on_bus: nvswitch_on_pci_bus(t), computed once per node.
bool nvswitch_on_pci_bus(const Topology& t);
NvLinkPath nvlink_between(const Topology& t, int a, int b, bool nvswitch_on_bus);
// "NV12", "NV" (count unknown), or "" when not linked: nvidia-smi's matrix cell.
std::string nvlink_cell(const NvLinkPath& l);
const char* to_string(PathClass c);
const char* to_string(CudaCase c);

enum class Verdict { Optimal = 0, Degraded = 1, Unreliable = 2, Blocked = 3 };
const char* to_string(Verdict v);

struct Finding {
  std::string rule;  // stable id, e.g. "iommu-translating"; usable with --skip
  Verdict severity = Verdict::Optimal;
  std::string reason;
  std::string fix;  // a line the operator can paste (shell or config); may be empty
};

struct PairResult {
  int a = -1, b = -1;  // device indices
  std::string label_a, label_b;
  PathInfo path;
  NvLinkPath nvlink;  // GPU-GPU pairs only
  Verdict verdict = Verdict::Optimal;
  std::vector<Finding> findings;
  // GPU x NIC pairs of an NVIDIA GPU with the stack known (stack.hpp): the NVIDIA driver's
  // gate and what NCCL, NVSHMEM and UCX will decide; empty otherwise.
  std::shared_ptr<const PairStack> stack;  // null otherwise
};

struct CheckOptions {
  bool gpu_nic = true, gpu_gpu = true, gpu_nvme = false;
  std::set<std::string> skip;  // rule ids (or "software", "platform", "link" groups)
  // NCCL_*, NVSHMEM_*, UCX_* variables that change the consumers' decisions (consumer_environment()).
  std::map<std::string, std::string> env;
  // How the node verdict is judged (node_verdict.cpp): false, each GPU by its best NIC;
  // true, the worst of all pairs (before issue 25; --all-pairs).
  bool all_pairs = false;
  // GPU-NIC pairs were asked for by name (--pairs gpu-nic or all): a node without a NIC is
  // then not checked at all (exit 3), where the default only notes it.
  bool gpu_nic_required = false;
  // --expect-gpus, --expect-nics: fewer found makes the node incomplete (exit 3); -1 unset.
  int expect_gpus = -1, expect_nics = -1;
};

// One GPU as NCCL uses it: bound to its closest NIC (the best verdict, then the
// nearest class). best_nic -1: no GPU-NIC pair was checked for it.
struct GpuDigest {
  int gpu = -1, best_nic = -1;  // device indices
  PathClass cls = PathClass::SYS;
  Verdict verdict = Verdict::Optimal;
};

// The verdict an operator acts on (a health check's exit code, the NFD label).
struct NodeVerdict {
  bool all_pairs = false;  // judged by every pair (--all-pairs)
  Verdict verdict = Verdict::Optimal;
  bool incomplete = false;  // nothing was checked, or fewer devices than expected: exit 3
  std::string incomplete_reason;
  std::string reason;                      // one line: why the verdict is what it is (--reason)
  std::vector<GpuDigest> gpus;             // BDF order, as Report::gpus
  int expect_gpus = -1, expect_nics = -1;  // CheckOptions' expectations, for the outputs
};

// What check() found for one node. The device indices refer to the Topology it
// was given, which the renderers take beside it.
struct Report {
  std::vector<int> gpus, nics, nvmes;  // device indices, BDF order
  std::vector<std::string> labels;     // per device index: "GPU0", "NIC1", "" otherwise
  std::vector<PairResult> pairs;
  std::vector<Finding> node_findings;  // node-wide remarks (severity Optimal = note)
  Verdict worst = Verdict::Optimal;
  bool virtual_machine = false;  // hypervisor flag, cloud DMI, provider file or emulated PCI functions
  // Path class between every two labelled devices (GPUs, NICs, NVMe drives), keyed
  // by the pair's device indices, lower first.
  std::map<std::pair<int, int>, PathClass> classes;
  // IBGDA per GPU x NIC and GDS per GPU x NVMe (and per GPU without either): readiness.hpp.
  std::vector<ReadinessEntry> readiness;
  NodeVerdict node;  // filled by check() (judge_node); worst stays the worst pair, as detail
  // 0 optimal, 1 degraded/unreliable, 2 blocked (node.verdict), 3 incomplete (nothing checked,
  // or fewer GPUs/NICs than expected); the same meanings in every subcommand (docs/check.md).
  int exit_code() const;
  // Path class between two labelled devices (a != b), in either order.
  PathClass path_class(int a, int b) const { return classes.at(std::minmax(a, b)); }
};

Report check(const Topology& t, const Knowledge& k, const CheckOptions& opt);
// Fills rep.node from rep's pairs and node findings (node_verdict.cpp); check() calls it last.
void judge_node(const Topology& t, const CheckOptions& opt, Report& rep);
// "optimal" ... "blocked", or "incomplete".
const char* node_status(const Report& r);

// Outputs.
std::string render_matrix(const Topology& t, const Report& r, bool include_nvme);
std::string render_json(const Topology& t, const Report& r);
std::string render_dot(const Topology& t, const Report& r);
std::string render_tree(const Topology& t, bool roles_only);
// "GPUs (each with its best NIC ...)": one line per GPU; "" when no GPU-NIC pair was checked.
std::string render_gpu_digest(const Topology& t, const Report& r);
// One line for fleet mode: "<source>: <node verdict> (<counts>) exit N".
std::string render_summary_line(const Topology& t, const Report& r);

}  // namespace gdrpeer::topo

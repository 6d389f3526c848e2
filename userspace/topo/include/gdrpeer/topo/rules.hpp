// Stage 3 of the checker, the rules: check() turns a model into findings (reason and a fix
// an operator can paste), a verdict per pair and the node verdict. Its stages, in the order
// check() runs them:
//  - the PCIe rules (rules.cpp, rules_root_port.cpp): paths, ACS, IOMMU, ATS, BAR1, root
//    complexes and the platform rules of the rule data;
//  - the stack stage (stack_*.cpp, stack.hpp): the NVIDIA driver's gate and what NCCL,
//    NVSHMEM and UCX will decide;
//  - the readiness stage (readiness_*.cpp, readiness.hpp): IBGDA and GDS modes;
//  - the node verdict (node_verdict.cpp), which reads every finding above.
#pragma once

#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "gdrpeer/topo/classify.hpp"
#include "gdrpeer/topo/model.hpp"
#include "gdrpeer/topo/readiness.hpp"
#include "gdrpeer/topo/rule_data.hpp"
#include "gdrpeer/topo/stack.hpp"

namespace gdrpeer::topo {

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

Report check(const Topology& t, const RuleData& k, const CheckOptions& opt);
// Fills rep.node from rep's pairs and node findings (node_verdict.cpp); check() calls it last.
void judge_node(const Topology& t, const CheckOptions& opt, Report& rep);
// "optimal" ... "blocked", or "incomplete".
const char* node_status(const Report& r);

}  // namespace gdrpeer::topo

// The node verdict (issue 25): what a health check, a scheduler label or an
// operator acts on. NCCL binds each GPU to its closest NIC (ncclTopoGetLocalNet:
// the NICs with the best path type from the GPU), so a GPU is as good as its
// best NIC: a node whose every GPU has an optimal NIC is optimal, however far
// the other NICs are. GPU-GPU pairs all count (any two GPUs of a job may talk),
// and so do GPU-NVMe pairs (a file may sit on any drive) and node findings. The
// all-pairs worst stays in Report::worst as detail, and decides with --all-pairs.
#include <algorithm>
#include <string>

#include "gdrpeer/topo/rules.hpp"

namespace gdrpeer::topo {

namespace {

bool is_gpu_nic(const Topology& t, const PairResult& p) {
  return t.devices[static_cast<size_t>(p.a)].role == Role::GPU && t.devices[static_cast<size_t>(p.b)].role == Role::NIC;
}

// The first finding that lowered a pair's verdict to `v`, for the reason line.
const Finding* first_at(const PairResult& p, Verdict v) {
  for (const auto& f : p.findings)
    if (f.severity == v) return &f;
  return nullptr;
}

std::string pair_reason(const PairResult& p, const std::string& prefix) {
  std::string s = prefix + p.label_a + "-" + p.label_b + " " + to_string(p.path.cls) + " " + to_string(p.verdict);
  if (const Finding* f = first_at(p, p.verdict)) s += " (" + f->rule + ": " + f->reason + ")";
  return s;
}

}  // namespace

const char* node_status(const Report& r) { return r.node.incomplete ? "incomplete" : to_string(r.node.verdict); }

void judge_node(const Topology& t, const CheckOptions& opt, Report& rep) {
  NodeVerdict& n = rep.node;
  n = NodeVerdict{};
  n.all_pairs = opt.all_pairs;
  n.expect_gpus = opt.expect_gpus;
  n.expect_nics = opt.expect_nics;
  const std::string labels_of = std::to_string(rep.gpus.size()) + " GPU(s), " + std::to_string(rep.nics.size()) + " NIC(s)";

  // Each GPU's best NIC: lowest verdict, then nearest class, then the lower NIC label.
  for (int g : rep.gpus) {
    GpuDigest d;
    d.gpu = g;
    const PairResult* best = nullptr;
    for (const auto& p : rep.pairs) {
      if (p.a != g || !is_gpu_nic(t, p)) continue;
      if (!best || p.verdict < best->verdict || (p.verdict == best->verdict && p.path.cls < best->path.cls)) best = &p;
    }
    if (best) {
      d.best_nic = best->b;
      d.cls = best->path.cls;
      d.verdict = best->verdict;
    }
    n.gpus.push_back(d);
  }

  // The verdict and the one pair (or finding) that set it.
  std::string why;
  auto raise = [&](Verdict v, const std::string& reason) {
    if (v <= n.verdict) return;
    n.verdict = v;
    why = reason;
  };
  if (opt.all_pairs) {
    for (const auto& p : rep.pairs)
      if (p.verdict > n.verdict) raise(p.verdict, pair_reason(p, "worst pair: "));
  } else {
    for (const auto& d : n.gpus) {
      if (d.best_nic < 0 || d.verdict <= n.verdict) continue;
      for (const auto& p : rep.pairs)
        if (p.a == d.gpu && p.b == d.best_nic) raise(d.verdict, pair_reason(p, "best NIC of " + p.label_a + ": "));
    }
    for (const auto& p : rep.pairs)
      if (!is_gpu_nic(t, p) && p.verdict > n.verdict) raise(p.verdict, pair_reason(p, ""));
  }
  for (const auto& f : rep.node_findings)
    if (f.severity > n.verdict) raise(f.severity, "node: " + f.rule + ": " + f.reason);

  // Nothing checked, or hardware missing: never a verdict of its own (exit 3).
  const bool node_judged =
      std::any_of(rep.node_findings.begin(), rep.node_findings.end(), [](const Finding& f) { return f.severity != Verdict::Optimal; });
  std::string missing;
  auto add_missing = [&](const std::string& s) { missing += (missing.empty() ? "" : "; ") + s; };
  if (opt.expect_gpus >= 0 && rep.gpus.size() < static_cast<size_t>(opt.expect_gpus))
    add_missing(std::to_string(rep.gpus.size()) + " GPU(s) found, " + std::to_string(opt.expect_gpus) + " expected");
  if (opt.expect_nics >= 0 && rep.nics.size() < static_cast<size_t>(opt.expect_nics))
    add_missing(std::to_string(rep.nics.size()) + " NIC(s) found, " + std::to_string(opt.expect_nics) + " expected");
  if (!t.cut_off.empty()) add_missing("input cut off at " + t.cut_off + ": devices after that point unknown");
  if (rep.gpus.empty() && !node_judged)
    add_missing("no GPU found: nothing checked");
  else if (!rep.gpus.empty() && rep.nics.empty() && opt.gpu_nic && (opt.gpu_nic_required || rep.pairs.empty()) && !node_judged)
    add_missing("no RDMA NIC found: GPU-NIC pairs not checked");
  else if (!rep.gpus.empty() && rep.pairs.empty() && !node_judged)
    add_missing("no pair to check (" + labels_of + ")");
  if (!missing.empty()) {
    n.incomplete = true;
    n.incomplete_reason = missing;
    n.reason = missing;
    return;
  }
  if (n.verdict == Verdict::Optimal) {
    n.reason = opt.all_pairs ? "all " + std::to_string(rep.pairs.size()) + " pairs optimal (" + labels_of + ")"
               : rep.nics.empty() || !opt.gpu_nic
                   ? labels_of + ": every checked pair optimal"
                   : labels_of + ": every GPU has an optimal NIC" +
                         (rep.worst > Verdict::Optimal ? std::string(" (worst other pair: ") + to_string(rep.worst) + ")" : "");
  } else {
    n.reason = why;
  }
}

}  // namespace gdrpeer::topo

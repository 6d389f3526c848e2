// `gdrpeer check`: the verdicts of one node in the format asked for, or of many (fleet.cpp).
//
// Exit codes (exit_codes.hpp, the same in every subcommand): 0 optimal, 1
// degraded/unreliable, 2 blocked (the node verdict: each GPU by its best NIC,
// every GPU pair), 3 incomplete (nothing checked, fewer devices than expected);
// 64 usage, 65 malformed input (file:line: what was expected), 66 input
// missing, 73 output not writable, 78 rule data unusable.
#include <ctime>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>

#include "commands.hpp"
#include "exit_codes.hpp"
#include "fleet.hpp"
#include "gdrpeer/topo/render.hpp"
#include "gdrpeer/topo/rule_data.hpp"
#include "gdrpeer/topo/rules.hpp"
#include "guarded.hpp"
#include "input_options.hpp"
#include "inputs.hpp"
#include "option_checks.hpp"
#include "output_file.hpp"

#ifndef GDRPEER_VERSION
#define GDRPEER_VERSION "unknown"
#endif

namespace gdrpeer::cli {

namespace {

// NFD drops the labels of a node whose refresh (gdrpeer-check.timer, every 15 min) stopped:
// by default an hour after the check, four refreshes later (--nfd-expiry).
constexpr const char* kNfdExpiryDefault = "1h";
// NFD's worker re-reads features.d every minute by default: a shorter expiry could drop the
// labels between two of its reads. The upper bound only keeps the arithmetic in range.
constexpr long kNfdExpiryMin = 60, kNfdExpiryMax = 366L * 24 * 3600;

constexpr const char* kCheckExamples = R"(Examples:
  gdrpeer check                                  this node (live sysfs)
  gdrpeer check --reason --expect-gpus 8 --expect-nics 8
                                                 one line for a health check (NHC, probes)
  gdrpeer check node.tar other.xml report.md     several nodes: one line each (fleet mode)
  gdrpeer check --format nfd -o /etc/kubernetes/node-feature-discovery/features.d/gdrpeer
)";

struct CheckFlags {
  bool json = false, dot = false, fleet = false, nvme = false;
  int jobs = 0;  // fleet mode threads; 0: one per CPU
  std::vector<std::string> skip;
  std::string pairs = "gpu-nic,gpu-gpu";
  std::string format = "text";  // text, json, dot, prometheus, nfd (render.hpp)
  std::string output = "-";
  OutputPolicy output_policy;
  std::string nfd_expiry = kNfdExpiryDefault;
  bool nfd_expiry_given = false;
  bool pairs_given = false;  // --pairs named: GPU-NIC pairs are then required when named
  bool reason = false;       // --reason: the same as --format reason
  bool summary = false;      // --summary: the same as --format summary
  bool quiet = false;        // -q: nothing on stdout, the exit code only
  bool all_pairs = false;    // --all-pairs: the worst pair decides the node verdict
  int expect_gpus = -1, expect_nics = -1;
};

// "--nfd-expiry" value: a whole number of seconds, or of minutes, hours or days ("90m", "2h", "1d").
long nfd_expiry_seconds(const std::string& text) {
  const auto bad = [&](const std::string& why) { return std::invalid_argument("--nfd-expiry \"" + text + "\": " + why); };
  std::size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  const std::string unit = text.substr(digits);
  long scale = 0;
  if (unit.empty() || unit == "s")
    scale = 1;
  else if (unit == "m")
    scale = 60;
  else if (unit == "h")
    scale = 3600;
  else if (unit == "d")
    scale = 86400;
  if (digits == 0 || scale == 0 || digits > 9)
    throw bad("expected a whole number of seconds, or with a unit s, m, h or d (e.g. 3600, 90m, 2h, 1d)");
  const long seconds = std::stol(text.substr(0, digits)) * scale;
  if (seconds < kNfdExpiryMin || seconds > kNfdExpiryMax)
    throw bad("out of range: at least 60 s (NFD reads the file every minute), at most 366 days");
  return seconds;
}

topo::CheckOptions check_options(const CheckFlags& f) {
  topo::CheckOptions o;
  // The consumers (NCCL, NVSHMEM, UCX) read their variables from the job's environment:
  // check judges with the ones it is run with (docs/check.md).
  o.env = topo::consumer_environment();
  o.gpu_nic = o.gpu_gpu = o.gpu_nvme = false;
  std::stringstream ss(f.pairs);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item == "gpu-nic")
      o.gpu_nic = true;
    else if (item == "gpu-gpu")
      o.gpu_gpu = true;
    else if (item == "gpu-nvme")
      o.gpu_nvme = true;
    else if (item == "all")
      o.gpu_nic = o.gpu_gpu = o.gpu_nvme = true;
    else
      throw std::invalid_argument("--pairs: unknown pair kind \"" + item + "\" (expected gpu-nic, gpu-gpu, gpu-nvme or all)");
  }
  if (f.nvme) o.gpu_nvme = true;
  o.skip.insert(f.skip.begin(), f.skip.end());
  o.gpu_nic_required = f.pairs_given && o.gpu_nic;
  o.all_pairs = f.all_pairs;
  o.expect_gpus = f.expect_gpus;
  o.expect_nics = f.expect_nics;
  return o;
}

int run_check(const InputOptions& in, CheckFlags f) {
  return guarded([&] {
    if (f.json && f.dot) throw std::invalid_argument("--json and --dot contradict each other: choose one output format");
    if ((f.json || f.dot) && f.format != "text" && f.format != (f.json ? "json" : "dot"))
      throw std::invalid_argument(std::string(f.json ? "--json" : "--dot") + " contradicts --format " + f.format);
    for (const auto& [given, name] : {std::pair{f.reason, "reason"}, std::pair{f.summary, "summary"}}) {
      if (!given) continue;
      if (f.json || f.dot || (f.format != "text" && f.format != name) || (f.reason && f.summary))
        throw std::invalid_argument(std::string("--") + name + " is an output format of its own: it contradicts --json, --dot, " +
                                    "--reason/--summary and --format " + f.format);
      f.format = name;
    }
    if (f.quiet && (f.json || f.dot || f.format != "text" || f.output != "-"))
      throw std::invalid_argument("--quiet prints nothing: it contradicts an output format and --output");
    f.json = f.json || f.format == "json";
    f.dot = f.dot || f.format == "dot";
    if (f.nfd_expiry_given && f.format != "nfd") throw std::invalid_argument("--nfd-expiry applies to --format nfd only");
    const long nfd_expiry = nfd_expiry_seconds(f.nfd_expiry);
    topo::CheckOptions opt = check_options(f);
    topo::RuleData k = load_rule_data(in);
    check_skip_ids(f.skip, k);
    std::vector<NodeSpec> specs = node_specs(in);
    bool fleet = f.fleet || specs.size() > 1;
    if (!fleet) {
      const topo::Topology t = load_node(specs[0], in, k);
      const topo::Report r = topo::check(t, k, opt);
      const std::string text = f.json                     ? topo::render_json(t, r)
                               : f.dot                    ? topo::render_dot(t, r)
                               : f.format == "prometheus" ? topo::render_prometheus(t, k, r, std::time(nullptr), GDRPEER_VERSION)
                               : f.format == "nfd"        ? topo::render_nfd(t, r, std::time(nullptr), nfd_expiry, GDRPEER_VERSION)
                               : f.format == "reason"     ? std::string(topo::node_status(r)) + ": " + r.node.reason + "\n"
                               : f.format == "summary"    ? topo::render_gpu_summary(t, r)
                               : f.quiet                  ? std::string()
                                                          : topo::render_matrix(t, r, opt.gpu_nvme);
      write_output(f.output, text, f.output_policy);
      return r.exit_code();
    }
    if (f.format == "prometheus" || f.format == "nfd" || f.format == "reason" || f.format == "summary" || f.quiet || f.output != "-")
      throw std::invalid_argument((f.output != "-" ? std::string("--output") : "--format " + f.format) +
                                  " needs one node; fleet mode (several inputs or --fleet) prints to stdout");
    return run_fleet(specs, in, FleetFlags{f.json, f.jobs}, opt, k);
  });
}

}  // namespace

void add_check_command(CLI::App& app, int& exit_code) {
  auto check_in = std::make_shared<InputOptions>();
  auto check_flags = std::make_shared<CheckFlags>();
  CLI::App* c = app.add_subcommand("check", "Verdict per GPU pair: will GPUDirect RDMA / P2P / GDS work here, and why not");
  add_input_options(c, *check_in);
  c->add_flag("--json", check_flags->json, "JSON output (schema gdrpeer-check, version 1; see docs/check.md)");
  c->add_flag("--dot", check_flags->dot, "Graphviz DOT with GPUs/NICs highlighted and bad ports marked");
  c->add_flag("--fleet", check_flags->fleet, "One summary line per node (implied by several inputs)");
  c->add_option("-j,--jobs", check_flags->jobs, "Fleet mode: nodes checked in parallel (default: one per CPU)")->check(CLI::Range(1, 1024));
  c->add_flag("--with-nvme", check_flags->nvme, "Also check GPU-NVMe pairs (GPUDirect Storage)");
  c->add_option("--probe", check_in->probes,
                "Live mode: run a probe whose answer overrides the prediction. ibgda: DEVX and atomic caps of each mlx5 device, a DEVX "
                "dma-buf umem on 4 KiB of GPU memory, one UAR page registered for the GPU with cuMemHostRegister(IOMEMORY) and "
                "unregistered (never written through); loads libibverbs, libmlx5 and libcuda")
      ->check(CLI::IsMember({"ibgda"}))
      ->allow_extra_args(false);
  CLI::Option* pairs =
      c->add_option("--pairs", check_flags->pairs, "Pair kinds: gpu-nic,gpu-gpu,gpu-nvme or all (default gpu-nic,gpu-gpu)");
  c->add_option("--skip", check_flags->skip, "Skip a rule id or group (e.g. software, platform, acs-redirect); repeatable")
      ->allow_extra_args(false)
      ->delimiter(',');
  c->add_option("--format", check_flags->format,
                "Output format: text (default), json, dot, prometheus (node_exporter textfile collector), nfd "
                "(node-feature-discovery local features), reason (one line) or summary (one line per GPU); docs/fleet.md")
      ->check(CLI::IsMember({"text", "json", "dot", "prometheus", "nfd", "reason", "summary"}));
  c->add_flag("--summary", check_flags->summary,
              "One line per GPU (its best NIC, the path class, the verdict) and the node verdict; --format summary");
  c->add_flag("-q,--quiet", check_flags->quiet, "Print nothing: the exit code is the answer (errors still go to stderr)");
  c->add_flag("--reason", check_flags->reason,
              "One line: the node verdict and why (\"degraded: best NIC of GPU2: ...\"), for health checks; --format reason");
  c->add_flag("--all-pairs", check_flags->all_pairs,
              "Judge the node by its worst pair (every GPU with every NIC), not each GPU by its best NIC");
  c->add_option("--expect-gpus", check_flags->expect_gpus, "Fewer GPUs than N found: the node is incomplete (exit 3)")
      ->check(CLI::Range(0, 4096));
  c->add_option("--expect-nics", check_flags->expect_nics, "Fewer RDMA NICs than N found: the node is incomplete (exit 3)")
      ->check(CLI::Range(0, 4096));
  CLI::Option* nfd_expiry =
      c->add_option("--nfd-expiry", check_flags->nfd_expiry,
                    "With --format nfd: NFD drops the labels this long after the check unless a newer check replaced them; "
                    "seconds, or with a unit s, m, h, d (default 1h)");
  c->add_option("-o,--output", check_flags->output,
                "Write the output to this file instead of stdout (\"-\"): a regular file is replaced atomically (temporary "
                "file + rename), a FIFO or device is written in place, a symlink out of its directory is refused");
  c->add_flag("--follow-symlinks", check_flags->output_policy.follow_symlinks_anywhere,
              "--output may be a symbolic link to another directory (written through, the link kept)");
  c->footer(std::string(kCheckExamples) + "\n" + exit_code_help());
  c->callback([check_in, check_flags, nfd_expiry, pairs, &exit_code] {
    check_flags->nfd_expiry_given = nfd_expiry->count() > 0;
    check_flags->pairs_given = pairs->count() > 0;
    exit_code = run_check(*check_in, *check_flags);
  });
}

}  // namespace gdrpeer::cli

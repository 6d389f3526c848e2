// `gdrpeer topo`, `gdrpeer check` and `gdrpeer snapshot`.
//
// Exit codes (exit_codes.hpp, the same in every subcommand): 0 optimal, 1
// degraded/unreliable, 2 blocked (the node verdict: each GPU by its best NIC,
// every GPU pair), 3 incomplete (nothing checked, fewer devices than expected);
// 64 usage, 65 malformed input (file:line: what was expected), 66 input
// missing, 73 output not writable, 78 rule data unusable.
#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <exception>
#include <fstream>
#include <iostream>
#include <memory>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "exit_codes.hpp"
#include "gdrpeer/topo/cuda_probe.hpp"
#include "gdrpeer/topo/errors.hpp"
#include "gdrpeer/topo/inputs.hpp"
#include "gdrpeer/topo/node_capture.hpp"
#include "gdrpeer/topo/render.hpp"
#include "gdrpeer/topo/rule_data.hpp"
#include "gdrpeer/topo/rules.hpp"
#include "option_checks.hpp"
#include "output_file.hpp"
#include "snapshot_partial.hpp"

#ifndef GDRPEER_VERSION
#define GDRPEER_VERSION "unknown"
#endif

namespace gdrpeer::cli {

namespace topo = gdrpeer::topo;

namespace {

// NFD drops the labels of a node whose refresh (gdrpeer-check.timer, every 15 min) stopped:
// by default an hour after the check, four refreshes later (--nfd-expiry).
constexpr const char* kNfdExpiryDefault = "1h";
// NFD's worker re-reads features.d every minute by default: a shorter expiry could drop the
// labels between two of its reads. The upper bound only keeps the arithmetic in range.
constexpr long kNfdExpiryMin = 60, kNfdExpiryMax = 366L * 24 * 3600;
constexpr int kExitUsage = exit_code::kUsage, kExitDataErr = exit_code::kDataErr, kExitNoInput = exit_code::kNoInput,
              kExitCantCreate = exit_code::kCantCreate, kExitConfig = exit_code::kConfig;

constexpr const char* kCheckExamples = R"(Examples:
  gdrpeer check                                  this node (live sysfs)
  gdrpeer check --reason --expect-gpus 8 --expect-nics 8
                                                 one line for a health check (NHC, probes)
  gdrpeer check node.tar other.xml report.md     several nodes: one line each (fleet mode)
  gdrpeer check --format nfd -o /etc/kubernetes/node-feature-discovery/features.d/gdrpeer
)";

struct InputOptions {
  std::vector<std::string> positional;
  std::string sysfs_root;
  std::vector<std::string> hwloc, nccl, lspci;
  std::vector<std::string> roles;
  std::vector<std::string> gpus, nics, nvmes;
  std::string data_dir;
  bool no_cuda = false;  // snapshot: do not record the CUDA driver's answers
  bool cuda = false;     // live check/topo: ask the CUDA driver (cuInit: ~1 s on a 4-GPU node)
  std::vector<std::string> probes;  // --probe ibgda (readiness.hpp)
};

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

struct TopoFlags {
  bool dot = false, roles_only = false;
};

// What one node is read from.
struct NodeSpec {
  enum class Kind { Live, Path, Hwloc, Nccl, Lspci } kind = Kind::Live;
  std::vector<std::string> paths;
};

bool is_dir(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

void add_input_options(CLI::App* c, InputOptions& in) {
  c->add_option("inputs", in.positional,
                "Node dumps, one node each: sysfs snapshot (.tar or directory), hwloc XML, NCCL topology XML, or lspci text "
                "(format detected from the contents). Without inputs: this machine's live sysfs.");
  c->add_option("--sysfs-root", in.sysfs_root, "Read sysfs/procfs below this directory or snapshot tarball instead of /");
  c->add_option("--hwloc", in.hwloc, "hwloc XML (lstopo --of xml); repeatable, one node each")->allow_extra_args(false);
  c->add_option("--nccl-xml", in.nccl, "NCCL topology XML (NCCL_TOPO_DUMP_FILE / NCCL_TOPO_FILE); repeatable, one node each")
      ->allow_extra_args(false);
  c->add_option("--lspci", in.lspci, "lspci -tv / -vvv text or a transcript holding them; repeatable, all form ONE node")
      ->allow_extra_args(false);
  c->add_option("--role", in.roles, "Override a device's role: GPU=BDF, NIC=BDF, NVME=BDF or NONE=BDF (repeatable)")
      ->allow_extra_args(false);
  c->add_option("--gpu", in.gpus, "Same as --role GPU=BDF")->allow_extra_args(false);
  c->add_option("--nic", in.nics, "Same as --role NIC=BDF")->allow_extra_args(false);
  c->add_option("--nvme", in.nvmes, "Same as --role NVME=BDF")->allow_extra_args(false);
  c->add_option("--data-dir", in.data_dir, "Rule data directory (default: $GDRPEER_DATA_DIR, the installed share dir, the data built into this binary)");
  c->add_flag("--cuda", in.cuda,
              "Live mode: also ask the CUDA driver (dlopen libcuda, cuInit) whether each GPU supports GPUDirect RDMA and dma-buf; "
              "NVML (libnvidia-ml: NVLinks, fabric state) is asked without it whenever an NVIDIA GPU is present");
  c->add_flag("--no-cuda", in.no_cuda, "Do not ask the CUDA driver (the default; kept for scripts)");
}

std::vector<NodeSpec> node_specs(const InputOptions& in) {
  std::vector<NodeSpec> out;
  for (const auto& p : in.positional) out.push_back({NodeSpec::Kind::Path, {p}});
  if (!in.sysfs_root.empty()) out.push_back({NodeSpec::Kind::Path, {in.sysfs_root}});
  for (const auto& p : in.hwloc) out.push_back({NodeSpec::Kind::Hwloc, {p}});
  for (const auto& p : in.nccl) out.push_back({NodeSpec::Kind::Nccl, {p}});
  if (!in.lspci.empty()) out.push_back({NodeSpec::Kind::Lspci, in.lspci});
  if (out.empty()) out.push_back({NodeSpec::Kind::Live, {}});
  size_t stdin_uses = 0;
  for (const auto& s : out) stdin_uses += static_cast<size_t>(std::count(s.paths.begin(), s.paths.end(), "-"));
  if (stdin_uses > 1)
    throw std::invalid_argument("\"-\" (standard input) is given " + std::to_string(stdin_uses) + " times; it can be read once");
  return out;
}

// Memory one fleet worker reuses from node to node: the input file's bytes and the
// device vector of the previous node (emptied by the parser). Without it every dump
// grows and frees a few hundred KiB, and glibc hands that back to the kernel after
// each node and faults it in again for the next.
struct NodeBuffers {
  std::string input;
  std::vector<topo::Device> devices;
};

// `b` itself, or its contents decompressed into `unpacked` when it is gzip, xz, zstd or bzip2.
std::string_view plain_bytes(std::string_view b, const std::string& name, std::string& unpacked) {
  if (topo::detect_compression(b) == topo::Compression::None) return b;
  unpacked = topo::decompress(b, name);
  return unpacked;
}

// A snapshot written without root (snapshot_partial.hpp) says so; the check repeats it.
void note_partial_snapshot(topo::InputFs& fs, topo::Topology& t) {
  if (auto why = fs.read(kSnapshotPartialPath, 4096)) {
    while (!why->empty() && why->back() == '\n') why->pop_back();
    t.notes.push_back("partial snapshot: " + *why);
  }
}

topo::Topology load_node(const NodeSpec& spec, const InputOptions& in, const topo::RuleData& k,
                         NodeBuffers* reuse = nullptr) {
  std::string* scratch = reuse ? &reuse->input : nullptr;
  auto spare_devices = [&] { return reuse ? std::move(reuse->devices) : std::vector<topo::Device>{}; };
  topo::Topology t;
  bool live = false;
  switch (spec.kind) {
    case NodeSpec::Kind::Live: {
      auto fs = topo::make_dir_fs("/");
      live = true;
      // NVML by default (tens of ms, no CUDA context, asked while sysfs is read); the CUDA
      // driver only on request (cuInit is most of a live check's time, docs/benchmarks.md).
      topo::LiveOptions lo;
      lo.cuda = in.cuda && !in.no_cuda;
      t = topo::read_live_node(*fs, "live sysfs", lo);
      if (const std::string why = unprivileged_config_space(); !why.empty()) t.notes.push_back(why);
      break;
    }
    case NodeSpec::Kind::Hwloc: {
      topo::InputFile f(spec.paths[0], scratch);
      std::string unpacked;
      t = topo::parse_hwloc_xml(plain_bytes(f.bytes(), spec.paths[0], unpacked), spec.paths[0], spare_devices());
      break;
    }
    case NodeSpec::Kind::Nccl: {
      topo::InputFile f(spec.paths[0], scratch);
      std::string unpacked;
      t = topo::parse_nccl_xml(plain_bytes(f.bytes(), spec.paths[0], unpacked), spec.paths[0], spare_devices());
      break;
    }
    case NodeSpec::Kind::Lspci: {
      std::vector<std::unique_ptr<topo::InputFile>> files;
      for (const auto& p : spec.paths) files.push_back(std::make_unique<topo::InputFile>(p));
      std::vector<std::string> unpacked(files.size());
      std::vector<topo::TextInput> ins;
      for (size_t i = 0; i < files.size(); ++i) ins.push_back({spec.paths[i], plain_bytes(files[i]->bytes(), spec.paths[i], unpacked[i])});
      t = topo::parse_lspci(ins);
      break;
    }
    case NodeSpec::Kind::Path: {
      const std::string& p = spec.paths[0];
      if (is_dir(p)) {
        auto fs = topo::make_dir_fs(p);
        t = topo::parse_sysfs(*fs, p);
        t.format = "sysfs-root";
        note_partial_snapshot(*fs, t);
        break;
      }
      topo::InputFile f(p, scratch);
      std::string_view b = f.bytes();
      std::string unpacked;  // a compressed input's contents
      const topo::Compression compression = topo::detect_compression(b);
      b = plain_bytes(b, p, unpacked);
      topo::InputFormat format = topo::detect_format(b);
      if (format == topo::InputFormat::Compressed) format = topo::InputFormat::Unknown;  // compressed twice
      switch (format) {
        case topo::InputFormat::SnapshotTar: {
          auto fs = topo::make_tar_fs(std::string(b), p);
          t = topo::parse_sysfs(*fs, p);
          // hwloc-gather-topology writes NODE.tar.bz2; gdrpeer snapshot any compression.
          t.format = compression == topo::Compression::Bzip2 ? "hwloc-gather-topology" : "snapshot";
          note_partial_snapshot(*fs, t);
          break;
        }
        case topo::InputFormat::HwlocXml: t = topo::parse_hwloc_xml(b, p, spare_devices()); break;
        case topo::InputFormat::NcclXml: t = topo::parse_nccl_xml(b, p, spare_devices()); break;
        case topo::InputFormat::Lspci: {
          std::vector<topo::TextInput> ins{{p, b}};
          t = topo::parse_lspci(ins);
          break;
        }
        default:
          throw topo::InputError(p, 1,
                                 "expected a sysfs snapshot (tar, plain or gzip/xz/zstd/bzip2), hwloc XML (<topology>), NCCL "
                                 "topology XML (<system>) or lspci text");
      }
      break;
    }
  }
  topo::assign_roles(t, k);
  for (const auto& r : in.roles) topo::apply_role_override(t, r);
  for (const auto& b : in.gpus) topo::apply_role_override(t, "GPU=" + b);
  for (const auto& b : in.nics) topo::apply_role_override(t, "NIC=" + b);
  for (const auto& b : in.nvmes) topo::apply_role_override(t, "NVME=" + b);
  if (std::find(in.probes.begin(), in.probes.end(), "ibgda") != in.probes.end()) {
    if (!live) throw std::invalid_argument("--probe ibgda asks this machine's devices: it needs the live node (no inputs)");
    t.sw.ibgda_probe = topo::run_ibgda_probe(t, *topo::make_live_ibgda_probe());
    if (!t.sw.ibgda_probe.ran) t.notes.push_back("--probe ibgda did not run: " + t.sw.ibgda_probe.error);
  }
  return t;
}

topo::RuleData load_rule_data(const InputOptions& in) {
  std::string dir = in.data_dir.empty() ? topo::RuleData::default_dir() : in.data_dir;
  return topo::RuleData::load(dir);
}

// Runs fn, mapping our exception types to exit codes and messages.
template <typename Fn>
int guarded(Fn&& fn) {
  try {
    return fn();
  } catch (const topo::InputError& e) {
    std::fprintf(stderr, "gdrpeer: %s\n", e.what());
    return kExitDataErr;
  } catch (const topo::MissingInput& e) {
    std::fprintf(stderr, "gdrpeer: %s\n", e.what());
    return kExitNoInput;
  } catch (const topo::DataError& e) {
    std::fprintf(stderr, "gdrpeer: %s\n", e.what());
    return kExitConfig;
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "gdrpeer: %s\n", e.what());
    return kExitUsage;
  } catch (const OutputError& e) {
    std::fprintf(stderr, "gdrpeer: %s\n", e.what());
    return kExitCantCreate;
  }
}

// "--nfd-expiry" value: a whole number of seconds, or of minutes, hours or days ("90m", "2h", "1d").
long nfd_expiry_seconds(const std::string& text) {
  const auto bad = [&](const std::string& why) {
    return std::invalid_argument("--nfd-expiry \"" + text + "\": " + why);
  };
  std::size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  const std::string unit = text.substr(digits);
  long scale = 0;
  if (unit.empty() || unit == "s") scale = 1;
  else if (unit == "m") scale = 60;
  else if (unit == "h") scale = 3600;
  else if (unit == "d") scale = 86400;
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
    if (item == "gpu-nic") o.gpu_nic = true;
    else if (item == "gpu-gpu") o.gpu_gpu = true;
    else if (item == "gpu-nvme") o.gpu_nvme = true;
    else if (item == "all") o.gpu_nic = o.gpu_gpu = o.gpu_nvme = true;
    else throw std::invalid_argument("--pairs: unknown pair kind \"" + item + "\" (expected gpu-nic, gpu-gpu, gpu-nvme or all)");
  }
  if (f.nvme) o.gpu_nvme = true;
  o.skip.insert(f.skip.begin(), f.skip.end());
  o.gpu_nic_required = f.pairs_given && o.gpu_nic;
  o.all_pairs = f.all_pairs;
  o.expect_gpus = f.expect_gpus;
  o.expect_nics = f.expect_nics;
  return o;
}

// What fleet mode keeps of one node until it is printed.
struct FleetNode {
  std::string name, line, error, status;  // status: node_status()
  topo::Verdict worst = topo::Verdict::Optimal, verdict = topo::Verdict::Optimal;
  bool incomplete = false;
  int exit_code = 0;
  size_t gpus = 0, nics = 0, pairs = 0;
  std::exception_ptr failure;  // anything but an input error: ends the run like a sequential one
};

// --jobs, or one thread per CPU this process may run on.
size_t fleet_jobs(int requested) {
  if (requested > 0) return static_cast<size_t>(requested);
  cpu_set_t set;
  if (::sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return static_cast<size_t>(CPU_COUNT(&set));
  unsigned n = std::thread::hardware_concurrency();
  return n ? n : 1;
}

// Fleet: one line per node, in input order; a broken dump is reported and the
// rest go on. Nodes are independent, so --jobs threads check them in parallel
// (rule data is shared read-only) and the calling thread prints each in turn.
int run_fleet(const std::vector<NodeSpec>& specs, const InputOptions& in, const CheckFlags& f,
              const topo::CheckOptions& opt, const topo::RuleData& k) {
  int worst = 0, errors = 0, incomplete = 0;
  int counts[4] = {0, 0, 0, 0};
  nlohmann::json nodes = nlohmann::json::array();
  std::vector<FleetNode> results(specs.size());
  auto check_one = [&](size_t i) {
    FleetNode& n = results[i];
    const NodeSpec& s = specs[i];
    n.name = s.paths.empty() ? "live" : s.paths[0];
    try {
      thread_local NodeBuffers buffers;
      topo::Topology t = load_node(s, in, k, &buffers);
      topo::Report r = topo::check(t, k, opt);
      n.worst = r.worst;
      n.verdict = r.node.verdict;
      n.incomplete = r.node.incomplete;
      n.status = topo::node_status(r);
      n.exit_code = r.exit_code();
      n.gpus = r.gpus.size();
      n.nics = r.nics.size();
      n.pairs = r.pairs.size();
      if (!f.json) n.line = topo::render_summary_line(t, r);
      buffers.devices = std::move(t.devices);  // its memory, for the next node
    } catch (const topo::InputError& e) {
      n.error = e.what();
      n.exit_code = kExitDataErr;
    } catch (const topo::MissingInput& e) {
      n.error = e.what();
      n.exit_code = kExitNoInput;
    } catch (...) {
      n.failure = std::current_exception();  // usage errors: rethrown when this node's turn comes
    }
  };
  auto emit = [&](FleetNode& n) {
    if (n.failure) std::rethrow_exception(n.failure);
    if (!n.error.empty()) {
      ++errors;
      if (f.json) nodes.push_back({{"source", n.name}, {"error", n.error}, {"exit_code", n.exit_code}});
      else std::printf("%s: error: %s\n", n.name.c_str(), n.error.c_str());
      // And on stderr, where a script that keeps stdout as the report looks for errors.
      std::fprintf(stderr, "gdrpeer: %s\n", n.error.c_str());  // the error names the file
      return;
    }
    if (n.incomplete)
      ++incomplete;
    else
      ++counts[static_cast<int>(n.verdict)];
    worst = std::max(worst, n.exit_code);
    if (f.json)
      nodes.push_back({{"source", n.name},
                       {"verdict", n.status},
                       {"worst", topo::to_string(n.worst)},
                       {"exit_code", n.exit_code},
                       {"gpus", n.gpus},
                       {"nics", n.nics},
                       {"pairs", n.pairs}});
    else
      std::printf("%s\n", n.line.c_str());
  };
  const bool live = std::any_of(specs.begin(), specs.end(), [](const NodeSpec& s) { return s.kind == NodeSpec::Kind::Live; });
  const size_t jobs = live ? 1 : std::min<size_t>(fleet_jobs(f.jobs), specs.size());
  if (jobs <= 1) {
    for (size_t i = 0; i < specs.size(); ++i) {
      check_one(i);
      emit(results[i]);
    }
  } else {
    std::atomic<size_t> next{0};
    std::mutex mu;
    std::condition_variable cv;
    std::vector<char> done(specs.size(), 0);  // guarded by mu
    std::atomic<bool> stop{false};
    {
      std::vector<std::jthread> workers;
      for (size_t w = 0; w < jobs; ++w)
        workers.emplace_back([&] {
          for (size_t i; !stop && (i = next++) < specs.size();) {
            check_one(i);
            std::lock_guard<std::mutex> lock(mu);
            done[i] = 1;
            cv.notify_all();
          }
        });
      try {
        for (size_t i = 0; i < specs.size(); ++i) {
          {
            std::unique_lock<std::mutex> lock(mu);
            cv.wait(lock, [&] { return done[i] != 0; });
          }
          emit(results[i]);
          results[i] = FleetNode{};  // printed: free its strings early
        }
      } catch (...) {
        stop = true;  // the workers finish their current node; the jthreads join here
        throw;
      }
    }
  }
  if (f.json) {
    nlohmann::json j = {{"schema", "gdrpeer-fleet"},
                        {"version", 1},
                        {"nodes", nodes},
                        {"summary",
                         {{"nodes", specs.size()},
                          {"optimal", counts[0]},
                          {"degraded", counts[1]},
                          {"unreliable", counts[2]},
                          {"blocked", counts[3]},
                          {"incomplete", incomplete},
                          {"errors", errors}}}};
    std::fputs((j.dump(2) + "\n").c_str(), stdout);
  } else {
    std::printf("fleet: %zu nodes: %d optimal, %d degraded, %d unreliable, %d blocked, %d incomplete, %d unreadable\n", specs.size(),
                counts[0], counts[1], counts[2], counts[3], incomplete, errors);
  }
  finish_stdout();  // a lost line is a lost verdict: exit 73, never the verdict
  // A blocked or incomplete node is the answer a fleet run must not lose: it outranks an
  // unreadable dump (65, reported on stderr and in the lines above); below that, 65 does.
  if (worst >= exit_code::kBlocked && worst <= exit_code::kIncomplete) return worst;
  return errors ? kExitDataErr : worst;
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
    return run_fleet(specs, in, f, opt, k);
  });
}

int run_topo(const InputOptions& in, const TopoFlags& f) {
  return guarded([&] {
    topo::RuleData k = load_rule_data(in);
    std::vector<NodeSpec> specs = node_specs(in);
    for (const auto& s : specs) {
      topo::Topology t = load_node(s, in, k);
      if (f.dot) {
        topo::CheckOptions opt;
        topo::Report r = topo::check(t, k, opt);
        std::fputs(topo::render_dot(t, r).c_str(), stdout);
      } else {
        std::fputs(topo::render_tree(t, f.roles_only).c_str(), stdout);
      }
    }
    return 0;
  });
}

int run_snapshot(const std::string& out, const std::string& root, bool no_cuda, const OutputPolicy& policy) {
  return guarded([&] {
    auto base = topo::make_dir_fs(root.empty() ? "/" : root);
    // A snapshot is checked elsewhere: it carries NVML's and (unless --no-cuda) the CUDA
    // driver's answers, /proc/driver/nvidia/params, the time, hostname and versions.
    topo::SnapshotOptions so;
    so.ask_drivers = root.empty();
    so.cuda = !no_cuda;
    so.tool_version = GDRPEER_VERSION;
    topo::Snapshot snap = topo::take_snapshot(*base, root.empty() ? "live sysfs" : root, so);
    std::vector<topo::TarEntry>& entries = snap.entries;
    const topo::Topology& t = snap.topology;
    // The kernel configuration was read around the recorder (it is ~270 KB): carry the options kept.
    if (t.sw.readiness.kconfig.known && root.empty())
      entries.push_back({topo::TarEntry::Type::File, "gdrpeer-snapshot/kernel-config", topo::kernel_config_text(t.sw.readiness.kconfig)});
    // The kernel log is a character device, not a file the recorder sees: carry the lines
    // the checker kept (peer-memory load failures, dma-buf attach refusals).
    if (root.empty() && t.sw.stack.kernel_log_read)
      entries.push_back({topo::TarEntry::Type::File, "gdrpeer-snapshot/kernel-log", topo::kernel_log_text(t.sw.stack)});
    // Read as non-root, config space beyond 64 bytes is missing (the kernel gives unprivileged
    // readers only the header): say so inside the snapshot, and here.
    if (root.empty()) {
      if (std::string why = unprivileged_config_space(); !why.empty()) {
        entries.push_back({topo::TarEntry::Type::File, std::string(kSnapshotPartialPath).substr(1), why + "\n"});
        std::fprintf(stderr, "gdrpeer: warning: %s\n", why.c_str());
      }
    }
    std::string bytes = topo::write_tar(entries, snapshot_compression(out));
    write_output(out, bytes, policy);
    if (out == "-") return 0;
    std::fprintf(stderr, "gdrpeer: wrote %s: %zu entries, %zu PCI functions, %zu bytes\n", out.c_str(), entries.size(),
                 t.devices.size(), bytes.size());
    return 0;
  });
}

// Option storage must outlive parsing: owned by the callbacks' closures.
void add_topo_command(CLI::App& app, int& exit_code) {
  auto topo_in = std::make_shared<InputOptions>();
  auto topo_flags = std::make_shared<TopoFlags>();
  CLI::App* t = app.add_subcommand("topo", "Show the PCI topology model (tree with roles, ports, links, ACS, IOMMU)");
  add_input_options(t, *topo_in);
  t->add_flag("--dot", topo_flags->dot, "Graphviz DOT of the paths between GPUs, NICs and NVMe drives");
  t->add_flag("--roles-only", topo_flags->roles_only, "Only the branches that lead to GPUs, NICs or NVMe drives");
  t->callback([topo_in, topo_flags, &exit_code] { exit_code = run_topo(*topo_in, *topo_flags); });
}

void add_check_command(CLI::App& app, int& exit_code) {
  auto check_in = std::make_shared<InputOptions>();
  auto check_flags = std::make_shared<CheckFlags>();
  CLI::App* c = app.add_subcommand("check", "Verdict per GPU pair: will GPUDirect RDMA / P2P / GDS work here, and why not");
  add_input_options(c, *check_in);
  c->add_flag("--json", check_flags->json, "JSON output (schema gdrpeer-check, version 1; see docs/check.md)");
  c->add_flag("--dot", check_flags->dot, "Graphviz DOT with GPUs/NICs highlighted and bad ports marked");
  c->add_flag("--fleet", check_flags->fleet, "One summary line per node (implied by several inputs)");
  c->add_option("-j,--jobs", check_flags->jobs, "Fleet mode: nodes checked in parallel (default: one per CPU)")
      ->check(CLI::Range(1, 1024));
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
  CLI::Option* nfd_expiry = c->add_option("--nfd-expiry", check_flags->nfd_expiry,
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

void add_snapshot_command(CLI::App& app, int& exit_code) {
  auto snap_out = std::make_shared<std::string>();
  auto snap_root = std::make_shared<std::string>();
  auto snap_nocuda = std::make_shared<bool>(false);
  CLI::App* s = app.add_subcommand("snapshot", "Write a tarball of exactly the files `gdrpeer check` reads on this node");
  s->add_option("output", *snap_out, "Output tarball (\"-\" for stdout)")->required();
  s->add_option("--sysfs-root", *snap_root, "Snapshot a sysfs copy below this directory instead of /");
  s->add_flag("--no-cuda", *snap_nocuda, "Do not record the CUDA driver's GPUDirect RDMA / dma-buf answers");
  auto snap_policy = std::make_shared<OutputPolicy>();
  s->add_flag("--follow-symlinks", snap_policy->follow_symlinks_anywhere,
              "The output may be a symbolic link to another directory (written through, the link kept)");
  s->callback([snap_out, snap_root, snap_nocuda, snap_policy, &exit_code] {
    exit_code = run_snapshot(*snap_out, *snap_root, *snap_nocuda, *snap_policy);
  });
}

}  // namespace

void add_topology_commands(CLI::App& app, int& exit_code, std::string_view only) {
  if (only.empty() || only == "topo") add_topo_command(app, exit_code);
  if (only.empty() || only == "check") add_check_command(app, exit_code);
  if (only.empty() || only == "snapshot") add_snapshot_command(app, exit_code);
}

}  // namespace gdrpeer::cli

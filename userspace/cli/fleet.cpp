#include "fleet.hpp"

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <exception>
#include <mutex>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "exit_codes.hpp"
#include "gdrpeer/topo/errors.hpp"
#include "gdrpeer/topo/render.hpp"
#include "output_file.hpp"

namespace gdrpeer::cli {

namespace {

// What fleet mode keeps of one node until it is printed.
struct FleetNode {
  std::string name, line, error, status;  // status: node_status()
  topo::Verdict worst = topo::Verdict::Optimal, verdict = topo::Verdict::Optimal;
  bool incomplete = false;
  int exit_code = 0;
  size_t gpus = 0, nics = 0, pairs = 0;
  std::exception_ptr failure;  // anything but an input error: ends the run like a sequential one
};

}  // namespace

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
int run_fleet(const std::vector<NodeSpec>& specs, const InputOptions& in, const FleetFlags& f, const topo::CheckOptions& opt,
              const topo::RuleData& k) {
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
      n.exit_code = exit_code::kDataErr;
    } catch (const topo::MissingInput& e) {
      n.error = e.what();
      n.exit_code = exit_code::kNoInput;
    } catch (...) {
      n.failure = std::current_exception();  // usage errors: rethrown when this node's turn comes
    }
  };
  auto emit = [&](FleetNode& n) {
    if (n.failure) std::rethrow_exception(n.failure);
    if (!n.error.empty()) {
      ++errors;
      if (f.json)
        nodes.push_back({{"source", n.name}, {"error", n.error}, {"exit_code", n.exit_code}});
      else
        std::printf("%s: error: %s\n", n.name.c_str(), n.error.c_str());
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
  return errors ? exit_code::kDataErr : worst;
}

}  // namespace gdrpeer::cli

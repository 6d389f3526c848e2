// inproc_vs_hwloc: the hwloc-XML comparison of docs/benchmarks.md without process
// start-up on either side. Per input file, N rounds of
//   hwloc:   hwloc_topology_init, set_xml(FILE), load, export_xmlbuffer, free, destroy
//            (what `lstopo --input FILE --of xml -` does, minus exec and printing);
//   gdrpeer: read FILE, parse_hwloc_xml, assign_roles, check, render_matrix
//            (what `gdrpeer check --hwloc FILE` does, minus exec and printing),
//            once with the rule data (topology/*.json) loaded per round as a
//            process does, once with it loaded before the rounds.
// Prints per-round microseconds (median of 5 repetitions of N rounds) and ratios.
//
//   inproc_vs_hwloc [-n N] DATA_DIR FILE...
#include <hwloc.h>
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "gdrpeer/topo/inputs.hpp"
#include "gdrpeer/topo/render.hpp"
#include "gdrpeer/topo/rule_data.hpp"
#include "gdrpeer/topo/rules.hpp"

namespace {

double now_us() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<double>(t.tv_sec) * 1e6 + static_cast<double>(t.tv_nsec) * 1e-3;
}

// Median over 5 repetitions of the per-round time of `rounds` calls of fn.
template <typename Fn>
double per_round_us(int rounds, Fn&& fn) {
  std::vector<double> reps;
  for (int r = 0; r < 5; ++r) {
    double t0 = now_us();
    for (int i = 0; i < rounds; ++i) fn();
    reps.push_back((now_us() - t0) / rounds);
  }
  std::sort(reps.begin(), reps.end());
  return reps[2];
}

size_t sink = 0;  // results feed this so that nothing is optimised away

void hwloc_round(const char* file) {
  hwloc_topology_t t;
  if (hwloc_topology_init(&t) != 0) std::abort();
  if (hwloc_topology_set_xml(t, file) != 0) {
    std::fprintf(stderr, "inproc_vs_hwloc: hwloc cannot read %s\n", file);
    std::exit(1);
  }
  // As lstopo: I/O objects kept (its default filter for them), everything else as hwloc does.
  hwloc_topology_set_io_types_filter(t, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
  if (hwloc_topology_load(t) != 0) std::abort();
  char* xml = nullptr;
  int len = 0;
  if (hwloc_topology_export_xmlbuffer(t, &xml, &len, 0) != 0) std::abort();
  sink += static_cast<size_t>(len);
  hwloc_free_xmlbuffer(t, xml);
  hwloc_topology_destroy(t);
}

void gdrpeer_round(const std::string& file, const gdrpeer::topo::RuleData& k) {
  namespace topo = gdrpeer::topo;
  topo::InputFile f(file);
  topo::Topology t = topo::parse_hwloc_xml(f.bytes(), file);
  topo::assign_roles(t, k);
  topo::CheckOptions opt;
  topo::Report r = topo::check(t, k, opt);
  sink += topo::render_matrix(t, r, false).size();
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = 200, a = 1;
  if (argc > 2 && std::strcmp(argv[1], "-n") == 0) {
    rounds = std::atoi(argv[2]);
    a = 3;
  }
  if (argc - a < 2 || rounds <= 0) {
    std::fprintf(stderr, "usage: inproc_vs_hwloc [-n N] DATA_DIR FILE...\n");
    return 64;
  }
  const std::string data = argv[a];
  const gdrpeer::topo::RuleData k = gdrpeer::topo::RuleData::load(data);
  std::printf(
      "| input | hwloc load+export | gdrpeer, rule data per round | ratio | gdrpeer, rule data loaded once | ratio |\n"
      "| --- | --- | --- | --- | --- | --- |\n");
  for (int i = a + 1; i < argc; ++i) {
    const std::string file = argv[i];
    hwloc_round(file.c_str());  // warm: hwloc's components, page cache
    const double h = per_round_us(rounds, [&] { hwloc_round(file.c_str()); });
    const double g_cold = per_round_us(rounds, [&] { gdrpeer_round(file, gdrpeer::topo::RuleData::load(data)); });
    const double g_warm = per_round_us(rounds, [&] { gdrpeer_round(file, k); });
    const char* base = std::strrchr(file.c_str(), '/');
    std::printf("| %s | %.1f us | %.1f us | %.1fx | %.1f us | %.1fx |\n", base ? base + 1 : file.c_str(), h, g_cold, h / g_cold, g_warm,
                h / g_warm);
  }
  std::fprintf(stderr, "(%d rounds x 5, checksum %zu)\n", rounds, sink);
  return 0;
}

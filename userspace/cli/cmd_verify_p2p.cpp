// `gdrpeer verify --p2p`: the measurement (userspace/verify/p2p.cpp) next to what
// `gdrpeer check` predicts for each GPU pair on this node (or in --predict-from).
#include <sys/stat.h>

#include <cstdio>
#include <iostream>
#include <map>
#include <optional>

#include "gdrpeer/topo/errors.hpp"
#include "gdrpeer/topo/inputs.hpp"
#include "gdrpeer/topo/node_capture.hpp"
#include "gdrpeer/topo/rule_data.hpp"
#include "gdrpeer/topo/rules.hpp"
#include "gdrpeer/verify/p2p.hpp"
#include "gdrpeer/verify/sizes.hpp"
#include "verify_p2p.hpp"

namespace gdrpeer::cli {

namespace {

namespace topo = gdrpeer::topo;
namespace v = gdrpeer::verify;

int usage(const std::string& msg) {
  std::fprintf(stderr, "gdrpeer verify --p2p: %s\n", msg.c_str());
  return 64;
}

// Per direction, what a trained PCIe link carries before protocol overhead: lanes x GT/s
// x 128/130 (8 GT/s and faster) or x 8/10 (2.5 and 5 GT/s), in GB/s.
double pcie_gbps(const topo::Link& l) {
  if (l.speed_gts <= 0 || l.width <= 0) return 0;
  const double coding = l.speed_gts >= 8 ? 128.0 / 130.0 : 0.8;
  return l.speed_gts * l.width * coding / 8.0;
}

// check's view of the node, and its GPU pairs by BDF.
struct Predictions {
  topo::Topology t;
  topo::Report r;
  std::string why;  // why there is no check (input unreadable)
};

Predictions run_check(const P2pArgs& a) {
  Predictions p;
  try {
    const topo::RuleData k = topo::RuleData::load(a.data_dir.empty() ? topo::RuleData::default_dir() : a.data_dir);
    if (a.predict_from.empty()) {
      auto fs = topo::make_dir_fs("/");
      p.t = topo::parse_sysfs(*fs, "live sysfs");
      topo::ask_drivers(p.t, topo::LiveOptions{});  // NVML; CUDA's own answers come from the measurement
    } else {
      struct stat st;
      if (::stat(a.predict_from.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
        auto fs = topo::make_dir_fs(a.predict_from);
        p.t = topo::parse_sysfs(*fs, a.predict_from);
      } else {
        topo::InputFile f(a.predict_from);
        const std::string_view b = f.bytes();
        switch (topo::detect_format(b)) {
          case topo::InputFormat::SnapshotTar: {
            auto fs = topo::make_tar_fs(std::string(b), a.predict_from);
            p.t = topo::parse_sysfs(*fs, a.predict_from);
            break;
          }
          case topo::InputFormat::HwlocXml: p.t = topo::parse_hwloc_xml(b, a.predict_from); break;
          case topo::InputFormat::NcclXml: p.t = topo::parse_nccl_xml(b, a.predict_from); break;
          default: p.t = topo::parse_lspci({{a.predict_from, b}}); break;
        }
      }
    }
    topo::assign_roles(p.t, k);
    topo::CheckOptions o;
    o.gpu_nic = false;
    p.r = topo::check(p.t, k, o);
  } catch (const std::exception& e) {
    p.why = std::string("gdrpeer check could not run: ") + e.what();
  }
  return p;
}

v::P2pPrediction predict(const Predictions& c, const std::string& src, const std::string& dst) {
  v::P2pPrediction p;
  if (!c.why.empty()) {
    p.why = c.why;
    return p;
  }
  for (const auto& pr : c.r.pairs) {
    const topo::Device& da = c.t.devices[pr.a];
    const topo::Device& db = c.t.devices[pr.b];
    if (!((da.bdf == src && db.bdf == dst) || (da.bdf == dst && db.bdf == src))) continue;
    p.verdict = topo::to_string(pr.verdict);
    const double ga = pcie_gbps(da.link_cap), gb = pcie_gbps(db.link_cap);
    p.pcie_gbps = ga > 0 && gb > 0 ? std::min(ga, gb) : 0;
    if (pr.nvlink.linked) {
      p.path = v::P2pPrediction::Path::NvLink;
      const std::string cell = topo::nvlink_cell(pr.nvlink);
      p.summary = cell + (pr.nvlink.inferred_from == "gpu-model" ? " (inferred from the GPU model)"
                          : pr.nvlink.via_switch                 ? " via NVSwitch" + std::string(pr.nvlink.inferred ? " (inferred)" : "")
                                                                 : " direct");
      return p;
    }
    // The flat virtual bus with NVLink unknown: check judged nothing (a note), so there is
    // no prediction to hold the measurement to.
    const bool flat = pr.path.cls == topo::PathClass::PHB && pr.path.ports_a.empty() && pr.path.ports_b.empty();
    if (!c.t.nvlink_known && flat && c.r.virtual_machine && pr.verdict == topo::Verdict::Optimal) {
      p.why = "NVLink unknown and the PCIe path hidden by the VM";
      return p;
    }
    p.summary = std::string(topo::to_string(pr.path.cls));
    p.path = pr.verdict == topo::Verdict::Optimal || pr.verdict == topo::Verdict::Degraded ? v::P2pPrediction::Path::Pcie
                                                                                           : v::P2pPrediction::Path::None;
    return p;
  }
  p.why = "check does not list both GPUs (" + src + ", " + dst + ")";
  return p;
}

}  // namespace

int run_verify_p2p(const P2pArgs& a) {
  std::string why;
  const auto size = v::parse_size(a.size, &why);
  if (!size) return usage("--p2p-size: " + why);
  if (*size < 4096 || *size > (uint64_t{16} << 30) || *size % 8 != 0)
    return usage("--p2p-size: between 4 KiB and 16 GiB, a multiple of 8 bytes (the byte check compares 8-byte words)");
  if (a.reps < 1 || a.reps > 10000) return usage("--p2p-reps: between 1 and 10000");
  v::P2pOptions o;
  o.libcuda = a.libcuda;
  o.bytes = *size;
  o.reps = a.reps;
  o.seed = a.seed;
  o.gpus = a.gpus;
  for (const auto& g : a.gpus)
    if (!topo::parse_bdf(g)) return usage("--gpu " + g + ": expected a PCI address like 0000:00:06.0 (as gdrpeer check prints it)");
  for (const auto& s : a.pairs) {
    const size_t comma = s.find(',');
    const std::string src = s.substr(0, comma), dst = comma == std::string::npos ? "" : s.substr(comma + 1);
    const auto ps = topo::parse_bdf(src), pd = topo::parse_bdf(dst);
    if (comma == std::string::npos || !ps || !pd)
      return usage("--pair " + s + ": expected SRC_BDF,DST_BDF (e.g. 0000:00:06.0,0000:00:07.0)");
    if (*ps == *pd) return usage("--pair " + s + ": a GPU with itself is not a peer pair");
    o.pairs.emplace_back(*ps, *pd);
  }
  if (!a.predict_from.empty()) {
    struct stat st;
    if (::stat(a.predict_from.c_str(), &st) != 0) return usage("--predict-from " + a.predict_from + ": cannot open");
  }
  const Predictions c = run_check(a);
  v::P2pReport rep = v::run_p2p(o, [&](const std::string& s, const std::string& d) { return predict(c, s, d); });
  if (a.json)
    std::cout << v::p2p_to_json(rep).dump(2) << "\n";
  else if (!rep.usage_error.empty())
    std::fprintf(stderr, "gdrpeer verify --p2p: %s\n", rep.usage_error.c_str());
  else
    v::print_p2p_table(rep, std::cout);
  return rep.exit_code;
}

}  // namespace gdrpeer::cli

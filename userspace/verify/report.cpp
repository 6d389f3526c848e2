#include "gdrpeer/verify/report.hpp"

#include <cstdio>
#include <iomanip>

#include "gdrpeer/gdrpeer.hpp"

namespace gdrpeer::verify {

namespace {

const char* mtu_name(int mtu) {
  switch (mtu) {
    case 1: return "256";
    case 2: return "512";
    case 3: return "1024";
    case 4: return "2048";
    case 5: return "4096";
    default: return "?";
  }
}

std::string gid_words(const GidEntry& g) {
  std::string s = "GID " + std::to_string(g.index) + " " + format_gid(g.raw) + " (" + gid_type_name(g.type);
  if (gid_is_link_local(g.raw)) s += ", link-local";
  if (gid_is_ipv4_mapped(g.raw)) s += ", IPv4";
  return s + ")";
}

}  // namespace

std::string pad(const std::string& s, size_t w) { return s.size() >= w ? s + " " : s + std::string(w - s.size(), ' '); }

std::string fixed(double v, int prec) {
  char b[64];
  std::snprintf(b, sizeof b, "%.*f", prec, v);
  return b;
}

void print_source_rows(const std::vector<SourceReport>& sources, std::ostream& out) {
  for (const auto& s : sources) {
    out << "  " << pad(source_name(s.kind), 10) << pad(state_name(s.state), 12)
        << (s.state == SourceSetup::State::ready ? s.description : s.reason) << "\n";
    for (const auto& [k, v] : s.facts) out << "  " << std::string(22, ' ') << k << ": " << v << "\n";
  }
}

nlohmann::ordered_json source_json(const SourceReport& s) {
  nlohmann::ordered_json js{{"name", source_name(s.kind)}, {"state", state_name(s.state)}, {"requested", s.requested}};
  if (!s.description.empty()) js["description"] = s.description;
  if (!s.reason.empty()) js["reason"] = s.reason;
  if (s.state == SourceSetup::State::ready) {
    js["dmabuf"] = s.dmabuf_problem.empty();
    if (!s.dmabuf_problem.empty()) js["dmabuf_problem"] = s.dmabuf_problem;
  }
  return js;
}

void print_table(const VerifyReport& rep, std::ostream& out) {
  out << "gdrpeer verify: " << describe_bytes(rep.size) << " per transfer, pattern seed " << rep.seed << "\n\n";

  out << "RDMA devices\n";
  if (!rep.rdma.stack_loaded) {
    out << "  none: " << rep.rdma.stack_problem << "\n";
  } else if (rep.rdma.devices.empty()) {
    out << "  none: " << (rep.rdma.stack_problem.empty() ? "libibverbs found no RDMA device" : rep.rdma.stack_problem) << "\n";
  }
  for (const auto& d : rep.rdma.devices) {
    out << "  " << d.name << " (" << (d.kernel_driver.empty() ? "driver unknown" : d.kernel_driver) << (d.software ? ", software RDMA" : "")
        << ")";
    if (!d.problem.empty()) out << ": " << d.problem;
    out << "\n";
    for (const auto& p : d.ports) {
      out << "    port " << int(p.port) << ": " << p.state_name << ", " << (p.ethernet ? "Ethernet (RoCE)" : "InfiniBand") << ", MTU "
          << mtu_name(p.active_mtu);
      if (!p.ethernet) out << ", LID " << p.lid;
      if (p.gid)
        out << ", " << gid_words(*p.gid);
      else
        out << ", no GID: " << p.gid_problem;
      out << "\n";
    }
  }

  out << "\nMemory sources\n";
  print_source_rows(rep.sources, out);

  out << "\nResults\n";
  if (rep.results.empty()) {
    out << "  (none)\n";
  } else {
    size_t wdev = 8;
    for (const auto& r : rep.results) wdev = std::max(wdev, r.device.size() + 2 + std::to_string(r.port).size());
    out << "  " << pad("SOURCE", 10) << pad("DEVICE", wdev + 1) << pad("METHOD", 19) << pad("RESULT", 13) << "REASON\n";
    for (const auto& r : rep.results) {
      out << "  " << pad(r.source, 10) << pad(r.device + ":" + std::to_string(r.port), wdev + 1) << pad(method_name(r.method), 19)
          << pad(outcome_name(r.outcome), 13) << r.reason << "\n";
      if (r.outcome == Outcome::fail)
        for (const auto& t : r.transfers) out << "  " << std::string(10 + wdev + 1 + 19 + 13, ' ') << t.op << ": " << t.detail << "\n";
    }
  }

  bool any_bench = false;
  for (const auto& r : rep.results) any_bench = any_bench || !r.bench.empty();
  if (any_bench) {
    out << "\nBenchmark (WRITE latency: one in flight; bandwidth: 16 WRITEs or up to 16 READs in flight)\n";
    out << "  " << pad("SOURCE", 10) << pad("DEVICE", 10) << pad("METHOD", 19) << pad("SIZE", 10) << pad("WRITE-LAT(us)", 14)
        << pad("WRITE(GB/s)", 12) << "READ(GB/s)\n";
    for (const auto& r : rep.results)
      for (const auto& b : r.bench)
        out << "  " << pad(r.source, 10) << pad(r.device + ":" + std::to_string(r.port), 10) << pad(method_name(r.method), 19)
            << pad(std::to_string(b.size), 10) << pad(fixed(b.write_latency_us, 2), 14) << pad(fixed(b.write_gbps, 3), 12)
            << fixed(b.read_gbps, 3) << "\n";
  }

  out << "\n" << rep.summary << " (exit " << rep.exit_code << ")\n";
}

nlohmann::ordered_json to_json(const VerifyReport& rep) {
  using json = nlohmann::ordered_json;
  json j;
  j["gdrpeer_verify_version"] = 1;
  j["size"] = rep.size;
  j["seed"] = rep.seed;

  json rdma;
  rdma["stack_loaded"] = rep.rdma.stack_loaded;
  if (!rep.rdma.stack_problem.empty()) rdma["stack_problem"] = rep.rdma.stack_problem;
  rdma["devices"] = json::array();
  for (const auto& d : rep.rdma.devices) {
    json jd{{"name", d.name},           {"kernel_driver", d.kernel_driver},   {"software", d.software},
            {"vendor_id", d.vendor_id}, {"vendor_part_id", d.vendor_part_id}, {"max_mr_size", d.max_mr_size}};
    if (!d.problem.empty()) jd["problem"] = d.problem;
    jd["ports"] = json::array();
    for (const auto& p : d.ports) {
      json jp{{"port", p.port},
              {"state", p.state_name},
              {"link_layer", p.ethernet ? "Ethernet" : "InfiniBand"},
              {"lid", p.lid},
              {"active_mtu", mtu_name(p.active_mtu)}};
      jp["gids"] = json::array();
      for (const auto& g : p.gids)
        jp["gids"].push_back(
            {{"index", g.index}, {"gid", format_gid(g.raw)}, {"type", gid_type_name(g.type)}, {"link_local", gid_is_link_local(g.raw)}});
      if (p.gid)
        jp["selected_gid"] = p.gid->index;
      else
        jp["gid_problem"] = p.gid_problem;
      jd["ports"].push_back(jp);
    }
    rdma["devices"].push_back(jd);
  }
  j["rdma"] = rdma;

  j["sources"] = json::array();
  for (const auto& s : rep.sources) {
    json js = source_json(s);
    json facts = json::object();
    for (const auto& [k, v] : s.facts) facts[k] = v;
    js["facts"] = facts;
    j["sources"].push_back(js);
  }

  j["results"] = json::array();
  for (const auto& r : rep.results) {
    json jr{{"source", r.source},
            {"device", r.device},
            {"port", r.port},
            {"method", method_name(r.method)},
            {"result", outcome_name(r.outcome)},
            {"reason", r.reason}};
    jr["transfers"] = json::array();
    for (const auto& t : r.transfers) jr["transfers"].push_back({{"op", t.op}, {"bytes", t.bytes}, {"ok", t.ok}, {"detail", t.detail}});
    if (!r.bench.empty() || !r.bench_problem.empty()) {
      jr["bench"] = json::array();
      for (const auto& b : r.bench)
        jr["bench"].push_back({{"size", b.size},
                               {"write_latency_us", b.write_latency_us},
                               {"write_gbps", b.write_gbps},
                               {"read_gbps", b.read_gbps},
                               {"latency_iterations", b.iterations}});
      if (!r.bench_problem.empty()) jr["bench_problem"] = r.bench_problem;
    }
    j["results"].push_back(jr);
  }
  size_t n[3] = {0, 0, 0};
  for (const auto& r : rep.results) ++n[static_cast<int>(r.outcome)];
  j["summary"] = {{"pass", n[0]}, {"unsupported", n[1]}, {"fail", n[2]}, {"text", rep.summary}};
  j["exit_code"] = rep.exit_code;
  j["exit_meaning"] = exit_meaning(rep.exit_code);
  return j;
}

}  // namespace gdrpeer::verify

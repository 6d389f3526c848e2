// The two faces of a two-node report: a table for people, JSON for programs. Both sides
// print the same rows (the client's, which it sends the server at the end of each row).
#include <cstdio>

#include "gdrpeer/gdrpeer.hpp"
#include "gdrpeer/verify/report.hpp"
#include "gdrpeer/verify/twonode.hpp"

namespace gdrpeer::verify {

namespace {

std::string mtu_text(int ibv_mtu) { return ibv_mtu >= 1 && ibv_mtu <= 5 ? std::to_string(128 << ibv_mtu) : "?"; }

std::string side_line(const SideInfo& s) {
  std::string line = s.device + " port " + std::to_string(s.port) + " (" +
                     (s.kernel_driver.empty() ? std::string("driver unknown") : s.kernel_driver) + "): " + s.port_state + ", " +
                     (s.ethernet ? "Ethernet (RoCE)" : "InfiniBand") + ", MTU " + mtu_text(s.active_mtu);
  if (!s.ethernet) line += ", LID " + std::to_string(s.lid);
  if (s.has_gid)
    line += ", GID " + std::to_string(s.gid_index) + " " + format_gid(s.gid) + " (" + s.gid_type + ")";
  else
    line += ", no GID: " + s.gid_problem;
  line += ", atomics " + std::string(s.atomic_cap > 0 ? "yes" : s.atomic_cap == 0 ? "no" : "unknown");
  return line;
}

std::string combo(SourceKind k, Method m) { return source_name(k) + " " + method_name(m); }

void print_sources(const std::string& title, const std::vector<SourceReport>& sources, std::ostream& out) {
  out << "\nMemory sources (" << title << ")\n";
  print_source_rows(sources, out);
}

nlohmann::ordered_json side_json(const SideInfo& s) {
  using json = nlohmann::ordered_json;
  json j{{"role", s.role},
         {"hostname", s.hostname},
         {"gdrpeer_version", s.version},
         {"protocol", s.protocol},
         {"device", s.device},
         {"kernel_driver", s.kernel_driver},
         {"port", s.port},
         {"port_state", s.port_state},
         {"link_layer", s.ethernet ? "Ethernet" : "InfiniBand"},
         {"active_mtu", s.active_mtu >= 1 && s.active_mtu <= 5 ? 128 << s.active_mtu : 0},
         {"lid", s.lid}};
  if (s.has_gid) {
    j["gid"] = format_gid(s.gid);
    j["gid_index"] = s.gid_index;
    j["gid_type"] = s.gid_type;
  } else {
    j["gid_problem"] = s.gid_problem;
  }
  j["atomic_cap"] = s.atomic_cap;
  j["dmabuf_registration"] = s.dmabuf_registration;
  j["methods"] = json::array();
  for (auto m : s.methods) j["methods"].push_back(method_name(m));
  j["sources"] = json::array();
  for (const auto& src : s.sources) {
    json js = source_json(src);
    if (!src.facts.empty()) {
      json facts = json::object();
      for (const auto& [k, v] : src.facts) facts[k] = v;
      js["facts"] = facts;
    }
    j["sources"].push_back(js);
  }
  return j;
}

}  // namespace

void print_two_node_table(const TwoNodeReport& rep, std::ostream& out) {
  out << "gdrpeer verify, two nodes (this side: " << role_name(rep.role) << "): " << describe_bytes(rep.size)
      << " per transfer, pattern seed " << rep.seed << "\n\n";
  const SideInfo& client = rep.role == Role::client ? rep.local : rep.peer;
  const SideInfo& server = rep.role == Role::client ? rep.peer : rep.local;
  if (!rep.local.device.empty() || !rep.peer.device.empty()) {
    out << "Nodes\n";
    if (!client.device.empty())
      out << "  client  " << client.hostname << " (gdrpeer " << client.version << "): " << side_line(client) << "\n";
    if (!server.device.empty())
      out << "  server  " << server.hostname << " (gdrpeer " << server.version << "): " << side_line(server) << "\n";
    if (!rep.peer_address.empty())
      out << "  " << role_name(rep.role == Role::client ? Role::server : Role::client) << " at " << rep.peer_address << "\n";
  }
  if (!rep.sources.empty()) print_sources("this side, " + role_name(rep.role), rep.sources, out);
  if (!rep.peer.sources.empty())
    print_sources("the other side, " + role_name(rep.role == Role::client ? Role::server : Role::client), rep.peer.sources, out);

  out << "\nResults\n";
  if (rep.rows.empty()) {
    out << "  (none)\n";
  } else {
    out << "  " << pad("CLIENT MEMORY", 28) << pad("SERVER MEMORY", 28) << pad("MTU", 5) << pad("RESULT", 13) << "REASON\n";
    for (const auto& r : rep.rows) {
      out << "  " << pad(combo(r.client_source, r.client_method), 28) << pad(combo(r.server_source, r.server_method), 28)
          << pad(r.path_mtu ? std::to_string(r.path_mtu) : "-", 5) << pad(outcome_name(r.outcome), 13) << r.reason << "\n";
      if (r.outcome != Outcome::pass)
        for (const auto& t : r.transfers)
          out << "  " << std::string(28 + 28 + 5, ' ') << t.op << " ("
              << (t.unsupported ? std::string("unsupported")
                  : t.ok        ? std::string("ok")
                                : std::string("FAILED"))
              << (t.checked_by.empty() ? "" : ", checked by the " + t.checked_by) << "): " << t.detail << "\n";
    }
  }

  bool any_bench = false;
  for (const auto& r : rep.rows) any_bench = any_bench || !r.bw.empty() || !r.lat.empty();
  if (any_bench) {
    // perftest's column heads (perftest_parameters.h RESULT_FMT, RESULT_FMT_LAT).
    out << "\nBandwidth (perftest's columns: ib_write_bw / ib_read_bw, MiB/s = 2^20 bytes/s)\n";
    out << "  " << pad("CLIENT MEMORY", 28) << pad("SERVER MEMORY", 28) << pad("OP", 11) << pad("#bytes", 10) << pad("#iterations", 13)
        << pad("BW peak[MiB/sec]", 18) << pad("BW average[MiB/sec]", 21) << "MsgRate[Mpps]\n";
    for (const auto& r : rep.rows)
      for (const auto& b : r.bw)
        out << "  " << pad(combo(r.client_source, r.client_method), 28) << pad(combo(r.server_source, r.server_method), 28) << pad(b.op, 11)
            << pad(std::to_string(b.bytes), 10) << pad(std::to_string(b.iterations), 13)
            << pad(b.bw_peak_mib < 0 ? std::string("-") : fixed(b.bw_peak_mib, 2), 18) << pad(fixed(b.bw_avg_mib, 2), 21)
            << fixed(b.msg_rate_mpps, 6) << "\n";
    out << "\nLatency (perftest's columns: ib_read_lat, usec)\n";
    out << "  " << pad("CLIENT MEMORY", 28) << pad("SERVER MEMORY", 28) << pad("OP", 11) << pad("#bytes", 10) << pad("#iterations", 13)
        << pad("t_min", 9) << pad("t_max", 9) << pad("t_typical", 11) << pad("t_avg", 9) << pad("t_stdev", 9) << pad("99%", 9) << "99.9%\n";
    for (const auto& r : rep.rows)
      for (const auto& l : r.lat)
        out << "  " << pad(combo(r.client_source, r.client_method), 28) << pad(combo(r.server_source, r.server_method), 28) << pad(l.op, 11)
            << pad(std::to_string(l.bytes), 10) << pad(std::to_string(l.iterations), 13) << pad(fixed(l.t_min, 2), 9)
            << pad(fixed(l.t_max, 2), 9) << pad(fixed(l.t_typical, 2), 11) << pad(fixed(l.t_avg, 2), 9) << pad(fixed(l.t_stdev, 2), 9)
            << pad(fixed(l.p99, 2), 9) << fixed(l.p99_9, 2) << "\n";
  }
  out << "\n" << rep.summary << " (exit " << rep.exit_code << ")\n";
}

nlohmann::ordered_json two_node_to_json(const TwoNodeReport& rep) {
  using json = nlohmann::ordered_json;
  json j;
  j["gdrpeer_verify_version"] = 1;
  j["mode"] = "two-node";
  j["role"] = role_name(rep.role);
  j["protocol"] = kProtocolVersion;
  j["size"] = rep.size;
  j["seed"] = rep.seed;
  if (!rep.peer_address.empty()) j["peer_address"] = rep.peer_address;
  SideInfo local = rep.local;
  local.sources = rep.sources;  // with facts
  j["local"] = local.device.empty() ? json(nullptr) : side_json(local);
  j["peer"] = rep.peer.device.empty() ? json(nullptr) : side_json(rep.peer);
  j["results"] = json::array();
  for (const auto& r : rep.rows) {
    json jr{{"index", r.index},
            {"client_source", source_name(r.client_source)},
            {"client_method", method_name(r.client_method)},
            {"server_source", source_name(r.server_source)},
            {"server_method", method_name(r.server_method)},
            {"path_mtu", r.path_mtu},
            {"result", outcome_name(r.outcome)},
            {"reason", r.reason}};
    jr["transfers"] = json::array();
    for (const auto& t : r.transfers)
      jr["transfers"].push_back({{"op", t.op},
                                 {"bytes", t.bytes},
                                 {"ok", t.ok},
                                 {"unsupported", t.unsupported},
                                 {"checked_by", t.checked_by},
                                 {"detail", t.detail}});
    if (!r.bw.empty() || !r.lat.empty()) {
      json bw = json::array(), lat = json::array();
      for (const auto& b : r.bw)
        bw.push_back({{"op", b.op},
                      {"bytes", b.bytes},
                      {"iterations", b.iterations},
                      {"bw_peak_mib_s", b.bw_peak_mib < 0 ? json(nullptr) : json(b.bw_peak_mib)},
                      {"bw_average_mib_s", b.bw_avg_mib},
                      {"msg_rate_mpps", b.msg_rate_mpps}});
      for (const auto& l : r.lat)
        lat.push_back({{"op", l.op},
                       {"bytes", l.bytes},
                       {"iterations", l.iterations},
                       {"t_min_us", l.t_min},
                       {"t_max_us", l.t_max},
                       {"t_typical_us", l.t_typical},
                       {"t_avg_us", l.t_avg},
                       {"t_stdev_us", l.t_stdev},
                       {"p99_us", l.p99},
                       {"p99_9_us", l.p99_9}});
      jr["bench"] = {{"bw", bw}, {"lat", lat}};
    }
    if (!r.bench_problem.empty()) jr["bench_problem"] = r.bench_problem;
    j["results"].push_back(jr);
  }
  size_t n[3] = {0, 0, 0};
  for (const auto& r : rep.rows) ++n[static_cast<int>(r.outcome)];
  j["summary"] = {{"pass", n[0]}, {"unsupported", n[1]}, {"fail", n[2]}, {"text", rep.summary}};
  if (!rep.error.empty()) j["error"] = rep.error;
  j["exit_code"] = rep.exit_code;
  j["exit_meaning"] = exit_meaning(rep.exit_code);
  return j;
}

}  // namespace gdrpeer::verify

// `gdrpeer verify --server` and `gdrpeer verify HOST[:PORT]`: GPUDirect RDMA proven between
// two nodes, the way `ib_write_bw --use_cuda` is run as a server on one node and a client on
// the other, with every byte checked on the side that receives it.
//
// Each side prepares its own memory sources, picks its own registration methods and its
// own RDMA port; the two exchange queue-pair addresses (QPN, PSN, GID, LID, MTU) and the
// address and rkey of their memory over one TCP connection (wire.hpp). The client drives
// the plan: every (client source x method) x (server source x method), and per row RDMA
// WRITE, RDMA READ, SEND both ways and the atomics. Both sides end with the same rows.
// docs/verify.md ("Two nodes") is the reference for the protocol and the words.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "gdrpeer/verify/engine.hpp"
#include "gdrpeer/verify/rc_endpoint.hpp"
#include "gdrpeer/verify/wire.hpp"

namespace gdrpeer::verify {

// The protocol version this build speaks; the first message both ways carries it.
inline constexpr uint16_t kProtocolVersion = 1;

enum class Role { client, server };
std::string role_name(Role r);  // "client", "server"

// The operations of one row (`--op`).
enum class TwoNodeOp { write, read, send, atomic };
const std::vector<TwoNodeOp>& all_two_node_ops();
std::optional<TwoNodeOp> parse_two_node_op(const std::string& s);

struct TwoNodeOptions {
  Role role = Role::client;
  std::string peer;  // client: HOST, HOST:PORT, [V6%IF]:PORT
  uint16_t port = wire::kDefaultPort;
  std::string bind;                 // server: address to listen on ("" every address)
  std::vector<SourceKind> sources;  // empty: every source this node has
  std::vector<Method> methods{Method::reg_mr, Method::dmabuf};
  std::string device;          // "" first device with an ACTIVE port; "DEV" or "DEV:PORT"
  int ib_port = 0;             // -i; 0: from `device` or the first ACTIVE port
  int mtu = 0;                 // -m in bytes (256..4096); 0: the smaller of the two active MTUs
  std::vector<TwoNodeOp> ops;  // empty: all
  SourceOptions source;        // client: source.size is the transfer size for both sides
  uint64_t seed = 1;
  int timeout_ms = 10000;          // one completion; a TCP message: 2 x this + 2 s (the peer may be waiting for one)
  int accept_timeout_ms = 300000;  // server: how long to wait for a client (0: for ever)
  bool bench = false;
  std::vector<size_t> bench_sizes;
  double bench_seconds = 0.2;  // -D, per measurement when iterations == 0
  uint64_t iterations = 0;     // -n: operations per measurement (perftest's -n); 0: by time
  DmabufRegistration dmabuf_registration = DmabufRegistration::plain;
  std::function<void(const std::string&)> progress;  // may be empty
  const verbs::Api* api = nullptr;                   // tests: a fake libibverbs
  // Tests: the protocol version this side claims; a memory-source factory.
  uint16_t protocol_version = kProtocolVersion;
  std::function<SourceSetup(SourceKind, const SourceOptions&)> prepare;
  // Server: called once it listens, with the address ("[::]:18516").
  std::function<void(const std::string&)> on_listening;
  // Tests: the server dies (closes the connection without a word) when this returns true
  // for (row, step); steps: "row", "write", "read", "send", "recv", "atomic", "bench".
  std::function<bool(uint32_t, const std::string&)> server_dies_at;
};

// A side as the other sees it (the SIDE message).
struct SideInfo {
  std::string role, hostname, version;
  uint16_t protocol = 0;
  std::string device, kernel_driver;
  int port = 0;
  std::string port_state;
  bool ethernet = false;
  int active_mtu = 0;  // ibv_mtu
  uint16_t lid = 0;
  bool has_gid = false;
  RawGid gid{};
  uint32_t gid_index = 0;
  std::string gid_type, gid_problem;
  int atomic_cap = -1;
  std::string dmabuf_registration;  // "ibv_reg_dmabuf_mr" or "mlx5dv_reg_dmabuf_mr (data direct)"
  std::vector<SourceReport> sources;
  std::vector<Method> methods;
};

// perftest's bandwidth columns (ib_write_bw, ib_read_bw).
struct BwPoint {
  std::string op;  // "RDMA WRITE", "RDMA READ"
  uint64_t bytes = 0, iterations = 0;
  double bw_peak_mib = -1;  // MiB/s; -1: not computed (more than kPeakMaxIterations)
  double bw_avg_mib = 0;
  double msg_rate_mpps = 0;
};
// perftest's latency columns (ib_read_lat).
struct LatPoint {
  std::string op;  // "RDMA READ"
  uint64_t bytes = 0, iterations = 0;
  double t_min = 0, t_max = 0, t_typical = 0, t_avg = 0, t_stdev = 0, p99 = 0, p99_9 = 0;  // usec
};

struct TwoNodeRow {
  uint32_t index = 0;
  SourceKind client_source{}, server_source{};
  Method client_method{}, server_method{};
  Outcome outcome = Outcome::fail;
  std::string reason;
  int path_mtu = 0;  // bytes; 0 not connected
  std::vector<TransferCheck> transfers;
  std::vector<BwPoint> bw;
  std::vector<LatPoint> lat;
  std::string bench_problem;
};

struct TwoNodeReport {
  Role role = Role::client;
  size_t size = 0;
  uint64_t seed = 0;
  SideInfo local, peer;
  std::string peer_address;
  std::vector<SourceReport> sources;  // this side's, with facts
  std::vector<TwoNodeRow> rows;
  std::string error;  // the run did not complete: why
  int exit_code = kExitNothing;
  std::string summary;
};

// Runs one side to the end. Never throws for what the peer or the network does.
TwoNodeReport run_two_node(const TwoNodeOptions& opt, const RdmaInventory& inv);

// perftest's report arithmetic (perftest_parameters.c print_report_bw/print_report_lat),
// exposed for unit tests. Times in seconds.
BwPoint bw_from_times(const std::string& op, uint64_t bytes, const std::vector<double>& posted, const std::vector<double>& completed);
LatPoint lat_from_post_times(const std::string& op, uint64_t bytes, const std::vector<double>& posted);
inline constexpr size_t kPeakMaxIterations = 20000;

void print_two_node_table(const TwoNodeReport& rep, std::ostream& out);
nlohmann::ordered_json two_node_to_json(const TwoNodeReport& rep);

}  // namespace gdrpeer::verify

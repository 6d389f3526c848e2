// The two-node run: the TCP conversation of docs/verify.md ("Two nodes"), one RcEndpoint
// per row on each side, the byte checks on the receiving side, the benchmark on the client.
#include "gdrpeer/verify/twonode.hpp"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <memory>

#include "gdrpeer/gdrpeer.hpp"
#include "gdrpeer/verify/pattern.hpp"
#include "gdrpeer/verify/verbs_api.hpp"

#ifndef GDRPEER_VERSION
#define GDRPEER_VERSION "unknown"
#endif

namespace gdrpeer::verify {

namespace {

using Clock = std::chrono::steady_clock;
using wire::Reader;
using wire::WireError;
using wire::Writer;

// Message types (the u16 of the frame header).
enum Msg : uint16_t {
  kHello = 1,      // both ways, first: str gdrpeer version, str hostname, u8 role, u64 size, u64 seed
  kSide = 2,       // both ways, second: SideInfo
  kRowBegin = 3,   // client: row, kinds and methods of both sides, path MTU, client QpAddress
  kRowReady = 4,   // server: u8 outcome (0 ready), str reason, server QpAddress
  kOp = 5,         // client: u8 op, u8 step (0 prepare, 1 done)
  kOpReply = 6,    // server: u8 ok, str detail
  kRowEnd = 7,     // client: the finished row, as both sides report it
  kBye = 8,        // client: the plan is done
  kError = 9,      // either: str why, then the connection closes
  kHeartbeat = 10  // client, during a benchmark: still here
};

enum OpCode : uint8_t { kOpWrite = 1, kOpRead = 2, kOpSend = 3, kOpRecv = 4, kOpFetchAdd = 5, kOpCmpSwap = 6, kOpBench = 7 };
enum Step : uint8_t { kPrepare = 0, kDone = 1 };

// Pattern salts (the loopback uses 1 and 3 for its WRITE and SEND).
constexpr uint64_t kSaltWrite = 1, kSaltRead = 2, kSaltSend = 3, kSaltRecv = 4, kSaltAtomic = 5;

const char* op_step_name(uint8_t op) {
  switch (op) {
    case kOpWrite: return "write";
    case kOpRead: return "read";
    case kOpSend: return "send";
    case kOpRecv: return "recv";
    case kOpFetchAdd:
    case kOpCmpSwap: return "atomic";
    case kOpBench: return "bench";
  }
  return "?";
}

int mtu_bytes(int ibv_mtu) { return ibv_mtu >= 1 && ibv_mtu <= 5 ? 128 << ibv_mtu : 0; }
int mtu_enum(int bytes) {
  for (int e = 1; e <= 5; ++e)
    if (128 << e == bytes) return e;
  return 0;
}

uint8_t source_code(SourceKind k) {
  const auto& all = all_source_kinds();
  return static_cast<uint8_t>(std::find(all.begin(), all.end(), k) - all.begin());
}
SourceKind source_of(uint8_t c) {
  const auto& all = all_source_kinds();
  if (c >= all.size()) throw WireError(WireError::Kind::protocol, "the peer named memory source #" + std::to_string(c));
  return all[c];
}
Method method_of(uint8_t c) {
  if (c > 1) throw WireError(WireError::Kind::protocol, "the peer named registration method #" + std::to_string(c));
  return c == 0 ? Method::reg_mr : Method::dmabuf;
}

void put_double(Writer& w, double d) {
  uint64_t u;
  std::memcpy(&u, &d, 8);
  w.u64(u);
}
double get_double(Reader& r) {
  const uint64_t u = r.u64();
  double d;
  std::memcpy(&d, &u, 8);
  return d;
}

void put_qp(Writer& w, const QpAddress& q) {
  w.u32(q.qpn).u32(q.psn).u16(q.lid).bytes(q.gid.data(), 16).u32(q.gid_index).u8(q.ethernet ? 1 : 0);
  w.u8(static_cast<uint8_t>(q.active_mtu)).u8(static_cast<uint8_t>(q.rd_atomic)).u8(static_cast<uint8_t>(q.atomic_cap));
  w.u64(q.addr).u32(q.rkey).u64(q.length);
}
QpAddress get_qp(Reader& r) {
  QpAddress q;
  q.qpn = r.u32();
  q.psn = r.u32();
  q.lid = r.u16();
  r.bytes(q.gid.data(), 16);
  q.gid_index = r.u32();
  q.ethernet = r.u8() != 0;
  q.active_mtu = r.u8();
  q.rd_atomic = r.u8();
  q.atomic_cap = static_cast<int8_t>(r.u8());
  q.addr = r.u64();
  q.rkey = r.u32();
  q.length = r.u64();
  return q;
}

void put_side(Writer& w, const SideInfo& s) {
  w.str(s.role).str(s.hostname).str(s.version).u16(s.protocol).str(s.device).str(s.kernel_driver);
  w.u8(static_cast<uint8_t>(s.port)).str(s.port_state).u8(s.ethernet ? 1 : 0).u8(static_cast<uint8_t>(s.active_mtu));
  w.u16(s.lid).u8(s.has_gid ? 1 : 0).bytes(s.gid.data(), 16).u32(s.gid_index).str(s.gid_type).str(s.gid_problem);
  w.u8(static_cast<uint8_t>(s.atomic_cap)).str(s.dmabuf_registration);
  w.u8(static_cast<uint8_t>(s.sources.size()));
  for (const auto& src : s.sources) {
    w.u8(source_code(src.kind)).u8(static_cast<uint8_t>(src.state)).u8(src.requested ? 1 : 0);
    w.str(src.description).str(src.reason).str(src.dmabuf_problem);
  }
  w.u8(static_cast<uint8_t>(s.methods.size()));
  for (auto m : s.methods) w.u8(m == Method::reg_mr ? 0 : 1);
}
SideInfo get_side(Reader& r) {
  SideInfo s;
  s.role = r.str();
  s.hostname = r.str();
  s.version = r.str();
  s.protocol = r.u16();
  s.device = r.str();
  s.kernel_driver = r.str();
  s.port = r.u8();
  s.port_state = r.str();
  s.ethernet = r.u8() != 0;
  s.active_mtu = r.u8();
  s.lid = r.u16();
  s.has_gid = r.u8() != 0;
  r.bytes(s.gid.data(), 16);
  s.gid_index = r.u32();
  s.gid_type = r.str();
  s.gid_problem = r.str();
  s.atomic_cap = static_cast<int8_t>(r.u8());
  s.dmabuf_registration = r.str();
  const int n = r.u8();
  for (int i = 0; i < n; ++i) {
    SourceReport src;
    src.kind = source_of(r.u8());
    const uint8_t st = r.u8();
    if (st > 3) throw WireError(WireError::Kind::protocol, "the peer sent source state #" + std::to_string(st));
    src.state = static_cast<SourceSetup::State>(st);
    src.requested = r.u8() != 0;
    src.description = r.str();
    src.reason = r.str();
    src.dmabuf_problem = r.str();
    s.sources.push_back(src);
  }
  const int m = r.u8();
  for (int i = 0; i < m; ++i) s.methods.push_back(method_of(r.u8()));
  return s;
}

void put_row(Writer& w, const TwoNodeRow& row) {
  w.u32(row.index).u8(source_code(row.client_source)).u8(row.client_method == Method::reg_mr ? 0 : 1);
  w.u8(source_code(row.server_source)).u8(row.server_method == Method::reg_mr ? 0 : 1);
  w.u8(static_cast<uint8_t>(row.outcome)).str(row.reason).u32(static_cast<uint32_t>(row.path_mtu));
  w.u32(static_cast<uint32_t>(row.transfers.size()));
  for (const auto& t : row.transfers) w.str(t.op).u64(t.bytes).u8(t.ok ? 1 : 0).u8(t.unsupported ? 1 : 0).str(t.checked_by).str(t.detail);
  w.u32(static_cast<uint32_t>(row.bw.size()));
  for (const auto& b : row.bw) {
    w.str(b.op).u64(b.bytes).u64(b.iterations);
    put_double(w, b.bw_peak_mib);
    put_double(w, b.bw_avg_mib);
    put_double(w, b.msg_rate_mpps);
  }
  w.u32(static_cast<uint32_t>(row.lat.size()));
  for (const auto& l : row.lat) {
    w.str(l.op).u64(l.bytes).u64(l.iterations);
    for (double d : {l.t_min, l.t_max, l.t_typical, l.t_avg, l.t_stdev, l.p99, l.p99_9}) put_double(w, d);
  }
  w.str(row.bench_problem);
}
TwoNodeRow get_row(Reader& r) {
  TwoNodeRow row;
  row.index = r.u32();
  row.client_source = source_of(r.u8());
  row.client_method = method_of(r.u8());
  row.server_source = source_of(r.u8());
  row.server_method = method_of(r.u8());
  const uint8_t o = r.u8();
  if (o > 2) throw WireError(WireError::Kind::protocol, "the peer sent outcome #" + std::to_string(o));
  row.outcome = static_cast<Outcome>(o);
  row.reason = r.str();
  row.path_mtu = static_cast<int>(r.u32());
  const uint32_t nt = r.u32();
  for (uint32_t i = 0; i < nt; ++i) {
    TransferCheck t;
    t.op = r.str();
    t.bytes = r.u64();
    t.ok = r.u8() != 0;
    t.unsupported = r.u8() != 0;
    t.checked_by = r.str();
    t.detail = r.str();
    row.transfers.push_back(t);
  }
  const uint32_t nb = r.u32();
  for (uint32_t i = 0; i < nb; ++i) {
    BwPoint b;
    b.op = r.str();
    b.bytes = r.u64();
    b.iterations = r.u64();
    b.bw_peak_mib = get_double(r);
    b.bw_avg_mib = get_double(r);
    b.msg_rate_mpps = get_double(r);
    row.bw.push_back(b);
  }
  const uint32_t nl = r.u32();
  for (uint32_t i = 0; i < nl; ++i) {
    LatPoint l;
    l.op = r.str();
    l.bytes = r.u64();
    l.iterations = r.u64();
    for (double* d : {&l.t_min, &l.t_max, &l.t_typical, &l.t_avg, &l.t_stdev, &l.p99, &l.p99_9}) *d = get_double(r);
    row.lat.push_back(l);
  }
  row.bench_problem = r.str();
  return row;
}

// The run ends early: what to say and the exit code.
struct RunEnds {
  int exit_code;
  std::string why;
};

std::string hostname() {
  char b[256] = {};
  if (::gethostname(b, sizeof b - 1) != 0) return "?";
  return b;
}

std::string registration_name(DmabufRegistration r) {
  return r == DmabufRegistration::mlx5_data_direct ? "mlx5dv_reg_dmabuf_mr (data direct)" : "ibv_reg_dmabuf_mr";
}

// The conversation over one connection, shared by both roles.
class Conversation {
 public:
  Conversation(const TwoNodeOptions& opt, wire::Channel& ch, const std::string& peer_role)
      : opt_(opt), ch_(ch), peer_role_(peer_role), msg_timeout_ms_(2 * opt.timeout_ms + 2000) {}

  void send(Msg type, const Writer& w = Writer()) { ch_.send(opt_.protocol_version, type, w.data(), msg_timeout_ms_); }

  // The next message of the peer (heartbeats skipped); its ERROR ends the run.
  wire::Frame next(int timeout_ms = 0) {
    for (;;) {
      wire::Frame f = ch_.recv(timeout_ms > 0 ? timeout_ms : msg_timeout_ms_);
      if (f.version != opt_.protocol_version) throw WireError(WireError::Kind::version, "", f.version);
      if (f.type == kHeartbeat) continue;
      if (f.type == kError) {
        Reader r(f.payload);
        throw RunEnds{kExitPeerUnavailable, "the " + peer_role_ + " gave up: " + r.str()};
      }
      return f;
    }
  }
  wire::Frame expect(Msg type, const char* what, int timeout_ms = 0) {
    wire::Frame f = next(timeout_ms);
    if (f.type != type)
      throw WireError(WireError::Kind::protocol,
                      "expected " + std::string(what) + " from the " + peer_role_ + ", got message type " + std::to_string(f.type));
    return f;
  }
  void heartbeat_if_due() {
    if (Clock::now() - last_beat_ > std::chrono::seconds(1)) {
      send(kHeartbeat);
      last_beat_ = Clock::now();
    }
  }
  int msg_timeout_ms() const { return msg_timeout_ms_; }

 private:
  const TwoNodeOptions& opt_;
  wire::Channel& ch_;
  std::string peer_role_;
  int msg_timeout_ms_;
  Clock::time_point last_beat_ = Clock::now();
};

Writer hello(const TwoNodeOptions& opt, size_t size, uint64_t seed) {
  Writer w;
  w.str(GDRPEER_VERSION).str(hostname()).u8(opt.role == Role::client ? 0 : 1).u64(size).u64(seed);
  return w;
}

// The words for a peer of another protocol version; its gdrpeer version where it can be read
// (HELLO's first field is the gdrpeer version string in every protocol version).
std::string version_words(const TwoNodeOptions& opt, const std::string& peer_role, uint16_t peer_version,
                          const std::vector<uint8_t>* peer_hello) {
  std::string theirs;
  if (peer_hello != nullptr) {
    try {
      Reader r(*peer_hello);
      theirs = " (gdrpeer " + r.str() + ")";
    } catch (const WireError&) {
    }
  }
  return "protocol version mismatch: the " + peer_role + " speaks gdrpeer verify protocol " + std::to_string(peer_version) + theirs +
         ", this " + role_name(opt.role) + " speaks " + std::to_string(opt.protocol_version) +
         " (gdrpeer " GDRPEER_VERSION "): run the same gdrpeer version on both nodes";
}

// ---- one side's port and memory ------------------------------------------------------------

struct Local {
  const RdmaDevice* dev = nullptr;
  const PortInfo* port = nullptr;
  std::vector<SourceSetup> setups;
  std::vector<SourceReport> reports;
  SideInfo side;
};

std::string pick_port(const RdmaInventory& inv, const TwoNodeOptions& opt, Local& l) {
  std::string name = opt.device;
  int port = opt.ib_port;
  if (const auto colon = name.rfind(':'); colon != std::string::npos) {
    port = std::atoi(name.c_str() + colon + 1);
    name = name.substr(0, colon);
  }
  for (const auto& d : inv.devices) {
    if (!name.empty() && d.name != name) continue;
    for (const auto& p : d.ports) {
      if (port != 0 ? p.port == port : (p.active() || !name.empty())) {
        l.dev = &d;
        l.port = &p;
        if (port != 0 || p.active()) return {};
      }
    }
  }
  if (l.dev != nullptr) return {};
  if (!inv.stack_loaded) return "no RDMA stack (" + inv.stack_problem + ")";
  if (inv.devices.empty()) return "no RDMA device on this node";
  if (!name.empty()) return "RDMA device " + name + (port ? " port " + std::to_string(port) : "") + " is not there";
  return "no RDMA device has an ACTIVE port (name one with -d)";
}

void prepare_sources(const TwoNodeOptions& opt, size_t size, Local& l) {
  SourceOptions so = opt.source;
  so.size = size;
  const bool explicit_sources = !opt.sources.empty();
  for (auto k : explicit_sources ? opt.sources : all_source_kinds()) {
    if (opt.progress) opt.progress("preparing " + source_name(k) + " memory");
    SourceSetup s = opt.prepare ? opt.prepare(k, so) : prepare_source(k, so);
    l.reports.push_back(source_report(k, s, explicit_sources));
    l.setups.push_back(std::move(s));
  }
}

SideInfo describe_side(const TwoNodeOptions& opt, const Local& l) {
  SideInfo s;
  s.role = role_name(opt.role);
  s.hostname = hostname();
  s.version = GDRPEER_VERSION;
  s.protocol = opt.protocol_version;
  s.device = l.dev->name;
  s.kernel_driver = l.dev->kernel_driver;
  s.port = l.port->port;
  s.port_state = l.port->state_name;
  s.ethernet = l.port->ethernet;
  s.active_mtu = l.port->active_mtu;
  s.lid = l.port->lid;
  s.has_gid = l.port->gid.has_value();
  if (l.port->gid) {
    s.gid = l.port->gid->raw;
    s.gid_index = l.port->gid->index;
    s.gid_type = gid_type_name(l.port->gid->type);
  } else {
    s.gid_problem = l.port->gid_problem;
  }
  s.atomic_cap = l.dev->atomic_cap;
  s.dmabuf_registration = registration_name(opt.dmabuf_registration);
  for (const auto& r : l.reports) {
    SourceReport copy = r;
    copy.facts.clear();  // facts stay in this side's report
    s.sources.push_back(copy);
  }
  s.methods = opt.methods;
  return s;
}

// A source of a side that makes rows: ready, or named on the command line.
bool makes_rows(const SourceReport& s) { return s.state != SourceSetup::State::absent || s.requested; }

// Why a source that is not ready ends the row, or "".
std::pair<Outcome, std::string> source_not_ready(const std::string& side, const SourceReport& s) {
  return {s.state == SourceSetup::State::error ? Outcome::fail : Outcome::unsupported,
          side + ": " + source_name(s.kind) + " memory " +
              (s.state == SourceSetup::State::error ? std::string("could not be prepared") : "is " + state_name(s.state)) + ": " +
              s.reason};
}

const verbs::Api* verbs_api(const TwoNodeOptions& opt, std::string* why) { return opt.api != nullptr ? opt.api : verbs::load(why); }

std::string atomic_problem(const std::string& side, const std::string& dev, int cap) {
  if (cap > 0) return {};
  return side + " device " + dev + " reports atomic_cap " + (cap == 0 ? "IBV_ATOMIC_NONE" : "unknown") +
         " (ibv_query_device): it does no RDMA atomics";
}

std::string hex64(uint64_t v) {
  char b[32];
  std::snprintf(b, sizeof b, "0x%016llx", static_cast<unsigned long long>(v));
  return b;
}

uint64_t pattern_u64(uint64_t seed, uint64_t salt) {
  uint8_t b[8];
  fill_pattern(b, 8, seed, salt);
  uint64_t v;
  std::memcpy(&v, b, 8);
  return v;
}

// "returned 0x.. (expected 0x..)" with a hint when the bytes are the expected ones reversed.
std::string value_words(const char* what, uint64_t got, uint64_t want) {
  std::string s = std::string(what) + " " + hex64(got);
  if (got != want) {
    s += " (expected " + hex64(want) + ")";
    if (__builtin_bswap64(got) == want) s += ", byte-swapped: the device does atomics in big-endian";
  }
  return s;
}

void summarise(TwoNodeReport& rep) {
  size_t n[3] = {0, 0, 0};
  for (const auto& r : rep.rows) ++n[static_cast<int>(r.outcome)];
  std::string counts = std::to_string(n[0]) + " passed, " + std::to_string(n[1]) + " unsupported, " + std::to_string(n[2]) + " failed";
  if (!rep.error.empty()) {
    rep.summary = "the run did not complete: " + rep.error + " (" + counts + " before that)";
    return;
  }
  std::vector<ComboResult> flat;
  for (const auto& r : rep.rows) {
    ComboResult c;
    c.outcome = r.outcome;
    flat.push_back(c);
  }
  rep.exit_code = exit_code_for(flat);
  rep.summary = counts + ": " + exit_meaning(rep.exit_code);
}

// ---- the client ------------------------------------------------------------------------------

class Client {
 public:
  Client(const TwoNodeOptions& opt, const verbs::Api& api, Local& l, Conversation& conv, TwoNodeReport& rep)
      : opt_(opt), api_(api), l_(l), conv_(conv), rep_(rep) {
    ops_ = opt.ops.empty() ? all_two_node_ops() : opt.ops;
  }

  void run_plan();

 private:
  bool wants(TwoNodeOp op) const { return std::find(ops_.begin(), ops_.end(), op) != ops_.end(); }
  void run_row(TwoNodeRow& row, SourceSetup& mine, const SourceReport& theirs);
  void end_row(const TwoNodeRow& row) {
    Writer w;
    put_row(w, row);
    conv_.send(kRowEnd, w);
  }
  // Asks the server to do its part of an op; nullopt on success, its reason otherwise.
  std::optional<std::string> server_step(uint8_t op, uint8_t step, std::string* detail = nullptr, bool* ok = nullptr) {
    Writer w;
    w.u8(op).u8(step);
    conv_.send(kOp, w);
    step_ = op_step_name(op);
    wire::Frame f = conv_.expect(kOpReply, "an answer to an operation");
    Reader r(f.payload);
    const bool good = r.u8() != 0;
    const std::string text = r.str();
    if (detail != nullptr) *detail = text;
    if (ok != nullptr) *ok = good;
    if (!good && ok == nullptr) return text;
    return std::nullopt;
  }
  void cpu(const std::string& what, const std::function<void()>& fn) {
    try {
      fn();
    } catch (const std::exception& e) {
      throw ComboStop{Outcome::fail, what + ": " + e.what()};
    }
  }
  void check_ops(TwoNodeRow& row, RcEndpoint& ep, const QpAddress& remote, size_t n);
  void bench(TwoNodeRow& row, RcEndpoint& ep, const QpAddress& remote);

  const TwoNodeOptions& opt_;
  const verbs::Api& api_;
  Local& l_;
  Conversation& conv_;
  TwoNodeReport& rep_;
  std::vector<TwoNodeOp> ops_;
  std::string step_ = "the start";

 public:
  const std::string& step() const { return step_; }
};

void Client::run_plan() {
  uint32_t index = 0;
  for (size_t ci = 0; ci < l_.setups.size(); ++ci) {
    if (!makes_rows(l_.reports[ci])) continue;
    for (auto cm : opt_.methods)
      for (const auto& theirs : rep_.peer.sources) {
        if (!makes_rows(theirs)) continue;
        for (auto sm : rep_.peer.methods) {
          TwoNodeRow row;
          row.index = index++;
          row.client_source = l_.reports[ci].kind;
          row.client_method = cm;
          row.server_source = theirs.kind;
          row.server_method = sm;
          step_ = "row " + std::to_string(row.index);
          if (opt_.progress)
            opt_.progress(source_name(row.client_source) + "/" + method_name(cm) + " -> " + source_name(theirs.kind) + "/" +
                          method_name(sm));
          try {
            run_row(row, l_.setups[ci], theirs);
          } catch (const WireError&) {
            row.outcome = Outcome::fail;
            rep_.rows.push_back(row);
            throw;
          } catch (const RunEnds&) {
            row.outcome = Outcome::fail;
            rep_.rows.push_back(row);
            throw;
          }
          rep_.rows.push_back(row);
        }
      }
  }
  conv_.send(kBye);
}

void Client::run_row(TwoNodeRow& row, SourceSetup& mine, const SourceReport& theirs) {
  const size_t n = rep_.size;
  const SourceReport* my_report = nullptr;
  for (const auto& r : l_.reports)
    if (r.kind == row.client_source) my_report = &r;
  auto finish = [&](Outcome o, const std::string& why) {
    row.outcome = o;
    row.reason = why;
    end_row(row);
  };
  if (mine.state != SourceSetup::State::ready) {
    auto [o, why] = source_not_ready("client", *my_report);
    return finish(o, why);
  }
  if (theirs.state != SourceSetup::State::ready) {
    auto [o, why] = source_not_ready("server", theirs);
    return finish(o, why);
  }
  RcEndpoint ep(api_, *l_.dev, *l_.port, *mine.source, row.client_method, opt_.timeout_ms, opt_.dmabuf_registration);
  try {
    ep.open();
  } catch (const ComboStop& s) {
    return finish(s.outcome, "client: " + s.reason);
  }
  int mtu = std::min(l_.port->active_mtu, rep_.peer.active_mtu);
  if (opt_.mtu != 0) mtu = std::min(mtu, mtu_enum(opt_.mtu));
  row.path_mtu = mtu_bytes(mtu);
  Writer w;
  w.u32(row.index).u8(source_code(row.client_source)).u8(row.client_method == Method::reg_mr ? 0 : 1);
  w.u8(source_code(row.server_source)).u8(row.server_method == Method::reg_mr ? 0 : 1).u8(static_cast<uint8_t>(mtu));
  put_qp(w, ep.local());
  conv_.send(kRowBegin, w);
  step_ = "the server's registration";
  wire::Frame f = conv_.expect(kRowReady, "the server's queue pair");
  Reader r(f.payload);
  const uint8_t status = r.u8();
  const std::string server_reason = r.str();
  const QpAddress remote = get_qp(r);
  if (status != 0) return finish(status == 1 ? Outcome::unsupported : Outcome::fail, "server: " + server_reason);
  if (remote.length < n)
    return finish(Outcome::fail, "server: its memory is " + describe_bytes(remote.length) + ", less than " + describe_bytes(n));
  try {
    ep.connect(remote, mtu);
    check_ops(row, ep, remote, n);
  } catch (const ComboStop& s) {
    return finish(s.outcome, s.reason);
  }
  bool any_fail = false, any_unsupported = false;
  std::string fails, unsupported, passed;
  for (const auto& t : row.transfers) {
    if (t.unsupported) {
      any_unsupported = true;
      unsupported += (unsupported.empty() ? "" : "; ") + t.op + ": " + t.detail;
    } else if (!t.ok) {
      any_fail = true;
      fails += (fails.empty() ? "" : "; ") + t.op + " (checked by the " + t.checked_by + "): " + t.detail;
    } else {
      passed += (passed.empty() ? "" : ", ") + t.op;
    }
  }
  if (any_fail) return finish(Outcome::fail, fails);
  const std::string mtu_words = "path MTU " + std::to_string(row.path_mtu);
  if (any_unsupported) {
    row.outcome = Outcome::unsupported;
    row.reason = (passed.empty() ? "" : passed + " of " + describe_bytes(n) + " moved correct data (" + mtu_words + "); ") + unsupported;
  } else {
    row.outcome = Outcome::pass;
    row.reason = passed + " of " + describe_bytes(n) + " moved correct data (" + mtu_words + ")";
  }
  if (opt_.bench && row.outcome != Outcome::fail) {
    try {
      bench(row, ep, remote);
    } catch (const ComboStop& s) {
      row.bench_problem = s.reason;
      row.outcome = Outcome::fail;
      row.reason = "the checked transfers passed, then the benchmark failed: " + s.reason;
    }
  }
  end_row(row);
}

void Client::check_ops(TwoNodeRow& row, RcEndpoint& ep, const QpAddress& remote, size_t n) {
  MemorySource& mem = ep.memory();
  const uint64_t seed = rep_.seed;
  std::vector<uint8_t> pattern(n), scratch(n);
  auto server_failed = [&](const std::string& why) { throw ComboStop{Outcome::fail, "server: " + why}; };
  // Lays the pattern into the memory under test here, or its complement where the transfer is
  // to overwrite it.
  auto lay = [&](std::vector<uint8_t>& buf, uint64_t salt, bool complement) {
    (complement ? fill_complement : fill_pattern)(buf.data(), n, seed, salt);
    cpu("client: preparing its memory", [&] { mem.write(0, buf.data(), n); });
  };
  // A transfer the client starts: the server prepares its side, the client lays its memory (the
  // complement where the transfer lands here), posts and waits for the completion.
  auto client_starts = [&](uint8_t code, const std::string& op, uint64_t salt, bool lands_here, const std::function<void()>& post) {
    if (auto e = server_step(code, kPrepare)) server_failed(*e);
    lay(lands_here ? scratch : pattern, salt, lands_here);
    step_ = op;
    post();
    ep.wait(1, op + " of " + describe_bytes(n));
  };
  // The server compares what landed in its memory and says so.
  auto server_checks = [&](uint8_t code, const char* op) {
    TransferCheck t;
    bool ok = false;
    server_step(code, kDone, &t.detail, &ok);
    t.op = op;
    t.bytes = n;
    t.ok = ok;
    t.checked_by = "server";
    row.transfers.push_back(t);
  };
  // The client compares what landed in its memory with the pattern.
  auto client_checks = [&](uint64_t salt, const char* op) {
    mem.after_remote_write();
    cpu("client: reading its memory back", [&] { mem.read(0, scratch.data(), n); });
    fill_pattern(pattern.data(), n, seed, salt);
    TransferCheck t = compare_bytes(op, scratch.data(), pattern.data(), n);
    t.checked_by = "client";
    row.transfers.push_back(t);
  };

  if (wants(TwoNodeOp::write)) {
    // Client memory -> server memory; the server prepared the complement and compares.
    client_starts(kOpWrite, "RDMA WRITE", kSaltWrite, false, [&] { ep.post_write(0, n, remote, 0, 1); });
    server_checks(kOpWrite, "RDMA WRITE");
  }
  if (wants(TwoNodeOp::read)) {
    // Server memory -> client memory; the client compares.
    client_starts(kOpRead, "RDMA READ", kSaltRead, true, [&] { ep.post_read(0, n, remote, 0, 2); });
    client_checks(kSaltRead, "RDMA READ");
  }
  if (wants(TwoNodeOp::send)) {
    // SEND client -> server: the server posted a receive into its memory and compares.
    client_starts(kOpSend, "SEND", kSaltSend, false, [&] { ep.post_send(0, n, 3); });
    server_checks(kOpSend, "SEND client->server");

    // SEND server -> client: a receive here first, then the server sends.
    lay(scratch, kSaltRecv, true);
    ep.post_recv(0, n, 4);
    if (auto e = server_step(kOpRecv, kPrepare)) server_failed(*e);
    step_ = "SEND from the server";
    ep.wait(1, "receive of the server's SEND of " + describe_bytes(n));
    client_checks(kSaltRecv, "SEND server->client");
  }
  if (wants(TwoNodeOp::atomic)) {
    std::string why = atomic_problem("client", l_.dev->name, l_.dev->atomic_cap);
    if (why.empty()) why = atomic_problem("server", rep_.peer.device, remote.atomic_cap);
    const uint64_t start = pattern_u64(seed, kSaltAtomic);
    const uint64_t add = pattern_u64(seed, kSaltAtomic + 1) >> 8;
    const uint64_t swap = pattern_u64(seed, kSaltAtomic + 2);
    for (uint8_t op : {kOpFetchAdd, kOpCmpSwap}) {
      TransferCheck t;
      t.op = op == kOpFetchAdd ? "ATOMIC FETCH_AND_ADD" : "ATOMIC CMP_AND_SWP";
      t.bytes = 8;
      t.checked_by = "client and server";
      if (!why.empty()) {
        t.unsupported = true;
        t.detail = why;
        row.transfers.push_back(t);
        continue;
      }
      // The server sets its 8 bytes to `start`; the old value lands in 8 bytes here.
      if (auto e = server_step(op, kPrepare)) server_failed(*e);
      uint8_t b[8];
      const uint64_t junk = ~start;
      std::memcpy(b, &junk, 8);
      cpu("client: preparing its memory", [&] { mem.write(0, b, 8); });
      step_ = t.op;
      if (op == kOpFetchAdd)
        ep.post_fetch_add(0, remote, 0, add, 5);
      else
        ep.post_cmp_swap(0, remote, 0, start, swap, 6);
      ep.wait(1, t.op);
      mem.after_remote_write();
      cpu("client: reading its memory back", [&] { mem.read(0, b, 8); });
      uint64_t got;
      std::memcpy(&got, b, 8);
      std::string server_detail;
      bool server_ok = false;
      server_step(op, kDone, &server_detail, &server_ok);
      t.ok = got == start && server_ok;
      t.detail = value_words("returned", got, start) + "; server memory " + server_detail;
      row.transfers.push_back(t);
    }
  }
}

// perftest's columns: BW of `iters` WRITEs or READs, up to `depth` in flight; READ latency.
void Client::bench(TwoNodeRow& row, RcEndpoint& ep, const QpAddress& remote) {
  if (auto e = server_step(kOpBench, kPrepare)) throw ComboStop{Outcome::fail, "server: " + *e};
  step_ = "the benchmark";
  const bool by_time = opt_.iterations == 0 && opt_.bench_seconds > 0;
  const auto budget = std::chrono::duration<double>(opt_.bench_seconds);
  auto now_s = [] { return std::chrono::duration<double>(Clock::now().time_since_epoch()).count(); };
  for (size_t size : opt_.bench_sizes) {
    if (size == 0 || size > rep_.size) continue;
    auto progress = [&](const char* what) {
      if (opt_.progress) opt_.progress("bench " + describe_bytes(size) + " " + what);
    };
    auto bandwidth = [&](bool write, int depth, uint64_t iters_default) {
      const char* name = write ? "RDMA WRITE" : "RDMA READ";
      progress(write ? "RDMA WRITE bandwidth" : "RDMA READ bandwidth");
      const uint64_t iters = opt_.iterations ? opt_.iterations : iters_default;
      std::vector<double> posted, completed;
      const auto start = Clock::now();
      size_t inflight = 0;
      auto more = [&] {
        if (by_time) return Clock::now() - start < budget && posted.size() < 10'000'000;
        return posted.size() < iters;
      };
      while (more() || inflight > 0) {
        while (inflight < static_cast<size_t>(depth) && more()) {
          posted.push_back(now_s());
          if (write)
            ep.post_write(0, size, remote, 0, 20);
          else
            ep.post_read(0, size, remote, 0, 21);
          ++inflight;
        }
        const auto wait_start = Clock::now();
        int got = 0;
        while ((got = ep.poll(static_cast<int>(inflight), std::string(name) + " (bench)")) == 0) {
          if (Clock::now() - wait_start > std::chrono::milliseconds(opt_.timeout_ms))
            throw ComboStop{Outcome::fail,
                            std::string("no completion for ") + name + " (bench) within " + std::to_string(opt_.timeout_ms) + " ms"};
          conv_.heartbeat_if_due();
          sched_yield();
        }
        const double t = now_s();
        for (int i = 0; i < got; ++i) completed.push_back(t);
        inflight -= static_cast<size_t>(got);
        conv_.heartbeat_if_due();
      }
      row.bw.push_back(bw_from_times(name, size, posted, completed));
    };
    bandwidth(true, 16, 5000);  // perftest's DEF_ITERS_WB
    bandwidth(false, ep.rd_atomic(), 5000);
    // ib_read_lat: one READ at a time, the time between consecutive posts.
    progress("RDMA READ latency");
    const uint64_t iters = opt_.iterations ? std::max<uint64_t>(opt_.iterations, 4) : 1000;  // perftest's DEF_ITERS
    std::vector<double> posted;
    const auto start = Clock::now();
    for (;;) {
      if (by_time ? (Clock::now() - start >= budget && posted.size() >= 4) || posted.size() >= 1'000'000 : posted.size() >= iters) break;
      posted.push_back(now_s());
      ep.post_read(0, size, remote, 0, 22);
      ep.wait(1, "RDMA READ (latency)");
      conv_.heartbeat_if_due();
    }
    row.lat.push_back(lat_from_post_times("RDMA READ", size, posted));
  }
}

// ---- the server ------------------------------------------------------------------------------

class Server {
 public:
  Server(const TwoNodeOptions& opt, const verbs::Api& api, Local& l, Conversation& conv, TwoNodeReport& rep, wire::Channel& ch)
      : opt_(opt), api_(api), l_(l), conv_(conv), rep_(rep), ch_(ch) {}

  // Serves the client's plan until BYE. Returns false when the test hook killed it.
  bool serve();

 private:
  bool dies(const std::string& where) {
    if (opt_.server_dies_at && opt_.server_dies_at(row_, where)) {
      ch_.close();
      return true;
    }
    return false;
  }
  void reply(bool ok, const std::string& detail) {
    Writer w;
    w.u8(ok ? 1 : 0).str(detail);
    conv_.send(kOpReply, w);
  }
  void begin_row(Reader& r);
  void op(uint8_t code, uint8_t step);

  const TwoNodeOptions& opt_;
  const verbs::Api& api_;
  Local& l_;
  Conversation& conv_;
  TwoNodeReport& rep_;
  wire::Channel& ch_;
  std::unique_ptr<RcEndpoint> ep_;
  QpAddress remote_;
  uint32_t row_ = 0;
  size_t n_ = 0;

 public:
  std::string step = "the start";
};

void Server::begin_row(Reader& r) {
  row_ = r.u32();
  const SourceKind ck = source_of(r.u8());
  (void)ck;
  (void)method_of(r.u8());
  const SourceKind sk = source_of(r.u8());
  const Method sm = method_of(r.u8());
  const int mtu = r.u8();
  remote_ = get_qp(r);
  n_ = rep_.size;
  ep_.reset();
  step = "row " + std::to_string(row_);
  Writer w;
  SourceSetup* mine = nullptr;
  for (auto& s : l_.setups)
    if (s.kind == sk) mine = &s;
  if (mine == nullptr || mine->state != SourceSetup::State::ready || !mine->source) {
    w.u8(2).str(source_name(sk) + " memory was not prepared on the server");
    put_qp(w, {});
    conv_.send(kRowReady, w);
    return;
  }
  auto ep = std::make_unique<RcEndpoint>(api_, *l_.dev, *l_.port, *mine->source, sm, opt_.timeout_ms, opt_.dmabuf_registration);
  try {
    ep->open();
    if (mtu < 1 || mtu > 5) throw ComboStop{Outcome::fail, "the client asked for path MTU #" + std::to_string(mtu)};
    ep->connect(remote_, mtu);
  } catch (const ComboStop& s) {
    w.u8(static_cast<uint8_t>(s.outcome == Outcome::pass ? 2 : static_cast<int>(s.outcome))).str(s.reason);
    put_qp(w, {});
    conv_.send(kRowReady, w);
    return;
  }
  w.u8(0).str("");
  put_qp(w, ep->local());
  ep_ = std::move(ep);
  conv_.send(kRowReady, w);
}

void Server::op(uint8_t code, uint8_t stage) {
  step = op_step_name(code);
  if (!ep_) return reply(false, "no queue pair for this row (its registration failed)");
  MemorySource& mem = ep_->memory();
  const uint64_t seed = rep_.seed;
  std::vector<uint8_t> buf;
  // Lays the pattern into the memory under test, or its complement where the client's
  // transfer is to overwrite it.
  auto lay = [&](uint64_t salt, bool complement) {
    buf.resize(n_);
    (complement ? fill_complement : fill_pattern)(buf.data(), n_, seed, salt);
    mem.write(0, buf.data(), n_);
  };
  // Replies whether the client's `what` left its pattern intact in the memory under test.
  auto reply_landed = [&](uint64_t salt, const std::string& what) {
    buf.resize(n_);
    std::vector<uint8_t> want(n_);
    mem.after_remote_write();
    mem.read(0, buf.data(), n_);
    fill_pattern(want.data(), n_, seed, salt);
    const TransferCheck t = compare_bytes(what, buf.data(), want.data(), n_);
    reply(t.ok, t.detail);
  };
  try {
    switch (code) {
      case kOpWrite:
        if (stage == kPrepare) {
          lay(kSaltWrite, true);
          return reply(true, "");
        }
        return reply_landed(kSaltWrite, "RDMA WRITE");
      case kOpRead: lay(kSaltRead, false); return reply(true, "");
      case kOpSend:
        if (stage == kPrepare) {
          lay(kSaltSend, true);
          ep_->post_recv(0, n_, 3);
          return reply(true, "");
        }
        ep_->wait(1, "receive of the client's SEND of " + describe_bytes(n_));
        return reply_landed(kSaltSend, "SEND");
      case kOpRecv:
        lay(kSaltRecv, false);
        ep_->post_send(0, n_, 4);
        ep_->wait(1, "SEND of " + describe_bytes(n_) + " to the client");
        return reply(true, "");
      case kOpFetchAdd:
      case kOpCmpSwap: {
        const uint64_t start = pattern_u64(seed, kSaltAtomic);
        uint8_t b[8];
        if (stage == kPrepare) {
          std::memcpy(b, &start, 8);
          mem.write(0, b, 8);
          return reply(true, "");
        }
        mem.after_remote_write();
        mem.read(0, b, 8);
        uint64_t got;
        std::memcpy(&got, b, 8);
        const uint64_t want = code == kOpFetchAdd ? start + (pattern_u64(seed, kSaltAtomic + 1) >> 8) : pattern_u64(seed, kSaltAtomic + 2);
        return reply(got == want, value_words("now", got, want));
      }
      case kOpBench: return reply(true, "");
      default: throw WireError(WireError::Kind::protocol, "the client asked for operation #" + std::to_string(code));
    }
  } catch (const ComboStop& s) {
    return reply(false, s.reason);
  } catch (const std::runtime_error& e) {
    if (dynamic_cast<const WireError*>(&e) != nullptr) throw;
    return reply(false, std::string("the CPU-side access to its memory failed: ") + e.what());
  }
}

bool Server::serve() {
  for (;;) {
    wire::Frame f = conv_.next();
    Reader r(f.payload);
    switch (f.type) {
      case kRowBegin:
        if (dies("row")) return false;
        begin_row(r);
        break;
      case kOp: {
        const uint8_t code = r.u8();
        const uint8_t stage = r.u8();
        if (dies(op_step_name(code))) return false;
        op(code, stage);
        break;
      }
      case kRowEnd:
        rep_.rows.push_back(get_row(r));
        ep_.reset();
        step = "between rows";
        break;
      case kBye: return true;
      default: throw WireError(WireError::Kind::protocol, "unexpected message type " + std::to_string(f.type) + " from the client");
    }
  }
}

// Words for a channel error, by role.
RunEnds channel_problem(const WireError& e, const TwoNodeOptions& opt, const std::string& peer_role, const std::string& during) {
  switch (e.kind) {
    case WireError::Kind::version: return {kExitProtocol, version_words(opt, peer_role, e.peer_version, nullptr)};
    case WireError::Kind::protocol: return {kExitProtocol, std::string(e.what()) + " (during " + during + ")"};
    case WireError::Kind::closed: return {kExitPeerUnavailable, "the " + peer_role + " went away during " + during + ": " + e.what()};
    case WireError::Kind::timeout:
      return {kExitPeerUnavailable, "the " + peer_role + " stopped answering during " + during + ": " + e.what()};
    case WireError::Kind::io: break;
  }
  return {kExitPeerUnavailable, std::string(e.what()) + " (during " + during + ")"};
}

}  // namespace

std::string role_name(Role r) { return r == Role::client ? "client" : "server"; }

const std::vector<TwoNodeOp>& all_two_node_ops() {
  static const std::vector<TwoNodeOp> all{TwoNodeOp::write, TwoNodeOp::read, TwoNodeOp::send, TwoNodeOp::atomic};
  return all;
}

std::optional<TwoNodeOp> parse_two_node_op(const std::string& s) {
  if (s == "write") return TwoNodeOp::write;
  if (s == "read") return TwoNodeOp::read;
  if (s == "send") return TwoNodeOp::send;
  if (s == "atomic" || s == "atomics") return TwoNodeOp::atomic;
  return std::nullopt;
}

BwPoint bw_from_times(const std::string& op, uint64_t bytes, const std::vector<double>& posted, const std::vector<double>& completed) {
  BwPoint b;
  b.op = op;
  b.bytes = bytes;
  const size_t n = std::min(posted.size(), completed.size());
  b.iterations = n;
  if (n == 0) return b;
  // perftest print_report_bw (cq_mod 1, post_list 1): the average over the whole run, from the
  // first post to the last completion; the peak from the best (completion j - post i)/(j - i + 1)
  // over every i <= j, starting from the first operation's own time. MiB/s (format_factor 0x100000).
  const double total = completed[n - 1] - posted[0];
  if (total > 0) {
    b.bw_avg_mib = static_cast<double>(bytes) * static_cast<double>(n) / total / 1048576.0;
    b.msg_rate_mpps = static_cast<double>(n) / total / 1e6;
  }
  if (n <= kPeakMaxIterations) {
    double best = completed[0] - posted[0];
    for (size_t i = 0; i < n; ++i)
      for (size_t j = i; j < n; ++j) {
        const double t = (completed[j] - posted[i]) / static_cast<double>(j - i + 1);
        if (t < best) best = t;
      }
    b.bw_peak_mib = best > 0 ? static_cast<double>(bytes) / best / 1048576.0 : 0;
  }
  return b;
}

LatPoint lat_from_post_times(const std::string& op, uint64_t bytes, const std::vector<double>& posted) {
  // perftest print_report_lat for ib_read_lat (rtt_factor 1): delta[i] = posted[i+1] - posted[i],
  // sorted, the largest LAT_MEASURE_TAIL (2) dropped; t_typical the median (get_median), t_max
  // delta[cnt], 99% delta[ceil(cnt * 0.99)], 99.9% delta[ceil(cnt * 0.999)]. Unlike perftest,
  // whose stdev squares int-truncated differences, the standard deviation here is exact.
  LatPoint l;
  l.op = op;
  l.bytes = bytes;
  l.iterations = posted.size();
  if (posted.size() < 4) return l;
  std::vector<double> d;
  for (size_t i = 0; i + 1 < posted.size(); ++i) d.push_back((posted[i + 1] - posted[i]) * 1e6);
  std::sort(d.begin(), d.end());
  const size_t cnt = d.size() - 2;
  l.t_min = d[0];
  l.t_max = d[cnt];
  l.t_typical = (cnt - 1) % 2 ? (d[cnt / 2] + d[cnt / 2 - 1]) / 2 : d[cnt / 2];
  double sum = 0;
  for (size_t i = 0; i < cnt; ++i) sum += d[i];
  l.t_avg = sum / static_cast<double>(cnt);
  double var = 0;
  for (size_t i = 0; i < cnt; ++i) var += (l.t_avg - d[i]) * (l.t_avg - d[i]);
  l.t_stdev = std::sqrt(var / static_cast<double>(cnt));
  l.p99 = d[static_cast<size_t>(std::ceil(static_cast<double>(cnt) * 0.99))];
  l.p99_9 = d[static_cast<size_t>(std::ceil(static_cast<double>(cnt) * 0.999))];
  return l;
}

TwoNodeReport run_two_node(const TwoNodeOptions& opt, const RdmaInventory& inv) {
  TwoNodeReport rep;
  rep.role = opt.role;
  rep.seed = opt.seed;
  rep.size = opt.source.size;
  const std::string peer_role = opt.role == Role::client ? "server" : "client";
  Local l;
  if (std::string why = pick_port(inv, opt, l); !why.empty()) {
    rep.exit_code = kExitNothing;
    rep.summary = "nothing to verify: " + why;
    return rep;
  }
  std::string why;
  const verbs::Api* api = verbs_api(opt, &why);
  if (api == nullptr) {
    rep.exit_code = kExitNothing;
    rep.summary = "nothing to verify: " + why;
    return rep;
  }
  auto fail_run = [&](const RunEnds& e) {
    rep.error = e.why;
    summarise(rep);
    rep.exit_code = e.exit_code;
  };
  std::string during = "the handshake";
  try {
    wire::Channel ch;
    std::unique_ptr<wire::Listener> listener;
    if (opt.role == Role::client) {
      std::string bad;
      auto peer = wire::parse_peer_address(opt.peer, opt.port, &bad);
      if (!peer) {
        rep.exit_code = kExitUsage;
        rep.error = bad;
        rep.summary = "bad input: " + bad;
        return rep;
      }
      rep.peer_address = wire::format_host_port(peer->host, peer->port);
      prepare_sources(opt, rep.size, l);
      rep.sources = l.reports;
      l.side = describe_side(opt, l);
      rep.local = l.side;
      if (opt.progress) opt.progress("connecting to " + rep.peer_address);
      during = "connecting";
      ch = wire::Channel::connect(*peer, opt.timeout_ms);
    } else {
      listener = std::make_unique<wire::Listener>(opt.bind, opt.port);
      if (opt.on_listening) opt.on_listening(listener->address());
      during = "waiting for a client";
      ch = listener->accept(opt.accept_timeout_ms);
      rep.peer_address = ch.peer_name();
    }
    Conversation conv(opt, ch, peer_role);
    during = "the handshake";
    // HELLO both ways; the server answers even a client of another version, so both say why.
    if (opt.role == Role::client) conv.send(kHello, hello(opt, rep.size, rep.seed));
    wire::Frame h = ch.recv(conv.msg_timeout_ms());
    if (h.version != opt.protocol_version) {
      if (opt.role == Role::server) {
        try {
          conv.send(kHello, hello(opt, 0, 0));
        } catch (const WireError&) {
        }
      }
      throw RunEnds{kExitProtocol, version_words(opt, peer_role, h.version, h.type == kHello ? &h.payload : nullptr)};
    }
    if (h.type != kHello) throw WireError(WireError::Kind::protocol, "the " + peer_role + " did not begin with HELLO");
    {
      Reader r(h.payload);
      rep.peer.version = r.str();
      rep.peer.hostname = r.str();
      const uint8_t role = r.u8();
      const uint64_t size = r.u64();
      const uint64_t seed = r.u64();
      if ((role == 0) == (opt.role == Role::client))
        throw WireError(WireError::Kind::protocol, "the peer is a " + std::string(role == 0 ? "client" : "server") +
                                                       " too: one side runs --server, the other names it");
      if (opt.role == Role::server) {
        if (size == 0 || size > (uint64_t{1} << 30))
          throw WireError(WireError::Kind::protocol, "the client asked for " + std::to_string(size) + " bytes per transfer");
        rep.size = size;
        rep.seed = seed;
        conv.send(kHello, hello(opt, rep.size, rep.seed));
        during = "preparing memory";
        prepare_sources(opt, rep.size, l);
        rep.sources = l.reports;
        l.side = describe_side(opt, l);
        rep.local = l.side;
      }
    }
    // SIDE both ways: the client first (the server may still be preparing CUDA memory).
    during = "the exchange of ports and memory";
    Writer side;
    put_side(side, l.side);
    if (opt.role == Role::client) conv.send(kSide, side);
    wire::Frame s = conv.expect(kSide, "its port and memory", std::max(conv.msg_timeout_ms(), 60000));
    Reader sr(s.payload);
    rep.peer = get_side(sr);
    if (opt.role == Role::server) conv.send(kSide, side);

    if (opt.role == Role::client) {
      Client c(opt, *api, l, conv, rep);
      try {
        c.run_plan();
      } catch (const WireError& e) {
        auto end = channel_problem(e, opt, peer_role, c.step());
        if (!rep.rows.empty() && rep.rows.back().reason.empty()) rep.rows.back().reason = end.why;
        fail_run(end);
        return rep;
      } catch (const RunEnds& e) {
        if (!rep.rows.empty() && rep.rows.back().reason.empty()) rep.rows.back().reason = e.why;
        fail_run(e);
        return rep;
      }
    } else {
      Server sv(opt, *api, l, conv, rep, ch);
      try {
        if (!sv.serve()) {
          fail_run({kExitPeerUnavailable, "the server was told to die (test)"});
          return rep;
        }
      } catch (const WireError& e) {
        fail_run(channel_problem(e, opt, peer_role, sv.step));
        return rep;
      }
    }
  } catch (const WireError& e) {
    fail_run(channel_problem(e, opt, peer_role, during));
    return rep;
  } catch (const RunEnds& e) {
    fail_run(e);
    return rep;
  }
  summarise(rep);
  if (rep.rows.empty()) {
    rep.exit_code = kExitNothing;
    rep.summary = "nothing to verify: no memory source is available on one side";
  }
  return rep;
}

}  // namespace gdrpeer::verify

#include "gdrpeer/verify/engine.hpp"

#include <algorithm>
#include <memory>

#include "gdrpeer/verify/loopback.hpp"

namespace gdrpeer::verify {

std::string method_name(Method m) { return m == Method::reg_mr ? "ibv_reg_mr" : "ibv_reg_dmabuf_mr"; }

std::string outcome_name(Outcome o) {
  switch (o) {
    case Outcome::pass: return "pass";
    case Outcome::unsupported: return "unsupported";
    case Outcome::fail: return "fail";
  }
  return "?";
}

int exit_code_for(const std::vector<ComboResult>& results) {
  if (results.empty()) return kExitNothing;
  Outcome worst = Outcome::pass;
  for (const auto& r : results) worst = std::max(worst, r.outcome);
  switch (worst) {
    case Outcome::pass: return kExitPass;
    case Outcome::unsupported: return kExitUnsupported;
    case Outcome::fail: return kExitFail;
  }
  return kExitFail;
}

std::string exit_meaning(int code) {
  switch (code) {
    case kExitPass: return "every combination passed";
    case kExitFail: return "at least one combination failed";
    case kExitUnsupported: return "nothing failed, at least one combination is unsupported";
    case kExitNothing: return "nothing to verify";
    case kExitUsage: return "bad input";
    case kExitPeerUnavailable: return "the peer could not be reached or went away before the run ended";
    case kExitProtocol: return "the peer speaks another protocol version (or not gdrpeer verify's protocol)";
    default: return "exit code " + std::to_string(code);
  }
}

namespace {

struct Selection {
  std::string name;
  int port = 0;  // 0: all ports
};

Selection parse_selection(const std::string& s) {
  Selection sel;
  const auto colon = s.rfind(':');
  if (colon != std::string::npos && colon + 1 < s.size() && s.find_first_not_of("0123456789", colon + 1) == std::string::npos) {
    sel.name = s.substr(0, colon);
    sel.port = std::stoi(s.substr(colon + 1));
  } else {
    sel.name = s;
  }
  return sel;
}

bool selected(const std::vector<std::string>& sel, const RdmaDevice& d, int port) {
  if (sel.empty()) return true;
  for (const auto& s : sel) {
    const auto p = parse_selection(s);
    if (p.name == d.name && (p.port == 0 || p.port == port)) return true;
  }
  return false;
}

}  // namespace

SourceReport source_report(SourceKind kind, const SourceSetup& s, bool requested) {
  SourceReport sr;
  sr.kind = kind;
  sr.state = s.state;
  sr.requested = requested;
  sr.reason = s.reason;
  sr.facts = s.facts;
  if (s.source) {
    sr.description = s.source->description();
    sr.dmabuf_problem = s.source->dmabuf_problem();
  }
  return sr;
}

std::optional<std::string> check_device_selection(const RdmaInventory& inv, const std::vector<std::string>& selection) {
  for (const auto& s : selection) {
    const auto p = parse_selection(s);
    const RdmaDevice* dev = nullptr;
    for (const auto& d : inv.devices)
      if (d.name == p.name) dev = &d;
    if (dev == nullptr) {
      std::string have;
      for (const auto& d : inv.devices) have += (have.empty() ? "" : ", ") + d.name;
      if (!inv.stack_loaded) return "unknown RDMA device '" + p.name + "': no RDMA stack here (" + inv.stack_problem + ")";
      return "unknown RDMA device '" + p.name + "'" +
             (have.empty() ? std::string(": this node has no RDMA device") : ": this node has " + have);
    }
    if (p.port != 0) {
      const bool has = std::any_of(dev->ports.begin(), dev->ports.end(), [&](const PortInfo& q) { return q.port == p.port; });
      if (!has) return dev->name + " has no port " + std::to_string(p.port) + " (it has " + std::to_string(dev->ports.size()) + ")";
    }
  }
  return std::nullopt;
}

VerifyReport run_verify(const VerifyOptions& opt, const RdmaInventory& inv) {
  VerifyReport rep;
  rep.rdma = inv;
  rep.seed = opt.seed;
  rep.size = opt.source.size;

  const bool explicit_sources = !opt.sources.empty();
  const auto kinds = explicit_sources ? opt.sources : all_source_kinds();
  std::vector<SourceSetup> setups;
  for (auto k : kinds) {
    if (opt.progress) opt.progress("preparing " + source_name(k) + " memory");
    SourceSetup s = prepare_source(k, opt.source);
    rep.sources.push_back(source_report(k, s, explicit_sources));
    setups.push_back(std::move(s));
  }

  // The ports to test.
  std::vector<std::pair<const RdmaDevice*, const PortInfo*>> ports;
  for (const auto& d : rep.rdma.devices)
    for (const auto& p : d.ports)
      if (selected(opt.devices, d, p.port)) ports.emplace_back(&d, &p);

  LoopbackOptions lo;
  lo.seed = opt.seed;
  lo.timeout_ms = opt.timeout_ms;
  lo.mtu = opt.mtu;
  lo.bench = opt.bench;
  lo.bench_sizes = opt.bench_sizes;
  lo.bench_seconds = opt.bench_seconds;
  lo.iterations = opt.iterations;
  lo.api = opt.api;

  for (size_t si = 0; si < setups.size(); ++si) {
    auto& s = setups[si];
    const auto& sr = rep.sources[si];
    // A source this node simply does not have is only a finding when it was asked for.
    if (s.state == SourceSetup::State::absent && !explicit_sources) continue;
    for (const auto& [dev, port] : ports) {
      for (auto m : opt.methods) {
        const std::string tag = source_name(s.kind) + " x " + dev->name + ":" + std::to_string(port->port) + " x " + method_name(m);
        ComboResult r;
        if (s.state != SourceSetup::State::ready) {
          r.source = source_name(s.kind);
          r.device = dev->name;
          r.port = port->port;
          r.method = m;
          r.outcome = s.state == SourceSetup::State::error ? Outcome::fail : Outcome::unsupported;
          r.reason = source_name(s.kind) + " memory " +
                     (s.state == SourceSetup::State::error ? std::string("could not be prepared") : "is " + state_name(s.state)) + ": " +
                     sr.reason;
        } else {
          if (opt.progress) opt.progress(tag);
          lo.progress = [&](const std::string& step) {
            if (opt.progress) opt.progress(tag + ": " + step);
          };
          r = run_loopback(*dev, *port, *s.source, m, lo);
        }
        rep.results.push_back(std::move(r));
      }
    }
  }

  if (!rep.rdma.stack_loaded) {
    rep.exit_code = kExitNothing;
    rep.summary = "nothing to verify: no RDMA stack (" + rep.rdma.stack_problem + ")";
  } else if (rep.rdma.devices.empty()) {
    rep.exit_code = kExitNothing;
    rep.summary = "nothing to verify: no RDMA device on this node";
  } else if (rep.results.empty()) {
    rep.exit_code = kExitNothing;
    rep.summary = "nothing to verify: no memory source is available";
  } else {
    rep.exit_code = exit_code_for(rep.results);
    size_t n[3] = {0, 0, 0};
    for (const auto& r : rep.results) ++n[static_cast<int>(r.outcome)];
    rep.summary = std::to_string(n[0]) + " passed, " + std::to_string(n[1]) + " unsupported, " + std::to_string(n[2]) +
                  " failed: " + exit_meaning(rep.exit_code);
  }
  return rep;  // `setups` goes out of scope here: every source is released
}

}  // namespace gdrpeer::verify

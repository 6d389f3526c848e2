// `gdrpeer verify`: register memory with the node's RDMA stack and move real data.
// The engine lives in userspace/verify; this file is options, progress and output.
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <memory>
#include <random>

#include "commands.hpp"
#include "gdrpeer/gdrpeer.hpp"
#include "gdrpeer/verify/engine.hpp"
#include "gdrpeer/verify/report.hpp"
#include "gdrpeer/verify/sizes.hpp"
#include "gdrpeer/verify/twonode.hpp"
#include "verify_p2p.hpp"

namespace gdrpeer::cli {

namespace {

namespace v = gdrpeer::verify;

constexpr uint64_t kMaxSize = uint64_t{1} << 30;  // one RDMA message, one registration

struct VerifyArgs {
  std::vector<std::string> devices;
  std::vector<std::string> sources;
  std::vector<std::string> methods;
  std::string size = "1M";
  uint32_t gdrpeer_device = 0;
  std::string gdrpeer_path = kDefaultDevicePath;
  int cuda_device = 0;
  std::string libcuda = "libcuda.so.1";
  bool json = false;
  bool bench = false;
  bool all_sizes = false;  // -a: bench every power of two up to --size
  std::string bench_sizes;
  double bench_seconds = 0.2;
  double timeout = 10;
  int gid_index = -1;  // -x: perftest's GID index; -1 select_gid's choice
  uint64_t seed = 0;
  bool seed_given = false;
  bool p2p = false;  // GPU peer-to-peer instead of RDMA (cmd_verify_p2p.cpp)
  P2pArgs p2p_args;
  bool rdma_options_given = false;
  // perftest's -m (MTU), -i (port), -n (iterations) (issue 26; -m was --method before)
  int mtu = 0;
  int ib_port = 0;
  uint64_t iterations = 0;
  bool duration_given = false;
  bool size_given = false;
  // Two nodes (issue 26): the server, or the client naming it.
  bool server = false;
  std::string peer;
  int tcp_port = gdrpeer::verify::wire::kDefaultPort;
  std::string bind;
  double accept_timeout = 300;
  std::vector<std::string> ops;
  std::string cuda_dmabuf_mapping;
  bool data_direct = false;
  int wire_version = gdrpeer::verify::kProtocolVersion;
};

int usage_error(const std::string& msg) {
  std::fprintf(stderr, "gdrpeer verify: %s\n", msg.c_str());
  return v::kExitUsage;
}

// Progress: a self-overwriting line on a terminal, plain lines otherwise (bench only).
class Progress {
 public:
  Progress(bool tty, bool plain_lines) : tty_(tty), plain_(plain_lines) {}
  ~Progress() { clear(); }
  void operator()(const std::string& msg) {
    if (tty_) {
      std::fprintf(stderr, "\r\033[K%s", msg.substr(0, 150).c_str());
      std::fflush(stderr);
      shown_ = true;
    } else if (plain_) {
      std::fprintf(stderr, "gdrpeer verify: %s\n", msg.c_str());
    }
  }
  void clear() {
    if (shown_) std::fprintf(stderr, "\r\033[K");
    shown_ = false;
  }

 private:
  bool tty_, plain_, shown_ = false;
};

// `--server` or HOST[:PORT]: one side of the two-node run (userspace/verify/twonode.cpp).
int run_two_node_side(const VerifyArgs& a, const v::VerifyOptions& common) {
  if (a.server && !a.peer.empty())
    return usage_error("--server listens for a client; a HOST[:PORT] names the server to connect to: not both");
  if (a.tcp_port < (a.server ? 0 : 1) || a.tcp_port > 65535)
    return usage_error("--port: " + std::to_string(a.tcp_port) + " is not a TCP port");
  if (a.accept_timeout < 0) return usage_error("--accept-timeout: must be 0 (wait for ever) or more");
  if (a.devices.size() > 1) return usage_error("--device: a two-node run uses one port on each side: name one device");
  v::TwoNodeOptions o;
  o.role = a.server ? v::Role::server : v::Role::client;
  o.peer = a.peer;
  o.port = static_cast<uint16_t>(a.tcp_port);
  o.bind = a.bind;
  if (!a.server) {
    std::string why;
    if (!v::wire::parse_peer_address(a.peer, o.port, &why)) return usage_error("server address " + why);
  }
  if (a.server && !a.bind.empty()) {
    std::string why;
    auto b = v::wire::parse_peer_address(a.bind, o.port, &why);
    if (!b) return usage_error("--bind " + why);
    o.bind = b->host;
  }
  o.sources = common.sources;
  o.methods = common.methods;
  o.device = a.devices.empty() ? "" : a.devices[0];
  o.ib_port = a.ib_port;
  o.mtu = a.mtu;
  for (const auto& name : a.ops) {
    auto op = v::parse_two_node_op(name);
    if (!op) return usage_error("--op: unknown operation '" + name + "' (write, read, send, atomic)");
    o.ops.push_back(*op);
  }
  o.source = common.source;
  o.timeout_ms = static_cast<int>(a.timeout * 1000);
  o.accept_timeout_ms = static_cast<int>(a.accept_timeout * 1000);
  o.seed = a.seed_given ? a.seed : std::random_device{}();
  o.bench = common.bench;
  o.bench_sizes = common.bench_sizes;
  o.bench_seconds = a.duration_given ? a.bench_seconds : 0;  // without -D: perftest's iteration counts
  o.iterations = a.iterations;
  o.dmabuf_registration = a.data_direct ? v::DmabufRegistration::mlx5_data_direct : v::DmabufRegistration::plain;
  o.protocol_version = static_cast<uint16_t>(a.wire_version);
  if (a.server && a.size_given) return usage_error("--size: the client chooses the transfer size; the server allocates what it asks for");
  if (a.server && (a.bench || a.all_sizes || !a.bench_sizes.empty() || a.iterations || a.duration_given || !a.ops.empty()))
    return usage_error("--bench, --bench-sizes, -a, -n, -D and --op are the client's choice (the server follows its plan)");

  auto inv = v::enumerate_rdma();
  if (!a.devices.empty())
    if (auto problem = v::check_device_selection(inv, a.devices)) return usage_error(*problem);
  if (a.gid_index >= 0) v::use_gid_index(inv, a.gid_index);

  Progress progress(::isatty(STDERR_FILENO) == 1, a.bench);
  o.progress = [&](const std::string& m) { progress(m); };
  o.on_listening = [&](const std::string& address) {
    progress.clear();
    std::fprintf(stderr, "gdrpeer verify --server: listening on %s\n", address.c_str());
    std::fflush(stderr);
  };
  const auto rep = v::run_two_node(o, inv);
  progress.clear();
  if (a.json)
    std::cout << v::two_node_to_json(rep).dump(2) << "\n";
  else
    v::print_two_node_table(rep, std::cout);
  return rep.exit_code;
}

int run(const VerifyArgs& a) {
  if (a.p2p) {
    if (a.rdma_options_given)
      return usage_error(
          "--p2p measures GPU pairs: --device, --source, --method, --size, --bench and the gdrpeer/CUDA "
          "device options belong to the RDMA verification (use --pair, --gpu, --p2p-size, --p2p-reps)");
    P2pArgs p = a.p2p_args;
    p.json = a.json;
    p.libcuda = a.libcuda;
    if (a.seed_given) p.seed = a.seed;
    return run_verify_p2p(p);
  }
  if (!a.p2p_args.pairs.empty() || !a.p2p_args.gpus.empty() || !a.p2p_args.predict_from.empty())
    return usage_error("--pair, --gpu and --predict-from need --p2p");
  v::VerifyOptions opt;
  std::string why;

  const auto size = v::parse_size(a.size, &why);
  if (!size) return usage_error("--size: " + why);
  if (*size == 0) return usage_error("--size: must be greater than 0");
  if (*size > kMaxSize)
    return usage_error("--size: " + describe_bytes(*size) + " is more than one transfer may be (" + describe_bytes(kMaxSize) + ")");
  const uint64_t phys = static_cast<uint64_t>(::sysconf(_SC_PHYS_PAGES)) * static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  if (*size * 3 > phys)
    return usage_error("--size: " + describe_bytes(*size) +
                       " is beyond this node's memory: a run needs about three times that in "
                       "host memory and the node has " +
                       describe_bytes(phys));
  opt.source.size = *size;

  for (const auto& s : a.sources) {
    auto k = v::parse_source(s);
    if (!k) return usage_error("--source: unknown memory source '" + s + "'");
    opt.sources.push_back(*k);
  }
  if (!a.methods.empty()) {
    opt.methods.clear();
    for (const auto& m : a.methods) {
      if (m == "reg_mr" || m == "ibv_reg_mr")
        opt.methods.push_back(v::Method::reg_mr);
      else if (m == "dmabuf" || m == "ibv_reg_dmabuf_mr")
        opt.methods.push_back(v::Method::dmabuf);
      else
        return usage_error("--method: unknown method '" + m + "' (reg_mr or dmabuf)");
    }
  }
  if (a.all_sizes && !a.bench_sizes.empty()) return usage_error("--all-sizes and --bench-sizes both name the sizes: choose one");
  if (a.bench || a.all_sizes) {
    std::vector<uint64_t> sizes;
    if (a.all_sizes) {
      for (uint64_t s = 2; s < *size; s *= 2) sizes.push_back(s);
      sizes.push_back(*size);
    } else if (!a.bench_sizes.empty()) {
      auto l = v::parse_size_list(a.bench_sizes, &why);
      if (!l) return usage_error("--bench-sizes: " + why);
      for (auto s : *l) {
        if (s == 0 || s > *size)
          return usage_error("--bench-sizes: " + std::to_string(s) + " must be between 1 and --size (" + std::to_string(*size) + ")");
      }
      sizes = *l;
    } else {
      for (uint64_t s = 4096; s < *size; s *= 16) sizes.push_back(s);
      sizes.push_back(*size);
    }
    opt.bench_sizes.assign(sizes.begin(), sizes.end());
  }
  if (a.timeout <= 0) return usage_error("--timeout: must be greater than 0");
  if (a.mtu != 0 && a.mtu != 256 && a.mtu != 512 && a.mtu != 1024 && a.mtu != 2048 && a.mtu != 4096)
    return usage_error("--mtu: " + std::to_string(a.mtu) + " is not an RDMA MTU (256, 512, 1024, 2048 or 4096)");
  if (a.ib_port < 0 || a.ib_port > 255) return usage_error("--ib-port: " + std::to_string(a.ib_port) + " is not a port (1-255)");
  if (!a.cuda_dmabuf_mapping.empty() && a.cuda_dmabuf_mapping != "pcie" && a.cuda_dmabuf_mapping != "default")
    return usage_error("--cuda-dmabuf-mapping: '" + a.cuda_dmabuf_mapping + "' (pcie or default)");
  opt.source.cuda_dmabuf_pcie = a.cuda_dmabuf_mapping == "pcie";
  opt.mtu = a.mtu;
  // Before the two-node branch: it takes the sources and --bench from `opt` too.
  opt.source.gdrpeer_device = a.gdrpeer_device;
  opt.source.gdrpeer_path = a.gdrpeer_path;
  opt.source.cuda_device = a.cuda_device;
  opt.source.libcuda = a.libcuda;
  opt.bench = a.bench || a.all_sizes;
  opt.bench_seconds = a.bench_seconds;
  if (a.server || !a.peer.empty()) return run_two_node_side(a, opt);
  if (a.iterations != 0 && !(a.bench || a.all_sizes)) return usage_error("-n/--iterations: counts the operations of a --bench measurement");
  opt.iterations = a.iterations;
  for (const char* what :
       {!a.ops.empty() ? "--op" : nullptr, a.data_direct ? "--data-direct" : nullptr, !a.bind.empty() ? "--bind" : nullptr})
    if (what != nullptr) return usage_error(std::string(what) + " belongs to the two-node run (--server, or a server's HOST[:PORT])");

  opt.devices = a.devices;
  opt.timeout_ms = static_cast<int>(a.timeout * 1000);
  opt.seed = a.seed_given ? a.seed : std::random_device{}();

  if (a.gid_index < -1 || a.gid_index > 255)
    return usage_error("--gid-index: " + std::to_string(a.gid_index) + " is not a GID index (0-255)");
  auto inv = v::enumerate_rdma();
  if (auto problem = v::check_device_selection(inv, a.devices)) return usage_error(*problem);
  if (a.gid_index >= 0) v::use_gid_index(inv, a.gid_index);
  if (a.ib_port != 0) {  // perftest's -i: that port of every (named) device
    std::vector<std::string> named;
    for (const auto& d : inv.devices)
      if (a.devices.empty() || std::find(a.devices.begin(), a.devices.end(), d.name) != a.devices.end())
        named.push_back(d.name + ":" + std::to_string(a.ib_port));
    if (auto problem = v::check_device_selection(inv, named)) return usage_error("--ib-port: " + *problem);
    opt.devices = named;
  }

  Progress progress(::isatty(STDERR_FILENO) == 1, a.bench);
  opt.progress = [&](const std::string& m) { progress(m); };
  const auto rep = v::run_verify(opt, inv);
  progress.clear();

  if (a.json)
    std::cout << v::to_json(rep).dump(2) << "\n";
  else
    v::print_table(rep, std::cout);
  return rep.exit_code;
}

}  // namespace

void add_verify_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<VerifyArgs>();
  CLI::App* cmd = app.add_subcommand("verify",
                                     "Register host, gdrpeer and CUDA memory with every RDMA port (ibv_reg_mr and "
                                     "ibv_reg_dmabuf_mr), move data through an RC loopback and check every byte; or between two "
                                     "nodes: `verify --server` on one, `verify HOST[:PORT]` on the other");
  cmd->footer(
      "Exit codes: 0 every combination passed; 1 none failed, at least one unsupported; 2 at "
      "least one failed; 3 nothing to verify (no RDMA device); 64 bad input -- the meanings of "
      "gdrpeer check's 0 optimal, 1 degraded, 2 blocked, 3 nothing checked. With --p2p: 0 every GPU "
      "pair agrees with check, 1 a measurement disagrees with the prediction, 2 a pair failed (peer "
      "access, a copy or the byte check), 3 no CUDA or fewer than two GPUs. Two nodes (--server / HOST[:PORT]): "
      "the same 0-3 over the rows, 69 the peer could not be reached or went away, 76 protocol version mismatch.");
  cmd->add_option("-d,--device", args->devices, "RDMA device to test, NAME or NAME:PORT (repeatable; default: all)")
      ->allow_extra_args(false);
  // perftest's short options where they mean the same (issue 25): -d device, -s size, -D
  // duration, -a all sizes; --source keeps its long form (-s was the source before).
  cmd->add_option("--source", args->sources,
                  "memory source: host, hugepage, gdrpeer, cuda, cuda-vmm (repeatable; default: "
                  "every source this node has)")
      ->allow_extra_args(false);
  // perftest's -m is the MTU (issue 26): --method keeps only its long form.
  cmd->add_option("--method", args->methods, "registration method: reg_mr, dmabuf (repeatable; default: both)")->allow_extra_args(false);
  cmd->add_option("-m,--mtu", args->mtu, "path MTU in bytes, 256-4096 (perftest's -m; default: the ports' active MTU)");
  cmd->add_option("-i,--ib-port", args->ib_port,
                  "RDMA port number (perftest's -i; default: every port, or the first ACTIVE one with two nodes)");
  cmd->add_option("-n,--iterations", args->iterations,
                  "two nodes, --bench: operations per measurement (perftest's -n; default 5000 for bandwidth, 1000 for latency)");
  cmd->add_flag("--server", args->server, "two nodes: wait for one client, run its plan, exit (docs/verify.md)");
  cmd->add_option("peer", args->peer, "two nodes: the server to connect to, HOST, HOST:PORT or [IPV6%IF]:PORT");
  cmd->add_option("--port", args->tcp_port, "two nodes: TCP port of the server (default 18516; 0 with --server: any free port)");
  cmd->add_option("--bind", args->bind, "--server: the address to listen on (default: every address)");
  cmd->add_option("--accept-timeout", args->accept_timeout, "--server: seconds to wait for a client (default 300; 0: for ever)");
  cmd->add_option("--op", args->ops, "two nodes: operations per row: write, read, send, atomic (repeatable; default: all)")
      ->allow_extra_args(false);
  cmd->add_option(
      "--cuda-dmabuf-mapping", args->cuda_dmabuf_mapping,
      "pcie: CUDA dma-bufs mapped through the PCIe BAR1 (CU_MEM_RANGE_FLAG_DMA_BUF_MAPPING_TYPE_PCIE, CUDA 12.8+; Grace systems)");
  cmd->add_flag("--data-direct", args->data_direct,
                "two nodes: register dma-bufs with mlx5dv_reg_dmabuf_mr(MLX5DV_REG_DMABUF_ACCESS_DATA_DIRECT) (mlx5 data direct)");
  cmd->add_option("--wire-version", args->wire_version, "tests only: the protocol version this side claims")->group("");
  cmd->add_option("-s,--size", args->size, "bytes per transfer, e.g. 4096, 64K, 1M (default 1M; perftest's -s)");
  cmd->add_option("--gdrpeer-device", args->gdrpeer_device, "gdrpeer device index (default 0)");
  cmd->add_option("--gdrpeer-path", args->gdrpeer_path, "gdrpeer character device")->capture_default_str();
  cmd->add_option("--cuda-device", args->cuda_device, "CUDA device ordinal (default 0)");
  cmd->add_option("--libcuda", args->libcuda, "CUDA driver library to dlopen")->capture_default_str();
  cmd->add_flag("--json", args->json, "print the report as JSON");
  cmd->add_flag("--bench", args->bench, "after the checks, measure RDMA WRITE latency and WRITE/READ bandwidth");
  cmd->add_option("--bench-sizes", args->bench_sizes, "comma-separated sizes for --bench (default 4K, x16 steps, up to --size)");
  auto* duration =
      cmd->add_option("-D,--bench-seconds,--duration", args->bench_seconds, "seconds per measurement (default 0.2; perftest's -D)")
          ->check(CLI::PositiveNumber);
  cmd->add_flag("-a,--all-sizes", args->all_sizes,
                "--bench at every power of two from 2 bytes up to --size (perftest's -a, which goes to 8 MiB)");
  cmd->add_option("--timeout", args->timeout, "seconds to wait for one completion (default 10)");
  cmd->add_option("-x,--gid-index", args->gid_index,
                  "GID index every port uses (perftest's -x; default: RoCE v2 IPv4-mapped first, GID 0 on InfiniBand)");
  auto* seed = cmd->add_option("--seed", args->seed, "seed of the random data pattern");
  auto* size = cmd->get_option("--size");
  cmd->add_flag("--p2p", args->p2p,
                "GPU peer-to-peer instead: for every ordered GPU pair, peer access and its attributes, a byte-checked "
                "copy, uni- and bidirectional bandwidth with peer access on and off, latency, and gdrpeer check's "
                "prediction next to the measurement (docs/verify.md)");
  cmd->add_option("--pair", args->p2p_args.pairs, "with --p2p: one ordered pair SRC_BDF,DST_BDF (repeatable; default: all)");
  cmd->add_option("--gpu", args->p2p_args.gpus, "with --p2p: only pairs of these GPUs, by BDF (repeatable)");
  cmd->add_option("--p2p-size", args->p2p_args.size, "with --p2p: bytes per copy (default 256M)");
  cmd->add_option("--p2p-reps", args->p2p_args.reps, "with --p2p: timed copies per measurement (default 10)");
  cmd->add_option("--predict-from", args->p2p_args.predict_from,
                  "with --p2p: take check's prediction from this snapshot or dump instead of this node");
  cmd->add_option("--data-dir", args->p2p_args.data_dir, "with --p2p: rule data directory for the prediction");
  std::vector<CLI::Option*> rdma_only;
  for (const char* name : {"--device", "--source", "--method", "--size", "--gdrpeer-device", "--gdrpeer-path", "--cuda-device", "--bench",
                           "--bench-sizes", "--bench-seconds", "--timeout", "--gid-index"})
    rdma_only.push_back(cmd->get_option(name));
  for (const char* name : {"--mtu", "--ib-port", "--iterations", "--server", "peer", "--port", "--bind", "--accept-timeout", "--op",
                           "--cuda-dmabuf-mapping", "--data-direct"})
    rdma_only.push_back(cmd->get_option(name));
  cmd->callback([args, seed, size, duration, rdma_only, &exit_code] {
    args->seed_given = seed->count() > 0;
    args->size_given = size->count() > 0;
    args->duration_given = duration->count() > 0;
    for (const CLI::Option* o : rdma_only) args->rdma_options_given = args->rdma_options_given || o->count() > 0;
    exit_code = run(*args);
  });
}

}  // namespace gdrpeer::cli

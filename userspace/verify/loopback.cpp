#include "gdrpeer/verify/loopback.hpp"

#include <sched.h>

#include <sys/resource.h>
#include <sys/utsname.h>
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <random>
#include <stdexcept>
#include <thread>

#include "gdrpeer/gdrpeer.hpp"
#include "gdrpeer/verify/pattern.hpp"
#include "gdrpeer/verify/qp_setup.hpp"
#include "gdrpeer/verify/verbs_api.hpp"

namespace gdrpeer::verify {

namespace {

using Clock = std::chrono::steady_clock;

std::string errno_text(int err) { return errno_name(err) + " (" + std::strerror(err) + ")"; }

std::string memory_words(const MemorySource& m) {
  switch (m.kind()) {
    case SourceKind::host: return "host memory";
    case SourceKind::hugepage: return "huge-page host memory";
    case SourceKind::gdrpeer: return "gdrpeer device memory";
    case SourceKind::cuda:
    case SourceKind::cuda_vmm: return "GPU memory";
  }
  return "memory";
}

// Peer-memory clients the kernel has: MOFED lists them in /sys/kernel/mm/memory_peers.
std::vector<std::string> peer_memory_clients() {
  namespace fs = std::filesystem;
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/sys/kernel/mm/memory_peers", ec)) out.push_back(e.path().filename().string());
  if (fs::exists("/sys/module/nvidia_peermem", ec) && std::find(out.begin(), out.end(), "nv_mem") == out.end())
    out.push_back("nvidia_peermem");
  return out;
}

// Owns everything one loopback creates; the destructor releases it in reverse order.
struct Resources {
  const verbs::Api* api = nullptr;
  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;
  ibv_mr* target_mr = nullptr;
  ibv_mr* local_mr = nullptr;
  ibv_cq* cq = nullptr;
  ibv_qp* qp[2] = {nullptr, nullptr};
  uint8_t* local = nullptr;  // host staging buffer: [0, n) send/write source, [n, 2n) read dest

  Resources() = default;
  Resources(const Resources&) = delete;
  Resources& operator=(const Resources&) = delete;
  ~Resources() {
    for (auto*& q : qp)
      if (q != nullptr) api->destroy_qp(q);
    if (cq != nullptr) api->destroy_cq(cq);
    if (target_mr != nullptr) api->dereg_mr(target_mr);
    if (local_mr != nullptr) api->dereg_mr(local_mr);
    if (pd != nullptr) api->dealloc_pd(pd);
    if (ctx != nullptr) api->close_device(ctx);
    std::free(local);
  }
};

// Thrown inside run_loopback for a failure that ends the combination.
struct Stop {
  Outcome outcome;
  std::string reason;
};

class Loopback {
 public:
  Loopback(const verbs::Api& api, const RdmaDevice& dev, const PortInfo& port, MemorySource& target, Method method,
           const LoopbackOptions& opt)
      : api_(api), dev_(dev), port_(port), target_(target), method_(method), opt_(opt) {
    r_.api = &api;
  }

  void setup();
  void check_transfers(ComboResult& res);
  void bench(ComboResult& res);

 private:
  [[noreturn]] void fail_errno(const std::string& what, int err) {
    throw Stop{Outcome::fail, what + " on " + dev_.name + " failed: " + errno_text(err) + vanished_note()};
  }
  // After an error: did the device or its port go away underneath us? A send can fail
  // before the port state says so (rxe: the netdev stops transmitting before its DOWN
  // notifier marks the port), so an ACTIVE port is read again for up to 200 ms.
  std::string vanished_note() const {
    for (int attempt = 0; attempt < 10; ++attempt) {
      if (attempt) std::this_thread::sleep_for(std::chrono::milliseconds(20));
      if (rdma_device_gone(dev_.name))
        return "; " + dev_.name + " has disappeared from /sys/class/infiniband (device removed during the run)";
      const std::string state = rdma_port_state(dev_.name, port_.port);
      if (state.empty()) return "";
      if (state != "ACTIVE")
        return "; " + dev_.name + " port " + std::to_string(port_.port) + " is now " + state + " (the link went away during the run)";
    }
    return "";
  }
  void open_context();
  void register_target();
  void create_queue_pairs();
  void connect(int i);
  void post(int qp, ibv_wr_opcode op, uint64_t local_addr, uint32_t lkey, size_t len, uint64_t wr_id);
  void post_recv_into_target(size_t len);
  // Waits for `count` completions; throws Stop on error or timeout.
  void wait(int count, const std::string& what);
  void fill(uint8_t* p, size_t n, uint64_t salt) const;
  TransferCheck compare(const std::string& op, const uint8_t* got, const uint8_t* want, size_t n);

  const verbs::Api& api_;
  const RdmaDevice& dev_;
  const PortInfo& port_;
  MemorySource& target_;
  Method method_;
  const LoopbackOptions& opt_;
  Resources r_;
  uint64_t target_addr_ = 0;  // address the NIC uses for the target (iova)
  size_t n_ = 0;
  int rd_atomic_ = 1;
};

void Loopback::open_context() {
  const OpenedDevice o = open_rdma_device(api_, dev_.name);
  r_.ctx = o.ctx;
  if (r_.ctx == nullptr) {
    if (o.failed == "ibv_open_device" && rdma_device_gone(dev_.name))
      throw Stop{Outcome::fail, dev_.name + " disappeared before it could be opened"};
    fail_errno(o.failed, o.err);
  }
}

void Loopback::register_target() {
  const int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  n_ = target_.size();
  if (dev_.max_mr_size != 0 && n_ > dev_.max_mr_size)
    throw Stop{Outcome::unsupported, describe_bytes(n_) + " exceeds the largest memory region " + dev_.name + " can register (" +
                                         describe_bytes(dev_.max_mr_size) + ")"};
  if (port_.max_msg_sz != 0 && n_ > port_.max_msg_sz)
    throw Stop{Outcome::unsupported, describe_bytes(n_) + " exceeds the largest message of " + dev_.name + " port " +
                                         std::to_string(port_.port) + " (" + describe_bytes(port_.max_msg_sz) + ")"};
  target_addr_ = reinterpret_cast<uintptr_t>(target_.address());
  errno = 0;
  if (method_ == Method::reg_mr) {
    r_.target_mr = api_.reg_mr(r_.pd, target_.address(), n_, access);
  } else {
    if (api_.reg_dmabuf_mr == nullptr)
      throw Stop{Outcome::unsupported, "this libibverbs has no ibv_reg_dmabuf_mr (rdma-core older than v34)"};
    const auto dmabuf = target_.dmabuf();
    if (!dmabuf)
      throw Stop{Outcome::unsupported, memory_words(target_) + " is not available as a dma-buf here: " + target_.dmabuf_problem()};
    r_.target_mr = api_.reg_dmabuf_mr(r_.pd, dmabuf->offset, n_, target_addr_, dmabuf->fd, access);
  }
  if (r_.target_mr == nullptr) {
    const int err = errno != 0 ? errno : EINVAL;
    auto f = explain_registration_failure(err, method_, dev_, target_);
    throw Stop{f.outcome, f.reason + vanished_note()};
  }
}

void Loopback::create_queue_pairs() {
  r_.cq = api_.create_cq(r_.ctx, 256, nullptr, nullptr, 0);
  if (r_.cq == nullptr) fail_errno("ibv_create_cq", errno);
  for (auto& q : r_.qp) {
    q = create_rc_qp(api_, r_.pd, r_.cq);
    if (q == nullptr) fail_errno("ibv_create_qp", errno);
  }
  rd_atomic_ = std::clamp(std::min(dev_.max_qp_rd_atom, dev_.max_qp_init_rd_atom), 1, 16);
  for (int i = 0; i < 2; ++i) connect(i);
}

void Loopback::connect(int i) {
  ibv_qp* q = r_.qp[i];
  ibv_qp* peer = r_.qp[1 - i];
  if (int e = qp_to_init(api_, q, port_.port, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ))
    fail_errno("ibv_modify_qp(INIT)", e);

  int mtu = std::min(port_.active_mtu, static_cast<int>(IBV_MTU_4096));
  for (int e = IBV_MTU_256; e <= IBV_MTU_4096; ++e)  // -m (bytes) as an ibv_mtu: 256 << (e - 1)
    if (opt_.mtu == (128 << e)) mtu = std::min(mtu, e);
  RtrPeer to;
  to.qpn = peer->qp_num;
  to.psn = 0;
  to.lid = port_.lid;
  to.gid = port_.gid->raw;
  // RoCE always needs a GRH; InfiniBand only when the port has no LID.
  to.global = port_.ethernet || port_.lid == 0;
  to.hop_limit = 1;
  // Right after the link came up the address can still be tentative (IPv6 DAD) or
  // unresolved: qp_to_rtr retries for a few seconds.
  if (int rtr = qp_to_rtr(api_, q, dev_.name, port_, mtu, rd_atomic_, to)) {
    if (rtr == ENETUNREACH || rtr == EHOSTUNREACH || rtr == ETIMEDOUT)
      throw Stop{Outcome::fail, "ibv_modify_qp(RTR) on " + dev_.name + " failed: " + errno_text(rtr) + ": GID " +
                                    format_gid(port_.gid->raw) +
                                    " could not be resolved for 5 s (interface down, or its "
                                    "IPv6 address still tentative)" +
                                    vanished_note()};
    fail_errno("ibv_modify_qp(RTR)", rtr);
  }

  if (int e = qp_to_rts(api_, q, 0, rd_atomic_)) fail_errno("ibv_modify_qp(RTS)", e);
}

void Loopback::setup() {
  if (!port_.active())
    throw Stop{Outcome::unsupported, dev_.name + " port " + std::to_string(port_.port) + " is " + port_.state_name + ", not ACTIVE"};
  if (!port_.gid) throw Stop{Outcome::unsupported, dev_.name + " port " + std::to_string(port_.port) + ": " + port_.gid_problem};
  open_context();
  r_.pd = api_.alloc_pd(r_.ctx);
  if (r_.pd == nullptr) fail_errno("ibv_alloc_pd", errno);
  register_target();
  // Host staging buffer: twice the target, page aligned.
  if (posix_memalign(reinterpret_cast<void**>(&r_.local), 4096, 2 * n_) != 0)
    throw Stop{Outcome::fail, "cannot allocate " + describe_bytes(2 * n_) + " of host memory"};
  r_.local_mr = api_.reg_mr(r_.pd, r_.local, 2 * n_, IBV_ACCESS_LOCAL_WRITE);
  if (r_.local_mr == nullptr) fail_errno("ibv_reg_mr of the host staging buffer", errno);
  create_queue_pairs();
}

void Loopback::post(int qp, ibv_wr_opcode op, uint64_t local_addr, uint32_t lkey, size_t len, uint64_t wr_id) {
  ibv_sge sge{};
  sge.addr = local_addr;
  sge.length = static_cast<uint32_t>(len);
  sge.lkey = lkey;
  ibv_send_wr wr{};
  wr.wr_id = wr_id;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = op;
  wr.send_flags = IBV_SEND_SIGNALED;
  if (op == IBV_WR_RDMA_WRITE || op == IBV_WR_RDMA_READ) {
    wr.wr.rdma.remote_addr = target_addr_;
    wr.wr.rdma.rkey = r_.target_mr->rkey;
  }
  ibv_send_wr* bad = nullptr;
  if (int e = ibv_post_send(r_.qp[qp], &wr, &bad)) fail_errno("ibv_post_send", e);
}

void Loopback::post_recv_into_target(size_t len) {
  ibv_sge sge{};
  sge.addr = target_addr_;
  sge.length = static_cast<uint32_t>(len);
  sge.lkey = r_.target_mr->lkey;
  ibv_recv_wr wr{};
  wr.wr_id = 99;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  ibv_recv_wr* bad = nullptr;
  if (int e = ibv_post_recv(r_.qp[1], &wr, &bad)) fail_errno("ibv_post_recv", e);
}

void Loopback::wait(int count, const std::string& what) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(opt_.timeout_ms);
  ibv_wc wc[16];
  while (count > 0) {
    const int n = ibv_poll_cq(r_.cq, std::min(count, 16), wc);
    if (n < 0) fail_errno("ibv_poll_cq", EIO);
    for (int i = 0; i < n; ++i)
      if (wc[i].status != IBV_WC_SUCCESS)
        throw Stop{Outcome::fail, what + " completed with status \"" + api_.wc_status_str(wc[i].status) + "\" (vendor error " +
                                      std::to_string(wc[i].vendor_err) + ")" + vanished_note()};
    count -= n;
    if (n == 0) {
      if (Clock::now() > deadline)
        throw Stop{Outcome::fail, "no completion for " + what + " within " + std::to_string(opt_.timeout_ms) + " ms" + vanished_note()};
      sched_yield();  // software devices (rxe) do their work on our CPUs
    }
  }
}

void Loopback::fill(uint8_t* p, size_t n, uint64_t salt) const { fill_pattern(p, n, opt_.seed, salt); }

TransferCheck Loopback::compare(const std::string& op, const uint8_t* got, const uint8_t* want, size_t n) {
  return compare_bytes(op, got, want, n);
}

void Loopback::check_transfers(ComboResult& res) {
  const size_t n = n_;
  uint8_t* src = r_.local;
  uint8_t* dst = r_.local + n;
  const uint64_t src_addr = reinterpret_cast<uintptr_t>(src);
  const uint64_t dst_addr = reinterpret_cast<uintptr_t>(dst);
  std::vector<uint8_t> pattern(n), scratch(n);
  auto progress = [&](const std::string& s) {
    if (opt_.progress) opt_.progress(s);
  };
  auto cpu = [&](const std::string& what, auto&& fn) {
    try {
      fn();
    } catch (const std::exception& e) {
      throw Stop{Outcome::fail, what + ": " + e.what()};
    }
  };

  // 1. RDMA WRITE: host staging -> target. The target starts as the complement of
  //    the pattern so that every byte has to change.
  progress("RDMA WRITE");
  fill(pattern.data(), n, 1);
  std::memcpy(src, pattern.data(), n);
  for (size_t i = 0; i < n; ++i) scratch[i] = static_cast<uint8_t>(~pattern[i]);
  cpu("preparing the target", [&] { target_.write(0, scratch.data(), n); });
  post(0, IBV_WR_RDMA_WRITE, src_addr, r_.local_mr->lkey, n, 1);
  wait(1, "RDMA WRITE of " + describe_bytes(n));
  target_.after_remote_write();
  cpu("reading the target back", [&] { target_.read(0, scratch.data(), n); });
  res.transfers.push_back(compare("RDMA WRITE", scratch.data(), pattern.data(), n));

  // 2. RDMA READ: target -> host staging (which starts as the complement).
  progress("RDMA READ");
  for (size_t i = 0; i < n; ++i) dst[i] = static_cast<uint8_t>(~pattern[i]);
  post(0, IBV_WR_RDMA_READ, dst_addr, r_.local_mr->lkey, n, 2);
  wait(1, "RDMA READ of " + describe_bytes(n));
  res.transfers.push_back(compare("RDMA READ", dst, pattern.data(), n));

  // 3. SEND: host staging on QP 0 -> a receive posted on QP 1 into the target.
  progress("SEND");
  fill(pattern.data(), n, 3);
  std::memcpy(src, pattern.data(), n);
  for (size_t i = 0; i < n; ++i) scratch[i] = static_cast<uint8_t>(~pattern[i]);
  cpu("preparing the target", [&] { target_.write(0, scratch.data(), n); });
  post_recv_into_target(n);
  post(0, IBV_WR_SEND, src_addr, r_.local_mr->lkey, n, 3);
  wait(2, "SEND of " + describe_bytes(n));
  target_.after_remote_write();
  cpu("reading the target back", [&] { target_.read(0, scratch.data(), n); });
  res.transfers.push_back(compare("SEND", scratch.data(), pattern.data(), n));
}

void Loopback::bench(ComboResult& res) {
  const uint64_t src_addr = reinterpret_cast<uintptr_t>(r_.local);
  const auto budget = std::chrono::duration<double>(opt_.bench_seconds);
  for (size_t size : opt_.bench_sizes) {
    if (size == 0 || size > n_) continue;
    BenchPoint p;
    p.size = size;
    auto progress = [&](const char* what) {
      if (opt_.progress) opt_.progress("bench " + describe_bytes(size) + " " + what);
    };
    // Latency: one write at a time.
    progress("write latency");
    unsigned iters = 0;
    auto t0 = Clock::now();
    // -n: a fixed count (perftest's iterations) instead of half the time budget.
    const uint64_t want = opt_.iterations;
    while (want ? iters < want : ((Clock::now() - t0 < budget / 2 && iters < 100000) || iters < 3)) {
      post(0, IBV_WR_RDMA_WRITE, src_addr, r_.local_mr->lkey, size, 10);
      wait(1, "RDMA WRITE (bench)");
      ++iters;
    }
    p.write_latency_us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / iters;
    p.iterations = iters;
    // Bandwidth: keep up to `depth` operations in flight.
    auto bandwidth = [&](ibv_wr_opcode op, int depth, const char* what) {
      progress(what);
      const uint64_t addr = op == IBV_WR_RDMA_READ ? src_addr + n_ : src_addr;
      size_t bytes = 0;
      int inflight = 0;
      unsigned posted = 0;
      const auto start = Clock::now();
      while (want ? posted < want : (Clock::now() - start < budget || posted < 4)) {
        while (inflight < depth && (want == 0 || posted < want)) {
          post(0, op, addr, r_.local_mr->lkey, size, 11);
          ++inflight;
          ++posted;
        }
        wait(1, std::string(what) + " (bench)");
        --inflight;
        bytes += size;
      }
      if (inflight > 0) {
        wait(inflight, std::string(what) + " (bench)");
        bytes += size * static_cast<size_t>(inflight);
      }
      const double s = std::chrono::duration<double>(Clock::now() - start).count();
      return static_cast<double>(bytes) / s / 1e9;
    };
    p.write_gbps = bandwidth(IBV_WR_RDMA_WRITE, 16, "RDMA WRITE bandwidth");
    p.read_gbps = bandwidth(IBV_WR_RDMA_READ, rd_atomic_, "RDMA READ bandwidth");
    res.bench.push_back(p);
  }
}

}  // namespace

std::string dmabuf_mr_kernel_problem(const std::string& release) {
  int major = 0, minor = 0;
  if (std::sscanf(release.c_str(), "%d.%d", &major, &minor) != 2) return {};
  if (major > 5 || (major == 5 && minor >= 12)) return {};
  return "ibv_reg_dmabuf_mr does not exist before Linux 5.12 (this kernel is " + release +
         "): no RDMA device can register dma-buf memory here";
}

RegistrationFailure explain_registration_failure(int err, Method method, const RdmaDevice& device, const MemorySource& target) {
  const std::string call = method_name(method);
  const std::string what = call + " on " + memory_words(target) + " failed with " + errno_name(err) + " (" + std::strerror(err) + ")";
  if (method == Method::dmabuf) {
    utsname u{};
    if (::uname(&u) == 0) {
      const std::string old = dmabuf_mr_kernel_problem(u.release);
      if (!old.empty()) return {Outcome::unsupported, old + "; " + what};
    }
    if (err == EOPNOTSUPP || err == ENOSYS || err == EPROTONOSUPPORT) {
      if (device.software)
        return {Outcome::unsupported, device.name + " cannot import dma-buf memory: software RDMA device (" +
                                          (device.kernel_driver.empty() ? std::string("rxe/siw") : device.kernel_driver) +
                                          " implements no dma-buf registration); " + what};
      return {Outcome::unsupported, device.name + " cannot import dma-buf memory: its driver (" +
                                        (device.kernel_driver.empty() ? std::string("unknown") : device.kernel_driver) +
                                        ") does not implement dma-buf registration; " + what};
    }
    std::string hint;
    if (target.is_device_memory() && device.software)
      hint = "; a software RDMA device cannot reach device memory over PCIe";
    else if (target.is_device_memory())
      hint =
          "; the importer needs peer-to-peer DMA to this memory (check the PCIe path and "
          "the IOMMU with `gdrpeer check`)";
    return {Outcome::fail, what + hint};
  }
  // ibv_reg_mr
  if (target.is_device_memory() && (err == EFAULT || err == EINVAL || err == EOPNOTSUPP || err == EPERM || err == ENOTSUP)) {
    const auto clients = peer_memory_clients();
    if (clients.empty()) {
      const std::string pin = target.kind() == SourceKind::gdrpeer ? " the kernel cannot pin PCI BAR pages (a VM_PFNMAP mapping)"
                                                                     " and"
                                                                   : "";
      return {Outcome::unsupported, what + ":" + pin +
                                        " no peer-memory client is loaded — load gdrpeer's client or nvidia-peermem, "
                                        "or use the dma-buf path"};
    }
    std::string list;
    for (const auto& c : clients) list += (list.empty() ? "" : ", ") + c;
    return {Outcome::fail, what + " although peer-memory clients are loaded (" + list + "): none of them claimed this memory"};
  }
  if (err == ENOMEM && !target.is_device_memory()) {
    rlimit rl{};
    ::getrlimit(RLIMIT_MEMLOCK, &rl);
    const std::string lim = rl.rlim_cur == RLIM_INFINITY ? std::string("unlimited") : describe_bytes(rl.rlim_cur);
    return {Outcome::fail, what + " (the locked-memory limit, ulimit -l, is " + lim + ")"};
  }
  return {Outcome::fail, what};
}

ComboResult run_loopback(const RdmaDevice& device, const PortInfo& port, MemorySource& target, Method method, const LoopbackOptions& opt) {
  ComboResult res;
  res.source = source_name(target.kind());
  res.device = device.name;
  res.port = port.port;
  res.method = method;
  std::string why;
  const verbs::Api* api = opt.api != nullptr ? opt.api : verbs::load(&why);
  if (api == nullptr) {
    res.outcome = Outcome::unsupported;
    res.reason = why;
    return res;
  }
  Loopback lb(*api, device, port, target, method, opt);
  try {
    lb.setup();
    lb.check_transfers(res);
  } catch (const Stop& s) {
    res.outcome = s.outcome;
    res.reason = s.reason;
    return res;
  }
  const bool all_ok = std::all_of(res.transfers.begin(), res.transfers.end(), [](const TransferCheck& c) { return c.ok; });
  if (!all_ok) {
    res.outcome = Outcome::fail;
    for (const auto& c : res.transfers)
      if (!c.ok) res.reason += (res.reason.empty() ? "" : "; ") + c.op + ": " + c.detail;
    return res;
  }
  res.outcome = Outcome::pass;
  res.reason = "RDMA WRITE, RDMA READ and SEND of " + describe_bytes(target.size()) + " moved correct data";
  if (opt.bench) {
    try {
      lb.bench(res);
    } catch (const Stop& s) {
      res.bench_problem = s.reason;
      res.outcome = Outcome::fail;
      res.reason = "the checked transfers passed, then the benchmark failed: " + s.reason;
    }
  }
  return res;
}

}  // namespace gdrpeer::verify

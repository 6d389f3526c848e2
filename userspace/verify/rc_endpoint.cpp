#include "gdrpeer/verify/rc_endpoint.hpp"

#include <dlfcn.h>
#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <random>
#include <thread>

#include "gdrpeer/gdrpeer.hpp"
#include "gdrpeer/verify/loopback.hpp"
#include "gdrpeer/verify/qp_setup.hpp"
#include "gdrpeer/verify/verbs_api.hpp"

namespace gdrpeer::verify {

namespace {

using Clock = std::chrono::steady_clock;

std::string errno_text(int err) { return errno_name(err) + " (" + std::strerror(err) + ")"; }

// mlx5 data direct (ConnectX-8 and later): mlx5dv_reg_dmabuf_mr(pd, offset, length, iova, fd,
// access, mlx5_access) with MLX5DV_REG_DMABUF_ACCESS_DATA_DIRECT (1 << 0), rdma-core's
// providers/mlx5/mlx5dv.h (also how perftest's --use_data_direct and NCCL's NCCL_IB_DATA_DIRECT
// call it). libmlx5 is loaded at run time: the binary does not depend on it.
using Mlx5RegDmabufMr = ibv_mr* (*)(ibv_pd*, uint64_t, size_t, uint64_t, int, int, int);
using Mlx5DataDirectPath = int (*)(ibv_context*, char*, size_t);
constexpr int kMlx5DataDirect = 1 << 0;

struct Mlx5 {
  Mlx5RegDmabufMr reg_dmabuf_mr = nullptr;
  Mlx5DataDirectPath data_direct_path = nullptr;
  std::string why;
};

const Mlx5& mlx5() {
  static const Mlx5 m = [] {
    Mlx5 r;
    void* lib = ::dlopen("libmlx5.so.1", RTLD_NOW | RTLD_GLOBAL);
    if (lib == nullptr) {
      r.why = "libmlx5.so.1 cannot be loaded (rdma-core's mlx5 provider is not installed)";
      return r;
    }
    r.reg_dmabuf_mr = reinterpret_cast<Mlx5RegDmabufMr>(::dlsym(lib, "mlx5dv_reg_dmabuf_mr"));
    r.data_direct_path = reinterpret_cast<Mlx5DataDirectPath>(::dlsym(lib, "mlx5dv_get_data_direct_sysfs_path"));
    if (r.reg_dmabuf_mr == nullptr || r.data_direct_path == nullptr)
      r.why = "this libmlx5 has no mlx5dv_reg_dmabuf_mr/mlx5dv_get_data_direct_sysfs_path (rdma-core older than v54)";
    return r;
  }();
  return m;
}

}  // namespace

std::string device_vanished_note(const std::string& dev, int port) {
  // A send can fail before the port state says so (rxe: the netdev stops transmitting
  // before its DOWN notifier marks the port), so an ACTIVE port is read again for 200 ms.
  for (int attempt = 0; attempt < 10; ++attempt) {
    if (attempt) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (rdma_device_gone(dev)) return "; " + dev + " has disappeared from /sys/class/infiniband (device removed during the run)";
    const std::string state = rdma_port_state(dev, port);
    if (state.empty()) return "";
    if (state != "ACTIVE")
      return "; " + dev + " port " + std::to_string(port) + " is now " + state + " (the link went away during the run)";
  }
  return "";
}

RcEndpoint::RcEndpoint(const verbs::Api& api, const RdmaDevice& dev, const PortInfo& port, MemorySource& mem, Method method, int timeout_ms,
                       DmabufRegistration reg)
    : api_(api), dev_(dev), port_(port), mem_(mem), method_(method), timeout_ms_(timeout_ms), reg_(reg) {
  std::random_device rd;
  psn_ = rd() & 0xffffff;
}

RcEndpoint::~RcEndpoint() {
  if (qp_ != nullptr) api_.destroy_qp(qp_);
  if (cq_ != nullptr) api_.destroy_cq(cq_);
  if (mr_ != nullptr) api_.dereg_mr(mr_);
  if (pd_ != nullptr) api_.dealloc_pd(pd_);
  if (ctx_ != nullptr) api_.close_device(ctx_);
}

void RcEndpoint::fail_errno(const std::string& what, int err) const {
  throw ComboStop{Outcome::fail, what + " on " + dev_.name + " failed: " + errno_text(err) + device_vanished_note(dev_.name, port_.port)};
}

void RcEndpoint::register_memory() {
  int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  if (atomics()) access |= IBV_ACCESS_REMOTE_ATOMIC;
  const size_t n = mem_.size();
  if (dev_.max_mr_size != 0 && n > dev_.max_mr_size)
    throw ComboStop{Outcome::unsupported, describe_bytes(n) + " exceeds the largest memory region " + dev_.name + " can register (" +
                                              describe_bytes(dev_.max_mr_size) + ")"};
  iova_ = reinterpret_cast<uintptr_t>(mem_.address());
  errno = 0;
  if (method_ == Method::reg_mr) {
    mr_ = api_.reg_mr(pd_, mem_.address(), n, access);
  } else {
    const auto dmabuf = mem_.dmabuf();
    if (!dmabuf)
      throw ComboStop{Outcome::unsupported,
                      source_name(mem_.kind()) + " memory is not available as a dma-buf here: " + mem_.dmabuf_problem()};
    if (reg_ == DmabufRegistration::mlx5_data_direct) {
      // Only the mlx5 provider has the call; never hand another provider's context to libmlx5.
      if (dev_.kernel_driver != "mlx5_core")
        throw ComboStop{Outcome::unsupported, "mlx5 data direct: " + dev_.name + " is not an mlx5 device (driver " +
                                                  (dev_.kernel_driver.empty() ? std::string("unknown") : dev_.kernel_driver) + ")"};
      const Mlx5& m = mlx5();
      if (!m.why.empty()) throw ComboStop{Outcome::unsupported, "mlx5 data direct: " + m.why};
      char path[4096] = {};
      if (int e = m.data_direct_path(ctx_, path, sizeof path); e != 0)
        throw ComboStop{Outcome::unsupported, "mlx5 data direct: " + dev_.name +
                                                  " has no data-direct device "
                                                  "(mlx5dv_get_data_direct_sysfs_path: " +
                                                  errno_text(e) + ")"};
      mr_ = m.reg_dmabuf_mr(pd_, dmabuf->offset, n, iova_, dmabuf->fd, access, kMlx5DataDirect);
    } else {
      if (api_.reg_dmabuf_mr == nullptr)
        throw ComboStop{Outcome::unsupported, "this libibverbs has no ibv_reg_dmabuf_mr (rdma-core older than v34)"};
      mr_ = api_.reg_dmabuf_mr(pd_, dmabuf->offset, n, iova_, dmabuf->fd, access);
    }
  }
  if (mr_ == nullptr) {
    const int err = errno != 0 ? errno : EINVAL;
    auto f = explain_registration_failure(err, method_, dev_, mem_);
    throw ComboStop{f.outcome, f.reason + device_vanished_note(dev_.name, port_.port)};
  }
}

void RcEndpoint::open() {
  if (!port_.active())
    throw ComboStop{Outcome::unsupported, dev_.name + " port " + std::to_string(port_.port) + " is " + port_.state_name + ", not ACTIVE"};
  if (!port_.gid) throw ComboStop{Outcome::unsupported, dev_.name + " port " + std::to_string(port_.port) + ": " + port_.gid_problem};
  const OpenedDevice o = open_rdma_device(api_, dev_.name);
  ctx_ = o.ctx;
  if (ctx_ == nullptr) {
    if (o.failed == "ibv_open_device" && rdma_device_gone(dev_.name))
      throw ComboStop{Outcome::fail, dev_.name + " disappeared before it could be opened"};
    fail_errno(o.failed, o.err);
  }
  pd_ = api_.alloc_pd(ctx_);
  if (pd_ == nullptr) fail_errno("ibv_alloc_pd", errno);
  register_memory();
  cq_ = api_.create_cq(ctx_, 256, nullptr, nullptr, 0);
  if (cq_ == nullptr) fail_errno("ibv_create_cq", errno);
  qp_ = create_rc_qp(api_, pd_, cq_);
  if (qp_ == nullptr) fail_errno("ibv_create_qp", errno);
  rd_atomic_ = std::clamp(std::min(dev_.max_qp_rd_atom, dev_.max_qp_init_rd_atom), 1, 16);
  if (int e = qp_to_init(
          api_, qp_, port_.port,
          IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | (atomics() ? IBV_ACCESS_REMOTE_ATOMIC : 0)))
    fail_errno("ibv_modify_qp(INIT)", e);
}

QpAddress RcEndpoint::local() const {
  QpAddress q;
  q.qpn = qp_ != nullptr ? qp_->qp_num : 0;
  q.psn = psn_;
  q.lid = port_.lid;
  if (port_.gid) {
    q.gid = port_.gid->raw;
    q.gid_index = port_.gid->index;
  }
  q.ethernet = port_.ethernet;
  q.active_mtu = port_.active_mtu;
  q.rd_atomic = rd_atomic_;
  q.atomic_cap = dev_.atomic_cap;
  q.addr = iova_;
  q.rkey = mr_ != nullptr ? mr_->rkey : 0;
  q.length = mem_.size();
  return q;
}

void RcEndpoint::connect(const QpAddress& remote, int path_mtu) {
  path_mtu_ = path_mtu;
  RtrPeer to;
  to.qpn = remote.qpn;
  to.psn = remote.psn;
  to.lid = remote.lid;
  to.gid = remote.gid;
  // RoCE always needs a GRH; InfiniBand only when a port has no LID (then the GIDs route).
  to.global = port_.ethernet || port_.lid == 0 || remote.lid == 0;
  to.hop_limit = 64;
  // Right after a link comes up neighbour discovery may still be running: qp_to_rtr retries
  // for 5 s, as the loopback does.
  const int rtr = qp_to_rtr(api_, qp_, dev_.name, port_, path_mtu, rd_atomic_, to);
  if (rtr != 0) {
    if (rtr == ENETUNREACH || rtr == EHOSTUNREACH || rtr == ETIMEDOUT)
      throw ComboStop{Outcome::fail, "ibv_modify_qp(RTR) on " + dev_.name + " failed: " + errno_text(rtr) + ": the peer's GID " +
                                         format_gid(remote.gid) + " could not be resolved for 5 s from local GID " +
                                         std::to_string(port_.gid->index) +
                                         " (no route between the two GIDs: "
                                         "check -x on both sides, the interfaces and their addresses)" +
                                         device_vanished_note(dev_.name, port_.port)};
    fail_errno("ibv_modify_qp(RTR)", rtr);
  }
  if (int e = qp_to_rts(api_, qp_, psn_, std::clamp(remote.rd_atomic, 1, rd_atomic_))) fail_errno("ibv_modify_qp(RTS)", e);
}

// Signals and posts `wr` (opcode and remote side filled in by the caller) on `len` bytes of the
// memory at `offset`; the scatter entry need only live for the call (the provider copies it).
void RcEndpoint::post(ibv_send_wr& wr, uint64_t offset, size_t len, uint64_t wr_id) {
  ibv_sge sge{iova_ + offset, static_cast<uint32_t>(len), mr_->lkey};
  wr.wr_id = wr_id;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.send_flags = IBV_SEND_SIGNALED;
  ibv_send_wr* bad = nullptr;
  if (int e = ibv_post_send(qp_, &wr, &bad)) fail_errno("ibv_post_send", e);
}

void RcEndpoint::post_rdma(ibv_wr_opcode opcode, uint64_t offset, size_t len, const QpAddress& remote, uint64_t remote_offset,
                           uint64_t wr_id) {
  ibv_send_wr wr{};
  wr.opcode = opcode;
  wr.wr.rdma.remote_addr = remote.addr + remote_offset;
  wr.wr.rdma.rkey = remote.rkey;
  post(wr, offset, len, wr_id);
}

void RcEndpoint::post_atomic(ibv_wr_opcode opcode, uint64_t offset, const QpAddress& remote, uint64_t remote_offset, uint64_t compare_add,
                             uint64_t swap, uint64_t wr_id) {
  ibv_send_wr wr{};
  wr.opcode = opcode;
  wr.wr.atomic.remote_addr = remote.addr + remote_offset;
  wr.wr.atomic.rkey = remote.rkey;
  wr.wr.atomic.compare_add = compare_add;
  wr.wr.atomic.swap = swap;
  post(wr, offset, 8, wr_id);
}

void RcEndpoint::post_write(uint64_t offset, size_t len, const QpAddress& remote, uint64_t remote_offset, uint64_t wr_id) {
  post_rdma(IBV_WR_RDMA_WRITE, offset, len, remote, remote_offset, wr_id);
}

void RcEndpoint::post_read(uint64_t offset, size_t len, const QpAddress& remote, uint64_t remote_offset, uint64_t wr_id) {
  post_rdma(IBV_WR_RDMA_READ, offset, len, remote, remote_offset, wr_id);
}

void RcEndpoint::post_send(uint64_t offset, size_t len, uint64_t wr_id) {
  ibv_send_wr wr{};
  wr.opcode = IBV_WR_SEND;
  post(wr, offset, len, wr_id);
}

void RcEndpoint::post_recv(uint64_t offset, size_t len, uint64_t wr_id) {
  ibv_sge sge{iova_ + offset, static_cast<uint32_t>(len), mr_->lkey};
  ibv_recv_wr wr{};
  wr.wr_id = wr_id;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  ibv_recv_wr* bad = nullptr;
  if (int e = ibv_post_recv(qp_, &wr, &bad)) fail_errno("ibv_post_recv", e);
}

void RcEndpoint::post_fetch_add(uint64_t offset, const QpAddress& remote, uint64_t remote_offset, uint64_t add, uint64_t wr_id) {
  post_atomic(IBV_WR_ATOMIC_FETCH_AND_ADD, offset, remote, remote_offset, add, 0, wr_id);
}

void RcEndpoint::post_cmp_swap(uint64_t offset, const QpAddress& remote, uint64_t remote_offset, uint64_t compare, uint64_t swap,
                               uint64_t wr_id) {
  post_atomic(IBV_WR_ATOMIC_CMP_AND_SWP, offset, remote, remote_offset, compare, swap, wr_id);
}

int RcEndpoint::poll(int max, const std::string& what) {
  ibv_wc wc[16];
  const int n = ibv_poll_cq(cq_, std::min(max, 16), wc);
  if (n < 0) fail_errno("ibv_poll_cq", EIO);
  for (int i = 0; i < n; ++i)
    if (wc[i].status != IBV_WC_SUCCESS)
      throw ComboStop{Outcome::fail, what + " completed with status \"" + api_.wc_status_str(wc[i].status) + "\" (vendor error " +
                                         std::to_string(wc[i].vendor_err) + ")" + device_vanished_note(dev_.name, port_.port)};
  return n;
}

void RcEndpoint::wait(int count, const std::string& what) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms_);
  while (count > 0) {
    const int n = poll(count, what);
    count -= n;
    if (n == 0) {
      if (Clock::now() > deadline)
        throw ComboStop{Outcome::fail, "no completion for " + what + " within " + std::to_string(timeout_ms_) + " ms" +
                                           device_vanished_note(dev_.name, port_.port)};
      sched_yield();  // software devices (rxe) do their work on our CPUs
    }
  }
}

}  // namespace gdrpeer::verify

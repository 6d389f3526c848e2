// One side of an RC connection between two nodes: the memory under test registered on
// one RDMA port, one CQ and one RC queue pair, connected to a queue pair whose address
// came from the peer over TCP (userspace/verify/twonode.cpp). The loopback
// (loopback.cpp) connects two queue pairs of one process instead; the words for what
// failed are the same (explain_registration_failure, the vanished-device note).
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <string>

#include "gdrpeer/verify/memory_source.hpp"
#include "gdrpeer/verify/rdma.hpp"
#include "gdrpeer/verify/verify_types.hpp"

namespace gdrpeer::verify {

namespace verbs {
struct Api;
}

// A failure that ends one combination, with its outcome.
struct ComboStop {
  Outcome outcome;
  std::string reason;
};

// What the peer needs to reach this queue pair and its memory (sent over TCP).
struct QpAddress {
  uint32_t qpn = 0;
  uint32_t psn = 0;
  uint16_t lid = 0;
  RawGid gid{};
  uint32_t gid_index = 0;
  bool ethernet = false;
  int active_mtu = 0;  // ibv_mtu of the port
  int rd_atomic = 1;   // RDMA READs/atomics it accepts in flight
  int atomic_cap = -1;
  uint64_t addr = 0;  // the memory under test as the NIC addresses it (iova)
  uint32_t rkey = 0;
  uint64_t length = 0;
};

// Registration variant for ibv_reg_dmabuf_mr rows.
enum class DmabufRegistration { plain, mlx5_data_direct };

class RcEndpoint {
 public:
  RcEndpoint(const verbs::Api& api, const RdmaDevice& dev, const PortInfo& port, MemorySource& mem, Method method, int timeout_ms,
             DmabufRegistration reg = DmabufRegistration::plain);
  ~RcEndpoint();
  RcEndpoint(const RcEndpoint&) = delete;
  RcEndpoint& operator=(const RcEndpoint&) = delete;

  // Opens the device, registers the memory (remote write, read and, where the device has
  // atomics, remote atomic), creates CQ and QP and moves the QP to INIT. Throws ComboStop.
  void open();
  QpAddress local() const;
  // INIT -> RTR -> RTS towards `remote` with this path MTU (ibv_mtu). Throws ComboStop.
  void connect(const QpAddress& remote, int path_mtu);

  // Work requests on the memory under test at `offset`; throw ComboStop when refused.
  void post_write(uint64_t offset, size_t len, const QpAddress& remote, uint64_t remote_offset, uint64_t wr_id);
  void post_read(uint64_t offset, size_t len, const QpAddress& remote, uint64_t remote_offset, uint64_t wr_id);
  void post_send(uint64_t offset, size_t len, uint64_t wr_id);
  void post_recv(uint64_t offset, size_t len, uint64_t wr_id);
  // 8 bytes at remote_offset; the old value lands at `offset` here.
  void post_fetch_add(uint64_t offset, const QpAddress& remote, uint64_t remote_offset, uint64_t add, uint64_t wr_id);
  void post_cmp_swap(uint64_t offset, const QpAddress& remote, uint64_t remote_offset, uint64_t compare, uint64_t swap, uint64_t wr_id);
  // Waits for `count` completions within the timeout; an error status or none in time
  // throws ComboStop(fail) naming `what`.
  void wait(int count, const std::string& what);
  // Polls once: completions seen (0 none yet); an error status throws like wait().
  int poll(int max, const std::string& what);

  MemorySource& memory() { return mem_; }
  const RdmaDevice& device() const { return dev_; }
  const PortInfo& port() const { return port_; }
  int path_mtu() const { return path_mtu_; }
  int rd_atomic() const { return rd_atomic_; }
  bool atomics() const { return dev_.atomic_cap > 0; }

 private:
  [[noreturn]] void fail_errno(const std::string& what, int err) const;
  void register_memory();
  void post(ibv_send_wr& wr, uint64_t offset, size_t len, uint64_t wr_id);
  void post_rdma(ibv_wr_opcode opcode, uint64_t offset, size_t len, const QpAddress& remote, uint64_t remote_offset, uint64_t wr_id);
  void post_atomic(ibv_wr_opcode opcode, uint64_t offset, const QpAddress& remote, uint64_t remote_offset, uint64_t compare_add,
                   uint64_t swap, uint64_t wr_id);

  const verbs::Api& api_;
  const RdmaDevice& dev_;
  const PortInfo& port_;
  MemorySource& mem_;
  Method method_;
  int timeout_ms_;
  DmabufRegistration reg_;
  ibv_context* ctx_ = nullptr;
  ibv_pd* pd_ = nullptr;
  ibv_mr* mr_ = nullptr;
  ibv_cq* cq_ = nullptr;
  ibv_qp* qp_ = nullptr;
  uint64_t iova_ = 0;
  uint32_t psn_ = 0;
  int path_mtu_ = 0;
  int rd_atomic_ = 1;
};

// "; rxe0 port 1 is now DOWN (the link went away during the run)" or "" (shared with the loopback).
std::string device_vanished_note(const std::string& dev, int port);

}  // namespace gdrpeer::verify

// The verbs steps an RC queue pair goes through, shared by the loopback (loopback.cpp: two
// queue pairs of one process) and the two-node endpoint (rc_endpoint.cpp: one queue pair
// connected to a peer's). Each returns what failed as an errno; the caller words the error,
// so each keeps its own messages.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <string>

#include "gdrpeer/verify/rdma.hpp"

namespace gdrpeer::verify {

namespace verbs {
struct Api;
}

// The RDMA device called `name` opened: its context, or nullptr with the verbs call that failed
// (ibv_get_device_list or ibv_open_device) and its errno.
struct OpenedDevice {
  ibv_context* ctx = nullptr;
  std::string failed;
  int err = 0;
};
OpenedDevice open_rdma_device(const verbs::Api& api, const std::string& name);

// An RC queue pair whose sends and receives complete on `cq`, with room for 64 sends and 16
// receives of one scatter entry each, every send signalled; nullptr with errno set.
ibv_qp* create_rc_qp(const verbs::Api& api, ibv_pd* pd, ibv_cq* cq);

// RESET -> INIT on `port` with these remote access flags: 0 or the errno.
int qp_to_init(const verbs::Api& api, ibv_qp* qp, uint8_t port, unsigned int access);

// The queue pair to connect to in INIT -> RTR.
struct RtrPeer {
  uint32_t qpn = 0;
  uint32_t psn = 0;
  uint16_t lid = 0;
  RawGid gid{};
  bool global = false;  // address by GID (a GRH): RoCE, or a port without a LID
  uint8_t hop_limit = 1;
};

// INIT -> RTR towards `peer` from `port` (its selected GID when global), retrying for 5 s
// while RoCE still resolves the peer's GID to a MAC address (neighbour discovery, IPv6 DAD
// right after a link comes up) unless `dev` disappears: 0 or the last errno.
int qp_to_rtr(const verbs::Api& api, ibv_qp* qp, const std::string& dev, const PortInfo& port, int path_mtu, int rd_atomic,
              const RtrPeer& peer);

// RTR -> RTS sending from `psn` with `rd_atomic` RDMA READs/atomics in flight: 0 or the errno.
int qp_to_rts(const verbs::Api& api, ibv_qp* qp, uint32_t psn, int rd_atomic);

}  // namespace gdrpeer::verify

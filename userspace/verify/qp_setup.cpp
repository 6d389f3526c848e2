#include "gdrpeer/verify/qp_setup.hpp"

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "gdrpeer/verify/verbs_api.hpp"

namespace gdrpeer::verify {

OpenedDevice open_rdma_device(const verbs::Api& api, const std::string& name) {
  OpenedDevice o;
  int count = 0;
  ibv_device** list = api.get_device_list(&count);
  if (list == nullptr) {
    o.err = errno;
    o.failed = "ibv_get_device_list";
    return o;
  }
  for (int i = 0; i < count; ++i)
    if (name == api.get_device_name(list[i])) o.ctx = api.open_device(list[i]);
  o.err = errno;
  api.free_device_list(list);
  if (o.ctx == nullptr) o.failed = "ibv_open_device";
  return o;
}

ibv_qp* create_rc_qp(const verbs::Api& api, ibv_pd* pd, ibv_cq* cq) {
  ibv_qp_init_attr a{};
  a.send_cq = cq;
  a.recv_cq = cq;
  a.qp_type = IBV_QPT_RC;
  a.sq_sig_all = 1;
  a.cap.max_send_wr = 64;
  a.cap.max_recv_wr = 16;
  a.cap.max_send_sge = 1;
  a.cap.max_recv_sge = 1;
  return api.create_qp(pd, &a);
}

int qp_to_init(const verbs::Api& api, ibv_qp* qp, uint8_t port, unsigned int access) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.pkey_index = 0;
  a.port_num = port;
  a.qp_access_flags = access;
  return api.modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
}

int qp_to_rtr(const verbs::Api& api, ibv_qp* qp, const std::string& dev, const PortInfo& port, int path_mtu, int rd_atomic,
              const RtrPeer& peer) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = static_cast<ibv_mtu>(path_mtu);
  a.dest_qp_num = peer.qpn;
  a.rq_psn = peer.psn;
  a.max_dest_rd_atomic = static_cast<uint8_t>(rd_atomic);
  a.min_rnr_timer = 12;
  a.ah_attr.port_num = port.port;
  if (peer.global) {
    a.ah_attr.is_global = 1;
    std::memcpy(a.ah_attr.grh.dgid.raw, peer.gid.data(), 16);
    a.ah_attr.grh.sgid_index = static_cast<uint8_t>(port.gid->index);
    a.ah_attr.grh.hop_limit = peer.hop_limit;
  } else {
    a.ah_attr.dlid = peer.lid;
  }
  int rtr = 0;
  for (int attempt = 0; attempt < 20; ++attempt) {
    rtr = api.modify_qp(
        qp, &a,
        IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
    if (rtr != ETIMEDOUT && rtr != ENETUNREACH && rtr != EHOSTUNREACH && rtr != EAGAIN) break;
    if (rdma_device_gone(dev)) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  return rtr;
}

int qp_to_rts(const verbs::Api& api, ibv_qp* qp, uint32_t psn, int rd_atomic) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_RTS;
  a.timeout = 14;
  a.retry_cnt = 7;
  a.rnr_retry = 7;
  a.sq_psn = psn;
  a.max_rd_atomic = static_cast<uint8_t>(rd_atomic);
  return api.modify_qp(qp, &a,
                       IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
}

}  // namespace gdrpeer::verify

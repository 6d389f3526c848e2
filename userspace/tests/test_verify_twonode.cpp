// `gdrpeer verify --server` / `gdrpeer verify HOST` (issue 26) against a fake fabric: two
// fake RDMA devices ("fakeA" for the client, "fakeB" for the server) in one process, whose
// "hardware" moves the bytes of WRITE, READ, SEND and the atomics between the memory of the
// two sides, and can get a byte wrong, lose an operation, revoke a memory region or refuse
// atomics. The server runs in a thread, the client in the test; the two talk over real TCP
// on the loopback interface. What is checked: every byte arrives and both sides print the
// same rows; a wrong byte fails on the side that receives it; a peer of another protocol
// version, a server that dies or never answers, a wrong GID index and a revoked memory
// region each end with their documented words and exit codes, within the timeouts.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <iostream>

#include <chrono>
#include <cstring>
#include <deque>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gdrpeer/verify/report.hpp"
#include "gdrpeer/verify/twonode.hpp"
#include "gdrpeer/verify/verbs_api.hpp"
#include "gdrpeer/verify/wire.hpp"

namespace v = gdrpeer::verify;
using Clock = std::chrono::steady_clock;

namespace {

enum class Op { none, write, read, send, fetch_add, cmp_swap };

struct Faults {
  Op corrupt = Op::none;   // flip one byte of what this operation delivers
  std::string corrupt_on;  // only on a QP of this device ("" any)
  size_t corrupt_at = 0;
  int revoke_after_writes = -1;  // the server's memory region goes invalid after N WRITEs into it
  bool server_has_atomics = true;
};

// The fabric: every context, CQ, QP and MR of both fake devices; one lock.
struct Fabric {
  std::mutex mu;
  Faults faults;
  ibv_device dev[2]{};
  ibv_device* list[3] = {&dev[0], &dev[1], nullptr};
  struct Cq {
    ibv_cq cq{};
    std::deque<ibv_wc> wcs;
    bool error_polled = false;  // an error completion was taken by the application
  };
  struct Recv {
    uint64_t wr_id, addr;
    uint32_t len;
  };
  struct Qp {
    ibv_qp qp{};
    std::string device;
    Cq* cq = nullptr;
    uint32_t dest = 0;
    std::deque<Recv> recvs;
  };
  struct Mr {
    ibv_mr mr{};
    int access = 0;
    bool valid = true;
    std::string device;
  };
  std::vector<std::unique_ptr<ibv_context>> ctxs;
  std::map<ibv_context*, std::string> ctx_device;
  std::vector<std::unique_ptr<ibv_pd>> pds;
  std::vector<std::unique_ptr<Cq>> cqs;
  std::map<uint32_t, std::unique_ptr<Qp>> qps;
  std::map<uint32_t, std::unique_ptr<Mr>> mrs;
  uint32_t next_qpn = 0x100, next_key = 0x1000;
  int writes_into_server = 0;
  int writes_posted_after_error_polled = 0;
  int open_objects = 0;
};
Fabric* fab = nullptr;

Fabric::Cq* cq_of(ibv_cq* c) {
  for (auto& q : fab->cqs)
    if (&q->cq == c) return q.get();
  return nullptr;
}

void complete(Fabric::Cq* cq, uint64_t wr_id, ibv_wc_status st, ibv_wc_opcode op, uint32_t len) {
  ibv_wc wc{};
  wc.wr_id = wr_id;
  wc.status = st;
  wc.opcode = op;
  wc.byte_len = len;
  cq->wcs.push_back(wc);
}

Fabric::Mr* mr_for(uint32_t key, uint64_t addr, size_t len, int access) {
  auto it = fab->mrs.find(key);
  if (it == fab->mrs.end() || !it->second->valid) return nullptr;
  Fabric::Mr* m = it->second.get();
  const auto base = reinterpret_cast<uint64_t>(m->mr.addr);
  if (addr < base || addr + len > base + m->mr.length) return nullptr;
  if ((m->access & access) != access) return nullptr;
  return m;
}

void corrupt(Op op, const std::string& device, uint8_t* p, size_t len) {
  if (fab->faults.corrupt == op && (fab->faults.corrupt_on.empty() || fab->faults.corrupt_on == device) && fab->faults.corrupt_at < len)
    p[fab->faults.corrupt_at] ^= 0x5a;
}

int fake_post_send(ibv_qp* q, ibv_send_wr* wr, ibv_send_wr** bad) {
  std::lock_guard lock(fab->mu);
  Fabric::Qp* me = fab->qps.at(q->qp_num).get();
  auto peer_it = fab->qps.find(me->dest);
  for (; wr != nullptr; wr = wr->next) {
    auto* local = reinterpret_cast<uint8_t*>(wr->sg_list[0].addr);
    const uint32_t len = wr->sg_list[0].length;
    if (wr->opcode == IBV_WR_RDMA_WRITE && me->cq->error_polled) ++fab->writes_posted_after_error_polled;
    if (peer_it == fab->qps.end()) {
      *bad = wr;
      return ENOTCONN;
    }
    Fabric::Qp* peer = peer_it->second.get();
    switch (wr->opcode) {
      case IBV_WR_RDMA_WRITE: {
        if (peer->device == "fakeB" && fab->faults.revoke_after_writes >= 0 && fab->writes_into_server >= fab->faults.revoke_after_writes)
          if (auto it = fab->mrs.find(wr->wr.rdma.rkey); it != fab->mrs.end()) it->second->valid = false;
        Fabric::Mr* m = mr_for(wr->wr.rdma.rkey, wr->wr.rdma.remote_addr, len, IBV_ACCESS_REMOTE_WRITE);
        if (m == nullptr) {
          complete(me->cq, wr->wr_id, IBV_WC_REM_ACCESS_ERR, IBV_WC_RDMA_WRITE, 0);
          break;
        }
        if (peer->device == "fakeB") ++fab->writes_into_server;
        auto* dst = reinterpret_cast<uint8_t*>(wr->wr.rdma.remote_addr);
        std::memcpy(dst, local, len);
        corrupt(Op::write, me->device, dst, len);
        complete(me->cq, wr->wr_id, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, len);
        break;
      }
      case IBV_WR_RDMA_READ: {
        Fabric::Mr* m = mr_for(wr->wr.rdma.rkey, wr->wr.rdma.remote_addr, len, IBV_ACCESS_REMOTE_READ);
        if (m == nullptr) {
          complete(me->cq, wr->wr_id, IBV_WC_REM_ACCESS_ERR, IBV_WC_RDMA_READ, 0);
          break;
        }
        std::memcpy(local, reinterpret_cast<uint8_t*>(wr->wr.rdma.remote_addr), len);
        corrupt(Op::read, me->device, local, len);
        complete(me->cq, wr->wr_id, IBV_WC_SUCCESS, IBV_WC_RDMA_READ, len);
        break;
      }
      case IBV_WR_SEND: {
        if (peer->recvs.empty()) {
          complete(me->cq, wr->wr_id, IBV_WC_RNR_RETRY_EXC_ERR, IBV_WC_SEND, 0);
          break;
        }
        const auto r = peer->recvs.front();
        peer->recvs.pop_front();
        auto* dst = reinterpret_cast<uint8_t*>(r.addr);
        std::memcpy(dst, local, std::min(len, r.len));
        corrupt(Op::send, me->device, dst, std::min(len, r.len));
        complete(me->cq, wr->wr_id, IBV_WC_SUCCESS, IBV_WC_SEND, len);
        complete(peer->cq, r.wr_id, IBV_WC_SUCCESS, IBV_WC_RECV, len);
        break;
      }
      case IBV_WR_ATOMIC_FETCH_AND_ADD:
      case IBV_WR_ATOMIC_CMP_AND_SWP: {
        Fabric::Mr* m = mr_for(wr->wr.atomic.rkey, wr->wr.atomic.remote_addr, 8, IBV_ACCESS_REMOTE_ATOMIC);
        if (m == nullptr || !fab->faults.server_has_atomics) {
          complete(me->cq, wr->wr_id, IBV_WC_REM_ACCESS_ERR, IBV_WC_COMP_SWAP, 0);
          break;
        }
        auto* remote = reinterpret_cast<uint8_t*>(wr->wr.atomic.remote_addr);
        uint64_t old;
        std::memcpy(&old, remote, 8);
        uint64_t now = old;
        if (wr->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD)
          now = old + wr->wr.atomic.compare_add;
        else if (old == wr->wr.atomic.compare_add)
          now = wr->wr.atomic.swap;
        std::memcpy(remote, &now, 8);
        corrupt(wr->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD ? Op::fetch_add : Op::cmp_swap, me->device, remote, 8);
        std::memcpy(local, &old, 8);
        complete(me->cq, wr->wr_id, IBV_WC_SUCCESS, wr->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD ? IBV_WC_FETCH_ADD : IBV_WC_COMP_SWAP, 8);
        break;
      }
      default: *bad = wr; return EINVAL;
    }
  }
  return 0;
}

int fake_post_recv(ibv_qp* q, ibv_recv_wr* wr, ibv_recv_wr**) {
  std::lock_guard lock(fab->mu);
  Fabric::Qp* me = fab->qps.at(q->qp_num).get();
  for (; wr != nullptr; wr = wr->next) me->recvs.push_back({wr->wr_id, wr->sg_list[0].addr, wr->sg_list[0].length});
  return 0;
}

int fake_poll_cq(ibv_cq* c, int n, ibv_wc* wc) {
  std::lock_guard lock(fab->mu);
  Fabric::Cq* cq = cq_of(c);
  int got = 0;
  while (got < n && !cq->wcs.empty()) {
    wc[got] = cq->wcs.front();
    if (wc[got].status != IBV_WC_SUCCESS) cq->error_polled = true;
    cq->wcs.pop_front();
    ++got;
  }
  return got;
}

const v::verbs::Api& fake_api() {
  static v::verbs::Api api = [] {
    v::verbs::Api a;
    a.get_device_list = [](int* n) -> ibv_device** {
      *n = 2;
      return fab->list;
    };
    a.free_device_list = [](ibv_device**) {};
    a.get_device_name = [](ibv_device* d) -> const char* { return d == &fab->dev[0] ? "fakeA" : "fakeB"; };
    a.open_device = [](ibv_device* d) -> ibv_context* {
      std::lock_guard lock(fab->mu);
      auto c = std::make_unique<ibv_context>();
      c->device = d;
      c->ops.post_send = fake_post_send;
      c->ops.post_recv = fake_post_recv;
      c->ops.poll_cq = fake_poll_cq;
      fab->ctx_device[c.get()] = d == &fab->dev[0] ? "fakeA" : "fakeB";
      fab->ctxs.push_back(std::move(c));
      ++fab->open_objects;
      return fab->ctxs.back().get();
    };
    a.close_device = [](ibv_context*) {
      std::lock_guard lock(fab->mu);
      --fab->open_objects;
      return 0;
    };
    a.alloc_pd = [](ibv_context* c) -> ibv_pd* {
      std::lock_guard lock(fab->mu);
      auto pd = std::make_unique<ibv_pd>();
      pd->context = c;
      fab->pds.push_back(std::move(pd));
      ++fab->open_objects;
      return fab->pds.back().get();
    };
    a.dealloc_pd = [](ibv_pd*) {
      std::lock_guard lock(fab->mu);
      --fab->open_objects;
      return 0;
    };
    static auto new_mr = [](ibv_pd* pd, void* addr, size_t len, int access) -> ibv_mr* {
      std::lock_guard lock(fab->mu);
      auto m = std::make_unique<Fabric::Mr>();
      m->mr.context = pd->context;
      m->mr.pd = pd;
      m->mr.addr = addr;
      m->mr.length = len;
      m->mr.lkey = m->mr.rkey = fab->next_key++;
      m->access = access;
      m->device = fab->ctx_device[pd->context];
      ibv_mr* out = &m->mr;
      fab->mrs[out->rkey] = std::move(m);
      ++fab->open_objects;
      return out;
    };
    a.reg_mr = [](ibv_pd* pd, void* addr, size_t len, int access) -> ibv_mr* { return new_mr(pd, addr, len, access); };
    a.reg_dmabuf_mr = [](ibv_pd* pd, uint64_t, size_t len, uint64_t iova, int, int access) -> ibv_mr* {
      return new_mr(pd, reinterpret_cast<void*>(iova), len, access);
    };
    a.dereg_mr = [](ibv_mr* m) {
      std::lock_guard lock(fab->mu);
      fab->mrs.erase(m->rkey);
      --fab->open_objects;
      return 0;
    };
    a.create_cq = [](ibv_context* c, int, void*, ibv_comp_channel*, int) -> ibv_cq* {
      std::lock_guard lock(fab->mu);
      auto cq = std::make_unique<Fabric::Cq>();
      cq->cq.context = c;
      fab->cqs.push_back(std::move(cq));
      ++fab->open_objects;
      return &fab->cqs.back()->cq;
    };
    a.destroy_cq = [](ibv_cq*) {
      std::lock_guard lock(fab->mu);
      --fab->open_objects;
      return 0;
    };
    a.create_qp = [](ibv_pd* pd, ibv_qp_init_attr* init) -> ibv_qp* {
      std::lock_guard lock(fab->mu);
      auto q = std::make_unique<Fabric::Qp>();
      q->qp.context = pd->context;
      q->qp.pd = pd;
      q->qp.qp_num = fab->next_qpn++;
      q->device = fab->ctx_device[pd->context];
      q->cq = cq_of(init->send_cq);
      ibv_qp* out = &q->qp;
      fab->qps[out->qp_num] = std::move(q);
      ++fab->open_objects;
      return out;
    };
    a.modify_qp = [](ibv_qp* q, ibv_qp_attr* attr, int) {
      std::lock_guard lock(fab->mu);
      if (attr->qp_state == IBV_QPS_RTR) fab->qps.at(q->qp_num)->dest = attr->dest_qp_num;
      return 0;
    };
    a.destroy_qp = [](ibv_qp* q) {
      std::lock_guard lock(fab->mu);
      fab->qps.at(q->qp_num)->dest = 0;
      --fab->open_objects;
      return 0;
    };
    a.wc_status_str = [](ibv_wc_status s) -> const char* {
      return s == IBV_WC_REM_ACCESS_ERR      ? "remote access error"
             : s == IBV_WC_RNR_RETRY_EXC_ERR ? "RNR retry counter exceeded"
                                             : "other status";
    };
    return a;
  }();
  return api;
}

v::RdmaInventory inventory(const std::string& name, uint8_t gid_last, int atomic_cap = IBV_ATOMIC_HCA) {
  v::RdmaInventory inv;
  inv.stack_loaded = true;
  v::RdmaDevice d;
  d.name = name;
  d.kernel_driver = "fake_hca";
  d.atomic_cap = atomic_cap;
  v::PortInfo p;
  p.port = 1;
  p.state = 4;
  p.state_name = "ACTIVE";
  p.ethernet = true;
  p.active_mtu = name == "fakeA" ? IBV_MTU_4096 : IBV_MTU_1024;
  v::GidEntry g;
  g.index = 1;
  g.type = v::GidType::roce_v2;
  g.raw = {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x50, 0x54, 0, 0xff, 0xfe, 0, 0, gid_last};
  p.gids = {g};
  p.gid = g;
  d.ports.push_back(p);
  inv.devices.push_back(d);
  return inv;
}

// Memory under test in this process; gdrpeer-kind buffers pretend to be device memory with a dma-buf.
class Buffer final : public v::MemorySource {
 public:
  Buffer(size_t n, v::SourceKind k) : bytes_(n), kind_(k) {
    size_ = n;
    address_ = bytes_.data();
    if (k == v::SourceKind::gdrpeer)
      dmabuf_ = v::DmaBufRef{-1, 0};
    else
      dmabuf_problem_ = "host memory has no dma-buf exporter in this test";
  }
  v::SourceKind kind() const override { return kind_; }
  std::string description() const override { return "test buffer of " + std::to_string(size_) + " bytes"; }
  bool is_device_memory() const override { return kind_ == v::SourceKind::gdrpeer; }
  void write(size_t off, const uint8_t* src, size_t len) override { std::memcpy(bytes_.data() + off, src, len); }
  void read(size_t off, uint8_t* dst, size_t len) override { std::memcpy(dst, bytes_.data() + off, len); }

 private:
  std::vector<uint8_t> bytes_;
  v::SourceKind kind_;
};

v::SourceSetup fake_source(v::SourceKind k, const v::SourceOptions& o) {
  v::SourceSetup s;
  s.kind = k;
  if (k == v::SourceKind::host || k == v::SourceKind::gdrpeer) {
    s.state = v::SourceSetup::State::ready;
    s.source = std::make_unique<Buffer>(o.size, k);
  } else {
    s.state = v::SourceSetup::State::absent;
    s.reason = "not in this test";
  }
  return s;
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

struct Pair {
  v::TwoNodeReport client, server;
  double seconds = 0;
};

class TwoNodeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fabric_ = std::make_unique<Fabric>();
    fab = fabric_.get();
  }
  void TearDown() override {
    EXPECT_EQ(fab->open_objects, 0) << "verbs objects left open";
    fab = nullptr;
  }

  v::TwoNodeOptions base(v::Role role) const {
    v::TwoNodeOptions o;
    o.role = role;
    o.api = &fake_api();
    o.prepare = fake_source;
    o.sources = {v::SourceKind::host, v::SourceKind::gdrpeer};
    o.timeout_ms = 300;
    o.source.size = 4096;
    o.seed = 11;
    return o;
  }

  // Runs a server in a thread and the client here; returns both reports.
  Pair run(v::TwoNodeOptions c, v::TwoNodeOptions s, v::RdmaInventory cinv = inventory("fakeA", 1),
           v::RdmaInventory sinv = inventory("fakeB", 2)) {
    s.port = 0;
    s.bind = "127.0.0.1";
    s.accept_timeout_ms = 10000;  // never a hung test
    std::promise<uint16_t> port;
    s.on_listening = [&](const std::string& addr) { port.set_value(static_cast<uint16_t>(std::stoi(addr.substr(addr.rfind(':') + 1)))); };
    Pair p;
    std::thread server([&] { p.server = v::run_two_node(s, sinv); });
    auto f = port.get_future();
    if (f.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
      server.join();
      ADD_FAILURE() << "the server never listened: " << p.server.summary;
      return p;
    }
    c.peer = "127.0.0.1:" + std::to_string(f.get());
    const auto t0 = Clock::now();
    p.client = v::run_two_node(c, cinv);
    p.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    server.join();
    return p;
  }

  std::unique_ptr<Fabric> fabric_;
};

const v::TransferCheck* transfer(const v::TwoNodeRow& r, const std::string& op) {
  for (const auto& t : r.transfers)
    if (t.op == op) return &t;
  return nullptr;
}

}  // namespace

TEST_F(TwoNodeTest, EveryCombinationMovesCorrectBytesAndBothSidesReportTheSameRows) {
  auto p = run(base(v::Role::client), base(v::Role::server));
  // host and gdrpeer x reg_mr and dmabuf on each side: 4 x 4 rows. Host memory has no dma-buf
  // in this test, so its dma-buf rows are unsupported on whichever side.
  ASSERT_EQ(p.client.rows.size(), 16u) << p.client.summary;
  size_t pass = 0;
  for (const auto& r : p.client.rows) {
    const bool host_dmabuf = (r.client_source == v::SourceKind::host && r.client_method == v::Method::dmabuf) ||
                             (r.server_source == v::SourceKind::host && r.server_method == v::Method::dmabuf);
    SCOPED_TRACE(r.reason);
    if (host_dmabuf) {
      EXPECT_EQ(r.outcome, v::Outcome::unsupported);
      EXPECT_TRUE(contains(r.reason, "host memory is not available as a dma-buf here")) << r.reason;
      EXPECT_TRUE(r.reason.rfind("client: ", 0) == 0 || r.reason.rfind("server: ", 0) == 0) << r.reason;
      continue;
    }
    ++pass;
    EXPECT_EQ(r.outcome, v::Outcome::pass);
    EXPECT_EQ(r.path_mtu, 1024);  // min(4096 on the client, 1024 on the server)
    const std::vector<std::pair<std::string, std::string>> want = {{"RDMA WRITE", "server"},
                                                                   {"RDMA READ", "client"},
                                                                   {"SEND client->server", "server"},
                                                                   {"SEND server->client", "client"},
                                                                   {"ATOMIC FETCH_AND_ADD", "client and server"},
                                                                   {"ATOMIC CMP_AND_SWP", "client and server"}};
    ASSERT_EQ(r.transfers.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_EQ(r.transfers[i].op, want[i].first);
      EXPECT_EQ(r.transfers[i].checked_by, want[i].second);
      EXPECT_TRUE(r.transfers[i].ok) << r.transfers[i].detail;
    }
    EXPECT_EQ(r.transfers[0].detail, "all 4096 bytes match");
  }
  EXPECT_EQ(pass, 9u);  // 3 usable client combinations x 3 server ones
  EXPECT_EQ(p.client.exit_code, v::kExitUnsupported);
  EXPECT_EQ(p.server.exit_code, v::kExitUnsupported);
  // The same rows on both sides, field for field.
  auto cj = v::two_node_to_json(p.client), sj = v::two_node_to_json(p.server);
  EXPECT_EQ(cj["results"], sj["results"]);
  EXPECT_EQ(cj["summary"], sj["summary"]);
  EXPECT_EQ(cj["role"], "client");
  EXPECT_EQ(sj["role"], "server");
  EXPECT_EQ(cj["peer"]["device"], "fakeB");
  EXPECT_EQ(sj["peer"]["device"], "fakeA");
  EXPECT_EQ(cj["peer"]["gid"], "fe80::5054:ff:fe00:2");
}

TEST_F(TwoNodeTest, OnlyDeviceMemoryRowsPassWithDmabufOnBothSides) {
  auto c = base(v::Role::client), s = base(v::Role::server);
  c.sources = s.sources = {v::SourceKind::gdrpeer};
  c.methods = s.methods = {v::Method::dmabuf};
  auto p = run(c, s);
  ASSERT_EQ(p.client.rows.size(), 1u);
  EXPECT_EQ(p.client.rows[0].outcome, v::Outcome::pass) << p.client.rows[0].reason;
  EXPECT_EQ(p.client.exit_code, v::kExitPass);
  EXPECT_EQ(p.server.exit_code, v::kExitPass);
}

TEST_F(TwoNodeTest, AWrongByteFailsOnTheSideThatReceivesIt) {
  struct Case {
    Op op;
    std::string corrupt_on;  // the device whose QP carries the operation
    std::string failing;     // the transfer that must fail
    std::string checked_by;
  };
  const std::vector<Case> cases = {
      {Op::write, "fakeA", "RDMA WRITE", "server"},
      {Op::read, "fakeA", "RDMA READ", "client"},
      {Op::send, "fakeA", "SEND client->server", "server"},
      {Op::send, "fakeB", "SEND server->client", "client"},
      {Op::fetch_add, "fakeA", "ATOMIC FETCH_AND_ADD", "client and server"},
      {Op::cmp_swap, "fakeA", "ATOMIC CMP_AND_SWP", "client and server"},
  };
  for (const auto& k : cases) {
    SCOPED_TRACE(k.failing);
    TearDown();
    SetUp();
    fab->faults.corrupt = k.op;
    fab->faults.corrupt_on = k.corrupt_on;
    fab->faults.corrupt_at = k.op == Op::fetch_add || k.op == Op::cmp_swap ? 3 : 1234;
    auto c = base(v::Role::client), s = base(v::Role::server);
    c.sources = s.sources = {v::SourceKind::host};
    c.methods = s.methods = {v::Method::reg_mr};
    auto p = run(c, s);
    ASSERT_EQ(p.client.rows.size(), 1u) << p.client.summary;
    ASSERT_EQ(p.server.rows.size(), 1u) << p.server.summary;
    for (const auto* rep : {&p.client, &p.server}) {
      const auto& r = rep->rows[0];
      EXPECT_EQ(r.outcome, v::Outcome::fail) << r.reason;
      EXPECT_EQ(rep->exit_code, v::kExitFail);
      for (const auto& t : r.transfers) {
        if (t.op == k.failing) {
          EXPECT_FALSE(t.ok);
          EXPECT_EQ(t.checked_by, k.checked_by);
          if (k.op != Op::fetch_add && k.op != Op::cmp_swap)
            EXPECT_EQ(t.detail, "1 of 4096 bytes differ, first at offset 1234 (expected 0x" +
                                    std::string(t.detail.substr(t.detail.find("0x") + 2, 2)) + ", got 0x" +
                                    t.detail.substr(t.detail.rfind("0x") + 2, 2) + ")");
          else
            EXPECT_TRUE(contains(t.detail, "server memory now 0x") && contains(t.detail, "(expected 0x")) << t.detail;
        } else {
          // A WRITE's wrong byte is not read back by the READ here (the server refills its memory first).
          EXPECT_TRUE(t.ok) << t.op << ": " << t.detail;
        }
      }
      EXPECT_TRUE(contains(r.reason, k.failing + " (checked by the " + k.checked_by + ")")) << r.reason;
    }
  }
}

TEST_F(TwoNodeTest, AProtocolVersionMismatchIsNamedOnBothSidesWithoutAHang) {
  for (int which = 0; which < 2; ++which) {
    SCOPED_TRACE(which == 0 ? "newer client" : "newer server");
    auto c = base(v::Role::client), s = base(v::Role::server);
    (which == 0 ? c : s).protocol_version = v::kProtocolVersion + 1;
    auto p = run(c, s);
    EXPECT_LT(p.seconds, 3.0);
    EXPECT_EQ(p.client.exit_code, v::kExitProtocol) << p.client.summary;
    EXPECT_EQ(p.server.exit_code, v::kExitProtocol) << p.server.summary;
    const std::string newer = std::to_string(v::kProtocolVersion + 1), older = std::to_string(v::kProtocolVersion);
    EXPECT_TRUE(
        contains(p.client.error, "protocol version mismatch: the server speaks gdrpeer verify protocol " + (which == 0 ? older : newer)))
        << p.client.error;
    EXPECT_TRUE(contains(p.client.error, "this client speaks " + (which == 0 ? newer : older))) << p.client.error;
    EXPECT_TRUE(
        contains(p.server.error, "protocol version mismatch: the client speaks gdrpeer verify protocol " + (which == 0 ? newer : older)))
        << p.server.error;
    EXPECT_TRUE(contains(p.server.error, "run the same gdrpeer version on both nodes")) << p.server.error;
    EXPECT_TRUE(p.client.rows.empty());
    EXPECT_EQ(v::two_node_to_json(p.client)["exit_code"], 76);
  }
}

TEST_F(TwoNodeTest, AServerThatDiesMidRunIsReportedWithinTheTimeout) {
  for (const std::string step : {"row", "write", "send", "recv", "atomic"}) {
    SCOPED_TRACE(step);
    TearDown();
    SetUp();
    auto c = base(v::Role::client), s = base(v::Role::server);
    c.sources = s.sources = {v::SourceKind::host};
    c.methods = s.methods = {v::Method::reg_mr};
    s.server_dies_at = [step](uint32_t, const std::string& at) { return at == step; };
    auto p = run(c, s);
    // At most one message wait: 2 x 300 ms + 2 s.
    EXPECT_LT(p.seconds, 2.6 + 0.5);
    EXPECT_EQ(p.client.exit_code, v::kExitPeerUnavailable) << p.client.summary;
    EXPECT_TRUE(contains(p.client.error, "the server went away during")) << p.client.error;
    EXPECT_TRUE(contains(p.client.summary, "the run did not complete")) << p.client.summary;
    ASSERT_EQ(p.client.rows.size(), 1u);
    EXPECT_EQ(p.client.rows[0].outcome, v::Outcome::fail);
    EXPECT_FALSE(p.client.rows[0].reason.empty());
  }
}

TEST_F(TwoNodeTest, AServerThatNeverAnswersTimesOut) {
  v::wire::Listener silent("127.0.0.1", 0);
  std::thread t([&] {
    auto ch = silent.accept(5000);
    std::this_thread::sleep_for(std::chrono::milliseconds(3500));
  });
  auto c = base(v::Role::client);
  c.peer = "127.0.0.1:" + std::to_string(silent.port());
  const auto t0 = Clock::now();
  auto rep = v::run_two_node(c, inventory("fakeA", 1));
  const double s = std::chrono::duration<double>(Clock::now() - t0).count();
  t.join();
  EXPECT_LT(s, 3.0);
  EXPECT_EQ(rep.exit_code, v::kExitPeerUnavailable);
  EXPECT_TRUE(contains(rep.error, "the server stopped answering during the handshake: no message from the peer within 2600 ms"))
      << rep.error;
}

TEST_F(TwoNodeTest, NoServerListeningIsReportedAfterTheTimeout) {
  uint16_t port;
  {
    v::wire::Listener l("127.0.0.1", 0);
    port = l.port();
  }  // closed: nobody listens there now
  auto c = base(v::Role::client);
  c.peer = "127.0.0.1:" + std::to_string(port);
  auto rep = v::run_two_node(c, inventory("fakeA", 1));
  EXPECT_EQ(rep.exit_code, v::kExitPeerUnavailable);
  EXPECT_TRUE(contains(rep.error, "no gdrpeer verify server at 127.0.0.1:" + std::to_string(port) + " within 300 ms")) << rep.error;
  EXPECT_TRUE(contains(rep.error, "ECONNREFUSED")) << rep.error;
}

TEST_F(TwoNodeTest, AWrongGidIndexMakesEveryRowUnsupportedOnBothSides) {
  auto cinv = inventory("fakeA", 1);
  v::use_gid_index(cinv, 7);  // -x 7 on the client: its port has GID 1 only
  auto c = base(v::Role::client), s = base(v::Role::server);
  c.sources = s.sources = {v::SourceKind::host};
  c.methods = s.methods = {v::Method::reg_mr};
  auto p = run(c, s, cinv);
  ASSERT_EQ(p.client.rows.size(), 1u) << p.client.summary;
  EXPECT_EQ(p.client.rows[0].outcome, v::Outcome::unsupported);
  EXPECT_EQ(p.client.rows[0].reason, "client: fakeA port 1: no GID at index 7 (-x, --gid-index)");
  EXPECT_EQ(p.client.exit_code, v::kExitUnsupported);
  ASSERT_EQ(p.server.rows.size(), 1u);
  EXPECT_EQ(p.server.rows[0].reason, p.client.rows[0].reason);
  EXPECT_EQ(p.server.exit_code, v::kExitUnsupported);
  EXPECT_EQ(v::two_node_to_json(p.server)["peer"]["gid_problem"], "no GID at index 7 (-x, --gid-index)");
}

TEST_F(TwoNodeTest, AMemoryRegionRevokedMidWriteLoopFailsOnTheClientAndNothingMoreIsWritten) {
  fab->faults.revoke_after_writes = 40;  // the checks write once; the bench loop the rest
  auto c = base(v::Role::client), s = base(v::Role::server);
  c.sources = s.sources = {v::SourceKind::gdrpeer};
  c.methods = s.methods = {v::Method::dmabuf};
  c.bench = true;
  c.bench_sizes = {4096};
  c.iterations = 500;
  auto p = run(c, s);
  ASSERT_EQ(p.client.rows.size(), 1u) << p.client.summary;
  const auto& r = p.client.rows[0];
  EXPECT_EQ(r.outcome, v::Outcome::fail);
  EXPECT_TRUE(contains(r.reason,
                       "the checked transfers passed, then the benchmark failed: RDMA WRITE (bench) completed "
                       "with status \"remote access error\""))
      << r.reason;
  EXPECT_EQ(fab->writes_into_server, 40);
  EXPECT_EQ(fab->writes_posted_after_error_polled, 0) << "the client went on writing after the error";
  EXPECT_EQ(p.client.exit_code, v::kExitFail);
  ASSERT_EQ(p.server.rows.size(), 1u);
  EXPECT_EQ(p.server.rows[0].reason, r.reason);
  EXPECT_EQ(p.server.exit_code, v::kExitFail);
}

TEST_F(TwoNodeTest, AtomicsOnADeviceWithoutThemAreUnsupportedWithTheReason) {
  fab->faults.server_has_atomics = false;
  auto c = base(v::Role::client), s = base(v::Role::server);
  c.sources = s.sources = {v::SourceKind::host};
  c.methods = s.methods = {v::Method::reg_mr};
  auto p = run(c, s, inventory("fakeA", 1), inventory("fakeB", 2, IBV_ATOMIC_NONE));
  ASSERT_EQ(p.client.rows.size(), 1u);
  const auto& r = p.client.rows[0];
  EXPECT_EQ(r.outcome, v::Outcome::unsupported) << r.reason;
  const auto* t = transfer(r, "ATOMIC FETCH_AND_ADD");
  ASSERT_NE(t, nullptr);
  EXPECT_TRUE(t->unsupported);
  EXPECT_EQ(t->detail, "server device fakeB reports atomic_cap IBV_ATOMIC_NONE (ibv_query_device): it does no RDMA atomics");
  EXPECT_TRUE(transfer(r, "RDMA WRITE")->ok);
  EXPECT_EQ(p.client.exit_code, v::kExitUnsupported);
  // Without the atomics in the plan the row passes.
  TearDown();
  SetUp();
  c.ops = {v::TwoNodeOp::write, v::TwoNodeOp::read, v::TwoNodeOp::send};
  p = run(c, s, inventory("fakeA", 1), inventory("fakeB", 2, IBV_ATOMIC_NONE));
  ASSERT_EQ(p.client.rows.size(), 1u);
  EXPECT_EQ(p.client.rows[0].outcome, v::Outcome::pass) << p.client.rows[0].reason;
}

TEST_F(TwoNodeTest, TheRequestedMtuCapsThePathMtu) {
  auto c = base(v::Role::client), s = base(v::Role::server);
  c.sources = s.sources = {v::SourceKind::host};
  c.methods = s.methods = {v::Method::reg_mr};
  c.mtu = 512;
  auto p = run(c, s);
  ASSERT_EQ(p.client.rows.size(), 1u);
  EXPECT_EQ(p.client.rows[0].path_mtu, 512);
  EXPECT_EQ(p.server.rows[0].path_mtu, 512);
}

TEST_F(TwoNodeTest, TheBenchmarkReportsPerftestColumns) {
  auto c = base(v::Role::client), s = base(v::Role::server);
  c.sources = s.sources = {v::SourceKind::host};
  c.methods = s.methods = {v::Method::reg_mr};
  c.bench = true;
  c.bench_sizes = {64, 4096};
  c.iterations = 100;
  auto p = run(c, s);
  ASSERT_EQ(p.client.rows.size(), 1u);
  const auto& r = p.client.rows[0];
  EXPECT_EQ(r.outcome, v::Outcome::pass) << r.reason;
  ASSERT_EQ(r.bw.size(), 4u);  // WRITE and READ per size
  ASSERT_EQ(r.lat.size(), 2u);
  EXPECT_EQ(r.bw[0].op, "RDMA WRITE");
  EXPECT_EQ(r.bw[0].bytes, 64u);
  EXPECT_EQ(r.bw[0].iterations, 100u);
  EXPECT_GT(r.bw[0].bw_avg_mib, 0);
  EXPECT_GE(r.bw[0].bw_peak_mib, r.bw[0].bw_avg_mib);
  EXPECT_EQ(r.lat[1].iterations, 100u);
  EXPECT_LE(r.lat[1].t_min, r.lat[1].t_typical);
  EXPECT_LE(r.lat[1].t_typical, r.lat[1].t_max);
  auto j = v::two_node_to_json(p.server);
  EXPECT_EQ(j["results"][0]["bench"]["bw"].size(), 4u);
  EXPECT_TRUE(j["results"][0]["bench"]["lat"][0].contains("p99_9_us"));
}

// perftest's arithmetic (perftest_parameters.c print_report_bw / print_report_lat), worked by hand.
TEST(PerftestColumns, BandwidthAverageAndPeak) {
  // 4 messages of 1 MiB, all posted at 0 s, completed at 1, 2, 3 and 10 s.
  auto b = v::bw_from_times("RDMA WRITE", 1 << 20, {0, 0, 0, 0}, {1, 2, 3, 10});
  // average: 4 MiB over 10 s (first post to last completion)
  EXPECT_DOUBLE_EQ(b.bw_avg_mib, 0.4);
  EXPECT_DOUBLE_EQ(b.msg_rate_mpps, 0.4 / 1e6);
  // peak: the smallest (completed[j] - posted[i]) / (j - i + 1) is 1 s per message (j = 0, 1, 2)
  EXPECT_DOUBLE_EQ(b.bw_peak_mib, 1.0);
  EXPECT_EQ(b.iterations, 4u);
}

TEST(PerftestColumns, LatencyPercentilesFromPostTimes) {
  // 9 posts: 8 gaps (usec) 5, 1, 4, 2, 3, 9, 8, 100 -> sorted 1 2 3 4 5 8 9 100; the two largest
  // dropped (cnt 6); median of 6 (odd cnt - 1): (d[3] + d[2]) / 2 = 3.5; t_max d[6] = 9; the 99%
  // and 99.9% entries d[ceil(6 * 0.99)] = d[6] = 9; average (1+2+3+4+5+8)/6 = 23/6.
  std::vector<double> posted{0};
  for (double gap : {5, 1, 4, 2, 3, 9, 8, 100}) posted.push_back(posted.back() + gap * 1e-6);
  auto l = v::lat_from_post_times("RDMA READ", 2, posted);
  EXPECT_EQ(l.iterations, 9u);
  EXPECT_NEAR(l.t_min, 1, 1e-6);
  EXPECT_NEAR(l.t_max, 9, 1e-6);
  EXPECT_NEAR(l.t_typical, 3.5, 1e-6);
  EXPECT_NEAR(l.t_avg, 23.0 / 6, 1e-6);
  EXPECT_NEAR(l.p99, 9, 1e-6);
  EXPECT_NEAR(l.p99_9, 9, 1e-6);
  double var = 0;
  for (double d : {1, 2, 3, 4, 5, 8}) var += (d - 23.0 / 6) * (d - 23.0 / 6);
  EXPECT_NEAR(l.t_stdev, std::sqrt(var / 6), 1e-6);
}

TEST(PeerAddress, Forms) {
  std::string why;
  auto a = v::wire::parse_peer_address("[fe80::5054:ff:fe00:2%eth0]:18600", 18516, &why);
  ASSERT_TRUE(a) << why;
  EXPECT_EQ(a->host, "fe80::5054:ff:fe00:2%eth0");
  EXPECT_EQ(a->port, 18600);
  a = v::wire::parse_peer_address("fe80::1%eth0", 18516, &why);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->host, "fe80::1%eth0");
  EXPECT_EQ(a->port, 18516);
  a = v::wire::parse_peer_address("node2:7000", 18516, &why);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->host, "node2");
  EXPECT_EQ(a->port, 7000);
  a = v::wire::parse_peer_address("[::1]", 18516, &why);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->host, "::1");
  for (const char* bad : {"", "[::1", "node:0", "node:70000", "node:x", "[::1]x", ":5"})
    EXPECT_FALSE(v::wire::parse_peer_address(bad, 18516, &why)) << bad;
}

TEST_F(TwoNodeTest, TheClientReachesTheServerOverIpv6WithAScope) {
  // [::1%lo]:PORT, the bracketed form with an interface the test bed's link-local addresses use.
  auto c = base(v::Role::client), s = base(v::Role::server);
  c.sources = s.sources = {v::SourceKind::host};
  c.methods = s.methods = {v::Method::reg_mr};
  s.port = 0;
  s.bind = "::1";
  s.accept_timeout_ms = 5000;  // the server gives up if the client never comes
  std::promise<uint16_t> port;
  s.on_listening = [&](const std::string& addr) { port.set_value(static_cast<uint16_t>(std::stoi(addr.substr(addr.rfind(':') + 1)))); };
  v::TwoNodeReport server;
  std::thread t([&] { server = v::run_two_node(s, inventory("fakeB", 2)); });
  auto f = port.get_future();
  if (f.wait_for(std::chrono::seconds(5)) != std::future_status::ready) {
    t.join();
    GTEST_SKIP() << "no IPv6 loopback here: " << server.summary;
  }
  c.peer = "[::1%lo]:" + std::to_string(f.get());
  auto rep = v::run_two_node(c, inventory("fakeA", 1));
  t.join();
  EXPECT_EQ(rep.exit_code, v::kExitPass) << rep.summary << " / " << rep.error;
  EXPECT_TRUE(contains(server.peer_address, "::1")) << server.peer_address;
}

TEST_F(TwoNodeTest, DataDirectOnANonMlx5DeviceIsUnsupportedInOneLine) {
  // --data-direct (mlx5dv_reg_dmabuf_mr with MLX5DV_REG_DMABUF_ACCESS_DATA_DIRECT) on the server:
  // its dma-buf rows are unsupported with the reason; its reg_mr rows still run.
  auto c = base(v::Role::client), s = base(v::Role::server);
  c.sources = s.sources = {v::SourceKind::gdrpeer};
  c.methods = {v::Method::dmabuf};
  s.dmabuf_registration = v::DmabufRegistration::mlx5_data_direct;
  auto p = run(c, s);
  ASSERT_EQ(p.client.rows.size(), 2u) << p.client.summary;
  const auto& dd = p.client.rows[0].server_method == v::Method::dmabuf ? p.client.rows[0] : p.client.rows[1];
  const auto& plain = p.client.rows[0].server_method == v::Method::dmabuf ? p.client.rows[1] : p.client.rows[0];
  EXPECT_EQ(dd.outcome, v::Outcome::unsupported);
  EXPECT_EQ(dd.reason, "server: mlx5 data direct: fakeB is not an mlx5 device (driver fake_hca)");
  EXPECT_EQ(plain.outcome, v::Outcome::pass) << plain.reason;
  EXPECT_EQ(v::two_node_to_json(p.client)["peer"]["dmabuf_registration"], "mlx5dv_reg_dmabuf_mr (data direct)");
  EXPECT_EQ(p.server.exit_code, v::kExitUnsupported);
}

// --cuda-dmabuf-mapping pcie against the fake libcuda (userspace/tests/fake_cuda.cpp): the flag
// CU_MEM_RANGE_FLAG_DMA_BUF_MAPPING_TYPE_PCIE (1) reaches cuMemGetHandleForAddressRange from
// driver 12.8 on, and a driver before 12.8 gets the one-line reason instead of the call.
TEST(CudaDmabufMapping, PcieFlagReachesTheDriverOrTheReasonSaysWhyNot) {
  void* lib = ::dlopen(GDRPEER_FAKE_CUDA_PATH, RTLD_NOW | RTLD_GLOBAL);
  ASSERT_NE(lib, nullptr) << ::dlerror();
  auto last_flags = reinterpret_cast<unsigned long long (*)()>(::dlsym(lib, "gdrpeer_fake_cuda_last_range_flags"));
  ASSERT_NE(last_flags, nullptr);
  v::SourceOptions o;
  o.size = 1 << 16;
  o.libcuda = GDRPEER_FAKE_CUDA_PATH;
  struct Case {
    const char* driver;
    bool pcie;
    unsigned long long flags;  // what the driver must have been given; ~0: not called
    const char* problem;       // "" dma-buf available
  };
  const Case cases[] = {
      {"driver=12080", true, 1, ""},
      {"driver=13000", false, 0, ""},
      {"driver=12040", true, ~0ull,
       "--cuda-dmabuf-mapping pcie: CUDA driver 12.4 has no CU_MEM_RANGE_FLAG_DMA_BUF_MAPPING_TYPE_PCIE (CUDA 12.8 and later)"},
      {"driver=12040", false, 0, ""},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(std::string(c.driver) + (c.pcie ? " pcie" : " default"));
    ::setenv("GDRPEER_FAKE_CUDA", (std::string("gpus=0000:00:06.0 ") + c.driver).c_str(), 1);
    o.cuda_dmabuf_pcie = c.pcie;
    // Reset what the fake remembers with a call of our own.
    auto get = reinterpret_cast<int (*)(void*, unsigned long long, size_t, int, unsigned long long)>(
        ::dlsym(lib, "cuMemGetHandleForAddressRange"));
    ASSERT_NE(get, nullptr);
    int scratch = -1;
    get(&scratch, 0, 0, 0, ~0ull);
    auto s = v::prepare_source(v::SourceKind::cuda, o);
    ASSERT_EQ(s.state, v::SourceSetup::State::ready) << s.reason;
    EXPECT_EQ(s.source->dmabuf_problem(), c.problem);
    EXPECT_EQ(s.source->dmabuf().has_value(), std::string(c.problem).empty());
    EXPECT_EQ(last_flags(), c.flags == ~0ull ? ~0ull : c.flags);
  }
  ::unsetenv("GDRPEER_FAKE_CUDA");
}

TEST_F(TwoNodeTest, TheTableShowsBothNodesTheRowsAndWhoChecked) {
  fab->faults.corrupt = Op::write;
  fab->faults.corrupt_at = 7;
  auto c = base(v::Role::client), s = base(v::Role::server);
  c.sources = s.sources = {v::SourceKind::host};
  c.methods = s.methods = {v::Method::reg_mr};
  auto p = run(c, s);
  std::ostringstream client, server;
  v::print_two_node_table(p.client, client);
  v::print_two_node_table(p.server, server);
  if (std::getenv("GDRPEER_TEST_SHOW")) std::cout << client.str() << "\n" << server.str();
  for (const std::string& t : {client.str(), server.str()}) {
    EXPECT_TRUE(contains(t, "  client  ")) << t;
    EXPECT_TRUE(contains(t, "fakeA port 1 (fake_hca): ACTIVE, Ethernet (RoCE), MTU 4096, GID 1 fe80::5054:ff:fe00:1 (RoCE v2)")) << t;
    EXPECT_TRUE(contains(t, "fakeB port 1 (fake_hca): ACTIVE, Ethernet (RoCE), MTU 1024")) << t;
    EXPECT_TRUE(contains(t, "host ibv_reg_mr")) << t;
    EXPECT_TRUE(contains(t, "RDMA WRITE (FAILED, checked by the server): 1 of 4096 bytes differ, first at offset 7")) << t;
    EXPECT_TRUE(contains(t, "0 passed, 0 unsupported, 1 failed: at least one combination failed (exit 2)")) << t;
  }
  EXPECT_TRUE(contains(client.str(), "this side: client")) << client.str();
  EXPECT_TRUE(contains(server.str(), "this side: server")) << server.str();
}

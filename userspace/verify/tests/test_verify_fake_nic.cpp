// `gdrpeer verify` against a fake NIC: a verbs::Api whose "hardware" copies the
// bytes of RDMA WRITE, RDMA READ and SEND in this process, and can be told to
// get one byte wrong, to fail a registration or a verb with a chosen errno, to
// complete with an error status or not at all. Whatever goes wrong, verify
// must say `fail` (exit 1) -- never pass, never "unsupported" -- except where
// docs/verify.md documents an errno as "this node cannot do that".
#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <deque>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "gdrpeer/verify/engine.hpp"
#include "gdrpeer/verify/loopback.hpp"
#include "gdrpeer/verify/memory_source.hpp"
#include "gdrpeer/verify/verbs_api.hpp"

namespace v = gdrpeer::verify;

namespace {

enum class Op { none, write, read, send };

// What the fake hardware does wrong (one thing per test).
struct Faults {
  Op corrupt = Op::none;     // flip one byte of what this operation delivers
  size_t corrupt_at = 0;     // at this offset
  int reg_errno = 0;         // registering the memory under test fails with this errno
  int reg_dmabuf_errno = 0;  // ibv_reg_dmabuf_mr fails with this errno
  Op bad_status = Op::none;  // this operation completes with IBV_WC_REM_ACCESS_ERR
  Op lost = Op::none;        // this operation never completes
  Op dropped = Op::none;     // this operation completes successfully and moves no data
  int post_send_errno = 0;
  int modify_errno = 0;  // ibv_modify_qp to RTS fails with this errno
  bool no_cq = false;    // ibv_create_cq fails (ENOMEM)
};

// The fake device. The Api holds plain function pointers, so the state is global.
struct FakeNic {
  Faults faults;
  ibv_device device{};
  ibv_device* list[2] = {&device, nullptr};
  ibv_context ctx{};
  ibv_pd pd{};
  ibv_cq cq{};
  ibv_qp qp[2]{};
  std::vector<std::unique_ptr<ibv_mr>> mrs;
  std::map<uint32_t, int> access;  // per key: the access flags it was registered with
  std::deque<ibv_wc> completions;
  struct Recv {
    uint64_t wr_id, addr;
    uint32_t length;
  };
  std::deque<Recv> receives;
  int registrations = 0;           // of ibv_reg_mr: the first is the memory under test
  uint64_t dmabuf_offset = ~0ull;  // what ibv_reg_dmabuf_mr was given
  size_t dmabuf_length = 0;
  int open_mrs = 0, open_qps = 0;
  int path_mtu = 0;  // what the last move to RTR asked for (ibv_mtu)
  int write_posts = 0, read_posts = 0;
  bool cq_open = false, pd_open = false, ctx_open = false;
};
FakeNic* nic = nullptr;

void deliver(Op op, uint8_t* dst, const uint8_t* src, size_t len) {
  if (nic->faults.dropped == op) return;
  std::memcpy(dst, src, len);
  if (nic->faults.corrupt == op && nic->faults.corrupt_at < len) dst[nic->faults.corrupt_at] ^= 0x5a;
}

void complete(Op op, uint64_t wr_id, ibv_wc_opcode opcode, uint32_t len) {
  if (nic->faults.lost == op) return;
  ibv_wc wc{};
  wc.wr_id = wr_id;
  wc.status = nic->faults.bad_status == op ? IBV_WC_REM_ACCESS_ERR : IBV_WC_SUCCESS;
  wc.opcode = opcode;
  wc.byte_len = len;
  nic->completions.push_back(wc);
}

// The memory region a key names, and whether it grants `access` (as an HCA checks rkeys and lkeys).
bool allowed(uint32_t key, int access) {
  for (const auto& mr : nic->mrs)
    if (mr->rkey == key) return (nic->access[key] & access) == access;
  return false;
}

void refuse(uint64_t wr_id) {
  ibv_wc wc{};
  wc.wr_id = wr_id;
  wc.status = IBV_WC_REM_ACCESS_ERR;
  nic->completions.push_back(wc);
}

int fake_post_send(ibv_qp*, ibv_send_wr* wr, ibv_send_wr** bad) {
  if (nic->faults.post_send_errno) {
    *bad = wr;
    return nic->faults.post_send_errno;
  }
  for (; wr; wr = wr->next) {
    auto* local = reinterpret_cast<uint8_t*>(wr->sg_list[0].addr);
    const uint32_t len = wr->sg_list[0].length;
    auto* remote = reinterpret_cast<uint8_t*>(wr->wr.rdma.remote_addr);
    nic->write_posts += wr->opcode == IBV_WR_RDMA_WRITE;
    nic->read_posts += wr->opcode == IBV_WR_RDMA_READ;
    switch (wr->opcode) {
      case IBV_WR_RDMA_WRITE:
        if (!allowed(wr->wr.rdma.rkey, IBV_ACCESS_REMOTE_WRITE)) {
          refuse(wr->wr_id);
          break;
        }
        deliver(Op::write, remote, local, len);
        complete(Op::write, wr->wr_id, IBV_WC_RDMA_WRITE, len);
        break;
      case IBV_WR_RDMA_READ:
        if (!allowed(wr->wr.rdma.rkey, IBV_ACCESS_REMOTE_READ) || !allowed(wr->sg_list[0].lkey, IBV_ACCESS_LOCAL_WRITE)) {
          refuse(wr->wr_id);
          break;
        }
        deliver(Op::read, local, remote, len);
        complete(Op::read, wr->wr_id, IBV_WC_RDMA_READ, len);
        break;
      case IBV_WR_SEND: {
        if (nic->receives.empty()) return EINVAL;
        const auto r = nic->receives.front();
        nic->receives.pop_front();
        deliver(Op::send, reinterpret_cast<uint8_t*>(r.addr), local, std::min(len, r.length));
        complete(Op::send, wr->wr_id, IBV_WC_SEND, len);
        complete(Op::send, r.wr_id, IBV_WC_RECV, len);
        break;
      }
      default: return EINVAL;
    }
  }
  return 0;
}

int fake_post_recv(ibv_qp*, ibv_recv_wr* wr, ibv_recv_wr**) {
  for (; wr; wr = wr->next) nic->receives.push_back({wr->wr_id, wr->sg_list[0].addr, wr->sg_list[0].length});
  return 0;
}

int fake_poll_cq(ibv_cq*, int n, ibv_wc* wc) {
  int got = 0;
  while (got < n && !nic->completions.empty()) {
    wc[got++] = nic->completions.front();
    nic->completions.pop_front();
  }
  return got;
}

ibv_mr* new_mr(void* addr, size_t len, int access) {
  auto mr = std::make_unique<ibv_mr>();
  mr->context = &nic->ctx;
  mr->pd = &nic->pd;
  mr->addr = addr;
  mr->length = len;
  mr->lkey = mr->rkey = static_cast<uint32_t>(0x100 + nic->mrs.size());
  nic->access[mr->lkey] = access;
  nic->mrs.push_back(std::move(mr));
  ++nic->open_mrs;
  return nic->mrs.back().get();
}

const v::verbs::Api& fake_api() {
  static v::verbs::Api api = [] {
    v::verbs::Api a;
    a.get_device_list = [](int* n) -> ibv_device** {
      *n = 1;
      return nic->list;
    };
    a.free_device_list = [](ibv_device**) {};
    a.get_device_name = [](ibv_device*) -> const char* { return "fake0"; };
    a.open_device = [](ibv_device*) -> ibv_context* {
      nic->ctx_open = true;
      return &nic->ctx;
    };
    a.close_device = [](ibv_context*) {
      nic->ctx_open = false;
      return 0;
    };
    a.alloc_pd = [](ibv_context*) -> ibv_pd* {
      nic->pd_open = true;
      return &nic->pd;
    };
    a.dealloc_pd = [](ibv_pd*) {
      nic->pd_open = false;
      return 0;
    };
    a.reg_mr = [](ibv_pd*, void* addr, size_t len, int access) -> ibv_mr* {
      if (nic->registrations++ == 0 && nic->faults.reg_errno) {
        errno = nic->faults.reg_errno;
        return nullptr;
      }
      return new_mr(addr, len, access);
    };
    a.reg_dmabuf_mr = [](ibv_pd*, uint64_t offset, size_t len, uint64_t iova, int, int access) -> ibv_mr* {
      nic->dmabuf_offset = offset;
      nic->dmabuf_length = len;
      if (nic->faults.reg_dmabuf_errno) {
        errno = nic->faults.reg_dmabuf_errno;
        return nullptr;
      }
      return new_mr(reinterpret_cast<void*>(iova), len, access);
    };
    a.dereg_mr = [](ibv_mr*) {
      --nic->open_mrs;
      return 0;
    };
    a.create_cq = [](ibv_context*, int, void*, ibv_comp_channel*, int) -> ibv_cq* {
      if (nic->faults.no_cq) {
        errno = ENOMEM;
        return nullptr;
      }
      nic->cq_open = true;
      return &nic->cq;
    };
    a.destroy_cq = [](ibv_cq*) {
      nic->cq_open = false;
      return 0;
    };
    a.create_qp = [](ibv_pd*, ibv_qp_init_attr*) -> ibv_qp* {
      ibv_qp* q = &nic->qp[nic->open_qps++ % 2];
      return q;
    };
    a.modify_qp = [](ibv_qp*, ibv_qp_attr* attr, int) {
      if (attr->qp_state == IBV_QPS_RTR) nic->path_mtu = attr->path_mtu;
      return attr->qp_state == IBV_QPS_RTS ? nic->faults.modify_errno : 0;
    };
    a.destroy_qp = [](ibv_qp*) {
      --nic->open_qps;
      return 0;
    };
    a.wc_status_str = [](ibv_wc_status s) -> const char* { return s == IBV_WC_REM_ACCESS_ERR ? "remote access error" : "other status"; };
    return a;
  }();
  return api;
}

// One fake NIC per test; checks that the loopback released everything it made.
class FakeNicTest : public ::testing::Test {
 protected:
  void SetUp() override {
    nic_ = std::make_unique<FakeNic>();
    nic = nic_.get();
    nic->ctx.device = &nic->device;
    nic->ctx.ops.post_send = fake_post_send;
    nic->ctx.ops.post_recv = fake_post_recv;
    nic->ctx.ops.poll_cq = fake_poll_cq;
    nic->pd.context = &nic->ctx;
    nic->cq.context = &nic->ctx;
    for (int i = 0; i < 2; ++i) {
      nic->qp[i].context = &nic->ctx;
      nic->qp[i].pd = &nic->pd;
      nic->qp[i].qp_num = 0x40 + static_cast<uint32_t>(i);
    }
  }
  void TearDown() override {
    EXPECT_EQ(nic->open_mrs, 0) << "memory regions left registered";
    EXPECT_EQ(nic->open_qps, 0) << "queue pairs left";
    EXPECT_FALSE(nic->cq_open || nic->pd_open || nic->ctx_open) << "CQ, PD or context left open";
    nic = nullptr;
  }

  static v::RdmaDevice device() {
    v::RdmaDevice d;
    d.name = "fake0";
    d.kernel_driver = "fake_hca";
    d.vendor_id = 0x02c9;
    d.ports.push_back(port());
    return d;
  }
  static v::PortInfo port() {
    v::PortInfo p;
    p.port = 1;
    p.state = 4;  // ACTIVE
    p.state_name = "ACTIVE";
    p.ethernet = true;
    p.active_mtu = IBV_MTU_1024;
    v::GidEntry g;
    g.index = 0;
    g.type = v::GidType::roce_v2;
    g.raw = {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x50, 0x54, 0, 0xff, 0xfe, 0x12, 0x34, 0x56};
    p.gids = {g};
    p.gid = g;
    return p;
  }
  v::LoopbackOptions options() const {
    v::LoopbackOptions o;
    o.api = &fake_api();
    o.timeout_ms = 200;
    return o;
  }
  v::ComboResult loopback(v::MemorySource& target, v::Method m = v::Method::reg_mr) {
    const v::RdmaDevice d = device();
    return v::run_loopback(d, d.ports[0], target, m, options());
  }

  std::unique_ptr<FakeNic> nic_;
};

constexpr uint64_t kDmabufOffset = 3 * 4096;  // where the memory under test starts in its dma-buf

// Memory under test in this process; `device` pretends it is device memory (a
// gdrpeer BAR or GPU memory) for the registration rules, and may offer a dma-buf.
class Buffer final : public v::MemorySource {
 public:
  Buffer(size_t n, v::SourceKind k, bool with_dmabuf) : bytes_(n), kind_(k) {
    size_ = n;
    address_ = bytes_.data();
    if (with_dmabuf)
      dmabuf_ = v::DmaBufRef{-1, kDmabufOffset};
    else
      dmabuf_problem_ = "no dma-buf in this test";
  }
  v::SourceKind kind() const override { return kind_; }
  std::string description() const override { return "test buffer"; }
  bool is_device_memory() const override { return kind_ != v::SourceKind::host && kind_ != v::SourceKind::hugepage; }
  void write(size_t off, const uint8_t* src, size_t len) override { std::memcpy(bytes_.data() + off, src, len); }
  void read(size_t off, uint8_t* dst, size_t len) override { std::memcpy(dst, bytes_.data() + off, len); }

 private:
  std::vector<uint8_t> bytes_;
  v::SourceKind kind_;
};

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

bool peer_memory_client_loaded() {
  std::error_code ec;
  return std::filesystem::exists("/sys/kernel/mm/memory_peers", ec) || std::filesystem::exists("/sys/module/nvidia_peermem", ec);
}

}  // namespace

TEST_F(FakeNicTest, CorrectHardwarePasses) {
  for (auto kind : {v::SourceKind::host, v::SourceKind::gdrpeer})
    for (auto method : {v::Method::reg_mr, v::Method::dmabuf}) {
      SCOPED_TRACE(v::source_name(kind) + " " + v::method_name(method));
      Buffer target(4096, kind, true);
      auto r = loopback(target, method);
      EXPECT_EQ(r.outcome, v::Outcome::pass) << r.reason;
      ASSERT_EQ(r.transfers.size(), 3u);
      for (const auto& c : r.transfers) {
        EXPECT_TRUE(c.ok) << c.op << ": " << c.detail;
        EXPECT_EQ(c.detail, "all 4096 bytes match");
      }
      EXPECT_EQ(r.transfers[0].op, "RDMA WRITE");
      EXPECT_EQ(r.transfers[1].op, "RDMA READ");
      EXPECT_EQ(r.transfers[2].op, "SEND");
      EXPECT_EQ(v::exit_code_for({r}), v::kExitPass);
      if (method == v::Method::dmabuf) {
        EXPECT_EQ(nic->dmabuf_offset, kDmabufOffset);  // the memory's place in its dma-buf
        EXPECT_EQ(nic->dmabuf_length, 4096u);
      }
      TearDown();
      SetUp();
    }
}

TEST_F(FakeNicTest, ATransferThatMovesNothingFails) {
  // The NIC reports success and leaves the destination as it was: the checker fills every
  // destination with bytes that differ from what should arrive, so this cannot pass.
  const std::pair<Op, const char*> ops[] = {{Op::write, "RDMA WRITE"}, {Op::read, "RDMA READ"}, {Op::send, "SEND"}};
  for (const auto& [op, name] : ops) {
    SCOPED_TRACE(name);
    SetUp();
    nic->faults.dropped = op;
    Buffer target(4096, v::SourceKind::host, false);
    auto r = loopback(target);
    EXPECT_EQ(r.outcome, v::Outcome::fail) << r.reason;
    EXPECT_TRUE(contains(r.reason, std::string(name) + ": 4096 of 4096 bytes differ")) << r.reason;
    TearDown();
  }
  SetUp();
}

TEST_F(FakeNicTest, TheTargetIsRegisteredForWhatTheNicDoesToIt) {
  // An HCA refuses an RDMA READ or WRITE whose memory region lacks the remote right: the
  // fake does too, so a registration without it shows up as a failed transfer.
  Buffer target(4096, v::SourceKind::host, false);
  auto r = loopback(target);
  EXPECT_EQ(r.outcome, v::Outcome::pass) << r.reason;
  ASSERT_FALSE(nic->mrs.empty());
  const int want = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  EXPECT_EQ(nic->access[nic->mrs[0]->rkey], want);
}

TEST_F(FakeNicTest, OneWrongByteInAnyTransferFails) {
  const std::pair<Op, const char*> ops[] = {{Op::write, "RDMA WRITE"}, {Op::read, "RDMA READ"}, {Op::send, "SEND"}};
  for (const auto& [op, name] : ops)
    for (size_t at : {size_t{0}, size_t{1234}, size_t{4095}}) {
      SCOPED_TRACE(std::string(name) + " byte " + std::to_string(at));
      SetUp();
      nic->faults.corrupt = op;
      nic->faults.corrupt_at = at;
      Buffer target(4096, v::SourceKind::host, false);
      auto r = loopback(target);
      EXPECT_EQ(r.outcome, v::Outcome::fail);
      EXPECT_TRUE(contains(r.reason, std::string(name) + ": 1 of 4096 bytes differ, first at offset " + std::to_string(at))) << r.reason;
      ASSERT_EQ(r.transfers.size(), 3u);
      // The READ reads the target back: a byte the WRITE got wrong is wrong there too.
      for (const auto& c : r.transfers) {
        const bool hit = c.op == name || (op == Op::write && c.op == "RDMA READ");
        EXPECT_EQ(c.ok, !hit) << c.op << ": " << c.detail;
      }
      EXPECT_EQ(v::exit_code_for({r}), v::kExitFail);
      TearDown();
    }
  SetUp();  // for the fixture's own TearDown
}

TEST_F(FakeNicTest, UnexpectedRegistrationErrnosFail) {
  // Host memory: no errno means "this node cannot"; all of them are failures.
  for (int err : {EIO, EBUSY, EACCES, ENXIO, EFAULT, EINVAL, ENOMEM, EPERM}) {
    SCOPED_TRACE(strerrorname_np(err));
    SetUp();
    nic->faults.reg_errno = err;
    Buffer target(4096, v::SourceKind::host, false);
    auto r = loopback(target);
    EXPECT_EQ(r.outcome, v::Outcome::fail) << r.reason;
    EXPECT_TRUE(contains(r.reason, std::string("ibv_reg_mr on host memory failed with ") + strerrorname_np(err))) << r.reason;
    EXPECT_EQ(v::exit_code_for({r}), v::kExitFail);
    TearDown();
  }
  // Device memory through ibv_reg_mr: errnos that are not "cannot pin this" fail.
  for (int err : {EIO, EBUSY, ENXIO, EACCES, ENOMEM, ENODEV}) {
    SCOPED_TRACE(std::string("device memory ") + strerrorname_np(err));
    SetUp();
    nic->faults.reg_errno = err;
    Buffer target(4096, v::SourceKind::gdrpeer, false);
    auto r = loopback(target);
    EXPECT_EQ(r.outcome, v::Outcome::fail) << r.reason;
    TearDown();
  }
  // dma-buf registration: only "the driver has no dma-buf import" is unsupported.
  for (int err : {EIO, EBUSY, EINVAL, EFAULT, ENOMEM, EACCES, ENXIO}) {
    SCOPED_TRACE(std::string("dmabuf ") + strerrorname_np(err));
    SetUp();
    nic->faults.reg_dmabuf_errno = err;
    Buffer target(4096, v::SourceKind::gdrpeer, true);
    auto r = loopback(target, v::Method::dmabuf);
    EXPECT_EQ(r.outcome, v::Outcome::fail) << r.reason;
    EXPECT_TRUE(contains(r.reason, "ibv_reg_dmabuf_mr on gdrpeer device memory failed with")) << r.reason;
    EXPECT_TRUE(contains(r.reason, "peer-to-peer DMA")) << r.reason;  // the hint for a hardware NIC
    TearDown();
  }
  SetUp();
}

TEST_F(FakeNicTest, DocumentedCannotDoErrnosAreUnsupported) {
  for (int err : {EOPNOTSUPP, ENOSYS, EPROTONOSUPPORT}) {
    SCOPED_TRACE(strerrorname_np(err));
    SetUp();
    nic->faults.reg_dmabuf_errno = err;
    Buffer target(4096, v::SourceKind::gdrpeer, true);
    auto r = loopback(target, v::Method::dmabuf);
    EXPECT_EQ(r.outcome, v::Outcome::unsupported) << r.reason;
    EXPECT_TRUE(contains(r.reason, "fake0 cannot import dma-buf memory: its driver (fake_hca)")) << r.reason;
    EXPECT_EQ(v::exit_code_for({r}), v::kExitUnsupported);
    TearDown();
  }
  if (!peer_memory_client_loaded()) {
    for (int err : {EFAULT, EINVAL, EOPNOTSUPP, EPERM}) {
      SCOPED_TRACE(std::string("reg_mr on device memory ") + strerrorname_np(err));
      SetUp();
      nic->faults.reg_errno = err;
      Buffer target(4096, v::SourceKind::gdrpeer, false);
      auto r = loopback(target);
      EXPECT_EQ(r.outcome, v::Outcome::unsupported) << r.reason;
      EXPECT_TRUE(contains(r.reason, "no peer-memory client is loaded")) << r.reason;
      TearDown();
    }
  }
  SetUp();
}

TEST_F(FakeNicTest, VerbErrorsAndBadCompletionsFail) {
  struct Case {
    const char* what;
    Faults f;
    const char* reason;
  };
  std::vector<Case> cases;
  auto add = [&](const char* what, const char* reason, auto&& set) {
    Case c{what, {}, reason};
    set(c.f);
    cases.push_back(c);
  };
  add("WRITE completes with an error", "RDMA WRITE of 4 KiB (4096 bytes) completed with status \"remote access error\"",
      [](Faults& f) { f.bad_status = Op::write; });
  add("READ completes with an error", "RDMA READ of 4 KiB (4096 bytes) completed with status \"remote access error\"",
      [](Faults& f) { f.bad_status = Op::read; });
  add("SEND completes with an error", "SEND of 4 KiB (4096 bytes) completed with status \"remote access error\"",
      [](Faults& f) { f.bad_status = Op::send; });
  add("WRITE never completes", "no completion for RDMA WRITE of 4 KiB (4096 bytes) within 200 ms", [](Faults& f) { f.lost = Op::write; });
  add("READ never completes", "no completion for RDMA READ", [](Faults& f) { f.lost = Op::read; });
  add("SEND never completes", "no completion for SEND", [](Faults& f) { f.lost = Op::send; });
  add("post_send refused", "ibv_post_send on fake0 failed: ENOMEM", [](Faults& f) { f.post_send_errno = ENOMEM; });
  add("modify_qp(RTS) refused", "ibv_modify_qp(RTS) on fake0 failed: EINVAL", [](Faults& f) { f.modify_errno = EINVAL; });
  add("no completion queue", "ibv_create_cq on fake0 failed: ENOMEM", [](Faults& f) { f.no_cq = true; });
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what);
    SetUp();
    nic->faults = c.f;
    Buffer target(4096, v::SourceKind::host, false);
    auto r = loopback(target);
    EXPECT_EQ(r.outcome, v::Outcome::fail) << r.reason;
    EXPECT_TRUE(contains(r.reason, c.reason)) << r.reason;
    EXPECT_EQ(v::exit_code_for({r}), v::kExitFail);
    TearDown();
  }
  SetUp();
}

TEST_F(FakeNicTest, TheEngineExitsFailedWhenAnyCombinationFails) {
  // Through run_verify: host memory, one port, both methods; the READ result is corrupted.
  v::RdmaInventory inv;
  inv.stack_loaded = true;
  inv.devices.push_back(device());
  v::VerifyOptions o;
  o.sources = {v::SourceKind::host};
  o.source.size = 8192;
  o.api = &fake_api();
  o.timeout_ms = 200;
  auto clean = v::run_verify(o, inv);
  ASSERT_EQ(clean.results.size(), 2u);
  EXPECT_EQ(clean.results[0].outcome, v::Outcome::pass) << clean.results[0].reason;
  // Host memory has no dma-buf unless udmabuf is there: unsupported, not a failure.
  EXPECT_NE(clean.results[1].outcome, v::Outcome::fail) << clean.results[1].reason;
  EXPECT_NE(clean.exit_code, v::kExitFail);

  nic->faults.corrupt = Op::read;
  nic->faults.corrupt_at = 8191;
  nic->registrations = 0;
  auto bad = v::run_verify(o, inv);
  EXPECT_EQ(bad.results[0].outcome, v::Outcome::fail) << bad.results[0].reason;
  EXPECT_EQ(bad.exit_code, v::kExitFail);
  EXPECT_TRUE(contains(bad.summary, "1 failed: at least one combination failed")) << bad.summary;
}

TEST_F(FakeNicTest, MtuOptionCapsThePathMtu) {
  // perftest's -m (issue 26): the path MTU is the smaller of the port's active MTU (1024 here)
  // and the one asked for; without -m it is the port's.
  const std::pair<int, int> cases[] = {{0, IBV_MTU_1024}, {512, IBV_MTU_512}, {256, IBV_MTU_256}, {4096, IBV_MTU_1024}};
  for (const auto& [asked, want] : cases) {
    SCOPED_TRACE(asked);
    SetUp();
    Buffer target(4096, v::SourceKind::host, false);
    auto o = options();
    o.mtu = asked;
    const v::RdmaDevice d = device();
    auto r = v::run_loopback(d, d.ports[0], target, v::Method::reg_mr, o);
    EXPECT_EQ(r.outcome, v::Outcome::pass) << r.reason;
    EXPECT_EQ(nic->path_mtu, want);
    TearDown();
  }
  SetUp();
}

TEST_F(FakeNicTest, IterationsCountTheBenchOperations) {
  // perftest's -n (issue 26): the latency and each bandwidth measurement post exactly N operations
  // instead of running for --bench-seconds (here 60 s, which the test would notice).
  Buffer target(4096, v::SourceKind::host, false);
  auto o = options();
  o.bench = true;
  o.bench_sizes = {4096};
  o.bench_seconds = 60;
  o.iterations = 7;
  const v::RdmaDevice d = device();
  auto r = v::run_loopback(d, d.ports[0], target, v::Method::reg_mr, o);
  EXPECT_EQ(r.outcome, v::Outcome::pass) << r.reason;
  ASSERT_EQ(r.bench.size(), 1u);
  EXPECT_EQ(r.bench[0].iterations, 7u);
  EXPECT_EQ(nic->write_posts, 1 + 7 + 7);  // the checked WRITE, the latency, the bandwidth
  EXPECT_EQ(nic->read_posts, 1 + 7);
}

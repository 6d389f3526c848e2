// Unit tests of the `gdrpeer verify` engine that need neither an RDMA device nor a
// GPU: size parsing, GID choice, the words for registration failures, exit codes,
// memory sources that exist on any Linux machine, and the report formats.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "gdrpeer/dynload/cuda.hpp"
#include "gdrpeer/verify/engine.hpp"
#include "gdrpeer/verify/loopback.hpp"
#include "gdrpeer/verify/memory_source.hpp"
#include "gdrpeer/verify/rdma.hpp"
#include "gdrpeer/verify/report.hpp"
#include "gdrpeer/verify/sizes.hpp"
#include "gdrpeer/verify/verbs_api.hpp"

namespace v = gdrpeer::verify;

namespace {

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

v::GidEntry gid(uint32_t index, v::GidType type, std::initializer_list<uint8_t> bytes) {
  v::GidEntry e;
  e.index = index;
  e.type = type;
  size_t i = 0;
  for (auto b : bytes) e.raw[i++] = b;
  return e;
}

v::GidEntry link_local(uint32_t index, v::GidType type) {
  return gid(index, type, {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x50, 0x54, 0, 0xff, 0xfe, 0x12, 0x34, 0x56});
}
v::GidEntry ipv4(uint32_t index, v::GidType type) { return gid(index, type, {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 192, 0, 2, 1}); }
v::GidEntry global6(uint32_t index, v::GidType type) {
  return gid(index, type, {0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1});
}

// A memory source whose kind we choose, for the failure explanations.
class FakeSource final : public v::MemorySource {
 public:
  explicit FakeSource(v::SourceKind k) : kind_(k) { size_ = 4096; }
  v::SourceKind kind() const override { return kind_; }
  std::string description() const override { return "fake"; }
  bool is_device_memory() const override {
    return kind_ == v::SourceKind::gdrpeer || kind_ == v::SourceKind::cuda || kind_ == v::SourceKind::cuda_vmm;
  }
  void write(size_t, const uint8_t*, size_t) override {}
  void read(size_t, uint8_t*, size_t) override {}

 private:
  v::SourceKind kind_;
};

v::RdmaDevice rxe0() {
  v::RdmaDevice d;
  d.name = "rxe0";
  d.kernel_driver = "rdma_rxe";
  d.software = true;
  d.vendor_id = 0xffffff;
  return d;
}

bool peer_memory_client_loaded() {
  std::error_code ec;
  return std::filesystem::exists("/sys/kernel/mm/memory_peers", ec) || std::filesystem::exists("/sys/module/nvidia_peermem", ec);
}

}  // namespace

// ---- sizes ------------------------------------------------------------------

TEST(VerifySizes, Parses) {
  std::string why;
  EXPECT_EQ(v::parse_size("4096", &why), 4096u);
  EXPECT_EQ(v::parse_size("4K", &why), 4096u);
  EXPECT_EQ(v::parse_size("64KiB", &why), 65536u);
  EXPECT_EQ(v::parse_size("1m", &why), 1u << 20);
  EXPECT_EQ(v::parse_size("2G", &why), 2ull << 30);
  EXPECT_EQ(v::parse_size("0", &why), 0u);  // syntactically fine; the CLI rejects 0
}

TEST(VerifySizes, RejectsWithReason) {
  std::string why;
  EXPECT_FALSE(v::parse_size("", &why));
  EXPECT_TRUE(contains(why, "is empty"));
  EXPECT_FALSE(v::parse_size("abc", &why));
  EXPECT_TRUE(contains(why, "'abc' is not a size"));
  EXPECT_FALSE(v::parse_size("3X", &why));
  EXPECT_TRUE(contains(why, "unknown unit 'X'"));
  EXPECT_FALSE(v::parse_size("-1", &why));
  EXPECT_FALSE(v::parse_size("99999999999999999999", &why));
  EXPECT_TRUE(contains(why, "too large"));
  EXPECT_FALSE(v::parse_size("17179869184T", &why));  // 2^34 TiB overflows
  EXPECT_TRUE(contains(why, "too large"));
}

TEST(VerifySizes, Lists) {
  std::string why;
  auto l = v::parse_size_list("4K,64K,1M", &why);
  ASSERT_TRUE(l);
  EXPECT_EQ(*l, (std::vector<uint64_t>{4096, 65536, 1 << 20}));
  EXPECT_FALSE(v::parse_size_list("4K,,1M", &why));
  EXPECT_FALSE(v::parse_size_list("4K,zz", &why));
  EXPECT_TRUE(contains(why, "'zz'"));
}

// ---- GIDs -------------------------------------------------------------------

TEST(VerifyGid, Format) {
  EXPECT_EQ(v::format_gid(link_local(0, v::GidType::roce_v2).raw), "fe80::5054:ff:fe12:3456");
  EXPECT_EQ(v::format_gid(ipv4(0, v::GidType::roce_v2).raw), "::ffff:192.0.2.1");
  EXPECT_TRUE(v::gid_is_link_local(link_local(0, v::GidType::roce_v2).raw));
  EXPECT_FALSE(v::gid_is_link_local(global6(0, v::GidType::roce_v2).raw));
  EXPECT_TRUE(v::gid_is_ipv4_mapped(ipv4(0, v::GidType::roce_v2).raw));
  EXPECT_TRUE(v::gid_is_zero(v::RawGid{}));
}

TEST(VerifyGid, RxeWithOnlyLinkLocalUsesIt) {
  // What rxe on an interface without any IP address has: link-local, v1 and v2.
  std::vector<v::GidEntry> g = {link_local(0, v::GidType::roce_v1), link_local(1, v::GidType::roce_v2)};
  std::string why;
  auto s = v::select_gid(true, g, &why);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->index, 1u);  // RoCE v2 preferred
}

TEST(VerifyGid, RoceV2Ipv4BeatsLinkLocalAndV1) {
  std::vector<v::GidEntry> g = {link_local(0, v::GidType::roce_v1), link_local(1, v::GidType::roce_v2), ipv4(2, v::GidType::roce_v1),
                                ipv4(3, v::GidType::roce_v2), global6(4, v::GidType::roce_v2)};
  std::string why;
  EXPECT_EQ(v::select_gid(true, g, &why)->index, 3u);
  g.erase(g.begin() + 3);  // without the v2 IPv4 GID: global IPv6 v2
  EXPECT_EQ(v::select_gid(true, g, &why)->index, 4u);
}

TEST(VerifyGid, RoceV1OnlyStillWorks) {
  std::vector<v::GidEntry> g = {link_local(0, v::GidType::roce_v1), ipv4(1, v::GidType::roce_v1)};
  std::string why;
  EXPECT_EQ(v::select_gid(true, g, &why)->index, 1u);
}

// perftest's -x IDX (ib_write_bw -x 3): the port uses that index, not select_gid's choice.
TEST(VerifyGid, GidIndexOptionUsesThatIndexOrNone) {
  v::RdmaInventory inv;
  inv.devices.emplace_back();
  v::PortInfo port;
  port.ethernet = true;
  port.gids = {link_local(0, v::GidType::roce_v1), link_local(1, v::GidType::roce_v2), ipv4(2, v::GidType::roce_v1),
               ipv4(3, v::GidType::roce_v2), v::GidEntry{}};
  port.gids[4].index = 4;  // all-zero GID: an empty table slot
  std::string why;
  port.gid = v::select_gid(true, port.gids, &why);
  ASSERT_EQ(port.gid->index, 3u);
  inv.devices[0].ports.push_back(port);
  v::use_gid_index(inv, 2);
  ASSERT_TRUE(inv.devices[0].ports[0].gid);
  EXPECT_EQ(inv.devices[0].ports[0].gid->index, 2u);
  EXPECT_EQ(inv.devices[0].ports[0].gid->type, v::GidType::roce_v1);
  for (int absent : {4, 7}) {
    v::use_gid_index(inv, absent);
    EXPECT_FALSE(inv.devices[0].ports[0].gid) << absent;
    EXPECT_TRUE(contains(inv.devices[0].ports[0].gid_problem, "no GID at index " + std::to_string(absent))) << absent;
  }
}

TEST(VerifyGid, InfiniBandUsesGidZero) {
  std::vector<v::GidEntry> g = {gid(0, v::GidType::ib, {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x0c, 0x42, 0xa1, 3, 0, 0x9e, 0x5c, 0x10})};
  std::string why;
  EXPECT_EQ(v::select_gid(false, g, &why)->index, 0u);
  EXPECT_FALSE(v::select_gid(false, {}, &why));
  EXPECT_TRUE(contains(why, "no GID 0"));
}

TEST(VerifyGid, NoUsableGidSaysWhy) {
  std::string why;
  EXPECT_FALSE(v::select_gid(true, {}, &why));
  EXPECT_TRUE(contains(why, "no usable RoCE GID"));
  // An IB-typed entry on an Ethernet port is not usable either.
  EXPECT_FALSE(v::select_gid(true, {link_local(0, v::GidType::ib)}, &why));
}

// ---- exit codes ----------------------------------------------------------------

TEST(VerifyExit, WorstResultWins) {
  auto r = [](v::Outcome o) {
    v::ComboResult c;
    c.outcome = o;
    return c;
  };
  EXPECT_EQ(v::exit_code_for({}), v::kExitNothing);
  EXPECT_EQ(v::exit_code_for({r(v::Outcome::pass), r(v::Outcome::pass)}), v::kExitPass);
  EXPECT_EQ(v::exit_code_for({r(v::Outcome::pass), r(v::Outcome::unsupported)}), v::kExitUnsupported);
  EXPECT_EQ(v::exit_code_for({r(v::Outcome::unsupported), r(v::Outcome::fail), r(v::Outcome::pass)}), v::kExitFail);
  EXPECT_EQ(v::kExitPass, 0);
  // The meanings of `gdrpeer check`'s 1 (works with reservations) and 2 (does not work).
  EXPECT_EQ(v::kExitUnsupported, 1);
  EXPECT_EQ(v::kExitFail, 2);
  EXPECT_EQ(v::kExitNothing, 3);
  EXPECT_EQ(v::exit_meaning(3), "nothing to verify");
}

// ---- words for registration failures ---------------------------------------------

TEST(VerifyExplain, DmabufOnRxeIsUnsupportedSoftwareDevice) {
  FakeSource gdr(v::SourceKind::gdrpeer);
  auto f = v::explain_registration_failure(EOPNOTSUPP, v::Method::dmabuf, rxe0(), gdr);
  EXPECT_EQ(f.outcome, v::Outcome::unsupported);
  EXPECT_TRUE(contains(f.reason, "rxe0 cannot import dma-buf memory: software RDMA device")) << f.reason;
  EXPECT_TRUE(contains(f.reason, "EOPNOTSUPP")) << f.reason;
}

TEST(VerifyExplain, DmabufMrNeedsLinux512) {
  const std::string old = v::dmabuf_mr_kernel_problem("5.10.0-33-amd64");
  EXPECT_EQ(old,
            "ibv_reg_dmabuf_mr does not exist before Linux 5.12 (this kernel is "
            "5.10.0-33-amd64): no RDMA device can register dma-buf memory here");
  EXPECT_FALSE(v::dmabuf_mr_kernel_problem("5.11.22").empty());
  EXPECT_TRUE(v::dmabuf_mr_kernel_problem("5.12.0").empty());
  EXPECT_TRUE(v::dmabuf_mr_kernel_problem("6.1.0-56-amd64").empty());
  EXPECT_TRUE(v::dmabuf_mr_kernel_problem("7.2.13+deb14-amd64").empty());
  EXPECT_TRUE(v::dmabuf_mr_kernel_problem("garbage").empty());
}

TEST(VerifyExplain, DmabufOnHardwareWithoutSupport) {
  FakeSource gpu(v::SourceKind::cuda);
  v::RdmaDevice hw;
  hw.name = "mlx4_0";
  hw.kernel_driver = "mlx4_core";
  auto f = v::explain_registration_failure(EOPNOTSUPP, v::Method::dmabuf, hw, gpu);
  EXPECT_EQ(f.outcome, v::Outcome::unsupported);
  EXPECT_TRUE(contains(f.reason, "mlx4_0 cannot import dma-buf memory: its driver (mlx4_core)")) << f.reason;
  // Any other errno on the dma-buf path is a failure, with the errno named.
  auto g = v::explain_registration_failure(EINVAL, v::Method::dmabuf, hw, gpu);
  EXPECT_EQ(g.outcome, v::Outcome::fail);
  EXPECT_TRUE(contains(g.reason, "ibv_reg_dmabuf_mr on GPU memory failed with EINVAL")) << g.reason;
}

TEST(VerifyExplain, RegMrOnDeviceMemoryWithoutPeerMemoryClient) {
  if (peer_memory_client_loaded()) GTEST_SKIP() << "a peer-memory client is loaded here";
  FakeSource gpu(v::SourceKind::cuda);
  auto f = v::explain_registration_failure(EFAULT, v::Method::reg_mr, rxe0(), gpu);
  EXPECT_EQ(f.outcome, v::Outcome::unsupported);
  EXPECT_TRUE(contains(f.reason,
                       "ibv_reg_mr on GPU memory failed with EFAULT (Bad address): no peer-memory "
                       "client is loaded — load gdrpeer's client or nvidia-peermem, or use the "
                       "dma-buf path"))
      << f.reason;
  FakeSource gdr(v::SourceKind::gdrpeer);
  auto g = v::explain_registration_failure(EFAULT, v::Method::reg_mr, rxe0(), gdr);
  EXPECT_TRUE(contains(g.reason, "ibv_reg_mr on gdrpeer device memory failed with EFAULT")) << g.reason;
  EXPECT_TRUE(contains(g.reason, "cannot pin PCI BAR pages")) << g.reason;
}

TEST(VerifyExplain, RegMrOnHostMemoryNamesTheLockLimit) {
  FakeSource host(v::SourceKind::host);
  auto f = v::explain_registration_failure(ENOMEM, v::Method::reg_mr, rxe0(), host);
  EXPECT_EQ(f.outcome, v::Outcome::fail);
  EXPECT_TRUE(contains(f.reason, "ulimit -l")) << f.reason;
}

// ---- memory sources -------------------------------------------------------------

TEST(VerifySource, HostMemoryRoundTrips) {
  v::SourceOptions o;
  o.size = 10000;  // rounded up to whole pages
  o.udmabuf_path = "/nonexistent/udmabuf";
  auto s = v::prepare_source(v::SourceKind::host, o);
  ASSERT_EQ(s.state, v::SourceSetup::State::ready) << s.reason;
  ASSERT_TRUE(s.source);
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  EXPECT_EQ(s.source->size() % page, 0u);
  EXPECT_GE(s.source->size(), 10000u);
  EXPECT_NE(s.source->address(), nullptr);
  EXPECT_FALSE(s.source->is_device_memory());
  std::vector<uint8_t> in(s.source->size()), out(s.source->size());
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<uint8_t>(i * 7 + 3);
  s.source->write(0, in.data(), in.size());
  s.source->read(0, out.data(), out.size());
  EXPECT_EQ(in, out);
  // No udmabuf at that path: the dma-buf path says so.
  EXPECT_FALSE(s.source->dmabuf());
  EXPECT_TRUE(contains(s.source->dmabuf_problem(), "/nonexistent/udmabuf is absent")) << s.source->dmabuf_problem();
}

TEST(VerifySource, HugePagesAbsentWhenNoneConfigured) {
  std::ifstream in("/proc/meminfo");
  std::string line;
  long total = -1;
  while (std::getline(in, line))
    if (line.rfind("HugePages_Total:", 0) == 0) total = std::stol(line.substr(16));
  if (total != 0) GTEST_SKIP() << "this machine has huge pages configured (" << total << ")";
  v::SourceOptions o;
  auto s = v::prepare_source(v::SourceKind::hugepage, o);
  EXPECT_EQ(s.state, v::SourceSetup::State::absent);
  EXPECT_TRUE(contains(s.reason, "no huge pages are configured")) << s.reason;
  EXPECT_FALSE(s.source);
}

namespace {

// The gdrpeer memory source prepared on the device node `path`.
v::SourceSetup gdrpeer_source_on(const std::string& path) {
  v::SourceOptions o;
  o.gdrpeer_path = path;
  return v::prepare_source(v::SourceKind::gdrpeer, o);
}

}  // namespace

TEST(VerifySource, GdrpeerAbsentIsReportedWithErrno) {
  auto s = gdrpeer_source_on("/nonexistent/gdrpeer");
  EXPECT_EQ(s.state, v::SourceSetup::State::absent);
  EXPECT_TRUE(contains(s.reason, "open /nonexistent/gdrpeer: ENOENT")) << s.reason;
}

TEST(VerifySource, GdrpeerOnANonGdrpeerFileIsAnError) {
  auto s = gdrpeer_source_on("/dev/null");
  EXPECT_EQ(s.state, v::SourceSetup::State::error);
  EXPECT_TRUE(contains(s.reason, "not a gdrpeer device")) << s.reason;
}

TEST(VerifySource, MissingLibcudaIsAbsentWithReason) {
  v::SourceOptions o;
  o.libcuda = "libcuda-gdrpeer-test-missing.so.1";
  for (auto k : {v::SourceKind::cuda, v::SourceKind::cuda_vmm}) {
    auto s = v::prepare_source(k, o);
    EXPECT_EQ(s.state, v::SourceSetup::State::absent);
    EXPECT_TRUE(contains(s.reason, "cannot load libcuda-gdrpeer-test-missing.so.1")) << s.reason;
  }
  std::string why;
  EXPECT_EQ(gdrpeer::cuda::load(&why, "libcuda-gdrpeer-test-missing.so.1"), nullptr);
  EXPECT_TRUE(contains(why, "no NVIDIA driver")) << why;
}

TEST(VerifySource, LibraryWithoutCudaSymbolsIsRejected) {
  // libc loads fine but is no CUDA driver: every entry point is missing.
  std::string why;
  EXPECT_EQ(gdrpeer::cuda::load(&why, "libc.so.6"), nullptr);
  EXPECT_TRUE(contains(why, "lacks cuInit")) << why;
  // The whole text, as the loader wrote it before it became one table (dynload/dl.hpp):
  // every missing required entry point in table order, the P2P group not among them.
  EXPECT_EQ(why,
            "libc.so.6 lacks cuInit, cuDriverGetVersion, cuDeviceGetCount, cuDeviceGet, cuDeviceGetName, "
            "cuDeviceGetAttribute, cuDeviceGetPCIBusId, cuDevicePrimaryCtxRetain, cuDevicePrimaryCtxRelease_v2, "
            "cuCtxSetCurrent, cuCtxSynchronize, cuMemAlloc_v2, cuMemFree_v2, cuMemGetInfo_v2, cuMemcpyHtoD_v2, "
            "cuMemcpyDtoH_v2, cuPointerSetAttribute (driver too old)");
}

TEST(VerifySource, LibraryWithoutVerbsSymbolsIsRejected) {
  std::string why;
  EXPECT_EQ(v::verbs::load(&why, "libc.so.6"), nullptr);
  EXPECT_EQ(why,
            "libc.so.6 lacks ibv_get_device_list, ibv_free_device_list, ibv_get_device_name, ibv_open_device, "
            "ibv_close_device, ibv_query_device, ibv_query_port, ibv_query_gid, ibv_alloc_pd, ibv_dealloc_pd, "
            "ibv_reg_mr, ibv_dereg_mr, ibv_create_cq, ibv_destroy_cq, ibv_create_qp, ibv_modify_qp, "
            "ibv_destroy_qp, ibv_wc_status_str");
  EXPECT_EQ(v::verbs::load(&why, "libibverbs-gdrpeer-test-missing.so.1"), nullptr);
  EXPECT_EQ(why.rfind("cannot load libibverbs-gdrpeer-test-missing.so.1: ", 0), 0u) << why;
  EXPECT_TRUE(why.ends_with(" (rdma-core's libibverbs1 is not installed)")) << why;
}

TEST(VerifySource, Names) {
  for (auto k : v::all_source_kinds()) EXPECT_EQ(v::parse_source(v::source_name(k)), k);
  EXPECT_FALSE(v::parse_source("gpu"));
  EXPECT_EQ(v::source_name(v::SourceKind::cuda_vmm), "cuda-vmm");
}

// ---- the engine with a made-up inventory -----------------------------------------

namespace {
v::RdmaInventory one_port(int state) {
  v::RdmaInventory inv;
  inv.stack_loaded = true;
  v::RdmaDevice d = rxe0();
  v::PortInfo p;
  p.port = 1;
  p.state = state;
  p.state_name = state == 4 ? "ACTIVE" : "DOWN";
  p.ethernet = true;
  p.gids = {link_local(0, v::GidType::roce_v2)};
  p.gid = p.gids[0];
  d.ports.push_back(p);
  inv.devices.push_back(d);
  return inv;
}

// A run over the gdrpeer source alone on the device node `path`, one method, one ACTIVE port.
v::VerifyReport verify_gdrpeer_on(const std::string& path, v::Method method) {
  v::VerifyOptions o;
  o.sources = {v::SourceKind::gdrpeer};
  o.source.gdrpeer_path = path;
  o.methods = {method};
  return v::run_verify(o, one_port(4));
}
}  // namespace

TEST(VerifyEngine, DeviceSelection) {
  auto inv = one_port(1);
  EXPECT_FALSE(v::check_device_selection(inv, {}));
  EXPECT_FALSE(v::check_device_selection(inv, {"rxe0"}));
  EXPECT_FALSE(v::check_device_selection(inv, {"rxe0:1"}));
  auto bad = v::check_device_selection(inv, {"mlx5_0"});
  ASSERT_TRUE(bad);
  EXPECT_EQ(*bad, "unknown RDMA device 'mlx5_0': this node has rxe0");
  bad = v::check_device_selection(inv, {"rxe0:2"});
  ASSERT_TRUE(bad);
  EXPECT_EQ(*bad, "rxe0 has no port 2 (it has 1)");
  v::RdmaInventory none;
  none.stack_loaded = true;
  EXPECT_TRUE(contains(*v::check_device_selection(none, {"rxe0"}), "has no RDMA device"));
}

TEST(VerifyEngine, NoRdmaDeviceIsNothingToVerify) {
  v::RdmaInventory inv;
  inv.stack_loaded = true;
  v::VerifyOptions o;
  o.sources = {v::SourceKind::host};
  o.source.size = 4096;
  auto rep = v::run_verify(o, inv);
  EXPECT_EQ(rep.exit_code, v::kExitNothing);
  EXPECT_TRUE(rep.results.empty());
  ASSERT_EQ(rep.sources.size(), 1u);
  EXPECT_EQ(rep.sources[0].state, v::SourceSetup::State::ready);  // still prepared and reported
  EXPECT_TRUE(contains(rep.summary, "nothing to verify"));
}

TEST(VerifyEngine, PortDownIsUnsupportedForEveryCombination) {
  v::VerifyOptions o;
  o.sources = {v::SourceKind::host};
  o.source.size = 4096;
  auto rep = v::run_verify(o, one_port(1 /* DOWN */));
  ASSERT_EQ(rep.results.size(), 2u);  // host x rxe0:1 x {reg_mr, dmabuf}
  for (const auto& r : rep.results) {
    EXPECT_EQ(r.outcome, v::Outcome::unsupported);
    EXPECT_EQ(r.reason, "rxe0 port 1 is DOWN, not ACTIVE");
  }
  EXPECT_EQ(rep.exit_code, v::kExitUnsupported);
}

TEST(VerifyEngine, RequestedSourceThatIsAbsentBecomesUnsupportedRows) {
  auto rep = verify_gdrpeer_on("/nonexistent/gdrpeer", v::Method::dmabuf);
  ASSERT_EQ(rep.results.size(), 1u);
  EXPECT_EQ(rep.results[0].outcome, v::Outcome::unsupported);
  EXPECT_TRUE(contains(rep.results[0].reason, "gdrpeer memory is absent: open /nonexistent/gdrpeer")) << rep.results[0].reason;
  EXPECT_EQ(rep.exit_code, v::kExitUnsupported);
}

TEST(VerifyEngine, SourceThatErrsMakesRowsFail) {
  auto rep = verify_gdrpeer_on("/dev/null", v::Method::reg_mr);
  ASSERT_EQ(rep.results.size(), 1u);
  EXPECT_EQ(rep.results[0].outcome, v::Outcome::fail);
  EXPECT_EQ(rep.exit_code, v::kExitFail);
}

TEST(VerifyEngine, AbsentSourcesAreSkippedWhenNotAsked) {
  v::VerifyOptions o;  // every source
  o.source.size = 4096;
  o.source.gdrpeer_path = "/nonexistent/gdrpeer";
  o.source.libcuda = "libcuda-gdrpeer-test-missing.so.1";
  auto rep = v::run_verify(o, one_port(1));
  EXPECT_EQ(rep.sources.size(), v::all_source_kinds().size());
  for (const auto& r : rep.results) {
    EXPECT_NE(r.source, "gdrpeer");
    EXPECT_NE(r.source, "cuda");
  }
}

// ---- reports ----------------------------------------------------------------------

TEST(VerifyReport, JsonAndTableCarryTheFacts) {
  v::VerifyOptions o;
  o.sources = {v::SourceKind::host};
  o.source.size = 4096;
  o.seed = 42;
  auto rep = v::run_verify(o, one_port(1));
  auto j = v::to_json(rep);
  EXPECT_EQ(j["exit_code"], 1);  // nothing failed, some unsupported (2 before issue 25)
  EXPECT_EQ(j["seed"], 42);
  EXPECT_EQ(j["rdma"]["devices"][0]["name"], "rxe0");
  EXPECT_EQ(j["rdma"]["devices"][0]["ports"][0]["gids"][0]["gid"], "fe80::5054:ff:fe12:3456");
  EXPECT_EQ(j["results"].size(), 2u);
  EXPECT_EQ(j["results"][0]["result"], "unsupported");
  EXPECT_EQ(j["results"][1]["method"], "ibv_reg_dmabuf_mr");
  EXPECT_EQ(j["summary"]["unsupported"], 2);
  std::ostringstream table;
  v::print_table(rep, table);
  const auto t = table.str();
  EXPECT_TRUE(contains(t, "rxe0 (rdma_rxe, software RDMA)")) << t;
  EXPECT_TRUE(contains(t, "GID 0 fe80::5054:ff:fe12:3456 (RoCE v2, link-local)")) << t;
  EXPECT_TRUE(contains(t, "rxe0 port 1 is DOWN, not ACTIVE")) << t;
  EXPECT_TRUE(contains(t, "(exit 1)")) << t;
}

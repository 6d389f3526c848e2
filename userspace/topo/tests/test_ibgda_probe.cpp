// `check --probe ibgda`'s live half (topo/src/readiness_probe.cpp: verbs, mlx5dv and CUDA through
// dlopen) against fakes loaded through the same seam (IbgdaProbeEnv): fake_mlx5 (a libibverbs +
// libmlx5 whose DEVX interface answers QUERY_HCA_CAP as the mlx5 PRM lays it out) and fake_cuda.
// The expected answers are NVSHMEM's, not the probe's (NVIDIA/nvshmem 2d7d25f, the 3.5.1 source
// docs/check.md models):
//  - transport_mlx5_common.cpp nvshmemt_ib_common_query_mlx5_caps: QUERY_HCA_CAP (0x100) with
//    op_mod MLX5_SET_HCA_CAP_OP_MOD_GENERAL_DEVICE | MLX5_CAP_GENERAL << 1 | HCA_CAP_OPMOD_GET_CUR
//    (= 0x1) must succeed, else "not enumerated as an mlx5 device";
//  - nvshmemt_ib_common_check_nic_ext_atomic_support: the current atomic caps (op_mod
//    MLX5_CAP_ATOMIC << 1 | 1 = 0x7) must offer CAS 0x1, FA 0x2, masked CAS 0x4, masked FA 0x8
//    (atomic_operations) and 4-byte 0x4 and 8-byte 0x8 atomics on QP and DC (atomic_size_qp,
//    atomic_size_dc; transport_mlx5_common.h), else the NIC is skipped;
//  - ibgda.cpp ibgda_mobject_nic_map: a dma-buf umem is cuMemGetHandleForAddressRange(DMA_BUF_FD)
//    then mlx5dv_devx_umem_reg_ex with MLX5DV_UMEM_MASK_DMABUF, pgsz_bitmap UINT64_MAX & ~(page - 1);
//  - ibgda_nic_mem_gpu_map: cudaHostRegister(uar->reg_addr, Portable | Mapped | IoMemory), the
//    CUDA Driver API's CU_MEMHOSTREGISTER_PORTABLE 0x01 | DEVICEMAP 0x02 | IOMEMORY 0x04.
// The NIC's PCI function comes from /sys/class/infiniband/<device>/device, the kernel's link to
// the device's directory (named by its PCI address, Documentation/ABI/stable/sysfs-class-infiniband).
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <tuple>
#include <vector>

#include "gdrpeer/topo/inputs.hpp"
#include "gdrpeer/topo/readiness.hpp"
#include "test_topo_support.hpp"

using namespace gdrpeer::topo;
namespace fake = gdrpeer::topo::testing;
using fake::FakeNode;
using fake::kb;

namespace {

using fake::has;

template <typename Fn>
Fn fake_symbol(const char* library, const char* name) {
  void* h = ::dlopen(library, RTLD_NOW | RTLD_NOLOAD);
  return h ? reinterpret_cast<Fn>(::dlsym(h, name)) : nullptr;
}
std::string mlx5_log() {
  auto f = fake_symbol<const char* (*)()>(GDRPEER_FAKE_MLX5_PATH, "gdrpeer_fake_mlx5_log");
  return f ? f() : "";
}
void clear_mlx5_log() {
  if (auto f = fake_symbol<void (*)()>(GDRPEER_FAKE_MLX5_PATH, "gdrpeer_fake_mlx5_clear_log")) f();
}
int mlx5_live(const char* library = GDRPEER_FAKE_MLX5_PATH) {
  auto f = fake_symbol<int (*)()>(library, "gdrpeer_fake_mlx5_live");
  return f ? f() : -1;
}

// A sysfs root holding /sys/class/infiniband/<device>/device links, as the kernel makes them.
struct SysRoot {
  std::filesystem::path dir;
  SysRoot() {
    char tmpl[] = "/tmp/gdrpeer-ibgda-probe-XXXXXX";
    dir = ::mkdtemp(tmpl);
  }
  ~SysRoot() { std::filesystem::remove_all(dir); }
  void rdma(const std::string& name, const std::string& device_dir) {
    auto d = dir / "sys/class/infiniband" / name;
    std::filesystem::create_directories(d);
    std::filesystem::create_symlink("../../../devices/" + device_dir, d / "device");
  }
};

// The switch node: H100 03:00.0 and ConnectX-7 04:00.0 under one switch (test_topo_support.hpp).
const char* kNicDir = "pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:01.0/0000:04:00.0";

struct Live {
  SysRoot root;
  IbgdaProbeEnv env;
  Live(const std::string& mlx5_spec, const std::string& cuda_spec) {
    ::setenv("GDRPEER_FAKE_MLX5", mlx5_spec.c_str(), 1);
    ::setenv("GDRPEER_FAKE_CUDA", (cuda_spec + " strict_range=1").c_str(), 1);
    ::unsetenv("GDRPEER_FAKE_MLX5_LISTS");
    ::unsetenv("GDRPEER_FAKE_MLX5_OPENS");
    root.rdma("mlx5_0", kNicDir);
    env.verbs = env.mlx5 = GDRPEER_FAKE_MLX5_PATH;
    env.cuda = GDRPEER_FAKE_CUDA_PATH;
    env.root = root.dir.string();
    clear_mlx5_log();
  }
  IbgdaProbe run(const Topology& t) {
    auto ops = make_live_ibgda_probe(env);
    return run_ibgda_probe(t, *ops);
  }
  IbgdaProbe run() { return run(fake::from_fake(fake::switch_node())); }
};

const char* kGpu = "gpus=0000:03:00.0";

// Everything there: every answer known and good, each command as the PRM and NVSHMEM have it,
// everything released.
TEST(LiveIbgdaProbe, AskesWhatNvshmemAsksAndReleasesEverything) {
  Live live("mlx5_0", kGpu);
  IbgdaProbe p = live.run();
  ASSERT_TRUE(p.ran) << p.error;
  ASSERT_EQ(p.devices.size(), 1u);
  const IbgdaProbeResult& r = p.devices.at(0);
  EXPECT_EQ(r.rdma_name, "mlx5_0");
  EXPECT_EQ(r.bdf, "0000:04:00.0");
  EXPECT_EQ(r.mlx5, 1);
  EXPECT_EQ(r.devx, 1);
  EXPECT_EQ(r.atomics, 1) << r.why;
  EXPECT_EQ(r.dmabuf_umem, 1) << r.why;
  EXPECT_EQ(r.uar_gpu_map, 1) << r.why;
  EXPECT_EQ(r.gpu_bdf, "0000:03:00.0");
  EXPECT_EQ(r.why, "");
  const std::string log = mlx5_log();
  const size_t general = log.find("cmd mlx5_0 opcode 0x100 op_mod 0x1\n"), atomic = log.find("cmd mlx5_0 opcode 0x100 op_mod 0x7\n");
  EXPECT_NE(general, std::string::npos) << log;
  EXPECT_NE(atomic, std::string::npos) << log;
  EXPECT_LT(general, atomic) << log;
  const std::string page = std::to_string(::sysconf(_SC_PAGESIZE));
  EXPECT_TRUE(has(log, "umem mlx5_0 size " + page + " comp_mask 0x1 fd open pgsz page\n")) << log;
  EXPECT_TRUE(has(log, "uar mlx5_0 bf\n")) << log;
  EXPECT_FALSE(has(log, "uar mlx5_0 nc")) << log;
  EXPECT_EQ(mlx5_live(), 0) << "contexts, UARs or umems left open\n" << log;
  auto flags = fake_symbol<unsigned (*)()>(GDRPEER_FAKE_CUDA_PATH, "gdrpeer_fake_cuda_last_host_register_flags");
  auto ptr = fake_symbol<void* (*)()>(GDRPEER_FAKE_CUDA_PATH, "gdrpeer_fake_cuda_last_host_register_ptr");
  auto size = fake_symbol<size_t (*)()>(GDRPEER_FAKE_CUDA_PATH, "gdrpeer_fake_cuda_last_host_register_size");
  auto registered = fake_symbol<size_t (*)()>(GDRPEER_FAKE_CUDA_PATH, "gdrpeer_fake_cuda_host_registered");
  ASSERT_TRUE(flags && ptr && size && registered);
  EXPECT_EQ(flags(), 0x01u | 0x02u | 0x04u);
  EXPECT_EQ(registered(), 0u) << "the UAR page is unregistered at once";
  // The page registered holds the doorbell register NVSHMEM registers (uar->reg_addr).
  auto reg = fake_symbol<void* (*)()>(GDRPEER_FAKE_MLX5_PATH, "gdrpeer_fake_mlx5_last_uar_reg");
  ASSERT_TRUE(reg);
  const auto* at = static_cast<const char*>(ptr());
  EXPECT_TRUE(static_cast<const char*>(reg()) >= at && static_cast<const char*>(reg()) < at + size());
}

// NVSHMEM's atomic checks, each bit on its own: any one missing skips the NIC for IBGDA.
TEST(LiveIbgdaProbe, AtomicCapsAreNvshmemsEveryBit) {
  struct Case {
    unsigned ops, qp, dc;
    int want;
  };
  const Case cases[] = {
      {0xf, 0xc, 0xc, 1},                                                                 // all of them
      {0xff, 0xff, 0xff, 1},                                                              // more is fine
      {0xe, 0xc, 0xc, 0},    {0xd, 0xc, 0xc, 0}, {0xb, 0xc, 0xc, 0}, {0x7, 0xc, 0xc, 0},  // CAS, FA, masked CAS, masked FA
      {0xf, 0x8, 0xc, 0},    {0xf, 0xc, 0x8, 0},                                          // no 4-byte on QP / DC
      {0xf, 0x4, 0xc, 0},    {0xf, 0xc, 0x4, 0},                                          // no 8-byte on QP / DC
      {0x0, 0x0, 0x0, 0},
  };
  for (const Case& c : cases) {
    char spec[128];
    std::snprintf(spec, sizeof spec, "mlx5_0 ops=0x%x size_qp=0x%x size_dc=0x%x", c.ops, c.qp, c.dc);
    SCOPED_TRACE(spec);
    Live live(spec, kGpu);
    IbgdaProbe p = live.run();
    ASSERT_EQ(p.devices.size(), 1u);
    const IbgdaProbeResult& r = p.devices.at(0);
    EXPECT_EQ(r.devx, 1);
    EXPECT_EQ(r.atomics, c.want) << r.why;
    if (c.want == 0) {
      char values[96];
      std::snprintf(values, sizeof values, "operations 0x%x, sizes QP 0x%x DC 0x%x", c.ops, c.qp, c.dc);
      EXPECT_TRUE(has(r.why, values)) << r.why;
    }
  }
}

// Not an mlx5 device (rxe, a Broadcom or Intel RDMA NIC): nothing further is asked.
TEST(LiveIbgdaProbe, NotMlx5AsksNothingFurther) {
  Live live("rxe0 mlx5=0", kGpu);
  live.root.rdma("rxe0", kNicDir);
  IbgdaProbe p = live.run();
  ASSERT_EQ(p.devices.size(), 1u);
  const IbgdaProbeResult& r = p.devices.at(0);
  EXPECT_EQ(r.mlx5, 0);
  EXPECT_EQ(r.devx, -1);
  EXPECT_EQ(r.atomics, -1);
  EXPECT_EQ(r.uar_gpu_map, -1);
  EXPECT_EQ(r.gpu_bdf, "");
  EXPECT_FALSE(has(mlx5_log(), "cmd")) << mlx5_log();
  EXPECT_EQ(mlx5_live(), 0);
}

// DEVX refused (no CAP_NET_RAW, or a kernel without DEVX): no atomic query, no GPU half.
TEST(LiveIbgdaProbe, DevxRefusedStopsThere) {
  Live live("mlx5_0 devx=0", kGpu);
  IbgdaProbe p = live.run();
  const IbgdaProbeResult& r = p.devices.at(0);
  EXPECT_EQ(r.mlx5, 1);
  EXPECT_EQ(r.devx, 0);
  EXPECT_EQ(r.atomics, -1);
  EXPECT_EQ(r.why, "mlx5dv_devx_general_cmd(QUERY_HCA_CAP general) failed: " + std::string(std::strerror(EPERM)));
  EXPECT_FALSE(has(mlx5_log(), "op_mod 0x7")) << mlx5_log();
  EXPECT_FALSE(has(mlx5_log(), "uar")) << mlx5_log();
  EXPECT_EQ(r.gpu_bdf, "");
  EXPECT_EQ(mlx5_live(), 0);
}

TEST(LiveIbgdaProbe, AtomicQueryFailureLeavesAtomicsUnknown) {
  Live live("mlx5_0 atomic_errno=71", kGpu);  // EPROTO
  IbgdaProbe p = live.run();
  const IbgdaProbeResult& r = p.devices.at(0);
  EXPECT_EQ(r.devx, 1);
  EXPECT_EQ(r.atomics, -1);
  EXPECT_TRUE(has(r.why, "QUERY_HCA_CAP(atomic) failed: " + std::string(std::strerror(71)))) << r.why;
  EXPECT_EQ(r.uar_gpu_map, 1);  // the GPU half still runs (NVSHMEM maps the UAR before it asks the atomics)
}

TEST(LiveIbgdaProbe, DeviceThatWontOpenSaysSo) {
  Live live("mlx5_0 open=0", kGpu);
  IbgdaProbe p = live.run();
  const IbgdaProbeResult& r = p.devices.at(0);
  EXPECT_EQ(r.mlx5, -1);
  EXPECT_EQ(r.why, "ibv_open_device(mlx5_0) failed: " + std::string(std::strerror(EACCES)));
  EXPECT_FALSE(has(mlx5_log(), "close")) << mlx5_log();
}

// No verbs devices at all (ibv_get_device_list NULL): the probe ran and found none.
TEST(LiveIbgdaProbe, NoDeviceListMeansNoDevices) {
  Live live("!", kGpu);
  IbgdaProbe p = live.run();
  EXPECT_TRUE(p.ran);
  EXPECT_TRUE(p.devices.empty());
}

// Each device gets the PCI function its sysfs link names; one without a link gets none (and no
// GPU), and every device of the list is asked.
TEST(LiveIbgdaProbe, EachDeviceGetsTheFunctionItsSysfsLinkNames) {
  Live live("mlx5_0;mlx5_1;mlx5_2", kGpu);
  live.root.rdma("mlx5_1", "pci0000:40/0000:40:01.0/0000:41:00.1");
  IbgdaProbe p = live.run();
  ASSERT_EQ(p.devices.size(), 3u);
  EXPECT_EQ(p.devices.at(0).rdma_name, "mlx5_0");
  EXPECT_EQ(p.devices.at(0).bdf, "0000:04:00.0");
  EXPECT_EQ(p.devices.at(1).bdf, "0000:41:00.1");
  EXPECT_EQ(p.devices.at(2).rdma_name, "mlx5_2");
  EXPECT_EQ(p.devices.at(2).bdf, "");
  EXPECT_EQ(mlx5_live(), 0);
}

// The UAR: a BlueFlame one first, then a non-cached one (NVSHMEM's types); none at all is said.
TEST(LiveIbgdaProbe, UarFallsBackToNonCachedAndSaysWhenNoneComes) {
  {
    Live live("mlx5_0 uar=nc", kGpu);
    const IbgdaProbeResult r = live.run().devices.at(0);
    EXPECT_EQ(r.uar_gpu_map, 1) << r.why;
    const std::string log = mlx5_log();
    EXPECT_LT(log.find("uar mlx5_0 bf"), log.find("uar mlx5_0 nc")) << log;
    EXPECT_EQ(mlx5_live(), 0);
  }
  {
    Live live("mlx5_0 uar=none", kGpu);
    const IbgdaProbeResult r = live.run().devices.at(0);
    EXPECT_EQ(r.uar_gpu_map, -1);
    EXPECT_EQ(r.dmabuf_umem, 1);
    EXPECT_EQ(r.why, "mlx5dv_devx_alloc_uar failed: " + std::string(std::strerror(ENOMEM)));
  }
}

// Failures of the GPU half, each said, joined with "; " when both halves fail.
TEST(LiveIbgdaProbe, GpuHalfFailuresAreEachSaid) {
  {
    Live live("mlx5_0 umem=0", kGpu);
    const IbgdaProbeResult r = live.run().devices.at(0);
    EXPECT_EQ(r.dmabuf_umem, 0);
    EXPECT_EQ(r.uar_gpu_map, 1);
    EXPECT_EQ(r.why, "mlx5dv_devx_umem_reg_ex(dma-buf): " + std::string(std::strerror(EOPNOTSUPP)));
    EXPECT_EQ(mlx5_live(), 0);
  }
  {
    Live live("mlx5_0 umem=0", std::string(kGpu) + " host_register=800");
    const IbgdaProbeResult r = live.run().devices.at(0);
    EXPECT_EQ(r.dmabuf_umem, 0);
    EXPECT_EQ(r.uar_gpu_map, 0);
    EXPECT_EQ(r.why, "mlx5dv_devx_umem_reg_ex(dma-buf): " + std::string(std::strerror(EOPNOTSUPP)) +
                         "; cuMemHostRegister(IOMEMORY) of the UAR page: CUDA_FAKE_ERROR_800 (fake driver error)");
    EXPECT_EQ(mlx5_live(), 0) << "the UAR is freed when the registration fails";
  }
  {
    Live live("mlx5_0", std::string(kGpu) + " host_register=800");
    const IbgdaProbeResult r = live.run().devices.at(0);
    EXPECT_EQ(r.dmabuf_umem, 1);
    EXPECT_EQ(r.uar_gpu_map, 0);
    EXPECT_EQ(r.why, "cuMemHostRegister(IOMEMORY) of the UAR page: CUDA_FAKE_ERROR_800 (fake driver error)");
  }
  {
    Live live("mlx5_0", std::string(kGpu) + " dmabuf=1");
    const IbgdaProbeResult r = live.run().devices.at(0);
    EXPECT_EQ(r.dmabuf_umem, 0);
    EXPECT_EQ(r.uar_gpu_map, 1);
    EXPECT_EQ(r.why, "cuMemGetHandleForAddressRange(DMA_BUF_FD): CUDA_FAKE_ERROR_1 (fake driver error)");
    EXPECT_FALSE(has(mlx5_log(), "umem")) << mlx5_log();
  }
  {
    Live live("mlx5_0 umem=0", std::string(kGpu) + " dmabuf=1");
    const IbgdaProbeResult r = live.run().devices.at(0);
    EXPECT_EQ(r.why, "cuMemGetHandleForAddressRange(DMA_BUF_FD): CUDA_FAKE_ERROR_1 (fake driver error)");
  }
}

// CUDA that cannot be used for the GPU: said, and neither UAR nor umem is tried.
TEST(LiveIbgdaProbe, CudaThatCannotServeTheGpuIsSaid) {
  {
    Live live("mlx5_0", "gpus=0000:81:00.0,0000:82:00.0");
    const IbgdaProbeResult r = live.run().devices.at(0);
    EXPECT_EQ(r.why, "CUDA does not list the GPU 0000:03:00.0");
    EXPECT_EQ(r.uar_gpu_map, -1);
    EXPECT_FALSE(has(mlx5_log(), "uar")) << mlx5_log();
  }
  {
    Live live("mlx5_0", "gpus=0000:81:00.0,0000:03:00.0");  // the GPU is CUDA's second
    const IbgdaProbeResult r = live.run().devices.at(0);
    EXPECT_EQ(r.uar_gpu_map, 1) << r.why;
  }
  {
    Live live("mlx5_0", std::string(kGpu) + " init=100");
    const IbgdaProbeResult r = live.run().devices.at(0);
    EXPECT_EQ(r.why, "cuInit failed");
    EXPECT_EQ(r.dmabuf_umem, -1);
  }
  {
    Live live("mlx5_0", kGpu);
    live.env.cuda = "/nonexistent/libcuda.so.1";
    const IbgdaProbeResult r = live.run().devices.at(0);
    EXPECT_TRUE(r.why.rfind("CUDA not loaded: cannot load /nonexistent/libcuda.so.1", 0) == 0) << r.why;
    EXPECT_EQ(r.mlx5, 1);
    EXPECT_EQ(r.atomics, 1);
  }
}

// Older libraries: rdma-core before v35 (no mlx5dv_devx_umem_reg_ex), a driver before CUDA 11.7
// (no dma-buf export; the fake also lacks cuMemHostRegister): the halves they lack are not tried,
// and the line says why.
TEST(LiveIbgdaProbe, OldLibrariesSayWhatIsNotTried) {
  const std::string no_umem = "no mlx5dv_devx_umem_reg_ex / cuMemGetHandleForAddressRange: dma-buf umem not tried";
  {
    Live live("mlx5_0", kGpu);
    live.env.verbs = live.env.mlx5 = GDRPEER_FAKE_MLX5_OLD_PATH;
    const IbgdaProbeResult r = live.run().devices.at(0);
    EXPECT_EQ(r.dmabuf_umem, -1);
    EXPECT_EQ(r.uar_gpu_map, 1);
    EXPECT_EQ(r.why, no_umem);
    EXPECT_EQ(mlx5_live(GDRPEER_FAKE_MLX5_OLD_PATH), 0);
  }
  {
    Live live("mlx5_0", kGpu);
    live.env.cuda = GDRPEER_FAKE_CUDA_OLD_PATH;
    const IbgdaProbeResult r = live.run().devices.at(0);
    EXPECT_EQ(r.dmabuf_umem, -1);
    EXPECT_EQ(r.uar_gpu_map, -1);
    EXPECT_EQ(r.why, no_umem + "; libcuda lacks cuMemHostRegister: UAR mapping not tried");
    EXPECT_FALSE(has(mlx5_log(), "uar")) << mlx5_log();
  }
}

// Libraries that cannot be loaded, or lack what the probe binds: the probe does not run.
TEST(LiveIbgdaProbe, UnusableLibrariesStopTheProbe) {
  {
    Live live("mlx5_0", kGpu);
    live.env.verbs = "/nonexistent/libibverbs.so.1";
    IbgdaProbe p = live.run();
    EXPECT_FALSE(p.ran);
    EXPECT_TRUE(p.error.rfind("cannot load /nonexistent/libibverbs.so.1: ", 0) == 0) << p.error;
  }
  {
    Live live("mlx5_0", kGpu);
    live.env.mlx5 = "/nonexistent/libmlx5.so.1";
    IbgdaProbe p = live.run();
    EXPECT_FALSE(p.ran);
    EXPECT_TRUE(p.error.rfind("cannot load /nonexistent/libmlx5.so.1: ", 0) == 0) << p.error;
  }
  {
    Live live("mlx5_0", kGpu);
    live.env.verbs = live.env.mlx5 = GDRPEER_FAKE_CUDA_PATH;  // loads, but has no verbs
    IbgdaProbe p = live.run();
    EXPECT_FALSE(p.ran);
    EXPECT_TRUE(p.error.rfind("rdma-core lacks ibv_get_device_list, ibv_free_device_list", 0) == 0) << p.error;
  }
}

// The library answers change between the caps query and the GPU half (a device reset, a
// driver unload): the second ibv_open_device or device list fails. Said, nothing leaked, and an
// earlier why kept.
TEST(LiveIbgdaProbe, DeviceGoneBeforeTheGpuHalf) {
  {
    Live live("mlx5_0", kGpu);
    ::setenv("GDRPEER_FAKE_MLX5_OPENS", "1", 1);
    const IbgdaProbeResult r = live.run().devices.at(0);
    EXPECT_EQ(r.atomics, 1);
    EXPECT_EQ(r.why, "ibv_open_device(mlx5_0) failed: " + std::string(std::strerror(EACCES)));
    EXPECT_EQ(r.dmabuf_umem, -1);
    EXPECT_EQ(r.uar_gpu_map, -1);
    EXPECT_EQ(mlx5_live(), 0);
  }
  {
    Live live("mlx5_0 ops=0x7", kGpu);  // no masked FA: the caps query says why first
    ::setenv("GDRPEER_FAKE_MLX5_OPENS", "1", 1);
    const IbgdaProbeResult r = live.run().devices.at(0);
    EXPECT_EQ(r.atomics, 0);
    EXPECT_TRUE(r.why.rfind("atomic caps: operations 0x7", 0) == 0) << r.why;
    EXPECT_FALSE(has(r.why, "ibv_open_device")) << r.why;
  }
  {
    Live live("mlx5_0", kGpu);
    ::setenv("GDRPEER_FAKE_MLX5_LISTS", "2", 1);  // devices() and query_caps' open get one
    const IbgdaProbeResult r = live.run().devices.at(0);
    EXPECT_EQ(r.atomics, 1);
    EXPECT_EQ(r.why, "ibv_open_device(mlx5_0) failed: " + std::string(std::strerror(ENODEV)));
    EXPECT_EQ(mlx5_live(), 0) << mlx5_log();
  }
}

// cuMemAlloc refusing the 4 KiB: said (after an earlier why), the UAR half still tried.
TEST(LiveIbgdaProbe, GpuMemoryRefusedIsSaid) {
  {
    Live live("mlx5_0", std::string(kGpu) + " mem_alloc=2");
    const IbgdaProbeResult r = live.run().devices.at(0);
    EXPECT_EQ(r.dmabuf_umem, -1);
    EXPECT_EQ(r.uar_gpu_map, 1);
    EXPECT_EQ(r.why, "cuMemAlloc failed");
  }
  {
    Live live("mlx5_0 ops=0x7", std::string(kGpu) + " mem_alloc=2");
    const IbgdaProbeResult r = live.run().devices.at(0);
    EXPECT_TRUE(has(r.why, "(NVSHMEM needs CAS, FA, masked CAS/FA, 4- and 8-byte); cuMemAlloc failed")) << r.why;
  }
}

// A CUDA device whose bus id is not one (a broken driver) is skipped, not trusted.
TEST(LiveIbgdaProbe, CudaBusIdThatIsNotOneIsSkipped) {
  Live live("mlx5_0", "gpus=not-a-bus-id,0000:03:00.0");
  const IbgdaProbeResult r = live.run().devices.at(0);
  EXPECT_EQ(r.uar_gpu_map, 1) << r.why;
  EXPECT_EQ(r.why, "");
}

// A libcuda with only one of cuMemHostRegister / cuMemHostUnregister: the UAR mapping needs both
// (registered, then unregistered at once), so it is not tried.
TEST(LiveIbgdaProbe, UarMappingNeedsRegisterAndUnregister) {
  for (const char* lib : {GDRPEER_FAKE_CUDA_NOREG_PATH, GDRPEER_FAKE_CUDA_NOUNREG_PATH}) {
    SCOPED_TRACE(lib);
    Live live("mlx5_0", kGpu);
    live.env.cuda = lib;
    const IbgdaProbeResult r = live.run().devices.at(0);
    EXPECT_EQ(r.dmabuf_umem, 1) << r.why;
    EXPECT_EQ(r.uar_gpu_map, -1);
    EXPECT_EQ(r.why, "libcuda lacks cuMemHostRegister: UAR mapping not tried");
    EXPECT_FALSE(has(mlx5_log(), "uar")) << mlx5_log();
  }
}

// ---------------------------------------------------------------------------------------
// The GPU the probe pairs with each NIC: an NVIDIA GPU nearest the NIC in the PCIe tree, as
// nvidia-smi topo -m ranks paths (PIX: at most one bridge < PXB: several bridges, no host
// bridge < PHB: through the host bridge < SYS: across host bridges). Other vendors' GPUs and
// NVIDIA functions that are not GPUs are never used.

struct Recorder : IbgdaProbeOps {
  std::vector<std::pair<std::string, std::string>> nics;
  std::vector<std::string> paired;
  std::string load() override { return ""; }
  std::vector<std::pair<std::string, std::string>> devices() override { return nics; }
  IbgdaProbeResult query_caps(const std::string&) override {
    IbgdaProbeResult r;
    r.mlx5 = r.devx = r.atomics = 1;
    return r;
  }
  void gpu_checks(const std::string& name, const std::string& gpu, IbgdaProbeResult&) override { paired.push_back(name + "@" + gpu); }
};

std::string paired_gpu(const Topology& t, const std::string& nic_bdf) {
  Recorder rec;
  rec.nics = {{"mlx5_0", nic_bdf}};
  IbgdaProbe p = run_ibgda_probe(t, rec);
  EXPECT_EQ(p.devices.size(), 1u);
  return p.devices.empty() ? "?" : p.devices.at(0).gpu_bdf;
}

const std::string kRc0 = "/sys/devices/pci0000:00", kRc4 = "/sys/devices/pci0000:40";

// Host bridge 0000:00: root port 00:01.0 -> switch 01:00.0 with downstream ports 02:0N.0 (bus
// 3+N); root port 00:02.0 -> bus 0x10. Host bridge 0000:40: root port 40:01.0 -> bus 0x41.
// The NIC sits at 04:00.0, under downstream port 02:01.0.
FakeNode two_bridges() {
  FakeNode n;
  const std::string up = kRc0 + "/0000:00:01.0/0000:01:00.0";
  fake::add_port(n, "0000:00:01.0", kRc0 + "/0000:00:01.0", fake::kRootPort, 1);
  fake::add_port(n, "0000:01:00.0", up, fake::kUpstream, 2, 0x10b5, 0x9797);
  for (int i = 0; i < 4; ++i) {
    const std::string ds = "0000:02:0" + std::to_string(i) + ".0";
    fake::add_port(n, ds, up + "/" + ds, fake::kDownstream, 3 + i, 0x10b5, 0x9797);
  }
  fake::add_endpoint(n, "0000:04:00.0", up + "/0000:02:01.0/0000:04:00.0", 0x15b3, 0x1021, 0x020700);
  fake::add_port(n, "0000:00:02.0", kRc0 + "/0000:00:02.0", fake::kRootPort, 0x10);
  fake::add_port(n, "0000:40:01.0", kRc4 + "/0000:40:01.0", fake::kRootPort, 0x41);
  return n;
}
void gpu_at(FakeNode& n, const std::string& bdf, uint16_t vendor = 0x10de, uint16_t device = 0x2330, uint32_t cls = 0x030200) {
  const std::string up = kRc0 + "/0000:00:01.0/0000:01:00.0";
  std::string path;
  if (bdf.rfind("0000:0", 0) == 0 && bdf[6] >= '3' && bdf[6] <= '6')
    path = up + "/0000:02:0" + std::to_string(bdf[6] - '3') + ".0/" + bdf;
  else if (bdf.rfind("0000:10:", 0) == 0)
    path = kRc0 + "/0000:00:02.0/" + bdf;
  else
    path = kRc4 + "/0000:40:01.0/" + bdf;
  fake::add_endpoint(n, bdf, path, vendor, device, cls);
}

TEST(ProbeGpuChoice, TheNearestNvidiaGpuWhateverTheOrder) {
  struct Case {
    std::vector<std::string> gpus;  // NVIDIA H100s
    std::string want;
  };
  const Case cases[] = {
      {{"0000:03:00.0", "0000:10:00.0", "0000:41:00.0"}, "0000:03:00.0"},  // PIX beats PHB and SYS
      {{"0000:41:00.0", "0000:10:00.0"}, "0000:10:00.0"},                  // PHB beats SYS
      {{"0000:10:00.0", "0000:41:00.0"}, "0000:10:00.0"},
      {{"0000:41:00.0", "0000:05:00.0"}, "0000:05:00.0"},  // PIX beats SYS
      {{"0000:10:00.0", "0000:05:00.0"}, "0000:05:00.0"},  // PIX beats PHB, listed later
      {{"0000:41:00.0"}, "0000:41:00.0"},                  // SYS: still the only GPU
  };
  for (const Case& c : cases) {
    FakeNode n = two_bridges();
    std::string label;
    for (const auto& g : c.gpus) {
      gpu_at(n, g);
      label += g + " ";
    }
    SCOPED_TRACE(label);
    Topology t = fake::from_fake(n);
    EXPECT_EQ(paired_gpu(t, "0000:04:00.0"), c.want);
  }
}

// A GPU under a second-level switch below the NIC's switch is PXB; one beside the NIC under the
// NIC's own downstream port... is PIX: the PIX one wins even when listed after.
TEST(ProbeGpuChoice, FewerBridgesBeatMore) {
  FakeNode n;
  const std::string rp = kRc0 + "/0000:00:01.0", up = rp + "/0000:01:00.0";
  fake::add_port(n, "0000:00:01.0", rp, fake::kRootPort, 1);
  fake::add_port(n, "0000:01:00.0", up, fake::kUpstream, 2, 0x10b5, 0x9797);
  fake::add_port(n, "0000:02:00.0", up + "/0000:02:00.0", fake::kDownstream, 3, 0x10b5, 0x9797);
  fake::add_port(n, "0000:02:01.0", up + "/0000:02:01.0", fake::kDownstream, 6, 0x10b5, 0x9797);
  // second-level switch under 02:00.0: 03:00.0 up -> 04:00.0 down -> GPU 05:00.0 (PXB to the NIC)
  const std::string up2 = up + "/0000:02:00.0/0000:03:00.0";
  fake::add_port(n, "0000:03:00.0", up2, fake::kUpstream, 4, 0x10b5, 0x9797);
  fake::add_port(n, "0000:04:00.0", up2 + "/0000:04:00.0", fake::kDownstream, 5, 0x10b5, 0x9797);
  fake::add_endpoint(n, "0000:05:00.0", up2 + "/0000:04:00.0/0000:05:00.0", 0x10de, 0x2330, 0x030200);
  // NIC and GPU under 02:01.0 (bus 6 here: a multi-function pair, NIC first)
  fake::add_endpoint(n, "0000:06:00.0", up + "/0000:02:01.0/0000:06:00.0", 0x15b3, 0x1021, 0x020700);
  fake::add_endpoint(n, "0000:06:00.1", up + "/0000:02:01.0/0000:06:00.1", 0x10de, 0x2330, 0x030200);
  Topology t = fake::from_fake(n);
  EXPECT_EQ(paired_gpu(t, "0000:06:00.0"), "0000:06:00.1");
}

// Only NVIDIA GPUs: an AMD Instinct and an NVIDIA audio function nearer the NIC are passed over
// for the NVIDIA GPU on the other root port.
TEST(ProbeGpuChoice, OnlyNvidiaGpus) {
  FakeNode n = two_bridges();
  gpu_at(n, "0000:03:00.0", 0x1002, 0x740f, 0x038000);  // AMD Instinct MI210 (pci.ids)
  gpu_at(n, "0000:05:00.0", 0x10de, 0x22ba, 0x040300);  // an NVIDIA GPU's HD audio function
  gpu_at(n, "0000:10:00.0");
  Topology t = fake::from_fake(n);
  ASSERT_EQ(t.devices.at(t.find("0000:03:00.0")).role, Role::GPU);
  EXPECT_EQ(paired_gpu(t, "0000:04:00.0"), "0000:10:00.0");
  // With no NVIDIA GPU at all, none is used and the line says why.
  FakeNode amd = two_bridges();
  gpu_at(amd, "0000:03:00.0", 0x1002, 0x740f, 0x038000);
  Recorder rec;
  rec.nics = {{"mlx5_0", "0000:04:00.0"}};
  IbgdaProbe p = run_ibgda_probe(fake::from_fake(amd), rec);
  EXPECT_TRUE(rec.paired.empty());
  EXPECT_EQ(p.devices.at(0).why, "no NVIDIA GPU in the input: the GPU half (dma-buf umem, UAR mapping) not tried");
}

// A NIC the input does not have (its function not in the dump): still a GPU, the first one.
TEST(ProbeGpuChoice, NicMissingFromTheInputStillGetsAGpu) {
  FakeNode n = two_bridges();
  gpu_at(n, "0000:41:00.0");
  gpu_at(n, "0000:10:00.0");
  Topology t = fake::from_fake(n);
  const std::string got = paired_gpu(t, "0000:99:00.0");
  EXPECT_TRUE(got == "0000:10:00.0" || got == "0000:41:00.0") << got;
  EXPECT_EQ(paired_gpu(t, ""), got);
}

// Two GPUs equally near (both under the NIC's switch): the lower PCI address, as CUDA numbers GPUs
// with CUDA_DEVICE_ORDER=PCI_BUS_ID (docs/check.md), so that "GPU used" does not depend on
// anything but the tree.
TEST(ProbeGpuChoice, TiesGoToTheLowerPciAddress) {
  FakeNode n = two_bridges();
  gpu_at(n, "0000:03:00.0");
  gpu_at(n, "0000:05:00.0");
  gpu_at(n, "0000:06:00.0");
  EXPECT_EQ(paired_gpu(fake::from_fake(n), "0000:04:00.0"), "0000:03:00.0");
  FakeNode m = two_bridges();
  gpu_at(m, "0000:10:00.0");  // PHB
  gpu_at(m, "0000:41:00.0");  // SYS
  gpu_at(m, "0000:05:00.0");  // PIX
  gpu_at(m, "0000:06:00.0");  // PIX
  EXPECT_EQ(paired_gpu(fake::from_fake(m), "0000:04:00.0"), "0000:05:00.0");
}

// A virtual machine's root bus (Firecracker, QEMU i440fx: every function on bus 0, no bridges):
// the GPU on the NIC's host bridge (PHB) beats one on another host bridge (SYS), whatever their
// addresses; here the NIC is the first function of the input.
TEST(ProbeGpuChoice, RootBusOfAVirtualMachine) {
  FakeNode n;
  fake::add_endpoint(n, "0000:00:02.0", "/sys/devices/pci0000:00/0000:00:02.0", 0x15b3, 0x101e, 0x020700);  // a ConnectX VF
  fake::add_port(n, "0000:00:03.0", "/sys/devices/pci0000:00/0000:00:03.0", fake::kRootPort, 0x30);
  fake::add_endpoint(n, "0000:30:00.0", "/sys/devices/pci0000:00/0000:00:03.0/0000:30:00.0", 0x10de, 0x2335, 0x030200);
  fake::add_endpoint(n, "0000:20:00.0", "/sys/devices/pci0000:20/0000:20:00.0", 0x10de, 0x2335, 0x030200);
  Topology t = fake::from_fake(n);
  ASSERT_EQ(t.find("0000:00:02.0"), 0);
  EXPECT_EQ(paired_gpu(t, "0000:00:02.0"), "0000:30:00.0");
}

// A switch that is the input's first device and the NIC's and two GPUs' common bridge: AWS's
// NCCL topology file for p4d.24xlarge (tests/reference/aws-p4d-24xl-topo.xml: "Each group has 2
// GPUs and 1 NIC behind a PCIe switch", GPUs 0-1 and NIC 0 behind switch 0, GPUs 2-3 and NIC 1
// behind switch 1). Each NIC's GPU is one of the two behind its switch.
TEST(ProbeGpuChoice, AwsP4dEachNicGetsAGpuBehindItsSwitch) {
  const std::string xml = fake::slurp(fake::reference("aws-p4d-24xl-topo.xml"));
  ASSERT_FALSE(xml.empty());
  Topology t = parse_nccl_xml(xml, "aws-p4d-24xl-topo.xml");
  assign_roles(t, kb());
  ASSERT_EQ(t.devices.at(0).bdf, "ffff:ff:01.0");  // switch 0
  const struct {
    std::string nic;
    std::vector<std::string> gpus;
  } groups[] = {{"0000:10:1b.0", {"0000:10:1c.0", "0000:10:1d.0"}},
                {"0000:20:1b.0", {"0000:20:1c.0", "0000:20:1d.0"}},
                {"0000:90:1b.0", {"0000:90:1c.0", "0000:90:1d.0"}},
                {"0000:a0:1b.0", {"0000:a0:1c.0", "0000:a0:1d.0"}}};
  for (const auto& g : groups) {
    ASSERT_GE(t.find(g.nic), 0) << g.nic;
    const std::string got = paired_gpu(t, g.nic);
    EXPECT_TRUE(got == g.gpus[0] || got == g.gpus[1]) << g.nic << " -> " << got;
  }
}

// A NIC whose caps query already said why it fails keeps that why when there is no NVIDIA GPU.
TEST(ProbeGpuChoice, NoNvidiaGpuKeepsTheEarlierWhy) {
  struct Failing : Recorder {
    IbgdaProbeResult query_caps(const std::string&) override {
      IbgdaProbeResult r;
      r.mlx5 = r.devx = 1;
      r.atomics = 0;
      r.why = "atomic caps: operations 0x3";
      return r;
    }
  } rec;
  rec.nics = {{"mlx5_0", "0000:04:00.0"}};
  IbgdaProbe p = run_ibgda_probe(fake::from_fake(two_bridges()), rec);
  EXPECT_EQ(p.devices.at(0).why, "atomic caps: operations 0x3");
  EXPECT_TRUE(rec.paired.empty());
}

// The GPU half is for mlx5 devices whose DEVX works (NVSHMEM skips the others first): a device
// whose caps say anything else, DEVX included, gets none.
TEST(ProbeGpuChoice, GpuHalfOnlyForMlx5WithDevx) {
  struct Caps : Recorder {
    int mlx5 = 1, devx = 1;
    IbgdaProbeResult query_caps(const std::string&) override {
      IbgdaProbeResult r;
      r.mlx5 = mlx5;
      r.devx = devx;
      return r;
    }
  };
  FakeNode n = two_bridges();
  gpu_at(n, "0000:03:00.0");
  const Topology t = fake::from_fake(n);
  for (auto [mlx5, devx, want] : {std::tuple{1, 1, true}, {0, 1, false}, {-1, 1, false}, {1, 0, false}, {1, -1, false}}) {
    Caps rec;
    rec.mlx5 = mlx5;
    rec.devx = devx;
    rec.nics = {{"mlx5_0", "0000:04:00.0"}};
    const IbgdaProbe p = run_ibgda_probe(t, rec);
    EXPECT_EQ(rec.paired.size(), want ? 1u : 0u) << mlx5 << devx;
    EXPECT_EQ(p.devices.at(0).gpu_bdf, want ? "0000:03:00.0" : "") << mlx5 << devx;
  }
}

// QEMU's pci-bridge (1b36:0001, a conventional PCI-PCI bridge with 32 slots, common in cloud VMs)
// as the input's first device, the NIC and a GPU in two of its slots; another GPU, at a lower
// address, behind a second pci-bridge: the one beside the NIC.
TEST(ProbeGpuChoice, GpuBesideTheNicOnAPciBridgeThatComesFirst) {
  FakeNode n;
  const std::string b1 = "/sys/devices/pci0000:00/0000:00:01.0", b2 = "/sys/devices/pci0000:00/0000:00:02.0";
  fake::add_fn(n, "0000:00:01.0", b1, 0x1b36, 0x0001, 0x060400, -1, 0x20);
  fake::add_fn(n, "0000:00:02.0", b2, 0x1b36, 0x0001, 0x060400, -1, 0x10);
  fake::add_endpoint(n, "0000:10:01.0", b2 + "/0000:10:01.0", 0x10de, 0x2335, 0x030200);
  fake::add_endpoint(n, "0000:20:01.0", b1 + "/0000:20:01.0", 0x15b3, 0x101e, 0x020700);
  fake::add_endpoint(n, "0000:20:02.0", b1 + "/0000:20:02.0", 0x10de, 0x2335, 0x030200);
  const Topology t = fake::from_fake(n);
  ASSERT_EQ(t.find("0000:00:01.0"), 0);
  ASSERT_EQ(t.devices.at(t.find("0000:20:02.0")).parent, 0);
  EXPECT_EQ(paired_gpu(t, "0000:20:01.0"), "0000:20:02.0");
}

// What the input does not know is not taken for near: a GPU whose PCI ids are unknown is not
// known to be NVIDIA's, and an unknown host bridge is not the NIC's host bridge (a GPU on the
// NIC's known host bridge wins over one whose host bridge is unknown; with the NIC's unknown, the
// lower address as between equals).
TEST(ProbeGpuChoice, UnknownIsNotNear) {
  {
    FakeNode n = two_bridges();
    gpu_at(n, "0000:03:00.0");
    gpu_at(n, "0000:10:00.0");
    Topology t = fake::from_fake(n);
    t.devices.at(t.find("0000:03:00.0")).ids_known = false;  // vendor field left as it was
    EXPECT_EQ(paired_gpu(t, "0000:04:00.0"), "0000:10:00.0");
  }
  {
    // Functions on root buses (no bridges): only the host bridges relate them.
    Topology t;
    const int hb0 = t.host_bridge_index("pci0000:00");
    const int nic = fake::add_tree_device(t, "0000:01:00.0", -1, PortType::Endpoint, Role::NIC, hb0);
    fake::add_tree_device(t, "0000:02:00.0", -1, PortType::Endpoint, Role::GPU, -1);  // host bridge unknown
    fake::add_tree_device(t, "0000:03:00.0", -1, PortType::Endpoint, Role::GPU, hb0);
    t.devices.at(t.find("0000:02:00.0")).host_bridge = -1;  // add_tree_device gives root-bus functions one
    EXPECT_EQ(paired_gpu(t, t.devices.at(nic).bdf), "0000:03:00.0");
    t.devices.at(nic).host_bridge = -1;  // now the NIC's is unknown too: neither GPU is known nearer
    t.devices.at(t.find("0000:02:00.0")).host_bridge = hb0;
    t.devices.at(t.find("0000:03:00.0")).host_bridge = -1;
    EXPECT_EQ(paired_gpu(t, t.devices.at(nic).bdf), "0000:02:00.0");
  }
}

}  // namespace

// `gdrpeer check --probe ibgda`: the three checks NVSHMEM's IBGDA transport makes at
// start (NVSHMEM 3.5.1 ibgda.cpp nvshmemt_init), made once per RDMA device and cheaply:
//  1. mlx5dv_is_supported; DEVX QUERY_HCA_CAP of the general caps
//     (nvshmemt_ib_common_query_mlx5_caps) and of the atomic caps: CAS, FA, masked CAS,
//     masked FA, 4- and 8-byte atomics on QP and DC (nvshmemt_ib_common_check_nic_ext_atomic_support);
//  2. a DEVX umem on 4 KiB of GPU memory through its dma-buf
//     (mlx5dv_devx_umem_reg_ex with MLX5DV_UMEM_MASK_DMABUF, ibgda_mobject_nic_map);
//  3. one UAR page (mlx5dv_devx_alloc_uar) registered for the GPU with
//     cuMemHostRegister(IOMEMORY) and unregistered at once (ibgda_nic_mem_gpu_map):
//     nothing is ever written or read through it, so no doorbell rings.
// Libraries through dlopen (libibverbs.so.1, libmlx5.so.1, libcuda.so.1); the command
// layouts follow the mlx5 PRM as Linux's include/linux/mlx5/mlx5_ifc.h spells them.
#include <dlfcn.h>
#include <infiniband/mlx5dv.h>
#include <infiniband/verbs.h>
#include <unistd.h>

#include <cstring>
#include <memory>
#include <utility>

#include "gdrpeer/dynload/cuda.hpp"
#include "gdrpeer/dynload/dl.hpp"
#include "gdrpeer/topo/inputs.hpp"
#include "gdrpeer/topo/model.hpp"
#include "gdrpeer/topo/readiness.hpp"

namespace gdrpeer::topo {

namespace {

// The GPU the probe pairs with a NIC: the NVIDIA GPU whose lowest common bridge with
// the NIC is deepest (one switch before one host bridge before none).
std::string nearest_gpu(const Topology& t, const std::string& nic_bdf) {
  int nic = t.find(nic_bdf);
  std::vector<int> up;
  for (int i = nic; i >= 0; i = t.devices[i].parent) up.push_back(i);
  std::string best;
  int best_score = -2;
  for (size_t g = 0; g < t.devices.size(); ++g) {
    const Device& d = t.devices[g];
    if (d.role != Role::GPU || !(d.ids_known && d.vendor == 0x10de)) continue;
    int score = -1;
    if (nic >= 0) {
      if (d.host_bridge >= 0 && d.host_bridge == t.devices[nic].host_bridge) score = 0;
      for (int i = d.parent; i >= 0 && score <= 0; i = t.devices[i].parent)
        for (size_t k = 0; k < up.size(); ++k)
          if (up[k] == i) score = 1000 - static_cast<int>(k);
    }
    if (score > best_score) {
      best_score = score;
      best = d.bdf;
    }
  }
  return best;
}

}  // namespace

IbgdaProbe run_ibgda_probe(const Topology& t, IbgdaProbeOps& ops) {
  IbgdaProbe p;
  p.error = ops.load();
  if (!p.error.empty()) return p;
  p.ran = true;
  for (const auto& [name, bdf] : ops.devices()) {
    IbgdaProbeResult r = ops.query_caps(name);
    r.rdma_name = name;
    r.bdf = bdf;
    if (r.mlx5 == 1 && r.devx == 1) {
      r.gpu_bdf = nearest_gpu(t, bdf);
      if (r.gpu_bdf.empty()) {
        if (r.why.empty()) r.why = "no NVIDIA GPU in the input: the GPU half (dma-buf umem, UAR mapping) not tried";
      } else {
        ops.gpu_checks(name, r.gpu_bdf, r);
      }
    }
    p.devices.push_back(std::move(r));
  }
  return p;
}

namespace {

// mlx5 PRM: QUERY_HCA_CAP (opcode 0x100); op_mod = (cap type << 1) | current (1);
// cap type 0 general, 3 atomic. Output: 16 bytes of header, then the capability.
constexpr uint16_t kQueryHcaCap = 0x100;
constexpr uint16_t kOpModGeneralCur = (0 << 1) | 1;
constexpr uint16_t kOpModAtomicCur = (3 << 1) | 1;
constexpr size_t kCapOffset = 0x10;
// atomic_caps: atomic_operations at bit 0x90, atomic_size_qp at 0xb0, atomic_size_dc at 0xd0.
constexpr size_t kAtomicOps = 0x90 / 8, kAtomicSizeQp = 0xb0 / 8, kAtomicSizeDc = 0xd0 / 8;
// transport_mlx5_common.h: MLX5_ATOMIC_CAP_OP_SUPPORT_* and MLX5_ATOMIC_CAP_SIZE_SUPPORT_4B / _8B;
// NVSHMEM skips the NIC unless QP and DC both offer 4- and 8-byte atomics.
constexpr uint16_t kCas = 0x1, kFa = 0x2, kMaskedCas = 0x4, kMaskedFa = 0x8, kSize4 = 0x4, kSize8 = 0x8;
// cuMemHostRegister flags: PORTABLE | DEVICEMAP | IOMEMORY.
constexpr unsigned kHostRegisterIoMemory = 0x01 | 0x02 | 0x04;

uint16_t be16(const uint8_t* p) { return static_cast<uint16_t>(p[0] << 8 | p[1]); }

class LiveIbgdaProbe : public IbgdaProbeOps {
 public:
  explicit LiveIbgdaProbe(IbgdaProbeEnv env) : env_(std::move(env)) {}

  std::string load() override {
    void* v = ::dlopen(env_.verbs.c_str(), RTLD_NOW | RTLD_GLOBAL);
    if (!v) return "cannot load " + env_.verbs + ": " + ::dlerror();
    void* m = ::dlopen(env_.mlx5.c_str(), RTLD_NOW | RTLD_GLOBAL);
    if (!m) return "cannot load " + env_.mlx5 + ": " + ::dlerror();
    std::string missing;
    dl::bind(v, get_device_list_, "ibv_get_device_list", true, &missing);
    dl::bind(v, free_device_list_, "ibv_free_device_list", true, &missing);
    dl::bind(v, get_device_name_, "ibv_get_device_name", true, &missing);
    dl::bind(v, open_device_, "ibv_open_device", true, &missing);
    dl::bind(v, close_device_, "ibv_close_device", true, &missing);
    dl::bind(m, is_supported_, "mlx5dv_is_supported", true, &missing);
    dl::bind(m, general_cmd_, "mlx5dv_devx_general_cmd", true, &missing);
    dl::bind(m, alloc_uar_, "mlx5dv_devx_alloc_uar", true, &missing);
    dl::bind(m, free_uar_, "mlx5dv_devx_free_uar", true, &missing);
    dl::bind(m, umem_reg_ex_, "mlx5dv_devx_umem_reg_ex", false, &missing);
    dl::bind(m, umem_dereg_, "mlx5dv_devx_umem_dereg", true, &missing);
    if (!missing.empty()) return "rdma-core lacks " + missing;
    cu_ = cuda::load(&cuda_why_, env_.cuda.c_str());
    if (cu_) {
      dl::bind(cu_->handle, host_register_, "cuMemHostRegister_v2", false, &missing);
      dl::bind(cu_->handle, host_unregister_, "cuMemHostUnregister", false, &missing);
    }
    return "";
  }

  std::vector<std::pair<std::string, std::string>> devices() override {
    std::vector<std::pair<std::string, std::string>> out;
    int n = 0;
    ibv_device** list = get_device_list_(&n);
    if (!list) return out;
    auto sys = make_dir_fs(env_.root);
    for (int i = 0; i < n; ++i) {
      std::string name = get_device_name_(list[i]);
      std::string bdf;
      if (auto link = sys->readlink("/sys/class/infiniband/" + name + "/device"))
        if (auto b = parse_bdf(link->substr(link->rfind('/') + 1))) bdf = *b;
      out.emplace_back(name, bdf);
    }
    free_device_list_(list);
    return out;
  }

  IbgdaProbeResult query_caps(const std::string& name) override {
    IbgdaProbeResult r;
    ibv_context* ctx = open(name, r);
    if (!ctx) return r;
    r.mlx5 = is_supported_(ctx->device) ? 1 : 0;
    if (r.mlx5 == 1) {
      std::vector<uint8_t> out;
      r.devx = query_cap(ctx, kOpModGeneralCur, out) == 0 ? 1 : 0;
      if (r.devx == 0) r.why = "mlx5dv_devx_general_cmd(QUERY_HCA_CAP general) failed: " + std::string(std::strerror(errno));
      if (r.devx == 1) {
        if (int e = query_cap(ctx, kOpModAtomicCur, out); e != 0) {
          r.why = "QUERY_HCA_CAP(atomic) failed: " + std::string(std::strerror(e));
        } else {
          const uint8_t* cap = out.data() + kCapOffset;
          const uint16_t ops = be16(cap + kAtomicOps), qp = be16(cap + kAtomicSizeQp), dc = be16(cap + kAtomicSizeDc);
          const bool all = (ops & kCas) && (ops & kFa) && (ops & kMaskedCas) && (ops & kMaskedFa) && (qp & kSize4) && (dc & kSize4) &&
                           (qp & kSize8) && (dc & kSize8);
          r.atomics = all ? 1 : 0;
          if (!all)
            r.why = "atomic caps: operations 0x" + hex(ops) + ", sizes QP 0x" + hex(qp) + " DC 0x" + hex(dc) +
                    " (NVSHMEM needs CAS, FA, masked CAS/FA, 4- and 8-byte)";
        }
      }
    }
    close_device_(ctx);
    return r;
  }

  void gpu_checks(const std::string& name, const std::string& gpu_bdf, IbgdaProbeResult& r) override {
    if (!cu_) {
      r.why = "CUDA not loaded: " + cuda_why_;
      return;
    }
    cuda::CUdevice dev = -1;
    if (cu_->cuInit(0) != cuda::CUDA_SUCCESS) {
      r.why = "cuInit failed";
      return;
    }
    int n = 0;
    cu_->cuDeviceGetCount(&n);
    for (int i = 0; i < n; ++i) {
      cuda::CUdevice d = 0;
      char id[32] = {};
      if (cu_->cuDeviceGet(&d, i) != cuda::CUDA_SUCCESS || cu_->cuDeviceGetPCIBusId(id, sizeof id, d) != cuda::CUDA_SUCCESS) continue;
      if (auto b = parse_bdf(id); b && *b == gpu_bdf) dev = d;
    }
    if (dev < 0) {
      r.why = "CUDA does not list the GPU " + gpu_bdf;
      return;
    }
    cuda::CUcontext cx = nullptr;
    if (cu_->cuDevicePrimaryCtxRetain(&cx, dev) != cuda::CUDA_SUCCESS || cu_->cuCtxSetCurrent(cx) != cuda::CUDA_SUCCESS) {
      r.why = "no CUDA context on " + gpu_bdf;
      return;
    }
    ibv_context* ctx = open(name, r);
    if (ctx) {
      dmabuf_umem(ctx, r);
      uar_gpu_map(ctx, r);
      close_device_(ctx);
    }
    cu_->cuDevicePrimaryCtxRelease(dev);
  }

 private:
  const IbgdaProbeEnv env_;
  ibv_device** (*get_device_list_)(int*) = nullptr;
  void (*free_device_list_)(ibv_device**) = nullptr;
  const char* (*get_device_name_)(ibv_device*) = nullptr;
  ibv_context* (*open_device_)(ibv_device*) = nullptr;
  int (*close_device_)(ibv_context*) = nullptr;
  bool (*is_supported_)(ibv_device*) = nullptr;
  int (*general_cmd_)(ibv_context*, const void*, size_t, void*, size_t) = nullptr;
  mlx5dv_devx_uar* (*alloc_uar_)(ibv_context*, uint32_t) = nullptr;
  void (*free_uar_)(mlx5dv_devx_uar*) = nullptr;
  mlx5dv_devx_umem* (*umem_reg_ex_)(ibv_context*, mlx5dv_devx_umem_in*) = nullptr;
  int (*umem_dereg_)(mlx5dv_devx_umem*) = nullptr;
  const cuda::Api* cu_ = nullptr;
  std::string cuda_why_;
  cuda::CUresult (*host_register_)(void*, size_t, unsigned) = nullptr;
  cuda::CUresult (*host_unregister_)(void*) = nullptr;

  static std::string hex(unsigned v) {
    char b[8];
    std::snprintf(b, sizeof b, "%x", v);
    return b;
  }

  ibv_context* open(const std::string& name, IbgdaProbeResult& r) {
    int n = 0;
    ibv_device** list = get_device_list_(&n);
    ibv_context* ctx = nullptr;
    for (int i = 0; list && i < n; ++i)
      if (name == get_device_name_(list[i])) ctx = open_device_(list[i]);
    if (list) free_device_list_(list);
    if (!ctx && r.why.empty()) r.why = "ibv_open_device(" + name + ") failed: " + std::strerror(errno);
    return ctx;
  }

  int query_cap(ibv_context* ctx, uint16_t op_mod, std::vector<uint8_t>& out) {
    uint8_t in[16] = {};
    in[0] = kQueryHcaCap >> 8;
    in[1] = kQueryHcaCap & 0xff;
    in[6] = static_cast<uint8_t>(op_mod >> 8);
    in[7] = static_cast<uint8_t>(op_mod & 0xff);
    out.assign(kCapOffset + 4096, 0);
    errno = 0;
    int rc = general_cmd_(ctx, in, sizeof in, out.data(), out.size());
    return rc == 0 ? 0 : (errno ? errno : EIO);
  }

  void dmabuf_umem(ibv_context* ctx, IbgdaProbeResult& r) {
    if (!umem_reg_ex_ || !cu_->cuMemGetHandleForAddressRange) {
      r.why +=
          std::string(r.why.empty() ? "" : "; ") + "no mlx5dv_devx_umem_reg_ex / cuMemGetHandleForAddressRange: dma-buf umem not tried";
      return;
    }
    const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
    cuda::CUdeviceptr base = 0;
    if (cu_->cuMemAlloc(&base, 2 * page) != cuda::CUDA_SUCCESS) {
      r.why += std::string(r.why.empty() ? "" : "; ") + "cuMemAlloc failed";
      return;
    }
    const cuda::CUdeviceptr aligned = (base + page - 1) & ~static_cast<cuda::CUdeviceptr>(page - 1);
    int fd = -1;
    cuda::CUresult cr = cu_->cuMemGetHandleForAddressRange(&fd, aligned, page, cuda::CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0);
    if (cr != cuda::CUDA_SUCCESS) {
      r.dmabuf_umem = 0;
      r.why += std::string(r.why.empty() ? "" : "; ") + "cuMemGetHandleForAddressRange(DMA_BUF_FD): " + cu_->error_text(cr);
    } else {
      mlx5dv_devx_umem_in in{};
      in.addr = nullptr;
      in.size = page;
      in.access = IBV_ACCESS_LOCAL_WRITE;
      in.pgsz_bitmap = UINT64_MAX & ~static_cast<uint64_t>(page - 1);
      in.comp_mask = MLX5DV_UMEM_MASK_DMABUF;
      in.dmabuf_fd = fd;
      errno = 0;
      mlx5dv_devx_umem* umem = umem_reg_ex_(ctx, &in);
      r.dmabuf_umem = umem ? 1 : 0;
      if (!umem)
        r.why += std::string(r.why.empty() ? "" : "; ") + "mlx5dv_devx_umem_reg_ex(dma-buf): " + std::strerror(errno ? errno : EIO);
      else
        umem_dereg_(umem);
      ::close(fd);
    }
    cu_->cuMemFree(base);
  }

  void uar_gpu_map(ibv_context* ctx, IbgdaProbeResult& r) {
    if (!host_register_ || !host_unregister_) {
      r.why += std::string(r.why.empty() ? "" : "; ") + "libcuda lacks cuMemHostRegister: UAR mapping not tried";
      return;
    }
    mlx5dv_devx_uar* uar = alloc_uar_(ctx, MLX5DV_UAR_ALLOC_TYPE_BF);
    if (!uar) uar = alloc_uar_(ctx, MLX5DV_UAR_ALLOC_TYPE_NC);
    if (!uar) {
      r.why += std::string(r.why.empty() ? "" : "; ") + "mlx5dv_devx_alloc_uar failed: " + std::strerror(errno);
      return;
    }
    // One page: the UAR's mapping as the process has it. Registered, then unregistered;
    // never written or read.
    const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
    cuda::CUresult cr = host_register_(uar->base_addr, page, kHostRegisterIoMemory);
    r.uar_gpu_map = cr == cuda::CUDA_SUCCESS ? 1 : 0;
    if (cr == cuda::CUDA_SUCCESS)
      host_unregister_(uar->base_addr);
    else
      r.why += std::string(r.why.empty() ? "" : "; ") + "cuMemHostRegister(IOMEMORY) of the UAR page: " + cu_->error_text(cr);
    free_uar_(uar);
  }
};

}  // namespace

std::unique_ptr<IbgdaProbeOps> make_live_ibgda_probe(const IbgdaProbeEnv& env) { return std::make_unique<LiveIbgdaProbe>(env); }

}  // namespace gdrpeer::topo

#include "gdrpeer/verify/memory_source.hpp"

#include <fcntl.h>
#include <linux/udmabuf.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "gdrpeer/dynload/cuda.hpp"
#include "gdrpeer/gdrpeer.hpp"

namespace gdrpeer::verify {

using State = SourceSetup::State;

// CUmemRangeFlags: CU_MEM_RANGE_FLAG_DMA_BUF_MAPPING_TYPE_PCIE = 0x1 (CUDA 12.8's cuda.h; NVIDIA's
// cuda-python bindings list MemRangeFlags.MEM_RANGE_FLAG_DMA_BUF_MAPPING_TYPE_PCIE = 1).
constexpr unsigned long long kDmabufMappingTypePcie = 0x1;

const std::vector<SourceKind>& all_source_kinds() {
  static const std::vector<SourceKind> k = {SourceKind::host, SourceKind::hugepage, SourceKind::gdrpeer, SourceKind::cuda,
                                            SourceKind::cuda_vmm};
  return k;
}

std::string source_name(SourceKind k) {
  switch (k) {
    case SourceKind::host: return "host";
    case SourceKind::hugepage: return "hugepage";
    case SourceKind::gdrpeer: return "gdrpeer";
    case SourceKind::cuda: return "cuda";
    case SourceKind::cuda_vmm: return "cuda-vmm";
  }
  return "?";
}

std::optional<SourceKind> parse_source(const std::string& name) {
  for (auto k : all_source_kinds())
    if (source_name(k) == name) return k;
  return std::nullopt;
}

std::string state_name(State s) {
  switch (s) {
    case State::ready: return "ready";
    case State::absent: return "absent";
    case State::unsupported: return "unsupported";
    case State::error: return "error";
  }
  return "?";
}

namespace {

std::string errno_text(int err) { return errno_name(err) + " (" + std::strerror(err) + ")"; }

std::string hex(uint64_t v) {
  char b[32];
  std::snprintf(b, sizeof b, "0x%llx", static_cast<unsigned long long>(v));
  return b;
}

// The exporter name the kernel records for a dma-buf ("nv_dmabuf", "gdrpeer", "udmabuf").
std::string dmabuf_exporter(int fd) {
  std::ifstream in("/proc/self/fdinfo/" + std::to_string(fd));
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("exp_name:", 0) == 0) {
      auto v = line.substr(9);
      v.erase(0, v.find_first_not_of(" \t"));
      return v;
    }
  return "unknown";
}

// ---- host memory (4 KiB pages or huge pages), backed by a memfd -----------
//
// A memfd instead of malloc: the same pages can then be exported as a dma-buf
// through /dev/udmabuf where the kernel has it, so the dma-buf registration path
// can be checked with plain host memory too.
class MemfdSource final : public MemorySource {
 public:
  MemfdSource(bool huge, size_t page) : huge_(huge), page_(page) {}
  ~MemfdSource() override {
    if (dmabuf_) ::close(dmabuf_->fd);
    if (address_ != nullptr) ::munmap(address_, size_);
    if (memfd_ >= 0) ::close(memfd_);
  }
  SourceKind kind() const override { return huge_ ? SourceKind::hugepage : SourceKind::host; }
  bool is_device_memory() const override { return false; }
  std::string description() const override {
    return std::string(huge_ ? "host memory in huge pages of " : "host memory in pages of ") + describe_bytes(page_) + ", " +
           describe_bytes(size_);
  }
  void write(size_t off, const uint8_t* src, size_t len) override { std::memcpy(static_cast<uint8_t*>(address_) + off, src, len); }
  void read(size_t off, uint8_t* dst, size_t len) override { std::memcpy(dst, static_cast<const uint8_t*>(address_) + off, len); }

  // Returns an empty string on success, the reason otherwise.
  std::string allocate(size_t size, const std::string& udmabuf_path) {
    size_ = size;
    unsigned flags = MFD_CLOEXEC | MFD_ALLOW_SEALING;
    if (huge_) flags |= MFD_HUGETLB;
    memfd_ = ::memfd_create("gdrpeer-verify", flags);
    if (memfd_ < 0) return "memfd_create: " + errno_text(errno);
    if (::ftruncate(memfd_, static_cast<off_t>(size_)) != 0) return "ftruncate " + std::to_string(size_) + ": " + errno_text(errno);
    // MAP_POPULATE: fault every page in now, so a shortage shows here and not
    // later as SIGBUS in the middle of a transfer.
    void* p = ::mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, memfd_, 0);
    if (p == MAP_FAILED) return "mmap " + describe_bytes(size_) + ": " + errno_text(errno);
    address_ = p;
    // Touch every page (MAP_POPULATE does not report failure for hugetlb).
    std::memset(address_, 0, size_);
    export_udmabuf(udmabuf_path);
    return {};
  }

 private:
  void export_udmabuf(const std::string& path) {
    const int dev = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
    if (dev < 0) {
      const int err = errno;
      dmabuf_problem_ = err == ENOENT
                            ? "host memory has no dma-buf exporter on this node (" + path + " is absent: kernel without CONFIG_UDMABUF)"
                            : "open " + path + ": " + errno_text(err);
      return;
    }
    // udmabuf requires that the memfd can no longer shrink.
    if (::fcntl(memfd_, F_ADD_SEALS, F_SEAL_SHRINK) != 0) {
      dmabuf_problem_ = "sealing the memfd for udmabuf: " + errno_text(errno);
      ::close(dev);
      return;
    }
    udmabuf_create req{};
    req.memfd = static_cast<__u32>(memfd_);
    req.flags = UDMABUF_FLAGS_CLOEXEC;
    req.offset = 0;
    req.size = size_;
    const int fd = ::ioctl(dev, UDMABUF_CREATE, &req);
    const int err = errno;
    ::close(dev);
    if (fd < 0) {
      dmabuf_problem_ = "UDMABUF_CREATE on " + path + ": " + errno_text(err);
      return;
    }
    dmabuf_ = DmaBufRef{fd, 0};
    facts_.emplace_back("dma-buf", "udmabuf fd " + std::to_string(fd));
  }

  bool huge_;
  size_t page_;
  int memfd_ = -1;
};

struct HugePageInfo {
  uint64_t total = 0, free = 0, size = 0;
};

HugePageInfo read_hugepage_info() {
  HugePageInfo h;
  std::ifstream in("/proc/meminfo");
  std::string key;
  uint64_t value = 0;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    ls >> key >> value;
    if (key == "HugePages_Total:") h.total = value;
    if (key == "HugePages_Free:") h.free = value;
    if (key == "Hugepagesize:") h.size = value * 1024;
  }
  return h;
}

SourceSetup prepare_host(SourceKind kind, const SourceOptions& opt) {
  SourceSetup s;
  s.kind = kind;
  const bool huge = kind == SourceKind::hugepage;
  size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  if (huge) {
    const auto h = read_hugepage_info();
    if (h.size == 0) {
      s.state = State::unsupported;
      s.reason = "this kernel has no huge page support (no Hugepagesize in /proc/meminfo)";
      return s;
    }
    page = h.size;
    if (h.total == 0) {
      s.state = State::absent;
      s.reason = "no huge pages are configured (HugePages_Total is 0; set vm.nr_hugepages)";
      return s;
    }
    const uint64_t need = (opt.size + page - 1) / page;
    if (need > h.free) {
      s.state = State::error;
      s.reason = "needs " + std::to_string(need) + " huge pages of " + describe_bytes(page) + ", only " + std::to_string(h.free) + " of " +
                 std::to_string(h.total) + " free";
      return s;
    }
  }
  auto src = std::make_unique<MemfdSource>(huge, page);
  const size_t size = (opt.size + page - 1) / page * page;
  if (auto why = src->allocate(size, opt.udmabuf_path); !why.empty()) {
    s.state = State::error;
    s.reason = why;
    return s;
  }
  s.state = State::ready;
  s.source = std::move(src);
  return s;
}

// ---- gdrpeer device memory ------------------------------------------------

class GdrpeerSource final : public MemorySource {
 public:
  SourceKind kind() const override { return SourceKind::gdrpeer; }
  bool is_device_memory() const override { return true; }
  std::string description() const override { return description_; }
  void write(size_t off, const uint8_t* src, size_t len) override { std::memcpy(static_cast<uint8_t*>(address_) + off, src, len); }
  void read(size_t off, uint8_t* dst, size_t len) override { std::memcpy(dst, static_cast<const uint8_t*>(address_) + off, len); }
  ~GdrpeerSource() override = default;

  std::optional<Device> device;
  Buffer buffer;
  Mapping mapping;
  DmaBuf exported;
  std::string description_;
  std::string export_problem;

  void finish() {
    size_ = mapping.size();
    address_ = mapping.data();
    if (exported.fd() >= 0)
      dmabuf_ = DmaBufRef{exported.fd(), 0};
    else
      dmabuf_problem_ = export_problem;
  }
};

SourceSetup prepare_gdrpeer(const SourceOptions& opt) {
  SourceSetup s;
  s.kind = SourceKind::gdrpeer;
  auto src = std::make_unique<GdrpeerSource>();
  try {
    src->device.emplace(Device::open(opt.gdrpeer_path));
  } catch (const Error& e) {
    s.state = e.error_code() == ENOENT ? State::absent : State::error;
    s.reason = e.what();
    return s;
  }
  const Device& dev = *src->device;
  s.facts.emplace_back("driver ABI", dev.info().abi_string());
  std::vector<DeviceInfo> devices;
  try {
    devices = dev.list_devices();
  } catch (const Error& e) {
    s.state = State::error;
    s.reason = e.what();
    return s;
  }
  const DeviceInfo* info = nullptr;
  for (const auto& d : devices)
    if (d.index == opt.gdrpeer_device) info = &d;
  if (info == nullptr) {
    if (devices.empty()) {
      s.state = State::absent;
      s.reason = "gdrpeer is loaded but has no device bound (insmod gdrpeer.ko pcibar=BDF)";
    } else {
      s.state = State::error;
      s.reason = "no gdrpeer device " + std::to_string(opt.gdrpeer_device) + " (there are " + std::to_string(devices.size()) + ")";
    }
    return s;
  }
  s.facts.emplace_back("device", std::to_string(info->index) + ": " + info->provider_name() + " " + info->bdf() + " BAR" +
                                     std::to_string(info->bar) + ", " + describe_bytes(info->bar_size) + ", " +
                                     describe_bytes(info->free_bytes) + " free");
  try {
    src->buffer = dev.alloc(info->index, opt.size);
    src->mapping = src->buffer.map();
  } catch (const Error& e) {
    s.state = State::error;
    s.reason = e.what();
    return s;
  }
  try {
    src->exported = src->buffer.export_dmabuf();
    s.facts.emplace_back("dma-buf", "fd " + std::to_string(src->exported.fd()) + ", exporter " + dmabuf_exporter(src->exported.fd()));
  } catch (const Error& e) {
    src->export_problem = e.what();
  }
  s.facts.emplace_back("bar offset", hex(src->buffer.bar_offset()));
  src->description_ = "gdrpeer device memory, " + info->provider_name() + " " + info->bdf() + " BAR" + std::to_string(info->bar) + ", " +
                      describe_bytes(src->buffer.size());
  src->finish();
  s.state = State::ready;
  s.source = std::move(src);
  return s;
}

// ---- CUDA device memory ---------------------------------------------------

class CudaSource final : public MemorySource {
 public:
  CudaSource(const cuda::Api* api, bool vmm) : api_(api), vmm_(vmm) {}
  ~CudaSource() override {
    if (dmabuf_) ::close(dmabuf_->fd);
    if (ctx_ != nullptr) api_->cuCtxSetCurrent(ctx_);
    if (vmm_) {
      if (mapped_) api_->cuMemUnmap(ptr_, size_);
      if (ptr_ != 0) api_->cuMemAddressFree(ptr_, size_);
      if (handle_ != 0) api_->cuMemRelease(handle_);
    } else if (ptr_ != 0) {
      api_->cuMemFree(ptr_);
    }
    if (ctx_ != nullptr) api_->cuDevicePrimaryCtxRelease(dev_);
  }
  SourceKind kind() const override { return vmm_ ? SourceKind::cuda_vmm : SourceKind::cuda; }
  bool is_device_memory() const override { return true; }
  std::string description() const override {
    return std::string(vmm_ ? "CUDA VMM memory (cuMemCreate + cuMemMap) on " : "CUDA memory (cuMemAlloc) on ") + gpu_name_ + ", " +
           describe_bytes(size_);
  }
  void write(size_t off, const uint8_t* src, size_t len) override { check(api_->cuMemcpyHtoD(ptr_ + off, src, len), "cuMemcpyHtoD"); }
  void read(size_t off, uint8_t* dst, size_t len) override { check(api_->cuMemcpyDtoH(dst, ptr_ + off, len), "cuMemcpyDtoH"); }
  void after_remote_write() override {
    if (api_->cuFlushGPUDirectRDMAWrites != nullptr)
      api_->cuFlushGPUDirectRDMAWrites(cuda::CU_FLUSH_GPU_DIRECT_RDMA_WRITES_TARGET_CURRENT_CTX,
                                       cuda::CU_FLUSH_GPU_DIRECT_RDMA_WRITES_TO_OWNER);
  }

  // Returns "" or why it failed; fills facts as it learns them.
  std::string setup(const SourceOptions& opt, Facts& facts, State& fail_state) {
    auto fail = [&](cuda::CUresult r, const std::string& what) { return what + " failed: " + api_->error_text(r); };
    fail_state = State::error;
    int version = 0;
    api_->cuDriverGetVersion(&version);
    facts.emplace_back("CUDA driver API", std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10));
    if (auto r = api_->cuInit(0); r != cuda::CUDA_SUCCESS) {
      if (r == 100) fail_state = State::absent;  // CUDA_ERROR_NO_DEVICE
      return fail(r, "cuInit");
    }
    int count = 0;
    api_->cuDeviceGetCount(&count);
    if (opt.cuda_device < 0 || opt.cuda_device >= count)
      return "no CUDA device " + std::to_string(opt.cuda_device) + " (this node has " + std::to_string(count) + ")";
    if (auto r = api_->cuDeviceGet(&dev_, opt.cuda_device); r != cuda::CUDA_SUCCESS) return fail(r, "cuDeviceGet");
    char name[256] = {};
    api_->cuDeviceGetName(name, sizeof name - 1, dev_);
    gpu_name_ = name;
    auto attr = [&](int a) {
      int v = -1;
      api_->cuDeviceGetAttribute(&v, a, dev_);
      return v;
    };
    char bdf[32];
    std::snprintf(bdf, sizeof bdf, "%04x:%02x:%02x.0", attr(cuda::CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID),
                  attr(cuda::CU_DEVICE_ATTRIBUTE_PCI_BUS_ID), attr(cuda::CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID));
    facts.emplace_back("gpu", std::to_string(opt.cuda_device) + ": " + gpu_name_ + " at " + bdf);
    const int gdr = attr(cuda::CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED);
    const int dmabuf_ok = attr(cuda::CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED);
    const int vmm_ok = attr(cuda::CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED);
    const int vmm_gdr = attr(cuda::CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED);
    facts.emplace_back("GPU_DIRECT_RDMA_SUPPORTED", std::to_string(gdr));
    facts.emplace_back("DMA_BUF_SUPPORTED", std::to_string(dmabuf_ok));
    facts.emplace_back("GPU_DIRECT_RDMA_FLUSH_WRITES_OPTIONS",
                       std::to_string(attr(cuda::CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_FLUSH_WRITES_OPTIONS)));
    facts.emplace_back("GPU_DIRECT_RDMA_WRITES_ORDERING", std::to_string(attr(cuda::CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WRITES_ORDERING)));
    if (vmm_) {
      facts.emplace_back("VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED", std::to_string(vmm_ok));
      facts.emplace_back("GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED", std::to_string(vmm_gdr));
      if (vmm_ok != 1 || api_->cuMemCreate == nullptr) {
        fail_state = State::unsupported;
        return gpu_name_ + " (or this driver) does not support the CUDA VMM API";
      }
    }
    if (auto r = api_->cuDevicePrimaryCtxRetain(&ctx_, dev_); r != cuda::CUDA_SUCCESS) {
      ctx_ = nullptr;
      return fail(r, "cuDevicePrimaryCtxRetain");
    }
    if (auto r = api_->cuCtxSetCurrent(ctx_); r != cuda::CUDA_SUCCESS) return fail(r, "cuCtxSetCurrent");
    size_t free_b = 0, total_b = 0;
    api_->cuMemGetInfo(&free_b, &total_b);
    facts.emplace_back("GPU memory", describe_bytes(free_b) + " free of " + describe_bytes(total_b));
    // dma-buf export needs host-page-aligned ranges; 64 KiB also matches the
    // GPU's BAR1 mapping granularity used by peer-memory clients.
    size_ = (opt.size + 0xffff) & ~size_t{0xffff};
    const std::string asked = "allocate " + describe_bytes(size_) + " on GPU " + std::to_string(opt.cuda_device);
    if (size_ > total_b) {
      return asked + ": the GPU has only " + describe_bytes(total_b);
    }
    if (vmm_) {
      cuda::CUmemAllocationProp prop{};
      prop.type = cuda::CU_MEM_ALLOCATION_TYPE_PINNED;
      prop.requestedHandleTypes = cuda::CU_MEM_HANDLE_TYPE_NONE;
      prop.location = {cuda::CU_MEM_LOCATION_TYPE_DEVICE, dev_};
      prop.allocFlags.gpuDirectRDMACapable = vmm_gdr == 1 ? 1 : 0;
      size_t gran = 0;
      if (auto r = api_->cuMemGetAllocationGranularity(&gran, &prop, cuda::CU_MEM_ALLOC_GRANULARITY_RECOMMENDED); r != cuda::CUDA_SUCCESS)
        return fail(r, "cuMemGetAllocationGranularity");
      size_ = (size_ + gran - 1) / gran * gran;
      if (auto r = api_->cuMemCreate(&handle_, size_, &prop, 0); r != cuda::CUDA_SUCCESS) return fail(r, "cuMemCreate (" + asked + ")");
      if (auto r = api_->cuMemAddressReserve(&ptr_, size_, gran, 0, 0); r != cuda::CUDA_SUCCESS) {
        ptr_ = 0;
        return fail(r, "cuMemAddressReserve");
      }
      if (auto r = api_->cuMemMap(ptr_, size_, 0, handle_, 0); r != cuda::CUDA_SUCCESS) return fail(r, "cuMemMap");
      mapped_ = true;
      cuda::CUmemAccessDesc access{{cuda::CU_MEM_LOCATION_TYPE_DEVICE, dev_}, cuda::CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
      if (auto r = api_->cuMemSetAccess(ptr_, size_, &access, 1); r != cuda::CUDA_SUCCESS) return fail(r, "cuMemSetAccess");
      facts.emplace_back("allocation",
                         "cuMemCreate " + describe_bytes(size_) + " (granularity " + describe_bytes(gran) + "), mapped at " + hex(ptr_));
    } else {
      if (auto r = api_->cuMemAlloc(&ptr_, size_); r != cuda::CUDA_SUCCESS) {
        ptr_ = 0;
        return fail(r, "cuMemAlloc (" + asked + ")");
      }
      // Every CUDA copy to this range synchronises, as GPUDirect RDMA requires.
      unsigned int one = 1;
      api_->cuPointerSetAttribute(&one, cuda::CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, ptr_);
      facts.emplace_back("allocation", "cuMemAlloc " + describe_bytes(size_) + " at " + hex(ptr_));
    }
    address_ = reinterpret_cast<void*>(static_cast<uintptr_t>(ptr_));

    // The dma-buf path.
    if (dmabuf_ok != 1) {
      dmabuf_problem_ = gpu_name_ + " reports CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED = " + std::to_string(dmabuf_ok) +
                        " (dma-buf export needs NVIDIA's open kernel modules and CUDA 11.7+)";
    } else if (api_->cuMemGetHandleForAddressRange == nullptr) {
      dmabuf_problem_ = "this libcuda has no cuMemGetHandleForAddressRange (CUDA < 11.7)";
    } else if (opt.cuda_dmabuf_pcie && version < 12080) {
      // perftest's cuda_memory.c refuses the flag below driver 12.8 the same way.
      dmabuf_problem_ = "--cuda-dmabuf-mapping pcie: CUDA driver " + std::to_string(version / 1000) + "." +
                        std::to_string(version % 1000 / 10) + " has no CU_MEM_RANGE_FLAG_DMA_BUF_MAPPING_TYPE_PCIE (CUDA 12.8 and later)";
    } else {
      int fd = -1;
      const std::string call = opt.cuda_dmabuf_pcie ? "cuMemGetHandleForAddressRange(DMA_BUF_FD, MAPPING_TYPE_PCIE)"
                                                    : "cuMemGetHandleForAddressRange(DMA_BUF_FD)";
      if (auto r = api_->cuMemGetHandleForAddressRange(&fd, ptr_, size_, cuda::CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD,
                                                       opt.cuda_dmabuf_pcie ? kDmabufMappingTypePcie : 0);
          r != cuda::CUDA_SUCCESS) {
        dmabuf_problem_ = fail(r, call);
      } else {
        dmabuf_ = DmaBufRef{fd, 0};
        facts.emplace_back("dma-buf", call + " gave fd " + std::to_string(fd) + ", exporter " + dmabuf_exporter(fd));
      }
    }
    if (!dmabuf_) facts.emplace_back("dma-buf", "not available: " + dmabuf_problem_);
    return {};
  }

 private:
  void check(cuda::CUresult r, const char* what) const {
    if (r != cuda::CUDA_SUCCESS) throw std::runtime_error(std::string(what) + " failed: " + api_->error_text(r));
  }
  const cuda::Api* api_;
  bool vmm_;
  cuda::CUdevice dev_ = 0;
  cuda::CUcontext ctx_ = nullptr;
  cuda::CUdeviceptr ptr_ = 0;
  cuda::CUmemGenericAllocationHandle handle_ = 0;
  bool mapped_ = false;
  std::string gpu_name_;
};

SourceSetup prepare_cuda(SourceKind kind, const SourceOptions& opt) {
  SourceSetup s;
  s.kind = kind;
  std::string why;
  const cuda::Api* api = cuda::load(&why, opt.libcuda.c_str());
  if (api == nullptr) {
    s.state = State::absent;
    s.reason = why;
    return s;
  }
  auto src = std::make_unique<CudaSource>(api, kind == SourceKind::cuda_vmm);
  State fail_state = State::error;
  if (auto e = src->setup(opt, s.facts, fail_state); !e.empty()) {
    s.state = fail_state;
    s.reason = e;
    return s;
  }
  s.state = State::ready;
  s.source = std::move(src);
  return s;
}

}  // namespace

SourceSetup prepare_source(SourceKind kind, const SourceOptions& opt) {
  SourceSetup s;
  switch (kind) {
    case SourceKind::host:
    case SourceKind::hugepage: s = prepare_host(kind, opt); break;
    case SourceKind::gdrpeer: s = prepare_gdrpeer(opt); break;
    case SourceKind::cuda:
    case SourceKind::cuda_vmm: s = prepare_cuda(kind, opt); break;
  }
  // Facts the source learnt while allocating come after those of the setup.
  if (s.source)
    for (const auto& f : s.source->facts()) s.facts.push_back(f);
  return s;
}

}  // namespace gdrpeer::verify

// Memory under test: where the bytes that the NIC writes and reads live.
//
// Each source gives the two handles an RDMA stack can register:
//  - address(): a pointer in this process, for ibv_reg_mr (pins pages, or asks a
//    peer-memory client for device memory);
//  - dmabuf(): a dma-buf fd, for ibv_reg_dmabuf_mr.
// and a CPU-side path (write/read) that the checker uses to fill and inspect the
// memory independently of the NIC.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace gdrpeer::verify {

enum class SourceKind { host, hugepage, gdrpeer, cuda, cuda_vmm };

const std::vector<SourceKind>& all_source_kinds();
std::string source_name(SourceKind k);  // "host", "hugepage", "gdrpeer", "cuda", "cuda-vmm"
std::optional<SourceKind> parse_source(const std::string& name);

struct DmaBufRef {
  int fd = -1;
  uint64_t offset = 0;  // of the memory under test inside the dma-buf
};

using Facts = std::vector<std::pair<std::string, std::string>>;

class MemorySource {
 public:
  virtual ~MemorySource() = default;
  virtual SourceKind kind() const = 0;
  virtual std::string description() const = 0;  // one line, for the report
  virtual bool is_device_memory() const = 0;    // PCI BAR / GPU memory, not system RAM
  size_t size() const { return size_; }
  void* address() const { return address_; }
  // nullopt when this memory cannot be had as a dma-buf here; dmabuf_problem() says why.
  std::optional<DmaBufRef> dmabuf() const { return dmabuf_; }
  const std::string& dmabuf_problem() const { return dmabuf_problem_; }
  const Facts& facts() const { return facts_; }

  // CPU-side access used to check what the NIC did. Throws std::runtime_error.
  virtual void write(size_t offset, const uint8_t* src, size_t len) = 0;
  virtual void read(size_t offset, uint8_t* dst, size_t len) = 0;
  // Called after the NIC wrote into the memory and before read(): GPU memory
  // needs the GPUDirect RDMA writes flushed.
  virtual void after_remote_write() {}

 protected:
  size_t size_ = 0;
  void* address_ = nullptr;
  std::optional<DmaBufRef> dmabuf_;
  std::string dmabuf_problem_;
  Facts facts_;
};

struct SourceOptions {
  size_t size = 1 << 20;
  std::string gdrpeer_path = "/dev/gdrpeer";
  uint32_t gdrpeer_device = 0;
  int cuda_device = 0;
  std::string libcuda = "libcuda.so.1";
  std::string udmabuf_path = "/dev/udmabuf";
  // --cuda-dmabuf-mapping pcie: ask cuMemGetHandleForAddressRange for a dma-buf mapped through
  // the GPU's PCIe BAR1 (CU_MEM_RANGE_FLAG_DMA_BUF_MAPPING_TYPE_PCIE, CUDA 12.8+), which Grace
  // systems (GH200/GB200) need for a NIC behind PCIe: their default is the C2C path.
  bool cuda_dmabuf_pcie = false;
};

struct SourceSetup {
  enum class State {
    ready,        // allocated, usable
    absent,       // this node does not have it (no driver, no hugepages configured)
    unsupported,  // it exists but cannot provide this kind of memory
    error,        // it should have worked and did not (allocation failed, bad index)
  };
  SourceKind kind{};
  State state = State::absent;
  std::string reason;  // why not ready
  Facts facts;         // what we learnt even when not ready (e.g. GPU attributes)
  std::unique_ptr<MemorySource> source;
};

std::string state_name(SourceSetup::State s);

SourceSetup prepare_source(SourceKind kind, const SourceOptions& opt);

}  // namespace gdrpeer::verify

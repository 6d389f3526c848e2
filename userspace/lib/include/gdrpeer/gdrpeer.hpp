// libgdrpeer: a small RAII C++ API over the /dev/gdrpeer ioctl ABI (uapi/gdrpeer.h).
//
//   auto dev = gdrpeer::Device::open();          // open + ABI handshake
//   auto buf = dev.alloc(0, 1 << 20);             // device memory in device 0's BAR
//   auto map = buf.map();                         // CPU pointer (ibv_reg_mr, memcpy)
//   auto dmabuf = buf.export_dmabuf();            // dma-buf fd (ibv_reg_dmabuf_mr)
//
// Every failure throws gdrpeer::Error carrying the errno and what was asked.
// A Buffer keeps its Device's file open; destroying the Buffer frees the handle
// (the driver keeps the memory until exported dma-bufs and mappings are gone).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gdrpeer/error.hpp"
#include "gdrpeer/unique_fd.hpp"

namespace gdrpeer {

inline constexpr const char* kDefaultDevicePath = "/dev/gdrpeer";

struct DriverInfo {
  uint32_t abi_version = 0;  // major << 16 | minor
  uint32_t caps = 0;         // GDRPEER_CAP_*
  uint32_t num_devices = 0;
  uint64_t page_size = 0;
  uint64_t mmap_window = 0;
  bool can_export_dmabuf() const noexcept;
  bool can_mmap() const noexcept;
  std::string abi_string() const;  // "1.0"
};

struct DeviceInfo {
  uint32_t index = 0;
  uint32_t provider = 0;
  uint32_t pci_domain = 0;
  uint8_t pci_bus = 0, pci_dev = 0, pci_func = 0, bar = 0;
  uint64_t bar_size = 0;
  uint64_t free_bytes = 0;
  uint64_t alloc_align = 0;
  std::string bdf() const;            // "0000:01:00.0"
  std::string provider_name() const;  // "pcibar", "nvidia", "provider 7"
};

struct BufferState {  // what GDRPEER_IOCTL_QUERY tells about a handle
  uint64_t size = 0;
  uint64_t mmap_offset = 0;
  uint64_t bar_offset = 0;
  uint32_t device = 0;
  uint32_t exports = 0;
};

namespace detail {
struct File;  // the open /dev/gdrpeer, shared by a Device and its Buffers
}

// A CPU mapping of device memory; unmapped on destruction.
class Mapping {
 public:
  Mapping() = default;
  Mapping(void* addr, size_t length) noexcept : addr_(addr), length_(length) {}
  Mapping(Mapping&& o) noexcept;
  Mapping& operator=(Mapping&& o) noexcept;
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  ~Mapping();

  void* data() const noexcept { return addr_; }
  size_t size() const noexcept { return length_; }
  void reset() noexcept;

 private:
  void* addr_ = nullptr;
  size_t length_ = 0;
};

// A dma-buf exported from a Buffer; its fd is closed on destruction.
class DmaBuf {
 public:
  DmaBuf() = default;
  DmaBuf(UniqueFd fd, uint64_t offset, uint64_t length) noexcept : fd_(std::move(fd)), offset_(offset), length_(length) {}
  int fd() const noexcept { return fd_.get(); }
  uint64_t offset() const noexcept { return offset_; }  // inside the Buffer
  uint64_t size() const noexcept { return length_; }
  int release() noexcept { return fd_.release(); }

 private:
  UniqueFd fd_;
  uint64_t offset_ = 0;
  uint64_t length_ = 0;
};

class Buffer {
 public:
  Buffer() = default;
  Buffer(Buffer&& o) noexcept;
  Buffer& operator=(Buffer&& o) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer();  // frees the handle; errors are ignored here (use free() to see them)

  uint64_t handle() const noexcept { return handle_; }
  uint64_t size() const noexcept { return size_; }
  uint32_t device() const noexcept { return device_; }
  uint64_t bar_offset() const noexcept { return bar_offset_; }
  uint64_t mmap_offset() const noexcept { return mmap_offset_; }
  explicit operator bool() const noexcept { return handle_ != 0; }

  // length 0 means "to the end of the buffer".
  Mapping map(uint64_t offset = 0, uint64_t length = 0) const;
  DmaBuf export_dmabuf(uint64_t offset = 0, uint64_t length = 0) const;
  BufferState query() const;
  void free();  // frees now and throws on error

 private:
  friend class Device;
  std::shared_ptr<detail::File> file_;
  uint64_t handle_ = 0;
  uint64_t size_ = 0;
  uint64_t mmap_offset_ = 0;
  uint64_t bar_offset_ = 0;
  uint32_t device_ = 0;
};

class Device {
 public:
  // Opens the character device and does the ABI handshake (GDRPEER_IOCTL_INFO).
  static Device open(const std::string& path = kDefaultDevicePath);

  const std::string& path() const noexcept;
  const DriverInfo& info() const noexcept;
  int fd() const noexcept;

  std::vector<DeviceInfo> list_devices() const;
  // Reserves size bytes (rounded up to whole pages) on device `index`.
  Buffer alloc(uint32_t index, uint64_t size) const;

 private:
  explicit Device(std::shared_ptr<detail::File> f) : file_(std::move(f)) {}
  std::shared_ptr<detail::File> file_;
};

// Argument checks shared by the API and its tests (they need no driver).
// Returns why [offset, offset+length) is not a valid page-aligned, non-empty range
// inside an object of `size` bytes, or nullopt when it is.
std::optional<std::string> range_problem(uint64_t offset, uint64_t length, uint64_t size, uint64_t page_size);
// Rounds size up to a multiple of align (a power of two); nullopt on overflow.
std::optional<uint64_t> round_up(uint64_t size, uint64_t align);
// "4096 bytes", "2 MiB (2097152 bytes)"
std::string describe_bytes(uint64_t n);

}  // namespace gdrpeer

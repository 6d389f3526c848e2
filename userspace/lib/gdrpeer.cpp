#include "gdrpeer/gdrpeer.hpp"

#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/mman.h>

#include <cerrno>
#include <cstdio>
#include <utility>

#include "gdrpeer.h"  // uapi

namespace gdrpeer {

namespace detail {
struct File {
  UniqueFd fd;
  std::string path;
  DriverInfo info;
};
}  // namespace detail

namespace {

// ioctl that retries on EINTR and returns 0 or a positive errno.
int do_ioctl(int fd, unsigned long request, void* arg) {
  for (;;) {
    if (::ioctl(fd, request, arg) == 0) return 0;
    if (errno != EINTR) return errno;
  }
}

std::string version_string(uint32_t v) { return std::to_string(GDRPEER_ABI_MAJOR(v)) + "." + std::to_string(GDRPEER_ABI_MINOR(v)); }

std::string open_hint(int err, const std::string& path) {
  switch (err) {
    case ENOENT:
      return path +
             " does not exist: the gdrpeer kernel module is not loaded "
             "(insmod gdrpeer.ko pcibar=BDF)";
    case EACCES:
    case EPERM: return "no permission to open " + path + " (the module parameters dev_mode and dev_gid set who may)";
    case ENXIO:
    case ENODEV: return path + " exists but no driver answers behind it (module unloaded?)";
    default: return {};
  }
}

}  // namespace

// ---- helpers --------------------------------------------------------------

std::optional<uint64_t> round_up(uint64_t size, uint64_t align) {
  if (align == 0 || (align & (align - 1)) != 0) return std::nullopt;
  if (size > UINT64_MAX - (align - 1)) return std::nullopt;
  return (size + align - 1) & ~(align - 1);
}

std::optional<std::string> range_problem(uint64_t offset, uint64_t length, uint64_t size, uint64_t page_size) {
  if (length == 0) return "length is 0";
  if (page_size != 0 && offset % page_size != 0)
    return "offset " + std::to_string(offset) + " is not a multiple of the page size " + std::to_string(page_size);
  if (page_size != 0 && length % page_size != 0)
    return "length " + std::to_string(length) + " is not a multiple of the page size " + std::to_string(page_size);
  if (offset > size || length > size - offset)
    return "range [" + std::to_string(offset) + ", +" + std::to_string(length) + ") lies beyond the " + std::to_string(size) +
           "-byte buffer";
  return std::nullopt;
}

std::string describe_bytes(uint64_t n) {
  static const char* const units[] = {"KiB", "MiB", "GiB", "TiB"};
  if (n < 1024) return std::to_string(n) + " bytes";
  uint64_t unit = 1024;
  int i = 0;
  while (i < 3 && n >= unit * 1024 && n % (unit * 1024) == 0) {
    unit *= 1024;
    ++i;
  }
  if (n % unit == 0) return std::to_string(n / unit) + " " + units[i] + " (" + std::to_string(n) + " bytes)";
  return std::to_string(n) + " bytes";
}

bool DriverInfo::can_export_dmabuf() const noexcept { return (caps & GDRPEER_CAP_DMABUF) != 0; }
bool DriverInfo::can_mmap() const noexcept { return (caps & GDRPEER_CAP_MMAP) != 0; }
std::string DriverInfo::abi_string() const { return version_string(abi_version); }

std::string DeviceInfo::bdf() const {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%04x:%02x:%02x.%x", pci_domain, pci_bus, pci_dev, pci_func);
  return buf;
}

std::string DeviceInfo::provider_name() const {
  switch (provider) {
    case GDRPEER_PROVIDER_PCIBAR: return "pcibar";
    case GDRPEER_PROVIDER_NVIDIA: return "nvidia";
    default: return "provider " + std::to_string(provider);
  }
}

// ---- Mapping --------------------------------------------------------------

Mapping::Mapping(Mapping&& o) noexcept : addr_(std::exchange(o.addr_, nullptr)), length_(std::exchange(o.length_, 0)) {}

Mapping& Mapping::operator=(Mapping&& o) noexcept {
  if (this != &o) {
    reset();
    addr_ = std::exchange(o.addr_, nullptr);
    length_ = std::exchange(o.length_, 0);
  }
  return *this;
}

Mapping::~Mapping() { reset(); }

void Mapping::reset() noexcept {
  if (addr_ != nullptr) ::munmap(addr_, length_);
  addr_ = nullptr;
  length_ = 0;
}

// ---- Device ---------------------------------------------------------------

Device Device::open(const std::string& path) {
  auto file = std::make_shared<detail::File>();
  file->path = path;
  file->fd.reset(::open(path.c_str(), O_RDWR | O_CLOEXEC));
  if (!file->fd) {
    const int err = errno;
    throw Error(err, "open " + path, open_hint(err, path));
  }
  gdrpeer_info info{};
  info.abi_version = GDRPEER_ABI_VERSION;
  if (const int err = do_ioctl(file->fd.get(), GDRPEER_IOCTL_INFO, &info); err != 0) {
    std::string hint;
    if (err == ENOTTY || err == EINVAL)
      hint = path + " is not a gdrpeer device (it does not answer GDRPEER_IOCTL_INFO)";
    else if (err == EPROTO)
      hint = "the driver speaks ABI " + version_string(info.abi_version) + ", this library was built for " +
             version_string(GDRPEER_ABI_VERSION);
    throw Error(err, "ABI handshake with " + path, hint);
  }
  file->info.abi_version = info.abi_version;
  file->info.caps = info.caps;
  file->info.num_devices = info.num_devices;
  file->info.page_size = info.page_size;
  file->info.mmap_window = info.mmap_window;
  return Device(std::move(file));
}

const std::string& Device::path() const noexcept { return file_->path; }
const DriverInfo& Device::info() const noexcept { return file_->info; }
int Device::fd() const noexcept { return file_->fd.get(); }

std::vector<DeviceInfo> Device::list_devices() const {
  // Ask for the total first, then fetch; retry if devices were bound in between.
  for (int attempt = 0; attempt < 8; ++attempt) {
    gdrpeer_list_devices req{};
    req.entry_size = sizeof(gdrpeer_device_info);
    if (const int err = do_ioctl(fd(), GDRPEER_IOCTL_LIST_DEVICES, &req); err != 0) throw Error(err, "list devices of " + path());
    std::vector<gdrpeer_device_info> raw(req.total);
    req.devices_ptr = reinterpret_cast<uintptr_t>(raw.data());
    req.count = static_cast<uint32_t>(raw.size());
    if (const int err = do_ioctl(fd(), GDRPEER_IOCTL_LIST_DEVICES, &req); err != 0) throw Error(err, "list devices of " + path());
    if (req.total > raw.size()) continue;  // grew meanwhile
    raw.resize(req.total);
    std::vector<DeviceInfo> out;
    out.reserve(raw.size());
    for (const auto& r : raw) {
      DeviceInfo d;
      d.index = r.index;
      d.provider = r.provider;
      d.pci_domain = r.pci_domain;
      d.pci_bus = r.pci_bus;
      d.pci_dev = r.pci_dev;
      d.pci_func = r.pci_func;
      d.bar = r.bar;
      d.bar_size = r.bar_size;
      d.free_bytes = r.free_bytes;
      d.alloc_align = r.alloc_align;
      out.push_back(d);
    }
    return out;
  }
  throw Error(EAGAIN, "list devices of " + path(), "the device list kept changing");
}

Buffer Device::alloc(uint32_t index, uint64_t size) const {
  const std::string request = "alloc " + std::to_string(size) + " bytes on device " + std::to_string(index);
  if (size == 0) throw Error(EINVAL, request, "size must be greater than 0");
  const auto rounded = round_up(size, info().page_size);
  if (!rounded) throw Error(EOVERFLOW, request, "size overflows when rounded up to whole pages");

  gdrpeer_alloc req{};
  req.device = index;
  req.size = *rounded;
  if (const int err = do_ioctl(fd(), GDRPEER_IOCTL_ALLOC, &req); err != 0) {
    std::string hint;
    // Best effort context: how many devices there are, how much is free.
    try {
      const auto devs = list_devices();
      if (err == ENODEV) {
        hint = "there are " + std::to_string(devs.size()) + " gdrpeer devices";
      } else {
        for (const auto& d : devs) {
          if (d.index != index) continue;
          if (err == E2BIG)
            hint = "device " + std::to_string(index) + "'s BAR is only " + describe_bytes(d.bar_size);
          else if (err == ENOMEM)
            hint = "device " + std::to_string(index) + " has " + describe_bytes(d.free_bytes) + " free (not necessarily contiguous)";
        }
      }
    } catch (const Error&) {
    }
    throw Error(err, request, hint);
  }
  Buffer b;
  b.file_ = file_;
  b.handle_ = req.handle;
  b.size_ = req.size;
  b.mmap_offset_ = req.mmap_offset;
  b.bar_offset_ = req.bar_offset;
  b.device_ = index;
  return b;
}

// ---- Buffer ---------------------------------------------------------------

Buffer::Buffer(Buffer&& o) noexcept
    : file_(std::move(o.file_)),
      handle_(std::exchange(o.handle_, 0)),
      size_(o.size_),
      mmap_offset_(o.mmap_offset_),
      bar_offset_(o.bar_offset_),
      device_(o.device_) {}

Buffer& Buffer::operator=(Buffer&& o) noexcept {
  if (this != &o) {
    if (handle_ != 0) {
      gdrpeer_free req{};
      req.handle = handle_;
      do_ioctl(file_->fd.get(), GDRPEER_IOCTL_FREE, &req);
    }
    file_ = std::move(o.file_);
    handle_ = std::exchange(o.handle_, 0);
    size_ = o.size_;
    mmap_offset_ = o.mmap_offset_;
    bar_offset_ = o.bar_offset_;
    device_ = o.device_;
  }
  return *this;
}

Buffer::~Buffer() {
  if (handle_ != 0) {
    gdrpeer_free req{};
    req.handle = handle_;
    do_ioctl(file_->fd.get(), GDRPEER_IOCTL_FREE, &req);
  }
}

void Buffer::free() {
  if (handle_ == 0) return;
  gdrpeer_free req{};
  req.handle = std::exchange(handle_, 0);
  if (const int err = do_ioctl(file_->fd.get(), GDRPEER_IOCTL_FREE, &req); err != 0)
    throw Error(err, "free handle " + std::to_string(req.handle));
}

Mapping Buffer::map(uint64_t offset, uint64_t length) const {
  if (length == 0 && offset < size_) length = size_ - offset;
  const std::string request =
      "mmap " + std::to_string(length) + " bytes at offset " + std::to_string(offset) + " of handle " + std::to_string(handle_);
  if (handle_ == 0) throw Error(EBADF, request, "the buffer was freed");
  if (auto why = range_problem(offset, length, size_, file_->info.page_size)) throw Error(EINVAL, request, *why);
  void* p = ::mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_SHARED, file_->fd.get(), static_cast<off_t>(mmap_offset_ + offset));
  if (p == MAP_FAILED) throw Error(errno, request);
  return Mapping(p, length);
}

DmaBuf Buffer::export_dmabuf(uint64_t offset, uint64_t length) const {
  if (length == 0 && offset < size_) length = size_ - offset;
  const std::string request = "export " + std::to_string(length) + " bytes at offset " + std::to_string(offset) + " of handle " +
                              std::to_string(handle_) + " as dma-buf";
  if (handle_ == 0) throw Error(EBADF, request, "the buffer was freed");
  if (!file_->info.can_export_dmabuf()) throw Error(EOPNOTSUPP, request, "this gdrpeer driver was built without dma-buf export");
  if (auto why = range_problem(offset, length, size_, file_->info.page_size)) throw Error(EINVAL, request, *why);
  gdrpeer_export req{};
  req.handle = handle_;
  req.offset = offset;
  req.length = length;
  if (const int err = do_ioctl(file_->fd.get(), GDRPEER_IOCTL_EXPORT, &req); err != 0) throw Error(err, request);
  return DmaBuf(UniqueFd(req.fd), offset, length);
}

BufferState Buffer::query() const {
  const std::string request = "query handle " + std::to_string(handle_);
  if (handle_ == 0) throw Error(EBADF, request, "the buffer was freed");
  gdrpeer_query req{};
  req.handle = handle_;
  if (const int err = do_ioctl(file_->fd.get(), GDRPEER_IOCTL_QUERY, &req); err != 0) throw Error(err, request);
  return BufferState{req.size, req.mmap_offset, req.bar_offset, req.device, req.exports};
}

}  // namespace gdrpeer

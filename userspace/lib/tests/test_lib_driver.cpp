// libgdrpeer against the real driver. Runs in the emulated node (tests/test_verify.py runs it
// after insmod gdrpeer.ko pcibar=$GDRPEER_GPU_BDF); skips, saying why, where /dev/gdrpeer is absent.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "gdrpeer/gdrpeer.hpp"

using gdrpeer::Device;
using gdrpeer::Error;

namespace {

class Driver : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::access(gdrpeer::kDefaultDevicePath, F_OK) != 0) GTEST_SKIP() << "/dev/gdrpeer is absent: load gdrpeer.ko with a bound device";
    dev.emplace(Device::open());
    auto devs = dev->list_devices();
    if (devs.empty()) GTEST_SKIP() << "gdrpeer is loaded but no device is bound";
    info = devs[0];
  }
  uint64_t free_now() const {
    for (const auto& d : dev->list_devices())
      if (d.index == info.index) return d.free_bytes;
    return 0;
  }
  std::optional<Device> dev;
  gdrpeer::DeviceInfo info;
};

std::vector<uint8_t> pattern(size_t n, unsigned seed) {
  std::vector<uint8_t> v(n);
  std::mt19937 rng(seed);
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

}  // namespace

TEST_F(Driver, HandshakeAndDeviceList) {
  const auto& di = dev->info();
  EXPECT_EQ(di.abi_version >> 16, 1u);
  EXPECT_TRUE(di.can_mmap());
  EXPECT_TRUE(di.can_export_dmabuf());
  EXPECT_GE(di.page_size, 4096u);
  EXPECT_GE(di.num_devices, 1u);
  EXPECT_EQ(info.provider_name(), "pcibar");
  if (const char* bdf = std::getenv("GDRPEER_GPU_BDF")) {
    EXPECT_EQ(info.bdf(), bdf);
  }
  if (const char* mib = std::getenv("GDRPEER_BAR_MIB")) {
    EXPECT_EQ(info.bar_size, std::strtoull(mib, nullptr, 10) << 20);
  }
}

TEST_F(Driver, AllocMapWriteReadAndQuery) {
  const uint64_t before = free_now();
  auto buf = dev->alloc(info.index, 1 << 20);
  EXPECT_EQ(buf.size(), 1u << 20);
  EXPECT_EQ(free_now(), before - buf.size());
  const auto q = buf.query();
  EXPECT_EQ(q.size, buf.size());
  EXPECT_EQ(q.device, info.index);
  EXPECT_EQ(q.exports, 0u);
  EXPECT_EQ(q.bar_offset, buf.bar_offset());

  const auto data = pattern(buf.size(), 1);
  auto a = buf.map();
  std::memcpy(a.data(), data.data(), data.size());
  auto b = buf.map(4096, 8192);  // a second, partial mapping sees the same memory
  EXPECT_EQ(std::memcmp(b.data(), data.data() + 4096, 8192), 0);
}

TEST_F(Driver, DmabufKeepsCountAndClosesOnDestruction) {
  auto buf = dev->alloc(info.index, 64 << 10);
  int fd = -1;
  {
    auto d = buf.export_dmabuf();
    fd = d.fd();
    EXPECT_GE(fd, 0);
    EXPECT_EQ(d.size(), buf.size());
    EXPECT_EQ(buf.query().exports, 1u);
    // The dma-buf maps the same bytes as the handle.
    auto m = buf.map();
    const auto data = pattern(buf.size(), 2);
    std::memcpy(m.data(), data.data(), data.size());
    void* p = ::mmap(nullptr, buf.size(), PROT_READ, MAP_SHARED, fd, 0);
    ASSERT_NE(p, MAP_FAILED) << std::strerror(errno);
    EXPECT_EQ(std::memcmp(p, data.data(), data.size()), 0);
    ::munmap(p, buf.size());
  }
  errno = 0;
  EXPECT_EQ(::fcntl(fd, F_GETFD), -1);
  EXPECT_EQ(errno, EBADF);
  EXPECT_EQ(buf.query().exports, 0u);
}

TEST_F(Driver, FreeingReturnsTheMemory) {
  const uint64_t before = free_now();
  {
    auto buf = dev->alloc(info.index, 256 << 10);
    EXPECT_LT(free_now(), before);
  }
  EXPECT_EQ(free_now(), before);
  auto buf = dev->alloc(info.index, 4096);
  buf.free();
  EXPECT_FALSE(buf);
  EXPECT_EQ(free_now(), before);
}

TEST_F(Driver, MappingKeepsMemoryAfterTheHandleIsFreed) {
  const uint64_t before = free_now();
  auto buf = dev->alloc(info.index, 64 << 10);
  auto m = buf.map();
  buf.free();
  // The handle is gone, the memory stays reserved while mapped, and stays usable.
  EXPECT_LT(free_now(), before);
  const auto data = pattern(m.size(), 3);
  std::memcpy(m.data(), data.data(), data.size());
  EXPECT_EQ(std::memcmp(m.data(), data.data(), data.size()), 0);
  m.reset();
  EXPECT_EQ(free_now(), before);
}

TEST_F(Driver, BufferOutlivesItsDeviceObject) {
  std::optional<gdrpeer::Buffer> buf;
  {
    auto other = Device::open();
    buf.emplace(other.alloc(info.index, 4096));
  }
  auto m = buf->map();  // the open file lives on inside the Buffer
  static_cast<volatile uint8_t*>(m.data())[0] = 0x5a;
  EXPECT_EQ(static_cast<volatile uint8_t*>(m.data())[0], 0x5a);
}

TEST_F(Driver, AllocErrorsCarryErrnoAndContext) {
  try {
    dev->alloc(99, 4096);
    FAIL() << "alloc on device 99 succeeded";
  } catch (const Error& e) {
    EXPECT_EQ(e.error_code(), ENODEV);
    EXPECT_EQ(e.request(), "alloc 4096 bytes on device 99");
    EXPECT_NE(std::string(e.what()).find("there are 1 gdrpeer devices"), std::string::npos) << e.what();
  }
  try {
    dev->alloc(info.index, info.bar_size * 2);
    FAIL() << "alloc of twice the BAR succeeded";
  } catch (const Error& e) {
    EXPECT_EQ(e.error_code(), E2BIG);
    EXPECT_NE(std::string(e.what()).find("BAR is only"), std::string::npos) << e.what();
  }
  try {
    dev->alloc(info.index, 0);
    FAIL() << "alloc of 0 bytes succeeded";
  } catch (const Error& e) {
    EXPECT_EQ(e.error_code(), EINVAL);
  }
  // Exhaustion: take more than half, then ask for more than half again.
  const uint64_t big = info.bar_size / 2 + info.bar_size / 4;
  auto first = dev->alloc(info.index, big);
  try {
    dev->alloc(info.index, big);
    FAIL() << "two allocations of 3/4 of the BAR succeeded";
  } catch (const Error& e) {
    EXPECT_EQ(e.error_code(), ENOMEM);
    EXPECT_NE(std::string(e.what()).find("free"), std::string::npos) << e.what();
  }
}

TEST_F(Driver, RangeErrorsAreCaughtBeforeTheDriver) {
  auto buf = dev->alloc(info.index, 64 << 10);
  try {
    buf.map(0, 128 << 10);
    FAIL() << "map beyond the buffer succeeded";
  } catch (const Error& e) {
    EXPECT_EQ(e.error_code(), EINVAL);
    EXPECT_NE(std::string(e.what()).find("beyond"), std::string::npos) << e.what();
  }
  EXPECT_THROW(buf.map(100, 4096), Error);
  EXPECT_THROW(buf.export_dmabuf(0, 100), Error);
  EXPECT_THROW(buf.export_dmabuf(64 << 10, 4096), Error);
}

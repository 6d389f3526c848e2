// libgdrpeer unit tests that need no driver: error text, argument checks, RAII,
// and what happens when /dev/gdrpeer is absent or is not a gdrpeer device.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <optional>
#include <string>

#include "gdrpeer.h"  // GDRPEER_PROVIDER_*, GDRPEER_CAP_*
#include "gdrpeer/gdrpeer.hpp"

using gdrpeer::Device;
using gdrpeer::Error;

// The Error that opening `path` throws; none when it opened.
std::optional<Error> open_failure(const std::string& path) {
  try {
    Device::open(path);
  } catch (const Error& e) {
    return e;
  }
  return std::nullopt;
}

TEST(LibError, ErrnoNames) {
  EXPECT_EQ(gdrpeer::errno_name(ENOMEM), "ENOMEM");
  EXPECT_EQ(gdrpeer::errno_name(ENOENT), "ENOENT");
  EXPECT_EQ(gdrpeer::errno_name(EOPNOTSUPP), "EOPNOTSUPP");
  EXPECT_EQ(gdrpeer::errno_name(4242), "errno 4242");
}

TEST(LibError, CarriesErrnoAndRequest) {
  const Error e(ENOMEM, "alloc 4096 bytes on device 0");
  EXPECT_EQ(e.error_code(), ENOMEM);
  EXPECT_EQ(e.request(), "alloc 4096 bytes on device 0");
  EXPECT_STREQ(e.what(), "alloc 4096 bytes on device 0: ENOMEM (Cannot allocate memory)");
}

TEST(LibError, HintFollowsErrno) {
  const Error e(E2BIG, "alloc 1 bytes on device 3", "device 3's BAR is only 64 MiB");
  EXPECT_STREQ(e.what(),
               "alloc 1 bytes on device 3: E2BIG (Argument list too long); device 3's BAR is "
               "only 64 MiB");
  EXPECT_EQ(e.hint(), "device 3's BAR is only 64 MiB");
}

TEST(LibOpen, AbsentDeviceNodeIsENOENTWithAdvice) {
  const auto e = open_failure("/nonexistent-dir/gdrpeer");
  ASSERT_TRUE(e) << "opening a missing device node succeeded";
  EXPECT_EQ(e->error_code(), ENOENT);
  const std::string msg = e->what();
  EXPECT_NE(msg.find("open /nonexistent-dir/gdrpeer: ENOENT"), std::string::npos) << msg;
  EXPECT_NE(msg.find("gdrpeer kernel module is not loaded"), std::string::npos) << msg;
}

TEST(LibOpen, DefaultPathIsDevGdrpeer) {
  EXPECT_STREQ(gdrpeer::kDefaultDevicePath, "/dev/gdrpeer");
  if (::access("/dev/gdrpeer", F_OK) == 0) GTEST_SKIP() << "/dev/gdrpeer exists on this machine";
  try {
    Device::open();
    FAIL() << "open of absent /dev/gdrpeer succeeded";
  } catch (const Error& e) {
    EXPECT_EQ(e.error_code(), ENOENT);
    EXPECT_EQ(e.request(), "open /dev/gdrpeer");
  }
}

TEST(LibOpen, AFileThatIsNotGdrpeerFailsTheHandshake) {
  const auto e = open_failure("/dev/null");
  ASSERT_TRUE(e) << "/dev/null passed the ABI handshake";
  EXPECT_EQ(e->error_code(), ENOTTY);
  EXPECT_NE(std::string(e->what()).find("/dev/null is not a gdrpeer device"), std::string::npos) << e->what();
}

TEST(LibOpen, ADirectoryCannotBeOpened) {
  const auto e = open_failure("/");
  ASSERT_TRUE(e) << "opened / as a device";
  EXPECT_EQ(e->error_code(), EISDIR);
}

TEST(LibArgs, RangeProblems) {
  using gdrpeer::range_problem;
  EXPECT_FALSE(range_problem(0, 4096, 8192, 4096));
  EXPECT_FALSE(range_problem(4096, 4096, 8192, 4096));
  EXPECT_EQ(*range_problem(0, 0, 8192, 4096), "length is 0");
  EXPECT_NE(range_problem(1, 4096, 8192, 4096)->find("offset 1 is not a multiple"), std::string::npos);
  EXPECT_NE(range_problem(0, 100, 8192, 4096)->find("length 100 is not a multiple"), std::string::npos);
  EXPECT_NE(range_problem(4096, 8192, 8192, 4096)->find("beyond the 8192-byte buffer"), std::string::npos);
  // offset + length wraps around 64 bits: must still be caught.
  EXPECT_TRUE(range_problem(UINT64_MAX - 4095, 8192, 8192, 4096));
  EXPECT_TRUE(range_problem(8192, 4096, 8192, 4096));
}

TEST(LibArgs, RoundUp) {
  EXPECT_EQ(gdrpeer::round_up(1, 4096), 4096u);
  EXPECT_EQ(gdrpeer::round_up(4096, 4096), 4096u);
  EXPECT_EQ(gdrpeer::round_up(4097, 4096), 8192u);
  EXPECT_EQ(gdrpeer::round_up(0, 4096), 0u);
  EXPECT_FALSE(gdrpeer::round_up(UINT64_MAX - 10, 4096));
  EXPECT_FALSE(gdrpeer::round_up(10, 3000));  // not a power of two
  EXPECT_FALSE(gdrpeer::round_up(10, 0));
}

TEST(LibArgs, DescribeBytes) {
  EXPECT_EQ(gdrpeer::describe_bytes(100), "100 bytes");
  EXPECT_EQ(gdrpeer::describe_bytes(4096), "4 KiB (4096 bytes)");
  EXPECT_EQ(gdrpeer::describe_bytes(64ull << 20), "64 MiB (67108864 bytes)");
  EXPECT_EQ(gdrpeer::describe_bytes(4097), "4097 bytes");
}

TEST(LibRaii, UniqueFdClosesOnceAndReleaseGivesUp) {
  int raw = -1;
  {
    gdrpeer::UniqueFd fd(::open("/dev/null", O_RDONLY | O_CLOEXEC));
    ASSERT_TRUE(fd);
    raw = fd.get();
    EXPECT_NE(::fcntl(raw, F_GETFD), -1);
  }
  errno = 0;
  EXPECT_EQ(::fcntl(raw, F_GETFD), -1);
  EXPECT_EQ(errno, EBADF);

  gdrpeer::UniqueFd a(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  const int kept = a.release();
  EXPECT_FALSE(a);
  EXPECT_NE(::fcntl(kept, F_GETFD), -1);  // still open: we own it now
  ::close(kept);

  gdrpeer::UniqueFd b(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  const int braw = b.get();
  gdrpeer::UniqueFd c(std::move(b));
  EXPECT_EQ(c.get(), braw);
  EXPECT_FALSE(b);  // NOLINT(bugprone-use-after-move): moved-from state is specified
}

TEST(LibRaii, MappingUnmapsOnDestruction) {
  const size_t len = 2 * 4096;
  void* p = ::mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(p, MAP_FAILED);
  {
    gdrpeer::Mapping m(p, len);
    EXPECT_EQ(m.data(), p);
    EXPECT_EQ(::msync(p, len, MS_ASYNC), 0);
    gdrpeer::Mapping moved(std::move(m));
    EXPECT_EQ(moved.data(), p);
    EXPECT_EQ(m.data(), nullptr);  // NOLINT(bugprone-use-after-move)
  }
  errno = 0;
  EXPECT_EQ(::msync(p, len, MS_ASYNC), -1);  // gone
  EXPECT_EQ(errno, ENOMEM);
}

TEST(LibRaii, DefaultBufferRefusesWork) {
  gdrpeer::Buffer b;
  EXPECT_FALSE(b);
  try {
    b.map();
    FAIL() << "map of an empty buffer succeeded";
  } catch (const Error& e) {
    EXPECT_EQ(e.error_code(), EBADF);
  }
  EXPECT_THROW(b.export_dmabuf(), Error);
  EXPECT_THROW(b.query(), Error);
  EXPECT_NO_THROW(b.free());  // nothing to free
}

// What the driver's answers look like in words (the CLI and verify print these).
TEST(LibInfo, BdfProviderCapsAndAbiInWords) {
  gdrpeer::DeviceInfo d;
  d.pci_domain = 0x10000;
  d.pci_bus = 0xe0;
  d.pci_dev = 0x1f;
  d.pci_func = 7;
  EXPECT_EQ(d.bdf(), "10000:e0:1f.7");
  d.pci_domain = 0;
  d.pci_bus = 1;
  d.pci_dev = 0;
  d.pci_func = 0;
  EXPECT_EQ(d.bdf(), "0000:01:00.0");
  d.provider = GDRPEER_PROVIDER_PCIBAR;
  EXPECT_EQ(d.provider_name(), "pcibar");
  d.provider = GDRPEER_PROVIDER_NVIDIA;
  EXPECT_EQ(d.provider_name(), "nvidia");
  d.provider = 7;
  EXPECT_EQ(d.provider_name(), "provider 7");

  gdrpeer::DriverInfo info;
  info.caps = GDRPEER_CAP_DMABUF;
  EXPECT_TRUE(info.can_export_dmabuf());
  EXPECT_FALSE(info.can_mmap());
  info.caps = GDRPEER_CAP_MMAP;
  EXPECT_FALSE(info.can_export_dmabuf());
  EXPECT_TRUE(info.can_mmap());
  info.abi_version = (1u << 16) | 2u;
  EXPECT_EQ(info.abi_string(), "1.2");
  info.abi_version = (3u << 16);
  EXPECT_EQ(info.abi_string(), "3.0");
}

TEST(LibArgs, DescribeBytesEveryUnit) {
  EXPECT_EQ(gdrpeer::describe_bytes(0), "0 bytes");
  EXPECT_EQ(gdrpeer::describe_bytes(1023), "1023 bytes");
  EXPECT_EQ(gdrpeer::describe_bytes(1024), "1 KiB (1024 bytes)");
  EXPECT_EQ(gdrpeer::describe_bytes(3ull << 30), "3 GiB (3221225472 bytes)");
  EXPECT_EQ(gdrpeer::describe_bytes(1ull << 40), "1 TiB (1099511627776 bytes)");
  EXPECT_EQ(gdrpeer::describe_bytes(2048ull << 40), "2048 TiB (2251799813685248 bytes)");
  EXPECT_EQ(gdrpeer::describe_bytes((1ull << 30) + 4096), "1048580 KiB (1073745920 bytes)");
}

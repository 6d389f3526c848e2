// CUDA memory sources against a real GPU. Skipped (with the reason) where
// libcuda.so.1 cannot be loaded or no GPU answers; run on the GPU node.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cerrno>
#include <fstream>
#include <random>
#include <string>

#include "gdrpeer/dynload/cuda.hpp"
#include "gdrpeer/verify/memory_source.hpp"

namespace v = gdrpeer::verify;

namespace {

std::string fact(const v::SourceSetup& s, const std::string& key) {
  for (const auto& [k, val] : s.facts)
    if (k == key) return val;
  return {};
}

std::string exporter_of(int fd) {
  std::ifstream in("/proc/self/fdinfo/" + std::to_string(fd));
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("exp_name:", 0) == 0) return line.substr(line.find_first_not_of(" \t", 9));
  return {};
}

class CudaSourceTest : public ::testing::TestWithParam<v::SourceKind> {
 protected:
  void SetUp() override {
    std::string why;
    if (gdrpeer::cuda::load(&why) == nullptr) GTEST_SKIP() << "no CUDA driver here: " << why;
  }
};

}  // namespace

TEST_P(CudaSourceTest, AllocatesRoundTripsAndExportsDmabuf) {
  v::SourceOptions o;
  o.size = 3 << 20;  // not a multiple of the VMM granularity: must be rounded up
  auto s = v::prepare_source(GetParam(), o);
  if (s.state == v::SourceSetup::State::absent) GTEST_SKIP() << s.reason;
  ASSERT_EQ(s.state, v::SourceSetup::State::ready) << s.reason;
  for (const auto& [k, val] : s.facts) std::printf("  %s: %s\n", k.c_str(), val.c_str());
  ASSERT_TRUE(s.source);
  EXPECT_TRUE(s.source->is_device_memory());
  EXPECT_GE(s.source->size(), o.size);
  EXPECT_NE(s.source->address(), nullptr);

  // CPU-side path: what goes in comes back, at an offset too.
  const size_t n = s.source->size();
  std::vector<uint8_t> in(n), out(n, 0);
  std::mt19937 rng(7);
  for (auto& b : in) b = static_cast<uint8_t>(rng());
  s.source->write(0, in.data(), n);
  s.source->read(0, out.data(), n);
  EXPECT_EQ(in, out);
  std::vector<uint8_t> part(4096);
  s.source->read(8192, part.data(), part.size());
  EXPECT_TRUE(std::equal(part.begin(), part.end(), in.begin() + 8192));

  // The dma-buf path, where the GPU says it has one.
  if (fact(s, "DMA_BUF_SUPPORTED") != "1") {
    EXPECT_FALSE(s.source->dmabuf());
    EXPECT_FALSE(s.source->dmabuf_problem().empty());
    return;
  }
  auto d = s.source->dmabuf();
  ASSERT_TRUE(d) << s.source->dmabuf_problem();
  struct stat st {};
  ASSERT_EQ(::fstat(d->fd, &st), 0);
  EXPECT_FALSE(exporter_of(d->fd).empty());
  std::printf("  dma-buf fd %d exporter %s\n", d->fd, exporter_of(d->fd).c_str());
  const int fd = d->fd;
  s.source.reset();  // RAII: the dma-buf fd is closed with the source
  errno = 0;
  EXPECT_EQ(::fcntl(fd, F_GETFD), -1);
  EXPECT_EQ(errno, EBADF);
}

TEST_P(CudaSourceTest, BadDeviceOrdinalIsAnError) {
  v::SourceOptions o;
  o.size = 1 << 20;
  o.cuda_device = 4096;
  auto s = v::prepare_source(GetParam(), o);
  if (s.state == v::SourceSetup::State::absent) GTEST_SKIP() << s.reason;
  EXPECT_EQ(s.state, v::SourceSetup::State::error);
  EXPECT_NE(s.reason.find("no CUDA device 4096"), std::string::npos) << s.reason;
}

TEST_P(CudaSourceTest, SizeBeyondGpuMemoryIsAnError) {
  v::SourceOptions o;
  o.size = size_t{1} << 50;  // 1 PiB
  auto s = v::prepare_source(GetParam(), o);
  if (s.state == v::SourceSetup::State::absent) GTEST_SKIP() << s.reason;
  EXPECT_EQ(s.state, v::SourceSetup::State::error);
  EXPECT_NE(s.reason.find("the GPU has only"), std::string::npos) << s.reason;
}

INSTANTIATE_TEST_SUITE_P(Cuda, CudaSourceTest, ::testing::Values(v::SourceKind::cuda, v::SourceKind::cuda_vmm), [](const auto& param_info) {
  return param_info.param == v::SourceKind::cuda ? std::string("cuMemAlloc") : std::string("VMM");
});

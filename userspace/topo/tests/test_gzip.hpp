// gzip in memory for the tests that plant a /proc/config.gz (kernel/configs.c serves the
// configuration gzip-compressed): zlib's deflate with the gzip wrapper (windowBits 16 + 15).
// The test programs that include it link ZLIB::ZLIB.
#pragma once

#include <gtest/gtest.h>
#include <zlib.h>

#include <string>

namespace gdrpeer::topo::testing {

inline std::string gzip(const std::string& in) {
  z_stream z{};
  EXPECT_EQ(deflateInit2(&z, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY), Z_OK);
  std::string out(deflateBound(&z, in.size()) + 64, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = static_cast<uInt>(in.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&z, Z_FINISH), Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

}  // namespace gdrpeer::topo::testing

// Snapshot tarballs: the tar reader, then the sysfs parser over what it held
// (config space bytes, resource files, symlinks).
#include "fuzz_common.hpp"
#include "gdrpeer/topo/inputs.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return fuzz_one(data, size, [](const std::string& t) {
    auto fs = gdrpeer::topo::make_tar_fs(t, "fuzz.tar");
    return gdrpeer::topo::parse_sysfs(*fs, "fuzz.tar");
  });
}

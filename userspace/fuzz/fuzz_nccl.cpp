#include "fuzz_common.hpp"
#include "gdrpeer/topo/inputs.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return fuzz_one(data, size, [](const std::string& t) { return gdrpeer::topo::parse_nccl_xml(t, "fuzz"); });
}

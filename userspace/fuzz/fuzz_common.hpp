// Shared body of the libFuzzer targets: a parser must either return a model
// or throw InputError (file:line: what was expected); anything else -- a
// crash, a sanitizer report, another exception type -- is a finding.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "gdrpeer/topo/errors.hpp"

template <typename Fn>
int fuzz_one(const uint8_t* data, size_t size, Fn&& parse) {
  std::string text(reinterpret_cast<const char*>(data), size);
  try {
    parse(text);
  } catch (const gdrpeer::topo::InputError&) {
    // expected for malformed input
  } catch (const gdrpeer::topo::MissingInput&) {
    // a snapshot without /sys/bus/pci/devices
  }
  return 0;
}

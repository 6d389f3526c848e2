// The data verify moves and how it judges what arrived: a pseudo-random pattern from a seed
// (so two nodes make the same bytes from the seed alone) and a byte-by-byte comparison.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "gdrpeer/verify/verify_types.hpp"

namespace gdrpeer::verify {

// n bytes of the pattern of (seed, salt): the same on every node and every run.
void fill_pattern(uint8_t* p, size_t n, uint64_t seed, uint64_t salt);
// The bitwise complement of that pattern: a destination filled with it must change in every byte.
void fill_complement(uint8_t* p, size_t n, uint64_t seed, uint64_t salt);
// "all N bytes match" or "K of N bytes differ, first at offset O (expected 0xAA, got 0xBB)".
TransferCheck compare_bytes(const std::string& op, const uint8_t* got, const uint8_t* want, size_t n);

}  // namespace gdrpeer::verify

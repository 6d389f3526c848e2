#include "gdrpeer/verify/pattern.hpp"

#include <cstdio>
#include <cstring>
#include <random>

namespace gdrpeer::verify {

void fill_pattern(uint8_t* p, size_t n, uint64_t seed, uint64_t salt) {
  std::mt19937_64 rng(seed * 0x9e3779b97f4a7c15ULL + salt);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const uint64_t v = rng();
    std::memcpy(p + i, &v, 8);
  }
  for (; i < n; ++i) p[i] = static_cast<uint8_t>(rng());
}

void fill_complement(uint8_t* p, size_t n, uint64_t seed, uint64_t salt) {
  fill_pattern(p, n, seed, salt);
  for (size_t i = 0; i < n; ++i) p[i] = static_cast<uint8_t>(~p[i]);
}

TransferCheck compare_bytes(const std::string& op, const uint8_t* got, const uint8_t* want, size_t n) {
  TransferCheck c;
  c.op = op;
  c.bytes = n;
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < n; ++i)
    if (got[i] != want[i]) {
      if (bad++ == 0) first = i;
    }
  c.ok = bad == 0;
  if (c.ok) {
    c.detail = "all " + std::to_string(n) + " bytes match";
  } else {
    char b[160];
    std::snprintf(b, sizeof b, "%zu of %zu bytes differ, first at offset %zu (expected 0x%02x, got 0x%02x)", bad, n, first, want[first],
                  got[first]);
    c.detail = b;
  }
  return c;
}

}  // namespace gdrpeer::verify

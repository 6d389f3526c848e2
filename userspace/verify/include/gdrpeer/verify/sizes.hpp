// Byte sizes on the command line: "4096", "64K", "64KiB", "1M", "2G".
// Not CLI11's AsSizeValue: on a uint64_t option it turns "-1" and "99999999999999999999" into
// 2^64-1 and "010" into 8 without a word, and its messages differ from the ones docs/verify.md
// shows (docs/design.md, "Libraries, and the hand-written parts that stay").
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace gdrpeer::verify {

// nullopt (and *why) for anything that is not a whole number of bytes with an
// optional K/M/G (binary) suffix, or that overflows 64 bits.
std::optional<uint64_t> parse_size(const std::string& text, std::string* why);
// A comma-separated list of sizes.
std::optional<std::vector<uint64_t>> parse_size_list(const std::string& text, std::string* why);

}  // namespace gdrpeer::verify

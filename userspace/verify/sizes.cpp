#include "gdrpeer/verify/sizes.hpp"

#include <cctype>

namespace gdrpeer::verify {

std::optional<uint64_t> parse_size(const std::string& text, std::string* why) {
  auto bad = [&](const std::string& w) -> std::optional<uint64_t> {
    if (why != nullptr) *why = "'" + text + "' " + w;
    return std::nullopt;
  };
  size_t i = 0;
  uint64_t v = 0;
  if (text.empty()) return bad("is empty");
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) {
    const uint64_t d = static_cast<uint64_t>(text[i] - '0');
    if (v > (UINT64_MAX - d) / 10) return bad("is too large");
    v = v * 10 + d;
    ++i;
  }
  if (i == 0) return bad("is not a size (a number of bytes, optionally with K, M or G)");
  std::string suffix = text.substr(i);
  for (auto& c : suffix) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  int shift = 0;
  if (suffix.empty() || suffix == "B")
    shift = 0;
  else if (suffix == "K" || suffix == "KB" || suffix == "KIB")
    shift = 10;
  else if (suffix == "M" || suffix == "MB" || suffix == "MIB")
    shift = 20;
  else if (suffix == "G" || suffix == "GB" || suffix == "GIB")
    shift = 30;
  else if (suffix == "T" || suffix == "TB" || suffix == "TIB")
    shift = 40;
  else
    return bad("has an unknown unit '" + text.substr(i) + "' (use K, M, G or T)");
  if (shift != 0 && v > (UINT64_MAX >> shift)) return bad("is too large");
  return v << shift;
}

std::optional<std::vector<uint64_t>> parse_size_list(const std::string& text, std::string* why) {
  std::vector<uint64_t> out;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = text.find(',', start);
    const std::string item = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    auto v = parse_size(item, why);
    if (!v) return std::nullopt;
    out.push_back(*v);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

}  // namespace gdrpeer::verify

// The rule data (topology/*.json) compiled into the binary at build time
// (cmake/embed_rule_data.cmake): the default when no data directory is found,
// so a copied `gdrpeer` binary needs no files beside it.
#pragma once

#include <string_view>
#include <vector>

namespace gdrpeer::topo::detail {

struct BuiltinFile {
  std::string_view name;  // "devices.json", ...
  std::string_view text;
};

const std::vector<BuiltinFile>& builtin_rule_files();
// First 16 hex digits of a SHA-256 over the embedded files' names and contents.
const char* builtin_rule_fingerprint();

}  // namespace gdrpeer::topo::detail

// The rule data (topology/*.json) as RuleData::load reads it (nlohmann_json under it): any
// text must load or throw DataError (a syntax error as "NAME:LINE:COL: ..."), whatever its
// shape. Input: one selector byte, then the JSON text. The selector picks which of the four
// rule files the text replaces (the other three stay the real ones), so the typed checks of
// every file see malformed shapes too. Seeds: "0" + devices.json, "1" + gpus.json, ...
// (generated from topology/*.json at configure time).
#include <unistd.h>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "gdrpeer/topo/errors.hpp"
#include "gdrpeer/topo/rule_data.hpp"

namespace {

const char* const kFiles[] = {"devices.json", "gpus.json", "root_complexes.json", "platforms.json"};

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using gdrpeer::topo::DataError;
  if (size == 0) return 0;
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  // The text as one rule file.
  static const std::string real_dir = GDRPEER_FUZZ_TOPOLOGY_DIR;
  static std::string dir;
  static std::string originals[4];
  if (dir.empty()) {
    char tmpl[] = "/tmp/gdrpeer-fuzz-json-XXXXXX";
    if (!::mkdtemp(tmpl)) std::abort();
    dir = tmpl;
    std::atexit([] {
      for (const char* f : kFiles) ::unlink((dir + "/" + f).c_str());
      ::rmdir(dir.c_str());
    });
    for (int i = 0; i < 4; ++i) {
      originals[i] = slurp(real_dir + "/" + kFiles[i]);
      std::ofstream(dir + "/" + kFiles[i], std::ios::binary) << originals[i];
    }
  }
  const int which = data[0] % 4;
  std::ofstream(dir + "/" + kFiles[which], std::ios::binary | std::ios::trunc)
      .write(text.data(), static_cast<std::streamsize>(text.size()));
  try {
    gdrpeer::topo::RuleData::load(dir);
  } catch (const DataError&) {
    // expected for malformed rule data
  }
  std::ofstream(dir + "/" + kFiles[which], std::ios::binary | std::ios::trunc) << originals[which];
  return 0;
}

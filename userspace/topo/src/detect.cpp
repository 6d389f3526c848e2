#include <cstring>

#include "gdrpeer/topo/inputs.hpp"

namespace gdrpeer::topo {

InputFormat detect_format(std::string_view b) {
  if (b.size() >= 512 && b.substr(257, 5) == "ustar") return InputFormat::SnapshotTar;
  // hwloc-gather-topology's NODE.tar.bz2, snapshots compressed with gzip, xz or zstd, any input file.
  if (detect_compression(b) != Compression::None) return InputFormat::Compressed;
  size_t i = 0;
  if (b.substr(0, 3) == "\xEF\xBB\xBF") i = 3;
  for (;;) {
    while (i < b.size() && (b[i] == ' ' || b[i] == '\n' || b[i] == '\r' || b[i] == '\t')) ++i;
    if (i >= b.size() || b[i] != '<') break;
    if (b.substr(i, 4) == "<!--") {
      size_t e = b.find("-->", i + 4);
      if (e == std::string_view::npos) return InputFormat::Unknown;
      i = e + 3;
      continue;
    }
    if (b.substr(i, 2) == "<?" || b.substr(i, 2) == "<!") {
      size_t e = b.find('>', i);
      if (e == std::string_view::npos) return InputFormat::Unknown;
      i = e + 1;
      continue;
    }
    std::string_view rest = b.substr(i + 1);
    if (rest.substr(0, 8) == "topology") return InputFormat::HwlocXml;
    if (rest.substr(0, 6) == "system") return InputFormat::NcclXml;
    return InputFormat::Unknown;
  }
  if (i < b.size() && b[i] == '<') return InputFormat::Unknown;
  return InputFormat::Lspci;
}

const char* to_string(InputFormat f) {
  switch (f) {
    case InputFormat::SysfsDir: return "sysfs";
    case InputFormat::SnapshotTar: return "snapshot";
    case InputFormat::Lspci: return "lspci";
    case InputFormat::HwlocXml: return "hwloc";
    case InputFormat::NcclXml: return "nccl-xml";
    case InputFormat::Bzip2: return "bzip2";
    case InputFormat::Compressed: return "compressed";
    case InputFormat::Unknown: break;
  }
  return "unknown";
}

}  // namespace gdrpeer::topo

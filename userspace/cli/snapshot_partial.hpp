// What a snapshot or a live check misses when it runs without root, and which
// compression a snapshot's file name asks for.
//
// The kernel gives a reader without CAP_SYS_ADMIN only the first 64 bytes of a
// PCI function's config space (drivers/pci/pci-sysfs.c, pci_read_config()), so
// ACS, ATS, port types and link capabilities are unknown there. Root is what
// is tested here: a non-root process with CAP_SYS_ADMIN is rare enough. A snapshot taken so carries
// kSnapshotPartialPath with the reason, and a check of it repeats it as a note
// (the rules already keep ACS unknown, never "no ACS", without those bytes).
#pragma once

#include <unistd.h>

#include <string>
#include <string_view>

#include "gdrpeer/topo/inputs.hpp"

namespace gdrpeer::cli {

inline constexpr const char* kSnapshotPartialPath = "/gdrpeer-snapshot/partial";

// "" when this process may read all of config space; otherwise why not.
inline std::string unprivileged_config_space() {
  if (::geteuid() == 0) return "";
  return "taken as uid " + std::to_string(::geteuid()) +
         ", not root: config space beyond its first 64 bytes is readable only with CAP_SYS_ADMIN, so ACS, ATS, PCIe "
         "port types and link capabilities are unknown (run as root for a full snapshot)";
}

// The compression `gdrpeer snapshot FILE` writes, from FILE's suffix.
inline topo::Compression snapshot_compression(std::string_view file) {
  auto ends = [&](std::string_view s) { return file.size() >= s.size() && file.substr(file.size() - s.size()) == s; };
  if (ends(".gz") || ends(".tgz")) return topo::Compression::Gzip;
  if (ends(".xz") || ends(".txz")) return topo::Compression::Xz;
  if (ends(".zst") || ends(".tzst")) return topo::Compression::Zstd;
  if (ends(".bz2") || ends(".tbz2")) return topo::Compression::Bzip2;
  return topo::Compression::None;
}

}  // namespace gdrpeer::cli

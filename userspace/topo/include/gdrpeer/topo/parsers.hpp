// One parser per input format; all produce a Topology. Text parsers throw
// InputError("file:line: what was expected") on malformed input.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "gdrpeer/topo/model.hpp"
#include "gdrpeer/topo/source.hpp"

namespace gdrpeer::topo {

// Live sysfs, a --sysfs-root copy or a snapshot: reads /sys/bus/pci/devices/*
// (attributes, config space, iommu_group, numa_node, resource), iommu group
// types, /proc/cmdline, /proc/modules, /proc/cpuinfo, /sys/kernel/mm/memory_peers.
Topology parse_sysfs(FileSource& fs, const std::string& name);

// `lspci -tv` and/or `lspci -vvv` text (with or without -nn, -D), or a shell
// transcript / markdown report holding them after "$ ... lspci ..." prompts.
// Several texts of one node can be merged: pass them in one call.
struct TextInput {
  std::string name;
  std::string_view text;
};
Topology parse_lspci(const std::vector<TextInput>& inputs);

// hwloc XML (lstopo --of xml, hwloc 2.x). `storage`: an emptied device vector
// whose memory the result's devices go into (fleet mode passes the previous
// node's, so that thousands of dumps do not each grow a vector of ~150 devices).
Topology parse_hwloc_xml(std::string_view text, const std::string& name, std::vector<Device> storage = {});

// NCCL topology XML (NCCL_TOPO_DUMP_FILE output and NCCL_TOPO_FILE inputs);
// `storage` as for parse_hwloc_xml.
Topology parse_nccl_xml(std::string_view text, const std::string& name, std::vector<Device> storage = {});

// Compressed: gzip, xz, zstd or bzip2 (source.hpp's detect_compression); decompress and detect
// again. Bzip2 is the same as Compressed, kept for callers that named it.
enum class InputFormat { Unknown, SysfsDir, SnapshotTar, Lspci, HwlocXml, NcclXml, Bzip2, Compressed };
// Guess the format of a file's contents (a directory is SysfsDir, decided by the caller).
InputFormat detect_format(std::string_view bytes);
const char* to_string(InputFormat f);

}  // namespace gdrpeer::topo

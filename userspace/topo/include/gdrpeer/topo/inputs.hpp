// Stage 1 of the checker, the inputs: where a node is read from and the parsers that turn it
// into a Topology (model.hpp).
//  - InputFs, the file system the sysfs parser reads: the live node, a directory holding a
//    copy of it (--sysfs-root), or a snapshot tarball read in memory; RecordingFs is how
//    `gdrpeer snapshot` captures exactly the files the checker reads.
//  - InputFile, one whole input file in memory; tar and compression (archive.cpp).
//  - One parser per input format (sysfs, lspci, hwloc XML, NCCL XML) and the format
//    detection. Text parsers throw InputError("file:line: what was expected") on
//    malformed input.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "gdrpeer/topo/model.hpp"

namespace gdrpeer::topo {

// ---- the file systems a node is read from (input_fs.cpp, archive.cpp) ----

// A whole input file in memory, read once and copied: never a mapping of the file,
// which a truncation by another process would turn into SIGBUS. A large regular
// file is read into anonymous memory populated in one call, anything else (small
// files, a pipe, /dev/stdin) into a string. With `scratch` the file is read into
// *scratch, whose capacity is reused: fleet mode reads thousands of dumps, and
// mapping each costs page-table work and, with several threads, TLB shootdowns.
// "-" reads standard input. Throws MissingInput("PATH: cannot open input: <errno text>")
// when it cannot be opened, and for a directory; a read error ends the contents there.
class InputFile {
 public:
  explicit InputFile(const std::string& path, std::string* scratch = nullptr);
  ~InputFile();
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;
  std::string_view bytes() const { return map_ ? std::string_view(static_cast<const char*>(map_), size_) : std::string_view(*buf_); }

 private:
  void* map_ = nullptr;  // anonymous memory holding a large file's bytes
  size_t map_size_ = 0, size_ = 0;
  std::string own_;
  std::string* buf_ = &own_;
};

// Random access to one file. Config space is read this way: on a live node every
// 4 bytes of /sys/bus/pci/devices/*/config are one config-space access, which in a
// VM traps to the hypervisor (~10 us each here), so reading all 4 KiB of a device
// took ~10 ms where the checker needs a few dozen dwords.
class FileRange {
 public:
  virtual ~FileRange() = default;
  // Up to len bytes at off into buf; fewer (0) at or past the end of what is readable.
  virtual size_t read(size_t off, char* buf, size_t len) = 0;
};

// The file system one node is read from (sysfs, procfs and the snapshot's own records).
// Not to be confused with verify's MemorySource, the memory under test.
class InputFs {
 public:
  virtual ~InputFs() = default;
  // `path` for random access to its first max_bytes; nullptr when absent. This
  // default reads the whole file through read() (a RecordingFs records all of it).
  virtual std::unique_ptr<FileRange> open_range(const std::string& path, size_t max_bytes);
  // Paths are absolute ("/sys/bus/pci/devices"). nullopt when absent/unreadable.
  virtual std::optional<std::string> read(const std::string& path, size_t max_bytes = 1 << 20) = 0;
  virtual std::optional<std::string> readlink(const std::string& path) = 0;
  // Names in a directory (no "." or ".."), sorted; nullopt when not a directory.
  virtual std::optional<std::vector<std::string>> list(const std::string& path) = 0;
  virtual std::string describe() const = 0;
};

// Reads `root + path` on the real file system ("/" for the live node).
std::unique_ptr<InputFs> make_dir_fs(const std::string& root);

// One entry of a tar archive, as read or to be written.
struct TarEntry {
  enum class Type { File, Symlink, Directory } type = Type::File;
  std::string path;  // without leading "/"
  std::string data;  // file contents or link target
};

// Compression of an input or a snapshot, by its magic bytes (archive.cpp, libarchive).
enum class Compression { None, Gzip, Xz, Zstd, Bzip2 };
Compression detect_compression(std::string_view bytes);
const char* to_string(Compression c);

// Parses a tar archive (ustar, GNU, pax; plain or compressed) held in memory; throws
// InputError naming `name` and the archive offset on malformed input.
std::vector<TarEntry> parse_tar(const std::string& bytes, const std::string& name);
// A GNU-format tar of `entries` (long names as 'L' entries, which every gdrpeer reads),
// compressed as asked.
std::string write_tar(const std::vector<TarEntry>& entries, Compression compression = Compression::None);

// A gzip, xz, zstd or bzip2 stream decompressed; throws InputError naming `name` when it is
// corrupt, truncated or larger than max_bytes once decompressed.
std::string decompress(std::string_view bytes, const std::string& name, size_t max_bytes = size_t{1} << 30);

// A tar archive as gdrpeer snapshot writes it, or as hwloc-gather-topology does
// (everything inside one folder named after the node: read as if it were the top).
std::unique_ptr<InputFs> make_tar_fs(const std::string& bytes, const std::string& name);

// The same for a bzip2 stream only (hwloc-gather-topology writes NODE.tar.bz2).
std::string bunzip2(std::string_view bytes, const std::string& name, size_t max_bytes = size_t{1} << 30);

// Forwards to `inner` and remembers every path it answered, to write a snapshot.
class RecordingFs : public InputFs {
 public:
  explicit RecordingFs(InputFs& inner) : inner_(inner) {}
  std::optional<std::string> read(const std::string& path, size_t max_bytes) override;
  std::optional<std::string> readlink(const std::string& path) override;
  std::optional<std::vector<std::string>> list(const std::string& path) override;
  std::string describe() const override { return inner_.describe(); }
  // Entries for every file, link and directory seen, parents first.
  std::vector<TarEntry> entries() const;

 private:
  InputFs& inner_;
  std::map<std::string, TarEntry> seen_;
};

// ---- parsers (parse_*.cpp, sysfs_*.cpp, detect.cpp) ----

// Live sysfs, a --sysfs-root copy or a snapshot: reads /sys/bus/pci/devices/*
// (attributes, config space, iommu_group, numa_node, resource), iommu group
// types, /proc/cmdline, /proc/modules, /proc/cpuinfo, /sys/kernel/mm/memory_peers.
Topology parse_sysfs(InputFs& fs, const std::string& name);

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

// Compressed: gzip, xz, zstd or bzip2 (detect_compression above); decompress and detect
// again. Bzip2 is the same as Compressed, kept for callers that named it.
enum class InputFormat { Unknown, SysfsDir, SnapshotTar, Lspci, HwlocXml, NcclXml, Bzip2, Compressed };
// Guess the format of a file's contents (a directory is SysfsDir, decided by the caller).
InputFormat detect_format(std::string_view bytes);
const char* to_string(InputFormat f);

}  // namespace gdrpeer::topo

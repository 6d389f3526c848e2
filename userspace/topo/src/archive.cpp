// Tar archives and compressed inputs through libarchive (Debian libarchive-dev),
// which replaced the hand-written ustar reader/writer and the bzip2 reader:
// snapshots and hwloc-gather-topology tarballs come as .tar, .tar.gz, .tar.xz,
// .tar.zst and .tar.bz2, and any input file may be compressed. Only the tar
// format and the four filters are enabled: the linker then takes only their
// objects from libarchive.a (userspace/topo/CMakeLists.txt links it statically
// where the static libraries exist, so the binary still copies to a node alone).
#include <archive.h>
#include <archive_entry.h>

#include <cstring>
#include <memory>
#include <stdexcept>

#include "gdrpeer/topo/errors.hpp"
#include "gdrpeer/topo/inputs.hpp"

namespace gdrpeer::topo {

namespace {

struct ReadDeleter {
  void operator()(archive* a) const { archive_read_free(a); }
};
struct WriteDeleter {
  void operator()(archive* a) const { archive_write_free(a); }
};
struct EntryDeleter {
  void operator()(archive_entry* e) const { archive_entry_free(e); }
};
using Reader = std::unique_ptr<archive, ReadDeleter>;

// A reader of `bytes` with the compression filters gdrpeer accepts.
Reader open_reader(std::string_view bytes, const std::string& name, bool raw) {
  Reader a(archive_read_new());
  if (!a) throw InputError(name, 0, "cannot start libarchive");
  // Only the filter the magic names: registering the others costs a fleet run of plain
  // snapshots a bidding round per dump for nothing.
  switch (detect_compression(bytes)) {
    case Compression::None: break;
    case Compression::Gzip: archive_read_support_filter_gzip(a.get()); break;
    case Compression::Bzip2: archive_read_support_filter_bzip2(a.get()); break;
    case Compression::Xz: archive_read_support_filter_xz(a.get()); break;
    case Compression::Zstd: archive_read_support_filter_zstd(a.get()); break;
  }
  if (raw)
    archive_read_support_format_raw(a.get());
  else
    archive_read_support_format_tar(a.get());
  if (archive_read_open_memory(a.get(), bytes.data(), bytes.size()) != ARCHIVE_OK)
    throw InputError(name, 0, std::string("expected a tar archive or a compressed file: ") + archive_error_string(a.get()));
  return a;
}

std::string without_dot_slash(std::string path) {
  while (path.rfind("./", 0) == 0) path.erase(0, 2);
  while (!path.empty() && path[0] == '/') path.erase(0, 1);
  return path;
}

// Appends the archive's output to a string (archive_write_open's callbacks).
la_ssize_t append(archive*, void* out, const void* buf, size_t len) {
  static_cast<std::string*>(out)->append(static_cast<const char*>(buf), len);
  return static_cast<la_ssize_t>(len);
}

}  // namespace

Compression detect_compression(std::string_view b) {
  if (b.size() >= 3 && b.substr(0, 3) == "\x1f\x8b\x08") return Compression::Gzip;
  if (b.size() >= 6 && b.substr(0, 6) == std::string_view("\xfd"
                                                          "7zXZ\0",
                                                          6))
    return Compression::Xz;
  if (b.size() >= 4 && b.substr(0, 4) == "\x28\xb5\x2f\xfd") return Compression::Zstd;
  // bzip2: "BZh", the block size '1'..'9', then the block header magic 0x314159265359.
  if (b.size() >= 10 && b.substr(0, 3) == "BZh" && b[3] >= '1' && b[3] <= '9' && b.substr(4, 6) == "\x31\x41\x59\x26\x53\x59")
    return Compression::Bzip2;
  return Compression::None;
}

const char* to_string(Compression c) {
  switch (c) {
    case Compression::None: return "none";
    case Compression::Gzip: return "gzip";
    case Compression::Xz: return "xz";
    case Compression::Zstd: return "zstd";
    case Compression::Bzip2: return "bzip2";
  }
  return "?";
}

std::string decompress(std::string_view bytes, const std::string& name, size_t max_bytes) {
  const Compression c = detect_compression(bytes);
  Reader a = open_reader(bytes, name, true);
  archive_entry* e = nullptr;
  const std::string what = std::string(to_string(c)) + " stream";
  if (archive_read_next_header(a.get(), &e) != ARCHIVE_OK)
    throw InputError(name, 0, "expected a complete " + what + ": " + archive_error_string(a.get()));
  std::string out;
  for (;;) {
    if (out.size() > max_bytes) throw InputError(name, 0, "expected at most " + std::to_string(max_bytes >> 20) + " MiB once decompressed");
    const size_t have = out.size();
    out.resize(have + (size_t{1} << 20));
    const la_ssize_t n = archive_read_data(a.get(), out.data() + have, size_t{1} << 20);
    if (n < 0) throw InputError(name, 0, "expected a complete " + what + ": " + archive_error_string(a.get()));
    out.resize(have + static_cast<size_t>(n));
    if (n == 0) break;
  }
  return out;
}

std::string bunzip2(std::string_view bytes, const std::string& name, size_t max_bytes) {
  if (detect_compression(bytes) != Compression::Bzip2) throw InputError(name, 0, "expected a bzip2 stream");
  return decompress(bytes, name, max_bytes);
}

std::vector<TarEntry> parse_tar(const std::string& bytes, const std::string& name) {
  Reader a = open_reader(bytes, name, false);
  std::vector<TarEntry> out;
  int entry = 0;
  auto fail = [&](const std::string& what) {
    throw InputError(name, 0,
                     "tar entry " + std::to_string(entry) + " at byte " + std::to_string(archive_filter_bytes(a.get(), -1)) + ": " + what);
  };
  archive_entry* e = nullptr;
  for (;;) {
    const int rc = archive_read_next_header(a.get(), &e);
    if (rc == ARCHIVE_EOF) break;
    ++entry;
    if (rc < ARCHIVE_WARN) fail(std::string("expected a tar header: ") + archive_error_string(a.get()));
    const char* raw_path = archive_entry_pathname(e);
    std::string path = without_dot_slash(raw_path ? raw_path : "");
    const mode_t type = archive_entry_filetype(e);
    TarEntry t;
    if (archive_entry_hardlink(e)) continue;  // not used by snapshots, as devices and FIFOs
    if (type == AE_IFREG) {
      t.type = TarEntry::Type::File;
      const la_int64_t size = archive_entry_size(e);
      // An uncompressed entry cannot be larger than the archive: a crafted size must not allocate.
      const uint64_t limit = detect_compression(bytes) == Compression::None ? bytes.size() : uint64_t{1} << 30;
      if (size < 0 || static_cast<uint64_t>(size) > limit) fail("entry size " + std::to_string(size) + " runs past the end of the archive");
      t.data.resize(static_cast<size_t>(size));
      size_t got = 0;
      while (got < t.data.size()) {
        const la_ssize_t n = archive_read_data(a.get(), t.data.data() + got, t.data.size() - got);
        if (n < 0) fail(std::string("expected the entry's data: ") + archive_error_string(a.get()));
        if (n == 0) fail("entry size " + std::to_string(size) + " runs past the end of the archive");
        got += static_cast<size_t>(n);
      }
    } else if (type == AE_IFLNK) {
      t.type = TarEntry::Type::Symlink;
      const char* target = archive_entry_symlink(e);
      t.data = target ? target : "";
    } else if (type == AE_IFDIR) {
      t.type = TarEntry::Type::Directory;
    } else {
      continue;
    }
    while (!path.empty() && path.back() == '/') path.pop_back();
    if (path.empty()) continue;
    if (path.find("..") != std::string::npos) fail("path \"" + path + "\" leaves the archive");
    t.path = std::move(path);
    out.push_back(std::move(t));
  }
  if (entry == 0) fail("expected at least one tar entry");
  return out;
}

std::string write_tar(const std::vector<TarEntry>& entries, Compression compression) {
  std::unique_ptr<archive, WriteDeleter> a(archive_write_new());
  std::string out;
  auto check = [&](int rc) {
    if (rc != ARCHIVE_OK) throw std::runtime_error(std::string("libarchive: ") + archive_error_string(a.get()));
  };
  // GNU tar's long names ('L'/'K' entries), as the hand-written writer made them, so that older
  // gdrpeer binaries read new snapshots.
  check(archive_write_set_format_gnutar(a.get()));
  switch (compression) {
    case Compression::None: break;
    case Compression::Gzip: check(archive_write_add_filter_gzip(a.get())); break;
    case Compression::Xz: check(archive_write_add_filter_xz(a.get())); break;
    case Compression::Zstd: check(archive_write_add_filter_zstd(a.get())); break;
    case Compression::Bzip2: check(archive_write_add_filter_bzip2(a.get())); break;
  }
  check(archive_write_set_bytes_in_last_block(a.get(), 1));  // no padding after the end marker
  check(archive_write_open(a.get(), &out, nullptr, append, nullptr));
  std::unique_ptr<archive_entry, EntryDeleter> e(archive_entry_new());
  for (const auto& t : entries) {
    archive_entry_clear(e.get());
    archive_entry_set_pathname(e.get(), t.path.c_str());
    archive_entry_set_uname(e.get(), "root");
    archive_entry_set_gname(e.get(), "root");
    if (t.type == TarEntry::Type::Directory) {
      archive_entry_set_filetype(e.get(), AE_IFDIR);
      archive_entry_set_perm(e.get(), 0755);
    } else if (t.type == TarEntry::Type::Symlink) {
      archive_entry_set_filetype(e.get(), AE_IFLNK);
      archive_entry_set_perm(e.get(), 0777);
      archive_entry_set_symlink(e.get(), t.data.c_str());
    } else {
      archive_entry_set_filetype(e.get(), AE_IFREG);
      archive_entry_set_perm(e.get(), 0644);
      archive_entry_set_size(e.get(), static_cast<la_int64_t>(t.data.size()));
    }
    check(archive_write_header(a.get(), e.get()));
    if (t.type == TarEntry::Type::File && !t.data.empty() &&
        archive_write_data(a.get(), t.data.data(), t.data.size()) != static_cast<la_ssize_t>(t.data.size()))
      throw std::runtime_error(std::string("libarchive: ") + archive_error_string(a.get()));
  }
  check(archive_write_close(a.get()));
  return out;
}

}  // namespace gdrpeer::topo

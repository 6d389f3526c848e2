// File sources for the sysfs parser: a directory tree, an in-memory tar
// (snapshots), and the recorder behind `gdrpeer snapshot`. The tar code is
// plain ustar plus GNU long names ('L'), enough for sysfs paths.
#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bzlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <set>

#include "gdrpeer/topo/errors.hpp"
#include "gdrpeer/topo/source.hpp"

namespace gdrpeer::topo {

namespace {

class StringRange : public FileRange {
 public:
  explicit StringRange(std::string s) : s_(std::move(s)) {}
  size_t read(size_t off, char* buf, size_t len) override {
    if (off >= s_.size()) return 0;
    len = std::min(len, s_.size() - off);
    std::memcpy(buf, s_.data() + off, len);
    return len;
  }

 private:
  std::string s_;
};

class FdRange : public FileRange {
 public:
  FdRange(int fd, size_t max) : fd_(fd), max_(max) {}
  ~FdRange() override { ::close(fd_); }
  size_t read(size_t off, char* buf, size_t len) override {
    if (off >= max_) return 0;
    len = std::min(len, max_ - off);
    size_t got = 0;
    while (got < len) {
      ssize_t n = ::pread(fd_, buf + got, len - got, static_cast<off_t>(off + got));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;  // end, or a range the kernel refuses (EIO): not readable
      got += static_cast<size_t>(n);
    }
    return got;
  }

 private:
  int fd_;
  size_t max_;
};

class DirSource : public FileSource {
 public:
  explicit DirSource(std::string root) : root_(std::move(root)) {
    while (root_.size() > 1 && root_.back() == '/') root_.pop_back();
    if (root_ == "/") root_.clear();
  }
  std::optional<std::string> read(const std::string& path, size_t max_bytes) override {
    int fd = ::open((root_ + path).c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return std::nullopt;
    std::string out;
    char buf[8192];
    for (;;) {
      ssize_t n = ::read(fd, buf, sizeof buf);
      if (n < 0) {
        if (errno == EINTR) continue;
        ::close(fd);
        // Some sysfs attributes exist but refuse reads (EIO, EINVAL): absent.
        return out.empty() ? std::nullopt : std::optional<std::string>(out);
      }
      if (n == 0) break;
      out.append(buf, static_cast<size_t>(n));
      if (out.size() >= max_bytes) {
        out.resize(max_bytes);
        break;
      }
    }
    ::close(fd);
    return out;
  }
  std::unique_ptr<FileRange> open_range(const std::string& path, size_t max_bytes) override {
    int fd = ::open((root_ + path).c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return nullptr;
    return std::make_unique<FdRange>(fd, max_bytes);
  }
  std::optional<std::string> readlink(const std::string& path) override {
    char buf[4096];
    ssize_t n = ::readlink((root_ + path).c_str(), buf, sizeof buf);
    if (n < 0 || static_cast<size_t>(n) >= sizeof buf) return std::nullopt;
    return std::string(buf, static_cast<size_t>(n));
  }
  std::optional<std::vector<std::string>> list(const std::string& path) override {
    DIR* d = ::opendir((root_ + path).c_str());
    if (!d) return std::nullopt;
    std::vector<std::string> out;
    while (dirent* e = ::readdir(d)) {
      if (std::strcmp(e->d_name, ".") == 0 || std::strcmp(e->d_name, "..") == 0) continue;
      out.emplace_back(e->d_name);
    }
    ::closedir(d);
    std::sort(out.begin(), out.end());
    return out;
  }
  std::string describe() const override { return root_.empty() ? "/" : root_; }

 private:
  std::string root_;
};

uint64_t octal(const char* p, size_t n, bool& ok) {
  uint64_t v = 0;
  size_t i = 0;
  while (i < n && p[i] == ' ') ++i;
  bool any = false;
  for (; i < n && p[i] >= '0' && p[i] <= '7'; ++i) {
    v = v * 8 + static_cast<uint64_t>(p[i] - '0');
    any = true;
  }
  for (; i < n; ++i)
    if (p[i] != ' ' && p[i] != '\0') ok = false;
  if (!any) ok = false;
  return v;
}

std::string cstr(const char* p, size_t n) { return std::string(p, strnlen(p, n)); }

// hwloc-gather-topology archives hold the copied file system in one folder named
// after the node ("node1/sys/...", "node1/proc/..."); gdrpeer snapshots hold it at
// the top. The folder's name when every entry is inside one that has a sys/, else "".
std::string single_top_folder(const std::vector<TarEntry>& entries) {
  std::string top;
  bool has_sys = false;
  for (const auto& e : entries) {
    std::string_view p = e.path;
    const size_t slash = p.find('/');
    std::string_view first = p.substr(0, slash);
    if (first.empty() || first == "sys" || first == "proc") return "";
    if (top.empty()) top = first;
    else if (first != top) return "";
    has_sys = has_sys || (slash != std::string_view::npos && p.substr(slash + 1, 4) == "sys/");
  }
  return has_sys ? top : "";
}

class TarSource : public FileSource {
 public:
  TarSource(const std::string& bytes, std::string name) : name_(std::move(name)) {
    std::vector<TarEntry> entries = parse_tar(bytes, name_);
    const std::string top = single_top_folder(entries);
    for (auto& e : entries) {
      if (!top.empty()) {
        if (e.path.size() <= top.size() + 1) continue;  // the folder itself
        e.path.erase(0, top.size() + 1);
      }
      std::string p = "/" + e.path;
      while (p.size() > 1 && p.back() == '/') p.pop_back();
      // Register every parent directory so list() sees implied folders.
      for (size_t s = p.find('/', 1); s != std::string::npos; s = p.find('/', s + 1))
        dirs_[p.substr(0, s)].insert(p.substr(s + 1, p.find('/', s + 1) - s - 1));
      if (e.type == TarEntry::Type::Directory) dirs_[p];
      else if (e.type == TarEntry::Type::Symlink) links_[p] = e.data;
      else files_[p] = std::move(e.data);
      size_t slash = p.rfind('/');
      dirs_[slash == 0 ? "/" : p.substr(0, slash)].insert(p.substr(slash + 1));
    }
  }
  std::optional<std::string> read(const std::string& path, size_t max_bytes) override {
    auto it = files_.find(path);
    if (it == files_.end()) return std::nullopt;
    return it->second.substr(0, max_bytes);
  }
  std::optional<std::string> readlink(const std::string& path) override {
    auto it = links_.find(path);
    if (it == links_.end()) return std::nullopt;
    return it->second;
  }
  std::optional<std::vector<std::string>> list(const std::string& path) override {
    auto it = dirs_.find(path);
    if (it == dirs_.end()) return std::nullopt;
    return std::vector<std::string>(it->second.begin(), it->second.end());
  }
  std::string describe() const override { return name_; }

 private:
  std::string name_;
  std::map<std::string, std::string> files_, links_;
  std::map<std::string, std::set<std::string>> dirs_;
};

void put_octal(char* p, size_t n, uint64_t v) {
  // n-1 digits and a NUL
  for (size_t i = n - 1; i-- > 0;) {
    p[i] = static_cast<char>('0' + (v & 7));
    v >>= 3;
  }
  p[n - 1] = '\0';
}

void header(std::string& out, const std::string& path, char type, uint64_t size, const std::string& link) {
  char h[512];
  std::memset(h, 0, sizeof h);
  std::string name = path;
  if (name.size() > 100 || link.size() > 100) {
    // GNU long name: a pseudo-entry "././@LongLink" holding the name.
    if (name.size() > 100) {
      header(out, "././@LongLink", 'L', name.size() + 1, "");
      std::string data = name + '\0';
      data.resize((data.size() + 511) / 512 * 512, '\0');
      out += data;
    }
    if (link.size() > 100) {
      header(out, "././@LongLink", 'K', link.size() + 1, "");
      std::string data = link + '\0';
      data.resize((data.size() + 511) / 512 * 512, '\0');
      out += data;
    }
    name = name.substr(0, 100);
  }
  std::memcpy(h, name.data(), std::min<size_t>(name.size(), 100));
  put_octal(h + 100, 8, type == '5' ? 0755 : type == '2' ? 0777 : 0644);
  put_octal(h + 108, 8, 0);
  put_octal(h + 116, 8, 0);
  put_octal(h + 124, 12, size);
  put_octal(h + 136, 12, 0);
  h[156] = type;
  std::memcpy(h + 157, link.data(), std::min<size_t>(link.size(), 100));
  std::memcpy(h + 257, "ustar", 6);
  std::memcpy(h + 263, "00", 2);
  std::memcpy(h + 265, "root", 4);
  std::memcpy(h + 297, "root", 4);
  std::memset(h + 148, ' ', 8);
  unsigned sum = 0;
  for (unsigned char c : h) sum += c;
  put_octal(h + 148, 7, sum);
  h[155] = ' ';
  out.append(h, sizeof h);
}

}  // namespace

std::unique_ptr<FileRange> FileSource::open_range(const std::string& path, size_t max_bytes) {
  auto bytes = read(path, max_bytes);
  if (!bytes) return nullptr;
  return std::make_unique<StringRange>(std::move(*bytes));
}

namespace {
// read() until the buffer is full or the file ends; returns the bytes read.
size_t read_into(int fd, char* buf, size_t cap) {
  size_t used = 0;
  while (used < cap) {
    ssize_t n = ::read(fd, buf + used, cap - used);
    if (n < 0 && errno == EINTR) continue;
    // A read error (EISDIR for a directory, EIO) ends the input where it is, as
    // the ifstream this replaced did: the parser then says what it expected there.
    if (n <= 0) break;
    used += static_cast<size_t>(n);
  }
  return used;
}
}  // namespace

InputFile::InputFile(const std::string& path, std::string* scratch) {
  if (scratch) buf_ = scratch;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw MissingInput(path + ": cannot open input");
  struct stat st;
  const bool regular = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
  // The contents are always copied out of the file: a mapping of the file itself
  // would raise SIGBUS if the file were truncated while being checked (a dump being
  // rewritten). Large files are read into anonymous memory mapped with MAP_POPULATE
  // (its pages made present in one call instead of a fault per page, and no zeroing
  // by std::string); one byte more than the size shows a file that grew meanwhile.
  if (regular && st.st_size >= 65536 && !scratch) {
    const size_t cap = static_cast<size_t>(st.st_size) + 1;
    void* m = ::mmap(nullptr, cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    if (m != MAP_FAILED) {
      const size_t got = read_into(fd, static_cast<char*>(m), cap);
      if (got < cap) {
        map_ = m;
        map_size_ = cap;
        size_ = got;
        ::close(fd);
        return;
      }
      own_.assign(static_cast<const char*>(m), got);  // it grew: go on below
      ::munmap(m, cap);
    }
  }
  std::string& buf = *buf_;
  size_t used = buf_ == &own_ ? own_.size() : 0;
  buf.resize(std::max(used + 1, regular && st.st_size > 0 ? static_cast<size_t>(st.st_size) + 1 : size_t{65536}));
  for (;;) {
    const size_t got = read_into(fd, buf.data() + used, buf.size() - used);
    used += got;
    if (used < buf.size()) break;
    buf.resize(buf.size() * 2);
  }
  buf.resize(used);
  ::close(fd);
}

InputFile::~InputFile() {
  if (map_) ::munmap(map_, map_size_);
}

std::unique_ptr<FileSource> make_dir_source(const std::string& root) { return std::make_unique<DirSource>(root); }

std::unique_ptr<FileSource> make_tar_source(const std::string& bytes, const std::string& name) {
  return std::make_unique<TarSource>(bytes, name);
}

std::vector<TarEntry> parse_tar(const std::string& bytes, const std::string& name) {
  std::vector<TarEntry> out;
  size_t off = 0;
  std::string long_name, long_link;
  int entry = 0;
  auto fail = [&](const std::string& what) {
    throw InputError(name, 0, "tar entry " + std::to_string(entry) + " at byte " + std::to_string(off) + ": " + what);
  };
  if (bytes.size() % 512 != 0) {
    off = bytes.size();
    fail("expected a tar archive (a multiple of 512 bytes), found " + std::to_string(bytes.size()) + " bytes");
  }
  while (off + 512 <= bytes.size()) {
    const char* h = bytes.data() + off;
    bool zero = std::all_of(h, h + 512, [](char c) { return c == 0; });
    if (zero) break;  // end-of-archive marker
    ++entry;
    bool ok = true;
    uint64_t chk = octal(h + 148, 8, ok);
    unsigned sum = 0;
    for (int i = 0; i < 512; ++i) sum += (i >= 148 && i < 156) ? ' ' : static_cast<unsigned char>(h[i]);
    if (!ok || chk != sum) fail("expected a tar header with a valid checksum");
    ok = true;
    uint64_t size = octal(h + 124, 12, ok);
    if (!ok) fail("expected an octal size in the tar header");
    char type = h[156];
    size_t data_off = off + 512;
    if (size > bytes.size() - data_off) fail("entry size " + std::to_string(size) + " runs past the end of the archive");
    std::string data = bytes.substr(data_off, size);
    off = data_off + (size + 511) / 512 * 512;
    if (type == 'L') {
      long_name = cstr(data.data(), data.size());
      continue;
    }
    if (type == 'K') {
      long_link = cstr(data.data(), data.size());
      continue;
    }
    std::string path = long_name.empty() ? cstr(h, 100) : long_name;
    if (long_name.empty() && std::memcmp(h + 257, "ustar", 5) == 0 && h[345]) path = cstr(h + 345, 155) + "/" + path;
    std::string link = long_link.empty() ? cstr(h + 157, 100) : long_link;
    long_name.clear();
    long_link.clear();
    while (path.rfind("./", 0) == 0) path = path.substr(2);
    while (!path.empty() && path[0] == '/') path = path.substr(1);
    if (path.empty()) continue;
    if (path.find("..") != std::string::npos) fail("path \"" + path + "\" leaves the archive");
    TarEntry e;
    e.path = path;
    if (type == '0' || type == '\0' || type == '7') {
      e.type = TarEntry::Type::File;
      e.data = std::move(data);
    } else if (type == '2') {
      e.type = TarEntry::Type::Symlink;
      e.data = link;
    } else if (type == '5') {
      e.type = TarEntry::Type::Directory;
    } else {
      continue;  // hard links, devices, pax headers: not used by snapshots
    }
    out.push_back(std::move(e));
  }
  if (entry == 0) fail("expected at least one tar entry");
  return out;
}

std::string write_tar(const std::vector<TarEntry>& entries) {
  std::string out;
  for (const auto& e : entries) {
    std::string path = e.path;
    if (e.type == TarEntry::Type::Directory) {
      header(out, path + "/", '5', 0, "");
    } else if (e.type == TarEntry::Type::Symlink) {
      header(out, path, '2', 0, e.data);
    } else {
      header(out, path, '0', e.data.size(), "");
      std::string data = e.data;
      data.resize((data.size() + 511) / 512 * 512, '\0');
      out += data;
    }
  }
  out.append(1024, '\0');
  return out;
}

std::optional<std::string> RecordingSource::read(const std::string& path, size_t max_bytes) {
  auto r = inner_.read(path, max_bytes);
  if (r) seen_[path] = TarEntry{TarEntry::Type::File, path.substr(1), *r};
  return r;
}

std::optional<std::string> RecordingSource::readlink(const std::string& path) {
  auto r = inner_.readlink(path);
  if (r) seen_[path] = TarEntry{TarEntry::Type::Symlink, path.substr(1), *r};
  return r;
}

std::optional<std::vector<std::string>> RecordingSource::list(const std::string& path) {
  auto r = inner_.list(path);
  // Directories are recorded so that empty ones (no IOMMU groups, no memory
  // peers) still read back as "present and empty".
  if (r && !seen_.count(path)) seen_[path] = TarEntry{TarEntry::Type::Directory, path.substr(1), ""};
  return r;
}

std::vector<TarEntry> RecordingSource::entries() const {
  std::vector<TarEntry> out;
  for (const auto& [p, e] : seen_) out.push_back(e);  // map order puts parents first
  return out;
}

std::string bunzip2(std::string_view bytes, const std::string& name, size_t max_bytes) {
  bz_stream z{};
  if (BZ2_bzDecompressInit(&z, 0, 0) != BZ_OK) throw InputError(name, 0, "cannot start bzip2 decompression");
  std::string out;
  z.next_in = const_cast<char*>(bytes.data());  // bzlib's interface is not const; it only reads
  z.avail_in = static_cast<unsigned>(std::min<size_t>(bytes.size(), UINT32_MAX));
  int rc = BZ_OK;
  while (rc == BZ_OK) {
    if (out.size() >= max_bytes) {
      BZ2_bzDecompressEnd(&z);
      throw InputError(name, 0, "expected at most " + std::to_string(max_bytes >> 20) + " MiB once decompressed");
    }
    const size_t have = out.size();
    out.resize(have + (1 << 20));
    z.next_out = out.data() + have;
    z.avail_out = 1 << 20;
    rc = BZ2_bzDecompress(&z);
    out.resize(have + (1 << 20) - z.avail_out);
    if (rc == BZ_OK && z.avail_in == 0 && z.avail_out != 0) rc = BZ_UNEXPECTED_EOF;
  }
  BZ2_bzDecompressEnd(&z);
  if (rc != BZ_STREAM_END) throw InputError(name, 0, "expected a complete bzip2 stream (bzlib error " + std::to_string(rc) + ")");
  return out;
}

}  // namespace gdrpeer::topo

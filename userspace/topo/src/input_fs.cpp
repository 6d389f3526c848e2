// The file systems a node is read from (InputFs, inputs.hpp): a directory tree (live "/" or a
// --sysfs-root copy), an in-memory tar (snapshots), and the recorder behind `gdrpeer snapshot`;
// and InputFile, one whole input file in memory. Reading and writing tar and the compressed
// forms is libarchive's (archive.cpp).
#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <set>

#include "gdrpeer/topo/errors.hpp"
#include "gdrpeer/topo/inputs.hpp"

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

class DirFs : public InputFs {
 public:
  explicit DirFs(std::string root) : root_(std::move(root)) {
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
    if (top.empty())
      top = first;
    else if (first != top)
      return "";
    has_sys = has_sys || (slash != std::string_view::npos && p.substr(slash + 1, 4) == "sys/");
  }
  return has_sys ? top : "";
}

class TarFs : public InputFs {
 public:
  TarFs(const std::string& bytes, std::string name) : name_(std::move(name)) {
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
      if (e.type == TarEntry::Type::Directory)
        dirs_[p];
      else if (e.type == TarEntry::Type::Symlink)
        links_[p] = e.data;
      else
        files_[p] = std::move(e.data);
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

}  // namespace

std::unique_ptr<FileRange> InputFs::open_range(const std::string& path, size_t max_bytes) {
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
  // "-" is standard input (a pipe from ssh or kubectl exec, a redirected file), read like any.
  const bool from_stdin = path == "-";
  int fd = from_stdin ? ::dup(STDIN_FILENO) : ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)  // ENOENT, EACCES, ELOOP...: the errno says which
    throw MissingInput((from_stdin ? std::string("stdin") : path) + ": cannot open input: " + std::strerror(errno));
  struct stat st;
  const bool stat_ok = ::fstat(fd, &st) == 0;
  if (stat_ok && S_ISDIR(st.st_mode)) {
    ::close(fd);
    throw MissingInput(path + ": cannot read input: " + std::strerror(EISDIR) +
                       " (a copy of a node's /sys and /proc is read as a positional input or --sysfs-root DIR)");
  }
  const bool regular = stat_ok && S_ISREG(st.st_mode);
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

std::unique_ptr<InputFs> make_dir_fs(const std::string& root) { return std::make_unique<DirFs>(root); }

std::unique_ptr<InputFs> make_tar_fs(const std::string& bytes, const std::string& name) { return std::make_unique<TarFs>(bytes, name); }

std::optional<std::string> RecordingFs::read(const std::string& path, size_t max_bytes) {
  auto r = inner_.read(path, max_bytes);
  if (r) seen_[path] = TarEntry{TarEntry::Type::File, path.substr(1), *r};
  return r;
}

std::optional<std::string> RecordingFs::readlink(const std::string& path) {
  auto r = inner_.readlink(path);
  if (r) seen_[path] = TarEntry{TarEntry::Type::Symlink, path.substr(1), *r};
  return r;
}

std::optional<std::vector<std::string>> RecordingFs::list(const std::string& path) {
  auto r = inner_.list(path);
  // Directories are recorded so that empty ones (no IOMMU groups, no memory
  // peers) still read back as "present and empty".
  if (r && !seen_.count(path)) seen_[path] = TarEntry{TarEntry::Type::Directory, path.substr(1), ""};
  return r;
}

std::vector<TarEntry> RecordingFs::entries() const {
  std::vector<TarEntry> out;
  for (const auto& [p, e] : seen_) out.push_back(e);  // map order puts parents first
  return out;
}

}  // namespace gdrpeer::topo

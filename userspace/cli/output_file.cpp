#include "output_file.hpp"

#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace gdrpeer::cli {

namespace {

[[noreturn]] void fail(const std::string& path, const std::string& what, int err) {
  throw OutputError(path + ": " + what + ": " + std::strerror(err));
}

std::string dir_of(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
}

// The directory's canonical path; "" when it cannot be resolved.
std::string real_dir(const std::string& dir) {
  char buf[PATH_MAX];
  return ::realpath(dir.c_str(), buf) ? std::string(buf) : std::string();
}

void write_all(int fd, std::string_view bytes, const std::string& path) {
  for (size_t done = 0; done < bytes.size();) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail(path, "write failed", errno);
    if (n == 0) fail(path, "write failed", EIO);
    done += static_cast<size_t>(n);
  }
}

// A regular file (or none yet): temporary file beside it, fsync, rename.
void replace_atomically(const std::string& path, std::string_view bytes, mode_t mode) {
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "" : path.substr(0, slash + 1);  // with its '/'
  const std::string base = path.substr(dir.size());
  // Hidden, and without the final suffix: node_exporter reads only *.prom and NFD skips dot files.
  std::string tmp = dir + "." + base + ".XXXXXX";
  const int fd = ::mkstemp(tmp.data());
  if (fd < 0) fail(path, "cannot create a file in " + (dir.empty() ? std::string(".") : dir), errno);
  try {
    if (::fchmod(fd, mode) != 0) fail(path, "chmod failed", errno);
    write_all(fd, bytes, path);
    if (::fsync(fd) != 0) fail(path, "fsync failed", errno);
  } catch (...) {
    ::close(fd);
    ::unlink(tmp.c_str());
    throw;
  }
  if (::close(fd) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    fail(path, "close failed", err);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    fail(path, "cannot rename into place", err);
  }
}

// A FIFO or a device node: opened and written where it is, never replaced.
void write_in_place(const std::string& path, std::string_view bytes) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) fail(path, "cannot open for writing", errno);
  try {
    write_all(fd, bytes, path);
  } catch (...) {
    ::close(fd);
    throw;
  }
  if (::close(fd) != 0) fail(path, "close failed", errno);
}

void write_path(const std::string& path, std::string_view bytes, const OutputPolicy& policy, int depth) {
  if (path.empty() || path.back() == '/') throw OutputError(path + ": names a directory, expected a file");
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno != ENOENT) fail(path, "cannot inspect", errno);
    replace_atomically(path, bytes, 0644);
    return;
  }
  if (S_ISLNK(st.st_mode)) {
    if (depth >= 8) fail(path, "too many levels of symbolic links", ELOOP);
    char target[PATH_MAX];
    const ssize_t n = ::readlink(path.c_str(), target, sizeof target - 1);
    if (n < 0) fail(path, "cannot read the symbolic link", errno);
    target[n] = '\0';
    const std::string link_dir = dir_of(path);
    const std::string next = target[0] == '/' ? std::string(target) : link_dir + "/" + target;
    if (!policy.follow_symlinks_anywhere) {
      const std::string here = real_dir(link_dir), there = real_dir(dir_of(next));
      if (there.empty() || here != there)
        throw OutputError(path + ": a symbolic link to " + target +
                          ", outside its directory: not followed (--follow-symlinks writes through it)");
    }
    write_path(next, bytes, policy, depth + 1);
    return;
  }
  if (S_ISREG(st.st_mode)) {
    replace_atomically(path, bytes, st.st_mode & 07777);
    return;
  }
  if (S_ISFIFO(st.st_mode) || S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)) {
    write_in_place(path, bytes);
    return;
  }
  if (S_ISDIR(st.st_mode)) fail(path, "is a directory, expected a file", EISDIR);
  throw OutputError(path + ": a socket or other special file: not written (expected a file, FIFO or device)");
}

}  // namespace

void write_output(const std::string& path, std::string_view bytes, const OutputPolicy& policy) {
  if (path == "-") {
    if (std::fwrite(bytes.data(), 1, bytes.size(), stdout) != bytes.size()) fail("stdout", "write failed", errno);
    finish_stdout();
    return;
  }
  write_path(path, bytes, policy, 0);
}

void finish_stdout() {
  if (std::fflush(stdout) != 0 || std::ferror(stdout)) fail("stdout", "write failed", errno ? errno : EIO);
}

}  // namespace gdrpeer::cli

// The one writer of `gdrpeer check --output FILE` and `gdrpeer snapshot FILE`.
//
// Run as root (the systemd unit, NHC), an output path may name anything: a
// regular file a collector reads (replaced atomically: hidden temporary file in
// the same directory, fsync, rename, so a reader sees the old or the new file,
// never a part), a FIFO or a device node (written in place: replacing
// /dev/null with a regular file breaks the machine), a socket or a directory
// (refused), or a symlink (followed only within its own directory unless the
// caller allows more: a link planted in a spool directory must not redirect a
// root-owned write elsewhere). Every failure names the path and the errno.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

namespace gdrpeer::cli {

// The output could not be written; what() names the path and the reason. Exit 73.
struct OutputError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct OutputPolicy {
  // Follow a symlink whose target lies outside the link's own directory
  // (--follow-symlinks). A link within its directory is always followed.
  bool follow_symlinks_anywhere = false;
};

// Writes `bytes` to `path` as described above; "-" is stdout (flushed, errors
// reported). A new regular file gets mode 0644, a replaced one keeps its mode.
// Throws OutputError.
void write_output(const std::string& path, std::string_view bytes, const OutputPolicy& policy = {});

// Flushes stdout and throws OutputError when anything written to it was lost
// (a full disk, a closed pipe): fleet mode prints line by line.
void finish_stdout();

}  // namespace gdrpeer::cli

// Errors of libgdrpeer: what was asked, the errno it failed with, and (when we
// know one) what to do about it.
#pragma once

#include <stdexcept>
#include <string>

namespace gdrpeer {

// "ENOMEM" for ENOMEM, "errno 4242" for a number the C library has no name for.
std::string errno_name(int err);

class Error : public std::runtime_error {
 public:
  // request: what the caller asked for, in words ("alloc 4096 bytes on device 0").
  // err: the errno it failed with (positive).
  // hint: optional advice appended after the errno ("is the gdrpeer module loaded?").
  Error(int err, std::string request, std::string hint = {});

  int error_code() const noexcept { return err_; }
  const std::string& request() const noexcept { return request_; }
  const std::string& hint() const noexcept { return hint_; }

  // "alloc 4096 bytes on device 0: ENOMEM (Cannot allocate memory)[; hint]"
  static std::string format(int err, const std::string& request, const std::string& hint);

 private:
  int err_;
  std::string request_;
  std::string hint_;
};

}  // namespace gdrpeer

#include "gdrpeer/error.hpp"

#include <cstring>
#include <utility>

namespace gdrpeer {

std::string errno_name(int err) {
  // strerrorname_np (glibc >= 2.32) knows every name the kernel can return.
  if (const char* name = ::strerrorname_np(err); name != nullptr) return name;
  return "errno " + std::to_string(err);
}

std::string Error::format(int err, const std::string& request, const std::string& hint) {
  std::string s = request + ": " + errno_name(err) + " (" + std::strerror(err) + ")";
  if (!hint.empty()) s += "; " + hint;
  return s;
}

Error::Error(int err, std::string request, std::string hint)
    : std::runtime_error(format(err, request, hint)), err_(err), request_(std::move(request)), hint_(std::move(hint)) {}

}  // namespace gdrpeer

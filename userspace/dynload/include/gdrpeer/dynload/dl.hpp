// Shared by the libraries gdrpeer loads at run time (libcuda, libnvidia-ml, libibverbs): binding symbols
// with dlsym and keeping one load per library name for the life of the process (none is
// ever unloaded: CUDA contexts, NVML and verbs providers live until exit).
#pragma once

#include <dlfcn.h>

#include <map>
#include <mutex>
#include <string>

namespace gdrpeer::dl {

// fn = symbol from lib; a missing required symbol is appended to *missing ("a, b").
template <typename Fn>
void bind(void* lib, Fn& fn, const char* symbol, bool required, std::string* missing) {
  fn = reinterpret_cast<Fn>(::dlsym(lib, symbol));
  if (fn == nullptr && required) {
    if (!missing->empty()) *missing += ", ";
    *missing += symbol;
  }
}

template <typename Api>
struct Loaded {
  Api api;
  std::string why;  // why it could not be loaded, when !ok
  bool ok = false;
};

// The Api of `library`, loaded once by load_now; nullptr and *why when it cannot be loaded.
template <typename Api>
const Api* cached_load(std::string* why, const char* library, Loaded<Api> (*load_now)(const char*)) {
  static std::mutex mu;
  static std::map<std::string, Loaded<Api>> cache;
  std::lock_guard lock(mu);
  auto it = cache.find(library);
  if (it == cache.end()) it = cache.emplace(library, load_now(library)).first;
  if (!it->second.ok) {
    if (why != nullptr) *why = it->second.why;
    return nullptr;
  }
  return &it->second.api;
}

}  // namespace gdrpeer::dl

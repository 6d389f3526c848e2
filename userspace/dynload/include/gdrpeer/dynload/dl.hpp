// One loader for the libraries gdrpeer loads at run time (libcuda, libnvidia-ml, libibverbs):
// each library is a constexpr table of {symbol, &Api::member, required} and open_api() does the
// steps they share (dlopen, explain the failure, bind each symbol, list what is missing,
// dlclose). One load per library name is kept for the life of the process (none is ever
// unloaded: CUDA contexts, NVML and verbs providers live until exit).
#pragma once

#include <dlfcn.h>

#include <map>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>

namespace gdrpeer::dl {

// fn = symbol from lib; a missing required symbol is appended to *missing ("a, b"). For
// loaders that are not one library's table (the ibgda probe binds from three libraries).
template <typename Fn>
void bind(void* lib, Fn& fn, const char* symbol, bool required, std::string* missing) {
  fn = reinterpret_cast<Fn>(::dlsym(lib, symbol));
  if (fn == nullptr && required) {
    if (!missing->empty()) *missing += ", ";
    *missing += symbol;
  }
}

// One entry of a library's table.
template <typename Api>
struct Sym {
  const char* name;          // the exported name ("cuMemAlloc_v2")
  void (*set)(Api&, void*);  // stores dlsym's answer into its Api member
  bool required;             // missing: the library is not usable (or, with group, the group)
  std::string Api::*group;   // non-null: a missing required symbol is listed here instead,
                             // and only that group of entry points is unusable
};

namespace detail {
template <typename T>
struct MemberOf;
template <typename C, typename T>
struct MemberOf<T C::*> {
  using Class = C;
  using Type = T;
};
}  // namespace detail

// sym<&Api::cuInit>("cuInit", true): a table entry binding one member.
template <auto Member>
constexpr auto sym(const char* name, bool required, std::string detail::MemberOf<decltype(Member)>::Class::*group = nullptr) {
  using Api = typename detail::MemberOf<decltype(Member)>::Class;
  using Fn = typename detail::MemberOf<decltype(Member)>::Type;
  static_assert(std::is_pointer_v<Fn>, "a table entry binds a function pointer member");
  return Sym<Api>{name, [](Api& a, void* p) { a.*Member = reinterpret_cast<Fn>(p); }, required, group};
}

// How a library is opened and how its failures read. In the texts, {library} is the name
// passed to dlopen, {dlerror} dlerror()'s text and {missing} the missing symbols ("a, b").
struct Hint {
  int flags;                      // RTLD_NOW | RTLD_LOCAL, or RTLD_GLOBAL for verbs' providers
  std::string_view not_loadable;  // dlopen failed
  std::string_view lacks;         // a required symbol is missing
};

// text with {library}, {dlerror} and {missing} replaced.
std::string fill(std::string_view text, std::string_view library, std::string_view dlerror, std::string_view missing);

template <typename Api>
struct Loaded {
  Api api;
  std::string why;  // why it could not be loaded, when !ok
  bool ok = false;
};

// dlopen library and bind every entry of table into a fresh Api. Api::handle, where Api has
// one, holds the library handle while it is loaded.
template <typename Api>
Loaded<Api> open_api(const char* library, const Hint& hint, std::span<const Sym<Api>> table) {
  Loaded<Api> l;
  void* lib = ::dlopen(library, hint.flags);
  if (lib == nullptr) {
    const char* e = ::dlerror();
    l.why = fill(hint.not_loadable, library, e != nullptr ? e : "unknown error", "");
    return l;
  }
  constexpr bool has_handle = requires(Api a, void* p) { a.handle = p; };
  if constexpr (has_handle) l.api.handle = lib;
  std::string missing;
  for (const Sym<Api>& s : table) {
    void* p = ::dlsym(lib, s.name);
    s.set(l.api, p);
    if (p != nullptr || !s.required) continue;
    std::string& list = s.group != nullptr ? l.api.*s.group : missing;
    if (!list.empty()) list += ", ";
    list += s.name;
  }
  if (!missing.empty()) {
    l.why = fill(hint.lacks, library, "", missing);
    ::dlclose(lib);
    if constexpr (has_handle) l.api.handle = nullptr;
    return l;
  }
  l.ok = true;
  return l;
}

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

// Device names from pci.ids for sysfs inputs (live and snapshots), as lspci names
// them: libpci's pci_lookup_name, loaded with dlopen so that the CLI stays one
// binary needing only libc (Debian ships no static libpci, and its static link
// would need libudev's too). Without libpci.so.3 the ids stay bare, with a note.
#include <dlfcn.h>

#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>

extern "C" {
#include <pci/pci.h>
}

#include "pci_names.hpp"

namespace gdrpeer::topo {

namespace {

struct LibPci {
  decltype(&pci_alloc) alloc = nullptr;
  decltype(&pci_lookup_name) lookup = nullptr;
  pci_access* access = nullptr;
  std::string error;  // why names are not there
};

// libpci calls these where pci_init would have installed its own. An error (a malformed
// pci.ids) may not return: said on stderr, exit 78 as for unusable rule data.
// __attribute__ rather than [[noreturn]]: clang keeps it in the function type, as libpci's
// `error` member (PCI_NONRET) wants.
__attribute__((noreturn)) void libpci_error(char* msg, ...) {
  va_list ap;
  va_start(ap, msg);
  std::fputs("gdrpeer: libpci: ", stderr);
  std::vfprintf(stderr, msg, ap);
  std::fputs("\n", stderr);
  va_end(ap);
  std::_Exit(78);
}
void libpci_quiet(char*, ...) {}

// Loaded once per process (fleet mode checks many dumps on several threads); the
// library's name list is parsed on the first lookup and kept.
LibPci& libpci() {
  static LibPci lib;
  static std::once_flag once;
  std::call_once(once, [] {
    // GDRPEER_LIBPCI names another library (tests: one that is not there).
    const char* env = std::getenv("GDRPEER_LIBPCI");
    const std::string so = env && *env ? env : "libpci.so.3";
    void* h = ::dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      lib.error = so + " not loadable (Debian package libpci3)";
      return;
    }
    lib.alloc = reinterpret_cast<decltype(&pci_alloc)>(::dlsym(h, "pci_alloc"));
    lib.lookup = reinterpret_cast<decltype(&pci_lookup_name)>(::dlsym(h, "pci_lookup_name"));
    if (!lib.alloc || !lib.lookup) {
      lib.error = so + " lacks pci_alloc or pci_lookup_name";
      return;
    }
    // No pci_init: only the name list is used, never the machine's PCI access methods. So the
    // message hooks pci_init would set are ours, and no ~/.pciids-cache or DNS is consulted.
    lib.access = lib.alloc();
    if (!lib.access) {
      lib.error = "pci_alloc failed";
      return;
    }
    lib.access->error = libpci_error;
    lib.access->warning = libpci_quiet;
    lib.access->debug = libpci_quiet;
    lib.access->id_lookup_mode = 0;
  });
  return lib;
}

}  // namespace

const std::string* pci_ids_name(uint16_t vendor, uint16_t device, std::string& why) {
  LibPci& lib = libpci();
  if (!lib.access) {
    why = lib.error;
    return nullptr;
  }
  static std::mutex lookups;  // libpci's name list and cache are not thread-safe; fleet mode renders on threads
  static std::map<uint32_t, std::string> names;
  std::lock_guard lock(lookups);
  const uint32_t key = (uint32_t{vendor} << 16) | device;
  auto it = names.find(key);
  if (it == names.end()) {
    char buf[256];
    // pci.ids only (not udev's hwdb): the same names on every machine with that file.
    const int flags = PCI_LOOKUP_VENDOR | PCI_LOOKUP_DEVICE | PCI_LOOKUP_NO_NUMBERS | PCI_LOOKUP_NO_HWDB;
    const char* n = lib.lookup(lib.access, buf, sizeof buf, flags, static_cast<int>(vendor), static_cast<int>(device));
    std::string name = n ? n : "";
    // A device newer than the node's pci.ids: the vendor's name and "Device dddd", as lspci says it.
    if (name.empty())
      if (const char* v = lib.lookup(lib.access, buf, sizeof buf, PCI_LOOKUP_VENDOR | PCI_LOOKUP_NO_NUMBERS | PCI_LOOKUP_NO_HWDB,
                                     static_cast<int>(vendor))) {
        char id[16];
        std::snprintf(id, sizeof id, " Device %04x", device);
        name = std::string(v) + id;
      }
    it = names.emplace(key, std::move(name)).first;
  }
  return &it->second;  // std::map nodes stay put
}

}  // namespace gdrpeer::topo

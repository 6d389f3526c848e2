// What the readiness rules read beyond the stack stage: the kernel's build
// configuration (/boot/config-<release>, else /proc/config.gz), nvme_core's multipath
// parameter and nvidia-fs's /proc entry. The small files go through the InputFs, so a
// snapshot carries them as read. The kernel configuration (~270 KB on distribution kernels)
// is read around the recorder on the live node and a snapshot carries only the options kept,
// as gdrpeer-snapshot/kernel-config (kernel_config_text), which the reader prefers.

#include <fstream>
#include <optional>
#include <sstream>
#include <string_view>

#include "gdrpeer/topo/errors.hpp"
#include "gdrpeer/topo/inputs.hpp"
#include "gdrpeer/topo/model.hpp"
#include "gdrpeer/topo/readiness.hpp"
#include "sysfs_readers.hpp"

namespace gdrpeer::topo {

namespace {

// The options the rules read; the rest of the file is not kept.
constexpr const char* kKernelConfigKeys[] = {
    "CONFIG_PCI_P2PDMA",          "CONFIG_ZONE_DEVICE", "CONFIG_DMABUF_MOVE_NOTIFY", "CONFIG_DMA_SHARED_BUFFER", "CONFIG_NVME_MULTIPATH",
    "CONFIG_INFINIBAND_USER_MEM", "CONFIG_PCI_ATS"};

// gzip (/proc/config.gz) to text through the checker's one decompressor (libarchive,
// inputs.hpp); nullopt when the stream is not gzip, is damaged or is over 8 MiB unpacked.
std::optional<std::string> gunzip(const std::string& in) {
  if (detect_compression(in) != Compression::Gzip) return std::nullopt;
  try {
    return decompress(in, "/proc/config.gz", size_t{8} << 20);
  } catch (const InputError&) {
    return std::nullopt;
  }
}

}  // namespace

void parse_kernel_config(const std::string& text, const std::string& source, KernelConfig& kc) {
  kc.known = true;
  kc.source = source;
  std::string_view rest(text);
  while (!rest.empty()) {
    const size_t nl = rest.find('\n');
    std::string_view line = rest.substr(0, nl);
    rest = nl == std::string_view::npos ? std::string_view() : rest.substr(nl + 1);
    std::string_view key, value;
    if (line.starts_with("CONFIG_")) {
      const size_t eq = line.find('=');
      if (eq == std::string_view::npos) continue;
      key = line.substr(0, eq);
      value = line.substr(eq + 1);
    } else if (line.starts_with("# CONFIG_") && line.ends_with(" is not set")) {
      key = line.substr(2, line.find(' ', 2) - 2);
      value = "n";
    } else {
      continue;
    }
    for (const char* k : kKernelConfigKeys)
      if (key == k) kc.values.insert_or_assign(std::string(k), std::string(value));
  }
}

namespace sysfs {

namespace {

// The live node's file, not through the recorder; nullopt when unreadable.
std::optional<std::string> read_unrecorded(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return std::nullopt;
  return ss.str();
}

}  // namespace

void read_readiness(InputFs& fs, Software& sw) {
  ReadinessInputs& r = sw.readiness;
  const bool live = fs.describe() == "/";
  auto read_big = [&](const std::string& path) { return live ? read_unrecorded(path) : fs.read(path, 1 << 20); };
  if (auto kept = fs.read("/gdrpeer-snapshot/kernel-config", 65536)) {
    const std::string& k = *kept;
    std::string source = "gdrpeer-snapshot/kernel-config";
    if (k.rfind("# source: ", 0) == 0) source = k.substr(10, k.find('\n') - 10);
    parse_kernel_config(k, source, r.kconfig);
  }
  if (!r.kconfig.known && !sw.kernel_release.empty() && sw.kernel_release.find('/') == std::string::npos) {
    const std::string boot = "/boot/config-" + sw.kernel_release;
    if (auto c = read_big(boot)) parse_kernel_config(*c, boot, r.kconfig);
  }
  if (!r.kconfig.known)
    if (auto gz = read_big("/proc/config.gz"))
      if (auto text = gunzip(*gz)) parse_kernel_config(*text, "/proc/config.gz", r.kconfig);
  if (fs.list("/sys/module/nvme_core")) r.nvme_core_seen = true;
  if (auto m = fs.read("/sys/module/nvme_core/parameters/multipath", 64)) r.nvme_multipath = trimmed(*m);
  if (auto v = fs.read("/proc/driver/nvidia-fs/version", 4096)) {
    r.nvidia_fs_proc = true;
    r.nvidia_fs_version = trimmed(v->substr(0, v->find('\n')));
  }
}

}  // namespace sysfs

std::string kernel_config_text(const KernelConfig& kc) {
  std::string out = "# source: " + kc.source + "\n";
  for (const auto& [k, v] : kc.values) out += v == "n" ? "# " + k + " is not set\n" : k + "=" + v + "\n";
  return out;
}

}  // namespace gdrpeer::topo

// Live driver facts and snapshots that carry them (node_capture.hpp).
#include "gdrpeer/topo/node_capture.hpp"

#include <cstdio>
#include <future>

#include "gdrpeer/topo/cuda_probe.hpp"
#include "gdrpeer/topo/inputs.hpp"

namespace gdrpeer::topo {

namespace {

std::string first_line(const std::optional<std::string>& s) {
  if (!s) return "";
  std::string l = s->substr(0, s->find('\n'));
  while (!l.empty() && (l.back() == '\r' || l.back() == ' ')) l.pop_back();
  return l;
}

std::string utc_time(std::time_t now) {
  std::tm tm{};
  ::gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace

void ask_drivers(Topology& t, const LiveOptions& o) {
  if (!has_nvidia_gpu_function(t)) return;
  apply_nvml(probe_nvml(o.nvml_library), t);
  if (o.cuda) probe_cuda(t.sw, o.cuda_library);
}

Topology read_live_node(InputFs& fs, const std::string& name, const LiveOptions& o) {
  std::future<NvmlRecord> early;
  if (fs.read("/proc/driver/nvidia/version", 4096))
    early = std::async(std::launch::async, [lib = o.nvml_library] { return probe_nvml(lib); });
  Topology t = parse_sysfs(fs, name);
  if (!has_nvidia_gpu_function(t)) {
    if (early.valid()) early.wait();  // (an NVIDIA driver without an NVIDIA display function: nothing to apply)
    return t;
  }
  apply_nvml(early.valid() ? early.get() : probe_nvml(o.nvml_library), t);
  if (o.cuda) probe_cuda(t.sw, o.cuda_library);
  return t;
}

Snapshot take_snapshot(InputFs& base, const std::string& name, const SnapshotOptions& o) {
  RecordingFs rec(base);
  const std::string hostname = first_line(rec.read("/proc/sys/kernel/hostname", 4096));
  Snapshot s;
  s.topology = parse_sysfs(rec, name);
  s.entries = rec.entries();
  Topology& t = s.topology;
  NvmlRecord nvml;
  if (o.ask_drivers && has_nvidia_gpu_function(t)) {
    nvml = probe_nvml(o.nvml_library);
    s.entries.push_back({TarEntry::Type::File, std::string(kSnapshotNvmlPath).substr(1), nvml_record_text(nvml)});
    apply_nvml(nvml, t);
    if (o.cuda) {
      probe_cuda(t.sw, o.cuda_library);
      s.entries.push_back({TarEntry::Type::File, std::string(kSnapshotCudaPath).substr(1), cuda_probe_text(t.sw)});
    }
  }
  std::string meta = "taken " + utc_time(o.now ? o.now : std::time(nullptr)) + "\n";
  meta += "hostname " + (hostname.empty() ? std::string("-") : hostname) + "\n";
  meta += "gdrpeer " + (o.tool_version.empty() ? std::string("-") : o.tool_version) + "\n";
  meta += "nvidia_driver " +
          (!nvml.driver_version.empty()  ? nvml.driver_version
           : t.sw.nvidia_version.empty() ? "-"
                                         : t.sw.nvidia_version) +
          "\n";
  meta += "kernel " + (t.sw.kernel_release.empty() ? std::string("-") : t.sw.kernel_release) + "\n";
  meta += std::string("drivers_asked ") + (o.ask_drivers ? "yes" : "no") + "\n";
  s.entries.push_back({TarEntry::Type::File, std::string(kSnapshotMetaPath).substr(1), meta});
  return s;
}

}  // namespace gdrpeer::topo

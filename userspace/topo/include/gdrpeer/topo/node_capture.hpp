// The facts only a running node can give, and snapshots that carry them: NVML's
// NVLinks (asked whenever an NVIDIA GPU is present), the CUDA driver's answers (only
// when asked: cuInit costs ~1 s on a 4-GPU node), /proc/driver/nvidia/params, the
// time, hostname and driver version. A snapshot checked elsewhere reads the same
// records through the same code (nvml_probe.hpp, cuda_probe.hpp) and so gives the
// verdicts the live check gave.
#pragma once

#include <ctime>
#include <string>
#include <vector>

#include "gdrpeer/topo/inputs.hpp"
#include "gdrpeer/topo/model.hpp"
#include "gdrpeer/topo/nvml_probe.hpp"

namespace gdrpeer::topo {

struct LiveOptions {
  bool cuda = false;  // also ask the CUDA driver (dlopen libcuda, cuInit)
  const char* nvml_library = "libnvidia-ml.so.1";
  const char* cuda_library = "libcuda.so.1";
};

// Asks the node's drivers for t (parsed from the live file system): NVML when an NVIDIA
// GPU function is present, CUDA only with o.cuda.
void ask_drivers(Topology& t, const LiveOptions& o);

// The live node: parse_sysfs of `fs` and ask_drivers, with NVML asked on a second thread
// while sysfs is read when the NVIDIA driver is loaded (/proc/driver/nvidia/version):
// nvmlInit is most of a default check's time on a multi-GPU node. The answer is applied
// only where the parsed node has an NVIDIA GPU function, as ask_drivers does.
Topology read_live_node(InputFs& fs, const std::string& name, const LiveOptions& o);

struct SnapshotOptions {
  bool ask_drivers = true;  // the live node (false for a --sysfs-root copy: its drivers are not here)
  bool cuda = true;         // record the CUDA driver's answers too (gdrpeer snapshot --no-cuda: false)
  const char* nvml_library = "libnvidia-ml.so.1";
  const char* cuda_library = "libcuda.so.1";
  std::string tool_version;  // gdrpeer's, recorded in the meta file
  std::time_t now = 0;       // 0: the current time
};

struct Snapshot {
  std::vector<TarEntry> entries;  // what write_tar() packs
  Topology topology;              // the node as the snapshot describes it
};

// Records everything parse_sysfs reads on `base`, /proc/driver/nvidia/params, the
// hostname, the drivers' answers ("gdrpeer-snapshot/nvml", ".../cuda-probe") and
// "gdrpeer-snapshot/meta" (time, hostname, driver version, gdrpeer version).
Snapshot take_snapshot(InputFs& base, const std::string& name, const SnapshotOptions& o);

// Paths of the snapshot's own records.
inline constexpr const char* kSnapshotNvmlPath = "/gdrpeer-snapshot/nvml";
inline constexpr const char* kSnapshotCudaPath = "/gdrpeer-snapshot/cuda-probe";
inline constexpr const char* kSnapshotMetaPath = "/gdrpeer-snapshot/meta";

}  // namespace gdrpeer::topo

// Platform and quirk knowledge read at run time from topology/*.json: which
// PCI IDs are GPUs/RDMA NICs/switches to flatten, root complex P2P quality,
// GPU families, platform rules. Kept as data so operators can extend it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gdrpeer/topo/model.hpp"

namespace gdrpeer::topo {

struct IdMatch {
  uint16_t vendor = 0;
  std::optional<uint16_t> device;           // exact device id
  std::optional<uint16_t> device_mask;      // (device & mask) == *device when set
  std::optional<uint16_t> subsys_vendor;
  std::optional<uint16_t> subsys_device;
  std::optional<uint16_t> subsys_device_mask;
  bool matches(const Device& d) const;
};

struct NicRule {
  IdMatch id;
  std::vector<uint16_t> devices;      // any of these device ids (empty: any)
  std::optional<uint8_t> base_class;  // e.g. 0x02 network, 0x0c/0x06 not matched
  std::string family;                 // "ConnectX", "EFA", ...
};

struct GpuFamily {
  std::string family;  // "datacenter", "professional", "geforce", "gb10", "jetson", "grace-c2c"
  std::string name;
  std::vector<uint16_t> devices;      // NVIDIA device ids
  std::vector<std::string> name_patterns;  // substrings of lspci/hwloc names
};

struct RootComplex {
  std::string name;
  std::string vendor;           // cpuinfo vendor_id / hwloc CPUVendor
  int family = -1;              // x86 family; -1 any
  std::vector<int> models;      // x86 models; empty = any
  std::string arch;             // "" any
  std::vector<std::string> model_patterns;  // substrings of the CPU model name
  std::string p2p;              // "good", "poor", "unsupported"
  std::string cross_socket;     // "ok", "slow", "unsupported"
  std::string note;
};

struct PlatformRule {
  std::string id;
  std::string severity;  // "degraded", "unreliable", "blocked"
  std::string applies_to;  // "gpu-nic", "all"
  // Any of these matches (all given fields of one entry must match).
  std::string arch;
  std::vector<std::string> cpu_patterns;
  std::vector<std::string> dmi_patterns;
  std::vector<std::string> gpu_families;
  std::string reason, fix;
};

struct Knowledge {
  std::string data_dir;
  std::vector<uint16_t> gpu_vendors;             // display/3D class devices of these are GPUs
  std::vector<NicRule> nics;
  std::vector<IdMatch> flatten_switches;
  std::vector<GpuFamily> gpu_families;
  std::vector<RootComplex> root_complexes;
  std::vector<PlatformRule> platforms;
  std::vector<std::string> cloud_dmi_vendors;
  std::vector<std::pair<std::string, uint16_t>> vendor_names;  // lspci/hwloc names -> id
  uint64_t min_bar1_bytes = 0;
  // Name heuristics for inputs without numeric ids (lspci -tv without -nn).
  std::vector<std::string> rdma_name_patterns;
  std::vector<std::string> gpu_name_include, gpu_name_exclude;
  std::vector<std::string> nvme_name_include, nvme_name_exclude;

  // Loads every file; throws DataError naming the file on malformed data.
  static Knowledge load(const std::string& dir);
  // --data-dir, else $GDRPEER_DATA_DIR, else the installed share dir, else the
  // source tree's topology/ (baked in at configure time).
  static std::string default_dir();

  const GpuFamily* gpu_family(const Device& d) const;
  const RootComplex* root_complex(const CpuInfo& cpu) const;
  bool flattens(const Device& d) const;
  std::optional<uint16_t> vendor_from_name(std::string_view name) const;
};

// Give every device its role from IDs/class (or from names where the input
// has no IDs), then apply the operator's overrides ("GPU=0000:01:00.0").
void assign_roles(Topology& t, const Knowledge& k);
// Throws std::invalid_argument on a malformed spec or unknown BDF.
void apply_role_override(Topology& t, const std::string& spec);

}  // namespace gdrpeer::topo

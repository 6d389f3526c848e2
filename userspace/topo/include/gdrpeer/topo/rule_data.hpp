// The rule data: what the checker knows about hardware, read from topology/*.json (built
// into the binary, overridable at run time with --data-dir or $GDRPEER_DATA_DIR): which
// PCI IDs are GPUs/RDMA NICs/switches to flatten, root complex P2P quality, GPU families,
// platform rules. Kept as data so operators can extend it; the code that judges with it is
// rules.hpp. Also the role assignment, which is a lookup in these tables.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gdrpeer/topo/model.hpp"

namespace gdrpeer::topo {

struct IdMatch {
  uint16_t vendor = 0;
  std::optional<uint16_t> device;       // exact device id
  std::optional<uint16_t> device_mask;  // (device & mask) == *device when set
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
  std::string family;  // "datacenter", "professional", "geforce", "gb10", "grace-c2c"
  std::string name;
  std::vector<uint16_t> devices;           // NVIDIA device ids
  std::vector<std::string> name_patterns;  // substrings of lspci/hwloc names
};

// A GPU's family and where it came from: the device id table, the name the
// input gave (lspci/hwloc), or -- for an NVIDIA id the table lacks -- the name
// in the checking machine's pci.ids. Findings that depend on the family say
// which, so an operator can tell a table fact from a name heuristic.
struct GpuFamilyMatch {
  enum class From { None, Table, InputName, PciIds };
  const GpuFamily* family = nullptr;
  From from = From::None;
  std::string name;  // the name that matched (InputName, PciIds)
  // "" for the table; otherwise " (GPU family from ...)" for reasons.
  std::string provenance() const;
};

// A GPU part that only ships on an NVLink baseboard (SXM/HGX modules, GB200/GB300
// boards): two of them in one node are NVLink-connected even where a VM hides the
// NVSwitches and nothing lists the links (gpus.json "nvlink_baseboards").
struct NvlinkBaseboardPart {
  uint16_t device = 0;  // NVIDIA device id
  std::string name;     // its name in the source ("GH100 [H200 SXM 141GB]")
  std::string source;   // where the id comes from
};

struct RootComplex {
  std::string name;
  std::string vendor;                       // cpuinfo vendor_id / hwloc CPUVendor
  int family = -1;                          // x86 family; -1 any
  std::vector<int> models;                  // x86 models; empty = any
  std::string arch;                         // "" any
  std::vector<std::string> model_patterns;  // substrings of the CPU model name
  std::string p2p;                          // "good", "poor", "unsupported"
  std::string cross_socket;                 // "ok", "slow", "unsupported"
  std::string note;
  // A root complex known by its chipset, not its CPU cores alone (Grace's Neoverse V2 cores are
  // also AWS Graviton4's and Google Axion's): the entry matches only on a node with one of these
  // PCI functions (the NVIDIA driver knows Grace by its TH500 root ports, nvcst.h) or a GPU of one
  // of these families (gpus.json, e.g. grace-c2c). Both empty: the CPU fields decide alone.
  std::vector<std::pair<uint16_t, std::optional<uint16_t>>> chipset_ids;
  std::vector<std::string> chipset_gpu_families;
};

struct PlatformRule {
  std::string id;
  std::string severity;  // "degraded", "unreliable", "blocked"
  // "gpu-nic" (GPUDirect RDMA/GDS pairs), "all" (also GPU-GPU), or
  // "integrated-gpu": judged once per node, for platforms whose GPU is not a
  // PCI device (Jetson): a node finding when no discrete NVIDIA GPU was found.
  std::string applies_to;
  // Any of these matches (all given fields of one entry must match).
  std::string arch;
  std::vector<std::string> cpu_patterns;
  std::vector<std::string> dmi_patterns;
  std::vector<std::string> gpu_families;
  std::string reason, fix;
};

struct RuleData {
  std::string data_dir;               // where it was loaded from; "built-in" for the compiled-in data
  std::vector<uint16_t> gpu_vendors;  // display/3D class devices of these are GPUs
  std::vector<NicRule> nics;
  std::vector<IdMatch> flatten_switches;
  std::vector<GpuFamily> gpu_families;
  std::vector<NvlinkBaseboardPart> nvlink_baseboard_parts;
  std::vector<RootComplex> root_complexes;
  std::vector<PlatformRule> platforms;
  std::vector<std::string> cloud_dmi_vendors;
  std::vector<std::pair<std::string, uint16_t>> vendor_names;  // lspci/hwloc names -> id
  uint64_t min_bar1_bytes = 0;
  // pci.ids files tried, in order, for NVIDIA GPU ids the family table lacks
  // (gpus.json "pci_ids_paths"; $GDRPEER_PCI_IDS overrides, "" turns it off).
  std::vector<std::string> pci_ids_paths;
  // Name heuristics for inputs without numeric ids (lspci -tv without -nn).
  std::vector<std::string> rdma_name_patterns;
  std::vector<std::string> gpu_name_include, gpu_name_exclude;
  std::vector<std::string> nvme_name_include, nvme_name_exclude;
  // Display functions that are a BMC's console, not a GPU ("vvvv" or "vvvv:dddd"),
  // and names of network functions that carry no RDMA (BlueField's SoC management port).
  std::vector<std::pair<uint16_t, std::optional<uint16_t>>> bmc_vga_ids;
  std::vector<std::string> bmc_vga_name_patterns, not_rdma_name_patterns;
  // PCI functions only a hypervisor presents (virtio, QEMU's bridges and chipsets).
  std::vector<std::pair<uint16_t, std::optional<uint16_t>>> virtual_ids;
  std::vector<std::string> virtual_name_patterns;

  // "BDF (what)" of the first emulated PCI function, "" on bare metal (as far as the PCI tree tells).
  std::string virtual_hardware(const Topology& t) const;

  // Loads every file of `dir`, or the data built into the binary when `dir` is "";
  // throws DataError naming the file on malformed data.
  static RuleData load(const std::string& dir);
  // Where rule data comes from when no --data-dir is given: $GDRPEER_DATA_DIR, else
  // <prefix>/share/gdrpeer/topology beside an installed <prefix>/bin/gdrpeer, else ""
  // for the built-in data (topology/*.json compiled in at build time).
  static std::string default_dir();
  // One line naming that source, for `gdrpeer --version`.
  static std::string describe_dir(const std::string& dir);

  // Family by id table, then by the input's name, then (NVIDIA ids only) by the
  // pci.ids name. The pci.ids file is read only in that last case: call once
  // per GPU, not per pair.
  GpuFamilyMatch gpu_family_match(const Device& d) const;
  const GpuFamily* gpu_family(const Device& d) const { return gpu_family_match(d).family; }
  // The family whose name patterns match `name` first (families in file order).
  const GpuFamily* gpu_family_by_name(std::string_view name) const;
  // The pci.ids file to consult: $GDRPEER_PCI_IDS when set, else the first of
  // pci_ids_paths that exists; "" for none.
  std::string pci_ids_path() const;
  // The first entry whose CPU fields match and whose chipset, if it names one, is on the node:
  // one of its PCI functions in t, or one of its GPU families in node_families (the node's GPUs').
  // cores_only, when given, is set where an entry's CPU fields matched but its chipset was not seen.
  const RootComplex* root_complex(const Topology& t, const std::vector<std::string>& node_families, bool* cores_only = nullptr) const;
  // The baseboard part this GPU is (by NVIDIA device id), or nullptr.
  const NvlinkBaseboardPart* nvlink_baseboard_part(const Device& d) const;
  bool flattens(const Device& d) const;
  std::optional<uint16_t> vendor_from_name(std::string_view name) const;
};

// Whether `hay` contains any of the non-empty `needles` (the name patterns of the
// rule data: CPU models, DMI strings, device names).
bool contains_any(std::string_view hay, const std::vector<std::string>& needles);

// The device name pci.ids gives vendor:device (the text after the id on the
// device line), or nullopt when the file or the entry is missing.
std::optional<std::string> pci_ids_device_name(const std::string& path, uint16_t vendor, uint16_t device);
// The name `lspci -tv` prints for vendor:device from the pci.ids at `path` (pciutils lib/names.c
// format_name_pair without -n): "Vendor Device", "Vendor Device dddd", "Device vvvv:dddd".
std::string pci_ids_lspci_name(const std::string& path, uint16_t vendor, uint16_t device);

// Give every device its role from IDs/class (or from names where the input
// has no IDs), then apply the operator's overrides ("GPU=0000:01:00.0").
void assign_roles(Topology& t, const RuleData& k);
// Throws std::invalid_argument on a malformed spec or unknown BDF.
void apply_role_override(Topology& t, const std::string& spec);

}  // namespace gdrpeer::topo

// The one topology model every input format is parsed into.
//
// A node's PCI hierarchy is a forest: each host bridge (root complex / root bus,
// "DDDD:BB" like `lspci -t` prints it) owns the devices on its root bus; a bridge
// device owns the devices on its secondary bus. Parsers fill what their format
// knows and leave the rest "unknown" (0, -1, empty), and the rules only judge
// what is known.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gdrpeer/topo/readiness.hpp"
#include "gdrpeer/topo/stack.hpp"

namespace gdrpeer::topo {

enum class Role { None, GPU, NIC, NVMe };

// PCIe capability "Device/Port Type" (PCIe base spec, PCI Express Capabilities
// register bits 7:4), plus Unknown when the input does not say.
enum class PortType {
  Unknown,
  Endpoint,
  LegacyEndpoint,
  RootPort,
  SwitchUpstream,
  SwitchDownstream,
  PcieToPciBridge,
  PciToPcieBridge,
  RootComplexEndpoint,
  RootComplexEventCollector,
};

// Access Control Services capability/control bits (PCIe spec ACS Capability
// register layout; the control register uses the same bit positions).
namespace acs {
inline constexpr uint16_t kSourceValidation = 1u << 0;
inline constexpr uint16_t kTranslationBlocking = 1u << 1;
inline constexpr uint16_t kRequestRedirect = 1u << 2;
inline constexpr uint16_t kCompletionRedirect = 1u << 3;
inline constexpr uint16_t kUpstreamForwarding = 1u << 4;
inline constexpr uint16_t kEgressControl = 1u << 5;
inline constexpr uint16_t kDirectTranslated = 1u << 6;
// The bits that send peer-to-peer traffic up to the root complex.
inline constexpr uint16_t kRedirectMask = kRequestRedirect | kCompletionRedirect | kEgressControl;
}  // namespace acs

struct Link {
  double speed_gts = 0;  // per-lane transfer rate in GT/s; 0 = unknown
  int width = 0;         // lanes; 0 = unknown
  bool known() const { return speed_gts > 0 || width > 0; }
};

struct Bar {
  int index = 0;
  uint64_t size = 0;
  bool is64 = false;
  bool prefetchable = false;
};

struct Device {
  std::string bdf;       // canonical "dddd:bb:dd.f"
  int parent = -1;       // index of the bridge whose secondary bus we sit on; -1 = root bus
  int host_bridge = -1;  // index into Topology::host_bridges
  std::vector<int> children;

  bool ids_known = false;
  uint16_t vendor = 0, device = 0, subsys_vendor = 0, subsys_device = 0;
  bool class_known = false;
  uint32_t class_code = 0;  // 24-bit base/sub/prog-if
  std::string name;         // human-readable, when the input has one
  std::string class_name;   // e.g. "VGA compatible controller" (lspci)

  bool is_bridge = false;
  int secondary_bus = -1;
  PortType port = PortType::Unknown;
  bool port_inferred = false;  // port type guessed from tree depth, not read
  Role role = Role::None;
  bool role_overridden = false;

  int numa = -1;
  // The CPUs local to the function as a list ("0-63", nvidia-smi's "CPU Affinity"): sysfs
  // local_cpulist, else its NUMA node's CPUs; hwloc: the cpuset of the object above it.
  // "" unknown.
  std::string cpu_affinity;
  Link link_cap, link_sta;
  double link_gbps = 0;  // hwloc's per-direction bandwidth in GB/s when that is all we have
  std::vector<Bar> bars;

  bool acs_known = false;  // config space (or lspci text) was read far enough to know
  bool acs_present = false;
  uint16_t acs_cap = 0, acs_ctl = 0;
  bool ats_present = false, ats_enabled = false;
  int mps = 0, mps_cap = 0, mrrs = 0;  // bytes; 0 unknown

  int iommu_group = -1;
  std::string iommu_type;  // "DMA", "DMA-FQ", "identity", "blocked", "unmanaged", ""
  std::string driver;
  std::string rdma_name;  // RDMA device bound to this function (mlx5_0, rdmap16s27), if known
  // NVML's NVSwitch fabric state of a GPU (nvmlGpuFabricState_t: 0 not supported, 1 not
  // started, 2 in progress, 3 completed) and, once completed, its status; -1 not asked.
  int fabric_state = -1, fabric_status = -1;
  std::string net_name;  // network interface name, if known

  uint32_t base_class() const { return (class_code >> 16) & 0xff; }
  uint32_t sub_class() const { return (class_code >> 8) & 0xff; }
};

struct HostBridge {
  std::string name;  // "dddd:bb" (root bus), or "cpuN" for NCCL XML CPU nodes
  int numa = -1;
  std::vector<int> devices;  // devices on the root bus
};

struct CpuInfo {
  std::string arch;        // "x86_64", "aarch64", "ppc64le", "" unknown
  std::string vendor;      // "GenuineIntel", "AuthenticAMD", "ARM", "NVIDIA", "IBM"
  std::string model_name;  // free text
  int family = -1, model = -1;
  int arm_implementer = -1, arm_part = -1;
  int sockets = 0;
  bool hypervisor = false;  // cpuinfo "hypervisor" flag
};

enum class IommuMode { Unknown, Off, Identity, Translating, Mixed };

struct Software {
  bool inspected = false;  // true for live sysfs / snapshots
  std::vector<std::string> modules;
  bool modules_known = false;             // /proc/modules (or /sys/module) was in the input
  std::vector<std::string> memory_peers;  // /sys/kernel/mm/memory_peers/*
  bool memory_peers_dir = false;
  std::string kernel_release;
  std::string cmdline;
  std::string nvidia_version;  // first line of /proc/driver/nvidia/version
  bool has_module(const std::string& name) const;
  // CUDA driver answers, per GPU BDF, when libcuda was usable (live mode only).
  struct CudaGpu {
    std::string bdf;
    int gdr_supported = -1;
    int dmabuf_supported = -1;
  };
  bool cuda_probed = false;
  std::string cuda_error;
  std::vector<CudaGpu> cuda;
  // The NVIDIA driver's parameters, modprobe configuration, peer clients, kernel log (stack.hpp).
  StackState stack;
  // Kernel configuration, nvme_core multipath, nvidia-fs; the --probe ibgda answers (readiness.hpp).
  ReadinessInputs readiness;
  IbgdaProbe ibgda_probe;
};

// One NVLink connection an input states: from a GPU to another GPU or to an
// NVSwitch. GPU-GPU peer traffic between two GPUs linked directly, or both
// linked to NVSwitches, goes over NVLink, not over the PCIe path.
struct NvLink {
  int gpu = -1;          // device index of the GPU end
  int peer = -1;         // device index of the other end, -1 when it is not in the PCI tree
  std::string peer_bdf;  // the other end's address as the input gives it
  bool peer_is_switch = false;
  int links = 0;                // bonded links (nvidia-smi's NV#); 0 unknown
  uint64_t bandwidth_mbps = 0;  // hwloc's NVLinkBandwidth value; 0 unknown
};

struct Topology {
  std::string source;  // file or directory the model came from
  std::string format;  // "sysfs", "snapshot", "lspci", "hwloc", "nccl-xml"
  std::vector<Device> devices;
  std::vector<HostBridge> host_bridges;
  CpuInfo cpu;
  Software sw;
  IommuMode iommu = IommuMode::Unknown;
  bool iommu_known_per_device = false;  // groups were read from sysfs
  std::string dmi_vendor, dmi_product;
  bool virtual_machine = false;
  bool placeholder_switches = false;  // NCCL topology files with ffff:ff:xx.x switches
  // Where a pasted input was cut off ("file:line inside <gpu>"), read up to there; "" when whole.
  // The node verdict is then incomplete: what came after is unknown (node_verdict.cpp).
  std::string cut_off;
  int numa_nodes = 0;              // 0 = unknown
  std::vector<std::string> notes;  // parser remarks worth showing the operator
  std::vector<NvLink> nvlinks;
  bool nvlink_known = false;  // the input tells NVLink (even that there is none)
  // What NVML said or why it could not be asked (live check and snapshots), one note; "" when not asked.
  std::string nvml_note;
  bool nvml_failed = false;  // NVML was asked and could not answer: NVLink unknown

  int find(const std::string& bdf) const;
  // Add or find a host bridge by name; returns its index.
  int host_bridge_index(const std::string& name);
  // Recompute children/host-bridge device lists from parent links; infer port
  // types of bridges whose type the input did not give (PCIe alternates
  // root port -> switch upstream -> switch downstream -> upstream ...).
  void finalize();
};

// The empty model a parser starts from: read from `source` as `format`, its devices going into
// `storage`'s memory, emptied (fleet mode passes the previous node's vector, so that thousands of
// dumps do not each grow one of ~150 devices).
Topology new_topology(const std::string& source, const std::string& format, std::vector<Device> storage = {});

const char* to_string(Role r);
const char* to_string(PortType p);
const char* to_string(IommuMode m);

// "0000:01:00.0" from parts; parse_bdf accepts "01:00.0" (domain 0) and
// "0000:01:00.0", hex, case-insensitive. Returns nullopt when malformed.
std::string make_bdf(unsigned domain, unsigned bus, unsigned dev, unsigned fn);
std::optional<std::string> parse_bdf(std::string_view text);

}  // namespace gdrpeer::topo

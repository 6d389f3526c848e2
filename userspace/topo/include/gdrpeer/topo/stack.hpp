// The GPUDirect software stack above the PCIe tree: the NVIDIA driver's state
// (/proc/driver/nvidia/params, flavour, modprobe configuration), the peer-memory
// clients MOFED's ib_core registered, the kernel log's reasons a peer-memory
// module failed to load, and what NCCL, NVSHMEM and UCX will decide from them.
// Read by parse_sysfs() (so snapshots carry it), judged by a stage of check()
// of its own (stack_rules.cpp) after the PCIe rules.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace gdrpeer::topo {

// One `options <module> key=value` of a modprobe configuration file.
struct ModprobeOption {
  std::string file;  // path as read, e.g. /etc/modprobe.d/nvidia.conf
  int line = 0;
  std::string module;
  std::string key, value;
};

// One peer-memory client as MOFED's ib_core shows it: a directory
// /sys/kernel/mm/memory_peers/<name>/ with version and counters
// (num_alloc_mrs, num_reg_pages, num_free_callbacks, ...).
struct PeerClient {
  std::string name;
  std::string version;  // "" when the version file is absent
  bool has_version = false;
  std::map<std::string, std::string> counters;
};

// A kernel-log line that says why a peer-memory module did not load.
struct KernelLogCause {
  std::string kind;  // "symbol-version", "unknown-symbol", "gpl-symbol-get", "peermem-init", "dmabuf-attach"
  std::string module;
  std::string line;  // the log line as read
};

struct StackState {
  // /proc/driver/nvidia/params: every "Name: value" (quotes removed).
  bool params_known = false;
  std::map<std::string, std::string> params;
  // Keys inside RegistryDwords ("K=V;K=V") and RegistryDwordsPerDevice
  // ("pci=DDDD:BB:DD.F;K=V;..."), the BDF ("" for all devices) first.
  std::map<std::string, std::string> registry_dwords;
  std::map<std::string, std::map<std::string, std::string>> registry_per_device;
  // /proc/driver/nvidia/version's first line, parsed.
  bool nvidia_version_known = false;
  bool nvidia_open = false;
  std::string nvidia_version;  // "580.159.04"
  // modprobe configuration (/etc/modprobe.d, /run/modprobe.d, /usr/lib/modprobe.d, /lib/modprobe.d).
  bool modprobe_read = false;
  std::vector<ModprobeOption> modprobe;
  // Peer-memory clients and nvidia_peermem's module state.
  std::vector<PeerClient> peer_clients;
  bool peermem_sysfs = false;  // /sys/module/nvidia_peermem exists
  std::string peermem_version;
  std::map<std::string, std::string> peermem_params;
  // gdrpeer's own peer-memory client (driver/exporter_peermem.c, docs/driver.md): the name it
  // registers under (/sys/module/gdrpeer/parameters/peermem_name) and whether it serves CUDA
  // addresses (providers/peermem/cuda: "claimed ...", "left to nvidia_peermem ...", "not claimed
  // (peermem_cuda=off)"); "" when not read.
  std::string gdrpeer_client;
  std::string gdrpeer_cuda;
  // Kernel log (live: /dev/kmsg; snapshots: gdrpeer-snapshot/kernel-log), the lines that matter.
  bool kernel_log_read = false;
  // Why the log was not read to its end ("" when it was, or not read): /dev/kmsg's reader stopped
  // at its cap or a failed read (a snapshot carries it in gdrpeer-snapshot/kernel-log-cut). A cause
  // logged after that point is missing, so no cause found is no evidence then.
  std::string kernel_log_cut;
  std::vector<std::string> kernel_log;
  std::vector<KernelLogCause> log_causes;
  // NCCL topology XML facts: GPUs with <c2c>, and NCCL's own GDR answer per NIC (<net gdr>).
  std::map<int, int> nccl_gpu_c2c;  // device index -> C2C link count
  std::map<int, int> nccl_net_gdr;  // NIC device index -> gdr attribute
  std::map<int, int> nccl_gpu_gdr;  // GPU device index -> gdr attribute

  const PeerClient* client(const std::string& name) const {
    for (const auto& c : peer_clients)
      if (c.name == name) return &c;
    return nullptr;
  }
  // The value of NVreg_<key> as the driver runs now: RegistryDwords wins over the
  // plain parameter (the driver applies it last); "" when not in the input.
  std::string active_param(const std::string& key) const;
};

// Parsers (exposed for the tests; the sysfs reader calls them).
void parse_nvidia_params(const std::string& text, StackState& s);
void parse_nvidia_version(const std::string& first_line, StackState& s);
void parse_modprobe_conf(const std::string& text, const std::string& file, StackState& s);
// Keeps the lines about peer memory / dma-buf attach and classifies them.
void parse_kernel_log(const std::string& text, StackState& s);
// The kept kernel-log lines, one a line: what a snapshot carries as gdrpeer-snapshot/kernel-log.
std::string kernel_log_text(const StackState& s);

// The NVIDIA exporter's own gate for one GPU and one importing PCI device (the NIC),
// modelled on open-gpu-kernel-modules 580.142 kernel-open/nvidia/nv-dmabuf.c
// nv_dma_buf_attach(), kernel-open/nvidia/nv-pci.c nv_grdma_pci_topology_supported(),
// nv_pci_is_valid_topology_for_direct_pci(), nv_pci_has_common_pci_switch() and
// src/nvidia/arch/nvalloc/unix/src/osinit.c _checkP2pChipsetSupport(),
// src/nvidia/arch/nvalloc/unix/src/osapi.c (nvidia_p2p_dma_map_pages).
//
// Which checks the driver has depends on its version, as the open module's tags show:
enum class DriverGate {
  Unknown = -1,     // the version is not in the input, or no published source covers it
  None = 0,         // before 570.86.15 (515.43.04 .. 565.77, 535.x, 550.x): no topology check, no PCIe mapping type
  DirectPci = 1,    // 570.86.15 .. 575.64.05: only FORCE_PCIE checks (coherent, and any non-zero override or one IOMMU group)
  Full = 2,         // 580.65.06 .. 590.48.01 (580.142 is the model): nv_grdma_pci_topology_supported as well
  PcieByGroup = 3,  // 595.44.02 on: as Full, but FORCE_PCIE ignores the override (one IOMMU group decides)
};
// The gate of a driver version "580.159.04" (/proc/driver/nvidia/version): by its branch, and
// Unknown for a version below a branch's first published tag or a branch never published.
DriverGate driver_gate_of(const std::string& version);

struct GateInput {
  int flavour = -1;         // 1 open, 0 proprietary, -1 unknown
  int coherent = -1;        // NVLink-C2C coherent platform (GH200, GB200): 1/0/-1
  int override_value = -1;  // NVreg_GrdmaPciTopoCheckOverride 0/1/2, -1 unknown
  bool passthrough_vm = false;
  int unsupported_chipset = 0;  // on RM's list (Grace TH500, Ampere Altra, AmpereOne): 1/0/-1
  int common_bridge = -1;       // GPU and NIC share an upstream bridge: 1/0/-1
  int same_iommu_group = -1;    // 1/0/-1
  DriverGate driver = DriverGate::Unknown;
};
struct GateAnswer {
  int allowed = -1;  // 1 allowed, 0 refused, -1 unknown
  std::string why;   // the driver's condition that decided
};
struct GateResult {
  GateAnswer dmabuf_default, dmabuf_pcie, nvidia_p2p;
};
GateResult exporter_gate(const GateInput& in);

// What one consumer will do for one GPU x NIC pair.
struct ConsumerDecision {
  std::string consumer;  // "nccl", "nvshmem", "ucx"
  std::string modelled;  // source version read, e.g. "NCCL 2.30.7 (NVIDIA/nccl 5067397)"
  int gdr = -1;          // 1 GPUDirect RDMA on, 0 off, -1 unknown
  std::string path;      // "dma-buf", "peer-memory", "none", "unknown"
  std::string level;     // NCCL: path type and the level it is compared with; mode
  std::string mapping;   // NCCL: "default" or "pcie" (CU_MEM_RANGE_FLAG_DMA_BUF_MAPPING_TYPE_PCIE)
  std::string why;
  std::string rule;  // finding rule id when it is a problem
  // The input lacks every fact that decides it (gdr -1, path "unknown", the why says what is
  // not in this input): the text leaves the line out. Not set where the decision is known to be
  // unknown (UCX refusing its configuration) nor for NCCL, whose distance rule needs only the topology.
  bool nothing_known = false;
};

// One GPU x NIC pair's answers: the exporter's gate and each consumer's decision. Shared between
// pairs that look the same to them (a fleet check builds them once per distinct pair).
struct PairStack {
  GateResult gate;
  std::vector<ConsumerDecision> consumers;  // nccl, nvshmem, ucx
};

// Environment variables of the consumers that change their decision (NCCL_*,
// NVSHMEM_*, UCX_*), as the checker was run; check() takes them in CheckOptions.
std::map<std::string, std::string> consumer_environment();

}  // namespace gdrpeer::topo

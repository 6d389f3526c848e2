// Readiness of the two GPU-direct paths the PCIe and stack stages do not name:
//  - IBGDA (GPU-initiated networking: NVSHMEM's IBGDA transport, DeepEP on top of it,
//    NCCL's GIN with the GDAKI backend): per GPU x NIC one mode, gpu-initiated |
//    cpu-assisted | proxy-only | none;
//  - GPUDirect Storage (cuFile): per GPU x NVMe one mode, p2pdma | nvidia-fs | compat.
// Each mode comes with the reason and the fix for the next better mode. The decision
// tables are derived from the sources named in readiness_ibgda.cpp / readiness_gds.cpp
// and docs/check.md; an opt-in live probe (--probe ibgda) overrides the prediction.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace gdrpeer::topo {

struct Topology;
struct Software;

// The kernel's build configuration: /boot/config-<release> or /proc/config.gz.
struct KernelConfig {
  bool known = false;
  std::string source;  // the file it came from
  // The options the readiness rules read (kKernelConfigKeys): "y", "m", or "n" for
  // "# CONFIG_X is not set"; absent when the file does not mention the option.
  std::map<std::string, std::string> values;
};

// What the readiness rules read beyond the stack stage (parse_sysfs fills it).
struct ReadinessInputs {
  KernelConfig kconfig;
  std::string nvme_multipath;     // /sys/module/nvme_core/parameters/multipath: "Y", "N", "" unknown
  bool nvme_core_seen = false;    // /sys/module/nvme_core exists (nvme_core loaded or built in)
  std::string nvidia_fs_version;  // /proc/driver/nvidia-fs/version, first line; "" absent
  bool nvidia_fs_proc = false;
};

// One live-probe answer for one RDMA device (--probe ibgda): -1 not tried / unknown.
struct IbgdaProbeResult {
  std::string rdma_name;  // mlx5_0
  std::string bdf;        // the NIC's PCI function
  int mlx5 = -1;          // mlx5dv_is_supported
  int devx = -1;          // mlx5dv_devx_general_cmd(QUERY_HCA_CAP, general caps) succeeded
  int atomics = -1;       // CAS, FA, masked CAS, masked FA, 4- and 8-byte on QP and DC (atomic caps)
  int dmabuf_umem = -1;   // mlx5dv_devx_umem_reg_ex(MLX5DV_UMEM_MASK_DMABUF) on 4 KiB of GPU memory
  int uar_gpu_map = -1;   // cuMemHostRegister(IOMEMORY) of one UAR page (registered and unregistered only)
  std::string gpu_bdf;    // the GPU the CUDA half used
  std::string why;        // the first failure, as the library said it
};

struct IbgdaProbe {
  bool ran = false;
  std::string error;  // why the probe could not run at all ("" when it ran)
  std::vector<IbgdaProbeResult> devices;
  const IbgdaProbeResult* find(const std::string& bdf) const {
    for (const auto& d : devices)
      if (d.bdf == bdf) return &d;
    return nullptr;
  }
};

// -1 unknown, 0 no, 1 yes.
using Tri3 = int;

// The facts the IBGDA decision reads for one GPU x NIC pair.
struct IbgdaFacts {
  Tri3 rdma_nic = -1;     // the NIC has an RDMA (verbs) device
  Tri3 mlx5 = -1;         // an mlx5 device (NVSHMEM: name mlx5* / ibp*, and mlx5dv)
  Tri3 devx = -1;         // DEVX general commands (QUERY_HCA_CAP) work
  Tri3 atomics = -1;      // CAS, FA, masked CAS, masked FA, 4- and 8-byte atomics on QP and DC
  Tri3 dmabuf_data = -1;  // GPU data buffers through dma-buf (CUDA DMA_BUF_SUPPORTED, ib_core >= 5.12)
  Tri3 peer_mem = -1;     // a peer client NVSHMEM recognises (nv_mem, nvidia-peermem, /sys/module/nvidia_peermem)
  // cudaHostRegister(IoMemory) of the UAR: 1 for every process (PeerMappingOverride=1),
  // 2 only for processes with CAP_SYS_ADMIN (the regkey is off), 0 refused, -1 unknown.
  int uar_gpu_map = -1;
  Tri3 dmabuf_umem = -1;  // control buffers on GPU memory via a dma-buf umem
  bool probed = false;    // the live probe supplied devx/atomics/uar/umem
  std::string nic_model;  // "ConnectX-7" etc., "" unknown
};

struct GdsFacts {
  Tri3 nvme = 1;             // a local NVMe drive (the pair exists)
  Tri3 kernel_ge_6_2 = -1;   // Linux >= 6.2
  Tri3 p2pdma_config = -1;   // CONFIG_PCI_P2PDMA=y
  Tri3 open_module = -1;     // NVIDIA open kernel module
  Tri3 driver_ge_565 = -1;   // driver branch >= 565
  Tri3 gpu_supported = -1;   // GPU on the P2PDMA list (Ampere datacenter or newer)
  Tri3 x86 = -1;             // x86_64 (the registry keys and multipath=N are required there)
  Tri3 static_bar1 = -1;     // RegistryDwords RMForceStaticBar1=1
  Tri3 iomap_wc_off = -1;    // RegistryDwords RmForceDisableIomapWC=1
  Tri3 multipath_off = -1;   // nvme_core multipath=N
  Tri3 host_bridge_ok = -1;  // the kernel's pci_p2pdma_distance allows the path
  Tri3 nvidia_fs = -1;       // nvidia_fs loaded
};

// One decided mode.
struct ReadinessMode {
  std::string mode;      // ibgda: gpu-initiated | cpu-assisted | proxy-only | none; gds: p2pdma | nvidia-fs | compat
  bool unknown = false;  // the input lacks what decides it: `mode` is the best the known facts allow
  std::string reason;
  std::string fix;         // for the next better mode ("" at the best mode)
  std::string modelled;    // the sources' versions
  bool probed = false;     // the live probe decided it
  std::string probe_note;  // "probe overrides the prediction (...)" when they differ
};

ReadinessMode decide_ibgda(const IbgdaFacts& f);
ReadinessMode decide_gds(const GdsFacts& f);

// One readiness line: a GPU and its NIC / NVMe drive (other = -1: none in the input).
struct ReadinessEntry {
  std::string kind;  // "ibgda" or "gds"
  int gpu = -1, other = -1;
  ReadinessMode m;
};

// Parsers (exposed for the tests).
void parse_kernel_config(const std::string& text, const std::string& source, KernelConfig& kc);
// The kept options, one a line, after "# source: <file>": what a snapshot carries as
// gdrpeer-snapshot/kernel-config (parse_kernel_config reads it back).
std::string kernel_config_text(const KernelConfig& kc);
// "ConnectX-7" from a Mellanox PCI device id; "" when not in the table.
std::string connectx_model(unsigned device_id);

// Live probe (--probe ibgda): the seam its tests replace. Each call is cheap, and
// maps nothing it writes through.
struct IbgdaProbeOps {
  virtual ~IbgdaProbeOps() = default;
  // "" when verbs/mlx5dv/CUDA could be loaded, else why not.
  virtual std::string load() = 0;
  // RDMA devices: name and PCI function.
  virtual std::vector<std::pair<std::string, std::string>> devices() = 0;
  virtual IbgdaProbeResult query_caps(const std::string& rdma_name) = 0;  // mlx5, devx, atomics
  // Fills dmabuf_umem and uar_gpu_map with the GPU at gpu_bdf; why on failure.
  virtual void gpu_checks(const std::string& rdma_name, const std::string& gpu_bdf, IbgdaProbeResult& r) = 0;
};
// Runs the probe for every RDMA device of `t`, with the GPU nearest each NIC.
IbgdaProbe run_ibgda_probe(const Topology& t, IbgdaProbeOps& ops);
// Where the real one finds its libraries (dlopen names or paths) and the RDMA devices' sysfs
// links (/sys/class/infiniband/<device>/device under `root`): the node's own by default; the
// tests point them at fakes (userspace/topo/tests/test_ibgda_probe.cpp).
struct IbgdaProbeEnv {
  std::string verbs = "libibverbs.so.1";
  std::string mlx5 = "libmlx5.so.1";
  std::string cuda = "libcuda.so.1";
  std::string root = "/";
};
// The real one: verbs, mlx5dv and CUDA through dlopen.
std::unique_ptr<IbgdaProbeOps> make_live_ibgda_probe(const IbgdaProbeEnv& env = {});

}  // namespace gdrpeer::topo

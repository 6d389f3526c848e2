// The readiness stage of check(): the facts of each NVIDIA GPU x NIC and GPU x NVMe
// pair, as the input has them, into decide_ibgda() / decide_gds(); the live probe's
// answers (--probe ibgda) replace the predicted ones and the line says so.
#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "gdrpeer/topo/model.hpp"
#include "gdrpeer/topo/readiness.hpp"
#include "readiness_internal.hpp"
#include "stack_internal.hpp"

namespace gdrpeer::topo {

namespace {

bool kernel_ge(const std::string& rel, int maj, int min) {
  int a = 0, b = 0;
  if (std::sscanf(rel.c_str(), "%d.%d", &a, &b) != 2) return false;
  return a > maj || (a == maj && b >= min);
}
bool kernel_known(const std::string& rel) {
  int a = 0, b = 0;
  return std::sscanf(rel.c_str(), "%d.%d", &a, &b) == 2;
}

// NVIDIA device ids of the GPUs GDS's P2PDMA list names (A100, A40, L4, L40S, H100,
// H200, B100, B200, B300), from pci.ids (pciutils/pciids c1c1254).
bool on_p2pdma_list(uint16_t id) {
  static const uint16_t ids[] = {0x20b0, 0x20b1, 0x20b2, 0x20b3, 0x20b5, 0x20f1,                          // A100
                                 0x2235,                                                                  // A40
                                 0x27b8, 0x26b9,                                                          // L4, L40S
                                 0x2313, 0x2330, 0x2331, 0x2336, 0x2337, 0x2338, 0x2339, 0x233d, 0x237e,  // H100
                                 0x2335, 0x233b,                                                          // H200
                                 0x29bc, 0x2901, 0x3182};                                                 // B100, B200, B300
  return std::find(std::begin(ids), std::end(ids), id) != std::end(ids);
}

// A registry key as the driver runs with it for this GPU: RegistryDwordsPerDevice for its
// BDF, else RegistryDwords. Keys before the first "pci=" apply to no GPU: the driver skips them
// (open-gpu-kernel-modules 580.142 os-registry.c nv_parse_per_device_option_string(): no GPU
// selected yet, `if (!nv) continue`). -1 when the params are not in the input, 0 when unset.
long registry_key(const StackState& s, const std::string& gpu_bdf, const std::string& key) {
  if (!s.params_known) return -1;
  for (const auto& [bdf, keys] : s.registry_per_device)
    if (!bdf.empty() && parse_bdf(bdf).value_or("") == gpu_bdf)  // "pci=03:00.0" or "pci=0000:03:00.0"
      if (auto it = keys.find(key); it != keys.end()) return std::strtol(it->second.c_str(), nullptr, 0);
  if (auto it = s.registry_dwords.find(key); it != s.registry_dwords.end()) return std::strtol(it->second.c_str(), nullptr, 0);
  return 0;
}

// A kernel option as the configuration sets it ("y", "m", "n"); "" when the configuration does
// not mention it or the input has none (values is empty then).
std::string kconfig_value(const KernelConfig& kc, const std::string& key) {
  auto it = kc.values.find(key);
  return it == kc.values.end() ? std::string() : it->second;
}

// "cpu-assisted: <reason>", or "unknown (<what is missing>)" for a hypothetical pair.
std::string would_say(const ReadinessMode& m) {
  if (!m.unknown) return m.mode + ": " + m.reason;
  const std::string why = m.reason.rfind("unknown: ", 0) == 0 ? m.reason.substr(9) : m.reason;
  return "unknown (" + why + ")";
}

class ReadinessStage {
 public:
  ReadinessStage(const Topology& t, const CheckOptions& o, Report& rep) : t_(t), o_(o), rep_(rep) {}

  void run() {
    for (int g : rep_.gpus) {
      const Device& gpu = t_.devices[g];
      // NVIDIA GPUs: by PCI id, by name, or any GPU of an NCCL topology file (NCCL lists only its own).
      if (!(gpu.ids_known && gpu.vendor == 0x10de) && gpu.name.find("NVIDIA") == std::string::npos && t_.format != "nccl-xml") continue;
      bool any_nic = false, any_nvme = false;
      for (int n : rep_.nics) {
        any_nic = true;
        rep_.readiness.push_back(ReadinessEntry{"ibgda", g, n, ibgda(g, n)});
      }
      if (!any_nic) rep_.readiness.push_back(ReadinessEntry{"ibgda", g, -1, ibgda_without_nic(g)});
      for (int d : rep_.nvmes) {
        any_nvme = true;
        rep_.readiness.push_back(ReadinessEntry{"gds", g, d, decide_gds(gds_facts(g, d))});
      }
      if (!any_nvme) rep_.readiness.push_back(ReadinessEntry{"gds", g, -1, gds_without_nvme(g)});
    }
  }

 private:
  const Topology& t_;
  const CheckOptions& o_;
  Report& rep_;

  // GPU data buffers through dma-buf, as NVSHMEM decides it: CUDA's DMA_BUF_SUPPORTED
  // (the probe's answer, else the open module's), ib_core importing dma-buf (Linux >= 5.12),
  // and NVSHMEM_IB_DISABLE_DMABUF not true, read as NVSHMEM reads it (stack::nvshmem_env_true).
  Tri3 dmabuf_data(const Device& gpu) const {
    if (stack::nvshmem_env_true(o_.env, "NVSHMEM_IB_DISABLE_DMABUF")) return 0;
    Tri3 cuda = -1;
    for (const auto& c : t_.sw.cuda)
      if (c.bdf == gpu.bdf) cuda = c.dmabuf_supported;
    if (cuda < 0 && t_.sw.stack.nvidia_version_known) cuda = t_.sw.stack.nvidia_open ? 1 : 0;
    Tri3 kernel = kernel_known(t_.sw.kernel_release) ? (kernel_ge(t_.sw.kernel_release, 5, 12) ? 1 : 0) : -1;
    if (cuda == 0 || kernel == 0) return 0;
    return cuda == 1 && kernel == 1 ? 1 : -1;
  }

  // nvshmemt_ib_common_nv_peer_mem_available(): memory_peers/nv_mem/version,
  // memory_peers/nvidia-peermem/version or /sys/module/nvidia_peermem/version.
  Tri3 peer_mem() const {
    const Software& sw = t_.sw;
    if (!sw.inspected) return -1;
    for (const char* name : {"nv_mem", "nvidia-peermem"})
      if (const PeerClient* c = sw.stack.client(name); c && c->has_version) return 1;
    if (sw.stack.peermem_sysfs || sw.has_module("nvidia_peermem")) return 1;
    return sw.modules_known ? 0 : -1;
  }

  // PeerMappingOverride: 1 everyone may map IO memory into the GPU, 2 only CAP_SYS_ADMIN.
  int uar_gpu_map(const Device& gpu) const {
    long v = registry_key(t_.sw.stack, gpu.bdf, "PeerMappingOverride");
    return v < 0 ? -1 : v != 0 ? 1 : 2;
  }

  IbgdaFacts ibgda_facts(int g, int n, bool* caps_assumed) const {
    const Device& gpu = t_.devices[g];
    const Device& nic = t_.devices[n];
    IbgdaFacts f;
    const bool mellanox = nic.ids_known && nic.vendor == 0x15b3;
    if (mellanox) f.nic_model = connectx_model(nic.device);
    if (!nic.rdma_name.empty())
      f.rdma_nic = 1;
    else if (t_.sw.inspected && t_.format != "lspci")
      f.rdma_nic = 0;  // sysfs lists /sys/class/infiniband
    if (mellanox || nic.driver == "mlx5_core" || nic.rdma_name.rfind("mlx5", 0) == 0)
      f.mlx5 = 1;
    else if (nic.ids_known)
      f.mlx5 = 0;
    // DEVX and the atomic caps are firmware answers: assumed for ConnectX-5 and newer and
    // BlueField-2/3 (NVSHMEM's IBGDA targets), unknown for ConnectX-4; the probe reads them.
    if (f.mlx5 == 1 && mellanox && nic.device >= 0x1017 && nic.device <= 0x1027) {
      f.devx = f.atomics = 1;
      *caps_assumed = true;
    } else if (f.mlx5 == 1 && mellanox && (nic.device == 0xa2d6 || nic.device == 0xa2d9 || nic.device == 0xa2dc)) {
      f.devx = f.atomics = 1;
      *caps_assumed = true;
    }
    f.dmabuf_data = dmabuf_data(gpu);
    f.peer_mem = peer_mem();
    f.uar_gpu_map = uar_gpu_map(gpu);
    // dmabuf_umem stays unknown (-1): only the probe tells whether mlx5's dma-buf umem works.
    return f;
  }

  ReadinessMode ibgda(int g, int n) const {
    bool assumed = false;
    IbgdaFacts f = ibgda_facts(g, n, &assumed);
    ReadinessMode predicted = decide_ibgda(f);
    if (assumed && !predicted.unknown && predicted.mode != "none")
      predicted.reason +=
          " [DEVX and atomics assumed for " + (f.nic_model.empty() ? std::string("this NIC") : f.nic_model) + "; --probe ibgda reads them]";
    const IbgdaProbe& probe = t_.sw.ibgda_probe;
    const IbgdaProbeResult* pr = probe.ran ? probe.find(t_.devices[n].bdf) : nullptr;
    if (!pr) return predicted;
    IbgdaFacts p = f;
    p.probed = true;
    if (pr->mlx5 >= 0) p.mlx5 = pr->mlx5;
    if (pr->devx >= 0) p.devx = pr->devx;
    if (pr->atomics >= 0) p.atomics = pr->atomics;
    if (pr->dmabuf_umem >= 0) p.dmabuf_umem = pr->dmabuf_umem;
    if (pr->uar_gpu_map >= 0) p.uar_gpu_map = pr->uar_gpu_map;
    ReadinessMode m = decide_ibgda(p);
    m.probed = true;
    if (m.mode != predicted.mode)
      m.probe_note = "the live probe overrides the prediction (" + predicted.mode + ")" + (pr->why.empty() ? "" : ": " + pr->why);
    else
      m.probe_note = "the live probe confirms the prediction" + (pr->why.empty() ? std::string() : " (" + pr->why + ")");
    if (!pr->gpu_bdf.empty()) m.probe_note += "; GPU used: " + pr->gpu_bdf;
    return m;
  }

  ReadinessMode ibgda_without_nic(int g) const {
    const bool inspected = t_.sw.inspected;
    IbgdaFacts f;  // a ConnectX-7 (DEVX, atomics) beside this GPU, with this node's software
    f.rdma_nic = f.mlx5 = f.devx = f.atomics = 1;
    f.nic_model = "an mlx5 NIC";
    f.dmabuf_data = dmabuf_data(t_.devices[g]);
    f.peer_mem = peer_mem();
    f.uar_gpu_map = uar_gpu_map(t_.devices[g]);
    ReadinessMode would = decide_ibgda(f);
    ReadinessMode m;
    m.mode = "none";
    m.modelled = would.modelled;
    m.reason = "no RDMA NIC in this input";
    if (inspected) m.reason += "; with an mlx5 NIC (DEVX and atomics assumed) this node's software would give " + would_say(would);
    m.fix = "# an NVIDIA ConnectX / BlueField NIC (mlx5) beside this GPU" + (would.fix.empty() ? std::string() : "; then: " + would.fix);
    return m;
  }

  GdsFacts gds_facts(int g, int d) const {
    const Device& gpu = t_.devices[g];
    const Software& sw = t_.sw;
    const StackState& s = sw.stack;
    const ReadinessInputs& in = sw.readiness;
    GdsFacts f;
    f.nvme = d >= 0 ? 1 : 0;
    if (kernel_known(sw.kernel_release)) f.kernel_ge_6_2 = kernel_ge(sw.kernel_release, 6, 2) ? 1 : 0;
    if (in.kconfig.known) f.p2pdma_config = kconfig_value(in.kconfig, "CONFIG_PCI_P2PDMA") == "y" ? 1 : 0;
    if (s.nvidia_version_known) {
      f.open_module = s.nvidia_open ? 1 : 0;
      f.driver_ge_565 = std::atoi(s.nvidia_version.c_str()) >= 565 ? 1 : 0;
    }
    if (gpu.ids_known && gpu.vendor == 0x10de) f.gpu_supported = on_p2pdma_list(gpu.device) ? 1 : 0;
    if (t_.cpu.arch == "x86_64" || t_.cpu.vendor == "GenuineIntel" || t_.cpu.vendor == "AuthenticAMD")
      f.x86 = 1;
    else if (!t_.cpu.arch.empty())
      f.x86 = 0;
    long bar1 = registry_key(s, gpu.bdf, "RMForceStaticBar1"), wc = registry_key(s, gpu.bdf, "RmForceDisableIomapWC");
    if (bar1 >= 0) f.static_bar1 = bar1 != 0 ? 1 : 0;
    if (wc >= 0) f.iomap_wc_off = wc != 0 ? 1 : 0;
    if (in.nvme_multipath == "N" || in.nvme_multipath == "n" || in.nvme_multipath == "0")
      f.multipath_off = 1;
    else if (!in.nvme_multipath.empty())
      f.multipath_off = 0;
    else if (kconfig_value(in.kconfig, "CONFIG_NVME_MULTIPATH") == "n")
      f.multipath_off = 1;  // built without multipath: no parameter, no multipath
    // pci_p2pdma_distance: below one switch always; through a host bridge on AMD Zen
    // (family >= 0x17); Intel host bridges on the kernel's list are not modelled.
    if (d >= 0) {
      PathClass c = rep_.path_class(g, d);
      if (c == PathClass::PIX || c == PathClass::PXB)
        f.host_bridge_ok = 1;
      else if (t_.cpu.vendor == "AuthenticAMD" && t_.cpu.family >= 0x17)
        f.host_bridge_ok = 1;
    }
    if (in.nvidia_fs_proc || sw.has_module("nvidia_fs"))
      f.nvidia_fs = 1;
    else if (sw.modules_known)
      f.nvidia_fs = 0;
    return f;
  }

  ReadinessMode gds_without_nvme(int g) const {
    GdsFacts f = gds_facts(g, -1);
    f.nvme = 1;  // a drive under the GPU's switch, with this node's software
    f.host_bridge_ok = 1;
    ReadinessMode would = decide_gds(f);
    ReadinessMode m;
    m.mode = "compat";
    m.modelled = would.modelled;
    m.reason = "no local NVMe drive in this input: cuFile runs in compatibility mode unless a GDS-enabled file system is used";
    if (t_.sw.inspected) m.reason += "; a local NVMe drive under this GPU's PCIe switch would get " + would_say(would);
    m.fix = would.fix;
    return m;
  }
};

}  // namespace

void readiness_stage(const Topology& t, const RuleData& /*k*/, const CheckOptions& o, Report& rep) { ReadinessStage(t, o, rep).run(); }

}  // namespace gdrpeer::topo

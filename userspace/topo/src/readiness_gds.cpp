// The GPUDirect Storage mode of one GPU x local NVMe pair, from NVIDIA's GDS documents
// (docs/check.md, "IBGDA and GDS readiness"):
//  - GDS Installation Guide §1 (CUDA >= 12.8): GDS runs with nvidia-fs.ko plus the NVMe
//    driver patches (MLNX_OFED), or in P2PDMA mode without nvidia-fs and without patches
//    "when Linux kernel and GPU version/driver requirements are met";
//  - GDS Troubleshooting Guide §14 "NVMe P2PDMA Troubleshooting" and "GDS Support for NVMe
//    Drives Using Linux PCI P2PDMA Support" (release 615): Linux >= 6.2 with PCI P2PDMA
//    compiled in; GPUs A100, A40, L4, L40S, H100, H200, B100, B200, B300; the open RM
//    driver 565 or newer; on x86 the registry keys RMForceStaticBar1=1 and
//    RmForceDisableIomapWC=1 and nvme_core multipath=N; x86_64 only (Grace, RAID0 over
//    NVMe and NVMe-oF not supported); cufile.json "use_pci_p2pdma": true;
//  - otherwise cuFile's compatibility mode (POSIX reads into a bounce buffer, then a copy).
//  Linux drivers/pci/p2pdma.c pci_p2pdma_distance(): devices under one PCIe switch, or
//  a host bridge the kernel allows (AMD Zen and newer: cpu_supports_p2pdma; a list of
//  Intel host bridges: pci_p2pdma_whitelist).
#include <string>
#include <vector>

#include "gdrpeer/topo/readiness.hpp"

namespace gdrpeer::topo {

namespace {

constexpr const char* kModelledGds =
    "GDS Installation Guide (CUDA 12.8+), GDS Troubleshooting Guide §14 NVMe P2PDMA, GDS Support for NVMe using PCI P2PDMA (release 615); "
    "Linux drivers/pci/p2pdma.c";

struct Need {
  Tri3 have;
  const char* what;  // the prerequisite
  const char* fix;   // how to meet it ("" when it is the hardware)
};

}  // namespace

ReadinessMode decide_gds(const GdsFacts& f) {
  ReadinessMode r;
  r.modelled = kModelledGds;
  if (f.nvme == 0) {
    r.mode = "compat";
    r.reason =
        "no local NVMe drive in this input: cuFile reads other storage in compatibility mode unless a GDS-enabled file system "
        "(NFS over RDMA, Lustre, WekaFS, ...) with nvidia-fs is used";
    return r;
  }
  const bool x86_needs = f.x86 != 0;  // the registry keys and multipath=N are x86-only requirements
  const std::vector<Need> needs = {
      {f.x86, "an x86_64 host (P2PDMA mode is not supported on Grace / aarch64)", ""},
      {f.kernel_ge_6_2, "Linux >= 6.2", "# boot Linux >= 6.2 with CONFIG_PCI_P2PDMA=y"},
      {f.p2pdma_config, "CONFIG_PCI_P2PDMA=y in the kernel",
       "# boot a kernel built with CONFIG_PCI_P2PDMA=y (it cannot be switched on at run time)"},
      {f.open_module, "the open NVIDIA kernel module", "# install the open NVIDIA kernel module (nvidia-open / *-open packages)"},
      {f.driver_ge_565, "NVIDIA driver >= 565", "# install NVIDIA driver 565 or newer"},
      {f.gpu_supported, "a GPU on the P2PDMA list (A100, A40, L4, L40S, H100, H200, B100, B200, B300)", ""},
      {x86_needs ? f.static_bar1 : 1, "RegistryDwords RMForceStaticBar1=1",
       "echo 'options nvidia NVreg_RegistryDwords=\"RMForceStaticBar1=1;RmForceDisableIomapWC=1;\"' > /etc/modprobe.d/nvidia-p2pdma.conf   "
       "# then rebuild the initramfs and reload the driver; NVreg_RegistryDwords is one string: keep the keys already set in it (e.g. "
       "PeerMappingOverride=1;) in the same line"},
      {x86_needs ? f.iomap_wc_off : 1, "RegistryDwords RmForceDisableIomapWC=1",
       "echo 'options nvidia NVreg_RegistryDwords=\"RMForceStaticBar1=1;RmForceDisableIomapWC=1;\"' > /etc/modprobe.d/nvidia-p2pdma.conf"},
      {x86_needs ? f.multipath_off : 1, "nvme_core multipath=N",
       "echo 'options nvme_core multipath=N' > /etc/modprobe.d/nvme.conf   # then update-initramfs -u (or dracut -f) and reboot"},
      {f.host_bridge_ok, "a path the kernel's pci_p2pdma_distance allows (one PCIe switch, AMD Zen, or a listed Intel host bridge)",
       "# place GPU and NVMe under one PCIe switch"},
  };
  std::string missing, unknown, fixes;
  for (const auto& n : needs) {
    if (n.have == 0) {
      missing += (missing.empty() ? "" : "; ") + std::string(n.what);
      if (*n.fix && fixes.find(n.fix) == std::string::npos) fixes += (fixes.empty() ? "" : "\n") + std::string(n.fix);
    } else if (n.have < 0) {
      unknown += (unknown.empty() ? "" : "; ") + std::string(n.what);
    }
  }
  const char* kCufile = "; cufile.json needs \"use_pci_p2pdma\": true (not read)";
  if (missing.empty() && unknown.empty()) {
    r.mode = "p2pdma";
    r.reason = std::string(
                   "every P2PDMA prerequisite holds: the NVMe driver DMAs into GPU memory through the kernel's PCI P2PDMA, "
                   "no nvidia-fs needed") +
               kCufile;
    return r;
  }
  if (f.nvidia_fs == 1) {
    r.mode = "nvidia-fs";
    r.reason =
        "nvidia_fs is loaded: cuFile DMAs through nvidia-fs.ko (the NVMe driver must carry MLNX_OFED's GDS patches, not checked); "
        "P2PDMA mode " +
        (missing.empty() ? "unknown: " + unknown + " not in this input" : "not available: " + missing);
    r.fix = fixes;
    return r;
  }
  if (missing.empty()) {
    r.mode = "unknown";
    r.unknown = true;
    r.reason = "unknown: " + unknown + " not in this input (P2PDMA mode needs them); nvidia_fs " +
               (f.nvidia_fs == 0 ? "not loaded: compat otherwise" : "state unknown");
    return r;
  }
  r.mode = "compat";
  r.reason = "cuFile falls back to POSIX reads through a CPU bounce buffer: P2PDMA mode needs " + missing +
             (unknown.empty() ? "" : " (and unknown: " + unknown + ")") + "; nvidia_fs " +
             (f.nvidia_fs == 0 ? "not loaded" : "state unknown");
  r.fix = fixes.empty() ? "" : fixes + "\n";
  r.fix += "# or nvidia-fs: install gds-nvidia-fs (nvidia-fs.ko) with MLNX_OFED's NVMe GDS patches, then modprobe nvidia_fs";
  return r;
}

}  // namespace gdrpeer::topo

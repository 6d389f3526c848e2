// The IBGDA mode of one GPU x NIC pair, from the sources read (docs/check.md, "IBGDA
// and GDS readiness"):
//  NVSHMEM 3.5.1 (NVIDIA/nvshmem 2d7d25f), src/modules/transport/ibgda/ibgda.cpp nvshmemt_init():
//   1. data buffers: dma-buf when CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED and not
//      NVSHMEM_IB_DISABLE_DMABUF, else nvshmemt_ib_common_nv_peer_mem_available()
//      (transport_ib_common.cpp: memory_peers/nv_mem, memory_peers/nvidia-peermem,
//      /sys/module/nvidia_peermem); neither: "neither nv_peer_mem, or nvidia_peermem
//      detected. Skipping transport." (IBRC, the proxy transport, needs the same).
//   2. per device: name mlx5* / ibp* (or NVSHMEM_HCA_PREFIX), and
//      nvshmemt_ib_common_query_mlx5_caps (transport_mlx5_common.cpp): DEVX
//      QUERY_HCA_CAP must succeed; else "not enumerated as an mlx5 device. Skipping".
//   3. ibgda_check_gpu_mapping_nic_uar: mlx5dv_devx_alloc_uar + ibgda_nic_mem_gpu_map
//      = cudaHostRegister(uar->reg_addr, Portable|Mapped|IoMemory); failure -> NIC
//      handler CPU (GDRCopy, or since 3.4.5 CPU host memory: "CPU-Assisted IBGDA without
//      the use of GDRCopy or the x86 regkey", changelog 3.4.5); success -> handler GPU.
//   4. ibgda_check_nic_mapping_memtypes: control buffers on GPU memory through
//      mlx5dv_devx_umem_reg_ex(MLX5DV_UMEM_MASK_DMABUF) or mlx5dv_devx_umem_reg of the
//      GPU VA (peer client), else host memory; neither: "cannot allocate buffer on the
//      specified memory type. Skipping".
//   5. nvshmemt_ib_common_check_nic_ext_atomic_support: CAS, FA, masked CAS, masked
//      FA, 4- and 8-byte atomics on QP and DC; else "does not support all necessary atomic operations
//      ... PCI_ATOMIC_MODE ... Skipping".
//  NVIDIA open-gpu-kernel-modules 595.45.04, src/nvidia/arch/nvalloc/unix/src/osmemdesc.c:
//   IO memory registered through the RM (what cudaHostRegister(IoMemory) does) carries
//   _PEER_MAP_OVERRIDE_REQUIRED (mem_mgr/os_desc_mem.c) and is refused with
//   NV_ERR_INSUFFICIENT_PERMISSIONS unless the regkey PeerMappingOverride
//   (nvrm_registry.h, default 0) is set or the caller is an administrator.
//  NCCL 2.30.7 (NVIDIA/nccl 5067397): GIN GDAKI only on mlx5 providers
//   (src/transport/net_ib/gin.cc ncclGinIbGdakiInitOnce), GDR through nv_mem peer memory
//   or dma-buf; the doorbell through doca_gpu_verbs_can_gpu_register_uar
//   (gdaki/doca-gpunetio: the same cudaHostRegister(IoMemory)), else a CPU proxy per QP;
//   otherwise GIN type PROXY.
#include <string>

#include "gdrpeer/topo/readiness.hpp"

namespace gdrpeer::topo {

namespace {

constexpr const char* kModelledIbgda =
    "NVSHMEM 3.5.1 (NVIDIA/nvshmem 2d7d25f) ibgda.cpp, transport_mlx5_common.cpp; open-gpu-kernel-modules 595.45.04 osmemdesc.c; "
    "NCCL 2.30.7 (NVIDIA/nccl 5067397) GIN GDAKI";

const char* kRegkeyFix =
    "echo 'options nvidia NVreg_RegistryDwords=\"PeerMappingOverride=1;\"' > /etc/modprobe.d/nvidia-ibgda.conf   # then reload the nvidia "
    "module; security trade-off: any user may then map device MMIO (a NIC doorbell page) into a GPU (NVIDIA bug 1630288's "
    "work-around off); or run the job with CAP_SYS_ADMIN. NVreg_RegistryDwords is one string: a second options line replaces the "
    "first, so keep the keys already set in it (e.g. \"PeerMappingOverride=1;RMForceStaticBar1=1;\")";

ReadinessMode mode(const char* m, std::string reason, std::string fix) {
  ReadinessMode r;
  r.mode = m;
  r.reason = std::move(reason);
  r.fix = std::move(fix);
  r.modelled = kModelledIbgda;
  return r;
}

ReadinessMode unknown(std::string reason, std::string fix = "") {
  ReadinessMode r = mode("unknown", "unknown: " + std::move(reason), std::move(fix));
  r.unknown = true;
  return r;
}

}  // namespace

std::string connectx_model(unsigned id) {
  // pci.ids (pciutils/pciids c1c1254), vendor 15b3.
  switch (id) {
    case 0x1013: return "ConnectX-4";
    case 0x1014: return "ConnectX-4 VF";
    case 0x1015: return "ConnectX-4 Lx";
    case 0x1016: return "ConnectX-4 Lx VF";
    case 0x1017: return "ConnectX-5";
    case 0x1018: return "ConnectX-5 VF";
    case 0x1019: return "ConnectX-5 Ex";
    case 0x101a: return "ConnectX-5 Ex VF";
    case 0x101b: return "ConnectX-6";
    case 0x101c: return "ConnectX-6 VF";
    case 0x101d: return "ConnectX-6 Dx";
    case 0x101e: return "ConnectX mlx5Gen VF";
    case 0x101f: return "ConnectX-6 Lx";
    case 0x1021: return "ConnectX-7";
    case 0x1023: return "ConnectX-8";
    case 0x1025: return "ConnectX-9";
    case 0x1027: return "ConnectX-10";
    case 0xa2d2: return "BlueField (ConnectX-5)";
    case 0xa2d6: return "BlueField-2 (ConnectX-6 Dx)";
    case 0xa2d9: return "BlueField-3 Lx (ConnectX-7)";
    case 0xa2dc: return "BlueField-3 (ConnectX-7)";
    case 0xa2df: return "BlueField-4";
    default: return "";
  }
}

ReadinessMode decide_ibgda(const IbgdaFacts& f) {
  const std::string how = f.probed ? " (live probe)" : "";
  if (f.rdma_nic == 0)
    return mode("none", "no RDMA device on this NIC: IBGDA and the proxy transports need verbs",
                "# an RDMA NIC (NVIDIA ConnectX / BlueField, mlx5) beside this GPU, with mlx5_ib and ib_uverbs loaded");
  // 1. The data path: without it NVSHMEM skips IBGDA and IBRC alike.
  if (f.dmabuf_data == 0 && f.peer_mem == 0)
    return mode("none",
                "GPU memory cannot be registered: no dma-buf (CUDA DMA_BUF_SUPPORTED / Linux >= 5.12) and no peer client NVSHMEM "
                "recognises (nv_mem, nvidia-peermem, /sys/module/nvidia_peermem): NVSHMEM says \"neither nv_peer_mem, or "
                "nvidia_peermem detected. Skipping transport.\"",
                "# the open NVIDIA kernel module on Linux >= 5.12 (dma-buf), or modprobe nvidia_peermem with MLNX_OFED / DOCA-OFED");
  // ibgda.cpp nvshmemt_init() enumerates the verbs devices (ftable.get_device_list, then
  // open_device): a NIC without one is never a candidate, and with none NVSHMEM says "no active IB
  // device that supports GPU-initiated communication is found". Not known: unknown, whatever the rest.
  if (f.rdma_nic < 0) {
    if (f.mlx5 == 0)
      return unknown("the NIC is not mlx5 and whether it has an RDMA device is not in this input (proxy-only with one, none without)");
    IbgdaFacts with = f;
    with.rdma_nic = 1;
    const ReadinessMode m = decide_ibgda(with);
    if (m.unknown) return m;  // unknown with one too: its reason says why
    return unknown(
        "whether this NIC has an RDMA (verbs) device is not in this input (mlx5_ib bound to it: "
        "/sys/class/infiniband): none without one, " +
            m.mode + " with one (" + m.reason + ")",
        "gdrpeer check on the node (reads /sys/class/infiniband; mlx5_ib and ib_uverbs loaded)");
  }
  const bool data_unknown = f.dmabuf_data != 1 && f.peer_mem != 1;
  const std::string data = f.dmabuf_data == 1 ? "data buffers through dma-buf" : f.peer_mem == 1 ? "data buffers through peer memory" : "";
  // 2. mlx5 and DEVX.
  if ((f.mlx5 == 0 || f.devx == 0 || f.atomics == 0) && data_unknown)
    return unknown(
        "IBGDA skips this NIC (not mlx5, no DEVX or missing atomics); whether GPU memory can be registered (dma-buf or a "
        "peer client) is not in this input: proxy-only with it, none without");
  if (f.mlx5 == 0)
    return mode("proxy-only",
                "not an mlx5 device: NVSHMEM's IBGDA skips it (\"expected HCA interface: mlx5 or ibp\"), NCCL GIN has no GDAKI for it; "
                "NVSHMEM's proxy transports (IBRC, libfabric) and NCCL's GIN PROXY post from a CPU thread",
                "# GPU-initiated networking needs an NVIDIA ConnectX-5 or newer / BlueField NIC (mlx5 with DEVX)");
  if (f.devx == 0)
    return mode(
        "proxy-only",
        "DEVX QUERY_HCA_CAP failed" + how + ": NVSHMEM's IBGDA says \"not enumerated as an mlx5 device. Skipping\"; proxy transports only",
        "# DEVX needs rdma-core's mlx5 provider and mlx5_ib with user contexts (DEVX) allowed by the firmware and the container");
  if (f.atomics == 0)
    return mode("proxy-only",
                "the NIC lacks CAS / fetch-add / masked CAS / masked fetch-add or 4-byte atomics" + how +
                    ": NVSHMEM's IBGDA says \"does not support all necessary atomic operations\" and skips it",
                "mlxconfig -d <nic-bdf> query PCI_ATOMIC_MODE   # NVSHMEM names the firmware's PCI_ATOMIC_MODE; set it as the NIC's manual "
                "says, then reset the NIC");
  if (data_unknown)
    return unknown(
        "whether GPU memory can be registered (dma-buf or a peer client) is not in this input: NVSHMEM skips the transport without it");
  if (f.mlx5 < 0 || f.devx < 0 || f.atomics < 0)
    return unknown(
        std::string(f.mlx5 < 0 ? "the NIC model is not in this input" : "DEVX and the atomic caps are not known without the live probe") +
            " (mlx5, DEVX QUERY_HCA_CAP, CAS/FA/masked atomics decide IBGDA vs the proxy transports)",
        "gdrpeer check --probe ibgda   # queries DEVX and the atomic caps");
  std::string control = f.dmabuf_umem == 1   ? "control buffers on GPU memory through a dma-buf umem"
                        : f.peer_mem == 1    ? "control buffers on GPU memory through the peer client (or host memory)"
                        : f.dmabuf_umem == 0 ? "control buffers in host memory (the dma-buf umem failed and no peer client)"
                                             : "control buffers on GPU memory (dma-buf umem) or in host memory";
  const std::string model = f.nic_model.empty() ? "mlx5" : f.nic_model;
  // 3. The doorbell: cudaHostRegister(IoMemory) of the UAR.
  if (f.uar_gpu_map == 1)
    return mode("gpu-initiated",
                model + ": DEVX and atomics" + (f.probed ? " (probed)" : "") + ", " + data + ", " + control +
                    "; the UAR (doorbell) maps into the GPU with cudaHostRegister(IoMemory)" +
                    (f.probed ? " (probed)" : " (PeerMappingOverride=1)") + ": GPU threads post and ring the NIC themselves",
                "");
  if (f.uar_gpu_map == 2)
    return mode("cpu-assisted",
                model + ": " + data + ", " + control +
                    "; PeerMappingOverride is not set, so the driver refuses cudaHostRegister(IoMemory) of the UAR to processes without "
                    "CAP_SYS_ADMIN (osmemdesc.c): NVSHMEM >= 3.4.5 falls back to CPU-assisted IBGDA (the GPU builds work requests, a CPU "
                    "thread rings the doorbell; older NVSHMEM needs GDRCopy for it), NCCL GDAKI to a CPU proxy per QP; a job with "
                    "CAP_SYS_ADMIN gets gpu-initiated",
                kRegkeyFix);
  if (f.uar_gpu_map == 0)
    return mode("cpu-assisted",
                model + ": " + data + ", " + control + "; cudaHostRegister(IoMemory) of the UAR failed" + how +
                    ": NVSHMEM >= 3.4.5 uses CPU-assisted IBGDA (NIC handler on the CPU), older NVSHMEM needs GDRCopy for it",
                kRegkeyFix);
  return unknown(
      "no driver parameters in this input (PeerMappingOverride decides whether the GPU may map the NIC's doorbell: "
      "gpu-initiated or cpu-assisted); the rest allows at least cpu-assisted",
      "gdrpeer check on the node (reads /proc/driver/nvidia/params), or --probe ibgda");
}

}  // namespace gdrpeer::topo

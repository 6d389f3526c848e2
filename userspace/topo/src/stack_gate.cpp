// The NVIDIA exporter's own gate (stack.hpp exporter_gate), as the open kernel
// module 580.142 decides it (NVIDIA/open-gpu-kernel-modules tag 580.142):
//
//  kernel-open/nvidia/nv-dmabuf.c nv_dma_buf_attach():
//    FORCE_PCIE mapping type -> nv_pci_is_valid_topology_for_direct_pci(), else
//    "NVRM: dma-buf attach failed: topology not supported for mapping type FORCE_PCIE";
//    default type -> nv_grdma_pci_topology_supported(), else
//    "NVRM: dma-buf attach failed: PCI topology not supported for dma-buf";
//    then an importer without peer2peer on memory without struct page is refused
//    ("importer unable to handle MMIO without struct page"); all return -ENOTSUPP (524).
//  kernel-open/nvidia/nv-pci.c:
//    nv_pci_is_valid_topology_for_direct_pci: !coherent -> no; override 1 -> yes,
//      2 -> no; else GPU and peer in the same IOMMU group.
//    nv_grdma_pci_topology_supported: coherent -> yes; override 1 -> yes, 2 -> no;
//      passthrough VM -> yes; P2P-unsupported chipset -> nv_pci_has_common_pci_switch
//      (any common upstream bridge); else yes.
//  src/nvidia/arch/nvalloc/unix/src/osinit.c _checkP2pChipsetSupport: the chipsets
//    are CS_NVIDIA_TH500 (Grace), CS_AMPERE_ALTRA, CS_AMPERE_AMPEREONE160.
//  src/nvidia/arch/nvalloc/unix/src/osapi.c (nvidia_p2p_dma_map_pages, the path
//    nvidia_peermem takes): coherent -> maps; else the same nv_grdma_pci_topology_supported.
// The proprietary module exports no dma-buf (CUDA reports DMA_BUF_SUPPORTED=0 there).
// An input not known (-1: flavour, coherence, override, common bridge, IOMMU groups) makes an
// answer unknown wherever the driver's decision depends on it, never a guess (test_truth_stack).
#include "gdrpeer/topo/stack.hpp"

namespace gdrpeer::topo {

namespace {

GateAnswer yes(std::string why) { return {1, std::move(why)}; }
GateAnswer no(std::string why) { return {0, std::move(why)}; }
GateAnswer unknown(std::string why) { return {-1, std::move(why)}; }

// nv_grdma_pci_topology_supported() past the override: a passthrough VM, then the chipset list.
GateAnswer grdma_by_topology(const GateInput& in) {
  if (in.passthrough_vm) return yes("GPU passed through to a VM: the driver allows RDMA by default");
  if (in.unsupported_chipset) {
    if (in.common_bridge == 1) return yes("chipset the driver distrusts for PCIe P2P, but GPU and NIC share a PCIe bridge");
    if (in.common_bridge == 0)
      return no("chipset the driver distrusts for PCIe P2P (Grace, Ampere Altra, AmpereOne) and no PCIe bridge common to GPU and NIC");
    return unknown("chipset the driver distrusts for PCIe P2P; whether GPU and NIC share a bridge is not in this input");
  }
  return yes("non-coherent platform, chipset not on the driver's list, override 0: allowed");
}

// nv_grdma_pci_topology_supported(): shared by the default dma-buf type and nvidia_p2p.
GateAnswer grdma_topology(const GateInput& in) {
  if (in.coherent == 1) return yes("coherent (NVLink-C2C) platform: the driver skips the PCIe topology check");
  if (in.coherent == -1) return unknown("whether the platform is coherent (NVLink-C2C) is not in this input");
  if (in.override_value == 1) return yes("NVreg_GrdmaPciTopoCheckOverride=1 allows every topology");
  if (in.override_value == 2) return no("NVreg_GrdmaPciTopoCheckOverride=2 denies every topology");
  const GateAnswer by_topology = grdma_by_topology(in);
  // An unknown override is unknown whatever the topology says: 1 would allow it, 2 deny it.
  if (in.override_value == -1)
    return unknown(std::string("NVreg_GrdmaPciTopoCheckOverride not in this input (default 0 ") +
                   (by_topology.allowed == 1   ? "allows"
                    : by_topology.allowed == 0 ? "refuses"
                                               : "leaves open") +
                   " this topology)");
  return by_topology;
}

}  // namespace

GateResult exporter_gate(const GateInput& in) {
  GateResult r;
  const GateAnswer topo = grdma_topology(in);
  r.nvidia_p2p = topo;
  if (in.flavour == 0) {
    r.dmabuf_default = no("the proprietary NVIDIA kernel module exports no dma-buf (CUDA DMA_BUF_SUPPORTED=0)");
    r.dmabuf_pcie = r.dmabuf_default;
    return r;
  }
  const bool flavour_unknown = in.flavour == -1;
  r.dmabuf_default = topo;
  // FORCE_PCIE (CU_MEM_RANGE_FLAG_DMA_BUF_MAPPING_TYPE_PCIE).
  if (in.coherent == 0)
    r.dmabuf_pcie = no("the PCIe mapping type (FORCE_PCIE) needs a coherent platform");
  else if (in.coherent == -1)
    r.dmabuf_pcie = unknown("whether the platform is coherent (NVLink-C2C) is not in this input");
  else if (in.override_value == 1)
    r.dmabuf_pcie = yes("NVreg_GrdmaPciTopoCheckOverride=1 allows the PCIe mapping type whatever the IOMMU groups");
  else if (in.override_value == 2)
    r.dmabuf_pcie = no("NVreg_GrdmaPciTopoCheckOverride=2 denies the PCIe mapping type");
  else if (in.same_iommu_group == -1)
    r.dmabuf_pcie = unknown("the IOMMU groups of GPU and NIC are not in this input");
  else if (in.override_value == -1)  // 1 would allow it and 2 deny it, whatever the groups
    r.dmabuf_pcie = unknown(std::string("NVreg_GrdmaPciTopoCheckOverride not in this input (default 0 ") +
                            (in.same_iommu_group == 1 ? "allows" : "refuses") + " the PCIe mapping type: GPU and NIC in " +
                            (in.same_iommu_group == 1 ? "one IOMMU group)" : "different IOMMU groups)"));
  else if (in.same_iommu_group == 1)
    r.dmabuf_pcie = yes("GPU and NIC are in one IOMMU group");
  else
    r.dmabuf_pcie = no("GPU and NIC are in different IOMMU groups: the PCIe mapping type needs one group");
  if (flavour_unknown) {
    // Only the open module exports dma-buf: without the flavour an allowed answer is unknown.
    for (GateAnswer* a : {&r.dmabuf_default, &r.dmabuf_pcie})
      if (a->allowed == 1) *a = unknown(a->why + "; the driver flavour (open exports dma-buf, proprietary does not) is not in this input");
  }
  return r;
}

}  // namespace gdrpeer::topo

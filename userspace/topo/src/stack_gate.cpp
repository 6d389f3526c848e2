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
//
// Older and newer drivers (DriverGate, the open module's tags read with git grep):
//  - 515.43.04 (the first tag) .. 565.77, and 535.x/550.x to 535.288.01/550.163.01: no
//    NVreg_GrdmaPciTopoCheckOverride, no nv_pci_is_valid_topology_for_direct_pci, no FORCE_PCIE
//    mapping type; osapi.c rm_p2p_dma_map_pages maps every peer (nv_dma_map_peer): nothing refused.
//  - 570.86.15 .. 575.64.05 (570.211.01 too): nv-dmabuf.c nv_dma_buf_map() checks FORCE_PCIE only,
//    nv-pci.c: "!coherent -> no; NVreg_GrdmaPciTopoCheckOverride != 0 || one IOMMU group"; the
//    default type and rm_p2p_dma_map_pages check no topology.
//  - 580.65.06 (the first 580 tag) .. 590.48.01: as above (nv_grdma_pci_topology_supported).
//  - 595.44.02 .. 595.45.04: nv_pci_is_valid_topology_for_direct_pci without the override
//    ("!coherent -> no; one IOMMU group"); the rest as 580.142.
// A version not known, or between two of these (566-569, 576-579, 591-594, or below 570.86.15,
// 580.65.06, 595.44.02 in their branches: kDriverEras), leaves an answer unknown where these differ.
// An input not known (-1: flavour, coherence, override, common bridge, IOMMU groups) makes an
// answer unknown wherever the driver's decision depends on it, never a guess (test_truth_stack).
#include <array>
#include <cstdlib>
#include <limits>

#include "gdrpeer/topo/stack.hpp"

namespace gdrpeer::topo {

namespace {

using Version = std::array<long, 3>;

// "580.159.04" -> {580, 159, 4}; "595.58" -> {595, 58, 0}; false for anything else.
bool parse_version(const std::string& v, Version& out) {
  out = {0, 0, 0};
  size_t i = 0;
  for (size_t part = 0; part < out.size(); ++part) {
    if (i >= v.size() || v[i] < '0' || v[i] > '9') return false;
    char* end = nullptr;
    out[part] = std::strtol(v.c_str() + i, &end, 10);
    i = static_cast<size_t>(end - v.c_str());
    if (i == v.size()) return part >= 1;
    if (v[i] != '.') return false;
    ++i;
  }
  return false;
}

GateAnswer yes(std::string why) { return {1, std::move(why)}; }
GateAnswer no(std::string why) { return {0, std::move(why)}; }
GateAnswer unknown(std::string why) { return {-1, std::move(why)}; }

// nv_grdma_pci_topology_supported() past the override: a passthrough VM, then the chipset list.
GateAnswer grdma_by_topology(const GateInput& in) {
  if (in.passthrough_vm) return yes("GPU passed through to a VM: the driver allows RDMA by default");
  if (in.unsupported_chipset == -1) {
    // Distrusted or not, a bridge common to GPU and NIC passes; without one the chipset decides.
    if (in.common_bridge == 1) return yes("GPU and NIC share a PCIe bridge: allowed whether or not the driver distrusts this chipset");
    return unknown(
        "whether the driver distrusts this chipset for PCIe P2P is not in this input (Neoverse V2 cores: Grace's TH500 root ports, "
        "10de:22b1-22b4, 22b8, 22b9, or another SoC's)");
  }
  if (in.unsupported_chipset == 1) {
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

// A driver before nv_grdma_pci_topology_supported (DriverGate::None, DirectPci): nvidia_p2p and
// the default dma-buf type refuse no topology; FORCE_PCIE as that driver checks it, if it has it.
GateResult older_gate(const GateInput& in) {
  GateResult r;
  const bool none = in.driver == DriverGate::None;
  const std::string era = none ? "this driver (before 570.86.15)" : "this driver (570.86.15 to 575)";
  r.nvidia_p2p = yes(era + " checks no PCIe topology in nvidia_p2p_dma_map_pages (nv_grdma_pci_topology_supported came with 580.65.06)");
  if (in.flavour == 0) {
    r.dmabuf_default = no("the proprietary NVIDIA kernel module exports no dma-buf (CUDA DMA_BUF_SUPPORTED=0)");
    r.dmabuf_pcie = r.dmabuf_default;
    return r;
  }
  r.dmabuf_default = yes(era + " checks no PCIe topology for dma-buf (nv_grdma_pci_topology_supported came with 580.65.06)");
  if (none)
    r.dmabuf_pcie = no("this driver (before 570.86.15) has no PCIe mapping type (FORCE_PCIE came with 570.86.15)");
  else if (in.coherent == 0)
    r.dmabuf_pcie = no("the PCIe mapping type (FORCE_PCIE) needs a coherent platform");
  else if (in.coherent == -1)
    r.dmabuf_pcie = unknown("whether the platform is coherent (NVLink-C2C) is not in this input");
  else if (in.override_value > 0 || in.same_iommu_group == 1)  // 570.86.15: "override != 0 || one group"
    r.dmabuf_pcie =
        yes(in.override_value > 0 ? "NVreg_GrdmaPciTopoCheckOverride != 0 skips this driver's IOMMU-group check (570.86.15 to 575)"
                                  : "GPU and NIC are in one IOMMU group");
  else if (in.same_iommu_group == -1)
    r.dmabuf_pcie = unknown("the IOMMU groups of GPU and NIC are not in this input");
  else if (in.override_value == -1)
    r.dmabuf_pcie = unknown(
        "NVreg_GrdmaPciTopoCheckOverride not in this input (default 0 refuses the PCIe mapping type: GPU and NIC in different IOMMU "
        "groups)");
  else
    r.dmabuf_pcie = no("GPU and NIC are in different IOMMU groups: the PCIe mapping type needs one group");
  if (in.flavour == -1)
    for (GateAnswer* a : {&r.dmabuf_default, &r.dmabuf_pcie})
      if (a->allowed == 1) *a = unknown(a->why + "; the driver flavour (open exports dma-buf, proprietary does not) is not in this input");
  return r;
}

GateResult gate_of_known_driver(const GateInput& in);

// The driver's version not known: an answer holds only where every driver version gives it.
GateResult gate_of_any_driver(const GateInput& in) {
  GateResult r;
  GateInput each = in;
  each.driver = DriverGate::Full;
  r = gate_of_known_driver(each);
  for (DriverGate d : {DriverGate::None, DriverGate::DirectPci, DriverGate::PcieByGroup}) {
    each.driver = d;
    const GateResult other = gate_of_known_driver(each);
    const std::pair<GateAnswer*, const GateAnswer*> answers[] = {
        {&r.dmabuf_default, &other.dmabuf_default}, {&r.dmabuf_pcie, &other.dmabuf_pcie}, {&r.nvidia_p2p, &other.nvidia_p2p}};
    for (const auto& [a, o] : answers)
      if (a->allowed != o->allowed && a->allowed != -1)
        *a = unknown(a->why +
                     "; the NVIDIA driver's version is not in this input or not a published one, and the checks differ by version (none "
                     "before 570.86.15, the PCIe mapping type's from 570.86.15, nv_grdma_pci_topology_supported from 580.65.06, the "
                     "override no longer read for the PCIe mapping type from 595.44.02)");
  }
  return r;
}

GateResult gate_of_known_driver(const GateInput& in) {
  if (in.driver == DriverGate::None || in.driver == DriverGate::DirectPci) return older_gate(in);
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
  else if (in.driver == DriverGate::PcieByGroup)  // 595.44.02 on: the override is not read here
    r.dmabuf_pcie = in.same_iommu_group == 1 ? yes("GPU and NIC are in one IOMMU group")
                    : in.same_iommu_group == 0
                        ? no("GPU and NIC are in different IOMMU groups: the PCIe mapping type needs one group (from 595.44.02 "
                             "whatever NVreg_GrdmaPciTopoCheckOverride says)")
                        : unknown("the IOMMU groups of GPU and NIC are not in this input");
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

}  // namespace

// The version table (the header comment): each behaviour from the first tag that has it to the
// last branch that keeps it. A version below a behaviour's first tag and past the previous one's
// last branch (566-569, 570 before 570.86.15, 576-579, 580 before 580.65.06, 591-594, 595 before
// 595.44.02) lies between two behaviours with no tag to read: Unknown. A driver older than the
// first tag (515.43.04; closed source only) predates every check, which first appear in 570.86.15.
struct DriverEra {
  Version first;     // the first tag with this behaviour
  long last_branch;  // the last branch that keeps it (a later release of that branch does too)
  DriverGate gate;
};
constexpr DriverEra kDriverEras[] = {
    {{0, 0, 0}, 565, DriverGate::None},                                         // .. 565.77 (535.288.01, 550.163.01 too)
    {{570, 86, 15}, 575, DriverGate::DirectPci},                                // .. 575.64.05 (570.211.01 too)
    {{580, 65, 6}, 590, DriverGate::Full},                                      // .. 590.48.01 (580.142 the model)
    {{595, 44, 2}, std::numeric_limits<long>::max(), DriverGate::PcieByGroup},  // .. 595.45.04; a newer branch is taken to keep it
};

DriverGate driver_gate_of(const std::string& version) {
  Version v;
  if (!parse_version(version, v)) return DriverGate::Unknown;
  for (const DriverEra& era : kDriverEras)
    if (v >= era.first && v[0] <= era.last_branch) return era.gate;
  return DriverGate::Unknown;
}

GateResult exporter_gate(const GateInput& in) {
  return in.driver == DriverGate::Unknown ? gate_of_any_driver(in) : gate_of_known_driver(in);
}

}  // namespace gdrpeer::topo

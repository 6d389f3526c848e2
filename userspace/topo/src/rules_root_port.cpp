// Rules the PCIe rules class did not cover (issue 24, item 5), run by check() after it:
//  acs-root-port: ACS redirect on the CPU root ports of a PHB/NODE/SYS pair. The acs-redirect
//    rule looks only below a switch meeting point; a pair that meets in the root complex crosses
//    each side's root port, and ReqRedir/CmpltRedir there sends peer requests to the IOMMU /
//    root complex for validation: NCCL deadlocked on 2x RTX 5880 Ada behind AMD GPP bridges with
//    ACSCtl 0x001d until ACS was cleared on them (NVIDIA/nccl #2079, GPUs under two host bridges:
//    NODE). A cross-socket (SYS) pair crosses its root ports the same way: the kernel treats every
//    pair without a common upstream bridge alike, through the host bridge, whatever the root
//    ports' ACS (drivers/pci/p2pdma.c calc_map_type_and_dist), and NCCL uses P2P up to SYS on
//    AMD systems of two GPUs, #2079's (src/graph/paths.cc ncclTopoCheckP2p: p2pLevel PATH_SYS).
//  ats-translated, ats-vm: where ATS matters. Under a translating IOMMU a device with ATS
//    enabled sends translated requests; ports with ACS Direct Translated P2P (bit 6) let those
//    go peer to peer below a switch instead of up to the root complex. In a VM, ATS answers come
//    from the hypervisor's vIOMMU and direct translated P2P needs the host's ACS setup.
#include <algorithm>
#include <cstdio>

#include "gdrpeer/topo/rules.hpp"
#include "rules_findings.hpp"
#include "rules_root_port.hpp"

namespace gdrpeer::topo {

namespace {

bool is_root_port(const Device& d) { return d.port == PortType::RootPort || (d.is_bridge && d.parent < 0 && d.port == PortType::Unknown); }

std::string hex4(unsigned v) {
  char b[8];
  std::snprintf(b, sizeof b, "%04x", v & 0xffff);
  return b;
}

void acs_root_port(const Topology& t, const CheckOptions& o, PairResult& r) {
  // Below a switch meeting point (PIX, PXB) the traffic turns before the root complex: acs_rules
  // judges every port of such a path, whatever type a port claims.
  if (r.path.cls == PathClass::PIX || r.path.cls == PathClass::PXB) return;
  std::vector<int> bad;
  for (const std::vector<int>* side : {&r.path.ports_a, &r.path.ports_b})
    for (int x : *side) {
      const Device& d = t.devices[x];
      if (is_root_port(d) && d.acs_known && d.acs_present && (d.acs_ctl & acs::kRedirectMask)) bad.push_back(x);
    }
  if (bad.empty()) return;
  std::string ports, setpci, boot;
  for (int x : bad) {
    const Device& d = t.devices[x];
    ports += (ports.empty() ? "" : ", ") + d.bdf + " (ACSCtl 0x" + hex4(d.acs_ctl) + ")";
    setpci += (setpci.empty() ? "" : "; ") + std::string("setpci -s ") + d.bdf + " ECAP_ACS+0x6.w=0000:002c";
    // pci=config_acs flags, bit 6 leftmost .. bit 0: keep DirectTrans, clear EgressCtrl, keep
    // UpstreamFwd, clear CmpltRedir and ReqRedir, keep TransBlk and SrcValid (Linux >= 6.11).
    boot += (boot.empty() ? "" : ";") + std::string("x0x00xx@") + d.bdf;
  }
  add_finding(o, r.findings, "acs-root-port", Verdict::Unreliable,
              "ACS redirect on the CPU root port(s) " + ports +
                  " of this root-complex path: peer requests are sent to the IOMMU / root complex for validation instead of to the peer "
                  "(NCCL deadlocks between PHB GPUs, NVIDIA/nccl #2079)",
              setpci + "   # now; at boot: pci=config_acs=\"" + boot +
                  "\" (Linux >= 6.11) or the BIOS ACS setting; clearing it merges IOMMU groups");
}

void ats_rules(const Topology& t, const Report& rep, PairResult& r, const CheckOptions& o) {
  const Device& nic = t.devices[r.b];
  if (nic.role != Role::NIC || !nic.ats_present) return;
  const bool translating = nic.iommu_type.rfind("DMA", 0) == 0;
  if (rep.virtual_machine && nic.ats_enabled)
    add_finding(o, r.findings, "ats-vm", Verdict::Optimal,
                "ATS is enabled on " + nic.bdf +
                    " inside a virtual machine: its translations come from the hypervisor's vIOMMU, and direct "
                    "translated peer-to-peer needs ACS Direct Translated P2P on the host's switch ports",
                "# host side: keep ATS on the passed-through functions and set ACS DirectTrans on their switch ports (rdma_topo --virt)");
  if (!translating) return;
  if (!nic.ats_enabled) {
    add_finding(o, r.findings, "ats-translated", Verdict::Optimal,
                "IOMMU translating for " + nic.bdf + " and its ATS is off: every peer request goes up to the root complex to be translated",
                "");
    return;
  }
  if (r.path.cls != PathClass::PIX && r.path.cls != PathClass::PXB) return;
  std::string without;
  for (const std::vector<int>* side : {&r.path.ports_a, &r.path.ports_b})
    for (int x : *side) {
      const Device& d = t.devices[x];
      if (d.acs_known && d.acs_present && (d.acs_cap & acs::kDirectTranslated) && !(d.acs_ctl & acs::kDirectTranslated))
        without += (without.empty() ? "" : ", ") + d.bdf;
    }
  if (without.empty())
    add_finding(o, r.findings, "ats-translated", Verdict::Optimal,
                "IOMMU translating, ATS enabled on " + nic.bdf +
                    ": translated peer requests can stay below the switch (ACS Direct Translated P2P is not off on the path)",
                "");
  else
    add_finding(o, r.findings, "ats-translated", Verdict::Optimal,
                "IOMMU translating, ATS enabled on " + nic.bdf + ", but ACS Direct Translated P2P is off on " + without +
                    ": translated peer requests still go up to the root complex",
                "# set ACS DirectTrans (bit 6) on those ports, e.g. pci=config_acs=1xxxxxx@<port> (Linux >= 6.11)");
}

}  // namespace

void root_port_rules(const Topology& t, const CheckOptions& o, Report& rep) {
  for (auto& r : rep.pairs) {
    if (r.nvlink.linked) continue;  // GPU pairs over NVLink do not take the PCIe path
    acs_root_port(t, o, r);
    ats_rules(t, rep, r, o);
    for (const auto& f : r.findings) r.verdict = std::max(r.verdict, f.severity);
    rep.worst = std::max(rep.worst, r.verdict);
  }
}

}  // namespace gdrpeer::topo

// The rules: from a classified pair to findings (reason + pasteable fix) and a
// verdict. Each rule has a stable id (shown in output, accepted by --skip).
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <iterator>
#include <map>
#include <sstream>

#include "gdrpeer/topo/rules.hpp"
#include "readiness_internal.hpp"
#include "rules_findings.hpp"
#include "rules_root_port.hpp"
#include "rules_software.hpp"
#include "stack_internal.hpp"

namespace gdrpeer::topo {

namespace {

// A size in the largest binary unit that divides it exactly, as lspci's [size=] does
// (pciutils lspci.c show_size): BAR1 = 256 KiB on a small-BAR part must not print "0 MiB".
std::string fmt_bytes(uint64_t b) {
  static const char* const unit[] = {"bytes", "KiB", "MiB", "GiB", "TiB"};  // lspci's "", K, M, G, T
  size_t i = 0;
  while (i + 1 < std::size(unit) && b >= 1024 && b % 1024 == 0) {
    b /= 1024;
    ++i;
  }
  return std::to_string(b) + " " + unit[i];
}

// An NVLink bandwidth as GB/s (1 GB = 1000 MB), exactly: hwloc writes NVLinkBandwidth in MB/s
// (doc/hwloc.doxy; topology-nvml.c adds 20000, 25000 or 50000 per link), so 25000 is "25 GB/s",
// 12500 "12.5 GB/s" and 1 "0.001 GB/s": never "0 GB/s" for a bandwidth the input gives.
std::string fmt_gbps(uint64_t mbps) {
  std::string s = std::to_string(mbps / 1000);
  if (const uint64_t frac = mbps % 1000) {
    char buf[8];
    std::snprintf(buf, sizeof buf, ".%03u", static_cast<unsigned>(frac));
    std::string digits = buf;
    while (digits.back() == '0') digits.pop_back();
    s += digits;
  }
  return s + " GB/s";
}

std::string fmt_speed(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%gGT/s", s);
  return buf;
}

std::string acs_flags(uint16_t ctl) {
  std::string s;
  if (ctl & acs::kRequestRedirect) s += "ReqRedir+ ";
  if (ctl & acs::kCompletionRedirect) s += "CmpltRedir+ ";
  if (ctl & acs::kEgressControl) s += "EgressCtrl+ ";
  if (!s.empty()) s.pop_back();
  return s;
}

// "NVIDIA driver 580.65.06 (open kernel module)" from /proc/driver/nvidia/version's first line.
std::string nvidia_driver_summary(const std::string& line) {
  if (line.empty()) return "NVIDIA driver: /proc/driver/nvidia/version not in this input";
  std::string version;
  std::istringstream words(line);
  for (std::string w; words >> w;)
    if (version.empty() && !w.empty() && std::isdigit(static_cast<unsigned char>(w[0])) && w.find('.') != std::string::npos) version = w;
  const bool open = line.find("Open Kernel Module") != std::string::npos;
  return "NVIDIA driver " + (version.empty() ? std::string("(version not read)") : version) + " (" + (open ? "open" : "proprietary") +
         " kernel module)";
}

// The IOMMU parameters of the kernel command line, as " (kernel command line: intel_iommu=on iommu=pt)";
// never the rest of it, which can hold anything (a VM's init arguments, paths, tokens).
std::string iommu_cmdline_text(const Software& sw) {
  if (sw.cmdline.empty()) return "";
  std::string params;
  std::istringstream words(sw.cmdline);
  for (std::string w; words >> w;) {
    const std::string key = w.substr(0, w.find('='));
    // intel_iommu=, amd_iommu=, amd_iommu_intr=, iommu=, iommu.passthrough=, iommu.strict=,
    // iommu.forcedac=, arm-smmu.*, vfio_iommu_type1.*: every key that names the IOMMU.
    if (key.find("iommu") != std::string::npos || key.find("smmu") != std::string::npos) params += (params.empty() ? "" : " ") + w;
  }
  return params.empty() ? " (no IOMMU parameter on the kernel command line)" : " (kernel command line: " + params + ")";
}

enum class PairKind { GpuNic, GpuGpu, GpuNvme };

class Checker {
 public:
  // rep: the labels, NICs and path classes of this node, filled in before.
  Checker(const Topology& t, const RuleData& k, const CheckOptions& o, const Report& rep) : t_(t), k_(k), o_(o), rep_(rep) {
    // Each GPU's family once per node: the lookup may read pci.ids.
    families_.resize(t.devices.size());
    std::vector<std::string> node_families;
    for (size_t i = 0; i < t.devices.size(); ++i)
      if (t.devices[i].role == Role::GPU) {
        families_[i] = k.gpu_family_match(t.devices[i]);
        if (families_[i].family) node_families.push_back(families_[i].family->family);
        if (families_[i].family && families_[i].family->family == "grace-c2c") grace_ = true;
      }
    // Grace's entry needs its chipset on the node (a TH500 root port or a C2C GPU): its Neoverse V2
    // cores alone are also Graviton4's and Axion's.
    rc_ = k.root_complex(t, node_families);
    grace_ = grace_ || (rc_ && rc_->name.find("Grace") != std::string::npos);
    rcname_ = rc_ ? rc_->name : (t.cpu.model_name.empty() ? "this CPU" : t.cpu.model_name);
    dmi_ = t.dmi_vendor + " " + t.dmi_product;
    emulated_ = k.virtual_hardware(t);
    virtual_ = t.cpu.hypervisor || t.placeholder_switches || (!t.dmi_vendor.empty() && contains_any(t.dmi_vendor, k.cloud_dmi_vendors)) ||
               !emulated_.empty();
    // Each platform rule's node conditions once per node; the GPU family is per pair.
    platform_node_.reserve(k.platforms.size());
    for (const PlatformRule& p : k.platforms) platform_node_.push_back(platform_matches(p));
  }

  bool skipped(std::string_view rule) const { return rule_skipped(o_, rule); }

  void add(std::vector<Finding>& out, std::string_view rule, Verdict v, std::string reason, std::string fix) {
    add_finding(o_, out, rule, v, std::move(reason), std::move(fix));
  }

  const std::string& label(int i) const { return rep_.labels[static_cast<size_t>(i)]; }
  const RootComplex* rc_ = nullptr;
  std::vector<GpuFamilyMatch> families_;  // per device index (GPUs only)
  std::string rcname_, dmi_;              // per node, used per pair
  std::string emulated_;                  // an emulated PCI function that gives the VM away, "" if none
  bool grace_ = false, virtual_ = false;
  std::vector<bool> platform_node_;  // per k_.platforms entry: this node meets its node conditions

  void pair(PairResult& r, PairKind kind) {
    const Device& a = t_.devices[r.a];
    const Device& b = t_.devices[r.b];
    if (kind == PairKind::GpuGpu && r.nvlink.linked) {
      nvlink_rules(r);
      for (const auto& f : r.findings) r.verdict = std::max(r.verdict, f.severity);
      return;
    }
    path_rules(r, kind);
    acs_rules(r);
    iommu_rules(r, a);
    iommu_rules(r, b);
    link_rules(r);
    if (a.role == Role::GPU) bar_rules(r, a);
    if (b.role == Role::GPU) bar_rules(r, b);
    if (kind != PairKind::GpuGpu) software_rules(t_, o_, a, r.findings);
    platform_rules(r, kind, r.a);
    if (kind == PairKind::GpuGpu) platform_rules(r, kind, r.b);  // either GPU's family limits P2P
    for (const auto& f : r.findings) r.verdict = std::max(r.verdict, f.severity);
  }

  // GPU peer-to-peer over NVLink does not take the PCIe path: the PCIe rules (path,
  // ACS, IOMMU, BAR1, root complex and platform P2P limits) do not apply to it.
  void nvlink_rules(PairResult& r) {
    const NvLinkPath& l = r.nvlink;
    std::string how = l.links > 0 ? std::to_string(l.links) + " bonded NVLinks (NV" + std::to_string(l.links) + ")" : "NVLink";
    if (l.bandwidth_mbps > 0) how += ", " + fmt_gbps(l.bandwidth_mbps);
    std::string why = "peer-to-peer goes over " + how + (l.via_switch ? " through NVSwitch" : ", GPU to GPU") +
                      ", not over the PCIe path (" + to_string(r.path.cls) + ")";
    if (l.inferred_from == "gpu-model") {
      why = "peer-to-peer goes over NVLink (directly or through NVSwitches: not known), not over the PCIe path (" +
            std::string(to_string(r.path.cls)) + "); inferred from the GPU model: " + model_parts(r) +
            " ship only on NVLink baseboards, and no input here lists the links (NVML not asked or not answering)";
      add(r.findings, "path-nvlink", Verdict::Optimal, why, "nvidia-smi topo -m   # on the node: NV# confirms the links");
    } else {
      if (l.inferred) why += "; inferred from the NVSwitch devices in the PCI tree (HGX/DGX baseboard), check with nvidia-smi topo -m";
      add(r.findings, "path-nvlink", Verdict::Optimal, why, "");
    }
    fabric_check(r, r.a);
    fabric_check(r, r.b);
    link_check(r, r.a);
    link_check(r, r.b);
  }

  // "GH100 [H200 SXM 141GB] (10de:2335)" for the pair's GPUs, one name when both are the same part.
  std::string model_parts(const PairResult& r) const {
    const NvlinkBaseboardPart* pa = k_.nvlink_baseboard_part(t_.devices[r.a]);
    const NvlinkBaseboardPart* pb = k_.nvlink_baseboard_part(t_.devices[r.b]);
    auto one = [](const NvlinkBaseboardPart* p) {
      char id[16];
      std::snprintf(id, sizeof id, "10de:%04x", p->device);
      return p->name + " (" + id + ")";
    };
    if (!pa || !pb) return "the GPUs";
    return pa == pb ? one(pa) + " GPUs" : one(pa) + " and " + one(pb);
  }

  // NVLink through NVSwitches carries peer traffic only once the fabric manager has
  // registered the GPU with the fabric (NVML's fabric state; Hopper and later).
  void fabric_check(PairResult& r, int x) {
    const Device& d = t_.devices[x];
    if (d.fabric_state == 1 || d.fabric_state == 2) {
      add(r.findings, "nvlink-fabric", Verdict::Unreliable,
          "NVSwitch fabric registration of " + d.bdf + " is " + (d.fabric_state == 1 ? "not started" : "in progress") +
              " (NVML): peer-to-peer over NVLink fails until it completes",
          "systemctl start nvidia-fabricmanager   # on the host that owns the NVSwitches; then: nvidia-smi -q | grep -A3 Fabric");
    } else if (d.fabric_state == 3 && d.fabric_status > 0) {
      add(r.findings, "nvlink-fabric", Verdict::Unreliable,
          "NVSwitch fabric registration of " + d.bdf + " completed with error nvmlReturn_t " + std::to_string(d.fabric_status) + " (NVML)",
          "journalctl -u nvidia-fabricmanager   # on the host that owns the NVSwitches");
    }
  }

  void path_rules(PairResult& r, PairKind kind) {
    const PathInfo& p = r.path;
    if (p.cls == PathClass::PIX || p.cls == PathClass::PXB) return;
    if (grace_ && p.cls != PathClass::SYS && kind != PairKind::GpuGpu) {
      add(r.findings, "path-grace", Verdict::Optimal,
          "Grace system: the GPU reaches the PCIe root over NVLink-C2C, so a root-complex path is the designed one",
          "export NCCL_DMABUF_ENABLE=1   # dma-buf is the supported GPUDirect RDMA path on Grace");
      return;
    }
    if (p.cls == PathClass::SYS)
      sys_rules(r.findings, r, kind);
    else
      phb_rules(r.findings, p, kind);  // PHB or NODE: through the root complex
  }

  void sys_rules(std::vector<Finding>& out, const PairResult& r, PairKind kind) {
    const std::string& rcname = rcname_;
    std::string_view cs = rc_ ? std::string_view(rc_->cross_socket) : "";
    Verdict v = Verdict::Degraded;
    if (cs == "unsupported") v = kind == PairKind::GpuGpu ? Verdict::Blocked : Verdict::Unreliable;
    std::string fix;
    if (kind == PairKind::GpuNic) {
      // The closest NIC (PIX before PXB before PHB before NODE), the first by index among equals.
      int gpu = r.a, best = -1;
      PathClass best_class = PathClass::SYS;
      for (int n : rep_.nics) {
        PathClass q = rep_.path_class(gpu, n);
        if (q < best_class) {
          best = n;
          best_class = q;
        }
      }
      if (best >= 0) {
        const Device& n = t_.devices[best];
        fix = "# use " + label(best) + " (" + n.bdf + (n.rdma_name.empty() ? "" : ", " + n.rdma_name) + ", " + to_string(best_class) +
              ") for " + r.label_a + " instead, e.g. NCCL_IB_HCA or the rank's NIC binding";
      }
      if (fix.empty()) fix = "# put a NIC on NUMA node " + std::to_string(t_.devices[gpu].numa) + " (the GPU's socket)";
    } else if (kind == PairKind::GpuGpu) {
      fix = "# keep P2P peers on one socket, e.g. CUDA_VISIBLE_DEVICES listing GPUs of one NUMA node";
    } else {
      fix = "# place the NVMe drive on the GPU's socket (NUMA node " + std::to_string(t_.devices[r.a].numa) + ")";
    }
    std::string why = "path crosses the inter-socket interconnect (SYS)";
    if (cs == "unsupported")
      why += "; " + rcname + " does not carry PCIe peer-to-peer across sockets";
    else if (cs == "slow")
      why += "; peer-to-peer across sockets is slow on " + rcname;
    else
      why += "; cross-socket peer-to-peer is unknown for " + rcname;
    add(out, "path-sys", v, std::move(why), std::move(fix));
  }

  void phb_rules(std::vector<Finding>& out, const PathInfo& p, PairKind kind) {
    const std::string& rcname = rcname_;
    std::string where =
        p.cls == PathClass::PHB ? "through the CPU root complex (PHB)" : "between PCIe host bridges of one NUMA node (NODE)";
    if (p.numa_guessed) where += " (NUMA locality not in this input: NODE assumed, could be SYS)";
    std::string_view rcq = rc_ ? std::string_view(rc_->p2p) : "";
    if (rcq == "unsupported") {
      add(out, "path-root-complex", Verdict::Blocked, "path " + where + "; " + rcname + " does not forward PCIe peer-to-peer",
          "# put both devices under one PCIe switch");
      return;
    }
    if (rcq == "poor") {
      add(out, "path-root-complex", Verdict::Unreliable,
          "path " + where + "; " + rcname + " forwards peer-to-peer poorly" + (rc_->note.empty() ? "" : " (" + rc_->note + ")"),
          "# put both devices under one PCIe switch");
      return;
    }
    if (kind == PairKind::GpuNic) {
      std::string why = "path " + where + ": NCCL leaves GPUDirect RDMA off beyond PXB by default";
      std::string fix =
          rcq == "good" ? "export NCCL_NET_GDR_LEVEL=PHB   # " + rcname + " forwards P2P well"
                        : "# root complex of " + rcname +
                              " is not in topology/root_complexes.json: measure with `gdrpeer verify` before export NCCL_NET_GDR_LEVEL=PHB";
      add(out, "path-root-complex", Verdict::Degraded, std::move(why), std::move(fix));
    } else if (rcq != "good") {
      add(out, "path-root-complex", Verdict::Degraded,
          "path " + where + "; peer-to-peer through the root complex of " + rcname + " is unverified (not in topology/root_complexes.json)",
          "# measure with `gdrpeer verify`, then add the CPU to topology/root_complexes.json");
    }
  }

  void acs_rules(PairResult& r) {
    const PathInfo& p = r.path;
    if (p.cls != PathClass::PIX && p.cls != PathClass::PXB) return;  // traffic goes up anyway
    std::vector<int> bad;
    std::string list;  // ports whose ACS state the input does not carry
    for (const std::vector<int>* side : {&p.ports_a, &p.ports_b})
      for (int x : *side) {
        const Device& d = t_.devices[x];
        if (!d.acs_known)
          list += (list.empty() ? "" : ", ") + d.bdf;
        else if (d.acs_present && (d.acs_ctl & acs::kRedirectMask))
          bad.push_back(x);
      }
    for (int x : bad) {
      const Device& d = t_.devices[x];
      add(r.findings, "acs-redirect", Verdict::Unreliable,
          "ACS " + acs_flags(d.acs_ctl) + " on " + d.bdf + " (" + to_string(d.port) +
              "): peer-to-peer requests are redirected up to the root complex (and fault under a translating IOMMU)",
          "setpci -s " + d.bdf + " ECAP_ACS+0x6.w=0000:002c   # now; at boot: pci=disable_acs_redir=" + d.bdf +
              " (or pci=config_acs=0x00xx@" + d.bdf + " on Linux >= 6.11)");
    }
    if (!list.empty() && !skipped("acs-unknown")) {
      add(r.findings, "acs-unknown", Verdict::Optimal, "ACS state of " + list + " is not in this input", "");
    }
  }

  void iommu_rules(PairResult& r, const Device& d) {
    const std::string& ty = d.iommu_type;
    if (ty.rfind("DMA", 0) != 0) return;
    bool amd = t_.cpu.vendor == "AuthenticAMD";
    add(r.findings, "iommu-translating", Verdict::Blocked,
        "IOMMU group " + std::to_string(d.iommu_group) + " of " + d.bdf + " is translating (type " + ty +
            "): peer DMA to GPU BAR addresses faults unless every mapping goes through the IOMMU; GPUDirect RDMA needs the IOMMU off or in "
            "passthrough",
        std::string("# add to the kernel command line: ") + (amd ? "amd_iommu=on iommu=pt" : "intel_iommu=on iommu=pt") +
            "   (or at run time, drivers unbound: echo identity > /sys/kernel/iommu_groups/" + std::to_string(d.iommu_group) + "/type)");
  }

  void link_check(PairResult& r, int x) {
    const Device& d = t_.devices[x];
    if (!d.link_cap.known() || !d.link_sta.known() || d.link_sta.width == 0) return;
    const Device* up = d.parent >= 0 ? &t_.devices[d.parent] : nullptr;
    // A device's LnkSta describes its upstream link, except on downstream/root
    // ports where it is the link below; both ends cap the trained link.
    int want_w = d.link_cap.width;
    double want_s = d.link_cap.speed_gts;
    if (up && up->link_cap.known() && (d.port != PortType::RootPort && d.port != PortType::SwitchDownstream)) {
      if (up->link_cap.width > 0) want_w = std::min(want_w, up->link_cap.width);
      if (up->link_cap.speed_gts > 0) want_s = std::min(want_s, up->link_cap.speed_gts);
    }
    // A root or downstream port's link is the one to the device below it: an x8 NIC in an x16
    // slot trains at x8, and so does the port (issue 28: it was called downtrained).
    const Device* gpu_below = nullptr;  // the GPU at the other end of a port's link
    if (d.port == PortType::RootPort || d.port == PortType::SwitchDownstream)
      for (int c : d.children) {
        const Link& below = t_.devices[c].link_cap;
        if (below.width > 0) want_w = std::min(want_w, below.width);
        if (below.speed_gts > 0) want_s = std::min(want_s, below.speed_gts);
        if (t_.devices[c].role == Role::GPU) gpu_below = &t_.devices[c];
      }
    if (want_w > 0 && d.link_sta.width < want_w) {
      add(r.findings, "link-width", Verdict::Degraded,
          "link of " + d.bdf + " trained at x" + std::to_string(d.link_sta.width) + " below its x" + std::to_string(want_w) + " capability",
          "# reseat the card / check the slot wiring and riser; then: lspci -vvv -s " + d.bdf + " | grep LnkSta");
    }
    if (want_s > 0 && d.link_sta.speed_gts > 0 && d.link_sta.speed_gts + 0.01 < want_s) {
      if (d.role == Role::GPU) {
        add(r.findings, "link-speed-idle", Verdict::Optimal,
            "GPU " + d.bdf + " link at " + fmt_speed(d.link_sta.speed_gts) + " of " + fmt_speed(want_s) +
                ": GPUs lower the link speed when idle; recheck while it is busy",
            "# under load: lspci -vvv -s " + d.bdf + " | grep LnkSta");
      } else if (gpu_below) {
        // Both ends of a link read the one trained speed: the port above an idle GPU reads the
        // GPU's lowered speed too (the width does not change, so a narrower link stays a finding).
        add(r.findings, "link-speed-idle", Verdict::Optimal,
            "link of " + d.bdf + " to GPU " + gpu_below->bdf + " at " + fmt_speed(d.link_sta.speed_gts) + " of " + fmt_speed(want_s) +
                ": GPUs lower the link speed when idle; recheck while it is busy",
            "# under load: lspci -vvv -s " + d.bdf + " | grep LnkSta");
      } else {
        add(r.findings, "link-speed", Verdict::Degraded,
            "link of " + d.bdf + " trained at " + fmt_speed(d.link_sta.speed_gts) + " below its " + fmt_speed(want_s) + " capability",
            "# check BIOS PCIe speed settings and signal integrity (risers, retimers); then: lspci -vvv -s " + d.bdf + " | grep LnkSta");
      }
    }
  }

  void link_rules(PairResult& r) {
    link_check(r, r.a);
    link_check(r, r.b);
    for (int x : r.path.ports_a) link_check(r, x);
    for (int x : r.path.ports_b) link_check(r, x);
    if (r.path.lca >= 0) link_check(r, r.path.lca);
  }

  void bar_rules(PairResult& r, const Device& g) {
    if (!nvidia_by_ids(g) || k_.min_bar1_bytes == 0) return;
    for (const auto& b : g.bars)
      if (b.index == 1 && b.size > 0 && b.size < k_.min_bar1_bytes) {
        add(r.findings, "bar1-small", Verdict::Degraded,
            "BAR1 of " + g.bdf + " is " + fmt_bytes(b.size) + ": GPUDirect RDMA can map at most that much GPU memory at a time",
            "# enable 'Above 4G Decoding' and 'Resizable BAR' in the BIOS, then check: lspci -vvv -s " + g.bdf + " | grep 'Region 1'");
      }
  }

  static bool nvidia(const Device& d) { return d.ids_known ? d.vendor == 0x10de : d.name.find("NVIDIA") != std::string::npos; }

  static Verdict platform_verdict(const PlatformRule& p) {
    return p.severity == "blocked" ? Verdict::Blocked : p.severity == "unreliable" ? Verdict::Unreliable : Verdict::Degraded;
  }

  // Whether a platform rule's node conditions (arch, CPU, DMI) that it gives all hold. GPU
  // families are checked per GPU by the caller. Every rule has a condition: the rule-data loader
  // refuses one without (rule_data.cpp), and an integrated-gpu rule without a node condition.
  bool platform_matches(const PlatformRule& p) const {
    bool ok = true;
    if (!p.arch.empty()) ok = ok && t_.cpu.arch == p.arch;
    if (!p.cpu_patterns.empty()) ok = ok && contains_any(t_.cpu.model_name, p.cpu_patterns);
    if (!p.dmi_patterns.empty()) ok = ok && contains_any(dmi_, p.dmi_patterns);
    return ok;
  }

  void platform_rules(PairResult& r, PairKind kind, int gi) {
    const GpuFamilyMatch& fam = families_[static_cast<size_t>(gi)];
    for (size_t i = 0; i < k_.platforms.size(); ++i) {
      const PlatformRule& p = k_.platforms[i];
      if (p.applies_to == "integrated-gpu") continue;  // node-wide, see node_platform_rules
      if (p.applies_to == "gpu-nic" && kind == PairKind::GpuGpu) continue;
      bool ok = platform_node_[i];
      if (!p.gpu_families.empty())
        ok = ok && fam.family && std::find(p.gpu_families.begin(), p.gpu_families.end(), fam.family->family) != p.gpu_families.end();
      if (!ok) continue;
      std::string why = p.reason;
      if (!p.gpu_families.empty()) why += fam.provenance();
      add(r.findings, p.id, platform_verdict(p), std::move(why), p.fix);
    }
    if (t_.cpu.arch == "aarch64" && !grace_ && !(rc_ && rc_->p2p == "good")) {
      add(r.findings, "platform-arm64", Verdict::Unreliable, "ARM64 server whose root complex has no known peer-to-peer guarantee",
          "# confirm with `gdrpeer verify` on this node, then add the CPU to topology/root_complexes.json");
    }
    if (virtual_) {
      bool flat = r.path.cls == PathClass::PHB && r.path.ports_a.empty() && r.path.ports_b.empty();
      if (flat && kind == PairKind::GpuGpu && !t_.nvlink_known && nvidia(t_.devices[r.a]) && nvidia(t_.devices[r.b])) {
        // Two NVIDIA GPUs may well reach each other over NVLink, which this input cannot say:
        // what is known is the (virtual) PCIe path; a verdict would guess.
        add(r.findings, "platform-virtual", Verdict::Optimal,
            "virtual machine with a flat virtual PCIe topology: both GPUs sit on the hypervisor's root bus, the physical PCIe path is "
            "hidden; "
            "NVLink between them is unknown (" +
                std::string(t_.nvml_failed ? "NVML could not be asked" : "not in this input") +
                "), so whether peer-to-peer goes over NVLink or PCIe is not known",
            "nvidia-smi topo -m   # on the node: NV# means NVLink; or gdrpeer verify --p2p");
      } else if (flat) {
        add(r.findings, "platform-virtual", Verdict::Unreliable,
            "virtual machine with a flat virtual PCIe topology: both devices sit on the hypervisor's root bus, the physical path is hidden",
            "export NCCL_TOPO_FILE=/path/to/<instance-type>-topo.xml   # the cloud provider's topology file");
      } else {
        add(r.findings, "platform-virtual", Verdict::Optimal,
            t_.placeholder_switches ? "topology declared by a provider file with placeholder switches, not observed hardware"
                                    : "virtual machine: the classes reflect the PCIe topology the hypervisor exposes",
            "");
      }
    }
  }

  // Platforms whose GPU is integrated (not on PCI, so in no pair): Jetson. A
  // node finding when no discrete NVIDIA GPU was found; with one (IGX Orin
  // with an RTX card) its pairs are judged as usual and only a note remains.
  void node_platform_rules(Report& rep) {
    bool discrete = false;
    for (int g : rep.gpus)
      discrete = discrete || (t_.devices[g].ids_known ? t_.devices[g].vendor == 0x10de : k_.vendor_from_name(t_.devices[g].name) == 0x10de);
    for (size_t i = 0; i < k_.platforms.size(); ++i) {
      const PlatformRule& p = k_.platforms[i];
      if (p.applies_to != "integrated-gpu" || skipped(p.id)) continue;
      if (!platform_matches(p)) continue;  // (the loader made sure it gives a node field)
      std::string plat = t_.dmi_vendor;
      if (!t_.dmi_product.empty()) plat += (plat.empty() ? "" : " ") + t_.dmi_product;
      const std::string where = "platform " + (plat.empty() ? t_.cpu.model_name : plat);
      if (discrete) {
        rep.node_findings.push_back(Finding{
            p.id, Verdict::Optimal,
            where + ": its integrated GPU is not checked (not a PCI device); the discrete NVIDIA GPU(s) above are judged as on any server",
            ""});
        continue;
      }
      const Verdict v = platform_verdict(p);
      rep.node_findings.push_back(Finding{p.id, v, where + ": " + p.reason, p.fix});
      rep.worst = std::max(rep.worst, v);
    }
  }

 private:
  const Topology& t_;
  const RuleData& k_;
  const CheckOptions& o_;
  const Report& rep_;
};

}  // namespace

Report check(const Topology& t, const RuleData& k, const CheckOptions& opt) {
  Report rep;
  std::vector<int> order(t.devices.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
  std::sort(order.begin(), order.end(), [&](int a, int b) { return t.devices[a].bdf < t.devices[b].bdf; });
  rep.labels.assign(t.devices.size(), "");
  for (int i : order) {
    const Device& d = t.devices[i];
    if (d.role == Role::GPU) {
      rep.labels[i] = "GPU" + std::to_string(rep.gpus.size());
      rep.gpus.push_back(i);
    } else if (d.role == Role::NIC) {
      rep.labels[i] = "NIC" + std::to_string(rep.nics.size());
      rep.nics.push_back(i);
    } else if (d.role == Role::NVMe) {
      rep.labels[i] = "NVME" + std::to_string(rep.nvmes.size());
      rep.nvmes.push_back(i);
    }
  }
  std::vector<int> labelled = rep.gpus;
  labelled.insert(labelled.end(), rep.nics.begin(), rep.nics.end());
  labelled.insert(labelled.end(), rep.nvmes.begin(), rep.nvmes.end());
  PathInfo path;
  for (size_t i = 0; i < labelled.size(); ++i)
    for (size_t j = i + 1; j < labelled.size(); ++j) {
      const int a = labelled[i], b = labelled[j];
      classify(t, a, b, k, path);
      rep.classes.emplace(std::minmax(a, b), path.cls);
    }
  Checker c(t, k, opt, rep);
  // NVSwitches on the bus stand in for a link list only where no input said which links there
  // are: NVML answering with no active link (nvlink_known) means peer traffic takes PCIe.
  const bool nvswitch_on_bus = opt.gpu_gpu && rep.gpus.size() > 1 && t.nvlinks.empty() && !t.nvlink_known && nvswitch_on_pci_bus(t);
  // No link data at all (NVML not asked or failing, lspci, sysfs copies): GPUs that ship
  // only on NVLink baseboards are NVLink-connected to each other.
  const bool model_inference = opt.gpu_gpu && rep.gpus.size() > 1 && t.nvlinks.empty() && !t.nvlink_known;
  bool inferred_from_model = false;
  auto run = [&](int a, int b, PairKind kind) {
    PairResult r;
    r.a = a;
    r.b = b;
    r.path = classify(t, a, b, k);
    if (kind == PairKind::GpuGpu) {
      r.nvlink = nvlink_between(t, a, b, nvswitch_on_bus);
      if (!r.nvlink.linked && model_inference && k.nvlink_baseboard_part(t.devices[a]) && k.nvlink_baseboard_part(t.devices[b])) {
        r.nvlink.linked = r.nvlink.inferred = true;
        r.nvlink.inferred_from = "gpu-model";
        inferred_from_model = true;
      }
    }
    r.label_a = rep.labels[a];
    r.label_b = rep.labels[b];
    c.pair(r, kind);
    rep.worst = std::max(rep.worst, r.verdict);
    rep.pairs.push_back(std::move(r));
  };
  const size_t gpus = rep.gpus.size();
  rep.pairs.reserve((opt.gpu_nic ? gpus * rep.nics.size() : 0) + (opt.gpu_gpu && gpus > 1 ? gpus * (gpus - 1) / 2 : 0) +
                    (opt.gpu_nvme ? gpus * rep.nvmes.size() : 0));
  for (size_t i = 0; i < rep.gpus.size(); ++i) {
    if (opt.gpu_nic)
      for (int n : rep.nics) run(rep.gpus[i], n, PairKind::GpuNic);
    if (opt.gpu_gpu)
      for (size_t j = i + 1; j < rep.gpus.size(); ++j) run(rep.gpus[i], rep.gpus[j], PairKind::GpuGpu);
    if (opt.gpu_nvme)
      for (int n : rep.nvmes) run(rep.gpus[i], n, PairKind::GpuNvme);
  }
  auto note = [&](const std::string& rule, const std::string& text, const std::string& fix = "") {
    if (!c.skipped(rule)) rep.node_findings.push_back(Finding{rule, Verdict::Optimal, text, fix});
  };
  if (rep.gpus.empty())
    note("no-gpu", "no GPU found in " + t.source + ": nothing to check (use --role GPU=BDF for a device the tables do not know)");
  else if (rep.nics.empty() && opt.gpu_nic)
    note("no-nic", "no RDMA NIC found in " + t.source + ": GPUDirect RDMA pairs not checked (use --role NIC=BDF)");
  if (t.iommu == IommuMode::Unknown && !t.iommu_known_per_device)
    note("iommu-unknown", "IOMMU state is not in this input (" + t.format +
                              "): check /sys/kernel/iommu_groups/*/type on the node or run gdrpeer check there");
  else if (t.iommu != IommuMode::Unknown)
    note("iommu-mode", std::string("IOMMU: ") + to_string(t.iommu) + iommu_cmdline_text(t.sw));
  else  // groups exist (an IOMMU is active), but no group's type names the mode: VFIO's "unmanaged", or no type file
    note("iommu-mode", "IOMMU: on, its mode named by no /sys/kernel/iommu_groups/*/type" + iommu_cmdline_text(t.sw));
  if (!t.sw.inspected)
    note("software-unknown", "software stack (nvidia, nvidia_peermem, dma-buf) not inspected for " + t.format + " input");
  if (t.sw.inspected && !t.sw.cuda_error.empty()) note("software-cuda", "CUDA probe: " + t.sw.cuda_error);
  if (t.format == "sysfs" && !t.sw.cuda_probed) {  // live: what --cuda would add
    bool nvidia = false;
    for (int g : rep.gpus) nvidia = nvidia || nvidia_by_ids(t.devices[g]);
    if (nvidia)
      note("software-cuda", nvidia_driver_summary(t.sw.nvidia_version) +
                                "; CUDA's GPU_DIRECT_RDMA_SUPPORTED and DMA_BUF_SUPPORTED not asked (gdrpeer check --cuda asks; cuInit "
                                "takes ~0.25 s per GPU)");
  }
  for (const auto& g : t.sw.cuda)
    note("software-cuda", "CUDA on " + g.bdf + ": GPU_DIRECT_RDMA_SUPPORTED=" + std::to_string(g.gdr_supported) +
                              " DMA_BUF_SUPPORTED=" + std::to_string(g.dmabuf_supported));
  if (!c.rc_ && !rep.gpus.empty())
    note("root-complex-unknown", t.cpu.vendor.empty() && t.cpu.model_name.empty()
                                     ? "CPU identity is not in this input: root-complex P2P quality unknown"
                                     : "CPU " +
                                           (t.cpu.model_name.empty() ? t.cpu.vendor + " family " + std::to_string(t.cpu.family) +
                                                                           " model " + std::to_string(t.cpu.model)
                                                                     : t.cpu.model_name) +
                                           " is not in topology/root_complexes.json: root-complex P2P quality unknown");
  for (const auto& n : t.notes) note("input", n);
  if (!t.nvml_note.empty()) note("nvlink-nvml", t.nvml_note);
  if (inferred_from_model)
    note("nvlink-inferred",
         "NVLink inferred from the GPU model for GPU pairs of SXM/HGX parts (topology/gpus.json nvlink_baseboards): "
         "no input here lists NVLinks; nvidia-smi topo -m or gdrpeer verify --p2p on the node confirms");
  if (!t.nvlink_known && !t.nvml_failed) {  // (a failed NVML has its own note, nvlink-nvml)
    // GPU pairs judged on PCIe alone where NVLink may carry the traffic: say so.
    bool pcie_problem = false;
    for (const auto& p : rep.pairs)
      pcie_problem =
          pcie_problem ||
          (!p.nvlink.linked && p.verdict != Verdict::Optimal && t.devices[p.a].role == Role::GPU && t.devices[p.b].role == Role::GPU &&
           (t.devices[p.a].ids_known ? t.devices[p.a].vendor == 0x10de : t.devices[p.a].name.find("NVIDIA") != std::string::npos));
    if (pcie_problem)
      note("nvlink-unknown", "NVLink is not in this input (" + t.format +
                                 "): GPU-GPU verdicts judge the PCIe path; GPUs that NVLink or NVSwitch connect do peer-to-peer over it "
                                 "instead (nvidia-smi topo -m shows NV#)");
  }
  rep.virtual_machine = c.virtual_;
  if (!c.emulated_.empty())
    note("platform-virtual",
         "virtual machine: " + c.emulated_ +
             " is emulated hardware; BIOS, ACS and kernel settings named in fixes belong to the host, which the provider controls");
  c.node_platform_rules(rep);
  root_port_rules(t, opt, rep);
  stack_stage(t, k, opt, rep);
  readiness_stage(t, k, opt, rep);
  // Last: the node verdict reads every finding above.
  judge_node(t, opt, rep);
  return rep;
}

const char* to_string(Verdict v) {
  switch (v) {
    case Verdict::Optimal: return "optimal";
    case Verdict::Degraded: return "degraded";
    case Verdict::Unreliable: return "unreliable";
    case Verdict::Blocked: return "blocked";
  }
  return "?";
}

int Report::exit_code() const {
  if (node.incomplete) return 3;
  switch (node.verdict) {
    case Verdict::Optimal: return 0;
    case Verdict::Degraded:
    case Verdict::Unreliable: return 1;
    case Verdict::Blocked: return 2;
  }
  return 2;
}

}  // namespace gdrpeer::topo

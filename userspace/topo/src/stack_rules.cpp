// The stack stage of check(): after the PCIe rules, judge what sits above them.
// Node findings: the NVIDIA driver (flavour, version, GPUDirect parameters),
// configured-but-not-active module options, the override's security cost, peer
// clients as registered (and which consumer sees which), why a peer-memory module
// did not load. Per GPU x NIC: the exporter's gate and each consumer's decision.
#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <set>
#include <utility>
#include <vector>

#include "gdrpeer/topo/stack.hpp"
#include "stack_internal.hpp"

namespace gdrpeer::topo {

namespace {

using stack::NodeFacts;
using stack::PairFacts;
using stack::Tri;

// The parameters that decide GPUDirect (nv-reg.h; PeerMappingOverride and RMForceStaticBar1 are RM registry keys).
constexpr const char* kGdrParams[] = {"GrdmaPciTopoCheckOverride", "DmaRemapPeerMmio",   "EnableStreamMemOPs",   "PeerMappingOverride",
                                      "RMForceStaticBar1",         "EnableResizableBar", "CoherentGPUMemoryMode"};

// Which consumer recognises a peer client name, from their sources (stack_consumers.cpp).
std::string consumers_seeing(const std::string& name) {
  std::string s;
  if (name == "nv_mem" || name == "nv_mem_nc") s += "NCCL";
  if (name == "nv_mem" || name == "nvidia-peermem") s += std::string(s.empty() ? "" : ", ") + "NVSHMEM";
  if (name == "nv_mem") s += ", UCX";
  return s;
}

// How the running driver lists a parameter decides its type: nv-procfs.c nv_procfs_read_params()
// prints every nv_parms entry "%s: %u" (NvU32 options, module_param(x, int, 0): nv-reg.h
// NV_DEFINE_REG_ENTRY, nv-linux.h NV_MODULE_PARAMETER), then the charp options quoted
// (NV_DEFINE_REG_STRING_ENTRY: these names, 515.43.04 to 595.45.04). The quotes are gone once read:
// an integer is a listed name not among the charp ones whose running value is a decimal number.
constexpr const char* kCharpParams[] = {"CoherentGPUMemoryMode", "RegistryDwords", "RegistryDwordsPerDevice", "RmMsg", "GpuBlacklist",
                                        "TemporaryFilePath",     "ExcludedGpus"};

// lib/kstrtox.c kstrtoint(s, 0, &v), which the kernel's param_set_int runs on an integer
// option's value (a NUL-terminated string, read here the same way): one optional sign ('-' or
// '+'), then base 16 after "0x"/"0X", base 8 after a leading 0, else base 10; at least one digit and
// nothing after them (a trailing newline cannot stand in a modprobe.d option); the value must fit an
// int. The kernel takes "0x" as a prefix only before a hex digit; otherwise the 0 is octal and the
// x left over, refused as well. false where the kernel refuses the value (-EINVAL, -ERANGE).
bool kernel_int(const std::string& value, long long& out) {
  constexpr unsigned long long kBeyondInt = 1ULL << 32;  // any magnitude past int's range, kept from growing
  const char* s = value.c_str();
  const bool negative = *s == '-';
  if (negative || *s == '+') ++s;
  unsigned base = 10;
  if (*s == '0') base = std::tolower(static_cast<unsigned char>(s[1])) == 'x' ? 16 : 8;
  if (base == 16) s += 2;
  const char* const first = s;
  unsigned long long v = 0;
  for (;; ++s) {
    const int c = std::tolower(static_cast<unsigned char>(*s));
    const unsigned digit = std::isdigit(c) ? static_cast<unsigned>(c - '0') : std::isxdigit(c) ? static_cast<unsigned>(c - 'a' + 10) : base;
    if (digit >= base) break;
    v = std::min(v * base + digit, kBeyondInt);
  }
  if (s == first || *s != '\0') return false;
  if (v > (negative ? 2147483648ULL : 2147483647ULL)) return false;
  out = negative ? -static_cast<long long>(v) : static_cast<long long>(v);
  return true;
}

// The configured integer as the driver stores it (an NvU32 variable written as an int) against the
// running value the params file prints ("%u").
bool same_integer(long long configured, const std::string& running) {
  return static_cast<uint32_t>(configured) == std::strtoull(running.c_str(), nullptr, 10);
}

bool integer_param(const std::string& name, const std::string& running) {
  for (const char* c : kCharpParams)
    if (name == c) return false;
  return !running.empty() && running.find_first_not_of("0123456789") == std::string::npos;
}

// The one nv_parms entry listed under another name than its module parameter's
// (NV_DEFINE_PARAMS_TABLE_ENTRY_CUSTOM_NAME, 515.43.04 to 595.45.04): the params file's
// RmProfilingAdminOnly is the option NVreg_RestrictProfilingToAdminUsers; NVreg_RmProfilingAdminOnly
// is no parameter of the module (the kernel ignores it: "unknown parameter ... ignored").
std::string listed_name(const std::string& option) {
  if (option == "RestrictProfilingToAdminUsers") return "RmProfilingAdminOnly";
  if (option == "RmProfilingAdminOnly") return "";
  return option;
}

bool kernel_ge(const std::string& rel, int maj, int min) {
  int a = 0, b = 0;
  if (std::sscanf(rel.c_str(), "%d.%d", &a, &b) != 2) return false;
  return a > maj || (a == maj && b >= min);
}

const char* kOverrideCost =
    "security trade-off: the driver then lets a NIC map GPU memory on a topology it does not vouch for and ignores IOMMU-group "
    "isolation for GPU memory; prefer moving GPU and NIC under one PCIe switch";

std::string gate_fix(const GateAnswer& g) {
  if (g.why.find("proprietary") != std::string::npos)
    return "# install the open NVIDIA kernel module (e.g. nvidia-driver-<ver>-open, or nvidia-open), or register GPU memory through peer "
           "memory: modprobe nvidia_peermem";
  if (g.why.find("=2") != std::string::npos)
    return "# remove NVreg_GrdmaPciTopoCheckOverride=2 from /etc/modprobe.d and reload the nvidia module";
  if (g.why.find("coherent platform") != std::string::npos)
    return "# the PCIe mapping type exists only on coherent (Grace) platforms: register with the default mapping type";
  // Refusals no override lifts (stack_gate.cpp's older and newer drivers).
  if (g.why.find("has no PCIe mapping type") != std::string::npos)
    return "# the PCIe mapping type (FORCE_PCIE) came with NVIDIA driver 570.86.15: upgrade the driver, or register with the default "
           "mapping type";
  if (g.why.find("whatever NVreg_GrdmaPciTopoCheckOverride says") != std::string::npos)
    return "# from driver 595.44.02 the PCIe mapping type needs GPU and NIC in one IOMMU group, and NVreg_GrdmaPciTopoCheckOverride no "
           "longer lifts that: register with the default mapping type";
  return std::string("echo 'options nvidia NVreg_GrdmaPciTopoCheckOverride=1' > /etc/modprobe.d/gdr-override.conf   # ") + kOverrideCost;
}

class StackStage {
 public:
  StackStage(const Topology& t, const RuleData& k, const CheckOptions& o, Report& rep) : t_(t), k_(k), o_(o), rep_(rep) {}

  void run() {
    facts();
    node_rules();
    for (auto& pr : rep_.pairs) {
      const Device& a = t_.devices[pr.a];
      const Device& b = t_.devices[pr.b];
      if (a.role != Role::GPU || b.role != Role::NIC) continue;
      // NVIDIA GPUs only: by id, else by the name the input gives (lspci -tv), else NCCL's <gpu>.
      const bool nvidia = a.ids_known ? a.vendor == 0x10de : k_.vendor_from_name(a.name) == 0x10de;
      if (!nvidia && t_.sw.stack.nccl_gpu_gdr.count(pr.a) == 0) continue;
      pair_rules(pr);
      for (const auto& f : pr.findings) pr.verdict = std::max(pr.verdict, f.severity);
    }
    // iommu_split may lower a pair's verdict: the node's worst is computed again.
    rep_.worst = Verdict::Optimal;
    for (const auto& f : rep_.node_findings) rep_.worst = std::max(rep_.worst, f.severity);
    for (const auto& pr : rep_.pairs) rep_.worst = std::max(rep_.worst, pr.verdict);
  }

 private:
  const Topology& t_;
  const RuleData& k_;
  const CheckOptions& o_;
  Report& rep_;
  NodeFacts n_;
  std::map<int, bool> grace_c2c_;  // per GPU device index: of the grace-c2c family
  GateInput node_gate_;
  // Pairs that look the same to the gate and the consumers get the same answers: computed once
  // (a fleet of hwloc dumps has ~100 GPU x NIC pairs per node and few distinct keys).
  std::map<std::pair<uint64_t, std::string>, std::shared_ptr<const PairStack>> memo_;

  bool skipped(const std::string& rule) const {
    if (o_.skip.count(rule)) return true;
    size_t dash = rule.find('-');
    return dash != std::string::npos && o_.skip.count(rule.substr(0, dash));
  }
  void node(const std::string& rule, Verdict v, std::string text, std::string fix = "") {
    if (skipped(rule)) return;
    rep_.node_findings.push_back(Finding{rule, v, std::move(text), std::move(fix)});
    rep_.worst = std::max(rep_.worst, v);
  }
  void add(PairResult& r, const std::string& rule, Verdict v, std::string reason, std::string fix) {
    if (skipped(rule)) return;
    for (const auto& f : r.findings)
      if (f.rule == rule && f.reason == reason) return;
    r.findings.push_back(Finding{rule, v, std::move(reason), std::move(fix)});
  }

  void facts() {
    node_gate_ = node_gate();
    const Software& sw = t_.sw;
    const StackState& s = sw.stack;
    n_.inspected = sw.inspected;
    n_.kernel = sw.kernel_release;
    // An input that is no inspection of the node (hwloc, NCCL XML, lspci) knows at most the kernel
    // release: RDMA dma-buf stays unknown there. The release says whether ib_core has the dma-buf
    // MR method (Linux 5.12), but uverbs_std_types_mr.c UVERBS_METHOD_REG_DMABUF_MR answers
    // -EOPNOTSUPP unless the NIC's RDMA driver implements reg_user_mr_dmabuf, and such a dump names
    // neither the driver bound to the NIC nor the loaded modules.
    if (!sw.inspected) return;
    // Without the memory_peers directory in the input a loaded peer module may or may not
    // have registered (a live node without it has none: ib_core is the kernel's own).
    const bool peer_module = sw.has_module("nvidia_peermem") || sw.has_module("nv_peer_mem");
    auto reg = [&](const char* name) -> Tri {
      if (!sw.memory_peers_dir) return peer_module && t_.source != "live sysfs" ? -1 : 0;
      const PeerClient* c = s.client(name);
      return c && c->has_version ? 1 : 0;
    };
    n_.mp_nv_mem = reg("nv_mem");
    n_.mp_nv_mem_nc = reg("nv_mem_nc");
    n_.mp_nvidia_peermem = reg("nvidia-peermem");
    if (sw.modules_known) {
      n_.mod_nvidia_peermem = (s.peermem_sysfs || sw.has_module("nvidia_peermem")) ? 1 : 0;
      n_.mod_nv_peer_mem = sw.has_module("nv_peer_mem") ? 1 : 0;
    }
    // gdrpeer's client under its peermem_name while it serves no CUDA addresses: a consumer that
    // knows the name registers GPU memory through it and fails (docs/driver.md, the client's name).
    if (!s.gdrpeer_client.empty() && s.client(s.gdrpeer_client) && s.gdrpeer_cuda.rfind("not claimed", 0) == 0) {
      n_.unserved_client = s.gdrpeer_client;
      n_.unserved_why = s.gdrpeer_cuda;
    }
    int a = 0, b = 0;
    if (std::sscanf(sw.kernel_release.c_str(), "%d.%d", &a, &b) == 2) n_.kernel_dmabuf = kernel_ge(sw.kernel_release, 5, 12) ? 1 : 0;
    if (s.nvidia_version_known) n_.open_module = s.nvidia_open ? 1 : 0;
  }

  void node_rules() {
    const Software& sw = t_.sw;
    const StackState& s = sw.stack;
    if (!sw.inspected) return;
    bool nvidia_gpu = false;
    for (int g : rep_.gpus) nvidia_gpu = nvidia_gpu || (t_.devices[g].ids_known && t_.devices[g].vendor == 0x10de);
    // The driver and its GPUDirect parameters.
    if (s.params_known || s.nvidia_version_known) {
      std::string text = "NVIDIA driver " + (s.nvidia_version.empty() ? std::string("(version not read)") : s.nvidia_version) + " (" +
                         (!s.nvidia_version_known ? "flavour not read"
                          : s.nvidia_open         ? "open kernel module: exports dma-buf"
                                                  : "proprietary kernel module: no dma-buf export") +
                         ")";
      if (s.params_known) {
        text += "; GPUDirect parameters:";
        for (const char* p : kGdrParams) {
          std::string v = s.active_param(p);
          text += std::string(" ") + p + "=" + (v.empty() ? "(unset)" : v);
        }
        if (!s.registry_dwords.empty()) {
          text += "; RegistryDwords keys:";
          for (const auto& [key, v] : s.registry_dwords) text += " " + key + "=" + v;
        }
        for (const auto& [bdf, keys] : s.registry_per_device) {
          text += "; RegistryDwordsPerDevice " + (bdf.empty() ? std::string("(no pci=)") : bdf) + ":";
          for (const auto& [key, v] : keys) text += " " + key + "=" + v;
        }
      } else {
        text += "; /proc/driver/nvidia/params not in this input";
      }
      node("nvidia-driver", Verdict::Optimal, std::move(text));
      if (s.active_param("GrdmaPciTopoCheckOverride") == "1")
        node("nvidia-override", Verdict::Optimal,
             std::string("NVreg_GrdmaPciTopoCheckOverride=1 is active: every GPU x NIC topology passes the driver's dma-buf and nvidia_p2p "
                         "check; ") +
                 kOverrideCost,
             "# keep it only where GPU and NIC cannot share a switch; remove it from /etc/modprobe.d where they can");
    }
    pending_options();
    peer_clients(nvidia_gpu);
    log_causes();
  }

  // Module options that the next load would apply but the running driver does not have.
  void pending_options() {
    const StackState& s = t_.sw.stack;
    // nvidia_peermem's options against /sys/module/nvidia_peermem/parameters (when it is loaded).
    if (s.modprobe_read && s.peermem_sysfs) {
      std::map<std::string, const ModprobeOption*> pm;
      for (const auto& o : s.modprobe)
        if (o.module == "nvidia_peermem" && o.key != "(blacklist)") pm[o.key] = &o;
      for (const auto& [key, o] : pm) {
        auto it = s.peermem_params.find(key);
        if (it != s.peermem_params.end() && it->second != o->value)
          node("nvidia-params-pending", Verdict::Optimal,
               "nvidia_peermem " + key + "=" + o->value + " is configured (" + o->file + ":" + std::to_string(o->line) +
                   ") but the loaded module runs with " + key + "=" + it->second + ": it applies at the next load",
               "rmmod nvidia_peermem && modprobe nvidia_peermem   # no RDMA job may hold GPU memory registrations");
      }
    }
    if (!s.modprobe_read || !s.params_known) return;
    std::map<std::string, const ModprobeOption*> last;  // later files win
    std::map<std::string, std::pair<std::string, const ModprobeOption*>> dwords;
    for (const auto& o : s.modprobe) {
      if (o.module != "nvidia" || o.key.rfind("NVreg_", 0) != 0) continue;
      const std::string key = listed_name(o.key.substr(6));
      if (key == "RegistryDwords") {
        StackState tmp;
        parse_nvidia_params("RegistryDwords: \"" + o.value + "\"\n", tmp);
        for (const auto& [k, v] : tmp.registry_dwords) dwords[k] = {v, &o};
      } else {
        last[key] = &o;
      }
    }
    // option: as configured (NVreg_X); key: as the params file lists it.
    auto report = [&](const std::string& option, const std::string& key, const std::string& want, const ModprobeOption& o,
                      const std::string& active) {
      node("nvidia-params-pending", Verdict::Optimal,
           option + "=" + want + " is configured (" + o.file + ":" + std::to_string(o.line) + ") but the loaded nvidia module runs with " +
               key + "=" + (active.empty() ? "(unset)" : active) + ": it applies at the next driver load",
           "# reload the driver (stop GPU users; rmmod nvidia_peermem nvidia_uvm nvidia_drm nvidia_modeset nvidia; modprobe nvidia) or "
           "reboot; "
           "if nvidia loads from the initramfs, rebuild it first (update-initramfs -u / dracut -f)");
    };
    // An integer option the kernel cannot read fails the next load, wherever it stands among the options.
    std::set<std::string> failing;
    for (const auto& o : s.modprobe) {
      long long ignored = 0;
      if (o.module != "nvidia" || o.key.rfind("NVreg_", 0) != 0 || kernel_int(o.value, ignored)) continue;
      const std::string key = listed_name(o.key.substr(6));
      auto it = s.params.find(key);  // a name the driver does not list is no option of it: ignored
      if (!integer_param(key, it == s.params.end() ? std::string() : it->second)) continue;
      failing.insert(key);
      const std::string what = o.value.empty() ? o.key + " is configured without a value"
                                               : o.key + "=" + o.value + " is configured, which is no int the kernel reads (kstrtoint)";
      node("nvidia-params-invalid", Verdict::Unreliable,
           what + " (" + o.file + ":" + std::to_string(o.line) +
               "): it is an integer parameter of the nvidia module, and the kernel refuses the value: the next load of nvidia fails "
               "(kernel log: \"nvidia: `" +
               o.value + "' invalid for parameter `" + o.key + "'\") and the node has no NVIDIA driver until it is fixed",
           "# give " + o.key + " an integer value or remove it from " + o.file +
               "; if nvidia loads from the initramfs, rebuild it (update-initramfs -u / dracut -f)");
    }
    for (const auto& [key, o] : last) {
      auto it = s.params.find(key);
      if (it == s.params.end() || failing.count(key)) continue;  // not a parameter this driver lists, or it fails the load
      long long configured = 0;
      const bool differs = integer_param(key, it->second) && kernel_int(o->value, configured) ? !same_integer(configured, it->second)
                                                                                              : it->second != o->value;
      if (differs) report(o->key, key, o->value, *o, it->second);
    }
    for (const auto& [key, vo] : dwords) {
      auto it = s.registry_dwords.find(key);
      std::string active = it == s.registry_dwords.end() ? "" : it->second;
      if (active != vo.first) report("NVreg_RegistryDwords " + key, "RegistryDwords " + key, vo.first, *vo.second, active);
    }
  }

  void peer_clients(bool nvidia_gpu) {
    const Software& sw = t_.sw;
    const StackState& s = sw.stack;
    std::string list;
    for (const auto& c : s.peer_clients) {
      std::string who = consumers_seeing(c.name);
      list += (list.empty() ? "" : "; ") + c.name + (c.has_version ? " " + c.version : " (no version file)");
      auto mrs = c.counters.find("num_alloc_mrs");
      auto bytes = c.counters.find("num_reg_bytes");
      if (mrs != c.counters.end()) list += ", " + mrs->second + " MRs";
      if (bytes != c.counters.end()) list += ", " + bytes->second + " bytes registered";
      list += who.empty() ? ", seen by none of NCCL, NVSHMEM, UCX (they look for nv_mem, nv_mem_nc, nvidia-peermem)" : ", seen by " + who;
      if (c.name == s.gdrpeer_client && !s.gdrpeer_cuda.empty()) list += " (gdrpeer's client; CUDA addresses: " + s.gdrpeer_cuda + ")";
    }
    if (!s.peer_clients.empty())
      node("peer-clients", Verdict::Optimal, "peer-memory clients registered in /sys/kernel/mm/memory_peers: " + list);
    for (const auto& c : s.peer_clients)
      if (consumers_seeing(c.name).empty() && c.name != "nvidia-fs")
        node("peer-client-invisible", Verdict::Optimal,
             "peer-memory client '" + c.name +
                 "' works for ibv_reg_mr, but NCCL, NVSHMEM and UCX decide GDR from the names nv_mem / nv_mem_nc / nvidia-peermem and the "
                 "nvidia_peermem module: they report GPUDirect RDMA disabled through it (they still use dma-buf where they can)",
             c.name == "gdrpeer"
                 ? "rmmod gdrpeer && modprobe gdrpeer peermem_name=nv_mem   # where nvidia_peermem is not loaded; gdrpeer must serve CUDA "
                   "addresses (peermem_cuda=auto, the default) (docs/driver.md)"
                 : "");
    const bool loaded = sw.has_module("nvidia_peermem") || sw.has_module("nv_peer_mem");
    // Without the memory_peers directory a copy of sysfs cannot tell; the live node can (absent: none).
    if (loaded && !s.client("nv_mem") && !s.client("nv_mem_nc") && sw.modules_known && (sw.memory_peers_dir || t_.source == "live sysfs")) {
      node("peermem-unregistered", Verdict::Optimal,
           std::string(sw.has_module("nvidia_peermem") ? "nvidia_peermem" : "nv_peer_mem") +
               " is loaded but no nv_mem client is registered in /sys/kernel/mm/memory_peers" +
               (sw.memory_peers_dir ? "" : " (the directory is absent: ib_core is the kernel's own, without MOFED's PeerDirect)") +
               ": ibv_reg_mr of GPU memory will fail; NCCL and UCX still see /sys/module/nvidia_peermem and say GPUDirect RDMA is enabled",
           "# install MLNX_OFED / DOCA-OFED and rebuild nvidia_peermem against it (or use dma-buf: the open module, Linux >= 5.12, "
           "NCCL_DMABUF_ENABLE=1)");
    }
    if (s.peermem_sysfs && !s.peermem_params.empty()) {
      std::string p;
      for (const auto& [k, v] : s.peermem_params) p += (p.empty() ? "" : " ") + k + "=" + v;
      auto pa = s.peermem_params.find("persistent_api_support");
      std::string meaning = pa != s.peermem_params.end() && pa->second == "0" ? " (legacy: clients nv_mem and nv_mem_nc)"
                                                                              : " (client nv_mem, persistent pages)";
      node("peermem-params", Verdict::Optimal, "nvidia_peermem parameters: " + p + meaning);
    }
    (void)nvidia_gpu;
  }

  void log_causes() {
    const StackState& s = t_.sw.stack;
    for (const auto& c : s.log_causes) {
      std::string why, fix;
      if (c.kind == "symbol-version" && c.line.find("nvidia_p2p") != std::string::npos) {
        why = c.module + " was built against another NVIDIA driver than the one running (nvidia_p2p_* symbol CRC mismatch)";
        fix = "# rebuild " + c.module + " against the running NVIDIA driver (dkms autoinstall, or reinstall its package after the driver)";
      } else if (c.kind == "symbol-version") {
        why = c.module + " was built against another ib_core than the one running (symbol CRC mismatch)";
        fix = "# rebuild " + c.module +
              " against the running OFED: reinstall the NVIDIA driver's DKMS package (or the GPU operator's driver container) after "
              "MLNX_OFED/DOCA-OFED, "
              "and check that /usr/src/ofa_kernel/default points at $(uname -r)";
      } else if (c.kind == "unknown-symbol" && c.line.find("nvidia_p2p") != std::string::npos) {
        // The loader found no module exporting the NVIDIA driver's nvidia_p2p_* symbols.
        why = c.module + " found no nvidia_p2p_* symbols: the nvidia module was not loaded before it";
        fix = "modprobe nvidia && modprobe " + c.module +
              "   # or load it through the driver's own service (nvidia-persistenced, the GPU operator)";
      } else if (c.kind == "unknown-symbol") {
        why = c.module +
              " needs the PeerDirect API (ib_register_peer_memory_client), which only MLNX_OFED / DOCA-OFED's ib_core exports: OFED's "
              "ib_core is not loaded, or ib_core is the kernel's own";
        fix =
            "# load OFED's ib_core (/etc/init.d/openibd restart) or install MLNX_OFED / DOCA-OFED; with inbox RDMA use dma-buf instead "
            "(open NVIDIA module, Linux >= 5.12)";
      } else if (c.kind == "gpl-symbol-get") {
        why =
            "a module looked the peer-memory API up at run time and the kernel refused: symbol_get() reaches only EXPORT_SYMBOL_GPL "
            "symbols (Linux >= 6.6), "
            "and OFED exports ib_register_peer_memory_client without _GPL";
        fix =
            "# rebuild the module against the OFED tree so it links ib_register_peer_memory_client directly (dkms build after OFED is "
            "installed), or use dma-buf";
      } else if (c.kind == "peermem-init") {
        why = "nvidia-peermem's init failed (registering its client with ib_core, or a bad module parameter)";
        fix =
            "# check nvidia_peermem's parameters (peerdirect_support 0|1, persistent_api_support 0|1) and that it was built with MOFED's "
            "peer-memory symbols";
      } else {
        why = "the NVIDIA driver refused a dma-buf attach (the exporter's gate, error 524)";
        fix = "# see the exporter-gate findings of the GPU x NIC pairs";
      }
      node("peermem-load-failed", Verdict::Optimal, "kernel log: \"" + c.line + "\": " + why, fix);
    }
  }

  // The gate's node-wide inputs, once per node (facts()): flavour, override, VM, chipset.
  GateInput node_gate() const {
    GateInput in;
    const StackState& s = t_.sw.stack;
    in.flavour = s.nvidia_version_known ? (s.nvidia_open ? 1 : 0) : -1;
    in.driver = driver_gate_of(s.nvidia_version);  // which checks this version has (stack.hpp DriverGate)
    // Without a C2C GPU an x86 CPU says non-coherent; elsewhere the GPU's known id does.
    if (t_.cpu.arch == "x86_64" || t_.cpu.vendor == "GenuineIntel" || t_.cpu.vendor == "AuthenticAMD") in.coherent = 0;
    // /proc/driver/nvidia/params lists GrdmaPciTopoCheckOverride in every tag from 570.86.15 on and
    // in none before (kernel-open/nvidia/nv-reg.h nv_parms, printed by nv-procfs.c): a params file
    // without it comes from a driver before 570.86.15, whose gate reads no override (DriverGate::None).
    // Where the version file names a newer driver the two files disagree: the override stays unknown.
    if (s.params_known && s.params.count("GrdmaPciTopoCheckOverride") == 0) {
      if (in.driver == DriverGate::Unknown) in.driver = DriverGate::None;
    } else if (const std::string ov = s.active_param("GrdmaPciTopoCheckOverride"); !ov.empty()) {
      in.override_value = std::atoi(ov.c_str());
    }
    in.passthrough_vm = rep_.virtual_machine && t_.cpu.hypervisor;
    // RM's list (osinit.c _checkP2pChipsetSupport): Grace (TH500), Ampere Altra, AmpereOne. RM knows
    // the chipset by a PCI function of its table (nvcst.h chipsetInfo, chipset.c
    // clFindFHBAndGetChipsetInfoIndex): Grace by a TH500 root port (root_complexes.json's Grace
    // chipset_ids; no GPU family: RM does not look at one), not by its Neoverse V2 cores, which
    // Graviton4 and Axion share. Those cores with no root port's ids in the input: whether a TH500
    // port is there is unknown. Altra's cores are Neoverse N1 (ARM's implementer id, like
    // Graviton2): known by its DMI or model name; AmpereOne by Ampere's own implementer id 0xc0.
    bool cores_only = false;
    const RootComplex* rc = k_.root_complex(t_, {}, &cores_only);
    const std::string rcn = rc ? rc->name : "";
    const std::string dmi = t_.dmi_vendor + " " + t_.dmi_product + " " + t_.cpu.model_name;
    const bool root_port_ids =
        std::any_of(t_.devices.begin(), t_.devices.end(), [](const Device& d) { return d.ids_known && d.port == PortType::RootPort; });
    if (rcn.find("Grace") != std::string::npos || dmi.find("Altra") != std::string::npos || dmi.find("AmpereOne") != std::string::npos ||
        t_.cpu.arm_implementer == 0xc0)
      in.unsupported_chipset = 1;
    else if (cores_only && !root_port_ids)
      in.unsupported_chipset = -1;
    else
      in.unsupported_chipset = 0;
    return in;
  }

  GateInput gate_input(const PairResult& pr, bool c2c) const {
    const Device& g = t_.devices[pr.a];
    const Device& nic = t_.devices[pr.b];
    GateInput in = node_gate_;
    // Coherent: the GPU is on NVLink-C2C (GH200/GB200 family, or NCCL's <c2c>).
    if (c2c)
      in.coherent = 1;
    else if (g.ids_known)
      in.coherent = 0;
    in.common_bridge = pr.path.lca >= 0 ? 1 : 0;
    // nv_pci_is_valid_topology_for_direct_pci compares the devices' iommu_group pointers:
    // without an IOMMU both are NULL and compare equal.
    if (g.iommu_group >= 0 && nic.iommu_group >= 0)
      in.same_iommu_group = g.iommu_group == nic.iommu_group ? 1 : 0;
    else if (t_.iommu == IommuMode::Off)
      in.same_iommu_group = 1;
    return in;
  }

  // The PCIe rules call a translating IOMMU blocked for every pair. For an NVIDIA GPU and a
  // NIC the driver decides (open-gpu-kernel-modules 580.142 kernel-open/nvidia/nv-dma.c
  // nv_dma_map_peer, nv-reg.h DmaRemapPeerMmio): with NVreg_DmaRemapPeerMmio=1 (default) it
  // maps GPU BAR1 into the NIC's IOMMU domain (dma_map_resource) for nvidia_p2p_dma_map_pages
  // (nvidia_peermem) and dma-buf alike, so registration works through the IOMMU at a cost;
  // with 0 it hands out bus addresses the IOMMU faults, and so does the legacy nv_peer_mem
  // (physical pages from nvidia_p2p_get_pages). Unknown parameters keep the PCIe verdict.
  void iommu_split(PairResult& pr) {
    const Software& sw = t_.sw;
    const std::string remap = sw.stack.active_param("DmaRemapPeerMmio");
    for (auto& f : pr.findings) {
      if (f.rule != "iommu-translating" || f.severity != Verdict::Blocked) continue;
      if (remap == "0") {
        f.reason += "; NVreg_DmaRemapPeerMmio=0: the NVIDIA driver gives the NIC bus addresses without IOMMU mappings, which fault";
        f.fix += "; or remove NVreg_DmaRemapPeerMmio=0 (then registration maps through the IOMMU, at a cost)";
      } else if (remap == "1" && !(sw.has_module("nv_peer_mem") && !sw.has_module("nvidia_peermem"))) {
        f.severity = Verdict::Degraded;
        f.rule = "iommu-translating";
        f.reason +=
            ". For this NVIDIA GPU the driver maps BAR1 into the NIC's IOMMU domain (NVreg_DmaRemapPeerMmio=1): nvidia_peermem "
            "(nvidia_p2p_dma_map_pages) and dma-buf registration work through the IOMMU at a cost (every NIC access translated, "
            "IOTLB misses, peer traffic up to the root complex); the legacy nv_peer_mem and NVreg_DmaRemapPeerMmio=0 would fault";
        f.fix = "gdrpeer verify   # prove registration and bytes through the IOMMU on this node; for full speed: " +
                f.fix.substr(f.fix.find(':') + 2);
      }
    }
    pr.verdict = Verdict::Optimal;
    for (const auto& f : pr.findings) pr.verdict = std::max(pr.verdict, f.severity);
  }

  void pair_rules(PairResult& pr) {
    const Software& sw = t_.sw;
    const StackState& s = sw.stack;
    const Device& g = t_.devices[pr.a];
    if (sw.inspected && s.params_known && !skipped("iommu-translating")) iommu_split(pr);
    PairFacts p;
    p.gpu = &g;
    p.nic = &t_.devices[pr.b];
    p.cls = pr.path.cls;
    // The family once per GPU: the lookup may read pci.ids (as the PCIe rules' Checker caches it).
    auto cached = grace_c2c_.find(pr.a);
    if (cached == grace_c2c_.end()) {
      const GpuFamilyMatch fam = k_.gpu_family_match(g);
      cached = grace_c2c_.emplace(pr.a, fam.family && fam.family->family == "grace-c2c").first;
    }
    p.c2c = s.nccl_gpu_c2c.count(pr.a) > 0 || cached->second;
    for (const auto& c : sw.cuda)
      if (c.bdf == g.bdf) {
        p.cuda_dmabuf = c.dmabuf_supported;
        p.cuda_gdr = c.gdr_supported;
      }
    if (p.cuda_dmabuf == -1 && s.nvidia_version_known) p.cuda_dmabuf = s.nvidia_open ? 1 : 0;
    if (auto it = s.nccl_net_gdr.find(pr.b); it != s.nccl_net_gdr.end()) p.xml_net_gdr = it->second;
    if (auto it = s.nccl_gpu_gdr.find(pr.a); it != s.nccl_gpu_gdr.end()) p.xml_gpu_gdr = it->second;
    // NCCL's default by distance for a GPU on NVLink-C2C is P2C, not PXB (paths.cc
    // ncclTopoCheckGdr, NCCL_NET_GDR_C2C=1): a NIC on the GPU's CPU gets GDR, and only SYS
    // is beyond. classify() knows no GPU family, so the PXB default is corrected here.
    if (p.c2c) pr.path.nccl_gdr = pr.path.cls != PathClass::SYS;
    // Every NVIDIA GPU x NIC pair says what each consumer will do; where the input carries no
    // software stack (lspci, hwloc, NCCL XML) the answers are unknown except NCCL's distance rule.
    const GateInput gin = gate_input(pr, p.c2c);
    // Everything the answers depend on, small values packed (each is -1..4).
    uint64_t key = 0;
    for (int v : {gin.coherent, gin.common_bridge, gin.same_iommu_group, p.c2c ? 1 : 0, static_cast<int>(p.cls), p.cuda_dmabuf, p.cuda_gdr,
                  p.xml_net_gdr, p.xml_gpu_gdr})
      key = key * 8 + static_cast<uint64_t>(v + 2);
    auto hit = memo_.find({key, p.nic->rdma_name});  // NCCL_IB_HCA matches by name
    if (hit == memo_.end()) {
      auto answers = std::make_shared<PairStack>();
      answers->gate = p.gate = exporter_gate(gin);
      answers->consumers = {stack::decide_nccl(n_, p, o_.env), stack::decide_nvshmem(n_, p, o_.env), stack::decide_ucx(n_, p, o_.env)};
      hit = memo_.emplace(std::make_pair(key, p.nic->rdma_name), std::move(answers)).first;
    }
    pr.stack = hit->second;
    p.gate = pr.stack->gate;
    const std::vector<ConsumerDecision>& consumers = pr.stack->consumers;
    // Findings: a path a consumer takes that the exporter refuses (one per reason, naming the
    // consumers it refuses, each by the answer for its own path), then consumers left without GDR.
    std::vector<std::pair<const GateAnswer*, std::string>> refusals;  // reason, "consumer (path), ..."
    for (const auto& d : consumers) {
      if (d.rule != "exporter-gate") continue;
      const GateAnswer* why = d.mapping == "pcie"       ? &p.gate.dmabuf_pcie
                              : d.path == "peer-memory" ? &p.gate.nvidia_p2p
                                                        : &p.gate.dmabuf_default;
      auto same = std::find_if(refusals.begin(), refusals.end(), [&](const auto& r) { return r.first->why == why->why; });
      if (same == refusals.end()) same = refusals.insert(refusals.end(), {why, ""});
      same->second +=
          (same->second.empty() ? "" : ", ") + d.consumer + " (" + d.path + (d.mapping == "pcie" ? ", PCIe mapping type" : "") + ")";
    }
    for (const auto& [why, refused_by] : refusals)
      add(pr, "exporter-gate", Verdict::Blocked,
          "the NVIDIA driver will refuse the GPU memory registration " + refused_by + " take: " + why->why +
              " ('NVRM: dma-buf attach failed', error 524 / nvidia_p2p_dma_map_pages -ENOTSUPP)",
          gate_fix(*why));
    for (const auto& d : consumers) {
      if (d.rule.empty() || d.rule == "exporter-gate") continue;
      std::string fix;
      if (d.why.find("serves no CUDA addresses") != std::string::npos)
        fix =
            "echo auto > /sys/module/gdrpeer/parameters/peermem_cuda   # gdrpeer's client then serves CUDA addresses; or load gdrpeer "
            "with the default peermem_name (gdrpeer), which no consumer takes for nvidia_peermem's";
      else if (d.consumer == "nccl" && d.why.find("memory registration fails") != std::string::npos)
        fix =
            "# install MLNX_OFED / DOCA-OFED and reload nvidia_peermem, or use dma-buf (open module, Linux >= 5.12): NCCL_DMABUF_ENABLE=1";
      else if (d.why.find("GPU_DIRECT_RDMA_SUPPORTED=0") != std::string::npos)
        fix = "# a GPU without GPUDirect RDMA (GeForce, or the driver says no): use a datacenter or professional GPU";
      else
        fix = s.nvidia_version_known && !s.nvidia_open
                  ? "modprobe nvidia_peermem   # needs MLNX_OFED / DOCA-OFED; or install the open NVIDIA module for dma-buf"
                  : "modprobe nvidia_peermem   # needs MLNX_OFED / DOCA-OFED; or dma-buf: open NVIDIA module, Linux >= 5.12, "
                    "NCCL_DMABUF_ENABLE unset or 1";
      // GDR on with a client that cannot register: the job fails (blocked); GDR off: staged through host memory.
      if (d.gdr == 1)
        add(pr, d.rule, Verdict::Blocked, d.consumer + ": GPUDirect RDMA on, but " + d.why, fix);
      else
        add(pr, d.rule, Verdict::Degraded, d.consumer + ": GPUDirect RDMA off for this pair: " + d.why, fix);
    }
  }
};

}  // namespace

void stack_stage(const Topology& t, const RuleData& k, const CheckOptions& o, Report& rep) { StackStage(t, k, o, rep).run(); }

std::map<std::string, std::string> consumer_environment() {
  std::map<std::string, std::string> env;
  for (const char* k : {"NCCL_NET_GDR_LEVEL", "NCCL_NET_GDR_C2C", "NCCL_DMABUF_ENABLE", "NCCL_IB_HCA", "NVSHMEM_IB_DISABLE_DMABUF",
                        "UCX_IB_GPU_DIRECT_RDMA", "UCX_CUDA_COPY_DMABUF"})
    if (const char* v = std::getenv(k)) env[k] = v;
  return env;
}

}  // namespace gdrpeer::topo

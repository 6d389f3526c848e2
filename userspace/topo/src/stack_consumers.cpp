// What NCCL, NVSHMEM and UCX will decide for one GPU x NIC pair, from the
// sources read (versions in kModelled* below and in docs/check.md):
//  NCCL 2.30.7 (NVIDIA/nccl 5067397, 2026-06-11):
//   src/graph/paths.cc ncclTopoCheckGdr: off when the NIC's or the GPU's gdr support is 0;
//     level = NCCL_NET_GDR_C2C (default 1) ? P2C : PXB, NCCL_NET_GDR_LEVEL replaces it
//     (names LOC..SYS, or the old numbers 0..5 -> LOC PIX PXB PHB SYS SYS); on when
//     the path type <= level; mode PCI when the GPU reaches its CPU over C2C and the
//     path is not P2C (dma-buf with CU_MEM_RANGE_FLAG_DMA_BUF_MAPPING_TYPE_PCIE,
//     src/transport/net.cc); P2C = C2C GPU + PHB NIC on its CPU (mergePathType).
//   src/graph/topo.cc: <net gdr> = NCCL_PTR_CUDA || (dmaBufSupport && NCCL_PTR_DMABUF).
//   src/transport/net_ib/gdr.cc: NCCL_PTR_CUDA when memory_peers/nv_mem/version,
//     memory_peers/nv_mem_nc/version or /sys/module/nvidia_peermem/version exists;
//     NCCL_PTR_DMABUF when ibv_reg_dmabuf_mr is not EOPNOTSUPP/EPROTONOSUPPORT.
//   src/init.cc dmaBufSupported: NCCL_DMABUF_ENABLE (default 1), CUDA >= 11.7 and
//     CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED. src/transport/net.cc: dma-buf is used
//     whenever GDR is on and both sides support it.
//  NVSHMEM 3.5.1 (NVIDIA/nvshmem 2d7d25f, 2025-10-16): src/modules/transport/ibrc/ibrc.cpp,
//   ibdevx.cpp, ibgda.cpp: dma-buf unless NVSHMEM_IB_DISABLE_DMABUF (a bool of
//   nvshmemi_getenv_bool, env_defs.h), when CUDA says
//   DMA_BUF_SUPPORTED=1; else transport_ib_common.cpp nvshmemt_ib_common_nv_peer_mem_available:
//   memory_peers/nv_mem/version, memory_peers/nvidia-peermem/version or
//   /sys/module/nvidia_peermem/version; else the transport is skipped. No topology gate.
//  UCX 1.23.0 (openucx/ucx 9466d10, 2026-08-21): src/uct/ib/base/ib_md.c: CUDA memory
//   registrable when memory_peers/nv_mem/version, /sys/module/nvidia_peermem/version or
//   /sys/module/nv_peer_mem/version exists, or dma-buf (uct_ib_md_check_dmabuf, and
//   cuda_copy's UCX_CUDA_COPY_DMABUF=try); UCX_IB_GPU_DIRECT_RDMA=no turns it off (both
//   UCS_CONFIG_TYPE_TERNARY, src/ucs/config/parser.c).
#include <cctype>
#include <cstdlib>
#include <initializer_list>
#include <sstream>
#include <utility>

#include "stack_internal.hpp"

namespace gdrpeer::topo::stack {

namespace {

constexpr const char* kModelledNccl = "NCCL 2.30.7 (NVIDIA/nccl 5067397)";
constexpr const char* kModelledNvshmem = "NVSHMEM 3.5.1 (NVIDIA/nvshmem 2d7d25f)";
constexpr const char* kModelledUcx = "UCX 1.23.0 (openucx/ucx 9466d10)";

// NCCL's path types (src/include/graph.h).
enum NcclPath { LOC = 0, NVL, NVB, C2C, PIX, PXB, P2C, PXN, PHB, SYS };
const char* kPathNames[] = {"LOC", "NVL", "NVB", "C2C", "PIX", "PXB", "P2C", "PXN", "PHB", "SYS"};

std::string env_of(const std::map<std::string, std::string>& env, const char* k) {
  auto it = env.find(k);
  return it == env.end() ? std::string() : it->second;
}

Tri tri_or(Tri a, Tri b) { return (a == 1 || b == 1) ? 1 : (a == 0 && b == 0) ? 0 : -1; }
Tri tri_and(Tri a, Tri b) { return (a == 0 || b == 0) ? 0 : (a == 1 && b == 1) ? 1 : -1; }

// NCCL's ncclGetLevel on NCCL_NET_GDR_LEVEL: -2 when unset or not understood.
int nccl_level(const std::string& s) {
  if (s.empty()) return -2;
  for (int i = 0; i <= SYS; ++i)
    if (s == kPathNames[i]) return i;
  if (s[0] >= '0' && s[0] <= '9') {
    static const int old_to_new[] = {LOC, PIX, PXB, PHB, SYS, SYS};
    long v = std::strtol(s.c_str(), nullptr, 0);
    if (v > 5) v = 5;
    return old_to_new[v];
  }
  return -2;
}

// NCCL_IB_HCA: "[^][=]name[:port],..." (^ excludes, = exact, else prefix), as NCCL's
// parseStringList and matchIfList (src/misc/utils.cc); returns whether the device is used, -1
// when the NIC has no RDMA name.
Tri nccl_hca_selects(const std::string& spec, const std::string& dev) {
  if (spec.empty()) return 1;
  if (dev.empty()) return -1;
  std::string s = spec;
  bool exclude = false, exact = false;
  if (!s.empty() && s[0] == '^') {
    exclude = true;
    s.erase(0, 1);
  }
  if (!s.empty() && s[0] == '=') {
    exact = true;
    s.erase(0, 1);
  }
  bool match = false, listed = false;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');) {
    std::string name = item.substr(0, item.find(':'));
    if (name.empty()) continue;  // parseStringList drops an entry with no name
    listed = true;
    if (exact ? dev == name : dev.compare(0, name.size(), name) == 0) match = true;
  }
  // matchIfList: a list with no entry matches every device, so "^" alone leaves every NIC out
  // and "=" or ":1" alone keeps them all.
  if (!listed) match = true;
  return match != exclude ? 1 : 0;
}

int nccl_path_of(const PairFacts& p) {
  switch (p.cls) {
    case PathClass::PIX: return PIX;
    case PathClass::PXB: return PXB;
    case PathClass::PHB:
    case PathClass::NODE: return p.c2c ? P2C : PHB;  // NCCL has one CPU node per NUMA node
    case PathClass::SYS: return SYS;
  }
  return SYS;
}

// Where dma-buf registration would end for this mapping type: the exporter's gate.
void gate_says(ConsumerDecision& d, const GateAnswer& g, const char* what) {
  if (g.allowed == 0) {
    d.why += std::string("; the NVIDIA driver will refuse the ") + what + " (" + g.why +
             "): registration fails with error 524 and 'NVRM: dma-buf attach failed' in the kernel log";
    d.rule = "exporter-gate";
  } else if (g.allowed == -1) {
    d.why += std::string("; whether the NVIDIA driver accepts the ") + what + " is unknown (" + g.why + ")";
  }
}

// gdrpeer's client registered under one of @names (those the consumer looks for) serves no CUDA
// addresses, and no NVIDIA peer module is loaded to serve them: ib_core finds no client that
// claims the consumer's GPU memory.
bool unserved(const NodeFacts& n, std::initializer_list<const char*> names) {
  if (n.unserved_client.empty() || n.mod_nvidia_peermem == 1 || n.mod_nv_peer_mem == 1) return false;
  for (const char* name : names)
    if (n.unserved_client == name) return true;
  return false;
}

void say_unserved(ConsumerDecision& d, const NodeFacts& n) {
  d.why += "; but the " + n.unserved_client + " client is gdrpeer's and serves no CUDA addresses (" + n.unserved_why +
           "): ibv_reg_mr of GPU memory fails";
  d.rule = "consumer-" + d.consumer;
}

// NVSHMEM and UCX, when they take GPUDirect RDMA: by dma-buf through the default attach gate,
// or through a peer-memory client among `clients` and the nvidia_p2p gate.
void takes_dmabuf(ConsumerDecision& d, const PairFacts& p, const char* why) {
  d.gdr = 1;
  d.path = "dma-buf";
  d.why = why;
  gate_says(d, p.gate.dmabuf_default, "dma-buf attach");
}

void takes_peer_memory(ConsumerDecision& d, const NodeFacts& n, const PairFacts& p, std::string why,
                       std::initializer_list<const char*> clients) {
  d.gdr = 1;
  d.path = "peer-memory";
  d.why = std::move(why);
  if (unserved(n, clients)) say_unserved(d, n);
  gate_says(d, p.gate.nvidia_p2p, "nvidia_p2p mapping");
}

}  // namespace

const char* tri_word(Tri t) { return t == 1 ? "yes" : t == 0 ? "no" : "unknown"; }

ConsumerDecision decide_nccl(const NodeFacts& n, const PairFacts& p, const std::map<std::string, std::string>& env) {
  ConsumerDecision d;
  d.consumer = "nccl";
  d.modelled = kModelledNccl;
  const std::string hca = env_of(env, "NCCL_IB_HCA");
  if (nccl_hca_selects(hca, p.nic->rdma_name) == 0) {
    d.gdr = 0;
    d.path = "none";
    d.why = "NCCL_IB_HCA=" + hca + " leaves " + p.nic->rdma_name + " out: NCCL does not use this NIC";
    return d;
  }
  // The NIC side (<net gdr>): peer-memory paths or dma-buf.
  const Tri ptr_cuda = tri_or(tri_or(n.mp_nv_mem, n.mp_nv_mem_nc), n.mod_nvidia_peermem);
  const std::string dmabuf_env = env_of(env, "NCCL_DMABUF_ENABLE");
  const bool dmabuf_off = !dmabuf_env.empty() && std::strtol(dmabuf_env.c_str(), nullptr, 0) == 0;
  const Tri dmabuf = dmabuf_off ? 0 : tri_and(n.kernel_dmabuf, p.cuda_dmabuf);
  Tri net_gdr = tri_or(ptr_cuda, dmabuf);
  std::string net_why;
  if (p.xml_net_gdr >= 0) {
    net_gdr = p.xml_net_gdr ? 1 : 0;
    net_why = std::string("NCCL's topology file says gdr=") + (p.xml_net_gdr ? "1" : "0") + " for this NIC";
  } else if (net_gdr == 0) {
    net_why = "NCCL prints 'GPU Direct RDMA Disabled for HCA': none of memory_peers/nv_mem, nv_mem_nc or /sys/module/nvidia_peermem exists";
    net_why += dmabuf_off             ? ", and NCCL_DMABUF_ENABLE=0"
               : n.kernel_dmabuf == 0 ? ", and the kernel has no RDMA dma-buf (Linux < 5.12)"
                                      : ", and CUDA reports DMA_BUF_SUPPORTED=0 (proprietary module?)";
  }
  const Tri gpu_gdr = p.xml_gpu_gdr >= 0 ? (p.xml_gpu_gdr ? 1 : 0) : p.cuda_gdr == 0 ? 0 : 1;
  // The distance rule.
  const int path = nccl_path_of(p);
  const std::string c2c_env = env_of(env, "NCCL_NET_GDR_C2C");
  const bool gdr_c2c = c2c_env.empty() || std::strtol(c2c_env.c_str(), nullptr, 0) != 0;
  int level = gdr_c2c ? P2C : PXB;
  const int user = nccl_level(env_of(env, "NCCL_NET_GDR_LEVEL"));
  if (user != -2) level = user;
  d.level = std::string(kPathNames[path]) + " vs " + kPathNames[level] +
            (user != -2 ? " (NCCL_NET_GDR_LEVEL)"
             : gdr_c2c  ? " (default, NCCL_NET_GDR_C2C=1)"
                        : " (NCCL_NET_GDR_C2C=0)");
  if (gpu_gdr == 0) {
    d.gdr = 0;
    d.path = "none";
    d.why = "the GPU does not support GPUDirect RDMA (CUDA GPU_DIRECT_RDMA_SUPPORTED=0 or <gpu gdr=0>)";
    d.rule = "consumer-nccl";
    return d;
  }
  if (net_gdr == 0) {
    d.gdr = 0;
    d.path = "none";
    d.why = net_why;
    d.rule = "consumer-nccl";
    return d;
  }
  if (path > level) {
    d.gdr = 0;
    d.path = "none";
    d.why = std::string("path ") + kPathNames[path] + " is beyond the GDR level " + kPathNames[level] +
            ": traffic is staged through host memory";
    return d;  // the topology rules (path-root-complex, path-sys) already judge this
  }
  d.mapping = p.c2c && path != P2C ? "pcie" : "default";
  if (net_gdr == -1) {
    d.gdr = -1;
    d.path = "unknown";
    d.why = "within the GDR level; whether a peer-memory client or dma-buf is there is not in this input";
    return d;
  }
  d.gdr = 1;
  // dma-buf wherever both sides support it, else the peer-memory client; NCCL's own <net gdr=1>
  // does not say which of the two.
  if (dmabuf == 1) {
    d.path = "dma-buf";
    d.why = std::string("within the GDR level; dma-buf") +
            (d.mapping == "pcie" ? " with the PCIe mapping type (C2C GPU, NIC not on the P2C path)" : "");
    gate_says(d, d.mapping == "pcie" ? p.gate.dmabuf_pcie : p.gate.dmabuf_default,
              d.mapping == "pcie" ? "PCIe mapping type (FORCE_PCIE)" : "dma-buf attach");
  } else if (ptr_cuda == 1) {
    d.path = "peer-memory";
    d.why = "within the GDR level; peer memory (nvidia_peermem / nv_mem), dma-buf not available";
    if (n.mp_nv_mem == 0 && n.mp_nv_mem_nc == 0 && n.mod_nvidia_peermem == 1) {
      d.why +=
          "; but NCCL accepts /sys/module/nvidia_peermem/version alone and no nv_mem client is registered in memory_peers: "
          "NCCL says Enabled and memory registration fails";
      d.rule = "consumer-nccl";
    }
    if (unserved(n, {"nv_mem", "nv_mem_nc"})) say_unserved(d, n);
    gate_says(d, p.gate.nvidia_p2p, "nvidia_p2p mapping");
  } else {
    d.path = "unknown";
    d.why = "within the GDR level; which of dma-buf or peer memory is not in this input";
  }
  return d;
}

bool nvshmem_env_true(const std::map<std::string, std::string>& env, const std::string& name) {
  const auto v = env.find(name);
  if (v == env.end()) return false;
  const char first = v->second.empty() ? '\0' : v->second[0];
  return first != '0' && first != 'N' && first != 'n' && first != 'F' && first != 'f';
}

ConsumerDecision decide_nvshmem(const NodeFacts& n, const PairFacts& p, const std::map<std::string, std::string>& env) {
  ConsumerDecision d;
  d.consumer = "nvshmem";
  d.modelled = kModelledNvshmem;
  const bool dmabuf_off = nvshmem_env_true(env, "NVSHMEM_IB_DISABLE_DMABUF");
  const Tri dmabuf = dmabuf_off ? 0 : tri_and(p.cuda_dmabuf, n.kernel_dmabuf);
  const Tri peer = tri_or(tri_or(n.mp_nv_mem, n.mp_nvidia_peermem), n.mod_nvidia_peermem);
  if (dmabuf == 1) {
    takes_dmabuf(d, p, "ibrc/ibdevx/ibgda register GPU memory as dma-buf");
  } else if (dmabuf == 0 && peer == 1) {
    takes_peer_memory(
        d, n, p,
        std::string(dmabuf_off ? "NVSHMEM_IB_DISABLE_DMABUF set" : "dma-buf not available") + "; peer memory (nv_mem / nvidia-peermem)",
        {"nv_mem", "nvidia-peermem"});
  } else if (dmabuf == 0 && peer == 0) {
    d.gdr = 0;
    d.path = "none";
    d.why = "'neither nv_peer_mem, or nvidia_peermem detected. Skipping transport.': the IB transports are not used";
    d.rule = "consumer-nvshmem";
  } else {
    d.path = "unknown";
    d.why = "dma-buf (CUDA DMA_BUF_SUPPORTED) or a peer-memory client: not in this input";
    d.nothing_known = true;
  }
  return d;
}

// UCX_IB_GPU_DIRECT_RDMA and UCX_CUDA_COPY_DMABUF are UCS_CONFIG_TYPE_TERNARY
// (src/ucs/config/parser.c ucs_config_sscanf_ternary, then ucs_config_sscanf_bool): "try" and
// "maybe", "y"/"yes"/"1", "n"/"no"/"0", the letters in any case; any other value, "" included,
// is refused and UCX does not read its configuration at all.
enum class UcxTernary { No, YesOrTry, Refused };
UcxTernary ucx_ternary(const std::map<std::string, std::string>& env, const char* k) {
  auto it = env.find(k);
  if (it == env.end()) return UcxTernary::YesOrTry;  // both default to "try"
  std::string v = it->second;
  for (char& c : v) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (v == "n" || v == "no" || it->second == "0") return UcxTernary::No;
  if (v == "try" || v == "maybe" || v == "y" || v == "yes" || it->second == "1") return UcxTernary::YesOrTry;
  return UcxTernary::Refused;
}

ConsumerDecision decide_ucx(const NodeFacts& n, const PairFacts& p, const std::map<std::string, std::string>& env) {
  ConsumerDecision d;
  d.consumer = "ucx";
  d.modelled = kModelledUcx;
  for (const char* k : {"UCX_IB_GPU_DIRECT_RDMA", "UCX_CUDA_COPY_DMABUF"})
    if (ucx_ternary(env, k) == UcxTernary::Refused) {
      d.path = "unknown";
      d.why =
          std::string(k) + "=" + env_of(env, k) + " is not a value UCX reads (try, maybe, yes/y/1, no/n/0): UCX stops on its configuration";
      return d;
    }
  if (ucx_ternary(env, "UCX_IB_GPU_DIRECT_RDMA") == UcxTernary::No) {
    d.gdr = 0;
    d.path = "none";
    d.why = "UCX_IB_GPU_DIRECT_RDMA=" + env_of(env, "UCX_IB_GPU_DIRECT_RDMA") + ": rc/dc transports register no GPU memory";
    return d;
  }
  const bool dmabuf_off = ucx_ternary(env, "UCX_CUDA_COPY_DMABUF") == UcxTernary::No;
  const Tri dmabuf = dmabuf_off ? 0 : tri_and(p.cuda_dmabuf, n.kernel_dmabuf);
  const Tri peer = tri_or(tri_or(n.mp_nv_mem, n.mod_nvidia_peermem), n.mod_nv_peer_mem);
  if (dmabuf == 1) {
    takes_dmabuf(d, p, "rc/dc register CUDA memory as dma-buf (UCX_CUDA_COPY_DMABUF=try)");
  } else if (dmabuf == 0 && peer == 1) {
    takes_peer_memory(d, n, p, "rc/dc register CUDA memory through the peer-memory client", {"nv_mem"});
  } else if (dmabuf == 0 && peer == 0) {
    d.gdr = 0;
    d.path = "none";
    d.why =
        "no nv_mem client, nvidia_peermem or nv_peer_mem module and no dma-buf: CUDA memory is staged through host memory"
        " (UCX_IB_GPU_DIRECT_RDMA=yes makes it an error: 'Couldn't enable GPUDirect RDMA')";
    d.rule = "consumer-ucx";
  } else {
    d.path = "unknown";
    d.why = "dma-buf or a peer-memory client: not in this input";
    d.nothing_known = true;
  }
  return d;
}

}  // namespace gdrpeer::topo::stack

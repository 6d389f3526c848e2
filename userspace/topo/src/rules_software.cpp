// The software rules of a GPU's pairs with a NIC or an NVMe drive (rules_software.hpp): whether
// the node's kernel modules give the NIC a way to reach GPU memory. Two ways exist:
//  - a peer-memory client registered with ib_core (nvidia_peermem, nv_peer_mem, MOFED's
//    memory_peers), and
//  - the dma-buf path: Linux >= 5.12 (ib_umem_dmabuf_get, ibv_reg_dmabuf_mr) with an exporter
//    of GPU memory (the open NVIDIA kernel module, amdgpu, or gdrpeer).
// Live and snapshot inputs only: an lspci or hwloc dump says nothing about software.
#include <cstdio>
#include <string>

#include "rules_findings.hpp"
#include "rules_software.hpp"

namespace gdrpeer::topo {

namespace {

bool kernel_version_known(const std::string& rel) {
  int a = 0, b = 0;
  return std::sscanf(rel.c_str(), "%d.%d", &a, &b) == 2;
}

bool kernel_at_least(const std::string& rel, int maj, int min) {
  int a = 0, b = 0;
  if (std::sscanf(rel.c_str(), "%d.%d", &a, &b) != 2) return false;
  return a > maj || (a == maj && b >= min);
}

}  // namespace

void software_rules(const Topology& t, const CheckOptions& o, const Device& g, std::vector<Finding>& out) {
  const Software& sw = t.sw;
  if (!sw.inspected) return;
  const bool nvidia = nvidia_by_ids(g);
  if (!sw.modules_known) {
    add_finding(o, out, "software-unknown", Verdict::Optimal,
                "the loaded kernel modules are not in this input (no /proc/modules or /sys/module): driver and peer-memory state unknown",
                "lsmod | grep -E 'nvidia|peer|gdrpeer'   # on the node");
    return;
  }
  if (nvidia && !sw.has_module("nvidia")) {
    add_finding(o, out, "software-driver", Verdict::Blocked, "the nvidia kernel module is not loaded", "modprobe nvidia");
    return;
  }
  // A peer-memory client counts when it is registered with ib_core (a memory_peers/<name>/version
  // file), not when a module is merely loaded: NVIDIA/nccl #1939, #1537. Only where the input
  // lacks the memory_peers directory altogether does a loaded module stand in for it.
  bool registered = false;
  // (ib_core creates memory_peers/<name>/ when a client registers; nvidia-fs is GDS's, not a NIC's.)
  for (const auto& c : sw.stack.peer_clients) registered = registered || c.name != "nvidia-fs";
  const bool loaded = sw.has_module("nvidia_peermem") || sw.has_module("nv_peer_mem");
  const bool unregistered = loaded && sw.memory_peers_dir && !registered;
  bool peer = registered || (loaded && !sw.memory_peers_dir);
  bool open = sw.nvidia_version.find("Open Kernel Module") != std::string::npos;
  const bool kernel_known = kernel_version_known(sw.kernel_release);
  bool new_kernel = kernel_at_least(sw.kernel_release, 5, 12);
  const bool dmabuf_exporter = sw.has_module("gdrpeer") || (nvidia && open) || (!nvidia && g.vendor == 0x1002 && sw.has_module("amdgpu"));
  bool dmabuf = new_kernel && dmabuf_exporter;
  for (const auto& c : sw.cuda)
    if (c.bdf == g.bdf) {
      if (c.gdr_supported == 0)
        add_finding(o, out, "software-cuda", Verdict::Blocked, "CUDA reports GPU_DIRECT_RDMA_SUPPORTED=0 for " + g.bdf, "");
      if (c.dmabuf_supported == 0) dmabuf = dmabuf && sw.has_module("gdrpeer");
    }
  if (!peer && !dmabuf && dmabuf_exporter && !kernel_known) {
    // Without a kernel version the dma-buf path (Linux >= 5.12) is unknown, not absent.
    add_finding(o, out, "software-peer-memory", Verdict::Optimal,
                "no peer-memory client (nvidia_peermem, nv_peer_mem or MOFED memory_peers); the kernel version is not in this input, so "
                "whether the dma-buf path (Linux >= 5.12) is there is unknown",
                "uname -r   # on the node; below 5.12: " + std::string(nvidia ? "modprobe nvidia_peermem" : "modprobe amdgpu or gdrpeer"));
  } else if (!peer && !dmabuf) {
    std::string why =
        unregistered
            ? "nvidia_peermem is loaded but no peer-memory client is registered in /sys/kernel/mm/memory_peers, and no dma-buf path ("
            : "no peer-memory client (nvidia_peermem, nv_peer_mem or MOFED memory_peers) and no dma-buf path (";
    // No exporter means no dma-buf path on any kernel: an unknown kernel version changes nothing,
    // and "kernel  < 5.12" would claim a version the input does not hold.
    if (new_kernel || !kernel_known)
      why += nvidia ? "needs the open NVIDIA kernel module or gdrpeer" : "needs gdrpeer";
    else
      why += "kernel " + sw.kernel_release + " < 5.12";
    why += ")";
    add_finding(o, out, "software-peer-memory", Verdict::Blocked, std::move(why),
                nvidia ? "modprobe nvidia_peermem" : "modprobe gdrpeer   # or insmod gdrpeer.ko");
  } else if (!peer) {
    add_finding(o, out, "software-peer-memory", Verdict::Optimal, "no peer-memory client loaded; the dma-buf path is available",
                "export NCCL_DMABUF_ENABLE=1");
  }
}

}  // namespace gdrpeer::topo

// The readiness stage (topo/src/readiness_stage.cpp: which facts of a node each GPU x NIC and
// GPU x NVMe pair gets) against an oracle restating the sources, over thousands of generated
// nodes (issue 28: the generated mutants of readiness_stage.cpp). The oracle gives the facts;
// decide_ibgda / decide_gds (held to NVSHMEM's and GDS's sources by test_truth_readiness) turn
// them into the line the stage must print, so a wrong fact shows wherever it changes a line.
// The sources:
//  - NVSHMEM 3.5.1 (NVIDIA/nvshmem 2d7d25f): data buffers through dma-buf when CUDA's
//    DMA_BUF_SUPPORTED and NVSHMEM_IB_DISABLE_DMABUF unset, a boolean read by
//    nvshmemi_getenv_bool (env_defs_internal.h): set and first character not 0/N/n/F/f is true,
//    "" included; ib_core imports dma-buf from Linux 5.12 (drivers/infiniband/core/umem_dmabuf.c,
//    added in v5.12); peer clients: transport_ib_common.cpp nvshmemt_ib_common_nv_peer_mem_available
//    (memory_peers/nv_mem/version, memory_peers/nvidia-peermem/version, /sys/module/nvidia_peermem);
//    devices named mlx5* with mlx5dv (ibgda.cpp nvshmemt_init).
//  - The open NVIDIA module reports DMA_BUF_SUPPORTED, the proprietary one does not (CUDA
//    Programming Guide, "dma-buf"; docs/check.md), unless CUDA answered for the GPU itself.
//  - open-gpu-kernel-modules 580.142 os-registry.c: RegistryDwordsPerDevice "pci=<BDF>;Key=Value"
//    applies to that GPU and wins over RegistryDwords; keys are read with strtol base 0.
//    PeerMappingOverride: 1 any process may map IO memory into the GPU, unset only CAP_SYS_ADMIN.
//  - GDS (Troubleshooting Guide §14 "GDS Support for NVMe Drives Using Linux PCI P2PDMA",
//    release 615): Linux >= 6.2, CONFIG_PCI_P2PDMA=y, open module >= 565, the GPU on the P2PDMA
//    list (pci.ids ids of A100, A40, L4, L40S, H100, H200, B100, B200, B300), on x86_64
//    RMForceStaticBar1=1, RmForceDisableIomapWC=1 and nvme_core multipath=N (the kernel prints a
//    bool parameter as Y/N, kernel/params.c param_get_bool; kstrtobool reads n/N/0 as false;
//    a kernel built without CONFIG_NVME_MULTIPATH has no multipath), nvidia_fs for its own mode.
//  - Linux drivers/pci/p2pdma.c pci_p2pdma_distance: devices below one switch always; through
//    host bridges on AMD Zen (cpu_supports_p2pdma: vendor AMD, family >= 0x17); Intel's host
//    bridge list is not modelled (unknown).
//  - pci.ids (vendor 15b3): ConnectX-5 (1017) .. ConnectX-10 (1027) and the BlueField-2/3
//    integrated ConnectX (a2d6, a2d9, a2dc) are the NICs whose DEVX and atomics are assumed
//    (docs/check.md); ConnectX-4 (1013-1016), BlueField-1 (a2d2) and unknown ids are not.
#include <gtest/gtest.h>

#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "gdrpeer/topo/readiness.hpp"
#include "test_topo_support.hpp"

using namespace gdrpeer::topo;
namespace fake = gdrpeer::topo::testing;
using fake::FakeNode;
using fake::kb;

namespace {

using fake::has;

// GPU0 03:00.0, the NIC 04:00.0 and the NVMe drive 05:00.0 under one switch (root port 00:01.0);
// GPU1 10:00.0 on root port 00:02.0 of the same host bridge; GPU2 41:00.0 on host bridge 0000:40;
// GPU3 08:00.0 behind a second switch below the first (PXB to the drive).
Topology base_node() {
  FakeNode n;
  const std::string rc0 = "/sys/devices/pci0000:00", rc4 = "/sys/devices/pci0000:40";
  const std::string up = rc0 + "/0000:00:01.0/0000:01:00.0";
  fake::add_port(n, "0000:00:01.0", rc0 + "/0000:00:01.0", fake::kRootPort, 1);
  fake::add_port(n, "0000:01:00.0", up, fake::kUpstream, 2, 0x10b5, 0x9797);
  for (int i = 0; i < 4; ++i) {
    const std::string ds = "0000:02:0" + std::to_string(i) + ".0";
    fake::add_port(n, ds, up + "/" + ds, fake::kDownstream, 3 + i, 0x10b5, 0x9797);
  }
  fake::add_endpoint(n, "0000:03:00.0", up + "/0000:02:00.0/0000:03:00.0", 0x10de, 0x2330, 0x030200);
  fake::add_endpoint(n, "0000:04:00.0", up + "/0000:02:01.0/0000:04:00.0", 0x15b3, 0x1021, 0x020700);
  fake::add_endpoint(n, "0000:05:00.0", up + "/0000:02:02.0/0000:05:00.0", 0x144d, 0xa80a, 0x010802);
  const std::string up2 = up + "/0000:02:03.0/0000:06:00.0";
  fake::add_port(n, "0000:06:00.0", up2, fake::kUpstream, 7, 0x10b5, 0x9797);
  fake::add_port(n, "0000:07:00.0", up2 + "/0000:07:00.0", fake::kDownstream, 8, 0x10b5, 0x9797);
  fake::add_endpoint(n, "0000:08:00.0", up2 + "/0000:07:00.0/0000:08:00.0", 0x10de, 0x2330, 0x030200);
  fake::add_port(n, "0000:00:02.0", rc0 + "/0000:00:02.0", fake::kRootPort, 0x10);
  fake::add_endpoint(n, "0000:10:00.0", rc0 + "/0000:00:02.0/0000:10:00.0", 0x10de, 0x2330, 0x030200);
  fake::add_port(n, "0000:40:01.0", rc4 + "/0000:40:01.0", fake::kRootPort, 0x41);
  fake::add_endpoint(n, "0000:41:00.0", rc4 + "/0000:40:01.0/0000:41:00.0", 0x10de, 0x2330, 0x030200);
  return fake::from_fake(n);
}

const std::vector<std::string> kGpus = {"0000:03:00.0", "0000:10:00.0", "0000:41:00.0", "0000:08:00.0"};
constexpr size_t kNumGpus = 4;
const char* kNic = "0000:04:00.0";

// One node: every input the stage reads.
struct World {
  std::string format = "sysfs";
  bool inspected = true, modules_known = true;
  std::vector<std::string> modules;
  std::string kernel;
  bool version_known = true, open = true;
  std::string version = "580.159.04";
  bool params_known = true;
  std::map<std::string, std::string> dwords;
  std::map<std::string, std::map<std::string, std::string>> per_device;
  std::vector<PeerClient> clients;
  bool peermem_sysfs = false;
  std::vector<Software::CudaGpu> cuda;
  std::map<std::string, std::string> env;
  bool kconfig_known = false;
  std::map<std::string, std::string> kconfig;
  std::string multipath;
  bool nvidia_fs_proc = false;
  std::string arch = "x86_64", cpu_vendor = "AuthenticAMD";
  int family = 0x19;
  uint16_t nic_vendor = 0x15b3, nic_device = 0x1021;
  bool nic_ids_known = true;
  std::string rdma_name = "mlx5_0", nic_driver = "mlx5_core";
  std::vector<uint16_t> gpu_vendor = std::vector<uint16_t>(kNumGpus, 0x10de), gpu_device = std::vector<uint16_t>(kNumGpus, 0x2330);
  std::vector<bool> gpu_ids_known = std::vector<bool>(kNumGpus, true);
  std::vector<std::string> gpu_name = std::vector<std::string>(kNumGpus);
  bool nvme = true;  // the NVMe drive is there as one (else the node has none)
  IbgdaProbe probe;

  std::string describe() const {
    std::string s =
        "format=" + format + " inspected=" + std::to_string(inspected) + " modules_known=" + std::to_string(modules_known) + " modules=";
    for (const auto& m : modules) s += m + ",";
    s += " kernel='" + kernel + "' version=" + (version_known ? version + (open ? " open" : " proprietary") : "unknown") +
         " params=" + std::to_string(params_known) + " dwords=";
    for (const auto& [k, v] : dwords) s += k + "=" + v + ",";
    s += " per_device=";
    for (const auto& [b, kv] : per_device) {
      s += "[" + b + ":";
      for (const auto& [k, v] : kv) s += k + "=" + v + ",";
      s += "]";
    }
    s += " clients=";
    for (const auto& c : clients) s += c.name + (c.has_version ? "(v)" : "") + ",";
    s += " peermem_sysfs=" + std::to_string(peermem_sysfs) + " cuda=";
    for (const auto& c : cuda) s += c.bdf + ":" + std::to_string(c.dmabuf_supported) + ",";
    s += " env=";
    for (const auto& [k, v] : env) s += k + "='" + v + "',";
    s += " kconfig=" + std::string(kconfig_known ? "" : "unknown");
    for (const auto& [k, v] : kconfig) s += k + "=" + v + ",";
    s += " multipath='" + multipath + "' nvidia_fs_proc=" + std::to_string(nvidia_fs_proc) + " cpu=" + arch + "/" + cpu_vendor + "/" +
         std::to_string(family);
    char nic[64];
    std::snprintf(nic, sizeof nic, " nic=%04x:%04x%s", nic_vendor, nic_device, nic_ids_known ? "" : "(ids unknown)");
    s += nic + std::string(" rdma='") + rdma_name + "' driver='" + nic_driver + "' gpus=";
    for (size_t i = 0; i < kNumGpus; ++i) {
      char g[48];
      std::snprintf(g, sizeof g, "%04x:%04x%s", gpu_vendor.at(i), gpu_device.at(i), gpu_ids_known.at(i) ? "" : "(ids unknown)");
      s += g + std::string("'") + gpu_name.at(i) + "',";
    }
    s += " nvme=" + std::to_string(nvme) + " probe=" + std::to_string(probe.ran);
    return s;
  }
};

Topology node_of(const Topology& base, const World& w) {
  Topology t = base;
  if (!w.nvme) t.devices.at(t.find("0000:05:00.0")).role = Role::None;
  t.format = w.format;
  Software& sw = t.sw;
  sw.inspected = w.inspected;
  sw.modules_known = w.modules_known;
  sw.modules = w.modules;
  sw.kernel_release = w.kernel;
  sw.stack.nvidia_version_known = w.version_known;
  sw.stack.nvidia_open = w.open;
  sw.stack.nvidia_version = w.version_known ? w.version : "";
  sw.stack.params_known = w.params_known;
  sw.stack.registry_dwords = w.dwords;
  sw.stack.registry_per_device = w.per_device;
  sw.stack.peer_clients = w.clients;
  sw.stack.peermem_sysfs = w.peermem_sysfs;
  sw.cuda = w.cuda;
  sw.readiness.kconfig.known = w.kconfig_known;
  sw.readiness.kconfig.values = w.kconfig;
  sw.readiness.nvme_multipath = w.multipath;
  sw.readiness.nvidia_fs_proc = w.nvidia_fs_proc;
  sw.ibgda_probe = w.probe;
  t.cpu.arch = w.arch;
  t.cpu.vendor = w.cpu_vendor;
  t.cpu.family = w.family;
  Device& nic = t.devices.at(t.find(kNic));
  nic.vendor = w.nic_vendor;
  nic.device = w.nic_device;
  nic.ids_known = w.nic_ids_known;
  nic.rdma_name = w.rdma_name;
  nic.driver = w.nic_driver;
  for (size_t i = 0; i < kNumGpus; ++i) {
    Device& g = t.devices.at(t.find(kGpus.at(i)));
    g.vendor = w.gpu_vendor.at(i);
    g.device = w.gpu_device.at(i);
    g.ids_known = w.gpu_ids_known.at(i);
    g.name = w.gpu_name.at(i);
  }
  return t;
}

// --- the oracle ---------------------------------------------------------------------------

// "major.minor" of a kernel release, or nothing.
bool release(const std::string& r, int* major, int* minor) { return std::sscanf(r.c_str(), "%d.%d", major, minor) == 2; }
Tri3 kernel_at_least(const std::string& r, int major, int minor) {
  int a = 0, b = 0;
  if (!release(r, &a, &b)) return -1;
  return a != major ? (a > major ? 1 : 0) : (b >= minor ? 1 : 0);
}

// nvshmemi_getenv_bool.
bool nvshmem_bool_set(const std::map<std::string, std::string>& env, const std::string& name) {
  auto it = env.find(name);
  if (it == env.end()) return false;
  const std::string first = it->second.substr(0, 1);
  return first != "0" && first != "N" && first != "n" && first != "F" && first != "f";
}

bool is_nvidia(const World& w, size_t g) {
  // NVIDIA by PCI id, by name, or any GPU of an NCCL file (NCCL lists only its own).
  return (w.gpu_ids_known.at(g) && w.gpu_vendor.at(g) == 0x10de) || has(w.gpu_name.at(g), "NVIDIA") || w.format == "nccl-xml";
}

// A registry key as the driver reads it for the GPU: -1 params unknown, else its value (0 unset).
long regkey(const World& w, const std::string& bdf, const std::string& key) {
  if (!w.params_known) return -1;
  for (const auto& [sel, keys] : w.per_device) {
    if (sel.empty()) continue;  // keys before any pci= select no GPU
    const std::string b = sel.size() == 7 ? "0000:" + sel : sel;
    if (b == bdf && keys.count(key)) return std::strtol(keys.at(key).c_str(), nullptr, 0);
  }
  return w.dwords.count(key) ? std::strtol(w.dwords.at(key).c_str(), nullptr, 0) : 0;
}

Tri3 dmabuf_data(const World& w, const std::string& gpu) {
  if (nvshmem_bool_set(w.env, "NVSHMEM_IB_DISABLE_DMABUF")) return 0;
  Tri3 cuda = -1;
  for (const auto& c : w.cuda)
    if (c.bdf == gpu) cuda = c.dmabuf_supported;
  if (cuda < 0 && w.version_known) cuda = w.open ? 1 : 0;
  const Tri3 kernel = kernel_at_least(w.kernel, 5, 12);
  if (cuda == 0 || kernel == 0) return 0;
  return cuda == 1 && kernel == 1 ? 1 : -1;
}

Tri3 peer_mem(const World& w) {
  if (!w.inspected) return -1;
  for (const auto& c : w.clients)
    if ((c.name == "nv_mem" || c.name == "nvidia-peermem") && c.has_version) return 1;
  for (const auto& m : w.modules)
    if (m == "nvidia_peermem") return 1;
  if (w.peermem_sysfs) return 1;
  return w.modules_known ? 0 : -1;
}

int uar_gpu_map(const World& w, const std::string& gpu) {
  const long v = regkey(w, gpu, "PeerMappingOverride");
  return v < 0 ? -1 : v != 0 ? 1 : 2;
}

// DEVX and the atomic caps assumed: ConnectX-5 .. ConnectX-10 and BlueField-2/3's ConnectX.
bool caps_assumed_id(uint16_t id) { return (id >= 0x1017 && id <= 0x1027) || id == 0xa2d6 || id == 0xa2d9 || id == 0xa2dc; }

IbgdaFacts ibgda_facts(const World& w, const std::string& gpu, bool* assumed) {
  IbgdaFacts f;
  const bool mellanox = w.nic_ids_known && w.nic_vendor == 0x15b3;
  if (mellanox) f.nic_model = connectx_model(w.nic_device);
  if (!w.rdma_name.empty())
    f.rdma_nic = 1;
  else if (w.inspected && w.format != "lspci")
    f.rdma_nic = 0;  // sysfs lists every RDMA device in /sys/class/infiniband
  if (mellanox || w.nic_driver == "mlx5_core" || w.rdma_name.rfind("mlx5", 0) == 0)
    f.mlx5 = 1;
  else if (w.nic_ids_known)
    f.mlx5 = 0;
  *assumed = f.mlx5 == 1 && mellanox && caps_assumed_id(w.nic_device);
  if (*assumed) f.devx = f.atomics = 1;
  f.dmabuf_data = dmabuf_data(w, gpu);
  f.peer_mem = peer_mem(w);
  f.uar_gpu_map = uar_gpu_map(w, gpu);
  return f;
}

ReadinessMode expected_ibgda(const World& w, const std::string& gpu) {
  bool assumed = false;
  const IbgdaFacts f = ibgda_facts(w, gpu, &assumed);
  ReadinessMode predicted = decide_ibgda(f);
  if (assumed && !predicted.unknown && predicted.mode != "none")
    predicted.reason +=
        " [DEVX and atomics assumed for " + (f.nic_model.empty() ? std::string("this NIC") : f.nic_model) + "; --probe ibgda reads them]";
  const IbgdaProbeResult* pr = w.probe.ran ? w.probe.find(kNic) : nullptr;
  if (!pr) return predicted;
  IbgdaFacts p = f;
  p.probed = true;
  for (auto [from, to] : {std::pair{pr->mlx5, &p.mlx5},
                          {pr->devx, &p.devx},
                          {pr->atomics, &p.atomics},
                          {pr->dmabuf_umem, &p.dmabuf_umem},
                          {pr->uar_gpu_map, &p.uar_gpu_map}})
    if (from != -1) *to = from;
  ReadinessMode m = decide_ibgda(p);
  m.probed = true;
  return m;
}

GdsFacts gds_facts(const World& w, size_t g, bool pair) {
  const std::string& gpu = kGpus.at(g);
  GdsFacts f;
  f.nvme = 1;
  f.kernel_ge_6_2 = kernel_at_least(w.kernel, 6, 2);
  if (w.kconfig_known) f.p2pdma_config = w.kconfig.count("CONFIG_PCI_P2PDMA") && w.kconfig.at("CONFIG_PCI_P2PDMA") == "y" ? 1 : 0;
  if (w.version_known) {
    f.open_module = w.open ? 1 : 0;
    f.driver_ge_565 = std::atoi(w.version.c_str()) >= 565 ? 1 : 0;
  }
  if (w.gpu_ids_known.at(g) && w.gpu_vendor.at(g) == 0x10de) {
    static const uint16_t list[] = {0x20b0, 0x20b1, 0x20b2, 0x20b3, 0x20b5, 0x20f1, 0x2235, 0x27b8, 0x26b9, 0x2313, 0x2330, 0x2331,
                                    0x2336, 0x2337, 0x2338, 0x2339, 0x233d, 0x237e, 0x2335, 0x233b, 0x29bc, 0x2901, 0x3182};
    f.gpu_supported = 0;
    for (uint16_t id : list)
      if (id == w.gpu_device.at(g)) f.gpu_supported = 1;
  }
  if (w.arch == "x86_64" || w.cpu_vendor == "GenuineIntel" || w.cpu_vendor == "AuthenticAMD")
    f.x86 = 1;
  else if (!w.arch.empty())
    f.x86 = 0;
  const long bar1 = regkey(w, gpu, "RMForceStaticBar1"), wc = regkey(w, gpu, "RmForceDisableIomapWC");
  if (bar1 >= 0) f.static_bar1 = bar1 ? 1 : 0;
  if (wc >= 0) f.iomap_wc_off = wc ? 1 : 0;
  if (w.multipath == "N" || w.multipath == "n" || w.multipath == "0")
    f.multipath_off = 1;
  else if (!w.multipath.empty())
    f.multipath_off = 0;
  else if (w.kconfig_known && w.kconfig.count("CONFIG_NVME_MULTIPATH") && w.kconfig.at("CONFIG_NVME_MULTIPATH") == "n")
    f.multipath_off = 1;
  // GPU0 shares the NVMe drive's switch (PIX), GPU3 is below it (PXB); GPU1 and GPU2 reach it
  // through host bridges.
  if (!pair || g == 0 || g == 3)
    f.host_bridge_ok = 1;
  else if (w.cpu_vendor == "AuthenticAMD" && w.family >= 0x17)
    f.host_bridge_ok = 1;
  bool fs_module = false;
  for (const auto& m : w.modules) fs_module = fs_module || m == "nvidia_fs";
  if (w.nvidia_fs_proc || fs_module)
    f.nvidia_fs = 1;
  else if (w.modules_known)
    f.nvidia_fs = 0;
  return f;
}

// --- the generator ------------------------------------------------------------------------

template <typename T>
const T& pick(std::mt19937& rng, const std::vector<T>& v) {
  return v.at(std::uniform_int_distribution<size_t>(0, v.size() - 1)(rng));
}
bool coin(std::mt19937& rng, double p = 0.5) { return std::bernoulli_distribution(p)(rng); }

World random_world(std::mt19937& rng) {
  World w;
  w.format = pick<std::string>(rng, {"sysfs", "sysfs", "snapshot", "lspci", "hwloc", "nccl-xml"});
  w.inspected = coin(rng, 0.8);
  w.modules_known = coin(rng, 0.8);
  for (const char* m : {"nvidia", "nvidia_peermem", "nvidia_fs", "nvme"})
    if (coin(rng, 0.3)) w.modules.push_back(m);
  w.kernel = pick<std::string>(rng, {"", "unknown", "4.19.0-27-amd64", "5.4.0-150-generic", "5.11.22", "5.12.0", "5.15.0-91-generic",
                                     "6.1.0-56-amd64", "6.2.0", "6.12.107+deb12-amd64", "6.18.44-fc", "7.0.1"});
  w.version_known = coin(rng, 0.8);
  w.open = coin(rng, 0.6);
  w.version = pick<std::string>(rng, {"580.159.04", "565.57.01", "564.99", "550.163.01", "535.183.01"});
  w.params_known = coin(rng, 0.8);
  const std::vector<std::string> keys = {"PeerMappingOverride", "RMForceStaticBar1", "RmForceDisableIomapWC"};
  const std::vector<std::string> values = {"1", "0", "0x1", "2"};
  for (const auto& k : keys)
    if (coin(rng, 0.4)) w.dwords[k] = pick(rng, values);
  if (coin(rng, 0.4)) {
    const std::string sel =
        pick<std::string>(rng, {"0000:03:00.0", "03:00.0", "0000:10:00.0", "10:00.0", "0000:41:00.0", "0000:81:00.0", ""});
    for (const auto& k : keys)
      if (coin(rng, 0.6)) w.per_device[sel][k] = pick(rng, values);
  }
  for (const char* c : {"nv_mem", "nvidia-peermem", "gdrpeer"})
    if (coin(rng, 0.25)) w.clients.push_back(PeerClient{c, "1.0", coin(rng, 0.7), {}});
  w.peermem_sysfs = coin(rng, 0.2);
  for (const auto& g : kGpus)
    if (coin(rng, 0.3)) w.cuda.push_back(Software::CudaGpu{g, 1, pick<int>(rng, {-1, 0, 1})});
  if (coin(rng, 0.4))
    w.env["NVSHMEM_IB_DISABLE_DMABUF"] = pick<std::string>(rng, {"1", "0", "true", "false", "no", "yes", "", "01", "F", "N", "2"});
  w.kconfig_known = coin(rng, 0.6);
  if (w.kconfig_known) {
    if (coin(rng, 0.8)) w.kconfig["CONFIG_PCI_P2PDMA"] = pick<std::string>(rng, {"y", "n", "m"});
    if (coin(rng, 0.7)) w.kconfig["CONFIG_NVME_MULTIPATH"] = pick<std::string>(rng, {"y", "n", "m"});
  }
  w.multipath = pick<std::string>(rng, {"", "", "Y", "N", "n", "0", "1"});
  w.nvidia_fs_proc = coin(rng, 0.2);
  w.arch = pick<std::string>(rng, {"x86_64", "", "aarch64", "ppc64le"});
  w.cpu_vendor = pick<std::string>(rng, {"AuthenticAMD", "GenuineIntel", "", "ARM", "NVIDIA"});
  w.family = pick<int>(rng, {0x19, 0x17, 0x16, 6, -1});
  const uint16_t nic = pick<uint16_t>(rng, {0x1013, 0x1015, 0x1016, 0x1017, 0x1018, 0x101b, 0x101d, 0x1021, 0x1023, 0x1025,
                                            0x1027, 0x1028, 0xa2d2, 0xa2d5, 0xa2d6, 0xa2d7, 0xa2d9, 0xa2db, 0xa2dc, 0xa2dd});
  w.nic_vendor = 0x15b3;
  w.nic_device = nic;
  if (coin(rng, 0.25)) {
    w.nic_vendor = pick<uint16_t>(rng, {0x14e4, 0x8086, 0x1077});
    w.nic_device = pick<uint16_t>(rng, {0x1750, 0x1592, 0x1017});
  }
  w.nic_ids_known = coin(rng, 0.85);
  w.rdma_name = pick<std::string>(rng, {"mlx5_0", "", "bnxt_re0", "irdma0", "ibp65s0"});
  w.nic_driver = pick<std::string>(rng, {"mlx5_core", "", "bnxt_en", "ice"});
  for (size_t i = 0; i < kNumGpus; ++i) {
    w.gpu_vendor.at(i) = coin(rng, 0.8) ? 0x10de : 0x1002;
    w.gpu_device.at(i) = pick<uint16_t>(rng, {0x2330, 0x2335, 0x20b5, 0x1eb8, 0x26b9, 0x2684, 0x740f});
    w.gpu_ids_known.at(i) = coin(rng, 0.85);
    w.gpu_name.at(i) = pick<std::string>(rng, {"", "", "NVIDIA H100 80GB HBM3", "AMD Instinct MI210"});
  }
  w.nvme = coin(rng, 0.7);
  if (coin(rng, 0.3)) {
    w.probe.ran = true;
    IbgdaProbeResult r;
    r.rdma_name = "mlx5_0";
    r.bdf = coin(rng, 0.85) ? kNic : "0000:99:00.0";
    r.mlx5 = pick<int>(rng, {-1, 0, 1, 1});
    r.devx = pick<int>(rng, {-1, 0, 1, 1});
    r.atomics = pick<int>(rng, {-1, 0, 1, 1});
    r.dmabuf_umem = pick<int>(rng, {-1, 0, 1});
    r.uar_gpu_map = pick<int>(rng, {-1, 0, 1, 1});
    r.gpu_bdf = pick<std::string>(rng, {"", kGpus.at(0)});
    r.why = pick<std::string>(rng, {"", "cuMemHostRegister(IOMEMORY) of the UAR page: CUDA_ERROR_NOT_PERMITTED"});
    w.probe.devices.push_back(r);
  }
  return w;
}

const ReadinessEntry* entry(const Report& r, const std::string& kind, int gpu, int other) {
  const ReadinessEntry* found = nullptr;
  for (const auto& e : r.readiness)
    if (e.kind == kind && e.gpu == gpu && e.other == other) {
      EXPECT_EQ(found, nullptr) << "two " << kind << " lines for one pair";
      found = &e;
    }
  return found;
}

void expect_same(const ReadinessMode& got, const ReadinessMode& want, const std::string& what) {
  ASSERT_EQ(got.mode, want.mode) << what << "\n got: " << got.reason << "\nwant: " << want.reason;
  ASSERT_EQ(got.unknown, want.unknown) << what;
  ASSERT_EQ(got.reason, want.reason) << what;
  ASSERT_EQ(got.fix, want.fix) << what;
  ASSERT_EQ(got.modelled, want.modelled) << what;
  ASSERT_EQ(got.probed, want.probed) << what;
}

// Every generated node: each NVIDIA GPU gets one IBGDA line per NIC (or one "no NIC" line) and
// one GDS line per NVMe drive (or one "no NVMe" line), each with the mode, reason and fix its
// facts give; other vendors' GPUs get none.
TEST(TruthReadinessStage, EveryLineHasTheModeItsFactsGive) {
  const Topology base = base_node();
  std::mt19937 rng(28);
  for (int n = 0; n < 3000; ++n) {
    const World w = random_world(rng);
    SCOPED_TRACE(w.describe());
    const Topology t = node_of(base, w);
    CheckOptions o;
    o.env = w.env;
    o.gpu_nvme = coin(rng);  // pairs judged or not: the readiness lines are the same
    const Report r = check(t, kb(), o);
    ASSERT_EQ(r.nics.size(), 1u);
    const int nic = r.nics.at(0);
    ASSERT_EQ(r.nvmes.size(), w.nvme ? 1u : 0u);
    size_t lines = 0;
    for (size_t g = 0; g < kNumGpus; ++g) {
      const int gi = t.find(kGpus.at(g));
      if (!is_nvidia(w, g)) continue;
      lines += 2;
      const ReadinessEntry* ib = entry(r, "ibgda", gi, nic);
      ASSERT_TRUE(ib) << kGpus.at(g);
      expect_same(ib->m, expected_ibgda(w, kGpus.at(g)), "ibgda " + kGpus.at(g));
      if (w.nvme) {
        const ReadinessEntry* gds = entry(r, "gds", gi, r.nvmes.at(0));
        ASSERT_TRUE(gds) << kGpus.at(g);
        expect_same(gds->m, decide_gds(gds_facts(w, g, true)), "gds " + kGpus.at(g));
      } else {
        const ReadinessEntry* gds = entry(r, "gds", gi, -1);
        ASSERT_TRUE(gds) << kGpus.at(g);
        EXPECT_EQ(gds->m.mode, "compat");
        const ReadinessMode would = decide_gds(gds_facts(w, g, false));
        EXPECT_EQ(gds->m.fix, would.fix);
        EXPECT_EQ(has(gds->m.reason, "would get " + (would.unknown ? std::string("unknown (") : would.mode + ": ")), w.inspected)
            << gds->m.reason;
        if (w.inspected && HasFailure()) return;
      }
    }
    ASSERT_EQ(r.readiness.size(), lines) << "a line for a GPU that is not NVIDIA's, or an extra one";
    if (HasFailure()) return;
  }
}

// Without a NIC: the line is "none", with what an mlx5 NIC (DEVX and atomics assumed) would get
// on this node's software when the node was inspected, and that NIC as the fix.
TEST(TruthReadinessStage, WithoutANicSaysWhatAnMlx5NicWouldGet) {
  Topology base = base_node();
  base.devices.at(base.find(kNic)).role = Role::None;  // the NIC not there as one
  std::mt19937 rng(2828);
  for (int n = 0; n < 600; ++n) {
    World w = random_world(rng);
    w.probe = IbgdaProbe{};
    SCOPED_TRACE(w.describe());
    const Topology t = node_of(base, w);
    CheckOptions o;
    o.env = w.env;
    const Report r = check(t, kb(), o);
    ASSERT_TRUE(r.nics.empty());
    for (size_t g = 0; g < kNumGpus; ++g) {
      if (!is_nvidia(w, g)) continue;
      const ReadinessEntry* e = entry(r, "ibgda", t.find(kGpus.at(g)), -1);
      ASSERT_TRUE(e);
      IbgdaFacts f;
      f.rdma_nic = f.mlx5 = f.devx = f.atomics = 1;
      f.nic_model = "an mlx5 NIC";
      f.dmabuf_data = dmabuf_data(w, kGpus.at(g));
      f.peer_mem = peer_mem(w);
      f.uar_gpu_map = uar_gpu_map(w, kGpus.at(g));
      const ReadinessMode would = decide_ibgda(f);
      ASSERT_EQ(e->m.mode, "none");
      ASSERT_EQ(e->m.modelled, would.modelled);
      ASSERT_EQ(has(e->m.reason, "would give " + (would.unknown ? std::string("unknown (") : would.mode + ": ")), w.inspected)
          << e->m.reason;
      if (w.inspected) {
        ASSERT_TRUE(has(e->m.reason, would.unknown ? would.reason.substr(9) : would.reason)) << e->m.reason;
      }
      ASSERT_TRUE(has(e->m.fix, "# an NVIDIA ConnectX / BlueField NIC (mlx5) beside this GPU")) << e->m.fix;
      ASSERT_EQ(has(e->m.fix, "; then: " + would.fix), !would.fix.empty()) << e->m.fix;
    }
  }
}

// The live probe's answers replace the predicted facts and the line says which way it went,
// why the probe said what it said, and which GPU it used.
TEST(TruthReadinessStage, ProbeNoteSaysOverrideOrConfirmWithWhyAndGpu) {
  const Topology base = base_node();
  std::mt19937 rng(1628);
  for (int n = 0; n < 600; ++n) {
    World w = random_world(rng);
    if (!w.probe.ran) continue;
    w.gpu_vendor.at(0) = 0x10de;
    w.gpu_ids_known.at(0) = true;
    SCOPED_TRACE(w.describe());
    const Topology t = node_of(base, w);
    CheckOptions o;
    o.env = w.env;
    const Report r = check(t, kb(), o);
    const ReadinessEntry* e = entry(r, "ibgda", t.find(kGpus.at(0)), r.nics.at(0));
    ASSERT_TRUE(e);
    const IbgdaProbeResult& pr = w.probe.devices.at(0);
    if (pr.bdf != kNic) {
      ASSERT_FALSE(e->m.probed);
      ASSERT_EQ(e->m.probe_note, "");
      continue;
    }
    World unprobed = w;
    unprobed.probe = IbgdaProbe{};
    const ReadinessMode predicted = expected_ibgda(unprobed, kGpus.at(0));
    const std::string verdict = e->m.mode != predicted.mode ? "the live probe overrides the prediction (" + predicted.mode + ")"
                                                            : "the live probe confirms the prediction";
    ASSERT_EQ(e->m.probe_note.rfind(verdict, 0), 0u) << e->m.probe_note;
    ASSERT_EQ(has(e->m.probe_note, pr.why), true) << e->m.probe_note;
    ASSERT_EQ(has(e->m.probe_note, "CUDA_ERROR_NOT_PERMITTED"), !pr.why.empty()) << e->m.probe_note;
    ASSERT_EQ(has(e->m.probe_note, "; GPU used: " + pr.gpu_bdf), !pr.gpu_bdf.empty()) << e->m.probe_note;
    ASSERT_EQ(has(e->m.probe_note, "GPU used"), !pr.gpu_bdf.empty()) << e->m.probe_note;
    ASSERT_EQ(has(e->m.probe_note, "()"), false) << e->m.probe_note;
  }
}

// A virtual machine's root bus (Firecracker, QEMU i440fx) whose first function is the NVMe drive:
// its pair with the GPU is a pair like any other. Everything GDS's P2PDMA mode needs is there
// (AMD Zen lets the kernel route through the host bridge), so the line is p2pdma.
TEST(TruthReadinessStage, DriveThatIsTheInputsFirstFunction) {
  FakeNode n;
  fake::add_endpoint(n, "0000:00:02.0", "/sys/devices/pci0000:00/0000:00:02.0", 0x144d, 0xa80a, 0x010802);
  fake::add_endpoint(n, "0000:00:03.0", "/sys/devices/pci0000:00/0000:00:03.0", 0x10de, 0x2335, 0x030200);
  Topology t = fake::from_fake(n);
  ASSERT_EQ(t.find("0000:00:02.0"), 0);
  t.sw.inspected = t.sw.modules_known = true;
  t.sw.modules = {"nvidia", "nvidia_fs", "nvme"};
  t.sw.kernel_release = "6.12.107+deb12-amd64";
  t.sw.stack.nvidia_version_known = t.sw.stack.nvidia_open = true;
  t.sw.stack.nvidia_version = "580.159.04";
  t.sw.stack.params_known = true;
  t.sw.stack.registry_dwords = {{"RMForceStaticBar1", "1"}, {"RmForceDisableIomapWC", "1"}, {"PeerMappingOverride", "1"}};
  t.sw.readiness.kconfig.known = true;
  t.sw.readiness.kconfig.values = {{"CONFIG_PCI_P2PDMA", "y"}};
  t.sw.readiness.nvme_multipath = "N";
  t.cpu.arch = "x86_64";
  t.cpu.vendor = "AuthenticAMD";
  t.cpu.family = 0x19;
  const Report r = check(t, kb(), CheckOptions{});
  ASSERT_EQ(r.nvmes.size(), 1u);
  const ReadinessEntry* e = entry(r, "gds", t.find("0000:00:03.0"), 0);
  ASSERT_TRUE(e);
  GdsFacts f;
  f.nvme = f.kernel_ge_6_2 = f.p2pdma_config = f.open_module = f.driver_ge_565 = f.gpu_supported = f.x86 = 1;
  f.static_bar1 = f.iomap_wc_off = f.multipath_off = f.host_bridge_ok = f.nvidia_fs = 1;
  const ReadinessMode want = decide_gds(f);
  ASSERT_EQ(want.mode, "p2pdma");
  expect_same(e->m, want, "gds");
}

}  // namespace

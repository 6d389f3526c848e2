// Live sysfs (or a copy/snapshot of it). Reads only what the rules need; every
// path read here is what `gdrpeer snapshot` captures. One reader per source of
// facts (sysfs_readers.hpp); the PCI functions and the CPUs have files of their own.
#include <cstdlib>
#include <map>
#include <sstream>

#include "gdrpeer/topo/cuda_probe.hpp"
#include "gdrpeer/topo/inputs.hpp"
#include "gdrpeer/topo/node_capture.hpp"
#include "gdrpeer/topo/nvml_probe.hpp"
#include "sysfs_readers.hpp"

namespace gdrpeer::topo {

namespace sysfs {

std::string trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\r' || s.back() == '\t')) s.pop_back();
  size_t b = 0;
  while (b < s.size() && (s[b] == ' ' || s[b] == '\t')) ++b;
  return s.substr(b);
}

std::string basename_of(const std::string& p) {
  size_t s = p.rfind('/');
  return s == std::string::npos ? p : p.substr(s + 1);
}

void read_iommu(InputFs& fs, const std::vector<std::string>& dirs, Topology& t) {
  std::map<int, std::string> group_types;
  for (size_t i = 0; i < dirs.size(); ++i) {
    auto grp = fs.readlink(dirs[i] + "/iommu_group");
    if (!grp) continue;
    Device& d = t.devices[i];
    std::string g = basename_of(*grp);
    d.iommu_group = std::atoi(g.c_str());
    auto it = group_types.find(d.iommu_group);
    if (it == group_types.end()) {
      auto ty = fs.read("/sys/kernel/iommu_groups/" + g + "/type", 256);
      it = group_types.emplace(d.iommu_group, ty ? trimmed(*ty) : std::string()).first;
    }
    d.iommu_type = it->second;
  }
  // Node-wide IOMMU mode.
  auto groups = fs.list("/sys/kernel/iommu_groups");
  t.iommu_known_per_device = groups && !groups->empty();
  if (!groups && fs.describe() != "/") {
    t.iommu = IommuMode::Unknown;  // a copy without /sys/kernel/iommu_groups (hwloc-gather-topology's) says nothing
  } else if (!groups || groups->empty()) {
    t.iommu = IommuMode::Off;
  } else {
    bool translating = false, identity = false;
    for (const auto& [g, ty] : group_types) {
      if (ty == "identity")
        identity = true;
      else if (ty.rfind("DMA", 0) == 0)
        translating = true;
    }
    t.iommu = translating && identity ? IommuMode::Mixed
              : translating           ? IommuMode::Translating
              : identity              ? IommuMode::Identity
                                      : IommuMode::Unknown;
  }
}

// /sys/class/infiniband/<name>/device -> PCI function.
void read_rdma(InputFs& fs, Topology& t) {
  if (auto ibs = fs.list("/sys/class/infiniband")) {
    for (const auto& ib : *ibs) {
      auto link = fs.readlink("/sys/class/infiniband/" + ib + "/device");
      if (!link) continue;
      auto bdf = parse_bdf(basename_of(*link));
      if (!bdf) continue;
      int i = t.find(*bdf);
      if (i >= 0 && t.devices[i].rdma_name.empty()) t.devices[i].rdma_name = ib;
    }
  }
}

void read_software(InputFs& fs, Software& sw) {
  sw.inspected = true;
  if (auto c = fs.read("/proc/cmdline", 65536)) sw.cmdline = trimmed(*c);
  if (auto r = fs.read("/proc/sys/kernel/osrelease", 4096)) sw.kernel_release = trimmed(*r);
  if (auto m = fs.read("/proc/modules", 1 << 20)) {
    sw.modules_known = true;
    std::stringstream ss(*m);
    std::string line;
    while (std::getline(ss, line)) {
      size_t sp = line.find(' ');
      if (sp != std::string::npos && sp > 0) sw.modules.push_back(line.substr(0, sp));
    }
  }
  // A copy of /sys without /proc still names the loaded (and built-in) modules.
  if (!sw.modules_known)
    if (auto mods = fs.list("/sys/module")) {
      sw.modules_known = true;
      sw.modules = *mods;
    }
  if (auto v = fs.read("/proc/driver/nvidia/version", 4096)) {
    std::string s = *v;
    sw.nvidia_version = trimmed(s.substr(0, s.find('\n')));
  }
  if (auto mp = fs.list("/sys/kernel/mm/memory_peers")) {
    sw.memory_peers_dir = true;
    sw.memory_peers = *mp;
  }
  // A snapshot carries the CUDA probe's answers from the node it was taken on.
  if (auto c = fs.read("/gdrpeer-snapshot/cuda-probe", 65536)) parse_cuda_probe_text(*c, sw);
}

void read_platform(InputFs& fs, Topology& t) {
  if (auto v = fs.read("/sys/class/dmi/id/sys_vendor", 4096)) t.dmi_vendor = trimmed(*v);
  if (auto v = fs.read("/sys/class/dmi/id/product_name", 4096)) t.dmi_product = trimmed(*v);
  // Boards without DMI (Jetson and other device-tree systems) name themselves in
  // the device tree ("NVIDIA Jetson AGX Orin Developer Kit\0"): the platform
  // rules match it as the product. Read only when DMI gave none.
  if (t.dmi_product.empty())
    if (auto v = fs.read("/proc/device-tree/model", 4096)) t.dmi_product = trimmed(v->substr(0, v->find('\0')));
}

}  // namespace sysfs

Topology parse_sysfs(InputFs& fs, const std::string& name) {
  Topology t = new_topology(name, "sysfs");
  const sysfs::PciFunctions pci = sysfs::read_pci_functions(fs, name, t);
  sysfs::read_iommu(fs, pci.dirs, t);
  sysfs::read_rdma(fs, t);
  sysfs::read_software(fs, t.sw);
  sysfs::read_stack(fs, t.sw);
  // Causes are looked for in the log read: without its end, none found proves nothing.
  if (!t.sw.stack.kernel_log_cut.empty())
    t.notes.push_back("kernel log not read to its end: " + t.sw.stack.kernel_log_cut +
                      "; a peer-memory load failure or dma-buf refusal logged after that is not in these findings");
  sysfs::read_readiness(fs, t.sw);
  sysfs::read_platform(fs, t);
  sysfs::read_cpus(fs, pci.local_cpus, t);
  // A snapshot carries what NVML said on its node: applied as the live check applies it.
  if (auto n = fs.read(kSnapshotNvmlPath, 1 << 20)) apply_nvml(parse_nvml_record_text(*n), t);
  t.finalize();
  return t;
}

}  // namespace gdrpeer::topo

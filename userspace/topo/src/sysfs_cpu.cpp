// CPUs in sysfs and procfs: NUMA nodes, the node of PCI functions that lack a
// numa_node file (from their local CPUs), and the CPU's identity.
#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <set>
#include <sstream>

#include "sysfs_readers.hpp"

namespace gdrpeer::topo::sysfs {

namespace {

constexpr size_t kMaxCpus = 1 << 16;

// Without trailing unset CPUs, so that a list and a mask of one set compare equal.
CpuSet trimmed_set(CpuSet set) {
  while (!set.empty() && !set.back()) set.pop_back();
  return set;
}

bool intersects(const CpuSet& a, const CpuSet& b) {
  for (size_t i = 0; i < a.size() && i < b.size(); ++i)
    if (a[i] && b[i]) return true;
  return false;
}

bool empty_set(const CpuSet& a) { return std::find(a.begin(), a.end(), true) == a.end(); }

// Devices whose numa_node file is missing (copies of /sys made with cp or tar
// that skipped it): hwloc places them by their local CPUs, and so does this.
// A device's CPUs meeting exactly one node's CPUs are that node's; without node
// directories, devices with pairwise disjoint CPU sets are on distinct nodes,
// numbered in order of appearance. Anything else stays unknown.
void locality_from_cpus(Topology& t, const std::map<size_t, CpuSet>& local, const std::map<int, CpuSet>& nodes) {
  if (local.empty()) return;
  int placed = 0;
  if (!nodes.empty()) {
    for (const auto& [i, cpus] : local) {
      int found = -1, count = 0;
      for (const auto& [n, ncpus] : nodes)
        if (intersects(cpus, ncpus)) {
          found = n;
          ++count;
        }
      if (count == 1) {
        t.devices[i].numa = found;
        ++placed;
      }
    }
  } else {
    std::vector<const CpuSet*> distinct;
    bool disjoint = true;
    for (const auto& [i, cpus] : local) {
      if (empty_set(cpus)) {
        disjoint = false;
        break;
      }
      bool seen = false;
      for (const CpuSet* d : distinct) {
        if (*d == cpus)
          seen = true;
        else if (intersects(*d, cpus))
          disjoint = false;
      }
      if (!seen) distinct.push_back(&cpus);
    }
    if (disjoint && distinct.size() > 1) {
      for (const auto& [i, cpus] : local)
        for (size_t n = 0; n < distinct.size(); ++n)
          if (intersects(*distinct[n], cpus)) t.devices[i].numa = static_cast<int>(n);
      placed = static_cast<int>(local.size());
      if (t.numa_nodes == 0) t.numa_nodes = static_cast<int>(distinct.size());
    }
  }
  if (placed > 0)
    t.notes.push_back("numa_node missing for " + std::to_string(local.size()) + " device(s): NUMA node of " + std::to_string(placed) +
                      " taken from their local CPUs (local_cpulist/local_cpus)" + (nodes.empty() ? ", numbered by first appearance" : ""));
}

}  // namespace

CpuSet parse_cpulist(const std::string& s) {
  CpuSet set;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    char* e = nullptr;
    unsigned long lo = std::strtoul(item.c_str(), &e, 10), hi = lo;
    if (e == item.c_str()) return {};
    if (*e == '-') {
      const char* h = e + 1;
      hi = std::strtoul(h, &e, 10);
      if (e == h) return {};
    }
    if (*e || hi < lo || hi >= kMaxCpus) return {};
    if (set.size() <= hi) set.resize(hi + 1);
    for (unsigned long c = lo; c <= hi; ++c) set[c] = true;
  }
  return trimmed_set(set);
}

std::string format_cpulist(const CpuSet& set) {
  std::string s;
  for (size_t i = 0; i < set.size();) {
    if (!set[i]) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j + 1 < set.size() && set[j + 1]) ++j;
    if (!s.empty()) s += ',';
    s += std::to_string(i);
    if (j > i) s += '-' + std::to_string(j);
    i = j + 1;
  }
  return s;
}

CpuSet parse_cpumask(const std::string& s) {
  std::vector<std::string> words;
  std::stringstream ss(s);
  std::string w;
  while (std::getline(ss, w, ',')) words.push_back(w);
  if (words.size() * 32 > kMaxCpus) return {};
  CpuSet set(words.size() * 32);
  for (size_t i = 0; i < words.size(); ++i) {
    char* e = nullptr;
    unsigned long v = std::strtoul(words[i].c_str(), &e, 16);
    if (words[i].empty() || *e) return {};
    const size_t base = (words.size() - 1 - i) * 32;
    for (size_t b = 0; b < 32; ++b) set[base + b] = (v >> b) & 1;
  }
  return trimmed_set(set);
}

void read_cpus(InputFs& fs, const std::map<size_t, CpuSet>& local_cpus, Topology& t) {
  std::map<int, CpuSet> node_cpus;
  std::set<int> folders;  // the nodes that have a folder: the online ones
  if (auto nodes = fs.list("/sys/devices/system/node")) {
    int n = 0;
    for (const auto& e : *nodes)
      if (e.rfind("node", 0) == 0 && e.size() > 4 && std::isdigit(static_cast<unsigned char>(e[4]))) {
        ++n;
        const int node = std::atoi(e.c_str() + 4);
        folders.insert(node);
        // Listed (not only counted) so that a snapshot records the node's folder and
        // counts the same NUMA nodes offline.
        fs.list("/sys/devices/system/node/" + e);
        // Read always: the CPU affinity of a function without local_cpulist is its node's.
        if (auto l = fs.read("/sys/devices/system/node/" + e + "/cpulist", 65536)) node_cpus[node] = parse_cpulist(trimmed(*l));
      }
    t.numa_nodes = n;
    // numa_node -1 means "no NUMA information" (firmware without an SRAT/_PXM, or a VM);
    // on a machine with one NUMA node every device is on it, as nvidia-smi reads it.
    if (n == 1)
      for (auto& d : t.devices)
        if (d.numa < 0) d.numa = *folders.begin();
    // The kernel makes a folder for each online node (drivers/base/node.c node_dev_init(), and
    // register_one_node()/unregister_one_node() as memory hotplug onlines or offlines one). A
    // numa_node naming a node without one names a node that is not online (arm64 takes a root
    // bus's node from _PXM without x86's node_online() check; a node whose memory was removed
    // goes offline under its devices) or a copy that lost the folder: no CPUs or memory of any
    // node this input has are known to be local to it, so its node is unknown, not a guess. A
    // node directory without any node folder (a copy that skipped them) says nothing of that.
    std::string homeless;
    for (auto& d : t.devices)
      if (n > 0 && d.numa >= 0 && folders.count(d.numa) == 0) {
        homeless += (homeless.empty() ? "" : ", ") + d.bdf + " (numa_node " + std::to_string(d.numa) + ")";
        d.numa = -1;
      }
    if (!homeless.empty())
      t.notes.push_back("numa_node names a NUMA node without a /sys/devices/system/node folder (not online) for " + homeless +
                        ": not taken as their NUMA node");
  }
  locality_from_cpus(t, local_cpus, node_cpus);
  if (auto ci = fs.read("/proc/cpuinfo", 8 << 20)) {
    std::stringstream ss(*ci);
    std::string line;
    std::map<std::string, bool> packages;
    CpuSet online;  // "processor : N" lines: the online CPUs
    while (std::getline(ss, line)) {
      size_t c = line.find(':');
      if (c == std::string::npos) continue;
      std::string k = trimmed(line.substr(0, c)), v = trimmed(line.substr(c + 1));
      CpuInfo& cpu = t.cpu;
      if (k == "vendor_id" && cpu.vendor.empty()) {
        cpu.vendor = v;
        cpu.arch = "x86_64";
      } else if (k == "cpu family" && cpu.family < 0)
        cpu.family = std::atoi(v.c_str());
      else if (k == "model" && cpu.model < 0)
        cpu.model = std::atoi(v.c_str());
      else if (k == "model name" && cpu.model_name.empty())
        cpu.model_name = v;
      else if (k == "physical id")
        packages[v] = true;
      else if (k == "processor" && !v.empty() && std::isdigit(static_cast<unsigned char>(v[0]))) {
        const size_t n = std::strtoul(v.c_str(), nullptr, 10);
        if (n < kMaxCpus) {
          if (online.size() <= n) online.resize(n + 1);
          online[n] = true;
        }
      } else if (k == "flags" && v.find(" hypervisor") != std::string::npos)
        cpu.hypervisor = true;
      else if (k == "CPU implementer" && cpu.arm_implementer < 0) {
        cpu.arm_implementer = static_cast<int>(std::strtol(v.c_str(), nullptr, 0));
        cpu.arch = "aarch64";
      } else if (k == "CPU part" && cpu.arm_part < 0)
        cpu.arm_part = static_cast<int>(std::strtol(v.c_str(), nullptr, 0));
      else if (k == "cpu" && v.rfind("POWER", 0) == 0 && cpu.model_name.empty()) {
        cpu.model_name = v;
        cpu.vendor = "IBM";
        cpu.arch = "ppc64le";
      }
    }
    t.cpu.sockets = static_cast<int>(packages.size());
    // One NUMA node: every online CPU is local to every function (an older snapshot
    // recorded neither local_cpulist nor the node's cpulist).
    if (t.numa_nodes == 1 && node_cpus.empty() && !online.empty()) node_cpus[*folders.begin()] = online;
  }
  for (auto& d : t.devices)
    if (d.cpu_affinity.empty() && d.numa >= 0)
      if (auto it = node_cpus.find(d.numa); it != node_cpus.end()) d.cpu_affinity = format_cpulist(it->second);
}

}  // namespace gdrpeer::topo::sysfs

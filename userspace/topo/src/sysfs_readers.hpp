// The readers parse_sysfs() is made of, one per source of facts in a sysfs
// tree: PCI functions, IOMMU groups, RDMA devices, the software stack, the
// platform's name (DMI or device tree) and the CPUs with their NUMA nodes.
#pragma once

#include <sys/types.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

#include <optional>
#include <string_view>
#include "gdrpeer/topo/inputs.hpp"

#include "gdrpeer/topo/model.hpp"

namespace gdrpeer::topo::sysfs {

// Without leading blanks and trailing blanks or line ends.
std::string trimmed(std::string s);
// The last component of a path.
std::string basename_of(const std::string& p);

// A PCIe link width as the kernel prints it ("%u", drivers/pci/pci-sysfs.c) and NCCL copies it
// into link_width: 1 to 32 lanes, 0 or 255 (PCIE_LNK_WIDTH_UNKNOWN, include/linux/pci.h) unknown,
// given as 0; nullopt for anything the kernel cannot print (empty, not 1-3 digits, above 32).
std::optional<int> lane_count(std::string_view s);

// A set of CPUs, indexed by CPU number.
using CpuSet = std::vector<bool>;

// What the PCI reader leaves for the readers after it, per device index.
struct PciFunctions {
  std::vector<std::string> dirs;        // sysfs directory of each function
  std::map<size_t, CpuSet> local_cpus;  // local CPUs of functions without a numa_node file
};

// /sys/bus/pci/devices/*: ids, class, NUMA node, links, BARs, config space,
// driver and the PCI hierarchy. Throws MissingInput without that directory.
PciFunctions read_pci_functions(InputFs& fs, const std::string& name, Topology& t);
// Each function's IOMMU group and its type; the node-wide IOMMU mode.
void read_iommu(InputFs& fs, const std::vector<std::string>& dirs, Topology& t);
// /sys/class/infiniband: the RDMA device name of each PCI function.
void read_rdma(InputFs& fs, Topology& t);
// Kernel command line and release, loaded modules, the NVIDIA driver, MOFED
// peer-memory clients, and the CUDA probe's answers a snapshot carries.
void read_software(InputFs& fs, Software& sw);
// The GPUDirect stack above PCIe: NVIDIA params and flavour, modprobe.d, memory_peers,
// nvidia_peermem's parameters, the kernel log (stack_read.cpp). After read_software().
void read_stack(InputFs& fs, Software& sw);
// The kernel log's text as /dev/kmsg hands it out (Documentation/ABI/testing/dev-kmsg): each
// call of read_record is one read() of it (one record; -1 with errno EAGAIN at its end, the
// file being non-blocking; EPIPE when records were overwritten since the last read). The live
// reader passes ::read of /dev/kmsg; tests pass a model of the kernel's devkmsg_read().
// It takes at most 200,000 records (docs/check.md; an EPIPE counts as one: it costs a read), so
// that a log printed as fast as it is read ends; one more read then says whether the log ended
// there. Stopping short of the end (the cap, a failed read) is said, never silent: a cause
// logged after that point is not in the text.
struct KmsgText {
  std::string text;
  std::string stopped;  // "" when read to the end (EAGAIN, or 0 from a plain file); else why not
};
KmsgText read_kmsg(const std::function<ssize_t(char*, size_t)>& read_record);
// Kernel configuration, nvme_core multipath, nvidia-fs (readiness_read.cpp).
void read_readiness(InputFs& fs, Software& sw);
// The platform's vendor and product from DMI, or the device tree's model.
void read_platform(InputFs& fs, Topology& t);
// NUMA nodes (and, for functions without numa_node, their node from their local
// CPUs) and the CPU's identity from /proc/cpuinfo.
void read_cpus(InputFs& fs, const std::map<size_t, CpuSet>& local_cpus, Topology& t);

// A cpulist ("0-23,48-71") or a cpumask ("ffffff,00000000", 32-bit words, most
// significant first), as sysfs writes them; empty when malformed.
CpuSet parse_cpulist(const std::string& s);
CpuSet parse_cpumask(const std::string& s);
// The list form of a set ("0-23,48-71"), as local_cpulist writes it; "" for an empty set.
std::string format_cpulist(const CpuSet& set);

}  // namespace gdrpeer::topo::sysfs

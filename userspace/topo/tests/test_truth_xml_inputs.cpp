// The hwloc and NCCL XML parsers against the formats' own definitions (issue 28: the generated
// operator mutants of parse_hwloc.cpp and parse_nccl.cpp that no test caught). Every expected
// value below follows from a cited definition, never from the parser's output:
//  - hwloc: hwloc/topology-xml.c (hwloc__xml_import_object_attr: the attribute formats,
//    pci_type "%x [%04x:%04x] [%04x:%04x] %02x", bridge_pci "%x:[%02x-%02x]", bridge_type
//    "%u-%u" with 0 = host; hwloc__xml_import_object: osdev_type as one number before 3.0 (2 Net,
//    3 OpenFabrics) and a bit mask from 3.0 on, normal objects carry cpuset and nodeset, I/O
//    objects neither; hwloc__xml_import_distances: <indexes> and <u64values>, nbobjs x nbobjs
//    values, row i being the values from object i; hwloc__xml_export_object_contents), hwloc/
//    bitmap.c (hwloc_bitmap_sscanf/snprintf: 32-bit words, most significant first, an empty
//    word is zero, "0xf...f" the infinite set) and include/hwloc.h (osdev types; "I/O objects
//    have NULL CPU and node sets"). The cpusets were also given to hwloc-calc 2.9 (Debian's
//    hwloc), which prints the same sets.
//  - NCCL: src/graph/xml.cc (what ncclTopoGetXmlFromSys/FillGpu/GetXmlFromGpu write: <cpu
//    numaid affinity arch vendor familyid modelid>, <pci busid class vendor device
//    subsystem_vendor subsystem_device link_speed link_width>, <nvlink target count tclass>,
//    <c2c bw count>, <gpu gdr>, <net name gdr>) and src/graph/topo.cc (how ncclTopoAddPci/
//    AddNvLinks read them: class 0x0604 a PCI switch, 0x0680 an NVSwitch, 0x03 a GPU, 0x02 a NIC).
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>

#include "gdrpeer/topo/errors.hpp"
#include "gdrpeer/topo/inputs.hpp"
#include "gdrpeer/topo/model.hpp"
#include "gdrpeer/topo/render.hpp"
#include "test_topo_support.hpp"

namespace gdrpeer::topo {
namespace {

using testing::reference;
using testing::slurp;

// ---- hwloc XML -------------------------------------------------------------------------------

// A whole hwloc document around `body`; hwloc 1 wrote <topology> without a version.
std::string hwloc_doc(const std::string& body, const std::string& version = "2.0") {
  return "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<topology" + (version.empty() ? "" : " version=\"" + version + "\"") + ">\n" + body +
         "</topology>\n";
}

// A host bridge (bridge_type 0-1: upstream host, downstream PCI) whose root bus is `bus`.
std::string host_bridge(const std::string& bus, const std::string& inner, const std::string& domain = "0000") {
  return "<object type=\"Bridge\" bridge_type=\"0-1\" depth=\"0\" bridge_pci=\"" + domain + ":[" + bus + "-" + bus + "]\">\n" + inner +
         "</object>\n";
}

constexpr const char* kH100 = "0302 [10de:2330] [10de:16c1] a1";  // 3D controller, NVIDIA H100 SXM5
constexpr const char* kCx7 = "0207 [15b3:1021] [15b3:0041] 00";   // InfiniBand controller, ConnectX-7

std::string pcidev(const std::string& bdf, const std::string& type, const std::string& inner = "", const std::string& extra = "") {
  return "<object type=\"PCIDev\" pci_busid=\"" + bdf + "\" pci_type=\"" + type + "\"" + extra + ">\n" + inner + "</object>\n";
}

const Device& dev(const Topology& t, const std::string& bdf) {
  const int i = t.find(bdf);
  if (i < 0) throw std::runtime_error("no device " + bdf);
  return t.devices[static_cast<size_t>(i)];
}

// A function's class and ids, whether known and what they are, in this order: class known, ids
// known, class code, vendor, device, subsystem vendor, subsystem device (as lspci -nn shows them).
using IdFields = std::tuple<bool, bool, uint32_t, uint16_t, uint16_t, uint16_t, uint16_t>;
IdFields id_fields(const Device& d) {
  return {d.class_known, d.ids_known, d.class_code, d.vendor, d.device, d.subsys_vendor, d.subsys_device};
}

int host_bridge_numa(const Topology& t, const std::string& name) {
  for (const auto& h : t.host_bridges)
    if (h.name == name) return h.numa;
  throw std::runtime_error("no host bridge " + name);
}

// The line an InputError names, -1 when the parser accepted the text.
template <typename Parse>
long error_line(Parse parse, const std::string& text, std::string* what = nullptr) {
  try {
    parse(text, "t.xml", {});
  } catch (const InputError& e) {
    if (what) *what = e.what();
    EXPECT_EQ(e.file(), "t.xml");
    return e.line();
  }
  return -1;
}
long hwloc_error_line(const std::string& text, std::string* what = nullptr) { return error_line(parse_hwloc_xml, text, what); }
long nccl_error_line(const std::string& text, std::string* what = nullptr) { return error_line(parse_nccl_xml, text, what); }

// The cpu_affinity of one GPU that hangs below a Machine object with cpuset `cs`.
std::string affinity_below_machine(const std::string& cs) {
  const Topology t = parse_hwloc_xml(hwloc_doc("<object type=\"Machine\" os_index=\"0\" cpuset=\"" + cs + "\" nodeset=\"0x00000001\">\n" +
                                               host_bridge("17", pcidev("0000:17:00.0", kH100)) + "</object>\n"),
                                     "t.xml");
  return dev(t, "0000:17:00.0").cpu_affinity;
}

// hwloc_bitmap_sscanf: comma-separated 32-bit words, the most significant first; an empty word
// (hwloc_bitmap_snprintf writes ",," for an all-zero word) is zero; the last word may be "0x0".
// As a list, the form sysfs local_cpulist and nvidia-smi's CPU Affinity use.
TEST(TruthHwlocCpuset, WordsAreThirtyTwoBitsMostSignificantFirst) {
  EXPECT_EQ(affinity_below_machine("0x000000ff,0xffffffff"), "0-39");
  EXPECT_EQ(affinity_below_machine("0x0000000f,,0x00000003"), "0-1,64-67");  // hwloc-calc: --taskset 0xf0000000000000003
  EXPECT_EQ(affinity_below_machine("0x00000001,0x0"), "32");
  EXPECT_EQ(affinity_below_machine("0x00000003"), "0-1");
  EXPECT_EQ(affinity_below_machine("0x80000000,0x00000001"), "0,63");
  EXPECT_EQ(affinity_below_machine("ff"), "0-7");  // the word is read with strtoul(.., 16): "0x" optional
}

// What is not a finite set of 32-bit words is unknown (""), never a guess: the infinite set
// ("0xf...f", with or without words after it), a word wider than 32 bits, a non-hex word.
TEST(TruthHwlocCpuset, InfiniteOrMalformedSetIsUnknown) {
  EXPECT_EQ(affinity_below_machine("0xf...f"), "");
  EXPECT_EQ(affinity_below_machine("0xf...f,0xffff0000"), "");
  EXPECT_EQ(affinity_below_machine("0x1ffffffff"), "");
  EXPECT_EQ(affinity_below_machine("0x0000000g"), "");
  EXPECT_EQ(affinity_below_machine("0x000000ff,0xzz"), "");
}

// An I/O object has no cpuset (hwloc.h: "I/O objects have NULL CPU and node sets"); its CPUs are
// those of the nearest normal object above it that carries one: Machine, Package (Socket before
// hwloc 2), Group, Die, or (hwloc 1, where I/O hangs below it) NUMANode.
TEST(TruthHwlocCpuset, FromTheNearestNormalObjectAbove) {
  for (const char* type : {"Package", "Socket", "Group", "Die", "NUMANode"}) {
    const Topology t = parse_hwloc_xml(
        hwloc_doc(std::string("<object type=\"Machine\" cpuset=\"0x000000ff\" nodeset=\"0x00000001\">\n") + "<object type=\"" + type +
                  "\" os_index=\"0\" cpuset=\"0x0000000c\" nodeset=\"0x00000001\">\n" + host_bridge("17", pcidev("0000:17:00.0", kH100)) +
                  "</object>\n" + host_bridge("18", pcidev("0000:18:00.0", kCx7)) + "</object>\n"),
        "t.xml");
    EXPECT_EQ(dev(t, "0000:17:00.0").cpu_affinity, "2-3") << type;
    EXPECT_EQ(dev(t, "0000:18:00.0").cpu_affinity, "0-7") << type;
  }
  // Two packages: each device gets its own package's CPUs (the sets are converted once per
  // cpuset attribute, so two attributes with one text must not be mixed up either).
  const Topology t =
      parse_hwloc_xml(hwloc_doc("<object type=\"Machine\" cpuset=\"0x0000ffff\" nodeset=\"0x00000003\">\n"
                                "<object type=\"Package\" os_index=\"0\" cpuset=\"0x000000ff\" nodeset=\"0x00000001\">\n" +
                                host_bridge("17", pcidev("0000:17:00.0", kH100)) + host_bridge("18", pcidev("0000:18:00.0", kCx7)) +
                                "</object>\n<object type=\"Package\" os_index=\"1\" cpuset=\"0x0000ff00\" nodeset=\"0x00000002\">\n" +
                                host_bridge("97", pcidev("0000:97:00.0", kH100)) + "</object>\n</object>\n"),
                      "t.xml");
  EXPECT_EQ(dev(t, "0000:17:00.0").cpu_affinity, "0-7");
  EXPECT_EQ(dev(t, "0000:18:00.0").cpu_affinity, "0-7");
  EXPECT_EQ(dev(t, "0000:97:00.0").cpu_affinity, "8-15");
}

// hwloc 2 hangs I/O below the highest object whose cpuset is the device's locality
// (pci-common.c hwloc__pci_find_insert_io_parent_by_cpuset): with one NUMA node per L3 (AMD's
// LLC-as-NUMA), an L3Cache, or a Core. hwloc-calc 2.9 on this layout (as a complete topology):
// pci=0000:17:00.0 --po -I pu gives 0,1 and -I numa 0; pci=0000:97:00.0 gives 2 and 1.
TEST(TruthHwlocCpuset, IoBelowACacheHasTheCachesCpus) {
  const std::string l3 =
      "<object type=\"L3Cache\" cpuset=\"0x00000003\" nodeset=\"0x00000001\" cache_size=\"33554432\" depth=\"3\" cache_type=\"0\">\n"
      "<object type=\"NUMANode\" os_index=\"0\" cpuset=\"0x00000003\" nodeset=\"0x00000001\"/>\n"
      "<object type=\"Core\" os_index=\"0\" cpuset=\"0x00000001\" nodeset=\"0x00000001\">\n"
      "<object type=\"PU\" os_index=\"0\" cpuset=\"0x00000001\" nodeset=\"0x00000001\"/>\n</object>\n";
  const Topology t = parse_hwloc_xml(
      hwloc_doc(
          "<object type=\"Machine\" cpuset=\"0x0000000f\" nodeset=\"0x00000003\">\n"
          "<object type=\"Package\" os_index=\"0\" cpuset=\"0x0000000f\" nodeset=\"0x00000003\">\n" +
          l3 + host_bridge("17", pcidev("0000:17:00.0", kH100)) + "</object>\n" +
          "<object type=\"L3Cache\" cpuset=\"0x0000000c\" nodeset=\"0x00000002\" cache_size=\"33554432\" depth=\"3\" cache_type=\"0\">\n"
          "<object type=\"Core\" os_index=\"2\" cpuset=\"0x00000004\" nodeset=\"0x00000002\">\n" +
          host_bridge("97", pcidev("0000:97:00.0", kH100)) + "</object>\n</object>\n</object>\n</object>\n"),
      "t.xml");
  EXPECT_EQ(dev(t, "0000:17:00.0").cpu_affinity, "0-1");
  EXPECT_EQ(host_bridge_numa(t, "0000:17"), 0);
  EXPECT_EQ(dev(t, "0000:97:00.0").cpu_affinity, "2");  // below a Core: that core's
  EXPECT_EQ(host_bridge_numa(t, "0000:97"), 1);
}

// A document without any cpuset (an excerpt) leaves every device's CPUs unknown.
TEST(TruthHwlocCpuset, NoCpusetAnywhereIsUnknown) {
  const Topology t = parse_hwloc_xml(hwloc_doc(host_bridge("17", pcidev("0000:17:00.0", kH100))), "t.xml");
  EXPECT_EQ(dev(t, "0000:17:00.0").cpu_affinity, "");
}

// The NUMA node of a host bridge: the nodeset of the nearest normal object above it when that
// set holds exactly one node (hwloc_bitmap_sscanf's words, as for cpusets), unknown (-1) when it
// holds several or none.
int numa_below_package(const std::string& ns) {
  const Topology t = parse_hwloc_xml(hwloc_doc("<object type=\"Package\" os_index=\"0\" cpuset=\"0x000000ff\" nodeset=\"" + ns + "\">\n" +
                                               host_bridge("17", pcidev("0000:17:00.0", kH100)) + "</object>\n"),
                                     "t.xml");
  return host_bridge_numa(t, "0000:17");
}

TEST(TruthHwlocNodeset, OneNodeGivesTheHostBridgeItsNode) {
  EXPECT_EQ(numa_below_package("0x00000001"), 0);
  EXPECT_EQ(numa_below_package("0x00000002"), 1);
  EXPECT_EQ(numa_below_package("0x80000000"), 31);
  EXPECT_EQ(numa_below_package("0x00000001,0x0"), 32);
  EXPECT_EQ(numa_below_package("0x00000002,0x0"), 33);
  EXPECT_EQ(numa_below_package("0x00000001,,0x0"), 64);
  EXPECT_EQ(numa_below_package("0x00000001,0x00000000"), 32);
  EXPECT_EQ(numa_below_package("4"), 2);
}

TEST(TruthHwlocNodeset, SeveralOrNoNodesAreUnknown) {
  EXPECT_EQ(numa_below_package("0x00000003"), -1);
  EXPECT_EQ(numa_below_package("0x00000001,0x00000001"), -1);
  EXPECT_EQ(numa_below_package("0x00000001,,0x00000001"), -1);
  EXPECT_EQ(numa_below_package("0x0"), -1);
  EXPECT_EQ(numa_below_package("0x00000000,0x0"), -1);
}

// A nodeset that is not a bitmap is an error naming the object's line.
TEST(TruthHwlocNodeset, MalformedNodesetIsAnErrorAtItsLine) {
  std::string what;
  EXPECT_EQ(hwloc_error_line(hwloc_doc("<object type=\"Machine\" nodeset=\"0x00000001\">\n"
                                       "<object type=\"Package\" nodeset=\"0x0000000g\">\n</object>\n</object>\n"),
                             &what),
            4);
  EXPECT_NE(what.find("nodeset=\"0x0000000g\""), std::string::npos) << what;
  EXPECT_EQ(hwloc_error_line(hwloc_doc("<object type=\"Machine\" nodeset=\"0x1,0xzz\">\n</object>\n")), 3);
  // A word wider than 32 bits is not hwloc's (hwloc_bitmap_snprintf writes 8 digits at most), and
  // would name other nodes than it seems to: an error, not a guess.
  EXPECT_EQ(hwloc_error_line(hwloc_doc("<object type=\"Machine\" nodeset=\"0x100000002\">\n</object>\n")), 3);
}

// The nearest object with a nodeset decides, even when an outer one names another node or
// several; an object without one says nothing. In hwloc 1 layout the NUMANode encloses the
// I/O, and its os_index is the node (hwloc 2 checks that a NUMANode's nodeset is its os_index).
TEST(TruthHwlocNodeset, NearestObjectDecides) {
  const Topology t = parse_hwloc_xml(hwloc_doc("<object type=\"Machine\" cpuset=\"0x0000ffff\" nodeset=\"0x00000003\">\n" +
                                               host_bridge("03", pcidev("0000:03:00.0", kCx7)) +
                                               "<object type=\"Package\" os_index=\"0\" cpuset=\"0x000000ff\" nodeset=\"0x00000002\">\n"
                                               "<object type=\"Group\" cpuset=\"0x0000000f\">\n" +
                                               host_bridge("17", pcidev("0000:17:00.0", kH100)) + "</object>\n</object>\n</object>\n"),
                                     "t.xml");
  EXPECT_EQ(host_bridge_numa(t, "0000:17"), 1);
  EXPECT_EQ(host_bridge_numa(t, "0000:03"), -1);
  const Topology v1 = parse_hwloc_xml(hwloc_doc("<object type=\"Machine\" cpuset=\"0x0000ffff\" nodeset=\"0x0000000c\">\n"
                                                "<object type=\"NUMANode\" os_index=\"3\" cpuset=\"0x0000ff00\" nodeset=\"0x00000008\">\n" +
                                                    host_bridge("97", pcidev("0000:97:00.0", kH100)) +
                                                    "</object>\n"
                                                    "<object type=\"NUMANode\" os_index=\"2\" cpuset=\"0x000000ff\">\n" +
                                                    host_bridge("17", pcidev("0000:17:00.0", kH100)) + "</object>\n</object>\n",
                                                "1.0"),
                                      "t.xml");
  EXPECT_EQ(host_bridge_numa(v1, "0000:97"), 3);
  EXPECT_EQ(host_bridge_numa(v1, "0000:17"), 2);
  EXPECT_EQ(v1.numa_nodes, 2);
}

// hwloc refuses a cpuset or nodeset on an I/O object (hwloc__xml_import_object: "invalid
// special object %s with cpuset or nodeset"; hwloc.h: I/O objects have none), and so does this
// parser, at the object's line, rather than take a locality from an object that has none.
TEST(TruthHwlocNodeset, CpusetOrNodesetOnAnIoObjectIsAnError) {
  const std::string pkg = "<object type=\"Package\" os_index=\"0\" cpuset=\"0x000000ff\" nodeset=\"0x00000001\">\n";
  for (const std::string& attr : {std::string(" cpuset=\"0x00000001\""), std::string(" nodeset=\"0x00000002\"")}) {
    std::string what;
    EXPECT_EQ(hwloc_error_line(hwloc_doc(pkg + host_bridge("17", pcidev("0000:17:00.0", kH100, "", attr)) + "</object>\n"), &what), 5)
        << attr;
    EXPECT_NE(what.find("PCIDev"), std::string::npos) << what;
    EXPECT_EQ(hwloc_error_line(hwloc_doc(pkg + "<object type=\"Bridge\" bridge_type=\"0-1\" bridge_pci=\"0000:[17-17]\"" + attr +
                                         ">\n</object>\n</object>\n")),
              4)
        << attr;
    EXPECT_EQ(
        hwloc_error_line(hwloc_doc(
            pkg +
            host_bridge("17", pcidev("0000:17:00.0", kH100, "<object type=\"OSDev\" name=\"nvml0\"" + attr + " osdev_type=\"1\"/>\n")) +
            "</object>\n")),
        6)
        << attr;
  }
}

// pci_type "%x [%04x:%04x] [%04x:%04x] %02x": class (base and sub class), vendor:device,
// subsystem vendor:device, revision.
TEST(TruthHwlocPci, PciTypeGivesClassIdsAndSubsystem) {
  const Topology t = parse_hwloc_xml(hwloc_doc(host_bridge("17", pcidev("0000:17:00.0", "0302 [10de:20b0] [10de:134f] a1") +
                                                                     pcidev("0000:17:00.1", "0207 [15b3:101b] [15b3:0007] 00 00"))),
                                     "t.xml");
  EXPECT_EQ(id_fields(dev(t, "0000:17:00.0")), IdFields(true, true, 0x030200, 0x10de, 0x20b0, 0x10de, 0x134f));
  const Device& n = dev(t, "0000:17:00.1");
  EXPECT_EQ(n.class_code, 0x020700u);  // hwloc 3 appends the prog-if
  EXPECT_EQ(n.vendor, 0x15b3);
  EXPECT_EQ(n.device, 0x101b);
  EXPECT_EQ(n.subsys_vendor, 0x15b3);
  EXPECT_EQ(n.subsys_device, 0x0007);
}

// Without pci_type the ids are unknown; a pci_type that is not the format is an error at the
// object's line (hwloc ignores such an attribute with a warning, the ids stay unknown to it).
TEST(TruthHwlocPci, MalformedPciTypeIsAnErrorAtItsLine) {
  const Topology t = parse_hwloc_xml(hwloc_doc(host_bridge("17", "<object type=\"PCIDev\" pci_busid=\"0000:17:00.0\"/>\n")), "t.xml");
  EXPECT_FALSE(dev(t, "0000:17:00.0").ids_known);
  EXPECT_FALSE(dev(t, "0000:17:00.0").class_known);
  // Each part garbled in turn, everything else in place; the short forms are not hwloc's either.
  for (const char* bad : {"", "0302 [10de:20b0]", "0302 [10de:20b0] [10de:134f]", "0302 [10de:20b0] [10de:134f] a",
                          "0302-[10de:20b0] [10de:134f] a1", "0302 (10de:20b0] [10de:134f] a1", "0302 [10de 20b0] [10de:134f] a1",
                          "0302 [10de:20b0) [10de:134f] a1", "0302 [10de:20b0]-[10de:134f] a1", "0302 [10de:20b0]  10de:134f] a1",
                          "0302 [10de:20b0] [10de 134f] a1", "0302 [10de:20b0] [10de:134f) a1", "0302 [10de:20b0] [10de:134f]-a1",
                          "030g [10de:20b0] [10de:134f] a1", "0302 [10dg:20b0] [10de:134f] a1", "0302 [10de:20bg] [10de:134f] a1",
                          "0302 [10de:20b0] [10dg:134f] a1", "0302 [10de:20b0] [10de:134g] a1", "0302 [10de:20b0] [10de:134f] ag"}) {
    std::string what;
    EXPECT_EQ(hwloc_error_line(hwloc_doc(host_bridge("17", pcidev("0000:17:00.0", bad))), &what), 4) << bad;
    EXPECT_NE(what.find("pci_type"), std::string::npos) << what;
  }
}

// pci_busid "%x:%02x:%02x.%01x" is required on a PCI object; bridge_pci "%x:[%02x-%02x]" gives a
// bridge's domain and secondary bus: the host bridge's root bus, a PCI bridge's secondary bus.
TEST(TruthHwlocPci, BridgePciGivesRootAndSecondaryBus) {
  const Topology t = parse_hwloc_xml(
      hwloc_doc(host_bridge("a0",
                            "<object type=\"Bridge\" pci_busid=\"0001:a0:01.0\" pci_type=\"0604 [10b5:c010] [0000:0000] 00\" "
                            "bridge_type=\"1-1\" bridge_pci=\"0001:[a1-a3]\">\n" +
                                pcidev("0001:a1:00.0", kH100) + "</object>\n",
                            "0001")),
      "t.xml");
  ASSERT_EQ(t.host_bridges.size(), 1u);
  EXPECT_EQ(t.host_bridges[0].name, "0001:a0");
  const Device& b = dev(t, "0001:a0:01.0");
  EXPECT_TRUE(b.is_bridge);
  EXPECT_EQ(b.secondary_bus, 0xa1);
  EXPECT_EQ(b.parent, -1);
  EXPECT_EQ(b.host_bridge, 0);
  EXPECT_EQ(dev(t, "0001:a1:00.0").parent, t.find("0001:a0:01.0"));
  // A PCI bridge without bridge_pci: its secondary bus is unknown.
  const Topology u =
      parse_hwloc_xml(hwloc_doc(host_bridge("17", "<object type=\"Bridge\" pci_busid=\"0000:17:01.0\" bridge_type=\"1-1\">\n" +
                                                      pcidev("0000:18:00.0", kH100) + "</object>\n")),
                      "t.xml");
  EXPECT_TRUE(dev(u, "0000:17:01.0").is_bridge);
  EXPECT_EQ(dev(u, "0000:17:01.0").secondary_bus, -1);
}

TEST(TruthHwlocPci, MalformedBridgePciOrBusidIsAnErrorAtItsLine) {
  for (const char* bad : {"", "0000:[17]", "0000-[17-17]", "0000:[17-17", "0000:17-17]", "00g0:[17-17]", "0000:[1g-17]", "0000:[-17]"}) {
    EXPECT_EQ(
        hwloc_error_line(hwloc_doc(std::string("<object type=\"Bridge\" bridge_type=\"0-1\" bridge_pci=\"") + bad + "\">\n</object>\n")), 3)
        << bad;
    EXPECT_EQ(
        hwloc_error_line(hwloc_doc(host_bridge("17", std::string("<object type=\"Bridge\" pci_busid=\"0000:17:01.0\" bridge_type=\"1-1\" "
                                                                 "bridge_pci=\"") +
                                                         bad + "\">\n</object>\n"))),
        4)
        << bad;
  }
  EXPECT_EQ(hwloc_error_line(hwloc_doc("<object type=\"Bridge\" bridge_type=\"0-1\">\n</object>\n")), 3);
  EXPECT_EQ(hwloc_error_line(hwloc_doc(host_bridge("17", "<object type=\"PCIDev\"/>\n"))), 4);
  EXPECT_EQ(hwloc_error_line(hwloc_doc(host_bridge("17", "<object type=\"PCIDev\" pci_busid=\"0000:17:00\"/>\n"))), 4);
  EXPECT_EQ(hwloc_error_line(hwloc_doc("<object os_index=\"0\">\n</object>\n")), 3);
  EXPECT_EQ(hwloc_error_line(hwloc_doc("<object type=\"\" os_index=\"0\">\n</object>\n")), 3);
}

// bridge_type "%u-%u" is upstream-downstream (hwloc_obj_bridge_type_e: 0 host, 1 PCI): "0-1" is
// a host bridge, "1-1" a PCI-to-PCI bridge, which is a device of the tree.
TEST(TruthHwlocPci, BridgeTypeZeroUpstreamIsAHostBridge) {
  const Topology t = parse_hwloc_xml(hwloc_doc(host_bridge("17",
                                                           "<object type=\"Bridge\" pci_busid=\"0000:17:01.0\" bridge_type=\"1-1\" "
                                                           "bridge_pci=\"0000:[18-18]\">\n" +
                                                               pcidev("0000:18:00.0", kH100) + "</object>\n")),
                                     "t.xml");
  EXPECT_EQ(t.host_bridges.size(), 1u);
  EXPECT_EQ(t.devices.size(), 2u);
  EXPECT_TRUE(dev(t, "0000:17:01.0").is_bridge);
  EXPECT_EQ(dev(t, "0000:18:00.0").parent, t.find("0000:17:01.0"));
  EXPECT_FALSE(dev(t, "0000:18:00.0").is_bridge);
}

// A PCI device's parent is the nearest bridge above it (its secondary bus): in a switch, the
// downstream port, not the upstream one. A host bridge (bridge_type "0-1": upstream side the
// host, hwloc_obj_bridge_type_e HWLOC_OBJ_BRIDGE_HOST) starts a root bus wherever it is written.
TEST(TruthHwlocPci, ParentIsTheNearestBridge) {
  const std::string bridge_up = "<object type=\"Bridge\" pci_busid=\"0000:17:00.0\" bridge_type=\"1-1\" bridge_pci=\"0000:[18-1a]\">\n";
  const std::string bridge_down = "<object type=\"Bridge\" pci_busid=\"0000:18:00.0\" bridge_type=\"1-1\" bridge_pci=\"0000:[19-19]\">\n";
  const Topology t = parse_hwloc_xml(
      hwloc_doc(host_bridge("16", bridge_up + bridge_down + pcidev("0000:19:00.0", kH100) + "</object>\n</object>\n")), "t.xml");
  EXPECT_EQ(dev(t, "0000:19:00.0").parent, t.find("0000:18:00.0"));
  EXPECT_EQ(dev(t, "0000:18:00.0").parent, t.find("0000:17:00.0"));
  EXPECT_EQ(dev(t, "0000:17:00.0").parent, -1);
  // A host bridge written inside a PCI bridge is still a root (here one the file named before).
  const Topology nested =
      parse_hwloc_xml(hwloc_doc(pcidev("0000:40:00.1", kCx7) +
                                host_bridge("16", bridge_up + host_bridge("40", pcidev("0000:40:00.0", kH100)) + "</object>\n")),
                      "t.xml");
  EXPECT_EQ(dev(nested, "0000:40:00.0").parent, -1);
  EXPECT_EQ(nested.host_bridges[static_cast<size_t>(dev(nested, "0000:40:00.0").host_bridge)].name, "0000:40");
  // A bridge given twice: what is below the second is below the first (the first stands), not
  // below the bridge the second was written in.
  const Topology dup = parse_hwloc_xml(
      hwloc_doc(
          host_bridge("16", bridge_up + "</object>\n" +
                                "<object type=\"Bridge\" pci_busid=\"0000:16:01.0\" bridge_type=\"1-1\" bridge_pci=\"0000:[20-20]\">\n" +
                                bridge_up + pcidev("0000:18:00.0", kH100) + "</object>\n</object>\n")),
      "t.xml");
  EXPECT_EQ(dev(dup, "0000:18:00.0").parent, dup.find("0000:17:00.0"));
  EXPECT_EQ(dev(dup, "0000:17:00.0").parent, -1);
  // Only a bridge has a bus below it: a PCI object inside a PCIDev is an error at its line.
  std::string what;
  EXPECT_EQ(hwloc_error_line(hwloc_doc(host_bridge("16", pcidev("0000:16:00.0", kH100, pcidev("0000:16:00.1", kCx7)))), &what), 5);
  EXPECT_NE(what.find("not below PCIDev 0000:16:00.0"), std::string::npos) << what;
}

// The XML nesting is hwloc's tree (hwloc__xml_import_object inserts each object below the one
// it is written in): a device directly inside a host bridge is on that host bridge's root bus,
// whatever bus number its address carries; a host bridge written twice keeps the node the first
// one's place gave it when the second's place names none.
TEST(TruthHwlocPci, NestingDecidesTheHostBridge) {
  const Topology t = parse_hwloc_xml(hwloc_doc("<object type=\"Package\" os_index=\"0\" cpuset=\"0x000000ff\" nodeset=\"0x00000001\">\n" +
                                               host_bridge("16", pcidev("0000:17:00.0", kH100)) +
                                               "</object>\n<object type=\"Group\" cpuset=\"0x0000ff00\" nodeset=\"0x00000006\">\n" +
                                               host_bridge("16", pcidev("0000:16:00.0", kCx7)) + "</object>\n"),
                                     "t.xml");
  ASSERT_EQ(t.host_bridges.size(), 1u);
  EXPECT_EQ(dev(t, "0000:17:00.0").host_bridge, 0);
  EXPECT_EQ(dev(t, "0000:16:00.0").host_bridge, 0);
  EXPECT_EQ(t.host_bridges[0].numa, 0);
}

// bridge_type and osdev_type mean something on a Bridge and an OSDev only; hwloc ignores them
// elsewhere (hwloc__xml_import_object_attr: "ignoring bridge_type attribute for non-bridge
// object", "... osdev_type attribute for non-osdev object").
TEST(TruthHwlocPci, TypeAttributesOnOtherObjectsAreIgnored) {
  const Topology t =
      parse_hwloc_xml(hwloc_doc(host_bridge("17", pcidev("0000:17:00.0", kCx7, "<object type=\"Misc\" name=\"mlx5_9\" osdev_type=\"3\"/>\n",
                                                         " bridge_type=\"0-1\" bridge_pci=\"0000:[30-30]\""))),
                      "t.xml");
  ASSERT_EQ(t.host_bridges.size(), 1u);
  EXPECT_EQ(t.host_bridges[0].name, "0000:17");
  EXPECT_FALSE(dev(t, "0000:17:00.0").is_bridge);
  EXPECT_EQ(dev(t, "0000:17:00.0").rdma_name, "");
}

// hwloc may keep no bridges at all (I/O filter "important"): a PCI object straight below a
// normal object is on the root bus of its own domain:bus.
TEST(TruthHwlocPci, PciObjectOutsideAnyBridgeIsOnItsOwnRootBus) {
  const Topology t = parse_hwloc_xml(hwloc_doc("<object type=\"Package\" os_index=\"0\" cpuset=\"0x000000ff\" nodeset=\"0x00000002\">\n" +
                                               pcidev("0000:17:00.0", kH100) + pcidev("0002:3b:00.0", kCx7) + "</object>\n"),
                                     "t.xml");
  ASSERT_EQ(t.host_bridges.size(), 2u);
  EXPECT_EQ(t.host_bridges[static_cast<size_t>(dev(t, "0000:17:00.0").host_bridge)].name, "0000:17");
  EXPECT_EQ(t.host_bridges[static_cast<size_t>(dev(t, "0002:3b:00.0").host_bridge)].name, "0002:3b");
  EXPECT_EQ(dev(t, "0000:17:00.0").parent, -1);
}

// <info name value> annotates the object it is inside (hwloc__xml_import_info): PCIVendor and
// PCIDevice name a PCI device, DMI and the OS infos the Machine (hwloc 3: the root), the CPU
// infos the Package.
TEST(TruthHwlocInfo, InfosNameTheObjectTheyAreIn) {
  const Topology t = parse_hwloc_xml(
      hwloc_doc(
          "<object type=\"Machine\" cpuset=\"0x000000ff\" nodeset=\"0x00000001\">\n"
          "<info name=\"DMIProductName\" value=\"p4d.24xlarge\"/>\n<info name=\"DMISysVendor\" value=\"Amazon EC2\"/>\n"
          "<info name=\"Architecture\" value=\"x86_64\"/>\n<info name=\"OSRelease\" value=\"5.10.0-28-cloud-amd64\"/>\n"
          "<info name=\"PCIVendor\" value=\"not a PCI object\"/>\n"
          "<object type=\"Package\" os_index=\"0\" cpuset=\"0x000000ff\" nodeset=\"0x00000001\">\n"
          "<info name=\"CPUVendor\" value=\"GenuineIntel\"/>\n<info name=\"CPUModel\" value=\"Intel(R) Xeon(R) Platinum 8275CL\"/>\n"
          "<info name=\"CPUFamilyNumber\" value=\"6\"/>\n<info name=\"CPUModelNumber\" value=\"85\"/>\n"
          "<info name=\"DMIProductName\" value=\"not the machine\"/>\n" +
          host_bridge(
              "17",
              pcidev(
                  "0000:17:00.0", kH100,
                  "<info name=\"PCIVendor\" value=\"NVIDIA Corporation\"/>\n<info name=\"PCIDevice\" value=\"GH100 [H100 SXM5 80GB]\"/>\n"
                  "<info name=\"PCISlot\" value=\"0\"/>\n"
                  "<object type=\"OSDev\" name=\"cuda0\" subtype=\"CUDA\" osdev_type=\"5\">\n"
                  "<info name=\"PCIDevice\" value=\"not the PCI object\"/>\n<info name=\"CPUVendor\" value=\"x\"/>\n"
                  "</object>\n") +
                  pcidev("0000:17:00.1", kCx7,
                         "<info name=\"PCIDevice\" value=\"MT2910 Family [ConnectX-7]\"/>\n"
                         "<info name=\"PCIVendor\" value=\"Mellanox Technologies\"/>\n")) +
          "</object>\n</object>\n"),
      "t.xml");
  EXPECT_EQ(t.dmi_product, "p4d.24xlarge");
  EXPECT_EQ(t.dmi_vendor, "Amazon EC2");
  EXPECT_EQ(t.sw.kernel_release, "5.10.0-28-cloud-amd64");
  EXPECT_EQ(testing::cpu_fields(t.cpu), testing::CpuFields("x86_64", "GenuineIntel", "Intel(R) Xeon(R) Platinum 8275CL", 6, 85, 1));
  // Vendor first, whichever order the two infos come in.
  EXPECT_EQ(dev(t, "0000:17:00.0").name, "NVIDIA Corporation GH100 [H100 SXM5 80GB]");
  EXPECT_EQ(dev(t, "0000:17:00.1").name, "Mellanox Technologies MT2910 Family [ConnectX-7]");
}

// hwloc 3 writes the machine-wide infos at the root <topology>; an info name or value is XML
// text, entities decoded.
TEST(TruthHwlocInfo, RootInfosAndEntities) {
  const Topology t = parse_hwloc_xml(
      hwloc_doc("<object type=\"Machine\" cpuset=\"0x000000ff\" nodeset=\"0x00000001\">\n" +
                    host_bridge("17", pcidev("0000:17:00.0", kH100, "<info name=\"PCIVend&#111;r\" value=\"AT&amp;T &lt;x&gt;\"/>\n")) +
                    "</object>\n<info name=\"OSRelease\" value=\"6.8.0-45-generic\"/>\n"
                    "<info name=\"Architecture\" value=\"aarch64\"/>\n"
                    "<info name=\"DMIProductNam&#101;\" value=\"R&amp;D box\"/>\n",
                "3.0"),
      "t.xml");
  EXPECT_EQ(t.sw.kernel_release, "6.8.0-45-generic");
  EXPECT_EQ(t.cpu.arch, "aarch64");
  EXPECT_EQ(t.dmi_product, "R&D box");
  EXPECT_EQ(dev(t, "0000:17:00.0").name, "AT&T <x>");
}

// The infos of a <cpukind> (hwloc__xml_import_cpukind: FrequencyMaxMHz, CoreType, any name) or of
// a <distances2> describe that element, not the machine, whatever their names.
TEST(TruthHwlocInfo, InfosOfOtherElementsAreNotTheMachines) {
  const Topology t =
      parse_hwloc_xml(hwloc_doc("<object type=\"Machine\" cpuset=\"0x000000ff\" nodeset=\"0x00000001\">\n"
                                "<info name=\"Architecture\" value=\"x86_64\"/>\n</object>\n"
                                "<distances2 type=\"NUMANode\" nbobjs=\"1\" indexing=\"os\" kind=\"5\" name=\"NUMALatency\">\n"
                                "<indexes length=\"0\">0 </indexes>\n<u64values length=\"0\">10 </u64values>\n"
                                "<info name=\"DMIProductName\" value=\"not the machine\"/>\n</distances2>\n"
                                "<cpukind cpuset=\"0x000000ff\" forced_efficiency=\"0\">\n"
                                "<info name=\"Architecture\" value=\"not the machine\"/>\n"
                                "<info name=\"CoreType\" value=\"IntelCore\"/>\n</cpukind>\n",
                                "3.0"),
                      "t.xml");
  EXPECT_EQ(t.cpu.arch, "x86_64");
  EXPECT_EQ(t.dmi_product, "");
}

// The CPU identity is the node's only when there is one package; the infos of a second
// package are not mixed into it.
TEST(TruthHwlocInfo, CpuInfosOfASecondPackageAreNotTaken) {
  const Topology t =
      parse_hwloc_xml(hwloc_doc("<object type=\"Machine\" cpuset=\"0x0000ffff\" nodeset=\"0x00000003\">\n"
                                "<object type=\"Package\" os_index=\"0\" cpuset=\"0x000000ff\" nodeset=\"0x00000001\">\n"
                                "<info name=\"CPUVendor\" value=\"GenuineIntel\"/>\n</object>\n"
                                "<object type=\"Package\" os_index=\"1\" cpuset=\"0x0000ff00\" nodeset=\"0x00000002\">\n"
                                "<info name=\"CPUVendor\" value=\"AuthenticAMD\"/>\n<info name=\"CPUModelNumber\" value=\"1\"/>\n"
                                "</object>\n</object>\n"),
                      "t.xml");
  EXPECT_EQ(t.cpu.sockets, 2);
  EXPECT_EQ(t.cpu.vendor, "GenuineIntel");
  EXPECT_EQ(t.cpu.model, -1);
}

// osdev_type: one number before hwloc 3 (hwloc 2 hwloc_obj_osdev_type_e: 2 network, 3
// OpenFabrics), a bit mask from 3.0 on (network 1<<4, OpenFabrics 1<<5; an RDMA device is both,
// topology-linux.c). topology-xml.c maps them into each other: a v3 OpenFabrics device is written
// "3" for v2, a network device without OpenFabrics "2". The interface name is the network one.
TEST(TruthHwlocOsdev, OpenFabricsIsRdmaNetworkIsTheInterface) {
  auto nic = [](const std::string& version, const std::string& ib, const std::string& net) {
    return parse_hwloc_xml(
        hwloc_doc(host_bridge("3b", pcidev("0000:3b:00.0", kCx7,
                                           "<object type=\"OSDev\" name=\"mlx5_0\" subtype=\"OpenFabrics\" osdev_type=\"" + ib +
                                               "\"/>\n<object type=\"OSDev\" name=\"ibp59s0\" osdev_type=\"" + net +
                                               "\"/>\n<object type=\"OSDev\" name=\"ibp59s0f1\" osdev_type=\"" + net + "\"/>\n")),
                  version),
        "t.xml");
  };
  for (const auto& [version, ib, net] : {std::tuple{"2.0", "3", "2"}, {"2.8", "3", "2"}, {"3.0", "48", "16"}, {"3.1", "32", "16"}}) {
    const Topology t = nic(version, ib, net);
    EXPECT_EQ(dev(t, "0000:3b:00.0").rdma_name, "mlx5_0") << version;
    EXPECT_EQ(dev(t, "0000:3b:00.0").net_name, "ibp59s0") << version;
  }
  // The other scheme's numbers mean something else: in hwloc 2, 16 and 48 are no type; in
  // hwloc 3, 2 is MEMORY and 3 STORAGE|MEMORY.
  for (const auto& [version, ib, net] : {std::tuple{"2.0", "48", "16"}, {"3.0", "3", "2"}, {"", "48", "16"}}) {
    const Topology t = nic(version, ib, net);
    EXPECT_EQ(dev(t, "0000:3b:00.0").rdma_name, "") << version;
    EXPECT_EQ(dev(t, "0000:3b:00.0").net_name, "") << version;
  }
  // hwloc 1 wrote no version (topology-xml-nolibxml.c of v1.11) and numbered the types as hwloc 2
  // (hwloc.h of v1.11: BLOCK, GPU, NETWORK, OPENFABRICS).
  const Topology v = nic("", "3", "2");
  EXPECT_EQ(dev(v, "0000:3b:00.0").rdma_name, "mlx5_0");
}

// An OS device names the PCI device it is below, however deep; one outside the PCI tree (a
// block device below a Package) names none.
TEST(TruthHwlocOsdev, BelongsToTheNearestPciObjectAbove) {
  const Topology t = parse_hwloc_xml(
      hwloc_doc("<object type=\"Package\" os_index=\"0\" cpuset=\"0x000000ff\" nodeset=\"0x00000001\">\n"
                "<object type=\"OSDev\" name=\"mlx5_9\" osdev_type=\"3\"/>\n" +
                host_bridge("17", "<object type=\"Bridge\" pci_busid=\"0000:17:01.0\" bridge_type=\"1-1\" bridge_pci=\"0000:[18-18]\">\n" +
                                      pcidev("0000:18:00.0", kCx7, "<object type=\"OSDev\" name=\"mlx5_0\" osdev_type=\"3\"/>\n") +
                                      "<object type=\"OSDev\" name=\"mlx5_1\" osdev_type=\"3\"/>\n</object>\n") +
                "</object>\n"),
      "t.xml");
  EXPECT_EQ(dev(t, "0000:18:00.0").rdma_name, "mlx5_0");
  EXPECT_EQ(dev(t, "0000:17:01.0").rdma_name, "mlx5_1");
}

// Two PCI objects with one address: hwloc loads such a file with a warning; the first object
// stands, a note names the file and line of the second, and what is inside the second is placed
// under the first.
TEST(TruthHwlocPci, DuplicateAddressKeepsTheFirstAndNotesTheLine) {
  const Topology t = parse_hwloc_xml(
      hwloc_doc(host_bridge("17", pcidev("0000:17:00.0", kH100) +
                                      pcidev("0000:17:00.0", kCx7, "<object type=\"OSDev\" name=\"mlx5_0\" osdev_type=\"3\"/>\n"))),
      "t.xml");
  ASSERT_EQ(t.devices.size(), 1u);
  EXPECT_EQ(t.devices[0].vendor, 0x10de);
  EXPECT_EQ(t.devices[0].rdma_name, "mlx5_0");
  ASSERT_EQ(t.notes.size(), 1u);
  EXPECT_EQ(t.notes[0].rfind("t.xml:6: duplicate PCI device 0000:17:00.0", 0), 0u) << t.notes[0];
}

// Counts: one Package per socket, one NUMANode per node; pci_link_speed is hwloc's GB/s.
TEST(TruthHwlocPci, PackagesNumaNodesAndLinkSpeed) {
  const Topology t = parse_hwloc_xml(
      hwloc_doc("<object type=\"Machine\" cpuset=\"0x0000ffff\" nodeset=\"0x00000003\">\n"
                "<object type=\"Package\" os_index=\"0\" cpuset=\"0x000000ff\" nodeset=\"0x00000001\">\n"
                "<object type=\"NUMANode\" os_index=\"0\" cpuset=\"0x000000ff\" nodeset=\"0x00000001\"/>\n" +
                host_bridge("17", pcidev("0000:17:00.0", kH100, "", " pci_link_speed=\"31.507692\"")) +
                "</object>\n<object type=\"Package\" os_index=\"1\" cpuset=\"0x0000ff00\" nodeset=\"0x00000002\">\n"
                "<object type=\"NUMANode\" os_index=\"1\" cpuset=\"0x0000ff00\" nodeset=\"0x00000002\"/>\n</object>\n</object>\n"),
      "t.xml");
  EXPECT_EQ(t.cpu.sockets, 2);
  EXPECT_EQ(t.numa_nodes, 2);
  EXPECT_DOUBLE_EQ(dev(t, "0000:17:00.0").link_gbps, 31.507692);
  EXPECT_EQ(host_bridge_numa(t, "0000:17"), 0);
}

// hwloc's NVML backend writes NVLink bandwidths (MB/s) as an "NVLinkBandwidth" distances matrix
// over GPU OS devices and NVSwitch PCI devices, named by gp_index ("OSDev:13", distances2hetero,
// or plain numbers with indexing="gp"); row i holds the values from object i
// (hwloc__xml_import_distances). A GPU's non-zero value to another GPU is an NVLink, to an
// NVSwitch (a PCIDev of subtype "NVSwitch", topology-nvml.c; any other subtype is none) a link into
// the fabric; an object hwloc cannot find by type and gp_index is dropped
// from the matrix (distances.c hwloc_internal_distances_refresh_one).
std::string nv_gpus(const std::string& matrix) {
  return hwloc_doc(
      "<object type=\"Package\" os_index=\"0\" cpuset=\"0x000000ff\" nodeset=\"0x00000001\" gp_index=\"2\">\n" +
      host_bridge("17", pcidev("0000:17:00.0", kH100, "<object type=\"OSDev\" gp_index=\"13\" name=\"nvml0\" osdev_type=\"1\"/>\n",
                               " gp_index=\"12\"")) +
      host_bridge("2a", pcidev("0000:2a:00.0", kH100, "<object type=\"OSDev\" gp_index=\"23\" name=\"nvml1\" osdev_type=\"1\"/>\n",
                               " gp_index=\"22\" subtype=\"GPU\"")) +
      host_bridge("05", pcidev("0000:05:00.0", "0680 [10de:22a3] [0000:0000] a1", "", " gp_index=\"52\" subtype=\"NVSwitch\"")) +
      "</object>\n" + matrix);
}

// That document, parsed.
Topology parse_nv_gpus(const std::string& matrix) { return parse_hwloc_xml(nv_gpus(matrix), "t.xml"); }

TEST(TruthHwlocNvlink, MatrixRowsAreFromEachGpu) {
  const Topology t = parse_nv_gpus(
      "<distances2hetero nbobjs=\"4\" kind=\"25\" name=\"NVLinkBandwidth\">\n"
      "<indexes length=\"0\">OSDev:13 PCIDev:22 PCIDev:52 PCIDev:12 </indexes>\n"
      "<u64values length=\"0\">1000000 25000 0 1000000 25000 1000000 150000 0 </u64values>\n"
      "<u64values length=\"0\">0 150000 1000000 0 1000000 0 0 1000000 </u64values>\n"
      "</distances2hetero>\n");
  const int a = t.find("0000:17:00.0"), b = t.find("0000:2a:00.0"), sw = t.find("0000:05:00.0");
  // A to B, B to A, B into the switch; not A's OS device to its own PCI device (and back), not
  // the switch's row, not the zeros.
  EXPECT_TRUE(t.nvlink_known);
  ASSERT_EQ(t.nvlinks.size(), 3u);
  EXPECT_EQ(t.nvlinks[0].gpu, a);  // the OS device's PCI device
  EXPECT_EQ(t.nvlinks[0].peer, b);
  EXPECT_EQ(t.nvlinks[0].peer_bdf, "0000:2a:00.0");
  EXPECT_EQ(t.nvlinks[0].bandwidth_mbps, 25000u);
  EXPECT_FALSE(t.nvlinks[0].peer_is_switch);
  EXPECT_EQ(t.nvlinks[1].gpu, b);
  EXPECT_EQ(t.nvlinks[1].peer, a);
  EXPECT_EQ(t.nvlinks[2].gpu, b);
  EXPECT_EQ(t.nvlinks[2].peer, sw);
  EXPECT_TRUE(t.nvlinks[2].peer_is_switch);
  EXPECT_EQ(t.nvlinks[2].bandwidth_mbps, 150000u);
}

// distances2 with plain gp indexes; XML whitespace (XML 1.0 production [3] S: space, tab, CR,
// LF) between the numbers.
TEST(TruthHwlocNvlink, PlainGpIndexesAndAnyXmlWhitespace) {
  const Topology t = parse_nv_gpus(
      "<distances2 type=\"OSDev\" nbobjs=\"2\" indexing=\"gp\" kind=\"25\" name=\"NVLinkBandwidth\">\n"
      "<indexes length=\"0\">\t13\n23\r\n</indexes>\n"
      "<u64values length=\"0\">\n0\t50000\r\n0 0</u64values>\n</distances2>\n");
  ASSERT_EQ(t.nvlinks.size(), 1u);
  EXPECT_EQ(t.nvlinks[0].gpu, t.find("0000:17:00.0"));
  EXPECT_EQ(t.nvlinks[0].peer, t.find("0000:2a:00.0"));
  EXPECT_EQ(t.nvlinks[0].bandwidth_mbps, 50000u);
}

TEST(TruthHwlocNvlink, ObjectsHwlocCannotFindAreDropped) {
  const std::pair<const char*, bool> cases[] = {
      // gp_index 22 is a PCIDev, not a Package; gp_index 99 is no object: NVLink known, none.
      {"<distances2hetero nbobjs=\"3\" kind=\"25\" name=\"NVLinkBandwidth\">\n"
       "<indexes length=\"0\">OSDev:13 Package:22 OSDev:99 </indexes>\n"
       "<u64values length=\"0\">0 50000 50000 50000 0 0 50000 0 0 </u64values>\n</distances2hetero>\n",
       true},
      // Other distances (NUMA latency) are not NVLink: not known.
      {"<distances2 type=\"NUMANode\" nbobjs=\"2\" indexing=\"os\" kind=\"5\" name=\"NUMALatency\">\n"
       "<indexes length=\"0\">13 23 </indexes>\n<u64values length=\"0\">10 21 21 10 </u64values>\n"
       "</distances2>\n",
       false},
  };
  for (const auto& [matrix, known] : cases) {
    SCOPED_TRACE(matrix);
    const Topology t = parse_nv_gpus(matrix);
    EXPECT_EQ(t.nvlink_known, known);
    EXPECT_TRUE(t.nvlinks.empty());
  }
}

// hwloc refuses a matrix without nbobjs x nbobjs values, or with a value that is no number
// (hwloc__xml_import_distances: "with less than %u u64values"); so does this parser, at the
// matrix's line and at the element's.
TEST(TruthHwlocNvlink, IncompleteOrGarbledMatrixIsAnErrorAtItsLine) {
  std::string what;
  EXPECT_EQ(hwloc_error_line(nv_gpus("<distances2hetero nbobjs=\"2\" kind=\"25\" name=\"NVLinkBandwidth\">\n"
                                     "<indexes length=\"0\">OSDev:13 OSDev:23 </indexes>\n<u64values length=\"0\">0 1 2 </u64values>\n"
                                     "</distances2hetero>\n"),
                             &what),
            19);
  EXPECT_NE(what.find("2x2"), std::string::npos) << what;
  EXPECT_EQ(hwloc_error_line(nv_gpus("<distances2hetero nbobjs=\"0\" kind=\"25\" name=\"NVLinkBandwidth\">\n</distances2hetero>\n")), 19);
  EXPECT_EQ(hwloc_error_line(nv_gpus("<distances2hetero nbobjs=\"2\" kind=\"25\" name=\"NVLinkBandwidth\">\n"
                                     "<indexes length=\"0\">OSDev:13 OSDev:x </indexes>\n</distances2hetero>\n"),
                             &what),
            20);
  EXPECT_NE(what.find("OSDev:x"), std::string::npos) << what;
  EXPECT_EQ(hwloc_error_line(nv_gpus("<distances2hetero nbobjs=\"2\" kind=\"25\" name=\"NVLinkBandwidth\">\n"
                                     "<indexes length=\"0\">OSDev:13 OSDev:23 </indexes>\n<u64values length=\"0\">0 1 2 3x </u64values>\n"
                                     "</distances2hetero>\n")),
            21);
  EXPECT_EQ(hwloc_error_line(nv_gpus("<distances2hetero nbobjs=\"2\" kind=\"25\" name=\"NVLinkBandwidth\">\n"
                                     "<indexes length=\"0\">OSDev: OSDev:23 </indexes>\n</distances2hetero>\n")),
            20);
  // More values than any matrix of 1024 objects: refused where they are, not held.
  std::string many;
  for (size_t i = 0; i <= (size_t{1} << 20); ++i) many += "0 ";
  EXPECT_EQ(hwloc_error_line(nv_gpus("<distances2hetero nbobjs=\"1\" kind=\"25\" name=\"NVLinkBandwidth\">\n"
                                     "<indexes length=\"0\">OSDev:13 </indexes>\n<u64values length=\"0\">" +
                                     many + "</u64values>\n</distances2hetero>\n"),
                             &what),
            21);
  EXPECT_NE(what.find("at most 1048576 values"), std::string::npos) << what;
}

// ---- NCCL topology XML ---------------------------------------------------------------------

// A whole NCCL dump around `body`, as ncclTopoDumpXmlToFile writes it.
std::string nccl_doc(const std::string& body) { return "<system version=\"1\">\n" + body + "</system>\n"; }

// <pci> as ncclTopoGetXmlFromSys fills it from sysfs (class, vendor, device, subsystem ids as
// sysfs writes them, "0x10de"; link_speed as current_link_speed, "32.0 GT/s PCIe").
std::string npci(const std::string& bdf, const std::string& cls, const std::string& vendor, const std::string& inner = "",
                 const std::string& extra = "") {
  return "<pci busid=\"" + bdf + "\" class=\"" + cls + "\" vendor=\"" + vendor + "\" device=\"0x2330\" subsystem_vendor=\"" + vendor +
         "\" subsystem_device=\"0x16c1\" link_speed=\"32.0 GT/s PCIe\" link_width=\"16\"" + extra +
         (inner.empty() ? "/>\n" : ">\n" + inner + "</pci>\n");
}

int hb_index(const Topology& t, const std::string& name) {
  for (size_t i = 0; i < t.host_bridges.size(); ++i)
    if (t.host_bridges[i].name == name) return static_cast<int>(i);
  throw std::runtime_error("no host bridge " + name);
}

// ncclTopoGetXmlFromCpu: one <cpu numaid affinity arch vendor familyid modelid> per NUMA node,
// its PCI trees inside; affinity is the node's cpumap as sysfs writes it (32-bit words, most
// significant first). Each <cpu> is a root here, named by its order; its numaid is its node.
TEST(TruthNcclCpu, EachCpuIsARootWithItsNodeAndCpus) {
  const Topology t = parse_nccl_xml(
      nccl_doc(
          "<cpu numaid=\"1\" affinity=\"ffffff00,00000000\" arch=\"x86_64\" vendor=\"GenuineIntel\" familyid=\"6\" modelid=\"143\">\n" +
          npci("0000:96:00.0", "0x060400", "0x1000", npci("0000:97:00.0", "0x030200", "0x10de")) +
          "</cpu>\n<cpu numaid=\"0\" affinity=\"00000000,000000ff\" arch=\"x86_64\" vendor=\"GenuineIntel\" familyid=\"6\" "
          "modelid=\"143\">\n" +
          npci("0000:17:00.0", "0x030200", "0x10de") + "</cpu>\n<cpu numaid=\"2\">\n" + npci("0000:b7:00.0", "0x020700", "0x15b3") +
          "</cpu>\n"),
      "t.xml");
  EXPECT_EQ(t.numa_nodes, 3);
  EXPECT_EQ(t.host_bridges[static_cast<size_t>(hb_index(t, "cpu0"))].numa, 1);
  EXPECT_EQ(t.host_bridges[static_cast<size_t>(hb_index(t, "cpu1"))].numa, 0);
  EXPECT_EQ(t.host_bridges[static_cast<size_t>(hb_index(t, "cpu2"))].numa, 2);
  EXPECT_EQ(dev(t, "0000:96:00.0").host_bridge, hb_index(t, "cpu0"));
  EXPECT_EQ(dev(t, "0000:97:00.0").host_bridge, hb_index(t, "cpu0"));
  EXPECT_EQ(dev(t, "0000:17:00.0").host_bridge, hb_index(t, "cpu1"));
  EXPECT_EQ(dev(t, "0000:96:00.0").cpu_affinity, "40-63");
  EXPECT_EQ(dev(t, "0000:97:00.0").cpu_affinity, "40-63");
  EXPECT_EQ(dev(t, "0000:17:00.0").cpu_affinity, "0-7");
  EXPECT_EQ(dev(t, "0000:b7:00.0").cpu_affinity, "");  // no affinity: unknown
  EXPECT_EQ(t.cpu.arch, "x86_64");
  EXPECT_EQ(t.cpu.vendor, "GenuineIntel");
  EXPECT_EQ(t.cpu.family, 6);
  EXPECT_EQ(t.cpu.model, 143);
  EXPECT_EQ(t.cpu.sockets, 0);  // NCCL's <cpu> is a NUMA node, not a socket
}

// numaid="-1" is what NCCL writes for devices whose node sysfs does not tell (xml.cc, "attach
// GPU to unknown CPU"): unknown. A hand-written <cpu> without numaid is still a node of its own.
TEST(TruthNcclCpu, UnknownNodeStaysUnknown) {
  const Topology t = parse_nccl_xml(nccl_doc("<cpu numaid=\"-1\">\n" + npci("0000:17:00.0", "0x030200", "0x10de") + "</cpu>\n<cpu>\n" +
                                             npci("0000:97:00.0", "0x030200", "0x10de") + "</cpu>\n<cpu numaid=\"\">\n" +
                                             npci("0000:a7:00.0", "0x030200", "0x10de") + "</cpu>\n"),
                                    "t.xml");
  EXPECT_EQ(t.host_bridges[static_cast<size_t>(hb_index(t, "cpu0"))].numa, -1);
  EXPECT_NE(t.host_bridges[static_cast<size_t>(hb_index(t, "cpu1"))].numa, t.host_bridges[static_cast<size_t>(hb_index(t, "cpu2"))].numa);
}

// The CPU identity is the host's (ncclTopoGetXmlFromCpu writes the same cpuid values on every
// <cpu>): the first <cpu>'s; a <cpu> without them says nothing, and what none says stays unknown.
TEST(TruthNcclCpu, CpuIdentityFromTheFirstCpuAndUnknownWhenAbsent) {
  const Topology t = parse_nccl_xml(nccl_doc("<cpu numaid=\"0\" arch=\"x86_64\" vendor=\"AuthenticAMD\" familyid=\"25\" modelid=\"1\"/>\n"
                                             "<cpu numaid=\"1\"/>\n"),
                                    "t.xml");
  EXPECT_EQ(t.cpu.arch, "x86_64");
  EXPECT_EQ(t.cpu.vendor, "AuthenticAMD");
  EXPECT_EQ(t.cpu.family, 25);
  EXPECT_EQ(t.cpu.model, 1);
  const Topology arm = parse_nccl_xml(nccl_doc("<cpu numaid=\"0\" arch=\"arm64\" vendor=\"\"/>\n"), "t.xml");
  EXPECT_EQ(arm.cpu.arch, "arm64");
  EXPECT_EQ(arm.cpu.family, -1);
  EXPECT_EQ(arm.cpu.model, -1);
}

TEST(TruthNcclCpu, BadNumaidOrPlacementIsAnErrorAtItsLine) {
  std::string what;
  EXPECT_EQ(nccl_error_line(nccl_doc("<cpu numaid=\"0\"/>\n<cpu numaid=\"x\"/>\n"), &what), 3);
  EXPECT_NE(what.find("numaid=\"x\""), std::string::npos) << what;
  EXPECT_EQ(nccl_error_line(nccl_doc("<cpu numaid=\"1x\"/>\n")), 2);
  EXPECT_EQ(nccl_error_line(nccl_doc("<cpu numaid=\"0\">\n<cpu numaid=\"1\"/>\n</cpu>\n")), 3);
  EXPECT_EQ(
      nccl_error_line(nccl_doc("<cpu numaid=\"0\">\n" + npci("0000:16:00.0", "0x060400", "0x1000", "<cpu numaid=\"1\"/>\n") + "</cpu>\n")),
      4);
  EXPECT_EQ(nccl_error_line(nccl_doc(npci("0000:17:00.0", "0x030200", "0x10de"))), 2);  // <pci> outside any <cpu>
  EXPECT_EQ(nccl_error_line(nccl_doc("<cpu numaid=\"0\">\n<pci class=\"0x030200\"/>\n</cpu>\n")), 3);
  EXPECT_EQ(nccl_error_line(nccl_doc("<cpu numaid=\"0\">\n<pci busid=\"0000:17:00\"/>\n</cpu>\n")), 3);
}

// class, vendor, device and subsystem ids: hex as sysfs writes them ("0x030200", "0x10de");
// class 0x0604 is a PCI bridge (NCCL's PCI switch node), anything else is not.
TEST(TruthNcclPci, IdsAndClassAsSysfsWritesThem) {
  const Topology t =
      parse_nccl_xml(nccl_doc("<cpu numaid=\"0\">\n" +
                              npci("0000:16:00.0", "0x060400", "0x1000",
                                   npci("0000:17:00.0", "0x030200", "0x10de") +
                                       "<pci busid=\"0000:18:00.0\" class=\"0x020700\" vendor=\"0X15B3\" device=\"0x1021\" "
                                       "subsystem_vendor=\"0x15b3\" subsystem_device=\"0x0041\"/>\n"
                                       "<pci busid=\"0000:19:00.0\" class=\"0x068000\" device=\"0x22a3\"/>\n"
                                       "<pci busid=\"0000:1a:00.0\" class=\"0x010400\" vendor=\"0x1000\" device=\"0x10e2\"/>\n") +
                              "</cpu>\n"),
                     "t.xml");
  const Device& sw = dev(t, "0000:16:00.0");
  EXPECT_TRUE(sw.is_bridge);
  EXPECT_EQ(sw.class_code, 0x060400u);
  EXPECT_EQ(sw.vendor, 0x1000);
  const Device& g = dev(t, "0000:17:00.0");
  EXPECT_FALSE(g.is_bridge);
  EXPECT_EQ(id_fields(g), IdFields(true, true, 0x030200, 0x10de, 0x2330, 0x10de, 0x16c1));
  EXPECT_EQ(g.parent, t.find("0000:16:00.0"));
  EXPECT_EQ(g.role, Role::GPU);  // by its class (NCCL's "0x03" prefix): no <gpu> element needed
  const Device& n = dev(t, "0000:18:00.0");
  EXPECT_EQ(n.vendor, 0x15b3);
  EXPECT_EQ(n.device, 0x1021);
  EXPECT_EQ(n.subsys_vendor, 0x15b3);
  EXPECT_EQ(n.subsys_device, 0x0041);
  EXPECT_EQ(n.role, Role::NIC);  // "0x02" prefix
  EXPECT_FALSE(n.is_bridge);
  const Device& nvs = dev(t, "0000:19:00.0");
  EXPECT_FALSE(nvs.is_bridge);  // 0x0680: "other bridge", NCCL's NVSwitch, not a PCI switch
  EXPECT_FALSE(nvs.ids_known);  // no vendor: the ids are not known
  EXPECT_EQ(nvs.device, 0x22a3);
  EXPECT_EQ(nvs.role, Role::None);
  EXPECT_FALSE(dev(t, "0000:1a:00.0").is_bridge);  // 0x0104: a RAID controller (sub class 04 of another base class)
  // link_speed and link_width as sysfs current_link_speed/current_link_width; either may be absent.
  EXPECT_DOUBLE_EQ(g.link_sta.speed_gts, 32.0);
  EXPECT_EQ(g.link_sta.width, 16);
  const Topology one = parse_nccl_xml(nccl_doc("<cpu numaid=\"0\">\n<pci busid=\"0000:17:00.0\" link_speed=\"16.0 GT/s PCIe\"/>\n"
                                               "<pci busid=\"0000:18:00.0\" link_width=\"8\"/>\n</cpu>\n"),
                                      "t.xml");
  EXPECT_DOUBLE_EQ(dev(one, "0000:17:00.0").link_sta.speed_gts, 16.0);
  EXPECT_EQ(dev(one, "0000:17:00.0").link_sta.width, 0);
  EXPECT_DOUBLE_EQ(dev(one, "0000:18:00.0").link_sta.speed_gts, 0.0);
  EXPECT_EQ(dev(one, "0000:18:00.0").link_sta.width, 8);
}

TEST(TruthNcclPci, MalformedIdsAreAnErrorAtTheirLine) {
  for (const std::string& attrs :
       {std::string("class=\"0xZZ\""), std::string("class=\"0x123456789\""), std::string("vendor=\"0x10000\""),
        std::string("device=\"0xgggg\""), std::string("subsystem_vendor=\"\""), std::string("subsystem_device=\"0x1ffff\"")}) {
    std::string what;
    EXPECT_EQ(nccl_error_line(nccl_doc("<cpu numaid=\"0\">\n<pci busid=\"0000:17:00.0\" " + attrs + "/>\n</cpu>\n"), &what), 3) << attrs;
    EXPECT_NE(what.find("expected a"), std::string::npos) << what;
  }
  // Two <pci> with one address.
  EXPECT_EQ(nccl_error_line(nccl_doc("<cpu numaid=\"0\">\n" + npci("0000:17:00.0", "0x030200", "0x10de") +
                                     npci("0000:17:00.0", "0x020700", "0x15b3") + "</cpu>\n")),
            4);
}

// A <pci> inside a <pci>: the outer one is a switch. Hand-written files leave the class of their
// switches out; a device whose class says it is no bridge cannot have devices below it.
TEST(TruthNcclPci, NestingMakesTheOuterPciASwitch) {
  const Topology t =
      parse_nccl_xml(nccl_doc("<cpu numaid=\"0\">\n<pci busid=\"0000:16:00.0\">\n" + npci("0000:17:00.0", "0x030200", "0x10de") +
                              "</pci>\n<pci busid=\"0000:26:00.0\"/>\n</cpu>\n"),
                     "t.xml");
  EXPECT_TRUE(dev(t, "0000:16:00.0").is_bridge);
  EXPECT_FALSE(dev(t, "0000:26:00.0").is_bridge);
  EXPECT_EQ(dev(t, "0000:17:00.0").parent, t.find("0000:16:00.0"));
  EXPECT_EQ(dev(t, "0000:16:00.0").parent, -1);
  // A switch node is the whole switch: its port type stays unknown, not inferred from depth.
  EXPECT_EQ(dev(t, "0000:16:00.0").port, PortType::Unknown);
  EXPECT_FALSE(dev(t, "0000:16:00.0").port_inferred);
  EXPECT_EQ(nccl_error_line(nccl_doc("<cpu numaid=\"0\">\n<pci busid=\"0000:16:00.0\" class=\"0x030200\">\n" +
                                     npci("0000:17:00.0", "0x030200", "0x10de") + "</pci>\n</cpu>\n")),
            4);
}

// NCCL's cloud files stand in for hidden switches with busid ffff:ff:xx.x and ids 0xffff (the
// AWS p4d file in tests/reference): such ids say nothing about the hardware.
TEST(TruthNcclPci, PlaceholderSwitchesHaveNoIds) {
  const Topology t = parse_nccl_xml(slurp(reference("aws-p4d-24xl-topo.xml")), "p4d.xml");
  EXPECT_TRUE(t.placeholder_switches);
  EXPECT_FALSE(dev(t, "ffff:ff:01.0").ids_known);
  EXPECT_TRUE(dev(t, "ffff:ff:01.0").is_bridge);
  EXPECT_TRUE(dev(t, "0000:10:1c.0").ids_known);
  // A switch `busid` of vendor `vendor` with an NVIDIA GPU below it.
  const auto switch_over_gpu = [](const std::string& busid, const std::string& vendor) {
    return parse_nccl_xml(
        nccl_doc("<cpu numaid=\"0\">\n" + npci(busid, "0x060400", vendor, npci("0000:17:00.0", "0x030200", "0x10de")) + "</cpu>\n"),
        "t.xml");
  };
  const Topology by_vendor = switch_over_gpu("0000:16:00.0", "0xffff");
  EXPECT_TRUE(by_vendor.placeholder_switches);
  EXPECT_FALSE(dev(by_vendor, "0000:16:00.0").ids_known);
  EXPECT_TRUE(dev(by_vendor, "0000:17:00.0").ids_known);
  const Topology by_busid = switch_over_gpu("ffff:ff:01.0", "0x1000");
  EXPECT_TRUE(by_busid.placeholder_switches);
  EXPECT_FALSE(dev(by_busid, "ffff:ff:01.0").ids_known);
  EXPECT_FALSE(switch_over_gpu("0000:16:00.0", "0x1000").placeholder_switches);
}

// <gpu>, <nic>, <net>: the role of the <pci> they are in; <gpu gdr> and <net gdr> are NCCL's own
// GPUDirect RDMA answers (ncclTopoAddGpu/AddNet), <net name> the RDMA device. A <nic> straight
// below <cpu> (a virtual NIC, no PCI device) names none.
TEST(TruthNcclEndpoint, RolesGdrAndNames) {
  const Topology t =
      parse_nccl_xml(nccl_doc("<cpu numaid=\"0\">\n" +
                              npci("0000:16:00.0", "0x060400", "0x1000",
                                   npci("0000:17:00.0", "0x030200", "0x10de", "<gpu dev=\"0\" sm=\"90\" rank=\"0\" gdr=\"1\"/>\n") +
                                       npci("0000:18:00.0", "0x020700", "0x15b3",
                                            "<nic>\n<net name=\"mlx5_0\" dev=\"0\" speed=\"400000\" port=\"1\" gdr=\"0\"/>\n"
                                            "<net name=\"mlx5_1\" dev=\"1\" speed=\"400000\" port=\"1\" gdr=\"0\"/>\n</nic>\n") +
                                       npci("0000:19:00.0", "0x010802", "0x144d", "<gpu dev=\"1\"/>\n") +
                                       npci("0000:1a:00.0", "0x030200", "0x10de", "<nic/>\n")) +
                              "<nic>\n<net name=\"eth0\" dev=\"2\" gdr=\"1\"/>\n</nic>\n</cpu>\n"),
                     "t.xml");
  const int gpu = t.find("0000:17:00.0"), nic = t.find("0000:18:00.0");
  EXPECT_EQ(t.devices[static_cast<size_t>(gpu)].role, Role::GPU);
  EXPECT_EQ(t.devices[static_cast<size_t>(nic)].role, Role::NIC);
  EXPECT_EQ(t.devices[static_cast<size_t>(nic)].rdma_name, "mlx5_0");  // the first
  EXPECT_EQ(dev(t, "0000:19:00.0").role, Role::GPU);                   // the element says it, whatever the class
  EXPECT_EQ(dev(t, "0000:1a:00.0").role, Role::NIC);
  EXPECT_EQ(dev(t, "0000:16:00.0").role, Role::None);
  EXPECT_EQ(dev(t, "0000:16:00.0").rdma_name, "");
  ASSERT_EQ(t.sw.stack.nccl_gpu_gdr.count(gpu), 1u);
  EXPECT_EQ(t.sw.stack.nccl_gpu_gdr.at(gpu), 1);
  ASSERT_EQ(t.sw.stack.nccl_net_gdr.count(nic), 1u);
  EXPECT_EQ(t.sw.stack.nccl_net_gdr.at(nic), 0);
  EXPECT_EQ(t.sw.stack.nccl_gpu_gdr.size(), 1u);
  EXPECT_EQ(t.sw.stack.nccl_net_gdr.size(), 1u);
  // The first device of the file is no exception; gdr belongs to <gpu> and <net> (NCCL reads it
  // there), a name to <net>: a <nic gdr> or a <gpu name> says neither.
  const Topology first = parse_nccl_xml(
      nccl_doc("<cpu numaid=\"0\">\n" + npci("0000:17:00.0", "0x010802", "0x10de", "<gpu dev=\"0\" name=\"GPU0\" gdr=\"1\"/>\n") +
               npci("0000:18:00.0", "0x010802", "0x15b3", "<nic gdr=\"1\"/>\n") + "</cpu>\n"),
      "t.xml");
  EXPECT_EQ(first.devices[0].role, Role::GPU);
  EXPECT_EQ(first.devices[0].rdma_name, "");
  ASSERT_EQ(first.sw.stack.nccl_gpu_gdr.count(0), 1u);
  EXPECT_EQ(first.sw.stack.nccl_gpu_gdr.at(0), 1);
  EXPECT_EQ(first.devices[1].role, Role::NIC);
  EXPECT_TRUE(first.sw.stack.nccl_net_gdr.empty());
}

// <nvlink target count tclass> inside <gpu> (ncclTopoGetXmlFromGpu; ncclTopoAddNvLinks reads
// tclass with kvDictPciClass): "0x03..." a GPU, 0x068000 an NVSwitch, 0x068001 the CPU (POWER9),
// which is no GPU-to-GPU path. count is the number of links.
TEST(TruthNcclNvlink, TargetClassSaysGpuSwitchOrCpu) {
  const Topology t =
      parse_nccl_xml(nccl_doc("<cpu numaid=\"0\">\n" +
                              npci("0000:17:00.0", "0x030200", "0x10de",
                                   "<gpu dev=\"0\" sm=\"70\">\n<nvlink target=\"0000:18:00.0\" count=\"2\" tclass=\"0x030200\"/>\n"
                                   "<nvlink target=\"0000:19:00.0\" count=\"1\"/>\n"
                                   "<nvlink target=\"0000:00:00.0\" count=\"2\" tclass=\"0x068001\"/>\n</gpu>\n") +
                              npci("0000:18:00.0", "0x030200", "0x10de",
                                   "<gpu dev=\"1\" sm=\"90\">\n<nvlink target=\"0000:a0:00.0\" count=\"18\" tclass=\"0x068000\"/>\n</gpu>\n"
                                   "<nvlink target=\"0000:17:00.0\" count=\"5\" tclass=\"0x030200\"/>\n") +
                              npci("0000:19:00.0", "0x030200", "0x10de") + "</cpu>\n"),
                     "t.xml");
  EXPECT_TRUE(t.nvlink_known);
  ASSERT_EQ(t.nvlinks.size(), 3u);
  EXPECT_EQ(t.nvlinks[0].gpu, t.find("0000:17:00.0"));
  EXPECT_EQ(t.nvlinks[0].peer, t.find("0000:18:00.0"));
  EXPECT_EQ(t.nvlinks[0].peer_bdf, "0000:18:00.0");
  EXPECT_EQ(t.nvlinks[0].links, 2);
  EXPECT_FALSE(t.nvlinks[0].peer_is_switch);
  // Without tclass (NCCL before 2.12 wrote none): a link to the GPU at that address.
  EXPECT_EQ(t.nvlinks[1].peer, t.find("0000:19:00.0"));
  EXPECT_EQ(t.nvlinks[1].links, 1);
  EXPECT_FALSE(t.nvlinks[1].peer_is_switch);
  EXPECT_EQ(t.nvlinks[2].gpu, t.find("0000:18:00.0"));
  EXPECT_TRUE(t.nvlinks[2].peer_is_switch);
  EXPECT_EQ(t.nvlinks[2].peer, -1);  // the switch is not in the file
  EXPECT_EQ(t.nvlinks[2].links, 18);
}

TEST(TruthNcclNvlink, NoNvlinkElementLeavesNvlinkUnknown) {
  const Topology t = parse_nccl_xml(
      nccl_doc("<cpu numaid=\"0\">\n" + npci("0000:17:00.0", "0x030200", "0x10de", "<gpu dev=\"0\"/>\n") + "</cpu>\n"), "t.xml");
  EXPECT_FALSE(t.nvlink_known);
  EXPECT_TRUE(t.nvlinks.empty());
  std::string what;
  EXPECT_EQ(nccl_error_line(nccl_doc("<cpu numaid=\"0\">\n" +
                                     npci("0000:17:00.0", "0x030200", "0x10de",
                                          "<gpu dev=\"0\">\n<nvlink target=\"0000:18:00.0\" count=\"2\" tclass=\"0x0302zz\"/>\n</gpu>\n") +
                                     "</cpu>\n"),
                            &what),
            5);
  EXPECT_NE(what.find("tclass=\"0x0302zz\""), std::string::npos) << what;
}

// <c2c bw count> inside <gpu>: NVLink-C2C to its CPU (NCCL 2.27+, xml.cc ncclTopoGetXmlFromGpu
// writes it only when the GPU has C2C links); the DGX Spark dump in tests/reference.
TEST(TruthNcclNvlink, C2cBelongsToItsGpu) {
  const Topology t = parse_nccl_xml(
      nccl_doc("<cpu numaid=\"0\">\n" +
               npci("000f:01:00.0", "0x030200", "0x10de", "<gpu dev=\"0\" sm=\"121\">\n<c2c bw=\"40000\" count=\"10\"/>\n</gpu>\n") +
               npci("000f:02:00.0", "0x030200", "0x10de", "<gpu dev=\"1\">\n<c2c bw=\"40000\" count=\"0\"/>\n</gpu>\n") +
               npci("000f:03:00.0", "0x030200", "0x10de", "<c2c bw=\"40000\" count=\"4\"/>\n") + "</cpu>\n"),
      "t.xml");
  const int g0 = t.find("000f:01:00.0"), g1 = t.find("000f:02:00.0");
  ASSERT_EQ(t.sw.stack.nccl_gpu_c2c.size(), 2u);
  EXPECT_EQ(t.sw.stack.nccl_gpu_c2c.at(g0), 10);
  EXPECT_EQ(t.sw.stack.nccl_gpu_c2c.at(g1), 1);  // present: at least one link
}

// A dump pasted into an issue is often cut off: read up to its last complete tag, the place
// noted (file:line inside the open element); a whole file, trailing blank lines and all, is whole.
TEST(TruthNcclCut, CutOffDumpIsReadUpToItsLastTag) {
  const std::string whole = nccl_doc("<cpu numaid=\"0\">\n" + npci("0000:17:00.0", "0x030200", "0x10de", "<gpu dev=\"0\"/>\n") +
                                     npci("0000:18:00.0", "0x030200", "0x10de", "<gpu dev=\"1\"/>\n") + "</cpu>\n");
  const Topology w = parse_nccl_xml(whole + "\n \t\r\n", "t.xml");
  EXPECT_EQ(w.cut_off, "");
  EXPECT_TRUE(w.notes.empty());
  EXPECT_EQ(w.devices.size(), 2u);
  const size_t at = whole.find("<gpu dev=\"1\"");
  const Topology c = parse_nccl_xml(whole.substr(0, at + 8), "t.xml");  // cut inside the second <gpu> tag
  EXPECT_EQ(c.cut_off, "t.xml:6 inside <pci>");
  ASSERT_EQ(c.notes.size(), 1u);
  EXPECT_EQ(c.notes[0].rfind("t.xml:6 inside <pci>: the file is cut off", 0), 0u) << c.notes[0];
  EXPECT_EQ(c.devices.size(), 2u);
  EXPECT_EQ(dev(c, "0000:18:00.0").role, Role::GPU);  // by its class
  // A file that ends in </system> is whole: an element it leaves open is an error, not a cut.
  EXPECT_EQ(nccl_error_line("<system version=\"1\">\n<system>\n</system>\n"), 4);
  EXPECT_EQ(nccl_error_line(""), 1);
  // Not one complete tag: the error is where the text ends, not at its start.
  EXPECT_EQ(nccl_error_line("\n\n<system version=\"1\""), 3);
}

TEST(TruthNcclPci, LinkWidthIsALaneCountOrUnknown) {
  // NCCL's xml.cc ncclTopoGetXmlFromSys writes link_width from NVML or as the smaller of sysfs
  // max_link_width of the device and of its port, and "" when it has neither; the kernel prints
  // PCIE_LNK_WIDTH_UNKNOWN (0xff, include/linux/pci.h enum pcie_link_width) in max_link_width of
  // a function without the capability. "", 0 and 255: unknown; anything but 1-32 lanes is refused.
  for (const auto& [attr, want] :
       std::vector<std::pair<std::string, int>>{{"16", 16}, {"1", 1}, {"9", 9}, {"19", 19}, {"32", 32}, {"", 0}, {"0", 0}, {"255", 0}}) {
    SCOPED_TRACE(attr);
    const Topology t = parse_nccl_xml(
        nccl_doc("<cpu numaid=\"0\">\n<pci busid=\"0000:17:00.0\" link_speed=\"16.0 GT/s PCIe\" link_width=\"" + attr + "\"/>\n</cpu>\n"),
        "t.xml");
    EXPECT_EQ(dev(t, "0000:17:00.0").link_sta.width, want);
  }
  // Not decimal digits, even where their codes would add up to a lane count (':' = '9' + 1,
  // '@' = '0' + 16, '/' = '0' - 1), and no more than the 3 digits of 255 ("0032" is no width
  // the kernel's "%u" prints).
  for (const std::string bad :
       {"-1", "x16", "16 ", "33", "254", "1e3", "99999999999", "0032", "1234", ":", "@", "1/", "/1", "1a", "a1", "2 "}) {
    std::string what;
    EXPECT_EQ(nccl_error_line(nccl_doc("<cpu numaid=\"0\">\n<pci busid=\"0000:17:00.0\" link_width=\"" + bad + "\"/>\n</cpu>\n"), &what), 3)
        << bad;
    EXPECT_NE(what.find("link width"), std::string::npos) << what;
  }
  // An unknown width with a known speed prints as unknown in `gdrpeer topo`, never "x0" or "x255".
  const Topology t = parse_nccl_xml(
      nccl_doc("<cpu numaid=\"0\">\n<pci busid=\"0000:17:00.0\" link_speed=\"16.0 GT/s PCIe\" link_width=\"255\"/>\n</cpu>\n"), "t.xml");
  const std::string tree = render_tree(t, false);
  EXPECT_NE(tree.find("link 16GT/s x?"), std::string::npos) << tree;
  EXPECT_EQ(tree.find("x0"), std::string::npos) << tree;
  EXPECT_EQ(tree.find("x255"), std::string::npos) << tree;
}

}  // namespace
}  // namespace gdrpeer::topo

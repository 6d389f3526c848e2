// The live check asks NVML by default and never the CUDA driver (unless --cuda); NVML's
// answers (or its failure) become NVLink facts, and a snapshot carries them so that the
// snapshot checks exactly as the live node did. NVML and CUDA are fakes loaded through the
// same dlopen seams (tests/fake_nvml.cpp, tests/fake_cuda.cpp); the nodes are synthetic
// sysfs trees (test_topo_support.hpp) and the real 4x H200 node of the reference set.
//
// Truth: NVML's documented behaviour (links end where nvmlDeviceGetNvLinkState refuses an
// index; remote device type 2 is an NVSwitch), nvidia-smi topo -m of the real node (every
// GPU pair NV18), nvidia-ml-py's dump of that node (nvml.json: 18 active links per GPU into
// NVSwitches the VM hides as FFFFFFFF:FF:FF.0), and pci.ids for the SXM part ids.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "gdrpeer/topo/inputs.hpp"
#include "gdrpeer/topo/node_capture.hpp"
#include "gdrpeer/topo/nvml_probe.hpp"
#include "gdrpeer/topo/render.hpp"
#include "gdrpeer/topo/rule_data.hpp"
#include "gdrpeer/topo/rules.hpp"
#include "test_topo_support.hpp"

namespace gdrpeer::topo {
namespace {

using testing::FakeFn;
using testing::FakeNode;
using testing::kb;
using testing::pair_of;

int fake_nvml_calls(const char* name) {
  void* h = ::dlopen(GDRPEER_FAKE_NVML_PATH, RTLD_NOW | RTLD_NOLOAD);
  if (!h) return -1;
  auto fn = reinterpret_cast<int (*)(const char*)>(::dlsym(h, "gdrpeer_fake_nvml_calls"));
  const int n = fn ? fn(name) : -1;
  ::dlclose(h);
  return n;
}

bool fake_cuda_loaded() {
  void* h = ::dlopen(GDRPEER_FAKE_CUDA_PATH, RTLD_NOW | RTLD_NOLOAD);
  if (h) ::dlclose(h);
  return h != nullptr;
}

// A VM as the real node is: GPUs on the hypervisor's root bus (00:06.0 ...), a virtio
// function, the CPU's hypervisor flag, numa_node -1 and one NUMA node.
FakeNode vm_node(uint16_t gpu_device, int gpus) {
  FakeNode n;
  FakeFn v;
  v.bdf = "0000:00:01.0";
  v.sysfs_path = "/sys/devices/pci0000:00/0000:00:01.0";
  v.vendor = 0x1af4;
  v.device = 0x1042;
  v.class_code = 0x010000;
  v.numa = -1;
  n.fns.push_back(v);
  for (int i = 0; i < gpus; ++i) {
    FakeFn g;
    char bdf[32];
    std::snprintf(bdf, sizeof bdf, "0000:00:%02x.0", 6 + i);
    g.bdf = bdf;
    g.sysfs_path = "/sys/devices/pci0000:00/" + g.bdf;
    g.vendor = 0x10de;
    g.device = gpu_device;
    g.class_code = 0x030200;
    g.port_type = testing::kEndpoint;
    g.cap_speed = g.sta_speed = 5;  // 32 GT/s x16
    g.numa = -1;
    g.resource = "0x00000000f8000000 0x00000000f8ffffff 0x0000000000040200\n0x0000100000000000 0x0000100fffffffff 0x000000000014220c\n";
    n.fns.push_back(g);
  }
  n.cpuinfo =
      "vendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 143\nmodel name\t: Intel(R) Xeon(R) Processor\nflags\t\t: fpu sse "
      "hypervisor\nphysical id\t: 0\n";
  n.modules = "nvidia 1 0 - Live 0x0\n";
  n.nvidia_version = "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build\n";
  n.numa_nodes = 1;
  return n;
}

std::string nvml_bus(const std::string& bdf) { return "0000" + bdf; }  // "00000000:00:06.0"

// NVML's view of the real node (nvml.json): every GPU 18 links into hidden NVSwitches.
std::string nvswitch_spec(int gpus, int links = 18) {
  std::string s;
  for (int i = 0; i < gpus; ++i) {
    char bdf[32];
    std::snprintf(bdf, sizeof bdf, "0000:00:%02x.0", 6 + i);
    s += (i ? ";" : "") + nvml_bus(bdf) + ">";
    for (int l = 0; l < links; ++l) s += std::string(l ? "," : "") + "switch:FFFFFFFF:FF:FF.0";
  }
  return s;
}

Topology live(const FakeNode& n, const LiveOptions& o, const std::vector<TarEntry>& extra = {}) {
  std::vector<TarEntry> e = n.entries();
  e.insert(e.end(), extra.begin(), extra.end());
  auto fs = make_tar_fs(write_tar(e), "node");
  Topology t = parse_sysfs(*fs, "node");
  ask_drivers(t, o);
  assign_roles(t, kb());
  return t;
}

LiveOptions fakes(bool cuda = false) {
  LiveOptions o;
  o.cuda = cuda;
  o.nvml_library = GDRPEER_FAKE_NVML_PATH;
  o.cuda_library = GDRPEER_FAKE_CUDA_PATH;
  return o;
}

const Finding* finding(const std::vector<Finding>& fs, const std::string& rule) {
  for (const auto& f : fs)
    if (f.rule == rule) return &f;
  return nullptr;
}

// A GPU pair on a flat virtual bus: no NVLink claimed, and its platform-virtual note (a note,
// severity Optimal), which it returns; nullptr (for the caller's ASSERT) when there is none.
const Finding* virtual_bus_note(const PairResult& p) {
  EXPECT_FALSE(p.nvlink.linked);
  const Finding* f = finding(p.findings, "platform-virtual");
  if (f) {
    EXPECT_EQ(f->severity, Verdict::Optimal);
  }
  return f;
}

// ---- the default check asks NVML, never CUDA ------------------------------------------

TEST(NodeCapture, DefaultCheckAsksNvmlAndNeverLoadsCuda) {
  ::setenv("GDRPEER_FAKE_NVML", nvswitch_spec(2).c_str(), 1);
  ::setenv("GDRPEER_FAKE_CUDA", "gpus=0000:00:06.0,0000:00:07.0", 1);
  ASSERT_FALSE(fake_cuda_loaded());
  Topology t = live(vm_node(0x2335, 2), fakes(false));
  EXPECT_TRUE(t.nvlink_known);
  EXPECT_FALSE(t.sw.cuda_probed);
  EXPECT_FALSE(fake_cuda_loaded()) << "the default live check loaded the CUDA driver";
  // --cuda: now it is loaded and asked.
  t = live(vm_node(0x2335, 2), fakes(true));
  EXPECT_TRUE(t.sw.cuda_probed);
  EXPECT_TRUE(fake_cuda_loaded());
  ASSERT_EQ(t.sw.cuda.size(), 2u);
  EXPECT_EQ(t.sw.cuda[0].gdr_supported, 1);
}

TEST(NodeCapture, LiveNodeAsksNvmlWhileReadingSysfsAndNeverCuda) {
  ::setenv("GDRPEER_FAKE_NVML", nvswitch_spec(2).c_str(), 1);
  // (ctest runs each test in its own process; run together, an earlier test's --cuda loaded it)
  const bool cuda_before = fake_cuda_loaded();
  auto fs = make_tar_fs(write_tar(vm_node(0x2335, 2).entries()), "node");
  Topology t = read_live_node(*fs, "node", fakes(false));
  EXPECT_TRUE(t.nvlink_known);
  ASSERT_EQ(t.nvlinks.size(), 2u);  // one edge per GPU into the fabric
  EXPECT_EQ(t.nvlinks[0].links, 18);
  EXPECT_FALSE(t.sw.cuda_probed);
  if (!cuda_before) {
    EXPECT_FALSE(fake_cuda_loaded());
  }
  // The NVIDIA driver loaded but no NVIDIA display function: NVML's answer is not applied.
  FakeNode none = vm_node(0x2335, 0);
  auto fs2 = make_tar_fs(write_tar(none.entries()), "node");
  t = read_live_node(*fs2, "node", fakes(false));
  EXPECT_FALSE(t.nvlink_known);
  EXPECT_TRUE(t.nvml_note.empty());
}

TEST(NodeCapture, NvmlIsNotAskedWithoutAnNvidiaGpu) {
  FakeNode n = vm_node(0x2335, 0);
  ::setenv("GDRPEER_FAKE_NVML", "", 1);
  const int before = fake_nvml_calls("nvmlDeviceGetCount_v2");
  Topology t = live(n, fakes());
  EXPECT_FALSE(t.nvlink_known);
  EXPECT_TRUE(t.nvml_note.empty());
  EXPECT_EQ(fake_nvml_calls("nvmlDeviceGetCount_v2"), before);
}

// ---- NVML's answers -------------------------------------------------------------------

TEST(NodeCapture, NvSwitchLinksOfTheRealNodeGiveNv18AndStopAtTheLastLink) {
  ::setenv("GDRPEER_FAKE_NVML", nvswitch_spec(4).c_str(), 1);
  const int state_calls = fake_nvml_calls("nvmlDeviceGetNvLinkState");
  Topology t = live(vm_node(0x2335, 4), fakes());
  // 18 links answered and the 19th refused, per GPU: nothing asked past the last link.
  EXPECT_EQ(fake_nvml_calls("nvmlDeviceGetNvLinkState") - std::max(state_calls, 0), 4 * 19);
  const Report r = check(t, kb(), CheckOptions{});
  ASSERT_EQ(r.gpus.size(), 4u);
  for (const auto& p : r.pairs) {
    EXPECT_TRUE(p.nvlink.linked);
    EXPECT_TRUE(p.nvlink.via_switch);
    EXPECT_FALSE(p.nvlink.inferred);
    EXPECT_EQ(p.nvlink.links, 18);
    EXPECT_EQ(p.verdict, Verdict::Optimal);
  }
  EXPECT_EQ(r.exit_code(), 0);
  const std::string m = render_matrix(t, r, false);
  // CPU Affinity unknown (the fake node has no local_cpulist, node cpulist or cpuinfo); NUMA 0, as nvidia-smi.
  EXPECT_NE(m.find("GPU0     X      NV18    NV18    NV18    ?             0     0000:00:06.0"), std::string::npos) << m;
  const Finding* note = finding(r.node_findings, "nvlink-nvml");
  ASSERT_NE(note, nullptr);
  EXPECT_EQ(note->reason, "NVLink from NVML (driver 580.159.04): 4 GPU(s), 72 active link(s), 72 into NVSwitches");
}

TEST(NodeCapture, DirectLinksMixedWithSwitchLinksAndInactiveOnes) {
  // GPU0-GPU1: two direct links, then an inactive one, then a third direct one (an inactive
  // link in the middle does not end the GPU's links); GPU2 and GPU3: into NVSwitches.
  ::setenv("GDRPEER_FAKE_NVML",
           "00000000:00:06.0>00000000:00:07.0,00000000:00:07.0,off:00000000:00:08.0,00000000:00:07.0;"
           "00000000:00:07.0>00000000:00:06.0,00000000:00:06.0,00000000:00:06.0;"
           "00000000:00:08.0>switch:FFFFFFFF:FF:FF.0,switch:FFFFFFFF:FF:FF.0;"
           "00000000:00:09.0>switch:FFFFFFFF:FF:FF.0,switch:FFFFFFFF:FF:FF.0",
           1);
  Topology t = live(vm_node(0x2331, 4), fakes());  // H100 PCIe: nothing inferred from the model
  const Report r = check(t, kb(), CheckOptions{});
  const PairResult& direct = pair_of(r, "GPU0", "GPU1");
  EXPECT_TRUE(direct.nvlink.linked);
  EXPECT_FALSE(direct.nvlink.via_switch);
  EXPECT_EQ(direct.nvlink.links, 3);
  const PairResult& fabric = pair_of(r, "GPU2", "GPU3");
  EXPECT_TRUE(fabric.nvlink.via_switch);
  EXPECT_EQ(fabric.nvlink.links, 2);
  // GPU0 has links, but none into the fabric: GPU0-GPU2 is judged on the (flat virtual) PCIe
  // path, and since NVML told NVLink, that is known: unreliable, not a note.
  const PairResult& none = pair_of(r, "GPU0", "GPU2");
  EXPECT_FALSE(none.nvlink.linked);
  EXPECT_EQ(none.verdict, Verdict::Unreliable);
}

TEST(NodeCapture, GpusWithoutNvlinkCostOneQuestionEach) {
  ::setenv("GDRPEER_FAKE_NVML", "00000000:00:06.0>;00000000:00:07.0>", 1);
  const int state_calls = fake_nvml_calls("nvmlDeviceGetNvLinkState");
  Topology t = live(vm_node(0x2331, 2), fakes());
  EXPECT_EQ(fake_nvml_calls("nvmlDeviceGetNvLinkState") - std::max(state_calls, 0), 2);
  EXPECT_TRUE(t.nvlink_known);
  EXPECT_TRUE(t.nvlinks.empty());
  const Report r = check(t, kb(), CheckOptions{});
  EXPECT_FALSE(pair_of(r, "GPU0", "GPU1").nvlink.linked);
  const Finding* note = finding(r.node_findings, "nvlink-nvml");
  ASSERT_NE(note, nullptr);
  EXPECT_EQ(note->reason, "NVLink from NVML (driver 580.159.04): 2 GPU(s), 0 active link(s)");
}

TEST(NodeCapture, OneNvmlInitPerProcess) {
  ::setenv("GDRPEER_FAKE_NVML", nvswitch_spec(2).c_str(), 1);
  live(vm_node(0x2335, 2), fakes());
  live(vm_node(0x2335, 2), fakes());
  probe_nvml(GDRPEER_FAKE_NVML_PATH);
  EXPECT_EQ(fake_nvml_calls("nvmlInit_v2"), 1);
}

TEST(NodeCapture, FabricNotStartedIsUnreliable) {
  ::setenv("GDRPEER_FAKE_NVML", "00000000:00:06.0@fabric=1>switch:FFFFFFFF:FF:FF.0;00000000:00:07.0@fabric=3/0>switch:FFFFFFFF:FF:FF.0", 1);
  Topology t = live(vm_node(0x2335, 2), fakes());
  const Report r = check(t, kb(), CheckOptions{});
  const PairResult& p = pair_of(r, "GPU0", "GPU1");
  EXPECT_TRUE(p.nvlink.linked);
  const Finding* f = finding(p.findings, "nvlink-fabric");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->severity, Verdict::Unreliable);
  EXPECT_NE(f->reason.find("0000:00:06.0 is not started"), std::string::npos) << f->reason;
  const Finding* note = finding(r.node_findings, "nvlink-nvml");
  ASSERT_NE(note, nullptr);
  EXPECT_NE(note->reason.find("fabric completed on 1 not-started on 1"), std::string::npos) << note->reason;
}

// ---- NVML absent or failing: NVLink unknown, never a guess --------------------------------

TEST(NodeCapture, NoNvmlLeavesNvlinkUnknownInOneNote) {
  LiveOptions o = fakes();
  o.nvml_library = "libnvidia-ml-gdrpeer-test-missing.so.1";
  Topology t = live(vm_node(0x2331, 2), o);
  EXPECT_FALSE(t.nvlink_known);
  EXPECT_TRUE(t.nvml_failed);
  const Report r = check(t, kb(), CheckOptions{});
  int notes = 0;
  for (const auto& f : r.node_findings) notes += f.rule == "nvlink-nvml" || f.rule == "nvlink-unknown";
  EXPECT_EQ(notes, 1);
  const Finding* note = finding(r.node_findings, "nvlink-nvml");
  ASSERT_NE(note, nullptr);
  EXPECT_EQ(note->reason.rfind("NVLink unknown: NVML could not be asked (libnvidia-ml-gdrpeer-test-missing.so.1 not loadable)", 0), 0u);
  // The H100 PCIe pair on the flat virtual bus: not unreliable, and the note says what is known.
  const PairResult& p = pair_of(r, "GPU0", "GPU1");
  EXPECT_EQ(p.verdict, Verdict::Optimal);
  const Finding* f = virtual_bus_note(p);
  ASSERT_NE(f, nullptr);
  EXPECT_NE(f->reason.find("NVLink between them is unknown (NVML could not be asked)"), std::string::npos) << f->reason;
  EXPECT_NE(f->reason.find("the physical PCIe path is hidden"), std::string::npos) << f->reason;
}

TEST(NodeCapture, NvmlInitFailureIsSaid) {
  // Another name for the fake: nvmlInit runs once per process and library.
  const std::string dir = ::testing::TempDir() + "nvml-init-fail-" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  const std::string lib = dir + "/libnvidia-ml.so.1";
  std::filesystem::remove(lib);
  std::filesystem::create_symlink(GDRPEER_FAKE_NVML_PATH, lib);
  ::setenv("GDRPEER_FAKE_NVML_INIT", "9", 1);
  const NvmlRecord rec = probe_nvml(lib.c_str());
  ::unsetenv("GDRPEER_FAKE_NVML_INIT");
  EXPECT_EQ(rec.error, "nvmlInit failed: nvmlReturn_t 9 (Driver Not Loaded)");
  Topology t = live(vm_node(0x2331, 2), fakes());
  t.nvlinks.clear();
  t.nvlink_known = false;
  apply_nvml(rec, t);
  EXPECT_TRUE(t.nvml_failed);
  EXPECT_FALSE(t.nvlink_known);
  std::filesystem::remove_all(dir);
}

TEST(NodeCapture, UnknownModelOnAFlatVirtualBusIsNotUnreliable) {
  // An NVIDIA id neither gpus.json nor pci.ids knows, on a flat virtual bus, no link data.
  ::setenv("GDRPEER_PCI_IDS", "", 1);
  FakeNode n = vm_node(0x2bff, 2);
  auto fs = make_tar_fs(write_tar(n.entries()), "node");
  Topology t = parse_sysfs(*fs, "node");
  assign_roles(t, kb());
  const Report r = check(t, kb(), CheckOptions{});
  ::unsetenv("GDRPEER_PCI_IDS");
  const PairResult& p = pair_of(r, "GPU0", "GPU1");
  EXPECT_NE(p.verdict, Verdict::Unreliable);
  ASSERT_NE(virtual_bus_note(p), nullptr);
}

TEST(NodeCapture, SxmPartsWithoutLinkDataHaveNvlinkInferredFromTheModel) {
  FakeNode n = vm_node(0x2335, 2);  // pci.ids: GH100 [H200 SXM 141GB]
  auto fs = make_tar_fs(write_tar(n.entries()), "node");
  Topology t = parse_sysfs(*fs, "node");
  assign_roles(t, kb());
  Report r = check(t, kb(), CheckOptions{});
  const PairResult& p = pair_of(r, "GPU0", "GPU1");
  EXPECT_TRUE(p.nvlink.linked);
  EXPECT_TRUE(p.nvlink.inferred);
  EXPECT_EQ(p.nvlink.inferred_from, "gpu-model");
  EXPECT_EQ(p.verdict, Verdict::Optimal);
  const Finding* nv = finding(p.findings, "path-nvlink");
  ASSERT_NE(nv, nullptr);
  EXPECT_NE(nv->reason.find("inferred from the GPU model: GH100 [H200 SXM 141GB] (10de:2335) GPUs"), std::string::npos) << nv->reason;
  EXPECT_NE(finding(r.node_findings, "nvlink-inferred"), nullptr);
  // NVML answered that they have no links: known, nothing inferred.
  ::setenv("GDRPEER_FAKE_NVML", "00000000:00:06.0>;00000000:00:07.0>", 1);
  t = live(n, fakes());
  r = check(t, kb(), CheckOptions{});
  EXPECT_FALSE(pair_of(r, "GPU0", "GPU1").nvlink.linked);
  EXPECT_EQ(finding(r.node_findings, "nvlink-inferred"), nullptr);
}

// ---- small things --------------------------------------------------------------------

TEST(NodeCapture, IommuNoteNamesOnlyIommuParameters) {
  FakeNode n = vm_node(0x2335, 2);
  const std::string cmdline =
      "BOOT_IMAGE=/vmlinuz root=UUID=1234 ro intel_iommu=on iommu=pt console=ttyS0 iommu.strict=0 -- --auth-token=secret\n";
  Topology t = live(n, fakes(), {{TarEntry::Type::File, "proc/cmdline", cmdline}});
  const Report r = check(t, kb(), CheckOptions{});
  const Finding* f = finding(r.node_findings, "iommu-mode");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->reason, "IOMMU: off (kernel command line: intel_iommu=on iommu=pt iommu.strict=0)");
}

// ---- snapshots check as the live node did ---------------------------------------------

struct Kind {
  const char* name;
  FakeNode node;
  std::string nvml;  // fake NVML spec; "missing" for no NVML
};

std::vector<Kind> kinds() {
  std::vector<Kind> k;
  k.push_back({"switch node, GPU and NIC", testing::switch_node(), "00000000:03:00.0>"});
  k.push_back({"4x H200 VM, NVSwitch links", vm_node(0x2335, 4), nvswitch_spec(4)});
  k.push_back({"4x H200 VM, no NVML", vm_node(0x2335, 4), "missing"});
  k.push_back({"2x H100 PCIe VM, no links", vm_node(0x2331, 2), "00000000:00:06.0>;00000000:00:07.0>"});
  k.push_back({"2x H100 PCIe VM, no NVML", vm_node(0x2331, 2), "missing"});
  k.push_back({"4 GPUs, mixed links", vm_node(0x2331, 4),
               "00000000:00:06.0>00000000:00:07.0,00000000:00:07.0;00000000:00:07.0>00000000:00:06.0,00000000:00:06.0;"
               "00000000:00:08.0>switch:FFFFFFFF:FF:FF.0;00000000:00:09.0>switch:FFFFFFFF:FF:FF.0"});
  FakeNode fab = vm_node(0x2335, 2);
  k.push_back(
      {"fabric not started", fab, "00000000:00:06.0@fabric=1>switch:FFFFFFFF:FF:FF.0;00000000:00:07.0@fabric=1>switch:FFFFFFFF:FF:FF.0"});
  return k;
}

TEST(NodeCapture, SnapshotChecksExactlyAsTheLiveNode) {
  for (const Kind& kind : kinds()) {
    SCOPED_TRACE(kind.name);
    LiveOptions lo = fakes();
    if (kind.nvml == "missing")
      lo.nvml_library = "libnvidia-ml-gdrpeer-test-missing.so.1";
    else
      ::setenv("GDRPEER_FAKE_NVML", kind.nvml.c_str(), 1);
    const std::string tar = write_tar(kind.node.entries());
    // Live: the tree read in place, the drivers asked.
    auto live_fs = make_tar_fs(tar, "node");
    Topology lt = parse_sysfs(*live_fs, "node");
    ask_drivers(lt, lo);
    assign_roles(lt, kb());
    const Report lr = check(lt, kb(), CheckOptions{});
    // Snapshot of the same tree, written, then read back elsewhere (no NVML there).
    SnapshotOptions so;
    so.cuda = false;
    so.nvml_library = lo.nvml_library;
    so.now = 1795744429;
    auto base = make_tar_fs(tar, "node");
    const Snapshot snap = take_snapshot(*base, "node", so);
    auto snap_fs = make_tar_fs(write_tar(snap.entries), "node");
    ::setenv("GDRPEER_FAKE_NVML", "", 1);  // whatever NVML says here must not matter
    Topology st = parse_sysfs(*snap_fs, "node");
    assign_roles(st, kb());
    const Report sr = check(st, kb(), CheckOptions{});
    EXPECT_EQ(render_json(st, sr), render_json(lt, lr));
    EXPECT_EQ(render_matrix(st, sr, false), render_matrix(lt, lr, false));
    EXPECT_TRUE(snap_fs->read("/gdrpeer-snapshot/meta", 4096).value_or("").find("taken 2026-11-27T") == 0);
  }
}

TEST(NodeCapture, SnapshotRecordsNvidiaParamsAndTheNumaNodes) {
  FakeNode n = vm_node(0x2335, 2);
  const std::string params = "NvLinkDisable: 0\nDmaRemapPeerMmio: 1\n";
  std::vector<TarEntry> e = n.entries();
  e.push_back({TarEntry::Type::File, "proc/driver/nvidia/params", params});
  e.push_back({TarEntry::Type::File, "proc/sys/kernel/hostname", "gpu-node-7\n"});
  auto base = make_tar_fs(write_tar(e), "node");
  ::setenv("GDRPEER_FAKE_NVML", nvswitch_spec(2).c_str(), 1);
  SnapshotOptions so;
  so.cuda = false;
  so.nvml_library = GDRPEER_FAKE_NVML_PATH;
  so.tool_version = "9.9";
  const Snapshot snap = take_snapshot(*base, "node", so);
  auto fs = make_tar_fs(write_tar(snap.entries), "snap");
  EXPECT_EQ(fs->read("/proc/driver/nvidia/params", 4096).value_or(""), params);
  EXPECT_TRUE(fs->list("/sys/devices/system/node/node0").has_value());
  const std::string meta = fs->read("/gdrpeer-snapshot/meta", 4096).value_or("");
  EXPECT_NE(meta.find("hostname gpu-node-7\n"), std::string::npos) << meta;
  EXPECT_NE(meta.find("gdrpeer 9.9\n"), std::string::npos) << meta;
  EXPECT_NE(meta.find("nvidia_driver 580.159.04\n"), std::string::npos) << meta;
  const std::string nvml = fs->read("/gdrpeer-snapshot/nvml", 1 << 20).value_or("");
  EXPECT_NE(nvml.find("link 00000000:00:06.0 17 active=1 remote=FFFFFFFF:FF:FF.0 type=switch\n"), std::string::npos) << nvml;
  Topology t = parse_sysfs(*fs, "snap");
  EXPECT_EQ(t.numa_nodes, 1);
  EXPECT_EQ(t.devices[static_cast<size_t>(t.find("0000:00:06.0"))].numa, 0);
}

// The real node of the reference set (built from its own snapshot and nvml.json, see
// tests/reference/README.md), checked offline, and the same node "live" with a fake
// NVML answering what nvml.json says: the same verdicts, every GPU pair NV18 as
// nvidia-smi topo -m printed there.
TEST(NodeCapture, RealH200NodeOfflineEqualsLiveWithItsNvml) {
  const std::string bytes = testing::slurp(testing::reference("h200x4-node-snapshot.tar"));
  ASSERT_FALSE(bytes.empty());
  auto fs = make_tar_fs(bytes, "node");
  Topology off = parse_sysfs(*fs, "node");
  assign_roles(off, kb());
  const Report ro = check(off, kb(), CheckOptions{});
  std::vector<TarEntry> without;
  for (auto& e : parse_tar(bytes, "node"))
    if (e.path.rfind("gdrpeer-snapshot/", 0) != 0) without.push_back(e);
  ::setenv("GDRPEER_FAKE_NVML", nvswitch_spec(4).c_str(), 1);
  auto lfs = make_tar_fs(write_tar(without), "node");
  Topology lt = parse_sysfs(*lfs, "node");
  ask_drivers(lt, fakes());
  assign_roles(lt, kb());
  const Report rl = check(lt, kb(), CheckOptions{});
  ASSERT_EQ(ro.pairs.size(), 6u);
  for (size_t i = 0; i < ro.pairs.size(); ++i) {
    EXPECT_EQ(ro.pairs[i].verdict, rl.pairs[i].verdict);
    EXPECT_EQ(ro.pairs[i].nvlink.links, 18);
    EXPECT_TRUE(ro.pairs[i].nvlink.via_switch);
    EXPECT_FALSE(ro.pairs[i].nvlink.inferred);
  }
  EXPECT_EQ(ro.exit_code(), 0);
  EXPECT_EQ(render_matrix(off, ro, false).substr(0, 400), render_matrix(lt, rl, false).substr(0, 400));
}

}  // namespace
}  // namespace gdrpeer::topo

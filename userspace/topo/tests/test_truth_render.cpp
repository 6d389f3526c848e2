// The stack's and the readiness' parts of the outputs (stack_render.cpp, readiness_render.cpp)
// against what docs/check.md says they show (issue 28: the generated mutants of the two
// renderers that the other tests let through).
//
// Truth, in this order:
//  - the facts of the input: a node built from real artefacts (tests/reference/stack: the H200
//    node's /proc/driver/nvidia/params and version lines, a proprietary driver's version line)
//    whose exporter gate and consumer decisions docs/check.md derives from the driver's and the
//    consumers' sources (NVIDIA open-gpu-kernel-modules 580.142: an x86 open module allows
//    dma-buf and nvidia_p2p and refuses the PCIe mapping type off a coherent platform; the
//    proprietary module exports no dma-buf);
//  - the documented text format (docs/check.md, "Consumers" and "IBGDA and GDS readiness"):
//    the words of each JSON value, which lines are left out, how GPUs with the same answer
//    share a line, the fix on its own line;
//  - the --json rendering of the same report: the text must say what the JSON says, each GPU x
//    NIC pair's `ibgda` / `gds` object must be that pair's entry of the top-level `readiness`
//    array, and other / other_bdf name the device the entry is about.
// Where the pipeline cannot produce a case the renderer handles (a probe note, a fix of
// several lines, entries that differ only per GPU), the report check() made is edited before
// rendering: the renderer's contract is per field.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <map>
#include <string>
#include <vector>

#include "gdrpeer/topo/inputs.hpp"
#include "gdrpeer/topo/render.hpp"
#include "gdrpeer/topo/rules.hpp"
#include "test_topo_support.hpp"

namespace gdrpeer::topo {
namespace {

using nlohmann::json;
using testing::FakeNode;
using testing::from_fake;
using testing::kb;

// ---- inputs ---------------------------------------------------------------------------------

std::string stack_file(const std::string& name) { return testing::slurp(testing::reference("stack/" + name)); }
TarEntry file(const std::string& path, const std::string& data) { return {TarEntry::Type::File, path.substr(1), data}; }

// test_topo_support.hpp's switch node (GPU 03:00.0 and a ConnectX NIC 04:00.0 under one PCIe
// switch, x86, Linux 6.8: RDMA dma-buf is there, Linux >= 5.12) with the nvidia module and
// MOFED's memory_peers directory; the driver's files as given ("" : not in the input).
struct StackInput {
  std::string name;
  std::string version;  // /proc/driver/nvidia/version
  std::string params;   // /proc/driver/nvidia/params
  std::vector<std::string> peers;
  std::map<std::string, std::string> env;  // the consumers' variables the check runs with
};

Topology stack_topology(const StackInput& in) {
  FakeNode n = testing::switch_node();
  n.modules = "nvidia 1 0 - Live 0x0\nib_core 1 0 - Live 0x0\n";
  n.nvidia_version = in.version;
  n.memory_peers_dir = true;
  n.memory_peers = in.peers;
  std::vector<TarEntry> extra;
  if (!in.params.empty()) extra.push_back(file("/proc/driver/nvidia/params", in.params));
  return from_fake(n, extra);
}

Report check_stack(const Topology& t, const StackInput& in) {
  CheckOptions o;
  o.env = in.env;
  return check(t, kb(), o);
}

struct Rendered {
  std::string text, raw;
  json j;
};

Rendered render(const Topology& t, const Report& r) {
  Rendered out;
  out.text = render_matrix(t, r, false);
  out.raw = render_json(t, r);
  out.j = json::parse(out.raw);  // throws (a test error) on invalid JSON
  return out;
}

// The text between a section's header line and the blank line that ends it ("" when absent).
std::string section(const std::string& text, const std::string& header) {
  const size_t at = text.find("\n" + header);
  if (at == std::string::npos) return "";
  const size_t body = text.find('\n', at + 1) + 1;
  const size_t end = text.find("\n\n", body - 1);
  return text.substr(body, end == std::string::npos ? std::string::npos : end + 1 - body);
}

const std::string kConsumersHeader = "Consumers (what each will do for the pair; models in docs/check.md):";
const std::string kReadinessHeader = "IBGDA and GDS readiness (modes and the sources modelled: docs/check.md):";

using testing::has;

// ---- the Consumers block, as docs/check.md writes it, from the JSON ---------------------------

// "GDR on" / "GDR off" / "GDR unknown" for JSON gdr true / false / null.
std::string gdr_words(const json& v) { return v.is_null() ? "GDR unknown" : v.get<bool>() ? "GDR on" : "GDR off"; }
// "allowed" / "refused" / "unknown" for the driver's allowed true / false / null.
std::string allowed_words(const json& v) { return v.is_null() ? "unknown" : v.get<bool>() ? "allowed" : "refused"; }

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// One line per consumer per GPU x NIC pair that has the consumers object: the pair's names on
// the first, blanks of the same width on the others; "CONSUMER: GDR on|off|unknown, PATH", then
// " (MAPPING mapping)" for a dma-buf path with a mapping type, ", LEVEL" and "; WHY" where
// given. NVSHMEM and UCX are left out where nothing decides them (gdr null, path unknown, and
// the reason says what is "not in this input"), NCCL never. Then the driver's line where its
// dma-buf or nvidia_p2p answer is known.
std::string consumers_block_of(const json& j) {
  std::string o;
  for (const auto& p : j.at("pairs")) {
    if (!p.contains("consumers")) continue;
    const json& c = p.at("consumers");
    const std::string who = p.at("a").get<std::string>() + " - " + p.at("b").get<std::string>();
    const std::string blank(who.size(), ' ');
    bool first = true;
    for (const char* name : {"nccl", "nvshmem", "ucx"}) {
      const json& d = c.at(name);
      const std::string path = d.at("path"), mapping = d.at("mapping"), level = d.at("level"), why = d.at("why");
      if (std::string(name) != "nccl" && d.at("gdr").is_null() && path == "unknown" && ends_with(why, "not in this input")) continue;
      std::string line = "  " + (first ? who : blank) + "  " + name + ": " + gdr_words(d.at("gdr")) + ", " + path;
      first = false;
      if (path == "dma-buf" && !mapping.empty()) line += " (" + mapping + " mapping)";
      if (!level.empty()) line += ", " + level;
      if (!why.empty()) line += "; " + why;
      o += line + "\n";
    }
    const json& g = c.at("nvidia_driver");
    const json &dmabuf = g.at("dmabuf_default").at("allowed"), &pcie = g.at("dmabuf_pcie").at("allowed"),
               &p2p = g.at("nvidia_p2p").at("allowed");
    if (!dmabuf.is_null() || !p2p.is_null())
      o += "  " + blank + "  nvidia driver: dma-buf " + allowed_words(dmabuf) + ", PCIe mapping type " + allowed_words(pcie) +
           ", nvidia_p2p " + allowed_words(p2p) + "\n";
  }
  return o;
}

const json& consumers(const Rendered& r) {
  for (const auto& p : r.j.at("pairs"))
    if (p.at("a") == "GPU0" && p.at("b") == "NIC0") return p.at("consumers");
  throw std::runtime_error("no GPU0 - NIC0 pair");
}

// The inputs, and what docs/check.md's tables say of them: the exporter's gate as
// tests/test_check_stack.py's GATE table derives it from the driver's source (x86, not
// coherent: dma-buf needs the open module and nv_grdma_pci_topology_supported(), which the
// override 0 of the H200 params and the unknown chipset list leave true; the PCIe mapping type
// needs a coherent platform; nvidia_p2p the topology check alone), the consumers' rows.
struct StackCase {
  StackInput in;
  // (gdr, path) per consumer as docs/check.md derives them; gdr -1 null.
  std::map<std::string, std::pair<int, std::string>> want;
  std::vector<json> gate;   // allowed of dmabuf_default, dmabuf_pcie, nvidia_p2p
  std::string driver_line;  // "" : the line is left out
  std::string flavour;      // software.stack.nvidia.flavour
};

std::vector<StackCase> stack_cases() {
  const std::string open = stack_file("h200-580.159.04-open-version.txt");
  const std::string proprietary = stack_file("proprietary-580.159.04-version.txt");
  const std::string params = stack_file("h200-580.159.04-open-params.txt");
  const auto on = [](const char* path) { return std::pair<int, std::string>{1, path}; };
  const std::pair<int, std::string> off{0, "none"}, unknown{-1, "unknown"};
  return {
      // The open module exports dma-buf; Linux 6.8 has RDMA dma-buf; the switch is within
      // NCCL's level (PIX vs P2C): every consumer takes dma-buf.
      {{"open, no peer client", open, params, {}, {}},
       {{"nccl", on("dma-buf")}, {"nvshmem", on("dma-buf")}, {"ucx", on("dma-buf")}},
       {true, false, true},
       "nvidia driver: dma-buf allowed, PCIe mapping type refused, nvidia_p2p allowed",
       "open"},
      // Proprietary, no peer client: no dma-buf, no peer memory: every consumer off.
      {{"proprietary, no peer client", proprietary, params, {}, {}},
       {{"nccl", off}, {"nvshmem", off}, {"ucx", off}},
       {false, false, true},
       "nvidia driver: dma-buf refused, PCIe mapping type refused, nvidia_p2p allowed",
       "proprietary"},
      // Proprietary with MOFED's nv_mem client registered: every consumer through peer memory.
      {{"proprietary, nv_mem", proprietary, params, {"nv_mem"}, {}},
       {{"nccl", on("peer-memory")}, {"nvshmem", on("peer-memory")}, {"ucx", on("peer-memory")}},
       {false, false, true},
       "nvidia driver: dma-buf refused, PCIe mapping type refused, nvidia_p2p allowed",
       "proprietary"},
      // The open module without its params file: the override is unknown (2 would deny), so
      // are the driver's dma-buf and nvidia_p2p answers; only "needs a coherent platform" is
      // known: no driver line.
      {{"open, params not in the input", open, "", {}, {}},
       {{"nccl", on("dma-buf")}, {"nvshmem", on("dma-buf")}, {"ucx", on("dma-buf")}},
       {nullptr, false, nullptr},
       "",
       "open"},
      // Proprietary without the params file: no dma-buf whatever the override; nvidia_p2p unknown.
      {{"proprietary, params not in the input", proprietary, "", {}, {}},
       {{"nccl", off}, {"nvshmem", off}, {"ucx", off}},
       {false, false, nullptr},
       "nvidia driver: dma-buf refused, PCIe mapping type refused, nvidia_p2p unknown",
       "proprietary"},
      // The params without the version file: which module (open or proprietary) is unknown, so
      // is dma-buf; nvidia_p2p is allowed by the topology check.
      {{"params, version not in the input", "", params, {}, {}},
       {{"nccl", unknown}, {"nvshmem", unknown}, {"ucx", unknown}},
       {nullptr, false, true},
       "nvidia driver: dma-buf unknown, PCIe mapping type refused, nvidia_p2p allowed",
       "unknown"},
      // No NVIDIA driver files at all: only NCCL's distance rule is known (within the level,
      // whether dma-buf or peer memory is not in the input); NVSHMEM and UCX unknown.
      {{"no driver files", "", "", {}, {}},
       {{"nccl", unknown}, {"nvshmem", unknown}, {"ucx", unknown}},
       {nullptr, false, nullptr},
       "",
       "unknown"},
      // UCX_IB_GPU_DIRECT_RDMA=off: not a value UCX's ternary parser reads (ucs_config_sscanf_ternary:
      // try/maybe, yes/y/1, no/n/0): UCX stops on its configuration, which the UCX line must say
      // (its decision is known, GDR is neither on nor off).
      {{"open, UCX_IB_GPU_DIRECT_RDMA=off", open, params, {}, {{"UCX_IB_GPU_DIRECT_RDMA", "off"}}},
       {{"nccl", on("dma-buf")}, {"nvshmem", on("dma-buf")}, {"ucx", unknown}},
       {true, false, true},
       "nvidia driver: dma-buf allowed, PCIe mapping type refused, nvidia_p2p allowed",
       "open"},
  };
}

std::string shown(const std::vector<json>& v) {
  std::string s;
  for (const auto& x : v) s += x.dump() + " ";
  return s;
}

TEST(TruthRender, ConsumersTextSaysWhatTheJsonSaysInTheDocumentedFormat) {
  for (const StackCase& c : stack_cases()) {
    SCOPED_TRACE(c.in.name);
    const Topology t = stack_topology(c.in);
    const Rendered out = render(t, check_stack(t, c.in));
    // The facts first: each consumer's decision and the driver's gate as the docs derive them
    // from this input (JSON: gdr and allowed true|false|null).
    const json& cons = consumers(out);
    for (const auto& [name, want] : c.want) {
      const json& d = cons.at(name);
      EXPECT_EQ(d.at("gdr").is_null() ? -1 : d.at("gdr").get<bool>() ? 1 : 0, want.first) << name << ": " << d.dump();
      EXPECT_EQ(d.at("path"), want.second) << name;
    }
    const json& g = cons.at("nvidia_driver");
    EXPECT_EQ(
        (std::vector<json>{g.at("dmabuf_default").at("allowed"), g.at("dmabuf_pcie").at("allowed"), g.at("nvidia_p2p").at("allowed")}),
        c.gate)
        << "want " << shown(c.gate);
    for (const char* k : {"dmabuf_default", "dmabuf_pcie", "nvidia_p2p"}) EXPECT_FALSE(g.at(k).at("why").get<std::string>().empty()) << k;
    EXPECT_EQ(cons.at("version"), 1);
    EXPECT_EQ(out.j.at("node").at("software").at("stack").at("nvidia").at("flavour"), c.flavour);
    // The driver's line, word for word as docs/check.md's example writes it, or none.
    if (c.driver_line.empty())
      EXPECT_FALSE(has(out.text, "nvidia driver:")) << out.text;
    else
      EXPECT_TRUE(has(out.text, "\n               " + c.driver_line + "\n")) << out.text;
    // Then the whole block against the JSON of the same report.
    const std::string want = consumers_block_of(out.j);
    ASSERT_FALSE(want.empty());
    EXPECT_EQ(section(out.text, kConsumersHeader), want) << out.text;
    // Every key once, in byte order: the layout of nlohmann's dump(2), which the writer keeps.
    EXPECT_EQ(out.raw, out.j.dump(2) + "\n");
  }
}

TEST(TruthRender, UcxRefusingItsConfigurationIsSaidInTheText) {
  // Before: the UCX line was left out as if nothing were known, while the JSON said why UCX stops.
  const StackCase c = stack_cases().back();
  const Topology t = stack_topology(c.in);
  const Rendered out = render(t, check_stack(t, c.in));
  EXPECT_TRUE(has(section(out.text, kConsumersHeader),
                  "\n               ucx: GDR unknown, unknown; UCX_IB_GPU_DIRECT_RDMA=off is not a value UCX reads"))
      << out.text;
}

TEST(TruthRender, PeerMemoryLinesNameNoMappingType) {
  // The mapping type is a dma-buf attribute (CU_MEM_RANGE_FLAG_DMA_BUF_MAPPING_TYPE_PCIE of
  // cuMemGetHandleForAddressRange): NCCL's decision keeps one for every path within its level,
  // the text shows it only where the path is dma-buf.
  const StackCase c = stack_cases()[2];
  const Topology t = stack_topology(c.in);
  const Rendered out = render(t, check_stack(t, c.in));
  ASSERT_EQ(consumers(out).at("nccl").at("mapping"), "default");
  const std::string block = section(out.text, kConsumersHeader);
  EXPECT_TRUE(has(block, "  GPU0 - NIC0  nccl: GDR on, peer-memory, PIX vs P2C")) << block;
  EXPECT_FALSE(has(block, "mapping)")) << block;
}

TEST(TruthRender, NoGpuNicPairNoConsumersBlock) {
  // Two GPUs and no NIC: no GPU x NIC pair, so no consumer decides anything and the block is absent.
  Topology t;
  testing::add_tree_device(t, "0000:01:00.0", -1, PortType::Endpoint, Role::GPU);
  testing::add_tree_device(t, "0000:02:00.0", -1, PortType::Endpoint, Role::GPU);
  const Rendered out = render(t, check(t, kb(), CheckOptions{}));
  for (const auto& p : out.j.at("pairs")) EXPECT_FALSE(p.contains("consumers")) << p.dump();
  EXPECT_FALSE(has(out.text, "Consumers (")) << out.text;
}

// ---- the readiness block ----------------------------------------------------------------------

// The GPU x NIC / GPU x NVMe lines as docs/check.md writes them, from the JSON `readiness`
// array: "KIND: MODE; REASON", " {PROBE NOTE}" where there is one, the fix on the next line
// ("      fix: ", its lines joined by "; "); entries with the same other end and the same text
// share one line naming their GPUs ("GPU0, GPU1 - NIC0"); "(no NIC)" / "(no NVMe)" where the
// input has none; the names padded to 16 columns, at least one blank before the text.
std::string readiness_block_of(const json& j) {
  struct Group {
    std::string gpus, other, text;
  };
  std::vector<Group> groups;
  for (const auto& e : j.at("readiness")) {
    const std::string kind = e.at("kind");
    std::string other = e.at("other");
    if (other.empty()) other = kind == "ibgda" ? "(no NIC)" : "(no NVMe)";
    const json& m = e.at("mode");
    std::string text = kind + ": " + m.at("mode").get<std::string>() + "; " + m.at("reason").get<std::string>();
    if (!m.at("probe_note").get<std::string>().empty()) text += " {" + m.at("probe_note").get<std::string>() + "}";
    std::string fix = m.at("fix");
    for (size_t at; (at = fix.find('\n')) != std::string::npos;) fix.replace(at, 1, "; ");
    if (!fix.empty()) text += "\n      fix: " + fix;
    bool merged = false;
    for (auto& g : groups)
      if (g.other == other && g.text == text) {
        g.gpus += ", " + e.at("gpu").get<std::string>();
        merged = true;
        break;
      }
    if (!merged) groups.push_back({e.at("gpu"), other, text});
  }
  std::string o;
  for (const auto& g : groups) {
    const std::string who = g.gpus + " - " + g.other;
    o += "  " + who + std::string(who.size() < 16 ? 16 - who.size() : 1, ' ') + g.text + "\n";
  }
  return o;
}

// Each GPU x NIC pair carries its own entry's mode as `ibgda`, each GPU x NVMe pair as `gds`;
// GPU-GPU pairs neither (docs/check.md's schema). The array's other / other_bdf and gpu_bdf
// name the devices of the report.
void expect_json_consistent(const Topology& t, const Report& r, const json& j) {
  ASSERT_EQ(j.at("readiness").size(), r.readiness.size());
  for (size_t i = 0; i < r.readiness.size(); ++i) {
    const ReadinessEntry& e = r.readiness[i];
    const json& x = j.at("readiness").at(i);
    EXPECT_EQ(x.at("kind"), e.kind);
    EXPECT_EQ(x.at("gpu"), r.labels[e.gpu]);
    EXPECT_EQ(x.at("gpu_bdf"), t.devices[e.gpu].bdf);
    EXPECT_EQ(x.at("other"), e.other >= 0 ? r.labels[e.other] : "") << x.dump();
    EXPECT_EQ(x.at("other_bdf"), e.other >= 0 ? t.devices[e.other].bdf : "") << x.dump();
    EXPECT_EQ(x.at("mode").at("reason"), e.m.reason);
    EXPECT_EQ(x.at("mode").at("probe_note"), e.m.probe_note);
    EXPECT_EQ(x.at("mode").at("fix"), e.m.fix);
  }
  for (const auto& p : j.at("pairs")) {
    const std::string a = p.at("a"), b = p.at("b");
    const json* ibgda = nullptr;
    const json* gds = nullptr;
    for (const auto& x : j.at("readiness"))
      if (x.at("gpu") == a && x.at("other") == b) (x.at("kind") == "gds" ? gds : ibgda) = &x.at("mode");
    SCOPED_TRACE(a + " - " + b);
    EXPECT_EQ(p.contains("ibgda"), ibgda != nullptr);
    EXPECT_EQ(p.contains("gds"), gds != nullptr);
    if (ibgda && p.contains("ibgda")) {
      EXPECT_EQ(p.at("ibgda"), *ibgda);
    }
    if (gds && p.contains("gds")) {
      EXPECT_EQ(p.at("gds"), *gds);
    }
  }
}

// The report rendered, its JSON checked against the text's rules, and the text's readiness
// block, which must be what the JSON's readiness array says.
std::string checked_readiness_block(const Topology& t, const Report& r, Rendered& out) {
  out = render(t, r);
  expect_json_consistent(t, r, out.j);
  const std::string block = section(out.text, kReadinessHeader);
  EXPECT_EQ(block, readiness_block_of(out.j)) << out.text;
  return block;
}

// A NIC first in device order (index 0, as a NIC on bus 01 before GPUs on later buses comes),
// then two GPUs, a second NIC and an NVMe drive (Samsung PM9A3, 144d:a80a), each on its own
// host-bridge slot.
Topology nic_first_node() {
  Topology t;
  testing::add_tree_device(t, "0000:01:00.0", -1, PortType::Endpoint, Role::NIC);
  testing::add_tree_device(t, "0000:02:00.0", -1, PortType::Endpoint, Role::GPU);
  testing::add_tree_device(t, "0000:03:00.0", -1, PortType::Endpoint, Role::GPU);
  testing::add_tree_device(t, "0000:04:00.0", -1, PortType::Endpoint, Role::NIC);
  testing::add_device(t, "0000:05:00.0", -1, PortType::Endpoint, Role::NVMe, 0x144d, 0xa80a);
  return t;
}

CheckOptions with_nvme() {
  CheckOptions o;
  o.gpu_nvme = true;
  return o;
}

TEST(TruthRender, ReadinessEntriesAreRenderedEachWhereItBelongs) {
  const Topology t = nic_first_node();
  Report r = check(t, kb(), with_nvme());
  ASSERT_EQ(r.labels[0], "NIC0");
  // 2 GPUs x (2 NICs + 1 NVMe drive).
  ASSERT_EQ(r.readiness.size(), 6u);
  // Each entry its own answer (the pipeline gives both GPUs the same; a live node's probe
  // and CUDA answers differ per GPU), one with a probe note, fixes of two lines.
  for (size_t i = 0; i < r.readiness.size(); ++i) {
    ReadinessEntry& e = r.readiness[i];
    e.m.reason = "reason " + std::to_string(i) + " of " + r.labels[e.gpu] + " and " + r.labels[e.other];
    e.m.fix = "first step " + std::to_string(i) + "\nsecond step";
  }
  r.readiness[1].m.probe_note = "probe overrides the prediction (devx: no)";
  r.readiness[2].m.fix.clear();  // the best mode: no fix
  Rendered out;
  const std::string block = checked_readiness_block(t, r, out);
  // Spelled out for two of them: a NIC at device index 0 is named, not "(no NIC)".
  EXPECT_TRUE(has(block, "  GPU0 - NIC0     ibgda: ")) << block;
  EXPECT_TRUE(has(block, "; second step\n")) << block;
  EXPECT_TRUE(has(block, " {probe overrides the prediction (devx: no)}\n      fix: first step 1; second step\n")) << block;
  EXPECT_EQ(out.j.at("readiness").at(0).at("other_bdf"), "0000:01:00.0");
}

TEST(TruthRender, GpusShareALineOnlyForTheSameOtherEndAndText) {
  const Topology t = nic_first_node();
  Report r = check(t, kb(), with_nvme());
  // Every GPU x NIC entry the same text (both GPUs, both NICs), the GPU x NVMe entries
  // different per GPU: NIC0's line names both GPUs, NIC1's too, the drive gets one line per GPU.
  for (ReadinessEntry& e : r.readiness) {
    e.m.fix.clear();
    e.m.reason = e.kind == "ibgda" ? "the same answer" : "drive answer of " + r.labels[e.gpu];
  }
  Rendered out;
  const std::string block = checked_readiness_block(t, r, out);
  EXPECT_TRUE(has(block, "  GPU0, GPU1 - NIC0 ibgda: ")) << block;
  EXPECT_TRUE(has(block, "  GPU0, GPU1 - NIC1 ibgda: ")) << block;
  EXPECT_TRUE(has(block, "  GPU0 - NVME0    gds: ")) << block;
  EXPECT_TRUE(has(block, "  GPU1 - NVME0    gds: ")) << block;
}

TEST(TruthRender, LoneGpuFirstInDeviceOrderHasNoNicAndNoDrive) {
  // One GPU at device index 0 and nothing else: "GPU0 - (no NIC)" (15 columns) and
  // "GPU0 - (no NVMe)" (16): padded to 16, at least one blank before the text.
  Topology t;
  testing::add_tree_device(t, "0000:01:00.0", -1, PortType::Endpoint, Role::GPU);
  const Report r = check(t, kb(), with_nvme());
  ASSERT_EQ(r.readiness.size(), 2u);
  Rendered out;
  const std::string block = checked_readiness_block(t, r, out);
  EXPECT_TRUE(has(block, "  GPU0 - (no NIC) ibgda: none; ")) << block;
  EXPECT_TRUE(has(block, "  GPU0 - (no NVMe) gds: ")) << block;
  for (const auto& e : out.j.at("readiness")) EXPECT_EQ(e.at("other"), "");
}

TEST(TruthRender, NoGpuNoReadinessBlock) {
  // A NIC alone: no GPU, so no IBGDA or GDS line (docs/check.md: one line per NVIDIA GPU x ...).
  Topology t;
  testing::add_tree_device(t, "0000:01:00.0", -1, PortType::Endpoint, Role::NIC);
  const Report r = check(t, kb(), CheckOptions{});
  ASSERT_TRUE(r.readiness.empty());
  const Rendered out = render(t, r);
  EXPECT_FALSE(has(out.text, "IBGDA and GDS readiness")) << out.text;
  EXPECT_TRUE(out.j.at("readiness").empty());
}

}  // namespace
}  // namespace gdrpeer::topo

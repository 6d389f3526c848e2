// `gdrpeer check --cuda` on a live node asks NVML for each GPU's active NVLinks
// (topo/src/cuda_probe.cpp). Here NVML is a fake (tests/fake_nvml.cpp) loaded
// through the same dlopen seam, on a real lspci dump of four NVIDIA GPUs: the
// links it reports must become the NVLink classes and verdicts of the check.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "gdrpeer/topo/cuda_probe.hpp"
#include "gdrpeer/topo/inputs.hpp"
#include "gdrpeer/topo/render.hpp"
#include "gdrpeer/topo/rule_data.hpp"
#include "gdrpeer/topo/rules.hpp"
#include "test_topo_support.hpp"

namespace gdrpeer::topo {
namespace {

// GPU0..GPU3 of this dump are 0000:01:00.0, 0000:41:00.0, 0000:c1:00.0, 0000:e1:00.0.
const char* kDump = "stelline-asus-esc8000a-e12.md";

using testing::kb;
using testing::pair_of;

Topology node() {
  const std::string text = testing::slurp(testing::reference(kDump));
  Topology t = parse_lspci({{kDump, text}});
  assign_roles(t, kb());
  return t;
}

bool has_rule(const PairResult& p, const std::string& rule) {
  for (const auto& f : p.findings)
    if (f.rule == rule) return true;
  return false;
}

TEST(NvmlNvLink, ActiveLinksBecomeNvLinkClasses) {
  // GPU0 and GPU1: two direct links (GPU0's third link, to GPU2, is down); GPU2 and GPU3:
  // three links each into an NVSwitch that is not on the PCI bus.
  ::setenv("GDRPEER_FAKE_NVML",
           "00000000:01:00.0>00000000:41:00.0,00000000:41:00.0,off:00000000:C1:00.0;"
           "00000000:41:00.0>00000000:01:00.0,00000000:01:00.0;"
           "00000000:C1:00.0>switch:00000000:FF:00.0,switch:00000000:FF:00.0,switch:00000000:FF:00.0;"
           "00000000:E1:00.0>switch:00000000:FF:00.0,switch:00000000:FF:00.0,switch:00000000:FF:00.0",
           1);
  Topology t = node();
  ASSERT_FALSE(t.nvlink_known);
  EXPECT_EQ(probe_nvlink(t, GDRPEER_FAKE_NVML_PATH), "");
  EXPECT_TRUE(t.nvlink_known);
  const Report r = check(t, kb(), CheckOptions{});
  ASSERT_EQ(r.gpus.size(), 4u);

  const PairResult& direct = pair_of(r, "GPU0", "GPU1");
  EXPECT_TRUE(direct.nvlink.linked);
  EXPECT_FALSE(direct.nvlink.via_switch);
  EXPECT_FALSE(direct.nvlink.inferred);
  EXPECT_EQ(direct.nvlink.links, 2);
  EXPECT_EQ(direct.verdict, Verdict::Optimal);
  EXPECT_TRUE(has_rule(direct, "path-nvlink"));

  const PairResult& fabric = pair_of(r, "GPU2", "GPU3");
  EXPECT_TRUE(fabric.nvlink.linked);
  EXPECT_TRUE(fabric.nvlink.via_switch);
  EXPECT_EQ(fabric.nvlink.links, 3);
  EXPECT_TRUE(has_rule(fabric, "path-nvlink"));

  // An inactive link carries nothing: GPU0-GPU2 is judged on its PCIe path (SYS).
  const PairResult& down = pair_of(r, "GPU0", "GPU2");
  EXPECT_FALSE(down.nvlink.linked);
  EXPECT_EQ(down.path.cls, PathClass::SYS);
  EXPECT_FALSE(has_rule(down, "path-nvlink"));
  EXPECT_TRUE(has_rule(down, "path-sys"));
  EXPECT_FALSE(pair_of(r, "GPU1", "GPU3").nvlink.linked);

  // The matrix shows nvidia-smi's NV# cells for the linked pairs, the PCIe class elsewhere.
  const std::string m = render_matrix(t, r, false);
  EXPECT_NE(m.find("GPU0     X      NV2     SYS     SYS "), std::string::npos) << m;
  EXPECT_NE(m.find("GPU2    SYS     SYS      X      NV3 "), std::string::npos) << m;
  // NVML answered, so the "NVLink not in this input" note is gone.
  for (const auto& f : r.node_findings) EXPECT_NE(f.rule, "nvlink-unknown") << f.reason;
}

TEST(NvmlNvLink, GpusWithoutActiveLinksAreKnownUnlinked) {
  ::setenv("GDRPEER_FAKE_NVML", "00000000:01:00.0>off:00000000:41:00.0;00000000:41:00.0>", 1);
  Topology t = node();
  EXPECT_EQ(probe_nvlink(t, GDRPEER_FAKE_NVML_PATH), "");
  EXPECT_TRUE(t.nvlink_known);
  EXPECT_TRUE(t.nvlinks.empty());
  const Report r = check(t, kb(), CheckOptions{});
  EXPECT_FALSE(pair_of(r, "GPU0", "GPU1").nvlink.linked);
  for (const auto& f : r.node_findings) EXPECT_NE(f.rule, "nvlink-unknown") << f.reason;
}

TEST(NvmlNvLink, UnusableNvmlIsSaidAndLeavesNvLinkUnknown) {
  Topology t = node();
  EXPECT_EQ(probe_nvlink(t, "libnvidia-ml-gdrpeer-test-missing.so.1"), "libnvidia-ml-gdrpeer-test-missing.so.1 not loadable");
  EXPECT_FALSE(t.nvlink_known);
  const std::string why = probe_nvlink(t, "libc.so.6");  // loads, but has no NVML entry points
  EXPECT_EQ(why.rfind("libc.so.6 lacks the NVLink entry points (nvmlInit_v2, ", 0), 0u) << why;
  EXPECT_FALSE(t.nvlink_known);
  EXPECT_TRUE(t.nvlinks.empty());
}

}  // namespace
}  // namespace gdrpeer::topo

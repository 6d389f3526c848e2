// The stack stage's pure pieces against independent truth: the exporter gate against the table
// derived by hand from open-gpu-kernel-modules 580.142 (tests/reference/stack/README.md), and
// the parsers against the real params file and modprobe.d(5) / kernel-log syntax.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "gdrpeer/topo/stack.hpp"

namespace gdrpeer::topo {
namespace {

struct Row {
  const char* what;
  GateInput in;
  int dmabuf_default, dmabuf_pcie, nvidia_p2p;
};

// GateInput's members, in its order; the table is 580.142's (DriverGate::Full).
GateInput make(int flavour, int coherent, int override_value, bool vm, bool chipset, int bridge, int group) {
  return {flavour, coherent, override_value, vm, chipset, bridge, group, DriverGate::Full};
}

TEST(ExporterGate, TableFromTheDriverSource) {
  const Row rows[] = {
      {"open x86", make(1, 0, 0, false, false, 0, 0), 1, 0, 1},
      {"proprietary x86", make(0, 0, 0, false, false, 0, 0), 0, 0, 1},
      {"proprietary coherent", make(0, 1, 0, false, false, 1, 1), 0, 0, 1},
      {"open distrusted chipset, common bridge", make(1, 0, 0, false, true, 1, 0), 1, 0, 1},
      {"open distrusted chipset, no common bridge", make(1, 0, 0, false, true, 0, 0), 0, 0, 0},
      {"open coherent same group", make(1, 1, 0, false, true, 0, 1), 1, 1, 1},
      {"open coherent other group", make(1, 1, 0, false, true, 0, 0), 1, 0, 1},
      {"open coherent override 1", make(1, 1, 1, false, true, 0, 0), 1, 1, 1},
      {"open non-coherent override 1", make(1, 0, 1, false, true, 0, 0), 1, 0, 1},
      {"open non-coherent override 2", make(1, 0, 2, false, false, 1, 1), 0, 0, 0},
      {"open coherent override 2", make(1, 1, 2, false, false, 1, 1), 1, 0, 1},
      {"open passthrough VM, distrusted chipset", make(1, 0, 0, true, true, 0, 0), 1, 0, 1},
      {"open override 2 beats passthrough", make(1, 0, 2, true, false, 1, 1), 0, 0, 0},
      {"flavour unknown x86", make(-1, 0, 0, false, false, 0, 0), -1, 0, 1},
      {"coherence unknown", make(1, -1, 0, false, false, 1, 1), -1, -1, -1},
      {"override unknown x86", make(1, 0, -1, false, false, 1, 1), -1, 0, -1},
  };
  for (const Row& r : rows) {
    SCOPED_TRACE(r.what);
    const GateResult g = exporter_gate(r.in);
    EXPECT_EQ(g.dmabuf_default.allowed, r.dmabuf_default) << g.dmabuf_default.why;
    EXPECT_EQ(g.dmabuf_pcie.allowed, r.dmabuf_pcie) << g.dmabuf_pcie.why;
    EXPECT_EQ(g.nvidia_p2p.allowed, r.nvidia_p2p) << g.nvidia_p2p.why;
    for (const GateAnswer* a : {&g.dmabuf_default, &g.dmabuf_pcie, &g.nvidia_p2p}) EXPECT_FALSE(a->why.empty());
  }
}

TEST(StackParse, RealH200ParamsFile) {
  std::ifstream f(std::string(GDRPEER_TEST_REFERENCE_DIR) + "/stack/h200-580.159.04-open-params.txt");
  ASSERT_TRUE(f);
  std::stringstream ss;
  ss << f.rdbuf();
  StackState s;
  parse_nvidia_params(ss.str(), s);
  EXPECT_TRUE(s.params_known);
  EXPECT_EQ(s.params.size(), 42u);
  EXPECT_EQ(s.params.at("GrdmaPciTopoCheckOverride"), "0");
  EXPECT_EQ(s.params.at("ResmanDebugLevel"), "4294967295");
  EXPECT_EQ(s.params.at("CoherentGPUMemoryMode"), "");
  EXPECT_TRUE(s.registry_dwords.empty());
  EXPECT_EQ(s.active_param("DmaRemapPeerMmio"), "1");
  EXPECT_EQ(s.active_param("PeerMappingOverride"), "");
}

TEST(StackParse, RegistryDwordsOverrideTheStaticOption) {
  StackState s;
  parse_nvidia_params(
      "GrdmaPciTopoCheckOverride: 0\nRegistryDwords: \"GrdmaPciTopoCheckOverride=1;PeerMappingOverride=1\"\n"
      "RegistryDwordsPerDevice: \"pci=0000:01:00.0;RMPcieP2PType=2;pci=0000:02:00.0;X=3\"\n",
      s);
  EXPECT_EQ(s.active_param("GrdmaPciTopoCheckOverride"), "1");  // nv-reg.h: the static option is overridden
  EXPECT_EQ(s.active_param("PeerMappingOverride"), "1");
  EXPECT_EQ(s.registry_per_device.at("0000:01:00.0").at("RMPcieP2PType"), "2");
  EXPECT_EQ(s.registry_per_device.at("0000:02:00.0").at("X"), "3");
}

TEST(StackParse, ModprobeConfSyntax) {
  StackState s;
  parse_modprobe_conf(
      "# comment\n\noptions nvidia-peermem persistent_api_support=0\n"
      "options nvidia NVreg_RegistryDwords=\"PeerMappingOverride=1; RMForceStaticBar1=1\" \\\n"
      "  NVreg_GrdmaPciTopoCheckOverride=1\nblacklist nvidia_peermem\ninstall nvidia /bin/true\n",
      "/etc/modprobe.d/x.conf", s);
  ASSERT_EQ(s.modprobe.size(), 4u);
  EXPECT_EQ(s.modprobe[0].module, "nvidia_peermem");  // - and _ alike
  EXPECT_EQ(s.modprobe[0].line, 3);
  EXPECT_EQ(s.modprobe[1].value, "PeerMappingOverride=1; RMForceStaticBar1=1");
  EXPECT_EQ(s.modprobe[2].key, "NVreg_GrdmaPciTopoCheckOverride");
  EXPECT_EQ(s.modprobe[2].line, 4);  // the continued line starts at line 4
  EXPECT_EQ(s.modprobe[3].key, "(blacklist)");
}

TEST(StackParse, KernelLogKinds) {
  StackState s;
  parse_kernel_log(
      "6,1234,5678,-;nvidia_peermem: disagrees about version of symbol ib_register_peer_memory_client\n"
      " SUBSYSTEM=module\n"
      "3,1235,5679,-;nvidia_peermem: Unknown symbol ib_register_peer_memory_client (err -22)\n"
      "[  12.5] nv_peer_mem: Unknown symbol ib_register_peer_memory_client (err -2)\n"
      "[  13.0] failing symbol_get of non-GPLONLY symbol ib_register_peer_memory_client.\n"
      "[  14.0] NVRM: dma-buf attach failed: topology not supported for mapping type FORCE_PCIE\n"
      "[  15.0] mlx5_core 0000:04:00.0: firmware version: 28.39.1002\n"
      "[  16.0] somemod: Unknown symbol foo_bar (err -2)\n",
      s);
  ASSERT_EQ(s.log_causes.size(), 4u);
  EXPECT_EQ(s.log_causes[0].kind, "symbol-version");
  EXPECT_EQ(s.log_causes[0].module, "nvidia_peermem");
  EXPECT_EQ(s.log_causes[1].kind, "unknown-symbol");
  EXPECT_EQ(s.log_causes[1].module, "nv_peer_mem");
  EXPECT_EQ(s.log_causes[2].kind, "gpl-symbol-get");
  EXPECT_EQ(s.log_causes[3].kind, "dmabuf-attach");
  EXPECT_EQ(s.kernel_log.size(), 4u);  // the err -22 line repeats the mismatch above it: not kept
}

}  // namespace
}  // namespace gdrpeer::topo

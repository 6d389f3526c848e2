"""The bugs `make test-mutants` plants, one at a time (tests/mutation/run.py).

Each is a small change a reviewer could miss, that changes what gdrpeer says on real input.
`old` must occur exactly once in `file` (else the run fails: update the mutant with the code);
`tests` are the GoogleTest binaries run in order (optionally "binary:filter"), stopping at the
first failure. Fast, relevant ones only: the whole list must run in 10 minutes on 2 cores, so
mutants live in .cpp files (a header change recompiles every file that includes it).
"""

from dataclasses import dataclass, field
from typing import List

CLASSIFY = "userspace/topo/src/classify.cpp"
RULES = "userspace/topo/src/rules.cpp"
RULES_SOFTWARE = "userspace/topo/src/rules_software.cpp"
RULES_FINDINGS = "userspace/topo/src/rules_findings.cpp"
SYSFS = "userspace/topo/src/parse_sysfs.cpp"
SYSFS_PCI = "userspace/topo/src/sysfs_pci.cpp"
LSPCI = "userspace/topo/src/parse_lspci.cpp"
HWLOC = "userspace/topo/src/parse_hwloc.cpp"
NCCL = "userspace/topo/src/parse_nccl.cpp"
RULE_DATA = "userspace/topo/src/rule_data.cpp"
RENDER = "userspace/topo/src/render.cpp"
LOOPBACK = "userspace/verify/loopback.cpp"
PATTERN = "userspace/verify/pattern.cpp"
ENGINE = "userspace/verify/engine.cpp"
LIB = "userspace/lib/gdrpeer.cpp"
NVML_PROBE = "userspace/topo/src/nvml_probe.cpp"
NODE_CAPTURE = "userspace/topo/src/node_capture.cpp"
P2P = "userspace/verify/p2p.cpp"
CUDA_PROBE = "userspace/topo/src/cuda_probe.cpp"
STACK_GATE = "userspace/topo/src/stack_gate.cpp"
STACK_READ = "userspace/topo/src/stack_read.cpp"
READINESS_STAGE = "userspace/topo/src/readiness_stage.cpp"
READINESS_IBGDA = "userspace/topo/src/readiness_ibgda.cpp"
READINESS_READ = "userspace/topo/src/readiness_read.cpp"
NODE_VERDICT = "userspace/topo/src/node_verdict.cpp"
ARCHIVE = "userspace/topo/src/archive.cpp"

TOPO = ["test_topo_truth", "test_topo"]
VERIFY = ["test_verify_fake_nic", "test_verify"]
LIBT = ["test_lib"]
STACK = ["test_stack"]
READINESS = ["test_readiness"]


@dataclass
class Mutant:
    id: str
    file: str
    old: str
    new: str
    tests: List[str] = field(default_factory=list)
    why: str = ""


MUTANTS = [
    # ---- classification ---------------------------------------------------------------------
    Mutant("classify-ignores-b-side", CLASSIFY,
           "for (int x : p.ports_b) one = one && unit_of(t, k, x) == unit;", "",
           TOPO, "a switch below the second device does not count: PXB read as PIX"),
    Mutant("classify-ignores-a-side", CLASSIFY,
           "for (int x : p.ports_a) one = one && unit_of(t, k, x) == unit;", "",
           TOPO, "a switch below the first device does not count: PXB read as PIX"),
    Mutant("classify-unknown-numa-is-sys", CLASSIFY,
           "if (na >= 0 && nb >= 0 && na != nb) {", "if (na != nb) {",
           TOPO, "one device of unknown NUMA node makes the pair SYS"),
    Mutant("classify-numa-guess-needs-both", CLASSIFY,
           "p.numa_guessed = (na < 0 || nb < 0) && t.numa_nodes != 1;",
           "p.numa_guessed = (na < 0 && nb < 0) && t.numa_nodes != 1;",
           TOPO, "NODE with one unknown NUMA node is not flagged as a guess"),
    Mutant("classify-nccl-gdr-up-to-phb", CLASSIFY,
           "p.nccl_gdr = p.cls == PathClass::PIX || p.cls == PathClass::PXB;",
           "p.nccl_gdr = p.cls == PathClass::PIX || p.cls == PathClass::PXB || p.cls == PathClass::PHB;",
           TOPO, "NCCL's default GDR level taken as PHB instead of PXB"),
    Mutant("classify-nccl-gdr-pix-only", CLASSIFY,
           "p.nccl_gdr = p.cls == PathClass::PIX || p.cls == PathClass::PXB;",
           "p.nccl_gdr = p.cls == PathClass::PIX;",
           TOPO, "NCCL's default GDR level taken as PIX"),
    Mutant("classify-sys-is-root-complex-case", CLASSIFY,
           "case PathClass::SYS: p.cuda = CudaCase::CpuInterconnect; break;",
           "case PathClass::SYS: p.cuda = CudaCase::RootComplex; break;",
           TOPO, "CUDA's cross-socket case reported as the root-complex case"),
    Mutant("classify-meeting-point-on-path", CLASSIFY,
           "--ia;  // loop advanced past the match", "",
           TOPO, "the meeting bridge is counted as a port of the first device's side"),
    Mutant("classify-flatten-any-outer-switch", CLASSIFY,
           "if (outer.port != PortType::SwitchUpstream || !k.flattens(outer)) break;",
           "if (outer.port != PortType::SwitchUpstream) break;",
           TOPO, "a Broadcom switch under any other switch is flattened into it"),
    Mutant("classify-no-host-bridge-is-node", CLASSIFY,
           "      p.cls = PathClass::PHB;\n", "      p.cls = PathClass::NODE;\n",
           TOPO, "two root ports of one host bridge read as NODE"),
    # ---- rules ------------------------------------------------------------------------------
    Mutant("acs-request-redirect-only", RULES,
           "(d.acs_ctl & acs::kRedirectMask)", "(d.acs_ctl & acs::kRequestRedirect)",
           TOPO, "only ReqRedir redirects: CmpltRedir or EgressCtrl alone read as optimal"),
    Mutant("acs-pix-only", RULES,
           "if (p.cls != PathClass::PIX && p.cls != PathClass::PXB) return;  // traffic goes up anyway",
           "if (p.cls != PathClass::PIX) return;",
           TOPO, "ACS is not judged on PXB paths"),
    Mutant("acs-first-side-only", RULES,
           "for (const std::vector<int>* side : {&p.ports_a, &p.ports_b})",
           "for (const std::vector<int>* side : {&p.ports_a})",
           TOPO, "ACS on the NIC's side of the path is not looked at"),
    Mutant("iommu-rule-dma-only", RULES,
           'if (ty.rfind("DMA", 0) != 0) return;', 'if (ty != "DMA") return;',
           TOPO, "DMA-FQ groups (6.x kernels) are not translating"),
    Mutant("iommu-rule-first-device-only", RULES,
           "    iommu_rules(r, b);\n", "",
           TOPO, "a translating group of the pair's second device is not reported"),
    Mutant("path-phb-gdr-on", RULES,
           "if (p.cls == PathClass::PIX || p.cls == PathClass::PXB) return;\n    if (grace_",
           "if (p.cls == PathClass::PIX || p.cls == PathClass::PXB || p.cls == PathClass::PHB) return;\n    if (grace_",
           TOPO, "PHB pairs get no root-complex finding: degraded read as optimal"),
    Mutant("sys-unsupported-only-degraded", RULES,
           "v = kind == PairKind::GpuGpu ? Verdict::Blocked : Verdict::Unreliable;",
           "v = kind == PairKind::GpuGpu ? Verdict::Blocked : Verdict::Degraded;",
           TOPO, "a CPU that does not carry P2P across sockets only degrades GPU-NIC pairs"),
    Mutant("root-complex-poor-degraded", RULES,
           'add(out, "path-root-complex", Verdict::Unreliable,', 'add(out, "path-root-complex", Verdict::Degraded,',
           TOPO, "a poor root complex only degrades"),
    Mutant("phb-peers-degraded-on-good-root-complex", RULES,
           '} else if (rcq != "good") {', "} else {",
           TOPO, "GPU-GPU and GPU-NVMe pairs through a good root complex read as degraded"),
    Mutant("sys-fix-for-the-wrong-pair-kind", RULES,
           "} else if (kind == PairKind::GpuGpu) {", "} else if (kind == PairKind::GpuNvme) {",
           TOPO, "cross-socket GPU-GPU pairs get the NVMe fix and NVMe pairs the GPU-GPU one"),
    Mutant("link-width-ignores-slot", RULES,
           "if (up->link_cap.width > 0) want_w = std::min(want_w, up->link_cap.width);", "",
           TOPO, "a x16 card in a x8 slot reads as downtrained"),
    Mutant("software-ignores-mofed-peers", RULES_SOFTWARE,
           'registered = registered || c.name != "nvidia-fs";', 'registered = registered || c.name.empty();',
           TOPO, "MOFED's memory_peers clients are not peer-memory clients"),
    Mutant("software-loaded-counts-as-registered", RULES_SOFTWARE,
           "bool peer = registered || (loaded && !sw.memory_peers_dir);", "bool peer = registered || loaded;",
           ["test_topo_truth", "test_topo"], "a loaded nvidia_peermem that registered no client counts (NVIDIA/nccl #1939)"),
    Mutant("software-dmabuf-kernel-5-2", RULES_SOFTWARE,
           "kernel_at_least(sw.kernel_release, 5, 12)", "kernel_at_least(sw.kernel_release, 5, 2)",
           TOPO, "dma-buf import assumed on kernels before 5.12"),
    Mutant("skip-groups-ignored", RULES_FINDINGS,
           "o.skip.count(std::string(rule.substr(0, dash)))",
           "o.skip.count(std::string(rule))",
           TOPO, "--skip acs (a rule group) silences nothing"),
    # ---- parsers ----------------------------------------------------------------------------
    Mutant("sysfs-dma-fq-not-translating", SYSFS,
           'else if (ty.rfind("DMA", 0) == 0)\n        translating = true;',
           'else if (ty == "DMA")\n        translating = true;',
           TOPO, "IOMMU mode: DMA-FQ groups not counted as translating"),
    Mutant("sysfs-mixed-called-translating", SYSFS,
           "t.iommu = translating && identity ? IommuMode::Mixed\n",
           "t.iommu = translating && identity ? IommuMode::Translating\n",
           TOPO, "IOMMU mode: DMA + identity groups labelled translating"),
    Mutant("sysfs-first-extended-cap-only", SYSFS_PCI,
           "off = (h >> 20) & 0xffc;", "off = 0;",
           TOPO, "ACS found only when it is the first extended capability"),
    Mutant("sysfs-prefetchable-from-memory-bit", SYSFS_PCI,
           "b.prefetchable = (flags & 0x2000) != 0;", "b.prefetchable = (flags & 0x200) != 0;",
           TOPO, "every memory BAR reads as prefetchable"),
    Mutant("lspci-cmpltredir-ignored", LSPCI,
           '{"CmpltRedir", acs::kCompletionRedirect}', '{"CmpltRedir", 0}',
           TOPO, "lspci's CmpltRedir+ is read as no bit"),
    Mutant("lspci-acs-plus-minus", LSPCI,
           "if (tok.back() == '+') bits |= b;", "if (tok.back() != '-' || key == \"SrcValid\") bits |= b;",
           TOPO, "lspci's SrcValid- is read as set"),
    Mutant("hwloc-host-bridge-numa-dropped", HWLOC,
           "if (numa >= 0) t.host_bridges[f.host_bridge].numa = numa;",
           "if (numa >= 0) t.host_bridges[f.host_bridge].numa = -1;",
           TOPO, "hwloc host bridges lose their NUMA node: SYS pairs read as NODE"),
    Mutant("nccl-numaid-ignored", NCCL,
           "long n = numaid.empty() ? cpus : std::strtol(numaid.c_str(), &end, 10);",
           "long n = numaid.empty() ? cpus : (std::strtol(numaid.c_str(), &end, 10), 0);",
           TOPO, "NCCL XML <cpu numaid> read as 0: every pair across CPUs is NODE"),
    Mutant("roles-nic-any-class", RULE_DATA,
           "if (nic && d.class_known && !network_class) nic = false;", "",
           TOPO, "BlueField DMA/bridge functions become RDMA NICs"),
    # ---- IBGDA / GDS readiness (issue 27) ---------------------------------------------------
    Mutant("ibgda-regkey-ignored", READINESS_STAGE,
           "return v < 0 ? -1 : v != 0 ? 1 : 2;", "return v < 0 ? -1 : 1;",
           READINESS, "every node with params read is gpu-initiated: PeerMappingOverride unset no longer costs the doorbell"),
    Mutant("ibgda-atomics-ignored", READINESS_IBGDA,
           "  if (f.atomics == 0)", "  if (false && f.atomics == 0)",
           READINESS, "a NIC without masked atomics, which NVSHMEM skips, is said to run IBGDA"),
    Mutant("gds-p2pdma-any-value", READINESS_STAGE,
           'kconfig_value(in.kconfig, "CONFIG_PCI_P2PDMA") == "y" ? 1 : 0;', 'kconfig_value(in.kconfig, "CONFIG_PCI_P2PDMA") != "" ? 1 : 0;',
           READINESS, "'# CONFIG_PCI_P2PDMA is not set' counts as built in: Debian kernels get P2PDMA mode"),
    Mutant("kconfig-not-set-dropped", READINESS_READ,
           '      value = "n";', "      continue;",
           READINESS, "options the configuration says are not set read as absent"),
    # ---- outputs ----------------------------------------------------------------------------
    Mutant("nvml-inactive-links-count", NVML_PROBE,
           "      if (!l.active) continue;\n", "",
           ["test_nvlink_nvml"], "NVML links that are down counted as NVLinks"),
    Mutant("unknown-nvlink-flat-virtual-unreliable", RULES,
           "if (flat && kind == PairKind::GpuGpu && !t_.nvlink_known", "if (false && flat && kind == PairKind::GpuGpu && !t_.nvlink_known",
           ["test_node_capture"], "two NVIDIA GPUs on a VM's flat bus with NVLink unknown called unreliable"),
    Mutant("snapshot-drops-nvml", NODE_CAPTURE,
           "    s.entries.push_back({TarEntry::Type::File, std::string(kSnapshotNvmlPath).substr(1), nvml_record_text(nvml)});", "",
           ["test_node_capture"], "a snapshot that checks differently from the live node (NVLink lost)"),
    Mutant("p2p-staged-rate-counts-as-peer", P2P,
           "const bool faster_than_staged = peer && m.uni_gbps_peer > 1.2 * m.uni_gbps_staged;", "const bool faster_than_staged = peer;",
           ["test_verify_p2p"], "verify --p2p agrees with check when peer copies run only at the staged rate"),
    Mutant("render-json-gdr-beyond-pxb", RENDER,
           'j.key("nccl_gdr_default").value(p.path.nccl_gdr);',
           'j.key("nccl_gdr_default").value(p.path.cls != PathClass::SYS);',
           TOPO, "JSON says NCCL's GDR is on for PHB and NODE pairs"),
    Mutant("render-text-gdr-pix-only", RENDER,
           'pad(p.path.nccl_gdr ? "on" : "off", 10)', 'pad(p.path.cls == PathClass::PIX ? "on" : "off", 10)',
           TOPO, "the text table says NCCL's GDR is off for PXB pairs"),
    # ---- node verdict and archives (issue 25) ------------------------------------------------
    Mutant("node-verdict-worst-nic", NODE_VERDICT,
           "if (!best || p.verdict < best->verdict ||", "if (!best || p.verdict > best->verdict ||",
           TOPO, "each GPU judged by its worst NIC, not its best (NCCL binds the closest)"),
    Mutant("node-verdict-nothing-checked-optimal", NODE_VERDICT,
           "  if (!missing.empty()) {\n    n.incomplete = true;", "  if (false) {\n    n.incomplete = true;",
           ["test_topo_truth"], "a node with no GPU or no NIC comes out optimal"),
    Mutant("tar-symlinks-dropped", ARCHIVE,
           "    } else if (type == AE_IFLNK) {", "    } else if (false) {",
           ["test_topo"], "symlinks of a snapshot are not read (sysfs devices are links)"),
    # ---- verify -----------------------------------------------------------------------------
    Mutant("verify-read-compares-source", LOOPBACK,
           'compare("RDMA READ", dst, pattern.data(), n)', 'compare("RDMA READ", src, pattern.data(), n)',
           VERIFY, "RDMA READ checks the buffer it read from, not the one it read into"),
    Mutant("verify-write-not-read-back", LOOPBACK,
           'res.transfers.push_back(compare("RDMA WRITE", scratch.data(), pattern.data(), n));',
           'res.transfers.push_back(compare("RDMA WRITE", src, pattern.data(), n));',
           VERIFY, "RDMA WRITE checks the source buffer, not the target"),
    Mutant("verify-compare-skips-last-byte", PATTERN,
           "for (size_t i = 0; i < n; ++i)\n    if (got[i] != want[i]) {",
           "for (size_t i = 0; i + 1 < n; ++i)\n    if (got[i] != want[i]) {",
           VERIFY, "the last byte of every transfer is not compared"),
    Mutant("verify-any-transfer-ok-passes", LOOPBACK,
           "const bool all_ok = std::all_of(", "const bool all_ok = std::any_of(",
           VERIFY, "one good transfer out of three is a pass"),
    Mutant("verify-unexpected-errno-unsupported", LOOPBACK,
           "  return {Outcome::fail, what};\n}", "  return {Outcome::unsupported, what};\n}",
           VERIFY, "an unexpected registration errno reads as unsupported"),
    Mutant("verify-dmabuf-any-errno-unsupported", LOOPBACK,
           "if (err == EOPNOTSUPP || err == ENOSYS || err == EPROTONOSUPPORT) {",
           "if (err != 0) {",
           VERIFY, "every dma-buf registration errno reads as unsupported"),
    Mutant("verify-bad-completion-ignored", LOOPBACK,
           "if (wc[i].status != IBV_WC_SUCCESS)", "if (wc[i].status == IBV_WC_FATAL_ERR)",
           VERIFY, "completions with an error status count as done"),
    Mutant("verify-target-not-remote-readable", LOOPBACK,
           "const int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;",
           "const int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;",
           VERIFY, "the memory under test is registered without remote read"),
    Mutant("verify-staging-not-local-writable", LOOPBACK,
           "api_.reg_mr(r_.pd, r_.local, 2 * n_, IBV_ACCESS_LOCAL_WRITE)", "api_.reg_mr(r_.pd, r_.local, 2 * n_, 0)",
           VERIFY, "the host staging buffer cannot be written by the NIC (RDMA READ lands there)"),
    Mutant("verify-dmabuf-offset-ignored", LOOPBACK,
           "api_.reg_dmabuf_mr(r_.pd, dmabuf->offset, n_,", "api_.reg_dmabuf_mr(r_.pd, 0, n_,",
           VERIFY, "dma-buf memory registered from the start of the dma-buf, not where the memory is"),
    Mutant("verify-exit-last-result-wins", ENGINE,
           "for (const auto& r : results) worst = std::max(worst, r.outcome);",
           "for (const auto& r : results) worst = r.outcome;",
           VERIFY, "the exit code reflects the last combination, not the worst"),
    # ---- the stack stage (issue 24) ---------------------------------------------------------
    Mutant("gate-override-before-coherent", STACK_GATE,
           'if (in.coherent == 1) return yes("coherent (NVLink-C2C) platform: the driver skips the PCIe topology check");',
           'if (in.coherent == 1 && in.override_value != 2) return yes("coherent");',
           STACK, "override 2 also denies the default dma-buf type on a coherent platform (the driver checks coherence first)"),
    Mutant("gate-pcie-ignores-iommu-group", STACK_GATE,
           "else if (in.same_iommu_group == 1)", "else if (in.same_iommu_group != -1)",
           STACK, "the PCIe mapping type allowed across IOMMU groups (the Azure GB200 524 case read as fine)"),
    Mutant("kmsg-crc-mismatch-is-missing-symbol", STACK_READ,
           '!contains(line, "(err -22)")', "true",
           STACK, "a symbol CRC mismatch also reported as 'OFED ib_core not loaded'"),
    Mutant("registry-dwords-do-not-override", STACK_READ,
           "if (r != registry_dwords.end()) return r->second;", "if (r != registry_dwords.end() && params.count(key) == 0) return r->second;",
           STACK, "RegistryDwords no longer override the static option they name (nv-reg.h says they do)"),
    # ---- libgdrpeer -------------------------------------------------------------------------
    Mutant("lib-range-wraps", LIB,
           "if (offset > size || length > size - offset)", "if (offset + length > size)",
           LIBT, "offset + length wrapping around 64 bits passes the range check"),
    Mutant("lib-bdf-function-two-digits", LIB,
           '"%04x:%02x:%02x.%x"', '"%04x:%02x:%02x.%02x"',
           LIBT, "PCI addresses printed as 0000:01:00.00"),
    Mutant("lib-provider-names-swapped", LIB,
           'case GDRPEER_PROVIDER_PCIBAR: return "pcibar";', 'case GDRPEER_PROVIDER_PCIBAR: return "nvidia";',
           LIBT, "the pcibar provider is called nvidia"),
    Mutant("lib-mmap-cap-is-dmabuf", LIB,
           "return (caps & GDRPEER_CAP_MMAP) != 0;", "return (caps & GDRPEER_CAP_DMABUF) != 0;",
           LIBT, "can_mmap() reads the dma-buf capability bit"),
    Mutant("lib-abi-minor-is-major", LIB,
           "std::to_string(GDRPEER_ABI_MINOR(v))", "std::to_string(GDRPEER_ABI_MAJOR(v))",
           LIBT, "ABI 1.2 printed as 1.1 (in the version-mismatch hint)"),
    Mutant("lib-describe-bytes-stops-at-gib", LIB,
           "while (i < 3 && n >= unit * 1024", "while (i < 2 && n >= unit * 1024",
           LIBT, "a 1 TiB BAR printed as 1024 GiB"),
]

// The lspci parser against pciutils' own definition of its output (issue 28: the generated
// operator mutants of parse_lspci.cpp). Every expectation follows from how lspci prints, cited
// per test from pciutils (github.com/pciutils/pciutils, master of 2025-12-28, 0f5b941):
//   ls-tree.c   show_tree_bridge / show_tree_bus / show_tree_dev: "-[dddd:bb]-", "+-", "\-",
//               "--" for a single child, "dd.f", "-[ss]-" or "-[ss-uu]-" after a bridge, "  name"
//               with -v, print_it's continuation columns ('+' and '|' become '|', the rest ' ');
//   lspci.c     show_terse "bb:dd.f class: vendor device (rev rr) (prog-if pp [name])",
//               show_verbose "\tNUMA node: %d", "\tIOMMU group: %s", show_bases
//               "\tRegion %d: Memory at ... (64-bit, prefetchable) [size=...]", show_size (the
//               largest of K/M/G/T that divides the size), show_htype1 "\tBus: primary=%02x,
//               secondary=%02x, subordinate=%02x, sec-latency=%d", show_kernel "\tKernel driver
//               in use: %s", -nn's " [cccc]" after the class and " [vvvv:dddd]" after the name;
//   ls-caps.c   cap_express "Express (v2) <port type>", "\t\tDevCap:\tMaxPayload %d bytes",
//               "\t\t\tMaxPayload %d bytes, MaxReadReq %d bytes", "\t\tLnkCap:\tPort #%d, Speed
//               %s, Width x%d", "\t\tLnkSta:\tSpeed %s%s, Width x%d%s", link_speed() ("2.5GT/s" ...
//               "unknown");
//   ls-ecaps.c  cap_acs "Access Control Services", "\t\tACSCap:\tSrcValid%c TransBlk%c ReqRedir%c
//               CmpltRedir%c UpstreamFwd%c EgressCtrl%c DirectTrans%c" (and ACSCtl), cap_ats
//               "Address Translation Service (ATS)", "\t\tATSCtl:\tEnable%c, ...".
// Real outputs come from tests/reference (sources in its README). Crafted text is used where the
// expected parse follows from those printf formats; malformed text must give an error naming
// the file and line (the project's rule: never a silent wrong answer).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <vector>

#include "gdrpeer/topo/errors.hpp"
#include "gdrpeer/topo/inputs.hpp"
#include "test_topo_support.hpp"

namespace gdrpeer::topo {
namespace {

using testing::reference;
using testing::slurp;

Topology parse(const std::string& text, const std::string& name = "in.txt") { return parse_lspci({{name, text}}); }

// "file:line: what" of the error parsing `text` gives, "" when it parses.
std::string error_of(const std::string& text, const std::string& name = "in.txt") {
  try {
    parse(text, name);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

long error_line(const std::string& text) {
  try {
    parse(text);
  } catch (const InputError& e) {
    return e.line();
  }
  return -1;
}

const Device& dev(const Topology& t, const std::string& bdf) {
  int i = t.find(bdf);
  if (i < 0) throw std::runtime_error("no device " + bdf);
  return t.devices[i];
}

int parent_of(const Topology& t, const std::string& bdf) { return dev(t, bdf).parent; }

bool has_note(const Topology& t, const std::string& part) {
  return std::any_of(t.notes.begin(), t.notes.end(), [&](const std::string& n) { return n.find(part) != std::string::npos; });
}

// A -vvv block of an H100 (lspci -nn form) with the fields the parser reads.
const std::string kGpuHeader = "01:00.0 3D controller [0302]: NVIDIA Corporation GH100 [H100 PCIe] [10de:2331] (rev a1)";

// lspci -t without -v (ls-tree.c prints no names): a root bus with a device, a bridge with one
// device behind it and a bridge with an empty secondary bus ("-[02]--").
const std::string kBareTree =
    "-[0000:00]-+-00.0\n"
    "           +-01.0-[01]----00.0\n"
    "           \\-02.0-[02]--\n";

void expect_bare_tree(const Topology& t) {
  ASSERT_EQ(t.devices.size(), 4u);
  const int rp1 = t.find("0000:00:01.0");
  EXPECT_EQ(parent_of(t, "0000:00:00.0"), -1);
  EXPECT_EQ(parent_of(t, "0000:00:01.0"), -1);
  EXPECT_EQ(parent_of(t, "0000:01:00.0"), rp1);
  EXPECT_EQ(parent_of(t, "0000:00:02.0"), -1);
  EXPECT_TRUE(dev(t, "0000:00:02.0").is_bridge);
  EXPECT_EQ(dev(t, "0000:00:02.0").secondary_bus, 2);
  EXPECT_TRUE(dev(t, "0000:00:02.0").children.empty());
  EXPECT_FALSE(dev(t, "0000:00:00.0").is_bridge);
}

// ---- lines ---------------------------------------------------------------------------------

TEST(TruthLspciLines, CrLfAndTrailingBlanksAreNoPartOfAValue) {
  // A dump saved on Windows (CRLF), one line converted twice ("\r\r\n"), a value with trailing
  // blanks: the values are lspci's, without the line-end bytes.
  const std::string vvv = kGpuHeader +
                          "\r\n"
                          "\tSubsystem: NVIDIA Corporation Device 1626\r\n"
                          "\tNUMA node: 1\r\n"
                          "\tIOMMU group: 23 \t\r\n"
                          "\tKernel driver in use: nvidia\r\r\n"
                          "\tKernel modules: nvidiafb, nouveau, nvidia\r\n";
  Topology t = parse(vvv);
  const Device& g = dev(t, "0000:01:00.0");
  EXPECT_EQ(g.numa, 1);
  EXPECT_EQ(g.iommu_group, 23);
  EXPECT_EQ(g.driver, "nvidia");
  EXPECT_EQ(g.name, "NVIDIA Corporation GH100 [H100 PCIe]");
  EXPECT_EQ(g.vendor, 0x10de);
  EXPECT_EQ(g.device, 0x2331);
  EXPECT_EQ(g.class_code, 0x030200u);
}

TEST(TruthLspciLines, CrLfTreeWithoutNamesReadsAsTheLfOne) {
  // lspci -t ends a leaf's line right after "dd.f" and an empty bridge's after "-[02]--".
  expect_bare_tree(parse(kBareTree));
  std::string crlf;
  for (char c : kBareTree) crlf += c == '\n' ? std::string("\r\n") : std::string(1, c);
  expect_bare_tree(parse(crlf));
}

TEST(TruthLspciLines, DetailsIndentedWithTabsOrSpacesAlike) {
  // lspci indents details with a tab; a paste often has the tab expanded to 8 spaces, or the
  // whole block indented by a document (4 spaces of its own).
  for (const std::string ind : {"\t", "        ", "\t  ", " "}) {
    SCOPED_TRACE("indent \"" + ind + "\"");
    Topology t = parse(kGpuHeader + "\n" + ind + "NUMA node: 3\n" + ind + "Kernel driver in use: nvidia\n");
    EXPECT_EQ(dev(t, "0000:01:00.0").numa, 3);
    EXPECT_EQ(dev(t, "0000:01:00.0").driver, "nvidia");
  }
  std::string doc;
  for (const char* l : {"    01:00.0 Ethernet controller: Mellanox Technologies MT2910 Family [ConnectX-7]", "            NUMA node: 1",
                        "            Kernel driver in use: mlx5_core"})
    doc += std::string(l) + "\n";
  Topology t = parse(doc);
  EXPECT_EQ(dev(t, "0000:01:00.0").numa, 1);
  EXPECT_EQ(dev(t, "0000:01:00.0").driver, "mlx5_core");
  EXPECT_EQ(dev(t, "0000:01:00.0").class_code, 0x020000u);
}

TEST(TruthLspciLines, LastLineWithoutNewlineIsReadAndReadingEnds) {
  // Text cut at the end of a line (no final newline) is whole: the last line counts. Run in a
  // child with a time and memory bound, so a reader that loops does not take the machine.
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    alarm(5);
#if !defined(__SANITIZE_ADDRESS__)
    struct rlimit lim {
      1ul << 30, 1ul << 30
    };
    setrlimit(RLIMIT_AS, &lim);
#endif
    int rc = 1;
    try {
      Topology t = parse(kGpuHeader + "\n\tNUMA node: 3");
      rc = dev(t, "0000:01:00.0").numa == 3 ? 0 : 2;
    } catch (...) {
      rc = 3;
    }
    _exit(rc);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status)) << "killed by signal " << (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  EXPECT_EQ(WIFEXITED(status) ? WEXITSTATUS(status) : -1, 0);
}

TEST(TruthLspciLines, ErrorsNameTheFileAndTheLineCountingEveryLine) {
  // Line 4 is the bad one whatever the line ends and empty lines before it.
  for (const std::string nl : {"\n", "\r\n"}) {
    const std::string text = "-[0000:00]-+-00.0  Intel Corporation Device 09a2" + nl + nl + "           +-01.0-[01]----00.0  X" + nl +
                             "           +-zz.0  Oops" + nl;
    EXPECT_EQ(error_line(text), 4);
    EXPECT_NE(error_of(text, "node.txt").find("node.txt:4: "), std::string::npos) << error_of(text, "node.txt");
  }
}

// ---- shell transcripts and markdown --------------------------------------------------------

// A small -tv tree: a root port 00:01.0 with a GPU behind it.
const std::string kTree =
    "-[0000:00]-+-00.0  Intel Corporation Device 09a2\n"
    "           \\-01.0-[01]----00.0  NVIDIA Corporation GH100 [H100 PCIe]\n";

void expect_small_tree(const Topology& t) {
  ASSERT_EQ(t.devices.size(), 3u);
  EXPECT_EQ(parent_of(t, "0000:01:00.0"), t.find("0000:00:01.0"));
  EXPECT_EQ(dev(t, "0000:01:00.0").name, "NVIDIA Corporation GH100 [H100 PCIe]");
}

TEST(TruthLspciTranscript, EveryShellPromptFormStartsTheCommandsOutput) {
  // The prompts shells print before a command: bash's default "\s-\v\$ ", Debian's
  // "\u@\h:\w\$ ", Fedora's "[\u@\h \W]\$ ", a bare "$ ", root's "#" forms; the line of prose
  // before the prompt is no lspci output.
  for (const std::string prompt :
       {"$ lspci -tv", "$ sudo lspci -tv", "bash-5.1$ lspci -tv", "user@gpu-node:~$ lspci -tv", "[user@gpu-node ~]$ sudo lspci -tv",
        "$ sonata@coyote2:~$ lspci -tv", "root@gpu-node:~# lspci -tv", "# lspci -tv", "gpu-node:~# lspci -tv", "root@gpu-node# lspci -tv",
        "(base) gpu node $$ lspci -tv", "[root@gpu-node ~]# lspci -tv", "[root@gpu-node nccl logs]# lspci -tv"}) {
    SCOPED_TRACE(prompt);
    Topology t = parse("Taken on the node after the reboot:\n" + prompt + "\n" + kTree);
    expect_small_tree(t);
  }
}

TEST(TruthLspciTranscript, ProseWithDollarOrHashIsNoPrompt) {
  // A markdown report (fenced blocks, no shell prompt): headings and prose that contain "$ " or
  // "# " are not prompts; the fenced tree is read.
  const std::string doc =
      "# GPU node report\n"
      "## lspci -tv of the node\n"
      "It costs 3 $ per hour.\n"
      " $ 2 per hour with a reservation.\n"
      "Note: as root # lspci -vvv shows more.\n"
      "gpu-admin@example.com\n"
      "./lspci# is the wrapper's comment marker.\n"
      "\n"
      "Note:# marks a comment in the config.\n"
      "```\n" +
      kTree + "```\n";
  Topology t = parse(doc);
  expect_small_tree(t);
  EXPECT_TRUE(has_note(t, "in.txt:1: 8 line(s) outside the markdown code fences")) << ::testing::PrintToString(t.notes);
}

TEST(TruthLspciTranscript, TheOptionsDecideTreeOrVerbose) {
  // -t anywhere in a short option cluster (-tv, -vt, -tvnn) is the tree; -vvv, -nn, -s bb:dd.f
  // and long options (--version) are the listing.
  for (const std::string cmd : {"lspci -t", "lspci -tv", "lspci -vt", "lspci -nntv", "lspci -D -tv", "/usr/bin/lspci -tv"}) {
    SCOPED_TRACE(cmd);
    expect_small_tree(parse("$ " + cmd + "\n" + kTree));
  }
  const std::string vvv = kGpuHeader + "\n\tNUMA node: 1\n";
  for (const std::string cmd : {"lspci -vvv", "lspci -nnvvv -s 01:00.0", "lspci -vvv -s 01:00.0", "lspci --verbose-tree -vvv", "lspci",
                                "sudo lspci -vv -d 10de:", "lspci -vvv -i /usr/share/hwdata/pci.ids", "lspci -vvv -"}) {
    SCOPED_TRACE(cmd);
    Topology t = parse("$ " + cmd + "\n" + vvv);
    EXPECT_EQ(dev(t, "0000:01:00.0").numa, 1);
  }
  // oc debug prints "Starting pod/..." right after the command line: not part of the command.
  Topology oc = parse("$ oc debug node/gpu-1 -- chroot /host lspci -vvv\nStarting pod/gpu-1-debug-5q8ms ...\n" + vvv);
  EXPECT_EQ(dev(oc, "0000:01:00.0").numa, 1);
  // A "-t" that is no option of lspci (inside a word or a path) does not make a tree.
  for (const std::string cmd : {"lspci-t -vvv", "lspci -vvv -s 01:00.0 x-t", "lspci --tree-like -vvv"}) {
    SCOPED_TRACE(cmd);
    Topology t = parse("$ " + cmd + "\n" + vvv);
    EXPECT_EQ(dev(t, "0000:01:00.0").numa, 1);
  }
}

TEST(TruthLspciTranscript, FilteredOrRedirectedOutputAndOtherCommandsAreSkipped) {
  // "| grep", "| head" or "> file" change the output's shape: what follows is not read. Other
  // commands' output is not lspci's either.
  const std::string other = kTree;
  for (const std::string cmd : {"lspci -tv | head -3", "lspci -tv > tree.txt", "nvidia-smi topo -m", "cat /proc/cpuinfo"}) {
    SCOPED_TRACE(cmd);
    const std::string text = "$ lspci -tv\n" + kTree + "$ " + cmd + "\n-[0000:40]-+-00.0  AMD Device 14a4\n";
    Topology t = parse(text);
    expect_small_tree(t);
    EXPECT_LT(t.find("0000:40:00.0"), 0);
  }
}

TEST(TruthLspciTranscript, NumactlAndLscpuOutputsGiveNodesAndCpu) {
  // numactl --hardware / -H prints "available: N nodes (0-N-1)"; lscpu prints "Key:  value".
  const std::string lscpu =
      "Architecture:             x86_64\n"
      "  CPU op-mode(s):         32-bit, 64-bit\n"
      "Vendor ID:                AuthenticAMD\n"
      "  Model name:             AMD EPYC 9654 96-Core Processor\n"
      "    CPU family:           25\n"
      "    Model:                17\n"
      "    Socket(s):            2\n"
      "Virtualization features:  \n"
      "  Hypervisor vendor:      KVM\n";
  for (const std::string numactl : {"numactl --hardware", "numactl -H", "sudo numactl -H"}) {
    SCOPED_TRACE(numactl);
    Topology t = parse("$ lspci -tv\n" + kTree + "$ " + numactl + "\navailable: 2 nodes (0-1)\nnode 0 cpus: 0 1\n$ lscpu\n" + lscpu);
    expect_small_tree(t);
    EXPECT_EQ(t.numa_nodes, 2);
    EXPECT_EQ(testing::cpu_fields(t.cpu), testing::CpuFields("x86_64", "AuthenticAMD", "AMD EPYC 9654 96-Core Processor", 25, 17, 2));
    EXPECT_TRUE(t.cpu.hypervisor);
  }
  // numactl's other modes, lscpu -e (a table) and lscpu without a hypervisor line.
  Topology t =
      parse("$ lspci -tv\n" + kTree +
            "$ numactl --show\navailable: 7 nodes (0-6)\n$ grep -H available: /tmp/notes\navailable: 5 nodes\n"
            "$ lscpu\nArchitecture:aarch64\nVendor ID: ARM\nModel: 1\nModel name: Neoverse-V2\nNUMA node(s): 1\nHypervisor vendor\n"
            "$ lscpu -e\nCPU NODE SOCKET\nModel: 99\n"
            "$ hostnamectl\n Static hostname: gpu-1\n  Virtualization: kvm\n    Architecture: x86-64\n");
  EXPECT_EQ(t.numa_nodes, 0);
  EXPECT_EQ(testing::cpu_fields(t.cpu), testing::CpuFields("aarch64", "ARM", "Neoverse-V2", -1, 1, 0));
  EXPECT_FALSE(t.cpu.hypervisor);
}

TEST(TruthLspciTranscript, FencesElisionsSudoAndToolLinesAroundTheOutput) {
  // What a paste adds around lspci's output: fences (their end closes the command's output),
  // "...", "[...]", "(...)", "…", sudo's password prompt, lspci's own warnings.
  const std::string text =
      "$ sudo lspci -tv\n"
      "[sudo] password for user: \n"
      "pcilib: Cannot open /sys/bus/pci/slots/1/address\n" +
      kTree.substr(0, kTree.find('\n') + 1) +
      "...\n"
      "[...]\n"
      "(...)\n"
      "\xe2\x80\xa6\n" +
      kTree.substr(kTree.find('\n') + 1) +
      "```\n"
      "-[0000:40]-+-00.0  AMD Device 14a4\n";
  Topology t = parse(text);
  expect_small_tree(t);
  EXPECT_LT(t.find("0000:40:00.0"), 0);
  EXPECT_TRUE(has_note(t, "in.txt:3: not lspci output, skipped: pcilib: Cannot open")) << ::testing::PrintToString(t.notes);
  // In the listing too; the fence ends the block, so a detail after it has no device.
  const std::string vvv = "$ sudo lspci -vvv\n[sudo] password for user: \n" + kGpuHeader +
                          "\n\t...\n\tNUMA node: 1\n\t[...]\n"
                          "lspci: Unable to load libkmod resources: error -2\n\tKernel driver in use: nvidia\n";
  Topology v = parse(vvv);
  EXPECT_EQ(dev(v, "0000:01:00.0").numa, 1);
  EXPECT_EQ(dev(v, "0000:01:00.0").driver, "nvidia");
  EXPECT_TRUE(has_note(v, "in.txt:7: not lspci output, skipped: lspci: Unable")) << ::testing::PrintToString(v.notes);
  const std::string fenced = "```\n$ sudo lspci -vvv\n" + kGpuHeader + "\n```\n\tNUMA node: 1\n";
  EXPECT_EQ(dev(parse(fenced), "0000:01:00.0").numa, -1);
}

TEST(TruthLspciTranscript, SudosPromptAndBlankLinesNeedNoNote) {
  // sudo's password prompt is the shell's, not lspci's: skipped without a note, in the tree's
  // output and in the listing's; blank lines (spaces, a tab) are no tree lines; a line of only the
  // continuation bars of a cut tree carries no device.
  const std::string first = kTree.substr(0, kTree.find('\n') + 1), rest = kTree.substr(kTree.find('\n') + 1);
  Topology t = parse("$ sudo lspci -tv\n[sudo] password for user: \n\t\n   \n" + first + "           |\n" + rest);
  expect_small_tree(t);
  EXPECT_TRUE(t.notes.empty()) << ::testing::PrintToString(t.notes);
  Topology v = parse("$ sudo lspci -vvv\n[sudo] password for user: \n \t \n" + kGpuHeader + "\n\tNUMA node: 1\n\n" +
                     "02:00.0 Ethernet controller: Mellanox Technologies MT2910 Family [ConnectX-7]\n\tNUMA node: 0\n");
  EXPECT_EQ(dev(v, "0000:01:00.0").numa, 1);
  EXPECT_EQ(dev(v, "0000:02:00.0").numa, 0);
  EXPECT_TRUE(v.notes.empty()) << ::testing::PrintToString(v.notes);
  expect_small_tree(parse(first + "           |\n" + rest));
}

TEST(TruthLspciTranscript, ToolNoiseOnlyInsideLspciOutput) {
  // "word: text" lines are lspci's neighbours' only inside its output; in numactl's or lscpu's
  // they are theirs ("Model name: ..." is lscpu's own line, "available: ..." numactl's).
  Topology t = parse("$ lscpu\nArchitecture: x86_64\n$ numactl -H\navailable: 4 nodes (0-3)\n$ lspci -tv\n" + kTree);
  EXPECT_EQ(t.cpu.arch, "x86_64");
  EXPECT_EQ(t.numa_nodes, 4);
  EXPECT_TRUE(t.notes.empty()) << ::testing::PrintToString(t.notes);
}

TEST(TruthLspciPlain, ToolLinesAreSkippedWithANoteAndOtherTextIsAnError) {
  // "word: text" (a tool's message: apt's "W: ", su's "Password: ", daemons with '-' or '_' in
  // their names) is skipped with a note naming the line; text of no such shape is an error, as is
  // a header whose address is hex-looking but broken.
  for (const std::string l :
       {"W: Some index files failed to download.", "Password: ", "nvidia-persistenced: device 0000:01:00.0 - persistence mode enabled.",
        "nv_peer_mem: peer memory client registered", "pcilib: Cannot open /proc/bus/pci"}) {
    SCOPED_TRACE(l);
    Topology t = parse(l + "\n" + kTree);
    expect_small_tree(t);
    const std::string shown = l.back() == ' ' ? l.substr(0, l.size() - 1) : l;
    EXPECT_TRUE(has_note(t, "in.txt:1: not lspci output, skipped: " + shown)) << ::testing::PrintToString(t.notes);
  }
  for (const std::string l : {"Done, rebooting now", "ab: Ethernet controller: Intel Corporation I350",
                              "gg:00.0 Ethernet controller: Intel Corporation I350", "Warning:"}) {
    SCOPED_TRACE(l);
    const std::string e = error_of(kTree + l + "\n");
    EXPECT_NE(e.find("in.txt:3: expected"), std::string::npos) << e;
  }
  // Only tool lines: no device, and the error says so.
  const std::string e = error_of("pcilib: Cannot open /proc/bus/pci\n");
  EXPECT_NE(e.find("in.txt: expected lspci -tv or lspci -vvv output, found no PCI device"), std::string::npos) << e;
}

TEST(TruthLspciPlain, AnIndentedBlockLosesTheIndentationItsLinesShare) {
  // A listing pasted into a document indented by 4 spaces: elisions, fences, blank lines and tool
  // lines at the margin do not count for the shared indentation.
  const std::string body = "    " + kGpuHeader + "\n            NUMA node: 2\n";
  for (const std::string extra : {"...\n", "[...]\n", "(...)\n", "\xe2\x80\xa6\n", "\n", "pcilib: Cannot open /proc/bus/pci\n"}) {
    SCOPED_TRACE(extra);
    Topology t = parse(extra + body + extra);
    EXPECT_EQ(dev(t, "0000:01:00.0").numa, 2);
  }
  Topology f = parse("```\n" + body + "```\n");
  EXPECT_EQ(dev(f, "0000:01:00.0").numa, 2);
  // A tree in plain text with elisions at the margin.
  for (const std::string el : {"...", "[...]", "(...)", "\xe2\x80\xa6"}) {
    SCOPED_TRACE(el);
    expect_small_tree(parse(kTree.substr(0, kTree.find('\n') + 1) + el + "\n" + kTree.substr(kTree.find('\n') + 1)));
  }
}

TEST(TruthLspciPlain, ProseAroundFencesIsCountedOnceFromItsFirstLine) {
  // Lines outside the fences are prose: counted (blank ones not), the note names the first.
  Topology t = parse("\nSome notes on the node.\n\nMore notes.\n```\n" + kTree + "```\n\nThe end.\n");
  expect_small_tree(t);
  EXPECT_TRUE(has_note(t, "in.txt:2: 3 line(s) outside the markdown code fences")) << ::testing::PrintToString(t.notes);
  Topology clean = parse("```\n" + kTree + "```\n");
  EXPECT_TRUE(clean.notes.empty()) << ::testing::PrintToString(clean.notes);
}

TEST(TruthLspciTranscript, KubectlAndOcDebugPodLinesAreSkipped) {
  for (const std::string l :
       {"Creating debugging pod node-debugger-gpu-1-x7k2p with container debugger on node gpu-1.", "Starting pod/gpu-1-debug-5q8ms ...",
        "To use host binaries, run `chroot /host`", "Removing debug pod ...", "If you don't see a command prompt, try pressing enter."}) {
    SCOPED_TRACE(l);
    Topology t = parse("$ kubectl debug node/gpu-1 -it --image=ubuntu -- lspci -tv\n" + l + "\n" + kTree);
    expect_small_tree(t);
    Topology p = parse(l + "\n" + kTree);
    expect_small_tree(p);
  }
}

// ---- the tree (ls-tree.c) -----------------------------------------------------------------

TEST(TruthLspciTree, HolohubIgxOrinEveryDeviceUnderItsBridge) {
  // The real `lspci -tv` of an IGX Orin (tests/reference/holohub-igx-orin-lspci-tv.txt): five
  // domains, the first line "-+-[0007:00]-" (several root buses), "+-[0005:00]-", the last
  // "\-[0000:00]-" (a root bus with nothing on it); "---" a single child, "--+-" several, "-[06]--"
  // a bridge with an empty secondary bus.
  Topology t = parse(slurp(reference("holohub-igx-orin-lspci-tv.txt")), "igx.txt");
  ASSERT_EQ(t.devices.size(), 31u);
  struct Row {
    const char *bdf, *parent;
    int secondary;  // -1: no bridge
  };
  const Row rows[] = {
      {"0007:00:00.0", nullptr, 0x01},        {"0007:01:00.0", "0007:00:00.0", -1},   {"0005:00:00.0", nullptr, 0x01},
      {"0005:01:00.0", "0005:00:00.0", 0x02}, {"0005:02:00.0", "0005:01:00.0", 0x03}, {"0005:03:00.0", "0005:02:00.0", -1},
      {"0005:03:00.1", "0005:02:00.0", -1},   {"0005:02:01.0", "0005:01:00.0", 0x04}, {"0005:04:00.0", "0005:02:01.0", 0x05},
      {"0005:05:08.0", "0005:04:00.0", 0x06}, {"0005:02:02.0", "0005:01:00.0", 0x07}, {"0005:07:00.0", "0005:02:02.0", 0x08},
      {"0005:08:00.0", "0005:07:00.0", 0x09}, {"0005:09:00.0", "0005:08:00.0", -1},   {"0005:09:00.1", "0005:08:00.0", -1},
      {"0004:00:00.0", nullptr, 0x01},        {"0004:01:00.0", "0004:00:00.0", -1},   {"0001:00:00.0", nullptr, 0x01},
      {"0001:01:00.0", "0001:00:00.0", 0x02}, {"0001:02:01.0", "0001:01:00.0", 0x03}, {"0001:03:00.0", "0001:02:01.0", -1},
      {"0001:02:02.0", "0001:01:00.0", 0x35}, {"0001:35:00.0", "0001:02:02.0", -1},   {"0001:02:03.0", "0001:01:00.0", 0x67},
      {"0001:67:00.0", "0001:02:03.0", -1},   {"0001:02:04.0", "0001:01:00.0", 0x99}, {"0001:99:00.0", "0001:02:04.0", 0x9a},
      {"0001:9a:00.0", "0001:99:00.0", -1},   {"0001:9a:02.0", "0001:99:00.0", -1},   {"0001:02:05.0", "0001:01:00.0", 0xcb},
      {"0001:cb:00.0", "0001:02:05.0", -1},
  };
  for (const Row& r : rows) {
    SCOPED_TRACE(r.bdf);
    const Device& d = dev(t, r.bdf);
    EXPECT_EQ(d.parent, r.parent ? t.find(r.parent) : -1);
    EXPECT_EQ(d.is_bridge, r.secondary >= 0);
    EXPECT_EQ(d.secondary_bus, r.secondary);
    // Each device belongs to the root bus of its domain.
    ASSERT_GE(d.host_bridge, 0);
    EXPECT_EQ(t.host_bridges[d.host_bridge].name, std::string(r.bdf).substr(0, 4) + ":00");
  }
  std::vector<std::string> roots;
  for (const auto& h : t.host_bridges) roots.push_back(h.name);
  EXPECT_EQ(roots, (std::vector<std::string>{"0007:00", "0005:00", "0004:00", "0001:00", "0000:00"}));
  EXPECT_EQ(dev(t, "0005:09:00.0").name, "NVIDIA Corporation GA102GL [RTX A6000]");
  // No vendor in pci.ids: lspci prints "Device vvvv:dddd" (lib/names.c format_name_pair), the ids.
  EXPECT_EQ(dev(t, "0001:67:00.0").name, "Device 1c00:3450");
  EXPECT_TRUE(dev(t, "0001:67:00.0").ids_known);
  EXPECT_EQ(dev(t, "0001:67:00.0").vendor, 0x1c00);
  EXPECT_EQ(dev(t, "0001:67:00.0").device, 0x3450);
  EXPECT_EQ(dev(t, "0007:01:00.0").name, "Marvell Technology Group Ltd. 88SE9235 PCIe 2.0 x2 4-port SATA 6 Gb/s Controller");
  EXPECT_TRUE(t.notes.empty()) << ::testing::PrintToString(t.notes);
}

TEST(TruthLspciTree, RootBusWithOneDeviceOrNoneAndEveryFunctionNumber) {
  // show_tree_bus: one device is "--" + "dd.f", so a root bus with one device reads
  // "-[0000:00]---00.0"; several are "+-" ... "\-"; function numbers 0-7, device numbers 00-1f.
  Topology one = parse("-[0000:00]---00.0  Intel Corporation Device 09a2\n");
  ASSERT_EQ(one.devices.size(), 1u);
  EXPECT_EQ(one.devices[0].bdf, "0000:00:00.0");
  EXPECT_EQ(one.devices[0].name, "Intel Corporation Device 09a2");
  std::string tree = "-[0000:3a]-+-00.0  Intel Corporation Device 09a2\n";
  for (int f = 1; f <= 7; ++f) tree += "           +-1f." + std::to_string(f) + "  Intel Corporation Device 0998\n";
  tree += "           \\-1e.0-[ff]----00.0  NVIDIA Corporation Device 2335\n";
  Topology t = parse(tree);
  ASSERT_EQ(t.devices.size(), 10u);
  for (int f = 1; f <= 7; ++f) EXPECT_EQ(parent_of(t, "0000:3a:1f." + std::to_string(f)), -1);
  EXPECT_EQ(dev(t, "0000:3a:1e.0").secondary_bus, 0xff);
  EXPECT_EQ(parent_of(t, "0000:ff:00.0"), t.find("0000:3a:1e.0"));
  EXPECT_EQ(t.host_bridges[dev(t, "0000:ff:00.0").host_bridge].name, "0000:3a");
  // A bare root line: a root bus with no device; no device at all is an error.
  EXPECT_NE(error_of("-[0000:00]-\n").find("in.txt: expected lspci -tv or lspci -vvv output, found no PCI device"), std::string::npos);
}

TEST(TruthLspciTree, BridgeRangesAndMultiDigitBuses) {
  // "-[ss]-" when secondary == subordinate, "-[ss-uu]-" otherwise (show_tree_dev, "%02x").
  const std::string tree =
      "-[0000:00]-+-01.0-[01-3f]----00.0-[02-3f]--+-00.0-[03]----00.0  Mellanox Technologies MT2910 Family [ConnectX-7]\n"
      "           |                               \\-10.0-[3f]----00.0  NVIDIA Corporation GH100 [H100 SXM5 80GB]\n"
      "           \\-02.0-[40]--\n";
  Topology t = parse(tree);
  ASSERT_EQ(t.devices.size(), 7u);
  EXPECT_EQ(dev(t, "0000:00:01.0").secondary_bus, 0x01);
  EXPECT_EQ(dev(t, "0000:01:00.0").secondary_bus, 0x02);
  EXPECT_EQ(dev(t, "0000:02:10.0").secondary_bus, 0x3f);
  EXPECT_EQ(parent_of(t, "0000:02:10.0"), t.find("0000:01:00.0"));
  EXPECT_EQ(parent_of(t, "0000:3f:00.0"), t.find("0000:02:10.0"));
  EXPECT_EQ(parent_of(t, "0000:03:00.0"), t.find("0000:02:00.0"));
  EXPECT_EQ(dev(t, "0000:00:02.0").secondary_bus, 0x40);
}

TEST(TruthLspciTree, MalformedTreeLinesAreErrorsWithTheirLine) {
  // Anything ls-tree.c cannot print is an error on its line, never a guess.
  const std::string top = "-[0000:00]-+-00.0  Intel Corporation Device 09a2\n";
  struct Case {
    std::string line, why;
  };
  const Case cases[] = {
      {"           +-zz.0  Oops", "expected a device \"dd.f\""},
      {"           +-0", "expected a device \"dd.f\""},
      {"           +-01", "expected a device \"dd.f\""},
      {"           +-01.", "expected a device \"dd.f\""},
      {"           +-0g.0  X", "expected a device \"dd.f\""},
      {"           +-g1.0  X", "expected a device \"dd.f\""},
      {"           +-", "expected a device \"dd.f\""},
      {"           +-01.0-[01]--x-00.0  X", "expected a child device, \"+-\" or the end of the line"},
      {"           +-01.0-[01]--+-", "expected a device \"dd.f\""},
      {"-", "expected a tree connector"},
      {"+[0000:00]-", "expected a tree connector"},
      {"-[", "expected [dddd:bb] (PCI domain and root bus)"},
      {"-+-", "expected [domain:bus] at the top of the tree"},
      {"-+-x", "expected [domain:bus] at the top of the tree"},
      {"           +-01:0  X", "expected a device \"dd.f\""},
      {"           +-01.8  X", "expected a device \"dd.f\""},
      {"           +-01./  X", "expected a device \"dd.f\""},
      {"           +-20.0  X", "expected a device number 00-1f"},
      {"           +-ff.0  X", "expected a device number 00-1f"},
      {"           +-01.0X", "expected \"  name\" or \"-[bus]\" after the device"},
      {"           +-01.0-(01)", "expected \"  name\" or \"-[bus]\" after the device"},
      {"           +-01.0-[01", "expected ] after the bridge's bus range"},
      {"           +-01.0-[zz]--", "expected a bus range [bb] or [bb-bb]"},
      {"           +-01.0-[]--", "expected a bus range [bb] or [bb-bb]"},
      {"           +-01.0-[01-zz]--", "expected a bus range [bb] or [bb-bb]"},
      {"           +-01.0-[01-]--", "expected a bus range [bb] or [bb-bb]"},
      {"           +-01.0-[100]--", "expected a bus range [bb] or [bb-bb]"},
      {"           +-01.0-[01]x", "expected '-' after ']'"},
      {"           +-01.0-[01]--x", "expected a child device, \"+-\" or the end of the line"},
      {"           +-01.0-[01]--+x", "expected a child device, \"+-\" or the end of the line"},
      {"           +-01.0-[01]--+", "expected a child device, \"+-\" or the end of the line"},
      {"+x01.0  X", "expected a tree connector"},
      {"+", "expected a tree connector"},
      {"-x", "expected a tree connector"},
      {"\\x", "expected a tree connector"},
      {"           | *-01.0  X", "expected a tree connector"},
      {"           *-01.0  X", "expected an lspci -tv tree line or an indented lspci -vvv detail under a device header"},
      {"*-01.0  X", "expected an lspci -tv tree line or an lspci -vvv device header"},
      {"+-[0000:00", "expected [dddd:bb] (PCI domain and root bus)"},
      {"+-[000:00]-", "expected [dddd:bb] (PCI domain and root bus)"},
      {"+-[0000:000]-", "expected [dddd:bb] (PCI domain and root bus)"},
      {"+-[0000-00]-", "expected [dddd:bb] (PCI domain and root bus)"},
      {"+-[g000:00]-", "expected [dddd:bb] (PCI domain and root bus)"},
      {"+-[000g:00]-", "expected [dddd:bb] (PCI domain and root bus)"},
      {"+-[0000:g0]-", "expected [dddd:bb] (PCI domain and root bus)"},
      {"+-[0000:0g]-", "expected [dddd:bb] (PCI domain and root bus)"},
      {"+-[0000:00]x", "expected '-' after ']'"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.line);
    const std::string e = error_of(top + c.line + "\n");
    EXPECT_NE(e.find("in.txt:2: " + c.why), std::string::npos) << e;
  }
}

TEST(TruthLspciTree, ContinuationColumnsGiveTheParent) {
  // print_it turns the '+' of a parent into '|' on the following lines: a branch hangs from the
  // '+' in its own column, wherever that is.
  const std::string tree =
      "-[0000:00]-+-00.0  Intel Corporation Device 09a2\n"
      "           +-01.0-[01-02]--+-00.0-[02]----00.0  NVIDIA Corporation GH100 [H100 PCIe]\n"
      "           |               \\-00.1  NVIDIA Corporation Device 22a3\n"
      "           \\-02.0-[03]----00.0  Mellanox Technologies MT2910 Family [ConnectX-7]\n";
  Topology t = parse(tree);
  EXPECT_EQ(parent_of(t, "0000:01:00.1"), t.find("0000:00:01.0"));
  EXPECT_EQ(parent_of(t, "0000:00:02.0"), -1);
  EXPECT_EQ(parent_of(t, "0000:03:00.0"), t.find("0000:00:02.0"));
  EXPECT_TRUE(t.notes.empty()) << ::testing::PrintToString(t.notes);
  // One column off (a tab, an edited line): read under the neighbour's '+', with a note; a branch
  // under no '+' at all is an error naming the column.
  std::string shifted = tree;
  shifted.replace(shifted.find("|               \\-00.1"), 22, "|                \\-00.1");
  Topology s = parse(shifted);
  EXPECT_EQ(parent_of(s, "0000:01:00.1"), s.find("0000:00:01.0"));
  EXPECT_TRUE(has_note(s, "in.txt:3: tree branch one column off its parent's '+'")) << ::testing::PrintToString(s.notes);
  std::string left = tree;
  left.replace(left.find("|               \\-00.1"), 22, "|              \\-00.1");
  Topology l = parse(left);
  EXPECT_EQ(parent_of(l, "0000:01:00.1"), l.find("0000:00:01.0"));
  std::string lost = tree;
  lost.replace(lost.find("|               \\-00.1"), 22, "|                   \\-00.1");
  const std::string e = error_of(lost);
  EXPECT_NE(e.find("in.txt:3: expected this tree branch to line up under a parent's '+' (column 32)"), std::string::npos) << e;
}

TEST(TruthLspciTree, FragmentWithoutTheRootLineIsReadOnRootBusZero) {
  // A paste that starts below "-[0000:00]-": its top branches are on an unnamed root bus, read
  // as 0000:00 with a note (the note names the first line).
  const std::string frag =
      "+-01.0-[01]----00.0  NVIDIA Corporation GH100 [H100 PCIe]\n"
      "\\-02.0-[02]----00.0  Mellanox Technologies MT2910 Family [ConnectX-7]\n";
  Topology t = parse(frag);
  ASSERT_EQ(t.devices.size(), 4u);
  EXPECT_EQ(parent_of(t, "0000:00:01.0"), -1);
  EXPECT_EQ(parent_of(t, "0000:00:02.0"), -1);
  EXPECT_EQ(parent_of(t, "0000:02:00.0"), t.find("0000:00:02.0"));
  EXPECT_EQ(t.host_bridges[dev(t, "0000:02:00.0").host_bridge].name, "0000:00");
  EXPECT_TRUE(has_note(t, "in.txt:1: tree without its [domain:bus] root line")) << ::testing::PrintToString(t.notes);
  EXPECT_EQ(std::count_if(t.notes.begin(), t.notes.end(), [](const std::string& n) { return n.find("root line") != std::string::npos; }),
            1);
  // Once a root line was read, a branch under no '+' is an error, not a second fragment.
  const std::string e = error_of(kTree + "+-05.0  Intel Corporation Device 0998\n");
  EXPECT_NE(e.find("in.txt:3: expected this tree branch to line up"), std::string::npos) << e;
  // Each input of several starts afresh: a fragment after a whole tree is a fragment again.
  Topology two = parse_lspci({{"a.txt", kTree}, {"b.txt", "+-03.0  Intel Corporation Device 0998\n"}});
  EXPECT_EQ(parent_of(two, "0000:00:03.0"), -1);
  EXPECT_TRUE(has_note(two, "b.txt:1: tree without its [domain:bus] root line")) << ::testing::PrintToString(two.notes);
  EXPECT_EQ(two.source, "a.txt+b.txt");
}

TEST(TruthLspciTree, NnIdsAfterTheNameAndNamesThatOnlyLookLikeThem) {
  // -nn appends " [vvvv:dddd]" (4 hex digits each) to the name; brackets of the name itself
  // ("[ConnectX-7]", "[AMD/ATI]") are part of the name.
  const std::string tree =
      "-[0000:00]-+-00.0  Intel Corporation Device [8086:09a2]\n"
      "           +-01.0-[01]----00.0  NVIDIA Corporation GH100 [H100 PCIe] [10de:2331]\n"
      "           +-02.0-[02]----00.0  Mellanox Technologies MT2910 Family [ConnectX-7]\n"
      "           +-03.0-[03]----00.0  Vendor X [ABCD:12z4]\n"
      "           +-04.0-[04]----00.0  Vendor Y [ab:123456]\n"
      "           +-05.0-[05]----00.0  [1af4:1041]\n"
      "           +-06.0-[06]----00.0  Vendor Z 1af4:1041]\n"
      "           +-07.0-[07]----00.0  Vendor W [1af4-1041]\n"
      "           +-08.0-[08]----00.0  Vendor V [1af4:1041)\n"
      "           \\-09.0-[09]----00.0  X [a:1234]\n";
  Topology t = parse(tree);
  const Device& intel = dev(t, "0000:00:00.0");
  EXPECT_TRUE(intel.ids_known);
  EXPECT_EQ(intel.vendor, 0x8086);
  EXPECT_EQ(intel.device, 0x09a2);
  EXPECT_EQ(intel.name, "Intel Corporation Device");
  const Device& gpu = dev(t, "0000:01:00.0");
  EXPECT_EQ(gpu.vendor, 0x10de);
  EXPECT_EQ(gpu.device, 0x2331);
  EXPECT_EQ(gpu.name, "NVIDIA Corporation GH100 [H100 PCIe]");
  for (const char* b : {"0000:02:00.0", "0000:03:00.0", "0000:04:00.0", "0000:06:00.0", "0000:07:00.0", "0000:08:00.0", "0000:09:00.0"}) {
    SCOPED_TRACE(b);
    EXPECT_FALSE(dev(t, b).ids_known);
    EXPECT_EQ(dev(t, b).vendor, 0);
  }
  EXPECT_EQ(dev(t, "0000:02:00.0").name, "Mellanox Technologies MT2910 Family [ConnectX-7]");
  EXPECT_EQ(dev(t, "0000:03:00.0").name, "Vendor X [ABCD:12z4]");
  EXPECT_EQ(dev(t, "0000:04:00.0").name, "Vendor Y [ab:123456]");
  EXPECT_EQ(dev(t, "0000:06:00.0").name, "Vendor Z 1af4:1041]");
  EXPECT_EQ(dev(t, "0000:07:00.0").name, "Vendor W [1af4-1041]");
  // Only the ids, no name (11 characters): the ids are read, the name is empty.
  const Device& bare = dev(t, "0000:05:00.0");
  EXPECT_TRUE(bare.ids_known);
  EXPECT_EQ(bare.vendor, 0x1af4);
  EXPECT_EQ(bare.device, 0x1041);
  EXPECT_EQ(bare.name, "");
}

TEST(TruthLspciTree, TheListingsNameWinsOverTheTreesAndIdsComeFromEither) {
  // lspci -tv and lspci -vvv name a device from the same pci.ids; the listing's header (with its
  // class) is read whichever input comes first, the tree's -nn ids are kept.
  const std::string tree =
      "-[0000:00]-+-00.0  Intel Corporation Device 09a2\n"
      "           \\-01.0-[01]----00.0  NVIDIA Corporation Device [10de:2331]\n";
  const std::string vvv = "01:00.0 3D controller: NVIDIA Corporation GH100 [H100 PCIe] (rev a1)\n";
  for (bool tree_first : {true, false}) {
    SCOPED_TRACE(tree_first ? "tree first" : "listing first");
    Topology t = tree_first ? parse_lspci({{"tree", tree}, {"vvv", vvv}}) : parse_lspci({{"vvv", vvv}, {"tree", tree}});
    const Device& g = dev(t, "0000:01:00.0");
    EXPECT_EQ(g.name, "NVIDIA Corporation GH100 [H100 PCIe]");
    EXPECT_TRUE(g.ids_known);
    EXPECT_EQ(g.device, 0x2331);
    EXPECT_EQ(g.class_code, 0x030200u);
    EXPECT_EQ(g.parent, t.find("0000:00:01.0"));
  }
}

// ---- the listing (lspci.c, ls-caps.c, ls-ecaps.c) -----------------------------------------

TEST(TruthLspciVerbose, RealGpuBlockRegionsLinkAndPayload) {
  // The real `lspci -vvv -s 01:00.0` of an RTX 6000 Ada (tests/reference/seeds_lspci/gpu-vvv.txt):
  // Region 0 16M 32-bit, Region 1 64G and Region 3 32M 64-bit prefetchable, Region 5 I/O (not
  // memory), a "Legacy Endpoint", DevCap MaxPayload 256, DevCtl MaxPayload 256 / MaxReadReq 512,
  // LnkCap 16GT/s x16, LnkSta 2.5GT/s (downgraded) x16.
  Topology t = parse(slurp(reference("seeds_lspci/gpu-vvv.txt")), "gpu-vvv.txt");
  const Device& g = dev(t, "0000:01:00.0");
  EXPECT_EQ(g.class_code, 0x030000u);
  EXPECT_EQ(g.class_name, "VGA compatible controller");
  EXPECT_EQ(g.name, "NVIDIA Corporation AD102GL [RTX 6000 Ada Generation]");
  EXPECT_EQ(g.numa, 0);
  ASSERT_EQ(g.bars.size(), 3u);
  EXPECT_EQ(g.bars[0].index, 0);
  EXPECT_EQ(g.bars[0].size, 16ull << 20);
  EXPECT_FALSE(g.bars[0].is64);
  EXPECT_FALSE(g.bars[0].prefetchable);
  EXPECT_EQ(g.bars[1].index, 1);
  EXPECT_EQ(g.bars[1].size, 64ull << 30);
  EXPECT_TRUE(g.bars[1].is64);
  EXPECT_TRUE(g.bars[1].prefetchable);
  EXPECT_EQ(g.bars[2].index, 3);
  EXPECT_EQ(g.bars[2].size, 32ull << 20);
  EXPECT_EQ(g.port, PortType::LegacyEndpoint);
  EXPECT_EQ(g.mps_cap, 256);
  EXPECT_EQ(g.mps, 256);
  EXPECT_EQ(g.mrrs, 512);
  EXPECT_EQ(g.link_cap.speed_gts, 16);
  EXPECT_EQ(g.link_cap.width, 16);
  EXPECT_EQ(g.link_sta.speed_gts, 2.5);
  EXPECT_EQ(g.link_sta.width, 16);
  EXPECT_FALSE(g.is_bridge);
  EXPECT_FALSE(g.acs_known);
  EXPECT_FALSE(g.ats_present);
}

TEST(TruthLspciVerbose, RealNicBlockSriovRegionIsNotTheDevicesBar) {
  // The real ConnectX-7 block (seeds_lspci/nic-vvv-transcript.txt): Region 0 32M; the SR-IOV
  // capability's "Region 0: Memory at ... (64-bit, prefetchable)" (the VF BAR, deeper and
  // without a size) is not the function's; ACS all '-' yet known; Endpoint; MaxPayload 512.
  Topology t = parse(slurp(reference("seeds_lspci/nic-vvv-transcript.txt")), "nic.txt");
  const Device& n = dev(t, "0000:21:00.0");
  ASSERT_EQ(n.bars.size(), 1u);
  EXPECT_EQ(n.bars[0].size, 32ull << 20);
  EXPECT_TRUE(n.bars[0].is64 && n.bars[0].prefetchable);
  EXPECT_EQ(n.port, PortType::Endpoint);
  EXPECT_EQ(n.mps_cap, 512);
  EXPECT_EQ(n.mps, 512);
  EXPECT_EQ(n.mrrs, 512);
  EXPECT_EQ(n.link_cap.speed_gts, 32);
  EXPECT_EQ(n.link_sta.width, 16);
  EXPECT_TRUE(n.acs_known && n.acs_present);
  EXPECT_EQ(n.acs_cap, 0);
  EXPECT_EQ(n.acs_ctl, 0);
  EXPECT_EQ(n.driver, "mlx5_core");
  EXPECT_EQ(n.class_code, 0x020000u);
}

std::string block(const std::string& header, const std::vector<std::string>& details) {
  std::string b = header + "\n";
  for (const auto& d : details) b += d + "\n";
  return b;
}

TEST(TruthLspciVerbose, EveryExpressPortTypeByItsName) {
  // cap_express prints the Device/Port Type field's name (PCIe Base Spec, PCI Express
  // Capabilities register bits 7:4).
  const std::pair<const char*, PortType> rows[] = {
      {"Express (v2) Endpoint, MSI 00", PortType::Endpoint},
      {"Express (v1) Legacy Endpoint, MSI 00", PortType::LegacyEndpoint},
      {"Express (v2) Root Port (Slot+), MSI 00", PortType::RootPort},
      {"Express (v2) Upstream Port, MSI 00", PortType::SwitchUpstream},
      {"Express (v2) Downstream Port (Slot-), MSI 00", PortType::SwitchDownstream},
      {"Express (v2) PCI-Express to PCI/PCI-X Bridge, MSI 00", PortType::PcieToPciBridge},
      {"Express (v2) PCI/PCI-X to PCI-Express Bridge (Slot-), MSI 00", PortType::PciToPcieBridge},
      {"Express (v2) Root Complex Integrated Endpoint, MSI 00", PortType::RootComplexEndpoint},
      {"Express (v2) Root Complex Event Collector, MSI 00", PortType::RootComplexEventCollector},
      {"Express (v2) Unknown type 15, MSI 00", PortType::Unknown},
  };
  for (const auto& [cap, port] : rows) {
    SCOPED_TRACE(cap);
    Topology t = parse(block("00:01.0 System peripheral: Intel Corporation Device 09a2", {"\tCapabilities: [40] " + std::string(cap)}));
    EXPECT_EQ(t.devices[0].port, port);
    EXPECT_FALSE(t.devices[0].acs_known);
    EXPECT_FALSE(t.devices[0].ats_present);
  }
  // Another capability naming a port type in its text is no Express capability.
  Topology t = parse(block("00:01.0 System peripheral: Intel Corporation Device 09a2",
                           {"\tCapabilities: [60] Vendor Specific Information: Root Port Len=14 <?>"}));
  EXPECT_EQ(t.devices[0].port, PortType::Unknown);
}

TEST(TruthLspciVerbose, AcsAndAtsCapabilitiesAndTheirBits) {
  // cap_acs prints seven flags in a fixed order, '+' set, '-' clear; cap_ats "ATSCtl: Enable+".
  const char* kNames[] = {"SrcValid", "TransBlk", "ReqRedir", "CmpltRedir", "UpstreamFwd", "EgressCtrl", "DirectTrans"};
  for (int bit = 0; bit < 7; ++bit) {
    SCOPED_TRACE(kNames[bit]);
    std::string cap, ctl;
    for (int i = 0; i < 7; ++i) {
      cap += std::string(i ? " " : "") + kNames[i] + (i == bit ? "-" : "+");
      ctl += std::string(i ? " " : "") + kNames[i] + (i == bit ? "+" : "-");
    }
    Topology t = parse(block("00:01.0 PCI bridge: Intel Corporation Device 09a2",
                             {"\tCapabilities: [220 v1] Access Control Services", "\t\tACSCap:\t" + cap, "\t\tACSCtl:\t" + ctl}));
    EXPECT_EQ(t.devices[0].acs_cap, 0x7f & ~(1u << bit));
    EXPECT_EQ(t.devices[0].acs_ctl, 1u << bit);
    EXPECT_TRUE(t.devices[0].acs_known && t.devices[0].acs_present);
  }
  // The capability header alone says ACS is there; ACSCtl alone too.
  Topology h = parse(block("00:01.0 PCI bridge: X", {"\tCapabilities: [220 v1] Access Control Services"}));
  EXPECT_TRUE(h.devices[0].acs_known && h.devices[0].acs_present);
  Topology c = parse(
      block("00:01.0 PCI bridge: X", {"\t\tACSCtl:\tSrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-"}));
  EXPECT_TRUE(c.devices[0].acs_known && c.devices[0].acs_present);
  EXPECT_EQ(c.devices[0].acs_ctl, acs::kSourceValidation | acs::kRequestRedirect | acs::kCompletionRedirect | acs::kUpstreamForwarding);
  // ATS: the capability, then its control register's Enable flag.
  for (const auto& [ctl, enabled] : {std::pair<const char*, bool>{"\t\tATSCtl:\tEnable+, Smallest Translation Unit: 00", true},
                                     {"\t\tATSCtl:\tEnable-, Smallest Translation Unit: 00", false}}) {
    Topology a =
        parse(block("41:00.0 3D controller: NVIDIA Corporation Device 2335",
                    {"\tCapabilities: [b00 v1] Address Translation Service (ATS)", "\t\tATSCap:\tInvalidate Queue Depth: 00", ctl}));
    EXPECT_TRUE(a.devices[0].ats_present);
    EXPECT_EQ(a.devices[0].ats_enabled, enabled);
    EXPECT_FALSE(a.devices[0].acs_known);
  }
  Topology a =
      parse(block("41:00.0 3D controller: NVIDIA Corporation Device 2335", {"\tCapabilities: [b00 v1] Address Translation Service (ATS)"}));
  EXPECT_TRUE(a.devices[0].ats_present);
  EXPECT_FALSE(a.devices[0].ats_enabled);
}

TEST(TruthLspciVerbose, MalformedAcsFlagsAreErrors) {
  const std::string hdr = "00:01.0 PCI bridge: Intel Corporation Device 09a2\n";
  const std::pair<const char*, const char*> rows[] = {
      {"SrcValid", "expected ACS flags like ReqRedir+ or ReqRedir-, found \"SrcValid\""},
      {"SrcValid+ TransBlk", "expected ACS flags like ReqRedir+ or ReqRedir-, found \"TransBlk\""},
      {"+", "expected ACS flags like ReqRedir+ or ReqRedir-, found \"+\""},
      {"SrcValid* TransBlk-", "expected ACS flags like ReqRedir+ or ReqRedir-, found \"SrcValid*\""},
      {"SrcValid+ Bogus+", "unknown ACS flag \"Bogus\""},
      {"X+", "unknown ACS flag \"X\""},
      {"Xy-", "unknown ACS flag \"Xy\""},
      {"srcvalid+", "unknown ACS flag \"srcvalid\""},
      {"", "expected ACS flags after the colon"},
  };
  for (const auto& [flags, why] : rows) {
    SCOPED_TRACE(flags);
    const std::string e = error_of(hdr + "\t\tACSCtl:\t" + flags + "\n");
    EXPECT_NE(e.find(std::string("in.txt:2: ") + why), std::string::npos) << e;
  }
  // Flags separated by several blanks are still flags.
  Topology t = parse(hdr + "\t\tACSCtl:  SrcValid-   ReqRedir+\n");
  EXPECT_EQ(t.devices[0].acs_ctl, acs::kRequestRedirect);
}

TEST(TruthLspciVerbose, RegionSizesInEveryUnit) {
  // show_size prints the size in the largest of K, M, G, T that divides it, or in bytes.
  const std::pair<const char*, uint64_t> rows[] = {{"[size=256]", 256},
                                                   {"[size=4K]", 4ull << 10},
                                                   {"[size=16M]", 16ull << 20},
                                                   {"[size=128G]", 128ull << 30},
                                                   {"[size=2T]", 2ull << 40}};
  for (const auto& [sz, bytes] : rows) {
    SCOPED_TRACE(sz);
    Topology t = parse(block(kGpuHeader, {std::string("\tRegion 2: Memory at 38000000000 (64-bit, prefetchable) ") + sz}));
    ASSERT_EQ(t.devices[0].bars.size(), 1u);
    EXPECT_EQ(t.devices[0].bars[0].index, 2);
    EXPECT_EQ(t.devices[0].bars[0].size, bytes);
  }
  // Region 0 and 5 are the first and the last of a type-0 header's six BARs; "low-1M" and
  // "[virtual]"/"[disabled]" forms of show_bases; an I/O region is no memory BAR.
  Topology t = parse(block(kGpuHeader, {"\tRegion 0: Memory at f8000000 (32-bit, non-prefetchable) [virtual] [size=16M]",
                                        "\tRegion 5: Memory at 000c0000 (low-1M, prefetchable) [disabled] [size=128K]",
                                        "\tRegion 4: I/O ports at 2000 [size=128]"}));
  ASSERT_EQ(t.devices[0].bars.size(), 2u);
  EXPECT_EQ(t.devices[0].bars[0].index, 0);
  EXPECT_FALSE(t.devices[0].bars[0].prefetchable);
  EXPECT_FALSE(t.devices[0].bars[0].is64);
  EXPECT_EQ(t.devices[0].bars[1].index, 5);
  EXPECT_EQ(t.devices[0].bars[1].size, 128ull << 10);
  EXPECT_TRUE(t.devices[0].bars[1].prefetchable);
  EXPECT_FALSE(t.devices[0].bars[1].is64);
}

TEST(TruthLspciVerbose, MalformedRegionsAreErrors) {
  const std::pair<const char*, const char*> rows[] = {
      {"Region 6: Memory at 0 (64-bit, prefetchable) [size=1M]", "expected \"Region <0-5>: ...\""},
      {"Region -1: Memory at 0 (64-bit, prefetchable) [size=1M]", "expected \"Region <0-5>: ...\""},
      {"Region x: Memory at 0 (64-bit, prefetchable) [size=1M]", "expected \"Region <0-5>: ...\""},
      {"Region : Memory at 0 (64-bit, prefetchable) [size=1M]", "expected \"Region <0-5>: ...\""},
      {"Region 1 Memory at 0 (64-bit, prefetchable) [size=1M]", "expected \"Region <0-5>: ...\""},
      {"Region 1: Memory at 0 (64-bit, prefetchable) [size=1P]", "expected a size unit K, M, G or T"},
      {"Region 1: Memory at 0 (64-bit, prefetchable) [size=M]", "expected a region size like [size=64G]"},
  };
  for (const auto& [r, why] : rows) {
    SCOPED_TRACE(r);
    const std::string e = error_of(kGpuHeader + "\n\t" + r + "\n");
    EXPECT_NE(e.find(std::string("in.txt:2: ") + why), std::string::npos) << e;
  }
}

TEST(TruthLspciVerbose, TheSameDeviceListedTwiceKeepsOneBarPerRegion) {
  // A transcript with `lspci -vvv -s 01:00.0` run twice: one device, its BARs once.
  const std::string b = block(kGpuHeader, {"\tRegion 0: Memory at f8000000 (32-bit, non-prefetchable) [size=16M]",
                                           "\tRegion 1: Memory at 38000000000 (64-bit, prefetchable) [size=128G]"});
  Topology t = parse("$ sudo lspci -vvv -s 01:00.0\n" + b + "$ sudo lspci -vvv -s 01:00.0\n" + b);
  ASSERT_EQ(t.devices.size(), 1u);
  ASSERT_EQ(t.devices[0].bars.size(), 2u);
  EXPECT_EQ(t.devices[0].bars[0].index, 0);
  EXPECT_EQ(t.devices[0].bars[0].size, 16ull << 20);
  EXPECT_EQ(t.devices[0].bars[1].index, 1);
  EXPECT_EQ(t.devices[0].bars[1].size, 128ull << 30);
}

TEST(TruthLspciVerbose, DeviceLevelLinesSitAtTheBlocksFirstIndentation) {
  // show_verbose prints device lines with one tab, capabilities' lines with two (cap_sriov's VF
  // BARs among them); a paste may expand the tabs to 8 spaces. Only the device's own Region lines
  // are its BARs, whichever indentation the block uses.
  for (const std::string one : {"\t", "        ", "    "}) {
    SCOPED_TRACE("indent \"" + one + "\"");
    const std::string two = one + one;
    Topology t = parse(block("21:00.0 Ethernet controller: Mellanox Technologies MT2910 Family [ConnectX-7]",
                             {one + "Region 0: Memory at 500aa000000 (64-bit, prefetchable) [size=32M]",
                              one + "Capabilities: [180 v1] Single Root I/O Virtualization (SR-IOV)",
                              two + "Region 0: Memory at 00000500ae000000 (64-bit, prefetchable) [size=1M]",
                              two + "Region 2: Memory at 00000500af000000 (64-bit, prefetchable) [size=8M]",
                              one + "Region 2: Memory at 500ab000000 (64-bit, prefetchable) [size=2M]"}));
    const Device& n = t.devices[0];
    ASSERT_EQ(n.bars.size(), 2u);
    EXPECT_EQ(n.bars[0].size, 32ull << 20);
    EXPECT_EQ(n.bars[1].index, 2);
    EXPECT_EQ(n.bars[1].size, 2ull << 20);
  }
  // A tab counts to the next multiple of 8 columns: "\t" and 8 spaces are one level.
  Topology m = parse(block(
      "21:00.0 Ethernet controller: X",
      {"        Region 0: Memory at 0 (64-bit, prefetchable) [size=32M]", "\tRegion 2: Memory at 0 (64-bit, prefetchable) [size=2M]",
       "  \tRegion 4: Memory at 0 (64-bit, prefetchable) [size=4M]", "       \tRegion 3: Memory at 0 (64-bit, prefetchable) [size=1M]",
       "\t\tRegion 5: Memory at 0 (64-bit, prefetchable) [size=8M]"}));
  ASSERT_EQ(m.devices[0].bars.size(), 4u);
  EXPECT_EQ(m.devices[0].bars[2].index, 4);
  EXPECT_EQ(m.devices[0].bars[3].index, 3);
  // Each block has its own first indentation.
  const std::string deep =
      block("21:00.0 Ethernet controller: X", {"\t\tNUMA node: 0", "\t\tRegion 0: Memory at 0 (64-bit, prefetchable) [size=32M]"});
  const std::string flat =
      block("21:00.1 Ethernet controller: X", {"\tNUMA node: 0", "\tRegion 0: Memory at 0 (64-bit, prefetchable) [size=32M]"});
  for (const std::string& both : {deep + flat, flat + deep}) {
    Topology two = parse(both);
    EXPECT_EQ(dev(two, "0000:21:00.0").bars.size(), 1u);
    EXPECT_EQ(dev(two, "0000:21:00.1").bars.size(), 1u);
  }
}

TEST(TruthLspciVerbose, NumbersAfterTheirKeys) {
  Topology t = parse(block(kGpuHeader, {"\tNUMA node: 12", "\tIOMMU group: 117", "\tKernel driver in use: nvidia"}));
  EXPECT_EQ(t.devices[0].numa, 12);
  EXPECT_EQ(t.devices[0].iommu_group, 117);
  for (const std::string bad : {"NUMA node:", "NUMA node: x", "NUMA node: 1x", "IOMMU group:", "IOMMU group: 7a", "IOMMU group: abc"}) {
    SCOPED_TRACE(bad);
    const std::string e = error_of(kGpuHeader + "\n\t" + bad + "\n");
    EXPECT_NE(e.find("in.txt:2: expected a number after"), std::string::npos) << e;
  }
}

TEST(TruthLspciVerbose, PayloadAndReadRequestFromDevCapAndDevCtl) {
  // DevCap: "MaxPayload %d bytes, PhantFunc %d"; DevCtl's continuation line "MaxPayload %d
  // bytes, MaxReadReq %d bytes"; other lines with "MaxPayload" (DevCtl2, a later capability's)
  // are not these.
  Topology t = parse(block(
      kGpuHeader, {"\tCapabilities: [60] Express (v2) Endpoint, MSI 00",
                   "\t\tDevCap:\tMaxPayload 512 bytes, PhantFunc 0, Latency L0s unlimited, L1 unlimited",
                   "\t\tDevCtl:\tCorrErr+ NonFatalErr+ FatalErr+ UnsupReq-", "\t\t\tRlxdOrd+ ExtTag+ PhantFunc- AuxPwr- NoSnoop+ FLReset-",
                   "\t\t\tMaxPayload 256 bytes, MaxReadReq 4096 bytes", "\t\t\tMaxPayload 128 bytes, no read request size"}));
  EXPECT_EQ(t.devices[0].mps_cap, 512);
  EXPECT_EQ(t.devices[0].mps, 256);
  EXPECT_EQ(t.devices[0].mrrs, 4096);
  // A DevCap line without MaxPayload leaves it unknown.
  Topology u = parse(block(kGpuHeader, {"\t\tDevCap:\tPhantFunc 0"}));
  EXPECT_EQ(u.devices[0].mps_cap, 0);
  const std::pair<const char*, const char*> bad[] = {
      {"\t\tDevCap:\tMaxPayload x bytes", "expected \"MaxPayload <n> bytes\""},
      {"\t\tDevCap:\tMaxPayload  bytes, PhantFunc 0", "expected \"MaxPayload <n> bytes\""},
      {"\t\tDevCap:\tMaxPayload 256 byte", "expected \"MaxPayload <n> bytes\""},
      {"\t\t\tMaxPayload 256 bytes, MaxReadReq 512", "expected \"MaxReadReq <n> bytes\""},
  };
  for (const auto& [line, why] : bad) {
    SCOPED_TRACE(line);
    const std::string e = error_of(kGpuHeader + "\n" + line + "\n");
    EXPECT_NE(e.find(std::string("in.txt:2: ") + why), std::string::npos) << e;
  }
  // "MaxReadReq" elsewhere (a VPD text) is not DevCtl's line.
  Topology v = parse(block(
      kGpuHeader, {"\t\t\tMaxPayload 256 bytes, MaxReadReq 4096 bytes", "\t\t\t[V1] Vendor specific: MaxReadReq 512 bytes recommended"}));
  EXPECT_EQ(v.devices[0].mps, 256);
  EXPECT_EQ(v.devices[0].mrrs, 4096);
}

TEST(TruthLspciVerbose, LinkSpeedsAndWidths) {
  // link_speed(): "2.5GT/s" ... "64GT/s", "unknown" for a reserved code; widths x1 ... x32.
  const std::tuple<const char*, double, int> rows[] = {
      {"Speed 2.5GT/s, Width x1", 2.5, 1},
      {"Speed 5GT/s, Width x2", 5, 2},
      {"Speed 8GT/s (downgraded), Width x4 (downgraded)", 8, 4},
      {"Speed 16GT/s, Width x8", 16, 8},
      {"Speed 32GT/s, Width x16", 32, 16},
      {"Speed 64GT/s, Width x32", 64, 32},
      {"Speed unknown (downgraded), Width x12", 0, 12},
  };
  for (const auto& [sta, speed, width] : rows) {
    SCOPED_TRACE(sta);
    Topology t = parse(block(kGpuHeader, {std::string("\t\tLnkCap:\tPort #0, ") + sta + ", ASPM L1", std::string("\t\tLnkSta:\t") + sta}));
    EXPECT_EQ(t.devices[0].link_cap.speed_gts, speed);
    EXPECT_EQ(t.devices[0].link_cap.width, width);
    EXPECT_EQ(t.devices[0].link_sta.speed_gts, speed);
    EXPECT_EQ(t.devices[0].link_sta.width, width);
  }
  const char* kBoth = "expected \"Speed <n>GT/s\" and \"Width x<n>\" in the link line";
  const char* kSpeed = "expected a link speed like 16GT/s";
  const char* kWidth = "expected a link width like x16";
  const std::pair<const char*, const char*> bad[] = {
      {"LnkSta:\tSpeed 16GT/s", kBoth},
      {"LnkSta:\tWidth x16", kBoth},
      {"LnkCap:\tPort #0, ASPM L1", kBoth},
      {"LnkSta:\tSpeed fast, Width x16", kSpeed},
      {"LnkSta:\tSpeed GT/s, Width x16", kSpeed},
      {"LnkSta:\tSpeed 16Gb/s, Width x16", kSpeed},
      {"LnkSta:\tSpeed 16GT/s, Width x0", kWidth},
      {"LnkSta:\tSpeed 16GT/s, Width x33", kWidth},
      {"LnkSta:\tSpeed 16GT/s, Width xx", kWidth},
      {"LnkSta:\tSpeed 16GT/s, Width x-4", kWidth},
  };
  for (const auto& [line, why] : bad) {
    SCOPED_TRACE(line);
    const std::string e = error_of(kGpuHeader + "\n\t\t" + line + "\n");
    EXPECT_NE(e.find(std::string("in.txt:2: ") + why), std::string::npos) << e;
  }
}

TEST(TruthLspciVerbose, BridgeBusNumbersAndUnreadableCapabilities) {
  // show_htype1: "Bus: primary=%02x, secondary=%02x, subordinate=%02x, sec-latency=%d";
  // without root, lspci prints "Capabilities: <access denied>" (ls-caps.c show_caps).
  Topology t = parse(block("00:01.0 PCI bridge: Intel Corporation Device 09a2",
                           {"\tBus: primary=00, secondary=3a, subordinate=3f, sec-latency=0", "\tCapabilities: <access denied>"}) +
                     block("3a:00.0 3D controller: NVIDIA Corporation Device 2335", {"\tNUMA node: 0"}));
  const Device& b = dev(t, "0000:00:01.0");
  EXPECT_TRUE(b.is_bridge);
  EXPECT_EQ(b.secondary_bus, 0x3a);
  EXPECT_EQ(parent_of(t, "0000:3a:00.0"), t.find("0000:00:01.0"));
  EXPECT_TRUE(has_note(t, "in.txt:3: lspci ran without root; ACS and link details of 0000:00:01.0 are unknown"))
      << ::testing::PrintToString(t.notes);
  EXPECT_FALSE(b.acs_known);
  for (const std::string bad : {"\tBus: primary=00, subordinate=01", "\tBus: primary=00, secondary=zz, subordinate=01"}) {
    SCOPED_TRACE(bad);
    const std::string e = error_of("00:01.0 PCI bridge: X\n" + bad + "\n");
    EXPECT_NE(e.find("in.txt:2: expected \"Bus: primary=bb, secondary=bb, subordinate=bb\""), std::string::npos) << e;
  }
}

TEST(TruthLspciVerbose, DetailsBeforeAnyHeaderAreErrors) {
  const std::string e = error_of("\tNUMA node: 0\n");
  EXPECT_NE(e.find("in.txt:1: expected an lspci -tv tree line or an indented lspci -vvv detail under a device header"), std::string::npos)
      << e;
  const std::string t = error_of("$ lspci -vvv\n\tNUMA node: 0\n");
  EXPECT_NE(t.find("in.txt:2: expected a device header \"bb:dd.f class: name\" before indented details"), std::string::npos) << t;
  // An empty line ends a block: details after it have no device.
  const std::string e2 = error_of(kGpuHeader + "\n\tNUMA node: 0\n\n\tIOMMU group: 3\n");
  EXPECT_NE(e2.find("in.txt:4: expected"), std::string::npos) << e2;
}

// ---- headers (lspci.c show_terse, lib/names.c) ----------------------------------------------

TEST(TruthLspciHeader, ClassFromTheNnCodeOrFromTheName) {
  // -nn: "class name [cccc]" (names.c format_name "%s [%s]"); pciutils also prints the code when
  // only the base class is known ("Memory controller [0504]"); "Class [ff00]" when none is. Only
  // 06/04 (PCI-to-PCI bridge) is a bridge.
  const std::tuple<const char*, uint32_t, const char*, bool> rows[] = {
      {"PCI bridge [0604]", 0x060400, "PCI bridge", true},
      {"Host bridge [0600]", 0x060000, "Host bridge", false},
      {"ISA bridge [0601]", 0x060100, "ISA bridge", false},
      {"MicroChannel bridge [0603]", 0x060300, "MicroChannel bridge", false},
      {"PCMCIA bridge [0605]", 0x060500, "PCMCIA bridge", false},
      {"Fibre Channel [0c04]", 0x0c0400, "Fibre Channel", false},
      {"Memory controller [0504]", 0x050400, "Memory controller", false},
      {"Modem [0704]", 0x070400, "Modem", false},
      {"Class [ff00]", 0xff0000, "Class", false},
      {"A [0604]", 0x060400, "A", true},
      {"Bridge[0680]", 0x068000, "Bridge", false},
      {"PCI bridge", 0x060400, "PCI bridge", true},
      {"Host bridge", 0x060000, "Host bridge", false},
      {"3D controller", 0x030200, "3D controller", false},
  };
  for (const auto& [cls, code, name, bridge] : rows) {
    SCOPED_TRACE(cls);
    Topology t = parse(std::string("00:01.0 ") + cls + ": Intel Corporation Device 09a2\n");
    EXPECT_TRUE(t.devices[0].class_known);
    EXPECT_EQ(t.devices[0].class_code, code);
    EXPECT_EQ(t.devices[0].class_name, name);
    EXPECT_EQ(t.devices[0].is_bridge, bridge);
  }
  // Names that are no pci.ids class and no " [cccc]" suffix: the class is unknown, its code 0.
  for (const char* cls : {"Class ff00", "Bad]", "a[0604]", "Class [0604x", "Class 0604]", "Unknown device class"}) {
    SCOPED_TRACE(cls);
    Topology t = parse(std::string("00:01.0 ") + cls + ": Intel Corporation Device 09a2 (prog-if 01)\n");
    EXPECT_FALSE(t.devices[0].class_known);
    EXPECT_EQ(t.devices[0].class_code, 0u);
    EXPECT_EQ(t.devices[0].class_name, cls);
    EXPECT_FALSE(t.devices[0].is_bridge);
  }
  const std::string e = error_of("00:01.0 PCI bridge [06z4]: Intel Corporation Device 09a2\n");
  EXPECT_NE(e.find("in.txt:1: expected a hex class code [cccc]"), std::string::npos) << e;
}

TEST(TruthLspciHeader, ProgIfAndRevisionAreNoPartOfTheName) {
  // show_terse: " (rev %02x)" only when the revision is not 0, then with -v " (prog-if %02x [name])".
  Topology t = parse(
      "00:14.0 USB controller: Intel Corporation Alder Lake-S PCH USB 3.2 Gen 2x2 XHCI Controller (rev 11) (prog-if 30 [XHCI])\n"
      "01:00.0 Non-Volatile memory controller: Samsung Electronics Co Ltd NVMe SSD Controller PM9A1/PM9A3/980PRO (prog-if 02 [NVM "
      "Express])\n"
      "02:00.0 USB controller [0c03]: Renesas Technology Corp. uPD720201 USB 3.0 Host Controller [1912:0014] (prog-if 30 [XHCI])\n"
      "03:00.0 Serial bus controller: Foo Corp. Bar (prog-if 10 [OHCI])\n");
  EXPECT_EQ(dev(t, "0000:00:14.0").class_code, 0x0c0330u);
  EXPECT_EQ(dev(t, "0000:00:14.0").name, "Intel Corporation Alder Lake-S PCH USB 3.2 Gen 2x2 XHCI Controller");
  EXPECT_EQ(dev(t, "0000:01:00.0").class_code, 0x010802u);
  EXPECT_EQ(dev(t, "0000:01:00.0").name, "Samsung Electronics Co Ltd NVMe SSD Controller PM9A1/PM9A3/980PRO");
  EXPECT_EQ(dev(t, "0000:02:00.0").class_code, 0x0c0330u);
  EXPECT_EQ(dev(t, "0000:02:00.0").vendor, 0x1912);
  EXPECT_EQ(dev(t, "0000:02:00.0").name, "Renesas Technology Corp. uPD720201 USB 3.0 Host Controller");
  EXPECT_EQ(dev(t, "0000:03:00.0").class_code, 0x0c8010u);
}

TEST(TruthLspciHeader, MalformedHeadersAreErrorsWithTheirLine) {
  struct Case {
    std::string line, why;
  };
  const Case cases[] = {
      {"01:00.0", "expected a device header \"[dddd:]bb:dd.f class: name\""},
      {"0g:00.0 Ethernet controller: Intel Corporation I350", "expected a device header \"[dddd:]bb:dd.f class: name\""},
      {"01:20.0 Ethernet controller: Intel Corporation I350", "expected a device header \"[dddd:]bb:dd.f class: name\""},
      {"01:00.0 Ethernet controller Intel Corporation I350", "expected \"class: name\" after the device address"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.line);
    const std::string e = error_of(kGpuHeader + "\n" + c.line + "\n");
    EXPECT_NE(e.find("in.txt:2: " + c.why), std::string::npos) << e;
  }
}

// ---- placement of devices only the listing names (finish) ---------------------------------

TEST(TruthLspciPlacement, ListingOnlyDevicesHangUnderTheBridgeOfTheirBus) {
  // Without a tree, a device sits under the bridge whose secondary bus is the device's bus, in
  // the same PCI domain (lspci -D), whichever comes first in the listing; a device under no
  // bridge is on its own root bus ("dddd:bb", ls-tree.c's "[dddd:bb]").
  const std::string vvv =
      block("0001:01:00.0 3D controller [0302]: NVIDIA Corporation GH100 [H100 SXM5 80GB] [10de:2330]", {"\tNUMA node: 1"}) +
      block("0000:01:00.0 Ethernet controller [0200]: Mellanox Technologies MT2910 Family [ConnectX-7] [15b3:1021]", {}) +
      block("0000:00:01.0 PCI bridge [0604]: Intel Corporation Device 09a9",
            {"\tBus: primary=00, secondary=01, subordinate=01, sec-latency=0"}) +
      block("0000:00:03.0 PCI bridge [0604]: Intel Corporation Device 09a9",
            {"\tBus: primary=00, secondary=02, subordinate=02, sec-latency=0"}) +
      block("0001:00:01.0 PCI bridge [0604]: Intel Corporation Device 09a9",
            {"\tBus: primary=00, secondary=01, subordinate=01, sec-latency=0"}) +
      block("0000:80:00.0 Non-Volatile memory controller [0108]: Samsung Electronics Co Ltd Device [144d:a80a]", {});
  Topology t = parse(vvv);
  EXPECT_EQ(parent_of(t, "0001:01:00.0"), t.find("0001:00:01.0"));
  EXPECT_EQ(parent_of(t, "0000:01:00.0"), t.find("0000:00:01.0"));
  EXPECT_EQ(parent_of(t, "0000:00:01.0"), -1);
  EXPECT_EQ(parent_of(t, "0000:80:00.0"), -1);
  EXPECT_TRUE(dev(t, "0000:00:03.0").children.empty());
  auto root = [&](const std::string& bdf) { return t.host_bridges[dev(t, bdf).host_bridge].name; };
  EXPECT_EQ(root("0000:00:01.0"), "0000:00");
  EXPECT_EQ(root("0001:00:01.0"), "0001:00");
  EXPECT_EQ(root("0001:01:00.0"), "0001:00");
  EXPECT_EQ(root("0000:80:00.0"), "0000:80");
  std::vector<std::string> roots;
  for (const auto& h : t.host_bridges) roots.push_back(h.name);
  std::sort(roots.begin(), roots.end());
  EXPECT_EQ(roots, (std::vector<std::string>{"0000:00", "0000:80", "0001:00"}));
  // The bridge first, its device after it: one root bus, nothing named after the device's bus.
  Topology b = parse(block("00:01.0 PCI bridge [0604]: Intel Corporation Device 09a9",
                           {"\tBus: primary=00, secondary=01, subordinate=01, sec-latency=0"}) +
                     block("01:00.0 3D controller [0302]: NVIDIA Corporation GH100 [H100 PCIe] [10de:2331]", {}));
  ASSERT_EQ(b.host_bridges.size(), 1u);
  EXPECT_EQ(b.host_bridges[0].name, "0000:00");
  EXPECT_EQ(parent_of(b, "0000:01:00.0"), 0);
}

TEST(TruthLspciPlacement, TheTreesPlacementStandsAndTheListingFillsIn) {
  // A device the tree drew stays where it drew it; the listing's device the tree lacks (a VF
  // enabled later) is placed by its bus.
  const std::string tree =
      "-[0000:00]-+-00.0  Intel Corporation Device 09a2\n"
      "           \\-01.0-[01]----00.0  Mellanox Technologies MT2910 Family [ConnectX-7]\n";
  const std::string vvv =
      block("01:00.1 Ethernet controller: Mellanox Technologies ConnectX Family mlx5Gen Virtual Function", {"\tNUMA node: 0"});
  Topology t = parse_lspci({{"tree", tree}, {"vvv", vvv}});
  EXPECT_EQ(parent_of(t, "0000:01:00.1"), t.find("0000:00:01.0"));
  EXPECT_EQ(parent_of(t, "0000:01:00.0"), t.find("0000:00:01.0"));
  EXPECT_EQ(t.host_bridges.size(), 1u);
  // A listing taken after a rescan renumbered the buses does not move what the tree drew.
  const std::string later =
      block("00:01.0 PCI bridge: Intel Corporation Device 09a9", {"\tBus: primary=00, secondary=05, subordinate=05, sec-latency=0"}) +
      block("00:05.0 PCI bridge: Intel Corporation Device 09aa", {"\tBus: primary=00, secondary=01, subordinate=01, sec-latency=0"});
  Topology r = parse_lspci({{"tree", tree}, {"vvv", later}});
  EXPECT_EQ(parent_of(r, "0000:01:00.0"), r.find("0000:00:01.0"));
}

TEST(TruthLspciPlacement, VmdDomainsHaveFiveDigits) {
  // Intel VMD puts its NVMe drives in PCI domains from 0x10000 (Linux, drivers/pci/controller/
  // vmd.c), which lspci -D prints with "%04x" as five digits: "10000:e1:00.0".
  Topology t = parse(block("10000:e0:00.0 PCI bridge [0604]: Intel Corporation Device 09ab",
                           {"\tBus: primary=e0, secondary=e1, subordinate=e1, sec-latency=0"}) +
                     block("10000:e1:00.0 Non-Volatile memory controller [0108]: Samsung Electronics Co Ltd Device [144d:a80a]", {}) +
                     block("0000:e1:00.0 Non-Volatile memory controller [0108]: Samsung Electronics Co Ltd Device [144d:a80a]", {}));
  EXPECT_EQ(parent_of(t, "10000:e1:00.0"), t.find("10000:e0:00.0"));
  EXPECT_EQ(parent_of(t, "0000:e1:00.0"), -1);
  EXPECT_EQ(t.host_bridges[dev(t, "10000:e1:00.0").host_bridge].name, "10000:e0");
  EXPECT_EQ(t.host_bridges[dev(t, "0000:e1:00.0").host_bridge].name, "0000:e1");
}

TEST(TruthLspciTree, OneBlankBeforeTheNameAsWhenAPageCollapsesBlanks) {
  // ls-tree.c prints "  %s"; a web page outside a code block shows the two blanks as one.
  std::string tree = kTree;
  for (size_t at; (at = tree.find(".0  ")) != std::string::npos;) tree.replace(at, 4, ".0 ");
  Topology t = parse(tree);
  expect_small_tree(t);
  EXPECT_EQ(dev(t, "0000:00:00.0").name, "Intel Corporation Device 09a2");
}

// ---- bugs the mutants showed --------------------------------------------------------------

TEST(TruthLspciFixes, AnUnconfiguredBridgeHasNothingBehindIt) {
  // "Bus: primary=00, secondary=00" is a bridge the firmware left unconfigured: Linux rejects a
  // secondary bus not above the bridge's own (drivers/pci/probe.c pci_scan_bridge_extend,
  // "bridge configuration invalid"), so bus 00's devices are on the root bus, not behind it.
  const std::string vvv = block("00:1c.0 PCI bridge [0604]: Intel Corporation Device 7a38",
                                {"\tBus: primary=00, secondary=00, subordinate=00, sec-latency=0"}) +
                          block("00:1c.4 PCI bridge [0604]: Intel Corporation Device 7a3c",
                                {"\tBus: primary=00, secondary=00, subordinate=00, sec-latency=0"}) +
                          block("00:01.0 PCI bridge [0604]: Intel Corporation Device 7a04",
                                {"\tBus: primary=00, secondary=01, subordinate=01, sec-latency=0"}) +
                          block("00:02.0 VGA compatible controller [0300]: Intel Corporation Device a780", {}) +
                          block("01:00.0 3D controller [0302]: NVIDIA Corporation GH100 [H100 PCIe] [10de:2331]", {});
  Topology t = parse(vvv);
  for (const char* b : {"0000:00:1c.0", "0000:00:1c.4", "0000:00:01.0", "0000:00:02.0"}) {
    SCOPED_TRACE(b);
    EXPECT_EQ(parent_of(t, b), -1);
    EXPECT_EQ(t.host_bridges[dev(t, b).host_bridge].name, "0000:00");
  }
  EXPECT_TRUE(dev(t, "0000:00:1c.0").children.empty());
  EXPECT_EQ(parent_of(t, "0000:01:00.0"), t.find("0000:00:01.0"));
}

TEST(TruthLspciFixes, RootPromptsCommandIsWhatFollowsItsHash) {
  // For "user@host:~# cmd" the command is what follows "# ": a host name with "-e" or "-H" in it
  // (gpu-eu1, node-H100) is no option of lscpu or numactl.
  Topology t = parse(
      "root@gpu-eu1:~# lscpu\nArchitecture:        x86_64\nVendor ID:           GenuineIntel\n"
      "root@gpu-eu1:~# lspci -tv\n" +
      kTree);
  expect_small_tree(t);
  EXPECT_EQ(t.cpu.arch, "x86_64");
  EXPECT_EQ(t.cpu.vendor, "GenuineIntel");
  Topology n = parse("root@node-H100:~# numactl --show\navailable: 9 nodes\nroot@node-H100:~# lspci -tv\n" + kTree);
  EXPECT_EQ(n.numa_nodes, 0);
}

TEST(TruthLspciFixes, ARegionWhoseSizeLspciDoesNotKnowIsNoBar) {
  // lspci.c show_bases passes 0 to show_size when the access method gives no sizes, and
  // show_size then prints no "[size=...]": such a region is read, its size unknown.
  Topology t = parse(block(kGpuHeader, {"\tRegion 0: Memory at f8000000 (32-bit, non-prefetchable) [size=16M]",
                                        "\tRegion 1: Memory at 3f000000000 (64-bit, prefetchable)",
                                        "\tRegion 3: Memory at 40000000000 (64-bit, prefetchable) [size=32M]"}));
  const Device& g = t.devices[0];
  ASSERT_EQ(g.bars.size(), 2u);
  EXPECT_EQ(g.bars[0].index, 0);
  EXPECT_EQ(g.bars[1].index, 3);
  EXPECT_EQ(g.bars[1].size, 32ull << 20);
}

TEST(TruthLspciPlain, AListingAndATreeIndentedOnItsOwnInOneFile) {
  // A report with a listing at the margin and a tree indented by two blanks (a list item): the
  // tree's lines, root line included ("-[dddd:bb]-" or, with several root buses, "-+-[dddd:bb]-"),
  // are tree lines; the listing's tab-indented lines are details whatever their text.
  const std::string listing = block(kGpuHeader, {"\tNUMA node: 1", "\t+-- see also 00:01.0"});
  auto indent = [](const std::string& text) {
    std::string out;
    size_t b = 0;
    for (size_t e; (e = text.find('\n', b)) != std::string::npos; b = e + 1) out += "  " + text.substr(b, e - b + 1);
    return out;
  };
  for (const std::string sep : {"", "\n"}) {
    SCOPED_TRACE(sep.empty() ? "no blank line" : "blank line");
    Topology t = parse(listing + sep + indent(kTree));
    expect_small_tree(t);
    EXPECT_EQ(dev(t, "0000:01:00.0").numa, 1);
    const std::string multi =
        "-+-[0001:00]---00.0-[01]----00.0  Mellanox Technologies MT2910 Family [ConnectX-7]\n"
        "\\-[0000:00]-+-00.0  Intel Corporation Device 09a2\n"
        "            \\-01.0-[01]----00.0  NVIDIA Corporation GH100 [H100 PCIe]\n";
    Topology m = parse(listing + sep + indent(multi));
    EXPECT_EQ(parent_of(m, "0001:01:00.0"), m.find("0001:00:00.0"));
    EXPECT_EQ(parent_of(m, "0000:01:00.0"), m.find("0000:00:01.0"));
    EXPECT_EQ(dev(m, "0000:01:00.0").numa, 1);
  }
}

TEST(TruthLspciHeader, TheNameIsAllTextBeforeTheSuffixes) {
  // show_terse prints "class: name", then " (rev %02x)" and " (prog-if %02x [...])": the name is
  // whatever pci.ids says (lspci -i takes any ids file), even a name that starts like a suffix.
  Topology t =
      parse("01:00.0 Ethernet controller: (rev b) Lab NIC (rev 02)\n02:00.0 USB controller: (prog-if x) Lab USB (prog-if 30 [XHCI])\n");
  EXPECT_EQ(dev(t, "0000:01:00.0").name, "(rev b) Lab NIC");
  EXPECT_EQ(dev(t, "0000:02:00.0").name, "(prog-if x) Lab USB");
  EXPECT_EQ(dev(t, "0000:02:00.0").class_code, 0x0c0330u);
}

TEST(TruthLspciTranscript, FedoraPromptsInASessionOfSeveralCommands) {
  // Fedora's and RHEL's PS1, "[\u@\h \W]\$ " (/etc/bashrc of Fedora's setup package; bash(1),
  // PROMPTING: \$ is '#' for uid 0 and '$' otherwise, \W the base name of the working directory,
  // spaces and all): each prompt starts a command, the other commands' output is skipped, and the
  // bare prompt the paste ends at (its blank cut by the editor) ends the last one.
  const std::string session =
      "[root@gpu-node ~]# uname -r\n"
      "5.14.0-427.13.1.el9_4.x86_64\n"
      "[root@gpu-node ~]# lspci -tv\n" +
      kTree +
      "[root@gpu-node ~]# cd '/var/tmp/nccl logs'\n"
      "[root@gpu-node nccl logs]# lspci -vvv -s 01:00.0\n" +
      kGpuHeader +
      "\n"
      "\tNUMA node: 1\n"
      "[root@gpu-node nccl logs]# exit\n"
      "[nvidia@gpu-node ~]$ nvidia-smi -L\n"
      "GPU 0: NVIDIA H100 PCIe (UUID: GPU-5c2d3c1e-0000-0000-0000-000000000000)\n"
      "[nvidia@gpu-node ~]$\n";
  Topology t = parse(session);
  expect_small_tree(t);
  EXPECT_EQ(dev(t, "0000:01:00.0").numa, 1);
  EXPECT_TRUE(t.notes.empty()) << ::testing::PrintToString(t.notes);
  // Brackets that are no such prompt: a markdown link, "[x]# " without user@host.
  EXPECT_NE(error_of("[root@gpu-node docs](https://example.com)# lspci -tv\n" + kTree), "");
  EXPECT_NE(error_of("[x]# lspci -tv\n" + kTree), "");
  // The same PS1 with the shortest user and host, and a working directory whose name holds
  // brackets ("nccl [old]"): \W prints it as it is, the prompt ends at the "]# " after it.
  for (const std::string prompt : {"[u@gpu-node ~]# lspci -tv", "[root@h ~]# lspci -tv", "[root@gpu-node nccl [old]]# lspci -tv"}) {
    SCOPED_TRACE(prompt);
    expect_small_tree(parse(prompt + "\n" + kTree));
  }
  // Lines that are no "[\u@\h \W]\$ " (a line of plain lspci input, so an error on line 1): its
  // '[' cut, no '@', an empty user or host, the '@' after the blank, a ']' followed by another
  // character than '#' or '$', "]#" with no blank after it.
  for (const std::string line :
       {"root@gpu-node ~]# lspci -tv", "[gpu-node ~]# lspci -tv", "[@gpu-node ~]# lspci -tv", "[root@ ~]# lspci -tv",
        "[root ~]# ssh root@gpu-node lspci -tv", "[root@gpu-node ~]: lspci -tv", "[root@gpu-node ~]#x lspci -tv"}) {
    SCOPED_TRACE(line);
    EXPECT_EQ(error_line(line + "\n" + kTree), 1) << error_of(line + "\n" + kTree);
  }
  // The text ends where its view ends: a last line "[root@gpu-node ~]" is no prompt even where
  // the bytes after the view in memory read "$ ...".
  const std::string buf = "$ lspci -tv\n" + kTree + "[root@gpu-node ~]$ uname -r\n";
  const std::string_view cut = std::string_view(buf).substr(0, buf.find("]$ ") + 1);
  EXPECT_THROW(parse_lspci({TextInput{"cut.txt", cut}}), InputError);
}

TEST(TruthLspciTree, DashNPrintsTheIdsWhereTheNamesWouldBe) {
  // With -n lspci prints the ids alone where it prints names (lib/names.c pci_lookup_name:
  // PCI_LOOKUP_NUMERIC, format_name_pair "%s" of "%04x:%04x"): `lspci -tvn` ends a device's line
  // with "  10de:2330". Without -n, ids that pci.ids lacks print as "Device vvvv:dddd"
  // (format_name_pair with no vendor name). Text that only looks like them stays a name.
  const std::string tree =
      "-[0000:00]-+-00.0  8086:09a2\n"
      "           +-01.0-[01]----00.0  10de:2330\n"
      "           +-02.0-[02]--+-00.0  15b3:1021\n"
      "           |            \\-00.1  15b3:1021\n"
      "           +-03.0-[03]----00.0  Device 1c00:3450\n"
      "           +-04.0-[04]----00.0  10de:233\n"
      "           +-05.0-[05]----00.0  Device 10de:23300\n"
      "           +-07.0-[07]----00.0  10de-2330\n"
      "           +-08.0-[08]----00.0  Device 1c00x3450\n"
      "           \\-06.0-[06]----00.0  Vendor 10de:2330\n";
  Topology t = parse(tree);
  const std::pair<const char*, std::pair<int, int>> ids[] = {{"0000:00:00.0", {0x8086, 0x09a2}},
                                                             {"0000:01:00.0", {0x10de, 0x2330}},
                                                             {"0000:02:00.0", {0x15b3, 0x1021}},
                                                             {"0000:02:00.1", {0x15b3, 0x1021}},
                                                             {"0000:03:00.0", {0x1c00, 0x3450}}};
  for (const auto& [bdf, id] : ids) {
    SCOPED_TRACE(bdf);
    EXPECT_TRUE(dev(t, bdf).ids_known);
    EXPECT_EQ(dev(t, bdf).vendor, id.first);
    EXPECT_EQ(dev(t, bdf).device, id.second);
  }
  EXPECT_EQ(dev(t, "0000:01:00.0").name, "");  // lspci printed no name
  // A device keeps the first name it is given, "Device vvvv:dddd" as any other: the tree of
  // `lspci -tv -i ./pci.ids` (a newer ids file that names the vendor) before the one of the
  // system's older pci.ids.
  const Topology two = parse_lspci({{"new-ids.txt", "-[0000:00]-+-03.0-[03]----00.0  Lab Corporation X1 accelerator\n"},
                                    {"old-ids.txt", "-[0000:00]-+-03.0-[03]----00.0  Device 1c00:3450\n"}});
  EXPECT_EQ(dev(two, "0000:03:00.0").name, "Lab Corporation X1 accelerator");
  EXPECT_EQ(dev(two, "0000:03:00.0").vendor, 0x1c00);
  for (const char* b : {"0000:04:00.0", "0000:05:00.0", "0000:06:00.0", "0000:07:00.0", "0000:08:00.0"}) {
    SCOPED_TRACE(b);
    EXPECT_FALSE(dev(t, b).ids_known);
  }
}

TEST(TruthLspciHeader, DashNListingReadsAsTheDashNnOne) {
  // The real H200 node's config space decoded by pciutils 3.9.0 twice (tests/reference/README.md,
  // truth/): `lspci -vvv -n` prints "00:06.0 0302: 10de:2335 (rev a1)" (lspci.c show_terse,
  // PCI_LOOKUP_CLASS "%04x"), `-vvv -nn` "00:06.0 3D controller [0302]: NVIDIA Corporation GH100
  // [H200 SXM 141GB] [10de:2335] (rev a1)": the same devices, ids, classes, BARs and links.
  const Topology n = parse(slurp(reference("truth/h200x4-run2-lspci-vvv-n.txt")), "n.txt");
  const Topology nn = parse(slurp(reference("truth/h200x4-run2-lspci-vvv.txt")), "nn.txt");
  ASSERT_EQ(n.devices.size(), nn.devices.size());
  for (const Device& want : nn.devices) {
    SCOPED_TRACE(want.bdf);
    const Device& got = dev(n, want.bdf);
    EXPECT_TRUE(got.ids_known);
    EXPECT_EQ(got.vendor, want.vendor);
    EXPECT_EQ(got.device, want.device);
    EXPECT_EQ(got.class_known, want.class_known);
    EXPECT_EQ(got.class_code, want.class_code);
    EXPECT_EQ(got.bars.size(), want.bars.size());
    EXPECT_EQ(got.link_sta.width, want.link_sta.width);
    EXPECT_EQ(got.numa, want.numa);
  }
  EXPECT_EQ(dev(n, "0000:00:06.0").class_code, 0x030200u);
  EXPECT_EQ(dev(n, "0000:00:06.0").device, 0x2335);
  // -n prints the class as "%04x", 4 digits: a hex word of another length is no class number
  // (the 6 digits of the class register, "030200", as setpci -s 06.0 CLASS prints them; "03")
  // and leaves the class unknown, not 0x03020000.
  for (const std::string cls : {"030200", "03"}) {
    SCOPED_TRACE(cls);
    const Topology o = parse("00:06.0 " + cls + ": 10de:2335 (rev a1)\n");
    EXPECT_FALSE(dev(o, "0000:00:06.0").class_known);
    EXPECT_TRUE(dev(o, "0000:00:06.0").ids_known);
  }
}

}  // namespace
}  // namespace gdrpeer::topo

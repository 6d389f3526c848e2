// The readers of the software-stack inputs (stack_read.cpp, readiness_read.cpp) against the
// formats as their producers write them, not against gdrpeer's own output (issue 28: the
// generated operator mutants of these readers that no test killed). Each expectation cites
// where it comes from:
//  - /proc/driver/nvidia/params and version: NVIDIA open-gpu-kernel-modules 580.142,
//    kernel-open/nvidia/nv-procfs.c nv_procfs_read_params() ("%s: %u\n", strings as
//    "%s: \"%s\"\n") and nv_procfs_read_version() ("NVRM version: %s\n" of pNVRM_ID, which
//    utils.mk GENERATE_NVIDSTRING builds as "NVIDIA <name> for <arch>  <version>  <build type>
//    (<user>@<host>)  `date`"); RegistryDwords as src/nvidia/arch/nvalloc/unix/src/osapi.c
//    rm_parse_option_string() reads it, RegistryDwordsPerDevice as kernel-open/nvidia/
//    os-registry.c nv_parse_per_device_option_string() does;
//  - modprobe.d(5) files as kmod reads them (libkmod-config.c conf_files_filter_out(),
//    shared/util.c freadline_wrapped()) and module options as the kernel splits them
//    (lib/cmdline.c next_arg());
//  - the kernel log as /dev/kmsg hands it out (Documentation/ABI/testing/dev-kmsg,
//    kernel/printk/printk.c info_print_ext_header()) with messages quoted from the real
//    fixtures in tests/reference/stack (their README gives each one's source);
//  - the kernel configuration as scripts/kconfig/confdata.c writes and reads it
//    (conf_write_symbol: "CONFIG_X=y", "# CONFIG_X is not set"; conf_read_simple skips a
//    "CONFIG_" line without '='), /proc/config.gz being gzip (kernel/configs.c, IKCONFIG_PROC).
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>  // gzread: the live node's /proc/config.gz

#include <fcntl.h>
#include <algorithm>
#include <cerrno>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "gdrpeer/topo/inputs.hpp"
#include "gdrpeer/topo/model.hpp"
#include "gdrpeer/topo/readiness.hpp"
#include "gdrpeer/topo/stack.hpp"
#include "sysfs_readers.hpp"
#include "test_gzip.hpp"
#include "test_topo_support.hpp"

using namespace gdrpeer::topo;
using gdrpeer::topo::testing::gzip;
using gdrpeer::topo::testing::slurp;

namespace {

std::string reference(const std::string& name) { return slurp(gdrpeer::topo::testing::reference(name)); }

// A file tree as a snapshot holds it (the TarFs every snapshot is read through).
struct Tree {
  std::vector<TarEntry> e;
  Tree& file(const std::string& path, const std::string& data) {
    e.push_back({TarEntry::Type::File, path.substr(1), data});
    return *this;
  }
  Tree& dir(const std::string& path) {
    e.push_back({TarEntry::Type::Directory, path.substr(1), ""});
    return *this;
  }
  std::unique_ptr<InputFs> fs() const {
    std::vector<TarEntry> all = e;
    all.push_back({TarEntry::Type::Directory, "sys", ""});  // never an empty archive
    return make_tar_fs(write_tar(all), "tree.tar");
  }
};

// The same tree, but describing itself as the live node ("/"), as make_dir_fs("/") does: the
// readers then take the kernel log from /dev/kmsg and the big kernel configuration around
// the recorder.
class LiveView : public InputFs {
 public:
  explicit LiveView(std::unique_ptr<InputFs> inner) : inner_(std::move(inner)) {}
  std::optional<std::string> read(const std::string& p, size_t max) override { return inner_->read(p, max); }
  std::optional<std::string> readlink(const std::string& p) override { return inner_->readlink(p); }
  std::optional<std::vector<std::string>> list(const std::string& p) override { return inner_->list(p); }
  std::string describe() const override { return "/"; }

 private:
  std::unique_ptr<InputFs> inner_;
};

// ---------------------------------------------------------------------------------------
// /proc/driver/nvidia/params (nv_procfs_read_params: "%s: %u\n" per static option, then the
// string options as "%s: \"%s\"\n").

using Params = std::map<std::string, std::string>;

// The options parse_nvidia_params takes from `text`, by name.
Params params_of(const std::string& text) {
  StackState s;
  parse_nvidia_params(text, s);
  return s.params;
}

TEST(TruthNvidiaParams, StringOptionsLoseExactlyTheirTwoQuotes) {
  // RmMsg set to a lone double quote prints as `RmMsg: """`; TemporaryFilePath to a path.
  EXPECT_EQ(params_of("RmMsg: \"\"\"\nTemporaryFilePath: \"/var/tmp\"\nExcludedGpus: \"\"\n"),
            (Params{{"RmMsg", "\""}, {"TemporaryFilePath", "/var/tmp"}, {"ExcludedGpus", ""}}));
  // A value the driver never writes as a string (it always prints both quotes) is kept as
  // read: a lone quote, or text that only ends or only starts with one, is no quoted string.
  EXPECT_EQ(params_of("A: \"\nB: x\"\nC: \"x\nD: 1\"\n"), (Params{{"A", "\""}, {"B", "x\""}, {"C", "\"x"}, {"D", "1\""}}));
}

TEST(TruthNvidiaParams, OnlyNameColonValueLinesAreParameters) {
  // The real H200 file (42 options, every line "Name: value"), with lines no driver writes
  // appended: blank, without a colon, with nothing before the colon, a name with a space (the
  // layout of /proc/driver/nvidia/gpus/*/information, "Bus Location: ..."), and an option
  // whose name has one character.
  const std::string real = reference("stack/h200-580.159.04-open-params.txt");
  StackState s;
  parse_nvidia_params(real + "\ngarbage\n: 7\nBus Location: 0000:01:00.0\nA: 5\n", s);
  EXPECT_TRUE(s.params_known);
  EXPECT_EQ(s.params.size(), 43u);
  EXPECT_EQ(s.params.count(""), 0u);
  EXPECT_EQ(s.params.count("garbage"), 0u);
  EXPECT_EQ(s.params.count("Bus Location"), 0u);
  EXPECT_EQ(s.params.at("A"), "5");
  EXPECT_EQ(s.params.at("EnableGpuFirmware"), "18");
  EXPECT_EQ(s.params.at("ImexChannelCount"), "2048");
  // The name ends at the first colon (option names have none); the value is the rest, its
  // surrounding blanks dropped, so a value that itself holds colons stays whole.
  EXPECT_EQ(params_of("EnableMSI:1\nRegistryDwordsPerDevice: \"pci=0000:01:00.0;X=1\"\n"),
            (Params{{"EnableMSI", "1"}, {"RegistryDwordsPerDevice", "pci=0000:01:00.0;X=1"}}));
}

TEST(TruthNvidiaParams, RegistryDwordsAsTheDriverSplitsThem) {
  // rm_parse_option_string: tokens split at ';'; a token is skipped unless it has a non-empty
  // name before '=' and a value after it. The derived H200 file carries the keys NVSHMEM's
  // and GDS's guides set, with the trailing ';' their guides write.
  StackState real;
  parse_nvidia_params(reference("readiness/proc-driver-nvidia-params.h200-with-regkeys.derived.txt"), real);
  const std::map<std::string, std::string> guides = {
      {"PeerMappingOverride", "1"}, {"RMForceStaticBar1", "1"}, {"RmForceDisableIomapWC", "1"}};
  EXPECT_EQ(real.registry_dwords, guides);
  StackState s;
  parse_nvidia_params("GrdmaPciTopoCheckOverride: 0\nRegistryDwords: \"A=2;;=7;NoValue; PeerMappingOverride=1 ;\"\n", s);
  const std::map<std::string, std::string> want = {{"A", "2"}, {"PeerMappingOverride", "1"}};
  EXPECT_EQ(s.registry_dwords, want);
  // A key RegistryDwords does not set keeps the static option's value.
  EXPECT_EQ(s.active_param("GrdmaPciTopoCheckOverride"), "0");
  EXPECT_EQ(s.active_param("A"), "2");
}

TEST(TruthNvidiaParams, RegistryDwordsPerDeviceFollowTheirPciKey) {
  // nv_parse_per_device_option_string: the same token rules; "pci=DDDD:BB:DD.F" selects the
  // GPU the keys after it apply to.
  StackState s;
  parse_nvidia_params("RegistryDwordsPerDevice: \"pci=0000:01:00.0;;=7;NoValue;B=3;pci=0000:02:00.0;RMPcieP2PType=2;C=4\"\n", s);
  const std::map<std::string, std::map<std::string, std::string>> want = {{"0000:01:00.0", {{"B", "3"}}},
                                                                          {"0000:02:00.0", {{"RMPcieP2PType", "2"}, {"C", "4"}}}};
  EXPECT_EQ(s.registry_per_device, want);
  EXPECT_TRUE(s.registry_dwords.empty());
}

// ---------------------------------------------------------------------------------------
// /proc/driver/nvidia/version's first line: "NVRM version: " + pNVRM_ID.

struct VersionCase {
  const char* why;
  std::string line;
  bool open;
  std::string version;
};

TEST(TruthNvidiaVersion, TheVersionIsTheFieldAfterTheModuleName) {
  const auto first = [](const std::string& f) { return f.substr(0, f.find('\n')); };
  const VersionCase cases[] = {
      {"the real H200 node (open module, Nix build: no host)", first(reference("stack/h200-580.159.04-open-version.txt")), true,
       "580.159.04"},
      {"the proprietary module's line (reference/stack/README.md)", first(reference("stack/proprietary-580.159.04-version.txt")), false,
       "580.159.04"},
      // The legacy branches: 96.43.23 (a major version starting with 9) and 1.0-9631 (a
      // one-digit major followed by '.').
      {"legacy 96.43 branch", "NVRM version: NVIDIA UNIX x86_64 Kernel Module  96.43.23  Thu Jun 28 22:07:15 PDT 2012", false, "96.43.23"},
      {"legacy 1.0-9xxx branch", "NVRM version: NVIDIA UNIX x86 Kernel Module  1.0-9631  Thu Nov  9 17:38:30 PST 2006", false, "1.0-9631"},
      {"a major version starting with 0", "NVRM version: NVIDIA UNIX x86_64 Kernel Module  0.9.5  Thu Nov  9 17:38:30 PST 2006", false,
       "0.9.5"},
      // `date` of a build host in a German locale: "Di 28. Apr ..." has a dotted number after
      // the version; the version is still the first one.
      {"a build date in de_DE",
       "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.95.05  Release Build  (builder@host)  Di 28. Apr 09:40:38 UTC 2026",
       true, "580.95.05"},
      // No version field: nothing after it looks like one, whatever dots or digits it has.
      {"no version field",
       "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  Release Build  v2.1  (builder@host.example)  Wed Apr 29 17:32:45 UTC 2026",
       true, ""},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.why);
    StackState s;
    parse_nvidia_version(c.line, s);
    EXPECT_TRUE(s.nvidia_version_known);
    EXPECT_EQ(s.nvidia_open, c.open);
    EXPECT_EQ(s.nvidia_version, c.version);
  }
  // No line (no /proc/driver/nvidia/version): the flavour stays unknown, not "proprietary".
  StackState none;
  parse_nvidia_version("", none);
  EXPECT_FALSE(none.nvidia_version_known);
  EXPECT_FALSE(none.nvidia_open);
}

// ---------------------------------------------------------------------------------------
// modprobe.d(5): "options <module> <option>...", "blacklist <module>", '#' comments, a
// trailing backslash continuing the line; the options as the kernel's next_arg() splits
// them (blanks, tabs; "..." protecting blanks; a name without '=' has no value).

TEST(TruthModprobe, OptionsSplitAsTheKernelSplitsThem) {
  StackState s;
  parse_modprobe_conf(
      "options nvidia NVreg_EnableGpuFirmware=0\tNVreg_RegistryDwords=\"PeerMappingOverride=1;RMForceStaticBar1=1\" "
      "NVreg_OpenRmEnableUnsupportedGpus=1   \n"
      "options\tnvidia-peermem\tpersistent_api_support\tpeerdirect_support=1 dummy\n"
      "options nvidia NVreg_X= NVreg_Y=\"\" NVreg_Z=\"a b\n"
      "options nvidia NVreg_Flag NVreg_W=2\n",
      "/etc/modprobe.d/nvidia.conf", s);
  struct Want {
    int line;
    const char *module, *key, *value;
  };
  const Want want[] = {
      {1, "nvidia", "NVreg_EnableGpuFirmware", "0"},
      {1, "nvidia", "NVreg_RegistryDwords", "PeerMappingOverride=1;RMForceStaticBar1=1"},
      {1, "nvidia", "NVreg_OpenRmEnableUnsupportedGpus", "1"},
      {2, "nvidia_peermem", "persistent_api_support", ""},
      {2, "nvidia_peermem", "peerdirect_support", "1"},
      {2, "nvidia_peermem", "dummy", ""},
      {3, "nvidia", "NVreg_X", ""},
      {3, "nvidia", "NVreg_Y", ""},
      {3, "nvidia", "NVreg_Z", "a b"},  // next_arg: an unclosed quote runs to the end
      {4, "nvidia", "NVreg_Flag", ""},  // next_arg: no '=', no value
      {4, "nvidia", "NVreg_W", "2"},
  };
  ASSERT_EQ(s.modprobe.size(), std::size(want));
  for (size_t i = 0; i < std::size(want); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(s.modprobe[i].file, "/etc/modprobe.d/nvidia.conf");
    EXPECT_EQ(s.modprobe[i].line, want[i].line);
    EXPECT_EQ(s.modprobe[i].module, want[i].module);
    EXPECT_EQ(s.modprobe[i].key, want[i].key);
    EXPECT_EQ(s.modprobe[i].value, want[i].value);
  }
}

// next_arg() never yields an empty name: a blank-only tail or a token "=5" (equals at index 0
// counts as no '=') gives no option named "".
TEST(TruthModprobe, NoOptionHasAnEmptyName) {
  StackState s;
  parse_modprobe_conf("options nvidia =5\noptions nvidia NVreg_A=1 \\\n \n", "/etc/modprobe.d/x.conf", s);
  for (const auto& o : s.modprobe) EXPECT_FALSE(o.key.empty()) << o.file << ":" << o.line << " value " << o.value;
  ASSERT_FALSE(s.modprobe.empty());
  EXPECT_EQ(s.modprobe.back().key, "NVreg_A");
}

// Every quote and blank rule of next_arg() (lib/cmdline.c, Linux 6.1) and parse_args()
// (kernel/params.c), each expectation what that function gives for the same text (checked by
// compiling Linux 6.1's next_arg() beside this reader: no difference on 2 million random
// strings of a, b, =, ", -, blank, tab, CR and 0xa0): a '"' anywhere opens or closes a quoted
// part, so `A="x"B=1` is one option whose value keeps `x"B=1`; a token starting with '"' loses
// it and its closing quote; quotes inside a value stay; the kernel's isspace() (lib/ctype.c)
// counts \v, \f, \r and Latin-1's 0xa0 as blanks; a bare "--" ends the options (load_module()
// ignores what follows it), "--=x" does not.
TEST(TruthModprobe, QuotesAndBlanksAsNextArgTakesThem) {
  struct Case {
    const char* options;
    std::vector<std::pair<std::string, std::string>> want;
  };
  const Case cases[] = {
      {"A=\"x\"B=1", {{"A", "x\"B=1"}}},
      {"\"A=1 2\" B=3", {{"A", "1 2"}, {"B", "3"}}},
      {"A=x\"y z\" C=1", {{"A", "x\"y z\""}, {"C", "1"}}},
      {"A=1\vB=2\fC=3\rD=4", {{"A", "1"}, {"B", "2"}, {"C", "3"}, {"D", "4"}}},
      {"E=5\xa0"
       "F=6",
       {{"E", "5"}, {"F", "6"}}},
      {"=5 G", {{"=5", ""}, {"G", ""}}},
      {"\"\" H", {{"H", ""}}},
      {"\"NVreg_Flag\" I=1", {{"NVreg_Flag", ""}, {"I", "1"}}},
      {"A=1 -- B=2", {{"A", "1"}}},
      {"A=1 --=x B=2", {{"A", "1"}, {"--", "x"}, {"B", "2"}}},
      {"K=\"\" L=\"", {{"K", ""}, {"L", ""}}},
      {"\"K=v\" \"M=\"v\"", {{"K", "v"}, {"M", "v"}}},
      {"\"K= \"A M=\"a\"b \"N=a\"b\"", {{"K", " \"A"}, {"M", "a\"b"}, {"N", "a\"b"}}},
      {"\"K=", {{"K", ""}}},
      {"\"A", {{"A", ""}}},
      {"A=1 B\"", {{"A", "1"}, {"B\"", ""}}},
      {"A=1 \"", {{"A", "1"}}},
      {"M=\"a\"b \"N=a\"b\"", {{"M", "a\"b"}, {"N", "a\"b"}}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.options);
    StackState s;
    parse_modprobe_conf(std::string("options nvidia ") + c.options + "\n", "/etc/modprobe.d/q.conf", s);
    std::vector<std::pair<std::string, std::string>> got;
    for (const auto& o : s.modprobe) got.emplace_back(o.key, o.value);
    EXPECT_EQ(got, c.want);
  }
}

TEST(TruthModprobe, ContinuedLinesAndModulesOutsideTheStack) {
  StackState s;
  parse_modprobe_conf(
      "# options nvidia NVreg_Commented=1\n"
      "options snd-hda-intel power_save=1\n"
      "blacklist nouveau\n"
      "options nvidia NVreg_A=1\\\n"
      " NVreg_B=2 \\\n"
      "\tNVreg_C=3\n"
      "install nvidia_peermem /bin/false\n",
      "/usr/lib/modprobe.d/x.conf", s);
  ASSERT_EQ(s.modprobe.size(), 3u);
  for (const auto& o : s.modprobe) {
    EXPECT_EQ(o.line, 4);  // the logical line starts on line 4
    EXPECT_EQ(o.module, "nvidia");
  }
  EXPECT_EQ(s.modprobe[0].key, "NVreg_A");
  EXPECT_EQ(s.modprobe[0].value, "1");
  EXPECT_EQ(s.modprobe[1].value, "2");
  EXPECT_EQ(s.modprobe[2].key, "NVreg_C");
  EXPECT_EQ(s.modprobe[2].value, "3");
}

// kmod (libkmod-config.c kmod_config_new(), conf_files_insert_sorted()): the files of all four
// directories in the order of their names; of two with one name, the earlier directory's only.
TEST(TruthModprobe, OneNameInTwoDirectoriesIsReadOnceInNameOrder) {
  Tree t;
  t.file("/etc/modprobe.d/nvidia.conf", "options nvidia NVreg_A=1\n");
  t.file("/usr/lib/modprobe.d/nvidia.conf", "options nvidia NVreg_A=2\n");  // masked by /etc's
  t.file("/lib/modprobe.d/nvidia.conf", "options nvidia NVreg_A=3\n");      // masked by /etc's
  t.file("/usr/lib/modprobe.d/a.conf", "options nvidia NVreg_B=1\n");
  t.file("/etc/modprobe.d/z.conf", "options nvidia NVreg_B=2\n");
  Software sw;
  sysfs::read_stack(*t.fs(), sw);
  std::vector<std::string> got;
  for (const auto& o : sw.stack.modprobe) got.push_back(o.file + " " + o.key + "=" + o.value);
  const std::vector<std::string> want = {"/usr/lib/modprobe.d/a.conf NVreg_B=1", "/etc/modprobe.d/nvidia.conf NVreg_A=1",
                                         "/etc/modprobe.d/z.conf NVreg_B=2"};
  EXPECT_EQ(got, want);
}

// kmod's freadline_wrapped(): a backslash before the newline joins the next line directly.
TEST(TruthModprobe, BackslashNewlineJoinsWithNothingBetween) {
  StackState s;
  parse_modprobe_conf("options nvidia NVreg_RegistryDwords=\"PeerMappingOverride=1;\\\nRMForceStaticBar1=1\"\n", "/etc/modprobe.d/x.conf",
                      s);
  ASSERT_EQ(s.modprobe.size(), 1u);
  EXPECT_EQ(s.modprobe[0].value, "PeerMappingOverride=1;RMForceStaticBar1=1");
  EXPECT_EQ(s.modprobe[0].line, 1);
}

TEST(TruthModprobe, ReadStackReadsTheFourDirectoriesConfFilesOnly) {
  // modprobe.d(5): /etc, /run, /usr/lib and /lib modprobe.d, files named *.conf; kmod skips
  // hidden files and a file named only ".conf" (conf_files_filter_out).
  Tree t;
  t.file("/etc/modprobe.d/.hidden.conf", "options nvidia NVreg_Wrong=4\n");
  t.file("/run/modprobe.d/.conf", "options nvidia NVreg_Wrong=5\n");
  t.file("/etc/modprobe.d/nvidia.conf", "options nvidia NVreg_A=1\n");
  t.file("/etc/modprobe.d/a.con", "options nvidia NVreg_Wrong=1\n");
  t.file("/etc/modprobe.d/conf", "options nvidia NVreg_Wrong=2\n");
  t.file("/etc/modprobe.d/nvidia.conf.dpkg-old", "options nvidia NVreg_Wrong=3\n");
  t.file("/etc/modprobe.d/nvidia-conf", "options nvidia NVreg_Wrong=6\n");
  t.file("/run/modprobe.d/b.conf", "options nvidia NVreg_B=2\n");
  t.file("/usr/lib/modprobe.d/c.conf", "options nvidia NVreg_C=3\n");
  t.file("/lib/modprobe.d/d.conf", "options nvidia NVreg_D=4\n");
  auto fs = t.fs();
  Software sw;
  sysfs::read_stack(*fs, sw);
  EXPECT_TRUE(sw.stack.modprobe_read);
  std::vector<std::string> got;
  for (const auto& o : sw.stack.modprobe) got.push_back(o.file + " " + o.key + "=" + o.value);
  // kmod's order: by file name across the directories; nvidia.conf last.
  const std::vector<std::string> want = {"/run/modprobe.d/b.conf NVreg_B=2", "/usr/lib/modprobe.d/c.conf NVreg_C=3",
                                         "/lib/modprobe.d/d.conf NVreg_D=4", "/etc/modprobe.d/nvidia.conf NVreg_A=1"};
  EXPECT_EQ(got, want);
  // None of the directories: not read (unknown), not "no options".
  Software none;
  sysfs::read_stack(*Tree{}.fs(), none);
  EXPECT_FALSE(none.stack.modprobe_read);
}

// ---------------------------------------------------------------------------------------
// The kernel log: /dev/kmsg records "prio,seq,usec,flag;text" with " KEY=value" dictionary
// lines after them (Documentation/ABI/testing/dev-kmsg), or dmesg's "[ seconds] text".

TEST(TruthKernelLog, RecordsAndDmesgLinesAsTheKernelWritesThem) {
  StackState s;
  parse_kernel_log(
      // gpu-operator#2868 (kmsg records, the dmesg -T text as /dev/kmsg holds it)
      "4,2001,5000000,-;nvidia_peermem: disagrees about version of symbol ib_register_peer_memory_client\n"
      " SUBSYSTEM=nvidia-peermem ERROR dictionary values are no messages\n"
      "3,2002,5000001,-;nvidia_peermem: Unknown symbol ib_register_peer_memory_client (err -22)\n"
      "4,2003,5000002,-;nvidia_peermem: disagrees about version of symbol ib_unregister_peer_memory_client\n"
      // nvidia-peermem's peer_err() (nvidia-peermem.c: "nvidia-peermem %s:%d ERROR ")
      "3,2004,5000003,-;nvidia-peermem nv_mem_client_init:573 ERROR nv_mem_client_init -- error while registering traditional client\n"
      // peer_trace(): no ERROR
      "7,2005,5000004,-;nvidia-peermem nv_mem_acquire:200 TRACE nv_mem_acquire -- got pages\n"
      "4,2006,5000005,-;nvidia_peermem: disagrees about version of symbol ib_register_peer_memory_client\n"
      // nv_peer_memory#8 and #84 (dmesg text)
      "[  366.264584] nv_peer_mem: disagrees about version of symbol nvidia_p2p_get_pages\n"
      "[  366.264587] nv_peer_mem: Unknown symbol nvidia_p2p_get_pages (err -22)\n"
      "[Fri Feb 12 11:47:20 2021] nv_peer_mem: Unknown symbol ib_register_peer_memory_client (err 0)\n"
      // the kernel's own mismatch for a module built for another kernel, and DRM's *ERROR*
      "[    5.100000] nvidia: disagrees about version of symbol module_layout\n"
      "[    6.000000] [drm:amdgpu_job_timedout [amdgpu]] *ERROR* ring gfx timeout\n"
      // kernel/module/main.c __symbol_get(): names the symbol, not the module asking for it
      "[    7.000000] failing symbol_get of non-GPLONLY symbol ib_register_peer_memory_client.\n"
      // nv-dmabuf.c nv_dma_buf_attach(): three different reasons, one repeated; a ';' in the
      // text of a dmesg line is text
      "[    8.000000] NVRM: dma-buf attach failed: topology not supported for mapping type FORCE_PCIE\n"
      "[    8.100000] NVRM: dma-buf attach failed: PCI topology not supported for dma-buf\n"
      "[    8.200000] NVRM: dma-buf attach failed: topology not supported for mapping type FORCE_PCIE\n"
      "[    8.300000] NVRM: dma-buf attach failed: importer unable to handle MMIO without struct page; x\n"
      "\n",
      s);
  EXPECT_TRUE(s.kernel_log_read);
  struct Want {
    const char *kind, *module, *line;
  };
  const Want want[] = {
      {"symbol-version", "nvidia_peermem", "nvidia_peermem: disagrees about version of symbol ib_register_peer_memory_client"},
      {"peermem-init", "nvidia-peermem",
       "nvidia-peermem nv_mem_client_init:573 ERROR nv_mem_client_init -- error while registering traditional client"},
      {"symbol-version", "nv_peer_mem", "nv_peer_mem: disagrees about version of symbol nvidia_p2p_get_pages"},
      {"unknown-symbol", "nv_peer_mem", "nv_peer_mem: Unknown symbol ib_register_peer_memory_client (err 0)"},
      {"gpl-symbol-get", "", "failing symbol_get of non-GPLONLY symbol ib_register_peer_memory_client."},
      {"dmabuf-attach", "nvidia", "NVRM: dma-buf attach failed: topology not supported for mapping type FORCE_PCIE"},
      {"dmabuf-attach", "nvidia", "NVRM: dma-buf attach failed: PCI topology not supported for dma-buf"},
      {"dmabuf-attach", "nvidia", "NVRM: dma-buf attach failed: importer unable to handle MMIO without struct page; x"},
  };
  ASSERT_EQ(s.log_causes.size(), std::size(want));
  for (size_t i = 0; i < std::size(want); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(s.log_causes[i].kind, want[i].kind);
    EXPECT_EQ(s.log_causes[i].module, want[i].module);
    EXPECT_EQ(s.log_causes[i].line, want[i].line);
  }
  // Every classified line is kept (a snapshot carries them), repeats included, one a line.
  const std::vector<std::string> kept = {want[0].line, "nvidia_peermem: disagrees about version of symbol ib_unregister_peer_memory_client",
                                         want[1].line, want[0].line,
                                         want[2].line, want[3].line,
                                         want[4].line, want[5].line,
                                         want[6].line, want[5].line,
                                         want[7].line};
  EXPECT_EQ(s.kernel_log, kept);
  std::string text;
  for (const auto& l : kept) text += l + "\n";
  EXPECT_EQ(kernel_log_text(s), text);
}

// The record header's fields: three decimal numbers each before a ',', then the flag and what
// later kernels add before the ';' (",caller=T1234" with CONFIG_PRINTK_CALLER). A line whose
// start is not such a header is text and kept whole.
TEST(TruthKernelLog, KmsgHeaderFieldsAsTheKernelPrintsThem) {
  const std::string msg = "nvidia_peermem: disagrees about version of symbol ib_register_peer_memory_client";
  StackState s;
  parse_kernel_log(
      "3,7,0,-,caller=T1234;nvidia_peermem: Unknown symbol ib_register_peer_memory_client (err 0)\n"
      "4,,5000000,-;" +
          msg + "\n" +                      // an empty sequence number
          "4,2001,x;" + msg + "\n" +        // no timestamp
          "4,2001,5000000;" + msg + "\n" +  // no flag
          "12345\n" +                       // digits only
          "1,2,3,- " + msg + "\n" +         // no ';'
          // rsyslog's RFC 3339 time (kern.log): numbers, but no commas between them
          "2026-09-08T17:16:02.123456+00:00 gpu01 kernel: " + msg + "; again\n",
      s);
  ASSERT_FALSE(s.log_causes.empty());
  EXPECT_EQ(s.log_causes[0].kind, "unknown-symbol");
  EXPECT_EQ(s.log_causes[0].module, "nvidia_peermem");
  const std::vector<std::string> kept = {"nvidia_peermem: Unknown symbol ib_register_peer_memory_client (err 0)",
                                         "4,,5000000,-;" + msg,
                                         "4,2001,x;" + msg,
                                         "4,2001,5000000;" + msg,
                                         "1,2,3,- " + msg,
                                         "2026-09-08T17:16:02.123456+00:00 gpu01 kernel: " + msg + "; again"};
  EXPECT_EQ(s.kernel_log, kept);
}

// Only dmesg's leading "[time] " is a prefix; brackets later in a record's text are text
// (Documentation/ABI/testing/dev-kmsg: the text follows the ';' as printed), and a '[' without
// a closing "] " opens no timestamp.
TEST(TruthKernelLog, BracketsInsideTheTextAreText) {
  StackState s;
  parse_kernel_log(
      "3,9,0,-;nvidia-peermem nv_mem_acquire:281 ERROR nv_mem_acquire -- error -22 [pid 4242] while calling nvidia_p2p_put_pages()\n"
      "[nvidia-peermem nv_mem_client_init:603 ERROR nv_mem_client_init -- error while registering nc client\n",
      s);
  const std::vector<std::string> kept = {
      "nvidia-peermem nv_mem_acquire:281 ERROR nv_mem_acquire -- error -22 [pid 4242] while calling nvidia_p2p_put_pages()",
      "[nvidia-peermem nv_mem_client_init:603 ERROR nv_mem_client_init -- error while registering nc client"};
  EXPECT_EQ(s.kernel_log, kept);
}

TEST(TruthKernelLog, SnapshotEntryIsReadOnlyFromSnapshots) {
  Tree t;
  t.file("/gdrpeer-snapshot/kernel-log", reference("stack/kmsg-nv-peer-memory-84.txt"));
  Software sw;
  sysfs::read_stack(*t.fs(), sw);
  EXPECT_TRUE(sw.stack.kernel_log_read);
  ASSERT_EQ(sw.stack.log_causes.size(), 1u);
  EXPECT_EQ(sw.stack.log_causes[0].kind, "unknown-symbol");
  EXPECT_EQ(sw.stack.kernel_log.size(), 2u);
  // Without the entry the log is unknown, not empty.
  Software none;
  sysfs::read_stack(*Tree{}.fs(), none);
  EXPECT_FALSE(none.stack.kernel_log_read);
}

// The live node: /dev/kmsg itself. Its records are this machine's, so only what does not
// depend on them is checked: readable means read (even with no peer-memory line in it), and
// the snapshot entry of the tree underneath is not what the live reader takes.
TEST(TruthKernelLog, LiveNodeReadsDevKmsg) {
  const int probe = ::open("/dev/kmsg", O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (probe < 0) GTEST_SKIP() << "/dev/kmsg is not readable here (errno " << errno << "): needs root or dmesg_restrict=0";
  ::close(probe);
  Tree t;
  t.file("/gdrpeer-snapshot/kernel-log", reference("stack/kmsg-nv-peer-memory-84.txt"));
  LiveView live(t.fs());
  Software sw;
  // fd 0 closed: /dev/kmsg may then be opened as descriptor 0, still a valid one.
  const int saved = ::dup(0);
  ::close(0);
  sysfs::read_stack(live, sw);
  ::dup2(saved, 0);
  ::close(saved);
  EXPECT_TRUE(sw.stack.kernel_log_read);
  for (const auto& l : sw.stack.kernel_log) EXPECT_EQ(l.find("ib_unregister_peer_memory_client (err 0)"), std::string::npos) << l;
}

// What the live reader keeps of /dev/kmsg: its record's text. This machine's own log holds no
// peer-memory line, so a child bind-mounts a file holding one record in the ABI's form
// (Documentation/ABI/testing/dev-kmsg) over /dev/kmsg in a mount namespace of its own.
TEST(TruthKernelLog, LiveReaderKeepsTheRecordsText) {
  if (::geteuid() != 0) GTEST_SKIP() << "a private mount namespace needs root";
  char path[] = "/tmp/gdrpeer-kmsg-XXXXXX";
  const int fd = ::mkstemp(path);
  ASSERT_GE(fd, 0);
  const std::string record = "3,9,0,-;nv_peer_mem: Unknown symbol ib_register_peer_memory_client (err 0)\n SUBSYSTEM=module\n";
  ASSERT_EQ(::write(fd, record.data(), record.size()), static_cast<ssize_t>(record.size()));
  ::close(fd);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    if (::unshare(CLONE_NEWNS) != 0 || ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
        ::mount(path, "/dev/kmsg", nullptr, MS_BIND, nullptr) != 0)
      ::_exit(2);
    LiveView live(Tree{}.fs());
    Software sw;
    sysfs::read_stack(live, sw);
    const std::vector<std::string> want = {"nv_peer_mem: Unknown symbol ib_register_peer_memory_client (err 0)"};
    // A plain file ends with a read of 0 bytes: read to its end, no cut.
    ::_exit(sw.stack.kernel_log_read && sw.stack.kernel_log == want && sw.stack.kernel_log_cut.empty() ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ::unlink(path);
  ASSERT_TRUE(WIFEXITED(status));
  if (WEXITSTATUS(status) == 2) GTEST_SKIP() << "no private mount namespace here (unshare/mount refused)";
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the live reader did not keep the record's text";
}

// An unreadable /dev/kmsg (no CAP_SYSLOG with kernel.dmesg_restrict=1: kernel/printk/printk.c
// check_syslog_permissions() refuses devkmsg_open()) leaves the kernel log unknown, not read and
// empty. As root the check runs in a child that drops to nobody.
TEST(TruthKernelLog, UnreadableDevKmsgLeavesTheLogUnknown) {
  const auto unknown_after_read = [] {
    LiveView live(Tree{}.fs());
    Software sw;
    sysfs::read_stack(live, sw);
    return !sw.stack.kernel_log_read;
  };
  const int probe = ::open("/dev/kmsg", O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (probe < 0) {
    EXPECT_TRUE(unknown_after_read());
    return;
  }
  ::close(probe);
  if (::geteuid() != 0) GTEST_SKIP() << "/dev/kmsg is readable without root here: no unreadable case to try";
  if (slurp("/proc/sys/kernel/dmesg_restrict") != "1\n") GTEST_SKIP() << "kernel.dmesg_restrict is 0: everyone may read /dev/kmsg";
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    if (::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(2);
    const int fd = ::open("/dev/kmsg", O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd >= 0) ::_exit(3);
    ::_exit(unknown_after_read() ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  if (WEXITSTATUS(status) == 2) GTEST_SKIP() << "could not drop to uid 65534 here";
  if (WEXITSTATUS(status) == 3) GTEST_SKIP() << "uid 65534 may read /dev/kmsg here";
  EXPECT_EQ(WEXITSTATUS(status), 0) << "read_stack said the kernel log was read though /dev/kmsg could not be opened";
}

// A model of /dev/kmsg for one non-blocking reader, as kernel/printk/printk.c (Linux 6.1)
// writes it: devkmsg_open() starts the reader at the oldest record left; devkmsg_read() hands
// out one record a read(), formatted as info_print_ext_header() ("prio,seq,usec,flag;") and
// msg_print_ext_body() (the text, '\n', then " SUBSYSTEM=..."/" DEVICE=..." lines) do; the
// oldest record left is newer than the one the reader wants when printk() has overwritten
// records since: -EPIPE, the reader moved to that record; no record left: -EAGAIN. A read()
// fails as libc's does: -1 with errno set, errno left alone on success. `before_read` is what
// the kernel prints between two reads (the n-th read is n, counting from 1).
class ModelKmsg {
 public:
  struct Record {
    unsigned long long seq;
    std::string text, dict;
  };
  std::deque<Record> ring;  // the records still in the ring, oldest first
  std::function<void(ModelKmsg&, int)> before_read;
  int reads = 0, reads_after_eagain = 0;

  void print(const std::string& text, const std::string& dict = "") { ring.push_back({next_seq_++, text, dict}); }
  void overwrite(size_t n) { ring.erase(ring.begin(), ring.begin() + static_cast<long>(std::min(n, ring.size()))); }
  void open() { user_seq_ = ring.empty() ? next_seq_ : ring.front().seq; }
  static std::string format(const Record& r) {
    return "6," + std::to_string(r.seq) + "," + std::to_string(r.seq * 1000) + ",-;" + r.text + "\n" + r.dict;
  }

  ssize_t read(char* buf, size_t count) {
    ++reads;
    if (eagain_) ++reads_after_eagain;
    if (before_read) before_read(*this, reads);
    // The oldest record at or after the reader's (the ring is in seq order: a binary search).
    auto r = std::lower_bound(ring.begin(), ring.end(), user_seq_, [](const Record& x, unsigned long long seq) { return x.seq < seq; });
    if (r == ring.end()) {
      eagain_ = true;
      errno = EAGAIN;
      return -1;
    }
    if (r->seq != user_seq_) {
      user_seq_ = r->seq;
      errno = EPIPE;
      return -1;
    }
    const std::string out = format(*r);
    user_seq_ = r->seq + 1;
    if (out.size() > count) {
      errno = EINVAL;
      return -1;
    }
    std::copy(out.begin(), out.end(), buf);
    return static_cast<ssize_t>(out.size());
  }

 private:
  unsigned long long next_seq_ = 1000;
  unsigned long long user_seq_ = 0;
  bool eagain_ = false;
};

// Records overwritten while the log is read (a burst of printk() between two reads) cost the
// reader those records, not the rest of the log: after the EPIPE the next read gives the
// oldest record left, and every record after it is read once. The first EAGAIN is the end
// (Documentation/ABI/testing/dev-kmsg: a non-blocking read returns -EAGAIN when no more data
// is available): no read after it.
TEST(TruthKernelLog, OverwrittenRecordsCostOnlyThemselves) {
  ModelKmsg k;
  k.print("nvidia_peermem: disagrees about version of symbol ib_register_peer_memory_client");
  k.print("usb 1-1: new high-speed USB device number 2 using xhci_hcd", " SUBSYSTEM=usb\n DEVICE=c189:1\n");
  k.print("random: crng init done");
  k.open();
  k.before_read = [](ModelKmsg& m, int n) {
    if (n != 2) return;
    m.print("mlx5_core 0000:17:00.0: E-Switch: Total vports 2, per vport: max uc(128) max mc(2048)");
    m.print("nv_peer_mem: Unknown symbol ib_register_peer_memory_client (err 0)", " SUBSYSTEM=module\n");
    m.overwrite(4);  // the read record, the two unread ones and the first new one
  };
  const sysfs::KmsgText log = sysfs::read_kmsg([&k](char* b, size_t n) { return k.read(b, n); });
  const std::string& text = log.text;
  EXPECT_EQ(log.stopped, "");  // overwritten records are lost, the log is still read to its end
  EXPECT_EQ(text,
            "6,1000,1000000,-;nvidia_peermem: disagrees about version of symbol ib_register_peer_memory_client\n"
            "6,1004,1004000,-;nv_peer_mem: Unknown symbol ib_register_peer_memory_client (err 0)\n SUBSYSTEM=module\n");
  EXPECT_EQ(k.reads, 4);  // a record, EPIPE, a record, EAGAIN
  EXPECT_EQ(k.reads_after_eagain, 0);
  StackState s;
  parse_kernel_log(text, s);
  ASSERT_EQ(s.log_causes.size(), 2u);
  EXPECT_EQ(s.log_causes[0].kind, "symbol-version");
  EXPECT_EQ(s.log_causes[1].kind, "unknown-symbol");
  EXPECT_EQ(s.log_causes[1].module, "nv_peer_mem");
}

// A log that grows as fast as it is read (a record printed before every read: never EAGAIN)
// still ends, with every record that was there when the reader opened it; it stops after the
// 200,000 records docs/check.md documents (the one more read that finds a record is not taken)
// and says that it stopped short of the end.
TEST(TruthKernelLog, ALogPrintedAsFastAsItIsReadEnds) {
  // Mutants: read_kmsg's cap (records <= 200000, 200000 + 1, 200000 - 1) and the read after it.
  ModelKmsg k;
  k.print("nv_peer_mem: Unknown symbol ib_register_peer_memory_client (err 0)");
  k.print("random: crng init done");
  k.open();
  k.before_read = [](ModelKmsg& m, int) {
    m.print("x");
    m.overwrite(m.ring.size() > 8 ? 1 : 0);
  };
  const sysfs::KmsgText log = sysfs::read_kmsg([&k](char* b, size_t n) { return k.read(b, n); });
  EXPECT_EQ(log.text.rfind("6,1000,1000000,-;nv_peer_mem: Unknown symbol ib_register_peer_memory_client (err 0)\n"
                           "6,1001,1001000,-;random: crng init done\n",
                           0),
            0u);
  EXPECT_EQ(std::count(log.text.begin(), log.text.end(), '\n'), 200000);
  EXPECT_EQ(k.reads, 200001);
  EXPECT_EQ(log.stopped, "stopped after its first 200000 records (a log printed as fast as it is read)");
}

// A log of exactly the 200,000 records the reader takes is read whole: the read after the last
// one gets EAGAIN, so nothing says it was cut, and nothing is read after that EAGAIN.
TEST(TruthKernelLog, ALogOfExactlyTheCapIsReadWhole) {
  ModelKmsg k;
  for (int i = 0; i < 200000; ++i) k.print(i == 199999 ? "nv_peer_mem: Unknown symbol ib_register_peer_memory_client (err 0)" : "x");
  k.open();
  const sysfs::KmsgText log = sysfs::read_kmsg([&k](char* b, size_t n) { return k.read(b, n); });
  EXPECT_EQ(log.stopped, "");
  EXPECT_EQ(std::count(log.text.begin(), log.text.end(), '\n'), 200000);
  EXPECT_EQ(k.reads, 200001);  // 200,000 records and the EAGAIN
  EXPECT_EQ(k.reads_after_eagain, 0);
  StackState s;
  parse_kernel_log(log.text, s);
  ASSERT_EQ(s.log_causes.size(), 1u);  // the last record is read
  EXPECT_EQ(s.log_causes[0].module, "nv_peer_mem");
  // One record more: the 200,001st is not taken, and the reader says so.
  ModelKmsg more;
  for (int i = 0; i < 200001; ++i) more.print("x");
  more.open();
  const sysfs::KmsgText cut = sysfs::read_kmsg([&more](char* b, size_t n) { return more.read(b, n); });
  EXPECT_EQ(std::count(cut.text.begin(), cut.text.end(), '\n'), 200000);
  EXPECT_NE(cut.stopped, "");
}

// A successful read() leaves errno as it was (POSIX: errno is set on failure only), so an EAGAIN
// or EPIPE left from before is neither the end nor an overwrite: only a read that returned -1 is.
TEST(TruthKernelLog, AStaleErrnoIsNoErrorOfTheRead) {
  for (const int stale : {EAGAIN, EPIPE}) {
    ModelKmsg k;
    k.print("random: crng init done");
    k.print("nv_peer_mem: Unknown symbol ib_register_peer_memory_client (err 0)");
    k.open();
    errno = stale;
    const sysfs::KmsgText log = sysfs::read_kmsg([&k](char* b, size_t n) { return k.read(b, n); });
    EXPECT_EQ(log.text,
              "6,1000,1000000,-;random: crng init done\n"
              "6,1001,1001000,-;nv_peer_mem: Unknown symbol ib_register_peer_memory_client (err 0)\n")
        << stale;
    EXPECT_EQ(log.stopped, "") << stale;
  }
}

// A plain file in /dev/kmsg's place (the bind mount above) ends with a read of 0 bytes (read(2):
// end of file), whatever errno a read before it left: the end, read whole, and no read after it.
TEST(TruthKernelLog, AReadOfNothingIsTheEndOfAFile) {
  const std::string record = "3,9,0,-;nv_peer_mem: Unknown symbol ib_register_peer_memory_client (err 0)\n";
  int reads = 0, after_end = 0;
  errno = EPIPE;
  const sysfs::KmsgText log = sysfs::read_kmsg([&](char* b, size_t n) -> ssize_t {
    if (++reads > 2) ++after_end;
    if (reads > 1) return 0;
    std::copy(record.begin(), record.begin() + static_cast<long>(std::min(n, record.size())), b);
    return static_cast<ssize_t>(record.size());
  });
  EXPECT_EQ(log.text, record);
  EXPECT_EQ(log.stopped, "");
  EXPECT_EQ(after_end, 0);
}

// A read that fails otherwise than with EAGAIN or EPIPE ends the reading short, and says so:
// devkmsg_read() returns -EINVAL when the record does not fit the reader's buffer (the model
// does too), and every record after it is unread.
TEST(TruthKernelLog, AFailedReadIsNotTheEnd) {
  ModelKmsg k;
  k.print("random: crng init done");
  k.print(std::string(9000, 'y'));  // longer than read_kmsg's 8 KiB buffer
  k.print("nv_peer_mem: Unknown symbol ib_register_peer_memory_client (err 0)");
  k.open();
  const sysfs::KmsgText log = sysfs::read_kmsg([&k](char* b, size_t n) { return k.read(b, n); });
  EXPECT_EQ(log.text, "6,1000,1000000,-;random: crng init done\n");
  EXPECT_EQ(log.stopped, "a read() of /dev/kmsg failed after 1 reads (errno " + std::to_string(EINVAL) + ")");
  EXPECT_EQ(k.reads, 2);
}

// A snapshot carries the live reader's cut beside its kernel log (gdrpeer-snapshot/kernel-log-cut,
// written by `gdrpeer snapshot`; docs/check.md); without that file the log was read whole.
TEST(TruthKernelLog, ASnapshotCarriesTheCut) {
  for (const bool cut : {false, true}) {
    Tree t;
    t.file("/gdrpeer-snapshot/kernel-log", reference("stack/kmsg-nv-peer-memory-84.txt"));
    if (cut) t.file("/gdrpeer-snapshot/kernel-log-cut", "stopped after its first 200000 records (a log printed as fast as it is read)\n");
    Software sw;
    sysfs::read_stack(*t.fs(), sw);
    EXPECT_TRUE(sw.stack.kernel_log_read);
    EXPECT_EQ(sw.stack.kernel_log_cut, cut ? "stopped after its first 200000 records (a log printed as fast as it is read)" : "");
  }
}

// A snapshot's kernel log is read up to 1 MiB (docs/check.md): a file of exactly 1 MiB is read
// whole, a longer one to 1 MiB, and the cut is said (after the live reader's, when both are).
TEST(TruthKernelLog, ASnapshotLogLongerThanOneMiBIsSaidToBeCut) {
  const std::string cause = "nv_peer_mem: Unknown symbol ib_register_peer_memory_client (err 0)\n";
  std::string log(size_t{1} << 20, 'x');  // a whole dmesg put there: filler, the cause last
  log.replace(log.size() - cause.size() - 1, cause.size() + 1, "\n" + cause);
  const std::string longer = "\n" + log.substr(1) + "y";  // one byte more, the cause still in the first 1 MiB
  const std::string live_cut = "stopped after its first 200000 records (a log printed as fast as it is read)";
  const std::string said = "gdrpeer-snapshot/kernel-log is longer than 1 MiB: only its first 1 MiB read";
  struct Case {
    const std::string* text;
    bool live_cut;
    std::string want;
  } cases[] = {{&log, false, ""}, {&longer, false, said}, {&longer, true, live_cut + "; " + said}};
  for (const Case& c : cases) {
    Tree t;
    t.file("/gdrpeer-snapshot/kernel-log", *c.text);
    if (c.live_cut) t.file("/gdrpeer-snapshot/kernel-log-cut", live_cut + "\n");
    Software sw;
    sysfs::read_stack(*t.fs(), sw);
    EXPECT_EQ(sw.stack.kernel_log_cut, c.want) << c.text->size();
    ASSERT_EQ(sw.stack.log_causes.size(), 1u) << c.text->size();
    EXPECT_EQ(sw.stack.log_causes[0].module, "nv_peer_mem");
  }
}

// ---------------------------------------------------------------------------------------
// memory_peers (MOFED ib_core peer_mem.c: a directory per client, holding version and its
// counters), gdrpeer's and nvidia_peermem's /sys/module entries (kernel/params.c: one file
// per parameter under parameters/; kernel/module/sysfs.c: version for a MODULE_VERSION).

TEST(TruthSysfsModules, PeerClientsAndModuleParameters) {
  Tree t;
  t.file("/sys/kernel/mm/memory_peers/nv_mem/version", "1.0\n");
  t.file("/sys/kernel/mm/memory_peers/nv_mem/num_alloc_mrs", "12\n");
  t.file("/sys/kernel/mm/memory_peers/nv_mem/num_free_callbacks", "0\n");
  t.file("/sys/kernel/mm/memory_peers/nvidia-fs/num_reg_pages", "4096\n");  // no version file
  t.file("/sys/module/nvidia_peermem/version", "580.159.04\n");
  t.file("/sys/module/nvidia_peermem/parameters/peerdirect_support", "0\n");
  t.file("/sys/module/nvidia_peermem/parameters/persistent_api_support", "1\n");
  t.file("/sys/module/gdrpeer/parameters/peermem_name", "gdrpeer\n");
  t.file("/sys/class/gdrpeer/gdrpeer/providers/peermem/cuda", "left to nvidia_peermem\n");
  Software sw;
  sysfs::read_stack(*t.fs(), sw);
  const StackState& s = sw.stack;
  ASSERT_EQ(s.peer_clients.size(), 2u);
  const PeerClient* nv = s.client("nv_mem");
  ASSERT_TRUE(nv);
  EXPECT_TRUE(nv->has_version);
  EXPECT_EQ(nv->version, "1.0");
  const std::map<std::string, std::string> counters = {{"num_alloc_mrs", "12"}, {"num_free_callbacks", "0"}};
  EXPECT_EQ(nv->counters, counters);  // version is not a counter
  const PeerClient* fs = s.client("nvidia-fs");
  ASSERT_TRUE(fs);
  EXPECT_FALSE(fs->has_version);
  EXPECT_EQ(fs->counters.at("num_reg_pages"), "4096");
  EXPECT_TRUE(s.peermem_sysfs);
  EXPECT_EQ(s.peermem_version, "580.159.04");
  const std::map<std::string, std::string> params = {{"peerdirect_support", "0"}, {"persistent_api_support", "1"}};
  EXPECT_EQ(s.peermem_params, params);
  EXPECT_EQ(s.gdrpeer_client, "gdrpeer");
  EXPECT_EQ(s.gdrpeer_cuda, "left to nvidia_peermem");
}

TEST(TruthSysfsModules, VersionFileOfTheDriverIsParsedWhenPresentOnly) {
  Tree t;
  Software with;
  with.nvidia_version = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.159.04  Wed Apr 29 17:32:45 UTC 2026";
  sysfs::read_stack(*t.fs(), with);
  EXPECT_TRUE(with.stack.nvidia_version_known);
  EXPECT_FALSE(with.stack.nvidia_open);
  EXPECT_EQ(with.stack.nvidia_version, "580.159.04");
  Software without;
  sysfs::read_stack(*t.fs(), without);
  EXPECT_FALSE(without.stack.nvidia_version_known);
}

// ---------------------------------------------------------------------------------------
// The kernel configuration (scripts/kconfig/confdata.c).

TEST(TruthKernelConfig, ConfdataLinesOnly) {
  KernelConfig kc;
  parse_kernel_config(
      "#\n# Automatically generated file; DO NOT EDIT.\n#\n\n"
      "CONFIG_PCI_P2PDMA\n"                 // conf_read_simple: no '=', skipped
      "# CONFIG_ZONE_DEVICE was removed\n"  // a comment, not "is not set"
      "##CONFIG_PCI_ATS is not set\n"       // not "# CONFIG_"
      "CONFIG_DMABUF_MOVE_NOTIFY=y\n"
      "# CONFIG_NVME_MULTIPATH is not set\n"
      "CONFIG_INFINIBAND_USER_MEM=m",  // the last line without its newline
      "/boot/config-x", kc);
  EXPECT_TRUE(kc.known);
  EXPECT_EQ(kc.source, "/boot/config-x");
  const std::map<std::string, std::string> want = {
      {"CONFIG_DMABUF_MOVE_NOTIFY", "y"}, {"CONFIG_NVME_MULTIPATH", "n"}, {"CONFIG_INFINIBAND_USER_MEM", "m"}};
  EXPECT_EQ(kc.values, want);
}

// The kernel configuration read_readiness takes from `fs` on a node running kernel `release`.
KernelConfig kernel_config_of(InputFs& fs, const std::string& release) {
  Software sw;
  sw.kernel_release = release;
  sysfs::read_readiness(fs, sw);
  return sw.readiness.kconfig;
}

TEST(TruthKernelConfig, WhichFileIsRead) {
  const std::string debian = reference("readiness/debian-config-6.1.0-56-amd64.excerpt");  // P2PDMA n, MULTIPATH y
  const std::string running = "6.1.0-56-amd64";
  // The snapshot's kept options win over /boot and /proc/config.gz.
  {
    Tree t;
    t.file("/gdrpeer-snapshot/kernel-config", "# source: /boot/config-6.1.0-56-amd64\n# CONFIG_PCI_P2PDMA is not set\n");
    t.file("/boot/config-6.1.0-56-amd64", "CONFIG_PCI_P2PDMA=y\n");
    t.file("/proc/config.gz", gzip("CONFIG_PCI_P2PDMA=y\n"));
    const KernelConfig kc = kernel_config_of(*t.fs(), running);
    EXPECT_EQ(kc.source, "/boot/config-6.1.0-56-amd64");
    EXPECT_EQ(kc.values.at("CONFIG_PCI_P2PDMA"), "n");
  }
  // A kept entry without its "# source: " line names itself.
  EXPECT_EQ(kernel_config_of(*Tree{}.file("/gdrpeer-snapshot/kernel-config", "CONFIG_PCI_P2PDMA=y\n").fs(), "").source,
            "gdrpeer-snapshot/kernel-config");
  // /boot/config-<release> (uname -r names it) before /proc/config.gz.
  {
    Tree t;
    t.file("/boot/config-6.1.0-56-amd64", debian);
    t.file("/proc/config.gz", gzip("CONFIG_PCI_P2PDMA=y\n"));
    const KernelConfig kc = kernel_config_of(*t.fs(), running);
    EXPECT_EQ(kc.source, "/boot/config-6.1.0-56-amd64");
    EXPECT_EQ(kc.values.at("CONFIG_PCI_P2PDMA"), "n");
  }
  // An unknown release names no /boot file; a release is one file name (no '/').
  for (const std::string release : {"", "6.1/x"}) {
    SCOPED_TRACE(release);
    Tree t;
    t.file("/boot/config-", "CONFIG_PCI_P2PDMA=y\n");
    t.file("/boot/config-6.1/x", "CONFIG_PCI_P2PDMA=y\n");
    EXPECT_FALSE(kernel_config_of(*t.fs(), release).known);
  }
  // /proc/config.gz is gzip (kernel/configs.c); anything else there is damaged: unknown.
  EXPECT_FALSE(kernel_config_of(*Tree{}.file("/proc/config.gz", "CONFIG_PCI_P2PDMA=y\n").fs(), running).known);
  // Nothing: unknown (the machine running the test has its own /proc/config.gz: not read).
  EXPECT_FALSE(kernel_config_of(*Tree{}.fs(), running).known);
}

// The live node: /boot/config-$(uname -r), else /proc/config.gz, read directly. The expected
// options are read here with zlib's gzip reader and confdata's two line forms.
TEST(TruthKernelConfig, LiveNodeReadsProcConfigGz) {
  gzFile gz = gzopen("/proc/config.gz", "rb");
  if (!gz) GTEST_SKIP() << "/proc/config.gz is not on this machine (CONFIG_IKCONFIG_PROC)";
  std::string text;
  char buf[65536];
  for (int n; (n = gzread(gz, buf, sizeof buf)) > 0;) text.append(buf, static_cast<size_t>(n));
  gzclose(gz);
  std::map<std::string, std::string> want;
  for (const char* k : {"CONFIG_PCI_P2PDMA", "CONFIG_ZONE_DEVICE", "CONFIG_DMABUF_MOVE_NOTIFY", "CONFIG_DMA_SHARED_BUFFER",
                        "CONFIG_NVME_MULTIPATH", "CONFIG_INFINIBAND_USER_MEM", "CONFIG_PCI_ATS"}) {
    const std::string set = "\n" + std::string(k) + "=", unset = "\n# " + std::string(k) + " is not set\n";
    if (size_t at = text.find(set); at != std::string::npos) {
      at += set.size();
      want[k] = text.substr(at, text.find('\n', at) - at);
    } else if (text.find(unset) != std::string::npos) {
      want[k] = "n";
    }
  }
  LiveView live(Tree{}.fs());
  const KernelConfig kc = kernel_config_of(live, "gdrpeer-test-no-such-release");  // no /boot/config of that name
  EXPECT_TRUE(kc.known);
  EXPECT_EQ(kc.source, "/proc/config.gz");
  EXPECT_EQ(kc.values, want);
}

TEST(TruthReadinessInputs, NvmeCoreModuleDirectory) {
  // /sys/module/nvme_core exists whenever nvme_core is loaded or built in (kernel/params.c
  // param_sysfs_builtin() creates parameters/ for built-in modules too); multipath is its bool
  // parameter, "Y" or "N" (param_get_bool).
  Tree t;
  t.file("/sys/module/nvme_core/parameters/multipath", "N\n");
  Software sw;
  sysfs::read_readiness(*t.fs(), sw);
  EXPECT_TRUE(sw.readiness.nvme_core_seen);
  EXPECT_EQ(sw.readiness.nvme_multipath, "N");
  Software none;
  sysfs::read_readiness(*Tree{}.fs(), none);
  EXPECT_FALSE(none.readiness.nvme_core_seen);
  EXPECT_EQ(none.readiness.nvme_multipath, "");
}

TEST(TruthKernelConfig, KeptTextRoundTrips) {
  // kernel_config_text writes confdata's two forms back; parse_kernel_config reads them.
  KernelConfig kc;
  kc.known = true;
  kc.source = "/proc/config.gz";
  kc.values = {{"CONFIG_PCI_P2PDMA", "n"}, {"CONFIG_ZONE_DEVICE", "y"}};
  EXPECT_EQ(kernel_config_text(kc), "# source: /proc/config.gz\n# CONFIG_PCI_P2PDMA is not set\nCONFIG_ZONE_DEVICE=y\n");
}

}  // namespace

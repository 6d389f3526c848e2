// Unit tests of the readers under the parsers: the rule data's errors, whole-file input reading, config space read on demand, the hwloc
// reader's duplicate addresses, and the class table a report holds.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <tuple>

#include <nlohmann/json.hpp>

#include "gdrpeer/topo/errors.hpp"
#include "gdrpeer/topo/inputs.hpp"
#include "gdrpeer/topo/rule_data.hpp"
#include "gdrpeer/topo/rules.hpp"
#include "test_topo_support.hpp"

namespace gdrpeer::topo {
namespace {

const std::string kData = GDRPEER_TEST_TOPOLOGY_DIR;

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A fresh directory under $TMPDIR, removed with its files at the end of the test.
class TempDir {
 public:
  TempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = std::string(base && *base ? base : "/tmp") + "/gdrpeer-test-XXXXXX";
    if (!::mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
  }
  ~TempDir() {
    for (const auto& f : files_) ::unlink(f.c_str());
    ::rmdir(path_.c_str());
  }
  std::string write(const std::string& name, const std::string& bytes) {
    std::string p = path_ + "/" + name;
    std::ofstream(p, std::ios::binary) << bytes;
    files_.push_back(p);
    return p;
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::vector<std::string> files_;
};

// ---- rule data on top of it ---------------------------------------------------

class BrokenData : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* f : {"devices.json", "gpus.json", "root_complexes.json", "platforms.json"}) dir_.write(f, slurp(kData + "/" + f));
  }
  std::string load_error() {
    try {
      RuleData::load(dir_.path());
    } catch (const DataError& e) {
      return e.what();
    }
    return "";
  }
  TempDir dir_;
};

TEST_F(BrokenData, IntactCopyLoads) { EXPECT_EQ(load_error(), ""); }

TEST_F(BrokenData, SyntaxErrorNamesFileLineColumn) {
  dir_.write("gpus.json", "{\n  \"schema\": 1,\n  \"families\": [\n}\n");
  std::string e = load_error();
  EXPECT_NE(e.find("/gpus.json:4:1: "), std::string::npos) << e;
}

// Text RFC 8259 rejects (section named per case) is refused with FILE:LINE:COL of the
// character the grammar cannot take: counted here by hand from the text, 1-based.
TEST_F(BrokenData, MalformedTextNamesTheOffendingCharacter) {
  struct Case {
    const char* text;
    const char* where;  // "line:col"
    const char* rfc;
  };
  const Case cases[] = {
      {"{\"a\": 1,}", "1:9", "4: a member name is a string"},
      {"{\n  \"a\" 1}", "2:7", "4: name-separator after a name"},
      {"[1 2]", "1:4", "5: value-separator between values"},
      {"[\"a\nb\"]", "1:4", "7: control characters must be escaped"},
      {"[\"\\q\"]", "1:4", "7: no such escape"},
      {"[01]", "1:3", "6: no leading zeros"},
      {"[1.]", "1:4", "6: a digit after the decimal point"},
      {"[-]", "1:3", "6: a digit after the minus"},
      {"[tru]", "1:5", "3: literal names are lowercase true/false/null"},
      {"{} {}", "1:4", "2: one value per text"},
      {"", "1:1", "2: a text is one value"},
      {"\n\n   ", "3:4", "2: a text is one value"},
  };
  for (const auto& c : cases) {
    dir_.write("devices.json", c.text);
    const std::string e = load_error();
    EXPECT_NE(e.find(std::string("/devices.json:") + c.where + ": "), std::string::npos) << "RFC 8259 section " << c.rfc << ": " << e;
  }
  // A number beyond a double (RFC 8259 section 6 lets an implementation limit the range).
  dir_.write("devices.json", "[1e999]");
  EXPECT_NE(load_error().find("/devices.json"), std::string::npos);
  // Deep nesting is an error here (not an object with "schema": 1), never a crash.
  dir_.write("devices.json", std::string(100000, '[') + std::string(100000, ']'));
  EXPECT_NE(load_error().find("expected a JSON object with \"schema\": 1"), std::string::npos);
}

// Members are read in file order: of two vendor names of one length, the first listed wins
// (nlohmann::json, unordered, would sort them by name).
TEST_F(BrokenData, VendorNamesKeepFileOrder) {
  dir_.write("devices.json", R"({"schema": 1, "gpu_vendors": [], "rdma_nics": [], "flatten_switches": [],
                                 "vendor_names": {"15b3": ["Zeta"], "10de": ["Acme"]}})");
  ASSERT_EQ(load_error(), "");
  RuleData k = RuleData::load(dir_.path());
  ASSERT_EQ(k.vendor_names.size(), 2u);
  EXPECT_EQ(k.vendor_names[0].first, "Zeta");
  EXPECT_EQ(k.vendor_names[0].second, 0x15b3);
}

TEST_F(BrokenData, WrongSchemaOrTypesAreRefused) {
  dir_.write("platforms.json", R"({"schema": 2, "rules": []})");
  EXPECT_NE(load_error().find("platforms.json: expected a JSON object with \"schema\": 1"), std::string::npos);
  dir_.write("platforms.json", slurp(kData + "/platforms.json"));
  dir_.write("gpus.json", R"({"schema": 1, "bar1_min_mib": "256", "families": []})");
  EXPECT_NE(load_error().find("gpus.json bar1_min_mib: expected an integer"), std::string::npos) << load_error();
  dir_.write("gpus.json", R"({"schema": 1, "families": [{"name": "no family key"}]})");
  EXPECT_NE(load_error().find("gpus.json families: missing \"family\""), std::string::npos) << load_error();
  dir_.write("gpus.json", R"({"schema": 1, "families": [{"family": "x", "devices": ["12345"]}]})");
  EXPECT_NE(load_error().find("expected a 16-bit hex id, found \"12345\""), std::string::npos) << load_error();
  dir_.write("gpus.json", slurp(kData + "/gpus.json"));
  dir_.write("root_complexes.json", R"({"schema": 1, "root_complexes": [{"name": "X", "p2p": "great"}]})");
  EXPECT_NE(load_error().find("root complex \"X\": p2p must be good, poor or unsupported"), std::string::npos);
}

// ---- whole-file input ---------------------------------------------------------

TEST(InputFile, SmallAndLargeFilesReadBackExactly) {
  TempDir d;
  std::string small = "<system version=\"1\">\n</system>\n";
  std::string large;
  for (int i = 0; large.size() < 300000; ++i) large += "line " + std::to_string(i) + " \x01\xff\n";
  EXPECT_EQ(InputFile(d.write("small.xml", small)).bytes(), small);  // read
  EXPECT_EQ(InputFile(d.write("large.xml", large)).bytes(), large);  // mapped
  EXPECT_EQ(InputFile(d.write("empty", "")).bytes(), "");
}

TEST(InputFile, NonRegularFilesAreRead) {
  // procfs reports size 0 for files that are not empty.
  std::string status(InputFile("/proc/self/status").bytes());
  EXPECT_NE(status.find("Pid:"), std::string::npos);
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  std::string payload(100000, 'p');  // more than one pipe buffer: written by a child
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::close(fds[0]);
    size_t off = 0;
    while (off < payload.size()) {
      ssize_t n = ::write(fds[1], payload.data() + off, payload.size() - off);
      if (n <= 0) ::_exit(1);
      off += static_cast<size_t>(n);
    }
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string got(InputFile("/proc/self/fd/" + std::to_string(fds[0])).bytes());
  ::close(fds[0]);
  int st = 0;
  ::waitpid(pid, &st, 0);
  EXPECT_EQ(got, payload);
}

// A file truncated by someone else while it is being checked (a dump still being
// rewritten by a collector) must not kill the checker: a mapping of the file
// would raise SIGBUS on the pages past the new end. The contents read stay valid.
TEST(InputFile, FileTruncatedAfterOpeningKeepsItsContents) {
  TempDir d;
  std::string large;
  for (int i = 0; large.size() < 300000; ++i) large += "<object type=\"PCIDev\" os_index=\"" + std::to_string(i) + "\"/>\n";
  const std::string path = d.write("shrinking.xml", large);
  InputFile f(path);
  ASSERT_EQ(::truncate(path.c_str(), 0), 0);
  std::string_view b = f.bytes();
  ASSERT_EQ(b.size(), large.size());
  // Touch every page (the mapping this replaced faulted on the first one past 0).
  unsigned sum = 0, want = 0;
  for (char c : b) sum += static_cast<unsigned char>(c);
  for (char c : large) want += static_cast<unsigned char>(c);
  EXPECT_EQ(sum, want);
  EXPECT_EQ(b, large);
}

TEST(InputFile, MissingAndDirectoryAreMissingInputWithTheErrno) {
  try {
    InputFile("/nonexistent/gdrpeer-input.xml");
    ADD_FAILURE() << "no exception";
  } catch (const MissingInput& e) {
    EXPECT_NE(std::string(e.what()).find("No such file or directory"), std::string::npos) << e.what();
  }
  // A directory given where a file belongs (--hwloc DIR) says so (issue 25; it read as empty
  // and the XML parser then reported a syntax error).
  TempDir d;
  try {
    InputFile{d.path()};
    ADD_FAILURE() << "no exception";
  } catch (const MissingInput& e) {
    EXPECT_NE(std::string(e.what()).find("Is a directory"), std::string::npos) << e.what();
  }
}

// ---- the class table ------------------------------------------------------------

TEST(ClassTable, EqualsClassifyForEveryLabelledPair) {
  RuleData k = RuleData::load(kData);
  for (const char* ref : {"aws-p5en.48xlarge.xml", "aws-p4d.24xlarge.xml", "stelline-asus-esc8000a-e12.md"}) {
    std::string text = slurp(std::string(GDRPEER_TEST_REFERENCE_DIR) + "/" + ref);
    ASSERT_FALSE(text.empty()) << ref;
    Topology t = detect_format(text) == InputFormat::HwlocXml ? parse_hwloc_xml(text, ref) : parse_lspci({{ref, text}});
    assign_roles(t, k);
    CheckOptions opt;
    opt.gpu_nvme = true;
    Report r = check(t, k, opt);
    std::vector<int> all = r.gpus;
    all.insert(all.end(), r.nics.begin(), r.nics.end());
    all.insert(all.end(), r.nvmes.begin(), r.nvmes.end());
    ASSERT_GE(all.size(), 4u) << ref;
    for (int a : all)
      for (int b : all)
        if (a != b) {
          EXPECT_EQ(r.path_class(a, b), classify(t, a, b, k).cls) << ref << " " << a << "-" << b;
        }
    for (const auto& p : r.pairs) {
      PathInfo want = classify(t, p.a, p.b, k);
      EXPECT_EQ(p.path.cls, want.cls);
      EXPECT_EQ(p.path.ports_a, want.ports_a);
      EXPECT_EQ(p.path.ports_b, want.ports_b);
      EXPECT_EQ(p.path.lca, want.lca);
    }
  }
}

// ---- config space read on demand ---------------------------------------------------

// The same synthetic node as a directory (pread of config space, dword by dword)
// and as a snapshot (config space held in memory) must give the same devices,
// for config files of every length a reader can get (64 bytes unprivileged,
// 256 conventional, 4 KiB extended, odd lengths from broken dumps).
TEST(ConfigSpace, OnDemandReadsEqualWholeFileReads) {
  testing::FakeNode n = testing::switch_node();
  for (auto& f : n.fns)
    if (f.acs) f.acs_ctl = 0x001d;  // SrcValid, ReqRedir, CmpltRedir, UpstreamFwd
  std::vector<TarEntry> entries = n.entries();
  // Lengths per config file in entry order, cycling; 4096 first keeps one full device.
  const size_t lengths[] = {4096, 256, 64, 63, 4095, 0x107, 0x53, 300};
  size_t i = 0, extended = 0;
  for (auto& e : entries)
    if (e.type == TarEntry::Type::File && e.path.size() > 7 && e.path.compare(e.path.size() - 7, 7, "/config") == 0) {
      size_t len = lengths[i++ % (sizeof lengths / sizeof lengths[0])];
      if (len == 4096 && e.data.size() == 4096) {
        // An ATS capability after ACS, to walk a two-entry extended list.
        e.data[0x103] = 0x20;  // next capability at 0x200
        e.data[0x200] = 0x0f;  // ATS
        e.data[0x202] = 0x01;
        e.data[0x207] = static_cast<char>(0x80);  // ATS enabled
        ++extended;
      }
      e.data.resize(std::min(len, e.data.size()));
    }
  ASSERT_GE(i, 5u);
  ASSERT_GE(extended, 1u);

  std::string tar = write_tar(entries);
  auto mem = make_tar_fs(tar, "fake.tar");
  Topology from_tar = parse_sysfs(*mem, "fake.tar");

  TempDir d;
  std::filesystem::path root = d.path() + "/root";
  for (const auto& e : entries) {
    std::filesystem::path p = root / e.path;
    if (e.type == TarEntry::Type::Directory) {
      std::filesystem::create_directories(p);
    } else {
      std::filesystem::create_directories(p.parent_path());
      if (e.type == TarEntry::Type::Symlink)
        std::filesystem::create_symlink(e.data, p);
      else
        std::ofstream(p, std::ios::binary) << e.data;
    }
  }
  auto dir = make_dir_fs(root.string());
  Topology from_dir = parse_sysfs(*dir, root.string());
  std::filesystem::remove_all(root);

  ASSERT_EQ(from_dir.devices.size(), from_tar.devices.size());
  ASSERT_GE(from_tar.devices.size(), 5u);
  size_t acs_known = 0, ats = 0;
  for (size_t k = 0; k < from_tar.devices.size(); ++k) {
    const Device& a = from_tar.devices[k];
    const Device& b = from_dir.devices[k];
    SCOPED_TRACE(a.bdf);
    // What the two readings take from sysfs and the config space, compared at once.
    const auto read = [](const Device& x) {
      return std::tie(x.bdf, x.port, x.is_bridge, x.secondary_bus, x.link_cap.width, x.link_cap.speed_gts, x.link_sta.width,
                      x.link_sta.speed_gts, x.mps, x.mrrs, x.acs_known, x.acs_present, x.acs_ctl, x.ats_present, x.ats_enabled);
    };
    EXPECT_EQ(read(a), read(b));
    acs_known += a.acs_known;
    ats += a.ats_enabled;
  }
  // The cases differ from each other, so the comparison above compared something.
  EXPECT_GE(acs_known, 1u);
  EXPECT_LT(acs_known, from_tar.devices.size());
  EXPECT_GE(ats, 1u);
}

// ---- hwloc and rule-data ids ------------------------------------------------

// Hex ids in the rule data read as strtoul reads them (sign, 0x, leading space).
TEST_F(BrokenData, HexIdsReadAsStrtoulReadsThem) {
  const std::string dev = slurp(kData + "/devices.json");
  const std::string shipped = R"("gpu_vendors": ["10de", "1002", "8086"])";
  ASSERT_NE(dev.find(shipped), std::string::npos);
  const std::vector<std::string> ids = {"10DE", "a", "0", "0x10de", " 10de", "+10de", "-0", "000010de", "0Xffff"};
  std::string list = R"("gpu_vendors": [)";
  for (size_t i = 0; i < ids.size(); ++i) list += (i ? ", \"" : "\"") + ids[i] + "\"";
  list += "]";
  std::string edited = dev;
  edited.replace(edited.find(shipped), shipped.size(), list);
  dir_.write("devices.json", edited);
  RuleData k = RuleData::load(dir_.path());
  ASSERT_EQ(k.gpu_vendors.size(), ids.size());
  for (size_t i = 0; i < ids.size(); ++i) EXPECT_EQ(k.gpu_vendors[i], std::strtoul(ids[i].c_str(), nullptr, 16)) << ids[i];
  for (const char* bad : {"g", "10de ", "1 0", "", "-1", "10000", "0x"}) {
    edited = dev;
    edited.replace(edited.find(shipped), shipped.size(), std::string(R"("gpu_vendors": [")") + bad + "\"]");
    dir_.write("devices.json", edited);
    EXPECT_NE(load_error().find("expected a 16-bit hex id"), std::string::npos) << bad << ": " << load_error();
  }
}

std::string hwloc_doc(const std::vector<std::string>& pcidevs) {
  std::string x =
      "<?xml version=\"1.0\"?>\n<topology version=\"2.0\">\n <object type=\"Machine\" os_index=\"0\">\n"
      "  <object type=\"Bridge\" bridge_type=\"0-1\" bridge_pci=\"0000:[10-10]\">\n";
  for (const auto& p : pcidevs) x += "   <object type=\"PCIDev\" " + p + "/>\n";
  return x + "  </object>\n </object>\n</topology>\n";
}

// The duplicate-address check compares normalized addresses, and names the second object's line.
TEST(HwlocReader, DuplicateAddresses) {
  // A second object with one address is read with a note (as hwloc loads it with a warning).
  auto note_of = [](const std::vector<std::string>& devs) -> std::string {
    std::string notes;
    for (const auto& n : parse_hwloc_xml(hwloc_doc(devs), "t.xml").notes) notes += n + "\n";
    return notes;
  };
  EXPECT_EQ(note_of({R"(pci_busid="0000:10:00.0")", R"(pci_busid="0000:10:00.1")", R"(pci_busid="0001:10:00.0")",
                     R"(pci_busid="10000:10:00.0")", R"(pci_busid="0000:11:00.0")"}),
            "");
  std::string e = note_of({R"(pci_busid="0000:10:00.0")", R"(pci_busid="0000:10:01.0")", R"(pci_busid="0000:10:00.0")"});
  EXPECT_NE(e.find("t.xml:7: duplicate PCI device 0000:10:00.0"), std::string::npos) << e;
  e = note_of({R"(pci_busid="0000:10:1C.0")", R"(pci_busid="0000:10:1c.0")"});  // same address, other case
  EXPECT_NE(e.find("duplicate PCI device 0000:10:1c.0"), std::string::npos) << e;
  e = note_of({R"(pci_busid="0001a:10:00.0")", R"(pci_busid="001a:10:00.0")"});  // one domain, 5 and 4 digits
  EXPECT_NE(e.find("duplicate PCI device"), std::string::npos) << e;
}

}  // namespace
}  // namespace gdrpeer::topo

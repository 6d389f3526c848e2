#include "inputs.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <memory>
#include <stdexcept>
#include <string>

#include "gdrpeer/topo/errors.hpp"
#include "gdrpeer/topo/inputs.hpp"
#include "gdrpeer/topo/node_capture.hpp"
#include "snapshot_partial.hpp"

namespace gdrpeer::cli {

namespace {

bool is_dir(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// `b` itself, or its contents decompressed into `unpacked` when it is gzip, xz, zstd or bzip2.
std::string_view plain_bytes(std::string_view b, const std::string& name, std::string& unpacked) {
  if (topo::detect_compression(b) == topo::Compression::None) return b;
  unpacked = topo::decompress(b, name);
  return unpacked;
}

// A snapshot written without root (snapshot_partial.hpp) says so; the check repeats it.
void note_partial_snapshot(topo::InputFs& fs, topo::Topology& t) {
  if (auto why = fs.read(kSnapshotPartialPath, 4096)) {
    while (!why->empty() && why->back() == '\n') why->pop_back();
    t.notes.push_back("partial snapshot: " + *why);
  }
}

}  // namespace

std::vector<NodeSpec> node_specs(const InputOptions& in) {
  std::vector<NodeSpec> out;
  for (const auto& p : in.positional) out.push_back({NodeSpec::Kind::Path, {p}});
  if (!in.sysfs_root.empty()) out.push_back({NodeSpec::Kind::Path, {in.sysfs_root}});
  for (const auto& p : in.hwloc) out.push_back({NodeSpec::Kind::Hwloc, {p}});
  for (const auto& p : in.nccl) out.push_back({NodeSpec::Kind::Nccl, {p}});
  if (!in.lspci.empty()) out.push_back({NodeSpec::Kind::Lspci, in.lspci});
  if (out.empty()) out.push_back({NodeSpec::Kind::Live, {}});
  size_t stdin_uses = 0;
  for (const auto& s : out) stdin_uses += static_cast<size_t>(std::count(s.paths.begin(), s.paths.end(), "-"));
  if (stdin_uses > 1)
    throw std::invalid_argument("\"-\" (standard input) is given " + std::to_string(stdin_uses) + " times; it can be read once");
  return out;
}

topo::Topology load_node(const NodeSpec& spec, const InputOptions& in, const topo::RuleData& k, NodeBuffers* reuse) {
  std::string* scratch = reuse ? &reuse->input : nullptr;
  auto spare_devices = [&] { return reuse ? std::move(reuse->devices) : std::vector<topo::Device>{}; };
  topo::Topology t;
  bool live = false;
  switch (spec.kind) {
    case NodeSpec::Kind::Live: {
      auto fs = topo::make_dir_fs("/");
      live = true;
      // NVML by default (tens of ms, no CUDA context, asked while sysfs is read); the CUDA
      // driver only on request (cuInit is most of a live check's time, docs/benchmarks.md).
      topo::LiveOptions lo;
      lo.cuda = in.cuda && !in.no_cuda;
      t = topo::read_live_node(*fs, "live sysfs", lo);
      if (const std::string why = unprivileged_config_space(); !why.empty()) t.notes.push_back(why);
      break;
    }
    case NodeSpec::Kind::Hwloc: {
      topo::InputFile f(spec.paths[0], scratch);
      std::string unpacked;
      t = topo::parse_hwloc_xml(plain_bytes(f.bytes(), spec.paths[0], unpacked), spec.paths[0], spare_devices());
      break;
    }
    case NodeSpec::Kind::Nccl: {
      topo::InputFile f(spec.paths[0], scratch);
      std::string unpacked;
      t = topo::parse_nccl_xml(plain_bytes(f.bytes(), spec.paths[0], unpacked), spec.paths[0], spare_devices());
      break;
    }
    case NodeSpec::Kind::Lspci: {
      std::vector<std::unique_ptr<topo::InputFile>> files;
      for (const auto& p : spec.paths) files.push_back(std::make_unique<topo::InputFile>(p));
      std::vector<std::string> unpacked(files.size());
      std::vector<topo::TextInput> ins;
      for (size_t i = 0; i < files.size(); ++i) ins.push_back({spec.paths[i], plain_bytes(files[i]->bytes(), spec.paths[i], unpacked[i])});
      t = topo::parse_lspci(ins);
      break;
    }
    case NodeSpec::Kind::Path: {
      const std::string& p = spec.paths[0];
      if (is_dir(p)) {
        auto fs = topo::make_dir_fs(p);
        t = topo::parse_sysfs(*fs, p);
        t.format = "sysfs-root";
        note_partial_snapshot(*fs, t);
        break;
      }
      topo::InputFile f(p, scratch);
      std::string_view b = f.bytes();
      std::string unpacked;  // a compressed input's contents
      const topo::Compression compression = topo::detect_compression(b);
      b = plain_bytes(b, p, unpacked);
      topo::InputFormat format = topo::detect_format(b);
      if (format == topo::InputFormat::Compressed) format = topo::InputFormat::Unknown;  // compressed twice
      switch (format) {
        case topo::InputFormat::SnapshotTar: {
          auto fs = topo::make_tar_fs(std::string(b), p);
          t = topo::parse_sysfs(*fs, p);
          // hwloc-gather-topology writes NODE.tar.bz2; gdrpeer snapshot any compression.
          t.format = compression == topo::Compression::Bzip2 ? "hwloc-gather-topology" : "snapshot";
          note_partial_snapshot(*fs, t);
          break;
        }
        case topo::InputFormat::HwlocXml: t = topo::parse_hwloc_xml(b, p, spare_devices()); break;
        case topo::InputFormat::NcclXml: t = topo::parse_nccl_xml(b, p, spare_devices()); break;
        case topo::InputFormat::Lspci: {
          std::vector<topo::TextInput> ins{{p, b}};
          t = topo::parse_lspci(ins);
          break;
        }
        default:
          throw topo::InputError(p, 1,
                                 "expected a sysfs snapshot (tar, plain or gzip/xz/zstd/bzip2), hwloc XML (<topology>), NCCL "
                                 "topology XML (<system>) or lspci text");
      }
      break;
    }
  }
  topo::assign_roles(t, k);
  for (const auto& r : in.roles) topo::apply_role_override(t, r);
  for (const auto& b : in.gpus) topo::apply_role_override(t, "GPU=" + b);
  for (const auto& b : in.nics) topo::apply_role_override(t, "NIC=" + b);
  for (const auto& b : in.nvmes) topo::apply_role_override(t, "NVME=" + b);
  if (std::find(in.probes.begin(), in.probes.end(), "ibgda") != in.probes.end()) {
    if (!live) throw std::invalid_argument("--probe ibgda asks this machine's devices: it needs the live node (no inputs)");
    t.sw.ibgda_probe = topo::run_ibgda_probe(t, *topo::make_live_ibgda_probe());
    if (!t.sw.ibgda_probe.ran) t.notes.push_back("--probe ibgda did not run: " + t.sw.ibgda_probe.error);
  }
  return t;
}

topo::RuleData load_rule_data(const InputOptions& in) {
  std::string dir = in.data_dir.empty() ? topo::RuleData::default_dir() : in.data_dir;
  return topo::RuleData::load(dir);
}

}  // namespace gdrpeer::cli

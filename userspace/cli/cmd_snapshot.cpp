// `gdrpeer snapshot`: a tarball of exactly the files `gdrpeer check` reads on this node, and
// the drivers' answers, to be checked elsewhere.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "commands.hpp"
#include "gdrpeer/topo/inputs.hpp"
#include "gdrpeer/topo/node_capture.hpp"
#include "guarded.hpp"
#include "output_file.hpp"
#include "snapshot_partial.hpp"

#ifndef GDRPEER_VERSION
#define GDRPEER_VERSION "unknown"
#endif

namespace gdrpeer::cli {

namespace {

int run_snapshot(const std::string& out, const std::string& root, bool no_cuda, const OutputPolicy& policy) {
  return guarded([&] {
    auto base = topo::make_dir_fs(root.empty() ? "/" : root);
    // A snapshot is checked elsewhere: it carries NVML's and (unless --no-cuda) the CUDA
    // driver's answers, /proc/driver/nvidia/params, the time, hostname and versions.
    topo::SnapshotOptions so;
    so.ask_drivers = root.empty();
    so.cuda = !no_cuda;
    so.tool_version = GDRPEER_VERSION;
    topo::Snapshot snap = topo::take_snapshot(*base, root.empty() ? "live sysfs" : root, so);
    std::vector<topo::TarEntry>& entries = snap.entries;
    const topo::Topology& t = snap.topology;
    // The kernel configuration was read around the recorder (it is ~270 KB): carry the options kept.
    if (t.sw.readiness.kconfig.known && root.empty())
      entries.push_back({topo::TarEntry::Type::File, "gdrpeer-snapshot/kernel-config", topo::kernel_config_text(t.sw.readiness.kconfig)});
    // The kernel log is a character device, not a file the recorder sees: carry the lines
    // the checker kept (peer-memory load failures, dma-buf attach refusals).
    if (root.empty() && t.sw.stack.kernel_log_read)
      entries.push_back({topo::TarEntry::Type::File, "gdrpeer-snapshot/kernel-log", topo::kernel_log_text(t.sw.stack)});
    // ... and, when /dev/kmsg was not read to its end, why: the check of the snapshot says it too.
    if (root.empty() && !t.sw.stack.kernel_log_cut.empty())
      entries.push_back({topo::TarEntry::Type::File, "gdrpeer-snapshot/kernel-log-cut", t.sw.stack.kernel_log_cut + "\n"});
    // Read as non-root, config space beyond 64 bytes is missing (the kernel gives unprivileged
    // readers only the header): say so inside the snapshot, and here.
    if (root.empty()) {
      if (std::string why = unprivileged_config_space(); !why.empty()) {
        entries.push_back({topo::TarEntry::Type::File, std::string(kSnapshotPartialPath).substr(1), why + "\n"});
        std::fprintf(stderr, "gdrpeer: warning: %s\n", why.c_str());
      }
    }
    std::string bytes = topo::write_tar(entries, snapshot_compression(out));
    write_output(out, bytes, policy);
    if (out == "-") return 0;
    std::fprintf(stderr, "gdrpeer: wrote %s: %zu entries, %zu PCI functions, %zu bytes\n", out.c_str(), entries.size(), t.devices.size(),
                 bytes.size());
    return 0;
  });
}

}  // namespace

void add_snapshot_command(CLI::App& app, int& exit_code) {
  auto snap_out = std::make_shared<std::string>();
  auto snap_root = std::make_shared<std::string>();
  auto snap_nocuda = std::make_shared<bool>(false);
  CLI::App* s = app.add_subcommand("snapshot", "Write a tarball of exactly the files `gdrpeer check` reads on this node");
  s->add_option("output", *snap_out, "Output tarball (\"-\" for stdout)")->required();
  s->add_option("--sysfs-root", *snap_root, "Snapshot a sysfs copy below this directory instead of /");
  s->add_flag("--no-cuda", *snap_nocuda, "Do not record the CUDA driver's GPUDirect RDMA / dma-buf answers");
  auto snap_policy = std::make_shared<OutputPolicy>();
  s->add_flag("--follow-symlinks", snap_policy->follow_symlinks_anywhere,
              "The output may be a symbolic link to another directory (written through, the link kept)");
  s->callback([snap_out, snap_root, snap_nocuda, snap_policy, &exit_code] {
    exit_code = run_snapshot(*snap_out, *snap_root, *snap_nocuda, *snap_policy);
  });
}

}  // namespace gdrpeer::cli

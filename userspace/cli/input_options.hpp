// The input options `gdrpeer check` and `gdrpeer topo` both add (inputs.hpp's InputOptions).
// Inline here rather than in inputs.cpp: every file that includes CLI11 runs its validators'
// static constructors at start-up, so only the cmd_X.cpp files and main.cpp include it.
#pragma once

#include <CLI/CLI.hpp>

#include "inputs.hpp"

namespace gdrpeer::cli {

inline void add_input_options(CLI::App* c, InputOptions& in) {
  c->add_option("inputs", in.positional,
                "Node dumps, one node each: sysfs snapshot (.tar or directory), hwloc XML, NCCL topology XML, or lspci text "
                "(format detected from the contents). Without inputs: this machine's live sysfs.");
  c->add_option("--sysfs-root", in.sysfs_root, "Read sysfs/procfs below this directory or snapshot tarball instead of /");
  c->add_option("--hwloc", in.hwloc, "hwloc XML (lstopo --of xml); repeatable, one node each")->allow_extra_args(false);
  c->add_option("--nccl-xml", in.nccl, "NCCL topology XML (NCCL_TOPO_DUMP_FILE / NCCL_TOPO_FILE); repeatable, one node each")
      ->allow_extra_args(false);
  c->add_option("--lspci", in.lspci, "lspci -tv / -vvv text or a transcript holding them; repeatable, all form ONE node")
      ->allow_extra_args(false);
  c->add_option("--role", in.roles, "Override a device's role: GPU=BDF, NIC=BDF, NVME=BDF or NONE=BDF (repeatable)")
      ->allow_extra_args(false);
  c->add_option("--gpu", in.gpus, "Same as --role GPU=BDF")->allow_extra_args(false);
  c->add_option("--nic", in.nics, "Same as --role NIC=BDF")->allow_extra_args(false);
  c->add_option("--nvme", in.nvmes, "Same as --role NVME=BDF")->allow_extra_args(false);
  c->add_option("--data-dir", in.data_dir,
                "Rule data directory (default: $GDRPEER_DATA_DIR, the installed share dir, the data built into this binary)");
  c->add_flag("--cuda", in.cuda,
              "Live mode: also ask the CUDA driver (dlopen libcuda, cuInit) whether each GPU supports GPUDirect RDMA and dma-buf; "
              "NVML (libnvidia-ml: NVLinks, fabric state) is asked without it whenever an NVIDIA GPU is present");
  c->add_flag("--no-cuda", in.no_cuda, "Do not ask the CUDA driver (the default; kept for scripts)");
}

}  // namespace gdrpeer::cli

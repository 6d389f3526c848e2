// Ask the CUDA driver (libcuda.so.1, loaded at run time through gdrpeer/dynload)
// whether each GPU supports GPUDirect RDMA and dma-buf. Live mode only; a node
// without CUDA gets cuda_error set and nothing else. `library` overrides the soname.
#pragma once

#include <string>

#include "gdrpeer/topo/model.hpp"

namespace gdrpeer::topo {

void probe_cuda(Software& sw, const char* library = "libcuda.so.1");
// Ask NVML (libnvidia-ml.so.1, or `library`) for each GPU's active NVLinks and where
// they lead (another GPU or an NVSwitch): probe_nvml + apply_nvml (nvml_probe.hpp).
// Returns "" or why NVML could not be asked (also in t.nvml_note).
std::string probe_nvlink(Topology& t, const char* library = "libnvidia-ml.so.1");
// The probe's answers as the text file a snapshot carries ("gdrpeer-snapshot/cuda-probe").
std::string cuda_probe_text(const Software& sw);
// Parse that text back (used by the sysfs parser for snapshots).
void parse_cuda_probe_text(const std::string& text, Software& sw);

}  // namespace gdrpeer::topo

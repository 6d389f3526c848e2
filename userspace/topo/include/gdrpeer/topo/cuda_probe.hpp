// Ask the CUDA driver (dlopen'ed libcuda.so.1, never linked) whether each GPU
// supports GPUDirect RDMA and dma-buf. Live mode only; a node without CUDA
// gets cuda_error set and nothing else.
#pragma once

#include <string>

#include "gdrpeer/topo/model.hpp"

namespace gdrpeer::topo {

void probe_cuda(Software& sw);
// The probe's answers as the text file a snapshot carries ("gdrpeer-snapshot/cuda-probe").
std::string cuda_probe_text(const Software& sw);
// Parse that text back (used by the sysfs parser for snapshots).
void parse_cuda_probe_text(const std::string& text, Software& sw);

}  // namespace gdrpeer::topo

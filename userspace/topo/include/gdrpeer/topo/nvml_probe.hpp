// What NVML (libnvidia-ml.so.1, loaded at run time through gdrpeer/dynload) says
// about each GPU's NVLinks and its NVSwitch fabric state, as one record: asked on
// the live node (every `gdrpeer check` of a node with an NVIDIA GPU, and `gdrpeer
// snapshot`), written into a snapshot as text, read back from it, and applied to a
// Topology by the same code either way, so that a snapshot checks as the node did.
// NVML creates no CUDA context; the CUDA driver is asked only with --cuda.
#pragma once

#include <string>
#include <vector>

#include "gdrpeer/topo/model.hpp"

namespace gdrpeer::topo {

struct NvmlLink {
  unsigned index = 0;
  bool active = false;
  std::string remote_bus_id;  // as NVML writes it ("00000000:07:00.0"; "FFFFFFFF:FF:FF.0" hidden)
  int remote_type = -1;       // nvmlIntNvLinkDeviceType_t: 0 GPU, 1 IBM NPU, 2 NVSwitch; -1 not said
};

struct NvmlGpu {
  std::string bus_id;                         // NVML's busId
  unsigned pci_device_id = 0;                 // (device << 16) | vendor, as nvmlPciInfo_t has it
  int fabric_state = -1, fabric_status = -1;  // -1: not asked / not available
  std::vector<NvmlLink> links;                // every link index NVML answered for, in order
};

struct NvmlRecord {
  bool asked = false;
  std::string error;           // why NVML could not answer (then nothing else is known)
  std::string library;         // what was loaded
  std::string driver_version;  // nvmlSystemGetDriverVersion, "" when not available
  std::vector<NvmlGpu> gpus;
};

// Asks NVML now. nvmlInit runs at most once per process (per library name); the
// per-GPU questions stop at the first link index NVML refuses (past the GPU's last
// link), so a GPU without NVLink costs one call.
NvmlRecord probe_nvml(const char* library = "libnvidia-ml.so.1");

// The record as the snapshot file "gdrpeer-snapshot/nvml" holds it, and back.
std::string nvml_record_text(const NvmlRecord& r);
NvmlRecord parse_nvml_record_text(const std::string& text);

// NVLink edges (t.nvlinks, t.nvlink_known), fabric states and one note (t.nvml_note)
// from the record; nothing when it was not asked. An NVML that could not answer
// leaves NVLink unknown (t.nvml_failed).
void apply_nvml(const NvmlRecord& r, Topology& t);

// Whether the node has an NVIDIA display/3D function (the GPUs NVML knows).
bool has_nvidia_gpu_function(const Topology& t);

}  // namespace gdrpeer::topo

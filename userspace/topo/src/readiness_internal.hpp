// Shared by the readiness files: the stage check() runs after the stack stage, and
// its outputs (text lines, JSON objects).
#pragma once

#include <string>

#include "gdrpeer/topo/readiness.hpp"
#include "gdrpeer/topo/rules.hpp"
#include "json_writer.hpp"

namespace gdrpeer::topo {

// Per NVIDIA GPU x NIC the IBGDA mode, per NVIDIA GPU x NVMe the GDS mode, and for a
// GPU with no NIC / no NVMe drive in the input one line that says so and what this
// node's software would give one.
void readiness_stage(const Topology& t, const RuleData& k, const CheckOptions& o, Report& rep);

std::string render_readiness_text(const Report& r);
// "gds" / "ibgda" objects inside one pair's JSON object (keys in byte order: after "findings").
void render_readiness_pair_json(detail::JsonWriter& j, const Report& r, const PairResult& p);
// Inside node.software: "readiness": the kernel configuration, nvme_core multipath, nvidia-fs, the probe.
void render_readiness_inputs_json(detail::JsonWriter& j, const Software& sw);
// The top-level "readiness" array: every entry, the GPUs without a NIC or NVMe drive included.
void render_readiness_json(detail::JsonWriter& j, const Topology& t, const Report& r);

}  // namespace gdrpeer::topo

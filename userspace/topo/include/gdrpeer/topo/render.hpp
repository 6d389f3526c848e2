// Stage 4 of the checker, the outputs: one check result (rules.hpp) with the Topology it was
// made from, as text, JSON, DOT, the topology tree, and the formats fleet tooling collects
// (node_exporter's textfile collector, node-feature-discovery's local feature files).
// Renderers only format: writing files is the CLI's (cli/output_file.hpp, atomically).
#pragma once

#include <ctime>
#include <string>
#include <string_view>

#include "gdrpeer/topo/model.hpp"
#include "gdrpeer/topo/rule_data.hpp"
#include "gdrpeer/topo/rules.hpp"

namespace gdrpeer::topo {

// render.cpp
std::string render_matrix(const Topology& t, const Report& r, bool include_nvme);
std::string render_json(const Topology& t, const Report& r);
std::string render_dot(const Topology& t, const Report& r);
std::string render_tree(const Topology& t, bool roles_only);
// "GPUs (each with its best NIC ...)": one line per GPU; "" when no GPU-NIC pair was checked.
std::string render_gpu_digest(const Topology& t, const Report& r);
// One line for fleet mode: "<source>: <node verdict> (<counts>) exit N".
std::string render_summary_line(const Topology& t, const Report& r);

// render_fleet.cpp, `gdrpeer check --format prometheus|nfd|summary` (docs/fleet.md).
// `tool_version`: the gdrpeer that checked, named in the output.

// Prometheus text exposition format (version 0.0.4): node facts as labels of
// gdrpeer_check_info, the worst verdict and exit code, per-pair verdict with the
// path class as a label, pair counts by verdict, problem counts by rule and severity.
// `now`: seconds since the epoch, for gdrpeer_check_timestamp_seconds.
std::string render_prometheus(const Topology& t, const RuleData& k, const Report& r, std::time_t now, std::string_view tool_version);

// `--summary`: one line per GPU ("GPU3 0000:4c:00.0 -> NIC3 0000:4b:00.0 PIX optimal"; "no NIC
// checked" without one) and the node line ("node: degraded (why), exit 1").
std::string render_gpu_summary(const Topology& t, const Report& r);

// node-feature-discovery local feature file: `name=value` lines in the
// gdrpeer.feature.node.kubernetes.io namespace (NFD accepts it without
// configuration) and an expiry `expiry_s` seconds after `now`, so labels of a
// node whose refresh stopped go away instead of going stale.
std::string render_nfd(const Topology& t, const Report& r, std::time_t now, long expiry_s, std::string_view tool_version);

}  // namespace gdrpeer::topo

// `gdrpeer check --format prometheus|nfd`: one node's check result in the formats
// fleet tooling already collects -- node_exporter's textfile collector and
// node-feature-discovery's local feature files. They are written by
// output_file.hpp (atomically: a collector must never read a half-written file). docs/fleet.md.
#pragma once

#include <ctime>
#include <string>
#include <string_view>

#include "gdrpeer/topo/check.hpp"

namespace gdrpeer::cli {

// Prometheus text exposition format (version 0.0.4): node facts as labels of
// gdrpeer_check_info, the worst verdict and exit code, per-pair verdict with the
// path class as a label, pair counts by verdict, problem counts by rule and severity.
// `now`: seconds since the epoch, for gdrpeer_check_timestamp_seconds.
std::string render_prometheus(const topo::Topology& t, const topo::Knowledge& k, const topo::Report& r, std::time_t now);

// `--summary`: one line per GPU ("GPU3 0000:4c:00.0 -> NIC3 0000:4b:00.0 PIX optimal"; "no NIC
// checked" without one) and the node line ("node: degraded (why), exit 1").
std::string render_gpu_summary(const topo::Topology& t, const topo::Report& r);

// node-feature-discovery local feature file: `name=value` lines in the
// gdrpeer.feature.node.kubernetes.io namespace (NFD accepts it without
// configuration) and an expiry `expiry_s` seconds after `now`, so labels of a
// node whose refresh stopped go away instead of going stale.
std::string render_nfd(const topo::Topology& t, const topo::Report& r, std::time_t now, long expiry_s);

}  // namespace gdrpeer::cli

// Shared body of the libFuzzer targets: a parser must either return a model
// or throw InputError (file:line: what was expected), and a model must come
// through the rules and both outputs; anything else -- a crash, a sanitizer
// report, another exception type, JSON that does not parse -- is a finding.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "gdrpeer/topo/errors.hpp"
#include "gdrpeer/topo/model.hpp"
#include "gdrpeer/topo/render.hpp"
#include "gdrpeer/topo/rule_data.hpp"
#include "gdrpeer/topo/rules.hpp"

// What a parsed model goes through in `gdrpeer check --json`: roles, rules, the
// text and JSON outputs; the JSON must parse back (nlohmann throws otherwise,
// which the fuzzer reports as a crash).
inline void check_and_render(gdrpeer::topo::Topology& t) {
  static const gdrpeer::topo::RuleData k = gdrpeer::topo::RuleData::load(GDRPEER_FUZZ_TOPOLOGY_DIR);
  gdrpeer::topo::assign_roles(t, k);
  gdrpeer::topo::CheckOptions o;
  o.gpu_nvme = true;
  const gdrpeer::topo::Report r = gdrpeer::topo::check(t, k, o);
  (void)gdrpeer::topo::render_matrix(t, r, true);
  (void)nlohmann::json::parse(gdrpeer::topo::render_json(t, r));
}

template <typename Fn>
int fuzz_one(const uint8_t* data, size_t size, Fn&& parse) {
  std::string text(reinterpret_cast<const char*>(data), size);
  try {
    gdrpeer::topo::Topology t = parse(text);
    check_and_render(t);
  } catch (const gdrpeer::topo::InputError&) {
    // expected for malformed input
  } catch (const gdrpeer::topo::MissingInput&) {
    // a snapshot without /sys/bus/pci/devices
  }
  return 0;
}

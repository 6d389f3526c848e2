// The stack stage's part of the outputs: one line per consumer per GPU x NIC pair
// in text, the versioned `consumers` object per pair and `software.stack` in JSON.
#pragma once

#include <string>

#include "gdrpeer/topo/rules.hpp"
#include "json_writer.hpp"

namespace gdrpeer::topo {

// "\nConsumers (what each will do per GPU x NIC):\n  GPU0 - NIC0  nccl: ...\n" or "".
std::string render_consumers_text(const Report& r);
// Inside the pair's object, at its key's place: "consumers": {...} (only when known).
void render_consumers_json(detail::JsonWriter& j, const PairResult& p);
// Inside node.software: "stack": {...}.
void render_stack_json(detail::JsonWriter& j, const Software& sw);

}  // namespace gdrpeer::topo

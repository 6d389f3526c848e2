// The two faces of a VerifyReport: a table for people, JSON for programs.
#pragma once

#include <nlohmann/json.hpp>
#include <ostream>

#include "gdrpeer/verify/engine.hpp"

namespace gdrpeer::verify {

void print_table(const VerifyReport& rep, std::ostream& out);
nlohmann::ordered_json to_json(const VerifyReport& rep);

}  // namespace gdrpeer::verify

// The two faces of a VerifyReport: a table for people, JSON for programs.
#pragma once

#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <vector>

#include "gdrpeer/verify/engine.hpp"

namespace gdrpeer::verify {

void print_table(const VerifyReport& rep, std::ostream& out);
nlohmann::ordered_json to_json(const VerifyReport& rep);

// Pieces shared with the two-node report (twonode_report.cpp).
// A table column: `s` padded to `w`, or followed by one space where it is wider.
std::string pad(const std::string& s, size_t w);
// `v` with `prec` decimals.
std::string fixed(double v, int prec);
// The memory sources' rows of a table, each with its facts below it.
void print_source_rows(const std::vector<SourceReport>& sources, std::ostream& out);
// One memory source as JSON: name, state, whether it was asked for, its description or reason
// and, when ready, whether it is a dma-buf; its facts are left to the caller.
nlohmann::ordered_json source_json(const SourceReport& s);

}  // namespace gdrpeer::verify

// Exit codes of every `gdrpeer` subcommand: the same number means the same thing
// in check, topo, snapshot and verify (issue 25), so one health-check wrapper
// reads them all. 0-3 are results, 64 and up errors of the run itself (sysexits.h).
#pragma once

#include <string>

namespace gdrpeer::cli::exit_code {

inline constexpr int kOk = 0;           // check: optimal; verify: every combination passed
inline constexpr int kDegraded = 1;     // check: degraded or unreliable; verify: none failed, some unsupported
inline constexpr int kBlocked = 2;      // check: blocked; verify: a combination failed
inline constexpr int kIncomplete = 3;   // nothing checked (no GPU, no NIC, no RDMA device) or fewer than expected
inline constexpr int kUsage = 64;       // EX_USAGE
inline constexpr int kDataErr = 65;     // EX_DATAERR: malformed input
inline constexpr int kNoInput = 66;     // EX_NOINPUT
inline constexpr int kSoftware = 70;    // EX_SOFTWARE: an internal error
inline constexpr int kCantCreate = 73;  // EX_CANTCREAT: output not writable
inline constexpr int kConfig = 78;      // EX_CONFIG: rule data unusable

}  // namespace gdrpeer::cli::exit_code

namespace gdrpeer::cli {

// The table above as --help prints it.
inline std::string exit_code_help() {
  return "Exit codes (every subcommand):\n"
         "  0   optimal / every verify combination passed\n"
         "  1   degraded or unreliable / verify: none failed, some unsupported\n"
         "  2   blocked (GPUDirect RDMA will not work) / verify: a combination failed\n"
         "  3   incomplete: nothing checked (no GPU, no NIC, no RDMA device) or fewer than --expect-*\n"
         "  64  usage error   65 malformed input   66 input missing\n"
         "  73  output not writable   78 rule data unusable   70 internal error\n";
}

}  // namespace gdrpeer::cli

// `gdrpeer verify --p2p` (cmd_verify_p2p.cpp): options and the run, called by cmd_verify.cpp.
#pragma once

#include <string>
#include <vector>

namespace gdrpeer::cli {

struct P2pArgs {
  std::vector<std::string> pairs;  // "SRC_BDF,DST_BDF", ordered
  std::vector<std::string> gpus;   // BDFs
  std::string size = "256M";
  int reps = 10;
  std::string predict_from;  // a snapshot tar or sysfs copy; "" = this node, live
  std::string libcuda = "libcuda.so.1";
  std::string data_dir;
  bool json = false;
  uint64_t seed = 1;
};

// Exit: 0 every pair agrees with check (or has no prediction), 1 a pair failed or
// disagrees, 3 nothing to verify (no CUDA, fewer than two GPUs), 64 bad input.
int run_verify_p2p(const P2pArgs& a);

}  // namespace gdrpeer::cli

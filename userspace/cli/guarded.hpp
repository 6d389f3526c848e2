// How every topology subcommand (check, topo, snapshot) ends on an error: the message on
// stderr and the exit code of exit_codes.hpp that the error's type stands for.
#pragma once

#include <cstdio>
#include <stdexcept>

#include "exit_codes.hpp"
#include "gdrpeer/topo/errors.hpp"
#include "output_file.hpp"

namespace gdrpeer::cli {

// Runs fn, mapping our exception types to exit codes and messages.
template <typename Fn>
int guarded(Fn&& fn) {
  try {
    return fn();
  } catch (const topo::InputError& e) {
    std::fprintf(stderr, "gdrpeer: %s\n", e.what());
    return exit_code::kDataErr;
  } catch (const topo::MissingInput& e) {
    std::fprintf(stderr, "gdrpeer: %s\n", e.what());
    return exit_code::kNoInput;
  } catch (const topo::DataError& e) {
    std::fprintf(stderr, "gdrpeer: %s\n", e.what());
    return exit_code::kConfig;
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "gdrpeer: %s\n", e.what());
    return exit_code::kUsage;
  } catch (const OutputError& e) {
    std::fprintf(stderr, "gdrpeer: %s\n", e.what());
    return exit_code::kCantCreate;
  }
}

}  // namespace gdrpeer::cli

// spawn_timer: wall time of whole processes, several commands interleaved.
//
//   spawn_timer RUNS [-e NAME=VALUE]... -- CMD ARGS... [-- CMD ARGS...]...
//
// Runs round 1 of every command, then round 2 of every command, ... (so that
// machine load drifts hit all of them alike), RUNS rounds. Each run is
// posix_spawn (vfork-style clone in glibc: the cheapest way to start a
// process) up to waitpid returning, stdout/stderr to /dev/null. Prints one
// line per command: median, min and max wall ms, median user+sys CPU ms (from
// wait4's rusage, which other load on the machine disturbs less), and the
// exit codes seen. Used by check_vs_lstopo.py for docs/benchmarks.md.
#include <fcntl.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>
#include <vector>

extern char** environ;

namespace {

double now_s() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

struct Command {
  std::vector<char*> argv;
  std::vector<double> wall, cpu;
  std::set<int> codes;
};

int usage() {
  std::fprintf(stderr, "usage: spawn_timer RUNS [-e NAME=VALUE]... -- CMD ARGS... [-- CMD ARGS...]...\n");
  return 64;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) return usage();
  char* end = nullptr;
  long runs = std::strtol(argv[1], &end, 10);
  if (*end || runs < 1) return usage();
  std::vector<char*> env;
  for (char** e = environ; *e; ++e) env.push_back(*e);
  std::vector<Command> cmds;
  int i = 2;
  for (; i < argc && std::strcmp(argv[i], "--") != 0; ++i) {
    if (std::strcmp(argv[i], "-e") != 0 || i + 1 >= argc || !std::strchr(argv[i + 1], '=')) return usage();
    env.push_back(argv[++i]);
  }
  env.push_back(nullptr);
  for (; i < argc; ++i) {
    if (std::strcmp(argv[i], "--") == 0) {
      cmds.emplace_back();
      continue;
    }
    cmds.back().argv.push_back(argv[i]);
  }
  if (cmds.empty()) return usage();
  for (auto& c : cmds) {
    if (c.argv.empty()) return usage();
    c.argv.push_back(nullptr);
  }

  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  for (long r = 0; r < runs; ++r) {
    for (auto& c : cmds) {
      double t0 = now_s();
      pid_t pid;
      int err = posix_spawn(&pid, c.argv[0], &fa, nullptr, c.argv.data(), env.data());
      if (err) {
        std::fprintf(stderr, "spawn_timer: %s: %s\n", c.argv[0], std::strerror(err));
        return 66;
      }
      int status = 0;
      rusage ru{};
      if (wait4(pid, &status, 0, &ru) != pid) {
        std::perror("spawn_timer: wait4");
        return 70;
      }
      double t1 = now_s();
      c.wall.push_back(t1 - t0);
      c.cpu.push_back(static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
                      static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6);
      c.codes.insert(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
    }
  }
  for (auto& c : cmds) {
    std::string codes;
    for (int code : c.codes) codes += (codes.empty() ? "" : ",") + std::to_string(code);
    std::printf("median_ms=%.3f min_ms=%.3f max_ms=%.3f cpu_ms=%.3f exit=%s cmd=", median(c.wall) * 1e3,
                *std::min_element(c.wall.begin(), c.wall.end()) * 1e3, *std::max_element(c.wall.begin(), c.wall.end()) * 1e3,
                median(c.cpu) * 1e3, codes.c_str());
    for (size_t a = 0; a + 1 < c.argv.size(); ++a) std::printf("%s%s", a ? " " : "", c.argv[a]);
    std::printf("\n");
  }
  return 0;
}

// The runtime switch of the generated mutants (tests/mutation/generate.py,
// "mutant schemata").
//
// generate.py rewrites every mutation site of the checker's sources into a call
// of one of the functions below, then the scratch build force-includes this
// header (-include) into the gdrpeer_topo sources. One -O0 build thus holds
// every mutant; which one is live is read once from the environment:
//   GDRPEER_MUTANT=<number>        the mutant with that number (generated.json)
//   is live;
//                                  unset or -1: none, the code behaves as
//                                  written.
//   GDRPEER_MUTANT_TRACE=<file>    append the number of every site the process
//   reached to <file>
//                                  at exit (the runner's coverage pass: a
//                                  mutant at a site no test reaches is reported
//                                  "not reached" without running anything).
// A site with several mutants owns consecutive numbers base, base+1, ...;
// `variant` says which of them is live (or -1). Operands are passed as lambdas
// where C++ evaluates them lazily
// (&&, ||, conditions), so a mutant changes the one operator and nothing else.
#pragma once

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <utility>

// The mutated branches may compare a literal's neighbour of another signedness,
// or test an unsigned value against -1: what the mutant does, not a mistake of
// the rewrite.
#pragma GCC diagnostic ignored "-Wsign-compare"
#pragma GCC diagnostic ignored "-Wtype-limits"
#pragma GCC diagnostic ignored "-Wconversion"
#pragma GCC diagnostic ignored "-Wparentheses"
#pragma GCC diagnostic ignored "-Wbool-compare"

namespace gdrpeer_mutant {

constexpr int kMaxSites = 1 << 16;

inline int live() {
  static const int id = [] {
    const char *s = std::getenv("GDRPEER_MUTANT");
    return s && *s ? std::atoi(s) : -1;
  }();
  return id;
}

inline std::atomic<bool> reached[kMaxSites];

inline void write_trace() {
  const char *path = std::getenv("GDRPEER_MUTANT_TRACE");
  if (!path)
    return;
  if (FILE *f = std::fopen(path, "a")) {
    for (int i = 0; i < kMaxSites; ++i)
      if (reached[i].load(std::memory_order_relaxed))
        std::fprintf(f, "%d\n", i);
    std::fclose(f);
  }
}

inline void record(int base) {
  static const bool tracing = [] {
    if (!std::getenv("GDRPEER_MUTANT_TRACE"))
      return false;
    std::atexit(write_trace);
    return true;
  }();
  if (tracing && base >= 0 && base < kMaxSites)
    reached[base].store(true, std::memory_order_relaxed);
}

// Which of the site's `count` mutants is live: 0..count-1, or -1 for none.
inline int variant(int base, int count) {
  record(base);
  const int v = live() - base;
  return v >= 0 && v < count ? v : -1;
}

// Relational and equality operators: the one mutant flips the operator's
// boundary or sense.
template <class A, class B> bool lt(int b, A &&x, B &&y) {
  return variant(b, 1) == 0 ? x <= y : x < y;
}
template <class A, class B> bool le(int b, A &&x, B &&y) {
  return variant(b, 1) == 0 ? x < y : x <= y;
}
template <class A, class B> bool gt(int b, A &&x, B &&y) {
  return variant(b, 1) == 0 ? x >= y : x > y;
}
template <class A, class B> bool ge(int b, A &&x, B &&y) {
  return variant(b, 1) == 0 ? x > y : x >= y;
}
template <class A, class B> bool eq(int b, A &&x, B &&y) {
  return variant(b, 1) == 0 ? x != y : x == y;
}
template <class A, class B> bool ne(int b, A &&x, B &&y) {
  return variant(b, 1) == 0 ? x == y : x != y;
}

// a && b: 0 -> a || b, 1 -> a (b dropped), 2 -> b (a dropped).
template <class L, class R> bool land(int b, L &&l, R &&r) {
  switch (variant(b, 3)) {
  case 0:
    return l() || r();
  case 1:
    return l();
  case 2:
    return r();
  default:
    return l() && r();
  }
}
// a || b: 0 -> a && b, 1 -> a, 2 -> b.
template <class L, class R> bool lor(int b, L &&l, R &&r) {
  switch (variant(b, 3)) {
  case 0:
    return l() && r();
  case 1:
    return l();
  case 2:
    return r();
  default:
    return l() || r();
  }
}

// if (c): 0 -> if (true), 1 -> if (false), 2 (only where the if has an else) ->
// if (!c), the branches swapped.
template <int Count, class C> bool cond(int b, C &&c) {
  switch (variant(b, Count)) {
  case 0:
    return true;
  case 1:
    return false;
  case 2:
    return !c();
  default:
    return c();
  }
}

// c ? x : y: 0 -> the branches swapped.
template <class C> bool tern(int b, C &&c) {
  return variant(b, 1) == 0 ? !c() : c();
}

// !x: 0 -> x (the negation removed). Written `Not{b} * x`: * binds as tightly
// as the operand of ! needs and leaves x's own expression alone.
struct Not {
  int b;
};
template <class T> bool operator*(Not n, T &&x) {
  return variant(n.b, 1) == 0 ? static_cast<bool>(x) : !x;
}

// An integer literal in a bound or comparison: 0 -> n + 1, 1 -> n - 1.
template <class T> T lit(int b, T n) {
  switch (variant(b, 2)) {
  case 0:
    return static_cast<T>(n + 1);
  case 1:
    return static_cast<T>(n - 1);
  default:
    return n;
  }
}

} // namespace gdrpeer_mutant

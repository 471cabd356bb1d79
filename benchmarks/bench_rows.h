// Shared by the row files: cached random inputs, a check against a scalar reference at
// sampled elements, and the timing loops for a lazyjit row and a peer row.
#pragma once

#include <benchmark/benchmark.h>
#include <lazyjit/lazyjit.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <tuple>
#include <vector>

namespace bench {

/// n floats uniform in [lo, hi) from seed; generated once per argument tuple and kept.
inline const std::vector<float>& random_data(int64_t n, uint32_t seed, float lo, float hi) {
  static std::map<std::tuple<int64_t, uint32_t, float, float>, std::vector<float>> cache;
  auto& v = cache[{n, seed, lo, hi}];
  if (v.empty()) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> dist(lo, hi);
    v.resize(static_cast<size_t>(n));
    for (float& f : v) f = dist(rng);
  }
  return v;
}

/// What a row must compute: n elements, element i being at(i) (evaluated in double).
struct Reference {
  int64_t n;
  std::function<double(int64_t)> at;
  double atol, rtol;

  /// Empty when |got[i] - at(i)| <= atol + rtol * |at(i)| at the first, the last and 256
  /// random elements; else a message for SkipWithError.
  std::string check(const float* got) const {
    std::mt19937_64 rng(7);
    std::uniform_int_distribution<int64_t> pick(0, n - 1);
    for (int s = 0; s < 258; ++s) {
      const int64_t i = s == 0 ? 0 : s == 1 ? n - 1 : pick(rng);
      const double want = at(i);
      if (!(std::fabs(got[i] - want) <= atol + rtol * std::fabs(want)))
        return "element " + std::to_string(i) + ": got " + std::to_string(got[i]) + ", want " + std::to_string(want);
    }
    return {};
  }
};

/// Checks lazy() against ref, then times tracing and materialising it (sync, no copy-out).
/// An Error from lazyjit (an op it cannot run yet) fails the row with its message.
template <class Lazy>
void run_lazyjit(benchmark::State& state, const Reference& ref, Lazy lazy) {
  try {
    const std::vector<float> got = lazy().template to_vector<float>();
    std::string err = static_cast<int64_t>(got.size()) == ref.n
                          ? ref.check(got.data())
                          : "result has " + std::to_string(got.size()) + " elements";
    if (!err.empty()) return state.SkipWithError(err.c_str());
    const int64_t compiles = lazyjit::metrics().compiles;
    for (auto _ : state) lazyjit::sync({lazy()});
    state.counters["compiles"] = static_cast<double>(lazyjit::metrics().compiles - compiles);
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
  }
}

/// Checks peer(out) against ref, then times it.
template <class Peer>
void run_peer(benchmark::State& state, const Reference& ref, Peer peer) {
  std::vector<float> out(static_cast<size_t>(ref.n));
  peer(out.data());
  std::string err = ref.check(out.data());
  if (!err.empty()) return state.SkipWithError(err.c_str());
  for (auto _ : state) {
    peer(out.data());
    benchmark::DoNotOptimize(out.data());
  }
}

/// Aggregates of the repetitions beside Google Benchmark's mean, median and stddev.
inline double min_of(const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); }
inline double max_of(const std::vector<double>& v) { return *std::max_element(v.begin(), v.end()); }

}  // namespace bench

/// Appended to a registration: five repetitions; aggregates shown, median, min and max among
/// them (the table of bench_main.cpp reads those three).
#define LAZYJIT_BENCH_REPEATED \
  ->Repetitions(5)->DisplayAggregatesOnly(true)->ComputeStatistics("min", bench::min_of)->ComputeStatistics("max", bench::max_of)

/// Registers a row timed in real time.
#define LAZYJIT_BENCH(fn, unit, min_time) \
  BENCHMARK(fn)->UseRealTime()->Unit(unit)->MinTime(min_time) LAZYJIT_BENCH_REPEATED

// Elementwise and trace-overhead benchmarks: lazyjit against the hand loops of hand_loops.h.
#include <benchmark/benchmark.h>
#include <lazyjit/lazyjit.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "bench_rows.h"
#include "hand_loops.h"
#include "workloads.h"

namespace bench::ew {

const std::vector<float>& input(int64_t n) { return random_data(n, 42, -4.0f, 4.0f); }

Reference simple_ref(int64_t n) {
  const float* x = input(n).data();
  return {n, [x](int64_t i) { return std::max(x[i] * 1.5 + 0.25, 0.0) * 0.5 + x[i]; }, 1e-5, 1e-5};
}

Reference transcendental_ref(int64_t n) {
  const float* x = input(n).data();
  return {n,
          [x](int64_t i) {
            const double v = x[i];
            return 1 / (1 + std::exp(-v)) * std::tanh(v * 0.5 + 1) + v * v;
          },
          1e-5, 1e-5};
}

}  // namespace bench::ew

namespace {

using lazyjit::Tensor;
using bench::ew::input;

// Empty when |got - want| <= tol * (1 + |want|) everywhere, else a message for SkipWithError.
std::string mismatch(const std::vector<float>& got, const std::vector<float>& want, float tol) {
  if (got.size() != want.size()) return "size " + std::to_string(got.size()) + " != " + std::to_string(want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    if (!(std::fabs(got[i] - want[i]) <= tol * (1.0f + std::fabs(want[i]))))
      return "element " + std::to_string(i) + ": lazyjit " + std::to_string(got[i]) + ", hand " +
             std::to_string(want[i]);
  }
  return {};
}

Tensor ew_simple_lazy(const Tensor& x) { return lazyjit::relu(x * 1.5 + 0.25) * 0.5 + x; }
Tensor ew_transcendental_lazy(const Tensor& x) {
  return lazyjit::sigmoid(x) * lazyjit::tanh(x * 0.5 + 1.0) + x * x;
}

using HandFn = void (*)(const float*, float*, int64_t);
using LazyFn = Tensor (*)(const Tensor&);

void run_lazyjit(benchmark::State& state, LazyFn lazy, HandFn hand) {
  const int64_t n = state.range(0);
  const auto& data = input(n);
  Tensor x = Tensor::from_vector<float>(data, {n});
  {
    std::vector<float> want(data.size());
    hand(data.data(), want.data(), n);
    Tensor y = lazy(x);
    std::string err = mismatch(y.to_vector<float>(), want, 1e-5f);
    if (!err.empty()) return state.SkipWithError(err.c_str());
  }
  const int64_t compiles = lazyjit::metrics().compiles;
  for (auto _ : state) {
    Tensor y = lazy(x);
    lazyjit::sync({y});
  }
  state.counters["compiles"] = static_cast<double>(lazyjit::metrics().compiles - compiles);
  state.SetBytesProcessed(state.iterations() * n * 2 * int64_t{sizeof(float)});
}

void run_hand(benchmark::State& state, HandFn hand) {
  const int64_t n = state.range(0);
  const auto& data = input(n);
  std::vector<float> out(data.size(), 0.0f);
  for (auto _ : state) {
    hand(data.data(), out.data(), n);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(state.iterations() * n * 2 * int64_t{sizeof(float)});
}

void BM_ew_simple_lazyjit(benchmark::State& s) { run_lazyjit(s, ew_simple_lazy, bench::ew_simple); }
void BM_ew_simple_hand(benchmark::State& s) { run_hand(s, bench::ew_simple); }
void BM_ew_simple_hand_stream(benchmark::State& s) { run_hand(s, bench::ew_simple_stream); }
void BM_ew_transcendental_lazyjit(benchmark::State& s) {
  run_lazyjit(s, ew_transcendental_lazy, bench::ew_transcendental);
}
void BM_ew_transcendental_hand(benchmark::State& s) { run_hand(s, bench::ew_transcendental); }
void BM_ew_transcendental_hand_fastmath(benchmark::State& s) { run_hand(s, bench::ew_transcendental_fastmath); }

// Trace overhead: a 1000-op chain on 16 floats, traced, synced (cache hit) and run.
Tensor trace_chain(const Tensor& x) {
  Tensor y = x;
  for (int i = 0; i < bench::kTraceOps; ++i) y = (i % 2 == 0) ? y + 1.0 : y * 0.999;
  return y;
}

// Seconds per traced op; the console shows it with an SI prefix ("45.2ns").
void set_time_per_op(benchmark::State& state) {
  state.counters["time_per_op"] = benchmark::Counter(
      static_cast<double>(bench::kTraceOps * state.iterations()),
      benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

void BM_trace_overhead_lazyjit(benchmark::State& state) {
  std::vector<float> data(input(bench::kTraceElems));
  Tensor x = Tensor::from_vector<float>(data, {bench::kTraceElems});
  {
    std::vector<float> want(bench::kTraceElems);
    bench::trace_peer(data.data(), want.data());
    std::string err = mismatch(trace_chain(x).to_vector<float>(), want, 1e-4f);
    if (!err.empty()) return state.SkipWithError(err.c_str());
  }
  const int64_t compiles = lazyjit::metrics().compiles;
  for (auto _ : state) {
    Tensor y = trace_chain(x);
    lazyjit::sync({y});
  }
  state.counters["compiles"] = static_cast<double>(lazyjit::metrics().compiles - compiles);
  set_time_per_op(state);
}

void BM_trace_overhead_hand(benchmark::State& state) {
  const auto& data = input(bench::kTraceElems);
  float out[bench::kTraceElems];
  for (auto _ : state) {
    bench::trace_peer(data.data(), out);
    benchmark::DoNotOptimize(out);
  }
  set_time_per_op(state);
}

}  // namespace

LAZYJIT_BENCH(BM_ew_simple_lazyjit, benchmark::kMillisecond, 0.2)->Arg(1 << 24);
LAZYJIT_BENCH(BM_ew_simple_hand, benchmark::kMillisecond, 0.2)->Arg(1 << 24);
LAZYJIT_BENCH(BM_ew_simple_hand_stream, benchmark::kMillisecond, 0.2)->Arg(1 << 24);
LAZYJIT_BENCH(BM_ew_simple_lazyjit, benchmark::kMicrosecond, 0.1)->Arg(1 << 16);
LAZYJIT_BENCH(BM_ew_simple_hand, benchmark::kMicrosecond, 0.1)->Arg(1 << 16);
LAZYJIT_BENCH(BM_ew_simple_hand_stream, benchmark::kMicrosecond, 0.1)->Arg(1 << 16);
LAZYJIT_BENCH(BM_ew_transcendental_lazyjit, benchmark::kMillisecond, 0.3)->Arg(1 << 24);
LAZYJIT_BENCH(BM_ew_transcendental_hand, benchmark::kMillisecond, 0.3)->Arg(1 << 24);
LAZYJIT_BENCH(BM_ew_transcendental_hand_fastmath, benchmark::kMillisecond, 0.3)->Arg(1 << 24);
LAZYJIT_BENCH(BM_trace_overhead_lazyjit, benchmark::kMicrosecond, 0.1);
LAZYJIT_BENCH(BM_trace_overhead_hand, benchmark::kMicrosecond, 0.1);

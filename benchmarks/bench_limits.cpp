// The machine's limits on the harness's two threads, for reading the other rows: a STREAM
// triad (a = b + s*c, bandwidth counted as STREAM does: three arrays) and an FMA throughput
// loop (independent 64-byte vector FMAs, the peak a matmul can approach).
#include <benchmark/benchmark.h>

#include <cstdint>
#include <vector>

#include "bench_rows.h"
#include "hand_parallel.h"

namespace {

void BM_stream_triad_hand(benchmark::State& state) {
  constexpr int64_t n = int64_t{1} << 25;  // 128 MiB per array: far past the caches
  std::vector<float> a(n), b(n, 1.0f), c(n, 2.0f);
  for (auto _ : state) {
    bench::parallel(n, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) a[i] = b[i] + 3.0f * c[i];
    });
    benchmark::DoNotOptimize(a.data());
    benchmark::ClobberMemory();
  }
  if (a[n - 1] != 7.0f) state.SkipWithError("triad gave a wrong value");
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * 3 * n * static_cast<int64_t>(sizeof(float)));
}

using Vector = float __attribute__((vector_size(64)));  // 16 floats: one AVX-512 register

void BM_fma_peak_hand(benchmark::State& state) {
  constexpr int kChains = 12;  // independent accumulators cover the FMA latency
  constexpr int64_t kSteps = 1 << 20;
  constexpr int64_t kThreads = bench::kHandThreads;
  for (auto _ : state) {
    bench::parallel(kThreads, [&](int64_t, int64_t) {
      Vector acc[kChains];
      for (int c = 0; c < kChains; ++c) acc[c] = Vector{} + static_cast<float>(c);
      const Vector x = Vector{} + 0.999999f, y = Vector{} + 1e-7f;
      for (int64_t s = 0; s < kSteps; ++s) {
        for (int c = 0; c < kChains; ++c) acc[c] = acc[c] * x + y;  // contracted to one FMA
      }
      for (int c = 0; c < kChains; ++c) benchmark::DoNotOptimize(acc[c]);
    });
  }
  state.counters["FLOP"] = benchmark::Counter(
      2.0 * 16 * kChains * kSteps * kThreads * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}

}  // namespace

LAZYJIT_BENCH(BM_stream_triad_hand, benchmark::kMillisecond, 0.3);
LAZYJIT_BENCH(BM_fma_peak_hand, benchmark::kMillisecond, 0.3);

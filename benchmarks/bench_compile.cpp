// compile_time: a workload's cold first step minus its steady step, with lazyjit's compile
// cache emptied before the cold one; recompiles: one program over batch sizes 1..64.
#include <benchmark/benchmark.h>
#include <lazyjit/lazyjit.h>

#include <algorithm>
#include <chrono>
#include <exception>
#include <functional>
#include <string>
#include <vector>

#include "bench_rows.h"
#include "gpt_problem.h"
#include "mlp_problem.h"
#include "workloads.h"

namespace bench::recompiles {

const std::vector<float>& x_data() { return random_data(kMaxBatch * kK, 70, -1.0f, 1.0f); }
const std::vector<float>& w_data() { return random_data(kK * kN, 71, -1.0f, 1.0f); }
const std::vector<float>& b_data() { return random_data(kN, 72, -1.0f, 1.0f); }

Reference last_batch_ref() {
  const float *x = x_data().data(), *w = w_data().data(), *b = b_data().data();
  return {kMaxBatch * kN,
          [=](int64_t i) {
            double sum = b[i % kN];
            for (int64_t k = 0; k < kK; ++k) sum += double{x[i / kN * kK + k]} * w[k * kN + i % kN];
            return std::max(sum, 0.0);
          },
          1e-4, 1e-4};
}

}  // namespace bench::recompiles

namespace {

using lazyjit::Tensor;

constexpr int64_t kDefaultCacheSize = 1024;  // lazyjit's default (LAZYJIT_CACHE_SIZE unset)

double seconds(const std::function<void()>& step) {
  const auto start = std::chrono::steady_clock::now();
  step();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Leaves one unrelated graph in lazyjit's compile cache, then lets it grow again.
void empty_compile_cache() {
  lazyjit::set_compile_cache_capacity(1);
  lazyjit::sync({Tensor::from_vector<float>({1.0f}, {1}) + 1.0});
  lazyjit::set_compile_cache_capacity(kDefaultCacheSize);
}

// Iteration time: cold step - steady step; compile_seconds: lazyjit's own count for the cold one.
void run_compile_time(benchmark::State& state, const std::function<void()>& step) {
  try {
    step();  // buffers and the thread pool warm, so the difference is compiling
    double compile_seconds = 0;
    for (auto _ : state) {
      empty_compile_cache();
      const double before = lazyjit::metrics().compile_seconds;
      const double cold = seconds(step);
      compile_seconds += lazyjit::metrics().compile_seconds - before;
      state.SetIterationTime(cold - seconds(step));
    }
    state.counters["compile_seconds"] = benchmark::Counter(compile_seconds, benchmark::Counter::kAvgIterations);
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
  }
}

// The steps of bench_elementwise.cpp (at 2^20), bench_norm.cpp and bench_matmul.cpp (at
// [1024, 1024]), bench_mlp.cpp and bench_gpt.cpp; their results are checked there.
const Tensor& x1024() {
  static const Tensor x = Tensor::from_vector<float>(bench::random_data(1 << 20, 42, -4.0f, 4.0f), {1024, 1024});
  return x;
}
void BM_compile_time_ew_simple_lazyjit(benchmark::State& state) {
  run_compile_time(state, [] { lazyjit::sync({lazyjit::relu(x1024() * 1.5 + 0.25) * 0.5 + x1024()}); });
}
void BM_compile_time_softmax_lazyjit(benchmark::State& state) {
  run_compile_time(state, [] { lazyjit::sync({lazyjit::softmax(x1024(), -1)}); });
}
void BM_compile_time_matmul_lazyjit(benchmark::State& state) {
  run_compile_time(state, [] { lazyjit::sync({lazyjit::matmul(x1024(), x1024())}); });
}
void BM_compile_time_mlp_train_step_lazyjit(benchmark::State& state) {
  bench::mlp::LazyMlp mlp;
  run_compile_time(state, [&] { mlp.step(); });
}
void BM_compile_time_gpt_train_step_lazyjit(benchmark::State& state) {
  bench::gpt::LazyGpt gpt;
  run_compile_time(state, [&] { gpt.step(); });
}

// Compile cliffs: an n-op chain x + 1 + 1 + ..., and n independent results (n shapes, so n
// kernels) synced at once. Planning and compiling grow linearly with n: compare the rows'
// compile_seconds across n.
void BM_compile_cliff_chain_lazyjit(benchmark::State& state) {
  const int64_t n = state.range(0);
  const Tensor x = Tensor::from_vector<float>({0.0f, 1.0f, 2.0f});
  Tensor acc;
  run_compile_time(state, [&] {
    acc = x;
    for (int64_t i = 0; i < n; ++i) acc += 1.0;
    lazyjit::sync({acc});
  });
  if (acc.defined() && acc.to_vector<float>()[2] != static_cast<float>(n + 2)) state.SkipWithError("wrong chain sum");
}
void BM_compile_cliff_independent_lazyjit(benchmark::State& state) {
  const int64_t n = state.range(0);
  std::vector<Tensor> results;
  run_compile_time(state, [&] {
    results.clear();
    for (int64_t i = 1; i <= n; ++i) results.push_back(lazyjit::arange(i, lazyjit::DType::Float32) * 2.0);
    lazyjit::sync(results);
  });
  if (!results.empty() && results.back().to_vector<float>().back() != static_cast<float>(2 * (n - 1))) {
    state.SkipWithError("wrong independent result");
  }
}

// recompiles: relu(x @ w + b) for x[batch, 128], w[128, 64] at batch 1..64, from an emptied
// cache; `compiles` counts the first sweep (sizes are runtime values, but a dim of size 1 is a
// broadcast pattern of its own: batch 1 and batch 2..64 compile once each), then the sweep is
// timed from the cache.
void BM_recompiles_lazyjit(benchmark::State& state) {
  using namespace bench::recompiles;
  const std::vector<float>&xs = x_data(), &ws = w_data(), &bs = b_data();
  try {
    const Tensor w = Tensor::from_vector<float>(ws, {kK, kN}), b = Tensor::from_vector<float>(bs, {kN});
    std::vector<Tensor> x;
    for (int64_t batch = 1; batch <= kMaxBatch; ++batch)
      x.push_back(Tensor::from_vector<float>(std::vector<float>(xs.begin(), xs.begin() + batch * kK), {batch, kK}));
    auto sweep = [&] {
      Tensor last;
      for (const Tensor& xb : x) lazyjit::sync({last = lazyjit::relu(lazyjit::matmul(xb, w) + b)});
      return last;
    };
    empty_compile_cache();
    const int64_t compiles = lazyjit::metrics().compiles;
    const std::vector<float> got = sweep().to_vector<float>();
    state.counters["compiles"] = static_cast<double>(lazyjit::metrics().compiles - compiles);
    const std::string err = last_batch_ref().check(got.data());
    if (!err.empty()) return state.SkipWithError(err.c_str());
    for (auto _ : state) sweep();
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
  }
}

}  // namespace

#define COMPILE_TIME_BENCH(fn) BENCHMARK(fn)->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(2) LAZYJIT_BENCH_REPEATED
COMPILE_TIME_BENCH(BM_compile_time_ew_simple_lazyjit);
COMPILE_TIME_BENCH(BM_compile_time_softmax_lazyjit);
COMPILE_TIME_BENCH(BM_compile_time_matmul_lazyjit);
COMPILE_TIME_BENCH(BM_compile_time_mlp_train_step_lazyjit);
COMPILE_TIME_BENCH(BM_compile_time_gpt_train_step_lazyjit);
LAZYJIT_BENCH(BM_recompiles_lazyjit, benchmark::kMicrosecond, 0.1);
BENCHMARK(BM_compile_cliff_chain_lazyjit)->Arg(1000)->Arg(4000)->Arg(10000)->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(1)->Repetitions(3)->DisplayAggregatesOnly(true);
BENCHMARK(BM_compile_cliff_independent_lazyjit)->Arg(100)->Arg(400)->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(1)->Repetitions(3)->DisplayAggregatesOnly(true);

// mlp_train_step (mlp_problem.h): the steady-state time of one SGD step, lazyjit against the
// hand sgemm and loops.
#include <benchmark/benchmark.h>
#include <lazyjit/lazyjit.h>

#include <exception>
#include <string>
#include <vector>

#include "bench_rows.h"
#include "mlp_problem.h"

namespace {

void BM_mlp_train_step_lazyjit(benchmark::State& state) {
  try {
    bench::mlp::LazyMlp model;
    std::vector<double> losses;
    for (int i = 0; i < bench::mlp::kCheckSteps; ++i) losses.push_back(model.step().item<float>());
    const std::string err = bench::mlp::check_losses(losses);
    if (!err.empty()) return state.SkipWithError(err.c_str());
    const int64_t compiles = lazyjit::metrics().compiles;
    for (auto _ : state) model.step();
    state.counters["compiles"] = static_cast<double>(lazyjit::metrics().compiles - compiles);
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
  }
}

void BM_mlp_train_step_hand(benchmark::State& state) {
  bench::mlp::HandMlp model;
  std::vector<double> losses;
  for (int i = 0; i < bench::mlp::kCheckSteps; ++i) losses.push_back(model.step());
  const std::string err = bench::mlp::check_losses(losses);
  if (!err.empty()) return state.SkipWithError(err.c_str());
  for (auto _ : state) model.step();
}

}  // namespace

LAZYJIT_BENCH(BM_mlp_train_step_lazyjit, benchmark::kMillisecond, 0.3);
LAZYJIT_BENCH(BM_mlp_train_step_hand, benchmark::kMillisecond, 0.3);

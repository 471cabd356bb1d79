// mlp_train_step (mlp_problem.h): the steady-state time of one SGD step, lazyjit (autograd,
// and a hand-derived backward in lazyjit ops) against the hand sgemm and loops.
#include <benchmark/benchmark.h>
#include <lazyjit/lazyjit.h>

#include <exception>
#include <string>
#include <vector>

#include "bench_rows.h"
#include "mlp_problem.h"

namespace {

template <lazyjit::Tensor (bench::mlp::LazyMlp::*step)()>
void run_lazyjit(benchmark::State& state) {
  try {
    bench::mlp::LazyMlp model;
    std::vector<double> losses;
    for (int i = 0; i < bench::mlp::kCheckSteps; ++i) losses.push_back((model.*step)().item<float>());
    const std::string err = bench::mlp::check_losses(losses);
    if (!err.empty()) return state.SkipWithError(err.c_str());
    const lazyjit::Metrics before = lazyjit::metrics();
    for (auto _ : state) (model.*step)();
    const lazyjit::Metrics after = lazyjit::metrics();
    state.counters["compiles"] = static_cast<double>(after.compiles - before.compiles);
    state.counters["donations_per_step"] =
        static_cast<double>(after.donations - before.donations) / static_cast<double>(state.iterations());
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
  }
}

// Backward by lazyjit::grad (the row users get), and written out by hand in lazyjit ops.
void BM_mlp_train_step_lazyjit(benchmark::State& state) { run_lazyjit<&bench::mlp::LazyMlp::step>(state); }
void BM_mlp_train_step_lazyjit_manual(benchmark::State& state) {
  run_lazyjit<&bench::mlp::LazyMlp::step_manual>(state);
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
LAZYJIT_BENCH(BM_mlp_train_step_lazyjit_manual, benchmark::kMillisecond, 0.3);
LAZYJIT_BENCH(BM_mlp_train_step_hand, benchmark::kMillisecond, 0.3);

// gpt_train_step (gpt_problem.h): the steady-state time of one Adam step of a small GPT on
// lazyjit; its peers are in bench_torch.cpp, its first step in bench_compile.cpp.
#include <benchmark/benchmark.h>
#include <lazyjit/lazyjit.h>

#include <exception>
#include <string>
#include <vector>

#include "bench_rows.h"
#include "gpt_problem.h"

namespace {

// Counters per step: the step graph's size (nodes traced, kernels launched), and how many of
// its outputs were written in place (every weight and Adam moment, when donation works).
void BM_gpt_train_step_lazyjit(benchmark::State& state) {
  try {
    bench::gpt::LazyGpt model;
    std::vector<double> losses;
    for (int i = 0; i < bench::gpt::kCheckSteps; ++i) losses.push_back(model.step().item<float>());
    const std::string err = bench::gpt::check_losses(losses);
    if (!err.empty()) return state.SkipWithError(err.c_str());
    const lazyjit::Metrics before = lazyjit::metrics();
    for (auto _ : state) model.step();
    const lazyjit::Metrics after = lazyjit::metrics();
    const auto per_step = [&](int64_t n) { return static_cast<double>(n) / static_cast<double>(state.iterations()); };
    state.counters["compiles"] = static_cast<double>(after.compiles - before.compiles);
    state.counters["nodes_per_step"] = per_step(after.nodes_traced - before.nodes_traced);
    state.counters["kernels_per_step"] = per_step(after.kernels_launched - before.kernels_launched);
    state.counters["donations_per_step"] = per_step(after.donations - before.donations);
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
  }
}

}  // namespace

LAZYJIT_BENCH(BM_gpt_train_step_lazyjit, benchmark::kMillisecond, 0.5);

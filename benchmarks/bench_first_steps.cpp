// first_steps: a user's first steps, each row in fresh processes. A row re-runs this binary
// (LAZYJIT_BENCH_FIRST_STEPS=peer:workload:steps, no disk cache) that sets the workload up (its
// weights in memory: not timed) and times each step, trace to result available. The row's
// time is the first step; its counters: first20_seconds, the first 20 steps' total, and
// late_seconds, the median of the last 5 (compiled code by then, for lazyjit under auto).
// Peers: lazyjit under LAZYJIT_TIER=auto, 1 (wait for compiled code) and 0 (tier 0 alone),
// PyTorch eager and Lazy Tensor Core (TorchScript backend), nothing warmed up before.
// BENCH_FIRST_STEPS_CSV=FILE appends every child's steps (peer,workload,step,seconds), the
// data of docs/benchmarks.md's first-minute chart; BENCH_FIRST_STEPS=N sets the steps (20).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "bench_rows.h"
#include "gpt_problem.h"
#include "mlp_problem.h"
#include "peers.h"
#include "workloads.h"

namespace bench {
namespace {

double seconds_of(const std::function<void()>& f) {
  const auto start = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

/// The workload's step on lazyjit, set up (weights in memory, step barrier run).
std::function<void()> lazyjit_step(const std::string& workload) {
  if (workload == "mlp_train_step") {
    auto mlp = std::make_shared<mlp::LazyMlp>();
    lazyjit::mark_step();
    return [mlp] { (void)mlp->step().item<float>(); };
  }
  if (workload == "gpt_train_step") {
    auto gpt = std::make_shared<gpt::LazyGpt>();
    lazyjit::mark_step();
    return [gpt] { (void)gpt->step().item<float>(); };
  }
  if (workload == "ew_simple_64k") {
    const lazyjit::Tensor x = lazyjit::Tensor::from_vector<float>(ew::input(1 << 16), {1 << 16});
    lazyjit::sync({x});
    return [x] {  // read where it lies, as eager's y.cpu() reads its result (to_vector would copy)
      const lazyjit::Tensor y = lazyjit::relu(x * 1.5 + 0.25) * 0.5 + x;
      (void)y.host_view<float>();
    };
  }
  throw std::invalid_argument("no first_steps workload " + workload);
}

int steps_wanted() {
  const char* text = std::getenv("BENCH_FIRST_STEPS");
  return text ? std::max(20, std::atoi(text)) : 20;
}

/// Runs `peer`'s child for `workload` and returns its step times (empty on failure, with the
/// row skipped).
std::vector<double> child_steps(benchmark::State& state, const std::string& peer, const std::string& workload) {
  std::string env;
  if (peer == "lazyjit_auto") env = "LAZYJIT_TIER=auto ";
  if (peer == "lazyjit_tier1") env = "LAZYJIT_TIER=1 ";
  if (peer == "lazyjit_tier0") env = "LAZYJIT_TIER=0 ";
  const std::string spec = peer + ":" + workload + ":" + std::to_string(steps_wanted());
  const std::string command = env + "LAZYJIT_CACHE_DIR= " + kFirstStepsEnv + "=" + spec + " '" +
                              std::filesystem::read_symlink("/proc/self/exe").string() + "'";
  FILE* child = popen(command.c_str(), "r");
  std::string out;
  char buffer[4096];
  while (child && std::fgets(buffer, sizeof buffer, child)) out += buffer;
  const int status = child ? pclose(child) : -1;
  std::vector<double> steps;
  std::istringstream in(out);
  for (double t; in >> t;) steps.push_back(t);
  if (status != 0 || steps.size() < 20) {
    state.SkipWithError(("fresh process (" + command + ") exited " + std::to_string(status) + ": " + out).c_str());
    return {};
  }
  if (const char* csv = std::getenv("BENCH_FIRST_STEPS_CSV")) {
    if (FILE* f = std::fopen(csv, "a")) {
      for (size_t i = 0; i < steps.size(); ++i) std::fprintf(f, "%s,%s,%zu,%.9g\n", peer.c_str(), workload.c_str(), i, steps[i]);
      std::fclose(f);
    }
  }
  return steps;
}

void first_steps(benchmark::State& state, const std::string& peer, const std::string& workload) {
  double first20 = 0, late = 0;
  for (auto _ : state) {
    std::vector<double> steps = child_steps(state, peer, workload);
    if (steps.empty()) break;
    state.SetIterationTime(steps[0]);
    for (int i = 0; i < 20; ++i) first20 += steps[i];
    std::vector<double> last(steps.end() - 5, steps.end());
    std::nth_element(last.begin(), last.begin() + 2, last.end());
    late += last[2];
  }
  state.counters["first20_seconds"] = benchmark::Counter(first20, benchmark::Counter::kAvgIterations);
  state.counters["late_seconds"] = benchmark::Counter(late, benchmark::Counter::kAvgIterations);
}

#define FIRST_STEPS_ROW(workload, peer)                                                                   \
  void BM_first_steps_##workload##_##peer(benchmark::State& state) { first_steps(state, #peer, #workload); } \
  BENCHMARK(BM_first_steps_##workload##_##peer)                                                           \
      ->UseManualTime()                                                                                   \
      ->Unit(benchmark::kMillisecond)                                                                     \
      ->Iterations(1) LAZYJIT_BENCH_REPEATED

#ifdef LAZYJIT_BENCH_HAVE_TORCH
#define FIRST_STEPS_TORCH_ROWS(workload) \
  FIRST_STEPS_ROW(workload, torch_eager); \
  FIRST_STEPS_ROW(workload, torch_lazy)
#else
#define FIRST_STEPS_TORCH_ROWS(workload)
#endif

#define FIRST_STEPS_ROWS(workload)          \
  FIRST_STEPS_ROW(workload, lazyjit_auto);  \
  FIRST_STEPS_ROW(workload, lazyjit_tier1); \
  FIRST_STEPS_ROW(workload, lazyjit_tier0); \
  FIRST_STEPS_TORCH_ROWS(workload)

FIRST_STEPS_ROWS(ew_simple_64k);
FIRST_STEPS_ROWS(mlp_train_step);
FIRST_STEPS_ROWS(gpt_train_step);

// new_graph: the first run of a graph no one has seen, in a warm process: a 5-op elementwise
// graph over 2^16 floats (`new_graph_ew_simple_64k`), each iteration a structure not run
// before (the ops picked by the bits of a counter: 1024 structures), result read; under
// LAZYJIT_TIER=auto (tier 0 at once) and 1 (waits for LLVM). Between iterations (untimed)
// the background compiles finish.
lazyjit::Tensor five_ops(const lazyjit::Tensor& x, int64_t structure) {
  lazyjit::Tensor y = x;
  for (int k = 0; k < 5; ++k) {
    switch ((structure >> (2 * k)) & 3) {
      case 0: y = y * 1.5; break;
      case 1: y = y + 0.25; break;
      case 2: y = lazyjit::relu(y); break;
      default: y = y - x; break;
    }
  }
  return y;
}

void new_graph(benchmark::State& state, lazyjit::Tier tier) {
  const lazyjit::Tier before = lazyjit::tier();
  lazyjit::set_tier(tier);
  const lazyjit::Tensor x = lazyjit::Tensor::from_vector<float>(ew::input(1 << 16), {1 << 16});
  (void)(x + 1.0).to_vector<float>();  // the threads and the pool warm
  static int64_t structure = 0;        // across rows and repetitions: never a structure seen
  for (auto _ : state) {
    if (structure >= 1024) {
      state.SkipWithError("out of new structures");
      break;
    }
    const auto start = std::chrono::steady_clock::now();
    (void)five_ops(x, structure++).to_vector<float>();
    state.SetIterationTime(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    lazyjit::wait_for_compiles();  // untimed: the next graph's first run has the cores to itself
  }
  lazyjit::set_tier(before);
}
void BM_new_graph_ew_simple_64k_lazyjit_auto(benchmark::State& state) { new_graph(state, lazyjit::Tier::Auto); }
void BM_new_graph_ew_simple_64k_lazyjit_tier1(benchmark::State& state) { new_graph(state, lazyjit::Tier::Compile); }
BENCHMARK(BM_new_graph_ew_simple_64k_lazyjit_auto)->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(40)
    LAZYJIT_BENCH_REPEATED;
BENCHMARK(BM_new_graph_ew_simple_64k_lazyjit_tier1)->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(8)
    LAZYJIT_BENCH_REPEATED;

}  // namespace

int first_steps_child(const std::string& spec) {
  const size_t a = spec.find(':'), b = spec.rfind(':');
  const std::string peer = spec.substr(0, a), workload = spec.substr(a + 1, b - a - 1);
  const int steps = std::atoi(spec.substr(b + 1).c_str());
  if (peer.rfind("torch_", 0) == 0) {
#ifdef LAZYJIT_BENCH_HAVE_TORCH
    return torch_first_steps(peer == "torch_eager" ? "eager" : "lazy", workload, steps);
#else
    std::printf("PyTorch is not built in\n");
    return 1;
#endif
  }
  return print_step_seconds([&] { return lazyjit_step(workload); }, steps);
}

int print_step_seconds(const std::function<std::function<void()>()>& make, int steps) {
  try {
    const std::function<void()> step = make();
    for (int i = 0; i < steps; ++i) std::printf("%.9g ", seconds_of(step));
    std::printf("\n");
    return 0;
  } catch (const std::exception& e) {
    std::printf("%s\n", e.what());
    return 1;
  }
}

}  // namespace bench

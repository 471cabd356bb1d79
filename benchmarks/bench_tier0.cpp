// Tier 0 against compiled code, kernel by kernel: the shapes of kernel whose fixed costs tier 0
// pays per block (docs/benchmarks.md, "Tier 0 nearer compiled speed"). Each row runs one graph
// on one tier (lazyjit::set_tier for its duration), its inputs materialised once.
#include <benchmark/benchmark.h>
#include <lazyjit/lazyjit.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "bench_rows.h"

namespace {

using lazyjit::Tensor;

/// A graph of materialised inputs, built anew each iteration (a cache hit after the first).
struct Workload {
  std::function<std::vector<Tensor>()> inputs;
  std::function<Tensor(std::vector<Tensor>&)> step;  ///< may reassign inputs (a parameter updated in place)
};

Tensor heads(const Tensor& h) { return lazyjit::reshape(lazyjit::permute(h, {0, 2, 1, 3}), {1024, 128}); }

Workload workload(const std::string& name) {
  using lazyjit::randn;
  if (name == "matmul") {  // a product of the GPT step's shape, its plain epilogue
    return {[] { return std::vector<Tensor>{randn({1024, 128}, 1), randn({128, 512}, 2)}; },
            [](std::vector<Tensor>& in) { return lazyjit::matmul(in[0], in[1]); }};
  }
  if (name == "matmul_narrow") {  // attention's output projection: [1024, 128] @ [128, 128]
    return {[] { return std::vector<Tensor>{randn({1024, 128}, 1), randn({128, 128}, 2)}; },
            [](std::vector<Tensor>& in) { return lazyjit::matmul(in[0], in[1]); }};
  }
  if (name == "attention_values") {  // softmax(q k^T) v per head: [16,4,64,64] @ [16,4,64,32]
    return {[] { return std::vector<Tensor>{randn({16, 4, 64, 64}, 1), randn({16, 4, 64, 32}, 2)}; },
            [](std::vector<Tensor>& in) { return lazyjit::matmul(in[0], in[1]); }};
  }
  if (name == "matmul_transposed") {  // a weight's gradient, x^T g: A packed from a transposed operand
    return {[] { return std::vector<Tensor>{randn({1024, 512}, 1), randn({1024, 128}, 2)}; },
            [](std::vector<Tensor>& in) { return lazyjit::matmul(lazyjit::transpose(in[0], 0, 1), in[1]); }};
  }
  if (name == "matmul_epilogue") {  // the same with 12 elementwise ops fused into its epilogue
    return {[] { return std::vector<Tensor>{randn({1024, 128}, 1), randn({128, 512}, 2), randn({1024, 512}, 3)}; },
            [](std::vector<Tensor>& in) {
              const Tensor m = lazyjit::matmul(in[0], in[1]);
              return lazyjit::sqrt(m * m * 0.5 + in[2] * 0.25 + 1.0) / (lazyjit::exp(m * 0.1) + 2.0) - in[2] * 0.3;
            }};
  }
  if (name == "heads_cat") {  // attention's heads put back together: [16,4,64,32] x 3 into [1024,384]
    return {[] { return std::vector<Tensor>{randn({16, 4, 64, 32}, 4), randn({16, 4, 64, 32}, 5), randn({16, 4, 64, 32}, 6)}; },
            [](std::vector<Tensor>& in) { return lazyjit::cat({heads(in[0]), heads(in[1]), heads(in[2])}, 1); }};
  }
  if (name == "adam_vectors") {  // Adam's update of 14 vectors of 128 in place (a 1-D parameter's: one run)
    return {[] {
              std::vector<Tensor> in;
              for (uint64_t k = 0; k < 14; ++k) {
                in.push_back(randn({128}, 10 + k));
                in.push_back(randn({128}, 30 + k));
                in.push_back(lazyjit::abs(randn({128}, 50 + k)));
                in.push_back(randn({128}, 70 + k));
              }
              return in;
            },
            [](std::vector<Tensor>& in) {
              for (size_t k = 0; k < 14; ++k) {
                Tensor &p = in[4 * k], &m = in[4 * k + 1], &v = in[4 * k + 2];
                const Tensor& g = in[4 * k + 3];
                m = m * 0.9 + g * 0.1;
                v = v * 0.999 + g * g * 0.001;
                p = p - m * 0.001 / (lazyjit::sqrt(v) + 1e-8);
              }
              lazyjit::mark_step();
              return in[0];
            }};
  }
  if (name == "column_sum") {  // a sum over the batch (a bias's gradient)
    return {[] { return std::vector<Tensor>{randn({1024, 512}, 7)}; },
            [](std::vector<Tensor>& in) { return lazyjit::sum(in[0] * 2.0, {0}); }};
  }
  if (name == "embedding") {  // the GPT's first residual: token rows picked by an index (checked), positions, a sum
    return {[] {
              std::vector<int64_t> ids(16 * 64);
              for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int64_t>((i * 37) % 65);
              return std::vector<Tensor>{randn({65, 128}, 11), randn({64, 128}, 12), randn({1024, 128}, 13),
                                         Tensor::from_vector<int64_t>(ids, {16, 64})};
            },
            [](std::vector<Tensor>& in) {
              const Tensor h = lazyjit::reshape(lazyjit::embedding(in[0], in[3]) + in[1], {1024, 128});
              return h + in[2];
            }};
  }
  if (name == "embedding_sum") {  // a row statistic of the token rows (the first layer norm's mean)
    Workload w = workload("embedding");
    w.step = [](std::vector<Tensor>& in) {
      return lazyjit::sum(lazyjit::reshape(lazyjit::embedding(in[0], in[3]) + in[1], {1024, 128}), {1});
    };
    return w;
  }
  if (name == "causal_softmax") {  // attention's weights: scores masked causally, a softmax over each row of 64
    return {[] { return std::vector<Tensor>{randn({16, 4, 64, 64}, 14)}; },
            [](std::vector<Tensor>& in) {
              const Tensor causal = lazyjit::ge(lazyjit::unsqueeze(lazyjit::arange(64), 1), lazyjit::arange(64));
              return lazyjit::softmax(lazyjit::where(causal, in[0] * 0.125, -std::numeric_limits<double>::infinity()), -1);
            }};
  }
  if (name == "row_scaled") {  // values of the row alone (a norm's statistics) beside the row's elements
    return {[] {
              const Tensor x = randn({1024, 128}, 8);
              return std::vector<Tensor>{x, lazyjit::sum(x * x, {1}, true)};
            },
            [](std::vector<Tensor>& in) {
              const Tensor& s = in[1];
              return in[0] * lazyjit::rsqrt(s / 128.0 + 1e-5) * lazyjit::sqrt(s + 2.0) - in[0] / (s + 1.0);
            }};
  }
  if (name == "dropout") {  // a dropout mask over a GPT block's activations (the seed is a run-time scalar)
    return {[] { return std::vector<Tensor>{randn({1024, 512}, 15)}; },
            [](std::vector<Tensor>& in) { return lazyjit::nn::dropout(in[0], 0.1, 17); }};
  }
  if (name == "randn") {  // a weight's initialisation: [512, 512] normal values
    return {[] { return std::vector<Tensor>{}; }, [](std::vector<Tensor>&) { return randn({512, 512}, 16); }};
  }
  return {};
}

/// The first step's result on `tier`, from fresh inputs.
std::vector<float> first_result(const Workload& w, lazyjit::Tier tier) {
  lazyjit::set_tier(tier);
  std::vector<Tensor> in = w.inputs();
  lazyjit::sync(in);
  return w.step(in).to_vector<float>();
}

void run(benchmark::State& state, const std::string& name, lazyjit::Tier tier) {
  const Workload w = workload(name);
  const lazyjit::Tier before = lazyjit::tier();
  // The check: both tiers' first results agree (math functions may differ in their last bits,
  // float sums by their order: docs/semantics.md, "Tiers").
  const std::vector<float> compiled = first_result(w, lazyjit::Tier::Compile), here = first_result(w, tier);
  for (size_t i = 0; i < compiled.size(); ++i) {
    if (!(std::fabs(here[i] - compiled[i]) <= 1e-3f * (1.0f + std::fabs(compiled[i])))) {
      lazyjit::set_tier(before);
      return state.SkipWithError(("element " + std::to_string(i) + ": " + std::to_string(here[i]) + " against compiled " +
                                  std::to_string(compiled[i])).c_str());
    }
  }
  std::vector<Tensor> in = w.inputs();
  lazyjit::sync(in);
  for (int i = 0; i < 3; ++i) lazyjit::sync({w.step(in)});  // compiled, or prepared for tier 0
  const lazyjit::Metrics start = lazyjit::metrics();
  for (auto _ : state) lazyjit::sync({w.step(in)});
  const lazyjit::Metrics end = lazyjit::metrics();
  state.counters["tier0_runs"] = static_cast<double>(end.tier0_kernel_runs - start.tier0_kernel_runs) /
                                 static_cast<double>(state.iterations());
  lazyjit::set_tier(before);
}

#define TIER0_ROWS(name)                                                                               \
  void BM_tier0_##name##_tier0(benchmark::State& s) { run(s, #name, lazyjit::Tier::Interpret); }      \
  void BM_tier0_##name##_tier1(benchmark::State& s) { run(s, #name, lazyjit::Tier::Compile); }        \
  LAZYJIT_BENCH(BM_tier0_##name##_tier0, benchmark::kMicrosecond, 0.2);                                \
  LAZYJIT_BENCH(BM_tier0_##name##_tier1, benchmark::kMicrosecond, 0.2)

TIER0_ROWS(matmul);
TIER0_ROWS(matmul_narrow);
TIER0_ROWS(attention_values);
TIER0_ROWS(matmul_transposed);
TIER0_ROWS(matmul_epilogue);
TIER0_ROWS(heads_cat);
TIER0_ROWS(adam_vectors);
TIER0_ROWS(column_sum);
TIER0_ROWS(row_scaled);
TIER0_ROWS(embedding);
TIER0_ROWS(embedding_sum);
TIER0_ROWS(causal_softmax);
TIER0_ROWS(dropout);
TIER0_ROWS(randn);

}  // namespace

// Convolution and embedding, forward and forward+backward: conv2d of a ResNet 3x3 layer
// (64 channels, 56x56, batch 8, padding 1, bias) and an embedding lookup (vocabulary 50,000,
// dim 512, 16x512 tokens). The fwd_bwd rows materialise the output and the gradients of
// sum(out * gy) with respect to the input and weight (conv) or the weight (embedding).
#include <benchmark/benchmark.h>
#include <lazyjit/lazyjit.h>

#include <exception>
#include <string>
#include <vector>

#include "bench_rows.h"
#include "workloads.h"

namespace bench {

namespace conv {

const std::vector<float>& x_data() { return random_data(kN * kC * kH * kW, 81, -1.0f, 1.0f); }
const std::vector<float>& w_data() { return random_data(kC * kC * kK * kK, 82, -0.1f, 0.1f); }
const std::vector<float>& bias_data() { return random_data(kC, 83, -1.0f, 1.0f); }
const std::vector<float>& gy_data() { return random_data(kN * kC * kH * kW, 84, -1.0f, 1.0f); }

Reference forward_ref() {
  return {kN * kC * kH * kW,
          [](int64_t e) {
            const float *x = x_data().data(), *w = w_data().data();
            const int64_t n = e / (kC * kH * kW), o = e / (kH * kW) % kC, y = e / kW % kH, xx = e % kW;
            double sum = bias_data()[o];
            for (int64_t c = 0; c < kC; ++c) {
              for (int64_t i = 0; i < kK; ++i) {
                for (int64_t j = 0; j < kK; ++j) {
                  const int64_t r = y - 1 + i, s = xx - 1 + j;
                  if (r < 0 || r >= kH || s < 0 || s >= kW) continue;
                  sum += double{w[((o * kC + c) * kK + i) * kK + j]} * x[((n * kC + c) * kH + r) * kW + s];
                }
              }
            }
            return sum;
          },
          1e-3, 1e-4};
}

Reference weight_grad_ref() {
  return {kC * kC * kK * kK,
          [](int64_t e) {
            const float *x = x_data().data(), *gy = gy_data().data();
            const int64_t o = e / (kC * kK * kK), c = e / (kK * kK) % kC, i = e / kK % kK, j = e % kK;
            double sum = 0;
            for (int64_t n = 0; n < kN; ++n) {
              for (int64_t y = 0; y < kH; ++y) {
                for (int64_t xx = 0; xx < kW; ++xx) {
                  const int64_t r = y - 1 + i, s = xx - 1 + j;
                  if (r < 0 || r >= kH || s < 0 || s >= kW) continue;
                  sum += double{gy[((n * kC + o) * kH + y) * kW + xx]} * x[((n * kC + c) * kH + r) * kW + s];
                }
              }
            }
            return sum;
          },
          1e-2, 1e-4};
}

}  // namespace conv

namespace embed {

const std::vector<float>& weight_data() { return random_data(kVocab * kDim, 91, -1.0f, 1.0f); }
const std::vector<int64_t>& token_data() {
  static const std::vector<int64_t> tokens = [] {
    std::mt19937 rng(92);
    std::vector<int64_t> t(kTokens);
    for (int64_t& v : t) v = static_cast<int64_t>(rng() % 1000) * 50;  // repeats, spread over the table
    return t;
  }();
  return tokens;
}
const std::vector<float>& gy_data() { return random_data(kTokens * kDim, 93, -1.0f, 1.0f); }

Reference forward_ref() {
  return {kTokens * kDim, [](int64_t e) { return double{weight_data()[token_data()[e / kDim] * kDim + e % kDim]}; }, 0, 0};
}

Reference weight_grad_ref() {
  return {kVocab * kDim,
          [](int64_t e) {
            double sum = 0;
            for (int64_t t = 0; t < kTokens; ++t) {
              if (token_data()[t] == e / kDim) sum += gy_data()[t * kDim + e % kDim];
            }
            return sum;
          },
          1e-4, 1e-5};
}

}  // namespace embed

}  // namespace bench

namespace {

using lazyjit::Tensor;

/// Checks the tensor `check` of run() against ref, then times run() (which materialises
/// every tensor it returns).
template <class Run>
void run_steps(benchmark::State& state, const bench::Reference& ref, Run run) {
  try {
    const std::vector<Tensor> first = run();
    const std::vector<float> got = first.back().to_vector<float>();
    const std::string err = static_cast<int64_t>(got.size()) == ref.n ? ref.check(got.data()) : "wrong size";
    if (!err.empty()) return state.SkipWithError(err.c_str());
    const int64_t compiles = lazyjit::metrics().compiles;
    for (auto _ : state) run();
    state.counters["compiles"] = static_cast<double>(lazyjit::metrics().compiles - compiles);
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
  }
}

void BM_conv2d_fwd_lazyjit(benchmark::State& state) {
  using namespace bench::conv;
  const Tensor x = Tensor::from_vector<float>(x_data(), {kN, kC, kH, kW});
  const Tensor w = Tensor::from_vector<float>(w_data(), {kC, kC, kK, kK}), b = Tensor::from_vector<float>(bias_data(), {kC});
  bench::run_lazyjit(state, forward_ref(), [&] { return lazyjit::conv2d(x, w, b, 1, 1); });
}

void BM_conv2d_fwd_bwd_lazyjit(benchmark::State& state) {
  using namespace bench::conv;
  Tensor x = Tensor::from_vector<float>(x_data(), {kN, kC, kH, kW});
  Tensor w = Tensor::from_vector<float>(w_data(), {kC, kC, kK, kK}), b = Tensor::from_vector<float>(bias_data(), {kC});
  const Tensor gy = Tensor::from_vector<float>(gy_data(), {kN, kC, kH, kW});
  x.requires_grad_();
  w.requires_grad_();
  run_steps(state, weight_grad_ref(), [&] {
    x.zero_grad();
    w.zero_grad();
    const Tensor y = lazyjit::conv2d(x, w, b, 1, 1);
    lazyjit::sum(y * gy).backward();
    std::vector<Tensor> out = {y, x.grad(), w.grad()};
    lazyjit::sync(out);
    return out;
  });
}

void BM_embedding_fwd_lazyjit(benchmark::State& state) {
  using namespace bench::embed;
  const Tensor weight = Tensor::from_vector<float>(weight_data(), {kVocab, kDim});
  const Tensor tokens = Tensor::from_vector<int64_t>(token_data(), {kBatch, kSeq});
  bench::run_lazyjit(state, forward_ref(), [&] { return lazyjit::embedding(weight, tokens); });
}

void BM_embedding_fwd_bwd_lazyjit(benchmark::State& state) {
  using namespace bench::embed;
  Tensor weight = Tensor::from_vector<float>(weight_data(), {kVocab, kDim});
  const Tensor tokens = Tensor::from_vector<int64_t>(token_data(), {kBatch, kSeq});
  const Tensor gy = Tensor::from_vector<float>(gy_data(), {kBatch, kSeq, kDim});
  weight.requires_grad_();
  run_steps(state, weight_grad_ref(), [&] {
    weight.zero_grad();
    const Tensor y = lazyjit::embedding(weight, tokens);
    lazyjit::sum(y * gy).backward();
    std::vector<Tensor> out = {y, weight.grad()};
    lazyjit::sync(out);
    return out;
  });
}

}  // namespace

LAZYJIT_BENCH(BM_conv2d_fwd_lazyjit, benchmark::kMillisecond, 0.5);
LAZYJIT_BENCH(BM_conv2d_fwd_bwd_lazyjit, benchmark::kMillisecond, 0.5);
LAZYJIT_BENCH(BM_embedding_fwd_lazyjit, benchmark::kMillisecond, 0.3);
LAZYJIT_BENCH(BM_embedding_fwd_bwd_lazyjit, benchmark::kMillisecond, 0.3);

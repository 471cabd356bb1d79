// Row normalisation benchmarks over the last dim of float32[4096, 1024]: softmax and
// layer_norm, lazyjit against the hand loops of hand_loops.h.
#include <benchmark/benchmark.h>
#include <lazyjit/lazyjit.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "bench_rows.h"
#include "hand_loops.h"
#include "workloads.h"

namespace bench::norm {

const std::vector<float>& x_data() { return random_data(kN, 42, -4.0f, 4.0f); }
const std::vector<float>& gamma_data() { return random_data(kCols, 43, 0.5f, 1.5f); }
const std::vector<float>& beta_data() { return random_data(kCols, 44, -0.5f, 0.5f); }

Reference softmax_ref() {
  const float* x = x_data().data();
  return {kN,
          [x](int64_t i) {
            const float* row = x + i / kCols * kCols;
            const double max = *std::max_element(row, row + kCols);
            double sum = 0;
            for (int64_t c = 0; c < kCols; ++c) sum += std::exp(row[c] - max);
            return std::exp(x[i] - max) / sum;
          },
          1e-9, 1e-4};
}

Reference layer_norm_ref() {
  const float *x = x_data().data(), *gamma = gamma_data().data(), *beta = beta_data().data();
  return {kN,
          [=](int64_t i) {
            const float* row = x + i / kCols * kCols;
            double mean = 0, var = 0;
            for (int64_t c = 0; c < kCols; ++c) mean += row[c];
            mean /= kCols;
            for (int64_t c = 0; c < kCols; ++c) var += (row[c] - mean) * (row[c] - mean);
            var /= kCols;
            const int64_t c = i % kCols;
            return (x[i] - mean) / std::sqrt(var + kEps) * gamma[c] + beta[c];
          },
          1e-4, 1e-4};
}

}  // namespace bench::norm

namespace {

using lazyjit::Tensor;
using namespace bench::norm;

void set_bytes(benchmark::State& state) {
  state.SetBytesProcessed(state.iterations() * kN * 2 * int64_t{sizeof(float)});
}

void BM_softmax_lazyjit(benchmark::State& state) {
  Tensor x = Tensor::from_vector<float>(x_data(), {kRows, kCols});
  bench::run_lazyjit(state, softmax_ref(), [&] { return lazyjit::softmax(x, -1); });
  set_bytes(state);
}
void BM_softmax_hand(benchmark::State& state) {
  bench::run_peer(state, softmax_ref(), [](float* out) { bench::softmax(x_data().data(), out, kRows, kCols); });
  set_bytes(state);
}
void BM_softmax_hand_fastmath(benchmark::State& state) {
  bench::run_peer(state, softmax_ref(),
                  [](float* out) { bench::softmax_fastmath(x_data().data(), out, kRows, kCols); });
  set_bytes(state);
}

void BM_layer_norm_lazyjit(benchmark::State& state) {
  Tensor x = Tensor::from_vector<float>(x_data(), {kRows, kCols});
  Tensor gamma = Tensor::from_vector<float>(gamma_data(), {kCols});
  Tensor beta = Tensor::from_vector<float>(beta_data(), {kCols});
  bench::run_lazyjit(state, layer_norm_ref(), [&] { return lazyjit::layer_norm(x, 1, gamma, beta, kEps); });
  set_bytes(state);
}
void BM_layer_norm_hand(benchmark::State& state) {
  bench::run_peer(state, layer_norm_ref(), [](float* out) {
    bench::layer_norm(x_data().data(), gamma_data().data(), beta_data().data(), out, kRows, kCols, kEps);
  });
  set_bytes(state);
}
void BM_layer_norm_hand_fastmath(benchmark::State& state) {
  bench::run_peer(state, layer_norm_ref(), [](float* out) {
    bench::layer_norm_fastmath(x_data().data(), gamma_data().data(), beta_data().data(), out, kRows, kCols, kEps);
  });
  set_bytes(state);
}

}  // namespace

LAZYJIT_BENCH(BM_softmax_lazyjit, benchmark::kMillisecond, 0.2);
LAZYJIT_BENCH(BM_softmax_hand, benchmark::kMillisecond, 0.2);
LAZYJIT_BENCH(BM_softmax_hand_fastmath, benchmark::kMillisecond, 0.2);
LAZYJIT_BENCH(BM_layer_norm_lazyjit, benchmark::kMillisecond, 0.2);
LAZYJIT_BENCH(BM_layer_norm_hand, benchmark::kMillisecond, 0.2);
LAZYJIT_BENCH(BM_layer_norm_hand_fastmath, benchmark::kMillisecond, 0.2);

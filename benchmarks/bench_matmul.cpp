// Matrix benchmarks: matmul of float32 1024x1024 by 1024x1024 and linear_relu
// relu(x @ w + bias) with x[512, 1024], w[1024, 1024], bias[1024]; lazyjit against the hand
// sgemm (hand_gemm.cpp) and OpenBLAS, each library gemm followed by a hand bias+relu pass.
#include <benchmark/benchmark.h>
#include <lazyjit/lazyjit.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#ifdef LAZYJIT_BENCH_HAVE_OPENBLAS
#include <cblas.h>
#endif

#include "bench_rows.h"
#include "hand_loops.h"
#include "workloads.h"

namespace bench::gemm {

const std::vector<float>& a_data() { return random_data(kDim * kDim, 45, -1.0f, 1.0f); }
const std::vector<float>& b_data() { return random_data(kDim * kDim, 46, -1.0f, 1.0f); }
const std::vector<float>& x_data() { return random_data(kBatch * kDim, 47, -1.0f, 1.0f); }
const std::vector<float>& bias_data() { return random_data(kDim, 48, -1.0f, 1.0f); }

namespace {
// a[m, k] @ b[k, n], then max(. + bias, 0) when bias is given.
Reference gemm_ref(const float* a, const float* b, const float* bias, int64_t m, int64_t n, int64_t k) {
  return {m * n,
          [=](int64_t i) {
            const int64_t r = i / n, c = i % n;
            double sum = 0;
            for (int64_t kk = 0; kk < k; ++kk) sum += double{a[r * k + kk]} * b[kk * n + c];
            return bias ? std::max(sum + bias[c], 0.0) : sum;
          },
          1e-3, 1e-4};
}
}  // namespace

Reference matmul_ref() { return gemm_ref(a_data().data(), b_data().data(), nullptr, kDim, kDim, kDim); }
Reference linear_relu_ref() {
  return gemm_ref(x_data().data(), b_data().data(), bias_data().data(), kBatch, kDim, kDim);
}

}  // namespace bench::gemm

namespace {

using lazyjit::Tensor;
using namespace bench::gemm;

// Shown as FLOP=123G/s: floating-point operations per second of real time.
void set_flops(benchmark::State& state, int64_t m) {
  state.counters["FLOP"] =
      benchmark::Counter(2.0 * static_cast<double>(m * kDim * kDim * state.iterations()), benchmark::Counter::kIsRate);
}

using GemmFn = void (*)(const float* a, const float* b, float* c, int64_t m, int64_t n, int64_t k);

void matmul_peer(benchmark::State& state, GemmFn gemm) {
  const float *a = a_data().data(), *b = b_data().data();
  bench::run_peer(state, matmul_ref(), [=](float* c) { gemm(a, b, c, kDim, kDim, kDim); });
  set_flops(state, kDim);
}

void linear_relu_peer(benchmark::State& state, GemmFn gemm) {
  const float *x = x_data().data(), *w = b_data().data(), *bias = bias_data().data();
  bench::run_peer(state, linear_relu_ref(), [=](float* y) {
    gemm(x, w, y, kBatch, kDim, kDim);
    bench::bias_relu(y, bias, kBatch, kDim);
  });
  set_flops(state, kBatch);
}

void BM_matmul_lazyjit(benchmark::State& state) {
  Tensor a = Tensor::from_vector<float>(a_data(), {kDim, kDim});
  Tensor b = Tensor::from_vector<float>(b_data(), {kDim, kDim});
  bench::run_lazyjit(state, matmul_ref(), [&] { return lazyjit::matmul(a, b); });
  set_flops(state, kDim);
}
void BM_matmul_hand(benchmark::State& state) { matmul_peer(state, bench::sgemm); }

void BM_linear_relu_lazyjit(benchmark::State& state) {
  Tensor x = Tensor::from_vector<float>(x_data(), {kBatch, kDim});
  Tensor w = Tensor::from_vector<float>(b_data(), {kDim, kDim});
  Tensor bias = Tensor::from_vector<float>(bias_data(), {kDim});
  bench::run_lazyjit(state, linear_relu_ref(), [&] { return lazyjit::relu(lazyjit::matmul(x, w) + bias); });
  set_flops(state, kBatch);
}
void BM_linear_relu_hand_plus_pass(benchmark::State& state) { linear_relu_peer(state, bench::sgemm); }

#ifdef LAZYJIT_BENCH_HAVE_OPENBLAS
void openblas_sgemm(const float* a, const float* b, float* c, int64_t m, int64_t n, int64_t k) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, a, k, b, n, 0.0f, c, n);
}
void BM_matmul_openblas(benchmark::State& state) { matmul_peer(state, openblas_sgemm); }
void BM_linear_relu_openblas_plus_pass(benchmark::State& state) { linear_relu_peer(state, openblas_sgemm); }
#endif

}  // namespace

LAZYJIT_BENCH(BM_matmul_lazyjit, benchmark::kMillisecond, 0.3);
LAZYJIT_BENCH(BM_matmul_hand, benchmark::kMillisecond, 0.3);
LAZYJIT_BENCH(BM_linear_relu_lazyjit, benchmark::kMillisecond, 0.3);
LAZYJIT_BENCH(BM_linear_relu_hand_plus_pass, benchmark::kMillisecond, 0.3);
#ifdef LAZYJIT_BENCH_HAVE_OPENBLAS
LAZYJIT_BENCH(BM_matmul_openblas, benchmark::kMillisecond, 0.3);
LAZYJIT_BENCH(BM_linear_relu_openblas_plus_pass, benchmark::kMillisecond, 0.3);
#endif

// Eigen peer: the Tensor module's expressions on a ThreadPoolDevice of kHandThreads threads,
// compiled -O3 -march=native (no fast-math); softmax and layer_norm reductions forced with eval().
#define EIGEN_USE_THREADS
#include <benchmark/benchmark.h>

#include <unsupported/Eigen/CXX11/Tensor>

#include <cstdio>

#include "bench_rows.h"
#include "hand_loops.h"
#include "peers.h"
#include "workloads.h"

namespace bench {

void eigen_setup() {
  std::printf("Eigen %d.%d.%d: Tensor module on a ThreadPoolDevice of %d threads\n", EIGEN_WORLD_VERSION,
              EIGEN_MAJOR_VERSION, EIGEN_MINOR_VERSION, kHandThreads);
}

}  // namespace bench

namespace {

template <int Rank>
using In = Eigen::TensorMap<const Eigen::Tensor<const float, Rank, Eigen::RowMajor>>;
template <int Rank>
using Out = Eigen::TensorMap<Eigen::Tensor<float, Rank, Eigen::RowMajor>>;

const Eigen::ThreadPoolDevice& device() {
  static Eigen::ThreadPool pool(bench::kHandThreads);
  static const Eigen::ThreadPoolDevice device(&pool, bench::kHandThreads);
  return device;
}

void BM_ew_simple_eigen(benchmark::State& state) {
  const int64_t n = state.range(0);
  const In<1> x(bench::ew::input(n).data(), n);
  bench::run_peer(state, bench::ew::simple_ref(n), [&](float* out) {
    Out<1>(out, n).device(device()) = (x * 1.5f + 0.25f).cwiseMax(0.0f) * 0.5f + x;
  });
}

void BM_ew_transcendental_eigen(benchmark::State& state) {
  const int64_t n = state.range(0);
  const In<1> x(bench::ew::input(n).data(), n);
  bench::run_peer(state, bench::ew::transcendental_ref(n), [&](float* out) {
    Out<1>(out, n).device(device()) = x.sigmoid() * (x * 0.5f + 1.0f).tanh() + x.square();
  });
}

void BM_softmax_eigen(benchmark::State& state) {
  using namespace bench::norm;
  const In<2> x(x_data().data(), kRows, kCols);
  const Eigen::array<Eigen::Index, 1> last{1};
  const Eigen::array<Eigen::Index, 2> column{kRows, 1}, across{1, kCols};
  bench::run_peer(state, softmax_ref(), [&](float* out) {
    Out<2> y(out, kRows, kCols);
    y.device(device()) = (x - x.maximum(last).eval().reshape(column).broadcast(across)).exp();
    y.device(device()) = y / y.sum(last).eval().reshape(column).broadcast(across);
  });
}

// Two passes as Eigen writes it: y = x - mean(x); then y * rsqrt(mean(y^2) + eps) * gamma + beta.
void BM_layer_norm_eigen(benchmark::State& state) {
  using namespace bench::norm;
  const In<2> x(x_data().data(), kRows, kCols);
  const In<2> gamma(gamma_data().data(), 1, kCols), beta(beta_data().data(), 1, kCols);
  const Eigen::array<Eigen::Index, 1> last{1};
  const Eigen::array<Eigen::Index, 2> column{kRows, 1}, across{1, kCols}, down{kRows, 1};
  bench::run_peer(state, layer_norm_ref(), [&](float* out) {
    Out<2> y(out, kRows, kCols);
    y.device(device()) = x - x.mean(last).eval().reshape(column).broadcast(across);
    y.device(device()) = y * (y.square().mean(last) + kEps).rsqrt().eval().reshape(column).broadcast(across) *
                             gamma.broadcast(down) +
                         beta.broadcast(down);
  });
}

void BM_matmul_eigen(benchmark::State& state) {
  using namespace bench::gemm;
  const In<2> a(a_data().data(), kDim, kDim), b(b_data().data(), kDim, kDim);
  const Eigen::array<Eigen::IndexPair<int>, 1> inner{Eigen::IndexPair<int>(1, 0)};
  bench::run_peer(state, matmul_ref(),
                  [&](float* out) { Out<2>(out, kDim, kDim).device(device()) = a.contract(b, inner); });
}

}  // namespace

LAZYJIT_BENCH(BM_ew_simple_eigen, benchmark::kMillisecond, 0.2)->Arg(1 << 24);
LAZYJIT_BENCH(BM_ew_simple_eigen, benchmark::kMicrosecond, 0.1)->Arg(1 << 16);
LAZYJIT_BENCH(BM_ew_transcendental_eigen, benchmark::kMillisecond, 0.3)->Arg(1 << 24);
LAZYJIT_BENCH(BM_softmax_eigen, benchmark::kMillisecond, 0.2);
LAZYJIT_BENCH(BM_layer_norm_eigen, benchmark::kMillisecond, 0.2);
LAZYJIT_BENCH(BM_matmul_eigen, benchmark::kMillisecond, 0.3);

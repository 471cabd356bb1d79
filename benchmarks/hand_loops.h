// Hand-written peer kernels for the lazyjit benchmarks: what a C++ programmer writes with
// oneTBB, compiled -O3 -march=native without -ffast-math.
#pragma once

#include <cstdint>

namespace bench {

/// Threads every peer runs on: the hand loops' tbb::task_arena, and OpenBLAS.
inline constexpr int kHandThreads = 2;

/// out[i] = max(x[i]*1.5f+0.25f, 0)*0.5f + x[i]
void ew_simple(const float* x, float* out, int64_t n);
/// ew_simple with non-temporal stores (AVX-512 builds only; plain stores otherwise).
void ew_simple_stream(const float* x, float* out, int64_t n);
/// out[i] = sigmoid(x[i]) * tanhf(0.5f*x[i]+1) + x[i]*x[i], sigmoid(v) = 1/(1+expf(-v))
void ew_transcendental(const float* x, float* out, int64_t n);

/// ew_transcendental compiled with -ffast-math, so GCC calls libmvec's vector expf/tanhf:
/// the fastest thing a C++ programmer can get from the compiler (and no longer IEEE-exact).
void ew_transcendental_fastmath(const float* x, float* out, int64_t n);

/// Softmax over each row of x[rows, cols]: a max pass, an exp+sum pass that stores exp
/// into out, a scale pass. Scalar glibc expf and in-order sums, as IEEE math requires.
void softmax(const float* x, float* out, int64_t rows, int64_t cols);
/// softmax compiled with -ffast-math: expf through libmvec, reductions vectorised.
void softmax_fastmath(const float* x, float* out, int64_t rows, int64_t cols);
/// Over each row of x[rows, cols]: (x - mean) / sqrt(var + eps) * gamma + beta, with the
/// biased variance (mean, then variance, then the normalising pass).
void layer_norm(const float* x, const float* gamma, const float* beta, float* out, int64_t rows, int64_t cols,
                float eps);
/// layer_norm compiled with -ffast-math: the mean and variance sums vectorised.
void layer_norm_fastmath(const float* x, const float* gamma, const float* beta, float* out, int64_t rows,
                         int64_t cols, float eps);
/// out[r, c] = max(out[r, c] + bias[c], 0): the pass that follows a library sgemm.
void bias_relu(float* out, const float* bias, int64_t rows, int64_t cols);

/// c[m, n] = a[m, k] @ b[k, n], all row-major (hand_gemm.cpp): a 6x32 register-tiled
/// AVX-512 kernel over 32-wide packed panels of b; a plain loop without AVX-512.
void sgemm(const float* a, const float* b, float* c, int64_t m, int64_t n, int64_t k);
/// c[m, n] += a[m, k] @ b[k, n], as sgemm.
void sgemm_add(const float* a, const float* b, float* c, int64_t m, int64_t n, int64_t k);

/// Ops in trace_peer: 1000 alternating `+= 1.0f` / `*= 0.999f`.
inline constexpr int kTraceOps = 1000;
inline constexpr int kTraceElems = 16;
/// out[0..16) = in[0..16) after kTraceOps alternating ops; single-threaded.
void trace_peer(const float* in, float* out);

}  // namespace bench

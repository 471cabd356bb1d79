// Hand-written peer kernels for the lazyjit benchmarks: what a C++ programmer writes with
// oneTBB, compiled -O3 -march=native without -ffast-math.
#pragma once

#include <cstdint>

namespace bench {

/// Threads the hand loops run on (a fixed tbb::task_arena).
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

/// Ops in trace_peer: 1000 alternating `+= 1.0f` / `*= 0.999f`.
inline constexpr int kTraceOps = 1000;
inline constexpr int kTraceElems = 16;
/// out[0..16) = in[0..16) after kTraceOps alternating ops; single-threaded.
void trace_peer(const float* in, float* out);

}  // namespace bench

// Hand-written peer kernels (see hand_loops.h). Built with -O3 -march=native, no fast-math.
#include "hand_loops.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "hand_parallel.h"
#include "hand_row_kernels.h"

namespace bench {
namespace {

inline float simple(float v) { return std::max(v * 1.5f + 0.25f, 0.0f) * 0.5f + v; }

}  // namespace

void ew_simple(const float* __restrict x, float* __restrict out, int64_t n) {
  parallel(n, [=](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) out[i] = simple(x[i]);
  });
}

void ew_simple_stream(const float* __restrict x, float* __restrict out, int64_t n) {
  parallel(n, [=](int64_t b, int64_t e) {
    int64_t i = b;
#ifdef __AVX512F__
    for (; i < e && reinterpret_cast<uintptr_t>(out + i) % 64 != 0; ++i) out[i] = simple(x[i]);
    const __m512 k15 = _mm512_set1_ps(1.5f), k025 = _mm512_set1_ps(0.25f);
    const __m512 k05 = _mm512_set1_ps(0.5f), zero = _mm512_setzero_ps();
    for (; i + 16 <= e; i += 16) {
      __m512 v = _mm512_loadu_ps(x + i);
      __m512 t = _mm512_add_ps(_mm512_mul_ps(v, k15), k025);
      t = _mm512_mask_max_ps(zero, 0xFFFF, t, zero);  // _mm512_max_ps trips GCC 12's -Wmaybe-uninitialized
      _mm512_stream_ps(out + i, _mm512_add_ps(_mm512_mul_ps(t, k05), v));
    }
    _mm_sfence();
#endif
    for (; i < e; ++i) out[i] = simple(x[i]);
  });
}

// The plain loop a C++ programmer writes. Without -fno-math-errno g++ keeps expf/tanhf
// scalar calls into glibc.
void ew_transcendental(const float* __restrict x, float* __restrict out, int64_t n) {
  parallel(n, [=](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      float v = x[i];
      float sig = 1.0f / (1.0f + std::exp(-v));
      out[i] = sig * std::tanh(0.5f * v + 1.0f) + v * v;
    }
  });
}

void softmax(const float* x, float* out, int64_t rows, int64_t cols) { softmax_rows(x, out, rows, cols); }

void layer_norm(const float* x, const float* gamma, const float* beta, float* out, int64_t rows, int64_t cols,
                float eps) {
  layer_norm_rows(x, gamma, beta, out, rows, cols, eps);
}

void bias_relu(float* __restrict out, const float* __restrict bias, int64_t rows, int64_t cols) {
  parallel(rows, [=](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      float* yr = out + r * cols;
      for (int64_t c = 0; c < cols; ++c) yr[c] = std::max(yr[c] + bias[c], 0.0f);
    }
  });
}

void trace_peer(const float* in, float* out) {
  float y[kTraceElems];
  std::copy(in, in + kTraceElems, y);
  for (int i = 0; i < kTraceOps; ++i) {
    if (i % 2 == 0) {
      for (float& v : y) v += 1.0f;
    } else {
      for (float& v : y) v *= 0.999f;
    }
  }
  std::copy(y, y + kTraceElems, out);
}

}  // namespace bench

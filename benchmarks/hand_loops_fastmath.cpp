// ew_transcendental, softmax and layer_norm built with -O3 -march=native -ffast-math (see
// hand_loops.h). Only this file gets -ffast-math, and only at compile time: linking with it
// would set flush-to-zero for the whole process.
#include <cmath>

#include "hand_loops.h"
#include "hand_parallel.h"
#include "hand_row_kernels.h"

namespace bench {

void ew_transcendental_fastmath(const float* __restrict x, float* __restrict out, int64_t n) {
  parallel(n, [=](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const float v = x[i];
      out[i] = 1.0f / (1.0f + expf(-v)) * tanhf(0.5f * v + 1.0f) + v * v;
    }
  });
}

void softmax_fastmath(const float* x, float* out, int64_t rows, int64_t cols) { softmax_rows(x, out, rows, cols); }

void layer_norm_fastmath(const float* x, const float* gamma, const float* beta, float* out, int64_t rows,
                         int64_t cols, float eps) {
  layer_norm_rows(x, gamma, beta, out, rows, cols, eps);
}

}  // namespace bench

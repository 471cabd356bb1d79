// Row kernels compiled twice from this one source: by hand_loops.cpp (IEEE math) and by
// hand_loops_fastmath.cpp (-ffast-math). Internal linkage keeps the two builds apart.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "hand_parallel.h"

namespace bench {
namespace {

void softmax_rows(const float* __restrict x, float* __restrict out, int64_t rows, int64_t cols) {
  parallel(rows, [=](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const float* xr = x + r * cols;
      float* yr = out + r * cols;
      float max = xr[0];
      for (int64_t c = 1; c < cols; ++c) max = std::max(max, xr[c]);
      float sum = 0.0f;
      for (int64_t c = 0; c < cols; ++c) sum += yr[c] = std::exp(xr[c] - max);
      const float inv = 1.0f / sum;
      for (int64_t c = 0; c < cols; ++c) yr[c] *= inv;
    }
  });
}

void layer_norm_rows(const float* __restrict x, const float* __restrict gamma, const float* __restrict beta,
                     float* __restrict out, int64_t rows, int64_t cols, float eps) {
  parallel(rows, [=](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const float* xr = x + r * cols;
      float* yr = out + r * cols;
      float sum = 0.0f;
      for (int64_t c = 0; c < cols; ++c) sum += xr[c];
      const float mean = sum / static_cast<float>(cols);
      float sq = 0.0f;
      for (int64_t c = 0; c < cols; ++c) sq += (xr[c] - mean) * (xr[c] - mean);
      const float rstd = 1.0f / std::sqrt(sq / static_cast<float>(cols) + eps);
      for (int64_t c = 0; c < cols; ++c) yr[c] = (xr[c] - mean) * rstd * gamma[c] + beta[c];
    }
  });
}

}  // namespace
}  // namespace bench

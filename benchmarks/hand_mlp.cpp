// HandMlp::step (mlp_problem.h): mlp_train_step on the hand sgemm and two-thread oneTBB loops,
// built -O3 -march=native without fast-math like the other hand files.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>

#include "hand_loops.h"
#include "hand_parallel.h"
#include "mlp_problem.h"

namespace bench::mlp {
namespace {

// out[cols, rows] = scale * in[rows, cols]^T, in 16x16 blocks: a column of in strides over
// more cache lines than L1 keeps apart.
void transpose(const float* __restrict in, float* __restrict out, int64_t rows, int64_t cols, float scale) {
  constexpr int64_t kBlock = 16;
  parallel((cols + kBlock - 1) / kBlock, [=](int64_t b, int64_t e) {
    for (int64_t c0 = b * kBlock; c0 < std::min(e * kBlock, cols); c0 += kBlock)
      for (int64_t r0 = 0; r0 < rows; r0 += kBlock)
        for (int64_t r = r0; r < std::min(r0 + kBlock, rows); ++r)
          for (int64_t c = c0; c < std::min(c0 + kBlock, cols); ++c) out[c * rows + r] = scale * in[r * cols + c];
  });
}

// Per row r: logits += bias; d = (softmax(logits) - y) / kBatch; row_loss[r] = the row's
// cross-entropy. Returns the mean loss.
float softmax_cross_entropy(float* __restrict logits, const float* __restrict bias, const float* __restrict y,
                            float* __restrict d, float* __restrict row_loss) {
  parallel(kBatch, [=](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      float *lr = logits + r * kOut, *dr = d + r * kOut;
      const float* yr = y + r * kOut;
      for (int64_t c = 0; c < kOut; ++c) lr[c] += bias[c];
      const float max = *std::max_element(lr, lr + kOut);
      float sum = 0.0f;
      for (int64_t c = 0; c < kOut; ++c) sum += dr[c] = std::exp(lr[c] - max);
      const float log_sum = std::log(sum);
      float loss = 0.0f;
      for (int64_t c = 0; c < kOut; ++c) {
        loss -= yr[c] * (lr[c] - max - log_sum);
        dr[c] = (dr[c] / sum - yr[c]) / kBatch;
      }
      row_loss[r] = loss;
    }
  });
  return std::accumulate(row_loss, row_loss + kBatch, 0.0f) / kBatch;
}

// bias -= kLr * the column sums of grad[kBatch, cols], first zeroing grad where relu_out (when
// given) is 0: the backward of the relu that made it.
void bias_step(float* __restrict grad, const float* __restrict relu_out, float* __restrict bias, int64_t cols) {
  parallel(cols, [=](int64_t b, int64_t e) {
    float sum[kHidden] = {};
    for (int64_t r = 0; r < kBatch; ++r)
      for (int64_t c = b; c < e; ++c) {
        float& g = grad[r * cols + c];
        if (relu_out && !(relu_out[r * cols + c] > 0.0f)) g = 0.0f;
        sum[c - b] += g;
      }
    for (int64_t c = b; c < e; ++c) bias[c] -= kLr * sum[c - b];
  });
}

}  // namespace

float HandMlp::step() {
  sgemm(x.data(), p.w1.data(), h1.data(), kBatch, kHidden, kIn);
  bias_relu(h1.data(), p.b1.data(), kBatch, kHidden);
  sgemm(h1.data(), p.w2.data(), h2.data(), kBatch, kHidden, kHidden);
  bias_relu(h2.data(), p.b2.data(), kBatch, kHidden);
  sgemm(h2.data(), p.w3.data(), logits.data(), kBatch, kOut, kHidden);
  const float loss = softmax_cross_entropy(logits.data(), p.b3.data(), y.data(), dlogits.data(), row_loss.data());

  // Each layer: the gradient of its input from the weights before the update, then
  // w += (-kLr * input^T) @ grad and b -= kLr * grad's column sums.
  transpose(p.w3.data(), w3t.data(), kHidden, kOut, 1.0f);
  sgemm(dlogits.data(), w3t.data(), dh2.data(), kBatch, kHidden, kOut);
  transpose(h2.data(), scaled_t.data(), kBatch, kHidden, -kLr);
  sgemm_add(scaled_t.data(), dlogits.data(), p.w3.data(), kHidden, kOut, kBatch);
  bias_step(dlogits.data(), nullptr, p.b3.data(), kOut);

  bias_step(dh2.data(), h2.data(), p.b2.data(), kHidden);
  transpose(p.w2.data(), w2t.data(), kHidden, kHidden, 1.0f);
  sgemm(dh2.data(), w2t.data(), dh1.data(), kBatch, kHidden, kHidden);
  transpose(h1.data(), scaled_t.data(), kBatch, kHidden, -kLr);
  sgemm_add(scaled_t.data(), dh2.data(), p.w2.data(), kHidden, kHidden, kBatch);

  bias_step(dh1.data(), h1.data(), p.b1.data(), kHidden);
  transpose(x.data(), scaled_t.data(), kBatch, kIn, -kLr);
  sgemm_add(scaled_t.data(), dh1.data(), p.w1.data(), kIn, kHidden, kBatch);
  return loss;
}

}  // namespace bench::mlp

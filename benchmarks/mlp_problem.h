// The mlp_train_step problem every system runs: an MLP 784-512-512-10 with relu, batch 256,
// softmax cross-entropy and SGD in place, from fixed inputs, labels and initial weights; the
// check its losses must pass; the lazyjit step (backward by autograd, or written out with
// lazyjit ops) and the hand-written one.
#pragma once

#include <lazyjit/lazyjit.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "bench_rows.h"

namespace bench::mlp {

inline constexpr int64_t kBatch = 256, kIn = 784, kHidden = 512, kOut = 10;
inline constexpr float kLr = 0.1f;
inline constexpr int kCheckSteps = 5;  ///< steps run before timing; the loss must fall at each

inline const std::vector<float>& inputs() { return random_data(kBatch * kIn, 60, 0.0f, 1.0f); }

/// One-hot labels [kBatch, kOut]: sample i is class (7 * i) % kOut.
inline std::vector<float> one_hot() {
  std::vector<float> y(kBatch * kOut, 0.0f);
  for (int64_t i = 0; i < kBatch; ++i) y[i * kOut + (7 * i) % kOut] = 1.0f;
  return y;
}

/// Weights [fan_in, fan_out] (row-major, so x @ w) and biases, uniform in +-1/sqrt(fan_in).
struct Params {
  std::vector<float> w1, b1, w2, b2, w3, b3;
};
inline Params initial_params() {
  auto init = [](int64_t n, int64_t fan_in, uint32_t seed) {
    const float bound = 1.0f / std::sqrt(static_cast<float>(fan_in));
    return random_data(n, seed, -bound, bound);
  };
  return {init(kIn * kHidden, kIn, 61),     init(kHidden, kIn, 62),     init(kHidden * kHidden, kHidden, 63),
          init(kHidden, kHidden, 64),       init(kHidden * kOut, kHidden, 65), init(kOut, kHidden, 66)};
}

/// The mean cross-entropy of the initial parameters on the batch, in double.
inline double initial_loss() {
  static const double loss = [] {
    const Params p = initial_params();
    const std::vector<float>& x = inputs();
    auto layer = [](const std::vector<double>& in, const std::vector<float>& w, const std::vector<float>& b,
                    int64_t n_in, int64_t n_out, bool relu) {
      std::vector<double> out(kBatch * n_out);
      for (int64_t r = 0; r < kBatch; ++r)
        for (int64_t c = 0; c < n_out; ++c) {
          double sum = b[c];
          for (int64_t k = 0; k < n_in; ++k) sum += in[r * n_in + k] * w[k * n_out + c];
          out[r * n_out + c] = relu ? std::max(sum, 0.0) : sum;
        }
      return out;
    };
    const auto h1 = layer(std::vector<double>(x.begin(), x.end()), p.w1, p.b1, kIn, kHidden, true);
    const auto logits = layer(layer(h1, p.w2, p.b2, kHidden, kHidden, true), p.w3, p.b3, kHidden, kOut, false);
    double total = 0;
    for (int64_t r = 0; r < kBatch; ++r) {
      const double* row = &logits[r * kOut];
      double max = row[0], sum = 0;
      for (int64_t c = 0; c < kOut; ++c) max = std::max(max, row[c]);
      for (int64_t c = 0; c < kOut; ++c) sum += std::exp(row[c] - max);
      total += std::log(sum) + max - row[(7 * r) % kOut];
    }
    return total / kBatch;
  }();
  return loss;
}

/// Empty when the first loss matches initial_loss() and every step lowers it; else a message.
inline std::string check_losses(const std::vector<double>& losses) {
  const double want = initial_loss();
  if (!(std::fabs(losses[0] - want) <= 1e-3 * (1 + want)))
    return "first loss " + std::to_string(losses[0]) + ", want " + std::to_string(want);
  for (size_t i = 1; i < losses.size(); ++i)
    if (!(losses[i] < losses[i - 1]))
      return "loss does not fall: step " + std::to_string(i) + " " + std::to_string(losses[i]);
  return {};
}

/// The model on lazyjit; step() traces forward, backward and the updates, and runs them in
/// one mark_step.
struct LazyMlp {
  using Tensor = lazyjit::Tensor;
  Tensor x, y, w1, b1, w2, b2, w3, b3;

  LazyMlp() {
    const Params p = initial_params();
    x = Tensor::from_vector<float>(inputs(), {kBatch, kIn});
    y = Tensor::from_vector<float>(one_hot(), {kBatch, kOut});
    w1 = Tensor::from_vector<float>(p.w1, {kIn, kHidden});
    b1 = Tensor::from_vector<float>(p.b1, {kHidden});
    w2 = Tensor::from_vector<float>(p.w2, {kHidden, kHidden});
    b2 = Tensor::from_vector<float>(p.b2, {kHidden});
    w3 = Tensor::from_vector<float>(p.w3, {kHidden, kOut});
    b3 = Tensor::from_vector<float>(p.b3, {kOut});
  }

  /// One SGD step, backward by lazyjit::grad; returns the loss before it (materialised by the
  /// step's mark_step).
  Tensor step() {
    const Tensor h1 = lazyjit::relu(lazyjit::matmul(x, w1) + b1);
    const Tensor h2 = lazyjit::relu(lazyjit::matmul(h1, w2) + b2);
    const Tensor logits = lazyjit::matmul(h2, w3) + b3;
    Tensor loss = -lazyjit::sum(lazyjit::log_softmax(logits, 1) * y) / static_cast<double>(kBatch);
    std::vector<Tensor> params = {w1, b1, w2, b2, w3, b3};
    const std::vector<Tensor> grads = lazyjit::grad(loss, params);
    for (size_t i = 0; i < params.size(); ++i) params[i] -= kLr * grads[i];
    lazyjit::mark_step();
    return loss;
  }

  /// The same step with the backward pass written out by hand in lazyjit ops: what autograd's
  /// graph is measured against.
  Tensor step_manual() {
    using lazyjit::matmul, lazyjit::transpose, lazyjit::sum, lazyjit::where, lazyjit::gt;
    const Tensor h1p = matmul(x, w1) + b1, h1 = lazyjit::relu(h1p);
    const Tensor h2p = matmul(h1, w2) + b2, h2 = lazyjit::relu(h2p);
    const Tensor logits = matmul(h2, w3) + b3;
    Tensor loss = -sum(lazyjit::log_softmax(logits, 1) * y) / static_cast<double>(kBatch);

    const Tensor dlogits = (lazyjit::softmax(logits, 1) - y) / static_cast<double>(kBatch);
    const Tensor dh2 = where(gt(h2p, 0.0), matmul(dlogits, transpose(w3, 0, 1)), 0.0);
    const Tensor dh1 = where(gt(h1p, 0.0), matmul(dh2, transpose(w2, 0, 1)), 0.0);
    w3 -= kLr * matmul(transpose(h2, 0, 1), dlogits);
    b3 -= kLr * sum(dlogits, {0});
    w2 -= kLr * matmul(transpose(h1, 0, 1), dh2);
    b2 -= kLr * sum(dh2, {0});
    w1 -= kLr * matmul(transpose(x, 0, 1), dh1);
    b1 -= kLr * sum(dh1, {0});
    lazyjit::mark_step();
    return loss;
  }
};

/// The model on the hand sgemm and two-thread oneTBB loops: LazyMlp::step's forward, backward
/// and SGD, with each transposed operand copied into a scratch buffer (step: hand_mlp.cpp).
struct HandMlp {
  Params p = initial_params();
  const std::vector<float>& x = inputs();
  const std::vector<float> y = one_hot();
  std::vector<float> h1 = std::vector<float>(kBatch * kHidden), h2 = h1, dh1 = h1, dh2 = h1;
  std::vector<float> logits = std::vector<float>(kBatch * kOut), dlogits = logits;
  std::vector<float> row_loss = std::vector<float>(kBatch);
  std::vector<float> w2t = std::vector<float>(kHidden * kHidden), w3t = std::vector<float>(kOut * kHidden);
  std::vector<float> scaled_t = std::vector<float>(kIn * kBatch);  ///< -kLr * (x, h1 or h2)^T

  /// One SGD step; returns the loss before it.
  float step();
};

}  // namespace bench::mlp

// Losses and layers for training, built from the public ops (so they are traced, fused and
// differentiated like any user code).
#pragma once

#include <cstdint>
#include <vector>

#include "lazyjit/dtype.h"
#include "lazyjit/tensor.h"

namespace lazyjit::nn {

/// The mean over the batch of -log_softmax(logits)[i, targets[i]], as PyTorch's
/// cross_entropy with reduction "mean". `logits` is [N, C] floating, `targets` is [N] of
/// integer class indices in [0, C). Targets that hold data are range-checked when traced;
/// a pending target out of range contributes 0 to the sum (it still counts in N).
Tensor cross_entropy(const Tensor& logits, const Tensor& targets);

/// The mean of (input - target)^2; both must have one shape and a floating dtype.
Tensor mse_loss(const Tensor& input, const Tensor& target);

/// A fully connected layer, y = x @ weight^T + bias, as PyTorch's nn.Linear: weight is
/// [out_features, in_features] and bias [out_features], both initialised uniform in
/// +-1/sqrt(in_features) from `seed` (Philox: the same values on every machine and thread
/// count), materialised at construction and marked requires_grad.
class Linear {
 public:
  Linear(int64_t in_features, int64_t out_features, uint64_t seed, bool bias = true,
         DType dtype = DType::Float32);

  /// x is [..., in_features]; the result is [..., out_features].
  Tensor operator()(const Tensor& x) const;
  /// weight, then bias when there is one.
  std::vector<Tensor> parameters() const;

  int64_t in_features() const { return in_features_; }
  int64_t out_features() const { return out_features_; }

  Tensor weight;
  Tensor bias;  ///< undefined when constructed with bias = false

 private:
  int64_t in_features_;
  int64_t out_features_;
};

}  // namespace lazyjit::nn

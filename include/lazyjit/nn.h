// Losses and layers for training, built from the public ops (so they are traced, fused and
// differentiated like any user code).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "lazyjit/dtype.h"
#include "lazyjit/ops.h"
#include "lazyjit/tensor.h"

namespace lazyjit::nn {

/// The mean over the batch of -log_softmax(logits)[i, targets[i]], as PyTorch's
/// cross_entropy with reduction "mean". `logits` is [N, C] floating, `targets` is [N] of
/// integer class indices in [0, C). Targets that hold data are range-checked when traced;
/// a pending target out of range contributes 0 to the sum (it still counts in N).
Tensor cross_entropy(const Tensor& logits, const Tensor& targets);

/// The mean of (input - target)^2; both must have one shape and a floating dtype.
Tensor mse_loss(const Tensor& input, const Tensor& target);

/// Each element zeroed with probability `p` and the others scaled by 1 / (1 - p), as
/// PyTorch's dropout; the identity when `training` is false or p is 0. Element i is kept
/// where the Philox uniform of (seed, i) is at least p: the same mask on every machine and
/// thread count, and a new seed makes a new mask without a recompile (the seed is a runtime
/// value). A dropped element is 0 even where the input is NaN. p must be in [0, 1].
Tensor dropout(const Tensor& input, double p, uint64_t seed, bool training = true);

/// Batch normalisation of `input` [N, C, ...] per channel (dim 1), as PyTorch's batch_norm:
/// when `training`, by the batch's mean and biased variance over every dim but 1, and the
/// running statistics (defined [C] tensors, or undefined to keep none) are updated in place,
/// `running = (1 - momentum) * running + momentum * batch` with the unbiased variance; in
/// eval, by the running statistics. `weight` and `bias` ([C], either may be undefined)
/// scale and shift the result.
Tensor batch_norm(const Tensor& input, Tensor running_mean, Tensor running_var, const Tensor& weight,
                  const Tensor& bias, bool training, double momentum = 0.1, double eps = 1e-5);

/// Scales the gradients (.grad()) of `params` in place so that their global L2 norm is at
/// most `max_norm` (by max_norm / (norm + 1e-6) when it is larger), as PyTorch's
/// clip_grad_norm_; returns the norm before clipping (float32 unless every gradient is
/// float64). Parameters without a gradient are skipped. Traced: no value is read.
Tensor clip_grad_norm_(const std::vector<Tensor>& params, double max_norm);

/// Dropout as a layer: each call draws a new mask (its seed advances per call), so a training
/// loop gets a new mask every step with no recompile. `training` false: the identity.
class Dropout {
 public:
  explicit Dropout(double p = 0.5, uint64_t seed = 0);
  Tensor operator()(const Tensor& x);

  bool training = true;

 private:
  double p_;
  uint64_t seed_;
  uint64_t calls_ = 0;
};

/// BatchNorm2d as PyTorch's: weight 1 and bias 0 ([C], requires_grad), running mean 0 and
/// variance 1; `training` picks batch or running statistics.
class BatchNorm2d {
 public:
  explicit BatchNorm2d(int64_t num_features, double eps = 1e-5, double momentum = 0.1, DType dtype = DType::Float32);
  /// x is [N, C, H, W] with C = num_features.
  Tensor operator()(const Tensor& x);
  /// weight, then bias.
  std::vector<Tensor> parameters() const { return {weight, bias}; }

  Tensor weight, bias;
  Tensor running_mean, running_var;
  bool training = true;

 private:
  int64_t num_features_;
  double eps_;
  double momentum_;
};

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

/// A lookup table, as PyTorch's nn.Embedding: weight [num_embeddings, embedding_dim], drawn
/// from N(0, 1) by `seed`; its gradient is an index_add of the rows looked up (no one-hot).
class Embedding {
 public:
  Embedding(int64_t num_embeddings, int64_t embedding_dim, uint64_t seed, DType dtype = DType::Float32);
  /// indices (int32 or int64, any shape): indices.shape + [embedding_dim].
  Tensor operator()(const Tensor& indices) const;
  std::vector<Tensor> parameters() const { return {weight}; }

  Tensor weight;
};

/// A 2-D convolution over NCHW, as PyTorch's nn.Conv2d: weight [out, in / groups, kh, kw] and
/// bias [out], both uniform in +-1/sqrt(in / groups * kh * kw) from `seed`.
class Conv2d {
 public:
  Conv2d(int64_t in_channels, int64_t out_channels, Size2 kernel_size, uint64_t seed, Size2 stride = 1,
         Size2 padding = 0, Size2 dilation = 1, int64_t groups = 1, bool bias = true, DType dtype = DType::Float32);
  Tensor operator()(const Tensor& x) const;
  /// weight, then bias when there is one.
  std::vector<Tensor> parameters() const;

  Tensor weight;
  Tensor bias;  ///< undefined when constructed with bias = false

 private:
  Size2 stride_, padding_, dilation_;
  int64_t groups_;
};

/// Layer normalisation over the last dims, as PyTorch's nn.LayerNorm: weight 1 and bias 0 of
/// `normalized_shape`.
class LayerNorm {
 public:
  explicit LayerNorm(std::vector<int64_t> normalized_shape, double eps = 1e-5, DType dtype = DType::Float32);
  Tensor operator()(const Tensor& x) const;
  std::vector<Tensor> parameters() const { return {weight, bias}; }

  Tensor weight, bias;

 private:
  std::vector<int64_t> normalized_shape_;
  double eps_;
};

/// max_pool2d as a layer (stride: the kernel size by default).
class MaxPool2d {
 public:
  explicit MaxPool2d(Size2 kernel_size, std::optional<Size2> stride = std::nullopt, Size2 padding = 0,
                     bool ceil_mode = false)
      : kernel_size_(kernel_size), stride_(stride), padding_(padding), ceil_mode_(ceil_mode) {}
  Tensor operator()(const Tensor& x) const { return max_pool2d(x, kernel_size_, stride_, padding_, ceil_mode_); }

 private:
  Size2 kernel_size_;
  std::optional<Size2> stride_;
  Size2 padding_;
  bool ceil_mode_;
};

/// Data parallelism as PyTorch's DistributedDataParallel, over the collectives of
/// <lazyjit/collectives.h> (MPI through lazyjit::dist; a world of one without it, where
/// both steps below are the identity). Every rank builds the same model and runs the same
/// program on its own shard of the data.
///  - Construction replaces every parameter by rank 0's value (a broadcast, traced in place:
///    it runs at the next materialisation), so every rank starts from the same model.
///  - average() turns each rank's gradients into their mean over the ranks, before the
///    optimizer's step. Gradients go in buckets: consecutive parameters of one dtype, last
///    first (the backward pass produces them in that order), flattened into one all_reduce
///    of at most `bucket_bytes` (a parameter larger than that is a bucket of its own).
/// The mean is the same bytes on every rank, so the ranks' parameters stay bitwise equal.
class DataParallel {
 public:
  explicit DataParallel(std::vector<Tensor> params, int64_t bucket_bytes = int64_t{25} << 20);

  /// The ranks' mean of `grads` (one per parameter, in order; undefined ones stay so).
  std::vector<Tensor> average(const std::vector<Tensor>& grads) const;
  /// Replaces every parameter's .grad() by the ranks' mean (after backward()).
  void average_grads();

  const std::vector<Tensor>& parameters() const { return params_; }
  /// The buckets of the last average(): each a list of parameter positions.
  const std::vector<std::vector<size_t>>& buckets() const { return buckets_; }

 private:
  std::vector<Tensor> params_;
  int64_t bucket_bytes_;
  mutable std::vector<std::vector<size_t>> buckets_;
};

/// The indices rank `rank` of `world` trains on in `epoch` of a data set of `size` examples, as
/// PyTorch's DistributedSampler: all indices, shuffled by a generator seeded with seed + epoch
/// (the same permutation on every rank) unless `shuffle` is false, padded by repeating the
/// first ones to a multiple of `world`, then every world-th from position `rank`. Every rank
/// gets the same number; together they cover the data set.
std::vector<int64_t> shard_indices(int64_t size, int rank, int world, uint64_t epoch, bool shuffle = true,
                                   uint64_t seed = 0);

}  // namespace lazyjit::nn

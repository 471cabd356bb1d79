// Optimizers. Each step traces in-place updates of the parameters and of the optimizer's
// state; at mark_step() every one of them is written into its own buffer (donation), so after
// the first step a training loop allocates no new buffers for weights or state, and every step
// is the same graph (hyperparameters and the step count are runtime scalars: no recompile).
#pragma once

#include <cstdint>
#include <vector>

#include "lazyjit/tensor.h"

namespace lazyjit::optim {

/// The common interface: parameters are floating tensors; step() reads their .grad() (left by
/// Tensor::backward), step(grads) takes the gradients in the parameters' order (from grad()).
class Optimizer {
 public:
  explicit Optimizer(std::vector<Tensor> params);
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  /// One update from the parameters' .grad(); a parameter without a gradient is skipped, as
  /// in PyTorch.
  void step();
  /// One update from explicit gradients, one per parameter with its shape.
  void step(const std::vector<Tensor>& grads);
  /// Clears every parameter's .grad() (PyTorch's set_to_none).
  void zero_grad();

  const std::vector<Tensor>& params() const { return params_; }
  /// Number of steps taken.
  int64_t steps() const { return steps_; }

 protected:
  /// Traces the in-place update of parameter `i` with gradient `g` (defined, checked).
  virtual void update(size_t i, const Tensor& g) = 0;

  std::vector<Tensor> params_;
  int64_t steps_ = 0;

 private:
  void checked_update(const char* op, size_t i, const Tensor& g);
};

struct SGDOptions {
  double lr = 0.01;
  double momentum = 0.0;
  double dampening = 0.0;
  double weight_decay = 0.0;  ///< L2 penalty added to the gradient
  bool nesterov = false;
};

/// Stochastic gradient descent with PyTorch's torch.optim.SGD semantics: with momentum, one
/// momentum buffer per parameter (zeros, materialised at construction; its first update takes
/// the gradient undampened, as PyTorch's does).
class SGD final : public Optimizer {
 public:
  SGD(std::vector<Tensor> params, SGDOptions options);
  const SGDOptions& options() const { return options_; }
  /// The momentum buffers (empty without momentum).
  const std::vector<Tensor>& state() const { return momentum_; }

 private:
  void update(size_t i, const Tensor& g) override;
  SGDOptions options_;
  std::vector<Tensor> momentum_;
};

struct AdamOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;  ///< L2 penalty added to the gradient (Adam, not AdamW)
};

/// Adam (Kingma and Ba) with PyTorch's torch.optim.Adam semantics, bias-corrected; two state
/// buffers per parameter (first and second moments), zeros materialised at construction.
class Adam : public Optimizer {
 public:
  Adam(std::vector<Tensor> params, AdamOptions options);
  const AdamOptions& options() const { return options_; }
  /// The state buffers: exp_avg of every parameter, then exp_avg_sq of every parameter.
  std::vector<Tensor> state() const;

 protected:
  /// `decoupled`: weight decay shrinks the parameters (AdamW) instead of adding to the gradient.
  Adam(std::vector<Tensor> params, AdamOptions options, bool decoupled);

 private:
  void update(size_t i, const Tensor& g) override;
  AdamOptions options_;
  bool decoupled_ = false;
  std::vector<Tensor> exp_avg_, exp_avg_sq_;
};

struct AdamWOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 1e-2;  ///< decoupled: each step multiplies a parameter by 1 - lr * weight_decay
};

/// AdamW (Loshchilov and Hutter) with PyTorch's torch.optim.AdamW semantics: Adam whose weight
/// decay shrinks each parameter before its update, outside the moments.
class AdamW final : public Adam {
 public:
  AdamW(std::vector<Tensor> params, AdamWOptions options);
};

}  // namespace lazyjit::optim

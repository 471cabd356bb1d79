// Losses and the Linear layer: compositions of public ops, so autograd differentiates them
// through the op table's rules and the planner fuses them like user code.
#include "lazyjit/nn.h"

#include <cmath>
#include <string>

#include "fmt/format.h"
#include "lazyjit/error.h"
#include "lazyjit/ops.h"
#include "lazyjit/runtime.h"
#include "nn/describe.h"
#include "runtime/tensor_impl.h"

namespace lazyjit::nn {
namespace {

void check_defined(const char* op, const char* what, const Tensor& t) {
  if (!t.defined()) throw Error(fmt::format("{}: {} is an undefined tensor", op, what));
}

/// Distinct Philox streams for a layer's weight and bias from the user's one seed.
uint64_t derived_seed(uint64_t seed, uint64_t stream) {
  uint64_t z = seed + 0x9E3779B97F4A7C15ull * (stream + 1);  // splitmix64
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace

Tensor cross_entropy(const Tensor& logits, const Tensor& targets) {
  check_defined("cross_entropy", "logits", logits);
  check_defined("cross_entropy", "targets", targets);
  if (logits.dim() != 2 || !is_floating(logits.dtype())) {
    throw Error(fmt::format("cross_entropy: logits must be a floating [N, C] tensor, got {}", describe(logits)));
  }
  if (targets.dim() != 1 || !is_integral(targets.dtype())) {
    throw Error(fmt::format("cross_entropy: targets must be an integer [N] tensor of class indices, got {}",
                            describe(targets)));
  }
  const int64_t n = logits.shape()[0], classes = logits.shape()[1];
  if (targets.shape()[0] != n) {
    throw Error(fmt::format("cross_entropy: {} targets for {} rows of logits {}", targets.shape()[0], n,
                            describe(logits)));
  }
  if (!targets.impl()->pending()) {  // data in hand: check the range now, not as a silent 0
    auto check = [&](const auto& values) {  // copied out of the buffer: no graph runs
      for (size_t i = 0; i < values.size(); ++i) {
        if (values[i] < 0 || values[i] >= classes) {
          throw Error(fmt::format("cross_entropy: target {} is {}, outside the {} classes [0, {})", i, values[i],
                                  classes, classes));
        }
      }
    };
    if (targets.dtype() == DType::Int64) {
      check(targets.to_vector<int64_t>());
    } else {
      check(targets.to_vector<int32_t>());
    }
  }
  // -log_softmax at each row's target, picked with a one-hot mask (one fused row kernel).
  const Tensor hit = eq(unsqueeze(targets, 1), arange(classes, targets.dtype()));
  const Tensor picked = where(hit, log_softmax(logits, 1), 0.0);
  return -sum(picked) / static_cast<double>(n);
}

Tensor mse_loss(const Tensor& input, const Tensor& target) {
  check_defined("mse_loss", "input", input);
  check_defined("mse_loss", "target", target);
  if (input.shape() != target.shape()) {
    throw Error(fmt::format("mse_loss: input {} and target {} must have one shape", describe(input), describe(target)));
  }
  if (!is_floating(input.dtype()) || !is_floating(target.dtype())) {
    throw Error(fmt::format("mse_loss: input {} and target {} must be floating", describe(input), describe(target)));
  }
  const Tensor diff = input - target;
  return mean(diff * diff);
}

Linear::Linear(int64_t in_features, int64_t out_features, uint64_t seed, bool bias, DType dtype)
    : in_features_(in_features), out_features_(out_features) {
  if (in_features <= 0 || out_features <= 0) {
    throw Error(fmt::format("Linear: features must be positive, got in_features {} and out_features {}",
                            in_features, out_features));
  }
  if (!is_floating(dtype)) throw Error(fmt::format("Linear: dtype {} is not a float dtype", dtype_name(dtype)));
  // PyTorch's default (kaiming_uniform with a = sqrt(5)): uniform in +-1/sqrt(fan_in).
  const double bound = 1.0 / std::sqrt(static_cast<double>(in_features));
  auto uniform = [&](std::vector<int64_t> shape, uint64_t stream) {
    return (rand(std::move(shape), derived_seed(seed, stream), dtype) * 2.0 - 1.0) * bound;
  };
  weight = uniform({out_features, in_features}, 0);
  if (bias) this->bias = uniform({out_features}, 1);
  sync(parameters());  // materialised now: every training step then reads them as parameters
  weight.requires_grad_();
  if (bias) this->bias.requires_grad_();
}

Tensor Linear::operator()(const Tensor& x) const {
  check_defined("Linear", "the input", x);
  if (x.dim() == 0 || x.shape().back() != in_features_) {
    throw Error(fmt::format("Linear({}, {}): input {} must have {} features in its last dim", in_features_,
                            out_features_, describe(x), in_features_));
  }
  const Tensor y = matmul(x, transpose(weight, 0, 1));
  return bias.defined() ? y + bias : y;
}

std::vector<Tensor> Linear::parameters() const {
  if (bias.defined()) return {weight, bias};
  return {weight};
}

}  // namespace lazyjit::nn

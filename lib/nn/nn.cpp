// Losses, dropout, batch norm and the Linear and BatchNorm2d layers: compositions of public ops, so autograd differentiates them
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

Tensor dropout(const Tensor& input, double p, uint64_t seed, bool training) {
  check_defined("dropout", "the input", input);
  if (!(p >= 0.0 && p <= 1.0)) throw Error(fmt::format("dropout: probability has to be between 0 and 1, but got {}", p));
  if (!is_floating(input.dtype())) {
    throw Error(fmt::format("dropout: input {} is not a float tensor", describe(input)));
  }
  if (!training || p == 0.0) return input;
  const Tensor keep = ge(rand(input.shape(), seed, input.dtype()), p);
  return p == 1.0 ? where(keep, input, 0.0) : where(keep, input * (1.0 / (1.0 - p)), 0.0);
}

Tensor batch_norm(const Tensor& input, Tensor running_mean, Tensor running_var, const Tensor& weight,
                  const Tensor& bias, bool training, double momentum, double eps) {
  check_defined("batch_norm", "the input", input);
  if (input.dim() < 2 || !is_floating(input.dtype())) {
    throw Error(fmt::format("batch_norm: input must be a floating [N, C, ...] tensor, got {}", describe(input)));
  }
  const int64_t channels = input.shape()[1];
  const std::pair<const char*, const Tensor*> per_channel[] = {
      {"running_mean", &running_mean}, {"running_var", &running_var}, {"weight", &weight}, {"bias", &bias}};
  for (const auto& [name, t] : per_channel) {
    if (t->defined() && t->shape() != std::vector<int64_t>{channels}) {
      throw Error(fmt::format("batch_norm: {} must be [{}] for an input of {} channels, got {}", name, channels,
                              channels, describe(*t)));
    }
  }
  if (!training && (!running_mean.defined() || !running_var.defined())) {
    throw Error("batch_norm: evaluation needs running_mean and running_var");
  }
  std::vector<int64_t> dims = {0}, column(static_cast<size_t>(input.dim()), 1);
  for (int64_t d = 2; d < input.dim(); ++d) dims.push_back(d);
  column[1] = channels;  // a [C] tensor as [1, C, 1, ...]
  auto per_row = [&](const Tensor& t) { return reshape(t.to(input.dtype()), column); };
  Tensor centred, batch_var;
  if (training) {
    int64_t n = 1;
    for (int64_t d : dims) n *= input.shape()[d];
    if (n <= 1) {
      throw Error(fmt::format("batch_norm: expected more than 1 value per channel when training, got input {}",
                              describe(input)));
    }
    const Tensor batch_mean = mean(input, dims, /*keepdim=*/true);
    centred = input - batch_mean;
    batch_var = mean(centred * centred, dims, /*keepdim=*/true);  // biased; one mean, not var()'s second
    if (running_mean.defined()) {
      running_mean.copy_(running_mean * (1.0 - momentum) + reshape(batch_mean, {channels}) * momentum);
    }
    if (running_var.defined()) {
      const double unbias = static_cast<double>(n) / static_cast<double>(n - 1);
      running_var.copy_(running_var * (1.0 - momentum) + reshape(batch_var, {channels}) * (momentum * unbias));
    }
  } else {
    centred = input - per_row(running_mean);
    batch_var = per_row(running_var);
  }
  Tensor y = centred * rsqrt(batch_var + eps);
  if (weight.defined()) y = y * per_row(weight);
  if (bias.defined()) y = y + per_row(bias);
  return y;
}

Tensor clip_grad_norm_(const std::vector<Tensor>& params, double max_norm) {
  if (!(max_norm >= 0)) throw Error(fmt::format("clip_grad_norm_: max_norm must be >= 0, got {}", max_norm));
  std::vector<Tensor> grads;
  bool all_double = true;
  for (const Tensor& p : params) {
    check_defined("clip_grad_norm_", "a parameter", p);
    Tensor g = p.grad();
    if (!g.defined()) continue;
    all_double = all_double && g.dtype() == DType::Float64;
    grads.push_back(std::move(g));
  }
  const DType dtype = !grads.empty() && all_double ? DType::Float64 : DType::Float32;
  Tensor squares = zeros({}, dtype);
  for (const Tensor& g : grads) {
    const Tensor wide = g.to(dtype);
    squares = squares + sum(wide * wide);
  }
  const Tensor norm = sqrt(squares);
  const Tensor scale = minimum(max_norm / (norm + 1e-6), ones({}, dtype));
  for (Tensor& g : grads) g.mul_(scale.to(g.dtype()));
  return norm;
}

Dropout::Dropout(double p, uint64_t seed) : p_(p), seed_(seed) {
  if (!(p >= 0.0 && p <= 1.0)) throw Error(fmt::format("Dropout: probability has to be between 0 and 1, but got {}", p));
}

Tensor Dropout::operator()(const Tensor& x) { return dropout(x, p_, derived_seed(seed_, calls_++), training); }

BatchNorm2d::BatchNorm2d(int64_t num_features, double eps, double momentum, DType dtype)
    : num_features_(num_features), eps_(eps), momentum_(momentum) {
  if (num_features <= 0) throw Error(fmt::format("BatchNorm2d: num_features must be positive, got {}", num_features));
  if (!is_floating(dtype)) throw Error(fmt::format("BatchNorm2d: dtype {} is not a float dtype", dtype_name(dtype)));
  weight = ones({num_features}, dtype);
  bias = zeros({num_features}, dtype);
  running_mean = zeros({num_features}, dtype);
  running_var = ones({num_features}, dtype);
  sync({weight, bias, running_mean, running_var});
  weight.requires_grad_();
  bias.requires_grad_();
}

Tensor BatchNorm2d::operator()(const Tensor& x) {
  check_defined("BatchNorm2d", "the input", x);
  if (x.dim() != 4 || x.shape()[1] != num_features_) {
    throw Error(fmt::format("BatchNorm2d({}): input {} must be [N, {}, H, W]", num_features_, describe(x),
                            num_features_));
  }
  return batch_norm(x, running_mean, running_var, weight, bias, training, momentum_, eps_);
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

Embedding::Embedding(int64_t num_embeddings, int64_t embedding_dim, uint64_t seed, DType dtype) {
  if (num_embeddings <= 0 || embedding_dim <= 0) {
    throw Error(fmt::format("Embedding: sizes must be positive, got num_embeddings {} and embedding_dim {}",
                            num_embeddings, embedding_dim));
  }
  if (!is_floating(dtype)) throw Error(fmt::format("Embedding: dtype {} is not a float dtype", dtype_name(dtype)));
  weight = randn({num_embeddings, embedding_dim}, derived_seed(seed, 0), dtype);
  sync({weight});
  weight.requires_grad_();
}

Tensor Embedding::operator()(const Tensor& indices) const {
  check_defined("Embedding", "the indices", indices);
  return embedding(weight, indices);
}

Conv2d::Conv2d(int64_t in_channels, int64_t out_channels, Size2 kernel_size, uint64_t seed, Size2 stride, Size2 padding,
               Size2 dilation, int64_t groups, bool bias, DType dtype)
    : stride_(stride), padding_(padding), dilation_(dilation), groups_(groups) {
  if (in_channels <= 0 || out_channels <= 0 || kernel_size.h <= 0 || kernel_size.w <= 0) {
    throw Error(fmt::format("Conv2d: channels and kernel size must be positive, got {} -> {} channels, {}x{}",
                            in_channels, out_channels, kernel_size.h, kernel_size.w));
  }
  if (groups <= 0 || in_channels % groups != 0 || out_channels % groups != 0) {
    throw Error(fmt::format("Conv2d: groups {} must divide {} input and {} output channels", groups, in_channels,
                            out_channels));
  }
  if (!is_floating(dtype)) throw Error(fmt::format("Conv2d: dtype {} is not a float dtype", dtype_name(dtype)));
  const int64_t fan_in = in_channels / groups * kernel_size.h * kernel_size.w;
  const double bound = 1.0 / std::sqrt(static_cast<double>(fan_in));  // PyTorch's kaiming_uniform(a = sqrt(5))
  auto uniform = [&](std::vector<int64_t> shape, uint64_t stream) {
    return (rand(std::move(shape), derived_seed(seed, stream), dtype) * 2.0 - 1.0) * bound;
  };
  weight = uniform({out_channels, in_channels / groups, kernel_size.h, kernel_size.w}, 0);
  if (bias) this->bias = uniform({out_channels}, 1);
  sync(parameters());
  weight.requires_grad_();
  if (bias) this->bias.requires_grad_();
}

std::vector<Tensor> Conv2d::parameters() const {
  if (bias.defined()) return {weight, bias};
  return {weight};
}

Tensor Conv2d::operator()(const Tensor& x) const {
  check_defined("Conv2d", "the input", x);
  return conv2d(x, weight, bias, stride_, padding_, dilation_, groups_);
}

LayerNorm::LayerNorm(std::vector<int64_t> normalized_shape, double eps, DType dtype)
    : normalized_shape_(std::move(normalized_shape)), eps_(eps) {
  if (normalized_shape_.empty()) throw Error("LayerNorm: normalized_shape must name at least one dim");
  for (int64_t d : normalized_shape_) {
    if (d <= 0) throw Error(fmt::format("LayerNorm: normalized_shape [{}] must be positive", fmt::join(normalized_shape_, ", ")));
  }
  if (!is_floating(dtype)) throw Error(fmt::format("LayerNorm: dtype {} is not a float dtype", dtype_name(dtype)));
  weight = ones(normalized_shape_, dtype);
  bias = zeros(normalized_shape_, dtype);
  sync({weight, bias});
  weight.requires_grad_();
  bias.requires_grad_();
}

Tensor LayerNorm::operator()(const Tensor& x) const {
  check_defined("LayerNorm", "the input", x);
  const int64_t n = static_cast<int64_t>(normalized_shape_.size());
  const std::vector<int64_t> shape = x.shape();
  if (static_cast<int64_t>(shape.size()) < n || !std::equal(normalized_shape_.begin(), normalized_shape_.end(), shape.end() - n)) {
    throw Error(fmt::format("LayerNorm([{}]): input {} must end with the normalised shape", fmt::join(normalized_shape_, ", "),
                            describe(x)));
  }
  return layer_norm(x, n, weight, bias, eps_);
}

}  // namespace lazyjit::nn

// The optimizers: each step traces in-place updates of parameters and state. Hyperparameters
// and step-dependent factors are runtime scalars, so every step is one graph, compiled once,
// and at mark_step() every updated tensor is written into its own buffer (donation).
#include "lazyjit/optim.h"

#include <cmath>
#include <string>

#include "fmt/format.h"
#include "lazyjit/error.h"
#include "lazyjit/ops.h"
#include "lazyjit/runtime.h"
#include "nn/describe.h"

namespace lazyjit::optim {
namespace {

using nn::describe;

/// `copies` sets of zeros like each tensor, materialised now (in one graph: a graph run once
/// is never compiled) so the first step's graph is every step's graph.
std::vector<std::vector<Tensor>> materialised_zeros(const std::vector<Tensor>& like, int copies = 1) {
  std::vector<std::vector<Tensor>> out(static_cast<size_t>(copies));
  std::vector<Tensor> all;
  for (std::vector<Tensor>& set : out) {
    for (const Tensor& t : like) set.push_back(all.emplace_back(zeros(t.shape(), t.dtype())));
  }
  sync(all);
  return out;
}

}  // namespace

Optimizer::Optimizer(std::vector<Tensor> params) : params_(std::move(params)) {
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!params_[i].defined()) throw Error(fmt::format("optimizer: parameter {} is an undefined tensor", i));
    if (!is_floating(params_[i].dtype())) {
      throw Error(fmt::format("optimizer: parameter {} is {}; only floating tensors can be optimised", i,
                              describe(params_[i])));
    }
  }
}

void Optimizer::step() {
  for (size_t i = 0; i < params_.size(); ++i) {
    const Tensor g = params_[i].grad();
    if (g.defined()) checked_update("step", i, g);
  }
  ++steps_;
}

void Optimizer::step(const std::vector<Tensor>& grads) {
  if (grads.size() != params_.size()) {
    throw Error(fmt::format("step: {} gradients for {} parameters", grads.size(), params_.size()));
  }
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!grads[i].defined()) throw Error(fmt::format("step: gradient {} is an undefined tensor", i));
  }
  for (size_t i = 0; i < params_.size(); ++i) checked_update("step", i, grads[i]);
  ++steps_;
}

void Optimizer::zero_grad() {
  for (Tensor& p : params_) p.zero_grad();
}

void Optimizer::checked_update(const char* op, size_t i, const Tensor& g) {
  if (g.shape() != params_[i].shape()) {
    throw Error(fmt::format("{}: gradient {} is {}, its parameter is {}", op, i, describe(g), describe(params_[i])));
  }
  update(i, g.dtype() == params_[i].dtype() ? g : g.to(params_[i].dtype()));
}

SGD::SGD(std::vector<Tensor> params, SGDOptions options) : Optimizer(std::move(params)), options_(options) {
  if (!(options.lr >= 0) || !(options.momentum >= 0) || !(options.weight_decay >= 0)) {
    throw Error(fmt::format("SGD: lr {}, momentum {} and weight_decay {} must be >= 0", options.lr,
                            options.momentum, options.weight_decay));
  }
  if (options.nesterov && (options.momentum <= 0 || options.dampening != 0)) {
    throw Error("SGD: nesterov needs a momentum > 0 and dampening 0");
  }
  if (options.momentum > 0) momentum_ = materialised_zeros(params_)[0];
}

void SGD::update(size_t i, const Tensor& g) {
  Tensor& p = params_[i];
  Tensor d = options_.weight_decay != 0 ? g + options_.weight_decay * p : g;
  if (options_.momentum > 0) {
    Tensor& buf = momentum_[i];
    // PyTorch's first step takes the gradient undampened; a runtime factor keeps one graph.
    const double take = steps_ == 0 ? 1.0 : 1.0 - options_.dampening;
    buf *= options_.momentum;
    buf += take * d;
    d = options_.nesterov ? d + options_.momentum * buf : buf;
  }
  p -= options_.lr * d;
}

Adam::Adam(std::vector<Tensor> params, AdamOptions options) : Adam(std::move(params), options, false) {}

Adam::Adam(std::vector<Tensor> params, AdamOptions options, bool decoupled)
    : Optimizer(std::move(params)), options_(options), decoupled_(decoupled) {
  if (!(options.lr >= 0) || !(options.eps >= 0) || !(options.weight_decay >= 0) ||
      !(options.beta1 >= 0 && options.beta1 < 1) || !(options.beta2 >= 0 && options.beta2 < 1)) {
    throw Error(fmt::format("{}: invalid options lr {}, betas ({}, {}), eps {}, weight_decay {} (want lr, eps, "
                            "weight_decay >= 0 and betas in [0, 1))",
                            decoupled ? "AdamW" : "Adam", options.lr, options.beta1, options.beta2, options.eps, options.weight_decay));
  }
  std::vector<std::vector<Tensor>> state = materialised_zeros(params_, 2);
  exp_avg_ = std::move(state[0]);
  exp_avg_sq_ = std::move(state[1]);
}

std::vector<Tensor> Adam::state() const {
  std::vector<Tensor> out = exp_avg_;
  out.insert(out.end(), exp_avg_sq_.begin(), exp_avg_sq_.end());
  return out;
}

void Adam::update(size_t i, const Tensor& g) {
  const AdamOptions& o = options_;
  Tensor& p = params_[i];
  if (decoupled_ && o.weight_decay != 0) p *= 1.0 - o.lr * o.weight_decay;
  const Tensor d = !decoupled_ && o.weight_decay != 0 ? g + o.weight_decay * p : g;
  Tensor &m = exp_avg_[i], &v = exp_avg_sq_[i];
  m *= o.beta1;
  m += (1.0 - o.beta1) * d;
  v *= o.beta2;
  v += (1.0 - o.beta2) * (d * d);
  // PyTorch's form: p -= lr / bc1 * m / (sqrt(v) / sqrt(bc2) + eps), with the bias
  // corrections bc = 1 - beta^t computed here and passed as runtime scalars.
  const double t = static_cast<double>(steps_ + 1);
  const double step_size = o.lr / (1.0 - std::pow(o.beta1, t));
  const double inv_sqrt_bc2 = 1.0 / std::sqrt(1.0 - std::pow(o.beta2, t));
  p -= step_size * m / (sqrt(v) * inv_sqrt_bc2 + o.eps);
}

AdamW::AdamW(std::vector<Tensor> params, AdamWOptions o)
    : Adam(std::move(params),
           {.lr = o.lr, .beta1 = o.beta1, .beta2 = o.beta2, .eps = o.eps, .weight_decay = o.weight_decay}, true) {}

}  // namespace lazyjit::optim

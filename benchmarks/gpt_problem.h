// The gpt_train_step problem every system runs: a small GPT (2 pre-LayerNorm blocks of causal
// 4-head self-attention and a 4x GELU MLP, d_model 128, 64 tokens, batch 16, 256-token
// vocabulary, a token embedding lookup plus a learned positional one, untied head) trained by
// next-token softmax cross-entropy and Adam on one fixed batch from fixed initial weights; the
// checks its losses must pass; and the lazyjit step (forward, backward by autograd and Adam in
// one mark_step).
#pragma once

#include <lazyjit/lazyjit.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "bench_rows.h"

namespace bench::gpt {

inline constexpr int64_t kBatch = 16, kSeq = 64, kVocab = 256, kModel = 128, kHeads = 4, kLayers = 2;
inline constexpr int64_t kHeadDim = kModel / kHeads, kHidden = 4 * kModel, kTokens = kBatch * kSeq;
inline constexpr double kLr = 1e-3, kEps = 1e-5;  ///< Adam's learning rate; layer_norm's epsilon
inline constexpr int kCheckSteps = 5;  ///< steps run before timing; the loss must fall at each

/// Token ids [kBatch, kSeq + 1], uniform in [0, kVocab); a row's first kSeq are the inputs, its
/// last kSeq the targets (the next token).
inline const std::vector<int64_t>& sequences() {
  static const std::vector<int64_t> ids = [] {
    std::mt19937 rng(80);
    std::uniform_int_distribution<int64_t> pick(0, kVocab - 1);
    std::vector<int64_t> v(kBatch * (kSeq + 1));
    for (int64_t& id : v) id = pick(rng);
    return v;
  }();
  return ids;
}
inline int64_t input_id(int64_t token) { return sequences()[token / kSeq * (kSeq + 1) + token % kSeq]; }
inline int64_t target_id(int64_t token) { return sequences()[token / kSeq * (kSeq + 1) + token % kSeq + 1]; }

/// The input ids, [kTokens] (the rows of the embedding the model looks up).
inline std::vector<int64_t> input_ids() {
  std::vector<int64_t> ids(kTokens);
  for (int64_t t = 0; t < kTokens; ++t) ids[t] = input_id(t);
  return ids;
}
/// The inputs one-hot, [kTokens, kVocab] (the reference's embedding: one_hot @ w_emb).
inline std::vector<float> one_hot() {
  std::vector<float> x(kTokens * kVocab, 0.0f);
  for (int64_t t = 0; t < kTokens; ++t) x[t * kVocab + input_id(t)] = 1.0f;
  return x;
}
inline std::vector<int64_t> targets() {
  std::vector<int64_t> y(kTokens);
  for (int64_t t = 0; t < kTokens; ++t) y[t] = target_id(t);
  return y;
}

// The parameters in one list, in the order every system keeps them: the embeddings, each
// block's twelve, the final layer norm and the head. Weights are [fan_in, fan_out] (x @ w).
enum BlockParam { kLn1G, kLn1B, kWqkv, kBqkv, kWo, kBo, kLn2G, kLn2B, kWfc, kBfc, kWproj, kBproj, kPerBlock };
inline constexpr int kEmb = 0, kPos = 1, kLnfG = 2 + kLayers * kPerBlock, kLnfB = kLnfG + 1, kHead = kLnfB + 1;
inline constexpr int kNumParams = kHead + 1;
inline constexpr int param_index(int64_t layer, BlockParam p) { return 2 + static_cast<int>(layer) * kPerBlock + p; }

struct Param {
  std::vector<int64_t> shape;
  std::vector<float> data;
};

/// Weights and biases uniform in +-1/sqrt(fan_in) (nn.Linear's default: logits far enough
/// from uniform that the first loss tests the forward pass), embeddings uniform in +-1,
/// layer norms gamma 1 and beta 0.
inline std::vector<Param> initial_params() {
  std::vector<Param> p(kNumParams);
  uint32_t seed = 81;
  auto uniform = [&](std::vector<int64_t> shape, float bound) {
    return Param{shape, random_data(shape[0] * (shape.size() > 1 ? shape[1] : 1), seed++, -bound, bound)};
  };
  auto filled = [](int64_t n, float value) { return Param{{n}, std::vector<float>(n, value)}; };
  const float in_model = 1.0f / std::sqrt(float{kModel}), in_hidden = 1.0f / std::sqrt(float{kHidden});
  p[kEmb] = uniform({kVocab, kModel}, 1.0f);
  p[kPos] = uniform({kSeq, kModel}, 1.0f);
  for (int64_t l = 0; l < kLayers; ++l) {
    auto at = [&](BlockParam k) -> Param& { return p[param_index(l, k)]; };
    at(kLn1G) = filled(kModel, 1.0f), at(kLn1B) = filled(kModel, 0.0f);
    at(kWqkv) = uniform({kModel, 3 * kModel}, in_model), at(kBqkv) = uniform({3 * kModel}, in_model);
    at(kWo) = uniform({kModel, kModel}, in_model), at(kBo) = uniform({kModel}, in_model);
    at(kLn2G) = filled(kModel, 1.0f), at(kLn2B) = filled(kModel, 0.0f);
    at(kWfc) = uniform({kModel, kHidden}, in_model), at(kBfc) = uniform({kHidden}, in_model);
    at(kWproj) = uniform({kHidden, kModel}, in_hidden), at(kBproj) = uniform({kModel}, in_hidden);
  }
  p[kLnfG] = filled(kModel, 1.0f), p[kLnfB] = filled(kModel, 0.0f);
  p[kHead] = uniform({kModel, kVocab}, in_model);
  return p;
}

/// The mean cross-entropy of the initial parameters on the batch, in double (gpt_reference.cpp).
double initial_loss();

/// Empty when the first loss matches initial_loss() and every step lowers it; else a message.
inline std::string check_losses(const std::vector<double>& losses) {
  const double want = initial_loss();
  if (!(std::fabs(losses[0] - want) <= 1e-4 * (1 + want)))
    return "first loss " + std::to_string(losses[0]) + ", want " + std::to_string(want);
  for (size_t i = 1; i < losses.size(); ++i)
    if (!(losses[i] < losses[i - 1]))
      return "loss does not fall: step " + std::to_string(i) + " " + std::to_string(losses[i]);
  return {};
}

/// Empty when a peer's losses follow lazyjit's step by step (float32 rounding differs, and
/// Adam's early steps, about lr * sign(grad), carry it forward); else a message.
inline std::string compare_losses(const std::vector<double>& got, const std::vector<double>& lazyjit) {
  for (size_t i = 0; i < got.size(); ++i)
    if (!(std::fabs(got[i] - lazyjit[i]) <= 1e-4 * (1 + std::fabs(lazyjit[i]))))
      return "loss at step " + std::to_string(i) + " is " + std::to_string(got[i]) + ", lazyjit's " +
             std::to_string(lazyjit[i]);
  return {};
}

/// The model on lazyjit; step() traces forward, backward and Adam, and runs them in one
/// mark_step.
struct LazyGpt {
  using Tensor = lazyjit::Tensor;
  Tensor x, y;  ///< the input ids [kBatch, kSeq], the targets [kTokens]
  std::vector<Tensor> params;
  lazyjit::optim::Adam adam;

  LazyGpt() : x(Tensor::from_vector<int64_t>(input_ids(), {kBatch, kSeq})),
              y(Tensor::from_vector<int64_t>(targets(), {kTokens})), params(make_params()), adam(params, {.lr = kLr}) {}

  static std::vector<Tensor> make_params() {
    std::vector<Tensor> p;
    for (const Param& q : initial_params()) p.push_back(Tensor::from_vector<float>(q.data, q.shape));
    return p;
  }

  /// The mean next-token cross-entropy of the batch.
  Tensor loss() const {
    using lazyjit::matmul, lazyjit::reshape, lazyjit::layer_norm;
    Tensor h = reshape(lazyjit::embedding(params[kEmb], x) + params[kPos], {kTokens, kModel});
    for (int64_t l = 0; l < kLayers; ++l) h = block(h, l);
    const Tensor logits = matmul(layer_norm(h, 1, params[kLnfG], params[kLnfB], kEps), params[kHead]);
    return lazyjit::nn::cross_entropy(logits, y);
  }

  /// One transformer block on the residual stream h [kTokens, kModel].
  Tensor block(const Tensor& h, int64_t l) const {
    using lazyjit::matmul, lazyjit::reshape, lazyjit::permute, lazyjit::layer_norm;
    auto p = [&](BlockParam k) -> const Tensor& { return params[param_index(l, k)]; };
    const Tensor qkv = matmul(layer_norm(h, 1, p(kLn1G), p(kLn1B), kEps), p(kWqkv)) + p(kBqkv);
    auto heads = [&](int64_t i) {  // [kBatch, kHeads, kSeq, kHeadDim]: q, k or v
      const Tensor part = lazyjit::slice(qkv, 1, i * kModel, (i + 1) * kModel);
      return permute(reshape(part, {kBatch, kSeq, kHeads, kHeadDim}), {0, 2, 1, 3});
    };
    const Tensor scores = matmul(heads(0), lazyjit::transpose(heads(1), -2, -1)) * (1.0 / std::sqrt(double{kHeadDim}));
    const Tensor causal = lazyjit::ge(lazyjit::unsqueeze(lazyjit::arange(kSeq), 1), lazyjit::arange(kSeq));
    const Tensor att = lazyjit::softmax(lazyjit::where(causal, scores, -std::numeric_limits<double>::infinity()), -1);
    const Tensor mixed = reshape(permute(matmul(att, heads(2)), {0, 2, 1, 3}), {kTokens, kModel});
    const Tensor r = h + matmul(mixed, p(kWo)) + p(kBo);
    const Tensor fc = lazyjit::gelu(matmul(layer_norm(r, 1, p(kLn2G), p(kLn2B), kEps), p(kWfc)) + p(kBfc));
    return r + matmul(fc, p(kWproj)) + p(kBproj);
  }

  /// One Adam step, backward by lazyjit::grad; returns the loss before it (materialised by the
  /// step's mark_step).
  Tensor step() {
    Tensor l = loss();
    adam.step(lazyjit::grad(l, params));
    lazyjit::mark_step();
    return l;
  }
};

/// lazyjit's losses over the check steps from the initial weights (run once), for the peers'
/// rows to compare theirs with.
inline const std::vector<double>& lazyjit_losses() {
  static const std::vector<double> losses = [] {
    LazyGpt model;
    std::vector<double> v;
    for (int i = 0; i < kCheckSteps; ++i) v.push_back(model.step().item<float>());
    return v;
  }();
  return losses;
}

}  // namespace bench::gpt

// Losses, layers and optimizers (lazyjit/nn.h, lazyjit/optim.h): values against host
// references of PyTorch's formulas, the in-place donated updates of a training step (counted,
// not timed), and the errors users see.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "lazyjit/lazyjit.h"
#include "tier.h"

namespace lazyjit {
namespace {

using testing::ElementsAre;
using testing::HasSubstr;
using testing::ThrowsMessage;

Tensor f64(std::vector<double> v, std::vector<int64_t> shape) { return Tensor::from_vector<double>(v, shape); }

void expect_near(const std::vector<double>& got, const std::vector<double>& want, double tol = 1e-12) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol * (1 + std::fabs(want[i]))) << i;
}

/// The gradient of the test problem at p: loss = sum(c * p^2) / 2, so g = c * p.
std::vector<double> gradient(const std::vector<double>& p, const std::vector<double>& c) {
  std::vector<double> g(p.size());
  for (size_t i = 0; i < p.size(); ++i) g[i] = c[i] * p[i];
  return g;
}

const std::vector<double> kStart = {1.0, -2.0, 0.5, 3.0};
const std::vector<double> kCurv = {1.0, 0.5, 2.0, 0.25};

/// Runs `steps` optimizer steps on the test problem with autograd, one mark_step each, and
/// returns the parameter after each step; checks one donation per parameter and state buffer
/// per step and no new bytes after the first.
template <class MakeOptimizer>
std::vector<std::vector<double>> run(MakeOptimizer make, int steps, int64_t buffers_per_step) {
  Tensor p = f64(kStart, {4});
  p.requires_grad_();
  const Tensor c = f64(kCurv, {4});
  auto opt = make(std::vector<Tensor>{p});
  std::vector<std::vector<double>> out;
  int64_t compiles_after_first = 0, bytes_after_first = 0;
  for (int s = 0; s < steps; ++s) {
    const Metrics before = metrics();
    Tensor loss = sum(c * p * p) * 0.5;
    loss.backward();
    opt.step();
    opt.zero_grad();
    mark_step();
    EXPECT_EQ(metrics().donations - before.donations, buffers_per_step) << "step " << s;
    if (s == 0) compiles_after_first = metrics().compiles, bytes_after_first = metrics().bytes_allocated;
    out.push_back(p.to_vector<double>());
  }
  EXPECT_EQ(metrics().compiles, compiles_after_first) << "every step is one graph";
  EXPECT_EQ(metrics().bytes_allocated, bytes_after_first) << "no new buffers after the first step";
  return out;
}

TEST(OptimTest, SgdWithMomentumDampeningAndWeightDecayFollowsTorch) {
  const optim::SGDOptions o{.lr = 0.1, .momentum = 0.9, .dampening = 0.25, .weight_decay = 0.01};
  auto got = run([&](std::vector<Tensor> ps) { return optim::SGD(std::move(ps), o); }, 3, 2);
  std::vector<double> p = kStart, buf(4, 0.0);
  for (int s = 0; s < 3; ++s) {
    std::vector<double> g = gradient(p, kCurv);
    for (size_t i = 0; i < 4; ++i) {
      g[i] += o.weight_decay * p[i];
      buf[i] = s == 0 ? g[i] : o.momentum * buf[i] + (1 - o.dampening) * g[i];  // torch: clone at step 1
      p[i] -= o.lr * buf[i];
    }
    expect_near(got[s], p);
  }
}

TEST(OptimTest, SgdNesterovAndPlain) {
  const optim::SGDOptions o{.lr = 0.05, .momentum = 0.5, .nesterov = true};
  auto got = run([&](std::vector<Tensor> ps) { return optim::SGD(std::move(ps), o); }, 3, 2);
  std::vector<double> p = kStart, buf(4, 0.0);
  for (int s = 0; s < 3; ++s) {
    const std::vector<double> g = gradient(p, kCurv);
    for (size_t i = 0; i < 4; ++i) {
      buf[i] = s == 0 ? g[i] : o.momentum * buf[i] + g[i];
      p[i] -= o.lr * (g[i] + o.momentum * buf[i]);
    }
    expect_near(got[s], p);
  }
  auto plain = run([](std::vector<Tensor> ps) { return optim::SGD(std::move(ps), {.lr = 0.5}); }, 2, 1);
  expect_near(plain[1], {1.0 * 0.25, -2.0 * 0.75 * 0.75, 0.5 * 0.0, 3.0 * 0.875 * 0.875});
}

TEST(OptimTest, AdamFollowsTorch) {
  const optim::AdamOptions o{.lr = 0.01, .beta1 = 0.8, .beta2 = 0.99, .eps = 1e-6, .weight_decay = 0.1};
  auto got = run([&](std::vector<Tensor> ps) { return optim::Adam(std::move(ps), o); }, 4, 3);
  std::vector<double> p = kStart, m(4, 0.0), v(4, 0.0);
  for (int s = 1; s <= 4; ++s) {
    std::vector<double> g = gradient(p, kCurv);
    for (size_t i = 0; i < 4; ++i) {
      g[i] += o.weight_decay * p[i];
      m[i] = o.beta1 * m[i] + (1 - o.beta1) * g[i];
      v[i] = o.beta2 * v[i] + (1 - o.beta2) * g[i] * g[i];
      const double m_hat = m[i] / (1 - std::pow(o.beta1, s)), v_hat = v[i] / (1 - std::pow(o.beta2, s));
      p[i] -= o.lr * m_hat / (std::sqrt(v_hat) + o.eps);
    }
    expect_near(got[s - 1], p, 1e-9);
  }
}

TEST(OptimTest, AdamWFollowsTorch) {
  const optim::AdamWOptions o{.lr = 0.01, .beta1 = 0.8, .beta2 = 0.99, .eps = 1e-6, .weight_decay = 0.1};
  auto got = run([&](std::vector<Tensor> ps) { return optim::AdamW(std::move(ps), o); }, 4, 3);
  std::vector<double> p = kStart, m(4, 0.0), v(4, 0.0);
  for (int s = 1; s <= 4; ++s) {
    const std::vector<double> g = gradient(p, kCurv);
    for (size_t i = 0; i < 4; ++i) {
      p[i] *= 1 - o.lr * o.weight_decay;  // decoupled: not in the moments
      m[i] = o.beta1 * m[i] + (1 - o.beta1) * g[i];
      v[i] = o.beta2 * v[i] + (1 - o.beta2) * g[i] * g[i];
      const double m_hat = m[i] / (1 - std::pow(o.beta1, s)), v_hat = v[i] / (1 - std::pow(o.beta2, s));
      p[i] -= o.lr * m_hat / (std::sqrt(v_hat) + o.eps);
    }
    expect_near(got[s - 1], p, 1e-9);
  }
  EXPECT_THAT([&] { optim::AdamW({f64({1}, {1})}, {.lr = -1}); }, ThrowsMessage<Error>(HasSubstr("AdamW: invalid options lr -1")));
}

TEST(OptimTest, ClipGradNormScalesEveryGradientByTheGlobalNorm) {
  Tensor a = f64({3, 0}, {2}), b = f64({4}, {1});
  a.requires_grad_();
  b.requires_grad_();
  Tensor loss = sum(a * f64({1, 0}, {2})) * 3.0 + sum(b) * 4.0;  // grads (3, 0) and (4): norm 5
  loss.backward();
  const Tensor norm = nn::clip_grad_norm_({a, b}, 1.0);
  EXPECT_NEAR(norm.item<double>(), 5.0, 1e-12);
  expect_near(a.grad().to_vector<double>(), {3 / (5 + 1e-6), 0}, 1e-12);
  expect_near(b.grad().to_vector<double>(), {4 / (5 + 1e-6)}, 1e-12);
  // Under the bound nothing changes.
  Tensor c = f64({1, 1}, {2});
  c.requires_grad_();
  sum(c * 0.5).backward();
  EXPECT_NEAR(nn::clip_grad_norm_({c}, 10.0).item<double>(), std::sqrt(0.5), 1e-12);
  expect_near(c.grad().to_vector<double>(), {0.5, 0.5}, 1e-15);
  EXPECT_THAT([&] { nn::clip_grad_norm_({c}, -1.0); },
              ThrowsMessage<Error>(HasSubstr("clip_grad_norm_: max_norm must be >= 0, got -1")));
}

TEST(OptimTest, StepTakesExplicitGradientsAndChecksThem) {
  Tensor w = f64({1, 2, 3, 4}, {2, 2}), b = f64({0.5, -0.5}, {2});
  optim::SGD opt({w, b}, {.lr = 1.0});
  opt.step({f64({1, 1, 1, 1}, {2, 2}), f64({1, 1}, {2})});
  EXPECT_THAT(w.to_vector<double>(), ElementsAre(0, 1, 2, 3));
  EXPECT_EQ(opt.steps(), 1);
  EXPECT_THAT([&] { opt.step({f64({1, 1}, {2})}); }, ThrowsMessage<Error>(HasSubstr("step: 1 gradients for 2 parameters")));
  EXPECT_THAT([&] { opt.step({f64({1, 1}, {2}), f64({1, 1}, {2})}); },
              ThrowsMessage<Error>(HasSubstr("step: gradient 0 is float64[2], its parameter is float64[2, 2]")));
  EXPECT_THAT([&] { opt.step({Tensor(), f64({1, 1}, {2})}); },
              ThrowsMessage<Error>(HasSubstr("step: gradient 0 is an undefined tensor")));
}

TEST(OptimTest, OptionsAndParametersAreChecked) {
  const Tensor i = Tensor::from_vector<int64_t>({1, 2});
  EXPECT_THAT([&] { optim::SGD({i}, {}); },
              ThrowsMessage<Error>(HasSubstr("optimizer: parameter 0 is int64[2]; only floating tensors can be optimised")));
  const Tensor w = f64({1}, {1});
  EXPECT_THAT([&] { optim::Adam({w}, {.beta1 = 1.0}); }, ThrowsMessage<Error>(HasSubstr("Adam: invalid options")));
  EXPECT_THAT([&] { optim::SGD({w}, {.lr = -1}); }, ThrowsMessage<Error>(HasSubstr("SGD: lr -1, momentum 0")));
  EXPECT_THAT([&] { optim::SGD({w}, {.nesterov = true}); },
              ThrowsMessage<Error>(HasSubstr("SGD: nesterov needs a momentum > 0 and dampening 0")));
}

TEST(NnTest, CrossEntropyMatchesTheFormulaAndChecksItsInputs) {
  const Tensor logits = f64({1, 2, 3, 0, 0, 0}, {2, 3});
  const Tensor targets = Tensor::from_vector<int64_t>({2, 0});
  const int64_t executed = metrics().graphs_executed;
  const Tensor loss = nn::cross_entropy(logits, targets);  // the range check reads data: no graph runs
  EXPECT_EQ(metrics().graphs_executed, executed);
  const double lse0 = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0)), lse1 = std::log(3.0);
  EXPECT_NEAR(loss.item<double>(), ((lse0 - 3.0) + lse1) / 2, 1e-12);
  EXPECT_NEAR(nn::cross_entropy(logits, targets).item<double>(), ((lse0 - 3.0) + lse1) / 2, 1e-12);
  EXPECT_THAT([&] { nn::cross_entropy(logits, Tensor::from_vector<int64_t>({3, 0})); },
              ThrowsMessage<Error>(HasSubstr("cross_entropy: target 0 is 3, outside the 3 classes [0, 3)")));
  EXPECT_THAT([&] { nn::cross_entropy(logits, f64({2, 0}, {2})); },
              ThrowsMessage<Error>(HasSubstr("cross_entropy: targets must be an integer [N] tensor of class "
                                             "indices, got float64[2]")));
  EXPECT_THAT([&] { nn::cross_entropy(logits, Tensor::from_vector<int64_t>({1, 2, 0})); },
              ThrowsMessage<Error>(HasSubstr("cross_entropy: 3 targets for 2 rows of logits float64[2, 3]")));
  EXPECT_THAT([&] { nn::cross_entropy(f64({1, 2}, {2}), targets); },
              ThrowsMessage<Error>(HasSubstr("cross_entropy: logits must be a floating [N, C] tensor, got float64[2]")));
}

TEST(NnTest, DropoutKeepsScaledElementsByASeededMask) {
  const int64_t n = 100000;
  const Tensor x = arange(n, DType::Float64) + 1.0;
  const std::vector<double> y = nn::dropout(x, 0.3, 7).to_vector<double>();
  int64_t kept = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (y[i] == 0) continue;
    ++kept;
    ASSERT_DOUBLE_EQ(y[i], (i + 1.0) / 0.7) << i;
  }
  EXPECT_NEAR(static_cast<double>(kept) / n, 0.7, 0.01);  // 0.7 +- 7 standard deviations
  EXPECT_EQ(nn::dropout(x, 0.3, 7).to_vector<double>(), y) << "a seed is one mask";
  EXPECT_NE(nn::dropout(x, 0.3, 8).to_vector<double>(), y);
  EXPECT_EQ(nn::dropout(x, 0.3, 7, /*training=*/false).to_vector<double>(), x.to_vector<double>());
  EXPECT_EQ(nn::dropout(x, 1.0, 7).to_vector<double>(), std::vector<double>(n, 0.0));
  // Its gradient is the mask, scaled.
  const Tensor w = f64({1, 2, 3, 4, 5, 6, 7, 8}, {8}).requires_grad_();
  const Tensor out = nn::dropout(w, 0.5, 3);
  const std::vector<double> g = grad(sum(out), {w})[0].to_vector<double>(), kept_values = out.to_vector<double>();
  for (size_t i = 0; i < g.size(); ++i) EXPECT_EQ(g[i], kept_values[i] == 0 ? 0.0 : 2.0) << i;
  EXPECT_THAT([&] { nn::dropout(x, 1.5, 0); },
              ThrowsMessage<Error>(HasSubstr("dropout: probability has to be between 0 and 1, but got 1.5")));
  EXPECT_THAT([&] { nn::Dropout(-0.1); },
              ThrowsMessage<Error>(HasSubstr("Dropout: probability has to be between 0 and 1, but got -0.1")));
}

TEST(NnTest, ADropoutLayerDrawsANewMaskEachStepWithoutRecompiling) {
  tests::ScopedTier compiled(Tier::Compile);
  nn::Dropout drop(0.5, 11);
  const Tensor x = ones({64}, DType::Float32);
  const int64_t compiles = metrics().compiles;
  const std::vector<float> first = drop(x).to_vector<float>(), second = drop(x).to_vector<float>();
  const std::vector<float> third = drop(x).to_vector<float>();
  EXPECT_NE(first, second);
  EXPECT_NE(second, third);
  EXPECT_LE(metrics().compiles - compiles, 1) << "the seed is a runtime value";
  drop.training = false;
  EXPECT_EQ(drop(x).to_vector<float>(), std::vector<float>(64, 1.0f));
}

TEST(NnTest, BatchNormNormalisesPerChannelAndUpdatesRunningStatistics) {
  const int64_t N = 3, C = 2, H = 2, W = 5;
  std::vector<double> v(N * C * H * W);
  for (size_t i = 0; i < v.size(); ++i) v[i] = std::sin(0.7 * static_cast<double>(i)) * (1 + i % 3);
  const Tensor x = Tensor::from_vector<double>(v, {N, C, H, W});
  nn::BatchNorm2d bn(C, 1e-5, 0.1, DType::Float64);
  const std::vector<double> y = bn(x).to_vector<double>();
  const std::vector<double> running_mean = bn.running_mean.to_vector<double>();
  const std::vector<double> running_var = bn.running_var.to_vector<double>();
  for (int64_t c = 0; c < C; ++c) {
    double mean = 0, squares = 0;
    const int64_t count = N * H * W;
    auto at = [&](int64_t n, int64_t k) { return (n * C + c) * H * W + k; };
    for (int64_t n = 0; n < N; ++n) {
      for (int64_t k = 0; k < H * W; ++k) mean += v[at(n, k)] / count;
    }
    for (int64_t n = 0; n < N; ++n) {
      for (int64_t k = 0; k < H * W; ++k) squares += (v[at(n, k)] - mean) * (v[at(n, k)] - mean);
    }
    const double var = squares / count;
    for (int64_t n = 0; n < N; ++n) {
      for (int64_t k = 0; k < H * W; ++k) {
        EXPECT_NEAR(y[at(n, k)], (v[at(n, k)] - mean) / std::sqrt(var + 1e-5), 1e-12) << c;
      }
    }
    EXPECT_NEAR(running_mean[c], 0.1 * mean, 1e-14);
    EXPECT_NEAR(running_var[c], 0.9 + 0.1 * squares / (count - 1), 1e-14);  // unbiased, as PyTorch
  }
  bn.training = false;  // eval: the running statistics
  const std::vector<double> eval = bn(x).to_vector<double>();
  EXPECT_NEAR(eval[0], (v[0] - running_mean[0]) / std::sqrt(running_var[0] + 1e-5), 1e-12);
  EXPECT_THAT([&] { bn(Tensor::from_vector<double>(v, {N, C * H * W})); },
              ThrowsMessage<Error>(HasSubstr("BatchNorm2d(2): input float64[3, 20] must be [N, 2, H, W]")));
  EXPECT_THAT([&] { nn::batch_norm(x, Tensor(), Tensor(), f64({1, 2, 3}, {3}), Tensor(), true); },
              ThrowsMessage<Error>(HasSubstr("batch_norm: weight must be [2] for an input of 2 channels, got float64[3]")));
  EXPECT_THAT([&] { nn::batch_norm(f64({1, 2}, {1, 2}), Tensor(), Tensor(), Tensor(), Tensor(), true); },
              ThrowsMessage<Error>(HasSubstr("batch_norm: expected more than 1 value per channel when training")));
  EXPECT_THAT([&] { nn::batch_norm(x, Tensor(), Tensor(), Tensor(), Tensor(), false); },
              ThrowsMessage<Error>(HasSubstr("batch_norm: evaluation needs running_mean and running_var")));
}

TEST(NnTest, MseLoss) {
  EXPECT_NEAR(nn::mse_loss(f64({1, 2, 3}, {3}), f64({1, 0, 0}, {3})).item<double>(), (4.0 + 9.0) / 3, 1e-12);
  EXPECT_THAT([&] { nn::mse_loss(f64({1, 2, 3}, {3}), f64({1}, {1})); },
              ThrowsMessage<Error>(HasSubstr("mse_loss: input float64[3] and target float64[1] must have one shape")));
}

TEST(NnTest, LinearIsSeededMaterialisedAndChecksItsInput) {
  const nn::Linear a(4, 3, /*seed=*/7), b(4, 3, /*seed=*/7), c(4, 3, /*seed=*/8);
  EXPECT_EQ(a.weight.shape(), (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(a.bias.shape(), (std::vector<int64_t>{3}));
  EXPECT_TRUE(a.weight.requires_grad());
  const std::vector<float> wa = a.weight.to_vector<float>();
  EXPECT_EQ(wa, b.weight.to_vector<float>());
  EXPECT_NE(wa, c.weight.to_vector<float>());
  EXPECT_NE(std::vector<float>(wa.begin(), wa.begin() + 3), a.bias.to_vector<float>());  // streams of their own
  for (float w : wa) EXPECT_LE(std::fabs(w), 0.5f);  // 1/sqrt(in_features)
  const Tensor x = Tensor::from_vector<float>({1, 0, 0, 0}, {1, 4});
  const std::vector<float> y = a(x).to_vector<float>(), bias = a.bias.to_vector<float>();
  for (int j = 0; j < 3; ++j) EXPECT_FLOAT_EQ(y[j], wa[j * 4] + bias[j]);
  EXPECT_THAT([&] { a(Tensor::from_vector<float>({1, 2}, {1, 2})); },
              ThrowsMessage<Error>(HasSubstr("Linear(4, 3): input float32[1, 2] must have 4 features in its last dim")));
  EXPECT_THAT([&] { nn::Linear(0, 3, 1); }, ThrowsMessage<Error>(HasSubstr("Linear: features must be positive")));
}

TEST(NnTest, EmbeddingConv2dLayerNormAndMaxPool2dLayers) {
  const nn::Embedding table(10, 4, /*seed=*/3);
  EXPECT_EQ(table.weight.shape(), (std::vector<int64_t>{10, 4}));
  EXPECT_TRUE(table.weight.requires_grad());
  const std::vector<float> rows = table(Tensor::from_vector<int64_t>({7, 7, 2}, {3})).to_vector<float>();
  const std::vector<float> w = table.weight.to_vector<float>();
  EXPECT_EQ(std::vector<float>(rows.begin(), rows.begin() + 4), std::vector<float>(w.begin() + 28, w.begin() + 32));
  EXPECT_EQ(std::vector<float>(rows.begin() + 8, rows.end()), std::vector<float>(w.begin() + 8, w.begin() + 12));

  const nn::Conv2d conv(4, 6, 3, /*seed=*/5, /*stride=*/1, /*padding=*/1, 1, /*groups=*/2);
  EXPECT_EQ(conv.weight.shape(), (std::vector<int64_t>{6, 2, 3, 3}));
  EXPECT_EQ(conv.parameters().size(), 2u);
  for (float v : conv.weight.to_vector<float>()) EXPECT_LE(std::fabs(v), 1 / std::sqrt(18.0f));  // fan_in 2*3*3
  const Tensor x = randn({2, 4, 5, 5}, 9);
  EXPECT_EQ(conv(x).to_vector<float>(), conv2d(x, conv.weight, conv.bias, 1, 1, 1, 2).to_vector<float>());
  EXPECT_EQ(nn::Conv2d(4, 6, {1, 3}, 5, 1, 0, 1, 1, /*bias=*/false).parameters().size(), 1u);
  EXPECT_THAT([&] { nn::Conv2d(4, 6, 3, 5, 1, 0, 1, 3); },
              ThrowsMessage<Error>(HasSubstr("Conv2d: groups 3 must divide 4 input and 6 output channels")));

  const nn::LayerNorm norm({5});
  EXPECT_EQ(norm(x).to_vector<float>(), layer_norm(x, 1, norm.weight, norm.bias).to_vector<float>());
  EXPECT_THAT([&] { norm(zeros({2, 4})); },
              ThrowsMessage<Error>(HasSubstr("LayerNorm([5]): input float32[2, 4] must end with the normalised shape")));

  const nn::MaxPool2d pool(2);
  EXPECT_EQ(pool(x).shape(), (std::vector<int64_t>{2, 4, 2, 2}));
  EXPECT_EQ(pool(x).to_vector<float>(), max_pool2d(x, 2).to_vector<float>());
}

// The update of an embedding reads its gradient, an index_add, back from memory: the
// scatter's kernel checked the indices, so the update may still take over the weight's buffer.
TEST(NnTest, AnEmbeddingsUpdateTakesOverItsBuffer) {
  nn::Embedding table(10, 4, /*seed=*/3);
  optim::SGD opt(table.parameters(), {.lr = 0.5});
  const Tensor tokens = Tensor::from_vector<int64_t>({1, 7, 1}, {3});
  const std::vector<float> before = table.weight.to_vector<float>();
  for (int step = 0; step < 2; ++step) {
    sum(table(tokens)).backward();
    opt.step();
    opt.zero_grad();
    const int64_t donations = metrics().donations;
    mark_step();
    EXPECT_EQ(metrics().donations - donations, 1) << "step " << step;
  }
  const std::vector<float> after = table.weight.to_vector<float>();
  EXPECT_FLOAT_EQ(after[4], before[4] - 2.0f);  // row 1, looked up twice per step, twice: 2 * 2 * 0.5
  EXPECT_FLOAT_EQ(after[28], before[28] - 1.0f);  // row 7
  EXPECT_FLOAT_EQ(after[0], before[0]);
}

TEST(NnTest, ATrainingStepIsOneGraphWithOneDonationPerBuffer) {
  // Two layers and Adam: 4 parameters and 8 state buffers are written in place every step;
  // the loss is read with item() before backward(), as PyTorch users do.
  nn::Linear l1(6, 8, 1), l2(8, 3, 2);
  std::vector<Tensor> params = l1.parameters();
  for (const Tensor& p : l2.parameters()) params.push_back(p);
  optim::Adam opt(params, {.lr = 0.05});
  std::vector<float> xs(5 * 6);
  for (size_t i = 0; i < xs.size(); ++i) xs[i] = static_cast<float>((i * 7) % 5) - 2.0f;
  const std::vector<int64_t> ts = {0, 1, 2, 1, 0};
  std::vector<float> losses;
  int64_t compiles = 0;
  for (int s = 0; s < 6; ++s) {
    const Metrics before = metrics();
    const Tensor x = Tensor::from_vector<float>(xs, {5, 6});
    Tensor loss = nn::cross_entropy(l2(relu(l1(x))), Tensor::from_vector<int64_t>(ts));
    losses.push_back(loss.item<float>());
    loss.backward();
    opt.step();
    opt.zero_grad();
    mark_step();
    EXPECT_EQ(metrics().donations - before.donations, 12) << "step " << s;
    if (s == 1) compiles = metrics().compiles;
  }
  EXPECT_EQ(metrics().compiles, compiles) << "steps after the first two compile nothing";
  EXPECT_LT(losses.back(), losses.front());
}

}  // namespace
}  // namespace lazyjit

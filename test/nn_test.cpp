// Losses, layers and optimizers (lazyjit/nn.h, lazyjit/optim.h): values against host
// references of PyTorch's formulas, the in-place donated updates of a training step (counted,
// not timed), and the errors users see.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "lazyjit/lazyjit.h"

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

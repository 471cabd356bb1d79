// The PyTorch front end from C++: a torch::nn model on torch::kLazy runs on lazyjit, step by
// step as on the CPU, one graph per step; what lazyjit cannot express falls back, counted;
// lazyjit's errors reach the user as PyTorch's. (test/torch/ has the per-op tests, in Python.)
#include <gtest/gtest.h>
#include <torch/csrc/lazy/core/lazy_graph_executor.h>
#include <torch/torch.h>

#include "lazyjit/torch.h"

namespace {

class TorchBackendTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { lazyjit::torch::init(); }
  static void mark_step() {
    auto device = torch::lazy::BackendDevice();
    torch::lazy::LazyGraphExecutor::Get()->SyncLiveTensorsGraph(&device, {}, /*wait=*/true);
    torch::lazy::LazyGraphExecutor::Get()->MarkStep(device);
  }
};

/// An MLP whose parameters live on `device`, initialised as torch::nn::Linear is. (In C++,
/// Module::to(kLazy) fails on PyTorch 1.13: set_data cannot put a functionalised lazy tensor
/// into a CPU parameter, so the parameters are made on the device.)
struct Mlp : torch::nn::Module {
  explicit Mlp(torch::Device device) {
    torch::nn::Linear l1(64, 32), l2(32, 10);
    w1 = register_parameter("w1", l1->weight.detach().to(device));
    b1 = register_parameter("b1", l1->bias.detach().to(device));
    w2 = register_parameter("w2", l2->weight.detach().to(device));
    b2 = register_parameter("b2", l2->bias.detach().to(device));
  }
  torch::Tensor forward(const torch::Tensor& x) {
    namespace F = torch::nn::functional;
    return F::linear(torch::relu(F::linear(x, w1, b1)), w2, b2);
  }
  torch::Tensor w1, b1, w2, b2;
};

/// The training losses of an MLP with Adam on `device`, and lazyjit's graph runs per step.
std::pair<std::vector<float>, std::vector<int64_t>> train(torch::Device device, int steps) {
  torch::manual_seed(0);
  auto model = std::make_shared<Mlp>(device);
  torch::optim::Adam opt(model->parameters(), torch::optim::AdamOptions(1e-2));
  torch::manual_seed(1);
  const torch::Tensor x = torch::randn({16, 64}).to(device), y = torch::randint(0, 10, {16}).to(device);
  std::vector<float> losses;
  std::vector<int64_t> runs;
  for (int step = 0; step < steps; ++step) {
    opt.zero_grad();
    torch::Tensor loss = torch::nn::functional::cross_entropy(model->forward(x), y);
    loss.backward();
    opt.step();
    if (device.is_lazy()) {
      auto backend_device = torch::lazy::BackendDevice();
      torch::lazy::LazyGraphExecutor::Get()->SyncLiveTensorsGraph(&backend_device, {}, /*wait=*/true);
      torch::lazy::LazyGraphExecutor::Get()->MarkStep(backend_device);
      runs.push_back(lazyjit::torch::metrics().lazyjit_executions);
    }
    losses.push_back(loss.item<float>());
  }
  return {losses, runs};
}

TEST_F(TorchBackendTest, AnMlpTrainsAsOnTheCpuOneGraphPerStep) {
  const int steps = 6;
  const auto [want, unused] = train(torch::kCPU, steps);
  const lazyjit::torch::Metrics before = lazyjit::torch::metrics();
  const auto [got, runs] = train(torch::kLazy, steps);
  const lazyjit::torch::Metrics after = lazyjit::torch::metrics();
  for (int step = 0; step < steps; ++step) EXPECT_NEAR(got[step], want[step], 1e-5) << "step " << step;
  EXPECT_EQ(after.fallback_executions, before.fallback_executions);
  for (int step = 2; step < steps; ++step) EXPECT_EQ(runs[step] - runs[step - 1], 1) << "step " << step;
}

TEST_F(TorchBackendTest, AnOpLazyjitCannotExpressFallsBackWithTheRightValue) {
  const torch::Tensor a = torch::randn({4, 4});
  const lazyjit::torch::Metrics before = lazyjit::torch::metrics();
  const torch::Tensor got = std::get<0>(torch::sort(a.to(torch::kLazy) * 2)).cpu();
  const lazyjit::torch::Metrics after = lazyjit::torch::metrics();
  EXPECT_TRUE(torch::allclose(got, std::get<0>(torch::sort(a * 2))));
  EXPECT_EQ(after.fallback_graphs, before.fallback_graphs + 1);
  EXPECT_EQ(after.fallback_ops.at("aten::sort"), before.fallback_ops.count("aten::sort") ? before.fallback_ops.at("aten::sort") + 1 : 1);
  EXPECT_NE(after.fallback_reasons.at("aten::sort").find("no translation"), std::string::npos);
  EXPECT_NE(lazyjit::torch::metrics_report().find("torch_fallback_op aten::sort"), std::string::npos);
}

TEST_F(TorchBackendTest, AnIndexOutOfRangeIsPyTorchsErrorWithLazyjitsMessage) {
  const torch::Tensor weight = torch::randn({6, 5}).to(torch::kLazy);
  const torch::Tensor index = torch::tensor({1, 9}).to(torch::kLazy);
  try {
    torch::embedding(weight, index).cpu();
    FAIL() << "no error";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what()).find("index 9 is out of range for dim 0 of size 6"), std::string::npos) << e.what();
  }
  // LTC's device lock keeps a failed run's error and raises it once more at the next sync.
  EXPECT_THROW(mark_step(), c10::Error);
  mark_step();
}

}  // namespace

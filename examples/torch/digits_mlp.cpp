// PyTorch on lazyjit, from C++: the digits MLP written with libtorch (torch::nn::functional,
// torch::optim::Adam) on torch::kLazy, after lazyjit::torch::init(). PyTorch traces each
// step, lazyjit compiles and runs it. Prints the loss per epoch, the test accuracy and the
// backend's metrics; exits 1 below 95% test accuracy or if a step left lazyjit.
#include <cstdio>

#include <torch/csrc/lazy/core/lazy_graph_executor.h>
#include <torch/torch.h>

#include "../digits_data.h"
#include "../digits_training.h"
#include "lazyjit/torch.h"

namespace {

/// Linear(64, 128), relu, Linear(128, 10), initialised as torch::nn::Linear is, with the
/// parameters made on `device` (Module::to(kLazy) fails in C++ on PyTorch 1.13).
struct Mlp : torch::nn::Module {
  explicit Mlp(torch::Device device) {
    torch::nn::Linear l1(DigitsData::kPixels, 128), l2(128, DigitsData::kClasses);
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

void mark_step() {
  auto device = torch::lazy::BackendDevice();
  torch::lazy::LazyGraphExecutor::Get()->SyncLiveTensorsGraph(&device, {}, /*wait=*/true);
  torch::lazy::LazyGraphExecutor::Get()->MarkStep(device);
}

torch::Tensor rows(const DigitsData& data, const std::vector<int64_t>& index, torch::Device device) {
  torch::Tensor all = torch::from_blob(const_cast<float*>(data.pixels.data()), {data.rows(), DigitsData::kPixels});
  return all.index_select(0, torch::tensor(index)).to(device);
}
torch::Tensor labels(const DigitsData& data, const std::vector<int64_t>& index, torch::Device device) {
  torch::Tensor all = torch::from_blob(const_cast<int64_t*>(data.labels.data()), {data.rows()}, torch::kInt64);
  return all.index_select(0, torch::tensor(index)).to(device);
}

int train(const DigitsData& data) {
  lazyjit::torch::init();
  const torch::Device device(torch::kLazy);
  const digits::Split split = digits::fixed_split(data.rows());
  torch::manual_seed(0);
  auto model = std::make_shared<Mlp>(device);
  torch::optim::Adam opt(model->parameters(), torch::optim::AdamOptions(5e-3));
  constexpr int64_t kBatch = 64;
  constexpr int kEpochs = 15;
  for (int epoch = 0; epoch < kEpochs; ++epoch) {
    double loss_sum = 0;
    int batches = 0;
    // The training rows in a new seeded order each epoch.
    const torch::Tensor order = torch::randperm(static_cast<int64_t>(split.train.size()), torch::kInt64);
    const int64_t* o = order.data_ptr<int64_t>();
    for (size_t start = 0; start + kBatch <= split.train.size(); start += kBatch) {
      std::vector<int64_t> index(kBatch);
      for (int64_t b = 0; b < kBatch; ++b) index[b] = split.train[o[start + b]];
      opt.zero_grad();
      torch::Tensor loss = torch::nn::functional::cross_entropy(model->forward(rows(data, index, device)), labels(data, index, device));
      loss.backward();
      opt.step();
      mark_step();
      loss_sum += loss.item<double>();
      ++batches;
    }
    std::printf("epoch %2d: loss %.4f\n", epoch + 1, loss_sum / batches);
  }
  torch::NoGradGuard no_grad;
  const torch::Tensor predicted = model->forward(rows(data, split.test, device)).argmax(1).cpu();
  const double accuracy = predicted.eq(labels(data, split.test, torch::kCPU)).to(torch::kFloat64).mean().item<double>();
  const lazyjit::torch::Metrics m = lazyjit::torch::metrics();
  std::printf("\ntest accuracy: %.2f%%\n\n%s", 100 * accuracy, lazyjit::torch::metrics_report().c_str());
  if (m.fallback_executions != 0) {
    std::fprintf(stderr, "torch_digits_mlp: %lld runs fell back to TorchScript\n", static_cast<long long>(m.fallback_executions));
    return 1;
  }
  return accuracy >= 0.95 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return train(load_digits(argc > 1 ? argv[1] : kDefaultDigitsPath));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "torch_digits_mlp: %s\n", e.what());
    return 2;
  }
}

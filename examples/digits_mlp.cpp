// The main job: a two-layer MLP trained on the sklearn handwritten digits (a fixed split of
// 1437 training and 360 test images) in PyTorch's style: forward, backward, Adam step,
// mark_step. Prints the loss per epoch, the test accuracy, lazyjit's metrics and checks of what
// the step barrier promises (no recompiles, every update in place); exits 1 if one fails or the
// test accuracy is below 95%.
#include <cstdint>
#include <cstdio>
#include <vector>

#include <lazyjit/lazyjit.h>

#include "digits_training.h"

using lazyjit::Tensor;

namespace {

constexpr uint64_t kHiddenSeed = 1;
constexpr uint64_t kOutputSeed = 2;
constexpr int64_t kHidden = 128;
constexpr double kLearningRate = 1e-2;

struct Mlp {
  lazyjit::nn::Linear hidden{DigitsData::kPixels, kHidden, kHiddenSeed};
  lazyjit::nn::Linear output{kHidden, DigitsData::kClasses, kOutputSeed};

  Tensor operator()(const Tensor& x) const { return output(lazyjit::relu(hidden(x))); }

  std::vector<Tensor> parameters() const {
    std::vector<Tensor> params = hidden.parameters();
    for (const Tensor& p : output.parameters()) params.push_back(p);
    return params;
  }
};

/// Trains, evaluates and prints; returns the exit code.
int train_and_evaluate(const DigitsData& data) {
  const digits::Options options{.batch = 64, .epochs = 15, .min_accuracy = 0.95};
  const digits::Split split = digits::fixed_split(data.rows());
  if (split.train.size() < 2 || split.test.empty()) {
    std::fprintf(stderr, "digits_mlp: %lld rows are too few to train and test on\n",
                 static_cast<long long>(data.rows()));
    return 2;
  }
  std::printf("digits: %lld images (%zu train, %zu test), 64 pixels, 10 classes\n",
              static_cast<long long>(data.rows()), split.train.size(), split.test.size());
  Mlp model;
  lazyjit::optim::Adam opt(model.parameters(), {.lr = kLearningRate});
  std::printf("model: Linear(64, %lld) relu Linear(%lld, 10); Adam lr %g; batch %lld; %d epochs\n\n",
              static_cast<long long>(kHidden), static_cast<long long>(kHidden), kLearningRate,
              static_cast<long long>(options.batch), options.epochs);

  return digits::train_and_report([&](const Tensor& x) { return model(x); }, opt, data, split, options);
}

}  // namespace

int main(int argc, char** argv) { return digits::run_main(argc, argv, "digits_mlp", train_and_evaluate); }

// A LeNet-style CNN on the sklearn handwritten digits (8x8 images; the same fixed split as
// digits_mlp): conv 3x3 (16 channels) relu max-pool 2, conv 3x3 (32 channels) relu max-pool
// 2, linear to the 10 classes; Adam, cross-entropy, mark_step per step. Prints the loss per
// epoch, the test accuracy, lazyjit's metrics and the step barrier's checks; exits 1 if one
// fails or the test accuracy is below 97%.
#include <cstdint>
#include <cstdio>
#include <vector>

#include <lazyjit/lazyjit.h>

#include "digits_training.h"

using lazyjit::Tensor;

namespace {

constexpr double kLearningRate = 1e-2;

struct Cnn {
  lazyjit::nn::Conv2d conv1{1, 16, 3, /*seed=*/11, /*stride=*/1, /*padding=*/1};
  lazyjit::nn::Conv2d conv2{16, 32, 3, /*seed=*/12, /*stride=*/1, /*padding=*/1};
  lazyjit::nn::MaxPool2d pool{2};
  lazyjit::nn::Linear output{32 * 2 * 2, DigitsData::kClasses, /*seed=*/13};

  /// x [n, 64] (the flattened 8x8 images) to logits [n, 10].
  Tensor operator()(const Tensor& x) const {
    const int64_t n = x.shape()[0];
    Tensor h = pool(lazyjit::relu(conv1(lazyjit::reshape(x, {n, 1, 8, 8}))));  // [n, 16, 4, 4]
    h = pool(lazyjit::relu(conv2(h)));                                           // [n, 32, 2, 2]
    return output(lazyjit::reshape(h, {n, 32 * 2 * 2}));
  }

  std::vector<Tensor> parameters() const {
    std::vector<Tensor> params;
    for (const auto& layer : {conv1.parameters(), conv2.parameters(), output.parameters()}) {
      params.insert(params.end(), layer.begin(), layer.end());
    }
    return params;
  }
};

int train_and_evaluate(const DigitsData& data) {
  const digits::Options options{.batch = 32, .epochs = 15, .min_accuracy = 0.97};
  const digits::Split split = digits::fixed_split(data.rows());
  if (split.train.size() < 2 || split.test.empty()) {
    std::fprintf(stderr, "digits_cnn: %lld rows are too few to train and test on\n", static_cast<long long>(data.rows()));
    return 2;
  }
  std::printf("digits: %lld images (%zu train, %zu test), 8x8 pixels, 10 classes\n", static_cast<long long>(data.rows()),
              split.train.size(), split.test.size());
  Cnn model;
  lazyjit::optim::Adam opt(model.parameters(), {.lr = kLearningRate});
  std::printf("model: Conv2d(1, 16, 3, padding 1) relu MaxPool2d(2) Conv2d(16, 32, 3, padding 1) relu MaxPool2d(2) "
              "Linear(128, 10); Adam lr %g; batch %lld; %d epochs\n\n",
              kLearningRate, static_cast<long long>(options.batch), options.epochs);

  return digits::train_and_report([&](const Tensor& x) { return model(x); }, opt, data, split, options);
}

}  // namespace

int main(int argc, char** argv) { return digits::run_main(argc, argv, "digits_cnn", train_and_evaluate); }

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

  const digits::Forward forward = [&](const Tensor& x) { return model(x); };
  const digits::TrainingRun run = digits::train(forward, opt, data, split.train, options);
  const double accuracy = digits::test_accuracy(forward, data, split.test);
  std::printf("\ntest accuracy %.2f%%   training %.2f s (%lld steps)\n\n", accuracy * 100, run.seconds,
              static_cast<long long>(run.steps));
  std::printf("%s\n", lazyjit::metrics_report().c_str());
  const bool ok = digits::print_checks(run, accuracy, static_cast<int64_t>(opt.params().size()),
                                       static_cast<int64_t>(opt.state().size()), options.min_accuracy);
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) { return digits::run_main(argc, argv, "digits_mlp", train_and_evaluate); }

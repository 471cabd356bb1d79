// The main job: a two-layer MLP trained on the sklearn handwritten digits (a fixed split of
// 1437 training and 360 test images) in PyTorch's style: forward, backward, Adam step,
// mark_step. Prints the loss per epoch, the test accuracy, lazyjit's metrics and checks of what
// the step barrier promises (no recompiles, every update in place); exits 1 if one fails or the
// test accuracy is below 95%.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <lazyjit/lazyjit.h>

#include "digits_data.h"

using lazyjit::Tensor;

namespace {

constexpr uint64_t kSplitSeed = 0x5eed0001;
constexpr uint64_t kOrderSeed = 0x5eed0002;
constexpr uint64_t kHiddenSeed = 1;
constexpr uint64_t kOutputSeed = 2;
constexpr int64_t kHidden = 128;
constexpr int64_t kBatch = 64;
constexpr int kEpochs = 15;
constexpr double kLearningRate = 1e-2;
constexpr double kMinAccuracy = 0.95;

/// splitmix64 (Steele, Lea and Flood). Written out because std::shuffle's output is
/// implementation-defined: the split and the batch order must be the same on every machine.
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}

  uint64_t next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  /// In [0, bound), by Lemire's multiply-shift (its bias, under bound / 2^64, is immaterial here).
  uint64_t below(uint64_t bound) { return static_cast<uint64_t>((static_cast<unsigned __int128>(next()) * bound) >> 64); }

 private:
  uint64_t state_;
};

/// Fisher-Yates.
void shuffle(std::vector<int64_t>& items, SplitMix64& rng) {
  for (size_t i = items.size(); i > 1; --i) std::swap(items[i - 1], items[rng.below(i)]);
}

std::vector<int64_t> iota(int64_t n) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = i;
  return v;
}

struct Batch {
  Tensor x;  ///< [n, 64] float32
  Tensor y;  ///< [n] int64
};

Batch gather(const DigitsData& data, std::span<const int64_t> rows) {
  const int64_t n = static_cast<int64_t>(rows.size());
  std::vector<float> x;
  std::vector<int64_t> y;
  x.reserve(static_cast<size_t>(n * DigitsData::kPixels));
  y.reserve(rows.size());
  for (int64_t row : rows) {
    auto pixels = data.pixels.begin() + row * DigitsData::kPixels;
    x.insert(x.end(), pixels, pixels + DigitsData::kPixels);
    y.push_back(data.labels[row]);
  }
  return {Tensor::from_vector(x, {n, DigitsData::kPixels}), Tensor::from_vector(y, {n})};
}

/// [begin, end) of each batch: kBatch rows, then a shorter last one. Sizes are runtime values,
/// so a short batch reuses the step's compiled graph, but a dim of size 1 is a broadcast in the
/// graph's structure: a one-row remainder joins the batch before it instead.
std::vector<std::pair<int64_t, int64_t>> batch_bounds(int64_t rows) {
  std::vector<std::pair<int64_t, int64_t>> bounds;
  for (int64_t begin = 0; begin < rows;) {
    int64_t end = std::min(begin + kBatch, rows);
    if (rows - end == 1) end = rows;
    bounds.emplace_back(begin, end);
    begin = end;
  }
  return bounds;
}

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

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

/// The counters the checks read, as differences between two snapshots.
struct Counters {
  int64_t graphs_executed = 0;
  int64_t compiles = 0;
  int64_t cache_hits = 0;
  int64_t donations = 0;
  int64_t bytes_allocated = 0;
};

Counters since(const lazyjit::Metrics& before) {
  const lazyjit::Metrics now = lazyjit::metrics();
  return {now.graphs_executed - before.graphs_executed, now.compiles - before.compiles,
          now.cache_hits - before.cache_hits, now.donations - before.donations,
          now.bytes_allocated - before.bytes_allocated};
}

struct Split {
  std::vector<int64_t> train, test;
};

/// 80% of a seeded permutation of the rows for training, the rest for testing.
Split fixed_split(int64_t rows) {
  std::vector<int64_t> order = iota(rows);
  SplitMix64 rng(kSplitSeed);
  shuffle(order, rng);
  const auto middle = order.begin() + rows * 4 / 5;
  return {std::vector<int64_t>(order.begin(), middle), std::vector<int64_t>(middle, order.end())};
}

struct TrainingRun {
  int64_t steps = 0;
  double seconds = 0;
  Counters total;        ///< over the whole loop
  Counters steady_step;  ///< over the first step of the last epoch, loss read back included
};

/// Trains `model` on the rows `train` for kEpochs, printing the mean loss of each epoch.
TrainingRun train(const Mlp& model, lazyjit::optim::Optimizer& opt, const DigitsData& data,
                  std::vector<int64_t> train) {
  const std::vector<std::pair<int64_t, int64_t>> bounds = batch_bounds(static_cast<int64_t>(train.size()));
  SplitMix64 order_rng(kOrderSeed);
  TrainingRun run;
  // The graphs that initialised the parameters ran at once on tier 0 and compile in the
  // background (LAZYJIT_TIER=auto): let them finish, so that the counts below are the loop's.
  lazyjit::wait_for_compiles();
  const lazyjit::Metrics before_training = lazyjit::metrics();
  const auto training_start = std::chrono::steady_clock::now();
  for (int epoch = 1; epoch <= kEpochs; ++epoch) {
    const auto epoch_start = std::chrono::steady_clock::now();
    shuffle(train, order_rng);
    double loss_sum = 0;
    for (auto [begin, end] : bounds) {
      const bool measured = epoch == kEpochs && begin == 0;  // a steady step: everything compiled
      const lazyjit::Metrics before_step = measured ? lazyjit::metrics() : lazyjit::Metrics{};
      Batch batch = gather(data, std::span(train).subspan(begin, end - begin));
      Tensor loss = lazyjit::nn::cross_entropy(model(batch.x), batch.y);
      loss.backward();
      opt.step();
      opt.zero_grad();
      lazyjit::mark_step();
      loss_sum += loss.item<float>() * static_cast<double>(end - begin);  // materialised by mark_step
      if (measured) run.steady_step = since(before_step);
      ++run.steps;
    }
    std::printf("epoch %2d  train loss %.4f  %6.1f ms\n", epoch, loss_sum / static_cast<double>(train.size()),
                seconds_since(epoch_start) * 1e3);
  }
  run.seconds = seconds_since(training_start);
  run.total = since(before_training);
  return run;
}

/// The fraction of the rows `test` whose argmax of the logits is the label, in one forward pass.
double test_accuracy(const Mlp& model, const DigitsData& data, const std::vector<int64_t>& test) {
  Batch batch = gather(data, test);
  Tensor hits = lazyjit::eq(lazyjit::argmax(model(batch.x), 1), batch.y).to(lazyjit::DType::Int64);
  return static_cast<double>(lazyjit::sum(hits).item<int64_t>()) / static_cast<double>(test.size());
}

/// Prints one line per promise this program checks; returns whether all hold.
bool print_checks(const TrainingRun& run, double accuracy, int64_t params, int64_t state_buffers) {
  const Counters& step = run.steady_step;
  // Each distinct graph of a step compiles once; every later step is a cache hit.
  const bool compiled_once = run.total.compiles <= step.graphs_executed;
  // At each mark_step every parameter and optimizer state buffer is updated in its own buffer.
  const bool donated = step.donations == params + state_buffers;
  const bool accurate = accuracy >= kMinAccuracy;
  auto verdict = [](bool ok) { return ok ? "ok" : "FAILED"; };
  std::printf("checks:\n");
  std::printf("  test accuracy %.2f%% >= %.0f%%: %s\n", accuracy * 100, kMinAccuracy * 100, verdict(accurate));
  std::printf("  %lld steps of %lld graph(s): %lld compile(s), %lld cache hits: %s\n",
              static_cast<long long>(run.steps), static_cast<long long>(step.graphs_executed),
              static_cast<long long>(run.total.compiles), static_cast<long long>(run.total.cache_hits),
              verdict(compiled_once));
  std::printf("  %lld donations per step = %lld parameters + %lld Adam state buffers: %s\n",
              static_cast<long long>(step.donations), static_cast<long long>(params),
              static_cast<long long>(state_buffers), verdict(donated));
  std::printf("  %lld bytes freshly allocated per step (the rest is reused from the pool)\n",
              static_cast<long long>(step.bytes_allocated));
  return accurate && compiled_once && donated;
}

/// Trains, evaluates and prints; returns the exit code.
int train_and_evaluate(const DigitsData& data) {
  const Split split = fixed_split(data.rows());
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
              static_cast<long long>(kBatch), kEpochs);

  const TrainingRun run = train(model, opt, data, split.train);
  const double accuracy = test_accuracy(model, data, split.test);
  std::printf("\ntest accuracy %.2f%%   training %.2f s (%lld steps)\n\n", accuracy * 100, run.seconds,
              static_cast<long long>(run.steps));
  std::printf("%s\n", lazyjit::metrics_report().c_str());
  const bool ok = print_checks(run, accuracy, static_cast<int64_t>(opt.params().size()),
                               static_cast<int64_t>(opt.state().size()));
  return ok ? 0 : 1;
}

void print_missing_data_help() {
  std::fputs("The digits data set ships with Debian's python3-sklearn package: install it with\n"
             "  sudo apt-get install python3-sklearn    (or: bash scripts/setup.sh)\n"
             "or pass the path of a copy of digits.csv.gz with --data=PATH.\n",
             stderr);
}

}  // namespace

int main(int argc, char** argv) {
  std::string path = kDefaultDigitsPath;
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg.starts_with("--data=")) {
      path = arg.substr(std::string_view("--data=").size());
    } else {
      std::fprintf(stderr, "usage: digits_mlp [--data=PATH]   (default: %s)\n", kDefaultDigitsPath);
      return 2;
    }
  }

  DigitsData data;
  try {
    data = load_digits(path);
  } catch (const DigitsError& e) {
    std::fprintf(stderr, "digits_mlp: %s\n", e.what());
    if (e.missing()) print_missing_data_help();
    return 2;
  }

  try {
    return train_and_evaluate(data);
  } catch (const lazyjit::Error& e) {
    std::fprintf(stderr, "digits_mlp: %s\n", e.what());
    return 1;
  }
}

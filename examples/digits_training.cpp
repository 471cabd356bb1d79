// The digits examples' shared training loop and checks (digits_training.h).
#include "digits_training.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string_view>

namespace digits {
namespace {

constexpr uint64_t kSplitSeed = 0x5eed0001;
constexpr uint64_t kOrderSeed = 0x5eed0002;

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

/// [begin, end) of each batch: `batch` rows, then a shorter last one. Sizes are runtime values,
/// so a short batch reuses the step's compiled graph, but a dim of size 1 is a broadcast in the
/// graph's structure: a one-row remainder joins the batch before it instead.
std::vector<std::pair<int64_t, int64_t>> batch_bounds(int64_t rows, int64_t batch) {
  std::vector<std::pair<int64_t, int64_t>> bounds;
  for (int64_t begin = 0; begin < rows;) {
    int64_t end = std::min(begin + batch, rows);
    if (rows - end == 1) end = rows;
    bounds.emplace_back(begin, end);
    begin = end;
  }
  return bounds;
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

Counters since(const lazyjit::Metrics& before) {
  const lazyjit::Metrics now = lazyjit::metrics();
  return {now.graphs_executed - before.graphs_executed, now.compiles - before.compiles,
          now.cache_hits - before.cache_hits, now.donations - before.donations,
          now.bytes_allocated - before.bytes_allocated};
}

void print_missing_data_help() {
  std::fputs("The digits data set ships with Debian's python3-sklearn package: install it with\n"
             "  sudo apt-get install python3-sklearn    (or: bash scripts/setup.sh)\n"
             "or pass the path of a copy of digits.csv.gz with --data=PATH.\n",
             stderr);
}

}  // namespace

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

Split fixed_split(int64_t rows) {
  std::vector<int64_t> order = iota(rows);
  SplitMix64 rng(kSplitSeed);
  shuffle(order, rng);
  const auto middle = order.begin() + rows * 4 / 5;
  return {std::vector<int64_t>(order.begin(), middle), std::vector<int64_t>(middle, order.end())};
}

TrainingRun train(const Forward& model, lazyjit::optim::Optimizer& opt, const DigitsData& data,
                  std::vector<int64_t> train, const Options& options) {
  const std::vector<std::pair<int64_t, int64_t>> bounds = batch_bounds(static_cast<int64_t>(train.size()), options.batch);
  SplitMix64 order_rng(kOrderSeed);
  TrainingRun run;
  // Any compile still in the background (LAZYJIT_TIER=auto compiles a graph from its second
  // run) finishes first, so that the counts below are the loop's.
  lazyjit::wait_for_compiles();
  const lazyjit::Metrics before_training = lazyjit::metrics();
  const auto training_start = std::chrono::steady_clock::now();
  for (int epoch = 1; epoch <= options.epochs; ++epoch) {
    const auto epoch_start = std::chrono::steady_clock::now();
    shuffle(train, order_rng);
    double loss_sum = 0;
    for (auto [begin, end] : bounds) {
      const bool measured = epoch == options.epochs && begin == 0;  // a steady step: everything compiled
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

double test_accuracy(const Forward& model, const DigitsData& data, const std::vector<int64_t>& test) {
  Batch batch = gather(data, test);
  Tensor hits = lazyjit::eq(lazyjit::argmax(model(batch.x), 1), batch.y).to(lazyjit::DType::Int64);
  return static_cast<double>(lazyjit::sum(hits).item<int64_t>()) / static_cast<double>(test.size());
}

bool print_checks(const TrainingRun& run, double accuracy, int64_t params, int64_t state_buffers, double min_accuracy) {
  const Counters& step = run.steady_step;
  // Each distinct graph of a step compiles once; every later step is a cache hit.
  const bool compiled_once = run.total.compiles <= step.graphs_executed;
  // At each mark_step every parameter and optimizer state buffer is updated in its own buffer.
  const bool donated = step.donations == params + state_buffers;
  const bool accurate = accuracy >= min_accuracy;
  auto verdict = [](bool ok) { return ok ? "ok" : "FAILED"; };
  std::printf("checks:\n");
  std::printf("  test accuracy %.2f%% >= %.0f%%: %s\n", accuracy * 100, min_accuracy * 100, verdict(accurate));
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

int train_and_report(const Forward& model, lazyjit::optim::Adam& opt, const DigitsData& data, const Split& split,
                     const Options& options) {
  const TrainingRun run = train(model, opt, data, split.train, options);
  const double accuracy = test_accuracy(model, data, split.test);
  std::printf("\ntest accuracy %.2f%%   training %.2f s (%lld steps)\n\n", accuracy * 100, run.seconds,
              static_cast<long long>(run.steps));
  std::printf("%s\n", lazyjit::metrics_report().c_str());
  const bool ok = print_checks(run, accuracy, static_cast<int64_t>(opt.params().size()),
                               static_cast<int64_t>(opt.state().size()), options.min_accuracy);
  return ok ? 0 : 1;
}

int run_main(int argc, char** argv, const char* program, const std::function<int(const DigitsData&)>& body) {
  std::string path = kDefaultDigitsPath;
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg.starts_with("--data=")) {
      path = arg.substr(std::string_view("--data=").size());
    } else {
      std::fprintf(stderr, "usage: %s [--data=PATH]   (default: %s)\n", program, kDefaultDigitsPath);
      return 2;
    }
  }

  DigitsData data;
  try {
    data = load_digits(path);
  } catch (const DigitsError& e) {
    std::fprintf(stderr, "%s: %s\n", program, e.what());
    if (e.missing()) print_missing_data_help();
    return 2;
  }

  try {
    return body(data);
  } catch (const lazyjit::Error& e) {
    std::fprintf(stderr, "%s: %s\n", program, e.what());
    return 1;
  }
}

}  // namespace digits

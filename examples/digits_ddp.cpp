// Data-parallel training of the digits MLP over MPI (lazyjit::dist), in the habit of PyTorch's
// DistributedDataParallel: started as `mpirun -np N digits_ddp` (or alone: a world of one).
// Each epoch every rank takes its shard of the training rows (nn::shard_indices), each step
// its batch of 64 / N of them; nn::DataParallel gives every rank rank 0's initial weights and
// averages the gradients over the ranks before the Adam step. Rank 0 prints the loss, the test
// accuracy and lazyjit's counters; exits 1 below 95%.
//
//   --steps=K   stop after K steps (default: 15 epochs)
//   --bucket-kb=N  gradients per all_reduce (DataParallel's bucket, default 25 MB)
//   --check     also check, after every step, that the parameters are bitwise equal on every
//               rank; and train beside it, on every rank, one model without collectives on
//               the concatenated batches of all ranks: after the last step the two agree
//               within float32 reduction-order tolerance.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include <lazyjit/dist.h>
#include <lazyjit/lazyjit.h>

#include "digits_training.h"

using lazyjit::Tensor;
namespace dist = lazyjit::dist;
namespace nn = lazyjit::nn;

namespace {

constexpr int64_t kHidden = 128;
constexpr int64_t kGlobalBatch = 64;
constexpr double kLearningRate = 1e-2;
constexpr int kEpochs = 15;

struct Mlp {
  explicit Mlp(uint64_t seed) : hidden(DigitsData::kPixels, kHidden, seed), output(kHidden, DigitsData::kClasses, seed + 1) {}
  Tensor operator()(const Tensor& x) const { return output(lazyjit::relu(hidden(x))); }
  std::vector<Tensor> parameters() const { return {hidden.weight, hidden.bias, output.weight, output.bias}; }

  nn::Linear hidden, output;
};

struct Options {
  int64_t steps = -1;
  bool check = false;
  int64_t bucket_bytes = int64_t{25} << 20;
  std::string data = kDefaultDigitsPath;
};

/// Whether every rank holds the same bytes in each of `params` (one all_gather per tensor).
bool equal_on_all_ranks(const std::vector<Tensor>& params) {
  std::vector<Tensor> gathered;
  for (const Tensor& p : params) gathered.push_back(dist::all_gather(lazyjit::reshape(p, {1, -1}), 0));
  lazyjit::sync(gathered);
  for (const Tensor& g : gathered) {
    const std::vector<float> values = g.to_vector<float>();
    const size_t n = values.size() / static_cast<size_t>(dist::world_size());
    for (int r = 1; r < dist::world_size(); ++r) {
      if (std::memcmp(values.data(), values.data() + r * n, n * sizeof(float)) != 0) return false;
    }
  }
  return true;
}

/// The largest difference between `a` and `b`, relative to b's largest magnitude.
double relative_difference(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const std::vector<float> x = a[i].to_vector<float>(), y = b[i].to_vector<float>();
    double scale = 1e-6, diff = 0;
    for (size_t j = 0; j < x.size(); ++j) {
      scale = std::max(scale, std::fabs(double{y[j]}));
      diff = std::max(diff, std::fabs(double{x[j]} - y[j]));
    }
    worst = std::max(worst, diff / scale);
  }
  return worst;
}

int train(const DigitsData& data, const Options& options) {
  const int rank = dist::rank(), world = dist::world_size();
  if (kGlobalBatch % world != 0) {
    std::fprintf(stderr, "digits_ddp: the global batch %lld does not split over %d ranks\n", static_cast<long long>(kGlobalBatch), world);
    return 2;
  }
  const int64_t local_batch = kGlobalBatch / world;
  const digits::Split split = digits::fixed_split(data.rows());
  const int64_t train_rows = static_cast<int64_t>(split.train.size());
  // Different seeds on every rank: DataParallel's broadcast makes the models equal.
  Mlp model(100 + static_cast<uint64_t>(rank) * 10);
  nn::DataParallel ddp(model.parameters(), options.bucket_bytes);
  lazyjit::optim::Adam opt(model.parameters(), {.lr = kLearningRate});
  Mlp reference(100);  // --check: rank 0's initial weights, trained on the whole global batch
  lazyjit::optim::Adam reference_opt(reference.parameters(), {.lr = kLearningRate});
  if (rank == 0) {
    std::printf("digits_ddp: %d rank%s, a batch of %lld per rank (%lld in all), %lld training rows\n", world,
                world == 1 ? "" : "s", static_cast<long long>(local_batch), static_cast<long long>(kGlobalBatch),
                static_cast<long long>(train_rows));
  }

  const int64_t steps_per_epoch = (train_rows + world - 1) / world / local_batch;
  int64_t step = 0;
  bool equal = true;
  const lazyjit::Metrics before = lazyjit::metrics();
  for (int epoch = 0; epoch < kEpochs && step != options.steps; ++epoch) {
    std::vector<std::vector<int64_t>> shards;  // every rank's, for the reference's batches
    for (int r = 0; r < world; ++r) {
      std::vector<int64_t> shard = nn::shard_indices(train_rows, r, world, static_cast<uint64_t>(epoch), true, 7);
      for (int64_t& i : shard) i = split.train[static_cast<size_t>(i)];
      shards.push_back(std::move(shard));
    }
    double loss_sum = 0;
    for (int64_t s = 0; s < steps_per_epoch && step != options.steps; ++s, ++step) {
      auto rows_of = [&](int r) { return std::span(shards[static_cast<size_t>(r)]).subspan(static_cast<size_t>(s * local_batch), static_cast<size_t>(local_batch)); };
      const digits::Batch batch = digits::gather(data, rows_of(rank));
      const Tensor loss = nn::cross_entropy(model(batch.x), batch.y);
      opt.step(ddp.average(lazyjit::grad(loss, model.parameters())));
      if (options.check) {
        std::vector<int64_t> all;
        for (int r = 0; r < world; ++r) all.insert(all.end(), rows_of(r).begin(), rows_of(r).end());
        const digits::Batch whole = digits::gather(data, all);
        reference_opt.step(lazyjit::grad(nn::cross_entropy(reference(whole.x), whole.y), reference.parameters()));
      }
      lazyjit::mark_step();
      loss_sum += static_cast<double>(dist::all_reduce(loss, dist::ReduceOp::Mean).item<float>());
      if (options.check && !equal_on_all_ranks(model.parameters())) {
        std::fprintf(stderr, "digits_ddp: rank %d: the parameters differ across ranks after step %lld\n", rank,
                     static_cast<long long>(step + 1));
        equal = false;
      }
    }
    if (rank == 0) std::printf("epoch %2d  train loss %.4f\n", epoch + 1, loss_sum / static_cast<double>(steps_per_epoch));
  }
  const lazyjit::Metrics after = lazyjit::metrics();

  const double accuracy = digits::test_accuracy([&](const Tensor& x) { return model(x); }, data, split.test);
  int code = 0;
  if (rank == 0) {
    std::printf("\n%lld steps on %d rank%s; test accuracy %.2f%%\n", static_cast<long long>(step), world, world == 1 ? "" : "s",
                accuracy * 100);
    std::printf("compiles %lld, graphs run %lld, donations %lld\n", static_cast<long long>(after.compiles - before.compiles),
                static_cast<long long>(after.graphs_executed - before.graphs_executed),
                static_cast<long long>(after.donations - before.donations));
    const double under_way = after.collective_seconds - before.collective_seconds;
    const double waited = after.collective_wait_seconds - before.collective_wait_seconds;
    if (world > 1) std::printf("collectives %lld: %.1f ms under way, kernels waited %.1f ms for them (%.0f%% hidden behind kernels)\n",
                static_cast<long long>(after.collectives - before.collectives), under_way * 1e3, waited * 1e3,
                under_way > 0 ? 100 * (1 - waited / under_way) : 0.0);
  }
  if (options.check) {
    const double difference = relative_difference(model.parameters(), reference.parameters());
    const bool close = difference < 1e-4;
    if (rank == 0) {
      std::printf("check: parameters bitwise equal on every rank after every step: %s\n", equal ? "ok" : "FAILED");
      std::printf("check: against one process on the concatenated batches, largest relative difference %.2e: %s\n",
                  difference, close ? "ok" : "FAILED");
    }
    if (!equal || !close) code = 1;
  } else if (options.steps < 0 && accuracy < 0.95) {
    if (rank == 0) std::printf("FAILED: test accuracy below 95%%\n");
    code = 1;
  }
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg.starts_with("--steps=")) {
      options.steps = std::stoll(std::string(arg.substr(8)));
    } else if (arg.starts_with("--bucket-kb=")) {
      options.bucket_bytes = std::stoll(std::string(arg.substr(12))) * 1024;
    } else if (arg == "--check") {
      options.check = true;
    } else if (arg.starts_with("--data=")) {
      options.data = std::string(arg.substr(7));
    } else {
      std::fprintf(stderr, "usage: [mpirun -np N] digits_ddp [--steps=K] [--bucket-kb=N] [--check] [--data=PATH]\n");
      return 2;
    }
  }
  try {
    dist::init();
    const DigitsData data = load_digits(options.data);
    const int code = train(data, options);
    dist::finalize();
    return code;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "digits_ddp: rank %d: %s\n", dist::rank(), e.what());
    return 1;
  }
}

// lazyjit-bench-dist: data parallelism over MPI, run as `mpirun -np 2 lazyjit-bench-dist`.
//  1. all_reduce throughput, osu-style: lazyjit's all_reduce (a graph: the staging kernel and
//     the collective) against a plain MPI_Allreduce of the same buffer, 4 KB to 64 MB.
//  2. The MLP step (784-512-512-10, relu, cross-entropy, SGD; 128 rows per rank) with its
//     gradients averaged by nn::DataParallel in buckets of several sizes, against the same
//     step without collectives: the step time and the share of the all-reduce time hidden
//     behind backward kernels (1 - time kernels waited / time under way).
// Medians of repeated timings; rank 0 prints. The ranks share this machine's cores.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include <lazyjit/dist.h>
#include <lazyjit/lazyjit.h>

namespace {

using lazyjit::Tensor;
namespace dist = lazyjit::dist;
using Clock = std::chrono::steady_clock;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

/// Median seconds of `reps` calls of `f`, each started together on every rank (a barrier).
template <class F>
double timed(int reps, F f) {
  std::vector<double> times;
  for (int i = 0; i < reps; ++i) {
    MPI_Barrier(MPI_COMM_WORLD);
    const Clock::time_point start = Clock::now();
    f();
    times.push_back(seconds_since(start));
  }
  double local = median(times), slowest = 0;
  MPI_Allreduce(&local, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return slowest;
}

void all_reduce_throughput() {
  if (dist::rank() == 0) {
    std::printf("all_reduce of float32, %d ranks: median time and bandwidth (bytes / time)\n", dist::world_size());
    std::printf("%10s %14s %14s %14s %14s %8s\n", "bytes", "lazyjit", "MPI_Allreduce", "lazyjit GB/s", "MPI GB/s", "ratio");
  }
  for (int64_t bytes = 4 << 10; bytes <= int64_t{64} << 20; bytes *= 4) {
    const int64_t n = bytes / 4;
    const int reps = bytes <= (1 << 20) ? 200 : bytes <= (16 << 20) ? 30 : 10;
    const Tensor x = lazyjit::full({n}, 1.0f + static_cast<float>(dist::rank()));
    lazyjit::sync({dist::all_reduce(x)});  // compiled and cached before timing
    const double ours = timed(reps, [&] { lazyjit::sync({dist::all_reduce(x)}); });
    std::vector<float> in(static_cast<size_t>(n), 1.0f), out(static_cast<size_t>(n));
    const double theirs = timed(reps, [&] {
      MPI_Allreduce(in.data(), out.data(), static_cast<int>(n), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    });
    if (dist::rank() == 0) {
      std::printf("%10lld %11.3f ms %11.3f ms %14.2f %14.2f %7.2fx\n", static_cast<long long>(bytes), ours * 1e3,
                  theirs * 1e3, static_cast<double>(bytes) / ours / 1e9, static_cast<double>(bytes) / theirs / 1e9,
                  ours / theirs);
    }
  }
}

struct Mlp {
  lazyjit::nn::Linear l1{784, 512, 1}, l2{512, 512, 2}, l3{512, 10, 3};
  Tensor operator()(const Tensor& x) const { return l3(lazyjit::relu(l2(lazyjit::relu(l1(x))))); }
  std::vector<Tensor> parameters() const { return {l1.weight, l1.bias, l2.weight, l2.bias, l3.weight, l3.bias}; }
};

/// bucket_bytes 0: no collectives (every rank trains alone).
void mlp_step(int64_t bucket_bytes, const char* label) {
  Mlp model;
  const std::vector<Tensor> params = model.parameters();
  lazyjit::nn::DataParallel ddp(params, bucket_bytes > 0 ? bucket_bytes : 1);
  lazyjit::optim::SGD opt(params, {.lr = 0.05});
  lazyjit::sync(params);
  std::vector<float> xs(128 * 784);
  for (size_t i = 0; i < xs.size(); ++i) xs[i] = static_cast<float>((i * 7 + static_cast<size_t>(dist::rank())) % 13) / 13.0f;
  std::vector<int64_t> ys(128);
  for (size_t i = 0; i < ys.size(); ++i) ys[i] = static_cast<int64_t>((i * 3) % 10);
  const Tensor x = Tensor::from_vector(xs, {128, 784}), y = Tensor::from_vector(ys, {128});
  auto step = [&] {
    std::vector<Tensor> grads = lazyjit::grad(lazyjit::nn::cross_entropy(model(x), y), params);
    opt.step(bucket_bytes > 0 ? ddp.average(grads) : grads);
    lazyjit::mark_step();
  };
  for (int i = 0; i < 5; ++i) step();
  lazyjit::wait_for_compiles();
  for (int i = 0; i < 3; ++i) step();
  const lazyjit::Metrics before = lazyjit::metrics();
  const int reps = 40;
  const double time = timed(reps, step);
  const lazyjit::Metrics after = lazyjit::metrics();
  const double under_way = (after.collective_seconds - before.collective_seconds) / reps;
  const double waited = (after.collective_wait_seconds - before.collective_wait_seconds) / reps;
  if (dist::rank() == 0) {
    std::printf("%-28s %8.2f ms %6lld %10.2f ms %10.2f ms %8.0f%%\n", label, time * 1e3,
                static_cast<long long>((after.collectives - before.collectives) / reps), under_way * 1e3, waited * 1e3,
                under_way > 0 ? 100 * (1 - waited / under_way) : 0.0);
  }
}

}  // namespace

int main() {
  dist::init();
  if (!dist::initialized()) {
    std::fprintf(stderr, "lazyjit-bench-dist: start it with mpirun (e.g. mpirun -np 2 lazyjit-bench-dist)\n");
    return 2;
  }
  all_reduce_throughput();
  if (dist::rank() == 0) {
    std::printf("\nMLP 784-512-512-10 step, 128 rows per rank (%d ranks), SGD\n", dist::world_size());
    std::printf("%-28s %11s %6s %13s %13s %9s\n", "gradients", "step", "colls", "under way", "waited", "hidden");
  }
  mlp_step(0, "not averaged (no collective)");
  mlp_step(int64_t{25} << 20, "one bucket (25 MB)");
  mlp_step(int64_t{1} << 20, "1 MB buckets");
  mlp_step(1, "a bucket per parameter");
  dist::finalize();
  return 0;
}

// The collective ops in a world of one (no lazyjit::dist::init): each traces a node, runs as a
// collective kernel that stages its operand, and gives its operand back; data parallelism's
// helpers on top. The multi-process behaviour: test/dist (under mpirun).
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>

#include "fmt/format.h"
#include "ir/parser.h"
#include "lazyjit/lazyjit.h"
#include "op_checks.h"

namespace lazyjit {
namespace {

using dist::ReduceOp;

TEST(CollectivesTest, AWorldOfOneWithoutInit) {
  EXPECT_EQ(dist::rank(), 0);
  EXPECT_EQ(dist::world_size(), 1);
}

TEST(CollectivesTest, EachGivesItsOperandBackInAWorldOfOne) {
  std::mt19937 rng(61);
  for (DType dtype : kNumeric) {
    const Tensor x = random_tensor(rng, {3, 5}, dtype);
    const std::vector<double> want = x.to(DType::Float64).to_vector<double>();
    for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min}) {
      expect_matches(dist::all_reduce(x, op), fmt::format("all_reduce {}", dtype_name(dtype)));
    }
    expect_matches(dist::broadcast(x, 0), "broadcast");
    expect_matches(dist::all_gather(x, 1), "all_gather");
    expect_matches(dist::reduce_scatter(x, -1), "reduce_scatter");
    EXPECT_EQ(dist::all_gather(x, 0).to(DType::Float64).to_vector<double>(), want);
  }
  const Tensor flags = Tensor::from_vector<bool>({true, false, true}, {3});
  EXPECT_EQ(dist::broadcast(flags).to_vector<bool>(), (std::vector<bool>{true, false, true}));
  EXPECT_EQ(dist::all_reduce(Tensor::from_vector<float>({1, 2}, {2}), ReduceOp::Mean).to_vector<float>(),
            (std::vector<float>{1, 2}));
}

TEST(CollectivesTest, AKernelStagesTheOperandItComputesAndLaterKernelsReadTheResult) {
  std::mt19937 rng(62);
  const Tensor x = random_tensor(rng, {4, 6}, DType::Float32);
  const Tensor w = random_tensor(rng, {6, 3}, DType::Float32);
  const Metrics before = metrics();
  // exp and the scaling fuse into the kernel that stages all_reduce's operand; the product
  // reads the collective's buffer; the gather's operand is staged apart from its result.
  const Tensor y = dist::all_gather(matmul(dist::all_reduce(exp(x) * 2.0), w) + 1.0, 1);
  expect_matches(y, "collectives between kernels", 6);
  // Staging (exp, scaling), packing w, the product, staging (+ 1), and the result (the gather
  // along dim 1 is one along dim 0 between two permutes: the last is the result's copy).
  EXPECT_EQ(metrics().kernels_launched - before.kernels_launched, 5);
}

TEST(CollectivesTest, CollectivesAreInTheKeyAndCachedLikeAnyOp) {
  const Tensor x = Tensor::from_vector<float>({1, 2, 3}, {3});
  const int64_t compiles = metrics().compiles;
  for (int i = 0; i < 3; ++i) EXPECT_EQ((dist::all_reduce(x) * 2.0).to_vector<float>(), (std::vector<float>{2, 4, 6}));
  EXPECT_LE(metrics().compiles - compiles, 1);
  const Metrics before = metrics();
  (x * 2.0).to_vector<float>();  // the same graph without the collective: another key
  EXPECT_EQ(metrics().cache_hits - before.cache_hits, 0);
}

TEST(CollectivesTest, ErrorsNameTheCollectiveAndTheValues) {
  const Tensor x = Tensor::from_vector<float>({1, 2, 3, 4}, {2, 2});
  expect_error([&] { dist::broadcast(x, 1); }, "broadcast: root 1 is not a rank of this world of 1");
  expect_error([&] { dist::broadcast(x, -1); }, "broadcast: root -1 is not a rank of this world of 1");
  expect_error([&] { dist::all_gather(x, 2); }, "all_gather: dim 2 is out of range for a tensor of rank 2 (expected -2 to 1)");
  expect_error([&] { dist::all_gather(Tensor::from_vector<float>({1}, {})); },
               "all_gather: expected a tensor of rank 1 or more, got a scalar");
  expect_error([&] { dist::reduce_scatter(Tensor::from_vector<float>({1}, {}), 0); },
               "reduce_scatter: expected a tensor of rank 1 or more, got a scalar");
  expect_error([&] { dist::all_reduce(Tensor::from_vector<int64_t>({1, 2}, {2}), ReduceOp::Mean); },
               "all_reduce: mean takes a floating tensor, got int64");
  expect_error([&] { dist::all_reduce(Tensor::from_vector<bool>({true}, {1})); },
               "all_reduce: bool operands are not supported");
  expect_error([&] { dist::all_reduce(Tensor()); }, "all_reduce: an operand is an undefined tensor");
}

TEST(CollectivesTest, AGraphTracedInALargerWorldFailsInAWorldOfOne) {
  // all_gather over 2 ranks, parsed: its result is twice its operand along dim 0.
  absl::StatusOr<ir::ParsedGraph> parsed = ir::parse_graph(
      "graph {\n  %0 = parameter 0 : float32[2,3]\n  %1 = all_gather[2] %0 : float32[4,3]\n  return %1\n}\n");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  expect_error([&] { ir::interpret(ir::build_graph(parsed->roots)); },
               "all_gather: traced in a world of more than one process, run in a world of one (no lazyjit::dist::init)");
}

TEST(CollectivesTest, GradientsFlowThroughTheAdjointCollectives) {
  Tensor x = Tensor::from_vector<float>({1, 5, 2, 4}, {2, 2});
  x.requires_grad_();
  const Tensor w = Tensor::from_vector<float>({1, 2, 3, 4}, {2, 2});
  // In a world of one every collective is the identity, and so is its gradient.
  const std::vector<Tensor> g = grad(sum(dist::all_reduce(x) * w) + sum(dist::all_gather(x, 1) * w) +
                                         sum(dist::broadcast(x) * w) + sum(dist::reduce_scatter(x) * w),
                                     {x});
  EXPECT_EQ(g[0].to_vector<float>(), (std::vector<float>{4, 8, 12, 16}));
  expect_error([&] { grad(sum(dist::reduce_scatter(x, 0, ReduceOp::Max)), {x}); },
               "reduce_scatter: no gradient through a max reduction");
}

TEST(DataParallelTest, InAWorldOfOneTheMeanIsTheGradient) {
  std::mt19937 rng(63);
  std::vector<Tensor> params = {random_tensor(rng, {4, 3}, DType::Float32), random_tensor(rng, {3}, DType::Float32),
                                random_tensor(rng, {2, 2}, DType::Float64), random_tensor(rng, {5}, DType::Float32)};
  const std::vector<float> p0 = params[0].to_vector<float>();
  nn::DataParallel ddp(params, /*bucket_bytes=*/48);
  EXPECT_EQ(params[0].to_vector<float>(), p0);  // rank 0's own values
  std::vector<Tensor> grads = {random_tensor(rng, {4, 3}, DType::Float32), Tensor(),
                               random_tensor(rng, {2, 2}, DType::Float64), random_tensor(rng, {5}, DType::Float32)};
  const std::vector<Tensor> mean = ddp.average(grads);
  EXPECT_FALSE(mean[1].defined());
  for (size_t i : {0, 2, 3}) {
    EXPECT_EQ(mean[i].shape(), grads[i].shape());
    EXPECT_EQ(mean[i].to(DType::Float64).to_vector<double>(), grads[i].to(DType::Float64).to_vector<double>());
  }
  // Last first; a float64 gradient starts a bucket of its own; 48 bytes hold 12 floats.
  EXPECT_EQ(ddp.buckets(), (std::vector<std::vector<size_t>>{{3}, {2}, {0}}));
  expect_error([&] { ddp.average({grads[0]}); },
               "DataParallel::average: expected 4 gradients (one per parameter), got 1");
}

TEST(DataParallelTest, GradientBucketsRunBesideTheRestOfTheBackwardPass) {
  // A two-layer MLP's step, a bucket per parameter: the last layer's gradients are reduced
  // while the first layer's are computed; the optimizer's kernels wait for them.
  std::mt19937 rng(64);
  nn::Linear hidden(8, 16, 1), output(16, 4, 2);
  std::vector<Tensor> params = {hidden.weight, hidden.bias, output.weight, output.bias};
  nn::DataParallel ddp(params, /*bucket_bytes=*/1);
  optim::SGD opt(params, {.lr = 0.1});
  sync(params);
  const Tensor x = random_tensor(rng, {32, 8}, DType::Float32);
  const Tensor y = Tensor::from_vector<int64_t>(std::vector<int64_t>(32, 1), {32});
  const Metrics before = metrics();
  opt.step(ddp.average(grad(nn::cross_entropy(output(relu(hidden(x))), y), params)));
  mark_step();
  const Metrics after = metrics();
  EXPECT_EQ(ddp.buckets().size(), 4u);
  EXPECT_EQ(after.collectives - before.collectives, 4);
  EXPECT_GE(after.collectives_overlapped - before.collectives_overlapped, 2);
}

TEST(DataParallelTest, ShardsCoverTheDataSetWithEqualCounts) {
  for (int world : {1, 2, 3, 4}) {
    std::multiset<int64_t> seen;
    for (int rank = 0; rank < world; ++rank) {
      const std::vector<int64_t> shard = nn::shard_indices(10, rank, world, /*epoch=*/3);
      EXPECT_EQ(shard.size(), static_cast<size_t>((10 + world - 1) / world));
      seen.insert(shard.begin(), shard.end());
    }
    for (int64_t i = 0; i < 10; ++i) EXPECT_GE(seen.count(i), 1u) << "world " << world << " index " << i;
  }
  EXPECT_EQ(nn::shard_indices(5, 1, 2, 0, /*shuffle=*/false), (std::vector<int64_t>{1, 3, 0}));  // padded by index 0
  EXPECT_NE(nn::shard_indices(100, 0, 2, 0), nn::shard_indices(100, 0, 2, 1));  // a new order each epoch
  expect_error([] { nn::shard_indices(10, 2, 2, 0); }, "shard_indices: rank 2 is not a rank of a world of 2");
}

}  // namespace
}  // namespace lazyjit

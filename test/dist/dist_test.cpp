// The collectives across real processes: run by ctest under `mpirun -np 2` and `-np 4`
// (oversubscribed on small machines). Every rank runs every test; each checks its own result.
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <random>
#include <string>

#include "fmt/format.h"
#include "lazyjit/dist.h"
#include "lazyjit/lazyjit.h"

namespace lazyjit {
namespace {

using dist::ReduceOp;

int world() { return dist::world_size(); }
int me() { return dist::rank(); }

/// [n] with element i = (rank + 1) * (i + 1) / 2.
Tensor ramp(int64_t n) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = static_cast<float>((me() + 1) * (i + 1)) * 0.5f;
  return Tensor::from_vector(v, {n});
}

void expect_error(const std::function<void()>& f, const std::string& message) {
  try {
    f();
    ADD_FAILURE() << "no error, expected: " << message;
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), message);
  }
}

TEST(DistTest, TheJobHasSeveralRanks) {
  EXPECT_TRUE(dist::initialized());
  EXPECT_GE(world(), 2);
  EXPECT_GE(me(), 0);
  EXPECT_LT(me(), world());
}

TEST(DistTest, AllReduceCombinesEveryRanksTensor) {
  const double w = world(), ranks_sum = w * (w + 1) / 2;
  const std::vector<float> sum = dist::all_reduce(ramp(5)).to_vector<float>();
  const std::vector<float> max = dist::all_reduce(ramp(5), ReduceOp::Max).to_vector<float>();
  const std::vector<float> min = dist::all_reduce(ramp(5), ReduceOp::Min).to_vector<float>();
  const std::vector<float> mean = dist::all_reduce(ramp(5), ReduceOp::Mean).to_vector<float>();
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(sum[i], static_cast<float>(ranks_sum * (i + 1) * 0.5));
    EXPECT_EQ(max[i], static_cast<float>(w * (i + 1) * 0.5));
    EXPECT_EQ(min[i], static_cast<float>((i + 1) * 0.5));
    EXPECT_FLOAT_EQ(mean[i], static_cast<float>(ranks_sum / w * (i + 1) * 0.5));
  }
  const Tensor ints = Tensor::from_vector<int64_t>({me(), 10 * me()}, {2});
  EXPECT_EQ(dist::all_reduce(ints).to_vector<int64_t>(),
            (std::vector<int64_t>{world() * (world() - 1) / 2, 10 * world() * (world() - 1) / 2}));
}

TEST(DistTest, ASumIsTheSameBytesOnEveryRank) {
  std::mt19937 rng(static_cast<unsigned>(1000 + me()));
  std::normal_distribution<float> normal;
  std::vector<float> v(100003);  // not a multiple of the world size
  for (float& x : v) x = normal(rng) * 1e3f;
  const Tensor sum = dist::all_reduce(Tensor::from_vector(v, {static_cast<int64_t>(v.size())}));
  const std::vector<float> all = dist::all_gather(reshape(sum, {1, -1}), 0).to_vector<float>();
  for (int r = 1; r < world(); ++r) {
    EXPECT_EQ(std::memcmp(all.data(), all.data() + r * v.size(), v.size() * sizeof(float)), 0) << "rank " << r;
  }
}

TEST(DistTest, BroadcastGatherAndScatter) {
  const int root = world() - 1;
  EXPECT_EQ(dist::broadcast(full({3}, me(), DType::Int32), root).to_vector<int32_t>(), std::vector<int32_t>(3, root));
  const Tensor mine = Tensor::from_vector<float>({10.f * me(), 10.f * me() + 1}, {1, 2});
  std::vector<float> rows, cols;
  for (int r = 0; r < world(); ++r) {
    rows.insert(rows.end(), {10.f * r, 10.f * r + 1});
    cols.push_back(10.f * r);
  }
  for (int r = 0; r < world(); ++r) cols.push_back(10.f * r + 1);
  EXPECT_EQ(dist::all_gather(mine, 0).to_vector<float>(), rows);
  const Tensor by_column = dist::all_gather(reshape(mine, {2, 1}), 1);
  EXPECT_EQ(by_column.shape(), (std::vector<int64_t>{2, world()}));
  EXPECT_EQ(by_column.to_vector<float>(), cols);
  // reduce_scatter: row j of every rank holds rank + j; rank r keeps rows 2r and 2r + 1, summed.
  std::vector<float> v;
  for (int j = 0; j < 2 * world(); ++j) v.insert(v.end(), {static_cast<float>(me() + j), 1.f});
  const Tensor scattered = dist::reduce_scatter(Tensor::from_vector(v, {2 * world(), 2}), 0);
  const float ranks = static_cast<float>(world() * (world() - 1) / 2);
  const float w = static_cast<float>(world());
  EXPECT_EQ(scattered.to_vector<float>(),
            (std::vector<float>{ranks + w * 2 * me(), w, ranks + w * (2 * me() + 1), w}));
}

TEST(DistTest, CollectivesFuseWithTheKernelsAroundThem) {
  const Tensor x = ramp(6);
  const Tensor y = dist::all_reduce(exp(x * 0.1) - 1.0) * 2.0 + sum(dist::all_gather(x * 0.0, 0));
  const std::vector<float> got = y.to_vector<float>();
  for (int i = 0; i < 6; ++i) {
    double want = 0;
    for (int r = 0; r < world(); ++r) want += std::exp(static_cast<float>((r + 1) * (i + 1)) * 0.5f * 0.1f) - 1.0;
    EXPECT_NEAR(got[i], 2 * want, 1e-4 * (2 * want)) << i;
  }
}

TEST(DistTest, MismatchedShapesFailOnEveryRankAndTheJobGoesOn) {
  std::string ranks;
  for (int r = 0; r < world(); ++r) ranks += fmt::format("{}rank {}: float32[{}]", r ? ", " : "", r, r == 0 ? 4 : 5);
  expect_error([] { dist::all_reduce(zeros({me() == 0 ? 4 : 5})).to_vector<float>(); },
               fmt::format("all_reduce: the ranks' tensors differ ({})", ranks));
  std::string ops;
  for (int r = 0; r < world(); ++r) ops += fmt::format("{}rank {}: {} of float32[3]", r ? ", " : "", r, r == 0 ? "all_reduce[0]" : "broadcast[0]");
  expect_error(
      [] {
        const Tensor x = zeros({3});
        (me() == 0 ? dist::all_reduce(x) : dist::broadcast(x, 0)).to_vector<float>();
      },
      fmt::format("{}: the ranks run different collectives ({}): every rank must run the same collectives in the "
                  "same order",
                  me() == 0 ? "all_reduce" : "broadcast", ops));
  EXPECT_EQ(dist::all_reduce(ones({2})).to_vector<float>(), std::vector<float>(2, static_cast<float>(world())));
}

TEST(DistTest, GradientsFlowAcrossRanks) {
  Tensor x = ramp(3);
  x.requires_grad_();
  const Tensor w = full({3}, me() + 1);
  // d/dx_r of sum_s (sum_q x_q) * w_s: every rank's w, summed.
  const std::vector<Tensor> g = grad(sum(dist::all_reduce(x) * w), {x});
  EXPECT_EQ(g[0].to_vector<float>(), std::vector<float>(3, static_cast<float>(world() * (world() + 1) / 2)));
  // all_gather's adjoint: each rank's slice of the ranks' cotangents, summed.
  const std::vector<Tensor> h = grad(sum(dist::all_gather(x, 0) * full({3 * world()}, me() + 1)), {x});
  EXPECT_EQ(h[0].to_vector<float>(), std::vector<float>(3, static_cast<float>(world() * (world() + 1) / 2)));
}

TEST(DistTest, CollectivesStartInTraceOrderWhateverTheRootsOfTheGraph) {
  // Both ranks trace the same two all_reduces; rank 0 also holds a tensor that reads the
  // first one, which puts that one first in the graph there (the others read the second one
  // first). They must still pair up.
  Tensor p0 = full({2}, 10.f), p1 = full({2}, 100.f);
  sync({p0, p1});
  const Tensor r1 = dist::all_reduce(full({2}, 1.f + me()));
  const Tensor r0 = dist::all_reduce(full({2}, 2.f * (1 + me())));
  p0.copy_(p0 - r0);
  p1.copy_(p1 - r1);
  if (me() == 0) {
    sync({sum(r1 * r1), p0, p1});
  } else {
    sync({p0, p1});
  }
  const float ranks = static_cast<float>(world() * (world() + 1) / 2);
  EXPECT_EQ(p0.to_vector<float>(), std::vector<float>(2, 10.f - 2 * ranks));
  EXPECT_EQ(p1.to_vector<float>(), std::vector<float>(2, 100.f - ranks));
}

TEST(DistTest, BroadcastsGradientReachesTheRootFromEveryRank) {
  Tensor x = full({3}, 1.f + me());
  x.requires_grad_();
  const int root = world() - 1;
  // d/dx_r of sum_s broadcast(x)_s * (s + 1): the root gets every rank's weight, the others 0.
  const std::vector<Tensor> g = grad(sum(dist::broadcast(x, root) * full({3}, me() + 1)), {x});
  const float want = me() == root ? static_cast<float>(world() * (world() + 1) / 2) : 0.f;
  EXPECT_EQ(g[0].to_vector<float>(), std::vector<float>(3, want));
  EXPECT_EQ(dist::all_reduce(full({1}, 5.f)).to_vector<float>(), std::vector<float>(1, 5.f * world()));  // still paired
}

Tensor traced_before_init;  // main: an all_gather traced in a world of one

TEST(DistTest, AGraphTracedInAnotherWorldFailsOnEveryRank) {
  expect_error([] { traced_before_init.to_vector<float>(); },
               fmt::format("all_gather: traced in a world of 1 processes, run in a world of {}", world()));
  traced_before_init = Tensor();
  EXPECT_EQ(dist::all_reduce(ones({1})).to_vector<float>(), std::vector<float>(1, static_cast<float>(world())));
}

TEST(DistTest, DataParallelStartsFromRankZerosWeightsAndAveragesGradients) {
  Tensor p = full({2, 2}, 100 + me());
  nn::DataParallel ddp({p});
  EXPECT_EQ(p.to_vector<float>(), std::vector<float>(4, 100.f));
  const std::vector<Tensor> mean = ddp.average({full({2, 2}, me())});
  EXPECT_EQ(mean[0].to_vector<float>(), std::vector<float>(4, static_cast<float>(world() - 1) / 2));
  dist::barrier();
}

}  // namespace
}  // namespace lazyjit

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  lazyjit::traced_before_init = lazyjit::dist::all_gather(lazyjit::ones({2}));
  lazyjit::dist::init();
  if (lazyjit::dist::rank() != 0) {  // one report: the other ranks print failures only
    testing::TestEventListeners& listeners = testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  const int code = RUN_ALL_TESTS();
  lazyjit::dist::finalize();
  return code;
}

// Tiers: tier 0 runs a new graph at once, compiled code takes over after the background
// compile, and a graph runs the kernels other graphs compiled already. (That both tiers
// compute the same values is the differential tests' business.)
#include <cmath>
#include <vector>

#include <lazyjit/lazyjit.h>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tier.h"

namespace lazyjit {
namespace {

using ::testing::HasSubstr;

std::vector<float> ramp(int64_t n, float scale) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = scale * static_cast<float>(i % 97) - 3.0f;
  return v;
}

/// The program these tests run: an elementwise kernel and a row kernel.
std::vector<float> program(const std::vector<float>& x_values) {
  const Tensor x = Tensor::from_vector<float>(x_values, {64, 16});
  const Tensor y = softmax(relu(x * 0.5 - 1.0), 1) + 2.0;
  return y.to_vector<float>();
}

TEST(TierTest, AutoRunsANewGraphAtOnceAndCompiledCodeAfterItsBackgroundCompile) {
  tests::ScopedTier tier(Tier::Auto);
  reset_metrics();
  const std::vector<float> first = program(ramp(64 * 16, 0.1f));
  Metrics m = metrics();
  EXPECT_EQ(m.graphs_executed, 1);
  EXPECT_EQ(m.tier0_kernel_runs, m.kernels_launched) << "nothing was compiled before: tier 0 ran every kernel";
  EXPECT_GE(m.tier0_kernel_runs, 1);

  wait_for_compiles();
  m = metrics();
  EXPECT_EQ(m.tier_switches, 1);
  EXPECT_GE(m.kernels_compiled_background, 1);
  EXPECT_EQ(m.kernels_compiled_background, m.kernels_compiled);

  const int64_t tier0_runs = m.tier0_kernel_runs;
  const std::vector<float> second = program(ramp(64 * 16, 0.1f));
  m = metrics();
  EXPECT_EQ(m.tier0_kernel_runs, tier0_runs) << "after the switch, compiled code runs the graph";
  EXPECT_EQ(m.cache_hits, 1);
  EXPECT_EQ(first, second);  // elementwise arithmetic, max and exp per row: the same on both tiers here
}

TEST(TierTest, TierZeroAloneNeverCompiles) {
  tests::ScopedTier tier(Tier::Interpret);
  reset_metrics();
  Tensor w = Tensor::from_vector<float>(ramp(8 * 4, 0.01f), {8, 4});
  const Tensor x = Tensor::from_vector<float>(ramp(5 * 8, 0.02f), {5, 8});
  for (int step = 0; step < 3; ++step) {
    const Tensor g = matmul(transpose(x, 0, 1), softmax(matmul(x, w), 1));
    w -= 0.1 * g;
    mark_step();
  }
  const Metrics m = metrics();
  EXPECT_EQ(m.kernels_compiled, 0);
  EXPECT_EQ(m.compiles, 0);
  EXPECT_EQ(m.tier0_kernel_runs, m.kernels_launched);
  EXPECT_GE(m.donations, 2) << "tier 0 writes into donated buffers as compiled code does";
  EXPECT_TRUE(std::isfinite(w.to_vector<float>()[0]));
}

TEST(TierTest, AGraphRunsTheKernelsOtherGraphsCompiledWithoutWaiting) {
  const Tensor x = Tensor::from_vector<float>(ramp(32 * 24, 0.05f), {32, 24});
  const Tensor z = Tensor::from_vector<float>(ramp(7, 1.0f), {7});
  {
    tests::ScopedTier tier(Tier::Compile);
    (void)sum(exp(x), {1}).to_vector<float>();  // compiles the row kernel
  }
  tests::ScopedTier tier(Tier::Auto);
  reset_metrics();
  // A new graph: the same row kernel, and an elementwise kernel of another shape.
  const Tensor rows = sum(exp(x), {1});
  const Tensor other = z * 3.0 + 1.0;
  sync({rows, other});
  const Metrics m = metrics();
  EXPECT_EQ(m.kernels_launched, 2);
  EXPECT_EQ(m.tier0_kernel_runs, 1) << "the row kernel ran compiled; only the new one ran on tier 0";
  wait_for_compiles();
  EXPECT_EQ(metrics().kernels_compiled, 1);
  EXPECT_FLOAT_EQ(other.to_vector<float>()[6], 3.0f * (6.0f - 3.0f) + 1.0f);
}

TEST(TierTest, AnIndexOutOfRangeIsTheSameErrorOnBothTiers) {
  const Tensor table = Tensor::from_vector<float>(ramp(5 * 3, 1.0f), {5, 3});
  const Tensor index = Tensor::from_vector<int64_t>({1, 4, 7, 0}, {4});
  std::string messages[2];
  for (int t = 0; t < 2; ++t) {
    tests::ScopedTier tier(t == 0 ? Tier::Interpret : Tier::Compile);
    Tensor picked = index_select(table, 0, index);
    try {
      (void)picked.to_vector<float>();
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      messages[t] = e.what();
    }
  }
  EXPECT_THAT(messages[0], HasSubstr("index_select"));
  EXPECT_THAT(messages[0], HasSubstr("7"));
  EXPECT_EQ(messages[0], messages[1]);
}

TEST(TierTest, ARunOfOnlyCompiledKernelsSwitchesNothingAndQueuesNothing) {
  const Tensor x = Tensor::from_vector<float>(ramp(100, 0.3f), {100});
  {
    tests::ScopedTier tier(Tier::Compile);
    (void)(x * 2.0).to_vector<float>();
  }
  tests::ScopedTier tier(Tier::Auto);
  reset_metrics();
  (void)(x * 2.0).to_vector<float>();  // the same graph: its compiled form is in the cache
  wait_for_compiles();
  const Metrics m = metrics();
  EXPECT_EQ(m.tier0_kernel_runs, 0);
  EXPECT_EQ(m.tier_switches, 0);
  EXPECT_EQ(m.cache_hits, 1);
}

}  // namespace
}  // namespace lazyjit

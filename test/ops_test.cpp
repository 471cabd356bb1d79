// The op set beyond elementwise: reductions, normalisation, matmul, views and random
// numbers. Every op is compiled and run by the runtime and compared with the reference
// interpreter on seeded random shapes (size 0 and 1 included) for every admitted dtype, with
// per-dtype tolerances; fusion is checked on the kernel counter; every user mistake has its
// message checked.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "fmt/format.h"
#include "fmt/ranges.h"
#include "ir/graph.h"
#include "ir/interpreter.h"
#include "lazyjit/lazyjit.h"
#include "op_checks.h"
#include "runtime/tensor_impl.h"
#include "tier.h"

namespace lazyjit {
namespace {

using Shape = std::vector<int64_t>;
/// A random non-empty subset of [0, rank), some of them given as negative dims.
std::vector<int64_t> random_dims(std::mt19937& rng, int rank) {
  std::vector<int64_t> dims;
  for (int d = 0; d < rank; ++d) {
    if (rng() % 2) dims.push_back(rng() % 2 ? d : d - rank);
  }
  if (dims.empty() && rank > 0) dims.push_back(rng() % rank);
  return dims;
}

// ---------------------------------------------------------------------------------------------
// Reductions

TEST(ReduceTest, SumProdAmaxAminMeanAnyAllMatchInterpreterOnRandomShapes) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 120; ++trial) {
    const int rank = static_cast<int>(rng() % 5);
    const Shape shape = random_shape(rng, rank);
    const DType dtype = kAll[rng() % std::size(kAll)];
    const std::vector<int64_t> dims = rng() % 4 == 0 ? std::vector<int64_t>{} : random_dims(rng, rank);
    const bool keepdim = rng() % 2;
    const Tensor x = random_tensor(rng, shape, dtype);
    const std::string context = fmt::format("{} [{}] dims [{}] keepdim {}", dtype_name(dtype), fmt::join(shape, ","),
                                            fmt::join(dims, ","), keepdim);
    int64_t folded = 1;
    bool empty_fold = false;
    for (int64_t d = 0; d < rank; ++d) {
      const bool in = dims.empty() || std::count(dims.begin(), dims.end(), d) || std::count(dims.begin(), dims.end(), d - rank);
      if (in) folded *= shape[d], empty_fold = empty_fold || shape[d] == 0;
    }
    expect_matches(sum(x, dims, keepdim), "sum " + context, folded);
    expect_matches(prod(x, dims, keepdim), "prod " + context, folded);  // of nothing: 1
    if (is_floating(dtype)) expect_matches(mean(x, dims, keepdim), "mean " + context, folded);
    expect_matches(any(x, dims, keepdim), "any " + context);  // of nothing: false
    expect_matches(all(x, dims, keepdim), "all " + context);  // of nothing: true
    if (empty_fold) {
      EXPECT_THROW(amax(x, dims, keepdim), Error) << context;
    } else {
      expect_matches(amax(x, dims, keepdim), "amax " + context);
      expect_matches(amin(x * x - 1.0, dims, keepdim), "amin " + context);
    }
  }
}

TEST(ReduceTest, ArgmaxMatchesInterpreterWithTiesAndNaN) {
  std::mt19937 rng(11);
  for (DType dtype : kNumeric) {
    for (int trial = 0; trial < 12; ++trial) {
      const int rank = 1 + static_cast<int>(rng() % 3);
      Shape shape = random_shape(rng, rank);
      const int64_t dim = static_cast<int64_t>(rng() % rank) - (rng() % 2 ? rank : 0);
      int64_t& size = shape[dim < 0 ? dim + rank : dim];
      size = std::max<int64_t>(size, 1);
      const Tensor x = random_tensor(rng, shape, dtype);
      const Tensor rounded = is_floating(dtype) ? where(gt(x, 3.0), Tensor::from_vector<float>({NAN}, {}).to(dtype), x) : x;
      expect_matches(argmax(rounded, dim, trial % 2), fmt::format("argmax {} [{}] dim {}", dtype_name(dtype), fmt::join(shape, ","), dim));
    }
  }
  // Ties: the first maximum wins.
  EXPECT_EQ(argmax(Tensor::from_vector<int32_t>({1, 5, 5, 2}, {4}), 0).item<int64_t>(), 1);
}

TEST(ReduceTest, ArgminMinAndMaxFindTheFirstExtremum) {
  constexpr int32_t kMin = std::numeric_limits<int32_t>::min();
  EXPECT_EQ(argmin(Tensor::from_vector<int32_t>({3, kMin, 7, kMin}, {4}), 0).item<int64_t>(), 1);
  EXPECT_EQ(argmin(Tensor::from_vector<int64_t>({3, -2, -2}, {3}), 0).item<int64_t>(), 1);
  EXPECT_EQ(argmin(Tensor::from_vector<float>({1, NAN, -5, NAN}, {4}), 0).item<int64_t>(), 1);  // NaN is the minimum
  EXPECT_EQ(argmin(Tensor::from_vector<double>({2, -0.0, 0.0, -1, -1}, {5}), 0).item<int64_t>(), 3);
  std::mt19937 rng(13);
  for (DType dtype : kNumeric) {
    const Tensor x = random_tensor(rng, {5, 7}, dtype);
    const std::vector<double> v = x.to(DType::Float64).to_vector<double>();
    for (int64_t dim : {0, 1, -1}) {
      const int64_t d = dim < 0 ? dim + 2 : dim;
      const std::vector<int64_t> low = argmin(x, dim).to_vector<int64_t>(), high = argmax(x, dim).to_vector<int64_t>();
      const ValuesIndices smallest = min(x, dim, /*keepdim=*/true), largest = max(x, dim);
      EXPECT_EQ(smallest.values.shape(), (d == 0 ? Shape{1, 7} : Shape{5, 1}));
      EXPECT_EQ(smallest.indices.to_vector<int64_t>(), low);
      EXPECT_EQ(largest.indices.to_vector<int64_t>(), high);
      const std::vector<double> lows = smallest.values.to(DType::Float64).to_vector<double>();
      const std::vector<double> highs = largest.values.to(DType::Float64).to_vector<double>();
      const int64_t outer = d == 0 ? 7 : 5, size = d == 0 ? 5 : 7;
      for (int64_t o = 0; o < outer; ++o) {
        auto at = [&](int64_t k) { return d == 0 ? v[k * 7 + o] : v[o * 7 + k]; };
        int64_t first_min = 0, first_max = 0;
        for (int64_t k = 1; k < size; ++k) {
          if (at(k) < at(first_min)) first_min = k;
          if (at(k) > at(first_max)) first_max = k;
        }
        EXPECT_EQ(low[o], first_min) << dtype_name(dtype) << " dim " << dim << " at " << o;
        EXPECT_EQ(high[o], first_max) << dtype_name(dtype) << " dim " << dim << " at " << o;
        EXPECT_EQ(lows[o], at(first_min));
        EXPECT_EQ(highs[o], at(first_max));
      }
    }
  }
}

TEST(ReduceTest, TopkPicksTheLargestFirstWithTiesInIndexOrderAndNaNOnTop) {
  std::mt19937 rng(19);
  for (DType dtype : kNumeric) {
    for (int trial = 0; trial < 6; ++trial) {
      const int64_t rows = 1 + trial % 3, size = 1 + static_cast<int64_t>(rng() % 9);
      std::vector<double> v(static_cast<size_t>(rows * size));
      for (double& e : v) e = static_cast<double>(static_cast<int>(rng() % 5) - 2);  // ties
      if (is_floating(dtype) && v.size() > 2) v[1] = NAN;
      const Tensor x = Tensor::from_vector<double>(v, {rows, size}).to(dtype);
      for (int64_t k : {int64_t{0}, int64_t{1}, std::min<int64_t>(3, size), size}) {
        for (int64_t dim : {int64_t{-1}, int64_t{1}}) {
          const ValuesIndices top = topk(x, k, dim);
          ASSERT_EQ(top.indices.shape(), (Shape{rows, k}));
          const std::vector<int64_t> got = top.indices.to_vector<int64_t>();
          const std::vector<double> values = top.values.to(DType::Float64).to_vector<double>();
          for (int64_t r = 0; r < rows; ++r) {
            std::vector<int64_t> order(static_cast<size_t>(size));
            std::iota(order.begin(), order.end(), 0);
            auto key = [&](int64_t j) { return v[r * size + j]; };
            std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
              if (std::isnan(key(a)) || std::isnan(key(b))) return std::isnan(key(a)) && !std::isnan(key(b));
              return key(a) > key(b);
            });
            for (int64_t i = 0; i < k; ++i) {
              EXPECT_EQ(got[r * k + i], order[i]) << dtype_name(dtype) << " row " << r << " k " << k << " rank " << i;
              const double want = key(order[i]);
              if (std::isnan(want)) EXPECT_TRUE(std::isnan(values[r * k + i]));
              else EXPECT_EQ(values[r * k + i], want);
            }
          }
        }
      }
    }
  }
  constexpr int32_t kMin = std::numeric_limits<int32_t>::min();
  const ValuesIndices low = topk(Tensor::from_vector<int32_t>({kMin, 5, kMin}, {3}), 3);
  EXPECT_EQ(low.indices.to_vector<int64_t>(), (std::vector<int64_t>{1, 0, 2}));
  expect_error([&] { topk(zeros({2, 3}), 4); }, "topk: k 4 is out of range for a dim of size 3");
  expect_error([&] { topk(zeros({2, 3}), 1, 2); }, "topk: dim 2 is out of range for a tensor of rank 2 (expected -2 to 1)");
}

TEST(ReduceTest, VarAndStdMatchTwoPassSumsInDouble) {
  std::mt19937 rng(17);
  const Tensor x = random_tensor(rng, {6, 9}, DType::Float64);
  const std::vector<double> v = x.to_vector<double>();
  for (bool unbiased : {true, false}) {
    const std::vector<double> rows = var(x, {1}, unbiased).to_vector<double>();
    const std::vector<double> stds = std(x, {-1}, unbiased, /*keepdim=*/true).to_vector<double>();
    ASSERT_EQ(std(x, {-1}, unbiased, true).shape(), (Shape{6, 1}));
    for (int r = 0; r < 6; ++r) {
      double mean = 0, squares = 0;
      for (int c = 0; c < 9; ++c) mean += v[r * 9 + c] / 9;
      for (int c = 0; c < 9; ++c) squares += (v[r * 9 + c] - mean) * (v[r * 9 + c] - mean);
      const double expected = squares / (unbiased ? 8 : 9);
      EXPECT_NEAR(rows[r], expected, 1e-12 * (1 + expected)) << r;
      EXPECT_NEAR(stds[r], std::sqrt(expected), 1e-12 * (1 + expected)) << r;
    }
  }
  EXPECT_TRUE(std::isnan(var(Tensor::from_vector<float>({2.5f}, {1})).item<float>()));  // 0 / 0, as PyTorch
  for (const bool unbiased : {true, false}) {  // over no elements: NaN, not 0 / -1 = -0
    for (const float v : var(zeros({0, 3}), {0}, unbiased).to_vector<float>()) EXPECT_TRUE(std::isnan(v)) << unbiased;
    for (const float v : lazyjit::std(zeros({0, 3}), {0}, unbiased).to_vector<float>()) EXPECT_TRUE(std::isnan(v)) << unbiased;
  }
  EXPECT_EQ(var(Tensor::from_vector<float>({2.5f}, {1}), {}, /*unbiased=*/false).item<float>(), 0.0f);
  EXPECT_FLOAT_EQ(var(Tensor::from_vector<float>({1, 2, 3, 4}, {2, 2})).item<float>(), 5.0f / 3);
}

TEST(ActivationTest, SiluSoftplusLog1pExpm1MatchTheirFormulas) {
  const std::vector<double> xs = {-100, -20, -3, -1e-9, 0, 1e-9, 0.5, 3, 19.9, 20.1, 100};
  const Tensor x = Tensor::from_vector<double>(xs, {static_cast<int64_t>(xs.size())});
  const std::vector<double> silus = silu(x).to_vector<double>(), softpluses = softplus(x).to_vector<double>();
  const std::vector<double> halves = softplus(x, 2.0, 10.0).to_vector<double>();
  for (size_t i = 0; i < xs.size(); ++i) {
    const double v = xs[i];
    EXPECT_NEAR(silus[i], v / (1 + std::exp(-v)), 1e-12 * (1 + std::fabs(v))) << v;
    EXPECT_NEAR(softpluses[i], v > 20 ? v : std::log1p(std::exp(v)), 1e-12 * (1 + std::fabs(v))) << v;
    EXPECT_NEAR(halves[i], 2 * v > 10 ? v : std::log1p(std::exp(2 * v)) / 2, 1e-12 * (1 + std::fabs(v))) << v;
  }
  const std::vector<double> small = {1e-10, -1e-12, 0.25};
  const Tensor s = Tensor::from_vector<double>(small, {3});
  const std::vector<double> l = log1p(s).to_vector<double>(), e = expm1(s).to_vector<double>();
  for (size_t i = 0; i < small.size(); ++i) {
    EXPECT_NEAR(l[i], std::log1p(small[i]), 1e-16 + 1e-15 * std::fabs(small[i]));
    EXPECT_NEAR(e[i], std::expm1(small[i]), 1e-16 + 1e-15 * std::fabs(small[i]));
  }
}

TEST(DivisionTest, FloorDivideAndRemainderFollowPyTorchsSignRules) {
  constexpr int32_t kMin = std::numeric_limits<int32_t>::min();
  const Tensor a = Tensor::from_vector<int32_t>({7, -7, 7, -7, 6, kMin, kMin, 0}, {8});
  const Tensor b = Tensor::from_vector<int32_t>({2, 2, -2, -2, 3, -1, 7, -3}, {8});
  EXPECT_EQ(floor_divide(a, b).to_vector<int32_t>(), (std::vector<int32_t>{3, -4, -4, 3, 2, kMin, -306783379, 0}));
  EXPECT_EQ(remainder(a, b).to_vector<int32_t>(), (std::vector<int32_t>{1, 1, -1, -1, 0, 0, 5, 0}));
  EXPECT_EQ(floor_divide(a, b).dtype(), DType::Int32);
  const Tensor x = Tensor::from_vector<double>({7.5, -7.5, 7.5, 0.3, -0.0, 0.0, 1.0, 5.0, -1.0}, {9});
  const Tensor y = Tensor::from_vector<double>({-2, 2, 2, 0.1, 5, -5, 0, 0, 0}, {9});
  const std::vector<double> q = floor_divide(x, y).to_vector<double>(), r = remainder(x, y).to_vector<double>();
  const double inf = std::numeric_limits<double>::infinity();
  const std::vector<double> want_q = {-4, -4, 3, 2, -0.0, -0.0, inf, inf, -inf};
  for (size_t i = 0; i < want_q.size(); ++i) {
    EXPECT_EQ(q[i], want_q[i]) << i;
    EXPECT_EQ(std::signbit(q[i]), std::signbit(want_q[i])) << i;
  }
  EXPECT_EQ(r[0], -0.5);
  EXPECT_EQ(r[1], 0.5);
  EXPECT_EQ(r[2], 1.5);
  EXPECT_TRUE(std::isnan(r[7]));
  EXPECT_EQ(remainder(Tensor::from_vector<int64_t>({-3}, {1}), 5).item<int64_t>(), 2);
  // An integer division by zero is found when the graph runs, on either tier.
  for (Tier t : {Tier::Interpret, Tier::Compile}) {
    tests::ScopedTier tier(t);
    const Tensor zero_in = Tensor::from_vector<int64_t>({4, 0, 2}, {3});
    const Tensor quotient = floor_divide(Tensor::from_vector<int64_t>({8, 8, 8}, {3}), zero_in);
    expect_error([&] { quotient.to_vector<int64_t>(); }, "floor_divide: integer division by zero");
    expect_error([&] { remainder(arange(3), zero_in).to_vector<int64_t>(); }, "remainder: integer division by zero");
  }
}

TEST(AttentionTest, ScaledDotProductAttentionMatchesItsDefinition) {
  std::mt19937 rng(23);
  const int64_t B = 2, L = 5, S = 7, E = 3, Ev = 4;
  const Tensor q = random_tensor(rng, {B, L, E}, DType::Float64), k = random_tensor(rng, {S, E}, DType::Float64);
  const Tensor v = random_tensor(rng, {B, S, Ev}, DType::Float64);
  const std::vector<double> qs = q.to_vector<double>(), ks = k.to_vector<double>(), vs = v.to_vector<double>();
  for (bool causal : {false, true}) {
    for (double scale : {0.0, 0.25}) {
      const std::vector<double> got = scaled_dot_product_attention(q, k, v, causal, scale).to_vector<double>();
      ASSERT_EQ(got.size(), static_cast<size_t>(B * L * Ev));
      const double factor = scale > 0 ? scale : 1 / std::sqrt(3.0);
      for (int64_t b = 0; b < B; ++b) {
        for (int64_t i = 0; i < L; ++i) {
          std::vector<double> w(S);
          double top = -INFINITY, total = 0;
          for (int64_t j = 0; j < S; ++j) {
            double dot = 0;
            for (int64_t e = 0; e < E; ++e) dot += qs[(b * L + i) * E + e] * ks[j * E + e];
            w[j] = causal && j > i ? -INFINITY : dot * factor;
            top = std::max(top, w[j]);
          }
          for (double& x : w) total += x = std::exp(x - top);
          for (int64_t c = 0; c < Ev; ++c) {
            double want = 0;
            for (int64_t j = 0; j < S; ++j) want += w[j] / total * vs[(b * S + j) * Ev + c];
            EXPECT_NEAR(got[(b * L + i) * Ev + c], want, 1e-12) << "causal " << causal << " at " << b << "," << i << "," << c;
          }
        }
      }
    }
  }
  expect_error([&] { scaled_dot_product_attention(q, zeros({S, 2}, DType::Float64), v); },
               "scaled_dot_product_attention: q [2, 5, 3], k [7, 2] and v [2, 7, 4] do not fit [..., L, E], [..., S, E], [..., S, Ev]");
  expect_error([&] { scaled_dot_product_attention(arange(3), k, v); },
               "scaled_dot_product_attention: q, k and v must be floating tensors of rank 2 or more, got [3]");
}

TEST(ReduceTest, SumOfBoolAndIntIsInt64AndMeanOfIntIsAnError) {
  const Tensor b = Tensor::from_vector<bool>({true, false, true}, {3});
  EXPECT_EQ(sum(b).dtype(), DType::Int64);
  EXPECT_EQ(sum(b).item<int64_t>(), 2);
  EXPECT_EQ(sum(Tensor::from_vector<int32_t>({1, 2}, {2})).dtype(), DType::Int64);
  try {
    mean(Tensor::from_vector<int32_t>({1, 2}, {2}));
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "mean: input dtype int32 is not a float dtype; convert it first with .to(DType::Float32)");
  }
}

TEST(ReduceTest, ResultsDoNotDependOnShapeSplitOrRepeat) {
  std::mt19937 rng(3);
  const Tensor x = random_tensor(rng, {300, 257}, DType::Float32);
  const std::vector<float> a = sum(x, {1}).to_vector<float>();
  const std::vector<float> b = sum(x, {1}).to_vector<float>();
  EXPECT_EQ(a, b);  // bit for bit: each row is folded by one thread in a fixed order
}

TEST(ReduceTest, ProducersFuseIntoTheReductionAndConsumersIntoItsRows) {
  std::mt19937 rng(5);
  const Tensor x = random_tensor(rng, {64, 1000}, DType::Float32);
  const Metrics before = metrics();
  expect_matches(sum(x * x, {1}), "sum(x*x)", 1000);
  Metrics after = metrics();
  EXPECT_EQ(after.kernels_launched - before.kernels_launched, 1);  // no temporary for x*x
  expect_matches(softmax(x, -1), "softmax");
  Metrics next = metrics();
  EXPECT_EQ(next.kernels_launched - after.kernels_launched, 1);  // max, sum and output: one row pass
  const Tensor gamma = random_tensor(rng, {1000}, DType::Float32), beta = random_tensor(rng, {1000}, DType::Float32);
  expect_matches(layer_norm(x, 1, gamma, beta, 1e-5), "layer_norm", 1000);
  EXPECT_EQ(metrics().kernels_launched - next.kernels_launched, 1);
}

// ---------------------------------------------------------------------------------------------
// Normalisation

TEST(NormTest, SoftmaxLogSoftmaxLayerNormMatchInterpreter) {
  std::mt19937 rng(13);
  for (DType dtype : kFloats) {
    for (int trial = 0; trial < 25; ++trial) {
      const int rank = 1 + static_cast<int>(rng() % 3);
      const Shape shape = random_shape(rng, rank);
      const int64_t dim = static_cast<int64_t>(rng() % rank) - (rng() % 2 ? rank : 0);
      const Tensor x = random_tensor(rng, shape, dtype) * 4.0;
      const std::string context = fmt::format("{} [{}] dim {}", dtype_name(dtype), fmt::join(shape, ","), dim);
      const int64_t n = shape[dim < 0 ? dim + rank : dim];
      expect_matches(softmax(x, dim), "softmax " + context, n);
      expect_matches(log_softmax(x, dim), "log_softmax " + context, n);
      const int normalized = 1 + static_cast<int>(rng() % rank);
      const Shape tail(shape.end() - normalized, shape.end());
      const Tensor gamma = random_tensor(rng, tail, dtype), beta = random_tensor(rng, tail, dtype);
      expect_matches(layer_norm(x, normalized, gamma, beta, 1e-5), "layer_norm " + context, numel(tail) * 16);
      expect_matches(layer_norm(x, normalized), "layer_norm (no affine) " + context, numel(tail) * 16);
    }
  }
}

TEST(NormTest, SoftmaxIsStableForLargeInputs) {
  const Tensor x = Tensor::from_vector<float>({1000, 1001, 1002}, {3});
  const std::vector<float> p = softmax(x, 0).to_vector<float>();
  EXPECT_NEAR(p[2], 0.66524f, 1e-5);
  EXPECT_FALSE(std::isnan(log_softmax(x, 0).to_vector<float>()[0]));
}

// ---------------------------------------------------------------------------------------------
// Matmul

TEST(MatmulTest, MatchesInterpreterAtSizesThatAreNotMultiplesOfTheTile) {
  std::mt19937 rng(17);
  const int64_t sizes[] = {1, 7, 63, 129, 1000};
  for (DType dtype : kNumeric) {
    for (int64_t m : sizes) {
      for (int64_t k : {1, 7, 63, 129}) {
        const int64_t n = sizes[rng() % std::size(sizes)];
        if (m * n * k > 8'000'000) continue;
        const Tensor a = random_tensor(rng, {m, k}, dtype), b = random_tensor(rng, {k, n}, dtype);
        expect_matches(matmul(a, b), fmt::format("{} {}x{}x{}", dtype_name(dtype), m, k, n), k * 16);
      }
    }
  }
}

TEST(MatmulTest, VectorsBatchesAndBroadcastBatchDims) {
  std::mt19937 rng(19);
  const std::vector<std::pair<Shape, Shape>> cases = {
      {{7}, {7}},       {{7}, {7, 5}},        {{5, 7}, {7}},           {{3, 5, 7}, {7, 9}},
      {{5, 7}, {2, 7, 9}}, {{2, 1, 5, 7}, {3, 7, 4}}, {{3, 5, 7}, {7}}, {{7}, {2, 7, 3}}, {{0, 7}, {7, 3}},
      {{4, 0}, {0, 3}},
  };
  for (DType dtype : {DType::Float32, DType::Float64, DType::Int64}) {
    for (const auto& [sa, sb] : cases) {
      expect_matches(matmul(random_tensor(rng, sa, dtype), random_tensor(rng, sb, dtype)),
                     fmt::format("{} [{}] @ [{}]", dtype_name(dtype), fmt::join(sa, ","), fmt::join(sb, ",")), 7 * 16);
    }
  }
}

TEST(MatmulTest, EpilogueFusesIntoTheKernelAndOperandExpressionsIntoPacking) {
  std::mt19937 rng(23);
  const Tensor x = random_tensor(rng, {70, 33}, DType::Float32), w = random_tensor(rng, {40, 33}, DType::Float32);
  const Tensor bias = random_tensor(rng, {40}, DType::Float32), residual = random_tensor(rng, {70, 40}, DType::Float32);
  Metrics before = metrics();
  // x @ w^T: x is read in place, the transpose is read through while packing w; bias, gelu
  // and residual are the epilogue: pack B and the tiled kernel, nothing else.
  expect_matches(gelu(matmul(x, transpose(w, 0, 1)) + bias) + residual, "gelu(x@w.T+b)+r", 33 * 16);
  EXPECT_EQ(metrics().kernels_launched - before.kernels_launched, 2);
  // A computed left operand is evaluated as it is packed: one more kernel, no other pass.
  before = metrics();
  expect_matches(relu(matmul(tanh(x), transpose(w, 0, 1)) + bias), "relu(tanh(x)@w.T+b)", 33 * 16);
  EXPECT_EQ(metrics().kernels_launched - before.kernels_launched, 3);
}

/// A value of the product's shape that other kernels read (an MLP's x @ w + b, kept for its
/// activation and its own uses) is stored by the product's epilogue, not by a kernel of its
/// own that would read the product back, unless it calls math functions.
TEST(MatmulTest, AStoredValueOfTheProductIsItsEpilogue) {
  std::mt19937 rng(31);
  const Tensor x = random_tensor(rng, {70, 33}, DType::Float32), w = random_tensor(rng, {33, 40}, DType::Float32);
  const Tensor bias = random_tensor(rng, {40}, DType::Float32), w2 = random_tensor(rng, {40, 9}, DType::Float32);
  const Metrics before = metrics();
  const Tensor h = matmul(x, w) + bias;  // read by gelu's pack and by the row sums
  expect_matches(matmul(gelu(h), w2) + sum(h * h, {1}, true), "gelu(x@w+b)@w2 + sum((x@w+b)^2)", 40 * 16);
  // Pack B of w, the product storing h, pack A of gelu(h), pack B of w2, h's row sums, and
  // the second product with the sums as its epilogue: no kernel of h's own.
  EXPECT_EQ(metrics().kernels_launched - before.kernels_launched, 6);
  // A value computed with math functions runs slower in the product's tiles than as a pass
  // of its own: it keeps its kernel.
  const Metrics again = metrics();
  const Tensor e = exp(matmul(x, w) * 0.125);
  expect_matches(matmul(e, w2) + sum(e * e, {1}, true), "exp(x@w/8)@w2 + sum(exp(x@w/8)^2)", 40 * 16);
  EXPECT_EQ(metrics().kernels_launched - again.kernels_launched, 6);
  // Batched products, each dtype, a residual beside the bias, odd sizes, and a stored value
  // of another dtype: the epilogue stores each at the product's index.
  for (DType dtype : {DType::Float32, DType::Float64, DType::Int64}) {
    const Tensor a = random_tensor(rng, {3, 13, 7}, dtype), b = random_tensor(rng, {3, 7, 37}, dtype);
    const Tensor r = random_tensor(rng, {3, 13, 37}, dtype), c = random_tensor(rng, {37}, dtype);
    const Tensor v = matmul(a, b) + r + c;  // read by the sum and by the next product
    const std::string d(dtype_name(dtype));
    expect_matches(matmul(v, transpose(b, 1, 2)) + sum(v * v, {2}, true), "batched (a@b+r+c) " + d, 37 * 16);
    if (dtype == DType::Float32) continue;  // (a float32 product's rounding, compared in float64's)
    const Tensor f = (matmul(a, b) + c).to(DType::Float64);
    expect_matches(sum(f, {1, 2}) + sum(sum(f * f, {2}), {1}), "cast(a@b+c) " + d, 13 * 37 * 16);
  }
  // A product whose kernel stores a value of it (x @ w scaled by a 0-dim alpha, read by the
  // stored value and beside it: PyTorch's addmm with alpha, beta and a run-time beta == 0 test):
  // the stored value's epilogue is the product's, not the scaled value's (it once took the
  // scaled value's operands for A and B, a 0-dim one among them).
  const Tensor alpha = Tensor::from_vector<int64_t>({2}, {}), beta = Tensor::from_vector<int64_t>({1}, {});
  const Tensor p = matmul(x, w) * alpha.to(DType::Float32);
  const Tensor addmm = where(eq(beta.to(DType::Float32), 0.0), p, p + bias * beta.to(DType::Float32));
  const Metrics scaled = metrics();
  expect_matches(exp(addmm - amax(addmm, {1}, true)) + sum(addmm, {1}, true), "where(beta == 0, x@w*alpha, ...)", 40 * 16);
  EXPECT_EQ(metrics().kernels_launched - scaled.kernels_launched, 3);  // pack B, the product storing addmm, rows
}

// ---------------------------------------------------------------------------------------------
// Views

TEST(ViewTest, EveryViewMatchesInterpreterForEveryDtype) {
  std::mt19937 rng(29);
  for (DType dtype : kAll) {
    const Tensor x = random_tensor(rng, {4, 3, 5}, dtype);
    const Tensor y = random_tensor(rng, {4, 2, 5}, dtype);
    const std::string d(dtype_name(dtype));
    expect_matches(reshape(x, {-1, 5}), "reshape " + d);
    expect_matches(reshape(x, {5, 12}), "reshape across dims " + d);
    expect_matches(transpose(x, 0, -1), "transpose " + d);
    expect_matches(permute(x, {1, 2, 0}), "permute " + d);
    expect_matches(expand(reshape(x, {4, 1, 3, 5}), {2, 4, 6, 3, 5}), "expand " + d);
    expect_matches(slice(x, 2, 1, 5, 2), "slice step 2 " + d);
    expect_matches(slice(x, 0, -3, 100), "slice clamped " + d);
    expect_matches(slice(x, 1, 2, 1), "slice empty " + d);
    expect_matches(cat({x, y, x}, 1), "cat " + d);
    expect_matches(cat({slice(x, 1, 0, 0), y, slice(x, 1, 3, 3)}, 1), "cat with empty parts " + d);
    expect_matches(squeeze(unsqueeze(x, -1), 3), "squeeze/unsqueeze " + d);
    expect_matches(unsqueeze(x, 0), "unsqueeze " + d);
    expect_matches(flip(x, {0, -1}), "flip " + d);
    expect_matches(flip(transpose(x, 0, 1), {1}) + 0, "flip of a transpose, computed " + d);
    expect_matches(flip(slice(x, 1, 1, 1), {1}), "flip of an empty dim " + d);
  }
}

TEST(ViewTest, ViewsComposeWithElementwiseAndReductions) {
  std::mt19937 rng(31);
  const Tensor x = random_tensor(rng, {6, 8}, DType::Float32), y = random_tensor(rng, {8, 6}, DType::Float32);
  expect_matches(x + transpose(y, 0, 1), "x + y.T");
  expect_matches(reshape(exp(x) * 2.0, {4, 12}) - 1.0, "reshape of a computed value");
  expect_matches(sum(transpose(x, 0, 1), {1}), "sum over a transpose", 8);
  expect_matches(cat({slice(x, 1, 0, 4), exp(slice(x, 1, 4, 8))}, 0) * 3.0, "cat of slices", 1);
  expect_matches(permute(reshape(x, {2, 3, 8}), {2, 0, 1}) + reshape(y, {8, 2, 3}), "permute of reshape", 1);
}

TEST(ViewTest, ViewsOfASizeDoNotRecompile) {
  tests::ScopedTier compiled(Tier::Compile);
  std::mt19937 rng(37);
  const Metrics before = metrics();
  for (int64_t n : {5, 9, 17}) {
    const Tensor x = random_tensor(rng, {n, 4}, DType::Float32);
    expect_matches(transpose(x, 0, 1) * 2.0, "transpose at n=" + std::to_string(n));
  }
  EXPECT_EQ(metrics().compiles - before.compiles, 1);
}

// ---------------------------------------------------------------------------------------------
// Random numbers

/// Random values picked by an index and folded over rows of one element (a reduction over
/// dim 0 of index_select(rand, 1, [i])): each row's counter is its own. Tier 0 once spread a
/// stale block for such a value of the row, giving every row the first row's number.
TEST(RandomTest, RandomValuesFoldedOverRowsOfOneElementAreEachRowsOwn) {
  const Tensor first = Tensor::from_vector<int32_t>({0}, {1});
  for (DType dtype : kFloats) {
    const Tensor r = rand({4, 7}, 86, dtype);
    expect_matches(sum(index_select(r, 1, first), {0}), "sum of rand's column 0", 4);
    expect_matches(amax(index_select(r, 1, first), {0}), "amax of rand's column 0");
    const Tensor r4 = rand({4, 7, 3, 2}, 86, dtype);
    expect_matches(amax(index_select(transpose(r4 * 2.0, -3, 0), -1, first), {-3}), "amax of a transposed rand's first of 2");
  }
}

TEST(RandomTest, RandAndRandnMatchTheInterpreterAndAreSeeded) {
  for (DType dtype : kFloats) {
    expect_matches(rand({3, 70001}, 42, dtype), "rand large");  // above the parallel threshold
    expect_matches(randn({1000}, 42, dtype), "randn");
    expect_matches(rand({0}, 1, dtype), "rand empty");
  }
  const std::vector<float> a = rand({64}, 1).to_vector<float>(), b = rand({64}, 1).to_vector<float>();
  const std::vector<float> c = rand({64}, 2).to_vector<float>();
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  const Tensor u = rand({100000}, 9);
  EXPECT_NEAR(mean(u).item<float>(), 0.5f, 0.01f);
  EXPECT_GE(amin(u).item<float>(), 0.0f);
  EXPECT_LT(amax(u).item<float>(), 1.0f);
  const Tensor z = randn({100000}, 9, DType::Float64);
  EXPECT_NEAR(mean(z).item<double>(), 0.0, 0.02);
  EXPECT_NEAR(mean(z * z).item<double>(), 1.0, 0.02);
}

TEST(RandomTest, ANewSeedDoesNotRecompile) {
  tests::ScopedTier compiled(Tier::Compile);
  const Metrics before = metrics();
  for (uint64_t seed = 0; seed < 4; ++seed) rand({16}, seed).to_vector<float>();
  EXPECT_LE(metrics().compiles - before.compiles, 1);  // 0 when an earlier test compiled it
  EXPECT_GE(metrics().cache_hits - before.cache_hits, 3);
}

// ---------------------------------------------------------------------------------------------
// A transformer block end to end

TEST(TransformerTest, BlockMatchesInterpreter) {
  std::mt19937 rng(41);
  const int64_t batch = 2, seq = 9, model = 16, hidden = 24;
  const Tensor x = random_tensor(rng, {batch, seq, model}, DType::Float32) * 0.5;
  auto param = [&](Shape s, double scale) { return random_tensor(rng, s, DType::Float32) * scale; };
  const Tensor g1 = param({model}, 0.25) + 1.0, b1 = param({model}, 0.1);
  const Tensor wq = param({model, model}, 0.1), wk = param({model, model}, 0.1), wv = param({model, model}, 0.1);
  const Tensor wo = param({model, model}, 0.1), g2 = param({model}, 0.25) + 1.0, b2 = param({model}, 0.1);
  const Tensor w1 = param({model, hidden}, 0.1), c1 = param({hidden}, 0.1), w2 = param({hidden, model}, 0.1);
  const Tensor c2 = param({model}, 0.1);

  const Tensor h = layer_norm(x, 1, g1, b1, 1e-5);
  const Tensor q = matmul(h, wq), k = matmul(h, wk), v = matmul(h, wv);
  const Tensor scores = matmul(q, transpose(k, -2, -1)) * (1.0 / std::sqrt(static_cast<double>(model)));
  const Tensor attention = matmul(softmax(scores, -1), v);
  const Tensor r1 = x + matmul(attention, wo);
  const Tensor mlp = matmul(gelu(matmul(layer_norm(r1, 1, g2, b2, 1e-5), w1) + c1), w2) + c2;
  expect_matches(r1 + mlp, "transformer block", 64);
}

// ---------------------------------------------------------------------------------------------
// User mistakes

TEST(OpErrorTest, BadDimsShapesAndDtypesNameTheOpAndValues) {
  const Tensor x = zeros({2, 3});
  expect_error([&] { sum(x, {2}); }, "sum: dim 2 is out of range for a tensor of rank 2 (expected -2 to 1)");
  expect_error([&] { sum(x, {1, -1}); }, "sum: dims [1, -1] name a dim twice");
  expect_error([&] { amax(zeros({2, 0}), {1}); },
               "amax: cannot reduce dim 1 of size 0 (shape [2,0]): there is no identity");
  expect_error([&] { argmax(Tensor::from_vector<bool>({true}, {1}), 0); }, "argmax: bool operands are not supported");
  expect_error([&] { sign(Tensor::from_vector<bool>({true}, {1})); }, "sign: bool operands are not supported");
  expect_error([&] { argmin(Tensor::from_vector<bool>({true}, {1}), 0); }, "argmin: bool operands are not supported");
  expect_error([&] { argmin(x, 2); }, "argmin: dim 2 is out of range for a tensor of rank 2 (expected -2 to 1)");
  expect_error([&] { max(x, -3); }, "max: dim -3 is out of range for a tensor of rank 2 (expected -2 to 1)");
  expect_error([&] { min(zeros({2, 0}), -1); }, "min: cannot reduce dim 1 of size 0 (shape [2,0]): there is no identity");
  expect_error([&] { bitwise_and(x, x); }, "bitwise_and: float32 operands are not supported (integers and bool only)");
  expect_error([&] { bitwise_not(x); }, "bitwise_not: float32 operands are not supported (integers and bool only)");
  expect_error([&] { var(Tensor::from_vector<int32_t>({1, 2}, {2})); },
               "var: input dtype int32 is not a float dtype; convert it first with .to(DType::Float32)");
  expect_error([&] { std(Tensor::from_vector<int64_t>({1, 2}, {2})); },
               "std: input dtype int64 is not a float dtype; convert it first with .to(DType::Float32)");
  expect_error([&] { var(x, {0, 0}); }, "var: dims [0, 0] name a dim twice");
  expect_error([&] { flip(x, {1, -1}); }, "flip: dims [1, -1] name a dim twice");
  expect_error([&] { flip(x, {2}); }, "flip: dim 2 is out of range for a tensor of rank 2 (expected -2 to 1)");
  expect_error([&] { any(x, {0, 2}); }, "any: dim 2 is out of range for a tensor of rank 2 (expected -2 to 1)");
  expect_error([&] { softmax(x, -3); }, "softmax: dim -3 is out of range for a tensor of rank 2 (expected -2 to 1)");
  expect_error([&] { layer_norm(x, 3); }, "layer_norm: normalized_ndim 3 must be in [1, 2] for input shape [2,3]");
  expect_error([&] { layer_norm(x, 1, zeros({2})); },
               "layer_norm: gamma has shape [2], expected the normalized shape [3]");
  expect_error([&] { matmul(x, zeros({2, 3})); },
               "matmul: shapes [2,3] and [2,3] cannot be multiplied (3 columns vs 2 rows)");
  expect_error([&] { matmul(zeros({2, 2, 3}), zeros({3, 3, 4})); },
               "matmul: shapes [2] and [3] cannot be broadcast (dim 0: 2 vs 3)");
  expect_error([&] { matmul(Tensor::from_vector<bool>({true}, {1}), Tensor::from_vector<bool>({true}, {1})); },
               "matmul: bool operands are not supported");
  expect_error([&] { reshape(x, {4, -1}); }, "reshape: shape [4, -1] is invalid for a tensor of 6 elements (shape [2,3])");
  expect_error([&] { reshape(x, {-1, -1}); }, "reshape: invalid shape [-1, -1] (one dim may be -1, others must be >= 0)");
  expect_error([&] { permute(x, {0, 0}); }, "permute: dims [0, 0] are not a permutation");
  expect_error([&] { transpose(x, 0, 2); }, "transpose: dim 2 is out of range for a tensor of rank 2 (expected -2 to 1)");
  expect_error([&] { expand(x, {4, 3}); }, "expand: cannot expand shape [2,3] to [4,3] (dim 0: 2 is neither 1 nor 4)");
  expect_error([&] { slice(x, 1, 0, 2, 0); }, "slice: step must be positive, got 0");
  expect_error([&] { cat({x, zeros({3, 3})}, 1); },
               "cat: tensor 1 has shape [3,3], which differs from [2,3] outside dim 1");
  expect_error([&] { cat({}, 0); }, "cat: expected at least one tensor");
  expect_error([&] { unsqueeze(x, 4); }, "unsqueeze: dim 4 is out of range for a tensor of rank 2 (expected -3 to 2)");
  expect_error([&] { rand({2}, 1, DType::Int32); }, "rand: dtype int32 is not a float dtype");
  expect_error([&] { sum(Tensor(), {}); }, "sum: an operand is an undefined tensor");
}

}  // namespace
}  // namespace lazyjit

// End-to-end tests of the public API (<lazyjit/lazyjit.h>): values, dtypes, handles and in-place
// updates, materialisation, dumps, recompilation counters and the error text of user mistakes.
#include <cmath>
#include <cstdint>
#include <fstream>
#include <functional>
#include <limits>
#include <string>
#include <atomic>
#include <thread>
#include <vector>

#include <lazyjit/lazyjit.h>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/runtime.h"  // only to empty the compile cache between counter tests
#include "runtime/tensor_impl.h"  // to see that a step barrier left a tensor pending
#include "tier.h"

namespace {

using lazyjit::DType;
using lazyjit::Tensor;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

/// The what() of the lazyjit::Error that `f` throws; "<no error>" if it returns.
std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const lazyjit::Error& e) {
    return e.what();
  }
  return "<no error>";
}

Tensor floats(std::vector<float> values, std::vector<int64_t> shape) {
  return Tensor::from_vector(values, std::move(shape));
}

std::vector<float> ramp(int64_t n, float start = 0.0f, float step = 1.0f) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = start + step * static_cast<float>(i);
  return v;
}

bool host_has_avx512f() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("flags", 0) == 0) return line.find(" avx512f") != std::string::npos;
  }
  return false;
}

// ---------------------------------------------------------------------------------------------
// Creation, metadata and reads

TEST(ApiTest, RoundTripEveryDtype) {
  const std::vector<float> f = {1.5f, -2.0f, 0.0f, 3.25f, std::numeric_limits<float>::max(), -1e-30f};
  const std::vector<double> d = {1e300, -0.5, 0.1, 4.0};
  const std::vector<int32_t> i = {std::numeric_limits<int32_t>::min(), -1, 0, 7, std::numeric_limits<int32_t>::max(), 3};
  const std::vector<int64_t> l = {(int64_t{1} << 53) + 1, -(int64_t{1} << 62), 0, 42};
  const std::vector<bool> b = {true, false, false, true, true};

  EXPECT_EQ(Tensor::from_vector(f, {2, 3}).to_vector<float>(), f);
  EXPECT_EQ(Tensor::from_vector(d, {4}).to_vector<double>(), d);
  EXPECT_EQ(Tensor::from_vector(i, {3, 2}).to_vector<int32_t>(), i);
  EXPECT_EQ(Tensor::from_vector(l, {2, 2}).to_vector<int64_t>(), l);
  EXPECT_EQ(Tensor::from_vector(b, {5}).to_vector<bool>(), b);
  EXPECT_EQ(Tensor::from_vector(b).dtype(), DType::Bool);

  // Through a compiled copy kernel (a same-dtype op that must not change the bits).
  EXPECT_EQ((Tensor::from_vector(f, {2, 3}) + 0.0f).to_vector<float>(), f);
  EXPECT_EQ((Tensor::from_vector(d, {4}) * 1.0).to_vector<double>(), d);
  EXPECT_EQ((Tensor::from_vector(i, {3, 2}) + 0).to_vector<int32_t>(), i);
  EXPECT_EQ((Tensor::from_vector(l, {2, 2}) * 1).to_vector<int64_t>(), l);
  EXPECT_EQ(lazyjit::logical_or(Tensor::from_vector(b, {5}), Tensor::from_vector(b, {5})).to_vector<bool>(), b);
}

TEST(ApiTest, ShapeDimNumelDtype) {
  Tensor t = floats(ramp(6), {2, 3});
  EXPECT_EQ(t.shape(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(t.dim(), 2);
  EXPECT_EQ(t.numel(), 6);
  EXPECT_EQ(t.dtype(), DType::Float32);
  EXPECT_TRUE(t.defined());
  EXPECT_EQ(t.to_string(), "Tensor(float32[2,3])");

  Tensor s = Tensor::from_vector(std::vector<int64_t>{5}, {});
  EXPECT_EQ(s.dim(), 0);
  EXPECT_EQ(s.numel(), 1);
  EXPECT_TRUE(s.shape().empty());

  Tensor e = Tensor::from_vector(std::vector<double>{}, {0, 4});
  EXPECT_EQ(e.numel(), 0);
  EXPECT_TRUE(e.to_vector<double>().empty());
  EXPECT_TRUE((e * 2.0).to_vector<double>().empty());
  EXPECT_EQ((e * 2.0).shape(), (std::vector<int64_t>{0, 4}));

  // Pending tensors know their metadata without running.
  lazyjit::reset_metrics();
  Tensor p = lazyjit::gt(lazyjit::exp(t), 1.0);
  EXPECT_EQ(p.dtype(), DType::Bool);
  EXPECT_EQ(p.shape(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(lazyjit::metrics().graphs_executed, 0);

  EXPECT_FALSE(Tensor().defined());
  EXPECT_EQ(Tensor().to_string(), "Tensor(undefined)");
}

TEST(ApiTest, Item) {
  EXPECT_EQ(Tensor::from_vector(std::vector<float>{2.5f}, {}).item<float>(), 2.5f);
  EXPECT_EQ(Tensor::from_vector(std::vector<float>{2.5f}, {1, 1}).item<int>(), 2);
  EXPECT_EQ(Tensor::from_vector(std::vector<float>{2.5f}, {1}).item<double>(), 2.5);
  EXPECT_EQ(Tensor::from_vector(std::vector<int64_t>{(int64_t{1} << 62) + 1}).item<int64_t>(), (int64_t{1} << 62) + 1);
  EXPECT_EQ(Tensor::from_vector(std::vector<int32_t>{-7}).item<int32_t>(), -7);
  EXPECT_TRUE(Tensor::from_vector(std::vector<bool>{true}).item<bool>());
  EXPECT_FALSE(Tensor::from_vector(std::vector<double>{0.0}).item<bool>());
  // item of a pending tensor materialises it.
  EXPECT_EQ((Tensor::from_vector(std::vector<double>{1.5}) * 4.0).item<double>(), 6.0);
  EXPECT_EQ(lazyjit::full({1}, 9, DType::Int32).item<int>(), 9);
}

TEST(ApiTest, FullZerosOnesArange) {
  EXPECT_THAT(lazyjit::full({2, 2}, 7, DType::Int32).to_vector<int32_t>(), ElementsAre(7, 7, 7, 7));
  EXPECT_THAT(lazyjit::full({3}, 0.5).to_vector<float>(), ElementsAre(0.5f, 0.5f, 0.5f));
  EXPECT_THAT(lazyjit::full({2}, 2.9, DType::Int64).to_vector<int64_t>(), ElementsAre(2, 2));
  EXPECT_THAT(lazyjit::full({2}, 3, DType::Bool).to_vector<bool>(), ElementsAre(true, true));
  EXPECT_THAT(lazyjit::full({}, -1.0, DType::Float64).to_vector<double>(), ElementsAre(-1.0));
  EXPECT_THAT(lazyjit::zeros({2, 3}).to_vector<float>(), ElementsAre(0, 0, 0, 0, 0, 0));
  EXPECT_EQ(lazyjit::zeros({2, 3}).dtype(), DType::Float32);
  EXPECT_THAT(lazyjit::zeros({2}, DType::Bool).to_vector<bool>(), ElementsAre(false, false));
  EXPECT_THAT(lazyjit::ones({3}, DType::Float64).to_vector<double>(), ElementsAre(1, 1, 1));
  EXPECT_THAT(lazyjit::ones({1, 2}, DType::Int32).to_vector<int32_t>(), ElementsAre(1, 1));
  EXPECT_THAT(lazyjit::arange(5).to_vector<int64_t>(), ElementsAre(0, 1, 2, 3, 4));
  EXPECT_EQ(lazyjit::arange(5).dtype(), DType::Int64);
  EXPECT_THAT(lazyjit::arange(4, DType::Float32).to_vector<float>(), ElementsAre(0, 1, 2, 3));
  EXPECT_THAT(lazyjit::arange(3, DType::Int32).to_vector<int32_t>(), ElementsAre(0, 1, 2));
  EXPECT_TRUE(lazyjit::arange(0).to_vector<int64_t>().empty());
  EXPECT_TRUE(lazyjit::zeros({0, 5}).to_vector<float>().empty());
}

TEST(ApiTest, ToConvertsDtypes) {
  Tensor f = floats({2.7f, -2.7f, 0.0f, std::nanf("")}, {4});
  EXPECT_THAT(floats({2.7f, -2.7f, 0.0f}, {3}).to(DType::Int32).to_vector<int32_t>(), ElementsAre(2, -2, 0));
  EXPECT_THAT(f.to(DType::Bool).to_vector<bool>(), ElementsAre(true, true, false, true));  // NaN is true
  EXPECT_THAT(f.to(DType::Float64).to_vector<double>().at(0), static_cast<double>(2.7f));
  Tensor b = Tensor::from_vector(std::vector<bool>{true, false});
  EXPECT_THAT(b.to(DType::Float32).to_vector<float>(), ElementsAre(1.0f, 0.0f));
  EXPECT_THAT(b.to(DType::Int64).to_vector<int64_t>(), ElementsAre(1, 0));
  Tensor i = Tensor::from_vector(std::vector<int64_t>{(int64_t{1} << 32) + 5, -1});
  EXPECT_THAT(i.to(DType::Int32).to_vector<int32_t>(), ElementsAre(5, -1));  // wraps
  EXPECT_EQ(f.to(DType::Float32).to_vector<float>().at(0), 2.7f);
  EXPECT_EQ(f.to(DType::Float64).dtype(), DType::Float64);
}

TEST(ApiTest, ArithmeticBroadcasting) {
  Tensor a = floats(ramp(6, 1), {2, 3});
  Tensor row = floats({10, 20, 30}, {3});
  Tensor col = floats({100, 200}, {2, 1});
  EXPECT_THAT((a + row).to_vector<float>(), ElementsAre(11, 22, 33, 14, 25, 36));
  EXPECT_THAT((a * col).to_vector<float>(), ElementsAre(100, 200, 300, 800, 1000, 1200));
  EXPECT_THAT((row - col).to_vector<float>(), ElementsAre(-90, -80, -70, -190, -180, -170));
  EXPECT_THAT((a / row).to_vector<float>().at(5), 6.0f / 30.0f);
  EXPECT_THAT((-a).to_vector<float>(), ElementsAre(-1, -2, -3, -4, -5, -6));
  EXPECT_THAT((1.0 - a).to_vector<float>(), ElementsAre(0, -1, -2, -3, -4, -5));
  EXPECT_THAT((12 / a).to_vector<float>(), ElementsAre(12, 6, 4, 3, 2.4f, 2));
  EXPECT_THAT((2 * a + 1).to_vector<float>(), ElementsAre(3, 5, 7, 9, 11, 13));

  // A rank-3 broadcast with odd sizes: [3,1,5] + [4,1] -> [3,4,5].
  Tensor x = floats(ramp(15), {3, 1, 5});
  Tensor y = floats(ramp(4, 0, 100), {4, 1});
  std::vector<float> got = (x + y).to_vector<float>();
  ASSERT_EQ(got.size(), 60u);
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 4; ++j) {
      for (int k = 0; k < 5; ++k) EXPECT_EQ(got[(i * 4 + j) * 5 + k], float(i * 5 + k) + 100.0f * j);
    }
  }
}

TEST(ApiTest, ComparisonsLogicWhereAndUnary) {
  Tensor a = floats({1, 2, 3, 4}, {4});
  Tensor b = floats({4, 2, 2, 4}, {4});
  EXPECT_THAT(lazyjit::lt(a, b).to_vector<bool>(), ElementsAre(true, false, false, false));
  EXPECT_THAT(lazyjit::ge(a, 3).to_vector<bool>(), ElementsAre(false, false, true, true));
  EXPECT_THAT(lazyjit::eq(a, b).to_vector<bool>(), ElementsAre(false, true, false, true));
  Tensor m = lazyjit::logical_and(lazyjit::gt(a, 1), lazyjit::lt(a, 4));
  EXPECT_THAT(m.to_vector<bool>(), ElementsAre(false, true, true, false));
  EXPECT_THAT(lazyjit::where(m, a, -1.0).to_vector<float>(), ElementsAre(-1, 2, 3, -1));
  EXPECT_THAT(lazyjit::where(m, 0, b).to_vector<float>(), ElementsAre(4, 0, 0, 4));
  EXPECT_THAT(lazyjit::logical_not(m).to_vector<bool>(), ElementsAre(true, false, false, true));
  EXPECT_THAT(lazyjit::maximum(a, b).to_vector<float>(), ElementsAre(4, 2, 3, 4));
  EXPECT_THAT(lazyjit::relu(a - 2.5).to_vector<float>(), ElementsAre(0, 0, 0.5f, 1.5f));
  EXPECT_THAT(lazyjit::clamp(a, 2, 3).to_vector<float>(), ElementsAre(2, 2, 3, 3));
  EXPECT_THAT(lazyjit::clamp(a, 3, 2).to_vector<float>(), ElementsAre(2, 2, 2, 2));  // lo > hi: hi
  EXPECT_THAT(lazyjit::abs(-a).to_vector<float>(), ElementsAre(1, 2, 3, 4));
  EXPECT_THAT(lazyjit::pow(a, 2).to_vector<float>(), ElementsAre(1, 4, 9, 16));
  EXPECT_NEAR(lazyjit::sqrt(a).to_vector<float>()[3], 2.0f, 1e-6);
  EXPECT_NEAR(lazyjit::exp(lazyjit::log(a)).to_vector<float>()[2], 3.0f, 1e-5);
  EXPECT_NEAR(lazyjit::tanh(a).to_vector<float>()[0], std::tanh(1.0f), 1e-6);
  EXPECT_NEAR(lazyjit::gelu(a).to_vector<float>()[0], 0.8413447f, 1e-6);
  EXPECT_NEAR(lazyjit::sigmoid(a).to_vector<float>()[0], 1.0f / (1.0f + std::exp(-1.0f)), 1e-6);

  Tensor ints = Tensor::from_vector(std::vector<int32_t>{2, -3, 1, -1});
  EXPECT_THAT(lazyjit::pow(ints, -1).to_vector<int32_t>(), ElementsAre(0, 0, 1, -1));
  EXPECT_THAT(lazyjit::pow(ints, 3).to_vector<int32_t>(), ElementsAre(8, -27, 1, -1));
  Tensor big = Tensor::from_vector(std::vector<int32_t>{std::numeric_limits<int32_t>::max()});
  EXPECT_EQ((big + 1).item<int32_t>(), std::numeric_limits<int32_t>::min());  // wraps

  const float nan = std::nanf("");
  Tensor n = floats({nan, 1.0f}, {2});
  Tensor one = floats({1.0f, nan}, {2});
  std::vector<float> mx = lazyjit::maximum(n, one).to_vector<float>();
  EXPECT_TRUE(std::isnan(mx[0]));
  EXPECT_TRUE(std::isnan(mx[1]));
  EXPECT_TRUE(std::isnan(lazyjit::clamp(n, 0, 2).to_vector<float>()[0]));
}

TEST(ApiTest, WeakScalarPromotion) {
  Tensor f32 = floats({1, 2}, {2});
  Tensor f64 = Tensor::from_vector(std::vector<double>{1, 2});
  Tensor i32 = Tensor::from_vector(std::vector<int32_t>{1, 2});
  Tensor i64 = Tensor::from_vector(std::vector<int64_t>{1, 2});
  Tensor b = Tensor::from_vector(std::vector<bool>{true, false});

  EXPECT_EQ((f32 * 0.5).dtype(), DType::Float32);
  EXPECT_EQ((f32 * 2).dtype(), DType::Float32);
  EXPECT_EQ((f64 * 0.5f).dtype(), DType::Float64);
  EXPECT_EQ((i32 * 0.5).dtype(), DType::Float32);
  EXPECT_THAT((i32 * 0.5).to_vector<float>(), ElementsAre(0.5f, 1.0f));
  EXPECT_EQ((i32 + 1).dtype(), DType::Int32);
  // A weak integer never widens the tensor; one that does not fit is an error, as in PyTorch.
  EXPECT_EQ(error_of([&] { i32 + (int64_t{1} << 40); }), "add: scalar 1099511627776 does not fit int32");
  EXPECT_EQ((i64 + 1).dtype(), DType::Int64);
  EXPECT_EQ((i64 * 0.5).dtype(), DType::Float32);
  EXPECT_EQ((b + 1).dtype(), DType::Int64);
  EXPECT_THAT((b + 1).to_vector<int64_t>(), ElementsAre(2, 1));
  EXPECT_EQ((b * 1.5).dtype(), DType::Float32);
  EXPECT_EQ((i32 + true).dtype(), DType::Int32);
  EXPECT_EQ((i32 / 2).dtype(), DType::Float32);  // true division
  EXPECT_THAT((i32 / 2).to_vector<float>(), ElementsAre(0.5f, 1.0f));
  EXPECT_EQ((1.0 - i64).dtype(), DType::Float32);
  // Tensors promote each other normally.
  EXPECT_EQ((i32 + f64).dtype(), DType::Float64);
  EXPECT_EQ((i32 + i64).dtype(), DType::Int64);
  EXPECT_EQ((b + i32).dtype(), DType::Int32);
  EXPECT_EQ((b + b).dtype(), DType::Bool);
  EXPECT_THAT((b + b).to_vector<bool>(), ElementsAre(true, false));
}

// ---------------------------------------------------------------------------------------------
// Handles and in-place updates

TEST(ApiTest, InPlaceKeepsIdentityAndOtherHandlesSeeIt) {
  Tensor x = floats({1, 2, 3}, {3});
  Tensor alias = x;
  EXPECT_TRUE(alias.is_same(x));
  Tensor& self = (x += 1);
  EXPECT_EQ(&self, &x);
  EXPECT_TRUE(alias.is_same(x));
  EXPECT_THAT(alias.to_vector<float>(), ElementsAre(2, 3, 4));
  alias *= floats({2, 2, 2}, {3});
  EXPECT_THAT(x.to_vector<float>(), ElementsAre(4, 6, 8));
  x -= floats({1}, {1});  // broadcasting within the tensor's shape
  x /= 2;
  EXPECT_THAT(alias.to_vector<float>(), ElementsAre(1.5f, 2.5f, 3.5f));

  Tensor other = floats({1, 2, 3}, {3});
  EXPECT_FALSE(other.is_same(x));

  // Integer tensors accept integer updates; the result is cast back to the tensor's dtype.
  Tensor i = Tensor::from_vector(std::vector<int32_t>{1, 2});
  i += Tensor::from_vector(std::vector<int64_t>{10, 20});
  EXPECT_EQ(i.dtype(), DType::Int32);
  EXPECT_THAT(i.to_vector<int32_t>(), ElementsAre(11, 22));
  Tensor f = floats({1, 2}, {2});
  f += Tensor::from_vector(std::vector<double>{0.5, 0.25});
  EXPECT_EQ(f.dtype(), DType::Float32);
  EXPECT_THAT(f.to_vector<float>(), ElementsAre(1.5f, 2.25f));
}

TEST(ApiTest, ValueReadTwiceAroundAnInPlaceUpdate) {
  // Read before and after: y keeps the value computed from the old x.
  Tensor x = floats({1, 2, 3}, {3});
  Tensor y = x * 2;
  EXPECT_THAT(y.to_vector<float>(), ElementsAre(2, 4, 6));
  x += 1;
  EXPECT_THAT(y.to_vector<float>(), ElementsAre(2, 4, 6));
  EXPECT_THAT(x.to_vector<float>(), ElementsAre(2, 3, 4));
  EXPECT_THAT(y.to_vector<float>(), ElementsAre(2, 4, 6));

  // y still pending when x changes.
  Tensor x2 = floats({1, 2, 3}, {3});
  Tensor y2 = x2 * 2;
  x2 += 1;
  EXPECT_THAT(y2.to_vector<float>(), ElementsAre(2, 4, 6));
  EXPECT_THAT(x2.to_vector<float>(), ElementsAre(2, 3, 4));

  // Both pending, synced together, and again at the step barrier.
  Tensor x3 = lazyjit::arange(3, DType::Float32);
  Tensor y3 = x3 * 2;
  x3 += 10;
  lazyjit::sync({x3, y3});
  EXPECT_THAT(y3.to_vector<float>(), ElementsAre(0, 2, 4));
  EXPECT_THAT(x3.to_vector<float>(), ElementsAre(10, 11, 12));
  x3 += 1;
  lazyjit::mark_step();
  EXPECT_THAT(y3.to_vector<float>(), ElementsAre(0, 2, 4));
  EXPECT_THAT(x3.to_vector<float>(), ElementsAre(11, 12, 13));
}

TEST(ApiTest, RepeatedUpdatesAtTheStepBarrier) {
  // A training-loop shape: w -= lr * g, with a changing learning rate, many steps.
  Tensor w = floats({1, 2, 3, 4}, {4});
  Tensor g = floats({1, 1, 1, 1}, {4});
  Tensor before = w * 1;
  float expected = 1.0f;
  for (int step = 0; step < 5; ++step) {
    const double lr = 0.5 / (step + 1);
    w -= lr * g;
    lazyjit::mark_step();
    expected -= static_cast<float>(lr);
  }
  EXPECT_FLOAT_EQ(w.to_vector<float>()[0], expected);
  EXPECT_THAT(before.to_vector<float>(), ElementsAre(1, 2, 3, 4));
  EXPECT_THAT(g.to_vector<float>(), ElementsAre(1, 1, 1, 1));
}

TEST(ApiTest, CopyWithBroadcastingAndConversion) {
  Tensor dst = lazyjit::zeros({2, 3});
  Tensor alias = dst;
  dst.copy_(floats({1, 2, 3}, {3}));
  EXPECT_THAT(alias.to_vector<float>(), ElementsAre(1, 2, 3, 1, 2, 3));
  dst.copy_(floats({7, 8}, {2, 1}));
  EXPECT_THAT(dst.to_vector<float>(), ElementsAre(7, 7, 7, 8, 8, 8));
  dst.copy_(Tensor::from_vector(std::vector<int64_t>{5}, {}));
  EXPECT_THAT(dst.to_vector<float>(), ElementsAre(5, 5, 5, 5, 5, 5));
  EXPECT_EQ(dst.dtype(), DType::Float32);

  Tensor ints = Tensor::from_vector(std::vector<int32_t>{0, 0});
  ints.copy_(floats({2.9f, -1.5f}, {2}));  // copy_ converts (truncating) where += would refuse
  EXPECT_THAT(ints.to_vector<int32_t>(), ElementsAre(2, -1));

  // The source's later changes do not reach the copy.
  Tensor src = floats({1, 1, 1}, {3});
  Tensor target = lazyjit::zeros({3});
  target.copy_(src);
  src += 5;
  EXPECT_THAT(target.to_vector<float>(), ElementsAre(1, 1, 1));
}

TEST(ApiTest, LargeTensorsRunOnThePool) {
  const int64_t n = 200003;  // past the executor's inline limit, odd
  Tensor x = lazyjit::arange(n, DType::Float32);
  std::vector<float> out = (x * 2 + 1).to_vector<float>();
  ASSERT_EQ(static_cast<int64_t>(out.size()), n);
  int64_t wrong = 0;
  for (int64_t i = 0; i < n; ++i) wrong += out[i] != 2.0f * static_cast<float>(i) + 1.0f;
  EXPECT_EQ(wrong, 0);
  Tensor m = Tensor::from_vector(ramp(3 * 70001), {70001, 3}) + floats({0, 10, 20}, {3});
  std::vector<float> mv = m.to_vector<float>();
  EXPECT_EQ(mv[3 * 70000 + 2], static_cast<float>(3 * 70000 + 2) + 20.0f);
}

// ---------------------------------------------------------------------------------------------
// Materialisation and dumps

TEST(ApiTest, MarkStepMaterialisesPendingLiveTensors) {
  Tensor x = floats({1, 2, 3}, {3});
  Tensor a = x + 1;
  Tensor b = a * 3;
  Tensor c = lazyjit::full({2}, 4.0, DType::Float64);
  lazyjit::reset_metrics();
  lazyjit::mark_step();
  EXPECT_EQ(lazyjit::metrics().graphs_executed, 1);
  EXPECT_EQ(lazyjit::metrics().graphs_traced, 1);
  // Reading them now runs nothing.
  EXPECT_THAT(a.to_vector<float>(), ElementsAre(2, 3, 4));
  EXPECT_THAT(b.to_vector<float>(), ElementsAre(6, 9, 12));
  EXPECT_THAT(c.to_vector<double>(), ElementsAre(4, 4));
  EXPECT_EQ(lazyjit::metrics().graphs_executed, 1);
  lazyjit::mark_step();  // nothing pending
  EXPECT_EQ(lazyjit::metrics().graphs_executed, 1);
}

TEST(ApiTest, SyncMaterialisesInOneGraph) {
  Tensor x = floats({1, 2}, {2});
  Tensor a = x * 2;
  Tensor b = x - 1;
  lazyjit::reset_metrics();
  lazyjit::sync({a, b, a});
  EXPECT_EQ(lazyjit::metrics().graphs_executed, 1);
  EXPECT_THAT(a.to_vector<float>(), ElementsAre(2, 4));
  EXPECT_THAT(b.to_vector<float>(), ElementsAre(0, 1));
  EXPECT_EQ(lazyjit::metrics().graphs_executed, 1);
  EXPECT_EQ(lazyjit::metrics().bytes_out, 16);
  lazyjit::sync({});
  lazyjit::sync({a});  // already materialised
  EXPECT_EQ(lazyjit::metrics().graphs_executed, 1);
}

TEST(ApiTest, DroppedTensorsAreNotComputed) {
  Tensor x = floats({1, 2}, {2});
  lazyjit::reset_metrics();
  { Tensor unused = lazyjit::exp(x); }
  lazyjit::mark_step();
  EXPECT_EQ(lazyjit::metrics().graphs_executed, 0);
}

TEST(ApiTest, DumpLazyIrNamesTheOps) {
  Tensor x = floats(ramp(32), {4, 8});
  Tensor y = lazyjit::gelu(x * 0.5 + 1);
  lazyjit::reset_metrics();
  const std::string text = lazyjit::dump({y}, lazyjit::DumpFormat::LazyIr);
  EXPECT_THAT(text, HasSubstr("graph {"));
  EXPECT_THAT(text, HasSubstr("= parameter 0 : float32[4,8]"));
  EXPECT_THAT(text, HasSubstr("= scalar 0.5 : float32[]"));
  EXPECT_THAT(text, HasSubstr("= mul %0, %1 : float32[4,8]"));
  EXPECT_THAT(text, HasSubstr("= add "));
  EXPECT_THAT(text, HasSubstr("= gelu "));
  EXPECT_THAT(text, HasSubstr("return %"));
  EXPECT_THAT(text, HasSubstr("// key "));
  // Dumping runs and compiles nothing.
  EXPECT_EQ(lazyjit::metrics().graphs_executed, 0);
  EXPECT_EQ(lazyjit::metrics().compiles, 0);
  EXPECT_THAT(y.to_vector<float>().at(0), testing::FloatNear(0.8413447f, 1e-6));
}

TEST(ApiTest, DumpLlvmIrAndAssembly) {
  lazyjit::reset_metrics();
  Tensor x = floats(ramp(32), {4, 8});
  Tensor y = x * 0.5 + floats(ramp(8), {8});
  const std::string llvm_ir = lazyjit::dump({y}, lazyjit::DumpFormat::LlvmIr);
  EXPECT_THAT(llvm_ir, HasSubstr("define i32 @lj_"));
  EXPECT_THAT(llvm_ir, HasSubstr("fmul float"));
  const std::string assembly = lazyjit::dump({y}, lazyjit::DumpFormat::Assembly);
  EXPECT_FALSE(assembly.empty());
  EXPECT_THAT(assembly, HasSubstr("lj_"));
  EXPECT_EQ(lazyjit::metrics().compiles, 0);
}

TEST(ApiTest, DumpOptimizedLlvmIrIsVectorisedForAvx512) {
  Tensor x = floats(ramp(64), {64});
  Tensor y = x * 2 + 1;
  const std::string text = lazyjit::dump({y}, lazyjit::DumpFormat::OptimizedLlvmIr);
  EXPECT_THAT(text, HasSubstr("define i32 @lj_"));
  if (!host_has_avx512f()) GTEST_SKIP() << "the host has no AVX-512: no 16-wide float vectors expected";
  EXPECT_THAT(text, HasSubstr("<16 x float>"));
}

TEST(ApiTest, MetricsReportNamesTheCounters) {
  const std::string report = lazyjit::metrics_report();
  for (const char* name : {"compiles", "cache_hits", "cache_misses", "graphs_executed", "bytes_allocated", "target"}) {
    EXPECT_THAT(report, HasSubstr(name));
  }
}

TEST(ApiTest, CountersOfOneMaterialisation) {
  lazyjit::reset_metrics();
  Tensor x = floats({1, 2, 3, 4}, {4});
  Tensor y = x * 2 + 1;  // two ops traced
  const lazyjit::Metrics traced = lazyjit::metrics();
  EXPECT_EQ(traced.bytes_in, 16);
  EXPECT_EQ(traced.nodes_traced, 2);
  EXPECT_EQ(traced.graphs_executed, 0);
  EXPECT_THAT(y.to_vector<float>(), ElementsAre(3, 5, 7, 9));
  const lazyjit::Metrics m = lazyjit::metrics();
  EXPECT_EQ(m.graphs_traced, 1);
  EXPECT_EQ(m.graphs_executed, 1);
  EXPECT_EQ(m.kernels_launched, 1);  // fused: one kernel for the whole chain
  EXPECT_EQ(m.bytes_out, 16);
  EXPECT_EQ(m.bytes_allocated + m.bytes_reused, 2 * 64);  // input and result, one 64-byte block each
  EXPECT_EQ(m.donations, 0);
}

TEST(ApiTest, SteadyStateStepsReuseBuffers) {
  auto step = [] {
    Tensor x = floats(ramp(1000), {10, 100});
    Tensor y = lazyjit::relu(x - 500) * 0.5;
    EXPECT_EQ(y.to_vector<float>().back(), 249.5f);
  };
  step();  // first step: fresh memory, and the buffers go back to the pool
  lazyjit::reset_metrics();
  step();
  step();
  EXPECT_EQ(lazyjit::metrics().bytes_allocated, 0);
  EXPECT_GT(lazyjit::metrics().bytes_reused, 0);
}

TEST(ApiTest, ToSameDtypeIsANewTensor) {
  Tensor x = floats({1, 2}, {2});
  Tensor y = x.to(DType::Float32);
  EXPECT_FALSE(y.is_same(x));
  y += 1;
  EXPECT_THAT(x.to_vector<float>(), ElementsAre(1, 2));
  EXPECT_THAT(y.to_vector<float>(), ElementsAre(2, 3));
  // Also from a pending value: the two tensors share IR until one changes.
  Tensor p = x * 3;
  Tensor q = p.to(DType::Float32);
  q -= 1;
  EXPECT_THAT(p.to_vector<float>(), ElementsAre(3, 6));
  EXPECT_THAT(q.to_vector<float>(), ElementsAre(2, 5));
}

TEST(ApiTest, ThreadsMaterialiseTheirOwnTensors) {
  constexpr int kThreads = 4;
  std::vector<std::vector<float>> results(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&results, t] {
      for (int rep = 0; rep < 5; ++rep) {
        Tensor x = floats(ramp(64 * (t + 1), static_cast<float>(t)), {t + 1, 64});
        Tensor y = lazyjit::sigmoid(x * 0.0) + x * 2;
        results[t] = y.to_vector<float>();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (int t = 0; t < kThreads; ++t) {
    ASSERT_EQ(results[t].size(), static_cast<size_t>(64 * (t + 1)));
    EXPECT_EQ(results[t][0], 0.5f + 2.0f * static_cast<float>(t)) << "thread " << t;
    EXPECT_EQ(results[t].back(), 0.5f + 2.0f * (static_cast<float>(t) + 64.0f * (t + 1) - 1)) << "thread " << t;
  }
}

// ---------------------------------------------------------------------------------------------
// Recompilation, by the counters

// Tests of the compile cache: on compiled code.
class CacheTest : public ::testing::Test {
 protected:
  lazyjit::tests::ScopedTier compiled_{lazyjit::Tier::Compile};
  void SetUp() override {
    // Tests may share a process (running the binary directly): start from an empty cache.
    lazyjit::runtime::Runtime::get().cache().clear();
    lazyjit::reset_metrics();
  }
};

Tensor program(const Tensor& x, const Tensor& y) { return lazyjit::tanh(x * y + 1) - y; }

TEST_F(CacheTest, SameProgramTwiceCompilesOnce) {
  for (int i = 0; i < 2; ++i) {
    Tensor x = floats(ramp(12, i), {3, 4});
    Tensor y = floats(ramp(4), {4});
    program(x, y).to_vector<float>();
  }
  const lazyjit::Metrics m = lazyjit::metrics();
  EXPECT_EQ(m.compiles, 1);
  EXPECT_EQ(m.cache_misses, 1);
  EXPECT_EQ(m.cache_hits, 1);
  EXPECT_EQ(m.graphs_executed, 2);
}

TEST_F(CacheTest, NewSizeDoesNotRecompile) {
  std::vector<std::vector<float>> results;
  for (int64_t rows : {3, 17, 1000}) {
    Tensor x = floats(ramp(rows * 4, 0, 0.01f), {rows, 4});
    Tensor y = floats(ramp(4), {4});
    results.push_back(program(x, y).to_vector<float>());
  }
  EXPECT_EQ(lazyjit::metrics().compiles, 1);
  EXPECT_EQ(lazyjit::metrics().cache_hits, 2);
  // And the reused code computes the new sizes right.
  ASSERT_EQ(results[2].size(), 4000u);
  for (int64_t i : {0, 5, 1234, 3999}) {
    const float x = 0.01f * static_cast<float>(i);
    const float y = static_cast<float>(i % 4);
    EXPECT_NEAR(results[2][i], std::tanh(x * y + 1.0f) - y, 1e-6) << "element " << i;
  }
}

TEST_F(CacheTest, ScalarValueChangeDoesNotRecompile) {
  Tensor x = floats({1, 2, 3, 4}, {4});
  EXPECT_THAT((x * 0.5).to_vector<float>(), ElementsAre(0.5f, 1, 1.5f, 2));
  EXPECT_THAT((x * 0.25).to_vector<float>(), ElementsAre(0.25f, 0.5f, 0.75f, 1));
  EXPECT_THAT((x * 3).to_vector<float>(), ElementsAre(3, 6, 9, 12));
  EXPECT_EQ(lazyjit::metrics().compiles, 1);
  EXPECT_EQ(lazyjit::metrics().cache_hits, 2);
  EXPECT_THAT(lazyjit::full({2}, 1.5).to_vector<float>(), ElementsAre(1.5f, 1.5f));
  EXPECT_THAT(lazyjit::full({2}, -4.0).to_vector<float>(), ElementsAre(-4, -4));
  EXPECT_EQ(lazyjit::metrics().compiles, 2);
}

TEST_F(CacheTest, DtypeChangeRecompiles) {
  Tensor x32 = floats({1, 2}, {2});
  Tensor x64 = Tensor::from_vector(std::vector<double>{1, 2});
  (x32 * 0.5).to_vector<float>();
  (x64 * 0.5).to_vector<double>();
  EXPECT_EQ(lazyjit::metrics().compiles, 2);
  EXPECT_EQ(lazyjit::metrics().cache_hits, 0);
  EXPECT_EQ(lazyjit::metrics().cache_misses, 2);
}

TEST_F(CacheTest, EvictedGraphsRecompileAndAreCounted) {
  // LAZYJIT_CACHE_SIZE sets the capacity at start; here the runtime's cache is shrunk directly.
  lazyjit::runtime::Runtime::get().cache().set_capacity(1);
  Tensor x = floats({1, 2}, {2});
  EXPECT_THAT((x + 1).to_vector<float>(), ElementsAre(2, 3));
  EXPECT_THAT((x - 1).to_vector<float>(), ElementsAre(0, 1));  // evicts x + 1
  EXPECT_THAT((x + 2).to_vector<float>(), ElementsAre(3, 4));  // compiles again
  lazyjit::runtime::Runtime::get().cache().set_capacity(1024);
  const lazyjit::Metrics m = lazyjit::metrics();
  EXPECT_EQ(m.compiles, 3);
  EXPECT_EQ(m.evictions, 2);
  EXPECT_EQ(m.cache_hits, 0);
}

TEST_F(CacheTest, BroadcastPatternChangeRecompiles) {
  Tensor x = floats(ramp(6), {2, 3});
  (x + floats({1, 2, 3}, {1, 3})).to_vector<float>();
  (x + floats({1, 2}, {2, 1})).to_vector<float>();
  (x + floats(ramp(6), {2, 3})).to_vector<float>();
  EXPECT_EQ(lazyjit::metrics().compiles, 3);
}

// ---------------------------------------------------------------------------------------------
// Errors: each user mistake throws Error with a message naming the op and the values

TEST(ApiErrorTest, MismatchedShapes) {
  Tensor a = lazyjit::zeros({2, 3});
  Tensor b = lazyjit::zeros({4, 3});
  EXPECT_EQ(error_of([&] { a + b; }), "add: shapes [2,3] and [4,3] cannot be broadcast (dim 0: 2 vs 4)");
  EXPECT_EQ(error_of([&] { lazyjit::where(lazyjit::gt(a, 0), a, b); }),
            "where: shapes [2,3] and [4,3] cannot be broadcast (dim 0: 2 vs 4)");
  EXPECT_EQ(error_of([&] { lazyjit::lt(lazyjit::zeros({3}), lazyjit::zeros({2})); }),
            "lt: shapes [3] and [2] cannot be broadcast (dim 0: 3 vs 2)");
}

TEST(ApiErrorTest, ToVectorWrongDtype) {
  Tensor i = Tensor::from_vector(std::vector<int32_t>{1, 2});
  EXPECT_EQ(error_of([&] { i.to_vector<float>(); }),
            "to_vector: tensor has dtype int32, asked for float32 (convert with .to(DType) first)");
  EXPECT_EQ(error_of([&] { lazyjit::gt(i, 0).to_vector<int32_t>(); }),
            "to_vector: tensor has dtype bool, asked for int32 (convert with .to(DType) first)");
  EXPECT_EQ(error_of([&] { i.to(DType::Float64).to_vector<float>(); }),
            "to_vector: tensor has dtype float64, asked for float32 (convert with .to(DType) first)");
}

TEST(ApiErrorTest, ItemOnManyElements) {
  EXPECT_EQ(error_of([] { lazyjit::zeros({2, 3}).item<float>(); }), "item: tensor of shape [2,3] has 6 elements, not 1");
  EXPECT_EQ(error_of([] { lazyjit::zeros({0}).item<float>(); }), "item: tensor of shape [0] has 0 elements, not 1");
}

TEST(ApiErrorTest, FromVectorCountMismatch) {
  EXPECT_EQ(error_of([] { Tensor::from_vector(std::vector<float>(5), {2, 3}); }),
            "from_vector: 5 elements do not fill shape [2,3] (6 elements)");
  EXPECT_EQ(error_of([] { Tensor::from_vector(std::vector<int64_t>{1, 2}, {}); }),
            "from_vector: 2 elements do not fill shape [] (1 elements)");
  EXPECT_EQ(error_of([] { Tensor::from_vector(std::vector<float>(2), {-1, -2}); }),
            "from_vector: dim 0 of shape [-1,-2] is negative");
  EXPECT_EQ(error_of([] { Tensor::from_vector(std::vector<float>(1), std::vector<int64_t>(65, 1)); }),
            "from_vector: rank 65 is past the maximum of 64");
}

TEST(ApiErrorTest, NegativeDimInCreation) {
  EXPECT_EQ(error_of([] { lazyjit::full({2, -1}, 1.0); }), "full: dim 1 of shape [2,-1] is negative");
  EXPECT_EQ(error_of([] { lazyjit::zeros({-3}); }), "zeros: dim 0 of shape [-3] is negative");
  EXPECT_EQ(error_of([] { lazyjit::arange(-1); }), "arange: n must be >= 0, got -1");
  EXPECT_EQ(error_of([] { lazyjit::arange(3, DType::Bool); }), "arange: dtype bool is not supported");
}

TEST(ApiErrorTest, UndefinedTensor) {
  Tensor undefined;
  Tensor x = lazyjit::zeros({2});
  EXPECT_EQ(error_of([&] { x + undefined; }), "add: an operand is an undefined tensor");
  EXPECT_EQ(error_of([&] { undefined * 2; }), "mul: an operand is an undefined tensor");
  EXPECT_EQ(error_of([&] { lazyjit::exp(undefined); }), "exp: an operand is an undefined tensor");
  EXPECT_EQ(error_of([&] { lazyjit::where(undefined, x, x); }), "where: an operand is an undefined tensor");
  EXPECT_EQ(error_of([&] { undefined.shape(); }), "shape: tensor is undefined");
  EXPECT_EQ(error_of([&] { undefined.dtype(); }), "dtype: tensor is undefined");
  EXPECT_EQ(error_of([&] { undefined.item<float>(); }), "item: tensor is undefined");
  EXPECT_EQ(error_of([&] { undefined.to(DType::Int32); }), "to: tensor is undefined");
  EXPECT_EQ(error_of([&] { undefined += x; }), "add_: tensor is undefined");
  EXPECT_EQ(error_of([&] { undefined.copy_(x); }), "copy_: tensor is undefined");
  EXPECT_EQ(error_of([&] { x.copy_(undefined); }), "copy_: source tensor is undefined");
  EXPECT_EQ(error_of([&] { lazyjit::sync({x, undefined}); }), "sync: tensor 1 is undefined");
  EXPECT_EQ(error_of([&] { lazyjit::dump({undefined}, lazyjit::DumpFormat::LazyIr); }), "dump: tensor 0 is undefined");
}

// Regression: to_vector on an undefined tensor used to name numel(), which it calls first.
TEST(ApiErrorTest, ToVectorOnUndefinedNamesToVector) {
  Tensor undefined;
  EXPECT_EQ(error_of([&] { undefined.to_vector<float>(); }), "to_vector: tensor is undefined");
}

// Regression: arange's n and broadcast results used to skip the element-count check; past
// 2^60 elements the byte size wrapped, the output buffer got 64 bytes and the kernel wrote
// far past it. Both are now rejected when traced.
TEST(ApiErrorTest, HugeShapesAreRejectedWhenTraced) {
  EXPECT_THAT(error_of([] { lazyjit::arange(int64_t{1} << 62); }), HasSubstr("arange:"));
  EXPECT_THAT(error_of([] { lazyjit::arange(int64_t{1} << 62); }), HasSubstr("too many elements"));
  const int64_t n = int64_t{1} << 31;
  EXPECT_THAT(error_of([&] { lazyjit::full({n, 1}, 1.0) + lazyjit::full({1, n}, 2.0); }),
              HasSubstr("too many elements"));
}

TEST(ApiErrorTest, ScalarsMustFitTheirDtype) {
  EXPECT_EQ(error_of([] { lazyjit::full({2}, 1e30, DType::Int64); }), "full: scalar 1e+30 does not fit int64");
  EXPECT_EQ(error_of([] { lazyjit::full({2}, std::nan(""), DType::Int32); }), "full: scalar nan does not fit int32");
  EXPECT_EQ(error_of([] { lazyjit::full({2}, 1e300, DType::Float32); }), "full: scalar 1e+300 does not fit float32");
  EXPECT_EQ(error_of([] { lazyjit::full({2}, INFINITY, DType::Float32); }), "<no error>");
  Tensor x = lazyjit::zeros({2});
  EXPECT_EQ(error_of([&] { lazyjit::clamp(x, -1e39, 1.0); }), "clamp: scalar -1e+39 does not fit float32");
  Tensor big = lazyjit::full({1}, 1e30);
  EXPECT_EQ(error_of([&] { big.item<int64_t>(); }), "item: scalar 1.0000000150474662e+30 does not fit int64");
  EXPECT_EQ(error_of([&] { big.item<float>(); }), "<no error>");
  Tensor undefined;
  EXPECT_EQ(error_of([&] { x += undefined; }), "add_: the other tensor is undefined");
}

TEST(ApiErrorTest, WhereConditionMustBeBool) {
  Tensor x = lazyjit::zeros({3});
  EXPECT_EQ(error_of([&] { lazyjit::where(x, x, x); }), "where: condition must be bool, got float32");
  EXPECT_EQ(error_of([&] { lazyjit::where(lazyjit::arange(3), x, 1.0); }), "where: condition must be bool, got int64");
}

TEST(ApiErrorTest, BoolArithmetic) {
  Tensor b = Tensor::from_vector(std::vector<bool>{true, false});
  EXPECT_EQ(error_of([&] { b - b; }), "sub: bool operands are not supported");
  EXPECT_EQ(error_of([&] { -b; }), "neg: bool operands are not supported");
  EXPECT_EQ(error_of([&] { lazyjit::pow(b, b); }), "pow: bool operands are not supported");
  EXPECT_EQ(error_of([&] { b -= b; }), "sub: bool operands are not supported");
  EXPECT_EQ(error_of([&] { b - true; }), "sub: bool operands are not supported");
  EXPECT_EQ(error_of([&] { b - 1; }), "<no error>");  // an int scalar makes it int64
}

TEST(ApiErrorTest, InPlaceMayNotChangeShapeOrStoreFloatInInt) {
  Tensor x = lazyjit::zeros({3});
  EXPECT_EQ(error_of([&] { x += lazyjit::zeros({2, 3}); }),
            "add_: result shape [2,3] does not match the tensor's shape [3]");
  EXPECT_EQ(error_of([&] { x *= lazyjit::zeros({4}); }),
            "mul: shapes [3] and [4] cannot be broadcast (dim 0: 3 vs 4)");
  Tensor i = Tensor::from_vector(std::vector<int32_t>{1, 2, 3});
  EXPECT_EQ(error_of([&] { i += 0.5; }), "add_: result dtype float32 cannot be stored in place into dtype int32");
  EXPECT_EQ(error_of([&] { i /= 2; }), "div_: result dtype float32 cannot be stored in place into dtype int32");
  EXPECT_EQ(error_of([&] { i -= lazyjit::zeros({3}, DType::Float64); }),
            "sub_: result dtype float64 cannot be stored in place into dtype int32");
  Tensor flags = Tensor::from_vector(std::vector<bool>{true, false});
  EXPECT_EQ(error_of([&] { flags += 1; }), "add_: result dtype int64 cannot be stored in place into dtype bool");
  // Nothing was half-applied.
  EXPECT_THAT(i.to_vector<int32_t>(), ElementsAre(1, 2, 3));
  EXPECT_EQ(x.shape(), (std::vector<int64_t>{3}));
  EXPECT_THAT(x.to_vector<float>(), ElementsAre(0, 0, 0));
}

TEST(ApiErrorTest, CopyMustBroadcastToTheDestination) {
  Tensor dst = lazyjit::zeros({2, 3});
  EXPECT_EQ(error_of([&] { dst.copy_(lazyjit::zeros({4})); }), "copy_: source shape [4] cannot be broadcast to [2,3]");
  EXPECT_EQ(error_of([&] { dst.copy_(lazyjit::zeros({5, 2, 3})); }),
            "copy_: source shape [5,2,3] cannot be broadcast to [2,3]");
  EXPECT_THAT(dst.to_vector<float>(), ElementsAre(0, 0, 0, 0, 0, 0));
}

}  // namespace

namespace {

// One thread updates its own tensor and runs step barriers while others trace, update in
// place and read theirs: the barriers materialise the stepper's tensors alone, every value
// read is right, nothing crashes (TSan runs this too).
TEST(ApiThreadTest, MarkStepRacesWithOtherThreadsTensors) {
  std::atomic<bool> stop{false};
  std::atomic<int> wrong{0};
  std::thread stepper([&] {
    Tensor own = lazyjit::zeros({64});
    for (int steps = 1; !stop; ++steps) {
      own += 1.0;
      lazyjit::mark_step();
      if (own.impl()->pending() || own.to_vector<float>()[9] != static_cast<float>(steps)) ++wrong;
    }
  });
  std::vector<std::thread> workers;
  for (int w = 0; w < 3; ++w) {
    workers.emplace_back([&, w] {
      for (int i = 0; i < 400; ++i) {
        Tensor x = Tensor::from_vector<float>(std::vector<float>(64, static_cast<float>(w)), {64});
        Tensor y = x * 2.0 + 1.0;
        Tensor before = y;  // another handle: sees the update
        Tensor old = y * 1.0;  // computed from the old value: does not
        y += 1.0;
        if (before.to_vector<float>()[5] != 2.0f * w + 2 || old.to_vector<float>()[7] != 2.0f * w + 1) ++wrong;
      }
    });
  }
  for (auto& t : workers) t.join();
  stop = true;
  stepper.join();
  EXPECT_EQ(wrong.load(), 0);
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Tensors over a front end's buffers (tensor_from_data, tensor_data): how the PyTorch front
// end hands the runtime PyTorch's storage.

namespace borrowed {

/// A buffer the test owns, 64-byte aligned, with a counter of live copies.
class Buffer final : public lazyjit::BackendData {
 public:
  Buffer(std::vector<int64_t> shape, size_t offset = 0) : BackendData(DType::Float32, std::move(shape)), offset_(offset) {
    storage_.resize(static_cast<size_t>(numel()) + 32);
  }
  void* data() override {
    auto p = reinterpret_cast<uintptr_t>(storage_.data());
    return reinterpret_cast<float*>((p + 63) / 64 * 64) + offset_;
  }
  float* floats() { return static_cast<float*>(data()); }

 private:
  std::vector<float> storage_;
  size_t offset_;
};

}  // namespace borrowed

TEST(ApiTest, ATensorOverABorrowedBufferReadsItWithoutACopy) {
  auto buffer = std::make_shared<borrowed::Buffer>(std::vector<int64_t>{2, 3});
  for (int i = 0; i < 6; ++i) buffer->floats()[i] = static_cast<float>(i);
  const int64_t bytes_in = lazyjit::metrics().bytes_in;
  const Tensor t = lazyjit::tensor_from_data(buffer);
  EXPECT_EQ(lazyjit::metrics().bytes_in, bytes_in);  // nothing copied in
  EXPECT_EQ(t.shape(), (std::vector<int64_t>{2, 3}));
  EXPECT_THAT((t * 2.0f).to_vector<float>(), ElementsAre(0, 2, 4, 6, 8, 10));
  EXPECT_EQ(lazyjit::tensor_data(t).get(), buffer.get());
}

TEST(ApiTest, TensorDataMaterialisesAPendingTensor) {
  const Tensor t = floats({1, 2, 3}, {3}) + 1.0f;
  const lazyjit::BackendDataPtr data = lazyjit::tensor_data(t);
  ASSERT_NE(data, nullptr);
  const float* p = static_cast<const float*>(data->data());
  EXPECT_EQ(std::vector<float>(p, p + 3), (std::vector<float>{2, 3, 4}));
}

TEST(ApiTest, ABorrowedBufferIsDonatedOnlyWhenNothingElseHoldsIt) {
  // Held by the test too: the update takes a new buffer, the borrowed one keeps its values.
  auto kept = std::make_shared<borrowed::Buffer>(std::vector<int64_t>{4});
  std::fill_n(kept->floats(), 4, 1.0f);
  Tensor a = lazyjit::tensor_from_data(kept);
  a += 1.0f;
  lazyjit::mark_step();
  EXPECT_THAT(a.to_vector<float>(), ElementsAre(2, 2, 2, 2));
  EXPECT_THAT(std::vector<float>(kept->floats(), kept->floats() + 4), ElementsAre(1, 1, 1, 1));
  // Handed over: the step writes the result into it.
  auto given = std::make_shared<borrowed::Buffer>(std::vector<int64_t>{4});
  std::fill_n(given->floats(), 4, 1.0f);
  borrowed::Buffer* raw = given.get();
  Tensor b = lazyjit::tensor_from_data(std::move(given));
  b += 1.0f;
  const int64_t donations = lazyjit::metrics().donations;
  lazyjit::mark_step();
  EXPECT_EQ(lazyjit::metrics().donations, donations + 1);
  EXPECT_EQ(lazyjit::tensor_data(b).get(), raw);
  EXPECT_THAT(b.to_vector<float>(), ElementsAre(2, 2, 2, 2));
}

TEST(ApiTest, AHostViewReadsTheElementsWhereTheyLie) {
  Tensor x = floats({1, 2, 3, 4}, {2, 2});
  const Tensor y = x * 2 + 1;
  lazyjit::reset_metrics();
  const lazyjit::HostView<float> v = y.host_view<float>();
  EXPECT_THAT(v, ElementsAre(3, 5, 7, 9));
  EXPECT_EQ(lazyjit::metrics().graphs_executed, 1);
  EXPECT_EQ(lazyjit::metrics().bytes_out, 0);                 // nothing copied
  EXPECT_EQ(v.data(), y.host_view<float>().data());           // the same buffer, read again
  EXPECT_EQ(v.data(), lazyjit::tensor_data(y)->data());
  EXPECT_EQ(lazyjit::metrics().graphs_executed, 1);
  EXPECT_THAT(lazyjit::gt(x, 2.0).host_view<bool>(), ElementsAre(false, false, true, true));
  EXPECT_THAT(x.to(DType::Int64).host_view<int64_t>(), ElementsAre(1, 2, 3, 4));
  EXPECT_EQ(lazyjit::zeros({0, 3}).host_view<float>().size(), 0u);
  EXPECT_EQ(error_of([&] { x.host_view<double>(); }),
            "host_view: tensor has dtype float32, asked for float64 (convert with .to(DType) first)");
  EXPECT_EQ(error_of([] { Tensor().host_view<float>(); }), "host_view: tensor is undefined");
}

TEST(ApiTest, AHostViewKeepsItsElementsThroughAnInPlaceUpdate) {
  // The view holds w's buffer: the step's update of w takes a new one, the view reads the old
  // values. Once no view holds it, the buffer is donated to the update as usual.
  Tensor w = floats({1, 2, 3}, {3});
  lazyjit::mark_step();
  {
    const lazyjit::HostView<float> before = w.host_view<float>();
    w -= 1.0f;
    const int64_t donations = lazyjit::metrics().donations;
    lazyjit::mark_step();
    EXPECT_EQ(lazyjit::metrics().donations, donations);
    EXPECT_THAT(before, ElementsAre(1, 2, 3));
    EXPECT_THAT(w.host_view<float>(), ElementsAre(0, 1, 2));
  }
  const void* old = lazyjit::tensor_data(w)->data();
  w -= 1.0f;
  const int64_t donations = lazyjit::metrics().donations;
  lazyjit::mark_step();
  EXPECT_EQ(lazyjit::metrics().donations, donations + 1);
  EXPECT_EQ(lazyjit::tensor_data(w)->data(), old);
  EXPECT_THAT(w.host_view<float>(), ElementsAre(-1, 0, 1));
}

TEST(ApiTest, TensorFromDataRejectsAMisalignedOrMissingBuffer) {
  EXPECT_EQ(error_of([] { lazyjit::tensor_from_data(nullptr); }), "tensor_from_data: the buffer is null");
  auto misaligned = std::make_shared<borrowed::Buffer>(std::vector<int64_t>{4}, /*offset=*/1);
  EXPECT_THAT(error_of([&] { lazyjit::tensor_from_data(misaligned); }),
              HasSubstr("tensor_from_data: the buffer of float32 at 0x"));
  EXPECT_THAT(error_of([&] { lazyjit::tensor_from_data(misaligned); }), HasSubstr("is not 64-byte aligned"));
  EXPECT_EQ(error_of([] { lazyjit::tensor_data(Tensor()); }), "tensor_data: tensor is undefined");
}

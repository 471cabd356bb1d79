// The step barrier: in-place updates, donation at mark_step(), runtime scalars, and the
// seeds/000 hazard (a value read twice around an in-place update does not change).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <thread>
#include <vector>

#include "lazyjit/lazyjit.h"
#include "runtime/runtime.h"
#include "tier.h"

namespace lazyjit {
namespace {

using testing::ElementsAre;

const void* buffer_of(const Tensor& t) { return t.impl()->data()->data(); }

std::vector<float> iota(int64_t n, float start, float step) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = start + step * static_cast<float>(i);
  return v;
}

// A training-style loop: weights updated in place every step, the learning rate changed
// every step, the batch size changed once. Compiles follow structures, not steps, learning
// rates or batch sizes; every step writes each weight into its own old buffer.
TEST(StepTest, TrainingLoopCompilesPerStructureAndUpdatesWeightsInPlace) {
  tests::ScopedTier compiled(Tier::Compile);
  runtime::Runtime::get().cache().clear();
  constexpr int64_t kFeatures = 16;
  std::vector<float> w_host = iota(kFeatures, -1.0f, 0.125f), b_host = iota(kFeatures, 0.5f, -0.0625f);
  Tensor w = Tensor::from_vector(w_host, {kFeatures});
  Tensor b = Tensor::from_vector(b_host, {kFeatures});
  const Metrics start = metrics();
  const void* w_buffer = nullptr;
  const void* b_buffer = nullptr;
  int64_t allocated_after_warmup = -1;
  for (int step = 0; step < 12; ++step) {
    const int64_t batch = step < 6 ? 4 : 7;
    const std::vector<float> x_host = iota(batch * kFeatures, -2.0f, 0.03125f * (step + 1));
    const double lr = 0.1 / (step + 1);
    Tensor x = Tensor::from_vector(x_host, {batch, kFeatures});
    Tensor y = relu(x * w + b);  // forward: reads the weights before the update
    w -= lr * (w * 0.5 + 0.1);
    b -= lr * b;
    mark_step();

    for (int64_t i = 0; i < batch * kFeatures; ++i) {  // the forward pass saw the old weights
      const float want = std::max(x_host[i] * w_host[i % kFeatures] + b_host[i % kFeatures], 0.0f);
      ASSERT_NEAR(y.to_vector<float>()[i], want, 1e-5) << "step " << step << " element " << i;
    }
    for (int64_t f = 0; f < kFeatures; ++f) {
      w_host[f] -= static_cast<float>(lr) * (w_host[f] * 0.5f + 0.1f);
      b_host[f] -= static_cast<float>(lr) * b_host[f];
    }
    EXPECT_THAT(w.to_vector<float>(), testing::Pointwise(testing::FloatNear(1e-5), w_host)) << "step " << step;
    EXPECT_THAT(b.to_vector<float>(), testing::Pointwise(testing::FloatNear(1e-5), b_host)) << "step " << step;
    if (step == 0) {
      w_buffer = buffer_of(w);
      b_buffer = buffer_of(b);
    }
    EXPECT_EQ(buffer_of(w), w_buffer) << "step " << step << ": w did not stay in its buffer";
    EXPECT_EQ(buffer_of(b), b_buffer) << "step " << step << ": b did not stay in its buffer";
    if (step == 2) allocated_after_warmup = metrics().bytes_allocated;
    if (step == 5) {
      EXPECT_EQ(metrics().bytes_allocated, allocated_after_warmup) << "steady steps allocate nothing";
    }
  }
  const Metrics end = metrics();
  // One structure: the batch size is a size, not part of the key, and the first step donates
  // too (from_vector's buffers are dead once w and b are updated in place).
  EXPECT_EQ(end.compiles - start.compiles, 1);
  EXPECT_EQ(end.donations - start.donations, 2 * 12) << "w and b, every step";
}

// seeds/000: a tensor read twice around an in-place update shows the right value both times,
// whether it was computed before the barrier or in it.
TEST(StepTest, ValueReadTwiceAroundAnInPlaceUpdateDoesNotChange) {
  Tensor w = Tensor::from_vector<float>({1, 2, 3}, {3});
  Tensor in_step = w * 2.0;  // pending: materialised by the same barrier as the update
  Tensor before = w * 1.0;
  sync({before});  // materialised before the update
  EXPECT_THAT(before.to_vector<float>(), ElementsAre(1, 2, 3));
  Tensor copy = w.to(DType::Float32);  // the same value as w, as a tensor of its own
  w += 1.0;
  mark_step();
  EXPECT_THAT(w.to_vector<float>(), ElementsAre(2, 3, 4));
  EXPECT_THAT(in_step.to_vector<float>(), ElementsAre(2, 4, 6));
  EXPECT_THAT(before.to_vector<float>(), ElementsAre(1, 2, 3));
  EXPECT_THAT(copy.to_vector<float>(), ElementsAre(1, 2, 3));
  w *= 10.0;
  mark_step();
  EXPECT_THAT(before.to_vector<float>(), ElementsAre(1, 2, 3));  // read again: unchanged
  EXPECT_THAT(copy.to_vector<float>(), ElementsAre(1, 2, 3));
  EXPECT_THAT(w.to_vector<float>(), ElementsAre(20, 30, 40));
}

// Outside the barrier nothing is donated: to_vector and sync keep every input intact.
TEST(StepTest, NoDonationOutsideTheBarrier) {
  Tensor w = Tensor::from_vector<float>({1, 2, 3, 4}, {4});
  const void* old_buffer = buffer_of(w);
  const int64_t donations = metrics().donations;
  w += 1.0;
  sync({w});
  EXPECT_NE(buffer_of(w), old_buffer);
  w -= 0.5;
  EXPECT_THAT(w.to_vector<float>(), ElementsAre(1.5, 2.5, 3.5, 4.5));
  EXPECT_EQ(metrics().donations, donations);
}

// A buffer someone else still reads is never donated: another handle's data, a second
// graph's input, or an input read by a kernel of another shape after the update.
TEST(StepTest, SharedBuffersAreNotDonated) {
  Tensor w = Tensor::from_vector<float>({1, 2}, {2});
  Tensor keep = w.to(DType::Float32);  // pending over w's leaf
  const int64_t donations = metrics().donations;
  w += 1.0;
  Tensor wide = Tensor::from_vector<float>({0, 0, 0, 0}, {2, 2}) + w;  // reads the new w
  mark_step();
  // Only the temporary [2,2] input is dead, and goes to `wide`; keep still reads w's old buffer.
  EXPECT_EQ(metrics().donations, donations + 1);
  EXPECT_THAT(keep.to_vector<float>(), ElementsAre(1, 2));
  EXPECT_THAT(wide.to_vector<float>(), ElementsAre(2, 3, 2, 3));
}

// In-place ops keep identity; zero_, add_, mul_ and copy_ are the named forms.
TEST(StepTest, NamedInPlaceOps) {
  Tensor t = Tensor::from_vector<float>({1, 2, 3}, {3});
  Tensor alias = t;
  t.add_(Tensor::from_vector<float>({1, 1, 1}, {3})).mul_(2.0);
  EXPECT_THAT(alias.to_vector<float>(), ElementsAre(4, 6, 8));
  t.zero_();
  EXPECT_THAT(alias.to_vector<float>(), ElementsAre(0, 0, 0));
  t.copy_(full({3}, 7.0));
  EXPECT_THAT(alias.to_vector<float>(), ElementsAre(7, 7, 7));
  EXPECT_TRUE(alias.is_same(t));
}

}  // namespace
}  // namespace lazyjit

namespace lazyjit {
namespace {

// Numbers are runtime parameters unless marked constant: a new learning rate reuses the
// code, a new constant compiles a kernel with the value folded in.
TEST(StepTest, ScalarsAreParametersUnlessMarkedConstant) {
  tests::ScopedTier compiled(Tier::Compile);
  runtime::Runtime::get().cache().clear();
  Tensor x = Tensor::from_vector<float>({1, 2, 3}, {3});
  const int64_t compiles = metrics().compiles;
  for (double lr : {0.5, 0.25, 0.125}) {
    EXPECT_THAT((x * lr).to_vector<float>(), ElementsAre(lr, 2 * lr, 3 * lr));
  }
  EXPECT_EQ(metrics().compiles - compiles, 1);
  for (double c : {2.0, 3.0}) {
    EXPECT_THAT((x * constant(c)).to_vector<float>(), ElementsAre(c, 2 * c, 3 * c));
  }
  EXPECT_EQ(metrics().compiles - compiles, 3);
  EXPECT_THAT((x * constant(2.0)).to_vector<float>(), ElementsAre(2, 4, 6));  // cached
  EXPECT_EQ(metrics().compiles - compiles, 3);
  const std::string ir = dump({x * constant(2.0)}, DumpFormat::LazyIr);
  EXPECT_THAT(ir, testing::HasSubstr("= constant 2 : float32[]"));
  const std::string llvm = dump({x * constant(2.0)}, DumpFormat::LlvmIr);
  EXPECT_THAT(llvm, testing::HasSubstr("fmul float %"));
  EXPECT_THAT(llvm, testing::HasSubstr(", 2.000000e+00"));
}

}  // namespace
}  // namespace lazyjit

namespace lazyjit {
namespace {

// The common step: a forward pass over a temporary input reads the weights, then the weights
// are updated in place. The weights keep their buffers; the forward pass's output, which
// could have taken the dead input's buffer, gives that up (it must run before the update).
TEST(StepTest, WeightUpdatesKeepTheirDonationsNextToAForwardPass) {
  Tensor w = Tensor::from_vector<float>({1, 2, 3, 4}, {4});
  Tensor b = Tensor::from_vector<float>({0.5, 0.5, 0.5, 0.5}, {4});
  const void* w_buffer = nullptr;
  for (int step = 0; step < 3; ++step) {
    const int64_t donations = metrics().donations;
    Tensor y = relu(Tensor::from_vector<float>({1, -1, 2, -2, 1, -1, 2, -2}, {2, 4}) * w + b);  // a batch of 2
    w -= 0.5 * w;
    b -= 0.5 * b;
    mark_step();
    EXPECT_EQ(metrics().donations - donations, 2) << "step " << step;
    if (step == 0) w_buffer = buffer_of(w);
    EXPECT_EQ(buffer_of(w), w_buffer);
    const float scale = std::pow(0.5f, static_cast<float>(step));
    EXPECT_THAT(y.to_vector<float>(), ElementsAre(scale * 1.5f, 0.0f, scale * 6.5f, 0.0f, scale * 1.5f, 0.0f,
                                                  scale * 6.5f, 0.0f));
  }
}

TEST(StepTest, MatmulUpdatesDonateOnlyWhereTheyCanAndStayCorrect) {
  // x = x @ w reads whole rows of x while it writes: x's buffer must not be donated to it.
  const int64_t n = 100;  // several row blocks and column panels
  std::vector<float> xv(n * n), wv(n * n);
  for (int64_t i = 0; i < n * n; ++i) xv[i] = static_cast<float>((i * 7) % 11) - 5.0f, wv[i] = static_cast<float>((i * 3) % 5) * 0.1f;
  Tensor x = Tensor::from_vector<float>(xv, {n, n});
  const Tensor w = Tensor::from_vector<float>(wv, {n, n});
  x = matmul(x, w);
  mark_step();
  const std::vector<float> got = x.to_vector<float>();
  for (int64_t i = 0; i < n; i += 13) {
    for (int64_t j = 0; j < n; j += 7) {
      double want = 0;
      for (int64_t k = 0; k < n; ++k) want += double{xv[i * n + k]} * wv[k * n + j];
      EXPECT_NEAR(got[i * n + j], want, 1e-3) << i << "," << j;
    }
  }

  // A weight update whose gradient is a product fuses into the product's epilogue and
  // still writes the weight in place: one donation per weight, no new bytes once warm.
  Tensor v = Tensor::from_vector<float>(std::vector<float>(64 * 32, 0.5f), {64, 32});
  const Tensor a = Tensor::from_vector<float>(std::vector<float>(64 * 16, 1.0f), {64, 16});
  const Tensor g = Tensor::from_vector<float>(std::vector<float>(16 * 32, 0.25f), {16, 32});
  const void* v_buffer = nullptr;
  int64_t bytes = 0;
  for (int step = 0; step < 4; ++step) {
    const int64_t donations = metrics().donations;
    v -= 0.125 * matmul(a, g);  // each step subtracts 0.125 * 16 * 0.25 = 0.5
    mark_step();
    EXPECT_EQ(metrics().donations - donations, 1) << "step " << step;
    if (step == 0) v_buffer = buffer_of(v);
    EXPECT_EQ(buffer_of(v), v_buffer);
    if (step == 1) bytes = metrics().bytes_allocated;
    EXPECT_FLOAT_EQ(v.to_vector<float>()[37], 0.5f - 0.5f * static_cast<float>(step + 1));
  }
  EXPECT_EQ(metrics().bytes_allocated, bytes);
}

}  // namespace
}  // namespace lazyjit

namespace lazyjit {
namespace {

// Another thread tracing on a tensor while a step barrier materialises it (and donates its
// old buffer) waits for the barrier, then sees the new value; it never reads the donated
// buffer. The barrier's compile is made slow so the other thread arrives in the middle.
TEST(StepTest, TracingDuringABarrierWaitsForIt) {
  Tensor w = Tensor::from_vector<float>(std::vector<float>(8, 10.0f), {8});
  Tensor g = Tensor::from_vector<float>(std::vector<float>(8, 1.0f), {8});
  Tensor slow = g;
  for (int i = 0; i < 200; ++i) slow = sin(slow) * 1.0001 + cos(slow);  // a long compile
  w -= 1.0 * g;  // pending: 9
  const int64_t traced = metrics().graphs_traced;
  Tensor z;
  std::thread other([&] {
    while (metrics().graphs_traced == traced) std::this_thread::yield();  // the barrier began
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    z = w * 3.0;
  });
  mark_step();
  other.join();
  EXPECT_THAT(w.to_vector<float>(), testing::Each(9.0f));
  EXPECT_THAT(z.to_vector<float>(), testing::Each(27.0f));
}

TEST(StepTest, AProductThatIsAlsoAResultKeepsItsBufferAndTheUpdateReadsIt) {
  // dw is held (a result) and read back by the update of w. dw has w's shape, but writing dw
  // into w's buffer would hand the update a w already overwritten (it once gave 0.9 * w).
  Tensor w = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  const Tensor x = Tensor::from_vector<float>({1, 0, 0, 0, 1, 0, 0, 0, 1, 1, 1, 1}, {4, 3});
  const Tensor y = matmul(x, transpose(w, 0, 1));
  const Tensor dw = matmul(transpose(y, 0, 1), x);
  w -= 0.1 * dw;
  const int64_t donations = metrics().donations;
  mark_step();
  EXPECT_EQ(metrics().donations - donations, 1);
  EXPECT_THAT(dw.to_vector<float>(), ElementsAre(7, 8, 9, 19, 20, 21));
  const std::vector<float> got = w.to_vector<float>();
  const std::vector<float> want = {0.3f, 1.2f, 2.1f, 2.1f, 3.0f, 3.9f};
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-5) << i;
}

TEST(StepTest, ResultsDonatedBuffersOfOneShapeReadTheOldValuesTheyNeed) {
  // Momentum: m and w are both updated in place in one kernel (the product's epilogue), and
  // either may be given either dead buffer: every value of an element is computed before the
  // first store, so w's update reads the old w even when m's new value lands in its buffer.
  Tensor w = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor m = Tensor::from_vector<float>({1, 1, 1, 1, 1, 1}, {2, 3});
  const Tensor x = Tensor::from_vector<float>({1, 0, 0, 0, 1, 0, 0, 0, 1, 1, 1, 1}, {4, 3});
  const Tensor g = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6, 7, 8}, {4, 2});
  m += matmul(transpose(g, 0, 1), x);  // [[1+1+7, 1+3+7, 1+5+7], [1+2+8, 1+4+8, 1+6+8]]
  w -= 0.5 * m;
  const int64_t donations = metrics().donations;
  mark_step();
  EXPECT_EQ(metrics().donations - donations, 2);
  EXPECT_THAT(m.to_vector<float>(), ElementsAre(9, 11, 13, 11, 13, 15));
  EXPECT_THAT(w.to_vector<float>(), ElementsAre(-3.5f, -3.5f, -3.5f, -1.5f, -1.5f, -1.5f));
}

TEST(StepTest, AFoldOfABroadcastParameterDoesNotTakeItsBuffer) {
  // s[i] = sum over j of (p[j] and m[i]): s has p's shape, but row i reads every p[j], so
  // writing s[0] into p's dead buffer would change what rows 1.. read. Found by fuzzing (the
  // count came out 2 for 3). A row's value read only at the row (acc[i] + sum of row i)
  // still takes the dead buffer.
  const Tensor m = Tensor::from_vector<bool>({false, false, true, false}, {4, 1});
  Tensor p = Tensor::from_vector<int64_t>({-1, 0, -5, -4}, {4});
  mark_step();
  const Tensor s = sum(logical_and(p, m), {1});
  p = Tensor();
  int64_t donations = metrics().donations;
  mark_step();
  EXPECT_EQ(metrics().donations - donations, 0);
  EXPECT_THAT(s.to_vector<int64_t>(), ElementsAre(0, 0, 3, 0));
  Tensor acc = Tensor::from_vector<float>({1, 2, 3}, {3});
  const Tensor x = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {3, 2});
  mark_step();
  acc += sum(x, {1});
  donations = metrics().donations;
  mark_step();
  EXPECT_EQ(metrics().donations - donations, 1);
  EXPECT_THAT(acc.to_vector<float>(), ElementsAre(4, 9, 14));
}

TEST(StepTest, AProductReadByALaterKernelKeepsItsBufferAndAnotherTakesTheDeadOne) {
  // b dies at the barrier; p, q and s all read b's values. p is read in place (q's left
  // operand) and by s's row kernel, so p must be written before them: it keeps its own
  // buffer. q, read by nobody, may take b's (its writer runs last).
  Tensor a = Tensor::from_vector<float>({1, 2, 3, 4}, {2, 2});
  Tensor b = Tensor::from_vector<float>({1, 0, 0, 1}, {2, 2});
  const Tensor c = Tensor::from_vector<float>({0, 1, 1, 0}, {2, 2});
  mark_step();
  const Tensor p = matmul(a, b);
  b = Tensor();
  const Tensor q = matmul(p, c);
  const Tensor s = sum(p, {1}, true);
  const int64_t donations = metrics().donations;
  mark_step();
  EXPECT_EQ(metrics().donations - donations, 1);
  EXPECT_THAT(p.to_vector<float>(), ElementsAre(1, 2, 3, 4));
  EXPECT_THAT(q.to_vector<float>(), ElementsAre(2, 1, 4, 3));
  EXPECT_THAT(s.to_vector<float>(), ElementsAre(3, 7));
}

TEST(StepTest, AReductionOverSizeOneDimsWritesItsOwnDeadInput) {
  // sum or amin over a size-1 dim keeps the shape, so the result may take its input's buffer:
  // the fold must not start by writing its identity there (it gave zeros and inf).
  for (const bool use_amin : {false, true}) {
    Tensor x = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6, 7, 8}, {8, 1, 1, 1});
    mark_step();
    const void* buffer = buffer_of(x);
    x = use_amin ? amin(x, {-3}, true) : sum(x, {-3}, true);
    mark_step();
    EXPECT_EQ(buffer_of(x), buffer) << (use_amin ? "amin" : "sum");
    EXPECT_THAT(x.to_vector<float>(), ElementsAre(1, 2, 3, 4, 5, 6, 7, 8)) << (use_amin ? "amin" : "sum");
  }
}

TEST(StepTest, AKernelReadingADeadBufferThroughAViewDoesNotWriteIt) {
  // x's old value dies at the barrier, but the kernel writing y and w reads it at other
  // elements too (through a broadcast slice of y): none of them may take its buffer.
  Tensor x = Tensor::from_vector<float>({1, 2, 3, 4}, {2, 2});
  mark_step();
  const Tensor y = x + 1;
  const Tensor first = slice(y, 1, 0, 1);
  x.copy_(zeros({2, 2}));
  const Tensor w = first - y;
  mark_step();
  EXPECT_THAT(y.to_vector<float>(), ElementsAre(2, 3, 4, 5));
  EXPECT_THAT(w.to_vector<float>(), ElementsAre(0, -1, 0, -1));
  EXPECT_THAT(x.to_vector<float>(), ElementsAre(0, 0, 0, 0));
}

}  // namespace
}  // namespace lazyjit

// Misuse and extreme inputs: deep graphs on small stacks, overflowing bounds and scalars,
// threads that train side by side, compile cliffs, and the errors each must give.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <shared_mutex>
#include <exception>
#include <functional>
#include <limits>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <lazyjit/lazyjit.h>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "codegen/jit_compiler.h"
#include "ir/graph.h"
#include "ir/interpreter.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "lowering/kernel_abi.h"
#include "runtime/barrier_lock.h"
#include "runtime/counters.h"
#include "lowering/plan.h"
#include "runtime/graph_compiler.h"
#include "runtime/logging.h"
#include "runtime/stack_thread.h"
#include "runtime/tensor_impl.h"
#include "spdlog/sinks/ostream_sink.h"

namespace lazyjit {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr size_t kSmallStack = 256 * 1024;
constexpr int kMillion = 1'000'000;

/// The what() of the lazyjit::Error that `f` throws; "<no error>" if it returns.
std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "<no error>";
}

/// Runs `f` on a new thread with a `stack_bytes` stack and rethrows what it threw.
void on_small_stack(const std::function<void()>& f, size_t stack_bytes = kSmallStack) {
  runtime::run_with_stack(stack_bytes, [&] {
    f();
    return true;
  });
}

/// x + 1 + 1 + ... (`n` additions), traced and never read.
Tensor counting_chain(const Tensor& x, int n) {
  Tensor acc = x;
  for (int i = 0; i < n; ++i) acc += 1.0;
  return acc;
}

// Item 1: node destruction, graph building (post-order and key), verifying, printing,
// parsing, interpreting and differentiating a million-node chain need no deep stack.

TEST(DeepGraphTest, DroppingAMillionOpChainOnASmallStack) {
  on_small_stack([] {
    Tensor acc = counting_chain(zeros({1}), kMillion);
    EXPECT_EQ(acc.shape(), (std::vector<int64_t>{1}));
  });
}

TEST(DeepGraphTest, EveryWalkOverAMillionNodeChainOnASmallStack) {
  on_small_stack([] {
    const Tensor x = Tensor::from_vector<float>({2.0f});
    const Tensor acc = counting_chain(x, kMillion / 2);  // a Scalar leaf per add: a million nodes
    const ir::Graph graph = ir::build_graph(std::vector<ir::NodePtr>{acc.impl()->ir()});
    EXPECT_GT(graph.nodes.size(), static_cast<size_t>(kMillion));
    EXPECT_TRUE(ir::verify(graph).ok());
    const std::vector<ir::HostTensor> values = ir::interpret(graph);
    EXPECT_EQ(values[0].as_double(0), 2.0 + kMillion / 2);

    const std::string text = ir::print_graph(graph);
    absl::StatusOr<ir::ParsedGraph> parsed = ir::parse_graph(text);
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(ir::build_graph(parsed->roots).key, graph.key);
    EXPECT_THAT(dump({acc}, DumpFormat::LazyIr), HasSubstr("return"));
  });
}

TEST(DeepGraphTest, DifferentiatingAMillionNodeChainOnASmallStack) {
  on_small_stack([] {
    Tensor x = Tensor::from_vector<float>({2.0f});
    x.requires_grad_();
    Tensor acc = x;
    for (int i = 0; i < kMillion / 2; ++i) acc = acc * 1.0;
    const std::vector<Tensor> g = grad(acc, {x});
    EXPECT_EQ(g[0].shape(), (std::vector<int64_t>{1}));
  });
}

TEST(DeepGraphTest, MaterialisingALongChainOnASmallStack) {
  on_small_stack([] {
    Tensor acc = counting_chain(zeros({3}), 5000);
    EXPECT_THAT(acc.to_vector<float>(), ElementsAre(5000, 5000, 5000));
  });
}

TEST(DeepGraphTest, TheMainThreadsStackLeftIsWithinItsStack) {
  // The main thread's bounds come from its starting top and the stack limit, not from
  // /proc/self/maps: never more room than glibc's own bounds give.
  if (gettid() != getpid()) GTEST_SKIP() << "not on the main thread";
  pthread_attr_t attr;
  ASSERT_EQ(pthread_getattr_np(pthread_self(), &attr), 0);
  void* stack = nullptr;
  size_t size = 0;
  ASSERT_EQ(pthread_attr_getstack(&attr, &stack, &size), 0);
  pthread_attr_destroy(&attr);
  const char here = 0;
  const size_t glibc_left = reinterpret_cast<uintptr_t>(&here) - reinterpret_cast<uintptr_t>(stack);
  const size_t left = runtime::stack_left();
  EXPECT_GT(left, size_t{0});
  EXPECT_LE(left, glibc_left + 4096);  // 4 KiB: the two frames' locals may sit in either order
  EXPECT_GE(left + (size_t{2} << 20), glibc_left);  // within the 1 MiB left for arguments and environment, and this frame
}

// Item 2: slice bounds and counts never overflow.

TEST(OverflowTest, SliceWithAHugeStepTakesTheFirstElement) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  const Tensor x = arange(10);
  const Tensor one = slice(x, 0, 0, 10, kMax);
  EXPECT_EQ(one.shape(), (std::vector<int64_t>{1}));
  EXPECT_THAT(one.to_vector<int64_t>(), ElementsAre(0));
  const Tensor from_three = slice(x, 0, 3, kMax, kMax - 5);
  EXPECT_EQ(from_three.shape(), (std::vector<int64_t>{1}));
  EXPECT_THAT(cat({from_three, one}, 0).to_vector<int64_t>(), ElementsAre(3, 0));
  EXPECT_THAT(slice(x, 0, std::numeric_limits<int64_t>::min(), kMax, 4).to_vector<int64_t>(), ElementsAre(0, 4, 8));
  EXPECT_EQ(slice(x, 0, kMax, kMax, 1).numel(), 0);
}

// Item 3: unsigned scalars past INT64_MAX keep their value, or fail the fits check.

TEST(OverflowTest, UnsignedScalarsPastInt64KeepTheirValue) {
  constexpr uint64_t kBig = std::numeric_limits<uint64_t>::max();
  const Tensor x = Tensor::from_vector<double>({1.0, -2.0});
  EXPECT_THAT((x * kBig).to_vector<double>(), ElementsAre(18446744073709551615.0, -36893488147419103230.0));
  EXPECT_EQ(error_of([] { full({1}, kBig, DType::Int64); }), "full: scalar 18446744073709551615 does not fit int64");
  EXPECT_EQ(error_of([] { (arange(3) + (uint64_t{1} << 63)).numel(); }),
            "add: scalar 9223372036854775808 does not fit int64");
  EXPECT_THAT(full({1}, uint64_t{1} << 62, DType::Int64).to_vector<int64_t>(), ElementsAre(int64_t{1} << 62));
}

TEST(OverflowTest, ItemChecksTheTruncatedValueAgainstTheIntegerRange) {
  EXPECT_EQ(error_of([] { full({1}, 9223372036854775808.0, DType::Float64).item<int64_t>(); }),
            "item: scalar 9.223372036854776e+18 does not fit int64");
  EXPECT_EQ(error_of([] { full({1}, 9223372036854775808.0, DType::Float32).item<int64_t>(); }),
            "item: scalar 9.223372036854776e+18 does not fit int64");
  EXPECT_EQ(full({1}, 2147483647.5, DType::Float64).item<int32_t>(), 2147483647);
  EXPECT_EQ(full({1}, -2147483648.5, DType::Float64).item<int32_t>(), -2147483648);
  EXPECT_EQ(full({1}, -9223372036854775808.0, DType::Float64).item<int64_t>(), std::numeric_limits<int64_t>::min());
}

TEST(OverflowTest, ArangeValuesMustFitTheDtype) {
  EXPECT_EQ(error_of([] { arange(3000000000, DType::Int32); }), "arange: its last value 2999999999 does not fit int32");
  EXPECT_EQ(arange(3000000000, DType::Int64).numel(), 3000000000);
}

// Item 9: dims on rank-0 tensors, the rank limit, and messages that quote what the user wrote.

TEST(ValidationTest, DimsOfARankZeroTensorAreMinusOneAndZero) {
  const Tensor s = full({}, 2.0);
  const char* range = "is out of range for a tensor of rank 0 (expected -1 to 0)";
  EXPECT_EQ(error_of([&] { transpose(s, 0, 3); }), std::string("transpose: dim 3 ") + range);
  EXPECT_EQ(error_of([&] { squeeze(s, 1); }), std::string("squeeze: dim 1 ") + range);
  EXPECT_EQ(error_of([&] { argmax(s, -2); }), std::string("argmax: dim -2 ") + range);
  EXPECT_EQ(error_of([&] { sum(s, {5}); }), std::string("sum: dim 5 ") + range);
  EXPECT_EQ(transpose(s, -1, 0).item<float>(), 2.0f);
  EXPECT_EQ(squeeze(s, 0).item<float>(), 2.0f);
  EXPECT_EQ(argmax(s, 0).item<int64_t>(), 0);
}

TEST(ValidationTest, UnsqueezeStopsAtTheMaximumRank) {
  Tensor t = full({}, 1.0);
  for (int i = 0; i < 64; ++i) t = unsqueeze(t, 0);
  EXPECT_EQ(t.dim(), 64);
  EXPECT_EQ(error_of([&] { unsqueeze(t, 0); }), "unsqueeze: the result would have rank 65, past the maximum of 64");
  EXPECT_EQ((t + 1.0).item<float>(), 2.0f);
}

TEST(ValidationTest, ReshapeQuotesTheShapeAsWritten) {
  const Tensor empty = zeros({0});
  const int64_t big = int64_t{1} << 40;
  EXPECT_EQ(error_of([&] { reshape(empty, {-1, big, big}); }),
            "reshape: shape [-1, 1099511627776, 1099511627776] has too many elements");
  std::string ones = "1";
  for (int i = 1; i < 65; ++i) ones += ", 1";
  EXPECT_EQ(error_of([&] { reshape(empty, std::vector<int64_t>(65, 1)); }),
            "reshape: shape [" + ones + "] has rank 65, past the maximum of 64");
}

// Item 6: only lazyjit::Error escapes, and out-of-memory names the tensor.

TEST(MemoryTest, CopyingOutAHugeTensorIsAnErrorNamingIt) {
  const Tensor huge = expand(zeros({1}), {int64_t{1} << 50});
  EXPECT_EQ(error_of([&] { huge.to_vector<float>(); }),
            "to_vector: out of memory copying float32[1125899906842624] out (1125899906842624 elements of 4 bytes)");
  EXPECT_THAT(error_of([&] { sync({huge + 1.0}); }),
              HasSubstr("out of memory allocating a buffer for float32[1125899906842624] (4503599627370496 bytes)"));
}

// Item 4: threads that train their own models step independently.

/// Trains y = x . [1, -2, 3, 0.5] with one Linear layer for `steps` SGD steps; its weights.
std::vector<float> train_linear(uint64_t seed, int steps) {
  nn::Linear layer(4, 1, seed);
  optim::SGD opt(layer.parameters(), {.lr = 0.05});
  const Tensor x = Tensor::from_vector<float>({1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 1, 1, 1, 1}, {5, 4});
  const Tensor y = Tensor::from_vector<float>({1, -2, 3, 0.5f, 2.5f}, {5, 1});
  for (int s = 0; s < steps; ++s) {
    Tensor loss = nn::mse_loss(layer(x), y);
    std::this_thread::yield();  // another thread's step barrier may fall here
    loss.backward();
    opt.step();
    opt.zero_grad();
    mark_step();
  }
  return layer.parameters()[0].to_vector<float>();
}

TEST(ThreadsTest, TwoThreadsTrainTheirOwnModelsAsIfAlone) {
  const std::vector<float> alone_a = train_linear(1, 12), alone_b = train_linear(2, 12);
  std::vector<float> a, b;
  std::string error_a, error_b;
  std::thread first([&] { error_a = error_of([&] { a = train_linear(1, 12); }); });
  std::thread second([&] { error_b = error_of([&] { b = train_linear(2, 12); }); });
  first.join();
  second.join();
  EXPECT_EQ(error_a, "<no error>");
  EXPECT_EQ(error_b, "<no error>");
  EXPECT_EQ(a, alone_a);
  EXPECT_EQ(b, alone_b);
}

TEST(ThreadsTest, AStepBarrierLeavesOtherThreadsPendingTensorsPending) {
  const Tensor mine = zeros({2}) + 1.0;
  Tensor theirs;
  std::thread other([&] { theirs = zeros({2}) + 2.0; });
  other.join();
  mark_step();
  EXPECT_FALSE(mine.impl()->pending());
  EXPECT_TRUE(theirs.impl()->pending());
  EXPECT_THAT(theirs.to_vector<float>(), ElementsAre(2, 2));
}

// A step barrier that waits is not overtaken by syncs that start after it: once it waits,
// they wait behind it (a reader-preferring lock let syncing threads hold it off for seconds).
TEST(ThreadsTest, AWaitingBarrierGoesBeforeSyncsThatStartLater) {
  runtime::BarrierLock lock;
  std::atomic<int> order{0};
  int barrier_at = -1, late_sync_at = -1;
  lock.lock_shared();  // a running sync
  std::thread barrier([&] {
    std::unique_lock exclusive(lock);
    barrier_at = order++;
  });
  while (!lock.writer_waiting()) std::this_thread::yield();
  std::thread late_sync([&] {
    std::shared_lock shared(lock);
    late_sync_at = order++;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // let the late sync try
  lock.unlock_shared();
  barrier.join();
  late_sync.join();
  EXPECT_EQ(barrier_at, 0);
  EXPECT_EQ(late_sync_at, 1);
}

// Item 7: LAZYJIT_LOG_LEVEL in any case; unknown values are reported, not silently "off".
TEST(ConfigurationTest, LogLevelsInAnyCase) {
  EXPECT_EQ(runtime::parse_log_level("WARN"), spdlog::level::warn);
  EXPECT_EQ(runtime::parse_log_level("Warning"), spdlog::level::warn);
  EXPECT_EQ(runtime::parse_log_level("info"), spdlog::level::info);
  EXPECT_EQ(runtime::parse_log_level("ERROR"), spdlog::level::err);
  EXPECT_EQ(runtime::parse_log_level("off"), spdlog::level::off);
  EXPECT_EQ(runtime::parse_log_level("bogus"), std::nullopt);
  EXPECT_EQ(runtime::parse_log_level(""), std::nullopt);
}

// Item 5: compile cliffs. Long chains compile in bounded kernels (linear in length), and two
// ways to end up with huge graphs are reported once, with how to avoid them.

/// Collects what lazyjit logs while it lives.
class LogCapture {
 public:
  LogCapture() : sink_(std::make_shared<spdlog::sinks::ostream_sink_mt>(stream_)) {
    runtime::logger().sinks().push_back(sink_);
  }
  ~LogCapture() { std::erase(runtime::logger().sinks(), sink_); }
  std::string text() {
    sink_->flush();
    return stream_.str();
  }

 private:
  std::ostringstream stream_;
  std::shared_ptr<spdlog::sinks::ostream_sink_mt> sink_;
};

int occurrences(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(CompileCliffTest, ALongChainCompilesAsBoundedKernels) {
  const int64_t launched = metrics().kernels_launched;
  const Tensor acc = counting_chain(zeros({3}), 1000);
  EXPECT_THAT(acc.to_vector<float>(), ElementsAre(1000, 1000, 1000));
  EXPECT_EQ(metrics().kernels_launched - launched, 1000 / lowering::kMaxFusedDepth + 1);
}

TEST(CompileCliffTest, CutChainsThroughViewsReductionsAndProductsMatchTheInterpreter) {
  std::vector<float> values(16);
  for (int i = 0; i < 16; ++i) values[i] = 0.1f * static_cast<float>(i % 5) - 0.2f;
  const Tensor x = Tensor::from_vector(values, {4, 4});
  Tensor acc = x, early;
  for (int i = 0; i < 3 * lowering::kMaxFusedDepth; ++i) {
    acc = i % 7 == 0 ? transpose(acc, 0, 1) * 0.99 : acc + 0.001 * (i % 3);
    if (i == lowering::kMaxFusedDepth) early = acc;  // a result that is itself cut out
  }
  const std::vector<Tensor> results = {acc, early, matmul(acc, x), sum(acc, {1}), softmax(acc, 0)};
  std::vector<ir::NodePtr> roots;
  for (const Tensor& t : results) roots.push_back(t.impl()->ir());
  const std::vector<ir::HostTensor> want = ir::interpret(ir::build_graph(roots));
  sync(results);
  for (size_t r = 0; r < results.size(); ++r) {
    const std::vector<float> got = results[r].to_vector<float>();
    for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[r].as_double(i), 1e-4) << r << " " << i;
  }
}

TEST(CompileCliffTest, ADonatedUpdateThroughACutChainReadsTheOldValues) {
  Tensor w = Tensor::from_vector<float>({1, 2, 3});
  for (int i = 0; i < lowering::kMaxFusedDepth + 10; ++i) w += 0.5 * w - 0.5 * w + 1.0;
  const int64_t donations = metrics().donations;
  mark_step();
  EXPECT_EQ(metrics().donations - donations, 1);
  const float n = static_cast<float>(lowering::kMaxFusedDepth + 10);
  EXPECT_THAT(w.to_vector<float>(), ElementsAre(1 + n, 2 + n, 3 + n));
}

TEST(CompileCliffTest, ATrainingLoopThatNeverStepsIsReportedOnce) {
  LogCapture log;
  Tensor w = Tensor::from_vector<float>({1, 2, 3});
  for (int i = 0; i < 20; ++i) {
    w -= 0.01 * w;
    EXPECT_GT(sum(w * w).item<float>(), 0.0f);
  }
  EXPECT_EQ(occurrences(log.text(), "each compiled a new, larger graph"), 1) << log.text();
  EXPECT_THAT(log.text(), HasSubstr("Call lazyjit::mark_step() at the end of each training step"));
}

TEST(CompileCliffTest, ATrainingLoopThatStepsIsNotReported) {
  LogCapture log;
  Tensor w = Tensor::from_vector<float>({1, 2, 3});
  for (int i = 0; i < 20; ++i) {
    w -= 0.01 * w;
    EXPECT_GT(sum(w * w).item<float>(), 0.0f);
    mark_step();
  }
  EXPECT_EQ(occurrences(log.text(), "larger graph"), 0) << log.text();
}

TEST(CompileCliffTest, ASlowCompileIsReportedOnceWithHowToCutIt) {
  LogCapture log;
  absl::StatusOr<std::unique_ptr<codegen::JitCompiler>> jit = codegen::JitCompiler::create();
  ASSERT_TRUE(jit.ok());
  runtime::RuntimeCounters counters;
  runtime::GraphCompiler compiler(**jit, counters, {.slow_compile_seconds = 0.0});
  for (double step : {1.0, 2.0}) {
    const Tensor t = zeros({2}) * step + (step > 1 ? exp(zeros({2})) : zeros({2}));
    const ir::Graph graph = ir::build_graph(std::vector<ir::NodePtr>{t.impl()->ir()});
    ASSERT_TRUE(compiler.compile(graph, lowering::plan_graph(graph), {}, graph.key, codegen::in_order).ok());
  }
  EXPECT_EQ(occurrences(log.text(), "To cut it: call lazyjit::mark_step() at the end of each step"), 1) << log.text();
}

}  // namespace
}  // namespace lazyjit

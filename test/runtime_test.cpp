// Unit tests of lib/runtime: the caching allocator, the executor (with fake kernels), the
// live-tensor set and a GraphExecutor over its own cache and allocator.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "codegen/compile_cache.h"
#include "codegen/jit_compiler.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/builder.h"
#include "lazyjit/error.h"
#include "runtime/allocator.h"
#include "runtime/executor.h"
#include "runtime/graph_executor.h"
#include "runtime/live_tensors.h"
#include "runtime/lowering_context.h"
#include "runtime/temp_layout.h"
#include "runtime/tensor_impl.h"

namespace lazyjit::runtime {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

bool aligned(const void* p, uintptr_t alignment) { return reinterpret_cast<uintptr_t>(p) % alignment == 0; }

// ---------------------------------------------------------------------------------------------
// CachingAllocator

TEST(AllocatorTest, SizeClasses) {
  constexpr size_t kMiB = size_t{1} << 20;
  EXPECT_EQ(CachingAllocator::size_class(0), 64u);
  EXPECT_EQ(CachingAllocator::size_class(1), 64u);
  EXPECT_EQ(CachingAllocator::size_class(64), 64u);
  EXPECT_EQ(CachingAllocator::size_class(65), 128u);
  EXPECT_EQ(CachingAllocator::size_class(1000), 1024u);
  EXPECT_EQ(CachingAllocator::size_class(1024), 1024u);
  EXPECT_EQ(CachingAllocator::size_class(2 * kMiB - 1), 2 * kMiB);
  // From 2 MiB on: whole huge pages.
  EXPECT_EQ(CachingAllocator::size_class(2 * kMiB), 2 * kMiB);
  EXPECT_EQ(CachingAllocator::size_class(2 * kMiB + 1), 4 * kMiB);
  EXPECT_EQ(CachingAllocator::size_class(5 * kMiB), 6 * kMiB);
  for (size_t bytes : {size_t{1}, size_t{100}, size_t{4097}, 3 * kMiB + 7}) {
    EXPECT_GE(CachingAllocator::size_class(bytes), bytes);
  }
}

TEST(AllocatorTest, BlocksAre64ByteAligned) {
  CachingAllocator allocator;
  std::vector<CachingAllocator::Block> blocks;
  for (size_t bytes : {1, 3, 64, 65, 100, 1000, 4096, 12345}) {
    CachingAllocator::Block b = allocator.allocate(bytes);
    ASSERT_NE(b.data, nullptr);
    EXPECT_TRUE(aligned(b.data, 64)) << bytes << " bytes at " << b.data;
    EXPECT_EQ(b.capacity, CachingAllocator::size_class(bytes));
    std::memset(b.data, 0xab, bytes);  // the whole request is writable
    blocks.push_back(b);
  }
  CachingAllocator::Block huge = allocator.allocate((size_t{2} << 20) + 10);
  EXPECT_TRUE(aligned(huge.data, size_t{2} << 20));
  blocks.push_back(huge);
  for (const CachingAllocator::Block& b : blocks) allocator.release(b);
}

TEST(AllocatorTest, ReleasedBlocksAreReusedNotReallocated) {
  CachingAllocator allocator;
  CachingAllocator::Block a = allocator.allocate(1000);
  EXPECT_EQ(allocator.stats().bytes_allocated, 1024);
  EXPECT_EQ(allocator.stats().bytes_reused, 0);
  allocator.release(a);
  EXPECT_EQ(allocator.stats().bytes_cached, 1024);

  // Same size class (1000 and 600 both round to 1024): served from the pool.
  CachingAllocator::Block b = allocator.allocate(600);
  EXPECT_EQ(b.data, a.data);
  EXPECT_EQ(b.capacity, 1024u);
  EXPECT_EQ(allocator.stats().bytes_allocated, 1024);
  EXPECT_EQ(allocator.stats().bytes_reused, 1024);
  EXPECT_EQ(allocator.stats().bytes_cached, 0);

  // Another size class is fresh memory.
  CachingAllocator::Block c = allocator.allocate(100);
  EXPECT_EQ(allocator.stats().bytes_allocated, 1024 + 128);
  allocator.release(b);
  allocator.release(c);
  EXPECT_EQ(allocator.stats().bytes_cached, 1024 + 128);

  allocator.reset_stats();
  EXPECT_EQ(allocator.stats().bytes_allocated, 0);
  EXPECT_EQ(allocator.stats().bytes_reused, 0);
  allocator.trim();
  EXPECT_EQ(allocator.stats().bytes_cached, 0);
  allocator.release(allocator.allocate(1000));
  EXPECT_EQ(allocator.stats().bytes_allocated, 1024);  // trimmed: fresh again
}

TEST(AllocatorTest, FullPoolReturnsMemoryToTheSystem) {
  CachingAllocator allocator(/*max_cached_bytes=*/1024);
  CachingAllocator::Block a = allocator.allocate(1024);
  CachingAllocator::Block b = allocator.allocate(1024);
  allocator.release(a);
  allocator.release(b);  // over the limit: freed, not pooled
  EXPECT_EQ(allocator.stats().bytes_cached, 1024);
  allocator.allocate(1024);
  CachingAllocator::Block d = allocator.allocate(1024);
  EXPECT_EQ(allocator.stats().bytes_reused, 1024);
  EXPECT_EQ(allocator.stats().bytes_allocated, 3 * 1024);
  allocator.release(d);
}

// A run's temporaries share one block: one born after another died takes its bytes, and the
// block is the peak of live bytes, not their sum.
TEST(TempLayoutTest, ATemporaryTakesTheBytesOfOneThatDiedBeforeIt) {
  // t0 lives at positions 0-1, t1 at 1-2, t2 at 2-3; t3 is unused.
  const int64_t bytes[] = {100, 200, 100, 4096};
  const int first[] = {0, 1, 2, -1}, last[] = {1, 2, 3, -1};
  const TempLayout layout = lay_out_temporaries(bytes, first, last, 4);
  EXPECT_EQ(layout.offset[0], 0);
  EXPECT_EQ(layout.offset[1], 128);
  EXPECT_EQ(layout.offset[2], 0) << "t0 died at position 1";
  EXPECT_EQ(layout.bytes, 128 + 256);
}

// Over random lifetimes and sizes: no two temporaries that live at once overlap, offsets are
// aligned, and the block lies between the peak of live bytes and their sum.
TEST(TempLayoutTest, TemporariesThatLiveAtOnceNeverOverlap) {
  std::mt19937 random(7);
  for (int trial = 0; trial < 200; ++trial) {
    const size_t positions = 1 + random() % 12, count = random() % 30;
    std::vector<int64_t> bytes(count);
    std::vector<int> first(count), last(count);
    for (size_t t = 0; t < count; ++t) {
      bytes[t] = static_cast<int64_t>(random() % 5000);
      first[t] = random() % 8 == 0 ? -1 : static_cast<int>(random() % positions);
      last[t] = first[t] < 0 ? -1 : first[t] + static_cast<int>(random() % (positions - first[t]));
    }
    const TempLayout layout = lay_out_temporaries(bytes, first, last, positions);
    auto size = [&](size_t t) { return (bytes[t] + 63) / 64 * 64; };
    int64_t sum = 0, peak = 0;
    for (size_t pos = 0; pos < positions; ++pos) {
      int64_t live = 0;
      for (size_t t = 0; t < count; ++t) {
        if (first[t] >= 0 && first[t] <= static_cast<int>(pos) && static_cast<int>(pos) <= last[t]) live += size(t);
      }
      peak = std::max(peak, live);
    }
    for (size_t a = 0; a < count; ++a) {
      if (first[a] < 0) continue;
      sum += size(a);
      EXPECT_EQ(layout.offset[a] % TempLayout::kAlignment, 0);
      EXPECT_LE(layout.offset[a] + size(a), layout.bytes);
      for (size_t b = a + 1; b < count; ++b) {
        if (first[b] < 0 || last[a] < first[b] || last[b] < first[a]) continue;  // not at once
        const bool apart = layout.offset[a] + size(a) <= layout.offset[b] || layout.offset[b] + size(b) <= layout.offset[a];
        EXPECT_TRUE(apart) << "trial " << trial << ": temporaries " << a << " and " << b << " overlap";
      }
    }
    EXPECT_GE(layout.bytes, peak);
    EXPECT_LE(layout.bytes, sum);
  }
}

TEST(AllocatorTest, CpuBufferReturnsItsBlock) {
  CachingAllocator allocator;
  void* first = nullptr;
  {
    CpuBuffer buffer(allocator, DType::Float32, {3, 5});
    EXPECT_EQ(buffer.numel(), 15);
    EXPECT_EQ(buffer.size_bytes(), 60);
    EXPECT_EQ(buffer.dtype(), DType::Float32);
    EXPECT_THAT(buffer.shape(), ElementsAre(3, 5));
    EXPECT_TRUE(aligned(buffer.data(), 64));
    first = buffer.data();
  }
  EXPECT_EQ(allocator.stats().bytes_cached, 64);
  CpuBuffer again(allocator, DType::Int32, {16});
  EXPECT_EQ(again.data(), first);
  EXPECT_EQ(allocator.stats().bytes_reused, 64);

  CpuBuffer empty(allocator, DType::Float64, {0, 4});
  EXPECT_EQ(empty.numel(), 0);
  EXPECT_NE(empty.data(), nullptr);
}

// ---------------------------------------------------------------------------------------------
// Executor, with a fake kernel

/// What the fake kernel writes to: buffers[0] is this.
struct Visits {
  std::vector<std::atomic<int>> count;
  std::atomic<int> calls{0};
  std::atomic<bool> bad_range{false};
  const int64_t* expected_shapes = nullptr;
  std::atomic<bool> bad_shapes{false};
  int64_t fail_at = -1;  // the index whose chunk returns status 3
  explicit Visits(int64_t n) : count(static_cast<size_t>(n)) {}
};

int32_t fake_kernel(void* const* buffers, const int64_t* shapes, int64_t begin, int64_t end) {
  auto* visits = static_cast<Visits*>(buffers[0]);
  visits->calls.fetch_add(1);
  if (shapes != visits->expected_shapes) visits->bad_shapes = true;
  if (begin < 0 || begin >= end || end > static_cast<int64_t>(visits->count.size())) {
    visits->bad_range = true;
    return 0;
  }
  for (int64_t i = begin; i < end; ++i) visits->count[i].fetch_add(1, std::memory_order_relaxed);
  return begin <= visits->fail_at && visits->fail_at < end ? 3 : 0;
}

void expect_each_index_once(int threads, int64_t n) {
  SCOPED_TRACE(testing::Message() << threads << " threads, n = " << n);
  Executor executor(threads);
  EXPECT_EQ(executor.num_threads(), threads);
  Visits visits(n);
  const int64_t shapes[] = {n};
  visits.expected_shapes = shapes;
  void* buffers[] = {&visits};
  executor.run(&fake_kernel, buffers, shapes, n);
  EXPECT_FALSE(visits.bad_range);
  EXPECT_FALSE(visits.bad_shapes);
  int64_t wrong = 0;
  for (int64_t i = 0; i < n; ++i) wrong += visits.count[i].load() != 1;
  EXPECT_EQ(wrong, 0) << "indices not visited exactly once";
  if (n == 0) {
    EXPECT_EQ(visits.calls.load(), 0);
  } else if (n <= Executor::kInlineLimit) {
    EXPECT_EQ(visits.calls.load(), 1);  // inline, one call
  } else {
    EXPECT_LE(visits.calls.load(), 2 * threads);  // about one chunk per thread
  }
}

TEST(ExecutorTest, EachIndexExactlyOnce) {
  const int64_t large = Executor::kInlineLimit * 3 + 17;
  for (int threads : {1, 2, 4, 8}) {
    for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{7}, int64_t{1000}, Executor::kInlineLimit,
                      Executor::kInlineLimit + 1, large}) {
      expect_each_index_once(threads, n);
    }
  }
}

TEST(ExecutorTest, LargeRunsOnSeveralThreadsInChunks) {
  Executor executor(4);
  const int64_t n = Executor::kInlineLimit * 8;
  Visits visits(n);
  const int64_t shapes[] = {n};
  visits.expected_shapes = shapes;
  void* buffers[] = {&visits};
  executor.run(&fake_kernel, buffers, shapes, n);
  EXPECT_GT(visits.calls.load(), 1);  // split into chunks
  int64_t wrong = 0;
  for (int64_t i = 0; i < n; ++i) wrong += visits.count[i].load() != 1;
  EXPECT_EQ(wrong, 0);
}

// A kernel's status word comes back from whichever chunk failed, inline or split.
TEST(ExecutorTest, ReturnsTheStatusOfTheChunkThatFailed) {
  Executor executor(4);
  for (int64_t n : {int64_t{10}, Executor::kInlineLimit * 8}) {
    for (int64_t fail_at : {int64_t{-1}, int64_t{0}, n - 1}) {
      Visits visits(n);
      visits.fail_at = fail_at;
      const int64_t shapes[] = {n};
      visits.expected_shapes = shapes;
      void* buffers[] = {&visits};
      EXPECT_EQ(executor.run(&fake_kernel, buffers, shapes, n), fail_at < 0 ? 0 : 3) << n << " " << fail_at;
    }
  }
}

// Kernels compile as for_each tasks on the arena's threads: every task once, and with two
// threads two tasks at once (each waits for the other to start; the deadline only keeps a
// broken build from hanging).
TEST(ExecutorTest, ForEachRunsEveryTaskOnceAndSideBySide) {
  for (int threads : {1, 2, 4}) {
    Executor executor(threads);
    for (size_t count : {size_t{0}, size_t{1}, size_t{5}, size_t{64}}) {
      std::vector<std::atomic<int>> runs(count);
      executor.for_each(count, [&](size_t i) { runs[i].fetch_add(1); });
      for (size_t i = 0; i < count; ++i) EXPECT_EQ(runs[i].load(), 1) << threads << " threads, task " << i;
    }
  }
  Executor executor(2);
  std::atomic<int> started{0};
  std::atomic<int> met{0};
  executor.for_each(2, [&](size_t) {
    started.fetch_add(1);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (started.load() < 2 && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
    if (started.load() == 2) met.fetch_add(1);
  });
  EXPECT_EQ(met.load(), 2) << "the two tasks did not run at once";
}

TEST(ExecutorTest, NonPositiveThreadCountMeansOne) {
  Executor executor(0);
  EXPECT_EQ(executor.num_threads(), 1);
}

// ---------------------------------------------------------------------------------------------
// LiveTensors and TensorImpl

TEST(LiveTensorsTest, PendingTensorsAreLiveUntilMaterialisedOrDestroyed) {
  LiveTensors live;
  CachingAllocator allocator;
  auto leaf = ir::make_scalar(Scalar(1.0), DType::Float32);
  auto a = detail::TensorImpl::create(leaf, live);
  auto b = detail::TensorImpl::create(leaf, live);
  auto data = std::make_shared<CpuBuffer>(allocator, DType::Float32, std::vector<int64_t>{});
  auto c = detail::TensorImpl::create(data, live);  // holds data: not live
  EXPECT_EQ(live.size(), 2u);
  EXPECT_TRUE(a->pending());
  EXPECT_FALSE(c->pending());
  std::vector<std::shared_ptr<detail::TensorImpl>> snap = live.snapshot(std::this_thread::get_id());
  ASSERT_EQ(snap.size(), 2u);
  EXPECT_EQ(snap[0], a);  // oldest first
  EXPECT_EQ(snap[1], b);
  snap.clear();

  a->set_data(data, a->ir().get());
  EXPECT_FALSE(a->pending());
  EXPECT_EQ(live.size(), 1u);
  a->set_ir(leaf);  // an in-place update makes it pending again
  EXPECT_EQ(live.size(), 2u);
  b.reset();
  EXPECT_EQ(live.size(), 1u);
  EXPECT_EQ(live.snapshot(std::this_thread::get_id()).at(0), a);
  c->set_ir(leaf);
  EXPECT_EQ(live.size(), 2u);
  a.reset();
  c.reset();
  EXPECT_EQ(live.size(), 0u);
  EXPECT_TRUE(live.snapshot(std::this_thread::get_id()).empty());
}

// ---------------------------------------------------------------------------------------------
// GraphExecutor over its own collaborators

class GraphExecutorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<codegen::JitCompiler>> c = codegen::JitCompiler::create();
    ASSERT_TRUE(c.ok()) << c.status();
    compiler_ = *std::move(c);
    graph_executor_ = std::make_unique<GraphExecutor>(*compiler_, cache_, executor_, allocator_, live_, counters_);
    graph_executor_->set_tier(Tier::Compile);  // these tests count compiles
  }

  std::shared_ptr<detail::TensorImpl> input(std::vector<float> values) {
    auto data = std::make_shared<CpuBuffer>(allocator_, DType::Float32,
                                            std::vector<int64_t>{static_cast<int64_t>(values.size())});
    std::memcpy(data->data(), values.data(), values.size() * sizeof(float));
    return detail::TensorImpl::create(data, live_);
  }
  std::shared_ptr<detail::TensorImpl> pending(ir::OpKind op, std::vector<ir::NodePtr> operands) {
    absl::StatusOr<ir::NodePtr> node = ir::make_elementwise(op, operands);
    EXPECT_TRUE(node.ok()) << node.status();
    return detail::TensorImpl::create(*node, live_);
  }
  static std::vector<float> values(const detail::TensorImpl& t) {
    EXPECT_FALSE(t.pending());
    const auto* p = static_cast<const float*>(t.data()->data());
    return std::vector<float>(p, p + t.data()->numel());
  }
  static ir::NodePtr scalar(double v) { return ir::make_scalar(Scalar(v), DType::Float32); }

  std::unique_ptr<codegen::JitCompiler> compiler_;
  codegen::CompileCache cache_{/*capacity=*/1};
  Executor executor_{2};
  CachingAllocator allocator_;
  LiveTensors live_;
  RuntimeCounters counters_;
  std::unique_ptr<GraphExecutor> graph_executor_;
};

TEST_F(GraphExecutorTest, SyncMaterialisesAndCachesByKey) {
  auto x = input({1, 2, 3, 4});
  auto y = pending(ir::OpKind::Mul, {x->ir_value(), scalar(2.0)});
  graph_executor_->sync({y});
  EXPECT_THAT(values(*y), ElementsAre(2, 4, 6, 8));
  EXPECT_EQ(live_.size(), 0u);
  EXPECT_EQ(counters_.compiles.load(), 1);
  EXPECT_EQ(counters_.graphs_executed.load(), 1);

  // Another scalar value and another size: the same code.
  auto z = pending(ir::OpKind::Mul, {input({5, 6})->ir_value(), scalar(-1.0)});
  graph_executor_->sync({z});
  EXPECT_THAT(values(*z), ElementsAre(-5, -6));
  EXPECT_EQ(counters_.compiles.load(), 1);
  EXPECT_EQ(cache_.stats().hits, 1);

  // Syncing a materialised tensor does nothing.
  graph_executor_->sync({z});
  EXPECT_EQ(counters_.graphs_executed.load(), 2);
}

// Under auto a graph's background compile hands each kernel to the graph tier 0 runs as it is
// loaded: a later run that no longer finds the graph's compiled form (evicted from the compile
// cache) runs every kernel compiled all the same, from what the compile handed over.
TEST_F(GraphExecutorTest, TheBackgroundCompileHandsEachKernelToTheGraphTierZeroRuns) {
  graph_executor_->set_tier(Tier::Auto);
  graph_executor_->set_compile_cost(0);  // the whole graph from its second run
  auto x = input({1, 2, 3, 4}), z = input({5, 6, 7});
  auto run = [&] {  // two kernels: one per result shape
    auto doubled = pending(ir::OpKind::Mul, {x->ir_value(), scalar(2.0)});
    auto negated = pending(ir::OpKind::Neg, {z->ir_value()});
    graph_executor_->sync({doubled, negated});
    EXPECT_THAT(values(*doubled), ElementsAre(2, 4, 6, 8));
    EXPECT_THAT(values(*negated), ElementsAre(-5, -6, -7));
  };
  run();
  run();  // queues the compile
  graph_executor_->wait_for_compiles();
  EXPECT_EQ(counters_.tier0_kernel_runs.load(), 4);
  EXPECT_EQ(counters_.kernels_compiled_background.load(), 2);

  graph_executor_->set_tier(Tier::Compile);  // another graph takes the cache's one entry
  auto other = pending(ir::OpKind::Add, {x->ir_value(), scalar(1.0)});
  graph_executor_->sync({other});
  ASSERT_EQ(cache_.stats().evictions, 1);

  graph_executor_->set_tier(Tier::Auto);
  run();
  EXPECT_EQ(counters_.tier0_kernel_runs.load(), 4) << "both kernels ran compiled";
  EXPECT_EQ(counters_.kernels_compiled_background.load(), 2) << "nothing was compiled again";
}

TEST_F(GraphExecutorTest, EvictedGraphIsCompiledAgain) {
  auto x = input({1, 2});
  auto run = [&](ir::OpKind op) {
    auto t = pending(op, {x->ir_value(), scalar(1.0)});
    graph_executor_->sync({t});
    return values(*t);
  };
  EXPECT_THAT(run(ir::OpKind::Add), ElementsAre(2, 3));
  EXPECT_THAT(run(ir::OpKind::Sub), ElementsAre(0, 1));  // capacity 1: evicts add
  EXPECT_THAT(run(ir::OpKind::Add), ElementsAre(2, 3));  // compiled again, evicts sub
  EXPECT_EQ(counters_.compiles.load(), 3);
  EXPECT_EQ(cache_.stats().evictions, 2);
  EXPECT_EQ(cache_.stats().hits, 0);
}

TEST_F(GraphExecutorTest, MarkStepSyncsEveryLivePendingTensorInOneGraph) {
  auto x = input({1, 2, 3});
  auto a = pending(ir::OpKind::Add, {x->ir_value(), scalar(1.0)});
  auto b = pending(ir::OpKind::Mul, {a->ir(), scalar(10.0)});
  auto c = pending(ir::OpKind::Neg, {input({7})->ir_value()});
  EXPECT_EQ(live_.size(), 3u);
  graph_executor_->mark_step();
  EXPECT_EQ(live_.size(), 0u);
  EXPECT_EQ(counters_.graphs_executed.load(), 1);
  EXPECT_EQ(counters_.kernels_launched.load(), 2);  // shapes [3] and [1]
  EXPECT_THAT(values(*a), ElementsAre(2, 3, 4));
  EXPECT_THAT(values(*b), ElementsAre(20, 30, 40));
  EXPECT_THAT(values(*c), ElementsAre(-7));
  graph_executor_->mark_step();  // nothing pending: nothing runs
  EXPECT_EQ(counters_.graphs_executed.load(), 1);
}

TEST_F(GraphExecutorTest, DumpDoesNotRun) {
  auto x = input({1, 2, 3});
  auto y = pending(ir::OpKind::Exp, {x->ir_value()});
  const std::string text = graph_executor_->dump({y}, DumpFormat::LazyIr);
  EXPECT_THAT(text, HasSubstr("%1 = exp %0 : float32[3]"));
  EXPECT_THAT(graph_executor_->dump({y}, DumpFormat::LlvmIr), HasSubstr("define i32 @lj_"));
  EXPECT_TRUE(y->pending());
  EXPECT_EQ(counters_.compiles.load(), 0);
  EXPECT_EQ(counters_.graphs_executed.load(), 0);
}

// The backend interface: a graph lowered into a Computation with its signatures and LLVM IR.
TEST_F(GraphExecutorTest, TheLoweringContextDescribesTheComputation) {
  auto x = input({1, 2, 3});
  auto y = pending(ir::OpKind::Exp, {x->ir_value()});
  const ir::NodePtr roots[] = {y->ir_value()};
  const ir::Graph graph = ir::build_graph(roots);
  std::unique_ptr<Computation> computation = LlvmLoweringContext(graph).build();
  ASSERT_EQ(computation->parameter_shapes().size(), 1u);
  EXPECT_EQ(computation->parameter_shapes()[0].shape, (std::vector<int64_t>{3}));
  ASSERT_EQ(computation->result_shapes().size(), 1u);
  EXPECT_EQ(computation->result_shapes()[0].dtype, DType::Float32);
  EXPECT_THAT(computation->to_string(), HasSubstr("define i32 @lj_"));
  EXPECT_THAT(computation->to_string(), HasSubstr("@llvm.exp.f32"));
  EXPECT_TRUE(y->pending());
}

TEST_F(GraphExecutorTest, ResultsAreFreshAlignedBuffers) {
  auto x = input({1, 2, 3});
  auto y = pending(ir::OpKind::Neg, {x->ir_value()});
  graph_executor_->sync({y});
  EXPECT_TRUE(aligned(y->data()->data(), 64));
  EXPECT_NE(y->data()->data(), x->data()->data());
  EXPECT_THAT(values(*x), ElementsAre(1, 2, 3));
}

}  // namespace
}  // namespace lazyjit::runtime

namespace lazyjit::runtime {
namespace {

// The recompilation guardrail: past LAZYJIT_MAX_GRAPHS distinct graphs, a compile is an
// Error that names how the graph differs from the nearest one compiled.
class GuardrailTest : public GraphExecutorTest {
 protected:
  void SetUp() override {
    GraphExecutorTest::SetUp();
    graph_executor_ = std::make_unique<GraphExecutor>(*compiler_, cache_, executor_, allocator_, live_, counters_,
                                                      CompileOptions{.max_graphs = 2});
    graph_executor_->set_tier(Tier::Compile);
  }
};

TEST_F(GuardrailTest, TheThirdDistinctGraphIsAnErrorNamingTheDifference) {
  graph_executor_->sync({pending(ir::OpKind::Mul, {input({1, 2})->ir_value(), scalar(2.0)})});
  graph_executor_->sync({pending(ir::OpKind::Add, {input({1, 2})->ir_value(), scalar(2.0)})});
  // The first graph again (evicted from this one-entry cache): not a new distinct graph.
  graph_executor_->sync({pending(ir::OpKind::Mul, {input({3, 4})->ir_value(), scalar(5.0)})});
  try {
    graph_executor_->sync({pending(ir::OpKind::Sub, {input({1, 2})->ir_value(), scalar(2.0)})});
    FAIL() << "expected the guardrail to stop the third distinct graph";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), testing::HasSubstr("LAZYJIT_MAX_GRAPHS=2 distinct graphs are compiled already; this one "
                                             "differs from graph "));
    EXPECT_THAT(e.what(), testing::HasSubstr("at node %2 (sub): op sub float32[N], cached "));
  }
  EXPECT_EQ(counters_.compiles.load(), 3);
}

}  // namespace
}  // namespace lazyjit::runtime

namespace lazyjit::runtime {
namespace {

// A bounded cache evicts the least recently used graph, and its code leaves memory once
// nothing runs it.
TEST_F(GraphExecutorTest, EvictedGraphsFreeTheirCode) {
  ASSERT_EQ(compiler_->loaded_graphs(), 0);
  for (ir::OpKind op : {ir::OpKind::Add, ir::OpKind::Sub, ir::OpKind::Mul, ir::OpKind::Div}) {
    graph_executor_->sync({pending(op, {input({1, 2})->ir_value(), scalar(2.0)})});
    EXPECT_EQ(compiler_->loaded_graphs(), 1) << "capacity 1: the previous graph's code is gone";
  }
  EXPECT_EQ(cache_.stats().evictions, 3);
  cache_.clear();
  EXPECT_EQ(compiler_->loaded_graphs(), 0);
}

}  // namespace
}  // namespace lazyjit::runtime

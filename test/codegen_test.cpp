// Unit tests of lib/codegen: the compile cache (once per key, LRU, failures, races) and the
// JIT compiler (identity, compiling lowered graphs, calling kernels through the ABI, errors).
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <unistd.h>
#include <sys/stat.h>
#include <latch>
#include <memory>
#include <mutex>
#include <regex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "host_kernels.h"
#include "codegen/compile_cache.h"
#include "codegen/jit_compiler.h"
#include "codegen/kir_llvm.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/builder.h"
#include "ir/graph.h"
#include "ir/interpreter.h"
#include "codegen/disk_cache.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/Support/raw_ostream.h"
#include "lowering/fusion.h"
#include "lowering/lower.h"

namespace lazyjit::codegen {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using Entry = CompileCache::Entry;

// ---------------------------------------------------------------------------------------------
// CompileCache, with fake compiles

/// A CompiledGraph holding no code, told apart by the symbol of its one kernel spec.
Entry fake_entry(const std::string& tag) {
  lowering::KernelPlan plan;
  plan.kernels.push_back({.symbol = tag, .domain = 0, .results = {0}});
  return std::make_shared<const CompiledGraph>(std::move(plan), std::vector<std::shared_ptr<const CompiledKernel>>{});
}

std::string tag_of(const absl::StatusOr<Entry>& entry) {
  if (!entry.ok()) return "<error: " + std::string(entry.status().message()) + ">";
  if (*entry == nullptr) return "<null>";
  return (*entry)->kernels().at(0).symbol;
}

ir::Hash128 key(uint64_t n) { return ir::Hash128{n, ~n}; }

/// A compile function that counts its calls and returns fake_entry(tag).
struct CountingCompile {
  std::string tag;
  std::atomic<int>* calls;
  absl::StatusOr<Entry> operator()() const {
    calls->fetch_add(1);
    return fake_entry(tag);
  }
};

TEST(CompileCacheTest, SameKeyCompiledOnce) {
  CompileCache cache;
  std::atomic<int> calls{0};
  absl::StatusOr<Entry> first = cache.get_or_make(key(1), CountingCompile{"a", &calls});
  absl::StatusOr<Entry> second = cache.get_or_make(key(1), CountingCompile{"b", &calls});
  absl::StatusOr<Entry> third = cache.get_or_make(key(1), CountingCompile{"c", &calls});
  EXPECT_EQ(calls.load(), 1);
  EXPECT_EQ(tag_of(first), "a");
  EXPECT_EQ(tag_of(second), "a");
  EXPECT_EQ(tag_of(third), "a");
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_EQ(first->get(), second->get());  // the very same compiled graph
  const CompileCache::Stats stats = cache.stats();
  EXPECT_EQ(stats.misses, 1);
  EXPECT_EQ(stats.hits, 2);
  EXPECT_EQ(stats.evictions, 0);
  EXPECT_TRUE(cache.contains(key(1)));
  EXPECT_FALSE(cache.contains(key(2)));
  EXPECT_EQ(cache.size(), 1u);
}

TEST(CompileCacheTest, DistinctKeysCompileSeparately) {
  CompileCache cache;
  std::atomic<int> calls{0};
  EXPECT_EQ(tag_of(cache.get_or_make(key(1), CountingCompile{"one", &calls})), "one");
  EXPECT_EQ(tag_of(cache.get_or_make(key(2), CountingCompile{"two", &calls})), "two");
  EXPECT_EQ(tag_of(cache.get_or_make(key(1), CountingCompile{"x", &calls})), "one");
  EXPECT_EQ(tag_of(cache.get_or_make(key(2), CountingCompile{"y", &calls})), "two");
  EXPECT_EQ(calls.load(), 2);
  EXPECT_EQ(cache.stats().misses, 2);
  EXPECT_EQ(cache.stats().hits, 2);
  EXPECT_EQ(cache.size(), 2u);
}

TEST(CompileCacheTest, EmptyEntryIsCachedLikeAnyOther) {
  CompileCache cache;
  int calls = 0;
  auto compile = [&]() -> absl::StatusOr<Entry> {
    ++calls;
    return Entry();
  };
  EXPECT_EQ(tag_of(cache.get_or_make(key(3), compile)), "<null>");
  EXPECT_EQ(tag_of(cache.get_or_make(key(3), compile)), "<null>");
  EXPECT_EQ(calls, 1);
}

TEST(CompileCacheTest, FailedCompileIsNotCached) {
  CompileCache cache;
  int calls = 0;
  auto failing = [&]() -> absl::StatusOr<Entry> {
    ++calls;
    return absl::InternalError("boom");
  };
  absl::StatusOr<Entry> r = cache.get_or_make(key(7), failing);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInternal);
  EXPECT_EQ(r.status().message(), "boom");
  EXPECT_FALSE(cache.contains(key(7)));
  EXPECT_EQ(cache.size(), 0u);

  // The next call compiles again; once that succeeds, it is cached.
  EXPECT_FALSE(cache.get_or_make(key(7), failing).ok());
  EXPECT_EQ(calls, 2);
  std::atomic<int> good_calls{0};
  EXPECT_EQ(tag_of(cache.get_or_make(key(7), CountingCompile{"fixed", &good_calls})), "fixed");
  EXPECT_EQ(tag_of(cache.get_or_make(key(7), failing)), "fixed");
  EXPECT_EQ(good_calls.load(), 1);
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(cache.stats().misses, 3);
  EXPECT_EQ(cache.stats().hits, 1);
}

// Regression: a compile function that threw used to leave its slot behind with a broken
// promise, so every later call for that key threw std::future_error instead of compiling.
TEST(CompileCacheTest, ThrowingCompileIsNotCached) {
  CompileCache cache;
  auto throwing = []() -> absl::StatusOr<Entry> { throw std::runtime_error("compile threw"); };
  EXPECT_THROW(cache.get_or_make(key(9), throwing), std::runtime_error);
  EXPECT_FALSE(cache.contains(key(9)));

  std::atomic<int> calls{0};
  std::string tag;
  try {
    tag = tag_of(cache.get_or_make(key(9), CountingCompile{"after", &calls}));
  } catch (const std::exception& e) {
    tag = std::string("<threw: ") + e.what() + ">";
  }
  EXPECT_EQ(tag, "after");
  EXPECT_EQ(calls.load(), 1);
}

TEST(CompileCacheTest, LruCapacityEvictsLeastRecentlyUsed) {
  CompileCache cache(2);
  std::atomic<int> calls{0};
  cache.get_or_make(key(1), CountingCompile{"A", &calls}).IgnoreError();
  cache.get_or_make(key(2), CountingCompile{"B", &calls}).IgnoreError();
  cache.get_or_make(key(1), CountingCompile{"A'", &calls}).IgnoreError();  // A is now most recent
  EXPECT_EQ(cache.stats().evictions, 0);
  cache.get_or_make(key(3), CountingCompile{"C", &calls}).IgnoreError();   // evicts B
  EXPECT_EQ(cache.stats().evictions, 1);
  EXPECT_EQ(cache.size(), 2u);
  EXPECT_TRUE(cache.contains(key(1)));
  EXPECT_FALSE(cache.contains(key(2)));
  EXPECT_TRUE(cache.contains(key(3)));
  EXPECT_EQ(calls.load(), 3);

  // B compiles again, evicting A (C was used more recently).
  EXPECT_EQ(tag_of(cache.get_or_make(key(2), CountingCompile{"B2", &calls})), "B2");
  EXPECT_EQ(calls.load(), 4);
  EXPECT_EQ(cache.stats().evictions, 2);
  EXPECT_FALSE(cache.contains(key(1)));
  EXPECT_TRUE(cache.contains(key(3)));
  EXPECT_EQ(cache.stats().misses, 4);
  EXPECT_EQ(cache.stats().hits, 1);
}

TEST(CompileCacheTest, ContainsDoesNotTouchLruOrder) {
  CompileCache cache(2);
  std::atomic<int> calls{0};
  cache.get_or_make(key(1), CountingCompile{"A", &calls}).IgnoreError();
  cache.get_or_make(key(2), CountingCompile{"B", &calls}).IgnoreError();
  EXPECT_TRUE(cache.contains(key(1)));  // not a use
  cache.get_or_make(key(3), CountingCompile{"C", &calls}).IgnoreError();
  EXPECT_FALSE(cache.contains(key(1)));
  EXPECT_TRUE(cache.contains(key(2)));
}

TEST(CompileCacheTest, EvictedEntryStaysValidWhileHeld) {
  CompileCache cache(1);
  std::atomic<int> calls{0};
  absl::StatusOr<Entry> held = cache.get_or_make(key(1), CountingCompile{"held", &calls});
  cache.get_or_make(key(2), CountingCompile{"other", &calls}).IgnoreError();
  EXPECT_FALSE(cache.contains(key(1)));
  EXPECT_EQ(cache.stats().evictions, 1);
  EXPECT_EQ(tag_of(held), "held");
}

TEST(CompileCacheTest, SetCapacityClearAndResetStats) {
  CompileCache cache;  // unbounded
  std::atomic<int> calls{0};
  for (uint64_t k = 0; k < 5; ++k) cache.get_or_make(key(k), CountingCompile{"k", &calls}).IgnoreError();
  EXPECT_EQ(cache.size(), 5u);
  EXPECT_EQ(cache.stats().evictions, 0);
  cache.set_capacity(2);
  EXPECT_EQ(cache.size(), 2u);
  EXPECT_EQ(cache.stats().evictions, 3);
  EXPECT_TRUE(cache.contains(key(3)));
  EXPECT_TRUE(cache.contains(key(4)));
  cache.reset_stats();
  EXPECT_EQ(cache.stats().hits, 0);
  EXPECT_EQ(cache.stats().misses, 0);
  EXPECT_EQ(cache.stats().evictions, 0);
  cache.clear();
  EXPECT_EQ(cache.size(), 0u);
  EXPECT_FALSE(cache.contains(key(4)));
  cache.get_or_make(key(4), CountingCompile{"k", &calls}).IgnoreError();
  EXPECT_EQ(calls.load(), 6);
}

TEST(CompileCacheTest, RacingThreadsCompileOnce) {
  constexpr int kThreads = 8;
  CompileCache cache;
  std::atomic<int> calls{0};
  std::latch start(kThreads);
  std::vector<absl::StatusOr<Entry>> results(kThreads, absl::UnknownError("not run"));
  const Entry compiled = fake_entry("raced");
  auto slow_compile = [&]() -> absl::StatusOr<Entry> {
    calls.fetch_add(1);
    // Keeps the compile in flight while the other threads arrive (correct at any timing).
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    return compiled;
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      start.arrive_and_wait();
      results[t] = cache.get_or_make(key(42), slow_compile);
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(calls.load(), 1);
  for (int t = 0; t < kThreads; ++t) {
    ASSERT_TRUE(results[t].ok()) << results[t].status();
    EXPECT_EQ(results[t]->get(), compiled.get()) << "thread " << t;
  }
  EXPECT_EQ(cache.stats().misses, 1);
  EXPECT_EQ(cache.stats().hits, kThreads - 1);
}

TEST(CompileCacheTest, RacingThreadsOnSeveralKeys) {
  constexpr int kThreads = 8;
  constexpr int kKeys = 3;
  CompileCache cache;
  std::atomic<int> calls[kKeys] = {};
  std::latch start(kThreads);
  std::vector<std::thread> threads;
  std::vector<std::string> tags(kThreads * kKeys);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      start.arrive_and_wait();
      for (int i = 0; i < kKeys; ++i) {
        const int k = (i + t) % kKeys;  // threads start on different keys
        tags[t * kKeys + k] = tag_of(cache.get_or_make(key(k), CountingCompile{std::to_string(k), &calls[k]}));
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (int k = 0; k < kKeys; ++k) EXPECT_EQ(calls[k].load(), 1) << "key " << k;
  for (int t = 0; t < kThreads; ++t) {
    for (int k = 0; k < kKeys; ++k) EXPECT_EQ(tags[t * kKeys + k], std::to_string(k));
  }
  EXPECT_EQ(cache.stats().misses, kKeys);
  EXPECT_EQ(cache.stats().hits, kThreads * kKeys - kKeys);
}

// ---------------------------------------------------------------------------------------------
// JitCompiler

/// One JIT for the tests of this file (creating one costs milliseconds, not seconds).
JitCompiler& jit() {
  static std::unique_ptr<JitCompiler> compiler = [] {
    absl::StatusOr<std::unique_ptr<JitCompiler>> c = JitCompiler::create();
    if (!c.ok()) {
      ADD_FAILURE() << c.status();
      return std::unique_ptr<JitCompiler>();
    }
    return *std::move(c);
  }();
  if (!compiler) throw std::runtime_error("no JIT");
  return *compiler;
}

TEST(JitCompilerTest, CreateSucceedsAndFingerprintIsStable) {
  absl::StatusOr<std::unique_ptr<JitCompiler>> a = JitCompiler::create();
  ASSERT_TRUE(a.ok()) << a.status();
  absl::StatusOr<std::unique_ptr<JitCompiler>> b = JitCompiler::create();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ((*a)->fingerprint(), (*b)->fingerprint());
  EXPECT_NE((*a)->fingerprint(), ir::Hash128{});
  EXPECT_EQ((*a)->target_description(), (*b)->target_description());
  EXPECT_THAT((*a)->target_description(), HasSubstr("lean"));
  EXPECT_THAT((*a)->target_description(), HasSubstr("LLVM 19"));
}

using test::HostData;

std::shared_ptr<HostData> floats(std::vector<int64_t> shape, float start, float step) {
  auto data = std::make_shared<HostData>(DType::Float32, std::move(shape));
  float* p = static_cast<float*>(data->data());
  for (int64_t i = 0; i < data->numel(); ++i) p[i] = start + step * static_cast<float>(i);
  return data;
}

ir::NodePtr ew(ir::OpKind op, std::vector<ir::NodePtr> operands) {
  absl::StatusOr<ir::NodePtr> node = ir::make_elementwise(op, operands);
  if (!node.ok()) throw std::runtime_error(std::string(node.status().message()));
  return *node;
}

/// Runs every kernel of `code` over `graph`'s own buffers, each over [0, numel) split at
/// `split` (so the ABI's begin/end slicing is exercised), and returns the result buffers.
/// The graph run by `code`'s kernels, each over its iterations in one call, or two split at `split`.
std::vector<std::shared_ptr<HostData>> run(const ir::Graph& graph, const CompiledGraph& code, int64_t split = 0) {
  return test::run_kernels(graph, code, [&](lowering::KernelFn f, void* const* args, const int64_t* dims, int64_t n) {
           const int64_t mid = std::min(split, n);
           if (mid > 0) f(args, dims, 0, mid);
           if (n > mid) f(args, dims, mid, n);
           return 0;
         }).results;
}

/// Compares each result of a compiled run with the reference interpreter, exactly.
void expect_matches_interpreter(const ir::Graph& graph, const std::vector<std::shared_ptr<HostData>>& results) {
  std::vector<ir::HostTensor> expected = ir::interpret(graph);
  ASSERT_EQ(expected.size(), results.size());
  for (size_t r = 0; r < results.size(); ++r) {
    ASSERT_EQ(static_cast<int64_t>(expected[r].bytes.size()), results[r]->size_bytes());
    EXPECT_EQ(std::memcmp(expected[r].bytes.data(), results[r]->data(), expected[r].bytes.size()), 0)
        << "result " << r << " differs from the interpreter";
  }
}

/// out0 = x * s + row, out1 = x > row (one shape class), out2 = -row (another).
struct TestGraph {
  std::shared_ptr<HostData> x, row;
  ir::NodePtr out0, out1, out2;
  ir::Graph graph;
  TestGraph(int64_t rows, int64_t cols, double s) {
    x = floats({rows, cols}, -3.0f, 0.5f);
    row = floats({cols}, 1.0f, -0.25f);
    ir::NodePtr px = ir::make_parameter(x);
    ir::NodePtr prow = ir::make_parameter(row);
    out0 = ew(ir::OpKind::Add, {ew(ir::OpKind::Mul, {px, ir::make_scalar(Scalar(s), DType::Float32)}), prow});
    out1 = ew(ir::OpKind::Gt, {px, prow});
    out2 = ew(ir::OpKind::Neg, {prow});
    const ir::NodePtr roots[] = {out0, out1, out2};
    graph = ir::build_graph(roots);
  }
};

// A kernel's arguments are its own frame: the same kernel in two graphs whose buffers, sizes
// and scalars sit at other places in the graph's tables is the same code.
TEST(KernelFrameTest, TheSameKernelInTwoGraphsIsTheSameCode) {
  auto scalar = [](double v) { return ir::make_scalar(ir::ScalarValue::of_double(v), DType::Float32, {}); };
  auto kernel_of = [&](const ir::NodePtr& x, const ir::NodePtr& b, double s) {
    return ew(ir::OpKind::Tanh, {ew(ir::OpKind::Add, {ew(ir::OpKind::Mul, {x, scalar(s)}), b})});
  };
  const ir::NodePtr x = ir::make_parameter(floats({4, 8}, 0, 1)), b = ir::make_parameter(floats({8}, 1, 0));
  const ir::NodePtr alone[] = {kernel_of(x, b, 0.5)};
  ir::Graph first = ir::build_graph(alone);
  // Another graph: other buffers, sizes and scalars come first, so every graph-wide index of
  // the same kernel differs.
  const ir::NodePtr y = ir::make_parameter(floats({3}, 0, 1));
  const ir::NodePtr other = ew(ir::OpKind::Sub, {ew(ir::OpKind::Mul, {y, scalar(2.0)}), scalar(1.0)});
  const ir::NodePtr x2 = ir::make_parameter(floats({6, 8}, 0, 1)), b2 = ir::make_parameter(floats({8}, 2, 0));
  const ir::NodePtr both[] = {other, kernel_of(x2, b2, 0.25)};
  ir::Graph second = ir::build_graph(both);

  lowering::LoweredGraph one = lowering::lower_graph(first), two = lowering::lower_graph(second);
  ASSERT_EQ(one.plan.kernels.size(), 1u);
  ASSERT_EQ(two.plan.kernels.size(), 2u);
  const lowering::KernelSpec& a = one.plan.kernels[0];
  const lowering::KernelSpec& b_kernel = two.plan.kernels[1];
  EXPECT_EQ(one.kernels[0].content, two.kernels[1].content);
  EXPECT_EQ(module_text(*emit_module(one.kernels[0]).module), module_text(*emit_module(two.kernels[1]).module));
  EXPECT_EQ(a.symbol, "lj_" + one.kernels[0].content.to_hex());
  EXPECT_NE(two.kernels[0].content, two.kernels[1].content);
  EXPECT_EQ(a.frame.buffers, (std::vector<int>{0, 1, 2, lowering::KernelFrame::kScalars}));
  EXPECT_EQ(b_kernel.frame.buffers, (std::vector<int>{1, 2, 4, lowering::KernelFrame::kScalars}));
  EXPECT_EQ(a.frame.scalars, (std::vector<int>{0}));
  EXPECT_EQ(b_kernel.frame.scalars, (std::vector<int>{2}));
  EXPECT_NE(a.frame.dims, b_kernel.frame.dims);
  EXPECT_EQ(a.frame.dims.size(), b_kernel.frame.dims.size());
}

TEST(JitCompilerTest, CompilesAndRunsALoweredGraph) {
  TestGraph g(3, 5, 1.5);
  lowering::LoweredGraph lowered = lowering::lower_graph(g.graph);
  ASSERT_EQ(lowered.plan.kernels.size(), 2u);  // one per result shape
  EXPECT_EQ(lowered.plan.kernels[0].results, (std::vector<int>{0, 1}));
  EXPECT_EQ(lowered.plan.kernels[1].results, (std::vector<int>{2}));
  absl::StatusOr<std::shared_ptr<const CompiledGraph>> code = jit().compile(std::move(lowered));
  ASSERT_TRUE(code.ok()) << code.status();
  ASSERT_EQ((*code)->kernels().size(), 2u);
  for (size_t k = 0; k < 2; ++k) ASSERT_NE((*code)->function(k), nullptr);

  std::vector<std::shared_ptr<HostData>> results = run(g.graph, **code);
  const float* out0 = static_cast<const float*>(results[0]->data());
  EXPECT_EQ(out0[0], -3.0f * 1.5f + 1.0f);
  EXPECT_EQ(out0[14], (-3.0f + 0.5f * 14) * 1.5f + (1.0f - 0.25f * 4));
  expect_matches_interpreter(g.graph, results);

  // The same code over slices of the iteration space.
  for (int64_t split : {1, 4, 7, 14}) {
    SCOPED_TRACE(split);
    expect_matches_interpreter(g.graph, run(g.graph, **code, split));
  }
}

// Kernels are compiled once by content: a graph made of kernels another graph already has
// compiles nothing, and a kernel's code lives while any graph holds it.
TEST(JitCompilerTest, EachDistinctKernelIsCompiledOnce) {
  auto compiler = JitCompiler::create();
  ASSERT_TRUE(compiler.ok()) << compiler.status();
  JitCompiler& jit = **compiler;
  TestGraph g(4, 9, -2.0);
  JitCompiler::Report first_report;
  JitCompiler::Artifacts artifacts;
  lowering::LoweredGraph lowered = lowering::lower_graph(g.graph);
  const lowering::KernelPlan plan = lowered.plan;
  absl::StatusOr<std::shared_ptr<const CompiledGraph>> first = jit.compile(std::move(lowered), nullptr, &first_report, &artifacts);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first_report.kernels_compiled, 2);
  EXPECT_EQ(first_report.kernel_cache_hits, 0);
  for (const lowering::KernelSpec& kernel : plan.kernels) {  // each kernel's code is in the dumps
    EXPECT_THAT(artifacts.assembly, HasSubstr(kernel.symbol + ":"));
    EXPECT_THAT(artifacts.optimized_ir, HasSubstr("define i32 @" + kernel.symbol + "("));
  }
  expect_matches_interpreter(g.graph, run(g.graph, **first));
  EXPECT_EQ(jit.loaded_kernels(), 2);

  // Another graph (other sizes, so another key would not matter; the same kernels) compiles nothing.
  TestGraph other(7, 9, 3.0);
  JitCompiler::Report second_report;
  absl::StatusOr<std::shared_ptr<const CompiledGraph>> second = jit.compile(lowering::lower_graph(other.graph), nullptr, &second_report);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(second_report.kernels_compiled, 0);
  EXPECT_EQ(second_report.kernel_cache_hits, 2);
  expect_matches_interpreter(other.graph, run(other.graph, **second));

  first->reset();
  EXPECT_EQ(jit.loaded_kernels(), 2) << "the second graph still holds them";
  second->reset();
  EXPECT_EQ(jit.loaded_kernels(), 0);
}

// A compile that tier 0 runs beside hands each kernel over as soon as it is loaded, in the
// order asked for (the kernels the order leaves out after it, in graph order), and a kernel
// the graph holds twice at each of its indices; the graph it returns has the same code.
TEST(JitCompilerTest, AProgressiveCompileHandsEachKernelOverInTheOrderAskedFor) {
  auto compiler = JitCompiler::create();  // its own: nothing compiled before
  ASSERT_TRUE(compiler.ok()) << compiler.status();
  auto scalar = [](double v) { return ir::make_scalar(ir::ScalarValue::of_double(v), DType::Float32, {}); };
  auto kernel_of = [&](const ir::NodePtr& x, const ir::NodePtr& b, double s) {
    return ew(ir::OpKind::Abs, {ew(ir::OpKind::Add, {ew(ir::OpKind::Mul, {x, scalar(s)}), b})});
  };
  const ir::NodePtr x = ir::make_parameter(floats({4, 8}, 0, 1)), b = ir::make_parameter(floats({8}, 1, 0));
  const ir::NodePtr y = ir::make_parameter(floats({3}, 0, 1)), z = ir::make_parameter(floats({5}, 0, 1));
  const ir::NodePtr x2 = ir::make_parameter(floats({6, 8}, 0, 1)), b2 = ir::make_parameter(floats({8}, 2, 0));
  const ir::NodePtr roots[] = {kernel_of(x, b, 0.5), ew(ir::OpKind::Neg, {y}), kernel_of(x2, b2, 0.25),
                               ew(ir::OpKind::Relu, {z})};
  const ir::Graph graph = ir::build_graph(roots);
  lowering::LoweredGraph lowered = lowering::lower_graph(graph);
  ASSERT_EQ(lowered.kernels.size(), 4u);
  // Which kernel computes which root: the two abs kernels are one kernel by content.
  std::vector<size_t> of_root(4);
  for (size_t k = 0; k < 4; ++k) of_root[static_cast<size_t>(lowered.plan.kernels[k].results.at(0))] = k;
  const size_t abs_a = of_root[0], neg = of_root[1], abs_b = of_root[2], relu = of_root[3];
  ASSERT_EQ(lowered.kernels[abs_a].content, lowered.kernels[abs_b].content);

  std::vector<std::pair<size_t, const CompiledKernel*>> handed;
  std::mutex handed_mutex;
  const JitCompiler::Progress progress{
      .order = {relu, abs_b},  // the neg kernel left out: last
      .ready = [&](size_t k, const std::shared_ptr<const CompiledKernel>& code) {
        std::lock_guard lock(handed_mutex);
        handed.emplace_back(k, code.get());
      }};
  JitCompiler::Report report;
  absl::StatusOr<std::shared_ptr<const CompiledGraph>> code =
      (*compiler)->compile(std::move(lowered), nullptr, &report, nullptr, in_order, &progress);
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(report.kernels_compiled, 3);
  ASSERT_EQ(handed.size(), 4u);
  EXPECT_EQ(handed[0].first, relu);
  // The abs kernel is first asked for at index abs_b; it serves abs_a (where the graph
  // first holds it) too.
  EXPECT_EQ((std::vector<size_t>{handed[1].first, handed[2].first}), (std::vector<size_t>{abs_a, abs_b}));
  EXPECT_EQ(handed[1].second, handed[2].second);
  EXPECT_EQ(handed[3].first, neg);
  for (const auto& [k, kernel] : handed) EXPECT_EQ(kernel->function(), (*code)->function(k)) << "kernel " << k;
  expect_matches_interpreter(graph, run(graph, **code));
}

TEST(JitCompilerTest, CodeReadsSizesFromTheShapeTable) {
  TestGraph small(3, 5, 1.5);
  TestGraph large(40, 33, -0.75);
  ASSERT_EQ(small.graph.key, large.graph.key);
  absl::StatusOr<std::shared_ptr<const CompiledGraph>> code = jit().compile(lowering::lower_graph(small.graph));
  ASSERT_TRUE(code.ok()) << code.status();
  expect_matches_interpreter(small.graph, run(small.graph, **code));
  expect_matches_interpreter(large.graph, run(large.graph, **code, 500));
}

/// A graph of one hand-written kernel, and its module: a function `name` that the verifier
/// accepts or rejects.
struct HandKernel {
  lowering::LoweredGraph lowered;
  std::vector<KernelModule> modules;
};
HandKernel hand_module(const std::string& name, bool valid, const std::string& callee = "") {
  HandKernel hand;
  lowering::LoweredKernel& kernel = hand.lowered.kernels.emplace_back();
  kernel.content = ir::hash_bytes(name + (valid ? "valid" : "invalid") + callee);
  KernelModule& m = hand.modules.emplace_back();
  m.context = std::make_unique<llvm::LLVMContext>();
  m.module = std::make_unique<llvm::Module>("hand", *m.context);
  llvm::LLVMContext& ctx = *m.context;
  auto* ptr = llvm::PointerType::get(ctx, 0);
  auto* i64 = llvm::Type::getInt64Ty(ctx);
  auto* type = llvm::FunctionType::get(llvm::Type::getInt32Ty(ctx), {ptr, ptr, i64, i64}, false);
  auto* fn = llvm::Function::Create(type, llvm::Function::ExternalLinkage, name, *m.module);
  llvm::IRBuilder<> b(llvm::BasicBlock::Create(ctx, "entry", fn));
  if (!callee.empty()) {
    llvm::FunctionCallee f = m.module->getOrInsertFunction(callee, llvm::Type::getVoidTy(ctx));
    b.CreateCall(f);
  }
  if (valid) b.CreateRet(b.getInt32(0));  // else: a block without a terminator
  return hand;
}

TEST(JitCompilerTest, InvalidIrIsAnError) {
  HandKernel hand = hand_module("bad_kernel", /*valid=*/false);
  hand.lowered.plan.kernels.push_back({.symbol = "bad_kernel", .domain = 0, .results = {0}});
  absl::StatusOr<std::shared_ptr<const CompiledGraph>> code = jit().compile(std::move(hand.lowered), std::move(hand.modules));
  ASSERT_FALSE(code.ok());
  EXPECT_THAT(code.status().message(), HasSubstr("generated LLVM IR is invalid"));
}

TEST(JitCompilerTest, MissingKernelSymbolIsAnErrorAndTheJitStillWorks) {
  HandKernel hand = hand_module("present_kernel", /*valid=*/true);
  hand.lowered.plan.kernels.push_back({.symbol = "missing_kernel", .domain = 0, .results = {0}});
  absl::StatusOr<std::shared_ptr<const CompiledGraph>> code = jit().compile(std::move(hand.lowered), std::move(hand.modules));
  ASSERT_FALSE(code.ok());
  EXPECT_THAT(code.status().message(), HasSubstr("compiling missing_kernel: the module does not define it"));

  TestGraph g(2, 3, 2.0);
  absl::StatusOr<std::shared_ptr<const CompiledGraph>> good = jit().compile(lowering::lower_graph(g.graph));
  ASSERT_TRUE(good.ok()) << good.status();
  expect_matches_interpreter(g.graph, run(g.graph, **good));
}

TEST(JitCompilerTest, UnresolvedExternalIsAnErrorNamingIt) {
  HandKernel hand = hand_module("calls_nothing", /*valid=*/true, "lazyjit_test_no_such_function");
  hand.lowered.plan.kernels.push_back({.symbol = "calls_nothing", .domain = 0, .results = {0}});
  absl::StatusOr<std::shared_ptr<const CompiledGraph>> code = jit().compile(std::move(hand.lowered), std::move(hand.modules));
  ASSERT_FALSE(code.ok());
  EXPECT_THAT(code.status().message(), HasSubstr("lazyjit_test_no_such_function"));
}

TEST(JitCompilerTest, SameGraphCompiledTwiceIntoOneJit) {
  // Symbols are named after the kernel's content; a second copy (e.g. after an eviction) must load.
  TestGraph g(2, 3, 2.0);
  absl::StatusOr<std::shared_ptr<const CompiledGraph>> first = jit().compile(lowering::lower_graph(g.graph));
  ASSERT_TRUE(first.ok()) << first.status();
  first->reset();  // frees the first copy's code, as an eviction does
  absl::StatusOr<std::shared_ptr<const CompiledGraph>> second = jit().compile(lowering::lower_graph(g.graph));
  ASSERT_TRUE(second.ok()) << second.status();
  expect_matches_interpreter(g.graph, run(g.graph, **second));
}

// A graph compiled again while an earlier copy is still loaded (evicted while another thread
// ran it, then requested again) shares the earlier copy's kernels.
TEST(JitCompilerTest, SameGraphCompiledTwiceWhileTheFirstIsStillHeld) {
  TestGraph g(2, 3, 2.0);
  absl::StatusOr<std::shared_ptr<const CompiledGraph>> first = jit().compile(lowering::lower_graph(g.graph));
  ASSERT_TRUE(first.ok()) << first.status();
  absl::StatusOr<std::shared_ptr<const CompiledGraph>> second = jit().compile(lowering::lower_graph(g.graph));
  ASSERT_TRUE(second.ok()) << second.status();
  expect_matches_interpreter(g.graph, run(g.graph, **first));
  expect_matches_interpreter(g.graph, run(g.graph, **second));
}

TEST(JitCompilerTest, TextShowsAKernelAsEmittedOptimisedAndAssembled) {
  TestGraph g(2, 3, 2.0);
  const lowering::LoweredGraph lowered = lowering::lower_graph(g.graph);
  const std::string& symbol = lowered.plan.kernels[0].symbol;
  absl::StatusOr<std::string> emitted = jit().text(lowered, JitCompiler::Text::LlvmIr);
  absl::StatusOr<std::string> optimized = jit().text(lowered, JitCompiler::Text::OptimizedLlvmIr);
  absl::StatusOr<std::string> assembly = jit().text(lowered, JitCompiler::Text::Assembly);
  ASSERT_TRUE(emitted.ok() && optimized.ok() && assembly.ok());
  EXPECT_THAT(*emitted, HasSubstr("define i32 @" + symbol + "("));
  EXPECT_THAT(*emitted, Not(HasSubstr(" x float>")));
  EXPECT_THAT(*optimized, HasSubstr(" x float>"));  // vectorised
  EXPECT_THAT(*assembly, HasSubstr(symbol + ":"));
  EXPECT_EQ(*emitted, llvm_ir_text(lowered));
}

}  // namespace
}  // namespace lazyjit::codegen

namespace lazyjit::codegen {
namespace {

class DiskCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    directory_ = std::filesystem::temp_directory_path() /
                 ("lazyjit-disk-cache-" + std::to_string(::getpid()) + "-" +
                  testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(directory_);
  }
  void TearDown() override { std::filesystem::remove_all(directory_); }
  std::string error_of(const ir::Hash128& key) {
    auto loaded = cache().load(key);
    return loaded.ok() ? "<ok>" : std::string(loaded.status().message());
  }
  DiskCache cache() const {
    absl::StatusOr<DiskCache> opened = DiskCache::open(directory_.string());
    EXPECT_TRUE(opened.ok()) << opened.status();
    return opened.ok() ? *std::move(opened) : DiskCache();
  }
  void rewrite(const ir::Hash128& key, const std::function<void(std::string&)>& edit) {
    const std::string path = cache().path_of(key);
    std::ifstream in(path, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    edit(bytes);
    std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
  }
  std::filesystem::path directory_;
};

TEST_F(DiskCacheTest, StoresAndLoadsObjects) {
  const ir::Hash128 key{1, 2};
  auto missing = cache().load(key);
  ASSERT_TRUE(missing.ok());
  EXPECT_FALSE(missing->has_value());
  ASSERT_TRUE(cache().store(key, std::string("object\0bytes", 12)).ok());
  auto loaded = cache().load(key);
  ASSERT_TRUE(loaded.ok() && loaded->has_value());
  EXPECT_EQ(**loaded, std::string("object\0bytes", 12));
}

TEST_F(DiskCacheTest, DamagedFilesAreErrorsThatSayWhat) {
  const ir::Hash128 key{3, 4};
  ASSERT_TRUE(cache().store(key, "0123456789").ok());
  const std::string path = cache().path_of(key);
  rewrite(key, [](std::string& b) { b.resize(b.size() - 3); });
  EXPECT_EQ(error_of(key), "cache file " + path + " is truncated (7 of 10 payload bytes)");
  ASSERT_TRUE(cache().store(key, "0123456789").ok());
  rewrite(key, [](std::string& b) { b.back() ^= 1; });
  EXPECT_EQ(error_of(key), "cache file " + path + " is corrupt (checksum mismatch)");
  rewrite(key, [](std::string& b) { b[0] = 'X'; });
  EXPECT_EQ(error_of(key), "cache file " + path + " is not a lazyjit object (bad magic)");
  rewrite(key, [](std::string& b) { b.resize(5); });
  EXPECT_EQ(error_of(key), "cache file " + path + " is truncated (5 bytes, no header)");
  // Another key's file under this name (copied or renamed by hand).
  const ir::Hash128 other{5, 6};
  ASSERT_TRUE(cache().store(other, "x").ok());
  std::filesystem::copy_file(cache().path_of(other), path, std::filesystem::copy_options::overwrite_existing);
  EXPECT_EQ(error_of(key), "cache file " + path + " is another key's (renamed or copied)");
  ASSERT_TRUE(cache().store(key, "fresh").ok());  // replaced
  EXPECT_EQ(**cache().load(key), "fresh");
}

TEST_F(DiskCacheTest, AnOverlongFileIsNotCalledTruncated) {
  const ir::Hash128 key{9, 10};
  ASSERT_TRUE(cache().store(key, "0123456789").ok());
  rewrite(key, [](std::string& b) { b += "xyz"; });
  EXPECT_EQ(error_of(key), "cache file " + cache().path_of(key) + " is longer than its header says (13 payload "
                                                                   "bytes, 10 expected)");
}

// A FIFO under a key's name would block open() forever; a link to /dev/zero would be read
// until memory runs out. Neither is read, and store() replaces both.
TEST_F(DiskCacheTest, OnlyRegularFilesAreReadAndNothingBlocks) {
  const ir::Hash128 fifo_key{11, 12}, link_key{13, 14};
  const std::string fifo = cache().path_of(fifo_key), link = cache().path_of(link_key);
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::filesystem::create_symlink("/dev/zero", link);
  EXPECT_EQ(error_of(fifo_key), "cache file " + fifo + " is not a regular file");
  EXPECT_EQ(error_of(link_key), "cache file " + link + " is a symbolic link");
  ASSERT_TRUE(cache().store(fifo_key, "a").ok());
  ASSERT_TRUE(cache().store(link_key, "b").ok());
  EXPECT_EQ(**cache().load(fifo_key), "a");
  EXPECT_EQ(**cache().load(link_key), "b");
}

TEST_F(DiskCacheTest, TheDirectoryIsCreatedForItsOwnerAloneAndOthersWritableOnesAreRefused) {
  cache();
  EXPECT_EQ(std::filesystem::status(directory_).permissions(), std::filesystem::perms::owner_all);
  std::filesystem::permissions(directory_, std::filesystem::perms::others_write, std::filesystem::perm_options::add);
  absl::StatusOr<DiskCache> opened = DiskCache::open(directory_.string());
  ASSERT_FALSE(opened.ok());
  EXPECT_EQ(opened.status().message(), "cache directory " + directory_.string() +
                                           " can be written by others (mode 702); its objects would run in this "
                                           "process: chmod 700 it");
  std::filesystem::permissions(directory_, std::filesystem::perms::owner_all | std::filesystem::perms::group_write);
  EXPECT_FALSE(DiskCache::open(directory_.string()).ok());
  const std::string file = (directory_ / "file").string();
  std::filesystem::permissions(directory_, std::filesystem::perms::owner_all);
  std::ofstream(file) << "x";
  EXPECT_EQ(DiskCache::open(file).status().message(), file + " is not a directory");
}

TEST_F(DiskCacheTest, ConcurrentWritersNeverLeaveAHalfWrittenFile) {
  const ir::Hash128 key{7, 8};
  std::atomic<bool> stop{false};
  std::atomic<int> bad{0};
  std::thread reader([&] {
    while (!stop) {
      auto loaded = cache().load(key);
      if (!loaded.ok()) ++bad;
    }
  });
  std::vector<std::thread> writers;
  for (int w = 0; w < 4; ++w) {
    writers.emplace_back([&, w] {
      const std::string object(100000 + w, static_cast<char>('a' + w));
      for (int i = 0; i < 20; ++i) EXPECT_TRUE(cache().store(key, object).ok());
    });
  }
  for (auto& t : writers) t.join();
  stop = true;
  reader.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_TRUE(cache().load(key).ok());
}

}  // namespace
}  // namespace lazyjit::codegen

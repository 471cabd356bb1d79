// GraphExecutor: materialises tensors: graph, key, compile cache, buffers, kernels, results.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <span>
#include <thread>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "codegen/compile_cache.h"
#include "codegen/jit_compiler.h"
#include "lazyjit/runtime.h"
#include "runtime/allocator.h"
#include "runtime/background_compiler.h"
#include "runtime/barrier_lock.h"
#include "runtime/counters.h"
#include "runtime/executor.h"
#include "runtime/graph_compiler.h"
#include "runtime/live_tensors.h"
#include "runtime/tensor_impl.h"
#include "runtime/tier0.h"
#include "runtime/tier_up.h"

namespace lazyjit::runtime {

/// A graph as tier 0 runs it: its plan, each kernel prepared for tier 0, and each kernel's
/// compiled code as it comes (DESIGN.md section 7, "Tiers"): at once for the kernels other
/// graphs have compiled, and under auto one by one as the graph's own background compiles
/// (when TierUp says) load them, the kernels tier 0 spent longest in first. A run uses what is
/// there when it starts; once the whole graph is compiled, the compile cache runs it.
struct Tier0Graph {
  lowering::KernelPlan plan;
  std::vector<Tier0Kernel> kernels;

  /// `contents`: each kernel's content (the kernels of one content compile once).
  explicit Tier0Graph(lowering::KernelPlan p, std::vector<Tier0Kernel> k,
                      std::vector<std::shared_ptr<const codegen::CompiledKernel>> code,
                      std::span<const ir::Hash128> contents)
      : plan(std::move(p)), kernels(std::move(k)), compiled_(std::move(code)),
        tier0_ns_(std::make_unique<std::atomic<int64_t>[]>(kernels.size())), tier_up_(contents) {}

  /// Per kernel: its compiled code now, or null (tier 0 runs it).
  std::vector<std::shared_ptr<const codegen::CompiledKernel>> compiled() const {
    std::lock_guard lock(compiled_mutex_);
    return compiled_;
  }
  /// Kernel `k`'s compiled code, for the runs that start from now on.
  void set_compiled(size_t k, std::shared_ptr<const codegen::CompiledKernel> code) const {
    std::lock_guard lock(compiled_mutex_);
    compiled_[k] = std::move(code);
  }
  /// Counts a tier-0 run of kernel `k` that took `ns`.
  void ran_on_tier0(size_t k, int64_t ns) const { tier0_ns_[k].fetch_add(ns, std::memory_order_relaxed); }
  /// `kernels` (all of them when empty) by the time tier 0 spent in them, the longest first:
  /// the order to compile them in.
  std::vector<size_t> slowest_first(std::vector<size_t> kernels = {}) const;

  /// A compile to queue after a run (TierUp): `job`, the lowered graph to compile from (null:
  /// nothing to compile now), and which of its kernels.
  struct Compile {
    std::shared_ptr<GraphCompiler::Lowered> job;
    TierUp::Decision what;
  };
  /// Under auto, after each run (which took `run_ns`): what TierUp says to compile now, a
  /// kernel's compile costing `cost_ns`.
  Compile after_run(int64_t run_ns, int64_t cost_ns) const;
  /// The lowered graph, kept to compile from (a graph with kernels not compiled yet, under auto).
  void keep_for_compile(std::shared_ptr<GraphCompiler::Lowered> job) { pending_ = std::move(job); }

 private:
  mutable std::mutex compiled_mutex_;
  mutable std::vector<std::shared_ptr<const codegen::CompiledKernel>> compiled_;
  std::unique_ptr<std::atomic<int64_t>[]> tier0_ns_;  // per kernel, summed over its tier-0 runs
  mutable std::mutex pending_mutex_;
  mutable std::shared_ptr<GraphCompiler::Lowered> pending_;  // until the whole graph is queued
  mutable TierUp tier_up_;
};

/// The materialisation pipeline of DESIGN.md section 1: collect the pending tensors, build
/// the graph and its key, find or compile its code, allocate (or donate) the outputs, run,
/// assign. Borrows its collaborators, so a test can build one over its own cache.
/// Thread-safe: threads may sync their own tensors at once.
class GraphExecutor {
 public:
  GraphExecutor(codegen::JitCompiler& compiler, codegen::CompileCache& cache, Executor& executor,
                CachingAllocator& allocator, LiveTensors& live, RuntimeCounters& counters,
                CompileOptions options = {})
      : compiler_(compiler), cache_(cache), executor_(executor), allocator_(allocator), live_(live),
        counters_(counters), graph_compiler_(compiler, counters, std::move(options)), plans_(cache.capacity()),
        tier0_graphs_(cache.capacity()),
        spare_core_(executor.num_threads() < static_cast<int>(std::thread::hardware_concurrency())),
        background_(executor.num_threads()) {}

  /// Which engine runs later materialisations (lazyjit::Tier).
  void set_tier(Tier tier) { tier_.store(tier, std::memory_order_relaxed); }
  Tier tier() const { return tier_.load(std::memory_order_relaxed); }
  /// Waits for the background compiles queued so far.
  void wait_for_compiles() { background_.wait_idle(); }
  /// Under auto, what compiling a kernel costs the steps (lazyjit::set_compile_cost;
  /// negative: measured).
  void set_compile_cost(int64_t ns) { compile_cost_ns_.store(ns, std::memory_order_relaxed); }

  /// Materialises the pending tensors among `tensors` in one graph, with no donation (a
  /// value read twice must not change). Throws Error when the graph cannot be compiled.
  /// Runs alongside other syncs; waits while a step barrier runs.
  void sync(std::vector<std::shared_ptr<detail::TensorImpl>> tensors);
  /// The step barrier of the calling thread: every live pending tensor this thread gave its
  /// value (created, or last updated in place), in one graph; outputs may take over the
  /// buffers of inputs nothing else can read again (donation.h). Other threads' pending
  /// tensors are theirs to step, so threads that train their own models do not end each
  /// other's graphs. Runs alone: it waits for running syncs (syncs that start later wait
  /// for it), and claims its tensors so other threads' ops on them wait for it.
  void mark_step();
  /// From now on, a tensor materialised by sync() keeps the graph that computed it until the
  /// next mark_step(), so autograd can still differentiate through it (`loss.item()` before
  /// `loss.backward()`). Autograd turns it on; without autograd no graph outlives its sync.
  void keep_history_on_sync() { keep_history_.store(true, std::memory_order_relaxed); }
  /// The graphs kept so, keyed by the Parameter leaf over each kept tensor's value: an op
  /// that read the tensor after its sync read that leaf, and autograd differentiates through
  /// the leaf into the graph that computed it.
  absl::flat_hash_map<const ir::Node*, ir::NodePtr> kept_histories();
  /// Bounds the compile cache and the plan cache to `entries` graphs each (0: unbounded).
  void set_cache_capacity(size_t entries) {
    cache_.set_capacity(entries);
    plans_.set_capacity(entries);
    tier0_graphs_.set_capacity(entries);
  }
  /// The text of the graph over `tensors` (pending IR or data leaves) in `format`.
  std::string dump(const std::vector<std::shared_ptr<detail::TensorImpl>>& tensors, DumpFormat format);

 private:
  void materialize(std::vector<std::shared_ptr<detail::TensorImpl>> tensors, bool barrier);
  /// The plan of `graph` (lowering/plan.h): made once per graph key while cached.
  std::shared_ptr<const lowering::KernelPlan> plan_of(const ir::Graph& graph);
  /// The compiled form of `graph` with `aliases` (cache key `key`), compiled on a miss (from
  /// `plan`, or the graph's plan when none is given).
  std::shared_ptr<const codegen::CompiledGraph> compiled(const ir::Graph& graph,
                                                         std::shared_ptr<const lowering::KernelPlan> plan,
                                                         std::span<const lowering::Alias> aliases,
                                                         const ir::Hash128& key);
  /// The tier-0 form of the same, lowered on a miss; `compile_in_background`: a miss also
  /// keeps the lowered graph for its compile (Tier0Graph::keep_for_compile, TierUp).
  std::shared_ptr<const Tier0Graph> interpreted(const ir::Graph& graph, std::shared_ptr<const lowering::KernelPlan> plan,
                                                std::span<const lowering::Alias> aliases, const ir::Hash128& key,
                                                bool compile_in_background);
  /// Work on a graph the user waits for (lowering, readying for tier 0, compiling its
  /// kernels): `task(i)` for i in [0, count) as tasks on the runtime's threads, each with
  /// `stack_bytes` of stack (run_with_stack).
  void on_runtime_threads(size_t stack_bytes, size_t count, absl::FunctionRef<void(size_t)> task) const;
  /// Queues `compile` (of the lowered graph of cache key `key` that `tier0` runs meanwhile)
  /// to the background compiler: its kernels are handed to `tier0` one by one, the slowest on
  /// tier 0 first, and the whole graph, when it is that, to the compile cache when all are done.
  void compile_in_background(const ir::Hash128& key, Tier0Graph::Compile compile, std::shared_ptr<const Tier0Graph> tier0);
  /// What compiling a kernel costs the steps now (set_compile_cost, TierUp).
  int64_t compile_cost_ns() const;
  /// What runs a graph's kernels: its compiled code, or tier 0 (with the kernels compiled
  /// for other graphs, under auto; under LAZYJIT_TIER=0, tier 0 runs them all).
  struct Code {
    const lowering::KernelPlan& plan;
    const codegen::CompiledGraph* compiled = nullptr;
    const Tier0Graph* tier0 = nullptr;
    bool tier0_only = false;
  };
  void execute(const ir::Graph& graph, const Code& code, std::span<const lowering::Alias> aliases,
               const std::vector<std::shared_ptr<detail::TensorImpl>>& targets, bool keep_history);
  /// Drops the graphs that this thread's syncs kept (keep_history_on_sync): its step
  /// barrier ends them.
  void drop_kept_histories();
  /// Watches for a training loop without mark_step(): syncs of this thread that each compile
  /// a larger graph than the last, because in-place updates stay pending and every read
  /// recompiles their whole history. Warns once. A barrier (`nodes` 0) starts over.
  void watch_growth(size_t nodes);

  codegen::JitCompiler& compiler_;
  codegen::CompileCache& cache_;
  Executor& executor_;
  CachingAllocator& allocator_;
  LiveTensors& live_;
  RuntimeCounters& counters_;
  GraphCompiler graph_compiler_;
  codegen::KeyedCache<lowering::KernelPlan> plans_;  // by graph key
  codegen::KeyedCache<Tier0Graph> tier0_graphs_;     // by cache key
  std::atomic<Tier> tier_ = Tier::Auto;
  std::atomic<int64_t> compile_cost_ns_ = -1;
  const bool spare_core_;  // the runtime's threads leave a core free: compiles cost the steps nothing
  BarrierLock barrier_mutex_;  // shared: syncs; exclusive: a step barrier
  std::atomic<bool> keep_history_ = false;
  std::mutex kept_mutex_;
  struct Kept {
    std::thread::id thread;  // whose sync kept it
    std::weak_ptr<detail::TensorImpl> tensor;
  };
  std::vector<Kept> kept_;  // tensors that may hold a history
  struct Growth {
    size_t first = 0, last = 0;  // node counts of the first and last sync of the run
    int syncs = 0;               // consecutive syncs, each larger than the one before
  };
  std::mutex growth_mutex_;
  absl::flat_hash_map<std::thread::id, Growth> growth_;  // per thread
  bool reported_growth_ = false;
  BackgroundCompiler background_;  // last: stopped first, while what its jobs use lives
};

}  // namespace lazyjit::runtime

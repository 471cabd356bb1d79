// Materialisation, metrics and dumps.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lazyjit/tensor.h"

namespace lazyjit {

/// Materialises `tensors` in one graph: compiles (or finds in the cache) one kernel set for
/// all of them and runs it. Tensors that already hold data are skipped.
void sync(const std::vector<Tensor>& tensors);

/// The step barrier of the calling thread: materialises, in one graph, every live tensor
/// with pending IR that this thread gave its value (created it, or last updated it in
/// place), and ends the graphs kept for autograd by this thread's syncs. An output may be
/// written into the buffer of an input that nothing can read again (a tensor's old value
/// after an in-place update: `w -= lr * g` runs in place). Threads that each train their
/// own model step independently: one thread's mark_step() never materialises another's
/// forward pass before its backward(). A tensor another thread made and this one only
/// reads is not materialised here (it is recomputed where read until its own thread steps
/// it). It waits for other threads' running syncs (syncs that start after it wait for it),
/// and their ops on the tensors it materialises wait until it is done.
void mark_step();

/// Bounds the in-memory compile cache (and the plan cache beside it) to `entries` graphs (0:
/// unbounded; default 1024 or LAZYJIT_CACHE_SIZE); the least recently used are evicted and
/// their code freed.
void set_compile_cache_capacity(int64_t entries);

/// Which engine runs a graph's kernels (LAZYJIT_TIER: auto, 0 or 1).
enum class Tier {
  Auto,       ///< kernels not compiled yet run at once on tier 0, an interpreter of the kernel IR,
              ///< while LLVM compiles them in the background as they earn it (set_compile_cost),
              ///< and compiled code runs each from then on (a graph run once is never compiled)
  Interpret,  ///< tier 0 only: never compile, and run every kernel on tier 0, even one
              ///< compiled earlier in the process (short scripts, tests of semantics)
  Compile,    ///< wait for compiled code (no warm-up: benchmarks, tests of compilation)
};
/// Sets the tier of later materialisations (default: LAZYJIT_TIER, else Auto).
void set_tier(Tier tier);
Tier tier();
/// Waits until the background compiles queued so far are done, so that their graphs run
/// compiled code from their next execution on.
void wait_for_compiles();
/// Under Tier::Auto, what compiling one kernel in the background costs the steps
/// (LAZYJIT_COMPILE_COST_MS), which decides when it is worth it (rent or buy): from a graph's
/// second run, a kernel compiles once tier 0 has spent twice that in it, and the rest of the
/// graph once its kernels not compiled yet have together spent twice that each on tier 0, or
/// once the graph has run, in all, that long per kernel it came with; then compiled code runs
/// the whole graph. 0: the whole graph compiles from its second run. Negative (the default):
/// 0 when the runtime's threads leave a core free, else LLVM's time per kernel so far.
void set_compile_cost(double milliseconds);

/// Counters since process start or the last reset_metrics(). Thread-safe snapshot.
struct Metrics {
  int64_t graphs_traced = 0;      ///< graphs collected for materialisation
  int64_t nodes_traced = 0;       ///< IR nodes created by ops
  int64_t graphs_executed = 0;    ///< graphs run (cache hit or fresh compile)
  int64_t graphs_planned = 0;     ///< graphs fused into kernels: once per graph key while cached
  int64_t compiles = 0;           ///< graphs compiled whole that needed a kernel compiled (LLVM optimise +
                                  ///< codegen); hot kernels compiled ahead of their graph count in kernels_compiled
  int64_t kernels_compiled = 0;   ///< distinct kernels compiled: each kernel's code is compiled once
  int64_t kernel_cache_hits = 0;  ///< kernels of newly seen graphs whose code was in memory already
  int64_t cache_hits = 0;         ///< in-memory compile cache (graphs)
  int64_t cache_misses = 0;
  int64_t disk_cache_hits = 0;    ///< kernels loaded from the on-disk cache instead of compiling
  int64_t evictions = 0;
  int64_t donations = 0;          ///< outputs written into an input's buffer
  int64_t bytes_allocated = 0;    ///< fresh buffer memory (pool reuse does not count)
  int64_t bytes_reused = 0;       ///< buffer memory served from the pool
  int64_t bytes_in = 0;           ///< copied in by from_vector
  int64_t bytes_out = 0;          ///< copied out by to_vector (host_view copies nothing)
  int64_t kernels_launched = 0;
  int64_t tier0_kernel_runs = 0;  ///< kernel launches that tier 0 ran (of kernels_launched)
  int64_t kernels_compiled_background = 0;  ///< of kernels_compiled, while tier 0 ran their graphs
  int64_t tier_switches = 0;      ///< graphs whose background compile finished: compiled from then on
  double plan_seconds = 0;        ///< fusing new graphs into kernels (graphs_planned)
  double compile_seconds = 0;     ///< lowering + LLVM optimise + codegen
  double tier0_prepare_seconds = 0;  ///< lowering new graphs and readying them for tier 0: with
                                     ///< planning, what a new graph's first run waits for under
                                     ///< LAZYJIT_TIER=auto or 0
  double execute_seconds = 0;     ///< running kernels
  int64_t collectives = 0;        ///< collective ops carried out (lazyjit/collectives.h)
  int64_t collectives_overlapped = 0;  ///< of those, the ones a kernel ran beside
  double collective_seconds = 0;  ///< their time under way, start to end
  double collective_wait_seconds = 0;  ///< of that, the time kernels waited for them (the rest
                                       ///< ran beside kernels: overlapped)
};
Metrics metrics();
/// A readable report of metrics(), one counter per line.
std::string metrics_report();
void reset_metrics();

/// Ptx is the NVPTX target's assembly (sm_90, PTX 8.0): no GPU is needed to see it.
enum class DumpFormat { LazyIr, Plan, KernelIr, LlvmIr, OptimizedLlvmIr, Assembly, Ptx };
/// Text of the graph that would materialise `tensors`, in the chosen form. Does not run it.
std::string dump(const std::vector<Tensor>& tensors, DumpFormat format);

}  // namespace lazyjit

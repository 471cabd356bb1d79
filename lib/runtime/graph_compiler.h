// GraphCompiler: the compile-cache miss path: check, explain, load from disk or compile,
// dump. One per runtime; the GraphExecutor calls it through the CompileCache.
#pragma once

#include <atomic>
#include <chrono>
#include <mutex>
#include <span>
#include <string>

#include "absl/container/flat_hash_set.h"
#include "codegen/compile_cache.h"
#include "codegen/disk_cache.h"
#include "codegen/jit_compiler.h"
#include "runtime/compile_log.h"
#include "runtime/counters.h"
#include "runtime/dump_dir.h"

namespace lazyjit::runtime {

struct CompileOptions {
  DumpDir dump_dir{""};                    ///< LAZYJIT_DUMP_DIR
  codegen::DiskCache disk_cache;           ///< LAZYJIT_CACHE_DIR
  int64_t max_graphs = 0;                  ///< LAZYJIT_MAX_GRAPHS; 0: no limit
  double slow_compile_seconds = 1.0;       ///< a compile that takes longer is reported, once
};

class GraphCompiler {
 public:
  GraphCompiler(codegen::JitCompiler& compiler, RuntimeCounters& counters, CompileOptions options)
      : compiler_(compiler), counters_(counters), options_(std::move(options)) {}

  /// A graph checked and lowered, ready for LLVM: what tier 0 runs while it compiles.
  struct Lowered {
    lowering::LoweredGraph graph;
    std::string stem;       ///< the graph's name in dumps and logs
    std::string why;        ///< why it compiles (CompileLog::explain), when logged
    size_t nodes = 0;
    std::chrono::steady_clock::time_point start;
  };

  /// Compiled code for `graph` with its plan and `aliases` (its cache key is `key`): lower(),
  /// then compile().
  absl::StatusOr<codegen::CompileCache::Entry> compile(const ir::Graph& graph, const lowering::KernelPlan& plan,
                                                       std::span<const lowering::Alias> aliases, const ir::Hash128& key,
                                                       codegen::ForEachKernel for_each);
  /// The first half: verified, checked against the recompilation guardrail, lowered (each
  /// kernel a task of `for_each`), dumped (all but the compiled forms). Logs why it compiles
  /// at info level.
  absl::StatusOr<Lowered> lower(const ir::Graph& graph, const lowering::KernelPlan& plan,
                                std::span<const lowering::Alias> aliases, const ir::Hash128& key,
                                lowering::ForEachKernel for_each);
  /// The second half, which needs no graph: each kernel taken from memory or the disk cache
  /// when its code is there, else compiled (and stored on disk); the compiled forms dumped. A
  /// bad disk-cache file is reported once and replaced. New kernels compile as the tasks of
  /// `for_each`, handed over as `progress` asks when given. `background`: counted and logged
  /// as such.
  absl::StatusOr<codegen::CompileCache::Entry> compile(Lowered lowered, codegen::ForEachKernel for_each,
                                                       bool background = false,
                                                       const codegen::JitCompiler::Progress* progress = nullptr);
  /// Those of `lowered`'s kernels listed in `which` ahead of the rest of their graph, in the
  /// background (TierUp's hot kernels): taken from the disk cache or compiled, each handed
  /// over as `progress` asks, counted and logged as compile() does.
  absl::Status compile_kernels(const Lowered& lowered, std::span<const size_t> which, codegen::ForEachKernel for_each,
                               const codegen::JitCompiler::Progress& progress);
  /// LLVM's thread time (optimisation and machine code) per kernel compiled so far, or
  /// `prior_ns` before the first: what compiling a kernel costs on this machine.
  int64_t kernel_compile_ns(int64_t prior_ns) const;

 private:
  using Clock = std::chrono::steady_clock;
  void warn_once(const std::string& what);
  /// Counts what `report` did (its kernels `background` ones when so).
  void count(const codegen::JitCompiler::Report& report, bool background);

  codegen::JitCompiler& compiler_;
  RuntimeCounters& counters_;
  CompileOptions options_;
  CompileLog log_;
  std::atomic<bool> reported_slow_ = false;
  std::atomic<int64_t> llvm_ns_ = 0, llvm_kernels_ = 0;  // summed over the kernels compiled
  std::mutex warned_mutex_;
  absl::flat_hash_set<std::string> warned_;
};

}  // namespace lazyjit::runtime

// GraphExecutor: materialises tensors: graph, key, compile cache, buffers, kernels, results.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "codegen/compile_cache.h"
#include "codegen/jit_compiler.h"
#include "lazyjit/runtime.h"
#include "runtime/allocator.h"
#include "runtime/compile_log.h"
#include "runtime/dump_dir.h"
#include "runtime/executor.h"
#include "runtime/live_tensors.h"
#include "runtime/tensor_impl.h"

namespace lazyjit::runtime {

/// Counters kept by the runtime itself (the cache and allocator keep their own).
struct RuntimeCounters {
  std::atomic<int64_t> graphs_traced{0}, nodes_traced{0}, graphs_executed{0}, compiles{0},
      bytes_in{0}, bytes_out{0}, kernels_launched{0}, compile_ns{0}, execute_ns{0};
  void reset();
};

/// The materialisation pipeline of DESIGN.md section 1. Borrows its collaborators, so a test
/// can build one over its own cache. Thread-safe: threads may sync their own tensors at once.
class GraphExecutor {
 public:
  GraphExecutor(codegen::JitCompiler& compiler, codegen::CompileCache& cache, Executor& executor,
                CachingAllocator& allocator, LiveTensors& live, RuntimeCounters& counters,
                DumpDir dump_dir = DumpDir(""))
      : compiler_(compiler), cache_(cache), executor_(executor), allocator_(allocator), live_(live),
        counters_(counters), dump_dir_(std::move(dump_dir)) {}

  /// Materialises the pending tensors among `tensors` in one graph. Throws Error when the
  /// graph cannot be compiled.
  void sync(std::vector<std::shared_ptr<detail::TensorImpl>> tensors);
  /// Materialises every live pending tensor in one graph.
  void mark_step();
  /// The text of the graph over `tensors` (pending IR or data leaves) in `format`.
  std::string dump(const std::vector<std::shared_ptr<detail::TensorImpl>>& tensors, DumpFormat format);

 private:
  std::shared_ptr<const codegen::CompiledGraph> compiled(const ir::Graph& graph);
  /// The cache-miss path: verify, explain, lower, dump, compile.
  absl::StatusOr<codegen::CompileCache::Entry> compile(const ir::Graph& graph);
  void execute(const ir::Graph& graph, const codegen::CompiledGraph& compiled,
               const std::vector<std::shared_ptr<detail::TensorImpl>>& targets);

  codegen::JitCompiler& compiler_;
  codegen::CompileCache& cache_;
  Executor& executor_;
  CachingAllocator& allocator_;
  LiveTensors& live_;
  RuntimeCounters& counters_;
  DumpDir dump_dir_;
  CompileLog compile_log_;
};

}  // namespace lazyjit::runtime

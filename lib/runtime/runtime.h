// Runtime: the one process-wide default backend, created in one place on first use.
#pragma once

#include <memory>

#include "runtime/graph_executor.h"

namespace lazyjit::runtime {

/// Owns the JIT, the compile cache, the thread pool, the allocator, the live-tensor set and
/// the counters, and the GraphExecutor wired to them. Configured from the environment:
/// LAZYJIT_NUM_THREADS (default: all cores), LAZYJIT_CACHE_SIZE (entries; default 1024),
/// LAZYJIT_DUMP_DIR (write every compiled graph there), LAZYJIT_CACHE_DIR (on-disk object
/// cache), LAZYJIT_MAX_GRAPHS (recompilation guardrail).
/// Never destroyed, so tensors in static storage stay valid through exit.
class Runtime {
 public:
  static Runtime& get();

  codegen::JitCompiler& compiler() { return *compiler_; }
  codegen::CompileCache& cache() { return cache_; }
  Executor& executor() { return executor_; }
  CachingAllocator& allocator() { return allocator_; }
  LiveTensors& live() { return live_; }
  RuntimeCounters& counters() { return counters_; }
  GraphExecutor& graph_executor() { return graph_executor_; }

  Metrics metrics() const;
  void reset_metrics();

 private:
  Runtime();

  std::unique_ptr<codegen::JitCompiler> compiler_;
  codegen::CompileCache cache_;
  Executor executor_;
  CachingAllocator allocator_;
  LiveTensors live_;
  RuntimeCounters counters_;
  GraphExecutor graph_executor_;
};

}  // namespace lazyjit::runtime

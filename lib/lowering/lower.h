// Lowering a graph to an LLVM module of fused kernels, and the LoweringContext over it.
#pragma once

#include <memory>
#include <vector>

#include "ir/graph.h"
#include "lazyjit/backend.h"
#include "lowering/lowered_graph.h"

namespace lazyjit::lowering {

/// Lowers a verified graph: plans kernels (fusion.h) and emits each loop nest (loop_nest.h).
/// Symbols are named after the graph key, so one JIT can hold many graphs.
/// `aliases` are the donations the runtime planned (they are part of the cache key).
LoweredGraph lower_graph(const ir::Graph& graph, std::span<const Alias> aliases = {});

/// The module's LLVM IR as text.
std::string module_text(const llvm::Module& module);

/// The LLVM backend's LoweringContext (DESIGN.md section 2): build() lowers the graph into a
/// Computation whose text is the module's LLVM IR.
class LlvmLoweringContext : public LoweringContext {
 public:
  explicit LlvmLoweringContext(const ir::Graph& graph) : graph_(graph) {}
  std::unique_ptr<Computation> build() override;

 private:
  const ir::Graph& graph_;
};

}  // namespace lazyjit::lowering

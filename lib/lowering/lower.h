// Lowering a graph to an LLVM module of fused kernels, and the LoweringContext over it.
#pragma once

#include <memory>
#include <vector>

#include "ir/graph.h"
#include "lazyjit/backend.h"
#include "lowering/lowered_graph.h"

namespace lazyjit::lowering {

/// Lowers a verified graph: plans kernels (fusion.h) and emits each into a module of its own
/// (loop_nest.h, kernels.h), named after its content (LoweredKernel), so a kernel that two
/// graphs share is one symbol. `aliases` are the donations the runtime planned (they are
/// part of the cache key).
LoweredGraph lower_graph(const ir::Graph& graph, std::span<const Alias> aliases = {});

/// The module's LLVM IR as text.
std::string module_text(const llvm::Module& module);
/// Every kernel's module as text, in plan order.
std::string lowered_text(const LoweredGraph& lowered);

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

// Lowering a graph to kernel IR and LLVM modules of fused kernels, and the LoweringContext over it.
#pragma once

#include <memory>
#include <vector>

#include "ir/graph.h"
#include "lazyjit/backend.h"
#include "lowering/lowered_graph.h"

namespace lazyjit::lowering {

/// Lowers a verified graph: plans kernels (fusion.h) and builds each one's kernel IR
/// (kernel_builder.h), named after its content (LoweredKernel), so a kernel that two graphs
/// share is one symbol. `aliases` are the donations the runtime planned (they are part of
/// the cache key).
LoweredGraph lower_graph(const ir::Graph& graph, std::span<const Alias> aliases = {});
/// The same from `plan`, the graph's plan (plan_graph in plan.h) made earlier.
LoweredGraph lower_graph(const ir::Graph& graph, KernelPlan plan, std::span<const Alias> aliases);

/// The kernel's LLVM module, emitted from its kernel IR on first use.
llvm::Module& module_of(LoweredKernel& kernel);

/// The module's LLVM IR as text.
std::string module_text(const llvm::Module& module);
/// Every kernel's module as text, in plan order (emitting those not emitted yet).
std::string lowered_text(LoweredGraph& lowered);
/// Every kernel's kernel IR as text, in plan order, each under its symbol.
std::string kernels_text(const LoweredGraph& lowered);

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

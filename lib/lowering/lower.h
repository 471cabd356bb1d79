// Lowering a graph to the kernel IR of its planned kernels.
#pragma once

#include <span>
#include <string>

#include "ir/graph.h"
#include "lowering/lowered_graph.h"

namespace lazyjit::lowering {

/// Lowers a verified graph: plans it (plan.h) and builds each kernel's kernel IR
/// (kernel_builder.h), named after its content (LoweredKernel), so a kernel that two graphs
/// share is one symbol. `aliases` are the donations the runtime planned (they are part of
/// the cache key).
LoweredGraph lower_graph(const ir::Graph& graph, std::span<const Alias> aliases = {});
/// The same from `plan`, the graph's plan (plan_graph in plan.h) made earlier.
LoweredGraph lower_graph(const ir::Graph& graph, KernelPlan plan, std::span<const Alias> aliases);

/// Every kernel's kernel IR as text, in plan order, each under its symbol.
std::string kernels_text(const LoweredGraph& lowered);

}  // namespace lazyjit::lowering

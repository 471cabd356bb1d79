// Fusion planning: which results are computed by which kernel.
#pragma once

#include <vector>

#include "ir/graph.h"
#include "lowering/kernel_abi.h"

namespace lazyjit::lowering {

/// One kernel per distinct result shape: all elementwise and broadcast work that produces
/// results of one shape fuses into one loop nest; nothing in between touches memory (an
/// intermediate used by two kernels is recomputed in each, cheaper than a round trip).
/// Depends only on what the graph key contains (ops, ranks, unit dims, shape classes).
std::vector<KernelSpec> plan_kernels(const ir::Graph& graph, const std::string& symbol_prefix);

/// The kernel symbols' prefix for `graph`: "lj_" and the graph key.
std::string symbol_prefix(const ir::Graph& graph);

/// Per node of `graph`: whether `kernel` computes it (its results and their operands).
std::vector<bool> nodes_needed_by(const ir::Graph& graph, const KernelSpec& kernel);

}  // namespace lazyjit::lowering

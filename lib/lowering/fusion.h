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

}  // namespace lazyjit::lowering

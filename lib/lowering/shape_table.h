// The shape table: every node's dims in post-order, the runtime sizes a kernel's frame reads,
// and which of its positions the graph key proves equal.
#pragma once

#include <cstdint>
#include <vector>

#include "ir/graph.h"

namespace lazyjit::lowering {

/// The runtime shape table of `graph` (every node's dims in post-order), and where each
/// node's dims start in it.
std::vector<int64_t> shape_table(const ir::Graph& graph);
std::vector<int> shape_offsets(const ir::Graph& graph);
/// Per position of the shape table, the first position that holds the same size in every
/// graph of this key: an elementwise op's result dim and each operand's dim that does not
/// broadcast there (the key fixes which dims are 1), and the dims of the roots and fusion
/// domains that the key records as sharing a shape. A kernel reads one dim per class, so
/// the offsets of values of one shape are one expression (tier 0 sees a load and a store at
/// the same element; LLVM computes the address once).
std::vector<int> dim_classes(const ir::Graph& graph);

}  // namespace lazyjit::lowering

// Why did this compile? The key-relevant summary of a graph and the first place where two
// summaries differ, for compile explanations and the recompilation guardrail.
#pragma once

#include <string>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "ir/graph.h"

namespace lazyjit::ir {

/// Everything of a graph that its key hashes, node by node: small, and kept after the graph
/// itself is gone.
struct GraphSignature {
  struct Entry {
    OpKind op;
    DType dtype;
    int rank;
    uint64_t unit_dims;
    absl::InlinedVector<int, 3> operands;
    int parameter_slot;
    int64_t constant_bits;  ///< Constant leaves: the value compiled in
    Node::Attrs attrs;      ///< a permutation, a slice, a reshape's dim groups, ...
  };
  Hash128 key;
  std::vector<Entry> nodes;
  std::vector<int> roots;
  std::vector<int> root_shape_class;
};

GraphSignature signature_of(const Graph& graph);

/// How many leading nodes two graphs share exactly (to pick the nearest cached graph).
size_t common_prefix(const GraphSignature& a, const GraphSignature& b);

/// The first difference of `graph` from `cached`, e.g. "node %7 (mul): dtype float64, cached
/// float32" or "node %2 (add): broadcast pattern [N,1], cached [N,N]". Empty when the two
/// signatures are the same.
std::string describe_difference(const GraphSignature& graph, const GraphSignature& cached);

}  // namespace lazyjit::ir

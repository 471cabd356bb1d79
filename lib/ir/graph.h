// Graph: the post-order of the nodes that produce a set of roots, its inputs and its key.
#pragma once

#include <span>
#include <utility>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "ir/hash.h"
#include "ir/node.h"

namespace lazyjit::ir {

/// A DAG ready to lower or interpret. It holds its roots, so the nodes stay alive as long
/// as it does.
struct Graph {
  std::vector<NodePtr> owned_roots;  ///< the roots given to build_graph: keep the DAG alive
  std::vector<const Node*> nodes;    ///< post-order: operands before users
  std::vector<absl::InlinedVector<int, 3>> operands;  ///< per node: its operands' indices
  std::vector<int> roots;            ///< node index of each result, in order; may repeat
  std::vector<int> parameter_slot;   ///< per node: its parameter slot (Parameter leaves), else -1
  std::vector<const Node*> parameters;  ///< one Parameter node per distinct buffer, in slot order
  std::vector<int> scalars;          ///< node indices of the Scalar, Rand and Randn leaves (a
                                     ///< runtime value or seed each), in post-order
  std::vector<int> root_shape_class; ///< per root: index of the first root with the same shape
  /// Per node: for the operands of reductions and for matmul products (the nodes fusion may
  /// iterate over), the first root with the same shape; -1 otherwise or when none has it.
  std::vector<int> root_class_of;
  /// Hash of everything compiled code depends on: ops, dtypes, ranks, unit dims, the DAG's
  /// sharing, which leaves are the same buffer, and which roots share a shape. Not sizes, not
  /// scalar values.
  Hash128 key;

  int index_of_root(int result) const { return roots[result]; }
};

/// Collects the nodes reachable from `roots` in post-order and computes the key.
Graph build_graph(std::span<const NodePtr> roots);

/// The walk build_graph makes: calls `emit(node)` for each node `root` depends on (itself
/// included) that `seen(node)` does not report, each after its operands; `emit` must make
/// `seen` true for it. Iterative, so deep graphs do not overflow the call stack; `stack` is
/// the caller's, to reuse its memory across roots.
/// `operands_of(node)` gives the operands to walk (a std::span<const NodePtr>), for walks
/// that see more edges than the nodes hold (autograd's, through kept histories).
template <class Seen, class Emit, class OperandsOf>
void walk_post_order(const Node* root, Seen&& seen, Emit&& emit, OperandsOf&& operands_of,
                     std::vector<std::pair<const Node*, size_t>>& stack) {
  if (seen(root)) return;
  stack.emplace_back(root, 0);
  while (!stack.empty()) {
    auto& [node, next] = stack.back();
    const std::span<const NodePtr> operands = operands_of(node);
    if (next < operands.size()) {
      const Node* operand = operands[next++].get();
      if (!seen(operand)) stack.emplace_back(operand, 0);
      continue;
    }
    emit(node);
    stack.pop_back();
  }
}

template <class Seen, class Emit>
void walk_post_order(const Node* root, Seen&& seen, Emit&& emit, std::vector<std::pair<const Node*, size_t>>& stack) {
  walk_post_order(root, seen, emit, [](const Node* node) { return node->operands(); }, stack);
}

}  // namespace lazyjit::ir

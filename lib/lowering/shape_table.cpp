// The shape table and its classes of equal sizes.
#include "lowering/shape_table.h"

#include <algorithm>

#include "ir/op.h"

namespace lazyjit::lowering {

std::vector<int> shape_offsets(const ir::Graph& graph) {
  std::vector<int> offsets;
  offsets.reserve(graph.nodes.size());
  int offset = 0;
  for (const ir::Node* node : graph.nodes) {
    offsets.push_back(offset);
    offset += node->rank();
  }
  return offsets;
}

std::vector<int> dim_classes(const ir::Graph& graph) {
  const std::vector<int> offsets = shape_offsets(graph);
  std::vector<int> parent(graph.nodes.empty() ? 0 : offsets.back() + graph.nodes.back()->rank());
  for (size_t i = 0; i < parent.size(); ++i) parent[i] = static_cast<int>(i);
  auto find = [&](int x) {
    while (parent[x] != x) x = parent[x] = parent[parent[x]];
    return x;
  };
  auto unite = [&](int a, int b) {
    a = find(a);
    b = find(b);
    parent[std::max(a, b)] = std::min(a, b);  // the first position is the class's root
  };
  auto unite_shapes = [&](int x, int y) {  // two nodes of one shape
    for (int d = 0; d < graph.nodes[x]->rank(); ++d) unite(offsets[x] + d, offsets[y] + d);
  };
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    const ir::Node& node = *graph.nodes[i];
    if (ir::op_info(node.op()).access != ir::AccessPattern::Elementwise) continue;
    for (int operand : graph.operands[i]) {
      const ir::Node& o = *graph.nodes[operand];
      const int shift = node.rank() - o.rank();
      for (int d = 0; d < o.rank(); ++d) {
        if (o.shape()[d] != 1 && shift + d >= 0) unite(offsets[operand] + d, offsets[i] + shift + d);
      }
    }
  }
  // The key records which roots share a shape, and which fusion domains share a root's.
  for (size_t r = 0; r < graph.roots.size(); ++r) unite_shapes(graph.roots[r], graph.roots[graph.root_shape_class[r]]);
  for (size_t i = 0; i < graph.root_class_of.size(); ++i) {
    if (graph.root_class_of[i] >= 0) unite_shapes(static_cast<int>(i), graph.roots[graph.root_class_of[i]]);
  }
  for (size_t i = 0; i < parent.size(); ++i) parent[i] = find(static_cast<int>(i));
  return parent;
}

std::vector<int64_t> shape_table(const ir::Graph& graph) {
  std::vector<int64_t> table;
  table.reserve(graph.nodes.size() * 2);
  for (const ir::Node* node : graph.nodes) table.insert(table.end(), node->shape().begin(), node->shape().end());
  return table;
}

}  // namespace lazyjit::lowering

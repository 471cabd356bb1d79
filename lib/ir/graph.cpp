// Post-order collection of a DAG and its structural key.
#include "ir/graph.h"

#include <utility>

#include "absl/container/flat_hash_map.h"

namespace lazyjit::ir {
namespace {

inline constexpr uint64_t kKeyFormatVersion = 1;

/// Appends the post-order of `root`'s unvisited nodes to `graph.nodes`.
void visit(const Node* root, absl::flat_hash_map<const Node*, int>& index, Graph& graph) {
  if (index.contains(root)) return;
  std::vector<std::pair<const Node*, size_t>> stack{{root, 0}};
  while (!stack.empty()) {
    auto& [node, next] = stack.back();
    if (next < node->operands().size()) {
      const Node* operand = node->operands()[next++].get();
      if (!index.contains(operand)) stack.emplace_back(operand, 0);
      continue;
    }
    index.emplace(node, static_cast<int>(graph.nodes.size()));
    graph.nodes.push_back(node);
    stack.pop_back();
  }
}

}  // namespace

Graph build_graph(std::span<const Node* const> roots) {
  Graph graph;
  absl::flat_hash_map<const Node*, int> index;
  for (const Node* root : roots) visit(root, index, graph);

  std::vector<uint64_t> words;
  words.reserve(graph.nodes.size() * 4 + roots.size() * 2 + 2);
  words.push_back(kKeyFormatVersion);
  absl::flat_hash_map<const BackendData*, int> slot_of_buffer;
  graph.parameter_slot.assign(graph.nodes.size(), -1);
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    const Node* node = graph.nodes[i];
    words.push_back(node->signature());
    words.push_back(node->unit_dims());
    for (const NodePtr& operand : node->operands()) words.push_back(index.at(operand.get()));
    if (node->op() == OpKind::Parameter) {
      auto [it, fresh] = slot_of_buffer.try_emplace(node->data().get(),
                                                    static_cast<int>(graph.parameters.size()));
      if (fresh) graph.parameters.push_back(node);
      graph.parameter_slot[i] = it->second;
      words.push_back(it->second);
    } else if (node->op() == OpKind::Scalar) {
      graph.scalars.push_back(static_cast<int>(i));
    }
  }
  for (size_t r = 0; r < roots.size(); ++r) {
    graph.roots.push_back(index.at(roots[r]));
    int shape_class = static_cast<int>(r);
    for (size_t s = 0; s < r; ++s) {
      if (roots[s]->shape() == roots[r]->shape()) {
        shape_class = static_cast<int>(s);
        break;
      }
    }
    graph.root_shape_class.push_back(shape_class);
    words.push_back(static_cast<uint64_t>(graph.roots.back()) << 32 | static_cast<uint64_t>(shape_class));
  }
  graph.key = hash_words(words);
  return graph;
}

}  // namespace lazyjit::ir

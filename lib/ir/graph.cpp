// Post-order collection of a DAG and its structural key.
#include "ir/graph.h"

#include <utility>

#include "absl/container/flat_hash_map.h"

namespace lazyjit::ir {
namespace {

inline constexpr uint64_t kKeyFormatVersion = 3;

/// A hash of the op table (names, arities, rules): nodes are keyed by their enum position,
/// so a changed table must give every graph a new key (and invalidate on-disk objects).
uint64_t op_table_hash() {
  static const uint64_t hash = [] {
    std::vector<uint64_t> words;
    for (int op = 0; op < kNumOps; ++op) {
      const OpInfo& info = op_info(static_cast<OpKind>(op));
      for (char c : info.name) words.push_back(static_cast<uint8_t>(c));
      words.push_back(static_cast<uint64_t>(info.arity) << 32 | static_cast<uint64_t>(info.dtype_rule) << 16 |
                      static_cast<uint64_t>(info.admits) << 8 | static_cast<uint64_t>(info.access));
    }
    return hash_words(words).low;
  }();
  return hash;
}

/// Builds the post-order and, node by node as it is emitted, the words the key hashes:
/// signature, unit dims, operand positions, parameter slot.
class GraphBuilder {
 public:
  GraphBuilder(Graph& graph, size_t size_hint) : graph_(graph) {
    index_.reserve(size_hint);
    words_.reserve(size_hint * 4 + 8);
    words_.push_back(kKeyFormatVersion);
    words_.push_back(op_table_hash());
  }

  void visit(const Node* root) {
    walk_post_order(
        root, [&](const Node* node) { return index_.contains(node); }, [&](const Node* node) { emit(node); }, stack_);
  }

  void finish(std::span<const NodePtr> roots) {
    for (size_t r = 0; r < roots.size(); ++r) {
      graph_.roots.push_back(index_.at(roots[r].get()));
      const int shape_class = first_root_with_shape_of(roots, r);
      graph_.root_shape_class.push_back(shape_class);
      words_.push_back(static_cast<uint64_t>(graph_.roots.back()) << 32 | static_cast<uint64_t>(shape_class));
    }
    graph_.root_class_of.assign(graph_.nodes.size(), -1);
    for (int n : fusion_domains_) {
      int& root_class = graph_.root_class_of[n];
      for (size_t r = 0; r < roots.size() && root_class < 0; ++r) {
        if (roots[r]->shape() == graph_.nodes[n]->shape()) root_class = graph_.root_shape_class[r];
      }
      words_.push_back(static_cast<uint64_t>(n) << 32 | static_cast<uint32_t>(root_class));
    }
    graph_.key = hash_words(words_);
  }

 private:
  void emit(const Node* node) {
    const int i = static_cast<int>(graph_.nodes.size());
    index_.emplace(node, i);
    graph_.nodes.push_back(node);
    words_.push_back(node->signature());
    words_.push_back(node->unit_dims());
    for (int64_t attr : node->attrs()) words_.push_back(static_cast<uint64_t>(attr));
    if (!node->attrs().empty()) words_.push_back(node->attrs().size());
    absl::InlinedVector<int, 3>& operands = graph_.operands.emplace_back();
    for (const NodePtr& operand : node->operands()) {
      operands.push_back(index_.at(operand.get()));
      words_.push_back(operands.back());
    }
    if (node->operands().size() > 3) words_.push_back(node->operands().size());  // cat
    const AccessPattern kind = op_info(node->op()).access;
    if (kind == AccessPattern::Fold) fusion_domains_.push_back(operands[0]);
    if (kind == AccessPattern::Matmul) fusion_domains_.push_back(i);
    int slot = -1;
    if (node->op() == OpKind::Parameter) {
      slot = parameter_slot(node);
      words_.push_back(slot);
    } else if (node->op() == OpKind::Scalar || node->op() == OpKind::Rand || node->op() == OpKind::Randn) {
      graph_.scalars.push_back(i);
    } else if (node->op() == OpKind::Constant) {
      words_.push_back(static_cast<uint64_t>(node->scalar().i));  // the value is compiled in
    }
    graph_.parameter_slot.push_back(slot);
  }

  /// The slot of the node's buffer: a buffer read through two leaves is one parameter.
  /// The index of the first root with the shape of root `r`: linear while few, then a map.
  int first_root_with_shape_of(std::span<const NodePtr> roots, size_t r) {
    if (roots.size() <= kLinearSearchLimit) {
      for (size_t s = 0; s < r; ++s) {
        if (roots[s]->shape() == roots[r]->shape()) return static_cast<int>(s);
      }
      return static_cast<int>(r);
    }
    return first_root_of_shape_.try_emplace(roots[r]->shape(), static_cast<int>(r)).first->second;
  }

  /// Few parameters (the common case) are searched linearly, many through a map.
  int parameter_slot(const Node* node) {
    const BackendData* buffer = node->data().get();
    const int next = static_cast<int>(graph_.parameters.size());
    if (next < static_cast<int>(kLinearSearchLimit)) {
      for (int s = 0; s < next; ++s) {
        if (graph_.parameters[s]->data().get() == buffer) return s;
      }
    } else {
      if (slot_of_buffer_.empty()) {
        for (int s = 0; s < next; ++s) slot_of_buffer_.emplace(graph_.parameters[s]->data().get(), s);
      }
      auto [it, fresh] = slot_of_buffer_.try_emplace(buffer, next);
      if (!fresh) return it->second;
    }
    graph_.parameters.push_back(node);
    return next;
  }

  static constexpr size_t kLinearSearchLimit = 32;

  Graph& graph_;
  absl::flat_hash_map<const Node*, int> index_;
  std::vector<uint64_t> words_;
  std::vector<std::pair<const Node*, size_t>> stack_;
  absl::flat_hash_map<const BackendData*, int> slot_of_buffer_;
  absl::flat_hash_map<Shape, int> first_root_of_shape_;
  std::vector<int> fusion_domains_;  // nodes whose root_class_of the key records
};

}  // namespace

Graph build_graph(std::span<const NodePtr> roots) {
  Graph graph;
  graph.owned_roots.assign(roots.begin(), roots.end());
  size_t size_hint = 0;
  for (const NodePtr& root : roots) size_hint += root->size_bound();
  GraphBuilder builder(graph, std::min<size_t>(size_hint, 1 << 16));
  for (const NodePtr& root : roots) builder.visit(root.get());
  builder.finish(roots);
  return graph;
}

}  // namespace lazyjit::ir

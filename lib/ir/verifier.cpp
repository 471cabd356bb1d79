// Structural checks of a graph.
#include "ir/verifier.h"

#include "fmt/format.h"
#include "fmt/ranges.h"

namespace lazyjit::ir {
namespace {

absl::Status node_error(size_t index, const Node& node, std::string_view what) {
  return absl::InternalError(fmt::format("verifier: %{} ({}): {}", index, op_name(node.op()), what));
}

absl::Status verify_node(size_t index, const Node& node) {
  const OpInfo& info = op_info(node.op());
  const auto operands = node.operands();
  if (static_cast<int>(operands.size()) != info.arity) {
    return node_error(index, node, fmt::format("has {} operands, expected {}", operands.size(), info.arity));
  }
  if (node.op() == OpKind::Parameter && node.data() == nullptr) return node_error(index, node, "has no buffer");
  if (info.kind == LoweringKind::Leaf || node.op() == OpKind::Cast) return absl::OkStatus();

  const size_t first_value = info.dtype_rule == DTypeRule::Select ? 1 : 0;
  if (first_value == 1 && operands[0]->dtype() != DType::Bool) {
    return node_error(index, node, "condition is not bool");
  }
  const DType dtype = operands[first_value]->dtype();
  for (size_t i = first_value; i < operands.size(); ++i) {
    if (operands[i]->dtype() != dtype) return node_error(index, node, "operands differ in dtype");
  }
  if (!admits_dtype(info.admits, dtype)) {
    return node_error(index, node, fmt::format("does not admit {}", dtype_name(dtype)));
  }
  const DType expected = info.dtype_rule == DTypeRule::Compare ? DType::Bool : dtype;
  if (node.dtype() != expected) return node_error(index, node, "has the wrong result dtype");

  Shape shape = operands[0]->shape();
  for (const NodePtr& operand : operands.subspan(1)) {
    absl::StatusOr<Shape> s = broadcast_shapes(info.name, shape, operand->shape());
    if (!s.ok()) return node_error(index, node, std::string(s.status().message()));
    shape = *s;
  }
  if (shape != node.shape()) {
    return node_error(index, node, fmt::format("shape {} is not the broadcast {}", shape_to_string(node.shape()), shape_to_string(shape)));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status verify(const Graph& graph) {
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    if (absl::Status s = verify_node(i, *graph.nodes[i]); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace lazyjit::ir

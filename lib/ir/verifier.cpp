// Structural checks of a graph.
#include "ir/verifier.h"

#include "fmt/format.h"
#include "fmt/ranges.h"
#include "ir/structured.h"

namespace lazyjit::ir {
namespace {

absl::Status node_error(const Node&, std::string_view what) { return absl::InvalidArgumentError(std::string(what)); }

absl::Status check_node(const Node& node) {
  const OpInfo& info = op_info(node.op());
  const auto operands = node.operands();
  if (info.access != AccessPattern::Leaf && info.access != AccessPattern::Elementwise) {  // structured_result's rules
    auto result = structured_result(node.op(), operands, node.attrs(), &node.shape());
    if (!result.ok()) return result.status();
    if (result->first != node.dtype()) {
      return node_error(node, fmt::format("result dtype {} should be {}", dtype_name(node.dtype()),
                                          dtype_name(result->first)));
    }
    return absl::OkStatus();
  }
  if (!node.attrs().empty()) return node_error(node, "takes no attrs");
  if ((node.op() == OpKind::Rand || node.op() == OpKind::Randn) && !is_floating(node.dtype())) {
    return node_error(node, fmt::format("dtype {} is not a float dtype", dtype_name(node.dtype())));
  }
  if (static_cast<int>(operands.size()) != info.arity) {
    return node_error(node, fmt::format("has {} operands, expected {}", operands.size(), info.arity));
  }
  if (node.op() == OpKind::Parameter && node.data() == nullptr) return node_error(node, "has no buffer");
  if (node.op() == OpKind::Cast && node.shape() != operands[0]->shape()) {
    return node_error(node, fmt::format("shape {} differs from its operand's {}", shape_to_string(node.shape()),
                                        shape_to_string(operands[0]->shape())));
  }
  if (info.access == AccessPattern::Leaf || node.op() == OpKind::Cast) return absl::OkStatus();

  const size_t first_value = info.dtype_rule == DTypeRule::Select ? 1 : 0;
  if (first_value == 1 && operands[0]->dtype() != DType::Bool) {
    return node_error(node, "condition is not bool");
  }
  const DType dtype = operands[first_value]->dtype();
  for (size_t i = first_value; i < operands.size(); ++i) {
    if (operands[i]->dtype() != dtype) return node_error(node, "operands differ in dtype");
  }
  if (!admits_dtype(info.admits, dtype)) {
    return node_error(node, fmt::format("does not admit {}", dtype_name(dtype)));
  }
  const DType expected = info.dtype_rule == DTypeRule::Compare ? DType::Bool : dtype;
  if (node.dtype() != expected) {
    return node_error(node, fmt::format("result dtype {} should be {}", dtype_name(node.dtype()), dtype_name(expected)));
  }

  Shape shape = operands[0]->shape();
  for (const NodePtr& operand : operands.subspan(1)) {
    absl::StatusOr<Shape> s = broadcast_shapes(info.name, shape, operand->shape());
    if (!s.ok()) return node_error(node, std::string(s.status().message()));
    shape = *s;
  }
  if (shape != node.shape()) {
    return node_error(node, fmt::format("shape {} is not the broadcast {}", shape_to_string(node.shape()), shape_to_string(shape)));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status verify_node(const Node& node) { return check_node(node); }

absl::Status verify(const Graph& graph) {
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    if (absl::Status s = check_node(*graph.nodes[i]); !s.ok()) {
      return absl::InternalError(
          fmt::format("verifier: %{} ({}): {}", i, op_name(graph.nodes[i]->op()), std::string(s.message())));
    }
  }
  return absl::OkStatus();
}

}  // namespace lazyjit::ir

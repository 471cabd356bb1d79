// Printing graphs as text.
#include "ir/printer.h"

#include "ir/dtype_dispatch.h"
#include "fmt/format.h"
#include "fmt/ranges.h"

namespace lazyjit::ir {
namespace {

std::string type_string(const Node& node) {
  return fmt::format("{}{}", dtype_name(node.dtype()), shape_to_string(node.shape()));
}

std::string scalar_string(const Node& node) {
  if (is_floating(node.dtype())) return fmt::format("{}", node.scalar().f);
  if (node.dtype() == DType::Bool) return node.scalar().i ? "true" : "false";
  return fmt::format("{}", node.scalar().i);
}

}  // namespace

std::string values_text(const BackendData& data) {
  std::string out = "[";
  dispatch_dtype(data.dtype(), [&]<class T>(T) {
    using S = std::conditional_t<std::is_same_v<T, bool>, uint8_t, T>;
    const S* p = static_cast<const S*>(data.data());
    for (int64_t i = 0; i < data.numel(); ++i) {
      if (i > 0) out += ", ";
      if constexpr (std::is_same_v<T, bool>) {
        out += p[i] ? "true" : "false";
      } else {
        fmt::format_to(std::back_inserter(out), "{}", p[i]);
      }
    }
  });
  return out + "]";
}

std::string print_graph(const Graph& graph, PrintOptions options) {
  std::string out;
  if (options.with_key) fmt::format_to(std::back_inserter(out), "// key {}\n", graph.key.to_hex());
  out += "graph {\n";
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    const Node& node = *graph.nodes[i];
    fmt::format_to(std::back_inserter(out), "  %{} = {}", i, op_name(node.op()));
    if (!node.attrs().empty()) fmt::format_to(std::back_inserter(out), "[{}]", fmt::join(node.attrs(), ","));
    if (node.op() == OpKind::Rand || node.op() == OpKind::Randn) {
      fmt::format_to(std::back_inserter(out), " {}", node.scalar().i);
    }
    if (node.op() == OpKind::Parameter) fmt::format_to(std::back_inserter(out), " {}", graph.parameter_slot[i]);
    if (node.op() == OpKind::Scalar || node.op() == OpKind::Constant) {
      fmt::format_to(std::back_inserter(out), " {}", scalar_string(node));
    }
    const char* sep = " ";
    for (int operand : graph.operands[i]) {
      fmt::format_to(std::back_inserter(out), "{}%{}", sep, operand);
      sep = ", ";
    }
    fmt::format_to(std::back_inserter(out), " : {}", type_string(node));
    if (options.with_values && node.op() == OpKind::Parameter) out += " = " + values_text(*node.data());
    out += "\n";
  }
  out += "  return";
  const char* sep = " ";
  for (int root : graph.roots) {
    fmt::format_to(std::back_inserter(out), "{}%{}", sep, root);
    sep = ", ";
  }
  out += "\n}\n";
  return out;
}

}  // namespace lazyjit::ir

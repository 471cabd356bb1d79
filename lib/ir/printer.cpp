// Printing graphs as text.
#include "ir/printer.h"

#include "absl/container/flat_hash_map.h"
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

std::string print_graph(const Graph& graph, bool with_key) {
  std::string out;
  if (with_key) fmt::format_to(std::back_inserter(out), "// key {}\n", graph.key.to_hex());
  out += "graph {\n";
  absl::flat_hash_map<const Node*, size_t> index;
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    const Node& node = *graph.nodes[i];
    index[&node] = i;
    fmt::format_to(std::back_inserter(out), "  %{} = {}", i, op_name(node.op()));
    if (node.op() == OpKind::Parameter) fmt::format_to(std::back_inserter(out), " {}", graph.parameter_slot[i]);
    if (node.op() == OpKind::Scalar) fmt::format_to(std::back_inserter(out), " {}", scalar_string(node));
    const char* sep = " ";
    for (const NodePtr& operand : node.operands()) {
      fmt::format_to(std::back_inserter(out), "{}%{}", sep, index.at(operand.get()));
      sep = ", ";
    }
    fmt::format_to(std::back_inserter(out), " : {}\n", type_string(node));
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

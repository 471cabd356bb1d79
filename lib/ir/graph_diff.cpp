// Graph signatures and their first difference.
#include "ir/graph_diff.h"

#include "fmt/format.h"
#include "fmt/ranges.h"

namespace lazyjit::ir {
namespace {

bool same_entry(const GraphSignature::Entry& a, const GraphSignature::Entry& b) {
  return a.op == b.op && a.dtype == b.dtype && a.rank == b.rank && a.unit_dims == b.unit_dims &&
         a.operands == b.operands && a.parameter_slot == b.parameter_slot && a.constant_bits == b.constant_bits &&
         a.attrs == b.attrs;
}

/// "[N,1,N]": which dims are 1, the part of a shape the key sees.
std::string pattern(int rank, uint64_t unit_dims) {
  std::string out = "[";
  for (int d = 0; d < rank; ++d) {
    if (d > 0) out += ",";
    out += (unit_dims >> d & 1) ? "1" : "N";
  }
  return out + "]";
}

std::string operand_list(const absl::InlinedVector<int, 3>& operands) {
  std::string out;
  for (int o : operands) out += fmt::format("{}%{}", out.empty() ? "" : ", ", o);
  return out.empty() ? "none" : out;
}

std::string what_differs(const GraphSignature::Entry& a, const GraphSignature::Entry& b) {
  if (a.op != b.op) {
    return fmt::format("op {} {}{}, cached {} {}{}", op_name(a.op), dtype_name(a.dtype), pattern(a.rank, a.unit_dims),
                       op_name(b.op), dtype_name(b.dtype), pattern(b.rank, b.unit_dims));
  }
  if (a.dtype != b.dtype) return fmt::format("dtype {}, cached {}", dtype_name(a.dtype), dtype_name(b.dtype));
  if (a.rank != b.rank) return fmt::format("rank {}, cached {}", a.rank, b.rank);
  if (a.unit_dims != b.unit_dims) {
    return fmt::format("broadcast pattern {}, cached {}", pattern(a.rank, a.unit_dims), pattern(b.rank, b.unit_dims));
  }
  if (a.operands != b.operands) {
    return fmt::format("operands {}, cached {}", operand_list(a.operands), operand_list(b.operands));
  }
  if (a.constant_bits != b.constant_bits) {
    return "a different constant value (constants are compiled in; a runtime scalar would not recompile)";
  }
  if (a.attrs != b.attrs) {
    if (a.op == OpKind::Reshape) {
      return fmt::format("dim groups [{}], cached [{}] (new sizes group the reshape's dims otherwise)",
                         fmt::join(a.attrs, ","), fmt::join(b.attrs, ","));
    }
    return fmt::format("attrs [{}], cached [{}]", fmt::join(a.attrs, ","), fmt::join(b.attrs, ","));
  }
  return fmt::format("reads parameter {}, cached parameter {} (which inputs are the same buffer differs)",
                     a.parameter_slot, b.parameter_slot);
}

}  // namespace

GraphSignature signature_of(const Graph& graph) {
  GraphSignature s{graph.key, {}, graph.roots, graph.root_shape_class};
  s.nodes.reserve(graph.nodes.size());
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    const Node& node = *graph.nodes[i];
    const int64_t bits = node.op() == OpKind::Constant ? node.scalar().i : 0;
    s.nodes.push_back({node.op(), node.dtype(), node.rank(), node.unit_dims(), graph.operands[i], graph.parameter_slot[i],
                       bits, node.attrs()});
  }
  return s;
}

size_t common_prefix(const GraphSignature& a, const GraphSignature& b) {
  size_t n = 0;
  while (n < a.nodes.size() && n < b.nodes.size() && same_entry(a.nodes[n], b.nodes[n])) ++n;
  return n;
}

std::string describe_difference(const GraphSignature& graph, const GraphSignature& cached) {
  const size_t n = common_prefix(graph, cached);
  if (n < graph.nodes.size() && n < cached.nodes.size()) {
    return fmt::format("node %{} ({}): {}", n, op_name(graph.nodes[n].op), what_differs(graph.nodes[n], cached.nodes[n]));
  }
  if (graph.nodes.size() != cached.nodes.size()) {
    return fmt::format("{} nodes, cached {} (the first {} are the same)", graph.nodes.size(), cached.nodes.size(), n);
  }
  if (graph.roots != cached.roots) {
    return fmt::format("results {}, cached {}", fmt::join(graph.roots, ","), fmt::join(cached.roots, ","));
  }
  if (graph.root_shape_class != cached.root_shape_class) {
    return fmt::format("which results share a shape: {}, cached {}", fmt::join(graph.root_shape_class, ","),
                       fmt::join(cached.root_shape_class, ","));
  }
  return "";
}

}  // namespace lazyjit::ir

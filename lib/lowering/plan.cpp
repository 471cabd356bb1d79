// The planning passes after fusion, and the plan's text.
#include "lowering/plan.h"

#include <algorithm>
#include <cstdint>

#include "fmt/format.h"
#include "lowering/fusion.h"
#include "lowering/shape_table.h"

namespace lazyjit::lowering {

KernelPlan plan_graph(const ir::Graph& graph) {
  KernelPlan plan = plan_kernels(graph);
  plan.dim_class = dim_classes(graph);
  plan_temp_sizes(graph, plan);
  plan_donation_candidates(graph, plan);
  return plan;
}

void plan_temp_sizes(const ir::Graph& graph, KernelPlan& plan) {
  using Op = SizeProgram::Op;
  SizeProgram& p = plan.sizes;
  const std::vector<int> offsets = shape_offsets(graph);
  auto numel = [&](int node, int from, int to) {
    int product = p.constant(1);
    for (int d = from; d < to; ++d) product = p.apply(Op::Mul, product, p.dim(offsets[node] + d));
    return product;
  };
  for (TempBuffer& temp : plan.temps) {
    const ir::Node& node = *graph.nodes[temp.node];
    const int element = p.constant(dtype_size(node.dtype()));
    if (temp.kind == TempBuffer::Kind::Value || temp.kind == TempBuffer::Kind::Staging) {
      const int stored = temp.kind == TempBuffer::Kind::Value ? temp.node : graph.operands[temp.node][0];
      temp.bytes = p.apply(Op::Mul, numel(stored, 0, graph.nodes[stored]->rank()), element);
      continue;
    }
    if (temp.kind == TempBuffer::Kind::RowsOfB) {  // an Int64 offset per row of B
      const int operand = graph.operands[temp.node][1];
      temp.bytes = p.apply(Op::Mul, p.dim(offsets[operand] + graph.nodes[operand]->rank() - 2), p.constant(8));
      continue;
    }
    // A packed operand: per batch, whole panels of MR rows (or NR columns), each K long.
    const bool left = temp.kind == TempBuffer::Kind::PackedA;
    const int operand = graph.operands[temp.node][left ? 0 : 1];
    const int rank = graph.nodes[operand]->rank();
    const MatmulTiling tile = matmul_tiling(dtype_size(node.dtype()));
    const int width = p.constant(left ? tile.mr : tile.nr);
    const int extent = p.dim(offsets[operand] + (left ? rank - 2 : rank - 1));
    const int k = p.dim(offsets[operand] + (left ? rank - 1 : rank - 2));
    const int panels = p.apply(Op::Div, p.apply(Op::Add, extent, p.constant((left ? tile.mr : tile.nr) - 1)), width);
    const int panel = p.apply(Op::Mul, p.apply(Op::Mul, width, k), element);
    temp.bytes = p.apply(Op::Mul, p.apply(Op::Mul, numel(operand, 0, rank - 2), panels), panel);
  }
}

void plan_donation_candidates(const ir::Graph& graph, KernelPlan& plan) {
  const std::vector<KernelSpec>& kernels = plan.kernels;
  const size_t num_results = graph.roots.size();
  plan.writer_of.assign(num_results, -1);
  plan.donatable.assign(num_results, {});
  for (size_t k = 0; k < kernels.size(); ++k) {
    for (int r : kernels[k].results) plan.writer_of[r] = static_cast<int>(k);
  }
  std::vector<std::vector<bool>> regions(kernels.size());  // region_of each kernel, when first asked
  auto read_back = [&](int r) {  // by a kernel other than its writer
    const int stored = stored_value(graph, graph.roots[r]);
    const ir::AccessPattern kind = ir::op_info(graph.nodes[stored]->op()).access;
    if (kind != ir::AccessPattern::Fold && kind != ir::AccessPattern::Matmul) return false;
    for (size_t k = 0; k < kernels.size(); ++k) {
      if (static_cast<int>(k) == plan.writer_of[r]) continue;
      if (regions[k].empty()) regions[k] = region_of(graph, plan, kernels[k]);
      if (regions[k][stored]) return true;
    }
    return false;
  };
  // A kernel that checks data may fail halfway, and its inputs must still hold their values
  // then: it writes no donated buffer (writers of donated buffers run last). What it reads
  // back from memory (a scatter) was checked by the kernel that computed it. Once per kernel.
  std::vector<int8_t> checks(kernels.size(), -1);
  auto checks_data = [&](int k) {
    if (checks[k] < 0) {
      const std::vector<bool> computed = computed_by(graph, plan, kernels[k]);
      checks[k] = 0;
      for (size_t n = 0; n < graph.nodes.size() && checks[k] == 0; ++n) {
        const ir::Node& node = *graph.nodes[n];
        checks[k] = computed[n] && (ir::indexes_by_data(node.op()) || (ir::divides(node.op()) && !is_floating(node.dtype())));
      }
    }
    return checks[k] == 1;
  };
  for (size_t r = 0; r < num_results; ++r) {
    const ir::Node& result = *graph.nodes[graph.roots[r]];
    if (result.op() == ir::OpKind::Parameter) continue;  // a copy of an input keeps both
    const int w = plan.writer_of[r];
    const KernelSpec& writer = kernels[w];
    const bool in_place = writer.kind == KernelKind::Elementwise || writer.kind == KernelKind::Matmul ||
                          (writer.kind == KernelKind::Rows && !writer.stages.empty());
    if (!in_place || read_back(static_cast<int>(r))) continue;
    if (checks_data(w)) continue;
    for (size_t slot = 0; slot < graph.parameters.size(); ++slot) {
      const ir::Node& parameter = *graph.parameters[slot];
      if (parameter.dtype() != result.dtype() || parameter.rank() != result.rank()) continue;
      const bool read = std::ranges::find(writer.reads, static_cast<int>(slot)) != writer.reads.end();
      const bool direct = std::ranges::find(writer.direct_reads, static_cast<int>(slot)) != writer.direct_reads.end();
      if (read && !direct) continue;
      plan.donatable[r].push_back(static_cast<int>(slot));
    }
  }
}

namespace {

std::string nodes_text(const std::vector<int>& nodes, const char* prefix = "%") {
  std::string text;
  for (int n : nodes) text += fmt::format("{}{}{}", text.empty() ? "" : " ", prefix, n);
  return text;
}

const char* kind_name(KernelKind kind) {
  switch (kind) {
    case KernelKind::Elementwise: return "elementwise";
    case KernelKind::Rows: return "rows";
    case KernelKind::PackA: return "pack_a";
    case KernelKind::PackB: return "pack_b";
    case KernelKind::RowsOfB: return "rows_of_b";
    case KernelKind::Matmul: return "matmul";
    case KernelKind::Scan: return "scan";
    case KernelKind::Scatter: return "scatter";
    case KernelKind::Collective: return "collective";
  }
  return "?";
}

}  // namespace

std::string print_kernel(const ir::Graph& graph, const KernelSpec& spec) {
  std::string out = fmt::format("{} over %{} ({})", kind_name(spec.kind), spec.domain, ir::op_name(graph.nodes[spec.domain]->op()));
  if (!spec.reduced.empty()) out += fmt::format(", folding dims {}", nodes_text(spec.reduced, ""));
  if (!spec.stages.empty()) out += fmt::format(", stages {}", nodes_text(spec.stages));
  if (spec.cut >= 0) out += fmt::format(", stores cut %{}", spec.cut);
  if (!spec.results.empty()) out += fmt::format(", results {}", nodes_text(spec.results, "r"));
  if (!spec.temps.empty()) out += fmt::format(", writes {}", nodes_text(spec.temps, "t"));
  if (!spec.reads.empty()) out += fmt::format(", reads {}", nodes_text(spec.reads, "p"));
  return out;
}

std::string print_plan(const ir::Graph& graph, const KernelPlan& plan) {
  std::string out = fmt::format("plan ({} kernel{}, {} temporar{})\n", plan.kernels.size(),
                                plan.kernels.size() == 1 ? "" : "s", plan.temps.size(), plan.temps.size() == 1 ? "y" : "ies");
  for (size_t k = 0; k < plan.kernels.size(); ++k) out += fmt::format("  k{}: {}\n", k, print_kernel(graph, plan.kernels[k]));
  for (size_t t = 0; t < plan.temps.size(); ++t) {
    const TempBuffer& temp = plan.temps[t];
    const char* what = temp.kind == TempBuffer::Kind::Value     ? "value of"
                       : temp.kind == TempBuffer::Kind::PackedA ? "packed left operand of"
                       : temp.kind == TempBuffer::Kind::PackedB ? "packed right operand of"
                       : temp.kind == TempBuffer::Kind::RowsOfB ? "row offsets of the right operand of"
                                                                : "staged operand of";
    out += fmt::format("  t{}: {} %{}\n", t, what, temp.node);
  }
  std::vector<int> cuts;
  for (size_t n = 0; n < plan.cuts.size(); ++n) {
    if (plan.cuts[n]) cuts.push_back(static_cast<int>(n));
  }
  if (!cuts.empty()) out += fmt::format("  cuts: {}\n", nodes_text(cuts));
  for (size_t r = 0; r < plan.donatable.size(); ++r) {
    if (!plan.donatable[r].empty()) out += fmt::format("  r{} may take over {}\n", r, nodes_text(plan.donatable[r], "p"));
  }
  return out;
}

}  // namespace lazyjit::lowering

// What a plan's kernels compute and read: each kernel's region, the buffers a product reads
// in place, the value a result stores. Queries over a plan that fusion.cpp's planner built.
#include <algorithm>

#include "ir/structured.h"
#include "lowering/fusion.h"

namespace lazyjit::lowering {

using ir::AccessPattern;
using ir::OpKind;

bool is_boundary(const ir::Graph& graph, int n) {
  const AccessPattern kind = ir::op_info(graph.nodes[n]->op()).access;
  return kind != AccessPattern::Leaf && kind != AccessPattern::Elementwise && kind != AccessPattern::IndexMap;
}

int left_in_place(const ir::Graph& graph, const std::vector<bool>& cuts, int product) {
  const int a = graph.operands[product][0];
  if (graph.parameter_slot[a] >= 0 || is_boundary(graph, a) || cuts[a]) return a;
  return window_in_place(graph, product, 0);
}

CollectiveBuffers collective_buffers(const KernelPlan& plan, const KernelSpec& kernel, int num_parameters, int num_results) {
  const int out = plan.buffer_of[kernel.stages[0]];
  for (int t : kernel.temps) {
    if (plan.temps[t].kind == TempBuffer::Kind::Staging) return {temp_buffer_index(num_parameters, num_results, t), out};
  }
  return {out, out};
}

int window_in_place(const ir::Graph& graph, int product, int side) {
  int node = graph.operands[product][side];
  const ir::Node* base = ir::window_rows_base(*graph.nodes[node]);
  if (base == nullptr) return -1;
  while (graph.nodes[node] != base) node = graph.operands[node][0];
  return node;
}

int stored_value(const ir::Graph& graph, int node) {
  while (graph.nodes[node]->op() == OpKind::Reshape) node = graph.operands[node][0];
  return node;
}

std::vector<bool> region_of(const ir::Graph& graph, const KernelPlan& plan, const KernelSpec& kernel) {
  return region_of(graph, plan.cuts, kernel);
}

std::vector<bool> region_of(const ir::Graph& graph, const std::vector<bool>& cuts, const KernelSpec& kernel) {
  std::vector<bool> in(graph.nodes.size(), false);
  std::vector<int> stack;
  if (kernel.kind == KernelKind::PackA || kernel.kind == KernelKind::PackB) {
    stack.push_back(graph.operands[kernel.domain][kernel.kind == KernelKind::PackA ? 0 : 1]);
  } else if (kernel.kind == KernelKind::RowsOfB) {
    return in;  // offsets alone: it reads no value
  } else {
    for (int r : kernel.results) stack.push_back(graph.roots[r]);
    for (int s : kernel.stages) stack.push_back(s);
    if (kernel.cut >= 0) stack.push_back(kernel.cut);
    if (stack.empty()) stack.push_back(kernel.domain);
    if (kernel.kind == KernelKind::Matmul) {  // operands read in place: buffers, or windows of them
      if (const int a = left_in_place(graph, cuts, kernel.domain); a >= 0) stack.push_back(a);
      if (const int b = window_in_place(graph, kernel.domain, 1); b >= 0) stack.push_back(b);
    }
  }
  while (!stack.empty()) {
    const int i = stack.back();
    stack.pop_back();
    if (in[i]) continue;
    in[i] = true;
    const bool stage = std::find(kernel.stages.begin(), kernel.stages.end(), i) != kernel.stages.end();
    if ((is_boundary(graph, i) && !stage) || (cuts[i] && i != kernel.cut)) continue;
    for (int operand : graph.operands[i]) stack.push_back(operand);
  }
  return in;
}

std::vector<bool> read_elsewhere(const ir::Graph& graph, const std::vector<bool>& computed) {
  std::vector<bool> elsewhere(graph.nodes.size(), false);
  for (size_t i = graph.nodes.size(); i-- > 0;) {  // users before their operands
    if (!computed[i]) continue;
    const AccessPattern kind = ir::op_info(graph.nodes[i]->op()).access;
    if (kind != AccessPattern::IndexMap && !(kind == AccessPattern::Elementwise && elsewhere[i])) continue;
    for (int operand : graph.operands[i]) elsewhere[operand] = true;
  }
  return elsewhere;
}

std::vector<bool> computed_by(const ir::Graph& graph, const KernelPlan& plan, const KernelSpec& kernel) {
  std::vector<bool> computed = region_of(graph, plan, kernel);
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    const int n = static_cast<int>(i);
    const bool stage = std::find(kernel.stages.begin(), kernel.stages.end(), n) != kernel.stages.end();
    if (plan.buffer_of[i] >= 0 && !stage && n != kernel.cut) computed[i] = false;
  }
  return computed;
}

}  // namespace lazyjit::lowering

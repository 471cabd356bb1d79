// Grouping results into kernels by shape class.
#include "lowering/fusion.h"

#include "fmt/format.h"

namespace lazyjit::lowering {

std::vector<KernelSpec> plan_kernels(const ir::Graph& graph, const std::string& symbol_prefix) {
  std::vector<KernelSpec> kernels;
  std::vector<int> kernel_of_class(graph.roots.size(), -1);
  for (size_t r = 0; r < graph.roots.size(); ++r) {
    int& k = kernel_of_class[graph.root_shape_class[r]];
    if (k < 0) {
      k = static_cast<int>(kernels.size());
      kernels.push_back({fmt::format("{}_k{}", symbol_prefix, k), static_cast<int>(r), {}});
    }
    kernels[k].results.push_back(static_cast<int>(r));
  }
  return kernels;
}

std::string symbol_prefix(const ir::Graph& graph) { return "lj_" + graph.key.to_hex(); }

std::vector<bool> nodes_needed_by(const ir::Graph& graph, const KernelSpec& kernel) {
  std::vector<bool> needed(graph.nodes.size(), false);
  for (int r : kernel.results) needed[graph.roots[r]] = true;
  for (size_t i = graph.nodes.size(); i-- > 0;) {  // users come after their operands
    if (!needed[i]) continue;
    for (int operand : graph.operands[i]) needed[operand] = true;
  }
  return needed;
}

}  // namespace lazyjit::lowering

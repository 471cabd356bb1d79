// Donation planning.
#include "runtime/donation.h"

#include "lowering/fusion.h"

namespace lazyjit::runtime {
namespace {

/// Whether the only references to parameter slot `slot`'s leaf and buffer come from inside
/// `graph`: its buffer is held by the leaf alone, and the leaf by the graph's nodes alone.
bool owned_by_graph_alone(const ir::Graph& graph, int slot) {
  const ir::Node* leaf = graph.parameters[slot];
  if (leaf->data().use_count() != 1) return false;
  long references = 0;
  for (const ir::Node* node : graph.nodes) {
    for (const ir::NodePtr& operand : node->operands()) references += operand.get() == leaf;
  }
  for (const ir::NodePtr& root : graph.owned_roots) references += root.get() == leaf;
  return leaf->use_count() == references;
}

}  // namespace

std::vector<lowering::Alias> plan_donations(const ir::Graph& graph, const std::vector<lowering::KernelSpec>& kernels) {
  std::vector<lowering::Alias> aliases;
  if (graph.parameters.empty()) return aliases;
  // Which kernels read each parameter slot.
  std::vector<int> readers(graph.parameters.size(), 0);
  std::vector<int> reader(graph.parameters.size(), -1);
  for (size_t k = 0; k < kernels.size(); ++k) {
    const std::vector<bool> needed = lowering::nodes_needed_by(graph, kernels[k]);
    for (size_t i = 0; i < graph.nodes.size(); ++i) {
      const int slot = graph.parameter_slot[i];
      if (!needed[i] || slot < 0 || reader[slot] == static_cast<int>(k)) continue;
      ++readers[slot];
      reader[slot] = static_cast<int>(k);
    }
  }
  std::vector<bool> donated(graph.parameters.size(), false);
  for (size_t k = 0; k < kernels.size(); ++k) {
    for (int r : kernels[k].results) {
      const ir::Node& result = *graph.nodes[graph.roots[r]];
      if (result.op() == ir::OpKind::Parameter) continue;  // a copy of an input: keep both
      for (size_t slot = 0; slot < graph.parameters.size(); ++slot) {
        const ir::Node& parameter = *graph.parameters[slot];
        if (donated[slot] || readers[slot] != 1 || reader[slot] != static_cast<int>(k) ||
            parameter.dtype() != result.dtype() || parameter.shape() != result.shape() ||
            !owned_by_graph_alone(graph, static_cast<int>(slot))) {
          continue;
        }
        donated[slot] = true;
        aliases.push_back({r, static_cast<int>(slot)});
        break;
      }
    }
  }
  return aliases;
}

}  // namespace lazyjit::runtime

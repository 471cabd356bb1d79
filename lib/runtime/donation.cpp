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
  // readers[slot][k]: whether kernel k reads parameter `slot`.
  std::vector<std::vector<bool>> readers(graph.parameters.size(), std::vector<bool>(kernels.size(), false));
  std::vector<int> kernel_of_result(graph.roots.size(), -1);
  for (size_t k = 0; k < kernels.size(); ++k) {
    for (int r : kernels[k].results) kernel_of_result[r] = static_cast<int>(k);
    const std::vector<bool> needed = lowering::nodes_needed_by(graph, kernels[k]);
    for (size_t i = 0; i < graph.nodes.size(); ++i) {
      if (needed[i] && graph.parameter_slot[i] >= 0) readers[graph.parameter_slot[i]][k] = true;
    }
  }
  // Candidates: each dead buffer to the first result of its shape and dtype.
  std::vector<bool> donated(graph.parameters.size(), false);
  for (size_t r = 0; r < graph.roots.size(); ++r) {
    const ir::Node& result = *graph.nodes[graph.roots[r]];
    if (result.op() == ir::OpKind::Parameter) continue;  // a copy of an input: keep both
    for (size_t slot = 0; slot < graph.parameters.size(); ++slot) {
      const ir::Node& parameter = *graph.parameters[slot];
      if (donated[slot] || parameter.dtype() != result.dtype() || parameter.shape() != result.shape() ||
          !owned_by_graph_alone(graph, static_cast<int>(slot))) {
        continue;
      }
      donated[slot] = true;
      aliases.push_back({static_cast<int>(r), static_cast<int>(slot)});
      break;
    }
  }
  // Kernels that write a donated buffer run last (donation_order), so any other kernel
  // reading that buffer must not write one itself. On a conflict the reading kernel gives up
  // its donations and runs first: a training step's weight updates keep theirs, and the
  // forward pass that reads the old weights allocates its output instead.
  for (bool changed = true; changed;) {
    changed = false;
    std::vector<bool> writer(kernels.size(), false);
    for (const lowering::Alias& a : aliases) writer[kernel_of_result[a.result]] = true;
    for (const lowering::Alias& a : aliases) {
      const int k = kernel_of_result[a.result];
      for (size_t other = 0; other < kernels.size() && !changed; ++other) {
        if (static_cast<int>(other) == k || !writer[other] || !readers[a.parameter][other]) continue;
        std::erase_if(aliases, [&](const lowering::Alias& b) { return kernel_of_result[b.result] == static_cast<int>(other); });
        changed = true;
      }
      if (changed) break;
    }
  }
  return aliases;
}

std::vector<size_t> donation_order(const std::vector<lowering::KernelSpec>& kernels,
                                   std::span<const lowering::Alias> aliases) {
  std::vector<bool> writer(kernels.size(), false);
  for (size_t k = 0; k < kernels.size(); ++k) {
    for (int r : kernels[k].results) {
      for (const lowering::Alias& a : aliases) writer[k] = writer[k] || a.result == r;
    }
  }
  std::vector<size_t> order;
  for (bool writers : {false, true}) {
    for (size_t k = 0; k < kernels.size(); ++k) {
      if (writer[k] == writers) order.push_back(k);
    }
  }
  return order;
}

}  // namespace lazyjit::runtime

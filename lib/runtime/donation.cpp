// Donation planning.
#include "runtime/donation.h"

#include <algorithm>


namespace lazyjit::runtime {
namespace {

/// Per parameter slot: whether nothing outside this step can ever read its buffer again.
/// The buffer must be held by its leaf alone, and no node that depends on the leaf (the leaf
/// included) may be held outside the graph: every reference to such a node is a graph edge,
/// the graph's hold on a root, or the hold of the target tensor that the root replaces.
/// Checking the whole dependent cone, not just the leaf, matters: a thread that took a
/// tensor's IR just before the barrier claimed it holds an interior node, and a node it
/// builds from that later would read the leaf. Every holder counts in use_count, so any such
/// reference taken before this check is seen; after it, the claims stop new ones.
/// A leaf that is itself a root is kept (its tensor is a copy of an input). One pass.
std::vector<bool> owned_by_graph_alone(const ir::Graph& graph) {
  const size_t n = graph.nodes.size();
  std::vector<long> expected(n, 0);
  for (const auto& operands : graph.operands) {
    for (int operand : operands) ++expected[operand];
  }
  std::vector<bool> tainted(n, false);  // held from outside, or feeding a node that is
  for (int root : graph.roots) {
    expected[root] += 2;  // the graph's hold and the target tensor's
    if (graph.parameter_slot[root] >= 0) tainted[root] = true;
  }
  for (size_t i = n; i-- > 0;) {  // users before their operands
    tainted[i] = tainted[i] || graph.nodes[i]->use_count() != expected[i];
    if (!tainted[i]) continue;
    for (int operand : graph.operands[i]) tainted[operand] = true;
  }
  std::vector<bool> owned(graph.parameters.size(), false);
  for (size_t i = 0; i < n; ++i) {
    const int slot = graph.parameter_slot[i];
    if (slot < 0 || graph.nodes[i] != graph.parameters[slot]) continue;
    owned[slot] = !tainted[i] && graph.nodes[i]->data().use_count() == 1;
  }
  return owned;
}

}  // namespace

std::vector<lowering::Alias> plan_donations(const ir::Graph& graph, const lowering::KernelPlan& plan) {
  const std::vector<lowering::KernelSpec>& kernels = plan.kernels;
  std::vector<lowering::Alias> aliases;
  if (graph.parameters.empty()) return aliases;
  // Each dead buffer to the first candidate result of its shape.
  const std::vector<bool> owned = owned_by_graph_alone(graph);
  std::vector<bool> donated(graph.parameters.size(), false);
  for (size_t r = 0; r < graph.roots.size(); ++r) {
    const ir::Node& result = *graph.nodes[graph.roots[r]];
    for (int slot : plan.donatable[r]) {
      if (donated[slot] || !owned[slot] || graph.parameters[slot]->shape() != result.shape()) continue;
      donated[slot] = true;
      aliases.push_back({static_cast<int>(r), slot});
      break;
    }
  }
  const std::vector<int>& kernel_of_result = plan.writer_of;
  auto reads = [&](size_t k, int slot) { return std::ranges::find(kernels[k].reads, slot) != kernels[k].reads.end(); };
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
        if (static_cast<int>(other) == k || !writer[other] || !reads(other, a.parameter)) continue;
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

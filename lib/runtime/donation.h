// Donation planning at the step barrier: which results may take over an input's buffer.
#pragma once

#include <span>
#include <vector>

#include "ir/graph.h"
#include "lowering/kernel_abi.h"

namespace lazyjit::runtime {

/// The donations of `graph` at the step barrier (seeds/000, DESIGN.md section 6), from the
/// candidates its plan found safe (plan_donation_candidates in lowering/plan.h). A result
/// takes over a candidate parameter's buffer when
///  - nothing outside this step can read the buffer again: the buffer is held only by its
///    Parameter leaf, and neither the leaf nor any node computed from it is held outside the
///    graph and its target tensors (so the tensor that owned it has been updated in place and
///    no other tensor, graph or thread still refers to its old value);
///  - their shapes match in this run, so the kernel reads element i of the parameter in the
///    same iteration that writes element i of the result, before writing it;
///  - every other kernel reading the parameter runs before the write: kernels that write a
///    donated buffer run after all the others (donation_order), and do not read a buffer
///    another of them writes.
/// Each parameter is donated at most once. No planning: one pass over the graph's use counts.
std::vector<lowering::Alias> plan_donations(const ir::Graph& graph, const lowering::KernelPlan& plan);

/// The order to run `kernels` in under `aliases`: those writing no donated buffer first.
std::vector<size_t> donation_order(const std::vector<lowering::KernelSpec>& kernels,
                                   std::span<const lowering::Alias> aliases);

}  // namespace lazyjit::runtime

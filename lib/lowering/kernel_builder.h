// Planned kernels to kernel IR: one builder per kernel kind of the plan (fusion.h).
#pragma once

#include <span>

#include "ir/graph.h"
#include "lowering/kernel_abi.h"
#include "lowering/kir.h"

namespace lazyjit::lowering {

/// The kernel IR of `spec`, a kernel of `plan` for `graph`, and its frame's binding in
/// spec.frame. A result in `aliases` (the runtime's donations) is stored into its donated
/// parameter's buffer.
kir::Kernel build_kernel(const ir::Graph& graph, const KernelPlan& plan, KernelSpec& spec, std::span<const Alias> aliases);

}  // namespace lazyjit::lowering

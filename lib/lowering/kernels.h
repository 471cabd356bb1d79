// Emitters of the kernels that are not a collapsed elementwise loop nest (loop_nest.h):
// elementwise over views and temporaries, row reductions with their fused consumers, operand
// packing, and the register-blocked matmul with its fused epilogue.
#pragma once

#include <span>

#include "ir/graph.h"
#include "llvm/IR/Module.h"
#include "lowering/kernel_abi.h"

namespace lazyjit::lowering {

/// Emits `spec.symbol` (KernelFn ABI) into `module` and returns its frame. A result in
/// `aliases` is stored through its donated parameter's buffer.
KernelFrame emit_planned_kernel(llvm::Module& module, const ir::Graph& graph, const KernelPlan& plan,
                                const KernelSpec& spec, std::span<const Alias> aliases);

}  // namespace lazyjit::lowering

// The fused loop nest of one kernel: all the elementwise and broadcast work that produces a
// group of same-shape results, as one loop over their elements.
#pragma once

#include <span>

#include "ir/graph.h"
#include "llvm/IR/Module.h"
#include "lowering/kernel_abi.h"

namespace lazyjit::lowering {

/// Emits the function `spec.symbol` (KernelFn ABI) into `module`. Adjacent dims that every
/// input broadcasts alike are collapsed at compile time; sizes are read from the shape table
/// at run time, so the code serves every size with the graph's key. The innermost loop is
/// unit-stride or loop-invariant for every input, which is what the vectoriser needs.
/// A result in `aliases` is stored through its donated parameter's buffer argument.
/// Only for kernels the plan marks `collapsed` (leaves and elementwise ops alone).
/// Returns the kernel's frame.
KernelFrame emit_kernel(llvm::Module& module, const ir::Graph& graph, const KernelPlan& plan, const KernelSpec& spec,
                        std::span<const Alias> aliases = {});

}  // namespace lazyjit::lowering

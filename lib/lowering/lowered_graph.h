// LoweredGraph: lowering's output, all that codegen sees of a graph (no IR nodes).
#pragma once

#include <vector>

#include "ir/hash.h"
#include "lowering/kernel_abi.h"
#include "lowering/kir.h"

namespace lazyjit::lowering {

/// One kernel: its kernel IR, and `content`, a hash of the kernel IR's text, which says which
/// kernels are the same code: it is the kernel's name (`lj_<content>`) and, with the
/// compiler's fingerprint, its cache key. Codegen emits it to machine code only when no code
/// cache has it.
struct LoweredKernel {
  kir::Kernel kir = {};
  ir::Hash128 content = {};
};

/// The kernels of a graph, in plan order, and how to launch them.
struct LoweredGraph {
  KernelPlan plan;
  std::vector<LoweredKernel> kernels;
};

}  // namespace lazyjit::lowering

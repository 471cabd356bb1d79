// LoweredGraph: lowering's output, all that codegen sees of a graph (no IR nodes).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "ir/hash.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"
#include "lowering/kernel_abi.h"

namespace lazyjit::lowering {

/// One kernel as LLVM IR: a module of its own (in a context of its own, so kernels compile on
/// separate threads) holding its entry and body. Its code depends on the kernel alone (its
/// arguments are its own frame), so `content`, a hash of the module's text, says which
/// kernels are the same code: it is the kernel's name (`lj_<content>`) and, with the
/// compiler's fingerprint, its cache key.
struct LoweredKernel {
  std::unique_ptr<llvm::LLVMContext> context;
  std::unique_ptr<llvm::Module> module;
  ir::Hash128 content;
};

/// The kernels of a graph, in plan order, and how to launch them.
struct LoweredGraph {
  KernelPlan plan;
  std::vector<LoweredKernel> kernels;
};

}  // namespace lazyjit::lowering

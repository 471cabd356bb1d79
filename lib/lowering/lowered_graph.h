// LoweredGraph: lowering's output, all that codegen sees of a graph (no IR nodes).
#pragma once

#include <memory>
#include <vector>

#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"
#include "lowering/kernel_abi.h"

namespace lazyjit::lowering {

/// An LLVM module with one function per kernel, and how to launch them.
struct LoweredGraph {
  std::unique_ptr<llvm::LLVMContext> context;
  std::unique_ptr<llvm::Module> module;
  KernelPlan plan;
};

}  // namespace lazyjit::lowering

// LoweredGraph: lowering's output, all that codegen sees of a graph (no IR nodes).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "ir/hash.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"
#include "lowering/kernel_abi.h"
#include "lowering/kir.h"

namespace lazyjit::lowering {

/// One kernel: its kernel IR, and its LLVM module (in a context of its own, so kernels
/// compile on separate threads) once emitted (module_of in lower.h): a kernel found in a code
/// cache is never emitted. `content`, a hash of the kernel IR's text, says which kernels are
/// the same code: it is the kernel's name (`lj_<content>`) and, with the compiler's
/// fingerprint, its cache key.
struct LoweredKernel {
  kir::Kernel kir = {};
  ir::Hash128 content = {};
  std::unique_ptr<llvm::LLVMContext> context = nullptr;
  std::unique_ptr<llvm::Module> module = nullptr;
};

/// The kernels of a graph, in plan order, and how to launch them.
struct LoweredGraph {
  KernelPlan plan;
  std::vector<LoweredKernel> kernels;
};

}  // namespace lazyjit::lowering

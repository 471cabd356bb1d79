// The LLVM emitter of the kernel IR, and a kernel's LLVM module. Internal to codegen: no
// header outside lib/codegen includes LLVM's.
#pragma once

#include <memory>
#include <string>

#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"
#include "lowering/kir.h"
#include "lowering/lowered_graph.h"

namespace lazyjit::codegen {

/// Emits `kernel` into `module` as `symbol`, with the KernelFn ABI (kernel_abi.h): its
/// arguments are the frame's buffers in slot order, then its scalar frame if it reads
/// scalars. The code goes into `symbol.body`, whose buffer pointers are noalias (distinct
/// buffers: the vectoriser needs no runtime overlap checks); the entry loads them and calls it.
void emit_llvm(const kir::Kernel& kernel, const std::string& symbol, llvm::Module& module);

/// A kernel's LLVM module, in an LLVMContext of its own so that kernels compile on separate
/// threads. Emitted only when the kernel is compiled: one found in a code cache never is.
struct KernelModule {
  std::unique_ptr<llvm::LLVMContext> context;
  std::unique_ptr<llvm::Module> module;
};
KernelModule emit_module(const lowering::LoweredKernel& kernel);

/// The module's LLVM IR as text.
std::string module_text(const llvm::Module& module);

}  // namespace lazyjit::codegen

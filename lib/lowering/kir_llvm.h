// The LLVM emitter of the kernel IR.
#pragma once

#include <string>

#include "llvm/IR/Module.h"
#include "lowering/kir.h"

namespace lazyjit::lowering {

/// Emits `kernel` into `module` as `symbol`, with the KernelFn ABI (kernel_abi.h): its
/// arguments are the frame's buffers in slot order, then its scalar frame if it reads
/// scalars. The code goes into `symbol.body`, whose buffer pointers are noalias (distinct
/// buffers: the vectoriser needs no runtime overlap checks); the entry loads them and calls it.
void emit_llvm(const kir::Kernel& kernel, const std::string& symbol, llvm::Module& module);

}  // namespace lazyjit::lowering

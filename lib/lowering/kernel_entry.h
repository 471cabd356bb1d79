// A kernel's two functions: the body emitters write, and the ABI entry that calls it with
// the kernel's own argument frame.
#pragma once

#include <string>

#include "llvm/IR/Module.h"
#include "lowering/kernel_abi.h"

namespace lazyjit::lowering {

/// `symbol.body`, the function a kernel's code goes into: a pointer per buffer of the graph's
/// buffer array (noalias: distinct buffers, so the vectoriser needs no runtime checks), the
/// shape table, begin and end. Emitters address buffers, dims and scalars graph-wide.
llvm::Function* create_kernel_body(llvm::Module& module, const std::string& symbol, int num_buffers);

/// Finishes a kernel whose `body` is complete: turns its graph-wide addressing into a frame
/// of its own (the buffers it uses, the dims it reads, the scalars it loads from the scalar
/// table at buffer index `scalar_table`, each numbered in order of first use), and emits
/// `symbol` with the KernelFn ABI, which loads the arguments and calls the body. `body` is
/// replaced by the rewritten function. Returns where the frame's slots come from.
KernelFrame finish_kernel(llvm::Module& module, const std::string& symbol, llvm::Function*& body, int num_buffers,
                          int scalar_table);

}  // namespace lazyjit::lowering

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

/// What the emitted code may use: the host CPU's vectors (a B panel on the stack, masked
/// vector loads in the micro-kernel) and libm, or a GPU thread's scalar registers and the
/// portable math (portable_math.h).
enum class EmitTarget { Cpu, Gpu };

/// The pointers a kernel's entry passes its body before the dims: its buffers, then its
/// scalar frame if it reads scalars.
inline unsigned frame_pointers(const kir::Kernel& kernel) {
  return static_cast<unsigned>(kernel.buffers.size()) + (kernel.num_scalars > 0 ? 1 : 0);
}

/// Emits `kernel`'s code into `module` as the internal function `symbol.body`:
/// `i32 (ptr buffers..., [ptr scalars], ptr dims, i64 begin, i64 end)`, running iterations
/// [begin, end) of its parallel loop and returning the status word. The buffer pointers are
/// noalias (distinct buffers: the vectoriser needs no runtime overlap checks).
llvm::Function* emit_body(const kir::Kernel& kernel, const std::string& symbol, llvm::Module& module,
                          EmitTarget target);

/// Emits `kernel` into `module` as `symbol`, with the KernelFn ABI (kernel_abi.h): its
/// arguments are the frame's buffers in slot order, then its scalar frame if it reads
/// scalars. The code goes into `symbol.body` (emit_body); the entry loads the frame and calls it.
/// With a GPU body, it is a GPU thread's code run on the CPU: tests check the GPU target's
/// kernels against the interpreter that way, without a GPU.
void emit_llvm(const kir::Kernel& kernel, const std::string& symbol, llvm::Module& module,
               EmitTarget body_target = EmitTarget::Cpu);

/// A kernel's LLVM module, in an LLVMContext of its own so that kernels compile on separate
/// threads. Emitted only when the kernel is compiled: one found in a code cache never is.
struct KernelModule {
  std::unique_ptr<llvm::LLVMContext> context;
  std::unique_ptr<llvm::Module> module;
};
KernelModule emit_module(const lowering::LoweredKernel& kernel, EmitTarget body_target = EmitTarget::Cpu);

/// The module's LLVM IR as text.
std::string module_text(const llvm::Module& module);

}  // namespace lazyjit::codegen

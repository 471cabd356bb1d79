// Random numbers in generated code: Philox4x32-10 as LLVM IR, bit for bit ir/philox.h.
#pragma once

#include "ir/op.h"
#include "lazyjit/dtype.h"
#include "llvm/IR/IRBuilder.h"

namespace lazyjit::codegen {

/// The uniform (Rand) or normal (Randn) value of `dtype` that Philox4x32-10 gives for
/// (`seed`, counter `index`), both int64 values, exactly as ir/philox.h computes it.
llvm::Value* emit_random(llvm::IRBuilder<>& b, ir::OpKind op, DType dtype, llvm::Value* seed, llvm::Value* index);

}  // namespace lazyjit::codegen

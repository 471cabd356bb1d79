// Scalar LLVM code for one element of each elementwise op. The loop vectoriser widens it.
#pragma once

#include <span>

#include "ir/node.h"
#include "llvm/IR/IRBuilder.h"

namespace lazyjit::codegen {

/// Type of a value of `dtype` in registers (bool is i1).
llvm::Type* value_type(llvm::LLVMContext& ctx, DType dtype);
/// Type of an element of `dtype` in memory (bool is i8).
llvm::Type* storage_type(llvm::LLVMContext& ctx, DType dtype);

/// `value` (a register value of `from`) converted to `to`, as semantics::convert does.
llvm::Value* emit_convert(llvm::IRBuilder<>& b, llvm::Value* value, DType from, DType to);

/// One element of elementwise op `op` with result dtype `dtype`, given its operands' values
/// (of dtype `operand`: for a cast or a comparison, the operands' own). Math functions become
/// llvm.* intrinsics or read-none libm calls, so the vectoriser can map them to libmvec.
llvm::Value* emit_op(llvm::IRBuilder<>& b, ir::OpKind op, DType dtype, DType operand,
                     std::span<llvm::Value* const> args);

/// One element of an op whose result has its operands' dtype (DTypeRule::Same), e.g. the
/// Maximum that folds amax.
llvm::Value* emit_same(llvm::IRBuilder<>& b, ir::OpKind op, DType dtype, std::span<llvm::Value* const> args);

}  // namespace lazyjit::codegen

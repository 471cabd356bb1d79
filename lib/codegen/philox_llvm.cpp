// Philox4x32-10 as LLVM IR (philox_llvm.h): ten rounds of 32-bit multiplies and key bumps,
// then the bits scaled to [0, 1), or two uniforms made normal by Box-Muller.
#include "codegen/philox_llvm.h"

#include "codegen/elementwise.h"
#include "ir/philox.h"
#include "llvm/IR/Intrinsics.h"

namespace lazyjit::codegen {

using llvm::Value;

Value* emit_random(llvm::IRBuilder<>& b, ir::OpKind op, DType dtype, Value* seed, Value* index) {
  auto* i32 = b.getInt32Ty();
  auto* i64 = b.getInt64Ty();
  auto lo = [&](Value* v) { return b.CreateTrunc(v, i32); };
  auto hi = [&](Value* v) { return b.CreateTrunc(b.CreateLShr(v, 32), i32); };
  Value* c0 = lo(index);
  Value* c1 = hi(index);
  Value* c2 = b.getInt32(0);
  Value* c3 = b.getInt32(0);
  Value* k0 = lo(seed);
  Value* k1 = hi(seed);
  for (int round = 0; round < ir::philox::kRounds; ++round) {
    Value* p0 = b.CreateMul(b.getInt64(ir::philox::kMul0), b.CreateZExt(c0, i64));
    Value* p1 = b.CreateMul(b.getInt64(ir::philox::kMul1), b.CreateZExt(c2, i64));
    Value* n0 = b.CreateXor(b.CreateXor(hi(p1), c1), k0);
    Value* n2 = b.CreateXor(b.CreateXor(hi(p0), c3), k1);
    c1 = lo(p1);
    c3 = lo(p0);
    c0 = n0;
    c2 = n2;
    k0 = b.CreateAdd(k0, b.getInt32(ir::philox::kWeyl0));
    k1 = b.CreateAdd(k1, b.getInt32(ir::philox::kWeyl1));
  }
  llvm::Type* type = value_type(b.getContext(), dtype);
  const bool f32 = dtype == DType::Float32;
  auto scaled = [&](Value* bits, double scale) {
    return b.CreateFMul(b.CreateUIToFP(bits, type), llvm::ConstantFP::get(type, scale));
  };
  auto wide = [&](Value* high, Value* low) {  // (high << 32 | low) >> 11
    return b.CreateLShr(b.CreateOr(b.CreateShl(b.CreateZExt(high, i64), 32), b.CreateZExt(low, i64)), 11);
  };
  if (op == ir::OpKind::Rand) return f32 ? scaled(b.CreateLShr(c0, 8), 0x1p-24) : scaled(wide(c0, c1), 0x1p-53);
  Value* u1 = f32 ? scaled(b.CreateAdd(b.CreateLShr(c0, 8), b.getInt32(1)), 0x1p-24)
                  : scaled(b.CreateAdd(wide(c0, c1), b.getInt64(1)), 0x1p-53);
  Value* u2 = f32 ? scaled(b.CreateLShr(c1, 8), 0x1p-24) : scaled(wide(c2, c3), 0x1p-53);
  Value* radius = b.CreateUnaryIntrinsic(
      llvm::Intrinsic::sqrt,
      b.CreateFMul(llvm::ConstantFP::get(type, -2.0), b.CreateUnaryIntrinsic(llvm::Intrinsic::log, u1)));
  Value* angle = b.CreateFMul(llvm::ConstantFP::get(type, 6.283185307179586), u2);
  return b.CreateFMul(radius, b.CreateUnaryIntrinsic(llvm::Intrinsic::cos, angle));
}

}  // namespace lazyjit::codegen

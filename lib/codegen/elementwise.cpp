// Per-op scalar code. Must agree with ir/scalar_semantics.h (the differential tests check it).
#include "codegen/elementwise.h"

#include <cmath>

#include "llvm/IR/Intrinsics.h"
#include "llvm/IR/Module.h"
#include "lowering/internal_error.h"

namespace lazyjit::codegen {

using ir::OpKind;
using lowering::internal_error;
using llvm::IRBuilder;
using llvm::Value;

llvm::Type* value_type(llvm::LLVMContext& ctx, DType dtype) {
  switch (dtype) {
    case DType::Bool: return llvm::Type::getInt1Ty(ctx);
    case DType::Int32: return llvm::Type::getInt32Ty(ctx);
    case DType::Int64: return llvm::Type::getInt64Ty(ctx);
    case DType::Float32: return llvm::Type::getFloatTy(ctx);
    case DType::Float64: return llvm::Type::getDoubleTy(ctx);
  }
  return nullptr;
}

llvm::Type* storage_type(llvm::LLVMContext& ctx, DType dtype) {
  return dtype == DType::Bool ? llvm::Type::getInt8Ty(ctx) : value_type(ctx, dtype);
}

Value* emit_convert(IRBuilder<>& b, Value* v, DType from, DType to) {
  if (from == to) return v;
  llvm::Type* type = value_type(b.getContext(), to);
  if (to == DType::Bool) {
    return is_floating(from) ? b.CreateFCmpUNE(v, llvm::ConstantFP::get(v->getType(), 0.0))
                             : b.CreateICmpNE(v, llvm::ConstantInt::get(v->getType(), 0));
  }
  if (from == DType::Bool) return is_floating(to) ? b.CreateUIToFP(v, type) : b.CreateZExt(v, type);
  if (is_floating(from) && is_floating(to)) return b.CreateFPCast(v, type);
  if (is_floating(from)) return b.CreateIntrinsic(llvm::Intrinsic::fptosi_sat, {type, v->getType()}, {v});
  if (is_floating(to)) return b.CreateSIToFP(v, type);
  return b.CreateSExtOrTrunc(v, type);
}

namespace {

Value* intrinsic(IRBuilder<>& b, llvm::Intrinsic::ID id, std::initializer_list<Value*> args) {
  return b.CreateIntrinsic(id, {(*args.begin())->getType()}, args);
}

/// A call to libm's `name` (float variant `namef`), declared read-none so it can vectorise.
Value* libm_call(IRBuilder<>& b, const char* name, Value* x) {
  llvm::Module* m = b.GetInsertBlock()->getModule();
  const bool f32 = x->getType()->isFloatTy();
  const std::string symbol = f32 ? std::string(name) + "f" : std::string(name);
  llvm::FunctionCallee fn = m->getOrInsertFunction(symbol, x->getType(), x->getType());
  auto* f = llvm::cast<llvm::Function>(fn.getCallee());
  f->setDoesNotAccessMemory();
  f->setDoesNotThrow();
  f->setWillReturn();
  return b.CreateCall(fn, {x});
}

Value* fconst(Value* like, double v) { return llvm::ConstantFP::get(like->getType(), v); }
Value* iconst(Value* like, int64_t v) { return llvm::ConstantInt::get(like->getType(), v, true); }

/// ir::semantics::floor_divide and remainder on integers: the divisor is replaced by 1 where it
/// is 0 (the kernel's check fails the run there) or -1 (the quotient is -a, wrapping), so
/// that sdiv never traps.
Value* int_floor_division(IRBuilder<>& b, OpKind op, Value* a, Value* d) {
  Value* zero = b.CreateICmpEQ(d, iconst(d, 0));
  Value* minus_one = b.CreateICmpEQ(d, iconst(d, -1));
  Value* safe = b.CreateSelect(b.CreateOr(zero, minus_one), iconst(d, 1), d);
  Value* q = b.CreateSDiv(a, safe);
  Value* r = b.CreateSRem(a, safe);
  // A nonzero remainder of the other sign than the divisor: round the quotient down.
  Value* down = b.CreateAnd(b.CreateICmpNE(r, iconst(r, 0)), b.CreateICmpSLT(b.CreateXor(r, safe), iconst(r, 0)));
  if (op == OpKind::Remainder) return b.CreateSelect(down, b.CreateAdd(r, safe), r);
  Value* floored = b.CreateSub(q, b.CreateZExt(down, q->getType()));
  return b.CreateSelect(minus_one, b.CreateNeg(a), b.CreateSelect(zero, iconst(a, 0), floored));
}

/// The same on floats, step for step as the scalar form (from fmod: LLVM's frem).
Value* float_floor_division(IRBuilder<>& b, OpKind op, Value* a, Value* d) {
  Value* mod = b.CreateFRem(a, d);
  Value* other_sign = b.CreateXor(b.CreateFCmpOLT(d, fconst(d, 0.0)), b.CreateFCmpOLT(mod, fconst(mod, 0.0)));
  Value* down = b.CreateAnd(b.CreateFCmpUNE(mod, fconst(mod, 0.0)), other_sign);
  if (op == OpKind::Remainder) return b.CreateSelect(down, b.CreateFAdd(mod, d), mod);
  Value* div = b.CreateFDiv(b.CreateFSub(a, mod), d);
  div = b.CreateSelect(down, b.CreateFSub(div, fconst(div, 1.0)), div);
  Value* floored = b.CreateIntrinsic(llvm::Intrinsic::floor, {div->getType()}, {div});
  Value* up = b.CreateFCmpOGT(b.CreateFSub(div, floored), fconst(div, 0.5));
  floored = b.CreateSelect(up, b.CreateFAdd(floored, fconst(div, 1.0)), floored);
  Value* quotient = b.CreateFDiv(a, d);
  Value* signed_zero = b.CreateIntrinsic(llvm::Intrinsic::copysign, {div->getType()}, {fconst(div, 0.0), quotient});
  Value* result = b.CreateSelect(b.CreateFCmpUNE(div, fconst(div, 0.0)), floored, signed_zero);
  return b.CreateSelect(b.CreateFCmpOEQ(d, fconst(d, 0.0)), quotient, result);
}

/// Integer power by squaring (ir::semantics::int_pow), as an internal function of the module.
llvm::Function* int_pow_function(llvm::Module& m, llvm::Type* type) {
  const std::string name = "lazyjit.ipow.i" + std::to_string(type->getIntegerBitWidth());
  if (llvm::Function* f = m.getFunction(name)) return f;
  auto* fn = llvm::Function::Create(llvm::FunctionType::get(type, {type, type}, false),
                                    llvm::Function::InternalLinkage, name, m);
  fn->addFnAttr(llvm::Attribute::NoUnwind);
  auto& ctx = m.getContext();
  auto* entry = llvm::BasicBlock::Create(ctx, "entry", fn);
  auto* negative = llvm::BasicBlock::Create(ctx, "negative", fn);
  auto* loop = llvm::BasicBlock::Create(ctx, "loop", fn);
  auto* done = llvm::BasicBlock::Create(ctx, "done", fn);
  IRBuilder<> b(entry);
  Value* base = fn->getArg(0);
  Value* exponent = fn->getArg(1);
  Value* one = llvm::ConstantInt::get(type, 1);
  Value* zero = llvm::ConstantInt::get(type, 0);
  b.CreateCondBr(b.CreateICmpSLT(exponent, zero), negative, loop);

  b.SetInsertPoint(negative);  // 1 for base 1, +-1 for base -1, else 0
  Value* odd = b.CreateTrunc(exponent, b.getInt1Ty());
  Value* minus_one = b.CreateSelect(odd, llvm::ConstantInt::getSigned(type, -1), one);
  Value* r = b.CreateSelect(b.CreateICmpEQ(base, one), one,
                            b.CreateSelect(b.CreateICmpEQ(base, llvm::ConstantInt::getSigned(type, -1)),
                                           minus_one, zero));
  b.CreateRet(r);

  b.SetInsertPoint(loop);
  llvm::PHINode* acc = b.CreatePHI(type, 2);
  llvm::PHINode* x = b.CreatePHI(type, 2);
  llvm::PHINode* e = b.CreatePHI(type, 2);
  acc->addIncoming(one, entry);
  x->addIncoming(base, entry);
  e->addIncoming(exponent, entry);
  Value* is_done = b.CreateICmpEQ(e, zero);
  auto* body = llvm::BasicBlock::Create(ctx, "body", fn);
  b.CreateCondBr(is_done, done, body);
  b.SetInsertPoint(body);
  Value* next_acc = b.CreateSelect(b.CreateTrunc(e, b.getInt1Ty()), b.CreateMul(acc, x), acc);
  acc->addIncoming(next_acc, body);
  x->addIncoming(b.CreateMul(x, x), body);
  e->addIncoming(b.CreateLShr(e, 1), body);
  b.CreateBr(loop);
  b.SetInsertPoint(done);
  b.CreateRet(acc);
  return fn;
}

Value* emit_compare(IRBuilder<>& b, OpKind op, DType dtype, Value* x, Value* y) {
  using P = llvm::CmpInst::Predicate;
  struct Row { OpKind op; P f; P s; P u; };
  static constexpr Row kRows[] = {
      {OpKind::Eq, P::FCMP_OEQ, P::ICMP_EQ, P::ICMP_EQ},   {OpKind::Ne, P::FCMP_UNE, P::ICMP_NE, P::ICMP_NE},
      {OpKind::Lt, P::FCMP_OLT, P::ICMP_SLT, P::ICMP_ULT}, {OpKind::Le, P::FCMP_OLE, P::ICMP_SLE, P::ICMP_ULE},
      {OpKind::Gt, P::FCMP_OGT, P::ICMP_SGT, P::ICMP_UGT}, {OpKind::Ge, P::FCMP_OGE, P::ICMP_SGE, P::ICMP_UGE},
  };
  for (const Row& row : kRows) {
    if (row.op != op) continue;
    if (is_floating(dtype)) return b.CreateFCmp(row.f, x, y);
    return b.CreateICmp(dtype == DType::Bool ? row.u : row.s, x, y);
  }
  internal_error("emit_compare: not a comparison");
}

Value* emit_bool(IRBuilder<>& b, OpKind op, std::span<Value* const> a) {
  switch (op) {
    case OpKind::Add: case OpKind::Maximum: case OpKind::LogicalOr: case OpKind::BitwiseOr: return b.CreateOr(a[0], a[1]);
    case OpKind::Mul: case OpKind::Minimum: case OpKind::LogicalAnd: case OpKind::BitwiseAnd: return b.CreateAnd(a[0], a[1]);
    case OpKind::BitwiseXor: return b.CreateXor(a[0], a[1]);
    case OpKind::LogicalNot: case OpKind::BitwiseNot: return b.CreateNot(a[0]);
    default: internal_error("emit_bool: op has no bool lowering (the builder admits no such node)");
  }
}

Value* emit_int(IRBuilder<>& b, OpKind op, std::span<Value* const> a) {
  using llvm::Intrinsic::ID;
  switch (op) {
    case OpKind::Add: return b.CreateAdd(a[0], a[1]);
    case OpKind::Sub: return b.CreateSub(a[0], a[1]);
    case OpKind::Mul: return b.CreateMul(a[0], a[1]);
    case OpKind::Pow:
      return b.CreateCall(int_pow_function(*b.GetInsertBlock()->getModule(), a[0]->getType()), {a[0], a[1]});
    case OpKind::FloorDivide: case OpKind::Remainder: return int_floor_division(b, op, a[0], a[1]);
    case OpKind::Maximum: return intrinsic(b, llvm::Intrinsic::smax, {a[0], a[1]});
    case OpKind::Minimum: return intrinsic(b, llvm::Intrinsic::smin, {a[0], a[1]});
    case OpKind::Neg: return b.CreateNeg(a[0]);
    case OpKind::Abs: return b.CreateIntrinsic(llvm::Intrinsic::abs, {a[0]->getType()}, {a[0], b.getFalse()});
    case OpKind::Relu: return intrinsic(b, llvm::Intrinsic::smax, {a[0], iconst(a[0], 0)});
    case OpKind::Floor: case OpKind::Ceil: case OpKind::Round: return a[0];
    case OpKind::Sign:
      return b.CreateSub(b.CreateZExt(b.CreateICmpSGT(a[0], iconst(a[0], 0)), a[0]->getType()),
                         b.CreateZExt(b.CreateICmpSLT(a[0], iconst(a[0], 0)), a[0]->getType()));
    case OpKind::Clamp: {
      Value* t = b.CreateSelect(b.CreateICmpSLT(a[0], a[1]), a[1], a[0]);
      return b.CreateSelect(b.CreateICmpSGT(t, a[2]), a[2], t);
    }
    case OpKind::BitwiseAnd: return b.CreateAnd(a[0], a[1]);
    case OpKind::BitwiseOr: return b.CreateOr(a[0], a[1]);
    case OpKind::BitwiseXor: return b.CreateXor(a[0], a[1]);
    case OpKind::BitwiseNot: return b.CreateNot(a[0]);
    default: internal_error("emit_int: op has no integer lowering (the builder admits no such node)");
  }
}

Value* emit_float(IRBuilder<>& b, OpKind op, std::span<Value* const> a) {
  namespace I = llvm::Intrinsic;
  Value* x = a[0];
  switch (op) {
    case OpKind::Add: return b.CreateFAdd(x, a[1]);
    case OpKind::Sub: return b.CreateFSub(x, a[1]);
    case OpKind::Mul: return b.CreateFMul(x, a[1]);
    case OpKind::Div: return b.CreateFDiv(x, a[1]);
    case OpKind::Pow: return intrinsic(b, I::pow, {x, a[1]});
    case OpKind::FloorDivide: case OpKind::Remainder: return float_floor_division(b, op, x, a[1]);
    case OpKind::Maximum: return intrinsic(b, I::maximum, {x, a[1]});
    case OpKind::Minimum: return intrinsic(b, I::minimum, {x, a[1]});
    case OpKind::Neg: return b.CreateFNeg(x);
    case OpKind::Abs: return intrinsic(b, I::fabs, {x});
    case OpKind::Relu: return b.CreateSelect(b.CreateFCmpOLT(x, fconst(x, 0.0)), fconst(x, 0.0), x);
    case OpKind::Floor: return intrinsic(b, I::floor, {x});
    case OpKind::Ceil: return intrinsic(b, I::ceil, {x});
    case OpKind::Round: return intrinsic(b, I::roundeven, {x});
    case OpKind::Sign:  // NaN compares false both ways: 0
      return b.CreateFSub(b.CreateUIToFP(b.CreateFCmpOGT(x, fconst(x, 0.0)), x->getType()),
                          b.CreateUIToFP(b.CreateFCmpOLT(x, fconst(x, 0.0)), x->getType()));
    case OpKind::Clamp: {
      Value* t = b.CreateSelect(b.CreateFCmpOLT(x, a[1]), a[1], x);
      return b.CreateSelect(b.CreateFCmpOGT(t, a[2]), a[2], t);
    }
    case OpKind::Exp: return intrinsic(b, I::exp, {x});
    case OpKind::Log: return intrinsic(b, I::log, {x});
    case OpKind::Sqrt: return intrinsic(b, I::sqrt, {x});
    case OpKind::Rsqrt: return b.CreateFDiv(fconst(x, 1.0), intrinsic(b, I::sqrt, {x}));
    case OpKind::Sin: return intrinsic(b, I::sin, {x});
    case OpKind::Cos: return intrinsic(b, I::cos, {x});
    case OpKind::Tanh: return libm_call(b, "tanh", x);
    case OpKind::Sigmoid:
      return b.CreateFDiv(fconst(x, 1.0), b.CreateFAdd(fconst(x, 1.0), intrinsic(b, I::exp, {b.CreateFNeg(x)})));
    case OpKind::Erf: return libm_call(b, "erf", x);
    case OpKind::Log1p: return libm_call(b, "log1p", x);
    case OpKind::Expm1: return libm_call(b, "expm1", x);
    case OpKind::Gelu: {
      Value* erf = libm_call(b, "erf", b.CreateFMul(x, fconst(x, M_SQRT1_2)));
      return b.CreateFMul(b.CreateFMul(x, fconst(x, 0.5)), b.CreateFAdd(fconst(x, 1.0), erf));
    }
    default: internal_error("emit_float: op has no float lowering (the builder admits no such node)");
  }
}

}  // namespace

Value* emit_op(IRBuilder<>& b, OpKind op, DType dtype, DType operand, std::span<Value* const> args) {
  switch (ir::op_info(op).dtype_rule) {
    case ir::DTypeRule::Cast: return emit_convert(b, args[0], operand, dtype);
    case ir::DTypeRule::Compare: return emit_compare(b, op, operand, args[0], args[1]);
    case ir::DTypeRule::Select: return b.CreateSelect(args[0], args[1], args[2]);
    default: break;
  }
  return emit_same(b, op, dtype, args);
}

Value* emit_same(IRBuilder<>& b, OpKind op, DType dtype, std::span<Value* const> args) {
  if (dtype == DType::Bool) return emit_bool(b, op, args);
  if (is_integral(dtype)) return emit_int(b, op, args);
  return emit_float(b, op, args);
}

}  // namespace lazyjit::codegen

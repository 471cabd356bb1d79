// The portable math functions (portable_math.h): range reductions whose subtracted products
// are exact (constants split as fdlibm splits them), Taylor polynomials evaluated by Horner
// with fused multiply-adds, and the specials of C's libm (NaN in, NaN out; the signs of zeros
// and infinities).
#include "codegen/portable_math.h"

#include <cmath>
#include <limits>
#include <numbers>
#include <set>

#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/Instructions.h"
#include "llvm/IR/Intrinsics.h"

namespace lazyjit::codegen {
namespace {

using llvm::Value;

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kLog2e = 0x1.71547652b82fep0;
// ln 2 in two parts; the first has 32 zero bits at its end, so k * kLn2Hi is exact.
constexpr double kLn2Hi = 0x1.62e42fee00000p-1, kLn2Lo = 0x1.a39ef35793c76p-33;
// pi/2 in three 33-bit parts and their tails (fdlibm's rem_pio2): k * kPio2_N is exact for |k| < 2^20.
constexpr double kPio2_1 = 0x1.921fb544p0, kPio2_1t = 0x1.0b4611a626331p-34;
constexpr double kPio2_2 = 0x1.0b4611a6p-34, kPio2_2t = 0x1.3198a2e037073p-69;
constexpr double kPio2_3 = 0x1.3198a2e0p-69, kPio2_3t = 0x1.b839a252049c1p-104;

/// Double arithmetic over an IRBuilder: the language the functions below are written in.
struct Math {
  llvm::IRBuilder<>& b;
  llvm::Type* f64 = b.getDoubleTy();
  llvm::IntegerType* i64 = b.getInt64Ty();

  Value* c(double v) const { return llvm::ConstantFP::get(f64, v); }
  Value* n(int64_t v) const { return llvm::ConstantInt::get(i64, v, /*IsSigned=*/true); }
  Value* add(Value* x, Value* y) { return b.CreateFAdd(x, y); }
  Value* sub(Value* x, Value* y) { return b.CreateFSub(x, y); }
  Value* mul(Value* x, Value* y) { return b.CreateFMul(x, y); }
  Value* div(Value* x, Value* y) { return b.CreateFDiv(x, y); }
  Value* fma(Value* x, Value* y, Value* z) { return b.CreateIntrinsic(llvm::Intrinsic::fma, {f64}, {x, y, z}); }
  Value* abs(Value* x) { return b.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x); }
  Value* rint(Value* x) { return b.CreateUnaryIntrinsic(llvm::Intrinsic::roundeven, x); }
  Value* floor(Value* x) { return b.CreateUnaryIntrinsic(llvm::Intrinsic::floor, x); }
  Value* copysign(Value* x, Value* sign) { return b.CreateBinaryIntrinsic(llvm::Intrinsic::copysign, x, sign); }
  /// x limited to [lo, hi]; a NaN becomes hi (callers select NaN results themselves).
  Value* clamp(Value* x, double lo, double hi) {
    return b.CreateBinaryIntrinsic(llvm::Intrinsic::maxnum, b.CreateBinaryIntrinsic(llvm::Intrinsic::minnum, x, c(hi)),
                                   c(lo));
  }
  Value* lt(Value* x, Value* y) { return b.CreateFCmpOLT(x, y); }
  Value* gt(Value* x, Value* y) { return b.CreateFCmpOGT(x, y); }
  Value* eq(Value* x, Value* y) { return b.CreateFCmpOEQ(x, y); }
  Value* ne(Value* x, Value* y) { return b.CreateFCmpUNE(x, y); }
  Value* nan(Value* x) { return b.CreateFCmpUNO(x, x); }
  Value* finite(Value* x) { return lt(abs(x), c(kInf)); }
  Value* negative(Value* x) { return b.CreateICmpSLT(bits(x), n(0)); }  // the sign bit: -0 too
  Value* select(Value* cond, Value* x, Value* y) { return b.CreateSelect(cond, x, y); }
  /// x, or NaN where x is NaN: for results computed from a clamped argument.
  Value* keep_nan(Value* x, Value* y) { return select(nan(x), x, y); }

  /// coeffs[0] + x * (coeffs[1] + x * (...)).
  Value* poly(Value* x, const std::vector<double>& coeffs) {
    Value* p = c(coeffs.back());
    for (size_t i = coeffs.size() - 1; i-- > 0;) p = fma(p, x, c(coeffs[i]));
    return p;
  }
  Value* to_int(Value* x) { return b.CreateFPToSI(x, i64); }  // x integral and within int64
  Value* to_double(Value* k) { return b.CreateSIToFP(k, f64); }
  Value* bits(Value* x) { return b.CreateBitCast(x, i64); }
  Value* from_bits(Value* v) { return b.CreateBitCast(v, f64); }
  /// 2^k for an int64 k in [-1022, 1023].
  Value* pow2(Value* k) { return from_bits(b.CreateShl(b.CreateAdd(k, n(1023)), 52)); }
  /// x * 2^k for an int64 k in [-2044, 2046]: two exact scalings, so at most one rounding
  /// (into a subnormal result).
  Value* ldexp(Value* x, Value* k) {
    Value* half = b.CreateAShr(k, 1);
    return mul(mul(x, pow2(half)), pow2(b.CreateSub(k, half)));
  }
  /// A new block of the function being written.
  llvm::BasicBlock* block(const char* name) {
    return llvm::BasicBlock::Create(b.getContext(), name, b.GetInsertBlock()->getParent());
  }
};

/// 1/n! for n in [from, to].
std::vector<double> inverse_factorials(int from, int to) {
  std::vector<double> c;
  double factorial = 1;
  for (int i = 1; i < from; ++i) factorial *= i;
  for (int i = std::max(from, 1); i <= to; ++i) {
    factorial *= i;
    c.push_back(1 / factorial);
  }
  if (from == 0) c.insert(c.begin(), 1.0);
  return c;
}

/// Reduces x to r = x - k ln2 in [-ln2/2, ln2/2] (a NaN to 0); returns k.
Value* reduce_ln2(Math& m, Value* x, Value*& r) {
  Value* k = m.rint(m.mul(x, m.c(kLog2e)));
  r = m.fma(k, m.c(-kLn2Lo), m.fma(k, m.c(-kLn2Hi), x));
  return k;
}

/// e^x = 2^k e^r; e^r by its Taylor polynomial of degree 13 (|r| <= 0.35: 2^-60 off).
Value* exp(Math& m, Value* x) {
  Value* r;
  Value* k = reduce_ln2(m, m.clamp(x, -746.0, 710.0), r);  // past these: 0 and inf
  return m.keep_nan(x, m.ldexp(m.poly(r, inverse_factorials(0, 13)), m.to_int(k)));
}

/// e^x - 1 = 2^k (e^r - 1) + (2^k - 1), exact in its last step for small k (one fma).
Value* expm1(Math& m, Value* x) {
  Value* r;
  Value* k = reduce_ln2(m, m.clamp(x, -60.0, 710.0), r);  // below -60: -1
  Value* p = m.fma(m.mul(r, r), m.poly(r, inverse_factorials(2, 14)), r);
  Value* ki = m.to_int(k);
  Value* two_k = m.ldexp(m.c(1.0), ki);
  Value* near = m.b.CreateAnd(m.b.CreateICmpSGE(ki, m.n(-53)), m.b.CreateICmpSLE(ki, m.n(52)));
  Value* y = m.select(near, m.fma(p, two_k, m.sub(two_k, m.c(1.0))), m.sub(m.ldexp(m.add(p, m.c(1.0)), ki), m.c(1.0)));
  return m.keep_nan(x, m.select(m.eq(x, m.c(0.0)), x, y));  // -0 stays -0
}

/// log x = e ln2 + log(1 + f), x = (1 + f) 2^e with 1 + f in [sqrt(1/2), sqrt(2)); from
/// s = f / (2 + f), log(1 + f) = f - (f^2/2 - s (f^2/2 + R(s^2))) as fdlibm writes it, R
/// by atanh's series to s^24 (|s| <= 0.172: 2^-60 off).
Value* log(Math& m, Value* x) {
  llvm::IRBuilder<>& b = m.b;
  Value* tiny = m.lt(x, m.c(0x1p-1022));  // subnormals are scaled into the normal range first
  Value* bits = m.bits(m.select(tiny, m.mul(x, m.c(0x1p54)), x));
  Value* e = b.CreateSub(b.CreateLShr(bits, 52), m.select(tiny, m.n(1023 + 54), m.n(1023)));
  Value* mantissa = m.from_bits(b.CreateOr(b.CreateAnd(bits, m.n((int64_t{1} << 52) - 1)), m.n(int64_t{1023} << 52)));
  Value* big = m.gt(mantissa, m.c(std::numbers::sqrt2));
  mantissa = m.select(big, m.mul(mantissa, m.c(0.5)), mantissa);
  e = b.CreateAdd(e, b.CreateZExt(big, m.i64));
  Value* f = m.sub(mantissa, m.c(1.0));
  Value* s = m.div(f, m.add(m.c(2.0), f));
  Value* z = m.mul(s, s);
  std::vector<double> series;
  for (int i = 1; i <= 12; ++i) series.push_back(2.0 / (2 * i + 1));
  Value* R = m.mul(z, m.poly(z, series));
  Value* hfsq = m.mul(m.c(0.5), m.mul(f, f));
  Value* ef = m.to_double(e);
  Value* inner = m.fma(s, m.add(hfsq, R), m.mul(ef, m.c(kLn2Lo)));
  Value* y = m.sub(m.mul(ef, m.c(kLn2Hi)), m.sub(m.sub(hfsq, inner), f));
  y = m.select(m.eq(x, m.c(kInf)), x, y);
  y = m.select(m.eq(x, m.c(0.0)), m.c(-kInf), y);
  return m.keep_nan(x, m.select(m.lt(x, m.c(0.0)), m.c(kNaN), y));
}

/// log(1 + x) = log(u) x / (u - 1) for u = 1 + x rounded (Kahan): the quotient corrects u's rounding.
Value* log1p(Math& m, Value* x) {
  Value* u = m.add(m.c(1.0), x);
  Value* y = m.mul(log(m, u), m.div(x, m.sub(u, m.c(1.0))));
  y = m.select(m.eq(u, m.c(1.0)), x, y);
  return m.select(m.eq(x, m.c(kInf)), x, y);
}

/// tanh |x| = t / (t + 2) for t = e^{2|x|} - 1; 1 past 20.
Value* tanh(Math& m, Value* x) {
  Value* a = m.abs(x);
  Value* t = expm1(m, m.mul(m.c(2.0), m.clamp(a, 0.0, 20.0)));
  Value* y = m.select(m.gt(a, m.c(20.0)), m.c(1.0), m.div(t, m.add(t, m.c(2.0))));
  return m.keep_nan(x, m.copysign(y, x));
}

/// sin x (quarter_turns 0) or cos x = sin(x + pi/2) (1): x = k pi/2 + y0 + y1 with |y0| <=
/// pi/4 (three Cody-Waite rounds), then sin or cos of y0 by Taylor polynomials to degree 19
/// and 20, corrected by the tail y1. Exact reduction needs |x| < 2^20 pi/2.
Value* sin_or_cos(Math& m, Value* x, int quarter_turns) {
  Value* finite = m.finite(x);
  Value* xs = m.select(finite, x, m.c(0.0));
  Value* k = m.rint(m.mul(xs, m.c(2 / std::numbers::pi)));
  Value* r = m.fma(k, m.c(-kPio2_1), xs);
  Value* w = nullptr;
  for (auto [part, tail] : {std::pair{kPio2_2, kPio2_2t}, std::pair{kPio2_3, kPio2_3t}}) {
    Value* t = r;
    Value* kp = m.mul(k, m.c(part));
    r = m.sub(t, kp);
    w = m.sub(m.mul(k, m.c(tail)), m.sub(m.sub(t, r), kp));
  }
  Value* y0 = m.sub(r, w);
  Value* y1 = m.sub(m.sub(r, y0), w);
  Value* z = m.mul(y0, y0);
  std::vector<double> s_coeffs, c_coeffs;
  for (int i = 3; i <= 19; i += 2) s_coeffs.push_back((i % 4 == 3 ? -1 : 1) * inverse_factorials(i, i)[0]);
  for (int i = 4; i <= 20; i += 2) c_coeffs.push_back((i % 4 == 0 ? 1 : -1) * inverse_factorials(i, i)[0]);
  Value* sin_y = m.add(m.fma(m.mul(y0, z), m.poly(z, s_coeffs), y0), m.mul(y1, m.fma(m.c(-0.5), z, m.c(1.0))));
  Value* cos_y = m.sub(m.fma(m.mul(z, z), m.poly(z, c_coeffs), m.fma(m.c(-0.5), z, m.c(1.0))), m.mul(y0, y1));
  llvm::IRBuilder<>& b = m.b;
  Value* quarter = m.sub(k, m.mul(m.c(4.0), m.floor(m.mul(k, m.c(0.25)))));  // k mod 4, in [0, 4)
  Value* n = b.CreateAnd(b.CreateAdd(m.to_int(quarter), m.n(quarter_turns)), m.n(3));
  Value* v = m.select(b.CreateICmpNE(b.CreateAnd(n, m.n(1)), m.n(0)), cos_y, sin_y);
  v = m.select(b.CreateICmpNE(b.CreateAnd(n, m.n(2)), m.n(0)), b.CreateFNeg(v), v);
  if (quarter_turns == 0) v = m.select(m.eq(x, m.c(0.0)), x, v);  // sin(-0) is -0
  return m.select(finite, v, m.c(kNaN));
}

/// C's pow: e^{y log|x|}, the sign of an odd integer power of a negative x, and the specials
/// (x^0 = 1^y = (-1)^{+-inf} = 1, NaN for a finite negative x and a finite non-integer y).
Value* pow(Math& m, Value* x, Value* y) {
  llvm::IRBuilder<>& b = m.b;
  Value* integral = m.eq(m.rint(y), y);  // +-inf count as even integers
  Value* half = m.mul(y, m.c(0.5));
  Value* odd = b.CreateAnd(integral, m.ne(m.rint(half), half));
  Value* r = exp(m, m.mul(y, log(m, m.abs(x))));
  r = m.select(b.CreateAnd(odd, m.negative(x)), b.CreateFNeg(r), r);
  Value* undefined = b.CreateAnd(b.CreateAnd(m.lt(x, m.c(0.0)), m.finite(x)), b.CreateAnd(m.finite(y), b.CreateNot(integral)));
  r = m.select(undefined, m.c(kNaN), r);
  Value* one = b.CreateOr(b.CreateOr(m.eq(y, m.c(0.0)), m.eq(x, m.c(1.0))),
                          b.CreateAnd(m.eq(m.abs(x), m.c(1.0)), m.eq(m.abs(y), m.c(kInf))));
  return m.select(one, m.c(1.0), r);
}

/// erf by its Taylor series below |x| = 2 (36 terms), else 1 - erfc(|x|) with erfc from
/// Laplace's continued fraction (60 terms) and e^{-x^2} from x^2 split exactly in two.
Value* erf(Math& m, Value* x) {
  llvm::IRBuilder<>& b = m.b;
  Value* a = m.abs(x);
  llvm::BasicBlock* series = m.block("erf.series");
  llvm::BasicBlock* tail = m.block("erf.tail");
  llvm::BasicBlock* done = m.block("erf.done");
  b.CreateCondBr(m.lt(a, m.c(2.0)), series, tail);

  b.SetInsertPoint(series);
  std::vector<double> taylor;
  for (int i = 0; i < 36; ++i) {
    taylor.push_back((i % 2 ? -2 : 2) / std::sqrt(std::numbers::pi) * inverse_factorials(i, i)[0] / (2 * i + 1));
  }
  Value* near = m.mul(x, m.poly(m.mul(x, x), taylor));
  b.CreateBr(done);

  b.SetInsertPoint(tail);
  Value* as = m.clamp(a, 2.0, 6.0);  // erfc(6) < 2^-55
  Value* fraction = m.c(0.0);
  for (int i = 60; i >= 1; --i) fraction = m.div(m.c(0.5 * i), m.add(as, fraction));
  Value* hi = m.mul(as, as);
  Value* lo = m.fma(as, as, m.b.CreateFNeg(hi));
  Value* gauss = m.mul(exp(m, b.CreateFNeg(hi)), m.sub(m.c(1.0), lo));
  Value* erfc = m.div(m.mul(gauss, m.c(std::numbers::inv_sqrtpi)), m.add(as, fraction));
  Value* far = m.keep_nan(x, m.copysign(m.sub(m.c(1.0), erfc), x));
  llvm::BasicBlock* tail_end = b.GetInsertBlock();
  b.CreateBr(done);

  b.SetInsertPoint(done);
  llvm::PHINode* y = b.CreatePHI(m.f64, 2);
  y->addIncoming(near, series);
  y->addIncoming(far, tail_end);
  return y;
}

/// C's fmod, exactly: |x| mod |y| by binary long division of the significands, one bit per
/// step from x's exponent down to y's, with x's sign. (With both significands in [2^52, 2^53),
/// one subtraction per step leaves the remainder below y's.)
Value* fmod(Math& m, Value* x, Value* y) {
  llvm::IRBuilder<>& b = m.b;
  Value* ax = m.abs(x);
  Value* ay = m.abs(y);
  Value* undefined = b.CreateOr(b.CreateOr(m.nan(y), b.CreateNot(m.finite(x))), m.eq(ay, m.c(0.0)));
  Value* as_is = m.lt(ax, ay);
  llvm::BasicBlock* entry = b.GetInsertBlock();
  llvm::BasicBlock* loop = m.block("fmod.loop");
  llvm::BasicBlock* last = m.block("fmod.last");
  llvm::BasicBlock* done = m.block("fmod.done");
  // A positive finite double as significand * 2^(exponent - 1075), the significand's top bit
  // at bit 52 (a subnormal's shifted up there, its exponent below 1).
  auto split = [&](Value* v) {
    Value* bits = m.bits(v);
    Value* field = b.CreateLShr(bits, 52);
    Value* normal = b.CreateICmpNE(field, m.n(0));
    Value* fraction = b.CreateAnd(bits, m.n((int64_t{1} << 52) - 1));
    Value* shift = b.CreateSub(b.CreateBinaryIntrinsic(llvm::Intrinsic::ctlz, fraction, b.getTrue()), m.n(11));
    Value* significand = m.select(normal, b.CreateOr(fraction, m.n(int64_t{1} << 52)), b.CreateShl(fraction, shift));
    return std::pair{significand, m.select(normal, field, b.CreateSub(m.n(1), shift))};
  };
  auto [mx0, ex0] = split(ax);
  auto [my, ey] = split(ay);
  b.CreateCondBr(b.CreateOr(b.CreateOr(undefined, as_is), b.CreateICmpSLE(ex0, ey)), last, loop);

  b.SetInsertPoint(loop);  // while ex > ey: subtract if it fits, shift, ex -= 1
  llvm::PHINode* mx = b.CreatePHI(m.i64, 2);
  llvm::PHINode* ex = b.CreatePHI(m.i64, 2);
  Value* reduced = m.select(b.CreateICmpUGE(mx, my), b.CreateSub(mx, my), mx);
  Value* mx_next = b.CreateShl(reduced, 1);
  Value* ex_next = b.CreateSub(ex, m.n(1));
  mx->addIncoming(mx0, entry);
  ex->addIncoming(ex0, entry);
  mx->addIncoming(mx_next, loop);
  ex->addIncoming(ex_next, loop);
  b.CreateCondBr(b.CreateICmpSGT(ex_next, ey), loop, last);

  b.SetInsertPoint(last);
  llvm::PHINode* rest = b.CreatePHI(m.i64, 2);
  rest->addIncoming(mx0, entry);
  rest->addIncoming(mx_next, loop);
  Value* remainder = m.select(b.CreateICmpUGE(rest, my), b.CreateSub(rest, my), rest);
  Value* r = m.copysign(m.ldexp(b.CreateUIToFP(remainder, m.f64), b.CreateSub(ey, m.n(1075))), x);
  r = m.select(as_is, x, r);
  r = m.select(undefined, m.c(kNaN), r);
  b.CreateBr(done);
  b.SetInsertPoint(done);
  return r;
}

using Unary = Value* (*)(Math&, Value*);
using Binary = Value* (*)(Math&, Value*, Value*);
struct Function {
  std::string_view name;
  Unary unary = nullptr;
  Binary binary = nullptr;
};
const Function kFunctions[] = {
    {"exp", exp},     {"expm1", expm1}, {"log", log}, {"log1p", log1p}, {"tanh", tanh},
    {"sin", [](Math& m, Value* x) { return sin_or_cos(m, x, 0); }},
    {"cos", [](Math& m, Value* x) { return sin_or_cos(m, x, 1); }},
    {"erf", erf},     {"pow", nullptr, pow},  {"fmod", nullptr, fmod},
};

const Function* find(std::string_view name) {
  for (const Function& f : kFunctions) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

/// The double function `name`, defined in `module` on first use.
llvm::Function* define(llvm::Module& module, const Function& f) {
  const std::string symbol = "lj.math." + std::string(f.name);
  if (llvm::Function* defined = module.getFunction(symbol)) return defined;
  llvm::Type* f64 = llvm::Type::getDoubleTy(module.getContext());
  std::vector<llvm::Type*> params(f.binary != nullptr ? 2 : 1, f64);
  auto* fn = llvm::Function::Create(llvm::FunctionType::get(f64, params, false), llvm::Function::InternalLinkage,
                                    symbol, module);
  fn->addFnAttr(llvm::Attribute::AlwaysInline);
  fn->addFnAttr(llvm::Attribute::NoUnwind);
  fn->setDoesNotAccessMemory();
  llvm::IRBuilder<> b(llvm::BasicBlock::Create(module.getContext(), "entry", fn));
  Math m{b};
  b.CreateRet(f.binary != nullptr ? f.binary(m, fn->getArg(0), fn->getArg(1)) : f.unary(m, fn->getArg(0)));
  return fn;
}

/// The portable function a call or instruction stands for, or none.
const Function* portable_of(const llvm::Instruction& inst) {
  if (inst.getOpcode() == llvm::Instruction::FRem) return find("fmod");
  const auto* call = llvm::dyn_cast<llvm::CallInst>(&inst);
  const llvm::Function* callee = call != nullptr ? call->getCalledFunction() : nullptr;
  if (callee == nullptr || call->getType()->isVectorTy()) return nullptr;
  switch (callee->getIntrinsicID()) {
    case llvm::Intrinsic::exp: return find("exp");
    case llvm::Intrinsic::log: return find("log");
    case llvm::Intrinsic::pow: return find("pow");
    case llvm::Intrinsic::sin: return find("sin");
    case llvm::Intrinsic::cos: return find("cos");
    case llvm::Intrinsic::not_intrinsic: break;
    default: return nullptr;
  }
  std::string_view name = callee->getName();  // libm's: tanh, or tanhf for a float
  if (call->getType()->isFloatTy() && name.ends_with('f')) name.remove_suffix(1);
  const Function* f = find(name);
  return f != nullptr && f->unary != nullptr ? f : nullptr;
}

}  // namespace

void use_portable_math(llvm::Module& module) {
  std::vector<std::pair<llvm::Instruction*, const Function*>> uses;
  for (llvm::Function& fn : module) {
    for (llvm::BasicBlock& block : fn) {
      for (llvm::Instruction& inst : block) {
        if (const Function* f = portable_of(inst)) uses.emplace_back(&inst, f);
      }
    }
  }
  std::set<llvm::Function*> callees;
  for (auto [inst, f] : uses) {
    llvm::IRBuilder<> b(inst);
    llvm::Type* type = inst->getType();
    std::vector<Value*> args;
    const unsigned operands = f->binary != nullptr ? 2 : 1;
    for (unsigned i = 0; i < operands; ++i) args.push_back(b.CreateFPExt(inst->getOperand(i), b.getDoubleTy()));
    Value* result = b.CreateFPTrunc(b.CreateCall(define(module, *f), args), type);
    if (auto* call = llvm::dyn_cast<llvm::CallInst>(inst)) callees.insert(call->getCalledFunction());
    inst->replaceAllUsesWith(result);
    inst->eraseFromParent();
  }
  for (llvm::Function* callee : callees) {
    if (callee->use_empty() && callee->getParent() == &module) callee->eraseFromParent();
  }
}

const std::vector<std::string_view>& portable_math_functions() {
  static const std::vector<std::string_view> names = [] {
    std::vector<std::string_view> v;
    for (const Function& f : kFunctions) v.push_back(f.name);
    return v;
  }();
  return names;
}

}  // namespace lazyjit::codegen

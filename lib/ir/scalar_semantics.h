// The meaning of each elementwise op on one element, in plain C++. Used by the reference
// interpreter; the LLVM lowering must agree with it (the differential tests check that).
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "ir/op.h"

namespace lazyjit::ir::semantics {

/// Two's-complement wrapping arithmetic on signed integers, without C++'s overflow UB.
template <class T>
T wrap(std::make_unsigned_t<T> v) { return static_cast<T>(v); }
template <class T> T wrap_add(T a, T b) { using U = std::make_unsigned_t<T>; return wrap<T>(U(a) + U(b)); }
template <class T> T wrap_sub(T a, T b) { using U = std::make_unsigned_t<T>; return wrap<T>(U(a) - U(b)); }
template <class T> T wrap_mul(T a, T b) { using U = std::make_unsigned_t<T>; return wrap<T>(U(a) * U(b)); }

/// PyTorch's floor division and remainder. Integers: a zero divisor gives 0 here (the run
/// fails on it: the kernel checks the divisor, the interpreter throws) and the minimum over
/// -1 wraps. Floats: as c10::div_floor_floating, from fmod, so that a / b's rounding cannot
/// put the quotient on the wrong side of an integer.
template <class T>
T floor_divide(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    if (b == 0) return 0;
    if (b == -1) return wrap_sub(T(0), a);
    const T q = a / b, r = a % b;
    return r != 0 && ((r < 0) != (b < 0)) ? T(q - 1) : q;
  } else {
    if (b == 0) return a / b;
    const T mod = std::fmod(a, b);
    T div = (a - mod) / b;
    if (mod != 0 && (b < 0) != (mod < 0)) div -= T(1);
    if (div == 0) return std::copysign(T(0), a / b);
    T floored = std::floor(div);
    if (div - floored > T(0.5)) floored += T(1);
    return floored;
  }
}
template <class T>
T remainder(T a, T b) {
  T r;
  if constexpr (std::is_integral_v<T>) {
    if (b == 0 || b == -1) return 0;
    r = a % b;
  } else {
    r = std::fmod(a, b);
  }
  return r != 0 && ((r < 0) != (b < 0)) ? T(r + b) : r;
}

/// Integer power by squaring; a negative exponent gives 0 unless |base| == 1.
template <class T>
T int_pow(T base, T exponent) {
  if (exponent < 0) {
    if (base == 1) return 1;
    if (base == -1) return (exponent & 1) ? T(-1) : T(1);
    return 0;
  }
  T result = 1;
  while (exponent > 0) {
    if (exponent & 1) result = wrap_mul(result, base);
    base = wrap_mul(base, base);
    exponent >>= 1;
  }
  return result;
}

/// IEEE 754-2019 maximum: NaN if either is NaN, and +0 is greater than -0.
template <class T>
T nan_max(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<T>::quiet_NaN();
    if (a == b) return std::signbit(a) ? b : a;
  }
  return a < b ? b : a;
}
/// IEEE 754-2019 minimum: NaN if either is NaN, and -0 is less than +0.
template <class T>
T nan_min(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<T>::quiet_NaN();
    if (a == b) return std::signbit(a) ? a : b;
  }
  return b < a ? b : a;
}

/// Ops whose result has the operands' dtype T (DTypeRule::Same). `x` holds arity values.
template <class T>
T apply_same(OpKind op, const T* x) {
  if constexpr (std::is_same_v<T, bool>) {
    switch (op) {
      case OpKind::Add: case OpKind::Maximum: case OpKind::LogicalOr: case OpKind::BitwiseOr: return x[0] || x[1];
      case OpKind::Mul: case OpKind::Minimum: case OpKind::LogicalAnd: case OpKind::BitwiseAnd: return x[0] && x[1];
      case OpKind::BitwiseXor: return x[0] != x[1];
      case OpKind::LogicalNot: case OpKind::BitwiseNot: return !x[0];
      default: return false;
    }
  } else if constexpr (std::is_integral_v<T>) {
    switch (op) {
      case OpKind::Add: return wrap_add(x[0], x[1]);
      case OpKind::Sub: return wrap_sub(x[0], x[1]);
      case OpKind::Mul: return wrap_mul(x[0], x[1]);
      case OpKind::Pow: return int_pow(x[0], x[1]);
      case OpKind::FloorDivide: return floor_divide(x[0], x[1]);
      case OpKind::Remainder: return remainder(x[0], x[1]);
      case OpKind::Maximum: return nan_max(x[0], x[1]);
      case OpKind::Minimum: return nan_min(x[0], x[1]);
      case OpKind::Neg: return wrap_sub(T(0), x[0]);
      case OpKind::Abs: return x[0] < 0 ? wrap_sub(T(0), x[0]) : x[0];
      case OpKind::Relu: return x[0] < 0 ? T(0) : x[0];
      case OpKind::Floor: case OpKind::Ceil: case OpKind::Round: return x[0];
      case OpKind::Sign: return T((x[0] > 0) - (x[0] < 0));
      case OpKind::Clamp: { T t = x[0] < x[1] ? x[1] : x[0]; return t > x[2] ? x[2] : t; }
      case OpKind::BitwiseAnd: return x[0] & x[1];
      case OpKind::BitwiseOr: return x[0] | x[1];
      case OpKind::BitwiseXor: return x[0] ^ x[1];
      case OpKind::BitwiseNot: return static_cast<T>(~x[0]);
      default: return 0;
    }
  } else {
    switch (op) {
      case OpKind::Add: return x[0] + x[1];
      case OpKind::Sub: return x[0] - x[1];
      case OpKind::Mul: return x[0] * x[1];
      case OpKind::Div: return x[0] / x[1];
      case OpKind::Pow: return std::pow(x[0], x[1]);
      case OpKind::FloorDivide: return floor_divide(x[0], x[1]);
      case OpKind::Remainder: return remainder(x[0], x[1]);
      case OpKind::Maximum: return nan_max(x[0], x[1]);
      case OpKind::Minimum: return nan_min(x[0], x[1]);
      case OpKind::Neg: return -x[0];
      case OpKind::Abs: return std::fabs(x[0]);
      case OpKind::Relu: return x[0] < 0 ? T(0) : x[0];
      case OpKind::Floor: return std::floor(x[0]);
      case OpKind::Ceil: return std::ceil(x[0]);
      case OpKind::Round: return std::nearbyint(x[0]);  // the default rounding: halves to even
      case OpKind::Sign: return T((x[0] > 0) - (x[0] < 0));
      case OpKind::Clamp: { T t = x[0] < x[1] ? x[1] : x[0]; return t > x[2] ? x[2] : t; }
      case OpKind::Exp: return std::exp(x[0]);
      case OpKind::Log: return std::log(x[0]);
      case OpKind::Log1p: return std::log1p(x[0]);
      case OpKind::Expm1: return std::expm1(x[0]);
      case OpKind::Sqrt: return std::sqrt(x[0]);
      case OpKind::Rsqrt: return T(1) / std::sqrt(x[0]);
      case OpKind::Sin: return std::sin(x[0]);
      case OpKind::Cos: return std::cos(x[0]);
      case OpKind::Tanh: return std::tanh(x[0]);
      case OpKind::Sigmoid: return T(1) / (T(1) + std::exp(-x[0]));
      case OpKind::Erf: return std::erf(x[0]);
      case OpKind::Gelu: return x[0] * T(0.5) * (T(1) + std::erf(x[0] * T(M_SQRT1_2)));
      default: return 0;
    }
  }
}

/// Comparisons (DTypeRule::Compare).
template <class T>
bool apply_compare(OpKind op, T a, T b) {
  switch (op) {
    case OpKind::Eq: return a == b;
    case OpKind::Ne: return a != b;
    case OpKind::Lt: return a < b;
    case OpKind::Le: return a <= b;
    case OpKind::Gt: return a > b;
    case OpKind::Ge: return a >= b;
    default: return false;
  }
}

/// The value a fold starts from (ir::FoldStart) in compute type T.
template <class T>
T fold_start(FoldStart start) {
  if (start == FoldStart::Zero) return T{0};
  if (start == FoldStart::One) return T{1};
  const bool low = start == FoldStart::Lowest;
  if constexpr (std::is_same_v<T, bool>) {
    return !low;
  } else if constexpr (std::is_floating_point_v<T>) {
    return low ? -std::numeric_limits<T>::infinity() : std::numeric_limits<T>::infinity();
  } else {
    return low ? std::numeric_limits<T>::lowest() : std::numeric_limits<T>::max();
  }
}

/// Whether argmax moves from `best` to a later `v`: v is larger, or v is the first NaN
/// (NaN counts as the maximum; the first maximum wins), as PyTorch's argmax.
template <class T>
bool argmax_prefers(T v, T best) {
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(best)) return false;
    if (std::isnan(v)) return true;
  }
  return v > best;
}

/// Conversion between compute types. To bool: != 0, so NaN is true. Float to integer
/// saturates (NaN gives 0), as LLVM's fptosi.sat does, so every input has one result.
template <class To, class From>
To convert(From v) {
  if constexpr (std::is_same_v<To, bool>) {
    return v != From(0);
  } else if constexpr (std::is_floating_point_v<From> && std::is_integral_v<To>) {
    if (std::isnan(v)) return 0;
    if (v <= static_cast<From>(std::numeric_limits<To>::min())) return std::numeric_limits<To>::min();
    if (v >= static_cast<From>(std::numeric_limits<To>::max())) return std::numeric_limits<To>::max();
    return static_cast<To>(v);
  } else {
    return static_cast<To>(v);
  }
}

}  // namespace lazyjit::ir::semantics

// Tier 0's block functions for one vector ISA. CMake compiles this file once per ISA (with
// -mavx512f..., -mavx2 -mfma, or nothing) and names its entry point by LAZYJIT_TIER0_FILL;
// the loops are written so that GCC vectorises them for the ISA at hand. -ffp-contract=off:
// no multiply and add fuse unless written as an fma, as in compiled code.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>

#include "ir/dtype_dispatch.h"
#include "ir/philox.h"
#include "ir/scalar_semantics.h"
#include "lowering/kernel_abi.h"
#include "runtime/tier0_blocks.h"

#ifndef LAZYJIT_TIER0_FILL
#error "define LAZYJIT_TIER0_FILL (the ISA's table filler) when compiling this file"
#endif

namespace lazyjit::runtime::tier0 {

void LAZYJIT_TIER0_FILL(BlockTable& table);

namespace {

using ir::OpKind;
namespace sem = ir::semantics;

/// The array element type of a dtype's values: bool is a byte.
template <class T>
using Stored = std::conditional_t<std::is_same_v<T, bool>, uint8_t, T>;

/// The compute type of a dtype's values (bool for Bool; its storage type otherwise).
template <DType D>
using ComputeOf = std::conditional_t<D == DType::Bool, bool, typename ir::StorageOf<D>::type>;

template <class T>
T get(const void* p, int64_t i) {
  if constexpr (std::is_same_v<T, bool>) return static_cast<const uint8_t*>(p)[i] != 0;
  else return static_cast<const T*>(p)[i];
}

// ---- libmvec: the vector variants compiled loops call, over whole blocks ----------------

#if defined(__AVX512F__)
using VecF = __m512;
using VecD = __m512d;
constexpr int kLanesF = 16, kLanesD = 8;
#define LAZYJIT_VF(name) _ZGVeN16v_##name##f
#define LAZYJIT_VD(name) _ZGVeN8v_##name
#define LAZYJIT_VF2(name) _ZGVeN16vv_##name##f
#define LAZYJIT_VD2(name) _ZGVeN8vv_##name
#elif defined(__AVX2__)
using VecF = __m256;
using VecD = __m256d;
constexpr int kLanesF = 8, kLanesD = 4;
#define LAZYJIT_VF(name) _ZGVdN8v_##name##f
#define LAZYJIT_VD(name) _ZGVdN4v_##name
#define LAZYJIT_VF2(name) _ZGVdN8vv_##name##f
#define LAZYJIT_VD2(name) _ZGVdN4vv_##name
#else
using VecF = __m128;
using VecD = __m128d;
constexpr int kLanesF = 4, kLanesD = 2;
#define LAZYJIT_VF(name) _ZGVbN4v_##name##f
#define LAZYJIT_VD(name) _ZGVbN2v_##name
#define LAZYJIT_VF2(name) _ZGVbN4vv_##name##f
#define LAZYJIT_VD2(name) _ZGVbN2vv_##name
#endif

extern "C" {
#define LAZYJIT_DECLARE(name)                 \
  VecF LAZYJIT_VF(name)(VecF) noexcept;       \
  VecD LAZYJIT_VD(name)(VecD) noexcept;
LAZYJIT_DECLARE(exp)
LAZYJIT_DECLARE(log)
LAZYJIT_DECLARE(sin)
LAZYJIT_DECLARE(cos)
LAZYJIT_DECLARE(tanh)
LAZYJIT_DECLARE(erf)
LAZYJIT_DECLARE(log1p)
LAZYJIT_DECLARE(expm1)
#undef LAZYJIT_DECLARE
VecF LAZYJIT_VF2(pow)(VecF, VecF) noexcept;
VecD LAZYJIT_VD2(pow)(VecD, VecD) noexcept;
}

template <class T> struct Mvec;
template <> struct Mvec<float> {
  using V = VecF;
  static constexpr int kLanes = kLanesF;
};
template <> struct Mvec<double> {
  using V = VecD;
  static constexpr int kLanes = kLanesD;
};

/// out[i] = f(x[i]) (and y[i] for a binary f) by whole vectors; the last, partial vector is
/// padded with ones (finite for every function here) and only its first lanes kept.
template <class T, class F>
void map_vector(const T* x, const T* y, T* out, int64_t n, F f) {
  using V = typename Mvec<T>::V;
  constexpr int L = Mvec<T>::kLanes;
  int64_t i = 0;
  for (; i + L <= n; i += L) {
    V a, b{};
    std::memcpy(&a, x + i, sizeof a);
    if (y) std::memcpy(&b, y + i, sizeof b);
    const V r = f(a, b);
    std::memcpy(out + i, &r, sizeof r);
  }
  if (i == n) return;
  T pa[L], pb[L], pr[L];
  for (int j = 0; j < L; ++j) {
    pa[j] = i + j < n ? x[i + j] : T(1);
    pb[j] = y && i + j < n ? y[i + j] : T(1);
  }
  V a, b;
  std::memcpy(&a, pa, sizeof a);
  std::memcpy(&b, pb, sizeof b);
  const V r = f(a, b);
  std::memcpy(pr, &r, sizeof r);
  for (int64_t j = 0; i + j < n; ++j) out[i + j] = pr[j];
}

#define LAZYJIT_UNARY(name)                                                                       \
  template <class T>                                                                              \
  void vec_##name(const T* x, T* out, int64_t n) {                                                \
    if constexpr (std::is_same_v<T, float>) {                                                     \
      map_vector<float>(x, nullptr, out, n, [](VecF a, VecF) { return LAZYJIT_VF(name)(a); });    \
    } else {                                                                                      \
      map_vector<double>(x, nullptr, out, n, [](VecD a, VecD) { return LAZYJIT_VD(name)(a); });   \
    }                                                                                             \
  }
LAZYJIT_UNARY(exp)
LAZYJIT_UNARY(log)
LAZYJIT_UNARY(sin)
LAZYJIT_UNARY(cos)
LAZYJIT_UNARY(tanh)
LAZYJIT_UNARY(erf)
LAZYJIT_UNARY(log1p)
LAZYJIT_UNARY(expm1)
#undef LAZYJIT_UNARY

template <class T>
void vec_pow(const T* x, const T* y, T* out, int64_t n) {
  if constexpr (std::is_same_v<T, float>) {
    map_vector<float>(x, y, out, n, [](VecF a, VecF b) { return LAZYJIT_VF2(pow)(a, b); });
  } else {
    map_vector<double>(x, y, out, n, [](VecD a, VecD b) { return LAZYJIT_VD2(pow)(a, b); });
  }
}

// ---- elementwise ops -------------------------------------------------------------------

/// Float ops with a math function, composed as the LLVM emitter composes them
/// (codegen/elementwise.cpp).
template <OpKind op, class T>
void float_math(const void* const* operands, void* out_raw, int64_t n) {
  const T* x = static_cast<const T*>(operands[0]);
  T* out = static_cast<T*>(out_raw);
  if constexpr (op == OpKind::Exp) vec_exp(x, out, n);
  else if constexpr (op == OpKind::Log) vec_log(x, out, n);
  else if constexpr (op == OpKind::Sin) vec_sin(x, out, n);
  else if constexpr (op == OpKind::Cos) vec_cos(x, out, n);
  else if constexpr (op == OpKind::Tanh) vec_tanh(x, out, n);
  else if constexpr (op == OpKind::Erf) vec_erf(x, out, n);
  else if constexpr (op == OpKind::Log1p) vec_log1p(x, out, n);
  else if constexpr (op == OpKind::Expm1) vec_expm1(x, out, n);
  else if constexpr (op == OpKind::Pow) vec_pow(x, static_cast<const T*>(operands[1]), out, n);
  else if constexpr (op == OpKind::Sigmoid) {  // 1 / (1 + exp(-x))
    for (int64_t i = 0; i < n; ++i) out[i] = -x[i];
    vec_exp(out, out, n);
    for (int64_t i = 0; i < n; ++i) out[i] = T(1) / (T(1) + out[i]);
  } else if constexpr (op == OpKind::Gelu) {  // (x * 0.5) * (1 + erf(x * sqrt(1/2)))
    for (int64_t i = 0; i < n; ++i) out[i] = x[i] * T(M_SQRT1_2);
    vec_erf(out, out, n);
    for (int64_t i = 0; i < n; ++i) out[i] = (x[i] * T(0.5)) * (T(1) + out[i]);
  }
}

template <OpKind op, class T, int arity>
void same(const void* const* operands, void* out_raw, int64_t n) {
  if constexpr (std::is_floating_point_v<T> && ir::calls_math(op)) {
    float_math<op, T>(operands, out_raw, n);
  } else {
    auto* out = static_cast<Stored<T>*>(out_raw);
    const auto* a = static_cast<const Stored<T>*>(operands[0]);
    const auto* b = arity > 1 ? static_cast<const Stored<T>*>(operands[1]) : a;
    const auto* c = arity > 2 ? static_cast<const Stored<T>*>(operands[2]) : a;
    for (int64_t i = 0; i < n; ++i) {
      const T x[3] = {static_cast<T>(a[i]), static_cast<T>(b[i]), static_cast<T>(c[i])};
      out[i] = static_cast<Stored<T>>(sem::apply_same<T>(op, x));
    }
  }
}

/// `same` with operand `which` one value for all lanes.
template <OpKind op, class T, int which>
void same_with_scalar(const void* const* operands, void* out_raw, int64_t n) {
  auto* out = static_cast<Stored<T>*>(out_raw);
  const auto* lanes = static_cast<const Stored<T>*>(operands[1 - which]);
  const T value = static_cast<T>(*static_cast<const Stored<T>*>(operands[which]));
  for (int64_t i = 0; i < n; ++i) {
    const T x[3] = {which == 0 ? value : static_cast<T>(lanes[i]), which == 1 ? value : static_cast<T>(lanes[i]), value};
    out[i] = static_cast<Stored<T>>(sem::apply_same<T>(op, x));
  }
}

template <OpKind op, class T>
void compare(const void* const* operands, void* out_raw, int64_t n) {
  const auto* a = static_cast<const Stored<T>*>(operands[0]);
  const auto* b = static_cast<const Stored<T>*>(operands[1]);
  auto* out = static_cast<uint8_t*>(out_raw);
  for (int64_t i = 0; i < n; ++i) out[i] = sem::apply_compare<T>(op, static_cast<T>(a[i]), static_cast<T>(b[i]));
}

template <class T>
void select(const void* const* operands, void* out_raw, int64_t n) {
  const auto* cond = static_cast<const uint8_t*>(operands[0]);
  const auto* a = static_cast<const Stored<T>*>(operands[1]);
  const auto* b = static_cast<const Stored<T>*>(operands[2]);
  auto* out = static_cast<Stored<T>*>(out_raw);
  for (int64_t i = 0; i < n; ++i) out[i] = cond[i] ? a[i] : b[i];
}

template <class From, class To>
void cast(const void* const* operands, void* out_raw, int64_t n) {
  const auto* a = static_cast<const Stored<From>*>(operands[0]);
  auto* out = static_cast<Stored<To>*>(out_raw);
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<Stored<To>>(sem::convert<To, From>(static_cast<From>(a[i])));
}

/// rand and randn over a block of lanes, each lane's counter its own: the cipher's rounds run
/// across the lanes (vectorised), then Box-Muller's log and cos through libmvec, as in
/// compiled loops.
template <bool normal, class T>
void random(uint64_t seed, const int64_t* counters, void* out_raw, int64_t n) {
  namespace philox = ir::philox;
  constexpr int64_t kLanes = 256;
  T* out = static_cast<T*>(out_raw);
  for (int64_t at = 0; at < n; at += kLanes) {
    const int64_t m = std::min(kLanes, n - at);
    uint32_t c0[kLanes], c1[kLanes], c2[kLanes] = {}, c3[kLanes] = {};
    for (int64_t i = 0; i < m; ++i) {
      c0[i] = static_cast<uint32_t>(counters[at + i]);
      c1[i] = static_cast<uint32_t>(static_cast<uint64_t>(counters[at + i]) >> 32);
    }
    uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
    for (int r = 0; r < philox::kRounds; ++r, k0 += philox::kWeyl0, k1 += philox::kWeyl1) {
      for (int64_t i = 0; i < m; ++i) philox::round(c0[i], c1[i], c2[i], c3[i], k0, k1);
    }
    T* o = out + at;
    if constexpr (!normal) {
      for (int64_t i = 0; i < m; ++i) o[i] = philox::uniform<T>(philox::Block{{c0[i], c1[i], c2[i], c3[i]}});
    } else {
      T angle[kLanes];
      for (int64_t i = 0; i < m; ++i) {
        philox::normal_uniforms(philox::Block{{c0[i], c1[i], c2[i], c3[i]}}, o[i], angle[i]);
        angle[i] = philox::normal_angle(angle[i]);
      }
      vec_log(o, o, m);
      vec_cos(angle, angle, m);
      for (int64_t i = 0; i < m; ++i) o[i] = std::sqrt(T(-2) * o[i]) * angle[i];
    }
  }
}

// ---- folds -----------------------------------------------------------------------------

/// maximum or minimum as sem::nan_max and sem::nan_min: a NaN wins as a quiet NaN, +0 is
/// greater than -0. Written here, with internal linkage and inlined, so that each ISA's fold
/// compiles its own: a call of the header's template goes to one copy that the linker keeps
/// for every ISA's code, compiled for whichever ISA it chose, one call per element.
template <OpKind op, class T>
[[gnu::always_inline]] inline T extremum(T a, T b) {
  constexpr bool max = op == OpKind::Maximum;
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<T>::quiet_NaN();
    if (a == b) return max == std::signbit(a) ? b : a;
  }
  if constexpr (max) return a < b ? b : a;
  else return b < a ? b : a;
}

/// n lanes of T as one GCC vector (the ISA's registers, as many as it takes), and the
/// integer vector of its comparisons.
template <class T, int n>
using Lanes [[gnu::vector_size(n * sizeof(T))]] = T;
template <class T, int n>
using LaneMask [[gnu::vector_size(n * sizeof(T))]] = std::conditional_t<sizeof(T) == 4, int32_t, int64_t>;

/// extremum<op> lane by lane, branch-free: the ordered choice, equal values (+0 and -0) by
/// their bits (maximum: the AND, +0 unless both are -0; minimum: the OR), a NaN in either
/// lane a quiet NaN.
template <OpKind op, class T, int n>
[[gnu::always_inline]] inline Lanes<T, n> extremum_lanes(Lanes<T, n> a, Lanes<T, n> b) {
  using M = LaneMask<T, n>;
  const auto ua = reinterpret_cast<M>(a), ub = reinterpret_cast<M>(b);
  Lanes<T, n> r = op == OpKind::Maximum ? (a < b ? b : a) : (b < a ? b : a);
  r = a == b ? reinterpret_cast<Lanes<T, n>>(op == OpKind::Maximum ? ua & ub : ua | ub) : r;
  const Lanes<T, n> nan = Lanes<T, n>{} + std::numeric_limits<T>::quiet_NaN();
  return (a != a) | (b != b) ? nan : r;
}

/// The kFoldLanes lanes of a fold combined in halves (lane j with lane j + width, width
/// kFoldLanes / 2 down to 1), in registers: lane 0 of the result.
template <class T, int n, class Combine>
[[gnu::always_inline]] inline T halves(Lanes<T, n> lanes, const Combine& combine) {
  if constexpr (n == 1) {
    return lanes[0];
  } else {
    // (Shuffles, not copies through memory: a 64-byte store read back as two halves stalls
    // on store forwarding, one stall per step.)
    const auto half = [&]<size_t... i>(std::index_sequence<i...>, auto from) {
      return Lanes<T, n / 2>(__builtin_shufflevector(lanes, lanes, (decltype(from)::value + i)...));
    };
    const Lanes<T, n / 2> low = half(std::make_index_sequence<n / 2>(), std::integral_constant<size_t, 0>());
    const Lanes<T, n / 2> high = half(std::make_index_sequence<n / 2>(), std::integral_constant<size_t, n / 2>());
    return halves<T, n / 2>(combine(low, high), combine);
  }
}

template <OpKind op, class T>
void fold(const void* values_raw, int64_t n, void* accumulator) {
  const auto* values = static_cast<const Stored<T>*>(values_raw);
  const auto combine = [](T a, T b) {
    if constexpr (op == OpKind::Maximum || op == OpKind::Minimum) {
      return extremum<op, T>(a, b);
    } else {
      const T x[2] = {a, b};
      return sem::apply_same<T>(op, x);
    }
  };
  T acc = get<T>(accumulator, 0);
  if constexpr (op == OpKind::Add && std::is_floating_point_v<T>) {
    // Element i into lane i % kFoldLanes (the tail into the first lanes), the lanes then in
    // halves: tier 0's order (compiled code's is its vectoriser's: docs/semantics.md).
    using V = Lanes<T, kFoldLanes>;
    V lanes{};
    int64_t i = 0;
    for (; i + kFoldLanes <= n; i += kFoldLanes) {
      V x;
      std::memcpy(&x, values + i, sizeof x);
      lanes += x;
    }
    // The tail with +0 in the lanes past it: exact, since a lane that starts at +0 is never
    // -0 (x + y is -0 only where both are).
    if (i < n) {
      V tail{};
      for (int j = 0; i + j < n; ++j) tail[j] = values[i + j];
      lanes += tail;
    }
    acc += halves<T, kFoldLanes>(lanes, [](auto a, auto b) { return a + b; });
  } else if constexpr ((op == OpKind::Maximum || op == OpKind::Minimum) && std::is_floating_point_v<T>) {
    // maximum and minimum are commutative and associative, to the bit (a NaN wins as the
    // same quiet NaN, +0 beats -0 for maximum): the block's maxima kept in lanes and then
    // combined are the in-order result, without one compare waiting on the last.
    using V = Lanes<T, kFoldLanes>;
    V lanes;
    for (int j = 0; j < kFoldLanes; ++j) lanes[j] = acc;  // (not V{} + acc: +0 + -0 is +0)
    int64_t i = 0;
    for (; i + kFoldLanes <= n; i += kFoldLanes) {
      V x;
      std::memcpy(&x, values + i, sizeof x);
      lanes = extremum_lanes<op, T, kFoldLanes>(lanes, x);
    }
    for (; i < n; ++i) acc = combine(acc, static_cast<T>(values[i]));
    acc = combine(acc, halves<T, kFoldLanes>(lanes, [](auto a, auto b) {
      constexpr int width = sizeof(a) / sizeof(T);
      return extremum_lanes<op, T, width>(a, b);
    }));
  } else if constexpr (op == OpKind::Maximum || op == OpKind::Minimum) {
    T lanes[kFoldLanes];
    for (T& lane : lanes) lane = acc;
    int64_t i = 0;
    for (; i + kFoldLanes <= n; i += kFoldLanes) {
      for (int j = 0; j < kFoldLanes; ++j) lanes[j] = combine(lanes[j], static_cast<T>(values[i + j]));
    }
    for (; i < n; ++i) acc = combine(acc, static_cast<T>(values[i]));
    for (int width = kFoldLanes / 2; width > 0; width /= 2) {
      for (int j = 0; j < width; ++j) lanes[j] = combine(lanes[j], lanes[j + width]);
    }
    acc = combine(acc, lanes[0]);
  } else {
    for (int64_t i = 0; i < n; ++i) acc = combine(acc, static_cast<T>(values[i]));
  }
  *static_cast<Stored<T>*>(accumulator) = static_cast<Stored<T>>(acc);
}

// ---- the micro-kernel ------------------------------------------------------------------

#if defined(__AVX512F__)
template <class T> struct Simd;
template <> struct Simd<float> {
  using V = __m512;
  static constexpr int kLanes = 16;
  static V zero() { return _mm512_setzero_ps(); }
  static V splat(float a) { return _mm512_set1_ps(a); }
  static V load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, V v) { _mm512_storeu_ps(p, v); }
  static V fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
};
template <> struct Simd<double> {
  using V = __m512d;
  static constexpr int kLanes = 8;
  static V zero() { return _mm512_setzero_pd(); }
  static V splat(double a) { return _mm512_set1_pd(a); }
  static V load(const double* p) { return _mm512_loadu_pd(p); }
  static void store(double* p, V v) { _mm512_storeu_pd(p, v); }
  static V fma(V a, V b, V c) { return _mm512_fmadd_pd(a, b, c); }
};
#elif defined(__AVX2__) && defined(__FMA__)
template <class T> struct Simd;
template <> struct Simd<float> {
  using V = __m256;
  static constexpr int kLanes = 8;
  static V zero() { return _mm256_setzero_ps(); }
  static V splat(float a) { return _mm256_set1_ps(a); }
  static V load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, V v) { _mm256_storeu_ps(p, v); }
  static V fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
};
template <> struct Simd<double> {
  using V = __m256d;
  static constexpr int kLanes = 4;
  static V zero() { return _mm256_setzero_pd(); }
  static V splat(double a) { return _mm256_set1_pd(a); }
  static V load(const double* p) { return _mm256_loadu_pd(p); }
  static void store(double* p, V v) { _mm256_storeu_pd(p, v); }
  static V fma(V a, V b, V c) { return _mm256_fmadd_pd(a, b, c); }
};
#endif

/// One group of kGroup vectors of columns of the tile, all of K, accumulators in registers:
/// tile[r][j] for j in [col, col + kGroup * lanes), kk ascending, one fused multiply-add each.
/// A's MR elements of step kk are rows[r][kk * step]: a packed panel's column (step MR), or
/// each row where it lies (step 1). The row pointers are set once, outside the loop over K.
template <class T, class S, int kMr, int kNr, int kGroup, int64_t kStep>
inline void micro_group(const T* const (&rows)[kMr], const T* b, int64_t k, int col, T* tile) {
  using V = typename S::V;
  V acc[kMr][kGroup];
#pragma GCC unroll 8
  for (int r = 0; r < kMr; ++r) {
#pragma GCC unroll 8
    for (int g = 0; g < kGroup; ++g) acc[r][g] = S::zero();
  }
  for (int64_t kk = 0; kk < k; ++kk) {
    V bv[kGroup];
#pragma GCC unroll 8
    for (int g = 0; g < kGroup; ++g) bv[g] = S::load(b + kk * kNr + col + g * S::kLanes);
#pragma GCC unroll 8
    for (int r = 0; r < kMr; ++r) {
      const V av = S::splat(rows[r][kk * kStep]);
#pragma GCC unroll 8
      for (int g = 0; g < kGroup; ++g) acc[r][g] = S::fma(av, bv[g], acc[r][g]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < kMr; ++r) {
#pragma GCC unroll 8
    for (int g = 0; g < kGroup; ++g) S::store(tile + r * kNr + col + g * S::kLanes, acc[r][g]);
  }
}

template <class T>
void micro_kernel(const void* a_raw, const int64_t* a_rows, bool packed_a, const void* b_raw, int64_t b_base,
                  int64_t k, void* tile_raw) {
  const lowering::MatmulTiling tiling = lowering::matmul_tiling(sizeof(T));
  constexpr int kMr = 6, kNr = 128 / sizeof(T);
  if (tiling.mr != kMr || tiling.nr != kNr) __builtin_trap();  // the tiling and this code agree
  const T* a = static_cast<const T*>(a_raw);
  const T* b = static_cast<const T*>(b_raw) + b_base;
  T* tile = static_cast<T*>(tile_raw);
#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
  if constexpr (std::is_floating_point_v<T>) {
    using S = Simd<T>;
    constexpr int kGroup = 2;  // twelve accumulators: within 16 vector registers
    const T* rows[kMr];
    for (int r = 0; r < kMr; ++r) rows[r] = packed_a ? a + a_rows[0] + r : a + a_rows[r];
    for (int col = 0; col < kNr; col += kGroup * S::kLanes) {
      if (packed_a) micro_group<T, S, kMr, kNr, kGroup, kMr>(rows, b, k, col, tile);
      else micro_group<T, S, kMr, kNr, kGroup, 1>(rows, b, k, col, tile);
    }
    return;
  }
#endif
  T acc[kMr][kNr] = {};
  for (int64_t kk = 0; kk < k; ++kk) {
    for (int r = 0; r < kMr; ++r) {
      const T av = packed_a ? a[a_rows[0] + kk * kMr + r] : a[a_rows[r] + kk];
      for (int j = 0; j < kNr; ++j) {
        if constexpr (std::is_floating_point_v<T>) acc[r][j] = std::fma(av, b[kk * kNr + j], acc[r][j]);
        else acc[r][j] = sem::wrap_add(sem::wrap_mul(av, b[kk * kNr + j]), acc[r][j]);
      }
    }
  }
  std::memcpy(tile, acc, sizeof acc);
}

// ---- the table -------------------------------------------------------------------------

template <DType D>
void fill_dtype(BlockTable& t) {
  using T = ComputeOf<D>;
  constexpr int d = static_cast<int>(D);
#define LAZYJIT_OP(Name, text, arity, rule, admits, kind)                                              \
  if constexpr (ir::DTypeRule::rule == ir::DTypeRule::Same && ir::AccessPattern::kind == ir::AccessPattern::Elementwise) { \
    constexpr bool ok = ir::Admits::admits == ir::Admits::All ||                                      \
                        (ir::Admits::admits == ir::Admits::Numeric && D != DType::Bool) ||            \
                        (ir::Admits::admits == ir::Admits::Floating && std::is_floating_point_v<T>) || \
                        (ir::Admits::admits == ir::Admits::Bool && D == DType::Bool) ||               \
                        (ir::Admits::admits == ir::Admits::Integral && !std::is_floating_point_v<T>); \
    if constexpr (ok) t.same[static_cast<int>(OpKind::Name)][d] = &same<OpKind::Name, T, (arity)>;   \
    if constexpr (ok && (arity) == 2 && !(std::is_floating_point_v<T> && ir::calls_math(OpKind::Name))) { \
      t.same_with_scalar[0][static_cast<int>(OpKind::Name)][d] = &same_with_scalar<OpKind::Name, T, 0>; \
      t.same_with_scalar[1][static_cast<int>(OpKind::Name)][d] = &same_with_scalar<OpKind::Name, T, 1>; \
    }                                                                                                 \
  }                                                                                                   \
  if constexpr (ir::DTypeRule::rule == ir::DTypeRule::Compare) {                                      \
    t.compare[static_cast<int>(OpKind::Name)][d] = &compare<OpKind::Name, T>;                        \
  }
#include "ir/ops.def"
  t.select[d] = &select<T>;
  t.cast[d][static_cast<int>(DType::Bool)] = &cast<T, bool>;
  t.cast[d][static_cast<int>(DType::Int32)] = &cast<T, int32_t>;
  t.cast[d][static_cast<int>(DType::Int64)] = &cast<T, int64_t>;
  t.cast[d][static_cast<int>(DType::Float32)] = &cast<T, float>;
  t.cast[d][static_cast<int>(DType::Float64)] = &cast<T, double>;
#define LAZYJIT_OP(Name, text, arity, rule, admits, access)
#define LAZYJIT_FOLD(Name, combine, start) t.fold[static_cast<int>(OpKind::combine)][d] = &fold<OpKind::combine, T>;
#include "ir/ops.def"
  if constexpr (D != DType::Bool) t.matmul[d] = &micro_kernel<T>;
}

// ---- rows of a copy nest --------------------------------------------------------------

/// One row of W <= bytes bytes in W-byte moves, the last one overlapping the one before
/// where the row is not a multiple of W bytes.
template <int64_t W>
inline void copy_row(std::byte* out, const std::byte* in, int64_t bytes) {
  const std::byte* const last = in + bytes - W;
  for (; in < last; in += W, out += W) std::memcpy(out, in, W);
  std::memcpy(out - (in - last), last, W);
}

void copy_rows(std::byte* out, int64_t out_row, const std::byte* in, int64_t in_row, int64_t rows, int64_t bytes) {
#if defined(__AVX512F__)
  constexpr int64_t kWidest = 64;
#elif defined(__AVX2__)
  constexpr int64_t kWidest = 32;
#else
  constexpr int64_t kWidest = 16;
#endif
  for (int64_t r = 0; r < rows; ++r, out += out_row, in += in_row) {
    if (bytes >= kWidest) copy_row<kWidest>(out, in, bytes);
    else copy_row<16>(out, in, bytes);
  }
}

}  // namespace

void LAZYJIT_TIER0_FILL(BlockTable& table) {
  fill_dtype<DType::Bool>(table);
  fill_dtype<DType::Int32>(table);
  fill_dtype<DType::Int64>(table);
  fill_dtype<DType::Float32>(table);
  fill_dtype<DType::Float64>(table);
  table.random[0][0] = &random<false, float>;
  table.random[0][1] = &random<false, double>;
  table.random[1][0] = &random<true, float>;
  table.random[1][1] = &random<true, double>;
  table.copy_rows = &copy_rows;
}

}  // namespace lazyjit::runtime::tier0

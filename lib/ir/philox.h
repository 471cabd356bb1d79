// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11): the
// counter-based generator of rand and randn. Element i of a random tensor is a function of
// (seed, i) alone, so values do not depend on threads, grain or fusion. The reference
// interpreter and tier 0 use these functions; compiled code emits the same arithmetic
// (codegen/philox_llvm.cpp).
#pragma once

#include <cmath>
#include <cstdint>

namespace lazyjit::ir::philox {

inline constexpr uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
inline constexpr uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;
inline constexpr int kRounds = 10;

struct Block {
  uint32_t w[4];
};

/// One round of the cipher over a block's words under the round's key (k0, k1). Always
/// inlined: tier 0 runs it over a block of lanes in its own vector ISA's code.
[[gnu::always_inline]] inline void round(uint32_t& c0, uint32_t& c1, uint32_t& c2, uint32_t& c3, uint32_t k0,
                                         uint32_t k1) {
  const uint64_t p0 = static_cast<uint64_t>(kMul0) * c0;
  const uint64_t p1 = static_cast<uint64_t>(kMul1) * c2;
  const uint32_t n0 = static_cast<uint32_t>(p1 >> 32) ^ c1 ^ k0;
  const uint32_t n2 = static_cast<uint32_t>(p0 >> 32) ^ c3 ^ k1;
  c1 = static_cast<uint32_t>(p1);
  c3 = static_cast<uint32_t>(p0);
  c0 = n0;
  c2 = n2;
}

/// The four words for counter `index` under key `seed`.
[[gnu::always_inline]] inline Block generate(uint64_t seed, uint64_t index) {
  uint32_t c0 = static_cast<uint32_t>(index), c1 = static_cast<uint32_t>(index >> 32), c2 = 0, c3 = 0;
  uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
  for (int r = 0; r < kRounds; ++r, k0 += kWeyl0, k1 += kWeyl1) round(c0, c1, c2, c3, k0, k1);
  return {{c0, c1, c2, c3}};
}

/// A uniform value in [0, 1): 24 random bits for float, 53 for double.
template <class T>
[[gnu::always_inline]] inline T uniform(const Block& b) {
  if constexpr (sizeof(T) == 4) {
    return static_cast<T>(b.w[0] >> 8) * static_cast<T>(0x1p-24);
  } else {
    const uint64_t bits = (static_cast<uint64_t>(b.w[0]) << 32 | b.w[1]) >> 11;
    return static_cast<T>(bits) * static_cast<T>(0x1p-53);
  }
}

/// Box-Muller's two uniform values: u1 in (0, 1] (its log is finite) and u2 in [0, 1).
template <class T>
[[gnu::always_inline]] inline void normal_uniforms(const Block& b, T& u1, T& u2) {
  if constexpr (sizeof(T) == 4) {
    u1 = static_cast<T>((b.w[0] >> 8) + 1) * static_cast<T>(0x1p-24);
    u2 = static_cast<T>(b.w[1] >> 8) * static_cast<T>(0x1p-24);
  } else {
    u1 = static_cast<T>(((static_cast<uint64_t>(b.w[0]) << 32 | b.w[1]) >> 11) + 1) * static_cast<T>(0x1p-53);
    u2 = static_cast<T>((static_cast<uint64_t>(b.w[2]) << 32 | b.w[3]) >> 11) * static_cast<T>(0x1p-53);
  }
}

/// Box-Muller's angle, 2 pi u2, rounded to T.
template <class T>
[[gnu::always_inline]] inline T normal_angle(T u2) {
  return static_cast<T>(6.283185307179586) * u2;
}

/// A standard normal value (Box-Muller, cosine branch), computed in T:
/// sqrt(-2 log u1) cos(2 pi u2).
template <class T>
T normal(const Block& b) {
  T u1, u2;
  normal_uniforms(b, u1, u2);
  const T radius = std::sqrt(static_cast<T>(-2) * std::log(u1));
  return radius * std::cos(normal_angle(u2));
}

}  // namespace lazyjit::ir::philox

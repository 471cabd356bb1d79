// Random arguments for fuzz calls: dtypes, shapes, dims, numbers and element values (with
// the special values where implementations part ways), and their C++ spelling.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "fmt/format.h"
#include "fmt/ranges.h"
#include "number.h"
#include "oracle.h"
#include "program.h"

namespace lazyjit::fuzz {

inline DType random_dtype(Rng& r) {
  return r.pick({DType::Bool, DType::Int32, DType::Int64, DType::Float32, DType::Float64});
}

inline int64_t random_size(Rng& r) {
  const int64_t roll = r.range(0, 99);
  return roll < 4 ? 0 : roll < 30 ? 1 : roll < 85 ? r.range(2, 5) : r.range(6, 9);
}

inline Dims random_shape(Rng& r) {
  const int64_t roll = r.range(0, 99);
  const int64_t rank = roll < 10 ? 0 : roll < 35 ? 1 : roll < 70 ? 2 : roll < 90 ? 3 : 4;
  Dims shape;
  for (int64_t d = 0; d < rank; ++d) shape.push_back(random_size(r));
  return shape;
}

/// A shape that broadcasts with `s`: some dims 1, maybe fewer leading dims or one more.
inline Dims compatible_shape(Rng& r, const Dims& s) {
  const size_t drop = r.chance(0.3) ? static_cast<size_t>(r.range(0, static_cast<int64_t>(s.size()))) : 0;
  Dims out;
  for (size_t i = drop; i < s.size(); ++i) out.push_back(r.chance(0.25) ? 1 : s[i]);
  if (out.size() < 4 && r.chance(0.1)) out.insert(out.begin(), r.range(1, 3));
  return out;
}

/// Sizes the documentation rejects or that no machine holds: negative, past rank 64, huge.
inline Dims unusual_shape(Rng& r, Dims shape) {
  switch (r.range(0, 3)) {
    case 0: shape.push_back(-r.range(1, 3)); return shape;
    case 1: return Dims(static_cast<size_t>(r.pick<int64_t>({63, 64, 65})), 1);
    case 2: return {int64_t{1} << 24, int64_t{1} << 24};
    default: return {int64_t{1} << 40, int64_t{1} << 40};
  }
}

inline Dims maybe_unusual_shape(Rng& r) {
  Dims shape = random_shape(r);
  return r.chance(0.06) ? unusual_shape(r, shape) : shape;
}

/// A dim argument for a tensor of `rank`: mostly in range (rank 0 takes -1 and 0).
inline int64_t random_dim(Rng& r, int64_t rank) {
  const int64_t n = std::max<int64_t>(rank, 1);
  if (r.chance(0.88)) return r.range(-n, n - 1);
  return r.pick<int64_t>({n, -n - 1, n + 2, 64, -65, std::numeric_limits<int64_t>::max(),
                          std::numeric_limits<int64_t>::min()});
}

/// Dims to reduce: none (all), or up to three, which may repeat or be out of range.
inline Dims random_dim_list(Rng& r, int64_t rank) {
  Dims dims;
  const int64_t count = r.range(0, std::min<int64_t>(std::max<int64_t>(rank, 1), 3));
  for (int64_t i = 0; i < count; ++i) dims.push_back(random_dim(r, rank));
  return dims;
}

inline Number special_number(Rng& r) {
  using L = std::numeric_limits<double>;
  if (r.chance(0.4)) {
    return Number::int64(r.pick<int64_t>({2147483647, -2147483648LL, 2147483648LL, -2147483649LL, 3000000000LL,
                                          int64_t{1} << 53, std::numeric_limits<int64_t>::max(),
                                          std::numeric_limits<int64_t>::min()}));
  }
  if (r.chance(0.1)) return Number::uint64(r.pick<uint64_t>({4000000000u, uint64_t{1} << 63, ~uint64_t{0}}));
  if (r.chance(0.2)) return Number::float32(r.pick({3.4e38f, std::numeric_limits<float>::infinity(), 1e-45f}));
  return Number::float64(r.pick({L::infinity(), -L::infinity(), L::quiet_NaN(), -0.0, 1e30, 1e39, -1e39, L::max(),
                                 L::denorm_min(), 9.2233720368547758e18, -9.2233720368547758e18, 2147483648.0,
                                 -2147483649.0, 1e300}));
}

inline Number random_number(Rng& r) {
  const int64_t roll = r.range(0, 99);
  if (roll < 8) return Number::boolean(r.chance(0.5));
  if (roll < 40) return Number::int64(r.range(-3, 5));
  if (roll < 45) return Number::uint64(static_cast<uint64_t>(r.range(0, 9)));
  if (roll < 75) return Number::float64(r.pick({0.5, -1.5, 2.0, 0.25, -3.0, 1e-3, 3.0}));
  if (roll < 85) return Number::float32(r.pick({0.5f, -2.5f, 1.25f}));
  return special_number(r);
}

template <class T>
T special_value(Rng& r) {
  using L = std::numeric_limits<T>;
  if constexpr (std::is_same_v<T, bool>) {
    return r.chance(0.5);
  } else if constexpr (std::is_integral_v<T>) {
    return r.pick<T>({L::min(), L::max(), T(L::min() + 1), T(L::max() - 1), 0, -1, 1});
  } else {
    return r.pick<T>({T(0), -T(0), T(1), T(-1), L::infinity(), -L::infinity(), L::quiet_NaN(), L::max(),
                      L::lowest(), L::denorm_min(), T(1e10), T(-1e10), T(9.2233720368547758e18), T(2147483648.0)});
  }
}

/// Elements of a new tensor: small values (for floats, often multiples of 1/4, which ties
/// and exact sums like), and in a quarter of the tensors some special values.
template <class T>
std::vector<T> random_values(Rng& r, int64_t n) {
  const bool specials = r.chance(0.25), quarters = r.chance(0.5);
  std::vector<T> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    if (specials && r.chance(0.2)) {
      v[i] = special_value<T>(r);
    } else if constexpr (std::is_same_v<T, bool>) {
      v[i] = r.chance(0.5);
    } else if constexpr (std::is_integral_v<T>) {
      v[i] = static_cast<T>(r.range(-5, 5));
    } else {
      const double x = r.real(-4, 4);
      v[i] = static_cast<T>(quarters ? std::round(x * 4) / 4 : x);
    }
  }
  return v;
}

// ---- C++ spelling

inline std::string dims_text(const Dims& dims) { return fmt::format("{{{}}}", fmt::join(dims, ", ")); }

inline std::string dtype_text(DType d) {
  switch (d) {
    case DType::Bool: return "DType::Bool";
    case DType::Int32: return "DType::Int32";
    case DType::Int64: return "DType::Int64";
    case DType::Float32: return "DType::Float32";
    case DType::Float64: return "DType::Float64";
  }
  return "?";
}

template <class T>
const char* cpp_type() {
  if constexpr (std::is_same_v<T, bool>) return "bool";
  if constexpr (std::is_same_v<T, int32_t>) return "int32_t";
  if constexpr (std::is_same_v<T, int64_t>) return "int64_t";
  if constexpr (std::is_same_v<T, float>) return "float";
  return "double";
}

template <class T>
std::string literal(T v) {
  if constexpr (std::is_same_v<T, bool>) return v ? "true" : "false";
  if constexpr (std::is_same_v<T, int64_t>) return v == std::numeric_limits<int64_t>::min() ? "INT64_MIN" : fmt::format("{}", v);
  if constexpr (std::is_same_v<T, int32_t>) return fmt::format("{}", v);
  if constexpr (std::is_floating_point_v<T>) return Number::real_text(v, std::is_same_v<T, float> ? "f" : "");
  return "";
}

/// "{1.5f, -2.0f}"; past 128 elements the rest is elided (the seed reproduces them).
template <class T>
std::string values_text(const std::vector<T>& v) {
  std::string text = "{";
  for (size_t i = 0; i < v.size() && i < 128; ++i) text += (i ? ", " : "") + literal<T>(v[i]);
  if (v.size() > 128) text += fmt::format(", /* {} more */", v.size() - 128);
  return text + "}";
}

}  // namespace lazyjit::fuzz

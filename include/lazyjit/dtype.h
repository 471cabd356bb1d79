// Element types of lazyjit tensors and their C++ counterparts.
#pragma once

#include <cstdint>
#include <string_view>

namespace lazyjit {

/// Element type of a tensor. Promotion follows PyTorch: Bool < Int32 < Int64 < Float32 < Float64.
enum class DType : uint8_t { Bool, Int32, Int64, Float32, Float64 };

inline constexpr int kNumDTypes = 5;

/// "bool", "int32", "int64", "float32", "float64".
std::string_view dtype_name(DType dtype);

/// Bytes per element (Bool is stored as one byte, 0 or 1, as in PyTorch).
constexpr int64_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::Bool: return 1;
    case DType::Int32: case DType::Float32: return 4;
    case DType::Int64: case DType::Float64: return 8;
  }
  return 0;
}

constexpr bool is_floating(DType dtype) { return dtype == DType::Float32 || dtype == DType::Float64; }
constexpr bool is_integral(DType dtype) { return dtype == DType::Int32 || dtype == DType::Int64; }

/// Maps a C++ element type to its DType: bool, int32_t, int64_t, float, double.
template <class T> struct dtype_of;
template <> struct dtype_of<bool> { static constexpr DType value = DType::Bool; };
template <> struct dtype_of<int32_t> { static constexpr DType value = DType::Int32; };
template <> struct dtype_of<int64_t> { static constexpr DType value = DType::Int64; };
template <> struct dtype_of<float> { static constexpr DType value = DType::Float32; };
template <> struct dtype_of<double> { static constexpr DType value = DType::Float64; };
template <class T> inline constexpr DType dtype_of_v = dtype_of<T>::value;

}  // namespace lazyjit

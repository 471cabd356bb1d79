// Calls a generic lambda with a value of the C++ type that computes on a DType.
#pragma once

#include <cstdint>

#include "lazyjit/dtype.h"

namespace lazyjit::ir {

/// Storage type of a dtype's elements (bool is one byte).
template <DType D> struct StorageOf;
template <> struct StorageOf<DType::Bool> { using type = uint8_t; };
template <> struct StorageOf<DType::Int32> { using type = int32_t; };
template <> struct StorageOf<DType::Int64> { using type = int64_t; };
template <> struct StorageOf<DType::Float32> { using type = float; };
template <> struct StorageOf<DType::Float64> { using type = double; };

/// f(T{}) where T is the compute type of `dtype`: bool, int32_t, int64_t, float or double.
template <class F>
decltype(auto) dispatch_dtype(DType dtype, F&& f) {
  switch (dtype) {
    case DType::Bool: return f(bool{});
    case DType::Int32: return f(int32_t{});
    case DType::Int64: return f(int64_t{});
    case DType::Float32: return f(float{});
    case DType::Float64: return f(double{});
  }
  return f(bool{});
}

/// f(float{}) or f(double{}) for a floating dtype.
template <class F>
decltype(auto) dispatch_floating(DType dtype, F&& f) {
  return dtype == DType::Float64 ? f(double{}) : f(float{});
}

}  // namespace lazyjit::ir

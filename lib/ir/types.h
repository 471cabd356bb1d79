// Dtype promotion: PyTorch's rules for the five dtypes, and weak (C++ number) scalars.
#pragma once

#include "lazyjit/dtype.h"
#include "lazyjit/scalar.h"

namespace lazyjit::ir {

/// The common dtype of two tensors: the later of Bool < Int32 < Int64 < Float32 < Float64.
constexpr DType promote_types(DType a, DType b) { return a > b ? a : b; }

/// The dtype a C++ number takes when combined with a tensor of `tensor_dtype`: the tensor's
/// dtype unless the number is of a higher category (bool < integral < floating), in which
/// case the default dtype of the number's category (int64, float32), as in PyTorch.
constexpr DType weak_scalar_dtype(Scalar::Kind kind, DType tensor_dtype) {
  switch (kind) {
    case Scalar::Kind::Bool: return tensor_dtype;
    case Scalar::Kind::Integral: return tensor_dtype == DType::Bool ? DType::Int64 : tensor_dtype;
    case Scalar::Kind::Floating: return is_floating(tensor_dtype) ? tensor_dtype : DType::Float32;
  }
  return tensor_dtype;
}

}  // namespace lazyjit::ir

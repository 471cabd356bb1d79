// The tensor ops of lazyjit. Every op is traced, not run; see docs/semantics.md.
#pragma once

#include <cstdint>
#include <vector>

#include "lazyjit/dtype.h"
#include "lazyjit/scalar.h"
#include "lazyjit/tensor.h"

namespace lazyjit {

// Creation. Sizes are runtime values: the same program at another size does not recompile.
/// A tensor of `shape` filled with `value`.
Tensor full(std::vector<int64_t> shape, Scalar value, DType dtype = DType::Float32);
Tensor zeros(std::vector<int64_t> shape, DType dtype = DType::Float32);
Tensor ones(std::vector<int64_t> shape, DType dtype = DType::Float32);
/// 0, 1, ..., n-1.
Tensor arange(int64_t n, DType dtype = DType::Int64);

// Binary arithmetic with NumPy broadcasting and PyTorch type promotion.
// add/mul on bool are logical or/and; sub and pow reject bool; div is true division (ints
// give float32).
Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& a, Scalar b);
Tensor maximum(const Tensor& a, const Tensor& b);  ///< NaN-propagating
Tensor minimum(const Tensor& a, const Tensor& b);  ///< NaN-propagating

Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator+(const Tensor& a, Scalar b);
Tensor operator-(const Tensor& a, Scalar b);
Tensor operator*(const Tensor& a, Scalar b);
Tensor operator/(const Tensor& a, Scalar b);
Tensor operator+(Scalar a, const Tensor& b);
Tensor operator-(Scalar a, const Tensor& b);
Tensor operator*(Scalar a, const Tensor& b);
Tensor operator/(Scalar a, const Tensor& b);
Tensor operator-(const Tensor& a);

// Comparisons (result Bool) and logic (operands are true where nonzero).
Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
Tensor eq(const Tensor& a, Scalar b);
Tensor ne(const Tensor& a, Scalar b);
Tensor lt(const Tensor& a, Scalar b);
Tensor le(const Tensor& a, Scalar b);
Tensor gt(const Tensor& a, Scalar b);
Tensor ge(const Tensor& a, Scalar b);
Tensor logical_and(const Tensor& a, const Tensor& b);
Tensor logical_or(const Tensor& a, const Tensor& b);
Tensor logical_not(const Tensor& a);
/// cond ? a : b elementwise; `cond` must be Bool; a and b are promoted together.
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
Tensor where(const Tensor& cond, const Tensor& a, Scalar b);
Tensor where(const Tensor& cond, Scalar a, const Tensor& b);

// Unary. Transcendental ops promote integer and bool inputs to float32.
Tensor neg(const Tensor& t);
Tensor abs(const Tensor& t);
Tensor exp(const Tensor& t);
Tensor log(const Tensor& t);
Tensor sqrt(const Tensor& t);
Tensor rsqrt(const Tensor& t);
Tensor sin(const Tensor& t);
Tensor cos(const Tensor& t);
Tensor tanh(const Tensor& t);
Tensor sigmoid(const Tensor& t);
Tensor relu(const Tensor& t);
Tensor gelu(const Tensor& t);  ///< exact (erf) form, as PyTorch's default
/// min(max(t, lo), hi); NaN stays NaN; when lo > hi every element becomes hi (as PyTorch).
Tensor clamp(const Tensor& t, Scalar lo, Scalar hi);

}  // namespace lazyjit

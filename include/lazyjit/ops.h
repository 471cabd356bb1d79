// The tensor ops of lazyjit. Every op is traced, not run; see docs/semantics.md.
#pragma once

#include <cstdint>
#include <optional>
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
/// Uniform in [0, 1) and standard normal. Element i is a function of (seed, i) alone
/// (Philox4x32-10), computed inside the consuming kernel: the same values at any thread
/// count, run after run. The seed is a runtime value: a new seed does not recompile.
Tensor rand(std::vector<int64_t> shape, uint64_t seed, DType dtype = DType::Float32);
Tensor randn(std::vector<int64_t> shape, uint64_t seed, DType dtype = DType::Float32);

// Binary arithmetic with NumPy broadcasting and PyTorch type promotion.
// add/mul on bool are logical or/and; sub and pow reject bool; div is true division (ints
// give float32).
Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& a, Scalar b);
/// Floor division and the remainder with the divisor's sign, as PyTorch's floor_divide and
/// remainder (integers stay integers; an integer division by zero fails the run that finds
/// it, as an index out of range does).
Tensor floor_divide(const Tensor& a, const Tensor& b);
Tensor remainder(const Tensor& a, const Tensor& b);
Tensor floor_divide(const Tensor& a, Scalar b);
Tensor remainder(const Tensor& a, Scalar b);
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
/// Bitwise logic of integers (two's complement) and bool, operands promoted together as
/// PyTorch's; float operands are an error.
Tensor bitwise_and(const Tensor& a, const Tensor& b);
Tensor bitwise_or(const Tensor& a, const Tensor& b);
Tensor bitwise_xor(const Tensor& a, const Tensor& b);
Tensor bitwise_not(const Tensor& a);
/// cond ? a : b elementwise; `cond` must be Bool; a and b are promoted together.
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
Tensor where(const Tensor& cond, const Tensor& a, Scalar b);
Tensor where(const Tensor& cond, Scalar a, const Tensor& b);
/// `t` with `value` where `mask` (bool, broadcast to t's shape) is true.
Tensor masked_fill(const Tensor& t, const Tensor& mask, Scalar value);

// Unary. Transcendental ops promote integer and bool inputs to float32.
Tensor neg(const Tensor& t);
Tensor abs(const Tensor& t);
Tensor exp(const Tensor& t);
Tensor log(const Tensor& t);
Tensor log1p(const Tensor& t);  ///< log(1 + t), accurate near 0
Tensor expm1(const Tensor& t);  ///< exp(t) - 1, accurate near 0
Tensor sqrt(const Tensor& t);
Tensor rsqrt(const Tensor& t);
Tensor sin(const Tensor& t);
Tensor cos(const Tensor& t);
Tensor tanh(const Tensor& t);
Tensor sigmoid(const Tensor& t);
Tensor relu(const Tensor& t);
Tensor gelu(const Tensor& t);  ///< exact (erf) form, as PyTorch's default
Tensor erf(const Tensor& t);   ///< the error function
/// Rounding: floor, ceil and round (halves to even, as PyTorch) keep integer tensors as
/// they are. sign is -1, 0 or 1 (NaN gives 0). Their gradients are 0.
Tensor floor(const Tensor& t);
Tensor ceil(const Tensor& t);
Tensor round(const Tensor& t);
Tensor sign(const Tensor& t);
/// t * sigmoid(t).
Tensor silu(const Tensor& t);
/// log(1 + exp(beta * t)) / beta, and t itself where beta * t > threshold (as PyTorch).
Tensor softplus(const Tensor& t, double beta = 1.0, double threshold = 20.0);
/// min(max(t, lo), hi); NaN stays NaN; when lo > hi every element becomes hi (as PyTorch).
Tensor clamp(const Tensor& t, Scalar lo, Scalar hi);

// Reductions over `dims` (empty: every dim; negative dims count from the end). Without
// keepdim the reduced dims are removed. Bool and integer sums are int64; mean needs a float
// dtype; prod multiplies in index order (1 over nothing; bool and integers in int64);
// amax and amin propagate NaN and reject empty dims; any and all take elements as
// true where nonzero and give bool (false and true over nothing); argmax returns the first
// maximum (NaN counts as the maximum), as int64.
Tensor sum(const Tensor& t, std::vector<int64_t> dims = {}, bool keepdim = false);
Tensor prod(const Tensor& t, std::vector<int64_t> dims = {}, bool keepdim = false);
Tensor mean(const Tensor& t, std::vector<int64_t> dims = {}, bool keepdim = false);
Tensor amax(const Tensor& t, std::vector<int64_t> dims = {}, bool keepdim = false);
Tensor amin(const Tensor& t, std::vector<int64_t> dims = {}, bool keepdim = false);
Tensor any(const Tensor& t, std::vector<int64_t> dims = {}, bool keepdim = false);
Tensor all(const Tensor& t, std::vector<int64_t> dims = {}, bool keepdim = false);
Tensor argmax(const Tensor& t, int64_t dim, bool keepdim = false);
/// The first minimum's index (NaN counts as the minimum), as int64.
Tensor argmin(const Tensor& t, int64_t dim, bool keepdim = false);
/// The extremum along `dim` and its index: (amax, argmax) and (amin, argmin), as PyTorch's
/// max(dim) and min(dim).
struct ValuesIndices {
  Tensor values;
  Tensor indices;
};
ValuesIndices max(const Tensor& t, int64_t dim, bool keepdim = false);
ValuesIndices min(const Tensor& t, int64_t dim, bool keepdim = false);
/// The k largest elements along `dim` and their indices, largest first (NaN counts as the
/// largest; among equal values the first index comes first), as PyTorch's topk with
/// largest=true and sorted=true. For small k: k rounds of a fold over `dim`. The values are
/// gathered at the indices, so gradients flow to the elements picked.
ValuesIndices topk(const Tensor& t, int64_t k, int64_t dim = -1);
/// Variance and standard deviation over `dims` (empty: all), with Bessel's correction when
/// `unbiased` (fewer than two elements then give NaN); float dtypes only.
Tensor var(const Tensor& t, std::vector<int64_t> dims = {}, bool unbiased = true, bool keepdim = false);
Tensor std(const Tensor& t, std::vector<int64_t> dims = {}, bool unbiased = true, bool keepdim = false);

// Normalisation. softmax and log_softmax subtract the maximum first (no overflow).
// layer_norm normalises over the last `normalized_ndim` dims; `gamma` and `beta` (either
// may be undefined) have exactly those dims. Each runs as one kernel over rows when the
// normalised dims are the innermost ones.
Tensor softmax(const Tensor& t, int64_t dim);
Tensor log_softmax(const Tensor& t, int64_t dim);
Tensor layer_norm(const Tensor& x, int64_t normalized_ndim, const Tensor& gamma = Tensor(),
                  const Tensor& beta = Tensor(), double eps = 1e-5);

/// softmax(q @ k^T * scale) @ v over the last two dims, as PyTorch's
/// scaled_dot_product_attention: q is [..., L, E], k [..., S, E], v [..., S, Ev], batch dims
/// broadcast; `scale` defaults to 1 / sqrt(E) (0: the default); `is_causal` masks position j
/// from query i where j > i (the top-left aligned lower triangle). A composition of matmul,
/// softmax and where: the planner fuses what it can.
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, bool is_causal = false,
                                    double scale = 0.0);

/// Matrix product with NumPy/PyTorch rules: 1-D operands become a row (left) or a column
/// (right) vector and that dim is dropped from the result; batch dims broadcast. Float
/// products run a packed, register-blocked kernel that applies the elementwise consumers of
/// the result (bias, activation, residual) as it stores.
Tensor matmul(const Tensor& a, const Tensor& b);

// Views: no data moves unless it must; the consumer's loop reads through the index map.
/// Same elements, new dims; one dim may be -1 (inferred).
Tensor reshape(const Tensor& t, std::vector<int64_t> shape);
Tensor transpose(const Tensor& t, int64_t dim0, int64_t dim1);
/// Result dim d is dim dims[d] of `t`.
Tensor permute(const Tensor& t, std::vector<int64_t> dims);
/// The elements in reverse order along each of `dims` (negative dims count from the end).
Tensor flip(const Tensor& t, std::vector<int64_t> dims);
/// Broadcast to `shape` (new dims on the left; -1 keeps a dim).
Tensor expand(const Tensor& t, std::vector<int64_t> shape);
/// Elements start, start+step, ... before end along `dim` (Python slicing: negative start
/// and end count from the end, both are clamped to the dim; step must be positive).
Tensor slice(const Tensor& t, int64_t dim, int64_t start, int64_t end, int64_t step = 1);
/// The tensors one after another along `dim` (dtypes promote; other dims must agree).
Tensor cat(const std::vector<Tensor>& tensors, int64_t dim);
/// The slices of `t` along `dim` at `index` (int32 or int64, rank 0 or 1), in its order:
/// result[..., i, ...] = t[..., index[i], ...]. An index outside [0, size of dim) is an Error
/// at the materialisation that reads it (no tensor of that graph is assigned).
Tensor index_select(const Tensor& t, int64_t dim, const Tensor& index);
/// `t` along `dim` at `index` (int32 or int64, t's rank, no larger than t outside dim), of
/// index's shape: result[i][j][k] = t[index[i][j][k]][j][k] for dim 0. Indices out of range are
/// an Error when the graph runs, as for index_select.
Tensor gather(const Tensor& t, int64_t dim, const Tensor& index);
/// gather() after broadcasting `t` and `indices` against each other outside `dim`.
Tensor take_along_dim(const Tensor& t, const Tensor& indices, int64_t dim);
/// int64 indices.shape + [num_classes]: 1 at each element's index, 0 elsewhere. Indices
/// (int32 or int64) outside [0, num_classes) are an Error when the graph runs; unlike
/// PyTorch, num_classes must be given (-1 would make the shape depend on the data).
Tensor one_hot(const Tensor& indices, int64_t num_classes);
/// Rows of `weight` ([num_embeddings, dim]) at `indices` (int32 or int64, any shape): a tensor
/// of shape indices.shape + [dim].
Tensor embedding(const Tensor& weight, const Tensor& indices);
// Scans: parallel over the other dims, in index order along `dim`.
/// Running sum and product along `dim`: element i combines elements 0..i. Bool and integer
/// tensors give int64; float32 accumulates in float64 (as PyTorch on the CPU).
Tensor cumsum(const Tensor& t, int64_t dim);
Tensor cumprod(const Tensor& t, int64_t dim);

// Scatters: a copy of `t` with src's elements written at indices (int32 or int64) along
// `dim`, one after another in src's index order, so the result is the same for any thread
// count: adds sum repeated indices in that order, copies keep the last. `src` has t's dtype.
// An index outside [0, size of dim) is an Error at the materialisation that reads it.
/// src[i][j][k] goes to [index[i][j][k]][j][k] for dim 0 (index: src's rank, no larger than
/// src, nor than t outside dim), as PyTorch's scatter and scatter_add.
Tensor scatter(const Tensor& t, int64_t dim, const Tensor& index, const Tensor& src);
Tensor scatter_add(const Tensor& t, int64_t dim, const Tensor& index, const Tensor& src);
/// Slice i of src along `dim` goes to slice index[i] (index: rank 0 or 1; src: t's shape but
/// index's length along dim), times alpha, as PyTorch's index_add and index_copy.
Tensor index_add(const Tensor& t, int64_t dim, const Tensor& index, const Tensor& src, Scalar alpha = 1);
Tensor index_copy(const Tensor& t, int64_t dim, const Tensor& index, const Tensor& src);
/// PyTorch's t.index_put((index,), values, accumulate), t[index] = values: rows of t (dim 0)
/// at `index` (any shape; negative indices count from the end) from `values`, broadcast to
/// index.shape + t.shape[1:]; added when `accumulate`, else the last write wins. A bool
/// `index` is a mask over t's leading dims (its shape theirs): t[mask] = values, with values
/// broadcast to one selected row (t.shape[mask.rank():]), since the selection's size is data.
Tensor index_put(const Tensor& t, const Tensor& index, const Tensor& values, bool accumulate = false);
/// PyTorch's t.index_put((i0, i1, ...), values, accumulate), t[i0, i1, ...] = values: one
/// int32 or int64 index per leading dim of t, broadcast together to one shape B; element b of
/// them selects t[i0[b], i1[b], ...] (the dims after them whole), and values broadcast to
/// B + the rest of t's shape. Negative indices count from the end; an index out of range is
/// an Error naming its dim. One index is the overload above.
Tensor index_put(const Tensor& t, const std::vector<Tensor>& indices, const Tensor& values, bool accumulate = false);
// Convolution and pooling over NCHW (a rank-3 input is one unbatched image), PyTorch's
// argument conventions. A convolution is the packed matmul of the weights with a sliding-
// window view of the input that is read as it is packed, never stored (no im2col buffer),
// with the bias as the product's epilogue.
/// A pair (height, width); one number stands for both, as in PyTorch.
struct Size2 {
  int64_t h, w;
  Size2(int64_t both) : h(both), w(both) {}  // NOLINT: implicit, as PyTorch's int-or-pair
  Size2(int64_t h, int64_t w) : h(h), w(w) {}
};
/// x [N, C, H, W] and weight [O, C/groups, kh, kw] (one float dtype), bias [O] or undefined:
/// [N, O, OH, OW] with OH = (H + 2*padding - dilation*(kh-1) - 1) / stride + 1.
Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(), Size2 stride = 1,
              Size2 padding = 0, Size2 dilation = 1, int64_t groups = 1);
/// x [N, C, L] and weight [O, C/groups, k]: conv2d over a height of 1.
Tensor conv1d(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(), int64_t stride = 1,
              int64_t padding = 0, int64_t dilation = 1, int64_t groups = 1);
/// The maximum of each window (stride: the kernel size by default; padding at most half
/// the kernel, below every value); the gradient goes to the first maximum, as PyTorch's.
/// `ceil_mode`: PyTorch's, ceil((H + 2*padding - kh) / stride) + 1 rows (and likewise
/// columns), less the last if it would start past the input; a window hanging past the
/// padding pools what it covers.
Tensor max_pool2d(const Tensor& x, Size2 kernel_size, std::optional<Size2> stride = std::nullopt, Size2 padding = 0,
                  bool ceil_mode = false);
/// The mean of each window, counting the zero padding unless `count_include_pad` is false;
/// `ceil_mode` as max_pool2d's, where a window hanging past the padding divides by what it
/// covers of the input and (when counted) the padding, as PyTorch's.
Tensor avg_pool2d(const Tensor& x, Size2 kernel_size, std::optional<Size2> stride = std::nullopt, Size2 padding = 0,
                  bool count_include_pad = true, bool ceil_mode = false);
/// The mean of each of PyTorch's adaptive windows: output element (i, j) averages rows
/// floor(i*H/OH) to ceil((i+1)*H/OH) and likewise columns, so windows may differ in size and
/// overlap when the output size does not divide the input's (1x1 is global average pooling).
Tensor adaptive_avg_pool2d(const Tensor& x, Size2 output_size);
/// PyTorch's F.unfold: the sliding windows of x [N, C, H, W] as [N, C*kh*kw, OH*OW] (im2col).
Tensor unfold(const Tensor& x, Size2 kernel_size, Size2 dilation = 1, Size2 padding = 0, Size2 stride = 1);

/// Removes `dim` when its size is 1 (else returns `t` unchanged, as PyTorch).
Tensor squeeze(const Tensor& t, int64_t dim);
/// Inserts a dim of size 1 at `dim` (in [-rank-1, rank]).
Tensor unsqueeze(const Tensor& t, int64_t dim);

}  // namespace lazyjit

// The lazyjit compositions of aten ops that take more than a line (aten_compositions.cpp), and
// the helpers the table of aten_ops.cpp shares with them. Internal to frontends/torch.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string_view>
#include <utility>
#include <vector>

#include "lazyjit/ops.h"
#include "translate.h"

namespace lazyjit::ltc::aten {

using Results = std::vector<Tensor>;

Tensor cast(const Tensor& t, DType dtype);
/// The operands of an arithmetic op in the dtype PyTorch computes it in: the result's, as
/// LTC gives it (so that a float32 op with a Python number does not compute in float64), or
/// by the 0-dim rule when LTC gives none.
std::vector<Tensor> arith(const Call& c, std::initializer_list<std::string_view> names);
/// The operands of a comparison, by the 0-dim rule.
std::pair<Tensor, Tensor> compared(const Call& c);
/// `t` times the argument `name` (alpha, beta, value), skipped when that is the constant 1.
Tensor scaled(const Call& c, const Tensor& t, std::string_view name);
bool is_constant_one(const Call& c, std::string_view name);
Tensor times(const Call& c, const Tensor& t, std::string_view name);
/// Optional int[] dims (None or [] reduce everything, as PyTorch).
std::vector<int64_t> dims_of(const Call& c, std::string_view name = "dim");
bool keepdim(const Call& c);
Tensor with_dtype(const Call& c, Tensor t);
/// `t`, which must be floating: PyTorch's softmax has no integer kernel (eager raises), where
/// lazyjit's would compute in float32; an integer input falls back, to raise as eager does.
Tensor floating_input(const Call& c, Tensor t);
/// The vector-Jacobian product of a lazyjit composition: how backward ops with no simpler
/// form reuse lazyjit's autograd (each output of `forward` seeded with `grad`).
Results vjp(const Tensor& output, const std::vector<Tensor>& inputs, const Tensor& grad);
Results one(Tensor t);
template <Tensor (*F)(const Tensor&)>
Results unary(const Call& c) { return one(F(c.tensor("self"))); }
Results nll_loss_forward(const Call& c);
Results nll_loss_backward(const Call& c);
Results max_min(const Call& c, bool is_max);
Results arg_extremum(const Call& c, bool is_max);
/// var and std: `unbiased` (bool) or `correction` (0 or 1).
bool unbiased(const Call& c);
Results softmax_backward(const Call& c, bool log);
Results addmm_like(const Call& c, std::string_view a, std::string_view b);
/// squeeze without a dim: every dim of size 1 goes.
Tensor squeeze_all(const Tensor& t);
Results select(const Call& c);
/// self with the slice start:end:step of `dim` replaced by src (functionalised in-place
/// writes to a slice: x[:, 2:5] = y). Contiguous slices are a cat of three views.
Results slice_scatter(const Call& c);
/// tril and triu: the elements on or below (above) diagonal `k` of the last two dims.
Results triangle(const Call& c, bool lower);
/// constant_pad_nd: `pad` holds (before, after) pairs from the last dim backwards; negative
/// amounts crop.
Results constant_pad(const Call& c);
/// The p-norm over `dim` (all dims when empty). LTC passes p as a run-time value unless it
/// is 0 or 1, so every case is computed and the one p selects is kept.
Results p_norm(const Call& c);
/// The sum of the main diagonal of a matrix: its flat elements 0, cols + 1, 2 (cols + 1), ...
Results trace(const Call& c);
Tensor trunc_of(const Tensor& t);
Results repeat(const Call& c);
Results full_like_shape(const Call& c, const std::vector<int64_t>& shape, DType fallback);
/// A pair argument (kernel_size, stride, ...): one number stands for both, as in PyTorch.
Size2 pair(const Call& c, std::string_view name, Size2 fallback);
/// conv2d over PyTorch's `convolution` arguments; rank-3 inputs are conv1d.
Tensor convolution(const Call& c, const Tensor& input, const Tensor& weight, const Tensor& bias);
Results convolution_backward(const Call& c);
/// A dilated pooling falls back (ceil_mode is the core ops').
void check_pool_args(const Call& c);
Tensor max_pool(const Call& c, const Tensor& self);
/// The flat index (into H*W) of each window's first maximum, as max_pool2d_with_indices.
Tensor max_pool_indices(const Call& c, const Tensor& x, const Tensor& pooled);
Results embedding_dense_backward(const Call& c);
Results native_layer_norm(const Call& c);
Results native_layer_norm_backward(const Call& c);
/// The backward of batch norm (its forward is lazy ops: lazy_kernels.cpp), in training by the
/// statistics the forward saved, in evaluation by the running ones.
Results native_batch_norm_backward(const Call& c);
/// arange: element i is start + i * step, in double, then converted (as PyTorch). Bounds LTC
/// passes as run-time values are read as such, with the length LTC gives the result.
Results arange_of(const Call& c);
/// elu (alpha, scale, input_scale, as PyTorch) of `x`; log_sigmoid as min(x, 0) - log1p(e^-|x|);
/// smooth_l1_loss of self and target (beta 0: l1), before its reduction.
Tensor elu_of(const Call& c, const Tensor& x);
Tensor log_sigmoid_of(const Tensor& x);
/// x * clamp(x + 3, 0, 6) / 6.
Tensor hardswish_of(const Tensor& x);
/// glu: the first half of `dim` times the sigmoid of the second.
Tensor glu_of(const Tensor& x, int64_t dim);
/// upsample_nearest2d and upsample_bilinear2d of `x` [N, C, H, W] to the result's size, with
/// PyTorch's source indices and weights (float arithmetic, as its CPU kernels): gathers along
/// H and W of indices computed on the device, and for bilinear the two rows' and columns' lerp.
Tensor upsample_of(const Call& c, const Tensor& x, bool bilinear);
/// The backward of either: the vector-Jacobian product of upsample_of at zeros of input_size.
Results upsample_backward(const Call& c, bool bilinear);
/// roll: the elements shifted along each of `dims` (of the flattened tensor when none), as a
/// cat of two slices per dim.
Results roll(const Call& c);
Tensor smooth_l1_of(const Call& c, const Tensor& self);
/// `loss` reduced by the call's `reduction` (0 none, 1 mean, 2 sum).
Tensor reduced(const Call& c, const Tensor& loss);
Tensor gelu_of(const Call& c, const Tensor& x);
/// softplus with beta and threshold that may arrive at run time (as LTC passes them).
Tensor softplus_of(const Call& c, const Tensor& x);
/// clamp, clamp_min and clamp_max: self and its bounds in the result's dtype (an integer
/// tensor clamped by a float bound is a float tensor, as PyTorch promotes).
Tensor clamped(const Call& c);
Results identity(const Call& c);

}  // namespace lazyjit::ltc::aten

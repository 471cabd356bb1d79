// The table from aten op to lazyjit: one entry per op, a lambda over its schema's argument
// names, so that every overload of an op shares the entry; compositions longer than a line
// are in aten_compositions.cpp. Ops not here run the graph on the TorchScript executor
// (counted). Adding an op: docs/torch.md.
#include <cmath>
#include <limits>
#include <numbers>
#include <unordered_map>

#include "aten_compositions.h"
#include "lazyjit/ops.h"
#include "translate.h"

namespace lazyjit::ltc {
namespace {

using namespace aten;  // NOLINT: the table reads as a list of compositions

using Entry = std::pair<const char*, Lowering>;

// clang-format off
const Entry kTable[] = {
  // Arithmetic, computed in the result's dtype.
  {"aten::add", [](const Call& c) { auto v = arith(c, {"self", "other"}); return one(v[0] + times(c, v[1], "alpha")); }},
  {"aten::sub", [](const Call& c) { auto v = arith(c, {"self", "other"}); return one(v[0] - times(c, v[1], "alpha")); }},
  {"aten::rsub", [](const Call& c) { auto v = arith(c, {"self", "other"}); return one(v[1] - times(c, v[0], "alpha")); }},
  {"aten::mul", [](const Call& c) { auto v = arith(c, {"self", "other"}); return one(v[0] * v[1]); }},
  {"aten::div", [](const Call& c) {
     auto v = arith(c, {"self", "other"});
     if (!c.has("rounding_mode")) return one(v[0] / v[1]);
     if (c.string("rounding_mode") == "floor") return one(floor_divide(v[0], v[1]));
     if (!is_floating(v[0].dtype())) c.unsupported("integer division with rounding_mode 'trunc'");
     const Tensor q = v[0] / v[1];
     return one(where(lt(q, Scalar(0.0)), ceil(q), floor(q)));
   }},
  {"aten::pow", [](const Call& c) { auto v = arith(c, {"self", "exponent"}); return one(pow(v[0], v[1])); }},
  {"aten::remainder", [](const Call& c) { auto v = arith(c, {"self", "other"}); return one(remainder(v[0], v[1])); }},
  {"aten::floor_divide", [](const Call& c) { auto v = arith(c, {"self", "other"}); return one(floor_divide(v[0], v[1])); }},
  {"aten::maximum", [](const Call& c) { auto v = arith(c, {"self", "other"}); return one(maximum(v[0], v[1])); }},
  {"aten::minimum", [](const Call& c) { auto v = arith(c, {"self", "other"}); return one(minimum(v[0], v[1])); }},
  {"aten::addcmul", [](const Call& c) { auto v = arith(c, {"self", "tensor1", "tensor2"}); return one(v[0] + times(c, v[1], "value") * v[2]); }},
  {"aten::addcdiv", [](const Call& c) { auto v = arith(c, {"self", "tensor1", "tensor2"}); return one(v[0] + times(c, v[1], "value") / v[2]); }},
  {"aten::where", [](const Call& c) { auto v = arith(c, {"self", "other"}); return one(where(c.tensor("condition"), v[0], v[1])); }},
  {"aten::masked_fill", [](const Call& c) {
     const Tensor self = c.tensor("self");
     return one(where(c.tensor("mask"), cast(c.tensor("value"), self.dtype()), self));
   }},
  {"aten::reciprocal", [](const Call& c) { return one(Scalar(1.0) / c.tensor("self")); }},
  // Comparisons and logic.
  {"aten::eq", [](const Call& c) { auto [a, b] = compared(c); return one(eq(a, b)); }},
  {"aten::ne", [](const Call& c) { auto [a, b] = compared(c); return one(ne(a, b)); }},
  {"aten::lt", [](const Call& c) { auto [a, b] = compared(c); return one(lt(a, b)); }},
  {"aten::le", [](const Call& c) { auto [a, b] = compared(c); return one(le(a, b)); }},
  {"aten::gt", [](const Call& c) { auto [a, b] = compared(c); return one(gt(a, b)); }},
  {"aten::ge", [](const Call& c) { auto [a, b] = compared(c); return one(ge(a, b)); }},
  {"aten::logical_and", [](const Call& c) { return one(logical_and(c.tensor("self"), c.tensor("other"))); }},
  {"aten::logical_or", [](const Call& c) { return one(logical_or(c.tensor("self"), c.tensor("other"))); }},
  {"aten::logical_not", unary<logical_not>},
  {"aten::bitwise_and", [](const Call& c) { auto v = arith(c, {"self", "other"}); return one(bitwise_and(v[0], v[1])); }},
  {"aten::bitwise_or", [](const Call& c) { auto v = arith(c, {"self", "other"}); return one(bitwise_or(v[0], v[1])); }},
  {"aten::bitwise_xor", [](const Call& c) { auto v = arith(c, {"self", "other"}); return one(bitwise_xor(v[0], v[1])); }},
  {"aten::bitwise_not", unary<bitwise_not>},
  // Elementwise functions.
  {"aten::neg", unary<neg>}, {"aten::abs", unary<abs>}, {"aten::exp", unary<exp>}, {"aten::log", unary<log>},
  {"aten::log1p", unary<log1p>}, {"aten::expm1", unary<expm1>}, {"aten::sqrt", unary<sqrt>}, {"aten::rsqrt", unary<rsqrt>},
  {"aten::sin", unary<sin>}, {"aten::cos", unary<cos>}, {"aten::tanh", unary<tanh>}, {"aten::sigmoid", unary<sigmoid>},
  {"aten::relu", unary<relu>}, {"aten::erf", unary<erf>}, {"aten::floor", unary<floor>}, {"aten::ceil", unary<ceil>},
  {"aten::sign", unary<sign>}, {"aten::silu", unary<silu>},
  {"aten::trunc", [](const Call& c) { return one(trunc_of(c.tensor("self"))); }},
  {"aten::frac", [](const Call& c) { const Tensor t = c.tensor("self"); return one(t - trunc_of(t)); }},
  {"aten::sgn", unary<sign>},
  {"aten::log2", [](const Call& c) { return one(log(c.tensor("self")) * Scalar(1.0 / std::numbers::ln2)); }},
  {"aten::round", [](const Call& c) {
     if (c.has("decimals") && c.integer("decimals") != 0) c.unsupported("round with decimals");
     return one(round(c.tensor("self")));
   }},
  {"aten::gelu", [](const Call& c) { return one(gelu_of(c, c.tensor("self"))); }},
  {"aten::softplus", [](const Call& c) { return one(softplus_of(c, c.tensor("self"))); }},
  {"aten::leaky_relu", [](const Call& c) {
     const Tensor x = c.tensor("self");
     return one(where(gt(x, Scalar(0.0)), x, x * cast(c.tensor("negative_slope"), x.dtype())));
   }},
  {"aten::clamp", [](const Call& c) { return one(clamped(c)); }},
  {"aten::clamp_min", [](const Call& c) { return one(clamped(c)); }},
  {"aten::clamp_max", [](const Call& c) { return one(clamped(c)); }},
  {"aten::hardtanh", [](const Call& c) { return one(clamp(c.tensor("self"), c.scalar("min_val"), c.scalar("max_val"))); }},
  {"aten::threshold", [](const Call& c) {
     const Tensor x = c.tensor("self");
     return one(where(le(x, cast(c.tensor("threshold"), x.dtype())), cast(c.tensor("value"), x.dtype()), x));
   }},
  // Their gradients.
  {"aten::threshold_backward", [](const Call& c) {
     const Tensor x = c.tensor("self"), g = c.tensor("grad_output");
     return one(where(le(x, cast(c.tensor("threshold"), x.dtype())), Scalar(0.0), g));
   }},
  {"aten::sigmoid_backward", [](const Call& c) {
     const Tensor y = c.tensor("output");
     return one(c.tensor("grad_output") * (y * (Scalar(1.0) - y)));
   }},
  {"aten::tanh_backward", [](const Call& c) {
     const Tensor y = c.tensor("output");
     return one(c.tensor("grad_output") * (Scalar(1.0) - y * y));
   }},
  {"aten::gelu_backward", [](const Call& c) {
     const Tensor x = c.tensor("self");
     return vjp(gelu_of(c, x), {x}, c.tensor("grad_output"));
   }},
  {"aten::tan", [](const Call& c) { const Tensor x = c.tensor("self"); return one(sin(x) / cos(x)); }},
  {"aten::sinh", [](const Call& c) { const Tensor x = c.tensor("self"); return one((expm1(x) - expm1(-x)) * Scalar(0.5)); }},
  {"aten::cosh", [](const Call& c) { const Tensor x = c.tensor("self"); return one((exp(x) + exp(-x)) * Scalar(0.5)); }},
  {"aten::log10", [](const Call& c) { return one(log(c.tensor("self")) * Scalar(1.0 / std::numbers::ln10)); }},
  {"aten::exp2", [](const Call& c) { return one(exp(c.tensor("self") * Scalar(std::numbers::ln2))); }},
  {"aten::mish", [](const Call& c) { const Tensor x = c.tensor("self"); return one(x * tanh(softplus(x))); }},
  {"aten::hardswish", [](const Call& c) { return one(hardswish_of(c.tensor("self"))); }},
  {"aten::hardswish_backward", [](const Call& c) {
     const Tensor x = c.tensor("self");
     return vjp(hardswish_of(x), {x}, c.tensor("grad_output"));
   }},
  {"aten::glu", [](const Call& c) { return one(glu_of(c.tensor("self"), c.integer("dim"))); }},
  {"aten::glu_backward", [](const Call& c) {
     const Tensor x = c.tensor("self");
     return vjp(glu_of(x, c.integer("dim")), {x}, c.tensor("grad_output"));
   }},
  {"aten::roll", roll},
  {"aten::upsample_nearest2d", [](const Call& c) { return one(upsample_of(c, c.tensor("self"), false)); }},
  {"aten::upsample_nearest2d_backward", [](const Call& c) { return upsample_backward(c, false); }},
  {"aten::upsample_bilinear2d", [](const Call& c) { return one(upsample_of(c, c.tensor("self"), true)); }},
  {"aten::upsample_bilinear2d_backward", [](const Call& c) { return upsample_backward(c, true); }},
  {"aten::elu", [](const Call& c) { return one(elu_of(c, c.tensor("self"))); }},
  {"aten::elu_backward", [](const Call& c) {
     if (c.boolean("is_result")) c.unsupported("the backward of an in-place elu (from its result)");
     const Tensor x = c.tensor("self_or_result");
     return vjp(elu_of(c, x), {x}, c.tensor("grad_output"));
   }},
  {"aten::log_sigmoid_forward", [](const Call& c) {
     const Tensor x = c.tensor("self");
     // The buffer only PyTorch's own backward reads: empty where LTC declares it so.
     const Tensor buffer = c.result_sizes(1) == std::vector<int64_t>{0} ? zeros({0}, x.dtype()) : exp(-abs(x));
     return Results{log_sigmoid_of(x), buffer};
   }},
  {"aten::log_sigmoid_backward", [](const Call& c) {
     // As eager's: g (1 - s) below 0, g s from 0 on, s = e^-|x| / (1 + e^-|x|). The gradient of
     // the forward composition is 0 at 0 (abs's), and inf * 0 from the branch not taken.
     const Tensor x = c.tensor("self"), z = exp(-abs(x)), s = z / (Scalar(1.0) + z);
     return one(c.tensor("grad_output") * where(lt(x, Scalar(0.0)), Scalar(1.0) - s, s));
   }},
  {"aten::silu_backward", [](const Call& c) { const Tensor x = c.tensor("self"); return vjp(silu(x), {x}, c.tensor("grad_output")); }},
  {"aten::softplus_backward", [](const Call& c) {
     const Tensor x = c.tensor("self");
     return vjp(softplus_of(c, x), {x}, c.tensor("grad_output"));
   }},
  {"aten::leaky_relu_backward", [](const Call& c) {
     const Tensor x = c.tensor("self"), g = c.tensor("grad_output");
     return one(where(gt(x, Scalar(0.0)), g, g * cast(c.tensor("negative_slope"), g.dtype())));
   }},
  {"aten::hardtanh_backward", [](const Call& c) {
     const Tensor x = c.tensor("self"), g = c.tensor("grad_output");
     const Tensor outside = logical_or(le(x, c.tensor("min_val")), ge(x, c.tensor("max_val")));
     return one(where(outside, Scalar(0.0), g));
   }},
  // Reductions and scans.
  {"aten::sum", [](const Call& c) { return one(sum(with_dtype(c, c.tensor("self")), dims_of(c), keepdim(c))); }},
  {"aten::mean", [](const Call& c) { return one(mean(with_dtype(c, c.tensor("self")), dims_of(c), keepdim(c))); }},
  {"aten::prod", [](const Call& c) { return one(prod(with_dtype(c, c.tensor("self")), dims_of(c), keepdim(c))); }},
  {"aten::amax", [](const Call& c) { return one(amax(c.tensor("self"), dims_of(c), keepdim(c))); }},
  {"aten::amin", [](const Call& c) { return one(amin(c.tensor("self"), dims_of(c), keepdim(c))); }},
  {"aten::max", [](const Call& c) { return max_min(c, true); }},
  {"aten::min", [](const Call& c) { return max_min(c, false); }},
  {"aten::argmax", [](const Call& c) { return arg_extremum(c, true); }},
  {"aten::argmin", [](const Call& c) { return arg_extremum(c, false); }},
  {"aten::any", [](const Call& c) { return one(any(c.tensor("self"), dims_of(c), keepdim(c))); }},
  {"aten::all", [](const Call& c) { return one(all(c.tensor("self"), dims_of(c), keepdim(c))); }},
  {"aten::norm", p_norm},
  {"aten::trace", trace},
  {"aten::topk", [](const Call& c) {
     if (c.has("largest") && !c.boolean("largest")) c.unsupported("topk with largest=False");
     ValuesIndices r = topk(c.tensor("self"), c.integer("k"), c.integer("dim"));
     return Results{r.values, r.indices};
   }},
  {"aten::var", [](const Call& c) { return one(var(c.tensor("self"), dims_of(c), unbiased(c), keepdim(c))); }},
  {"aten::var_mean", [](const Call& c) {
     const Tensor x = c.tensor("self");
     return Results{var(x, dims_of(c), unbiased(c), keepdim(c)), mean(x, dims_of(c), keepdim(c))};
   }},
  {"aten::std", [](const Call& c) { return one(lazyjit::std(c.tensor("self"), dims_of(c), unbiased(c), keepdim(c))); }},
  {"aten::cumsum", [](const Call& c) { return one(cumsum(with_dtype(c, c.tensor("self")), c.integer("dim"))); }},
  {"aten::cumprod", [](const Call& c) { return one(cumprod(with_dtype(c, c.tensor("self")), c.integer("dim"))); }},
  {"aten::_softmax", [](const Call& c) { return one(softmax(floating_input(c, c.tensor("self")), c.integer("dim"))); }},
  {"aten::softmax", [](const Call& c) { return one(softmax(floating_input(c, with_dtype(c, c.tensor("self"))), c.integer("dim"))); }},
  {"aten::_log_softmax", [](const Call& c) { return one(log_softmax(floating_input(c, c.tensor("self")), c.integer("dim"))); }},
  {"aten::log_softmax", [](const Call& c) {
     return one(log_softmax(floating_input(c, with_dtype(c, c.tensor("self"))), c.integer("dim")));
   }},
  {"aten::_softmax_backward_data", [](const Call& c) { return softmax_backward(c, false); }},
  {"aten::_log_softmax_backward_data", [](const Call& c) { return softmax_backward(c, true); }},
  // Losses.
  {"aten::nll_loss_forward", nll_loss_forward},
  {"aten::nll_loss_backward", nll_loss_backward},
  {"aten::mse_loss", [](const Call& c) {
     const Tensor d = c.tensor("self") - c.tensor("target");
     return one(reduced(c, d * d));
   }},
  {"aten::mse_loss_backward", [](const Call& c) {
     const Tensor d = c.tensor("self") - c.tensor("target");
     Tensor g = Scalar(2.0) * d * cast(c.tensor("grad_output"), d.dtype());
     return one(c.integer("reduction") == 1 ? g / Scalar(static_cast<double>(d.numel())) : g);
   }},
  {"aten::smooth_l1_loss", [](const Call& c) { return one(reduced(c, smooth_l1_of(c, c.tensor("self")))); }},
  {"aten::smooth_l1_loss_backward", [](const Call& c) {
     const Tensor x = c.tensor("self");
     return vjp(reduced(c, smooth_l1_of(c, x)), {x}, c.tensor("grad_output"));
   }},
  // Products.
  {"aten::mm", [](const Call& c) { return one(matmul(c.tensor("self"), c.tensor("mat2"))); }},
  {"aten::bmm", [](const Call& c) {
     // Operands with their batch dims unmerged (translate.cpp): the product, merged as bmm's.
     const Tensor r = matmul(c.tensor("self"), c.tensor("mat2"));
     return one(r.dim() == 3 ? r : reshape(r, {-1, r.shape()[r.dim() - 2], r.shape().back()}));
   }},
  {"aten::matmul", [](const Call& c) { return one(matmul(c.tensor("self"), c.tensor("other"))); }},
  {"aten::mv", [](const Call& c) { return one(matmul(c.tensor("self"), c.tensor("vec"))); }},
  {"aten::dot", [](const Call& c) { return one(matmul(c.tensor("self"), c.tensor("tensor"))); }},
  {"aten::addmm", [](const Call& c) { return addmm_like(c, "mat1", "mat2"); }},
  {"aten::baddbmm", [](const Call& c) { return addmm_like(c, "batch1", "batch2"); }},
  {"aten::linear", [](const Call& c) {
     const Tensor w = c.tensor("weight"), y = matmul(c.tensor("input"), transpose(w, 0, 1));
     return one(c.has("bias") ? y + c.tensor("bias") : y);
   }},
  // Views and data movement. Their functionalised forms (view_copy, t_copy, ...) take the
  // view's entry (find_lowering).
  {"aten::view", [](const Call& c) { return one(reshape(c.tensor("self"), c.ints("size"))); }},
  {"aten::reshape", [](const Call& c) { return one(reshape(c.tensor("self"), c.ints("shape"))); }},
  {"aten::_unsafe_view", [](const Call& c) { return one(reshape(c.tensor("self"), c.ints("size"))); }},
  {"aten::t", [](const Call& c) { const Tensor t = c.tensor("self"); return one(t.dim() < 2 ? t : transpose(t, 0, 1)); }},
  {"aten::transpose", [](const Call& c) { return one(transpose(c.tensor("self"), c.integer("dim0"), c.integer("dim1"))); }},
  {"aten::permute", [](const Call& c) { return one(permute(c.tensor("self"), c.ints("dims"))); }},
  {"aten::expand", [](const Call& c) { return one(expand(c.tensor("self"), c.ints("size"))); }},
  {"aten::squeeze", [](const Call& c) { return one(c.has("dim") ? squeeze(c.tensor("self"), c.integer("dim")) : squeeze_all(c.tensor("self"))); }},
  {"aten::unsqueeze", [](const Call& c) { return one(unsqueeze(c.tensor("self"), c.integer("dim"))); }},
  {"aten::slice", [](const Call& c) {
     return one(slice(c.tensor("self"), c.integer("dim"), c.has("start") ? c.integer("start") : 0,
                      c.has("end") ? c.integer("end") : std::numeric_limits<int64_t>::max(), c.integer("step")));
   }},
  {"aten::narrow_copy", [](const Call& c) {
     const int64_t start = c.integer("start");
     return one(slice(c.tensor("self"), c.integer("dim"), start, start + c.integer("length")));
   }},
  {"aten::select", select},
  {"aten::slice_scatter", slice_scatter},
  {"aten::select_scatter", [](const Call& c) {
     const Tensor self = c.tensor("self");
     const int64_t dim = c.integer("dim") < 0 ? c.integer("dim") + self.dim() : c.integer("dim");
     int64_t index = c.integer("index");
     if (index < 0) index += self.shape().at(dim);
     const Tensor src = unsqueeze(cast(c.tensor("src"), self.dtype()), dim);
     return one(index_copy(self, dim, full({1}, index, DType::Int64), src));
   }},
  {"aten::alias", identity}, {"aten::clone", identity}, {"aten::detach", identity}, {"aten::contiguous", identity},
  {"aten::lift_fresh_copy", identity},
  {"aten::cat", [](const Call& c) { return one(cat(c.tensors("tensors"), c.integer("dim"))); }},
  {"aten::stack", [](const Call& c) {
     std::vector<Tensor> ts = c.tensors("tensors");
     const int64_t dim = c.integer("dim");
     if (ts.empty()) c.unsupported("stack of no tensors");
     const int64_t d = dim < 0 ? dim + ts[0].dim() + 1 : dim;
     for (Tensor& t : ts) t = unsqueeze(t, d);
     return one(cat(ts, d));
   }},
  {"aten::tril", [](const Call& c) { return triangle(c, true); }},
  {"aten::triu", [](const Call& c) { return triangle(c, false); }},
  {"aten::constant_pad_nd", constant_pad},
  {"aten::flip", [](const Call& c) { return one(flip(c.tensor("self"), c.ints("dims"))); }},
  {"aten::repeat", repeat},
  {"aten::to", [](const Call& c) { return one(with_dtype(c, c.tensor("self"))); }},
  {"aten::_to_copy", [](const Call& c) { return one(with_dtype(c, c.tensor("self"))); }},
  // Indexing and scatters.
  {"aten::index_select", [](const Call& c) { return one(index_select(c.tensor("self"), c.integer("dim"), c.tensor("index"))); }},
  {"aten::gather", [](const Call& c) { return one(gather(c.tensor("self"), c.integer("dim"), c.tensor("index"))); }},
  {"aten::embedding", [](const Call& c) { return one(embedding(c.tensor("weight"), c.tensor("indices"))); }},
  {"aten::embedding_dense_backward", embedding_dense_backward},
  {"aten::scatter", [](const Call& c) {
     // The value overload: every indexed element takes the one value, so duplicate indices
     // agree (the src overload's would not, in an unspecified order: it falls back).
     if (!c.has("value") || c.has("reduce")) c.unsupported("scatter of a src tensor, or with a reduce");
     const Tensor self = c.tensor("self"), index = c.tensor("index");
     const int64_t dim = c.integer("dim");
     const Tensor hits = scatter_add(zeros(self.shape(), DType::Int64), dim, index, ones(index.shape(), DType::Int64));
     return one(where(gt(hits, Scalar(int64_t{0})), cast(c.tensor("value"), self.dtype()), self));
   }},
  {"aten::scatter_add", [](const Call& c) {
     return one(scatter_add(c.tensor("self"), c.integer("dim"), c.tensor("index"), cast(c.tensor("src"), c.tensor("self").dtype())));
   }},
  {"aten::index_add", [](const Call& c) {
     const Tensor self = c.tensor("self");
     return one(index_add(self, c.integer("dim"), c.tensor("index"), times(c, cast(c.tensor("source"), self.dtype()), "alpha")));
   }},
  {"aten::index_copy", [](const Call& c) {
     return one(index_copy(c.tensor("self"), c.integer("dim"), c.tensor("index"), cast(c.tensor("source"), c.tensor("self").dtype())));
   }},
  // Creation.
  {"aten::zero", [](const Call& c) { const Tensor t = c.tensor("self"); return one(zeros(t.shape(), t.dtype())); }},
  {"aten::fill", [](const Call& c) { const Tensor t = c.tensor("self"); return one(expand(cast(c.tensor("value"), t.dtype()), t.shape())); }},
  {"aten::zeros", [](const Call& c) { return full_like_shape(c, c.ints("size"), DType::Float32); }},
  {"aten::ones", [](const Call& c) {
     return one(ones(c.ints("size"), c.dtype("dtype").value_or(c.result_dtype().value_or(DType::Float32))));
   }},
  {"aten::full", [](const Call& c) { return full_like_shape(c, c.ints("size"), DType::Float32); }},
  {"aten::zeros_like", [](const Call& c) { const Tensor t = c.tensor("self"); return full_like_shape(c, t.shape(), t.dtype()); }},
  {"aten::ones_like", [](const Call& c) {
     const Tensor t = c.tensor("self");
     return one(ones(t.shape(), c.dtype("dtype").value_or(t.dtype())));
   }},
  {"aten::full_like", [](const Call& c) { const Tensor t = c.tensor("self"); return full_like_shape(c, t.shape(), t.dtype()); }},
  {"aten::arange", arange_of},
  {"aten::scalar_tensor", [](const Call& c) {
     return one(cast(c.tensor("s"), c.dtype("dtype").value_or(c.result_dtype().value_or(DType::Float32))));
   }},
  // Convolution, pooling, normalisation: backward ops through lazyjit's autograd.
  {"aten::convolution", [](const Call& c) {
     return one(convolution(c, c.tensor("input"), c.tensor("weight"), c.optional_tensor("bias")));
   }},
  {"aten::convolution_backward", convolution_backward},
  {"aten::max_pool2d", [](const Call& c) { return one(max_pool(c, c.tensor("self"))); }},
  {"aten::max_pool2d_with_indices", [](const Call& c) {
     const Tensor x = c.tensor("self");
     // Indices that only the backward op reads (it finds the first maximum itself) are never computed.
     const bool unread = c.output_read_only_by(1, "aten::max_pool2d_with_indices_backward");
     const Tensor pooled = max_pool(c, x);
     return Results{pooled, unread ? zeros(pooled.shape(), DType::Int64) : max_pool_indices(c, x, pooled)};
   }},
  {"aten::max_pool2d_with_indices_backward", [](const Call& c) {
     const Tensor x = c.tensor("self");
     return vjp(max_pool(c, x), {x}, c.tensor("grad_output"));
   }},
  {"aten::avg_pool2d", [](const Call& c) {
     if (c.has("divisor_override")) c.unsupported("divisor_override");
     check_pool_args(c);
     const Size2 kernel = pair(c, "kernel_size", 1);
     return one(avg_pool2d(c.tensor("self"), kernel, pair(c, "stride", kernel), pair(c, "padding", 0),
                           c.boolean("count_include_pad"), c.boolean("ceil_mode")));
   }},
  {"aten::avg_pool2d_backward", [](const Call& c) {
     if (c.has("divisor_override")) c.unsupported("divisor_override");
     check_pool_args(c);
     const Tensor x = c.tensor("self");
     const Size2 kernel = pair(c, "kernel_size", 1);
     return vjp(avg_pool2d(x, kernel, pair(c, "stride", kernel), pair(c, "padding", 0), c.boolean("count_include_pad"),
                           c.boolean("ceil_mode")),
                {x}, c.tensor("grad_output"));
   }},
  {"aten::_adaptive_avg_pool2d", [](const Call& c) {
     const std::vector<int64_t> size = c.ints("output_size");
     return one(adaptive_avg_pool2d(c.tensor("self"), Size2(size.at(0), size.at(size.size() - 1))));
   }},
  {"aten::_adaptive_avg_pool2d_backward", [](const Call& c) {
     const Tensor x = c.tensor("self"), g = c.tensor("grad_output");
     const std::vector<int64_t> s = g.shape();
     return vjp(adaptive_avg_pool2d(x, Size2(s[s.size() - 2], s.back())), {x}, g);
   }},
  {"aten::native_layer_norm", native_layer_norm},
  {"aten::native_layer_norm_backward", native_layer_norm_backward},
  {"aten::native_batch_norm_backward", native_batch_norm_backward},
};
// clang-format on

}  // namespace

Lowering find_lowering(c10::Symbol op) {
  static const std::unordered_map<c10::Symbol, Lowering> table = [] {
    std::unordered_map<c10::Symbol, Lowering> t;
    for (const auto& [name, lowering] : kTable) t.emplace(c10::Symbol::fromQualString(name), lowering);
    return t;
  }();
  auto it = table.find(op);
  if (it != table.end()) return it->second;
  // LTC's functionalised views (view_copy, permute_copy, ...) mean what the view means: as
  // lazyjit's views, they copy nothing.
  const std::string name = op.toQualString();
  constexpr std::string_view kCopy = "_copy";
  if (name.size() > kCopy.size() && name.ends_with(kCopy)) {
    it = table.find(c10::Symbol::fromQualString(name.substr(0, name.size() - kCopy.size())));
    if (it != table.end()) return it->second;
  }
  return nullptr;
}

}  // namespace lazyjit::ltc

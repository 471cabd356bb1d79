// The lazyjit compositions of aten ops that take more than a line, and the helpers they share
// with the table (aten_ops.cpp): argument reading, PyTorch's dtype rules, autograd reuse.
#include "aten_compositions.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>

#include "lazyjit/autograd.h"

namespace lazyjit::ltc::aten {

namespace {

int category(DType dtype) { return dtype == DType::Bool ? 0 : is_integral(dtype) ? 1 : 2; }

/// PyTorch's rule for a 0-dim operand beside a dimensioned one (a wrapped Python number, a
/// scalar LTC passes as a 0-dim float64): it takes the other's dtype unless it is of a higher
/// category (a float beside integers).
void zero_dim_takes_the_others_dtype(Tensor& a, Tensor& b) {
  if (b.dim() == 0 && a.dim() > 0 && category(b.dtype()) <= category(a.dtype())) b = cast(b, a.dtype());
  if (a.dim() == 0 && b.dim() > 0 && category(a.dtype()) <= category(b.dtype())) a = cast(a, b.dtype());
}

/// The rows of NLL over [N, C] log-probabilities: the picked log-probability, and its weight
/// (0 at ignore_index).
std::pair<Tensor, Tensor> nll_rows(const Call& c, const Tensor& self, const Tensor& target) {
  const int64_t ignore = c.integer("ignore_index");
  const Tensor valid = ne(target, Scalar(ignore));
  const Tensor safe = where(valid, target, Scalar(int64_t{0}));
  const Tensor picked = squeeze(gather(self, 1, unsqueeze(safe, 1)), 1);
  Tensor weight = c.has("weight") ? index_select(cast(c.tensor("weight"), self.dtype()), 0, safe) : ones(target.shape(), self.dtype());
  weight = where(valid, weight, Scalar(0.0));
  return {picked, weight};
}

/// NLL's operands as [N, C] and [N]: a single sample ([C] and []) becomes a batch of one.
std::pair<Tensor, Tensor> nll_operands(const Call& c) {
  Tensor self = c.tensor("self"), target = c.tensor("target");
  if (self.dim() == 1) return {unsqueeze(self, 0), unsqueeze(target, 0)};
  if (self.dim() != 2) c.unsupported(c10::str("input of rank ", self.dim(), " (lazyjit translates rank 1 and 2)"));
  return {self, target};
}

}  // namespace

/// squeeze without a dim: every dim of size 1 goes.
Tensor squeeze_all(const Tensor& t) {
  std::vector<int64_t> shape;
  for (int64_t s : t.shape()) {
    if (s != 1) shape.push_back(s);
  }
  return reshape(t, shape);
}

Tensor cast(const Tensor& t, DType dtype) { return t.dtype() == dtype ? t : t.to(dtype); }

/// The operands of an arithmetic op in the dtype PyTorch computes it in: the result's, as
/// LTC gives it (so that a float32 op with a Python number does not compute in float64), or
/// by the 0-dim rule when LTC gives none.
std::vector<Tensor> arith(const Call& c, std::initializer_list<std::string_view> names) {
  std::vector<Tensor> ts;
  for (std::string_view name : names) ts.push_back(c.tensor(name));
  if (std::optional<DType> dtype = c.result_dtype(); dtype && *dtype != DType::Bool) {
    for (Tensor& t : ts) t = cast(t, *dtype);
  } else if (ts.size() >= 2) {
    zero_dim_takes_the_others_dtype(ts[0], ts[1]);
  }
  return ts;
}

/// The operands of a comparison, by the 0-dim rule.
std::pair<Tensor, Tensor> compared(const Call& c) {
  Tensor a = c.tensor("self"), b = c.tensor("other");
  zero_dim_takes_the_others_dtype(a, b);
  return {a, b};
}

/// `t` times the argument `name` (alpha, beta, value), skipped when that is the constant 1.
Tensor scaled(const Call& c, const Tensor& t, std::string_view name) {
  if (!c.has(name)) return t;
  const Tensor s = c.tensor(name);
  return t * cast(s, t.dtype());
}

bool is_constant_one(const Call& c, std::string_view name) { return !c.has(name) || c.constant_number(name) == 1.0; }

Tensor times(const Call& c, const Tensor& t, std::string_view name) { return is_constant_one(c, name) ? t : scaled(c, t, name); }

/// Optional int[] dims (None or [] reduce everything, as PyTorch).
std::vector<int64_t> dims_of(const Call& c, std::string_view name) { return c.has(name) ? c.ints(name) : std::vector<int64_t>{}; }

bool keepdim(const Call& c) { return c.has("keepdim") && c.boolean("keepdim"); }

Tensor with_dtype(const Call& c, Tensor t) {
  if (std::optional<DType> d = c.dtype("dtype")) return cast(t, *d);
  return t;
}

Tensor floating_input(const Call& c, Tensor t) {
  if (!is_floating(t.dtype())) c.unsupported(c10::str("an input of ", dtype_name(t.dtype()), " (PyTorch's kernel takes floats only)"));
  return t;
}

/// The vector-Jacobian product of a lazyjit composition: how backward ops with no simpler
/// form reuse lazyjit's autograd (each output of `forward` seeded with `grad`).
Results vjp(const Tensor& output, const std::vector<Tensor>& inputs, const Tensor& grad) {
  return lazyjit::grad(output, inputs, cast(grad, output.dtype()));
}

Results one(Tensor t) { return {std::move(t)}; }

Results nll_loss_forward(const Call& c) {
  auto [self, target] = nll_operands(c);
  auto [picked, weight] = nll_rows(c, self, target);
  const Tensor losses = -(picked * weight);
  const Tensor total = sum(weight);
  switch (c.integer("reduction")) {
    case 0: return {c.tensor("self").dim() == 1 ? squeeze(losses, 0) : losses, zeros({}, self.dtype())};
    case 1: return {sum(losses) / total, total};
    case 2: return {sum(losses), total};
  }
  c.unsupported("an unknown reduction");
}

Results nll_loss_backward(const Call& c) {
  auto [self, target] = nll_operands(c);
  auto [picked, weight] = nll_rows(c, self, target);
  Tensor g = cast(c.tensor("grad_output"), self.dtype());
  const int64_t reduction = c.integer("reduction");
  if (reduction == 0 && g.dim() == 0) g = unsqueeze(g, 0);  // a single sample
  Tensor row_scale = -(g * weight);
  if (reduction == 1) row_scale = row_scale / cast(c.tensor("total_weight"), self.dtype());
  // Each row's scale lands on its target's column alone: an ignored row's (0 / 0 where every
  // row is ignored) is never read, as PyTorch skips such rows.
  const Tensor valid = ne(target, Scalar(c.integer("ignore_index")));
  const Tensor picks = logical_and(eq(reshape(arange(self.shape()[1]), {1, -1}), unsqueeze(target, 1)), unsqueeze(valid, 1));
  const Tensor grad = where(picks, unsqueeze(row_scale, 1), Scalar(0.0));
  return one(c.tensor("self").dim() == 1 ? squeeze(grad, 0) : grad);
}

Results max_min(const Call& c, bool is_max) {
  if (c.has("other")) return one(is_max ? maximum(c.tensor("self"), c.tensor("other")) : minimum(c.tensor("self"), c.tensor("other")));
  if (c.has("dim")) {
    ValuesIndices r = is_max ? max(c.tensor("self"), c.integer("dim"), keepdim(c)) : min(c.tensor("self"), c.integer("dim"), keepdim(c));
    return {r.values, r.indices};
  }
  return one(is_max ? amax(c.tensor("self")) : amin(c.tensor("self")));
}

Results arg_extremum(const Call& c, bool is_max) {
  Tensor self = c.tensor("self");
  auto f = is_max ? static_cast<Tensor (*)(const Tensor&, int64_t, bool)>(argmax) : argmin;
  if (c.has("dim")) return one(f(self, c.integer("dim"), keepdim(c)));
  Tensor flat = f(reshape(self, {-1}), 0, false);
  return one(keepdim(c) ? reshape(flat, std::vector<int64_t>(self.dim(), 1)) : flat);
}

/// var and std: `unbiased` (bool) or `correction` (0 or 1).
bool unbiased(const Call& c) {
  if (c.has("correction")) {
    const int64_t correction = c.integer("correction");
    if (correction != 0 && correction != 1) c.unsupported(c10::str("correction ", correction, " (lazyjit has 0 and 1)"));
    return correction == 1;
  }
  return !c.has("unbiased") || c.boolean("unbiased");
}

Results softmax_backward(const Call& c, bool log) {
  const Tensor g = c.tensor("grad_output"), out = c.tensor("output");
  const int64_t dim = c.integer("dim");
  if (log) return one(g - exp(out) * sum(g, {dim}, true));
  return one(out * (g - sum(g * out, {dim}, true)));
}

Results addmm_like(const Call& c, std::string_view a, std::string_view b) {
  Tensor product = times(c, matmul(c.tensor(a), c.tensor(b)), "alpha");
  if (c.has("beta") && !is_constant_one(c, "beta")) {
    // beta 0 ignores self, NaN and inf included; a beta that arrives at run time may be 0.
    if (c.constant_number("beta") == 0.0) return one(product);
    const Tensor sum = product + scaled(c, cast(c.tensor("self"), product.dtype()), "beta");
    return one(c.constant_number("beta") ? sum : where(eq(c.tensor("beta"), Scalar(0.0)), product, sum));
  }
  return one(product + cast(c.tensor("self"), product.dtype()));
}

Results select(const Call& c) {
  const Tensor self = c.tensor("self");
  const int64_t dim = c.integer("dim") < 0 ? c.integer("dim") + self.dim() : c.integer("dim");
  int64_t index = c.integer("index");
  if (dim < 0 || dim >= self.dim()) c.unsupported(c10::str("dim ", c.integer("dim"), " of a rank-", self.dim(), " tensor"));
  const int64_t size = self.shape()[dim];
  if (index < -size || index >= size) c.unsupported(c10::str("index ", index, " is out of range for size ", size));
  if (index < 0) index += size;
  return one(squeeze(slice(self, dim, index, index + 1), dim));
}

/// self with the slice start:end:step of `dim` replaced by src (functionalised in-place
/// writes to a slice: x[:, 2:5] = y). Contiguous slices are a cat of three views.
Results slice_scatter(const Call& c) {
  const Tensor self = c.tensor("self"), src = cast(c.tensor("src"), c.tensor("self").dtype());
  const int64_t dim = c.integer("dim") < 0 ? c.integer("dim") + self.dim() : c.integer("dim");
  const int64_t size = self.shape().at(dim), step = c.integer("step");
  auto clamp_index = [&](std::string_view name, int64_t fallback) {
    int64_t i = c.has(name) ? c.integer(name) : fallback;
    if (i < 0) i += size;
    return std::clamp<int64_t>(i, 0, size);
  };
  const int64_t start = clamp_index("start", 0), end = std::max(start, clamp_index("end", size));
  if (step == 1) {
    std::vector<Tensor> pieces;
    if (start > 0) pieces.push_back(slice(self, dim, 0, start));
    pieces.push_back(src);
    if (end < size) pieces.push_back(slice(self, dim, end, size));
    return one(pieces.size() == 1 ? pieces[0] : cat(pieces, dim));
  }
  const int64_t n = (end - start + step - 1) / step;
  return one(index_copy(self, dim, arange(n) * Scalar(step) + Scalar(start), src));
}

/// tril and triu: the elements on or below (above) diagonal `k` of the last two dims.
Results triangle(const Call& c, bool lower) {
  const Tensor self = c.tensor("self");
  if (self.dim() < 2) c.unsupported("a tensor of rank below 2");
  const int64_t rows = self.shape()[self.dim() - 2], cols = self.shape().back();
  const int64_t k = c.has("diagonal") ? c.integer("diagonal") : 0;
  const Tensor offset = reshape(arange(cols), {1, cols}) - reshape(arange(rows), {rows, 1});  // col - row
  const Tensor keep = lower ? le(offset, Scalar(k)) : ge(offset, Scalar(k));
  return one(where(keep, self, zeros({}, self.dtype())));
}

/// constant_pad_nd: `pad` holds (before, after) pairs from the last dim backwards; negative
/// amounts crop.
Results constant_pad(const Call& c) {
  Tensor t = c.tensor("self");
  const std::vector<int64_t> pad = c.ints("pad");
  if (pad.size() % 2 != 0 || static_cast<int64_t>(pad.size() / 2) > t.dim()) c.unsupported("a pad list that does not pair up with the dims");
  const Tensor value = cast(c.has("value") ? c.tensor("value") : zeros({}, t.dtype()), t.dtype());
  for (size_t i = 0; i < pad.size() / 2; ++i) {
    const int64_t dim = t.dim() - 1 - static_cast<int64_t>(i);
    const int64_t before = pad[2 * i], after = pad[2 * i + 1], size = t.shape()[dim];
    t = slice(t, dim, std::max<int64_t>(-before, 0), size - std::max<int64_t>(-after, 0));
    std::vector<Tensor> pieces;
    auto block = [&](int64_t n) {
      std::vector<int64_t> shape = t.shape();
      shape[dim] = n;
      return expand(value, shape);
    };
    if (before > 0) pieces.push_back(block(before));
    pieces.push_back(t);
    if (after > 0) pieces.push_back(block(after));
    if (pieces.size() > 1) t = cat(pieces, dim);
  }
  return one(t);
}

/// The p-norm over `dim` (all dims when empty). LTC passes p as a run-time value unless it
/// is 0 or 1, so every case is computed and the one p selects is kept.
Results p_norm(const Call& c) {
  const Tensor t = abs(c.tensor("self"));
  const std::vector<int64_t> dims = dims_of(c);
  const bool keep = keepdim(c);
  const std::optional<double> constant_p = c.has("p") ? c.constant_number("p") : std::optional<double>(2.0);
  auto general = [&](const Tensor& p) { return pow(sum(pow(t, p), dims, keep), Scalar(1.0) / p); };
  if (constant_p) {
    const double p = *constant_p;
    if (p == 2.0) return one(sqrt(sum(t * t, dims, keep)));
    if (p == 1.0) return one(sum(t, dims, keep));
    if (std::isinf(p)) return one(p > 0 ? amax(t, dims, keep) : amin(t, dims, keep));
    if (p == 0.0) return one(sum(ne(t, Scalar(0.0)).to(t.dtype()), dims, keep));
    return one(general(full({}, p, t.dtype())));
  }
  const Tensor p = cast(c.tensor("p"), t.dtype());
  const double inf = std::numeric_limits<double>::infinity();
  Tensor r = where(eq(p, Scalar(2.0)), sqrt(sum(t * t, dims, keep)), general(p));
  r = where(eq(p, Scalar(inf)), amax(t, dims, keep), r);
  r = where(eq(p, Scalar(-inf)), amin(t, dims, keep), r);
  return one(where(eq(p, Scalar(0.0)), sum(ne(t, Scalar(0.0)).to(t.dtype()), dims, keep), r));
}

/// The sum of the main diagonal of a matrix: its flat elements 0, cols + 1, 2 (cols + 1), ...
Results trace(const Call& c) {
  const Tensor self = c.tensor("self");
  if (self.dim() != 2) c.unsupported("trace of a tensor that is not a matrix");
  const int64_t rows = self.shape()[0], cols = self.shape()[1], n = std::min(rows, cols);
  const Tensor diagonal = index_select(reshape(self, {-1}), 0, arange(n) * Scalar(cols + 1));
  return one(sum(diagonal));
}

Tensor trunc_of(const Tensor& t) { return is_floating(t.dtype()) ? where(lt(t, Scalar(0.0)), ceil(t), floor(t)) : t; }

Results repeat(const Call& c) {
  Tensor self = c.tensor("self");
  const std::vector<int64_t> repeats = c.ints("repeats");
  if (repeats.size() < static_cast<size_t>(self.dim())) c.unsupported("fewer repeats than dims");
  std::vector<int64_t> shape(repeats.size() - self.dim(), 1);
  for (int64_t s : self.shape()) shape.push_back(s);
  std::vector<int64_t> interleaved, expanded, result;
  for (size_t i = 0; i < shape.size(); ++i) {
    interleaved.insert(interleaved.end(), {1, shape[i]});
    expanded.insert(expanded.end(), {repeats[i], shape[i]});
    result.push_back(repeats[i] * shape[i]);
  }
  return one(reshape(expand(reshape(self, interleaved), expanded), result));
}

Results full_like_shape(const Call& c, const std::vector<int64_t>& shape, DType fallback) {
  const DType dtype = c.dtype("dtype").value_or(c.result_dtype().value_or(fallback));
  if (!c.has("fill_value")) return one(zeros(shape, dtype));
  return one(expand(cast(c.tensor("fill_value"), dtype), shape));
}

/// A pair argument (kernel_size, stride, ...): one number stands for both, as in PyTorch.
Size2 pair(const Call& c, std::string_view name, Size2 fallback) {
  const std::vector<int64_t> v = c.has(name) ? c.ints(name) : std::vector<int64_t>{};
  if (v.empty()) return fallback;
  if (v.size() > 2) c.unsupported(c10::str("'", name, "' has ", v.size(), " values (lazyjit has 1-D and 2-D windows)"));
  return v.size() == 1 ? Size2(v[0]) : Size2(v[0], v[1]);
}

/// conv2d over PyTorch's `convolution` arguments; rank-3 inputs are conv1d.
Tensor convolution(const Call& c, const Tensor& input, const Tensor& weight, const Tensor& bias) {
  if (c.has("transposed") && c.boolean("transposed")) c.unsupported("transposed convolution");
  const Size2 stride = pair(c, "stride", 1), padding = pair(c, "padding", 0), dilation = pair(c, "dilation", 1);
  const int64_t groups = c.integer("groups");
  if (input.dim() == 3) return conv1d(input, weight, bias, stride.w, padding.w, dilation.w, groups);
  if (input.dim() != 4) c.unsupported(c10::str("a convolution of a rank-", input.dim(), " input (lazyjit has 1-D and 2-D)"));
  return conv2d(input, weight, bias, stride, padding, dilation, groups);
}

Results convolution_backward(const Call& c) {
  const Tensor input = c.tensor("input"), weight = c.tensor("weight"), g = c.tensor("grad_output");
  const std::vector<bool> mask = c.has("output_mask") ? c.bools("output_mask") : std::vector<bool>{true, true, true};
  Results grads = vjp(convolution(c, input, weight, Tensor()), {input, weight}, g);
  std::vector<int64_t> reduce = {0};
  for (int64_t d = 2; d < g.dim(); ++d) reduce.push_back(d);
  grads.push_back(sum(g, reduce));
  // A gradient not asked for is an empty tensor, as PyTorch's.
  for (size_t k = 0; k < grads.size(); ++k) {
    if (k < mask.size() && !mask[k]) grads[k] = zeros(c.result_sizes(k).value_or(std::vector<int64_t>{0}), g.dtype());
  }
  return grads;
}

void check_pool_args(const Call& c) {
  if (c.has("dilation") && (pair(c, "dilation", 1).h != 1 || pair(c, "dilation", 1).w != 1)) c.unsupported("dilated pooling");
}

Tensor max_pool(const Call& c, const Tensor& self) {
  check_pool_args(c);
  const Size2 kernel = pair(c, "kernel_size", 1);
  return max_pool2d(self, kernel, pair(c, "stride", kernel), pair(c, "padding", 0), c.has("ceil_mode") && c.boolean("ceil_mode"));
}

/// The flat index (into H*W) of each window's first maximum, as max_pool2d_with_indices;
/// `pooled` is max_pool's result, whose shape (ceil mode's included) gives the windows.
Tensor max_pool_indices(const Call& c, const Tensor& self, const Tensor& pooled) {
  const Size2 kernel = pair(c, "kernel_size", 1), stride = pair(c, "stride", kernel), padding = pair(c, "padding", 0);
  if (padding.h != 0 || padding.w != 0) c.unsupported("indices of a padded max_pool2d");
  const int64_t oh = pooled.shape()[pooled.dim() - 2], ow = pooled.shape().back();
  // Ceil mode's last windows read past the input: -inf there, never a window's first maximum.
  Tensor x = self;
  const int64_t past[2] = {(oh - 1) * stride.h + kernel.h - x.shape()[x.dim() - 2], (ow - 1) * stride.w + kernel.w - x.shape().back()};
  for (int d = 0; d < 2; ++d) {
    if (past[d] <= 0) continue;
    std::vector<int64_t> shape = x.shape();
    shape[shape.size() - 2 + d] = past[d];
    x = cat({x, full(shape, -std::numeric_limits<double>::infinity(), x.dtype())}, x.dim() - 2 + d);
  }
  const Tensor x4 = x.dim() == 3 ? unsqueeze(x, 0) : x;
  const std::vector<int64_t> s = x4.shape();
  const int64_t n = s[0], ch = s[1];
  const Tensor windows = reshape(unfold(x4, kernel, 1, 0, stride), {n, ch, kernel.h * kernel.w, oh, ow});
  const Tensor k = argmax(windows, 2);  // [n, ch, oh, ow]
  const Tensor row = reshape(arange(oh) * Scalar(stride.h), {oh, 1}) + floor_divide(k, Scalar(kernel.w));
  const Tensor col = reshape(arange(ow) * Scalar(stride.w), {1, ow}) + remainder(k, Scalar(kernel.w));
  const Tensor index = row * Scalar(self.shape().back()) + col;
  return x.dim() == 3 ? squeeze(index, 0) : index;
}

Results embedding_dense_backward(const Call& c) {
  if (c.boolean("scale_grad_by_freq")) c.unsupported("scale_grad_by_freq");
  const Tensor g = c.tensor("grad_output"), indices = reshape(c.tensor("indices"), {-1});
  const int64_t dim = g.shape().back();
  Tensor rows = reshape(g, {-1, dim});
  if (const int64_t padding = c.integer("padding_idx"); padding >= 0) {
    rows = where(unsqueeze(eq(indices, Scalar(padding)), 1), Scalar(0.0), rows);
  }
  return one(index_add(zeros({c.integer("num_weights"), dim}, g.dtype()), 0, indices, rows));
}

Results native_layer_norm(const Call& c) {
  const Tensor x = c.tensor("input");
  const int64_t k = static_cast<int64_t>(c.ints("normalized_shape").size());
  const double eps = c.real("eps");
  std::vector<int64_t> dims;
  for (int64_t d = x.dim() - k; d < x.dim(); ++d) dims.push_back(d);
  const Tensor out = layer_norm(x, k, c.optional_tensor("weight"), c.optional_tensor("bias"), eps);
  return {out, mean(x, dims, true), rsqrt(var(x, dims, false, true) + Scalar(eps))};
}

Results native_layer_norm_backward(const Call& c) {
  const Tensor g = c.tensor("grad_out"), x = c.tensor("input"), mu = c.tensor("mean"), rstd = c.tensor("rstd");
  const Tensor weight = c.optional_tensor("weight");
  const int64_t k = static_cast<int64_t>(c.ints("normalized_shape").size());
  std::vector<int64_t> inner, outer;
  for (int64_t d = 0; d < x.dim(); ++d) (d < x.dim() - k ? outer : inner).push_back(d);
  const Tensor xhat = (x - mu) * rstd;
  const Tensor gw = weight.defined() ? g * weight : g;
  const Tensor dx = rstd * (gw - mean(gw, inner, true) - xhat * mean(gw * xhat, inner, true));
  const std::vector<int64_t> wshape = c.ints("normalized_shape");
  Tensor dw = weight.defined() ? sum(g * xhat, outer) : zeros(wshape, x.dtype());
  Tensor db = c.has("bias") ? sum(g, outer) : zeros(wshape, x.dtype());
  return {dx, dw, db};
}

namespace {

/// Batch norm's reduced dims (all but the channels, dim 1) and a per-channel [C] tensor
/// shaped to broadcast against [N, C, ...].
std::vector<int64_t> batch_dims(const Tensor& x) {
  std::vector<int64_t> dims = {0};
  for (int64_t d = 2; d < x.dim(); ++d) dims.push_back(d);
  return dims;
}
Tensor per_channel(const Tensor& c, const Tensor& x) {
  std::vector<int64_t> shape(static_cast<size_t>(x.dim()), 1);
  shape[1] = -1;
  return reshape(c, shape);
}

}  // namespace

Results native_batch_norm_backward(const Call& c) {
  const Tensor g = c.tensor("grad_out"), x = c.tensor("input"), weight = c.optional_tensor("weight");
  const bool training = c.boolean("train");
  const std::vector<int64_t> dims = batch_dims(x);
  // The statistics the forward normalised by: the batch's it saved, or the running ones.
  const Tensor mu = per_channel(c.tensor(training ? "save_mean" : "running_mean"), x);
  const Tensor invstd = per_channel(
      training ? c.tensor("save_invstd") : rsqrt(c.tensor("running_var") + Scalar(c.real("eps"))), x);
  const Tensor xhat = (x - mu) * invstd;
  const Tensor gw = weight.defined() ? g * per_channel(weight, x) : g;
  const Tensor dx = training ? invstd * (gw - mean(gw, dims, true) - xhat * mean(gw * xhat, dims, true)) : gw * invstd;
  const int64_t channels = x.shape()[1];
  const Tensor dw = weight.defined() ? sum(g * xhat, dims) : zeros({channels}, x.dtype());
  return {dx, dw, sum(g, dims)};
}

/// PyTorch's arange: an integer result counts from start by step, both cut to integers first
/// (toward zero) and added in int64, exact past 2^53; a floating one in float64. Its length
/// is ceil((end - start) / step), for int64 over the cut integers.
Results arange_of(const Call& c) {
  const DType dtype = c.dtype("dtype").value_or(c.result_dtype().value_or(DType::Int64));
  const bool integral = !is_floating(dtype);
  const DType counting = integral ? DType::Int64 : DType::Float64;
  const std::optional<double> start = c.has("start") ? c.constant_number("start") : 0.0;
  const std::optional<double> end = c.constant_number("end");
  const std::optional<double> step = c.has("step") ? c.constant_number("step") : 1.0;
  auto number = [&](std::optional<double> constant, std::string_view name) {
    if (!constant) return cast(c.tensor(name), counting);
    return integral ? full({}, Scalar(static_cast<int64_t>(*constant)), counting) : full({}, *constant, counting);
  };
  int64_t n = -1;
  if (const std::optional<std::vector<int64_t>> sizes = c.result_sizes(0); sizes && sizes->size() == 1) n = (*sizes)[0];
  if (start && end && step && dtype == DType::Int64) {
    const auto first = static_cast<int64_t>(*start), last = static_cast<int64_t>(*end), by = static_cast<int64_t>(*step);
    if (by != 0) n = std::max<int64_t>(0, (last - first + by - (by > 0 ? 1 : -1)) / by);
  } else if (start && end && step && *step != 0) {
    n = std::max<int64_t>(0, static_cast<int64_t>(std::ceil((*end - *start) / *step)));
  }
  if (n < 0) c.unsupported("bounds that are not constants, and no length for the result");
  return one(cast(arange(n, counting) * number(step, "step") + number(start, "start"), dtype));
}

Tensor elu_of(const Call& c, const Tensor& x) {
  const Tensor scale = cast(c.tensor("scale"), x.dtype());
  const Tensor negative = (exp(x * cast(c.tensor("input_scale"), x.dtype())) - Scalar(1.0)) * cast(c.tensor("alpha"), x.dtype());
  return where(gt(x, Scalar(0.0)), x, negative) * scale;
}

Tensor log_sigmoid_of(const Tensor& x) { return where(lt(x, Scalar(0.0)), x, Scalar(0.0)) - log1p(exp(-abs(x))); }

Tensor hardswish_of(const Tensor& x) { return x * clamp(x + Scalar(3.0), Scalar(0.0), Scalar(6.0)) * Scalar(1.0 / 6.0); }

Tensor glu_of(const Tensor& x, int64_t dim) {
  const int64_t d = dim < 0 ? dim + x.dim() : dim;
  const int64_t half = x.shape()[static_cast<size_t>(d)] / 2;
  return slice(x, d, 0, half) * sigmoid(slice(x, d, half, 2 * half));
}

namespace {

/// The scale from output to input index along one dim (area_pixel_compute_scale): a given
/// scale factor's inverse, else in / out; with align_corners, (in - 1) / (out - 1). In T,
/// the type eager computes coordinates in (double for a double input's linear mode).
template <class T>
double upsample_scale(const Call& c, std::string_view scale_name, int64_t in, int64_t out, bool align_corners) {
  if (align_corners) return out > 1 ? static_cast<T>(in - 1) / static_cast<T>(out - 1) : 0.0;
  const std::optional<double> given = c.has(scale_name) ? c.constant_number(scale_name) : std::nullopt;
  if (c.has(scale_name) && !given) c.unsupported("a scale factor computed at run time");
  return given && *given > 0 ? static_cast<T>(1.0 / *given) : static_cast<T>(in) / static_cast<T>(out);
}

/// `x` resampled along `dim` to `out` elements.
Tensor resample(const Call& c, const Tensor& x, int64_t dim, int64_t out, std::string_view scale_name, bool bilinear) {
  const int64_t in = x.shape()[static_cast<size_t>(dim)];
  const bool align_corners = bilinear && c.boolean("align_corners");
  // Nearest's source index is float arithmetic for every dtype, linear's the input's own.
  const DType coordinates = bilinear && x.dtype() == DType::Float64 ? DType::Float64 : DType::Float32;
  const Scalar scale(coordinates == DType::Float64 ? upsample_scale<double>(c, scale_name, in, out, align_corners)
                                                   : upsample_scale<float>(c, scale_name, in, out, align_corners));
  std::vector<int64_t> shape(static_cast<size_t>(x.dim()), 1);
  shape[static_cast<size_t>(dim)] = out;
  const Tensor last = full({}, static_cast<double>(in - 1), DType::Int64);
  if (!bilinear) {  // nearest: min(floor(j * scale), in - 1)
    const Tensor index = minimum(cast(floor(arange(out, DType::Float32) * scale), DType::Int64), last);
    return index_select(x, dim, index);
  }
  // linear: source (j + 0.5) * scale - 0.5, at least 0 (j * scale with align_corners); the
  // rows floor(src) and the next one (the last row twice), weighted 1 - frac and frac.
  Tensor src = align_corners ? arange(out, coordinates) * scale
                             : (arange(out, coordinates) + Scalar(0.5)) * scale - Scalar(0.5);
  src = where(lt(src, Scalar(0.0)), Scalar(0.0), src);
  const Tensor i0 = cast(floor(src), DType::Int64), i1 = minimum(i0 + Scalar(int64_t{1}), last);
  const Tensor w1 = reshape(cast(src - floor(src), x.dtype()), shape);
  const Tensor w0 = Scalar(1.0) - w1;
  return index_select(x, dim, i0) * w0 + index_select(x, dim, i1) * w1;
}

/// `x` [N, C, H, W] resampled to `out` ([.., H', W']) along H, then W.
Tensor resampled(const Call& c, const Tensor& x, const std::vector<int64_t>& out, bool bilinear) {
  if (x.dim() != 4 || out.size() != 4) c.unsupported("an input or result that is not [N, C, H, W]");
  return resample(c, resample(c, x, 2, out[2], "scales_h", bilinear), 3, out[3], "scales_w", bilinear);
}

}  // namespace

Tensor upsample_of(const Call& c, const Tensor& x, bool bilinear) {
  const std::optional<std::vector<int64_t>> sizes = c.result_sizes(0);
  if (!sizes) c.unsupported("a result of unknown size");
  return resampled(c, x, *sizes, bilinear);
}

Results upsample_backward(const Call& c, bool bilinear) {
  const Tensor g = c.tensor("grad_output");
  const Tensor x = zeros(c.ints("input_size"), g.dtype());
  return vjp(resampled(c, x, g.shape(), bilinear), {x}, g);
}

Results roll(const Call& c) {
  Tensor x = c.tensor("self");
  const std::vector<int64_t> shifts = c.ints("shifts"), dims = c.ints("dims");
  if (shifts.size() != std::max<size_t>(dims.size(), 1)) c.unsupported("shifts and dims of different lengths");
  const std::vector<int64_t> shape = x.shape();
  if (dims.empty()) x = reshape(x, {-1});
  for (size_t i = 0; i < shifts.size(); ++i) {
    const int64_t dim = dims.empty() ? 0 : (dims[i] < 0 ? dims[i] + x.dim() : dims[i]);
    const int64_t n = x.shape()[static_cast<size_t>(dim)];
    if (n == 0) continue;
    const int64_t s = ((shifts[i] % n) + n) % n;  // element j moves to (j + s) mod n
    if (s != 0) x = cat({slice(x, dim, n - s, n), slice(x, dim, 0, n - s)}, dim);
  }
  return one(dims.empty() ? reshape(x, shape) : x);
}

Tensor smooth_l1_of(const Call& c, const Tensor& self) {
  const Tensor d = abs(self - cast(c.tensor("target"), self.dtype()));
  const double beta = c.has("beta") ? c.real("beta") : 1.0;
  if (beta == 0) return d;
  return where(lt(d, Scalar(beta)), d * d * Scalar(0.5 / beta), d - Scalar(0.5 * beta));
}

Tensor reduced(const Call& c, const Tensor& loss) {
  const int64_t reduction = c.integer("reduction");
  return reduction == 0 ? loss : reduction == 1 ? mean(loss) : sum(loss);
}

Tensor gelu_of(const Call& c, const Tensor& x) {
  if (!c.has("approximate") || c.string("approximate") == "none") return gelu(x);
  const double k = std::sqrt(2.0 / std::numbers::pi);
  return Scalar(0.5) * x * (Scalar(1.0) + tanh(Scalar(k) * (x + Scalar(0.044715) * x * x * x)));
}

/// softplus with beta and threshold that may arrive at run time (as LTC passes them).
Tensor softplus_of(const Call& c, const Tensor& x) {
  const std::optional<double> beta = c.constant_number("beta"), threshold = c.constant_number("threshold");
  if (beta && threshold) return softplus(x, *beta, *threshold);
  const Tensor b = cast(c.tensor("beta"), x.dtype()), bx = x * b, over = cast(c.tensor("threshold"), x.dtype());
  // The log branch sees the threshold where it is not taken, as lazyjit::softplus's: exp(bx)
  // overflows past it, and its gradient inf / inf would be NaN there.
  const Tensor past = gt(bx, over);
  return where(past, x, log1p(exp(where(past, over, bx))) / b);
}

Tensor clamped(const Call& c) {
  const Tensor self = c.tensor("self");
  const DType dtype = c.result_dtype().value_or(self.dtype());
  Tensor t = cast(self, dtype);
  if (c.has("min")) t = maximum(t, cast(c.tensor("min"), dtype));
  if (c.has("max")) t = minimum(t, cast(c.tensor("max"), dtype));
  return t;
}

Results identity(const Call& c) { return one(c.tensor("self")); }

}  // namespace lazyjit::ltc::aten

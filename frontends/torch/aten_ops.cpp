// The table from aten op to lazyjit: one entry per op, a lambda over its schema's argument
// names, so that every overload of an op shares the entry. Ops not here run the graph on the
// TorchScript executor (counted). Adding an op: docs/torch.md.
#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <limits>
#include <numbers>
#include <unordered_map>

#include "lazyjit/autograd.h"
#include "lazyjit/ops.h"
#include "translate.h"

namespace lazyjit::ltc {
namespace {

using Results = std::vector<Tensor>;

Tensor cast(const Tensor& t, DType dtype) { return t.dtype() == dtype ? t : t.to(dtype); }

int category(DType dtype) { return dtype == DType::Bool ? 0 : is_integral(dtype) ? 1 : 2; }

/// PyTorch's rule for a 0-dim operand beside a dimensioned one (a wrapped Python number, a
/// scalar LTC passes as a 0-dim float64): it takes the other's dtype unless it is of a higher
/// category (a float beside integers).
void zero_dim_takes_the_others_dtype(Tensor& a, Tensor& b) {
  if (b.dim() == 0 && a.dim() > 0 && category(b.dtype()) <= category(a.dtype())) b = cast(b, a.dtype());
  if (a.dim() == 0 && b.dim() > 0 && category(a.dtype()) <= category(b.dtype())) a = cast(a, b.dtype());
}

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
std::vector<int64_t> dims_of(const Call& c, std::string_view name = "dim") { return c.has(name) ? c.ints(name) : std::vector<int64_t>{}; }
bool keepdim(const Call& c) { return c.has("keepdim") && c.boolean("keepdim"); }
Tensor with_dtype(const Call& c, Tensor t) {
  if (std::optional<DType> d = c.dtype("dtype")) return cast(t, *d);
  return t;
}

/// The vector-Jacobian product of a lazyjit composition: how backward ops with no simpler
/// form reuse lazyjit's autograd (each output of `forward` seeded with `grad`).
Results vjp(const Tensor& output, const std::vector<Tensor>& inputs, const Tensor& grad) {
  return lazyjit::grad(output, inputs, cast(grad, output.dtype()));
}

Results one(Tensor t) { return {std::move(t)}; }

template <Tensor (*F)(const Tensor&)>
Results unary(const Call& c) { return one(F(c.tensor("self"))); }

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
  const Tensor safe = where(ne(target, Scalar(c.integer("ignore_index"))), target, Scalar(int64_t{0}));
  Tensor grad = cast(one_hot(safe, self.shape()[1]), self.dtype()) * unsqueeze(row_scale, 1);
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
    if (c.constant_number("beta") == 0.0) return one(product);  // beta 0 ignores self, NaN included
    return one(product + scaled(c, cast(c.tensor("self"), product.dtype()), "beta"));
  }
  return one(product + cast(c.tensor("self"), product.dtype()));
}

/// squeeze without a dim: every dim of size 1 goes.
Tensor squeeze_all(const Tensor& t) {
  std::vector<int64_t> shape;
  for (int64_t s : t.shape()) {
    if (s != 1) shape.push_back(s);
  }
  return reshape(t, shape);
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
  if (c.has("ceil_mode") && c.boolean("ceil_mode")) c.unsupported("ceil_mode");
  if (c.has("dilation") && (pair(c, "dilation", 1).h != 1 || pair(c, "dilation", 1).w != 1)) c.unsupported("dilated pooling");
}

Tensor max_pool(const Call& c, const Tensor& self) {
  check_pool_args(c);
  const Size2 kernel = pair(c, "kernel_size", 1);
  return max_pool2d(self, kernel, pair(c, "stride", kernel), pair(c, "padding", 0));
}

/// The flat index (into H*W) of each window's first maximum, as max_pool2d_with_indices.
Tensor max_pool_indices(const Call& c, const Tensor& x) {
  const Size2 kernel = pair(c, "kernel_size", 1), stride = pair(c, "stride", kernel), padding = pair(c, "padding", 0);
  if (padding.h != 0 || padding.w != 0) c.unsupported("indices of a padded max_pool2d");
  const Tensor x4 = x.dim() == 3 ? unsqueeze(x, 0) : x;
  const std::vector<int64_t> s = x4.shape();
  const int64_t n = s[0], ch = s[1], h = s[2], w = s[3];
  const int64_t oh = (h - kernel.h) / stride.h + 1, ow = (w - kernel.w) / stride.w + 1;
  const Tensor windows = reshape(unfold(x4, kernel, 1, 0, stride), {n, ch, kernel.h * kernel.w, oh, ow});
  const Tensor k = argmax(windows, 2);  // [n, ch, oh, ow]
  const Tensor row = reshape(arange(oh) * Scalar(stride.h), {oh, 1}) + floor_divide(k, Scalar(kernel.w));
  const Tensor col = reshape(arange(ow) * Scalar(stride.w), {1, ow}) + remainder(k, Scalar(kernel.w));
  const Tensor index = row * Scalar(w) + col;
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

Tensor gelu_of(const Call& c, const Tensor& x) {
  if (!c.has("approximate") || c.string("approximate") == "none") return gelu(x);
  const double k = std::sqrt(2.0 / std::numbers::pi);
  return Scalar(0.5) * x * (Scalar(1.0) + tanh(Scalar(k) * (x + Scalar(0.044715) * x * x * x)));
}

/// softplus with beta and threshold that may arrive at run time (as LTC passes them).
Tensor softplus_of(const Call& c, const Tensor& x) {
  const std::optional<double> beta = c.constant_number("beta"), threshold = c.constant_number("threshold");
  if (beta && threshold) return softplus(x, *beta, *threshold);
  const Tensor b = cast(c.tensor("beta"), x.dtype()), bx = x * b;
  return where(gt(bx, cast(c.tensor("threshold"), x.dtype())), x, log1p(exp(bx)) / b);
}

Tensor clamp_bound(const Tensor& t, const Call& c, std::string_view name, bool lower) {
  if (!c.has(name)) return t;
  const Tensor bound = cast(c.tensor(name), t.dtype());
  return lower ? maximum(t, bound) : minimum(t, bound);
}

Results identity(const Call& c) { return one(c.tensor("self")); }

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
  {"aten::bitwise_not", [](const Call& c) {
     if (c.tensor("self").dtype() != DType::Bool) c.unsupported("bitwise_not of integers");
     return one(logical_not(c.tensor("self")));
   }},
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
  {"aten::clamp", [](const Call& c) { return one(clamp_bound(clamp_bound(c.tensor("self"), c, "min", true), c, "max", false)); }},
  {"aten::clamp_min", [](const Call& c) { return one(clamp_bound(c.tensor("self"), c, "min", true)); }},
  {"aten::clamp_max", [](const Call& c) { return one(clamp_bound(c.tensor("self"), c, "max", false)); }},
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
  {"aten::std", [](const Call& c) { return one(lazyjit::std(c.tensor("self"), dims_of(c), unbiased(c), keepdim(c))); }},
  {"aten::cumsum", [](const Call& c) { return one(cumsum(with_dtype(c, c.tensor("self")), c.integer("dim"))); }},
  {"aten::cumprod", [](const Call& c) { return one(cumprod(with_dtype(c, c.tensor("self")), c.integer("dim"))); }},
  {"aten::_softmax", [](const Call& c) { return one(softmax(c.tensor("self"), c.integer("dim"))); }},
  {"aten::softmax", [](const Call& c) { return one(softmax(with_dtype(c, c.tensor("self")), c.integer("dim"))); }},
  {"aten::_log_softmax", [](const Call& c) { return one(log_softmax(c.tensor("self"), c.integer("dim"))); }},
  {"aten::log_softmax", [](const Call& c) { return one(log_softmax(with_dtype(c, c.tensor("self")), c.integer("dim"))); }},
  {"aten::_softmax_backward_data", [](const Call& c) { return softmax_backward(c, false); }},
  {"aten::_log_softmax_backward_data", [](const Call& c) { return softmax_backward(c, true); }},
  // Losses.
  {"aten::nll_loss_forward", nll_loss_forward},
  {"aten::nll_loss_backward", nll_loss_backward},
  {"aten::mse_loss", [](const Call& c) {
     const Tensor d = c.tensor("self") - c.tensor("target");
     const int64_t reduction = c.integer("reduction");
     return one(reduction == 0 ? d * d : reduction == 1 ? mean(d * d) : sum(d * d));
   }},
  {"aten::mse_loss_backward", [](const Call& c) {
     const Tensor d = c.tensor("self") - c.tensor("target");
     Tensor g = Scalar(2.0) * d * cast(c.tensor("grad_output"), d.dtype());
     return one(c.integer("reduction") == 1 ? g / Scalar(static_cast<double>(d.numel())) : g);
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
  // Views (functionalised: the *_copy ops) and data movement.
  {"aten::view", [](const Call& c) { return one(reshape(c.tensor("self"), c.ints("size"))); }},
  {"aten::view_copy", [](const Call& c) { return one(reshape(c.tensor("self"), c.ints("size"))); }},
  {"aten::reshape", [](const Call& c) { return one(reshape(c.tensor("self"), c.ints("shape"))); }},
  {"aten::_unsafe_view", [](const Call& c) { return one(reshape(c.tensor("self"), c.ints("size"))); }},
  {"aten::t", [](const Call& c) { const Tensor t = c.tensor("self"); return one(t.dim() < 2 ? t : transpose(t, 0, 1)); }},
  {"aten::t_copy", [](const Call& c) { const Tensor t = c.tensor("self"); return one(t.dim() < 2 ? t : transpose(t, 0, 1)); }},
  {"aten::transpose", [](const Call& c) { return one(transpose(c.tensor("self"), c.integer("dim0"), c.integer("dim1"))); }},
  {"aten::transpose_copy", [](const Call& c) { return one(transpose(c.tensor("self"), c.integer("dim0"), c.integer("dim1"))); }},
  {"aten::permute", [](const Call& c) { return one(permute(c.tensor("self"), c.ints("dims"))); }},
  {"aten::permute_copy", [](const Call& c) { return one(permute(c.tensor("self"), c.ints("dims"))); }},
  {"aten::expand", [](const Call& c) { return one(expand(c.tensor("self"), c.ints("size"))); }},
  {"aten::expand_copy", [](const Call& c) { return one(expand(c.tensor("self"), c.ints("size"))); }},
  {"aten::squeeze", [](const Call& c) { return one(c.has("dim") ? squeeze(c.tensor("self"), c.integer("dim")) : squeeze_all(c.tensor("self"))); }},
  {"aten::squeeze_copy", [](const Call& c) { return one(c.has("dim") ? squeeze(c.tensor("self"), c.integer("dim")) : squeeze_all(c.tensor("self"))); }},
  {"aten::unsqueeze", [](const Call& c) { return one(unsqueeze(c.tensor("self"), c.integer("dim"))); }},
  {"aten::unsqueeze_copy", [](const Call& c) { return one(unsqueeze(c.tensor("self"), c.integer("dim"))); }},
  {"aten::slice", [](const Call& c) {
     return one(slice(c.tensor("self"), c.integer("dim"), c.has("start") ? c.integer("start") : 0,
                      c.has("end") ? c.integer("end") : std::numeric_limits<int64_t>::max(), c.integer("step")));
   }},
  {"aten::slice_copy", [](const Call& c) {
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
  {"aten::select_copy", select},
  {"aten::alias", identity}, {"aten::alias_copy", identity}, {"aten::clone", identity}, {"aten::detach", identity},
  {"aten::detach_copy", identity}, {"aten::contiguous", identity}, {"aten::lift_fresh_copy", identity},
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
  {"aten::arange", [](const Call& c) {
     const std::optional<double> start = c.constant_number("start"), end = c.constant_number("end"), step = c.constant_number("step");
     if (!start || !end || !step || *step == 0) c.unsupported("bounds that are not constants");
     const DType dtype = c.dtype("dtype").value_or(c.result_dtype().value_or(DType::Int64));
     const int64_t n = std::max<int64_t>(0, static_cast<int64_t>(std::ceil((*end - *start) / *step)));
     // As PyTorch: element i is start + i * step, computed in double, then converted.
     return one(cast(arange(n, DType::Float64) * Scalar(*step) + Scalar(*start), dtype));
   }},
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
     return Results{max_pool(c, x), unread ? zeros(max_pool(c, x).shape(), DType::Int64) : max_pool_indices(c, x)};
   }},
  {"aten::max_pool2d_with_indices_backward", [](const Call& c) {
     const Tensor x = c.tensor("self");
     return vjp(max_pool(c, x), {x}, c.tensor("grad_output"));
   }},
  {"aten::avg_pool2d", [](const Call& c) {
     if (c.has("divisor_override")) c.unsupported("divisor_override");
     check_pool_args(c);
     const Size2 kernel = pair(c, "kernel_size", 1);
     return one(avg_pool2d(c.tensor("self"), kernel, pair(c, "stride", kernel), pair(c, "padding", 0), c.boolean("count_include_pad")));
   }},
  {"aten::avg_pool2d_backward", [](const Call& c) {
     if (c.has("divisor_override")) c.unsupported("divisor_override");
     check_pool_args(c);
     const Tensor x = c.tensor("self");
     const Size2 kernel = pair(c, "kernel_size", 1);
     return vjp(avg_pool2d(x, kernel, pair(c, "stride", kernel), pair(c, "padding", 0), c.boolean("count_include_pad")), {x},
                c.tensor("grad_output"));
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
  return it == table.end() ? nullptr : it->second;
}

}  // namespace lazyjit::ltc

// The op table's derivatives: expands the LAZYJIT_VJP and LAZYJIT_NO_VJP lines of ir/ops.def,
// with the helpers the longer rules call.
#include "autograd/vjp.h"

#include <array>
#include <cmath>
#include <numeric>

#include "fmt/format.h"
#include "ir/collectives.h"
#include "ir/structured.h"
#include "lazyjit/collectives.h"
#include "lazyjit/error.h"
#include "lazyjit/ops.h"
#include "runtime/tensor_impl.h"

namespace lazyjit {
namespace detail {
Tensor make_pending(ir::NodePtr node);
}

namespace autograd {
namespace {

/// `g` where `wins`, half of it where `ties`, else 0: the share of maximum(a, b) (or minimum)
/// that goes to one operand, as PyTorch splits ties.
Tensor tie_split(const Tensor& g, const Tensor& wins, const Tensor& ties) {
  return where(wins, g, where(ties, g * 0.5, 0.0));
}

/// clamp(a, lo, hi) = min(max(a, lo), hi), so g goes to hi where max(a, lo) > hi, else to lo
/// where a < lo, else to a.
std::vector<Tensor> clamp_backward(const Tensor& g, const Tensor& a, const Tensor& lo, const Tensor& hi) {
  const Tensor to_hi = gt(where(lt(a, lo), lo, a), hi);
  const Tensor to_lo = logical_and(logical_not(to_hi), lt(a, lo));
  const Tensor to_a = logical_not(logical_or(to_hi, to_lo));
  return {where(to_a, g, 0.0), where(to_lo, g, 0.0), where(to_hi, g, 0.0)};
}

/// amax/amin over node's dims: g goes to the elements equal to the result, shared by ties.
Tensor extremum_backward(const Tensor& g, const Tensor& a, const Tensor& y, const ir::Node& node) {
  const std::vector<int64_t> dims(node.attrs().begin(), node.attrs().end());
  const Tensor hit = eq(a, y);
  const Tensor count = sum(hit, dims, /*keepdim=*/true).to(g.dtype());
  return where(hit, g / count, 0.0);
}

/// Whether t is a transposed view: its last two dims swapped, others in place.
bool is_transposed_view(const Tensor& t) { return ir::is_transpose(*t.impl()->ir_value()); }

Tensor mT(const Tensor& t) { return transpose(t, -1, -2); }

/// The cotangents of matmul's operands, g @ b^T and a^T @ g. When an operand is itself a
/// transposed view (x @ w.T in a linear layer), its cotangent is written transposed, (w^T)'s
/// as (g^T @ a)^T: the view's own rule then cancels the transpose and the product is stored
/// in the layout of w, which its update reads. A convolution's weight gradient, g @ window^T,
/// is likewise (window @ g^T)^T, so that the window is read in place.
Tensor matmul_left(const Tensor& g, const Tensor& a, const Tensor& b) {
  // b a window read by rows (a convolution's weight gradient): its transpose would be packed
  // element by element at the window's stride, where b itself is read in place.
  if (!is_transposed_view(a) && ir::window_rows_base(*b.impl()->ir_value()) == nullptr) return matmul(g, mT(b));
  // Transposed: summed over a's broadcast batch dims first, so that the sum reads the product
  // in its own order (a fold over the transpose would read it at a stride).
  std::vector<int64_t> shape = a.shape();
  std::swap(shape[shape.size() - 1], shape[shape.size() - 2]);
  return mT(sum_to(matmul(b, mT(g)), shape));
}
/// A rank-2 right operand shared by a batch of left ones (a Linear layer over [batch, seq,
/// features]): the batch rows are more rows of one product, a^T @ g over all of them, instead
/// of a product per batch element summed afterwards.
Tensor matmul_right(const Tensor& g, const Tensor& a, const Tensor& b) {
  if (b.dim() == 2 && a.dim() > 2) {
    const Tensor rows = reshape(a, {-1, a.shape().back()}), grads = reshape(g, {-1, g.shape().back()});
    return is_transposed_view(b) ? mT(matmul(mT(grads), rows)) : matmul(mT(rows), grads);
  }
  return is_transposed_view(b) ? mT(matmul(mT(g), a)) : matmul(mT(a), g);
}

std::vector<int64_t> inverse_permutation(const ir::Node::Attrs& perm) {
  std::vector<int64_t> inverse(perm.size());
  for (size_t d = 0; d < perm.size(); ++d) inverse[perm[d]] = static_cast<int64_t>(d);
  return inverse;
}

/// The operand-shaped tensor that is g at the positions slice(dim, start, step) took and 0
/// elsewhere. With step s, the taken positions are every s-th from start: g is interleaved
/// with s-1 zero slabs (a new dim after `dim`, then merged), trimmed, and padded at both ends.
Tensor slice_backward(const Tensor& g, const Tensor& a, const ir::Node::Attrs& attrs) {
  const int64_t dim = attrs[0], start = attrs[1], step = attrs[2];
  const std::vector<int64_t> shape = a.shape();
  const int64_t count = g.shape()[dim];
  auto zeros_with = [&](int64_t d, int64_t size, std::vector<int64_t> like) {
    like[d] = size;
    return zeros(like, g.dtype());
  };
  Tensor spread = g;
  if (step > 1 && count > 0) {
    std::vector<int64_t> slabs = g.shape();
    slabs.insert(slabs.begin() + dim + 1, 1);
    const Tensor column = reshape(g, slabs);
    std::vector<int64_t> merged = g.shape();
    merged[dim] = count * step;
    spread = reshape(cat({column, zeros_with(dim + 1, step - 1, slabs)}, dim + 1), merged);
    spread = slice(spread, dim, 0, (count - 1) * step + 1);  // ends at the last taken element
  }
  const int64_t covered = spread.shape()[dim];
  std::vector<Tensor> parts;
  if (start > 0) parts.push_back(zeros_with(dim, start, shape));
  parts.push_back(spread);
  if (start + covered < shape[dim]) parts.push_back(zeros_with(dim, shape[dim] - start - covered, shape));
  return cat(parts, dim);
}

/// Operand i of cat filled the slice [offset_i, offset_i + size_i) of the result along dim.
std::vector<Tensor> cat_backward(const Tensor& g, const ir::Node& node) {
  const int64_t dim = node.attrs()[0];
  std::vector<Tensor> cotangents;
  int64_t offset = 0;
  for (const ir::NodePtr& operand : node.operands()) {
    const int64_t size = operand->shape()[dim];
    cotangents.push_back(slice(g, dim, offset, offset + size));
    offset += size;
  }
  return cotangents;
}

/// The cotangent of index_select's operand: slice i of g added into slice index[i] along the
/// dim (repeated indices add up in order): an index_add, O(g) work, no one-hot.
Tensor index_select_backward(const Tensor& g, const Tensor& a, const Tensor& index, const ir::Node& node) {
  const int64_t dim = node.attrs()[0];
  std::vector<int64_t> rows = a.shape();  // g with the index's dims as one
  rows[dim] = index.numel();
  return index_add(zeros(a.shape(), g.dtype()), dim, reshape(index, {-1}), reshape(g, rows));
}

/// `t` with zeros after it along each dim where it is shorter than `shape`.
Tensor pad_to(Tensor t, const std::vector<int64_t>& shape) {
  for (int64_t d = 0; d < t.dim(); ++d) {
    const int64_t short_by = shape[d] - t.shape()[d];
    if (short_by == 0) continue;
    std::vector<int64_t> pad = t.shape();
    pad[d] = short_by;
    t = cat({t, zeros(pad, t.dtype())}, d);
  }
  return t;
}

/// The cotangent of gather's operand: g[i] added into a[i with i[dim] = index[i]] (repeated
/// indices add up in order): a scatter_add, O(g) work.
Tensor gather_backward(const Tensor& g, const Tensor& a, const Tensor& index, const ir::Node& node) {
  return scatter_add(zeros(a.shape(), g.dtype()), node.attrs()[0], index, g);
}

/// The cotangent of a scatter's input: g, where a copy did not overwrite it.
Tensor scatter_backward(const Tensor& g, const Tensor& index, const Tensor& src, const ir::Node& node) {
  if (node.attrs()[1] == 1) return g;
  const int64_t dim = node.attrs()[0];
  if (node.op() == ir::OpKind::Scatter) return scatter(g, dim, index, zeros(index.shape(), g.dtype()));
  return index_copy(g, dim, index, zeros(src.shape(), g.dtype()));
}

/// The cotangent of a scatter's src: g where each element went (PyTorch's rule, also for
/// copies to one index), zero for the elements of src past the index.
Tensor scatter_src_backward(const Tensor& g, const Tensor& index, const Tensor& src, const ir::Node& node) {
  const int64_t dim = node.attrs()[0];
  if (node.op() == ir::OpKind::IndexScatter) return index_select(g, dim, index);
  return pad_to(gather(g, dim, index), src.shape());
}

// Collectives: the cotangents of every rank meet again, through the adjoint collective.
Tensor all_reduce_backward(const Tensor& g, const Tensor& a, const Tensor& y, const ir::Node& node) {
  const Tensor summed = dist::all_reduce(g, dist::ReduceOp::Sum);
  if (static_cast<ir::ReduceOp>(node.attrs()[0]) == ir::ReduceOp::Sum) return summed;
  return where(eq(a, y), summed, zeros(summed.shape(), summed.dtype()));  // to every rank holding the extreme
}

Tensor broadcast_backward(const Tensor& g, const ir::Node& node) {
  // Every rank's gradient depends on the all_reduce, so every rank runs it.
  const Tensor summed = dist::all_reduce(g, dist::ReduceOp::Sum);
  return where(full({}, dist::rank() == node.attrs()[0], DType::Bool), summed, zeros(summed.shape(), summed.dtype()));
}

Tensor collective_reduce_scatter(const Tensor& g, int64_t dim) { return dist::reduce_scatter(g, dim, dist::ReduceOp::Sum); }

Tensor reduce_scatter_backward(const Tensor& g, const ir::Node& node) {
  if (static_cast<ir::ReduceOp>(node.attrs()[0]) != ir::ReduceOp::Sum) {
    throw Error(fmt::format("reduce_scatter: no gradient through a {} reduction", ir::reduce_op_name(node.attrs()[0])));
  }
  return dist::all_gather(g, 0);
}

/// Sums along `dim` from the end: element i is the sum of elements i.. (cumsum's cotangent).
Tensor reverse_cumsum(const Tensor& g, int64_t dim) { return flip(cumsum(flip(g, {dim}), dim), {dim}); }

/// cumprod's cotangent, exact where a has zeros (as PyTorch): element k gets the sum over
/// j >= k of g[j] * (the product of a[0..j] without a[k]). Before a line's first zero that is
/// reverse_cumsum(g * y) / a; at the first zero, the same sum with a[k] taken as 1; after
/// it, 0 (every product then holds that zero).
Tensor cumprod_backward(const Tensor& g, const Tensor& a, const Tensor& y, const ir::Node& node) {
  const int64_t dim = node.attrs()[0];
  const Tensor zeros_so_far = cumsum(eq(a, 0.0), dim);
  const Tensor before = eq(zeros_so_far, 0);
  const Tensor first = logical_and(eq(a, 0.0), eq(zeros_so_far, 1));
  const Tensor plain = where(before, reverse_cumsum(g * y, dim) / where(before, a, 1.0), 0.0);
  const Tensor without = cumprod(where(first, 1.0, a), dim);
  const Tensor at_zero = sum(where(ge(zeros_so_far, 1), g * without, 0.0), {dim}, /*keepdim=*/true);
  return where(first, at_zero, plain);
}

/// prod's cotangent, exact at zeros as PyTorch's: the product of the others. In a slice
/// without zeros that is y / a; in one with a single zero, the zero's is the product of the
/// rest and the others' 0; with more zeros, all 0.
Tensor prod_backward(const Tensor& g, const Tensor& a, const Tensor& y, const ir::Node& node) {
  const std::vector<int64_t> dims(node.attrs().begin(), node.attrs().end());
  const Tensor is_zero = eq(a, 0.0);
  const Tensor zeros = sum(is_zero, dims, /*keepdim=*/true);
  const Tensor nonzero = where(is_zero, 1.0, a);
  const Tensor lone_zero = logical_and(is_zero, eq(zeros, 1));
  return where(eq(zeros, 0), g * y / nonzero, where(lone_zero, g * prod(nonzero, dims, /*keepdim=*/true), 0.0));
}

/// A sliding-window node over `x` (a pending tensor), with `attrs`; `shape` for a transpose.
Tensor window_node(ir::OpKind op, const Tensor& x, ir::Node::Attrs attrs, const ir::Shape* shape = nullptr) {
  absl::StatusOr<ir::NodePtr> node = ir::make_structured(op, {x.impl()->ir_value()}, std::move(attrs), shape);
  if (!node.ok()) throw Error(std::string(node.status().message()));
  return detail::make_pending(*std::move(node));
}

/// unfold's cotangent (col2im): each element of `a` gets the sum of g over the windows that
/// read it, the transpose view summed over window positions.
Tensor unfold_backward(const Tensor& g, const Tensor& a, const ir::Node& node) {
  const ir::Window w = ir::Window::of(node.attrs());
  const std::vector<int64_t> x = a.shape();
  const ir::Shape spread = {x[0], x[1], w.kh * w.kw, x[2], x[3]};
  return reshape(sum(window_node(ir::OpKind::UnfoldTranspose, g, node.attrs(), &spread), {2}), x);
}

/// unfold_transpose's cotangent: its transpose, an unfold that reads window position r of
/// g's slice r alone: the unfold of g with a group per (channel, position), whose diagonal
/// (position read == slice) a strided slice takes.
Tensor unfold_transpose_backward(const Tensor& g, const Tensor& a, const ir::Node& node) {
  const std::vector<int64_t> s = g.shape();  // [N, C, kk, H, W]
  const int64_t kk = s[2];
  ir::Node::Attrs attrs = node.attrs();
  attrs[0] = s[1] * kk;
  const Tensor windows = window_node(ir::OpKind::Unfold, reshape(g, {s[0], s[1] * kk, s[3], s[4]}), attrs);
  const int64_t oh = windows.shape()[3], ow = windows.shape()[4];
  const Tensor diagonal = slice(reshape(windows, {s[0], s[1], kk * kk, oh, ow}), 2, 0, kk * kk, kk + 1);
  return reshape(diagonal, a.shape());
}

}  // namespace

Differentiability differentiability(ir::OpKind op) {
  static constexpr auto kTable = [] {
    std::array<Differentiability, ir::kNumOps> table;
    table.fill(Differentiability::Missing);
    auto at = [&](ir::OpKind op) -> Differentiability& { return table[static_cast<size_t>(op)]; };
#define LAZYJIT_OP(name, text, arity, dtype_rule, admits, kind) \
  if (ir::AccessPattern::kind == ir::AccessPattern::Leaf) at(ir::OpKind::name) = Differentiability::Leaf;
#define LAZYJIT_VJP(name, ...) at(ir::OpKind::name) = Differentiability::Rule;
#define LAZYJIT_NO_VJP(name, reason) at(ir::OpKind::name) = Differentiability::NotDifferentiable;
#include "ir/ops.def"
    return table;
  }();
  return kTable[static_cast<size_t>(op)];
}

const char* not_differentiable_reason(ir::OpKind op) {
  switch (op) {
#define LAZYJIT_OP(name, text, arity, dtype_rule, admits, kind)
#define LAZYJIT_NO_VJP(name, reason) \
  case ir::OpKind::name:             \
    return reason;
#include "ir/ops.def"
    default: return "it has no derivative";
  }
}

std::vector<Tensor> vjp(const ir::NodePtr& result, const Tensor& g) {
  const ir::Node& node = *result;
  std::vector<Tensor> operands;
  for (const ir::NodePtr& operand : node.operands()) operands.push_back(detail::make_pending(operand));
  operands.resize(std::max<size_t>(operands.size(), 3));
  [[maybe_unused]] const Tensor &a = operands[0], &b = operands[1], &c = operands[2];
  [[maybe_unused]] const Tensor y = detail::make_pending(result);
  switch (node.op()) {
#define LAZYJIT_OP(name, text, arity, dtype_rule, admits, kind)
#define LAZYJIT_VJP(name, ...) \
  case ir::OpKind::name:       \
    return {__VA_ARGS__};
#include "ir/ops.def"
    default: return {};  // leaves and ops that are not differentiable
  }
}

Tensor sum_to(const Tensor& g, std::span<const int64_t> shape) {
  const std::vector<int64_t> from = g.shape();
  const int64_t extra = static_cast<int64_t>(from.size()) - static_cast<int64_t>(shape.size());
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < static_cast<int64_t>(from.size()); ++d) {
    if (d < extra || (shape[d - extra] == 1 && from[d] != 1)) dims.push_back(d);
  }
  const Tensor summed = dims.empty() ? g : sum(g, dims, /*keepdim=*/true);
  return reshape(summed, std::vector<int64_t>(shape.begin(), shape.end()));
}

}  // namespace autograd
}  // namespace lazyjit

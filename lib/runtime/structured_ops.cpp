// The public reductions, normalisations, matmul, views and random tensors: PyTorch's
// argument conventions (negative dims, keepdim, -1 in shapes, Python slice bounds) are
// resolved here, then one IR node is traced (ir/structured.h checks it).
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "fmt/format.h"
#include "fmt/ranges.h"
#include "ir/builder.h"
#include "ir/structured.h"
#include "ir/types.h"
#include "lazyjit/error.h"
#include "lazyjit/ops.h"
#include "runtime/tensor_impl.h"
#include "runtime/traced_node.h"

namespace lazyjit {
namespace {

using ir::OpKind;
using traced::check;
using traced::pending;
using traced::value_of;
using traced::wrap_dim;

std::string text(std::span<const int64_t> v) { return fmt::format("[{}]", fmt::join(v, ", ")); }


/// A dim of a tensor of rank `rank`, where a rank-0 tensor accepts -1 and 0, as in PyTorch.
int64_t wrap_dim_of(std::string_view op, int64_t dim, int64_t rank) {
  return wrap_dim(op, dim, std::max<int64_t>(rank, 1), rank);
}

/// Ascending, distinct dims in [0, rank); empty `dims` means all of them.
ir::Node::Attrs reduced_dims(std::string_view op, const std::vector<int64_t>& dims, int64_t rank) {
  ir::Node::Attrs out;
  if (dims.empty()) {
    for (int64_t d = 0; d < rank; ++d) out.push_back(d);
    return out;
  }
  for (int64_t d : dims) out.push_back(wrap_dim_of(op, d, rank));
  std::sort(out.begin(), out.end());
  if (std::adjacent_find(out.begin(), out.end()) != out.end()) {
    throw Error(fmt::format("{}: dims {} name a dim twice", op, text(dims)));
  }
  if (rank == 0) out.clear();  // a scalar reduces over dim 0 or -1 to itself
  return out;
}

ir::NodePtr reshape_node(ir::NodePtr x, ir::Shape shape) {
  if (x->shape() == shape) return x;
  return check(ir::make_structured(OpKind::Reshape, {std::move(x)}, {}, &shape));
}

/// `node` (keepdim shape) with the reduced dims dropped unless `keepdim`.
ir::NodePtr finish_reduce(ir::NodePtr node, const ir::Node::Attrs& dims, bool keepdim) {
  if (keepdim) return node;
  ir::Shape shape;
  for (int64_t d = 0; d < node->rank(); ++d) {
    if (!std::binary_search(dims.begin(), dims.end(), d)) shape.push_back(node->shape()[d]);
  }
  return reshape_node(std::move(node), std::move(shape));
}

/// Fold `op` (a row with a LAZYJIT_FOLD rule) over `dims` (PyTorch's conventions).
ir::NodePtr reduce(OpKind op, ir::NodePtr x, const std::vector<int64_t>& dims, bool keepdim) {
  const ir::OpInfo& info = ir::op_info(op);
  if (info.admits == ir::Admits::Bool && x->dtype() != DType::Bool) x = ir::make_cast(std::move(x), DType::Bool);
  const ir::Node::Attrs attrs = reduced_dims(info.name, dims, x->rank());
  if (attrs.empty()) {  // nothing to fold: a sum still converts to its dtype
    return info.dtype_rule == ir::DTypeRule::Sum && !is_floating(x->dtype()) ? ir::make_cast(std::move(x), DType::Int64)
                                                                              : x;
  }
  return finish_reduce(check(ir::make_structured(op, {std::move(x)}, attrs)), attrs, keepdim);
}

ir::NodePtr elementwise(OpKind op, std::initializer_list<ir::NodePtr> operands) {
  return check(ir::make_elementwise(op, std::span(operands.begin(), operands.size())));
}

ir::NodePtr number(double value, DType dtype) { return ir::make_scalar(Scalar(value), dtype); }

/// The element count of `dims` of `x` (the divisor of mean), as a runtime scalar.
ir::NodePtr count_of(const ir::NodePtr& x, const ir::Node::Attrs& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= x->shape()[d];
  return number(static_cast<double>(n), x->dtype());
}

ir::NodePtr unsqueeze_node(ir::NodePtr x, int64_t dim) {
  ir::Shape shape = x->shape();
  shape.insert(shape.begin() + dim, 1);
  return reshape_node(std::move(x), std::move(shape));
}

ir::NodePtr squeeze_node(ir::NodePtr x, int64_t dim) {
  ir::Shape shape = x->shape();
  shape.erase(shape.begin() + dim);
  return reshape_node(std::move(x), std::move(shape));
}

ir::Shape to_shape(const std::vector<int64_t>& v) { return ir::Shape(v.begin(), v.end()); }

}  // namespace

Tensor rand(std::vector<int64_t> shape, uint64_t seed, DType dtype) {
  if (!is_floating(dtype)) throw Error(fmt::format("rand: dtype {} is not a float dtype", dtype_name(dtype)));
  if (absl::Status s = ir::validate_dims("rand", shape); !s.ok()) throw Error(std::string(s.message()));
  return pending(ir::make_random(OpKind::Rand, static_cast<int64_t>(seed), dtype, to_shape(shape)));
}

Tensor randn(std::vector<int64_t> shape, uint64_t seed, DType dtype) {
  if (!is_floating(dtype)) throw Error(fmt::format("randn: dtype {} is not a float dtype", dtype_name(dtype)));
  if (absl::Status s = ir::validate_dims("randn", shape); !s.ok()) throw Error(std::string(s.message()));
  return pending(ir::make_random(OpKind::Randn, static_cast<int64_t>(seed), dtype, to_shape(shape)));
}

Tensor sum(const Tensor& t, std::vector<int64_t> dims, bool keepdim) {
  return pending(reduce(OpKind::Sum, value_of(t, "sum"), dims, keepdim));
}

Tensor mean(const Tensor& t, std::vector<int64_t> dims, bool keepdim) {
  ir::NodePtr x = value_of(t, "mean");
  if (!is_floating(x->dtype())) {
    throw Error(fmt::format("mean: input dtype {} is not a float dtype; convert it first with .to(DType::Float32)",
                            dtype_name(x->dtype())));
  }
  const ir::Node::Attrs attrs = reduced_dims("mean", dims, x->rank());
  if (attrs.empty()) return pending(x);
  ir::NodePtr total = check(ir::make_structured(OpKind::Sum, {x}, attrs));
  ir::NodePtr average = elementwise(OpKind::Div, {std::move(total), count_of(x, attrs)});
  return pending(finish_reduce(std::move(average), attrs, keepdim));
}

Tensor prod(const Tensor& t, std::vector<int64_t> dims, bool keepdim) {
  return pending(reduce(OpKind::Prod, value_of(t, "prod"), dims, keepdim));
}

Tensor amax(const Tensor& t, std::vector<int64_t> dims, bool keepdim) {
  return pending(reduce(OpKind::Amax, value_of(t, "amax"), dims, keepdim));
}

Tensor amin(const Tensor& t, std::vector<int64_t> dims, bool keepdim) {
  return pending(reduce(OpKind::Amin, value_of(t, "amin"), dims, keepdim));
}

Tensor any(const Tensor& t, std::vector<int64_t> dims, bool keepdim) {
  return pending(reduce(OpKind::Any, value_of(t, "any"), dims, keepdim));
}

Tensor all(const Tensor& t, std::vector<int64_t> dims, bool keepdim) {
  return pending(reduce(OpKind::All, value_of(t, "all"), dims, keepdim));
}

Tensor argmax(const Tensor& t, int64_t dim, bool keepdim) {
  ir::NodePtr x = value_of(t, "argmax");
  const ir::Node::Attrs attrs = {wrap_dim_of("argmax", dim, x->rank())};
  if (x->rank() == 0) return pending(ir::make_scalar(ir::ScalarValue::of_int(0), DType::Int64, {}));
  return pending(finish_reduce(check(ir::make_structured(OpKind::Argmax, {std::move(x)}, attrs)), attrs, keepdim));
}

Tensor argmin(const Tensor& t, int64_t dim, bool keepdim) {
  const ir::NodePtr x = value_of(t, "argmin");
  if (x->dtype() == DType::Bool) throw Error("argmin: bool operands are not supported");
  dim = wrap_dim_of("argmin", dim, x->rank());
  // The first minimum is the first maximum of an order-reversing map: -x for floats (NaN
  // stays the extremum), -1 - x for integers (no overflow: it maps [min, max] onto [max, min]).
  return argmax(is_floating(x->dtype()) ? -t : -1 - t, dim, keepdim);
}

namespace {
/// The elements of `t` at `indices` (of a keepdim fold along dim): their gradient goes to
/// those elements alone, as PyTorch's max and min give it to the index they return (amax's
/// splits it among ties).
ValuesIndices at_indices(const Tensor& t, const Tensor& indices, int64_t dim, bool keepdim) {
  if (t.dim() == 0) return {t, reshape(indices, {})};
  const Tensor values = gather(t, dim, indices);
  return keepdim ? ValuesIndices{values, indices} : ValuesIndices{squeeze(values, dim), squeeze(indices, dim)};
}

/// max and min along a dim have no identity: a dim of 0 elements is an error naming them.
void expect_elements(std::string_view op, const Tensor& t, int64_t dim) {
  if (t.dim() > 0 && t.shape()[static_cast<size_t>(dim)] == 0) {
    throw Error(fmt::format("{}: cannot reduce dim {} of size 0 (shape {}): there is no identity", op, dim,
                            ir::shape_to_string(t.shape())));
  }
}
}  // namespace

ValuesIndices max(const Tensor& t, int64_t dim, bool keepdim) {
  dim = wrap_dim_of("max", dim, value_of(t, "max")->rank());
  expect_elements("max", t, dim);
  return at_indices(t, argmax(t, dim, /*keepdim=*/true), dim, keepdim);
}

ValuesIndices min(const Tensor& t, int64_t dim, bool keepdim) {
  dim = wrap_dim_of("min", dim, value_of(t, "min")->rank());
  expect_elements("min", t, dim);
  return at_indices(t, argmin(t, dim, /*keepdim=*/true), dim, keepdim);
}

ValuesIndices topk(const Tensor& t, int64_t k, int64_t dim) {
  const ir::NodePtr x = value_of(t, "topk");
  if (x->dtype() == DType::Bool) throw Error("topk: bool operands are not supported");
  dim = wrap_dim_of("topk", dim, x->rank());
  const int64_t size = x->rank() == 0 ? 1 : x->shape()[dim];
  if (k < 0 || k > size) throw Error(fmt::format("topk: k {} is out of range for a dim of size {}", k, size));
  if (x->rank() == 0) return {t, zeros({}, DType::Int64)};
  // Each round takes the first untaken position holding the largest untaken value (NaN
  // included), so that ties and the integer minimum never pick a position twice.
  std::vector<int64_t> positions(static_cast<size_t>(x->rank()), 1);
  positions[dim] = size;
  const Tensor position = reshape(arange(size), positions);
  const bool floating = is_floating(x->dtype());
  const Tensor is_nan = floating ? ne(t, t) : Tensor();
  const Scalar lowest_value = floating ? Scalar(-std::numeric_limits<double>::infinity())
                             : x->dtype() == DType::Int32 ? Scalar(int64_t{std::numeric_limits<int32_t>::min()})
                                                          : Scalar(std::numeric_limits<int64_t>::min());
  const Tensor lowest = full({}, lowest_value, x->dtype());
  Tensor taken = zeros(t.shape(), DType::Bool);
  std::vector<Tensor> picks;
  for (int64_t round = 0; round < k; ++round) {
    const Tensor best = amax(where(taken, lowest, t), {dim}, /*keepdim=*/true);
    Tensor equal = eq(t, best);
    if (floating) equal = logical_or(equal, logical_and(is_nan, ne(best, best)));  // NaN equals nothing
    const Tensor hit = logical_and(logical_not(taken), equal);
    const Tensor pick = argmax(hit.to(DType::Int32), dim, /*keepdim=*/true);
    taken = logical_or(taken, eq(position, pick));
    picks.push_back(pick);
  }
  std::vector<int64_t> none = t.shape();
  none[dim] = 0;
  const Tensor indices = k == 0 ? zeros(none, DType::Int64) : cat(picks, dim);
  return {gather(t, dim, indices), indices};
}

Tensor var(const Tensor& t, std::vector<int64_t> dims, bool unbiased, bool keepdim) {
  ir::NodePtr x = value_of(t, "var");
  if (!is_floating(x->dtype())) {
    throw Error(fmt::format("var: input dtype {} is not a float dtype; convert it first with .to(DType::Float32)",
                            dtype_name(x->dtype())));
  }
  const ir::Node::Attrs attrs = reduced_dims("var", dims, x->rank());
  int64_t n = 1;
  for (int64_t d : attrs) n *= x->shape()[d];
  const Tensor centred = t - mean(t, dims, /*keepdim=*/true);
  // Over fewer than two elements the unbiased estimate is 0 / 0: NaN, as PyTorch (whose
  // divisor is max(0, n - correction): over none, 0 / -1 would be -0).
  return sum(centred * centred, dims, keepdim) / static_cast<double>(std::max<int64_t>(n - (unbiased ? 1 : 0), 0));
}

Tensor std(const Tensor& t, std::vector<int64_t> dims, bool unbiased, bool keepdim) {
  if (t.defined() && !is_floating(t.dtype())) {
    throw Error(fmt::format("std: input dtype {} is not a float dtype; convert it first with .to(DType::Float32)",
                            dtype_name(t.dtype())));
  }
  return sqrt(var(t, std::move(dims), unbiased, keepdim));
}

namespace {

/// x minus its maximum along `dim` (keepdim), in x's float dtype: the stable core of softmax.
std::pair<ir::NodePtr, ir::Node::Attrs> shifted(std::string_view op, const Tensor& t, int64_t dim) {
  ir::NodePtr x = value_of(t, op);
  if (!is_floating(x->dtype())) x = ir::make_cast(std::move(x), DType::Float32);
  const ir::Node::Attrs attrs = {wrap_dim_of(op, dim, x->rank())};
  if (x->rank() == 0 || x->shape()[attrs[0]] == 0) return {std::move(x), {}};
  // The shift cancels out of the result, so its exact gradient is zero: autograd skips it.
  ir::NodePtr max = ir::make_stop_gradient(check(ir::make_structured(OpKind::Amax, {x}, attrs)));
  return {elementwise(OpKind::Sub, {std::move(x), std::move(max)}), attrs};
}

}  // namespace

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, bool is_causal,
                                    double scale) {
  const char* op = "scaled_dot_product_attention";
  for (const Tensor* t : {&q, &k, &v}) {
    const ir::NodePtr x = value_of(*t, op);
    if (x->rank() < 2 || !is_floating(x->dtype())) {
      throw Error(fmt::format("{}: q, k and v must be floating tensors of rank 2 or more, got {}", op,
                              ir::shape_to_string(x->shape())));
    }
  }
  const int64_t embed = q.shape().back(), length = q.shape()[q.dim() - 2], source = k.shape()[k.dim() - 2];
  if (k.shape().back() != embed || v.shape()[v.dim() - 2] != source) {
    throw Error(fmt::format("{}: q {}, k {} and v {} do not fit [..., L, E], [..., S, E], [..., S, Ev]", op,
                            text(q.shape()), text(k.shape()), text(v.shape())));
  }
  if (!(scale >= 0)) throw Error(fmt::format("{}: scale {} is negative", op, scale));
  const double factor = scale > 0 ? scale : 1.0 / std::sqrt(static_cast<double>(embed));
  Tensor scores = matmul(q, transpose(k, -2, -1)) * factor;
  if (is_causal) {
    const Tensor later = gt(reshape(arange(source), {1, source}), reshape(arange(length), {length, 1}));
    scores = masked_fill(scores, later, -std::numeric_limits<double>::infinity());
  }
  return matmul(softmax(scores, -1), v);
}

Tensor softmax(const Tensor& t, int64_t dim) {
  auto [z, attrs] = shifted("softmax", t, dim);
  if (attrs.empty()) return pending(z->rank() == 0 ? number(1.0, z->dtype()) : z);  // empty or rank 0
  ir::NodePtr e = elementwise(OpKind::Exp, {std::move(z)});
  ir::NodePtr total = check(ir::make_structured(OpKind::Sum, {e}, attrs));
  // Times the reciprocal, as PyTorch's kernel does: one division per row, not per element.
  ir::NodePtr reciprocal = elementwise(OpKind::Div, {number(1.0, total->dtype()), std::move(total)});
  return pending(elementwise(OpKind::Mul, {std::move(e), std::move(reciprocal)}));
}

Tensor log_softmax(const Tensor& t, int64_t dim) {
  auto [z, attrs] = shifted("log_softmax", t, dim);
  if (attrs.empty()) return pending(z->rank() == 0 ? number(0.0, z->dtype()) : z);
  ir::NodePtr total = check(ir::make_structured(OpKind::Sum, {elementwise(OpKind::Exp, {z})}, attrs));
  return pending(elementwise(OpKind::Sub, {z, elementwise(OpKind::Log, {std::move(total)})}));
}

Tensor layer_norm(const Tensor& input, int64_t normalized_ndim, const Tensor& gamma, const Tensor& beta, double eps) {
  ir::NodePtr x = value_of(input, "layer_norm");
  if (normalized_ndim < 1 || normalized_ndim > x->rank()) {
    throw Error(fmt::format("layer_norm: normalized_ndim {} must be in [1, {}] for input shape {}", normalized_ndim,
                            x->rank(), ir::shape_to_string(x->shape())));
  }
  if (!is_floating(x->dtype())) {
    throw Error(fmt::format("layer_norm: input dtype {} is not a float dtype", dtype_name(x->dtype())));
  }
  const ir::Shape normalized(x->shape().end() - normalized_ndim, x->shape().end());
  for (const auto& [name, p] : {std::pair{"gamma", &gamma}, std::pair{"beta", &beta}}) {
    if (!p->defined()) continue;
    const std::vector<int64_t> shape = p->shape();
    if (ir::Shape(shape.begin(), shape.end()) != normalized) {
      throw Error(fmt::format("layer_norm: {} has shape {}, expected the normalized shape {}", name, text(shape),
                              ir::shape_to_string(normalized)));
    }
  }
  ir::Node::Attrs attrs;
  for (int64_t d = x->rank() - normalized_ndim; d < x->rank(); ++d) attrs.push_back(d);
  if (ir::numel(normalized) == 0) return pending(x);
  ir::NodePtr n = count_of(x, attrs);
  ir::NodePtr mean = elementwise(OpKind::Div, {check(ir::make_structured(OpKind::Sum, {x}, attrs)), n});
  ir::NodePtr centred = elementwise(OpKind::Sub, {x, std::move(mean)});
  ir::NodePtr squares = elementwise(OpKind::Mul, {centred, centred});
  ir::NodePtr var = elementwise(OpKind::Div, {check(ir::make_structured(OpKind::Sum, {std::move(squares)}, attrs)), n});
  ir::NodePtr scale = elementwise(OpKind::Rsqrt, {elementwise(OpKind::Add, {std::move(var), number(eps, x->dtype())})});
  ir::NodePtr y = elementwise(OpKind::Mul, {std::move(centred), std::move(scale)});
  if (gamma.defined()) y = elementwise(OpKind::Mul, {std::move(y), value_of(gamma, "layer_norm")});
  if (beta.defined()) y = elementwise(OpKind::Add, {std::move(y), value_of(beta, "layer_norm")});
  return pending(std::move(y));
}

Tensor matmul(const Tensor& ta, const Tensor& tb) {
  ir::NodePtr a = value_of(ta, "matmul"), b = value_of(tb, "matmul");
  if (a->rank() == 0 || b->rank() == 0) {
    throw Error(fmt::format("matmul: both operands need at least one dim, got shapes {} and {}",
                            ir::shape_to_string(a->shape()), ir::shape_to_string(b->shape())));
  }
  const DType dtype = ir::promote_types(a->dtype(), b->dtype());
  if (dtype == DType::Bool) throw Error("matmul: bool operands are not supported");
  a = ir::make_cast(std::move(a), dtype);
  b = ir::make_cast(std::move(b), dtype);
  const bool row = a->rank() == 1, column = b->rank() == 1;
  if (row) a = unsqueeze_node(std::move(a), 0);
  if (column) b = unsqueeze_node(std::move(b), 1);
  ir::NodePtr product = check(ir::make_structured(OpKind::Matmul, {std::move(a), std::move(b)}, {}));
  if (column) product = squeeze_node(std::move(product), product->rank() - 1);
  if (row) product = squeeze_node(std::move(product), product->rank() - (column ? 1 : 2));
  return pending(std::move(product));
}

Tensor reshape(const Tensor& t, std::vector<int64_t> shape) {
  ir::NodePtr x = value_of(t, "reshape");
  int inferred = -1;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == -1 && inferred < 0) {
      inferred = static_cast<int>(d);
    } else if (shape[d] < 0) {
      throw Error(fmt::format("reshape: invalid shape {} (one dim may be -1, others must be >= 0)", text(shape)));
    }
  }
  // The dims as written (the -1 counted as 1) must be valid before any is computed, so every
  // message quotes the user's shape and the product below cannot overflow.
  std::vector<int64_t> known_dims = shape;
  if (inferred >= 0) known_dims[inferred] = 1;
  if (known_dims.size() > ir::kMaxRank) {
    throw Error(fmt::format("reshape: shape {} has rank {}, past the maximum of {}", text(shape), shape.size(),
                            ir::kMaxRank));
  }
  if (!ir::validate_dims("reshape", known_dims).ok()) {
    throw Error(fmt::format("reshape: shape {} has too many elements", text(shape)));
  }
  const int64_t known = ir::numel(known_dims), n = ir::numel(x->shape());
  if (inferred >= 0) {
    if (known == 0 || n % known != 0) {
      throw Error(fmt::format("reshape: shape {} is invalid for a tensor of {} elements (shape {})", text(shape), n,
                              ir::shape_to_string(x->shape())));
    }
    shape[inferred] = n / known;
  }
  return pending(reshape_node(std::move(x), to_shape(shape)));
}

Tensor permute(const Tensor& t, std::vector<int64_t> dims) {
  ir::NodePtr x = value_of(t, "permute");
  if (static_cast<int64_t>(dims.size()) != x->rank()) {
    throw Error(fmt::format("permute: {} dims given for a tensor of rank {}", dims.size(), x->rank()));
  }
  ir::Node::Attrs perm;
  for (int64_t d : dims) perm.push_back(wrap_dim("permute", d, x->rank()));
  if (x->op() == OpKind::Permute) {  // a permutation of a permutation is one (or none)
    for (int64_t& d : perm) d = x->attrs()[d];
    x = x->operands()[0];
  }
  bool identity = true;
  for (size_t d = 0; d < perm.size(); ++d) identity = identity && perm[d] == static_cast<int64_t>(d);
  if (identity) return pending(std::move(x));
  auto node = ir::make_structured(OpKind::Permute, {std::move(x)}, std::move(perm));
  if (!node.ok()) throw Error(fmt::format("permute: dims {} are not a permutation", text(dims)));
  return pending(*std::move(node));
}

Tensor flip(const Tensor& t, std::vector<int64_t> dims) {
  ir::NodePtr x = value_of(t, "flip");
  if (dims.empty()) return pending(x);
  ir::Node::Attrs attrs = reduced_dims("flip", dims, x->rank());
  if (attrs.empty()) return pending(x);  // a scalar
  return pending(check(ir::make_structured(OpKind::Flip, {std::move(x)}, std::move(attrs))));
}

Tensor transpose(const Tensor& t, int64_t dim0, int64_t dim1) {
  const int64_t rank = value_of(t, "transpose")->rank();
  const int64_t d0 = wrap_dim_of("transpose", dim0, rank), d1 = wrap_dim_of("transpose", dim1, rank);
  if (rank == 0) return t.to(t.dtype());
  std::vector<int64_t> perm(rank);
  std::iota(perm.begin(), perm.end(), 0);
  std::swap(perm[d0], perm[d1]);
  return permute(t, perm);
}

Tensor expand(const Tensor& t, std::vector<int64_t> shape) {
  ir::NodePtr x = value_of(t, "expand");
  const int64_t offset = static_cast<int64_t>(shape.size()) - x->rank();
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] != -1) continue;
    if (static_cast<int64_t>(d) < offset) {
      throw Error(fmt::format("expand: -1 is not allowed for the new leading dim {} of {}", d, text(shape)));
    }
    shape[d] = x->shape()[d - offset];
  }
  ir::Shape out = to_shape(shape);
  if (out == x->shape()) return pending(std::move(x));
  return pending(check(ir::make_structured(OpKind::Expand, {std::move(x)}, {}, &out)));
}

Tensor slice(const Tensor& t, int64_t dim, int64_t start, int64_t end, int64_t step) {
  ir::NodePtr x = value_of(t, "slice");
  if (x->rank() == 0) throw Error("slice: cannot slice a rank-0 tensor");
  const int64_t d = wrap_dim("slice", dim, x->rank());
  if (step <= 0) throw Error(fmt::format("slice: step must be positive, got {}", step));
  const int64_t size = x->shape()[d];
  auto clamp = [&](int64_t v) { return std::clamp<int64_t>(v < 0 ? v + size : v, 0, size); };
  const int64_t lo = clamp(start), hi = std::max(clamp(end), lo);
  const int64_t count = hi == lo ? 0 : (hi - lo - 1) / step + 1;  // no overflow for any step
  if (lo == 0 && count == size) return pending(std::move(x));
  ir::Shape shape = x->shape();
  shape[d] = count;
  return pending(check(ir::make_structured(OpKind::Slice, {std::move(x)}, {d, count == 0 ? 0 : lo, step}, &shape)));
}

Tensor cat(const std::vector<Tensor>& tensors, int64_t dim) {
  if (tensors.empty()) throw Error("cat: expected at least one tensor");
  ir::Node::Operands operands;
  for (const Tensor& t : tensors) operands.push_back(value_of(t, "cat"));
  const int64_t rank = operands[0]->rank();
  if (rank == 0) throw Error("cat: rank-0 tensors cannot be concatenated");
  const int64_t d = wrap_dim("cat", dim, rank);
  DType dtype = operands[0]->dtype();
  for (const ir::NodePtr& x : operands) dtype = ir::promote_types(dtype, x->dtype());
  for (ir::NodePtr& x : operands) {
    if (x->rank() != rank) {
      throw Error(fmt::format("cat: tensors must have one rank, got shapes {} and {}",
                              ir::shape_to_string(operands[0]->shape()), ir::shape_to_string(x->shape())));
    }
    x = ir::make_cast(std::move(x), dtype);
  }
  if (auto checked = ir::structured_result(OpKind::Cat, operands, {d}, nullptr); !checked.ok()) {
    throw Error(std::string(checked.status().message()));
  }
  // Parts with nothing along dim add nothing (PyTorch accepts them): drop them, keeping one.
  const auto empty = [&](const ir::NodePtr& x) { return x->shape()[d] == 0; };
  if (!std::all_of(operands.begin(), operands.end(), empty)) {
    operands.erase(std::remove_if(operands.begin(), operands.end(), empty), operands.end());
  }
  if (operands.size() == 1) return pending(std::move(operands[0]));
  return pending(check(ir::make_structured(OpKind::Cat, std::move(operands), {d})));
}

Tensor index_select(const Tensor& t, int64_t dim, const Tensor& index) {
  ir::NodePtr x = value_of(t, "index_select");
  ir::NodePtr i = value_of(index, "index_select");
  if (x->rank() == 0) throw Error("index_select: a rank-0 tensor has no dim to select along");
  const int64_t d = wrap_dim("index_select", dim, x->rank());
  if (i->rank() == 0) i = reshape_node(std::move(i), {1});
  if (i->rank() != 1) {
    throw Error(fmt::format("index_select: the index must have rank 1, got shape {}", ir::shape_to_string(i->shape())));
  }
  return pending(check(ir::make_structured(OpKind::IndexSelect, {std::move(x), std::move(i)}, {d})));
}

Tensor gather(const Tensor& t, int64_t dim, const Tensor& index) {
  ir::NodePtr x = value_of(t, "gather");
  ir::NodePtr i = value_of(index, "gather");
  if (x->rank() == 0) throw Error("gather: a rank-0 tensor has no dim to gather along");
  const int64_t d = wrap_dim("gather", dim, x->rank());
  return pending(check(ir::make_structured(OpKind::Gather, {std::move(x), std::move(i)}, {d})));
}

Tensor take_along_dim(const Tensor& t, const Tensor& indices, int64_t dim) {
  ir::NodePtr x = value_of(t, "take_along_dim");
  ir::NodePtr i = value_of(indices, "take_along_dim");
  if (x->rank() != i->rank()) {
    throw Error(fmt::format("take_along_dim: the indices must have the tensor's rank {}, got shape {}", x->rank(),
                            ir::shape_to_string(i->shape())));
  }
  const int64_t d = wrap_dim("take_along_dim", dim, x->rank());
  ir::Shape x_shape = x->shape(), i_shape = i->shape();
  x_shape[d] = i_shape[d] = 1;  // broadcast outside dim only
  absl::StatusOr<ir::Shape> common = ir::broadcast_shapes("take_along_dim", x_shape, i_shape);
  if (!common.ok()) throw Error(std::string(common.status().message()));
  std::vector<int64_t> to_x(common->begin(), common->end()), to_i(common->begin(), common->end());
  to_x[d] = x->shape()[d];
  to_i[d] = i->shape()[d];
  return gather(expand(t, to_x), d, expand(indices, to_i));
}

Tensor one_hot(const Tensor& indices, int64_t num_classes) {
  ir::NodePtr i = value_of(indices, "one_hot");
  if (num_classes < 0) {
    throw Error(fmt::format("one_hot: num_classes must be given and at least 0, got {} (a count read from the data "
                            "would make the shape depend on it)",
                            num_classes));
  }
  ir::Shape shape = i->shape();
  shape.push_back(num_classes);
  return pending(check(ir::make_structured(OpKind::OneHot, {std::move(i)}, {}, &shape)));
}

Tensor embedding(const Tensor& weight, const Tensor& indices) {
  ir::NodePtr w = value_of(weight, "embedding");
  ir::NodePtr i = value_of(indices, "embedding");
  if (w->rank() != 2) {
    throw Error(fmt::format("embedding: the weight must have rank 2 ([num_embeddings, dim]), got shape {}",
                            ir::shape_to_string(w->shape())));
  }
  if (i->dtype() != DType::Int32 && i->dtype() != DType::Int64) {
    throw Error(fmt::format("embedding: indices must be int32 or int64, got {}", dtype_name(i->dtype())));
  }
  // The rows at indices of any shape, one node: the lookup's kernel reads an index per row
  // (attrs {0, 0}: its errors name embedding).
  return pending(check(ir::make_structured(OpKind::IndexSelect, {std::move(w), std::move(i)}, {0, 0})));
}

namespace {

/// A scan along `dim` (a rank-0 tensor scans as one element).
Tensor scan(OpKind op, const Tensor& t, int64_t dim) {
  const std::string_view name = ir::op_name(op);
  ir::NodePtr x = value_of(t, name);
  const int64_t d = wrap_dim_of(name, dim, x->rank());
  if (x->rank() == 0) return reshape(scan(op, reshape(t, {1}), 0), {});
  return pending(check(ir::make_structured(op, {std::move(x)}, {d})));
}

/// A scatter along `dim` of src into t at index (int32 or int64), adding or replacing. An
/// index_put's scatter is marked so that its errors name index_put and the user's index.
Tensor scatter_node(OpKind op, std::string_view name, const Tensor& t, int64_t dim, const Tensor& index,
                    const Tensor& src, bool accumulate) {
  ir::NodePtr x = value_of(t, name);
  ir::NodePtr i = value_of(index, name);
  ir::NodePtr v = value_of(src, name);
  if (x->rank() == 0) throw Error(fmt::format("{}: a rank-0 tensor has no dim to scatter along", name));
  const int64_t d = wrap_dim(name, dim, x->rank());
  if (op == OpKind::IndexScatter && i->rank() == 0) i = reshape_node(std::move(i), {1});
  ir::Node::Attrs attrs = {d, accumulate ? 1 : 0};
  if (name == "index_put") attrs.push_back(1);
  return pending(traced::check_as(name, ir::make_structured(op, {std::move(x), std::move(i), std::move(v)}, std::move(attrs))));
}

}  // namespace

Tensor cumsum(const Tensor& t, int64_t dim) { return scan(OpKind::Cumsum, t, dim); }
Tensor cumprod(const Tensor& t, int64_t dim) { return scan(OpKind::Cumprod, t, dim); }

Tensor scatter(const Tensor& t, int64_t dim, const Tensor& index, const Tensor& src) {
  return scatter_node(OpKind::Scatter, "scatter", t, dim, index, src, false);
}

Tensor scatter_add(const Tensor& t, int64_t dim, const Tensor& index, const Tensor& src) {
  return scatter_node(OpKind::Scatter, "scatter_add", t, dim, index, src, true);
}

Tensor index_add(const Tensor& t, int64_t dim, const Tensor& index, const Tensor& src, Scalar alpha) {
  const bool one = !alpha.past_int64() && alpha.to_double() == 1.0;
  return scatter_node(OpKind::IndexScatter, "index_add", t, dim, index, one ? src : (src * alpha).to(src.dtype()), true);
}

Tensor index_copy(const Tensor& t, int64_t dim, const Tensor& index, const Tensor& src) {
  return scatter_node(OpKind::IndexScatter, "index_copy", t, dim, index, src, false);
}

namespace {

/// index_put's indices with the negative ones counted from the end of a dim of `size`.
Tensor from_the_end(const Tensor& index, int64_t size) { return where(lt(index, 0), index + size, index); }

/// t[mask] = values (PyTorch's index_put with a bool mask over t's first mask.rank() dims):
/// values may not depend on how many elements the mask selects, so they broadcast to one
/// selected row (t's other dims), and the put is a where().
Tensor masked_put(const Tensor& t, const Tensor& mask, const Tensor& values, bool accumulate) {
  const ir::NodePtr x = value_of(t, "index_put"), m = value_of(mask, "index_put");
  const ir::Shape& shape = x->shape();
  const size_t k = m->shape().size();
  if (k > shape.size() || !std::equal(m->shape().begin(), m->shape().end(), shape.begin())) {
    throw Error(fmt::format("index_put: a bool mask of shape {} must match the leading dims of the tensor's shape {}",
                            ir::shape_to_string(m->shape()), ir::shape_to_string(shape)));
  }
  const ir::NodePtr v = value_of(values, "index_put");
  if (v->dtype() != x->dtype()) {
    throw Error(fmt::format("index_put: values must have the input's dtype {}, got {}", dtype_name(x->dtype()),
                            dtype_name(v->dtype())));
  }
  // One selected row: the dims after the mask's, behind a leading 1 (the selection's count).
  std::vector<int64_t> row = {1};
  row.insert(row.end(), shape.begin() + static_cast<std::ptrdiff_t>(k), shape.end());
  absl::StatusOr<ir::Shape> fits = ir::broadcast_shapes("index_put", v->shape(), ir::Shape(row.begin(), row.end()));
  if (!fits.ok() || std::vector<int64_t>(fits->begin(), fits->end()) != row) {
    throw Error(fmt::format("index_put: values of shape {} do not broadcast to {}, one row of the selection: with a "
                            "bool mask the selection's size depends on the data, so the values cannot",
                            ir::shape_to_string(v->shape()), ir::shape_to_string(ir::Shape(row.begin(), row.end()))));
  }
  std::vector<int64_t> mask_shape(m->shape().begin(), m->shape().end());
  mask_shape.resize(shape.size(), 1);
  const Tensor selected = reshape(mask, mask_shape);
  const Tensor value = v->rank() == static_cast<int64_t>(row.size()) ? squeeze(values, 0) : values;
  return accumulate ? where(selected, t + value, t) : where(selected, value, t);
}

}  // namespace

Tensor index_put(const Tensor& t, const Tensor& index, const Tensor& values, bool accumulate) {
  ir::NodePtr x = value_of(t, "index_put");
  ir::NodePtr i = value_of(index, "index_put");
  if (i->dtype() == DType::Bool) return masked_put(t, index, values, accumulate);
  if (x->rank() == 0) throw Error("index_put: a rank-0 tensor has no dim to index");
  if (i->dtype() != DType::Int32 && i->dtype() != DType::Int64) {
    throw Error(fmt::format("index_put: indices must be int32, int64 or a bool mask, got {}", dtype_name(i->dtype())));
  }
  // The indexed rows, as PyTorch's t[index] = values: values broadcast to index.shape + the
  // rows' shape, negative indices counted from the end (an error reports the user's index).
  std::vector<int64_t> shape(i->shape().begin(), i->shape().end());
  std::vector<int64_t> flat = {-1};
  for (size_t d = 1; d < x->shape().size(); ++d) {
    shape.push_back(x->shape()[d]);
    flat.push_back(x->shape()[d]);
  }
  const Tensor wrapped = from_the_end(reshape(index, {-1}), x->shape()[0]);
  return scatter_node(OpKind::IndexScatter, "index_put", t, 0, wrapped, reshape(expand(values, shape), flat), accumulate);
}

Tensor index_put(const Tensor& t, const std::vector<Tensor>& indices, const Tensor& values, bool accumulate) {
  if (indices.size() == 1) return index_put(t, indices[0], values, accumulate);
  ir::NodePtr x = value_of(t, "index_put");
  const ir::Shape& shape = x->shape();
  if (indices.empty() || indices.size() > shape.size()) {
    throw Error(fmt::format("index_put: expected one to {} index tensors for a tensor of shape {}, got {}", shape.size(),
                            ir::shape_to_string(shape), indices.size()));
  }
  ir::Shape selection;  // the indices' broadcast shape
  for (size_t d = 0; d < indices.size(); ++d) {
    const ir::NodePtr i = value_of(indices[d], "index_put");
    if (i->dtype() != DType::Int32 && i->dtype() != DType::Int64) {
      throw Error(fmt::format("index_put: index {} of {} must be int32 or int64 (a bool mask goes alone), got {}", d,
                              indices.size(), dtype_name(i->dtype())));
    }
    absl::StatusOr<ir::Shape> joined = ir::broadcast_shapes("index_put", selection, i->shape());
    if (!joined.ok()) {
      throw Error(fmt::format("index_put: index {} of shape {} does not broadcast with the others' {}", d,
                              ir::shape_to_string(i->shape()), ir::shape_to_string(selection)));
    }
    selection = *joined;
  }
  // Each index wrapped and read through a checked lookup of its dim (an out-of-range one is
  // the lookup's error, which names index_put and the dim), then one linear index over the
  // indexed dims: a put into t's rows of them.
  const std::vector<int64_t> broadcast(selection.begin(), selection.end());
  Tensor linear;
  int64_t rows = 1;
  for (size_t d = 0; d < indices.size(); ++d) {
    const int64_t size = shape[d];
    const Tensor wrapped = from_the_end(expand(indices[d], broadcast).to(DType::Int64), size);
    ir::NodePtr positions = value_of(arange(size), "index_put");
    const Tensor checked = pending(traced::check_as(
        "index_put", ir::make_structured(OpKind::IndexSelect, {std::move(positions), value_of(wrapped, "index_put")},
                                         {0, static_cast<int64_t>(d) + 1})));
    linear = d == 0 ? checked : linear * size + checked;
    rows *= size;
  }
  std::vector<int64_t> put_shape = {rows}, values_shape = broadcast, flat = {-1};
  for (size_t d = indices.size(); d < shape.size(); ++d) {
    put_shape.push_back(shape[d]);
    values_shape.push_back(shape[d]);
    flat.push_back(shape[d]);
  }
  const Tensor put = scatter_node(OpKind::IndexScatter, "index_put", reshape(t, put_shape), 0, reshape(linear, {-1}),
                                  reshape(expand(values, values_shape), flat), accumulate);
  return reshape(put, std::vector<int64_t>(shape.begin(), shape.end()));
}

Tensor squeeze(const Tensor& t, int64_t dim) {
  ir::NodePtr x = value_of(t, "squeeze");
  const int64_t d = wrap_dim_of("squeeze", dim, x->rank());
  if (x->rank() == 0 || x->shape()[d] != 1) return pending(std::move(x));
  return pending(squeeze_node(std::move(x), d));
}

Tensor unsqueeze(const Tensor& t, int64_t dim) {
  ir::NodePtr x = value_of(t, "unsqueeze");
  const int64_t d = wrap_dim("unsqueeze", dim, x->rank() + 1, x->rank());
  if (x->rank() >= ir::kMaxRank) {
    throw Error(fmt::format("unsqueeze: the result would have rank {}, past the maximum of {}", x->rank() + 1,
                            ir::kMaxRank));
  }
  return pending(unsqueeze_node(x, d));
}

}  // namespace lazyjit

// Reductions, views, matmul: result shapes, with the checks that make bad input an error.
#include "ir/structured.h"

#include <algorithm>

#include "fmt/format.h"
#include "fmt/ranges.h"

namespace lazyjit::ir {
namespace {

absl::Status invalid(std::string text) { return absl::InvalidArgumentError(std::move(text)); }

std::string dims_text(std::span<const int64_t> dims) { return fmt::format("[{}]", fmt::join(dims, ",")); }

/// The one dtype of `operands`, admitted by the op's row.
absl::StatusOr<DType> common_dtype(const OpInfo& info, std::span<const NodePtr> operands) {
  const DType dtype = operands[0]->dtype();
  for (const NodePtr& operand : operands.subspan(1)) {
    if (operand->dtype() != dtype) {
      return invalid(fmt::format("{}: operands must have one dtype, got {} and {}", info.name, dtype_name(dtype),
                                 dtype_name(operand->dtype())));
    }
  }
  if (!admits_dtype(info.admits, dtype)) {
    return invalid(fmt::format("{}: {} operands are not supported", info.name, dtype_name(dtype)));
  }
  return dtype;
}

absl::StatusOr<Shape> reduce_shape(OpKind op, const OpInfo& info, const Shape& in, const Node::Attrs& dims) {
  Shape out = in;
  const std::optional<FoldInfo> fold = fold_info(op);
  const bool extremum = !fold.has_value() || fold->combine == OpKind::Maximum || fold->combine == OpKind::Minimum;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] < 0 || dims[i] >= static_cast<int64_t>(in.size()) || (i > 0 && dims[i] <= dims[i - 1])) {
      return invalid(fmt::format("{}: dims {} must be ascending and in [0, {})", info.name, dims_text(dims), in.size()));
    }
    if (in[dims[i]] == 0 && extremum) {  // as PyTorch: amax, amin and argmax of nothing are errors
      return invalid(fmt::format("{}: cannot reduce dim {} of size 0 (shape {}): there is no identity",
                                 info.name, dims[i], shape_to_string(in)));
    }
    out[dims[i]] = 1;
  }
  return out;
}

absl::StatusOr<Shape> permute_shape(const Shape& in, const Node::Attrs& perm) {
  if (perm.size() != in.size()) {
    return invalid(fmt::format("permute: {} dims given for a tensor of rank {}", perm.size(), in.size()));
  }
  std::vector<bool> seen(in.size(), false);
  Shape out;
  for (int64_t p : perm) {
    if (p < 0 || p >= static_cast<int64_t>(in.size()) || seen[p]) {
      return invalid(fmt::format("permute: {} is not a permutation of the dims of a rank-{} tensor", dims_text(perm),
                                 in.size()));
    }
    seen[p] = true;
    out.push_back(in[p]);
  }
  return out;
}

absl::Status check_expand(const Shape& in, const Shape& out) {
  if (out.size() < in.size()) {
    return invalid(fmt::format("expand: cannot expand shape {} to fewer dims {}", shape_to_string(in),
                               shape_to_string(out)));
  }
  const size_t offset = out.size() - in.size();
  for (size_t k = 0; k < in.size(); ++k) {
    if (in[k] != 1 && in[k] != out[k + offset]) {
      return invalid(fmt::format("expand: cannot expand shape {} to {} (dim {}: {} is neither 1 nor {})",
                                 shape_to_string(in), shape_to_string(out), k + offset, in[k], out[k + offset]));
    }
  }
  return validate_dims("expand", out);
}

absl::Status check_slice(const Shape& in, const Node::Attrs& attrs, const Shape& out) {
  if (attrs.size() != 3) return invalid("slice: expected attrs {dim, start, step}");
  const int64_t dim = attrs[0], start = attrs[1], step = attrs[2];
  if (dim < 0 || dim >= static_cast<int64_t>(in.size())) {
    return invalid(fmt::format("slice: dim {} is out of range for a tensor of rank {}", dim, in.size()));
  }
  if (step <= 0) return invalid(fmt::format("slice: step must be positive, got {}", step));
  if (out.size() != in.size()) return invalid("slice: the result must keep the operand's rank");
  for (size_t d = 0; d < in.size(); ++d) {
    if (static_cast<int64_t>(d) != dim && out[d] != in[d]) {
      return invalid(fmt::format("slice: result shape {} differs from the operand's {} outside dim {}",
                                 shape_to_string(out), shape_to_string(in), dim));
    }
  }
  const int64_t n = out[dim];
  // (n - 1) * step may overflow; its quotient form cannot.
  if (start < 0 || n < 0 || (n > 0 && (start >= in[dim] || n - 1 > (in[dim] - 1 - start) / step))) {
    return invalid(fmt::format("slice: {} elements from {} by step {} do not fit dim {} of size {}", n, start, step,
                               dim, in[dim]));
  }
  return absl::OkStatus();
}

absl::StatusOr<Shape> cat_shape(std::span<const NodePtr> operands, const Node::Attrs& attrs) {
  if (attrs.size() != 1) return invalid("cat: expected attrs {dim}");
  if (operands.empty()) return invalid("cat: expected at least one tensor");
  const Shape& first = operands[0]->shape();
  const int64_t dim = attrs[0];
  if (dim < 0 || dim >= static_cast<int64_t>(first.size())) {
    return invalid(fmt::format("cat: dim {} is out of range for tensors of rank {}", dim, first.size()));
  }
  Shape out = first;
  for (size_t i = 1; i < operands.size(); ++i) {
    const Shape& s = operands[i]->shape();
    bool same = s.size() == first.size();
    for (size_t d = 0; same && d < s.size(); ++d) same = static_cast<int64_t>(d) == dim || s[d] == first[d];
    if (!same) {
      return invalid(fmt::format("cat: tensor {} has shape {}, which differs from {} outside dim {}", i,
                                 shape_to_string(s), shape_to_string(first), dim));
    }
    out[dim] += s[dim];
  }
  if (absl::Status s = validate_dims("cat", out); !s.ok()) return s;
  return out;
}

/// The dtype of an op that indexes its first operand with the others (DTypeRule::First).
absl::StatusOr<DType> indexed_dtype(const OpInfo& info, std::span<const NodePtr> operands) {
  for (const NodePtr& index : operands.subspan(1)) {
    if (index->dtype() != DType::Int32 && index->dtype() != DType::Int64) {
      return invalid(fmt::format("{}: indices must be int32 or int64, got {}", info.name, dtype_name(index->dtype())));
    }
  }
  if (!admits_dtype(info.admits, operands[0]->dtype())) {
    return invalid(fmt::format("{}: {} operands are not supported", info.name, dtype_name(operands[0]->dtype())));
  }
  return operands[0]->dtype();
}

absl::StatusOr<Shape> index_select_shape(const Shape& in, const Shape& index, const Node::Attrs& attrs) {
  if (attrs.size() != 1 && attrs.size() != 2) {
    return invalid("index_select: expected attrs {dim[, the op its errors name: 0 embedding, 1 + the dim an index_put indexes]}");
  }
  const int64_t dim = attrs[0];
  if (dim < 0 || dim >= static_cast<int64_t>(in.size())) {
    return invalid(fmt::format("index_select: dim {} is out of range for a tensor of rank {}", dim, in.size()));
  }
  Shape out(in.begin(), in.begin() + dim);  // the index's dims replace dim
  out.insert(out.end(), index.begin(), index.end());
  out.insert(out.end(), in.begin() + dim + 1, in.end());
  if (absl::Status s = validate_dims("index_select", out); !s.ok()) return s;
  return out;
}

absl::StatusOr<Shape> gather_shape(const Shape& in, const Shape& index, const Node::Attrs& attrs) {
  if (attrs.size() != 1) return invalid("gather: expected attrs {dim}");
  const int64_t dim = attrs[0];
  if (dim < 0 || dim >= static_cast<int64_t>(in.size())) {
    return invalid(fmt::format("gather: dim {} is out of range for a tensor of rank {}", dim, in.size()));
  }
  if (index.size() != in.size()) {
    return invalid(fmt::format("gather: the index must have the input's rank {}, got shape {}", in.size(),
                               shape_to_string(index)));
  }
  for (size_t d = 0; d < in.size(); ++d) {
    if (static_cast<int64_t>(d) != dim && index[d] > in[d]) {
      return invalid(fmt::format("gather: index shape {} exceeds input shape {} in dim {}", shape_to_string(index),
                                 shape_to_string(in), d));
    }
  }
  return index;
}

/// The dtype of a scatter: a's and src's (one dtype), with int32 or int64 indices.
absl::StatusOr<DType> scatter_dtype(const OpInfo& info, std::span<const NodePtr> operands) {
  const DType index = operands[1]->dtype();
  if (index != DType::Int32 && index != DType::Int64) {
    return invalid(fmt::format("{}: indices must be int32 or int64, got {}", info.name, dtype_name(index)));
  }
  if (operands[2]->dtype() != operands[0]->dtype()) {
    return invalid(fmt::format("{}: src must have the input's dtype {}, got {}", info.name,
                               dtype_name(operands[0]->dtype()), dtype_name(operands[2]->dtype())));
  }
  return operands[0]->dtype();
}

/// A scan's dim, checked; the result has the operand's shape.
absl::Status check_scan(const OpInfo& info, const Shape& in, const Node::Attrs& attrs) {
  if (attrs.size() != 1) return invalid(fmt::format("{}: expected attrs {{dim}}", info.name));
  if (attrs[0] < 0 || attrs[0] >= static_cast<int64_t>(in.size())) {
    return invalid(fmt::format("{}: dim {} is out of range for a tensor of rank {}", info.name, attrs[0], in.size()));
  }
  return absl::OkStatus();
}

/// A collective's attrs against its operand `in`; its result shape.
absl::StatusOr<Shape> collective_shape(OpKind op, const Shape& in, const Node::Attrs& attrs) {
  const std::string_view name = op_name(op);
  const bool reduces = op == OpKind::AllReduce || op == OpKind::ReduceScatter;
  const size_t expected = op == OpKind::ReduceScatter ? 2 : 1;
  if (attrs.size() != expected) {
    return invalid(fmt::format("{}: expected attrs {}", name,
                               op == OpKind::ReduceScatter ? "{op, world}" : reduces ? "{op}" : op == OpKind::Broadcast ? "{root}" : "{world}"));
  }
  if (reduces && (attrs[0] < 0 || attrs[0] > 2)) return invalid(fmt::format("{}: reduce op {} is not sum (0), max (1) or min (2)", name, attrs[0]));
  if (op == OpKind::Broadcast) {
    if (attrs[0] < 0) return invalid(fmt::format("broadcast: root {} must be non-negative", attrs[0]));
    return in;
  }
  if (op == OpKind::AllReduce) return in;
  const int64_t world = attrs.back();
  if (world < 1) return invalid(fmt::format("{}: world size {} must be positive", name, world));
  if (in.empty()) return invalid(fmt::format("{}: expected a tensor of rank 1 or more, got a scalar", name));
  Shape out = in;
  if (op == OpKind::AllGather) {
    out[0] *= world;
  } else {
    if (in[0] % world != 0) {
      return invalid(fmt::format("reduce_scatter: dim 0 of {} must be a multiple of the world size {}", shape_to_string(in), world));
    }
    out[0] /= world;
  }
  return out;
}

/// A scatter's operands against its input `in` (the result's shape): PyTorch's rules.
absl::Status check_scatter(OpKind op, const Shape& in, const Shape& index, const Shape& src, const Node::Attrs& attrs) {
  const std::string_view name = op_name(op);
  if ((attrs.size() != 2 && attrs.size() != 3) || (attrs[1] != 0 && attrs[1] != 1) ||
      (attrs.size() == 3 && attrs[2] != 0 && attrs[2] != 1)) {
    return invalid(fmt::format("{}: expected attrs {{dim, accumulate (0 or 1)[, from index_put (0 or 1)]}}", name));
  }
  const int64_t dim = attrs[0];
  const int64_t rank = static_cast<int64_t>(in.size());
  if (dim < 0 || dim >= rank) return invalid(fmt::format("{}: dim {} is out of range for a tensor of rank {}", name, dim, rank));
  if (src.size() != in.size()) {
    return invalid(fmt::format("{}: src must have the input's rank {}, got shape {}", name, rank, shape_to_string(src)));
  }
  if (op == OpKind::IndexScatter) {
    if (index.size() != 1) {
      return invalid(fmt::format("{}: the index must have rank 1, got shape {}", name, shape_to_string(index)));
    }
    for (int64_t d = 0; d < rank; ++d) {
      const int64_t want = d == dim ? index[0] : in[d];
      if (src[d] != want) {
        return invalid(fmt::format("{}: src shape {} should be {} with {} indices along dim {}", name, shape_to_string(src),
                                   shape_to_string(in), index[0], dim));
      }
    }
    return absl::OkStatus();
  }
  if (index.size() != in.size()) {
    return invalid(fmt::format("{}: the index must have the input's rank {}, got shape {}", name, rank,
                               shape_to_string(index)));
  }
  for (int64_t d = 0; d < rank; ++d) {
    if (index[d] > src[d] || (d != dim && index[d] > in[d])) {
      return invalid(fmt::format("{}: index shape {} exceeds src shape {} or input shape {} in dim {}", name,
                                 shape_to_string(index), shape_to_string(src), shape_to_string(in), d));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<Window> check_window(std::string_view name, const Shape& in, const Node::Attrs& attrs) {
  if (attrs.size() != 9) return invalid(fmt::format("{}: expected attrs {{groups, kh, kw, sh, sw, ph, pw, dh, dw}}", name));
  const Window w = Window::of(attrs);
  if (w.groups < 1 || w.kh < 1 || w.kw < 1 || w.sh < 1 || w.sw < 1 || w.ph < 0 || w.pw < 0 || w.dh < 1 || w.dw < 1) {
    return invalid(fmt::format("{}: window attrs {} must be positive (padding non-negative)", name, dims_text(attrs)));
  }
  if (in.size() != 4) {
    return invalid(fmt::format("{}: expected an NCHW tensor of rank 4, got shape {}", name, shape_to_string(in)));
  }
  return w;
}

absl::StatusOr<Shape> unfold_shape(const Shape& in, const Node::Attrs& attrs) {
  absl::StatusOr<Window> w = check_window("unfold", in, attrs);
  if (!w.ok()) return w.status();
  if (in[1] % w->groups != 0) {
    return invalid(fmt::format("unfold: {} groups do not divide {} channels", w->groups, in[1]));
  }
  const int64_t oh = w->out_h(in[2]), ow = w->out_w(in[3]);
  if (oh < 1 || ow < 1) {
    // The dilation is said where it widens the window (pools have none).
    const std::string dilated = w->dh == 1 && w->dw == 1 ? "" : fmt::format(" (dilation {}x{})", w->dh, w->dw);
    return invalid(fmt::format("unfold: a {}x{} window{} is larger than the padded input {}x{}", w->kh, w->kw, dilated,
                               in[2] + 2 * w->ph, in[3] + 2 * w->pw));
  }
  Shape out = {in[0], w->groups, in[1] / w->groups * w->kh * w->kw, oh, ow};
  if (absl::Status s = validate_dims("unfold", out); !s.ok()) return s;
  return out;
}

absl::Status check_unfold_transpose(const Shape& in, const Node::Attrs& attrs, const Shape& out) {
  if (out.size() != 5) {
    return invalid(fmt::format("unfold_transpose: the result must have rank 5, got {}", shape_to_string(out)));
  }
  const Shape image = {out[0], out[1], out[3], out[4]};
  absl::StatusOr<Window> w = check_window("unfold_transpose", image, attrs);
  if (!w.ok()) return w.status();
  absl::StatusOr<Shape> unfolded = unfold_shape(image, attrs);
  if (!unfolded.ok()) return unfolded.status();
  if (in != *unfolded || out[2] != w->kh * w->kw) {
    return invalid(fmt::format("unfold_transpose: operand {} is not the unfold of the result {}", shape_to_string(in),
                               shape_to_string(out)));
  }
  return absl::OkStatus();
}

absl::Status check_one_hot(const Shape& in, DType dtype, const Shape& out) {
  if (dtype != DType::Int32 && dtype != DType::Int64) {
    return invalid(fmt::format("one_hot: indices must be int32 or int64, got {}", dtype_name(dtype)));
  }
  if (out.size() != in.size() + 1 || !std::equal(in.begin(), in.end(), out.begin())) {
    return invalid(fmt::format("one_hot: result shape {} should be the indices' {} and the class count",
                               shape_to_string(out), shape_to_string(in)));
  }
  return validate_dims("one_hot", out);
}

absl::StatusOr<Shape> matmul_shape(const Shape& a, const Shape& b) {
  if (a.size() < 2 || b.size() < 2) {
    return invalid(fmt::format("matmul: operands must have rank 2 or more here, got {} and {}", shape_to_string(a),
                               shape_to_string(b)));
  }
  const int64_t k = a[a.size() - 1];
  if (k != b[b.size() - 2]) {
    return invalid(fmt::format("matmul: shapes {} and {} cannot be multiplied ({} columns vs {} rows)",
                               shape_to_string(a), shape_to_string(b), k, b[b.size() - 2]));
  }
  absl::StatusOr<Shape> batch = broadcast_shapes("matmul", std::span(a).first(a.size() - 2),
                                                 std::span(b).first(b.size() - 2));
  if (!batch.ok()) return batch.status();
  Shape out = *std::move(batch);
  out.push_back(a[a.size() - 2]);
  out.push_back(b[b.size() - 1]);
  if (absl::Status s = validate_dims("matmul", out); !s.ok()) return s;
  return out;
}

}  // namespace

absl::StatusOr<std::pair<DType, Shape>> structured_result(OpKind op, std::span<const NodePtr> operands,
                                                           const Node::Attrs& attrs, const Shape* given) {
  const OpInfo& info = op_info(op);
  if (info.arity >= 0 && static_cast<int>(operands.size()) != info.arity) {
    return invalid(fmt::format("{}: expected {} operands, got {}", info.name, info.arity, operands.size()));
  }
  if (operands.empty()) return invalid(fmt::format("{}: expected operands", info.name));
  absl::StatusOr<DType> dtype = info.dtype_rule == DTypeRule::First  ? indexed_dtype(info, operands)
                                : info.access == AccessPattern::Scatter ? scatter_dtype(info, operands)
                                                                         : common_dtype(info, operands);
  if (!dtype.ok()) return dtype.status();
  const Shape& in = operands[0]->shape();
  auto needs_given = [&]() -> absl::Status {
    return given ? absl::OkStatus() : absl::InternalError(fmt::format("{}: the result shape must be given", info.name));
  };

  absl::StatusOr<Shape> shape = in;
  if (fold_info(op).has_value()) {  // every fold by a combine: sum's rule
    shape = reduce_shape(op, info, in, attrs);
  } else if (info.access == AccessPattern::Scan) {
    if (absl::Status s = check_scan(info, in, attrs); !s.ok()) return s;
  } else if (info.access == AccessPattern::Scatter) {
    if (absl::Status s = check_scatter(op, in, operands[1]->shape(), operands[2]->shape(), attrs); !s.ok()) return s;
  } else if (info.access == AccessPattern::Collective) {
    shape = collective_shape(op, in, attrs);
  } else switch (op) {
    case OpKind::Argmax:
      if (attrs.size() != 1) return invalid("argmax: expected attrs {dim}");
      shape = reduce_shape(op, info, in, attrs);
      break;
    case OpKind::Reshape:
      if (absl::Status s = needs_given(); !s.ok()) return s;
      if (absl::Status s = validate_dims("reshape", *given); !s.ok()) return s;
      if (numel(*given) != numel(in)) {
        return invalid(fmt::format("reshape: shape {} is invalid for a tensor of {} elements (shape {})",
                                   shape_to_string(*given), numel(in), shape_to_string(in)));
      }
      if (!attrs.empty() && attrs != reshape_groups(in, *given)) {  // a kernel trusts them
        return invalid(fmt::format("reshape: attrs [{}] do not group {} to {}, whose groups are [{}]", fmt::join(attrs, ","),
                                   shape_to_string(in), shape_to_string(*given), fmt::join(reshape_groups(in, *given), ",")));
      }
      shape = *given;
      break;
    case OpKind::Permute:
      shape = permute_shape(in, attrs);
      break;
    case OpKind::Expand:
      if (absl::Status s = needs_given(); !s.ok()) return s;
      if (absl::Status s = check_expand(in, *given); !s.ok()) return s;
      shape = *given;
      break;
    case OpKind::Slice:
      if (absl::Status s = needs_given(); !s.ok()) return s;
      if (absl::Status s = check_slice(in, attrs, *given); !s.ok()) return s;
      shape = *given;
      break;
    case OpKind::Flip:
      for (size_t i = 0; i < attrs.size(); ++i) {
        if (attrs[i] < 0 || attrs[i] >= static_cast<int64_t>(in.size()) || (i > 0 && attrs[i] <= attrs[i - 1])) {
          return invalid(fmt::format("flip: dims {} must be ascending and in [0, {})", dims_text(attrs), in.size()));
        }
      }
      break;
    case OpKind::Cat:
      shape = cat_shape(operands, attrs);
      break;
    case OpKind::IndexSelect:
      shape = index_select_shape(in, operands[1]->shape(), attrs);
      break;
    case OpKind::Gather:
      shape = gather_shape(in, operands[1]->shape(), attrs);
      break;
    case OpKind::OneHot:
      if (absl::Status s = needs_given(); !s.ok()) return s;
      if (!attrs.empty()) return invalid("one_hot: takes no attrs");
      if (absl::Status s = check_one_hot(in, operands[0]->dtype(), *given); !s.ok()) return s;
      shape = *given;
      break;
    case OpKind::Unfold:
      shape = unfold_shape(in, attrs);
      break;
    case OpKind::UnfoldTranspose:
      if (absl::Status s = needs_given(); !s.ok()) return s;
      if (absl::Status s = check_unfold_transpose(in, attrs, *given); !s.ok()) return s;
      shape = *given;
      break;
    case OpKind::Matmul:
      shape = matmul_shape(in, operands[1]->shape());
      break;
    default:
      return absl::InternalError(fmt::format("{} is not a structured op", info.name));
  }
  if (!shape.ok()) return shape.status();
  if (given != nullptr && *given != *shape) {
    return invalid(fmt::format("{}: result shape {} should be {}", info.name, shape_to_string(*given),
                               shape_to_string(*shape)));
  }
  DType result = *dtype;
  if (info.dtype_rule == DTypeRule::Index) result = DType::Int64;
  if (info.dtype_rule == DTypeRule::Sum && !is_floating(result)) result = DType::Int64;
  return std::make_pair(result, *std::move(shape));
}

bool unit_dims_only(const Shape& from, const Shape& to) {
  size_t i = 0, j = 0;
  for (;;) {
    while (i < from.size() && from[i] == 1) ++i;
    while (j < to.size() && to[j] == 1) ++j;
    if (i == from.size() || j == to.size()) return i == from.size() && j == to.size();
    if (from[i++] != to[j++]) return false;
  }
}

Node::Attrs reshape_groups(const Shape& from, const Shape& to) {
  if (numel(from) == 0 || numel(from) != numel(to)) return {};
  Node::Attrs groups;
  size_t i = 0;
  int64_t in = 1, out = 1, taken = 0;  // the open group's elements on either side; from's dims in it
  for (int64_t size : to) {
    if (size == 1) continue;
    out *= size;
    while (in < out && i < from.size()) {  // from's dims until the group holds as many elements
      if (from[i] != 1) in *= from[i], ++taken;
      ++i;
    }
    groups.push_back(in == out ? taken : 0);
    if (in == out) in = out = 1, taken = 0;
  }
  const bool one_group = std::count(groups.begin(), groups.end(), 0) + 1 == static_cast<int64_t>(groups.size());
  if (groups.empty() || (one_group && groups != Node::Attrs{1})) return {};
  return groups;
}

void for_each_reshape_group(const Node& reshape, absl::FunctionRef<void(int, std::span<const int>)> f) {
  const Shape &to = reshape.shape(), &from = reshape.operands()[0]->shape();
  std::vector<int> from_dims;
  for (size_t d = 0; d < from.size(); ++d) {
    if (from[d] != 1) from_dims.push_back(static_cast<int>(d));
  }
  const std::span<const int> all(from_dims);
  size_t entry = 0, taken = 0;
  for (size_t d = 0; d < to.size(); ++d) {
    if (to[d] == 1) continue;
    const auto count = static_cast<size_t>(reshape.attrs()[entry++]);
    if (count == 0) continue;
    f(static_cast<int>(d), all.subspan(taken, count));
    taken += count;
  }
}

namespace {

/// The dims other than 1 of a reshape's operand in the group of dims that ends at its result
/// dim `dim`, outermost first: empty where no group ends at `dim`.
std::vector<int64_t> group_ending_at(const Node& reshape, int64_t dim) {
  const Shape& to = reshape.shape();
  if (to[dim] == 1) return {};
  std::vector<int64_t> group;
  if (reshape.attrs().empty()) {  // one group, the linear index: it ends at the last dim other than 1
    for (size_t d = dim + 1; d < to.size(); ++d) {
      if (to[d] != 1) return {};
    }
    const Shape& from = reshape.operands()[0]->shape();
    for (size_t d = 0; d < from.size(); ++d) {
      if (from[d] != 1) group.push_back(static_cast<int64_t>(d));
    }
    return group;
  }
  for_each_reshape_group(reshape, [&](int end, std::span<const int> from_dims) {
    if (end == dim) group.assign(from_dims.begin(), from_dims.end());
  });
  return group;
}

}  // namespace

const Node* window_rows_base(const Node& operand) {
  // `run`: the dims of `node` that a step along the operand's last dim moves, outermost first:
  // one dim, or (below a reshape that merged them) several, each step moving the innermost
  // and carrying into the next. At the base they must be its last dims other than 1, in
  // order: a step is then a step of its buffer.
  const Node* node = &operand;
  std::vector<int64_t> run = {node->rank() - 1};
  bool window = false;
  for (;; node = node->operands()[0].get()) {
    const Node::Attrs& attrs = node->attrs();
    if (node->op() == OpKind::Permute) {
      for (int64_t& d : run) d = attrs[d];
    } else if (node->op() == OpKind::Unfold) {
      // [n, g, (c, i, j), oh, ow] reads [n, c, oh*sh + i*dh, ow + j*dw]: ow steps along W
      // when sw is 1, and (oh, ow) along (H, W) as one run when a window row is one column
      // wide and the rows do not skip (kw 1, sh 1).
      const Window w = Window::of(attrs);
      if (w.ph != 0 || w.pw != 0 || w.sw != 1) return nullptr;
      if (run == std::vector<int64_t>{4}) {
        run = {3};
      } else if (run == std::vector<int64_t>{3, 4} && w.kw == 1 && w.sh == 1) {
        run = {2, 3};
      } else {
        return nullptr;
      }
      window = true;
    } else if (node->op() == OpKind::Slice) {  // {dim, start, step}: an offset, unless it skips
      const bool in_run = std::find(run.begin(), run.end(), attrs[0]) != run.end();
      if (in_run && (attrs[2] != 1 || (attrs[0] == run.back() && run.size() > 1))) return nullptr;
    } else if (node->op() == OpKind::Reshape && run.size() == 1) {
      run = group_ending_at(*node, run[0]);
      if (run.empty()) return nullptr;
    } else {
      break;
    }
  }
  if (!window) return nullptr;
  const Shape& shape = node->shape();
  size_t next = 0;
  for (int64_t d = run.front(); d < static_cast<int64_t>(shape.size()); ++d) {
    if (next < run.size() && d == run[next]) {
      ++next;
    } else if (shape[d] != 1) {
      return nullptr;  // a dim between or after the run's that is not 1
    }
  }
  return next == run.size() ? node : nullptr;
}

absl::StatusOr<NodePtr> make_structured(OpKind op, Node::Operands operands, Node::Attrs attrs, const Shape* given) {
  auto result = structured_result(op, operands, attrs, given);
  if (!result.ok()) return result.status();
  auto& [dtype, shape] = *result;
  if (op == OpKind::Reshape && attrs.empty()) attrs = reshape_groups(operands[0]->shape(), shape);
  return std::make_shared<Node>(op, dtype, std::move(shape), std::move(operands), std::move(attrs));
}

bool operand_index(const Node& node, IndexArith& arith, std::span<const IndexArith::Value> index,
                   std::vector<IndexArith::Value>& operand) {
  const Node::Attrs& attrs = node.attrs();
  const Shape& in = node.operands()[0]->shape();
  operand.assign(index.begin(), index.end());
  switch (node.op()) {
    case OpKind::Permute:  // result dim d is operand dim attrs[d]
      for (size_t d = 0; d < index.size(); ++d) operand[attrs[d]] = index[d];
      return true;
    case OpKind::Slice:  // {dim, start, step}
      operand[attrs[0]] = arith.add(arith.constant(attrs[1]), arith.mul(index[attrs[0]], arith.constant(attrs[2])));
      return true;
    case OpKind::Flip:  // the reversed dims read from their ends
      for (int64_t d : attrs) {
        const int dim = static_cast<int>(d);
        operand[d] = arith.sub(arith.sub(arith.operand_size(dim), arith.constant(1)), index[d]);
      }
      return true;
    case OpKind::Expand: {  // right-aligned; a dim of size 1 is read at 0
      const size_t offset = index.size() - in.size();
      operand.assign(index.begin() + static_cast<std::ptrdiff_t>(offset), index.end());
      for (size_t d = 0; d < in.size(); ++d) {
        if (in[d] == 1) operand[d] = arith.constant(0);
      }
      return true;
    }
    default: return false;
  }
}

std::string division_error(OpKind op) { return fmt::format("{}: integer division by zero", op_name(op)); }

bool is_transpose(const Node& node) {
  if (node.op() != OpKind::Permute) return false;
  const Node::Attrs& perm = node.attrs();
  const int64_t rank = static_cast<int64_t>(perm.size());
  for (int64_t d = 0; d < rank - 2; ++d) {
    if (perm[d] != d) return false;
  }
  return rank >= 2 && perm[rank - 2] == rank - 1 && perm[rank - 1] == rank - 2;
}

std::string_view user_op_name(OpKind op, const Node::Attrs& attrs) {
  if (op == OpKind::Scatter) return attrs[1] == 1 ? "scatter_add" : "scatter";
  if (op == OpKind::IndexScatter && attrs.size() == 3 && attrs[2] == 1) return "index_put";
  if (op == OpKind::IndexSelect && attrs.size() == 2) return attrs[1] == 0 ? "embedding" : "index_put";
  if (op == OpKind::IndexScatter) return attrs[1] == 1 ? "index_add" : "index_copy";
  return op_name(op);
}

std::string index_error(OpKind op, const Node::Attrs& attrs, int64_t index, int64_t size) {
  if (op == OpKind::OneHot) return fmt::format("one_hot: index {} is out of range for {} classes", index, size);
  if (user_op_name(op, attrs) == "index_put") {
    // index_put counted a negative index from the end (index + size): the user's was index - size.
    // A lookup of one of several indices (an IndexSelect) names the dim that index indexes.
    return fmt::format("index_put: index {} is out of range for dim {} of size {}", index < 0 ? index - size : index,
                       op == OpKind::IndexSelect ? attrs[1] - 1 : attrs[0], size);
  }
  return fmt::format("{}: index {} is out of range for dim {} of size {}", user_op_name(op, attrs), index, attrs[0], size);
}

NodePtr make_random(OpKind op, int64_t seed, DType dtype, Shape shape) {
  auto node = std::make_shared<Node>(op, dtype, std::move(shape), Node::Operands{});
  node->scalar_ = ScalarValue::of_int(seed);
  return node;
}

}  // namespace lazyjit::ir

// Graph nodes as kernel IR expressions: views become index arithmetic, elementwise ops
// become ops, and everything else is a load or a bound value.
#include "lowering/graph_values.h"

#include <algorithm>

#include "ir/structured.h"
#include "lowering/fusion.h"
#include "lowering/shape_table.h"
#include "lowering/internal_error.h"

namespace lazyjit::lowering {

using ir::OpKind;
using kir::Id;

GraphValues::GraphValues(kir::Builder& k, const ir::Graph& graph, const KernelPlan& plan, const KernelSpec& spec,
                         KernelFrame& frame)
    : k_(k), graph_(graph), plan_(plan), spec_(spec), frame_(frame), offsets_(shape_offsets(graph)) {
  frame_ = {};
  computed_ = computed_by(graph, plan, spec);
}

Id GraphValues::dim(int node, int d) {
  if (graph_.nodes[node]->shape()[d] == 1) return k_.index(1);
  const int offset = plan_.dim_class[offsets_[node] + d];
  const auto [it, fresh] = dims_.try_emplace(offset, 0);
  if (fresh) {
    it->second = k_.new_dim();
    frame_.dims.push_back(offset);
  }
  return k_.dim(it->second);
}

int GraphValues::buffer(int graph_buffer, DType dtype) {
  const auto [it, fresh] = buffers_.try_emplace(graph_buffer, 0);
  if (fresh) {
    it->second = k_.new_buffer(dtype);
    frame_.buffers.push_back(graph_buffer);
  }
  return it->second;
}

Id GraphValues::scalar(int node) {
  const int k = static_cast<int>(std::find(graph_.scalars.begin(), graph_.scalars.end(), node) - graph_.scalars.begin());
  const auto [it, fresh] = scalars_.try_emplace(k, 0);
  if (fresh) {
    it->second = k_.new_scalar();
    frame_.scalars.push_back(k);
  }
  const ir::Node& leaf = *graph_.nodes[node];
  return k_.scalar(it->second, leaf.op() == OpKind::Scalar ? leaf.dtype() : DType::Int64);  // or a seed
}

void GraphValues::finish() {
  if (k_.kernel().num_scalars > 0) frame_.buffers.push_back(KernelFrame::kScalars);
}

Id GraphValues::numel(int node, int first_dim, int end_dim) {
  Id n = k_.index(1);
  for (int d = first_dim; d < end_dim; ++d) n = k_.mul(n, dim(node, d));
  return n;
}

Id GraphValues::ravel(int node, const std::vector<Id>& dims) {
  Id linear = k_.index(0);
  for (size_t d = 0; d < dims.size(); ++d) {
    if (graph_.nodes[node]->shape()[d] == 1) continue;
    linear = k_.add(k_.mul(linear, dim(node, static_cast<int>(d))), dims[d]);
  }
  return linear;
}

void GraphValues::unravel_into(int node, Id linear, int first, int end, std::vector<Id>& dims) {
  for (int d = end; d-- > first;) {
    if (graph_.nodes[node]->shape()[d] == 1) {
      dims[d] = k_.index(0);
      continue;
    }
    dims[d] = d == first ? linear : k_.rem(linear, dim(node, d));
    if (d > first) linear = k_.div(linear, dim(node, d));
  }
}

std::vector<Id> GraphValues::dims_of(int node, const Index& index) {
  if (static_cast<int>(index.dims.size()) == graph_.nodes[node]->rank()) return index.dims;
  std::vector<Id> dims(graph_.nodes[node]->rank(), k_.index(0));
  unravel_into(node, index.linear, 0, graph_.nodes[node]->rank(), dims);
  return dims;
}

Id GraphValues::linear_of(int node, const Index& index) {
  return index.linear != kir::kNone ? index.linear : ravel(node, index.dims);
}

GraphValues::Index GraphValues::operand_index(int node, int operand, const Index& index) {
  const ir::Node& n = *graph_.nodes[node];
  const ir::Node& o = *graph_.nodes[operand];
  if (o.rank() == n.rank() && o.unit_dims() == n.unit_dims()) return index;  // same shape
  if (o.rank() == 0) return {};
  const std::vector<Id> dims = dims_of(node, index);
  Index result;
  const int offset = n.rank() - o.rank();
  for (int d = 0; d < o.rank(); ++d) result.dims.push_back(o.shape()[d] == 1 ? k_.index(0) : dims[d + offset]);
  return result;
}

Id GraphValues::at(int node, const Index& index) {
  if (auto it = bound_.find(node); it != bound_.end()) return it->second;
  std::vector<Id> key = {node, index.linear};
  key.insert(key.end(), index.dims.begin(), index.dims.end());
  if (auto it = memo_.find(key); it != memo_.end()) return it->second;
  const Id v = computed_[node] ? compute(node, index) : load(node, plan_.buffer_of[node], linear_of(node, index));
  memo_.emplace(std::move(key), v);
  return v;
}

Id GraphValues::compute(int node, const Index& index) {
  const ir::Node& n = *graph_.nodes[node];
  switch (n.op()) {
    case OpKind::Scalar: return scalar(node);
    case OpKind::Constant:
      return is_floating(n.dtype()) ? k_.float_constant(n.dtype(), n.scalar().f) : k_.constant(n.dtype(), n.scalar().i);
    case OpKind::Arange: return k_.convert(dims_of(node, index)[0], n.dtype());
    case OpKind::Rand:
    case OpKind::Randn: return k_.random(n.op(), n.dtype(), scalar(node), linear_of(node, index));
    default: break;
  }
  switch (ir::op_info(n.op()).access) {
    case ir::AccessPattern::Elementwise: {
      std::vector<Id> args;
      for (int operand : graph_.operands[node]) {
        const auto bound = bound_.find(operand);  // (a bound value needs no index)
        args.push_back(bound != bound_.end() ? bound->second : at(operand, operand_index(node, operand, index)));
      }
      if (ir::divides(n.op()) && !is_floating(n.dtype())) args[1] = checked_divisor(node, args[1]);
      return k_.op(n.op(), n.dtype(), std::move(args));
    }
    case ir::AccessPattern::IndexMap: return view(node, index);
    default: break;
  }
  // Reductions and products are stages, bound values or buffers, never recomputed here.
  internal_error(std::string(ir::op_name(n.op())) + " evaluated in a kernel that does not hold it");
}

Id GraphValues::checked_index(int node, Id value, int bounded, int d) {
  const Id picked = k_.convert(value, DType::Int64);
  const Id inside = k_.op(OpKind::LogicalAnd, DType::Bool,
                          {k_.op(OpKind::Ge, DType::Bool, {picked, k_.index(0)}),
                           k_.op(OpKind::Lt, DType::Bool, {picked, dim(bounded, d)})});
  const int code = k_.check(inside, picked, buffer(KernelFrame::kStatus, DType::Int64));
  frame_.checks.resize(code);
  frame_.checks[code - 1] = {node, offsets_[bounded] + d};
  return picked;
}

Id GraphValues::checked_divisor(int node, Id divisor) {
  const DType dtype = graph_.nodes[node]->dtype();
  const Id nonzero = k_.op(OpKind::Ne, DType::Bool, {divisor, k_.constant(dtype, 0)});
  const int code = k_.check(nonzero, k_.convert(divisor, DType::Int64), buffer(KernelFrame::kStatus, DType::Int64));
  frame_.checks.resize(code);
  frame_.checks[code - 1] = {node, KernelCheck::kNonzero};
  return divisor;
}

Id GraphValues::window(int node, const Index& index) {
  const ir::Node& n = *graph_.nodes[node];
  const int operand = graph_.operands[node][0];
  const ir::Window w = ir::Window::of(n.attrs());
  const std::vector<Id> dims = dims_of(node, index);
  auto c = [&](int64_t value) { return k_.index(value); };
  auto lt = [&](Id a, Id b) { return k_.op(OpKind::Lt, DType::Bool, {a, b}); };
  auto both = [&](Id a, Id b) { return k_.op(OpKind::LogicalAnd, DType::Bool, {a, b}); };
  const int64_t kk = w.kh * w.kw;
  const Id zero = is_floating(n.dtype()) ? k_.float_constant(n.dtype(), 0) : k_.constant(n.dtype(), 0);
  if (n.op() == OpKind::Unfold) {
    const Id height = dim(operand, 2), width = dim(operand, 3);
    const auto [channel, padded_h, padded_w] = window_source(node, dims);
    if (w.ph == 0 && w.pw == 0) return at(operand, Index{{dims[0], channel, padded_h, padded_w}});  // always inside
    auto inside = [&](Id padded, int64_t pad, Id extent) {
      return both(k_.op(OpKind::Ge, DType::Bool, {padded, c(pad)}), lt(padded, k_.add(extent, c(pad))));
    };
    auto clamped = [&](Id padded, int64_t pad, Id extent) {
      return k_.min(k_.max(k_.sub(padded, c(pad)), c(0)), k_.max(k_.sub(extent, c(1)), c(0)));
    };
    const Id v = at(operand, Index{{dims[0], channel, clamped(padded_h, w.ph, height), clamped(padded_w, w.pw, width)}});
    return k_.select(both(inside(padded_h, w.ph, height), inside(padded_w, w.pw, width)), v, zero);
  }
  // unfold_transpose: [n, c, (i, j), h, w] reads [n, c / (C/groups), (c % (C/groups), i, j),
  // oh, ow] where h + ph - i*dh = oh*sh exactly, with oh in range (likewise w), else 0.
  const Id oh_count = dim(operand, 3), ow_count = dim(operand, 4);
  auto source = [&](Id at, int64_t pad, Id offset, int64_t stride, Id count, Id& position) {
    const Id from = k_.add(at, c(pad));  // offset <= from where some window position reaches it
    const Id step = k_.max(k_.sub(from, offset), c(0));
    position = k_.min(k_.div(step, c(stride)), k_.sub(count, c(1)));
    Id reached = both(k_.op(OpKind::Ge, DType::Bool, {from, offset}), lt(k_.div(step, c(stride)), count));
    if (stride > 1) reached = both(reached, k_.op(OpKind::Eq, DType::Bool, {k_.rem(step, c(stride)), c(0)}));
    return reached;
  };
  Id oh = kir::kNone, ow = kir::kNone;
  const Id reached_h = source(dims[3], w.ph, k_.mul(k_.div(dims[2], c(w.kw)), c(w.dh)), w.sh, oh_count, oh);
  const Id reached_w = source(dims[4], w.pw, k_.mul(k_.rem(dims[2], c(w.kw)), c(w.dw)), w.sw, ow_count, ow);
  const Id per_group = k_.div(dim(node, 1), c(w.groups));
  const Id row = k_.add(k_.mul(k_.rem(dims[1], per_group), c(kk)), dims[2]);
  const Id v = at(operand, Index{{dims[0], k_.div(dims[1], per_group), row, oh, ow}});
  return k_.select(both(reached_h, reached_w), v, zero);
}

GraphValues::WindowSource GraphValues::window_source(int node, const std::vector<Id>& dims) {
  // [n, g, (c, i, j), oh, ow] reads [n, g * C/groups + c, oh*sh - ph + i*dh, ...]: the
  // position in the padded input, linear in ow (a unit-stride run when sw is 1).
  const ir::Window w = ir::Window::of(graph_.nodes[node]->attrs());
  const int operand = graph_.operands[node][0];
  auto c = [&](int64_t value) { return k_.index(value); };
  const Id window = k_.rem(dims[2], c(w.kh * w.kw));
  return {.channel = k_.add(k_.mul(dims[1], k_.div(dim(operand, 1), c(w.groups))), k_.div(dims[2], c(w.kh * w.kw))),
          .padded_h = k_.add(k_.mul(dims[3], c(w.sh)), k_.mul(k_.div(window, c(w.kw)), c(w.dh))),
          .padded_w = k_.add(k_.mul(dims[4], c(w.sw)), k_.mul(k_.rem(window, c(w.kw)), c(w.dw)))};
}

Id GraphValues::offset_in(int node, int base, const Index& index) {
  if (node == base) return linear_of(node, index);
  const ir::Node& n = *graph_.nodes[node];
  Index in;
  if (n.op() == OpKind::Unfold) {  // no padding: the padded position is the position
    const std::vector<Id> dims = dims_of(node, index);
    const WindowSource source = window_source(node, dims);
    in.dims = {dims[0], source.channel, source.padded_h, source.padded_w};
  } else if (n.op() == OpKind::Permute || n.op() == OpKind::Slice || n.op() == OpKind::Reshape) {
    in = view_source(node, index);
  } else {
    internal_error(std::string(ir::op_name(n.op())) + " between a matmul and the operand it reads in place");
  }
  return offset_in(graph_.operands[node][0], base, in);
}

Id GraphValues::view(int node, const Index& index) {
  const ir::Node& n = *graph_.nodes[node];
  const int operand = graph_.operands[node][0];
  switch (n.op()) {
    case OpKind::IndexSelect:
    case OpKind::Gather: {
      // The index is read and checked against the operand's dim before any element is read
      // at it: an index out of range fails the kernel (its status word), never reads memory.
      // Gather's indices have the result's shape; IndexSelect's take its dims [d, d + their rank).
      Index in{dims_of(node, index)};
      const int d = static_cast<int>(n.attrs()[0]);
      const int span = n.op() == OpKind::Gather ? 1 : graph_.nodes[graph_.operands[node][1]]->rank();
      const Index at_index =
          n.op() == OpKind::Gather ? index : Index{std::vector<Id>(in.dims.begin() + d, in.dims.begin() + d + span)};
      const Id picked = checked_index(node, at(graph_.operands[node][1], at_index), operand, d);
      in.dims.erase(in.dims.begin() + d, in.dims.begin() + d + span);
      in.dims.insert(in.dims.begin() + d, picked);
      return at(operand, in);
    }
    case OpKind::OneHot: {  // 1 where the last index is the operand's element, checked first
      std::vector<Id> dims = dims_of(node, index);
      const Id k = dims.back();
      dims.pop_back();
      const Id picked = checked_index(node, at(operand, Index{dims}), node, n.rank() - 1);
      return k_.convert(k_.op(OpKind::Eq, DType::Bool, {picked, k}), DType::Int64);
    }
    case OpKind::Unfold:
    case OpKind::UnfoldTranspose: return window(node, index);
    case OpKind::Cat: {
      // Every part is read at its clamped index and the right one selected: no branches in
      // the loop, so it still vectorises.
      const std::vector<Id> dims = dims_of(node, index);
      const int64_t d = n.attrs()[0];
      Id start = k_.index(0);
      Id result = kir::kNone;
      for (int part : graph_.operands[node]) {
        const Id size = dim(part, static_cast<int>(d));
        const Id local = k_.sub(dims[d], start);
        // In [0, size): an empty part (size 0) is read at 0, which its buffer's minimum
        // allocation covers, and never selected.
        Index in{dims};
        in.dims[d] = graph_.nodes[part]->shape()[d] == 1 ? k_.index(0)
                                                         : k_.max(k_.min(local, k_.sub(size, k_.index(1))), k_.index(0));
        const Id v = at(part, in);
        result = result == kir::kNone ? v : k_.select(k_.op(OpKind::Lt, DType::Bool, {local, k_.index(0)}), result, v);
        start = k_.add(start, size);
      }
      return result;
    }
    default: break;
  }
  return at(operand, view_source(node, index));
}

GraphValues::Index GraphValues::view_source(int node, const Index& index) {
  const ir::Node& n = *graph_.nodes[node];
  const int operand = graph_.operands[node][0];
  if (n.op() == OpKind::Reshape) {
    if (n.attrs().empty() || index.dims.empty()) return Index{{}, linear_of(node, index)};
    // By groups (ir::reshape_groups): a group's result dims are ravelled and unravelled into
    // its operand dims, a group of one dim on each side passes its index through, and unit
    // dims read 0. The linear index is the same.
    std::vector<Id> dims(graph_.nodes[operand]->rank(), k_.index(0));
    int first = 0;  // the first result dim of the next group
    ir::for_each_reshape_group(n, [&](int end, std::span<const int> from) {
      Id linear = kir::kNone;  // the group's result index
      for (int d = first; d <= end; ++d) {
        if (n.shape()[d] == 1) continue;
        linear = linear == kir::kNone ? index.dims[d] : k_.add(k_.mul(linear, dim(node, d)), index.dims[d]);
      }
      first = end + 1;
      for (size_t g = from.size(); g-- > 0;) {
        dims[from[g]] = g == 0 ? linear : k_.rem(linear, dim(operand, from[g]));
        if (g > 0) linear = k_.div(linear, dim(operand, from[g]));
      }
    });
    return Index{std::move(dims), index.linear};
  }
  // Index arithmetic alone (permute, slice, expand, ...), shared with the interpreter.
  class Expressions final : public ir::IndexArith {
   public:
    Expressions(GraphValues& v, int operand) : v_(v), operand_(operand) {}
    Value constant(int64_t c) override { return v_.k_.index(c); }
    Value add(Value a, Value b) override { return v_.k_.add(id(a), id(b)); }
    Value sub(Value a, Value b) override { return v_.k_.sub(id(a), id(b)); }
    Value mul(Value a, Value b) override { return v_.k_.mul(id(a), id(b)); }
    Value operand_size(int d) override { return v_.dim(operand_, d); }

   private:
    static Id id(Value v) { return static_cast<Id>(v); }
    GraphValues& v_;
    int operand_;
  } expressions(*this, operand);
  const std::vector<Id> dims = dims_of(node, index);
  std::vector<ir::IndexArith::Value> in;
  if (!ir::operand_index(n, expressions, std::vector<ir::IndexArith::Value>(dims.begin(), dims.end()), in)) {
    internal_error("unknown view " + std::string(ir::op_name(n.op())));
  }
  return Index{std::vector<Id>(in.begin(), in.end())};
}

}  // namespace lazyjit::lowering

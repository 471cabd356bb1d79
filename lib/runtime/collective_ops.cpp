// The public collectives (<lazyjit/collectives.h>): one graph node each, carried out by the
// backend registered in ir/collectives.h when the graph runs. A collective along a dim other
// than 0 moves that dim to the front (a view), runs along dim 0, and moves it back.
#include "fmt/format.h"
#include "ir/builder.h"
#include "ir/collectives.h"
#include "ir/structured.h"
#include "lazyjit/collectives.h"
#include "lazyjit/error.h"
#include "lazyjit/ops.h"
#include "runtime/traced_node.h"

namespace lazyjit::dist {
namespace {

using traced::value_of;

ir::ReduceOp reduce_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Mean: return ir::ReduceOp::Sum;
    case ReduceOp::Max: return ir::ReduceOp::Max;
    case ReduceOp::Min: return ir::ReduceOp::Min;
  }
  return ir::ReduceOp::Sum;
}

Tensor collective(std::string_view name, ir::OpKind op, const Tensor& t, ir::Node::Attrs attrs) {
  return traced::pending(
      ir::stamp_collective(traced::check_as(name, ir::make_structured(op, {value_of(t, name)}, std::move(attrs)))));
}

/// The mean of a sum over the ranks; Mean takes floating tensors only (as PyTorch's AVG).
Tensor finish_reduce(std::string_view name, Tensor sum, ReduceOp op, DType dtype) {
  if (op != ReduceOp::Mean) return sum;
  if (!is_floating(dtype)) throw Error(fmt::format("{}: mean takes a floating tensor, got {}", name, dtype_name(dtype)));
  return sum / Scalar(static_cast<double>(world_size()));
}

/// `dim` of `t`, which must have one (a collective along it moves dim to the front).
int64_t checked_dim(std::string_view name, const Tensor& t, int64_t dim) {
  if (t.dim() == 0) throw Error(fmt::format("{}: expected a tensor of rank 1 or more, got a scalar", name));
  return traced::wrap_dim(name, dim, t.dim());
}

/// `t` with `dim` moved to the front (to = true) or back from the front to `dim`.
Tensor move_dim(const Tensor& t, int64_t dim, bool to_front) {
  if (dim == 0) return t;
  std::vector<int64_t> perm;
  const int64_t rank = t.dim();
  if (to_front) {
    perm.push_back(dim);
    for (int64_t d = 0; d < rank; ++d) {
      if (d != dim) perm.push_back(d);
    }
  } else {
    for (int64_t d = 1; d <= dim; ++d) perm.push_back(d);
    perm.push_back(0);
    for (int64_t d = dim + 1; d < rank; ++d) perm.push_back(d);
  }
  return permute(t, std::move(perm));
}

}  // namespace

int rank() { return ir::collective_rank(); }
int world_size() { return ir::collective_world_size(); }

Tensor all_reduce(const Tensor& t, ReduceOp op) {
  const Tensor sum = collective("all_reduce", ir::OpKind::AllReduce, t, {static_cast<int64_t>(reduce_op(op))});
  return finish_reduce("all_reduce", sum, op, t.dtype());
}

Tensor broadcast(const Tensor& t, int root) {
  if (root < 0 || root >= world_size()) {
    throw Error(fmt::format("broadcast: root {} is not a rank of this world of {}", root, world_size()));
  }
  return collective("broadcast", ir::OpKind::Broadcast, t, {root});
}

Tensor all_gather(const Tensor& t, int64_t dim) {
  value_of(t, "all_gather");
  const int64_t d = checked_dim("all_gather", t, dim);
  return move_dim(collective("all_gather", ir::OpKind::AllGather, move_dim(t, d, true), {world_size()}), d, false);
}

Tensor reduce_scatter(const Tensor& t, int64_t dim, ReduceOp op) {
  value_of(t, "reduce_scatter");
  const int64_t d = checked_dim("reduce_scatter", t, dim);
  if (t.shape()[d] % world_size() != 0) {
    throw Error(fmt::format("reduce_scatter: dim {} of shape {} must be a multiple of the world size {}", dim,
                            ir::shape_to_string(t.impl()->ir_value()->shape()), world_size()));
  }
  const Tensor sum = collective("reduce_scatter", ir::OpKind::ReduceScatter, move_dim(t, d, true),
                                {static_cast<int64_t>(reduce_op(op)), world_size()});
  return move_dim(finish_reduce("reduce_scatter", sum, op, t.dtype()), d, false);
}

}  // namespace lazyjit::dist

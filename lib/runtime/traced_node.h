// What the public functions that trace one structured node share (structured_ops.cpp,
// window_ops.cpp, collective_ops.cpp): an operand's IR value, the checked node, the pending
// tensor, and PyTorch's dims.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "fmt/format.h"
#include "lazyjit/error.h"
#include "lazyjit/tensor.h"
#include "runtime/tensor_impl.h"

namespace lazyjit {
namespace detail {
Tensor make_pending(ir::NodePtr node);
}

namespace traced {

/// `t`'s IR value; an undefined tensor is an Error naming `op`.
inline ir::NodePtr value_of(const Tensor& t, std::string_view op) {
  if (!t.defined()) throw Error(fmt::format("{}: an operand is an undefined tensor", op));
  return t.impl()->ir_value();
}

/// The node, or its shape rule's message as an Error.
inline ir::NodePtr check(absl::StatusOr<ir::NodePtr> node) {
  if (!node.ok()) throw Error(std::string(node.status().message()));
  return *std::move(node);
}

/// check(), with the message named after the function the user called (`index_add: ...` for
/// the row's `index_scatter: ...`, `conv2d: ...` for its `unfold: ...`).
inline ir::NodePtr check_as(std::string_view name, absl::StatusOr<ir::NodePtr> node) {
  if (!node.ok()) {
    const std::string message(node.status().message());
    const size_t colon = message.find(':');
    throw Error(colon == std::string::npos ? message : fmt::format("{}{}", name, message.substr(colon)));
  }
  return *std::move(node);
}

inline Tensor pending(ir::NodePtr node) { return detail::make_pending(std::move(node)); }

/// `dim` in [0, rank) from PyTorch's [-rank, rank); `rank` is the range's, `tensor_rank` the
/// operand's, for the message (a rank-0 tensor takes the dims of rank 1, -1 and 0).
inline int64_t wrap_dim(std::string_view op, int64_t dim, int64_t rank, int64_t tensor_rank) {
  if (dim < -rank || dim >= rank) {
    const int64_t lo = rank == 0 ? -1 : -rank, hi = rank == 0 ? 0 : rank - 1;
    throw Error(fmt::format("{}: dim {} is out of range for a tensor of rank {} (expected {} to {})", op, dim,
                            tensor_rank, lo, hi));
  }
  return dim < 0 ? dim + rank : dim;
}

inline int64_t wrap_dim(std::string_view op, int64_t dim, int64_t rank) { return wrap_dim(op, dim, rank, rank); }

}  // namespace traced
}  // namespace lazyjit

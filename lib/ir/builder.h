// Creating IR nodes: the trace-time checks, dtype promotion and shape inference of every op.
#pragma once

#include <span>

#include "absl/status/statusor.h"
#include "ir/node.h"
#include "lazyjit/scalar.h"

namespace lazyjit::ir {

/// A leaf reading `data`.
NodePtr make_parameter(BackendDataPtr data);
/// A leaf with a runtime value, splatted to `shape`.
NodePtr make_scalar(ScalarValue value, DType dtype, Shape shape);
/// A leaf whose value is compiled into the kernel (and so part of the graph key): for values
/// that never change, where a constant lets LLVM fold (x * 1.0, x ** 2).
NodePtr make_constant(ScalarValue value, DType dtype, Shape shape);
/// Whether a user's number can become a `dtype` value: integers must be in range, floats
/// finite and in range for an integer dtype, finite values in range for float32 (inf and
/// NaN pass). Error: "add: scalar 3000000000 does not fit int32".
absl::Status check_scalar_fits(std::string_view op, Scalar value, DType dtype);
/// `value` converted to `dtype` (C++ conversion; to bool: != 0), as a Scalar leaf stores it.
/// User values go through check_scalar_fits first.
ScalarValue scalar_value(Scalar value, DType dtype);
/// A rank-0 Scalar leaf holding `value` converted to `dtype`.
NodePtr make_scalar(Scalar value, DType dtype);
/// 0, 1, ..., n-1 as a rank-1 leaf of `dtype`.
absl::StatusOr<NodePtr> make_arange(int64_t n, DType dtype);
/// `node` converted to `dtype`; `node` itself when it already has that dtype.
NodePtr make_cast(NodePtr node, DType dtype);

/// A copy of `node` (same op, operands and value) that autograd treats as a constant.
NodePtr make_stop_gradient(const NodePtr& node);
/// `node`, a collective just made, stamped with its place in this process's trace order
/// (scalar(), not in the key): a run starts its graph's collectives in that order, which every
/// rank shares, whatever order the graph's roots put them in.
NodePtr stamp_collective(const NodePtr& node);

/// An elementwise op over `operands`: checks arity and dtypes, promotes the operands to a
/// common dtype with explicit casts (as the op's Admits column asks), and broadcasts shapes.
/// Errors name the op and the values, e.g. "sub: bool operands are not supported".
absl::StatusOr<NodePtr> make_elementwise(OpKind op, std::span<const NodePtr> operands);

}  // namespace lazyjit::ir

// The public ops: each one checks its operands and traces one IR node (ir/builder.h).
#include "lazyjit/ops.h"

#include "fmt/format.h"
#include "ir/builder.h"
#include "ir/types.h"
#include "lazyjit/error.h"
#include "runtime/tensor_impl.h"

namespace lazyjit {
namespace detail {
Tensor make_pending(ir::NodePtr node);
}

namespace {

using ir::OpKind;

ir::NodePtr value_of(const Tensor& t, OpKind op) {
  if (!t.defined()) throw Error(fmt::format("{}: an operand is an undefined tensor", ir::op_name(op)));
  return t.impl()->ir_value();
}

void check_fits(std::string_view op, Scalar s, DType dtype) {
  if (absl::Status status = ir::check_scalar_fits(op, s, dtype); !status.ok()) {
    throw Error(std::string(status.message()));
  }
}

/// A C++ number as an operand next to `like`: a weak scalar (see ir/types.h).
ir::NodePtr scalar_like(Scalar s, const Tensor& like, OpKind op) {
  const DType dtype = ir::weak_scalar_dtype(s.kind(), value_of(like, op)->dtype());
  check_fits(ir::op_name(op), s, dtype);
  if (s.is_constant()) return ir::make_constant(ir::scalar_value(s, dtype), dtype, {});
  return ir::make_scalar(s, dtype);
}

Tensor trace(OpKind op, std::initializer_list<ir::NodePtr> operands) {
  absl::StatusOr<ir::NodePtr> node = ir::make_elementwise(op, std::span(operands.begin(), operands.size()));
  if (!node.ok()) throw Error(std::string(node.status().message()));
  return detail::make_pending(*std::move(node));
}

Tensor binary(OpKind op, const Tensor& a, const Tensor& b) { return trace(op, {value_of(a, op), value_of(b, op)}); }
Tensor binary(OpKind op, const Tensor& a, Scalar b) { return trace(op, {value_of(a, op), scalar_like(b, a, op)}); }
Tensor binary(OpKind op, Scalar a, const Tensor& b) { return trace(op, {scalar_like(a, b, op), value_of(b, op)}); }
Tensor unary(OpKind op, const Tensor& a) { return trace(op, {value_of(a, op)}); }

Tensor splat(const char* op, const std::vector<int64_t>& shape, Scalar value, DType dtype) {
  if (absl::Status status = ir::validate_dims(op, shape); !status.ok()) throw Error(std::string(status.message()));
  check_fits(op, value, dtype);
  return detail::make_pending(
      ir::make_scalar(ir::scalar_value(value, dtype), dtype, ir::Shape(shape.begin(), shape.end())));
}

}  // namespace

// The elementwise rows' functions (their LAZYJIT_API lines); the overloads below are by hand.
#define LAZYJIT_OP(Name, text, arity, rule, admits, access)
#define LAZYJIT_API1(Name, function) \
  Tensor function(const Tensor& a) { return unary(OpKind::Name, a); }
#define LAZYJIT_API2(Name, function) \
  Tensor function(const Tensor& a, const Tensor& b) { return binary(OpKind::Name, a, b); }
#include "ir/ops.def"

Tensor full(std::vector<int64_t> shape, Scalar value, DType dtype) { return splat("full", shape, value, dtype); }
Tensor zeros(std::vector<int64_t> shape, DType dtype) { return splat("zeros", shape, 0, dtype); }
Tensor ones(std::vector<int64_t> shape, DType dtype) { return splat("ones", shape, 1, dtype); }
Tensor arange(int64_t n, DType dtype) {
  absl::StatusOr<ir::NodePtr> node = ir::make_arange(n, dtype);
  if (!node.ok()) throw Error(std::string(node.status().message()));
  return detail::make_pending(*std::move(node));
}

Tensor pow(const Tensor& a, Scalar b) { return binary(OpKind::Pow, a, b); }
Tensor floor_divide(const Tensor& a, Scalar b) { return binary(OpKind::FloorDivide, a, b); }
Tensor remainder(const Tensor& a, Scalar b) { return binary(OpKind::Remainder, a, b); }

Tensor operator+(const Tensor& a, const Tensor& b) { return binary(OpKind::Add, a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return binary(OpKind::Sub, a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return binary(OpKind::Mul, a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return binary(OpKind::Div, a, b); }
Tensor operator+(const Tensor& a, Scalar b) { return binary(OpKind::Add, a, b); }
Tensor operator-(const Tensor& a, Scalar b) { return binary(OpKind::Sub, a, b); }
Tensor operator*(const Tensor& a, Scalar b) { return binary(OpKind::Mul, a, b); }
Tensor operator/(const Tensor& a, Scalar b) { return binary(OpKind::Div, a, b); }
Tensor operator+(Scalar a, const Tensor& b) { return binary(OpKind::Add, a, b); }
Tensor operator-(Scalar a, const Tensor& b) { return binary(OpKind::Sub, a, b); }
Tensor operator*(Scalar a, const Tensor& b) { return binary(OpKind::Mul, a, b); }
Tensor operator/(Scalar a, const Tensor& b) { return binary(OpKind::Div, a, b); }
Tensor operator-(const Tensor& a) { return unary(OpKind::Neg, a); }

Tensor eq(const Tensor& a, Scalar b) { return binary(OpKind::Eq, a, b); }
Tensor ne(const Tensor& a, Scalar b) { return binary(OpKind::Ne, a, b); }
Tensor lt(const Tensor& a, Scalar b) { return binary(OpKind::Lt, a, b); }
Tensor le(const Tensor& a, Scalar b) { return binary(OpKind::Le, a, b); }
Tensor gt(const Tensor& a, Scalar b) { return binary(OpKind::Gt, a, b); }
Tensor ge(const Tensor& a, Scalar b) { return binary(OpKind::Ge, a, b); }

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  return trace(OpKind::Where, {value_of(cond, OpKind::Where), value_of(a, OpKind::Where), value_of(b, OpKind::Where)});
}
Tensor where(const Tensor& cond, const Tensor& a, Scalar b) {
  return trace(OpKind::Where,
               {value_of(cond, OpKind::Where), value_of(a, OpKind::Where), scalar_like(b, a, OpKind::Where)});
}
Tensor where(const Tensor& cond, Scalar a, const Tensor& b) {
  return trace(OpKind::Where,
               {value_of(cond, OpKind::Where), scalar_like(a, b, OpKind::Where), value_of(b, OpKind::Where)});
}

Tensor masked_fill(const Tensor& t, const Tensor& mask, Scalar value) {
  const ir::NodePtr x = value_of(t, OpKind::Where), m = value_of(mask, OpKind::Where);
  if (m->dtype() != DType::Bool) {
    throw Error(fmt::format("masked_fill: the mask must be bool, got {}", dtype_name(m->dtype())));
  }
  absl::StatusOr<ir::Shape> shape = ir::broadcast_shapes("masked_fill", x->shape(), m->shape());
  if (!shape.ok() || *shape != x->shape()) {
    throw Error(fmt::format("masked_fill: a mask of shape {} does not broadcast to the tensor's shape {}",
                            ir::shape_to_string(m->shape()), ir::shape_to_string(x->shape())));
  }
  return where(mask, value, t);
}

Tensor silu(const Tensor& t) { return t * sigmoid(t); }

Tensor softplus(const Tensor& t, double beta, double threshold) {
  // The log branch sees the threshold where it is not taken: no overflow, so no NaN in its
  // gradient; at the threshold itself it is taken whole (min would split the gradient there).
  const Tensor scaled = t * beta, over = gt(scaled, threshold);
  return where(over, t, log1p(exp(where(over, threshold, scaled))) / beta);
}

Tensor clamp(const Tensor& t, Scalar lo, Scalar hi) {
  return trace(OpKind::Clamp, {value_of(t, OpKind::Clamp), scalar_like(lo, t, OpKind::Clamp),
                               scalar_like(hi, t, OpKind::Clamp)});
}

}  // namespace lazyjit

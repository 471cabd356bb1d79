// Node creation with trace-time checks, promotion and broadcasting.
#include "ir/builder.h"

#include <array>
#include <atomic>
#include <cmath>
#include <limits>

#include "absl/status/status.h"
#include "fmt/format.h"
#include "fmt/ranges.h"
#include "ir/types.h"

namespace lazyjit::ir {

NodePtr make_parameter(BackendDataPtr data) {
  Shape shape(data->shape().begin(), data->shape().end());
  auto node = std::make_shared<Node>(OpKind::Parameter, data->dtype(), std::move(shape), Node::Operands{});
  node->data_ = std::move(data);
  return node;
}

NodePtr make_scalar(ScalarValue value, DType dtype, Shape shape) {
  auto node = std::make_shared<Node>(OpKind::Scalar, dtype, std::move(shape), Node::Operands{});
  node->scalar_ = value;
  return node;
}

NodePtr make_constant(ScalarValue value, DType dtype, Shape shape) {
  auto node = std::make_shared<Node>(OpKind::Constant, dtype, std::move(shape), Node::Operands{});
  node->scalar_ = value;
  return node;
}

NodePtr stamp_collective(const NodePtr& node) {
  static std::atomic<int64_t> next{0};
  auto copy = std::make_shared<Node>(*node);
  copy->scalar_ = ScalarValue::of_int(next.fetch_add(1, std::memory_order_relaxed));
  return copy;
}

NodePtr make_stop_gradient(const NodePtr& node) {
  auto copy = std::make_shared<Node>(*node);
  copy->stops_gradient_ = true;
  return copy;
}

absl::Status check_scalar_fits(std::string_view op, Scalar value, DType dtype) {
  auto fits = [&]<class T>() {
    using L = std::numeric_limits<T>;
    if (value.past_int64()) return !std::is_integral_v<T>;  // above every int64, within float's range
    if (!value.is_floating()) return value.to_int64() >= L::lowest() && value.to_int64() <= L::max();
    const double v = value.to_double();
    if (std::isnan(v) || std::isinf(v)) return !std::is_integral_v<T>;
    if constexpr (std::is_integral_v<T>) {
      // A float converts by truncation; 2^digits itself (as (double)INT64_MAX rounds to) does not fit.
      const double t = std::trunc(v);
      return t >= static_cast<double>(L::lowest()) && t < std::ldexp(1.0, L::digits);
    }
    return v >= static_cast<double>(L::lowest()) && v <= static_cast<double>(L::max());
  };
  bool ok = true;
  switch (dtype) {
    case DType::Bool: case DType::Float64: break;
    case DType::Int32: ok = fits.operator()<int32_t>(); break;
    case DType::Int64: ok = fits.operator()<int64_t>(); break;
    case DType::Float32: ok = fits.operator()<float>(); break;
  }
  if (ok) return absl::OkStatus();
  const std::string text = value.is_floating() ? fmt::format("{}", value.to_double())
                           : value.past_int64()  ? fmt::format("{}", value.to_uint64_bits())
                                                 : fmt::format("{}", value.to_int64());
  return absl::InvalidArgumentError(fmt::format("{}: scalar {} does not fit {}", op, text, dtype_name(dtype)));
}

ScalarValue scalar_value(Scalar value, DType dtype) {
  switch (dtype) {
    case DType::Bool: return ScalarValue::of_int(value.to_double() != 0.0);
    case DType::Int32: return ScalarValue::of_int(static_cast<int32_t>(value.to_int64()));
    case DType::Int64: return ScalarValue::of_int(value.to_int64());
    case DType::Float32: return ScalarValue::of_double(static_cast<float>(value.to_double()));
    case DType::Float64: return ScalarValue::of_double(value.to_double());
  }
  return ScalarValue::of_int(0);
}

NodePtr make_scalar(Scalar value, DType dtype) { return make_scalar(scalar_value(value, dtype), dtype, Shape{}); }

absl::StatusOr<NodePtr> make_arange(int64_t n, DType dtype) {
  if (n < 0) return absl::InvalidArgumentError(fmt::format("arange: n must be >= 0, got {}", n));
  if (dtype == DType::Bool) return absl::InvalidArgumentError("arange: dtype bool is not supported");
  if (dtype == DType::Int32 && n - 1 > std::numeric_limits<int32_t>::max()) {
    return absl::InvalidArgumentError(fmt::format("arange: its last value {} does not fit int32", n - 1));
  }
  if (absl::Status status = validate_dims("arange", std::array{n}); !status.ok()) return status;
  return std::make_shared<Node>(OpKind::Arange, dtype, Shape{n}, Node::Operands{});
}

NodePtr make_cast(NodePtr node, DType dtype) {
  if (node->dtype() == dtype) return node;
  Shape shape = node->shape();
  return std::make_shared<Node>(OpKind::Cast, dtype, std::move(shape), Node::Operands{std::move(node)});
}

namespace {

/// The dtype the value operands are brought to before `info`'s op runs on them.
absl::StatusOr<DType> operand_dtype(const OpInfo& info, std::span<const NodePtr> values) {
  DType common = values[0]->dtype();
  for (const NodePtr& v : values.subspan(1)) common = promote_types(common, v->dtype());
  switch (info.admits) {
    case Admits::All: return common;
    case Admits::Floating: return is_floating(common) ? common : DType::Float32;
    case Admits::Bool: return DType::Bool;
    case Admits::Numeric:
      if (common == DType::Bool) {
        return absl::InvalidArgumentError(fmt::format("{}: bool operands are not supported", info.name));
      }
      return common;
    case Admits::Integral:
      if (is_floating(common)) {
        return absl::InvalidArgumentError(
            fmt::format("{}: {} operands are not supported (integers and bool only)", info.name, dtype_name(common)));
      }
      return common;
  }
  return common;
}

DType result_dtype(DTypeRule rule, DType operands) {
  return rule == DTypeRule::Compare ? DType::Bool : operands;
}

}  // namespace

absl::StatusOr<NodePtr> make_elementwise(OpKind op, std::span<const NodePtr> operands) {
  const OpInfo& info = op_info(op);
  if (info.access != AccessPattern::Elementwise || op == OpKind::Cast) {
    return absl::InternalError(fmt::format("{} is not an elementwise op", info.name));
  }
  if (static_cast<int>(operands.size()) != info.arity) {
    return absl::InvalidArgumentError(
        fmt::format("{}: expected {} operands, got {}", info.name, info.arity, operands.size()));
  }
  Shape shape = operands[0]->shape();
  for (const NodePtr& operand : operands.subspan(1)) {
    absl::StatusOr<Shape> s = broadcast_shapes(info.name, shape, operand->shape());
    if (!s.ok()) return s.status();
    shape = *std::move(s);
  }
  if (operands.size() > 1) {  // broadcasting can multiply element counts past what fits
    if (absl::Status status = validate_dims(info.name, shape); !status.ok()) return status;
  }

  Node::Operands converted(operands.begin(), operands.end());
  std::span<const NodePtr> values = operands;
  if (info.dtype_rule == DTypeRule::Select) {
    if (operands[0]->dtype() != DType::Bool) {
      return absl::InvalidArgumentError(fmt::format("{}: condition must be bool, got {}", info.name, dtype_name(operands[0]->dtype())));
    }
    values = operands.subspan(1);
  }
  absl::StatusOr<DType> dtype = operand_dtype(info, values);
  if (!dtype.ok()) return dtype.status();
  for (size_t i = converted.size() - values.size(); i < converted.size(); ++i) {
    converted[i] = make_cast(std::move(converted[i]), *dtype);
  }
  return std::make_shared<Node>(op, result_dtype(info.dtype_rule, *dtype), std::move(shape),
                                std::move(converted));
}

}  // namespace lazyjit::ir

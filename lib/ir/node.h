// Node: one op of the lazy IR with its operands, result shape and dtype. Immutable.
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "absl/container/inlined_vector.h"
#include "ir/op.h"
#include "ir/shape.h"
#include "lazyjit/backend.h"
#include "lazyjit/dtype.h"

namespace lazyjit::ir {

class Node;
using NodePtr = std::shared_ptr<const Node>;

/// The value of a Scalar leaf: an int64 for bool and integer dtypes, a double for floats.
struct ScalarValue {
  union {
    int64_t i;
    double f;
  };
  static ScalarValue of_int(int64_t v) { ScalarValue s; s.i = v; return s; }
  static ScalarValue of_double(double v) { ScalarValue s; s.f = v; return s; }
  /// The value as `dtype` reads it (the storage is chosen by is_floating(dtype)).
  double as_double(DType dtype) const { return is_floating(dtype) ? f : static_cast<double>(i); }
};

/// An IR node. Nodes are immutable and shared (a DAG); their single result has `shape()` and
/// `dtype()`. Leaves: Parameter (a buffer), Scalar (a runtime value splatted to the node's
/// shape), Arange. Create nodes through builder.h, which checks and promotes.
class Node : public std::enable_shared_from_this<Node> {
 public:
  using Operands = absl::InlinedVector<NodePtr, 3>;
  /// Per-op integer attributes (ops.def says what each op keeps there): part of the key.
  using Attrs = absl::InlinedVector<int64_t, 4>;

  Node(OpKind op, DType dtype, Shape shape, Operands operands, Attrs attrs = {})
      : op_(op), dtype_(dtype), shape_(std::move(shape)), operands_(std::move(operands)),
        attrs_(std::move(attrs)) {
    for (const NodePtr& operand : operands_) size_bound_ += operand->size_bound_;
    if (size_bound_ > kMaxSizeBound) size_bound_ = kMaxSizeBound;
  }
  /// Releases the operands without recursing: dropping the last handle to a million-node
  /// chain runs in constant stack space (node.cpp).
  ~Node();
  Node(const Node&) = default;
  Node& operator=(const Node&) = delete;

  OpKind op() const { return op_; }
  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int rank() const { return static_cast<int>(shape_.size()); }
  std::span<const NodePtr> operands() const { return operands_; }
  const Node& operand(int i) const { return *operands_[i]; }
  const Attrs& attrs() const { return attrs_; }

  /// Parameter leaves: the buffer they read.
  const BackendDataPtr& data() const { return data_; }
  /// Scalar and Constant leaves: the value. Rand and Randn: the seed (an int64). Collectives:
  /// their place in this process's trace order (stamp_collective; not in the key).
  ScalarValue scalar() const { return scalar_; }

  /// Whether autograd treats this value as a constant: set on the maximum that softmax and
  /// log_softmax subtract, whose exact gradient is zero. Not in the key: it changes no code.
  bool stops_gradient() const { return stops_gradient_; }
  /// What the cache key sees of this node alone: op, dtype, rank (sizes are not part of it).
  uint64_t signature() const {
    return static_cast<uint64_t>(op_) | static_cast<uint64_t>(dtype_) << 8 |
           static_cast<uint64_t>(shape_.size()) << 16;
  }
  /// How many shared_ptrs hold this node (operand edges, roots, tensors): donation asks
  /// whether every holder is inside one graph.
  long use_count() const { return weak_from_this().use_count(); }
  /// Which dims have size 1: the broadcast pattern, also part of the cache key.
  uint64_t unit_dims() const { return unit_dim_mask(shape_); }
  /// An upper bound of the number of nodes this one depends on (itself included), exact for
  /// trees, saturating for heavily shared DAGs: lets graph building reserve its tables.
  uint32_t size_bound() const { return size_bound_; }

 private:
  friend NodePtr make_parameter(BackendDataPtr data);
  friend NodePtr make_scalar(ScalarValue value, DType dtype, Shape shape);
  friend NodePtr make_constant(ScalarValue value, DType dtype, Shape shape);
  friend NodePtr make_random(OpKind op, int64_t seed, DType dtype, Shape shape);
  friend NodePtr make_stop_gradient(const NodePtr& node);
  friend NodePtr stamp_collective(const NodePtr& node);

  static constexpr uint32_t kMaxSizeBound = 1u << 16;

  OpKind op_;
  DType dtype_;
  uint32_t size_bound_ = 1;
  Shape shape_;
  Operands operands_;
  Attrs attrs_;
  BackendDataPtr data_;
  ScalarValue scalar_ = ScalarValue::of_int(0);
  bool stops_gradient_ = false;
};

}  // namespace lazyjit::ir

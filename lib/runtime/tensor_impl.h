// TensorImpl: what a Tensor handle points to: pending IR or device data, never both stale.
#pragma once

#include <memory>

#include "ir/node.h"
#include "lazyjit/backend.h"

namespace lazyjit::runtime {
class LiveTensors;
}

namespace lazyjit::detail {

/// A tensor's state. Pending: `ir()` is the value's IR, and the tensor is registered with the
/// live-tensor set so mark_step() finds it. Materialised: `data()` holds the value and
/// `ir_value()` is a Parameter leaf over it, created once so every use shares the leaf.
/// Not thread-safe: one tensor must not be mutated concurrently with other uses.
class TensorImpl : public std::enable_shared_from_this<TensorImpl> {
 public:
  TensorImpl(BackendDataPtr data, runtime::LiveTensors& live);
  TensorImpl(ir::NodePtr ir, runtime::LiveTensors& live);
  ~TensorImpl();
  TensorImpl(const TensorImpl&) = delete;
  TensorImpl& operator=(const TensorImpl&) = delete;

  DType dtype() const { return ir_ ? ir_->dtype() : data_->dtype(); }
  std::span<const int64_t> shape() const;
  bool pending() const { return ir_ != nullptr; }
  const ir::NodePtr& ir() const { return ir_; }
  const BackendDataPtr& data() const { return data_; }

  /// The IR value ops read: the pending IR, or the Parameter leaf over the data.
  const ir::NodePtr& ir_value();

  /// Materialised: holds `data` from now on (drops the IR, leaves the live set).
  void set_data(BackendDataPtr data);
  /// In-place update: the tensor keeps its identity and takes `ir` as its new value.
  void set_ir(ir::NodePtr ir);

 private:
  friend class runtime::LiveTensors;

  ir::NodePtr ir_;
  BackendDataPtr data_;
  ir::NodePtr data_leaf_;
  runtime::LiveTensors& live_;
  TensorImpl* live_prev_ = nullptr;  // intrusive links of the live set, guarded by its mutex
  TensorImpl* live_next_ = nullptr;
  bool is_live_ = false;
};

}  // namespace lazyjit::detail

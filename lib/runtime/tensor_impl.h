// TensorImpl: what a Tensor handle points to: pending IR, or device data and its leaf.
#pragma once

#include <atomic>
#include <memory>
#include <thread>

#include "ir/builder.h"
#include "ir/node.h"
#include "lazyjit/backend.h"

namespace lazyjit::runtime {
class LiveTensors;
}

namespace lazyjit::detail {

/// A tensor's state. Pending: `ir()` is its value's IR and the tensor is in the live-tensor
/// set, so the mark_step() of the thread that gave it that value finds it. Materialised: `data()` holds the value and `ir_value()` is a
/// Parameter leaf over it, made once so every use shares one leaf. Shape and dtype never
/// change (in-place updates keep both).
///
/// Thread-safe: the state is swapped under a small lock and readers get their own references.
/// While a step barrier materialises the tensor it holds a claim on it: ops that read the
/// tensor's value (ir_value) or replace it (set_ir) wait for the barrier to finish, so no new
/// IR can refer to a buffer the barrier donates.
class TensorImpl : public std::enable_shared_from_this<TensorImpl> {
  struct Private {};

 public:
  static std::shared_ptr<TensorImpl> create(BackendDataPtr data, runtime::LiveTensors& live);
  static std::shared_ptr<TensorImpl> create(ir::NodePtr ir, runtime::LiveTensors& live);
  TensorImpl(Private, DType dtype, ir::Shape shape, runtime::LiveTensors& live)
      : dtype_(dtype), shape_(std::move(shape)), live_(live) {}
  ~TensorImpl();
  TensorImpl(const TensorImpl&) = delete;
  TensorImpl& operator=(const TensorImpl&) = delete;

  DType dtype() const { return dtype_; }
  const ir::Shape& shape() const { return shape_; }

  bool pending() const;
  /// The pending IR, or null once materialised.
  ir::NodePtr ir() const;
  /// The data, or null while pending.
  BackendDataPtr data() const;
  /// The IR value ops read: the pending IR, or the Parameter leaf over the data. Waits while
  /// a step barrier holds a claim on the tensor.
  ir::NodePtr ir_value() const;

  /// Step barrier only: claims the tensor for the barrier, and releases the claim.
  void claim();
  void release_claim();

  /// Materialised: takes `data` (and `leaf`, a Parameter leaf over it) as its value if its IR
  /// is still `computed` (an in-place update may have moved on); returns whether it did.
  /// Does not allocate or throw, so results can be assigned after kernels have run.
  /// With `keep_history` the IR it computed stays reachable as history() (see
  /// GraphExecutor::keep_history_on_sync).
  bool set_data(BackendDataPtr data, ir::NodePtr leaf, const ir::Node* computed, bool keep_history = false) noexcept;
  bool set_data(BackendDataPtr data, const ir::Node* computed) {
    ir::NodePtr leaf = ir::make_parameter(data);
    return set_data(std::move(data), std::move(leaf), computed);
  }
  /// In-place update: keeps its identity and takes `ir` (same shape and dtype) as its value.
  /// The calling thread becomes the tensor's owner: its mark_step() materialises it.
  void set_ir(ir::NodePtr ir);
  /// How many in-place updates the tensor has had.
  uint64_t updates() const;

  /// The IR that computed the materialised value, kept by a sync for autograd until the next
  /// step barrier or in-place update; null otherwise.
  ir::NodePtr history() const;
  void drop_history();
  /// The Parameter leaf over the materialised value (null while pending). Does not wait.
  ir::NodePtr data_leaf() const;

  /// Autograd's marks (lib/autograd): whether backward() accumulates into this tensor's
  /// gradient, and that gradient (null until the first backward()).
  bool requires_grad() const;
  void set_requires_grad(bool requires_grad);
  std::shared_ptr<TensorImpl> grad() const;
  void set_grad(std::shared_ptr<TensorImpl> grad);

 private:
  friend class runtime::LiveTensors;

  /// Runs `f` under the guard once no step barrier claims the tensor (waiting for it if one
  /// does), and returns what `f` returns.
  template <class F>
  auto when_unclaimed(F&& f) const;

  /// A test-and-set spin lock: held for a few pointer copies and the live-set update, and
  /// contended only when another thread's mark_step() meets this tensor.
  class Guard {
   public:
    explicit Guard(std::atomic_flag& flag) : flag_(flag) {
      while (flag_.test_and_set(std::memory_order_acquire)) {
        while (flag_.test(std::memory_order_relaxed)) std::this_thread::yield();
      }
    }
    ~Guard() { flag_.clear(std::memory_order_release); }

   private:
    std::atomic_flag& flag_;
  };

  const DType dtype_;
  const ir::Shape shape_;
  mutable std::atomic_flag lock_ = ATOMIC_FLAG_INIT;
  ir::NodePtr ir_;         // pending value, or null
  BackendDataPtr data_;    // materialised value, or null
  ir::NodePtr data_leaf_;  // Parameter leaf over data_
  ir::NodePtr history_;    // the IR that computed data_, while a sync keeps it
  bool claimed_ = false;   // a step barrier is materialising this tensor
  bool requires_grad_ = false;
  std::shared_ptr<TensorImpl> grad_;
  runtime::LiveTensors& live_;
  TensorImpl* live_prev_ = nullptr;  // intrusive links of the live set, guarded by its mutex
  TensorImpl* live_next_ = nullptr;
  std::thread::id live_owner_;       // the thread that gave it its pending value, likewise
  bool is_live_ = false;
  uint64_t updates_ = 0;             // in-place updates so far
};

}  // namespace lazyjit::detail

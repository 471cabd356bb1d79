// TensorImpl state changes and the live-tensor list.
#include "runtime/tensor_impl.h"

#include <utility>

#include "ir/builder.h"
#include "runtime/live_tensors.h"

namespace lazyjit::detail {

std::shared_ptr<TensorImpl> TensorImpl::create(BackendDataPtr data, runtime::LiveTensors& live) {
  auto t = std::make_shared<TensorImpl>(Private{}, data->dtype(), ir::Shape(data->shape().begin(), data->shape().end()),
                                        live);
  t->data_leaf_ = ir::make_parameter(data);
  t->data_ = std::move(data);
  return t;
}

std::shared_ptr<TensorImpl> TensorImpl::create(ir::NodePtr ir, runtime::LiveTensors& live) {
  auto t = std::make_shared<TensorImpl>(Private{}, ir->dtype(), ir->shape(), live);
  t->ir_ = std::move(ir);
  live.insert(t.get());  // after make_shared: snapshot() relies on weak_from_this()
  return t;
}

TensorImpl::~TensorImpl() { live_.erase(this); }

bool TensorImpl::pending() const {
  Guard guard(lock_);
  return ir_ != nullptr;
}

ir::NodePtr TensorImpl::ir() const {
  Guard guard(lock_);
  return ir_;
}

BackendDataPtr TensorImpl::data() const {
  Guard guard(lock_);
  return data_;
}

ir::NodePtr TensorImpl::history() const {
  Guard guard(lock_);
  return history_;
}

ir::NodePtr TensorImpl::data_leaf() const {
  Guard guard(lock_);
  return data_leaf_;
}

void TensorImpl::drop_history() {
  ir::NodePtr old;  // released after the guard: it may hold a whole graph
  Guard guard(lock_);
  old = std::move(history_);
}

uint64_t TensorImpl::updates() const {
  Guard guard(lock_);
  return updates_;
}

bool TensorImpl::requires_grad() const {
  Guard guard(lock_);
  return requires_grad_;
}

void TensorImpl::set_requires_grad(bool requires_grad) {
  Guard guard(lock_);
  requires_grad_ = requires_grad;
}

std::shared_ptr<TensorImpl> TensorImpl::grad() const {
  Guard guard(lock_);
  return grad_;
}

void TensorImpl::set_grad(std::shared_ptr<TensorImpl> grad) {
  std::shared_ptr<TensorImpl> old;  // released outside the guard: it may be the last handle
  Guard guard(lock_);
  old = std::exchange(grad_, std::move(grad));
}

template <class F>
auto TensorImpl::when_unclaimed(F&& f) const {
  for (;;) {
    uint64_t epoch = 0;
    {
      Guard guard(lock_);
      if (!claimed_) return f();
      epoch = live_.barrier_epoch();  // read under the guard: the release cannot be missed
    }
    live_.wait_for_barrier(epoch);
  }
}

ir::NodePtr TensorImpl::ir_value() const {
  return when_unclaimed([&] { return ir_ ? ir_ : data_leaf_; });
}

void TensorImpl::claim() {
  Guard guard(lock_);
  claimed_ = true;
}

void TensorImpl::release_claim() {
  Guard guard(lock_);
  claimed_ = false;
}

bool TensorImpl::set_data(BackendDataPtr data, ir::NodePtr leaf, const ir::Node* computed, bool keep_history) noexcept {
  ir::NodePtr old_ir;  // released after the lock
  {
    Guard guard(lock_);
    if (ir_.get() != computed) return false;
    old_ir = std::move(ir_);
    if (keep_history) history_ = old_ir;
    data_ = std::move(data);
    data_leaf_ = std::move(leaf);
    live_.erase(this);  // under the guard: a racing set_ir must not end pending but not live
  }
  return true;
}

void TensorImpl::set_ir(ir::NodePtr ir) {
  ir::NodePtr old_ir;  // released after the guard
  BackendDataPtr old_data;
  ir::NodePtr old_leaf, old_history;
  when_unclaimed([&] {
    ++updates_;
    old_ir = std::exchange(ir_, std::move(ir));
    old_data = std::move(data_);
    old_leaf = std::move(data_leaf_);
    old_history = std::move(history_);
    live_.insert(this);
  });
}

}  // namespace lazyjit::detail

namespace lazyjit::runtime {

void LiveTensors::insert(detail::TensorImpl* t) {
  std::lock_guard lock(mutex_);
  t->live_owner_ = std::this_thread::get_id();
  if (t->is_live_) return;
  t->is_live_ = true;
  t->live_prev_ = tail_;
  t->live_next_ = nullptr;
  (tail_ ? tail_->live_next_ : head_) = t;
  tail_ = t;
  ++size_;
}

void LiveTensors::erase(detail::TensorImpl* t) {
  std::lock_guard lock(mutex_);
  if (!t->is_live_) return;
  t->is_live_ = false;
  (t->live_prev_ ? t->live_prev_->live_next_ : head_) = t->live_next_;
  (t->live_next_ ? t->live_next_->live_prev_ : tail_) = t->live_prev_;
  --size_;
}

std::vector<std::shared_ptr<detail::TensorImpl>> LiveTensors::snapshot(std::thread::id owner) {
  std::lock_guard lock(mutex_);
  std::vector<std::shared_ptr<detail::TensorImpl>> out;
  out.reserve(size_);
  for (detail::TensorImpl* t = head_; t; t = t->live_next_) {
    if (t->live_owner_ != owner) continue;
    // A tensor whose last handle is going away has a zero count and is skipped; its
    // destructor waits on this mutex before its memory is freed.
    if (auto strong = t->weak_from_this().lock()) out.push_back(std::move(strong));
  }
  return out;
}

size_t LiveTensors::size() const {
  std::lock_guard lock(mutex_);
  return size_;
}

}  // namespace lazyjit::runtime

// TensorImpl state changes and the live-tensor list.
#include "runtime/tensor_impl.h"

#include "ir/builder.h"
#include "runtime/live_tensors.h"

namespace lazyjit::detail {

TensorImpl::TensorImpl(BackendDataPtr data, runtime::LiveTensors& live) : data_(std::move(data)), live_(live) {}

TensorImpl::TensorImpl(ir::NodePtr ir, runtime::LiveTensors& live) : ir_(std::move(ir)), live_(live) {
  live_.insert(this);
}

TensorImpl::~TensorImpl() { live_.erase(this); }

std::span<const int64_t> TensorImpl::shape() const {
  if (ir_) return ir_->shape();
  return data_->shape();
}

const ir::NodePtr& TensorImpl::ir_value() {
  if (ir_) return ir_;
  if (!data_leaf_) data_leaf_ = ir::make_parameter(data_);
  return data_leaf_;
}

void TensorImpl::set_data(BackendDataPtr data) {
  data_ = std::move(data);
  data_leaf_ = nullptr;
  ir_ = nullptr;
  live_.erase(this);
}

void TensorImpl::set_ir(ir::NodePtr ir) {
  ir_ = std::move(ir);
  data_ = nullptr;
  data_leaf_ = nullptr;
  live_.insert(this);
}

}  // namespace lazyjit::detail

namespace lazyjit::runtime {

void LiveTensors::insert(detail::TensorImpl* t) {
  std::lock_guard lock(mutex_);
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

std::vector<std::shared_ptr<detail::TensorImpl>> LiveTensors::snapshot() {
  std::lock_guard lock(mutex_);
  std::vector<std::shared_ptr<detail::TensorImpl>> out;
  out.reserve(size_);
  for (detail::TensorImpl* t = head_; t; t = t->live_next_) {
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

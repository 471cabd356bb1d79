// LiveTensors: every tensor with pending IR, for mark_step(), without keeping any alive.
#pragma once

#include <memory>
#include <mutex>
#include <vector>

namespace lazyjit::detail {
class TensorImpl;
}

namespace lazyjit::runtime {

/// An intrusive list of pending tensors: O(1) insert and erase, no allocation, so tracing
/// stays cheap. A tensor leaves it when it is materialised or destroyed. Thread-safe.
class LiveTensors {
 public:
  void insert(detail::TensorImpl* tensor);
  void erase(detail::TensorImpl* tensor);
  /// Strong references to every pending tensor still alive, oldest first.
  std::vector<std::shared_ptr<detail::TensorImpl>> snapshot();
  size_t size() const;

 private:
  mutable std::mutex mutex_;
  detail::TensorImpl* head_ = nullptr;
  detail::TensorImpl* tail_ = nullptr;
  size_t size_ = 0;
};

}  // namespace lazyjit::runtime

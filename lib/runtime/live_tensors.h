// LiveTensors: every tensor with pending IR, for mark_step(), without keeping any alive.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace lazyjit::detail {
class TensorImpl;
}

namespace lazyjit::runtime {

/// An intrusive list of pending tensors, each with its owning thread: O(1) insert and erase, no allocation, so tracing
/// stays cheap. A tensor leaves it when it is materialised or destroyed. Thread-safe.
class LiveTensors {
 public:
  void insert(detail::TensorImpl* tensor);
  void erase(detail::TensorImpl* tensor);
  /// Strong references to the pending tensors still alive that `owner` gave their value
  /// (created or last updated them in place), oldest first.
  std::vector<std::shared_ptr<detail::TensorImpl>> snapshot(std::thread::id owner);
  size_t size() const;

  /// Step barriers finished so far. A thread that finds a tensor claimed by a barrier reads
  /// this, then waits until it changes.
  uint64_t barrier_epoch() const { return barrier_epoch_.load(std::memory_order_acquire); }
  void wait_for_barrier(uint64_t seen) const { barrier_epoch_.wait(seen, std::memory_order_acquire); }
  /// Called by the barrier after it released its claims.
  void finish_barrier() {
    barrier_epoch_.fetch_add(1, std::memory_order_acq_rel);
    barrier_epoch_.notify_all();
  }

 private:
  mutable std::mutex mutex_;
  detail::TensorImpl* head_ = nullptr;
  detail::TensorImpl* tail_ = nullptr;
  size_t size_ = 0;
  std::atomic<uint64_t> barrier_epoch_{0};
};

}  // namespace lazyjit::runtime

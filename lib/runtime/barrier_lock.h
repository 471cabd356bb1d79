// BarrierLock: the lock between syncs (shared) and step barriers (exclusive), writer-preferring.
#pragma once

#include <condition_variable>
#include <mutex>

namespace lazyjit::runtime {

/// A shared mutex whose exclusive side is never starved: once a step barrier waits, syncs
/// that start after it wait behind it (glibc's rwlock prefers readers, so four threads
/// syncing in a loop could hold a barrier off for seconds). Not recursive: a thread holding
/// it shared must not take it again. Meets the SharedMutex requirements (std::shared_lock).
class BarrierLock {
 public:
  void lock_shared() {
    std::unique_lock guard(mutex_);
    changed_.wait(guard, [&] { return !writing_ && writers_waiting_ == 0; });
    ++readers_;
  }
  void unlock_shared() {
    std::lock_guard guard(mutex_);
    if (--readers_ == 0) changed_.notify_all();
  }
  void lock() {
    std::unique_lock guard(mutex_);
    ++writers_waiting_;
    changed_.wait(guard, [&] { return !writing_ && readers_ == 0; });
    --writers_waiting_;
    writing_ = true;
  }
  void unlock() {
    std::lock_guard guard(mutex_);
    writing_ = false;
    changed_.notify_all();
  }
  /// Whether a barrier waits for the lock (for tests).
  bool writer_waiting() {
    std::lock_guard guard(mutex_);
    return writers_waiting_ > 0;
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  int readers_ = 0;
  int writers_waiting_ = 0;
  bool writing_ = false;
};

}  // namespace lazyjit::runtime

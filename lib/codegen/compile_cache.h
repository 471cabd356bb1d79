// KeyedCache: values made once per key even when threads race, in a bounded LRU; the
// CompileCache (compiled graphs by cache key) is one.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <future>
#include <list>
#include <memory>
#include <mutex>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "codegen/jit_compiler.h"
#include "ir/hash.h"

namespace lazyjit::codegen {

/// Maps keys to immutable values. Thread-safe. The first caller of a key makes its value;
/// callers racing for the same key wait for it instead of making their own. Holds at most
/// `capacity` entries (0: unbounded), evicting the least recently used; an evicted value is
/// freed once no caller still holds it.
template <class T>
class KeyedCache {
 public:
  using Entry = std::shared_ptr<const T>;
  using Make = absl::FunctionRef<absl::StatusOr<Entry>()>;

  explicit KeyedCache(size_t capacity = 0) : capacity_(capacity) {}

  /// The value for `key`, from the cache or from `make()` (called at most once per key while
  /// it stays cached; a failed or throwing make is not cached, and callers waiting on it get
  /// its error or exception).
  absl::StatusOr<Entry> get_or_make(const ir::Hash128& key, Make make) {
    std::promise<absl::StatusOr<Entry>> promise;
    Future future;
    uint64_t generation = 0;
    {
      std::lock_guard lock(mutex_);
      auto it = slots_.find(key);
      if (it != slots_.end()) {
        lru_.splice(lru_.begin(), lru_, it->second.lru);
        future = it->second.future;
        hits_.fetch_add(1, std::memory_order_relaxed);
      } else {
        lru_.push_front(key);
        generation = ++generations_;
        slots_.emplace(key, Slot{promise.get_future().share(), lru_.begin(), generation});
        misses_.fetch_add(1, std::memory_order_relaxed);
        evict_locked();
      }
    }
    if (future.valid()) return future.get();  // a hit, or another thread's make in flight

    absl::StatusOr<Entry> result;
    try {
      result = make();
    } catch (...) {
      promise.set_exception(std::current_exception());  // waiters see the same failure
      forget(key, generation);
      throw;
    }
    promise.set_value(result);
    if (!result.ok()) forget(key, generation);
    return result;
  }

  /// The value for `key` if it is made (counted as a hit), else null: never waits for a make
  /// in flight, never makes one.
  Entry find_ready(const ir::Hash128& key) {
    Future future;
    {
      std::lock_guard lock(mutex_);
      auto it = slots_.find(key);
      if (it == slots_.end()) return nullptr;
      future = it->second.future;
      if (future.wait_for(std::chrono::seconds(0)) != std::future_status::ready) return nullptr;
      lru_.splice(lru_.begin(), lru_, it->second.lru);
      hits_.fetch_add(1, std::memory_order_relaxed);
    }
    try {
      const absl::StatusOr<Entry>& made = future.get();
      return made.ok() ? *made : nullptr;
    } catch (...) {
      return nullptr;  // a make that threw; its slot is being dropped
    }
  }

  /// Whether `key` is cached (made or being made); does not touch LRU order.
  bool contains(const ir::Hash128& key) const {
    std::lock_guard lock(mutex_);
    return slots_.contains(key);
  }
  size_t size() const {
    std::lock_guard lock(mutex_);
    return slots_.size();
  }
  size_t capacity() const {
    std::lock_guard lock(mutex_);
    return capacity_;
  }
  void set_capacity(size_t capacity) {
    std::lock_guard lock(mutex_);
    capacity_ = capacity;
    evict_locked();
  }
  void clear() {
    std::lock_guard lock(mutex_);
    slots_.clear();
    lru_.clear();
  }

  struct Stats {
    int64_t hits = 0, misses = 0, evictions = 0;
  };
  Stats stats() const { return {hits_.load(), misses_.load(), evictions_.load()}; }
  void reset_stats() {
    hits_ = 0;
    misses_ = 0;
    evictions_ = 0;
  }

 private:
  using Future = std::shared_future<absl::StatusOr<Entry>>;
  struct Slot {
    Future future;
    std::list<ir::Hash128>::iterator lru;
    uint64_t generation;  // which insertion of the key this is
  };

  void evict_locked() {
    while (capacity_ > 0 && slots_.size() > capacity_) {
      const ir::Hash128 victim = lru_.back();
      lru_.pop_back();
      slots_.erase(victim);  // the value is freed when the last holder drops its Entry
      evictions_.fetch_add(1, std::memory_order_relaxed);
    }
  }

  /// Drops a failed make's slot so the next caller makes it again; a newer slot for the same
  /// key (the failed one was evicted meanwhile) is left alone.
  void forget(const ir::Hash128& key, uint64_t generation) {
    std::lock_guard lock(mutex_);
    auto it = slots_.find(key);
    if (it != slots_.end() && it->second.generation == generation) {
      lru_.erase(it->second.lru);
      slots_.erase(it);
    }
  }

  mutable std::mutex mutex_;
  absl::flat_hash_map<ir::Hash128, Slot> slots_;
  std::list<ir::Hash128> lru_;  // front: most recently used
  size_t capacity_;
  uint64_t generations_ = 0;
  std::atomic<int64_t> hits_{0}, misses_{0}, evictions_{0};
};

/// Compiled graphs by cache key (the graph key, its donations, the compiler's target).
using CompileCache = KeyedCache<CompiledGraph>;

}  // namespace lazyjit::codegen

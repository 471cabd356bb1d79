// The compile cache: a map of shared futures with LRU order.
#include "codegen/compile_cache.h"

namespace lazyjit::codegen {

absl::StatusOr<CompileCache::Entry> CompileCache::get_or_compile(const ir::Hash128& key, Compile compile) {
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
  if (future.valid()) return future.get();  // a hit, or another thread's compile in flight

  absl::StatusOr<Entry> result;
  try {
    result = compile();
  } catch (...) {
    promise.set_exception(std::current_exception());  // waiters see the same failure
    forget(key, generation);
    throw;
  }
  promise.set_value(result);
  if (!result.ok()) forget(key, generation);
  return result;
}

void CompileCache::forget(const ir::Hash128& key, uint64_t generation) {
  std::lock_guard lock(mutex_);
  auto it = slots_.find(key);
  if (it != slots_.end() && it->second.generation == generation) {
    lru_.erase(it->second.lru);
    slots_.erase(it);
  }
}

void CompileCache::evict_locked() {
  while (capacity_ > 0 && slots_.size() > capacity_) {
    const ir::Hash128 victim = lru_.back();
    lru_.pop_back();
    slots_.erase(victim);  // the code is freed when the last holder drops its Entry
    evictions_.fetch_add(1, std::memory_order_relaxed);
  }
}

bool CompileCache::contains(const ir::Hash128& key) const {
  std::lock_guard lock(mutex_);
  return slots_.contains(key);
}

size_t CompileCache::size() const {
  std::lock_guard lock(mutex_);
  return slots_.size();
}

void CompileCache::set_capacity(size_t capacity) {
  std::lock_guard lock(mutex_);
  capacity_ = capacity;
  evict_locked();
}

void CompileCache::clear() {
  std::lock_guard lock(mutex_);
  slots_.clear();
  lru_.clear();
}

void CompileCache::reset_stats() {
  hits_ = 0;
  misses_ = 0;
  evictions_ = 0;
}

}  // namespace lazyjit::codegen

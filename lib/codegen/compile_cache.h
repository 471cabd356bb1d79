// CompileCache: compiled graphs by key, compiled once even when threads race, bounded LRU.
#pragma once

#include <atomic>
#include <cstdint>
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

/// Maps graph keys to compiled graphs. Thread-safe. The first caller of a key compiles it;
/// callers racing for the same key wait for that compile instead of starting their own.
/// Holds at most `capacity` entries (0: unbounded), evicting the least recently used; an
/// evicted graph's code is freed once no caller still holds it.
class CompileCache {
 public:
  using Entry = std::shared_ptr<const CompiledGraph>;
  using Compile = absl::FunctionRef<absl::StatusOr<Entry>()>;

  explicit CompileCache(size_t capacity = 0) : capacity_(capacity) {}

  /// The graph for `key`, from the cache or from `compile()` (called at most once per key
  /// while it stays cached; a failed or throwing compile is not cached, and callers waiting
  /// on it get its error or exception).
  absl::StatusOr<Entry> get_or_compile(const ir::Hash128& key, Compile compile);

  /// Whether `key` is cached (compiled or being compiled); does not touch LRU order.
  bool contains(const ir::Hash128& key) const;
  size_t size() const;
  void set_capacity(size_t capacity);
  void clear();

  struct Stats {
    int64_t hits = 0, misses = 0, evictions = 0;
  };
  Stats stats() const { return {hits_.load(), misses_.load(), evictions_.load()}; }
  void reset_stats();

 private:
  using Future = std::shared_future<absl::StatusOr<Entry>>;
  struct Slot {
    Future future;
    std::list<ir::Hash128>::iterator lru;
    uint64_t generation;  // which insertion of the key this is
  };
  void evict_locked();
  /// Drops a failed compile's slot so the next caller compiles again; a newer slot for the
  /// same key (the failed one was evicted meanwhile) is left alone.
  void forget(const ir::Hash128& key, uint64_t generation);

  mutable std::mutex mutex_;
  absl::flat_hash_map<ir::Hash128, Slot> slots_;
  std::list<ir::Hash128> lru_;  // front: most recently used
  size_t capacity_;
  uint64_t generations_ = 0;
  std::atomic<int64_t> hits_{0}, misses_{0}, evictions_{0};
};

}  // namespace lazyjit::codegen

// CachingAllocator: 64-byte aligned host buffers, reused across steps, huge pages when large.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "lazyjit/backend.h"

namespace lazyjit::runtime {

/// Hands out buffers by size class and keeps freed ones for reuse, so a steady-state step
/// allocates nothing and touches no fresh pages. Buffers of 2 MiB and more are 2 MiB aligned
/// and advised onto transparent huge pages (a fresh 64 MiB buffer otherwise costs 16K page
/// faults on first touch). Thread-safe.
class CachingAllocator {
 public:
  struct Block {
    void* data = nullptr;
    size_t capacity = 0;  // the size class actually reserved
  };
  struct Stats {
    int64_t bytes_allocated = 0;  // fresh memory from the system
    int64_t bytes_reused = 0;     // served from the pool
    int64_t bytes_cached = 0;     // held in the pool now
  };

  explicit CachingAllocator(size_t max_cached_bytes = size_t{2} << 30) : max_cached_(max_cached_bytes) {}
  ~CachingAllocator();
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  /// A block of at least `bytes`. Throws Error when the system is out of memory.
  Block allocate(size_t bytes);
  /// Returns `block` to the pool (or to the system when the pool is full).
  void release(Block block);
  /// Frees every pooled block.
  void trim();

  Stats stats() const;
  void reset_stats();

  static size_t size_class(size_t bytes);

 private:
  mutable std::mutex mutex_;
  absl::flat_hash_map<size_t, std::vector<void*>> free_;
  size_t cached_ = 0;
  size_t max_cached_;
  std::atomic<int64_t> allocated_{0}, reused_{0};
};

/// A BackendData in host memory from a CachingAllocator, returned to it on destruction.
class CpuBuffer final : public BackendData {
 public:
  CpuBuffer(CachingAllocator& allocator, DType dtype, std::vector<int64_t> shape);
  ~CpuBuffer() override;
  void* data() override { return block_.data; }

 private:
  CachingAllocator& allocator_;
  CachingAllocator::Block block_;
};

}  // namespace lazyjit::runtime

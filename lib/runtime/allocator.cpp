// The caching allocator and CPU buffers.
#include "runtime/allocator.h"

#include <sys/mman.h>
#include <unistd.h>

#include <bit>
#include <cstdint>
#include <cstdlib>

#include "fmt/format.h"
#include "fmt/ranges.h"
#include "lazyjit/error.h"

namespace lazyjit::runtime {
namespace {

constexpr size_t kAlignment = 64;
constexpr size_t kHugePage = size_t{2} << 20;

}  // namespace

size_t CachingAllocator::size_class(size_t bytes) {
  if (bytes <= kAlignment) return kAlignment;
  if (bytes < kHugePage) return std::bit_ceil(bytes);
  return (bytes + kHugePage - 1) / kHugePage * kHugePage;
}

/// The machine's memory: a request past it cannot succeed, and is refused before asking.
size_t physical_memory() {
  static const size_t bytes = [] {
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
    return pages > 0 && page > 0 ? static_cast<size_t>(pages) * static_cast<size_t>(page) : SIZE_MAX;
  }();
  return bytes;
}

CachingAllocator::Block CachingAllocator::allocate(size_t bytes) {
  if (bytes > physical_memory()) {
    throw Error(fmt::format("out of memory allocating a buffer of {} bytes (the machine has {})", bytes,
                            physical_memory()));
  }
  const size_t capacity = size_class(bytes);
  {
    std::lock_guard lock(mutex_);
    auto it = free_.find(capacity);
    if (it != free_.end() && !it->second.empty()) {
      void* data = it->second.back();
      it->second.pop_back();
      cached_ -= capacity;
      reused_.fetch_add(static_cast<int64_t>(capacity), std::memory_order_relaxed);
      return {data, capacity};
    }
  }
  const bool huge = capacity >= kHugePage;
  void* data = std::aligned_alloc(huge ? kHugePage : kAlignment, capacity);
  if (data == nullptr) {
    trim();
    data = std::aligned_alloc(huge ? kHugePage : kAlignment, capacity);
  }
  if (data == nullptr) throw Error(fmt::format("out of memory allocating a buffer of {} bytes", bytes));
  if (huge) madvise(data, capacity, MADV_HUGEPAGE);
  allocated_.fetch_add(static_cast<int64_t>(capacity), std::memory_order_relaxed);
  return {data, capacity};
}

void CachingAllocator::release(Block block) {
  {
    std::lock_guard lock(mutex_);
    if (cached_ + block.capacity <= max_cached_) {
      free_[block.capacity].push_back(block.data);
      cached_ += block.capacity;
      return;
    }
  }
  std::free(block.data);
}

void CachingAllocator::trim() {
  std::lock_guard lock(mutex_);
  for (auto& [capacity, blocks] : free_) {
    for (void* data : blocks) std::free(data);
  }
  free_.clear();
  cached_ = 0;
}

CachingAllocator::~CachingAllocator() { trim(); }

CachingAllocator::Stats CachingAllocator::stats() const {
  std::lock_guard lock(mutex_);
  return {allocated_.load(), reused_.load(), static_cast<int64_t>(cached_)};
}

void CachingAllocator::reset_stats() {
  allocated_ = 0;
  reused_ = 0;
}

namespace {

/// A block for `buffer`; out of memory is an Error that names its dtype and shape.
CachingAllocator::Block allocate_for(CachingAllocator& allocator, const BackendData& buffer) {
  const size_t bytes = static_cast<size_t>(buffer.size_bytes());
  try {
    return allocator.allocate(bytes);
  } catch (const Error&) {
    throw Error(fmt::format("out of memory allocating a buffer for {}[{}] ({} bytes)", dtype_name(buffer.dtype()),
                            fmt::join(buffer.shape(), ","), bytes));
  }
}

}  // namespace

CpuBuffer::CpuBuffer(CachingAllocator& allocator, DType dtype, std::vector<int64_t> shape)
    : BackendData(dtype, std::move(shape)), allocator_(allocator), block_(allocate_for(allocator, *this)) {}

CpuBuffer::~CpuBuffer() { allocator_.release(block_); }

}  // namespace lazyjit::runtime

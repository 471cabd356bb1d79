// Kernel launches on TBB.
#include "runtime/executor.h"

#include <algorithm>
#include <atomic>

#include "runtime/stack_thread.h"
#include "runtime/tier0.h"
#include "tbb/blocked_range.h"
#include "tbb/global_control.h"
#include "tbb/parallel_for.h"
#include "tbb/partitioner.h"
#include "tbb/task_arena.h"

#if defined(__SANITIZE_THREAD__)
#include <sanitizer/tsan_interface.h>
#endif

namespace lazyjit::runtime {
namespace {

// Debian's oneTBB is not built with ThreadSanitizer, so the hand-offs between a launch and
// its chunks are invisible to it; tell it of them (the chunk of a worker happens after the
// launch, and the caller's return after every chunk). Compiled kernels are not instrumented,
// tier 0's are: without these, each result read after a parallel launch looks like a race.
void launch_released(const void* token) {
#if defined(__SANITIZE_THREAD__)
  __tsan_release(const_cast<void*>(token));
#else
  (void)token;
#endif
}
void launch_acquired(const void* token) {
#if defined(__SANITIZE_THREAD__)
  __tsan_acquire(const_cast<void*>(token));
#else
  (void)token;
#endif
}

}  // namespace

struct Executor::Arena {
  // Started now, and readied for tier 0, so that the first graph's first launch does not
  // start the worker threads nor set them up. Workers get room to compile a kernel in place
  // (where this process starts them; oneTBB's default is 4 MiB).
  explicit Arena(int threads)
      : stack(tbb::global_control::thread_stack_size, kCompileThreadStackBytes), arena(threads) {
    arena.initialize();
    // oneTBB starts a worker when it has a task for one.
    for (int t = 1; t < threads; ++t) arena.enqueue([] { Tier0Kernel::prepare_thread(); });
    Tier0Kernel::prepare_thread();
  }
  tbb::global_control stack;
  tbb::task_arena arena;
};

Executor::Executor(int num_threads)
    : num_threads_(std::max(1, num_threads)), arena_(std::make_unique<Arena>(num_threads_)) {}

Executor::~Executor() = default;

int32_t Executor::run(lowering::KernelFn kernel, void* const* args, const int64_t* dims, int64_t n, int64_t work) const {
  return split([&](int64_t begin, int64_t end) { return kernel(args, dims, begin, end); }, n, work);
}

int32_t Executor::run(const Tier0Kernel& kernel, void* const* args, const int64_t* dims, int64_t n, int64_t work) const {
  return split([&](int64_t begin, int64_t end) { return kernel.run(args, dims, begin, end); }, n, work);
}

template <class Body>
int32_t Executor::split(const Body& body, int64_t n, int64_t work) const {
  if (n <= 0) return 0;
  work = std::max<int64_t>(work, 1);
  if (n * work <= kInlineLimit || n == 1 || num_threads_ == 1) return body(0, n);
  // One contiguous chunk per thread (static partitioning): streaming kernels want long
  // unit-stride runs, and the work per iteration is uniform. Chunks hold at least half the
  // inline limit's work, so a medium tensor does not wake every thread.
  const int64_t grain = std::max<int64_t>((kInlineLimit / 2 + work - 1) / work, (n + num_threads_ - 1) / num_threads_);
  std::atomic<int32_t> status{0};  // the first failed chunk's
  launch_released(&status);
  arena_->arena.execute([&] {
    tbb::parallel_for(
        tbb::blocked_range<int64_t>(0, n, grain),
        [&](const tbb::blocked_range<int64_t>& r) {
          launch_acquired(&status);
          if (const int32_t s = body(r.begin(), r.end()); s != 0) {
            int32_t none = 0;
            status.compare_exchange_strong(none, s, std::memory_order_relaxed);
          }
          launch_released(&status);
        },
        tbb::static_partitioner());
  });
  launch_acquired(&status);
  return status.load(std::memory_order_relaxed);
}

void Executor::for_each(size_t count, absl::FunctionRef<void(size_t)> task) const {
  if (count == 0) return;
  if (count == 1 || num_threads_ == 1) {
    for (size_t i = 0; i < count; ++i) task(i);
    return;
  }
  const int token = 0;
  launch_released(&token);
  arena_->arena.execute([&] {
    tbb::parallel_for(
        tbb::blocked_range<size_t>(0, count, 1),
        [&](const tbb::blocked_range<size_t>& r) {
          launch_acquired(&token);
          for (size_t i = r.begin(); i < r.end(); ++i) task(i);
          launch_released(&token);
        },
        tbb::simple_partitioner());
  });
  launch_acquired(&token);
}

}  // namespace lazyjit::runtime

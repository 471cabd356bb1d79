// Executor: runs compiled kernels on a oneTBB arena, splitting the outer loop among threads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/functional/function_ref.h"
#include "lowering/kernel_abi.h"

namespace lazyjit::runtime {

class Tier0Kernel;

/// Owns the worker threads (a tbb::task_arena of LAZYJIT_NUM_THREADS, default all cores).
/// Small iteration spaces run inline on the calling thread, with no task overhead. No
/// OpenMP: its spinning workers would fight TBB and BLAS for the cores.
class Executor {
 public:
  explicit Executor(int num_threads);
  ~Executor();

  int num_threads() const { return num_threads_; }

  /// Runs `kernel` with its bound frame (`args`, `dims`) over iterations [0, n), each about
  /// `work` elements of work. Blocks until done. Returns the kernel's status word: 0, or the
  /// code of a check that failed (of one of the failing threads, if several).
  int32_t run(lowering::KernelFn kernel, void* const* args, const int64_t* dims, int64_t n, int64_t work = 1) const;
  /// The same for a kernel that tier 0 runs: the same split among threads.
  int32_t run(const Tier0Kernel& kernel, void* const* args, const int64_t* dims, int64_t n, int64_t work = 1) const;

  /// Calls `task(i)` for each i in [0, count) on the arena's threads, each call a task of its
  /// own taken by whichever thread is free (long, uneven tasks: a kernel's compile), and
  /// returns when all have returned. The calling thread takes part.
  void for_each(size_t count, absl::FunctionRef<void(size_t)> task) const;

  /// Launches of up to this much work (iterations times work) run inline.
  static constexpr int64_t kInlineLimit = 1 << 15;

 private:
  template <class Body>
  int32_t split(const Body& body, int64_t n, int64_t work) const;

  int num_threads_;
  struct Arena;  // the tbb::task_arena, kept out of this header
  std::unique_ptr<Arena> arena_;
};

}  // namespace lazyjit::runtime

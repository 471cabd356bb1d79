// BackgroundCompiler: one low-priority thread that compiles graphs tier 0 is running.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

#include "absl/functional/function_ref.h"

namespace lazyjit::runtime {

/// Runs jobs one at a time, in the order queued, on a thread of its own started with the
/// first job. The thread runs a little below normal priority (nice 5), and so do the LLVM
/// threads it starts: where the user's steps keep the cores busy they keep most of them.
/// Destruction (or stop()) drops the jobs not started and waits for the running one.
///
/// At exit every BackgroundCompiler stops before any static object is destroyed: a compile
/// still running would use LLVM's function-local statics as they go. The thread that calls
/// exit() (main, returning) runs its thread_local destructors first, so a thread_local guard of
/// the main thread stops them; an atexit handler does it too where the main thread never queued.
class BackgroundCompiler {
 public:
  /// `threads`: how many kernels one job may compile at once (LAZYJIT_NUM_THREADS).
  explicit BackgroundCompiler(int threads);
  ~BackgroundCompiler();
  BackgroundCompiler(const BackgroundCompiler&) = delete;
  BackgroundCompiler& operator=(const BackgroundCompiler&) = delete;

  void enqueue(std::function<void()> job);
  /// Waits until every job queued before the call has run.
  void wait_idle();
  void stop();

  /// For a job: calls `task(i)` for each i in [0, count) on up to `threads` threads at the
  /// compile thread's priority (it and helpers it starts, which inherit its nice value),
  /// each taking the next task when done; returns when all have returned. Not the runtime's
  /// oneTBB workers: a oneTBB task cannot be preempted, so a user's step would wait for a
  /// kernel's compile on the core it wants.
  void for_each(size_t count, absl::FunctionRef<void(size_t)> task) const;

 private:
  void loop();

  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::function<void()>> jobs_;
  bool running_job_ = false;
  bool stopping_ = false;
  int threads_;
  std::thread thread_;
};

}  // namespace lazyjit::runtime

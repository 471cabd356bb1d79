// BackgroundCompiler: one low-priority thread that compiles graphs tier 0 is running.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

#include "absl/functional/function_ref.h"

namespace lazyjit::runtime {

/// Runs jobs one at a time, in the order queued, on a thread of its own started with the
/// first job. A job's kernels compile on helper threads under SCHED_IDLE: they take only the
/// time the user's threads leave the cores, and a user's thread that wakes on a core takes it
/// from them at once. A nice value alone shares the cores but lets a waking thread wait out
/// the running slice, and a step wakes a oneTBB worker for each kernel: at nice 5 a GPT step
/// took 2-4x as long while its graph compiled (docs/benchmarks.md). A job still running after
/// `patience` has its own thread (nice 5) take the kernels left, the helpers finishing the
/// ones they hold: where the steps keep the cores busy, a compile still lands, sharing them.
/// (A thread cannot leave SCHED_IDLE without privilege, so the helpers cannot be raised.)
/// Destruction (or stop()) drops the jobs not started and waits for the running one.
///
/// At exit every BackgroundCompiler stops before any static object is destroyed: a compile
/// still running would use LLVM's function-local statics as they go. The thread that calls
/// exit() (main, returning) runs its thread_local destructors first, so a thread_local guard of
/// the main thread stops them; an atexit handler does it too where the main thread never queued.
class BackgroundCompiler {
 public:
  /// How long a job's kernels compile in idle time alone.
  static constexpr std::chrono::milliseconds kPatience{1000};

  /// `threads`: how many helpers compile a job's kernels at once (LAZYJIT_NUM_THREADS).
  explicit BackgroundCompiler(int threads, std::chrono::milliseconds patience = kPatience);
  ~BackgroundCompiler();
  BackgroundCompiler(const BackgroundCompiler&) = delete;
  BackgroundCompiler& operator=(const BackgroundCompiler&) = delete;

  void enqueue(std::function<void()> job);
  /// Waits until every job queued before the call has run.
  void wait_idle();
  void stop();

  /// For a job: calls `task(i)` for each i in [0, count) on up to `threads` helpers under
  /// SCHED_IDLE, each taking the next task when done, and after `patience` on the calling
  /// thread instead; returns when all have returned. Not the runtime's oneTBB workers: a oneTBB
  /// task cannot be preempted, so a user's step would wait for a kernel's compile on the core
  /// it wants.
  void for_each(size_t count, absl::FunctionRef<void(size_t)> task) const;

 private:
  void loop();

  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::function<void()>> jobs_;
  bool running_job_ = false;
  bool stopping_ = false;
  int threads_;
  std::chrono::milliseconds patience_;
  std::thread thread_;
};

}  // namespace lazyjit::runtime

// BackgroundCompiler: one low-priority thread that compiles graphs tier 0 is running.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

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
  BackgroundCompiler();
  ~BackgroundCompiler();
  BackgroundCompiler(const BackgroundCompiler&) = delete;
  BackgroundCompiler& operator=(const BackgroundCompiler&) = delete;

  void enqueue(std::function<void()> job);
  /// Waits until every job queued before the call has run.
  void wait_idle();
  void stop();

 private:
  void loop();

  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::function<void()>> jobs_;
  bool running_job_ = false;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace lazyjit::runtime

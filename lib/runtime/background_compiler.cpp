// The background compile thread.
#include "runtime/background_compiler.h"

#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <memory>
#include <vector>

#include "runtime/stack_thread.h"

namespace lazyjit::runtime {
namespace {

/// The job's own thread, once it takes the kernels the helpers left: a little below the
/// user's threads, who keep about three quarters of the cores where both want them.
constexpr int kNice = 5;

/// A helper takes the cores only where no other thread wants them (allowed without
/// privilege; leaving SCHED_IDLE again is not).
void run_when_idle() {
  sched_param none{};
  sched_setscheduler(0, SCHED_IDLE, &none);
}

// The live compilers, for the exit guards; never destroyed (they run during exit).
std::mutex& registry_mutex() {
  static auto* m = new std::mutex;
  return *m;
}
std::vector<BackgroundCompiler*>& registry() {
  static auto* r = new std::vector<BackgroundCompiler*>;
  return *r;
}

void stop_all() {
  std::lock_guard lock(registry_mutex());
  for (BackgroundCompiler* compiler : registry()) compiler->stop();
}

struct MainThreadGuard {
  ~MainThreadGuard() { stop_all(); }
};

/// Arms the exit guards: the main thread's thread_local one (when called on it) and, once,
/// the atexit handler.
void guard_exit() {
  static const bool registered = (std::atexit(stop_all), true);
  (void)registered;
  if (gettid() == getpid()) {
    thread_local MainThreadGuard guard;
    (void)&guard;
  }
}

}  // namespace

BackgroundCompiler::BackgroundCompiler(int threads, std::chrono::milliseconds patience)
    : threads_(std::max(1, threads)), patience_(patience) {
  std::lock_guard lock(registry_mutex());
  registry().push_back(this);
}

BackgroundCompiler::~BackgroundCompiler() {
  {
    std::lock_guard lock(registry_mutex());
    std::erase(registry(), this);
  }
  stop();
}

void BackgroundCompiler::enqueue(std::function<void()> job) {
  guard_exit();
  std::lock_guard lock(mutex_);
  if (stopping_) return;
  jobs_.push_back(std::move(job));
  if (!thread_.joinable()) thread_ = std::thread([this] { loop(); });
  changed_.notify_all();
}

void BackgroundCompiler::wait_idle() {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [&] { return (jobs_.empty() && !running_job_) || stopping_; });
}

void BackgroundCompiler::stop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    jobs_.clear();
    changed_.notify_all();
  }
  if (thread_.joinable()) thread_.join();
}

void BackgroundCompiler::for_each(size_t count, absl::FunctionRef<void(size_t)> task) const {
  if (count == 0) return;
  std::atomic<size_t> next{0};
  std::mutex mutex;
  std::condition_variable done;
  size_t finished = 0;  // guarded by `mutex`
  std::atomic<bool> late{false};  // past the patience: the job's thread takes the kernels left
  // Takes the next kernel until none is left; a helper stops taking them once the job is late.
  auto work = [&](bool helper) {
    for (size_t i = next++; i < count; i = (helper && late) ? count : next++) {
      task(i);
      std::lock_guard lock(mutex);
      if (++finished == count) done.notify_one();
    }
  };
  std::vector<std::unique_ptr<StackThread>> helpers;
  const size_t threads = std::min(count, static_cast<size_t>(threads_));
  for (size_t t = 0; t < threads; ++t) {
    helpers.push_back(std::make_unique<StackThread>(kCompileThreadStackBytes, [&] {
      run_when_idle();
      work(/*helper=*/true);
    }));
  }
  {
    std::unique_lock lock(mutex);
    if (!done.wait_for(lock, patience_, [&] { return finished == count; })) {
      late = true;
      lock.unlock();
      work(/*helper=*/false);  // at this thread's priority
    }
  }
  for (auto& helper : helpers) helper->join();
}

void BackgroundCompiler::loop() {
  // Linux keeps a nice value per thread.
  setpriority(PRIO_PROCESS, static_cast<id_t>(gettid()), kNice);
  std::unique_lock lock(mutex_);
  for (;;) {
    changed_.wait(lock, [&] { return !jobs_.empty() || stopping_; });
    if (stopping_) return;
    std::function<void()> job = std::move(jobs_.front());
    jobs_.pop_front();
    running_job_ = true;
    lock.unlock();
    job();
    lock.lock();
    running_job_ = false;
    changed_.notify_all();
  }
}

}  // namespace lazyjit::runtime

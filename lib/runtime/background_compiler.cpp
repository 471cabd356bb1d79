// The background compile thread.
#include "runtime/background_compiler.h"

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

/// A little below the user's threads: where both want the cores, the user's steps get about
/// three quarters of them and the compile the rest. At 19 (idle time only) a GPT step's
/// compile took so long that its first 20 steps, mostly on tier 0, took 20% longer in all
/// (docs/benchmarks.md).
constexpr int kNice = 5;

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

BackgroundCompiler::BackgroundCompiler(int threads) : threads_(std::max(1, threads)) {
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
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i = next++; i < count; i = next++) task(i);
  };
  std::vector<std::unique_ptr<StackThread>> helpers;
  const size_t threads = std::min(count, static_cast<size_t>(threads_));
  for (size_t t = 1; t < threads; ++t) helpers.push_back(std::make_unique<StackThread>(kCompileThreadStackBytes, work));
  work();
  for (auto& helper : helpers) helper->join();
}

void BackgroundCompiler::loop() {
  // Linux keeps a nice value per thread; threads this one starts (LLVM's) inherit it.
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

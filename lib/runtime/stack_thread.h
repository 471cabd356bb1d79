// run_with_stack: runs a function with a stack of a known size, on a thread of its own if need be.
#pragma once

#include <pthread.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <optional>
#include <type_traits>
#include <utility>

#include "lazyjit/error.h"

namespace lazyjit::runtime {

/// The main thread's stack top as the process started (glibc's, also what its
/// pthread_getattr_np starts from).
extern "C" void* __libc_stack_end;

/// Bytes of stack left below the caller on this thread (0 if unknown). The thread's stack
/// bounds are looked up once per thread. For the main thread glibc's pthread_getattr_np reads
/// /proc/self/maps, a millisecond or more in a process with hundreds of libraries mapped (one
/// that loads libtorch), paid by the first graph a program runs; so the main thread's bounds
/// are its starting top and the stack limit instead, less 1 MiB for what sits above that top
/// (arguments, environment) and so is not below it.
inline size_t stack_left() {
  struct Bounds {
    uintptr_t low = 0;
    size_t size = 0;
    Bounds() {
      rlimit limit{};
      constexpr size_t kAboveTop = size_t{1} << 20;
      if (gettid() == getpid() && getrlimit(RLIMIT_STACK, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY &&
          limit.rlim_cur > kAboveTop) {
        size = limit.rlim_cur - kAboveTop;
        low = reinterpret_cast<uintptr_t>(__libc_stack_end) + kAboveTop - limit.rlim_cur;
        return;
      }
      pthread_attr_t attr;
      if (pthread_getattr_np(pthread_self(), &attr) != 0) return;
      void* stack = nullptr;
      if (pthread_attr_getstack(&attr, &stack, &size) != 0) size = 0;
      low = reinterpret_cast<uintptr_t>(stack);
      pthread_attr_destroy(&attr);
    }
  };
  thread_local const Bounds bounds;
  const char here = 0;
  const uintptr_t left = reinterpret_cast<uintptr_t>(&here) - bounds.low;
  return left < bounds.size ? static_cast<size_t>(left) : 0;
}

/// The stack one kernel's compile needs (emission of kMaxFusedDepth levels of expressions,
/// then LLVM's recursion), also under the sanitizers.
inline constexpr size_t kKernelCompileStackBytes = size_t{16} << 20;
/// The stack of a thread that runs kernel compiles in place (run_with_stack needs the
/// kernel's stack plus a margin left below the caller).
inline constexpr size_t kCompileThreadStackBytes = 2 * kKernelCompileStackBytes;

/// A thread with a stack of a chosen size (std::thread's is the process default, often 8
/// MiB) running `f`; join() waits for it and rethrows what `f` threw. Threads inherit the
/// starting thread's nice value.
class StackThread {
 public:
  StackThread(size_t stack_bytes, std::function<void()> f) : f_(std::move(f)) {
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, stack_bytes);
    const int created = pthread_create(
        &thread_, &attr,
        [](void* self) -> void* {
          auto* t = static_cast<StackThread*>(self);
          try {
            t->f_();
          } catch (...) {
            t->error_ = std::current_exception();
          }
          return nullptr;
        },
        this);
    pthread_attr_destroy(&attr);
    if (created != 0) throw Error("compiling: cannot start a compile thread");
    joinable_ = true;
  }
  ~StackThread() {
    if (joinable_) pthread_join(thread_, nullptr);
  }
  StackThread(const StackThread&) = delete;
  StackThread& operator=(const StackThread&) = delete;

  void join() {
    if (!std::exchange(joinable_, false)) return;
    pthread_join(thread_, nullptr);
    if (error_) std::rethrow_exception(error_);
  }

 private:
  std::function<void()> f_;
  pthread_t thread_{};
  bool joinable_ = false;
  std::exception_ptr error_;
};

/// Runs `f` with at least `stack_bytes` of stack: on the calling thread if it has that much
/// left, else on a new thread with a `stack_bytes` stack, waiting for it; returns what `f`
/// returned or rethrows what it threw. Lowering recurses as deep as a kernel's expressions
/// and compiling deeper still inside LLVM, while a caller's stack may be small (a thread
/// pool's 256 KiB).
template <class F>
auto run_with_stack(size_t stack_bytes, F&& f) -> decltype(f()) {
  using Result = decltype(f());
  if (stack_left() >= stack_bytes + (size_t{256} << 10)) return f();  // room enough here: no thread
  if constexpr (std::is_void_v<Result>) {
    StackThread(stack_bytes, [&] { f(); }).join();
  } else {
    std::optional<Result> result;
    StackThread(stack_bytes, [&] { result.emplace(f()); }).join();
    return *std::move(result);
  }
}

}  // namespace lazyjit::runtime

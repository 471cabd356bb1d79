// run_with_stack: runs a function with a stack of a known size, on a thread of its own if need be.
#pragma once

#include <pthread.h>

#include <cstddef>
#include <cstdint>
#include <exception>
#include <optional>
#include <utility>

#include "lazyjit/error.h"

namespace lazyjit::runtime {

/// Bytes of stack left below the caller on this thread (0 if unknown). The thread's stack
/// bounds are looked up once per thread: for the main thread glibc finds them by reading
/// /proc/self/maps, milliseconds in a process with many libraries mapped.
inline size_t stack_left() {
  struct Bounds {
    uintptr_t low = 0;
    size_t size = 0;
    Bounds() {
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

/// Runs `f` with at least `stack_bytes` of stack: on the calling thread if it has that much
/// left, else on a new thread with a `stack_bytes` stack, waiting for it; returns what `f`
/// returned or rethrows what it threw. Lowering recurses as deep as a kernel's expressions
/// and compiling deeper still inside LLVM, while a caller's stack may be small (a thread
/// pool's 256 KiB).
template <class F>
auto run_with_stack(size_t stack_bytes, F&& f) -> decltype(f()) {
  using Result = decltype(f());
  if (stack_left() >= stack_bytes + (size_t{256} << 10)) return f();  // room enough here: no thread
  struct Call {
    F* f;
    std::optional<Result> result;
    std::exception_ptr error;
  } call{&f, std::nullopt, nullptr};
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, stack_bytes);
  pthread_t thread;
  const int created = pthread_create(
      &thread, &attr,
      [](void* arg) -> void* {
        auto* c = static_cast<Call*>(arg);
        try {
          c->result.emplace((*c->f)());
        } catch (...) {
          c->error = std::current_exception();
        }
        return nullptr;
      },
      &call);
  pthread_attr_destroy(&attr);
  if (created != 0) throw Error("compiling: cannot start the compile thread");
  pthread_join(thread, nullptr);
  if (call.error) std::rethrow_exception(call.error);
  return *std::move(call.result);
}

}  // namespace lazyjit::runtime

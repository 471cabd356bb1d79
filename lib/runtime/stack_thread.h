// run_with_stack: runs a function on a thread of its own with a stack of a known size.
#pragma once

#include <pthread.h>

#include <cstddef>
#include <cstdint>
#include <exception>
#include <optional>
#include <utility>

#include "lazyjit/error.h"

namespace lazyjit::runtime {

/// Runs `f` with at least `stack_bytes` of stack: on the calling thread if it has that much
/// left, else on a new thread with a `stack_bytes` stack, waiting for it; returns what `f`
/// returned or rethrows what it threw. Compiling recurses as deep as a kernel's expressions
/// (and deeper inside LLVM), so it runs here rather than on the caller's thread, whose stack
/// may be small (a thread pool's 256 KiB).
/// Bytes of stack left below the caller on this thread (0 if unknown).
inline size_t stack_left() {
  pthread_attr_t attr;
  if (pthread_getattr_np(pthread_self(), &attr) != 0) return 0;
  void* low = nullptr;
  size_t size = 0;
  const int got = pthread_attr_getstack(&attr, &low, &size);
  pthread_attr_destroy(&attr);
  if (got != 0) return 0;
  const char here = 0;
  const auto left = reinterpret_cast<uintptr_t>(&here) - reinterpret_cast<uintptr_t>(low);
  return left < size ? static_cast<size_t>(left) : 0;
}

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

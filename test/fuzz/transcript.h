// The running fuzz program's text, kept where a crash or a hang can still print it: fatal
// signals, sanitizer deaths and a watchdog thread write it to stderr before the process ends.
#pragma once

#include <signal.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstring>
#include <string_view>
#include <thread>

extern "C" void __sanitizer_set_death_callback(void (*callback)()) __attribute__((weak));

namespace lazyjit::fuzz {

/// One process-wide transcript: signal handlers cannot be handed an object. Only the thread
/// running programs writes it; handlers and the watchdog only read it.
class Transcript {
 public:
  static Transcript& get() {
    static Transcript transcript;
    return transcript;
  }

  /// Starts a new program's text; the watchdog measures the program from here.
  void begin(std::string_view header) {
    size_.store(0, std::memory_order_relaxed);
    append(header);
    started_.store(now_ms(), std::memory_order_release);
  }
  void append(std::string_view text) {
    const size_t size = size_.load(std::memory_order_relaxed);
    const size_t n = std::min(text.size(), buffer_.size() - size);
    std::memcpy(buffer_.data() + size, text.data(), n);
    size_.store(size + n, std::memory_order_release);
  }
  /// The program is over: the watchdog stops measuring.
  void end() { started_.store(0, std::memory_order_release); }

  /// Prints the transcript on SIGSEGV, SIGBUS, SIGFPE, SIGILL and SIGABRT (then runs the
  /// handler that was there before, such as ASan's), and when a sanitizer ends the process.
  void install_crash_handlers() {
    for (int sig : kSignals) {
      struct sigaction action = {};
      action.sa_sigaction = &Transcript::on_signal;
      action.sa_flags = SA_SIGINFO | SA_ONSTACK;
      sigemptyset(&action.sa_mask);
      sigaction(sig, &action, &previous_[sig]);
    }
    if (&__sanitizer_set_death_callback != nullptr) __sanitizer_set_death_callback(&Transcript::print_crash);
  }

  /// A thread that ends the process with the transcript when one program runs past `seconds`.
  void start_watchdog(int seconds) {
    std::thread([this, seconds] {
      for (;;) {
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        const int64_t started = started_.load(std::memory_order_acquire);
        if (started != 0 && now_ms() - started > int64_t{seconds} * 1000) {
          print("\n*** lazyjit fuzz: program hangs (over the time limit); the program so far:\n");
          _exit(124);
        }
      }
    }).detach();
  }

 private:
  static constexpr int kSignals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};

  static int64_t now_ms() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }

  void print(std::string_view header) {
    if (printed_.exchange(true)) return;
    write_all(header);
    write_all(std::string_view(buffer_.data(), size_.load(std::memory_order_acquire)));
    write_all("\n");
  }
  static void write_all(std::string_view text) {
    while (!text.empty()) {
      const ssize_t n = ::write(2, text.data(), text.size());
      if (n <= 0) return;
      text.remove_prefix(static_cast<size_t>(n));
    }
  }

  static void print_crash() { get().print("\n*** lazyjit fuzz: the process crashed; the program:\n"); }

  static void on_signal(int sig, siginfo_t* info, void* context) {
    print_crash();
    const struct sigaction& old = get().previous_[sig];
    if ((old.sa_flags & SA_SIGINFO) != 0 && old.sa_sigaction != nullptr) {
      old.sa_sigaction(sig, info, context);
    } else if ((old.sa_flags & SA_SIGINFO) == 0 && old.sa_handler != SIG_DFL && old.sa_handler != SIG_IGN) {
      old.sa_handler(sig);
    }
    signal(sig, SIG_DFL);
    raise(sig);
  }

  std::array<char, 1 << 18> buffer_{};
  std::atomic<size_t> size_{0};
  std::atomic<int64_t> started_{0};
  std::atomic<bool> printed_{false};
  struct sigaction previous_[NSIG] = {};
};

}  // namespace lazyjit::fuzz

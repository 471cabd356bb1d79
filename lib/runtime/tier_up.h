// TierUp: when a graph that tier 0 runs has its kernels compiled (LAZYJIT_TIER=auto).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "ir/hash.h"

namespace lazyjit::runtime {

/// The background compile's policy for one graph, rent or buy. Compiling a kernel costs the
/// cores the user's steps run on about LLVM's time for it (`cost`); it pays back tier 0's time
/// in the kernel beyond compiled code's, taken to be half of tier 0's. So:
/// - a kernel compiles once tier 0 has spent twice its cost in it (the hot kernels, soon);
/// - the rest of the graph (its kernels not compiled yet, then the graph itself: DESIGN.md
///   section 7, "Tiers") compiles once they have together spent twice their cost on tier 0,
///   or once the graph has run, in all, as long as compiling the kernels it came with takes
///   (a loop's body: its steps reach compiled speed within about its compile time of running,
///   the kernels left being cold ones, cheap to compile).
/// Each rule waits no longer than the better choice in hindsight would have cost, so neither
/// costs the steps more than about twice that. A cost of 0 compiles the whole graph at once.
/// A graph run once (a model's initialisation, a last evaluation) is never compiled. Kernels
/// of one content compile once: they are one kernel here, timed together.
class TierUp {
 public:
  /// `contents`: each kernel's content (lowering::LoweredKernel::content), in plan order.
  explicit TierUp(std::span<const ir::Hash128> contents);

  /// What to compile now: nothing, some kernels (plan indices, every index of each content),
  /// or the whole graph (`whole`, once; its kernels queued before come from memory).
  struct Decision {
    bool whole = false;
    std::vector<size_t> kernels = {};
  };
  /// After a run of the graph that took `run_ns`: `tier0_ns`, per kernel, the time tier 0 has
  /// spent in it over the runs so far; `compiled`, per kernel, whether it has code (for this
  /// or another graph); `cost_ns`, what compiling a kernel costs. Counts the run; what it
  /// returns is queued from now on.
  Decision after_run(std::span<const int64_t> tier0_ns, const std::vector<bool>& compiled, int64_t run_ns,
                     int64_t cost_ns);

  /// A graph compiles from its second run on: one that runs once never competes with the
  /// steps for the cores.
  static constexpr int kRunsBeforeCompile = 2;

 private:
  std::vector<std::vector<size_t>> contents_;  // per content, its kernels
  std::vector<bool> queued_;                   // per content
  int runs_ = 0;
  int64_t own_ = 0;       // contents without code at the first run: the graph's compile
  int64_t graph_ns_ = 0;  // the graph's runs, summed
  bool whole_queued_ = false;
};

}  // namespace lazyjit::runtime

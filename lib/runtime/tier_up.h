// TierUp: when a graph that tier 0 runs has its kernels compiled (LAZYJIT_TIER=auto).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "ir/hash.h"

namespace lazyjit::runtime {

/// The background compile's policy for one graph, rent or buy: compiling a kernel costs the
/// cores the user's steps run on a budget (about twice LLVM's time for it: compiled code is
/// taken to save half of tier 0's time), and pays back tier 0's time in the kernel beyond
/// compiled code's. So a kernel is compiled once tier 0 has spent the budget in it (the hot
/// kernels, soon), and the rest of the graph once its kernels not compiled yet have together
/// spent the budget each (then the graph switches: DESIGN.md section 7, "Tiers"); neither
/// costs the steps more than twice what the better choice in hindsight would have. A graph
/// run kRunsBeforeCompilingAll times is a loop's body: the rest of it compiles then, so its
/// steps reach compiled code's speed within a bounded number of runs (the kernels left are
/// cold, cheap to compile). A budget of 0 compiles the whole graph at once. A graph run once
/// (a model's initialisation, a last evaluation) is never compiled. Kernels of one content
/// compile once: they are one kernel here, timed together.
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
  /// After a run of the graph: `tier0_ns`, per kernel, the time tier 0 has spent in it over
  /// the runs so far; `compiled`, per kernel, whether it has code (for this or another
  /// graph). Counts the run; what it returns is queued from now on.
  Decision after_run(std::span<const int64_t> tier0_ns, const std::vector<bool>& compiled, int64_t budget_ns);

  /// A graph compiles from its second run on: one that runs once never competes with the
  /// steps for the cores.
  static constexpr int kRunsBeforeCompile = 2;
  /// Runs after which the rest of the graph compiles, whatever tier 0's time in it.
  static constexpr int kRunsBeforeCompilingAll = 50;

 private:
  std::vector<std::vector<size_t>> contents_;  // per content, its kernels
  std::vector<bool> queued_;                   // per content
  int runs_ = 0;
  bool whole_queued_ = false;
};

}  // namespace lazyjit::runtime

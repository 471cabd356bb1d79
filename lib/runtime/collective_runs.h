// The collectives one run of a graph has under way: each starts as soon as its kernel has
// staged its operand, and kernels that do not read its result run meanwhile (a training
// step's all-reduces beside the rest of its backward pass, as DDP overlaps them).
#pragma once

#include <memory>
#include <vector>

#include "ir/collectives.h"
#include "ir/graph.h"
#include "lowering/kernel_abi.h"
#include "runtime/allocator.h"
#include "runtime/counters.h"

namespace lazyjit::runtime {

/// A kernel that reads a collective's result waits for it first; so does the first kernel that
/// writes a donated buffer (nothing may fail after it: a collective's error comes from its
/// wait), and the end of the run. A collective's buffers stay allocated until it is waited
/// for; one still under way when the run fails is waited for when this is destroyed.
class CollectivesUnderWay {
 public:
  CollectivesUnderWay(const ir::Graph& graph, const lowering::KernelPlan& plan, const std::vector<void*>& buffers,
                      RuntimeCounters& counters)
      : graph_(graph), plan_(plan), buffers_(buffers), counters_(counters) {}
  ~CollectivesUnderWay();
  CollectivesUnderWay(const CollectivesUnderWay&) = delete;
  CollectivesUnderWay& operator=(const CollectivesUnderWay&) = delete;

  /// Starts the collective of `kernel` (which has just run); `keep` are temporaries it uses
  /// that the run would release now.
  void start(const lowering::KernelSpec& kernel, std::vector<std::unique_ptr<CpuBuffer>> keep);
  /// Waits for the collectives whose result `kernel` reads.
  void wait_for(const lowering::KernelSpec& kernel);
  void wait_all();
  /// Counts a kernel that ran while the collectives now under way were.
  void kernel_ran() {
    for (Entry& entry : under_way_) ++entry.kernels_beside;
  }

 private:
  struct Entry {
    const lowering::KernelSpec* kernel;
    std::unique_ptr<ir::CollectiveRequest> request;
    std::vector<std::unique_ptr<CpuBuffer>> keep;
    int kernels_beside = 0;
  };
  /// Waits for `entry` and copies its result to the kernel's other results.
  void finish(Entry& entry);

  const ir::Graph& graph_;
  const lowering::KernelPlan& plan_;
  const std::vector<void*>& buffers_;
  RuntimeCounters& counters_;
  std::vector<Entry> under_way_;
};

}  // namespace lazyjit::runtime

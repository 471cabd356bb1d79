// The collectives one run of a graph has under way: each starts as soon as its kernel has
// staged its operand, and kernels that do not read its result run meanwhile (a training
// step's all-reduces beside the rest of its backward pass, as DDP overlaps them).
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "ir/collectives.h"
#include "ir/graph.h"
#include "lowering/kernel_abi.h"
#include "runtime/allocator.h"
#include "runtime/counters.h"

namespace lazyjit::runtime {

/// `order` (the kernels' run order) with the collective kernels in the order their collectives
/// were traced (ir::stamp_collective), which every rank shares: the plan's order follows the
/// graph's roots, and a rank that holds other pending tensors than the others has other roots.
/// Every kernel still runs after those whose buffers it uses; the kernels that write buffers
/// donated under `aliases` (last in `order`, donation_order) stay last.
std::vector<size_t> in_trace_order(const ir::Graph& graph, const lowering::KernelPlan& plan, std::vector<size_t> order,
                                   std::span<const lowering::Alias> aliases);

/// A kernel that reads a collective's result waits for it first, and the run waits for every
/// one at its end. The ranks compare their collectives before the first kernel (agree), so
/// the optimizer's updates, which write donated buffers and after which nothing may fail, can
/// run while later buckets are still under way: what can fail after that is a timeout, after
/// which the job cannot go on anyway. A collective's buffers stay allocated until it is waited
/// for; one still under way when the run fails is waited for when this is destroyed.
class CollectivesUnderWay {
 public:
  /// `temps` (the block of the run's temporaries) and `outputs` own the run's buffers: a
  /// collective that failed but may still use its buffers takes them out of their hands, for
  /// good (leaked).
  CollectivesUnderWay(const ir::Graph& graph, const lowering::KernelPlan& plan, const std::vector<void*>& buffers,
                      std::unique_ptr<CpuBuffer>& temps, const std::vector<BackendDataPtr>& outputs,
                      RuntimeCounters& counters)
      : graph_(graph), plan_(plan), buffers_(buffers), temps_(temps), outputs_(outputs), counters_(counters) {}
  ~CollectivesUnderWay();
  CollectivesUnderWay(const CollectivesUnderWay&) = delete;
  CollectivesUnderWay& operator=(const CollectivesUnderWay&) = delete;

  /// Before the run's first kernel: the ranks compare the collectives that `order` (the run's
  /// kernel order) will carry out (ir::Collectives::agree); a mismatch fails here.
  void agree(const std::vector<size_t>& order);
  /// Starts the collective of `kernel` (which has just run). Its temporaries live to the end
  /// of the run.
  void start(const lowering::KernelSpec& kernel);
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
    int kernels_beside = 0;
  };
  /// Waits for `entry` and copies its result to the kernel's other results.
  void finish(Entry& entry);
  /// Waits for `entry` after a failure elsewhere, ignoring its own error.
  void abandon(Entry& entry);
  /// Keeps every buffer of `entry` allocated for good: its collective may still use them.
  void leak_buffers(Entry& entry);

  const ir::Graph& graph_;
  const lowering::KernelPlan& plan_;
  const std::vector<void*>& buffers_;
  std::unique_ptr<CpuBuffer>& temps_;
  const std::vector<BackendDataPtr>& outputs_;
  RuntimeCounters& counters_;
  std::vector<Entry> under_way_;
};

}  // namespace lazyjit::runtime

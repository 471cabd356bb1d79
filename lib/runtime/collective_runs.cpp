#include "runtime/collective_runs.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <queue>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "lazyjit/error.h"
#include "lowering/fusion.h"

namespace lazyjit::runtime {
namespace {

int64_t nanoseconds(double seconds) { return static_cast<int64_t>(seconds * 1e9); }

/// A collective kernel's place in its process's trace order.
int64_t trace_order(const ir::Graph& graph, const lowering::KernelSpec& kernel) {
  return graph.nodes[kernel.stages[0]]->scalar().i;
}

}  // namespace

std::vector<size_t> in_trace_order(const ir::Graph& graph, const lowering::KernelPlan& plan, std::vector<size_t> order,
                                   std::span<const lowering::Alias> aliases) {
  absl::flat_hash_set<int> writers;  // of donated buffers
  for (const lowering::Alias& a : aliases) writers.insert(plan.writer_of[a.result]);
  const size_t fixed_from = order.size() - writers.size();
  const auto collective = [&](size_t k) { return plan.kernels[k].kind == lowering::KernelKind::Collective; };
  std::vector<size_t> collectives;  // positions in `order`
  for (size_t pos = 0; pos < fixed_from; ++pos) {
    if (collective(order[pos])) collectives.push_back(pos);
  }
  const auto traced_before = [&](size_t a, size_t b) {
    return trace_order(graph, plan.kernels[order[a]]) < trace_order(graph, plan.kernels[order[b]]);
  };
  if (std::ranges::is_sorted(collectives, traced_before)) return order;
  // Kahn's algorithm over positions [0, fixed_from): each kernel after the previous user of
  // every buffer it uses (parameters aside: only kernels from fixed_from on write those), and
  // each collective after the one traced before it; the earliest position first otherwise.
  const int first_written = static_cast<int>(graph.parameters.size());
  std::vector<std::vector<size_t>> after(fixed_from);
  std::vector<int> blockers(fixed_from, 0);
  absl::flat_hash_map<int, size_t> last_user;
  for (size_t pos = 0; pos < fixed_from; ++pos) {
    for (int b : plan.kernels[order[pos]].frame.buffers) {
      if (b < first_written) continue;
      if (const auto it = last_user.find(b); it != last_user.end() && it->second != pos) {
        after[it->second].push_back(pos);
        ++blockers[pos];
      }
      last_user[b] = pos;
    }
  }
  std::vector<size_t> by_trace = collectives;
  std::ranges::sort(by_trace, traced_before);
  for (size_t i = 1; i < by_trace.size(); ++i) {
    after[by_trace[i - 1]].push_back(by_trace[i]);
    ++blockers[by_trace[i]];
  }
  std::priority_queue<size_t, std::vector<size_t>, std::greater<>> ready;
  for (size_t pos = 0; pos < fixed_from; ++pos) {
    if (blockers[pos] == 0) ready.push(pos);
  }
  std::vector<size_t> reordered;
  reordered.reserve(order.size());
  while (!ready.empty()) {
    const size_t pos = ready.top();
    ready.pop();
    reordered.push_back(order[pos]);
    for (size_t next : after[pos]) {
      if (--blockers[next] == 0) ready.push(next);
    }
  }
  if (reordered.size() != fixed_from) {
    throw Error("a graph's collectives depend on one another against the order they were traced in");
  }
  reordered.insert(reordered.end(), order.begin() + static_cast<ptrdiff_t>(fixed_from), order.end());
  return reordered;
}

CollectivesUnderWay::~CollectivesUnderWay() {
  for (Entry& entry : under_way_) abandon(entry);
}

void CollectivesUnderWay::abandon(Entry& entry) {
  try {
    entry.request->wait();
  } catch (...) {  // the run is failing already: its first error is the one reported
    if (entry.request->still_using_buffers()) leak_buffers(entry);
  }
}

void CollectivesUnderWay::leak_buffers(Entry& entry) {
  const int first_temp = lowering::temp_buffer_index(static_cast<int>(graph_.parameters.size()),
                                                     static_cast<int>(graph_.roots.size()), 0);
  for (int b : entry.kernel->frame.buffers) {
    if (b >= first_temp) {
      static_cast<void>(temps_.release());  // the block of them all (null once released)
    } else if (b >= static_cast<int>(graph_.parameters.size()) && b < first_temp - 1) {  // a result's
      new BackendDataPtr(outputs_[static_cast<size_t>(b) - graph_.parameters.size()]);
    }
  }
}

void CollectivesUnderWay::agree(const std::vector<size_t>& order) {
  if (plan_.collectives == 0) return;
  std::vector<const ir::Node*> nodes;
  for (size_t k : order) {
    const lowering::KernelSpec& kernel = plan_.kernels[k];
    if (kernel.kind == lowering::KernelKind::Collective) nodes.push_back(graph_.nodes[kernel.stages[0]]);
  }
  ir::agree_collectives(nodes);
}

void CollectivesUnderWay::start(const lowering::KernelSpec& kernel) {
  const int node = kernel.stages[0];
  const ir::Node& collective = *graph_.nodes[node];
  const lowering::CollectiveBuffers at = lowering::collective_buffers(
      plan_, kernel, static_cast<int>(graph_.parameters.size()), static_cast<int>(graph_.roots.size()));
  std::unique_ptr<ir::CollectiveRequest> request = ir::start_collective(
      {.node = &collective, .in = buffers_[at.in], .in_count = ir::numel(graph_.nodes[graph_.operands[node][0]]->shape()),
       .out = buffers_[at.out], .out_count = ir::numel(collective.shape())});
  under_way_.push_back({&kernel, std::move(request), 0});
}

void CollectivesUnderWay::wait_for(const lowering::KernelSpec& kernel) {
  for (size_t i = 0; i < under_way_.size();) {
    const int out = plan_.buffer_of[under_way_[i].kernel->stages[0]];
    if (std::ranges::find(kernel.frame.buffers, out) == kernel.frame.buffers.end()) {
      ++i;
      continue;
    }
    Entry entry = std::move(under_way_[i]);
    under_way_.erase(under_way_.begin() + static_cast<ptrdiff_t>(i));
    finish(entry);
  }
}

void CollectivesUnderWay::wait_all() {
  while (!under_way_.empty()) {
    Entry entry = std::move(under_way_.front());
    under_way_.erase(under_way_.begin());
    finish(entry);
  }
}

void CollectivesUnderWay::finish(Entry& entry) {
  const auto start = std::chrono::steady_clock::now();
  double seconds = 0;
  try {
    seconds = entry.request->wait();
  } catch (...) {
    if (entry.request->still_using_buffers()) leak_buffers(entry);
    for (Entry& other : under_way_) abandon(other);  // fail at once: none waits a deadline of its own
    under_way_.clear();
    throw;
  }
  counters_.collective_wait_ns.fetch_add(nanoseconds(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()),
                                         std::memory_order_relaxed);
  counters_.collective_ns.fetch_add(nanoseconds(seconds), std::memory_order_relaxed);
  counters_.collectives.fetch_add(1, std::memory_order_relaxed);
  if (entry.kernels_beside > 0) counters_.collectives_overlapped.fetch_add(1, std::memory_order_relaxed);
  const int node = entry.kernel->stages[0];
  const ir::Node& collective = *graph_.nodes[node];
  const void* out = buffers_[plan_.buffer_of[node]];
  const int num_parameters = static_cast<int>(graph_.parameters.size());
  for (int r : entry.kernel->results) {  // roots that are the same value: copies
    void* copy = buffers_[num_parameters + r];
    if (copy != out) std::memcpy(copy, out, static_cast<size_t>(ir::numel(collective.shape()) * dtype_size(collective.dtype())));
  }
}

}  // namespace lazyjit::runtime

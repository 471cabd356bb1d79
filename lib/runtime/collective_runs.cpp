#include "runtime/collective_runs.h"

#include <algorithm>
#include <chrono>
#include <cstring>

namespace lazyjit::runtime {
namespace {

int64_t nanoseconds(double seconds) { return static_cast<int64_t>(seconds * 1e9); }

}  // namespace

CollectivesUnderWay::~CollectivesUnderWay() {
  for (Entry& entry : under_way_) {
    try {
      entry.request->wait();
    } catch (...) {  // the run is failing already: its first error is the one reported
    }
  }
}

void CollectivesUnderWay::start(const lowering::KernelSpec& kernel, std::vector<std::unique_ptr<CpuBuffer>> keep) {
  const int node = kernel.stages[0];
  const ir::Node& collective = *graph_.nodes[node];
  const int num_parameters = static_cast<int>(graph_.parameters.size());
  const int num_results = static_cast<int>(graph_.roots.size());
  void* out = buffers_[plan_.buffer_of[node]];
  const void* in = out;
  for (int t : kernel.temps) {
    if (plan_.temps[t].kind == lowering::TempBuffer::Kind::Staging) in = buffers_[lowering::temp_buffer_index(num_parameters, num_results, t)];
  }
  std::unique_ptr<ir::CollectiveRequest> request = ir::start_collective(
      {.node = &collective, .in = in, .in_count = ir::numel(graph_.nodes[graph_.operands[node][0]]->shape()), .out = out,
       .out_count = ir::numel(collective.shape())});
  under_way_.push_back({&kernel, std::move(request), std::move(keep), 0});
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
  const double seconds = entry.request->wait();
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

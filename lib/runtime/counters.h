// RuntimeCounters: the counters the runtime keeps itself (the cache and allocator keep theirs).
#pragma once

#include <atomic>
#include <cstdint>

namespace lazyjit::runtime {

struct RuntimeCounters {
  std::atomic<int64_t> graphs_traced{0}, nodes_traced{0}, graphs_executed{0}, graphs_planned{0}, compiles{0}, kernels_compiled{0},
      kernel_cache_hits{0}, disk_cache_hits{0}, donations{0}, bytes_in{0}, bytes_out{0}, kernels_launched{0},
      tier0_kernel_runs{0}, kernels_compiled_background{0}, tier_switches{0}, plan_ns{0}, compile_ns{0}, tier0_prepare_ns{0}, execute_ns{0},
      collectives{0}, collectives_overlapped{0}, collective_ns{0}, collective_wait_ns{0};
  void reset() {
    for (auto* c : {&graphs_traced, &nodes_traced, &graphs_executed, &graphs_planned, &compiles, &kernels_compiled, &kernel_cache_hits,
                    &disk_cache_hits, &donations, &bytes_in, &bytes_out, &kernels_launched, &tier0_kernel_runs,
                    &kernels_compiled_background, &tier_switches, &plan_ns, &compile_ns, &tier0_prepare_ns, &execute_ns, &collectives,
                    &collectives_overlapped, &collective_ns, &collective_wait_ns}) {
      c->store(0);
    }
  }
};

}  // namespace lazyjit::runtime

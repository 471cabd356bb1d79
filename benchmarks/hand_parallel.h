// The two-thread oneTBB loop every hand kernel runs on: a fixed task_arena of kHandThreads
// and a static partitioner, what a C++ programmer writes with oneTBB.
#pragma once

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/partitioner.h>
#include <tbb/task_arena.h>

#include <cstdint>

#include "hand_loops.h"

namespace bench {

inline tbb::task_arena& hand_arena() {
  static tbb::task_arena arena(kHandThreads);
  return arena;
}

/// Calls body(begin, end) on kHandThreads threads over disjoint chunks of [0, n).
template <class Body>
void parallel(int64_t n, Body body) {
  hand_arena().execute([&] {
    tbb::parallel_for(
        tbb::blocked_range<int64_t>(0, n),
        [&](const tbb::blocked_range<int64_t>& r) { body(r.begin(), r.end()); },
        tbb::static_partitioner());
  });
}

}  // namespace bench

// ew_transcendental built with -O3 -march=native -ffast-math (see hand_loops.h). Only this
// file gets -ffast-math, and only at compile time: linking with it would set flush-to-zero
// for the whole process.
#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/partitioner.h>
#include <tbb/task_arena.h>

#include <cmath>

#include "hand_loops.h"

namespace bench {

void ew_transcendental_fastmath(const float* __restrict x, float* __restrict out, int64_t n) {
  static tbb::task_arena arena(kHandThreads);
  arena.execute([&] {
    tbb::parallel_for(
        tbb::blocked_range<int64_t>(0, n),
        [&](const tbb::blocked_range<int64_t>& r) {
          for (int64_t i = r.begin(); i < r.end(); ++i) {
            const float v = x[i];
            out[i] = 1.0f / (1.0f + expf(-v)) * tanhf(0.5f * v + 1.0f) + v * v;
          }
        },
        tbb::static_partitioner());
  });
}

}  // namespace bench

// Where a run's temporaries live: one block, each temporary at an offset of its own while it
// lives.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace lazyjit::runtime {

/// A run's temporaries laid out in one block (GraphExecutor::execute takes it from the
/// caching allocator before the first kernel runs).
struct TempLayout {
  std::vector<int64_t> offset;  ///< per temporary, a multiple of kAlignment (0 for one unused)
  int64_t bytes = 0;            ///< the block's size

  static constexpr int64_t kAlignment = 64;
};

/// Lays out temporaries of `bytes` each, temporary t used by the kernels run at positions
/// first[t] to last[t] of `positions` (first[t] < 0: unused), so that no two that live at
/// once overlap: walking the positions in order, each temporary takes the best-fitting hole
/// left by those that died before it (or the block's end), as a step's own allocator would,
/// and gives its bytes back after its last user. A step's first run then touches its peak of
/// live bytes, not the sum of its temporaries.
TempLayout lay_out_temporaries(std::span<const int64_t> bytes, std::span<const int> first, std::span<const int> last,
                               size_t positions);

}  // namespace lazyjit::runtime

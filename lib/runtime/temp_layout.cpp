// The layout of a run's temporaries in one block.
#include "runtime/temp_layout.h"

#include <algorithm>
#include <iterator>
#include <map>

namespace lazyjit::runtime {

TempLayout lay_out_temporaries(std::span<const int64_t> bytes, std::span<const int> first, std::span<const int> last,
                               size_t positions) {
  TempLayout layout;
  layout.offset.assign(bytes.size(), 0);
  std::vector<std::vector<size_t>> born(positions), dead(positions);
  for (size_t t = 0; t < bytes.size(); ++t) {
    if (first[t] < 0 || bytes[t] <= 0) continue;
    born[static_cast<size_t>(first[t])].push_back(t);
    dead[static_cast<size_t>(last[t])].push_back(t);
  }
  auto aligned = [&](size_t t) {
    return (bytes[t] + TempLayout::kAlignment - 1) / TempLayout::kAlignment * TempLayout::kAlignment;
  };
  std::map<int64_t, int64_t> holes;  // offset to size; neighbours merged, none at the top
  int64_t top = 0;                   // the end of the bytes in use or in holes now
  for (size_t pos = 0; pos < positions; ++pos) {
    // Those born here first, then those whose last user this is: a kernel's temporaries are
    // all live while it runs.
    for (size_t t : born[pos]) {
      const int64_t size = aligned(t);
      auto best = holes.end();
      for (auto hole = holes.begin(); hole != holes.end(); ++hole) {
        if (hole->second >= size && (best == holes.end() || hole->second < best->second)) best = hole;
      }
      if (best == holes.end()) {  // at the top
        layout.offset[t] = top;
        top += size;
        layout.bytes = std::max(layout.bytes, top);
        continue;
      }
      layout.offset[t] = best->first;
      if (best->second > size) holes.emplace(best->first + size, best->second - size);
      holes.erase(best);
    }
    for (size_t t : dead[pos]) {
      int64_t at = layout.offset[t], size = aligned(t);
      auto next = holes.lower_bound(at);
      if (next != holes.end() && next->first == at + size) {
        size += next->second;
        next = holes.erase(next);
      }
      if (next != holes.begin()) {
        if (auto before = std::prev(next); before->first + before->second == at) {
          at = before->first;
          size += before->second;
          holes.erase(before);
        }
      }
      if (at + size == top) {
        top = at;  // the next temporary to find no hole starts here
      } else {
        holes.emplace(at, size);
      }
    }
  }
  return layout;
}

}  // namespace lazyjit::runtime

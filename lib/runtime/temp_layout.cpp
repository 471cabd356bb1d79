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
  // The temporaries with bytes, by their first user and by their last.
  std::vector<size_t> born, dead;
  for (size_t t = 0; t < bytes.size(); ++t) {
    if (first[t] >= 0 && bytes[t] > 0) born.push_back(t);
  }
  dead = born;
  std::stable_sort(born.begin(), born.end(), [&](size_t a, size_t b) { return first[a] < first[b]; });
  std::stable_sort(dead.begin(), dead.end(), [&](size_t a, size_t b) { return last[a] < last[b]; });
  auto aligned = [&](size_t t) {
    return (bytes[t] + TempLayout::kAlignment - 1) / TempLayout::kAlignment * TempLayout::kAlignment;
  };
  std::map<int64_t, int64_t> holes;  // offset to size; neighbours merged, none at the top
  int64_t top = 0;                   // the end of the bytes in use or in holes now
  auto next_born = born.begin(), next_dead = dead.begin();
  for (int pos = 0; pos < static_cast<int>(positions); ++pos) {
    // Those born here first, then those whose last user this is: a kernel's temporaries are
    // all live while it runs.
    for (; next_born != born.end() && first[*next_born] == pos; ++next_born) {
      const size_t t = *next_born;
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
    for (; next_dead != dead.end() && last[*next_dead] == pos; ++next_dead) {
      const size_t t = *next_dead;
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

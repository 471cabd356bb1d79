// The background compile's policy: rent or buy, per kernel and per graph.
#include "runtime/tier_up.h"

#include <limits>

#include "absl/container/flat_hash_map.h"

namespace lazyjit::runtime {
namespace {

/// a * b for non-negative a and b, or the largest int64_t where that overflows (a cost set
/// to "never" must not wrap around to "at once").
int64_t saturating_product(int64_t a, int64_t b) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  return b != 0 && a > kMax / b ? kMax : a * b;
}

}  // namespace

TierUp::TierUp(std::span<const ir::Hash128> contents) {
  absl::flat_hash_map<ir::Hash128, size_t> index;
  for (size_t k = 0; k < contents.size(); ++k) {
    auto [it, fresh] = index.try_emplace(contents[k], contents_.size());
    if (fresh) contents_.emplace_back();
    contents_[it->second].push_back(k);
  }
  queued_.assign(contents_.size(), false);
}

TierUp::Decision TierUp::after_run(std::span<const int64_t> tier0_ns, const std::vector<bool>& compiled,
                                   int64_t run_ns, int64_t cost_ns) {
  if (whole_queued_) return {};
  graph_ns_ += run_ns;
  if (++runs_ == 1) {
    for (const std::vector<size_t>& kernels : contents_) own_ += compiled[kernels.front()] ? 0 : 1;
  }
  if (runs_ < kRunsBeforeCompile) return {};
  // The contents still to compile: how many, the time tier 0 has spent in them, and those
  // that have spent the budget each.
  const int64_t budget_ns = saturating_product(cost_ns, 2);
  int64_t open = 0, total = 0;
  std::vector<size_t> due;
  for (size_t c = 0; c < contents_.size(); ++c) {
    if (queued_[c] || compiled[contents_[c].front()]) continue;
    int64_t ns = 0;
    for (size_t k : contents_[c]) ns += tier0_ns[k];
    ++open;
    total += ns;
    if (ns >= budget_ns) due.push_back(c);
  }
  if (total >= saturating_product(budget_ns, open) || graph_ns_ >= saturating_product(cost_ns, own_)) {
    whole_queued_ = true;
    return {.whole = true, .kernels = {}};
  }
  Decision hot;
  for (size_t c : due) {
    queued_[c] = true;
    hot.kernels.insert(hot.kernels.end(), contents_[c].begin(), contents_[c].end());
  }
  return hot;
}

}  // namespace lazyjit::runtime

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
  // The contents still to compile, and the time tier 0 has spent in each.
  const int64_t budget_ns = saturating_product(cost_ns, 2);
  std::vector<size_t> open;
  std::vector<int64_t> spent;
  int64_t total = 0;
  for (size_t c = 0; c < contents_.size(); ++c) {
    if (queued_[c] || compiled[contents_[c].front()]) continue;
    int64_t ns = 0;
    for (size_t k : contents_[c]) ns += tier0_ns[k];
    open.push_back(c);
    spent.push_back(ns);
    total += ns;
  }
  if (total >= saturating_product(budget_ns, static_cast<int64_t>(open.size())) ||
      graph_ns_ >= saturating_product(cost_ns, own_)) {
    whole_queued_ = true;
    return {.whole = true, .kernels = {}};
  }
  Decision hot;
  for (size_t i = 0; i < open.size(); ++i) {
    if (spent[i] < budget_ns) continue;
    queued_[open[i]] = true;
    hot.kernels.insert(hot.kernels.end(), contents_[open[i]].begin(), contents_[open[i]].end());
  }
  return hot;
}

}  // namespace lazyjit::runtime

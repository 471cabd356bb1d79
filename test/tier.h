// ScopedTier: runs a test's scope on one tier (lazyjit::Tier), restoring the one before.
// Test executables run on tier 0 (LAZYJIT_TIER=0, test/CMakeLists.txt); a test of
// compilation (its counters, caches, dumps) asks for compiled code with
// `ScopedTier compiled(Tier::Compile);`.
#pragma once

#include "lazyjit/runtime.h"

namespace lazyjit::tests {

class ScopedTier {
 public:
  explicit ScopedTier(Tier tier) : before_(lazyjit::tier()) { set_tier(tier); }
  ~ScopedTier() { set_tier(before_); }
  ScopedTier(const ScopedTier&) = delete;
  ScopedTier& operator=(const ScopedTier&) = delete;

 private:
  Tier before_;
};

/// Sets what a compile costs under Tier::Auto for a scope (lazyjit::set_compile_cost), then
/// gives back the default. A test of the switch to compiled code sets 0: the whole graph
/// compiles from its second run, whatever the machine's cores.
class ScopedCompileCost {
 public:
  explicit ScopedCompileCost(double milliseconds) { set_compile_cost(milliseconds); }
  ~ScopedCompileCost() { set_compile_cost(-1); }
  ScopedCompileCost(const ScopedCompileCost&) = delete;
  ScopedCompileCost& operator=(const ScopedCompileCost&) = delete;
};

/// Kernel launches since `before` that tier 0 did not run (compiled code stood in for it):
/// 0 for a run under Tier::Interpret, which runs every kernel on tier 0.
inline int64_t launches_not_on_tier0(const Metrics& before) {
  const Metrics now = metrics();
  return (now.kernels_launched - before.kernels_launched) - (now.tier0_kernel_runs - before.tier0_kernel_runs);
}

}  // namespace lazyjit::tests

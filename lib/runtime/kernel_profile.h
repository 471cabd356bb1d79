// KernelProfile: with LAZYJIT_PROFILE=1, the wall time of every kernel run, summed per kernel
// of each graph and printed to stderr, slowest first, when the process exits: the slowest 40
// kernels, or every kernel with LAZYJIT_PROFILE=all.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "ir/hash.h"

namespace lazyjit::runtime {

class KernelProfile {
 public:
  /// The process's profile, or null when LAZYJIT_PROFILE is unset or 0.
  static KernelProfile* get();

  /// Adds a run of kernel `kernel` of graph `graph` that took `ns`; `describe` names the
  /// kernel the first time it is seen.
  void add(const ir::Hash128& graph, size_t kernel, int64_t ns, const std::function<std::string()>& describe);
  /// The table that is printed at exit: one line per kernel, slowest first, `limit` at most.
  std::string report(size_t limit = 40) const;

  ~KernelProfile();

 private:
  size_t printed_ = 40;  ///< kernels in the report printed at exit
};

}  // namespace lazyjit::runtime

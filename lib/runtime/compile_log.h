// CompileLog: remembers what was compiled, to say why the next compile happened.
#pragma once

#include <deque>
#include <mutex>
#include <string>

#include "ir/graph_diff.h"

namespace lazyjit::runtime {

/// The signatures of the last few compiled graphs. Thread-safe.
class CompileLog {
 public:
  explicit CompileLog(size_t capacity = 64) : capacity_(capacity) {}

  /// Why `graph` needs a compile: "new graph" when nothing was compiled before, else how it
  /// differs from the nearest compiled graph (the one sharing the longest node prefix),
  /// e.g. "differs from graph 3f2a... at node %7 (mul): dtype float64, cached float32".
  /// Then remembers `graph`.
  std::string explain_and_record(const ir::Graph& graph);

  /// Distinct graphs recorded since start (not bounded by the capacity).
  size_t distinct_graphs() const;

 private:
  mutable std::mutex mutex_;
  std::deque<ir::GraphSignature> recent_;
  size_t capacity_;
  size_t recorded_ = 0;
};

}  // namespace lazyjit::runtime

// CompileLog: remembers what was compiled, to say why the next compile happened.
#pragma once

#include <deque>
#include <mutex>
#include <string>

#include "absl/container/flat_hash_set.h"
#include "ir/graph_diff.h"

namespace lazyjit::runtime {

/// The signatures of the last few compiled graphs and the keys of all of them. Thread-safe.
class CompileLog {
 public:
  explicit CompileLog(size_t capacity = 64) : capacity_(capacity) {}

  /// Why `graph` needs a compile: "new graph" when nothing was compiled before, else how it
  /// differs from the nearest compiled graph (the one sharing the longest node prefix),
  /// e.g. "differs from graph 3f2a... at node %7 (mul): dtype float64, cached float32".
  std::string explain(const ir::Graph& graph) const;
  /// Records `graph` as compiled, unless that would make more than `max_graphs` distinct
  /// graphs (0: no limit); returns whether it did. Atomic, so racing threads cannot
  /// together pass the limit.
  bool admit(const ir::Graph& graph, size_t max_graphs);
  /// Undoes admit() for a graph whose compile failed.
  void forget(const ir::Graph& graph);
  /// Distinct graph keys recorded since start.
  size_t distinct_graphs() const;

 private:
  mutable std::mutex mutex_;
  std::deque<ir::GraphSignature> recent_;
  absl::flat_hash_set<ir::Hash128> keys_;
  size_t capacity_;
};

}  // namespace lazyjit::runtime

// DumpDir: writes every compiled graph to a directory (LAZYJIT_DUMP_DIR) for lazyjit-dump.
#pragma once

#include <string>

#include "ir/graph.h"

namespace lazyjit::runtime {

/// Files per compiled graph, named by the graph key K (K-donating-C when the step barrier
/// donates buffers, C the cache key): K.ljir (the graph with its inputs'
/// values, replayable with `lazyjit-dump K.ljir --run`), K.ll (LLVM IR as lowered),
/// K.opt.ll (after optimisation) and K.s (assembly). A failure to write is logged, never
/// thrown: dumping must not break the program being debugged.
class DumpDir {
 public:
  explicit DumpDir(std::string path) : path_(std::move(path)) {}
  bool enabled() const { return !path_.empty(); }
  const std::string& path() const { return path_; }

  /// Writes `text` to `<stem><extension>`.
  void write(std::string_view stem, std::string_view extension, std::string_view text) const;

 private:
  std::string path_;
};

}  // namespace lazyjit::runtime

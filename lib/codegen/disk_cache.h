// DiskCache: compiled objects on disk (LAZYJIT_CACHE_DIR), so a second process starts warm.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "ir/hash.h"

namespace lazyjit::codegen {

/// One file per key, `<key>.ljo`: a header (magic, format version, the key, the payload's
/// size and xxh3 checksum) and the relocatable object. The key given must already fold in
/// everything the object depends on (graph, aliasing, LLVM version, CPU and features,
/// optimisation level: JitCompiler::fingerprint()). Writers write a temporary file and
/// rename it, so concurrent processes never see a half-written file. Thread-safe.
class DiskCache {
 public:
  explicit DiskCache(std::string directory) : directory_(std::move(directory)) {}
  bool enabled() const { return !directory_.empty(); }

  /// The object stored under `key`: nullopt when there is none; an error naming the file and
  /// what is wrong when it is corrupt, truncated or another key's or format's (the caller
  /// reports it, compiles, and store() replaces it).
  absl::StatusOr<std::optional<std::string>> load(const ir::Hash128& key) const;
  /// Stores `object` under `key`; an error when the directory cannot be written.
  absl::Status store(const ir::Hash128& key, std::string_view object) const;

  std::string path_of(const ir::Hash128& key) const;

 private:
  std::string directory_;
};

}  // namespace lazyjit::codegen

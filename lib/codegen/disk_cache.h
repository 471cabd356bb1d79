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
///
/// Trust: the directory is trusted like the program itself (a file with a valid checksum is
/// loaded and run), so it must be writable by its owner alone. open() creates it 0700 and
/// refuses one that others can write. Only regular files are read, without following links
/// or blocking on a FIFO.
class DiskCache {
 public:
  /// A disabled cache (no directory).
  DiskCache() = default;
  /// The cache in `directory`, created with mode 0700 when missing. An error, and no cache,
  /// when it cannot be created or is not a directory, belongs to another user, or can be
  /// written by its group or by others.
  static absl::StatusOr<DiskCache> open(std::string directory);
  bool enabled() const { return !directory_.empty(); }

  /// The object stored under `key`: nullopt when there is none; an error naming the file and
  /// what is wrong when it is corrupt, truncated or another key's or format's (the caller
  /// reports it, compiles, and store() replaces it).
  absl::StatusOr<std::optional<std::string>> load(const ir::Hash128& key) const;
  /// Stores `object` under `key`; an error when the directory cannot be written.
  absl::Status store(const ir::Hash128& key, std::string_view object) const;

  std::string path_of(const ir::Hash128& key) const;

 private:
  explicit DiskCache(std::string directory) : directory_(std::move(directory)) {}

  std::string directory_;
};

}  // namespace lazyjit::codegen

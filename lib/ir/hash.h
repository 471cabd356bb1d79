// Hash128: the stable 128-bit structural hash (xxh3_128bits) that keys compiled graphs.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace lazyjit::ir {

struct Hash128 {
  uint64_t low = 0;
  uint64_t high = 0;

  friend bool operator==(const Hash128&, const Hash128&) = default;
  template <typename H>
  friend H AbslHashValue(H h, const Hash128& k) {
    return H::combine(std::move(h), k.low, k.high);
  }
  /// 32 lower-case hex digits, high word first.
  std::string to_hex() const;
};

/// xxh3_128bits of `words` (stable across runs, processes and machines of one endianness).
Hash128 hash_words(std::span<const uint64_t> words);
/// xxh3_128bits of `bytes`.
Hash128 hash_bytes(std::string_view bytes);

}  // namespace lazyjit::ir

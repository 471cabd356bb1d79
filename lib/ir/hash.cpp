// Hash128 over LLVM's xxh3_128bits.
#include "ir/hash.h"

#include <cstdio>

#include "llvm/Support/xxhash.h"

namespace lazyjit::ir {

std::string Hash128::to_hex() const {
  char buf[33];
  std::snprintf(buf, sizeof buf, "%016llx%016llx", static_cast<unsigned long long>(high),
                static_cast<unsigned long long>(low));
  return buf;
}

Hash128 hash_words(std::span<const uint64_t> words) {
  llvm::ArrayRef<uint8_t> bytes(reinterpret_cast<const uint8_t*>(words.data()), words.size_bytes());
  llvm::XXH128_hash_t h = llvm::xxh3_128bits(bytes);
  return Hash128{h.low64, h.high64};
}

Hash128 hash_bytes(std::string_view bytes) {
  llvm::XXH128_hash_t h = llvm::xxh3_128bits(
      llvm::ArrayRef<uint8_t>(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
  return Hash128{h.low64, h.high64};
}

}  // namespace lazyjit::ir

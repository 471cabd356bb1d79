// The on-disk object cache: file format, validation, atomic replacement.
#include "codegen/disk_cache.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "fmt/format.h"
#include "llvm/Support/xxhash.h"

namespace lazyjit::codegen {
namespace {

constexpr char kMagic[8] = {'L', 'J', 'O', 'B', 'J', '\r', '\n', '\x1a'};
constexpr uint32_t kFormatVersion = 1;

struct Header {
  char magic[8];
  uint32_t format_version;
  uint32_t reserved;
  uint64_t key_low, key_high;
  uint64_t payload_size;
  uint64_t payload_hash;
};
static_assert(sizeof(Header) == 48);

uint64_t checksum(std::string_view payload) {
  return llvm::xxh3_64bits(llvm::ArrayRef<uint8_t>(reinterpret_cast<const uint8_t*>(payload.data()), payload.size()));
}

}  // namespace

std::string DiskCache::path_of(const ir::Hash128& key) const {
  return (std::filesystem::path(directory_) / (key.to_hex() + ".ljo")).string();
}

absl::StatusOr<std::optional<std::string>> DiskCache::load(const ir::Hash128& key) const {
  const std::string path = path_of(key);
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::optional<std::string>();
  std::stringstream bytes;
  bytes << in.rdbuf();
  const std::string file = bytes.str();
  auto bad = [&](std::string_view why) {
    return absl::DataLossError(fmt::format("cache file {} is {}", path, why));
  };
  Header header;
  if (file.size() < sizeof header) return bad(fmt::format("truncated ({} bytes, no header)", file.size()));
  std::memcpy(&header, file.data(), sizeof header);
  if (std::memcmp(header.magic, kMagic, sizeof kMagic) != 0) return bad("not a lazyjit object (bad magic)");
  if (header.format_version != kFormatVersion) {
    return bad(fmt::format("of format {}, this lazyjit reads format {}", header.format_version, kFormatVersion));
  }
  if (header.key_low != key.low || header.key_high != key.high) return bad("another key's (renamed or copied)");
  const std::string_view payload = std::string_view(file).substr(sizeof header);
  if (payload.size() != header.payload_size) {
    return bad(fmt::format("truncated ({} of {} payload bytes)", payload.size(), header.payload_size));
  }
  if (checksum(payload) != header.payload_hash) return bad("corrupt (checksum mismatch)");
  return std::optional<std::string>(std::string(payload));
}

absl::Status DiskCache::store(const ir::Hash128& key, std::string_view object) const {
  std::error_code error;
  std::filesystem::create_directories(directory_, error);
  if (error) return absl::UnavailableError(fmt::format("cannot create {}: {}", directory_, error.message()));
  Header header{};
  std::memcpy(header.magic, kMagic, sizeof kMagic);
  header.format_version = kFormatVersion;
  header.key_low = key.low;
  header.key_high = key.high;
  header.payload_size = object.size();
  header.payload_hash = checksum(object);

  static std::atomic<uint64_t> counter{0};
  const std::string path = path_of(key);
  const std::string temporary = fmt::format("{}.tmp.{}.{}", path, ::getpid(), counter.fetch_add(1));
  // O_EXCL: two writers never share a temporary, even across containers with equal pids.
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return absl::UnavailableError(fmt::format("cannot create {}", temporary));
  auto write_all = [fd](const void* data, size_t size) {
    const char* p = static_cast<const char*>(data);
    while (size > 0) {
      const ssize_t n = ::write(fd, p, size);
      if (n <= 0) return false;
      p += n;
      size -= static_cast<size_t>(n);
    }
    return true;
  };
  // fsync before rename: after a crash the name holds the old file or the whole new one.
  const bool written = write_all(&header, sizeof header) && write_all(object.data(), object.size()) && ::fsync(fd) == 0;
  ::close(fd);
  if (!written) {
    std::filesystem::remove(temporary, error);
    return absl::UnavailableError(fmt::format("cannot write {}", temporary));
  }
  std::filesystem::rename(temporary, path, error);  // atomic: readers see the old file or the new one
  if (error) {
    std::filesystem::remove(temporary, error);
    return absl::UnavailableError(fmt::format("cannot rename {} to {}", temporary, path));
  }
  return absl::OkStatus();
}

}  // namespace lazyjit::codegen

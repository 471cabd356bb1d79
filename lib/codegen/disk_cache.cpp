// The on-disk object cache: file format, validation, atomic replacement.
#include "codegen/disk_cache.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

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

/// Objects are a few MB at most; anything far larger is not one of ours.
constexpr int64_t kMaxFileBytes = int64_t{1} << 30;

std::string errno_text() { return std::strerror(errno); }

/// The bytes of the regular file at `path`; nullopt when there is none.
absl::StatusOr<std::optional<std::string>> read_regular_file(const std::string& path) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer; O_NOFOLLOW: a link is not read.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return std::optional<std::string>();
    if (errno == ELOOP) return absl::DataLossError(fmt::format("cache file {} is a symbolic link", path));
    return absl::DataLossError(fmt::format("cache file {} cannot be opened: {}", path, errno_text()));
  }
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat info {};
  if (::fstat(fd, &info) != 0) return absl::DataLossError(fmt::format("cache file {}: {}", path, errno_text()));
  if (!S_ISREG(info.st_mode)) return absl::DataLossError(fmt::format("cache file {} is not a regular file", path));
  if (info.st_size > kMaxFileBytes) {
    return absl::DataLossError(fmt::format("cache file {} is too large ({} bytes)", path, info.st_size));
  }
  std::string bytes(static_cast<size_t>(info.st_size), '\0');
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::read(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return absl::DataLossError(fmt::format("cache file {} cannot be read: {}", path, errno_text()));
    if (n == 0) break;  // shrank while read: the checks below report it
    done += static_cast<size_t>(n);
  }
  bytes.resize(done);
  return std::optional<std::string>(std::move(bytes));
}

}  // namespace

absl::StatusOr<DiskCache> DiskCache::open(std::string directory) {
  if (directory.empty()) return DiskCache();
  if (::mkdir(directory.c_str(), 0700) != 0 && errno != EEXIST) {
    std::error_code error;  // a missing parent: create it too (also 0700 for the last part)
    std::filesystem::create_directories(std::filesystem::path(directory).parent_path(), error);
    if (::mkdir(directory.c_str(), 0700) != 0 && errno != EEXIST) {
      return absl::UnavailableError(fmt::format("cannot create cache directory {}: {}", directory, errno_text()));
    }
  }
  struct stat info {};
  if (::stat(directory.c_str(), &info) != 0) {
    return absl::UnavailableError(fmt::format("cache directory {}: {}", directory, errno_text()));
  }
  if (!S_ISDIR(info.st_mode)) return absl::FailedPreconditionError(fmt::format("{} is not a directory", directory));
  if (info.st_uid != ::geteuid()) {
    return absl::PermissionDeniedError(fmt::format(
        "cache directory {} belongs to another user (uid {}); its objects would run in this process", directory,
        info.st_uid));
  }
  if ((info.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    return absl::PermissionDeniedError(fmt::format(
        "cache directory {} can be written by others (mode {:o}); its objects would run in this process: "
        "chmod 700 it",
        directory, info.st_mode & 07777));
  }
  return DiskCache(std::move(directory));
}

std::string DiskCache::path_of(const ir::Hash128& key) const {
  return (std::filesystem::path(directory_) / (key.to_hex() + ".ljo")).string();
}

absl::StatusOr<std::optional<std::string>> DiskCache::load(const ir::Hash128& key) const {
  const std::string path = path_of(key);
  absl::StatusOr<std::optional<std::string>> read = read_regular_file(path);
  if (!read.ok() || !read->has_value()) return read;
  const std::string& file = **read;
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
  if (payload.size() < header.payload_size) {
    return bad(fmt::format("truncated ({} of {} payload bytes)", payload.size(), header.payload_size));
  }
  if (payload.size() > header.payload_size) {
    return bad(fmt::format("longer than its header says ({} payload bytes, {} expected)", payload.size(),
                           header.payload_size));
  }
  if (checksum(payload) != header.payload_hash) return bad("corrupt (checksum mismatch)");
  return std::optional<std::string>(std::string(payload));
}

absl::Status DiskCache::store(const ir::Hash128& key, std::string_view object) const {
  std::error_code error;
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
  if (fd < 0) return absl::UnavailableError(fmt::format("cannot create {}: {}", temporary, errno_text()));
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
  const std::string why = written ? "" : errno_text();
  ::close(fd);
  if (!written) {
    std::filesystem::remove(temporary, error);
    return absl::UnavailableError(fmt::format("cannot write {}: {}", temporary, why));
  }
  std::filesystem::rename(temporary, path, error);  // atomic: readers see the old file or the new one
  if (error) {
    const std::string rename_error = error.message();
    std::filesystem::remove(temporary, error);
    return absl::UnavailableError(fmt::format("cannot rename {} to {}: {}", temporary, path, rename_error));
  }
  return absl::OkStatus();
}

}  // namespace lazyjit::codegen

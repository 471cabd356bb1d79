// Shape arithmetic and NumPy broadcasting.
#include "ir/shape.h"

#include <limits>

#include "absl/status/status.h"
#include "fmt/format.h"
#include "fmt/ranges.h"

namespace lazyjit::ir {

int64_t numel(std::span<const int64_t> dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

std::string shape_to_string(std::span<const int64_t> dims) {
  return fmt::format("[{}]", fmt::join(dims, ","));
}

absl::StatusOr<Shape> broadcast_shapes(std::string_view op, std::span<const int64_t> a,
                                       std::span<const int64_t> b) {
  const size_t rank = std::max(a.size(), b.size());
  Shape out(rank);
  for (size_t i = 0; i < rank; ++i) {
    // Right-aligned: dim i of the result is dim (i - (rank - size)) of each operand.
    const int64_t da = i + a.size() >= rank ? a[i + a.size() - rank] : 1;
    const int64_t db = i + b.size() >= rank ? b[i + b.size() - rank] : 1;
    if (da != db && da != 1 && db != 1) {
      return absl::InvalidArgumentError(fmt::format("{}: shapes {} and {} cannot be broadcast (dim {}: {} vs {})", op, shape_to_string(a), shape_to_string(b), i, da, db));
    }
    out[i] = da == 1 ? db : da;
  }
  return out;
}

uint64_t unit_dim_mask(std::span<const int64_t> dims) {
  uint64_t mask = 0;
  for (size_t i = 0; i < dims.size() && i < 64; ++i) {  // rank <= kMaxRank == 64
    if (dims[i] == 1) mask |= uint64_t{1} << i;
  }
  return mask;
}

absl::Status validate_dims(std::string_view op, std::span<const int64_t> dims) {
  if (dims.size() > kMaxRank) {
    return absl::InvalidArgumentError(
        fmt::format("{}: rank {} is past the maximum of {}", op, dims.size(), kMaxRank));
  }
  int64_t n = 1;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] < 0) {
      return absl::InvalidArgumentError(fmt::format("{}: dim {} of shape {} is negative", op, i, shape_to_string(dims)));
    }
    if (dims[i] != 0 && n > std::numeric_limits<int64_t>::max() / 16 / dims[i]) {
      return absl::InvalidArgumentError(
          fmt::format("{}: shape {} has too many elements", op, shape_to_string(dims)));
    }
    n *= dims[i];
  }
  return absl::OkStatus();
}

}  // namespace lazyjit::ir

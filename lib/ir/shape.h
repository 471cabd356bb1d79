// Shapes: dims, element counts, broadcasting and the broadcast pattern of the cache key.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "absl/container/inlined_vector.h"
#include "absl/status/statusor.h"

namespace lazyjit::ir {

/// Dims of a tensor, outermost first. Rank 0 is a scalar.
using Shape = absl::InlinedVector<int64_t, 4>;

/// Ranks past this are rejected when a tensor is created (the broadcast pattern is 64 bits).
inline constexpr int kMaxRank = 64;

int64_t numel(std::span<const int64_t> dims);
/// "[2,3]"; "[]" for a scalar.
std::string shape_to_string(std::span<const int64_t> dims);

/// NumPy broadcasting of two shapes (dims right-aligned, a dim of 1 stretches).
/// Error text: "<op>: shapes [2,3] and [4,3] cannot be broadcast (dim 0: 2 vs 4)".
absl::StatusOr<Shape> broadcast_shapes(std::string_view op, std::span<const int64_t> a,
                                       std::span<const int64_t> b);

/// Bit i set when dim i has size 1: with the rank, this is all of a shape the cache key sees.
uint64_t unit_dim_mask(std::span<const int64_t> dims);

/// Checks user-given dims: non-negative, rank <= kMaxRank, element count representable.
absl::Status validate_dims(std::string_view op, std::span<const int64_t> dims);

}  // namespace lazyjit::ir

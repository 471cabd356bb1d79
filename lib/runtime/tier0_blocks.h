// Tier 0's block functions: each operation of the kernel IR over n elements of arrays. The
// library builds them once per vector ISA (AVX-512, AVX2 with FMA, baseline x86-64) and picks
// one set at run time for the CPU. They compute what compiled kernels compute: the scalar
// semantics of ir/scalar_semantics.h, glibc's libmvec for exp, log, sin, cos and pow (the
// vector variants compiled loops call) and libm's tanh and erf, the same Philox words, the
// same fused multiply-adds in the micro-kernel (docs/semantics.md says where the tiers differ).
#pragma once

#include <cstddef>
#include <cstdint>

#include "ir/op.h"
#include "lazyjit/dtype.h"

namespace lazyjit::runtime::tier0 {

/// Values in blocks are arrays of their C++ type; bool is one byte, 0 or 1.
/// `out[i] = op(operands[0][i], operands[1][i], ...)` for i in [0, n).
using BlockFn = void (*)(const void* const* operands, void* out, int64_t n);
/// `out[i]` = the Rand or Randn value of (seed, counters[i]).
using RandomFn = void (*)(uint64_t seed, const int64_t* counters, void* out, int64_t n);
/// `*accumulator = combine(*accumulator, values[0..n))`: in order for every combine but a
/// float Add, Maximum and Minimum; a float Add sums the block in kFoldLanes lanes (element
/// i into lane i % kFoldLanes) and adds their fixed-order total; Maximum and Minimum keep
/// lanes too, which gives the in-order result exactly (they are associative and commutative).
using FoldFn = void (*)(const void* values, int64_t n, void* accumulator);
/// The micro-kernel of kir::MicroKernel: tile[r][j] = sum over kk < k of A(r, kk) * B(kk, j)
/// for the MR x NR tile of matmul_tiling, from zero, kk ascending, one fused multiply-add
/// per step for floats. A is a packed panel at a_rows[0] or MR rows at offsets a_rows.
using MicroKernelFn = void (*)(const void* a, const int64_t* a_rows, bool packed_a, const void* b, int64_t b_base,
                               int64_t k, void* tile);

/// Copies `rows` rows of `bytes` bytes, kCopyRowsMinBytes <= bytes <= kCopyRowsBytes, out's and in's rows
/// `out_row` and `in_row` bytes apart, no row of out overlapping one of in: a copy nest's
/// contiguous rows (a pack's panel rows of 128 bytes, a band's epilogue), in the ISA's widest
/// moves inline. A call of memmove per row cost about as much as the row.
using CopyRowsFn = void (*)(std::byte* out, int64_t out_row, const std::byte* in, int64_t in_row, int64_t rows,
                            int64_t bytes);
inline constexpr int64_t kCopyRowsMinBytes = 16, kCopyRowsBytes = 512;
/// Whether rows of `bytes` bytes are what CopyRowsFn copies.
inline constexpr bool copy_rows_takes(int64_t bytes) { return bytes >= kCopyRowsMinBytes && bytes <= kCopyRowsBytes; }

inline constexpr int kFoldLanes = 16;

/// One ISA's functions; a null entry is an operation no kernel can contain (the op table
/// admits no such dtype).
struct BlockTable {
  const char* isa = "";
  BlockFn same[ir::kNumOps][kNumDTypes] = {};     ///< by op and dtype (DTypeRule::Same)
  BlockFn compare[ir::kNumOps][kNumDTypes] = {};  ///< by op and operand dtype, to bool
  /// by [which][op][dtype]: a two-operand DTypeRule::Same op whose operand `which` is one
  /// value for all n lanes (a row's value beside the row's elements), the same results as
  /// `same` over that value broadcast; null where `same` calls a math function.
  BlockFn same_with_scalar[2][ir::kNumOps][kNumDTypes] = {};
  BlockFn select[kNumDTypes] = {};                ///< (bool, T, T) to T
  BlockFn cast[kNumDTypes][kNumDTypes] = {};      ///< [from][to]
  RandomFn random[2][2] = {};                     ///< [Randn?][Float64?]
  FoldFn fold[ir::kNumOps][kNumDTypes] = {};      ///< by combine (ir::fold_info) and dtype
  MicroKernelFn matmul[kNumDTypes] = {};
  CopyRowsFn copy_rows = nullptr;
};

/// The table for this CPU (chosen once).
const BlockTable& block_table();

/// The tables built into the library, for tests that compare them: baseline, AVX2, AVX-512
/// (the last two null when the CPU lacks the ISA).
const BlockTable* block_table_for(int isa);

}  // namespace lazyjit::runtime::tier0

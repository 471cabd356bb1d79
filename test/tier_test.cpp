// Tiers: tier 0 runs a new graph at once, compiled code takes over after the background
// compile, and a graph runs the kernels other graphs compiled already. (That both tiers
// compute the same values is the differential tests' business.)
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <mutex>
#include <thread>
#include <vector>

#include <lazyjit/lazyjit.h>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/graph.h"
#include "ir/scalar_semantics.h"
#include "lowering/kir.h"
#include "lowering/lower.h"
#include "lowering/plan.h"
#include "runtime/background_compiler.h"
#include "runtime/tier0.h"
#include "runtime/tier0_blocks.h"
#include "runtime/tier_up.h"
#include "runtime/tensor_impl.h"
#include "tier.h"

namespace lazyjit {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::vector<float> ramp(int64_t n, float scale) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = scale * static_cast<float>(i % 97) - 3.0f;
  return v;
}

/// The nest KernelContext::for_runs makes of the slice [Begin, End) in runs of n:
/// body(run, j, at) for each element, at = run n + j.
template <class Body>
void for_runs(kir::Builder& k, kir::Id n, Body&& body) {
  k.loop(k.div(k.begin(), n), k.ceil_div(k.end(), n), [&](kir::Id run) {
    const kir::Id base = k.mul(run, n);
    k.loop(k.max(k.sub(k.begin(), base), k.index(0)), k.min(k.sub(k.end(), base), n),
           [&](kir::Id j) { body(run, j, k.add(base, j)); });
  });
}

/// Tier 0's kernel of `k`, of `kind`, one iteration of work per call (the tests run it over
/// slices of their own).
runtime::Tier0Kernel one_call_kernel(kir::Builder& k, const char* kind) {
  k.kernel().kind = kind;
  k.kernel().count = k.index(1);
  k.kernel().work = k.index(1);
  return runtime::Tier0Kernel(k.take());
}

/// The program these tests run: an elementwise kernel and a row kernel.
std::vector<float> program(const std::vector<float>& x_values) {
  const Tensor x = Tensor::from_vector<float>(x_values, {64, 16});
  const Tensor y = softmax(relu(x * 0.5 - 1.0), 1) + 2.0;
  return y.to_vector<float>();
}

/// A pack of A in panels of 6 lanes, out[p][k][r] = f(A[6p + r][k]) with zeros past the last
/// row, A [13, K] read along its rows or, `transposed`, from A^T [K, 13]; f doubles (x + x:
/// more than a copy, which a copy nest would run as copies) or is relu.
struct PackOfA {
  bool transposed;
  ir::OpKind f;

  runtime::Tier0Kernel kernel() const {
    kir::Builder k;
    const int in = k.new_buffer(DType::Float32), out = k.new_buffer(DType::Float32);
    const kir::Id rows = k.dim(k.new_dim()), depth = k.dim(k.new_dim()), mr = k.index(6);
    k.loop(k.begin(), k.end(), [&](kir::Id panel) {
      const kir::Id first = k.mul(panel, mr), lanes = k.min(mr, k.sub(rows, first));
      const kir::Id base = k.mul(k.mul(panel, depth), mr);
      k.loop(k.index(0), depth, [&](kir::Id kk) {
        k.loop(k.index(0), lanes, [&](kir::Id r) {
          const kir::Id row = k.add(first, r);
          const kir::Id x = k.load(in, transposed ? k.add(k.mul(kk, rows), row) : k.add(k.mul(row, depth), kk));
          const kir::Id value = f == ir::OpKind::Add ? k.op(f, DType::Float32, {x, x}) : k.op(f, DType::Float32, {x});
          k.store(out, k.add(base, k.add(k.mul(kk, mr), r)), value);
        });
        k.loop(lanes, mr, [&](kir::Id r) {
          k.store(out, k.add(base, k.add(k.mul(kk, mr), r)), k.float_constant(DType::Float32, 0));
        });
      });
    });
    k.kernel().kind = "panel";
    k.kernel().count = k.ceil_div(rows, mr);
    k.kernel().work = depth;
    return runtime::Tier0Kernel(k.take());
  }

  /// Runs `kernel` for K = depth over the 3 panels of 13 rows and checks every element.
  void check(const runtime::Tier0Kernel& kernel, int64_t depth) const {
    const int64_t n = 13, panels = 3;
    std::vector<float> a(static_cast<size_t>(n * depth)), packed(static_cast<size_t>(panels * depth * 6), -1);
    for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(i % 7) - 3.0f;
    void* args[] = {a.data(), packed.data()};
    const int64_t dims[] = {n, depth};
    ASSERT_EQ(kernel.run(args, dims, 0, panels), 0);
    for (int64_t p = 0; p < panels; ++p) {
      for (int64_t kk = 0; kk < depth; ++kk) {
        for (int64_t r = 0; r < 6; ++r) {
          const int64_t row = 6 * p + r;
          const float x = row < n ? a[static_cast<size_t>(transposed ? kk * n + row : row * depth + kk)] : 0.0f;
          const float expected = row < n ? (f == ir::OpKind::Add ? x + x : std::max(x, 0.0f)) : 0.0f;
          ASSERT_EQ(packed[static_cast<size_t>((p * depth + kk) * 6 + r)], expected) << "K " << depth << ": " << p << " " << kk << " " << r;
        }
      }
    }
  }
};

/// A pack of A's rows (2 A[6p + r][k]): tier 0 runs its short lane loop under the long K loop
/// inverted, K in chunks (none, one, two whole, and a last one partial), and the zeros, whose
/// rows of r lie whole in memory, flattened. The same stores.
TEST(TierZeroTest, AShortLoopUnderALongOneStoresWhatItStoresInOrder) {
  const PackOfA pack{.transposed = false, .f = ir::OpKind::Add};
  const runtime::Tier0Kernel kernel = pack.kernel();
  EXPECT_EQ(kernel.shape().copies, 0);
  EXPECT_EQ(kernel.shape().flattened, 1);  // the zeros: a nest of their own, rows of whole lanes
  for (const int64_t depth : {0, 37, 256, 300}) pack.check(kernel, depth);
}

/// A pack of A from a transposed operand (relu(A^T[k][6p + r]): a weight's gradient x^T g):
/// each K step's lanes lie whole in memory, so tier 0 runs the nest flattened, a block of
/// whole rows at a time, where inverted it would read a lane at a time K apart. The same
/// stores, panels of 6 lanes and of 1 (the last).
TEST(TierZeroTest, AShortLoopWhoseRowsLieWholeRunsFlattened) {
  const PackOfA pack{.transposed = true, .f = ir::OpKind::Relu};
  const runtime::Tier0Kernel kernel = pack.kernel();
  EXPECT_EQ(kernel.shape().copies, 0);
  EXPECT_EQ(kernel.shape().flattened, 2);  // the values and the zeros
  for (const int64_t depth : {0, 1, 37, 300}) pack.check(kernel, depth);
}

/// Tier 0 reads a unit-stride load where it lies, without copying it into a block, unless the
/// loop stores over that memory: here the first store's buffer is the loaded one (a donated
/// parameter and the result that took it over), and the second stores the loaded values as
/// they were before the first.
TEST(TierZeroTest, ALoadOfMemoryTheLoopStoresOverIsReadBeforeTheStore) {
  kir::Builder k;
  const int in = k.new_buffer(DType::Float32), doubled = k.new_buffer(DType::Float32), copy = k.new_buffer(DType::Float32);
  k.loop(k.begin(), k.end(), [&](kir::Id i) {
    const kir::Id value = k.load(in, i);
    k.store({doubled, copy}, {i, i}, {k.op(ir::OpKind::Add, DType::Float32, {value, value}), value});
  });
  k.kernel().kind = "element";
  k.kernel().count = k.dim(k.new_dim());
  k.kernel().work = k.index(1);
  const runtime::Tier0Kernel kernel(k.take());
  for (const bool donated : {false, true}) {
    const int64_t n = 1000;
    std::vector<float> x = ramp(n, 0.25f), out(static_cast<size_t>(n), -1), copied(static_cast<size_t>(n), -1);
    const std::vector<float> original = x;
    void* args[] = {x.data(), donated ? x.data() : out.data(), copied.data()};
    const int64_t dims[] = {n};
    ASSERT_EQ(kernel.run(args, dims, 0, n), 0);
    const std::vector<float>& result = donated ? x : out;
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_EQ(result[static_cast<size_t>(i)], 2 * original[static_cast<size_t>(i)]) << "donated " << donated << " at " << i;
      ASSERT_EQ(copied[static_cast<size_t>(i)], original[static_cast<size_t>(i)]) << "donated " << donated << " at " << i;
    }
  }
}

/// A row kernel's constants are broadcast once while it re-enters the same loop over as many
/// lanes: here two loops per row, whose blocks share the scratch, and rows of every length.
TEST(TierZeroTest, BroadcastConstantsSurviveOnlyTheirOwnLoopsReentry) {
  kir::Builder k;
  const int in = k.new_buffer(DType::Float32), tripled = k.new_buffer(DType::Float32), shifted = k.new_buffer(DType::Float32);
  const kir::Id width = k.dim(k.new_dim());
  k.loop(k.begin(), k.end(), [&](kir::Id row) {
    const kir::Id length = k.min(k.add(row, k.index(1)), width);  // rows of 1, 2, ... elements
    k.loop(k.index(0), length, [&](kir::Id j) {
      const kir::Id at = k.add(k.mul(row, width), j);
      k.store(tripled, at, k.op(ir::OpKind::Mul, DType::Float32, {k.load(in, at), k.float_constant(DType::Float32, 3)}));
    });
    k.loop(k.index(0), width, [&](kir::Id j) {
      const kir::Id at = k.add(k.mul(row, width), j);
      k.store(shifted, at, k.op(ir::OpKind::Add, DType::Float32, {k.load(in, at), k.float_constant(DType::Float32, 0.5)}));
    });
  });
  k.kernel().kind = "row";
  k.kernel().count = width;
  k.kernel().work = width;
  const runtime::Tier0Kernel kernel(k.take());
  const int64_t n = 40;
  std::vector<float> x = ramp(n * n, 0.5f), a(static_cast<size_t>(n * n), 0), b(static_cast<size_t>(n * n), 0);
  void* args[] = {x.data(), a.data(), b.data()};
  const int64_t dims[] = {n};
  ASSERT_EQ(kernel.run(args, dims, 0, n), 0);
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t j = 0; j < n; ++j) {
      const size_t at = static_cast<size_t>(r * n + j);
      ASSERT_EQ(a[at], j <= r ? x[at] * 3 : 0.0f) << r << " " << j;
      ASSERT_EQ(b[at], x[at] + 0.5f) << r << " " << j;
    }
  }
}

/// A loop entered again, row after row, over as many lanes, keeps its broadcasts only while
/// their values stay: here each row's scale is the row's own (a value of the outer loop),
/// beside a constant, in rows of 1, 5 and 300 elements.
TEST(TierZeroTest, ABroadcastIsKeptAcrossEntriesOnlyWhileItsValueStays) {
  kir::Builder k;
  const int in = k.new_buffer(DType::Float32), out = k.new_buffer(DType::Float32);
  const kir::Id width = k.dim(k.new_dim());
  k.loop(k.begin(), k.end(), [&](kir::Id row) {
    const kir::Id scale = k.convert(k.rem(row, k.index(3)), DType::Float32);  // 0, 1, 2, 0, ...
    k.loop(k.index(0), width, [&](kir::Id j) {
      const kir::Id at = k.add(k.mul(row, width), j);
      const kir::Id scaled = k.op(ir::OpKind::Mul, DType::Float32, {k.load(in, at), scale});
      k.store(out, at, k.op(ir::OpKind::Add, DType::Float32, {scaled, k.float_constant(DType::Float32, 0.5)}));
    });
  });
  k.kernel().kind = "row";
  k.kernel().count = k.index(7);
  k.kernel().work = width;
  const runtime::Tier0Kernel kernel(k.take());
  for (const int64_t n : {1, 5, 300}) {
    std::vector<float> x = ramp(7 * n, 0.5f), y(static_cast<size_t>(7 * n), 0);
    void* args[] = {x.data(), y.data()};
    ASSERT_EQ(kernel.run(args, &n, 0, 7), 0);
    for (int64_t r = 0; r < 7; ++r) {
      for (int64_t j = 0; j < n; ++j) {
        const size_t at = static_cast<size_t>(r * n + j);
        ASSERT_EQ(y[at], x[at] * static_cast<float>(r % 3) + 0.5f) << "rows of " << n << ": " << r << " " << j;
      }
    }
  }
}

/// Packs of B in panels of 4 columns (out[p][k][j] = B(k, 4p + j), zeros past the last
/// column) from B and from a transposed B: nests that only copy, at offsets affine in both
/// loops' variables, run as one strided copy (or fill) per store, with the values the nest
/// stores. Offsets that divide are not affine: such a store runs a block at a time, inverted,
/// and the zeros, once the nest is split, flattened (their rows lie whole in memory).
TEST(TierZeroTest, ANestThatOnlyCopiesRunsAsStridedCopies) {
  auto pack = [](bool transposed, bool divide) {
    kir::Builder k;
    const int in = k.new_buffer(DType::Float64), out = k.new_buffer(DType::Float64);
    const kir::Id cols = k.dim(k.new_dim()), depth = k.dim(k.new_dim()), nr = k.index(4);
    k.loop(k.begin(), k.end(), [&](kir::Id panel) {
      const kir::Id first = k.mul(panel, nr), lanes = k.min(nr, k.sub(cols, first));
      const kir::Id base = k.mul(k.mul(panel, depth), nr);
      k.loop(k.index(0), depth, [&](kir::Id kk) {
        k.loop(k.index(0), lanes, [&](kir::Id j) {
          const kir::Id col = k.add(first, j);
          kir::Id at = transposed ? k.add(k.mul(col, depth), kk) : k.add(k.mul(kk, cols), col);
          if (divide) at = k.div(k.mul(at, k.index(2)), k.index(2));  // the same offset
          k.store(out, k.add(base, k.add(k.mul(kk, nr), j)), k.load(in, at));
        });
        k.loop(lanes, nr, [&](kir::Id j) {
          k.store(out, k.add(base, k.add(k.mul(kk, nr), j)), k.float_constant(DType::Float64, 0));
        });
      });
    });
    k.kernel().kind = "panel";
    k.kernel().count = k.ceil_div(cols, nr);
    k.kernel().work = depth;
    return runtime::Tier0Kernel(k.take());
  };
  for (const bool transposed : {false, true}) {
    for (const bool divide : {false, true}) {
      const runtime::Tier0Kernel kernel = pack(transposed, divide);
      EXPECT_EQ(kernel.shape().copies, divide ? 0 : 2);
      EXPECT_EQ(kernel.shape().flattened, divide ? 1 : 0);  // divided: the zeros
      for (const int64_t depth : {0, 1, 7}) {
        const int64_t n = 10, panels = 3;  // the last panel has 2 columns
        std::vector<double> b(static_cast<size_t>(n * depth)), packed(static_cast<size_t>(panels * depth * 4), -1);
        for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<double>(i) + 0.5;
        void* args[] = {b.data(), packed.data()};
        const int64_t dims[] = {n, depth};
        ASSERT_EQ(kernel.run(args, dims, 1, panels), 0);  // panels 1 and 2 (panel 0 is another thread's)
        for (int64_t p = 0; p < panels; ++p) {
          for (int64_t kk = 0; kk < depth; ++kk) {
            for (int64_t j = 0; j < 4; ++j) {
              const int64_t col = 4 * p + j;
              const double expected =
                  p == 0 ? -1 : col < n ? b[static_cast<size_t>(transposed ? col * depth + kk : kk * n + col)] : 0.0;
              ASSERT_EQ(packed[static_cast<size_t>((p * depth + kk) * 4 + j)], expected)
                  << (transposed ? "B^T" : "B") << (divide ? " divided" : "") << ", K " << depth << ": " << p << " " << kk
                  << " " << j;
            }
          }
        }
      }
    }
  }
}

/// A matmul's epilogue: rows of a tile (at most 6) of short columns (at most 8) stored as
/// out[row][col] = tile[r][j] + bias[col], and a second store that every row overwrites
/// (last[j] = r). Tier 0 flattens the nest into one loop, one block for all its rows, in
/// the nest's order: each last[j] ends with the last row's r.
TEST(TierZeroTest, AShortNestOfStoresRunsFlattenedInItsOrder) {
  kir::Builder k;
  const int bias = k.new_buffer(DType::Float32), out = k.new_buffer(DType::Float32), last = k.new_buffer(DType::Int64);
  const int tile = k.new_local(DType::Float32, 6 * 8);
  const kir::Id width = k.dim(k.new_dim()), first_row = k.dim(k.new_dim()), first_col = k.dim(k.new_dim());
  const kir::Id rows = k.min(k.index(6), k.dim(k.new_dim())), cols = k.min(k.index(8), k.dim(k.new_dim()));
  k.loop(k.begin(), k.end(), [&](kir::Id) {
    k.loop(k.index(0), k.index(6 * 8), [&](kir::Id i) {  // the tile: 10 r + j
      k.assign(tile, k.convert(k.add(k.mul(k.div(i, k.index(8)), k.index(10)), k.rem(i, k.index(8))), DType::Float32), i);
    });
    k.loop(k.index(0), rows, [&](kir::Id r) {
      k.loop(k.index(0), cols, [&](kir::Id j) {
        const kir::Id col = k.add(first_col, j);
        const kir::Id value = k.op(ir::OpKind::Add, DType::Float32, {k.local(tile, k.add(k.mul(r, k.index(8)), j)), k.load(bias, col)});
        k.store(out, k.add(k.mul(k.add(first_row, r), width), col), value);
        k.store(last, j, r);
      });
    });
  });
  k.kernel().kind = "tile";
  k.kernel().count = k.index(1);
  k.kernel().work = k.index(48);
  const runtime::Tier0Kernel kernel(k.take());
  EXPECT_EQ(kernel.shape().flattened, 1);
  for (const auto& [row_count, col_count] : std::vector<std::pair<int64_t, int64_t>>{{6, 8}, {1, 8}, {4, 3}, {0, 5}, {3, 0}}) {
    const int64_t w = 12, r0 = 2, c0 = 3;
    std::vector<float> b(static_cast<size_t>(w)), y(static_cast<size_t>(10 * w), -1);
    std::vector<int64_t> rows_seen(8, -1);
    for (int64_t c = 0; c < w; ++c) b[static_cast<size_t>(c)] = 0.5f * static_cast<float>(c);
    void* args[] = {b.data(), y.data(), rows_seen.data()};
    const int64_t dims[] = {w, r0, c0, row_count, col_count};
    ASSERT_EQ(kernel.run(args, dims, 0, 1), 0);
    for (int64_t row = 0; row < 10; ++row) {
      for (int64_t col = 0; col < w; ++col) {
        const int64_t r = row - r0, j = col - c0;
        const bool in = r >= 0 && r < row_count && j >= 0 && j < col_count;
        ASSERT_EQ(y[static_cast<size_t>(row * w + col)], in ? static_cast<float>(10 * r + j) + b[static_cast<size_t>(col)] : -1.0f)
            << row_count << "x" << col_count << ": " << row << " " << col;
      }
    }
    for (int64_t j = 0; j < 8; ++j) {
      EXPECT_EQ(rows_seen[static_cast<size_t>(j)], row_count > 0 && j < col_count ? row_count - 1 : -1) << j;
    }
  }
}

/// A loop of micro-kernels (A's rows in place, B one packed panel of 32 columns), each
/// followed by its tile's epilogue, out[row][j] = tile[r][j] + bias[j] for the tile's rows
/// (row = 6 m + r, at most 6, the last tile's fewer) as Matmul::matmul lowers it. Tier 0 runs
/// it a band of 16 micro-kernels at a time, then the band's epilogue over its rows: products
/// of 1 to 239 rows (one band, a full one, three), each element the fused multiply-adds from
/// zero in K's order plus the bias, and nothing stored past the last row or column. An
/// epilogue that reads the tile elsewhere than its own row and column (row 0's, for every
/// row) runs a tile at a time, as lowered.
TEST(TierZeroTest, MicroKernelsRunABandAtATimeBeforeTheirEpilogues) {
  constexpr int64_t kMr = 6, kNr = 32;
  for (const bool own_row : {true, false}) {
    kir::Builder k;
    const int a = k.new_buffer(DType::Float32), b = k.new_buffer(DType::Float32);
    const int bias = k.new_buffer(DType::Float32), out = k.new_buffer(DType::Float32);
    const int tile = k.new_local(DType::Float32, kMr * kNr);
    const kir::Id m = k.dim(k.new_dim()), depth = k.dim(k.new_dim()), cols = k.min(k.index(kNr), k.dim(k.new_dim()));
    k.loop(k.begin(), k.end(), [&](kir::Id) {
      k.loop(k.index(0), k.ceil_div(m, k.index(kMr)), [&](kir::Id micro) {
        const kir::Id first_row = k.mul(micro, k.index(kMr));
        kir::MicroKernel step{.a = a, .b = b, .tile = tile, .packed_a = false, .k = depth, .b_base = k.index(0)};
        for (int64_t r = 0; r < kMr; ++r) {
          step.a_rows.push_back(k.mul(k.min(k.add(first_row, k.index(r)), k.sub(m, k.index(1))), depth));
        }
        k.matmul(std::move(step));
        k.loop(k.index(0), k.min(k.index(kMr), k.sub(m, first_row)), [&](kir::Id r) {
          k.loop(k.index(0), cols, [&](kir::Id j) {
            const kir::Id at = own_row ? k.add(k.mul(r, k.index(kNr)), j) : j;
            const kir::Id value = k.op(ir::OpKind::Add, DType::Float32, {k.local(tile, at), k.load(bias, j)});
            k.store(out, k.add(k.mul(k.add(first_row, r), k.index(kNr)), j), value);
          });
        });
      });
    });
    const runtime::Tier0Kernel kernel = one_call_kernel(k, "tile");
    EXPECT_EQ(kernel.shape().banded, own_row ? 1 : 0);
    for (const int64_t rows : {1, 6, 95, 96, 97, 239}) {
      const int64_t kk = 5, used_cols = 29;
      const std::vector<float> x = ramp(rows * kk, 0.25f), w = ramp(kk * kNr, 0.125f), c = ramp(kNr, 0.5f);
      std::vector<float> y(static_cast<size_t>((rows + 1) * kNr), -1.0f);
      void* args[] = {const_cast<float*>(x.data()), const_cast<float*>(w.data()), const_cast<float*>(c.data()), y.data()};
      const int64_t dims[] = {rows, kk, used_cols};
      ASSERT_EQ(kernel.run(args, dims, 0, 1), 0);
      for (int64_t row = 0; row <= rows; ++row) {
        for (int64_t j = 0; j < kNr; ++j) {
          const int64_t from = own_row ? row : row / kMr * kMr;  // the row whose product is read
          float sum = 0.0f;
          for (int64_t i = 0; row < rows && i < kk; ++i) {  // (the row past the last stays as it was)
            sum = std::fma(x[static_cast<size_t>(from * kk + i)], w[static_cast<size_t>(i * kNr + j)], sum);
          }
          const float want = row < rows && j < used_cols ? sum + c[static_cast<size_t>(j)] : -1.0f;
          ASSERT_EQ(y[static_cast<size_t>(row * kNr + j)], want) << (own_row ? "" : "row 0's, ") << rows << " rows: " << row << " " << j;
        }
      }
    }
  }
}

/// An elementwise kernel over runs of n elements (KernelContext::for_runs) runs as one loop
/// over [Begin, End), whatever the slice: runs cut at both ends, one element, none. One whose
/// statements read the element only at its linear index (w = w - 0.5 g over rows of 3: an
/// optimiser's update of a narrow weight) reads it there; one that reads the column alone (a
/// bias broadcast down the rows) reads it as the remainder of that index by n, each block
/// holding whole runs as its rows. A kernel of n iterations in runs of n is one run, whose
/// column is the linear index: a 1-D parameter's update in place, which reads w at the
/// column and stores it at run n + column, the same element, runs a block at a time.
TEST(TierZeroTest, ShortRunsReadAtTheLinearIndexRunAsOneLoop) {
  enum class Read { Linear, Column, OneRun };
  for (const Read read_at : {Read::Linear, Read::Column, Read::OneRun}) {
    kir::Builder k;
    const int w = k.new_buffer(DType::Float32), g = k.new_buffer(DType::Float32);
    const kir::Id n = k.dim(k.new_dim());
    for_runs(k, n, [&](kir::Id, kir::Id j, kir::Id at) {
      const kir::Id read = read_at == Read::Linear ? at : j;
      const kir::Id step = k.op(ir::OpKind::Mul, DType::Float32, {k.load(g, read), k.float_constant(DType::Float32, 0.5)});
      k.store(w, at, k.op(ir::OpKind::Sub, DType::Float32, {k.load(w, read_at == Read::OneRun ? j : at), step}));
    });
    k.kernel().kind = "element";
    k.kernel().count = read_at == Read::OneRun ? n : k.index(1);
    k.kernel().work = k.index(1);
    const runtime::Tier0Kernel kernel(k.take());
    EXPECT_EQ(kernel.shape().flattened, 1);
    EXPECT_EQ(kernel.shape().in_order, 0);
    struct Slice {
      int64_t n, begin, end;
    };
    const std::vector<Slice> slices = read_at == Read::OneRun
        ? std::vector<Slice>{{21, 0, 21}, {21, 2, 20}, {21, 20, 21}, {21, 5, 5}, {1, 0, 1}}
        : std::vector<Slice>{{3, 0, 21}, {3, 2, 20}, {3, 4, 5}, {1, 0, 21}, {3, 7, 7}, {21, 5, 17}};
    for (const Slice& s : slices) {
      std::vector<float> weights(21), grads(21);
      for (size_t i = 0; i < 21; ++i) {
        weights[i] = static_cast<float>(i);
        grads[i] = 0.25f * static_cast<float>(i) + 1.0f;
      }
      void* args[] = {weights.data(), grads.data()};
      ASSERT_EQ(kernel.run(args, &s.n, s.begin, s.end), 0);
      for (int64_t i = 0; i < 21; ++i) {
        const float read = grads[static_cast<size_t>(read_at == Read::Column ? i % s.n : i)];
        const float want = i >= s.begin && i < s.end ? static_cast<float>(i) - read * 0.5f : static_cast<float>(i);
        ASSERT_EQ(weights[static_cast<size_t>(i)], want) << "runs of " << s.n << ", slice " << s.begin << ".." << s.end << ", " << i;
      }
    }
  }
}

/// A loop of rows that accumulates each row into the same elements (a bias's gradient, a
/// sum over the batch: B[j] = B[j] + 2 x[i][j]; and a running maximum) runs a batch of rows
/// at a time, x computed for the batch and combined into B row by row: the same sums, bit
/// for bit, as row after row, for columns that fill a block many times over, once, or not at
/// all (1, 3, 64, 1500) and no rows; columns [a, b) of the rows, as a thread's share.
TEST(TierZeroTest, ALoopOfRowsAccumulatingIntoColumnsRunsInBatchesOfRows) {
  for (const ir::OpKind combine : {ir::OpKind::Add, ir::OpKind::Maximum}) {
    kir::Builder k;
    const int acc = k.new_buffer(DType::Float32), x = k.new_buffer(DType::Float32);
    const kir::Id rows = k.dim(k.new_dim()), width = k.dim(k.new_dim()), a = k.dim(k.new_dim()), b = k.dim(k.new_dim());
    k.loop(k.begin(), k.end(), [&](kir::Id) {
      k.loop(k.index(0), rows, [&](kir::Id i) {
        k.loop(a, b, [&](kir::Id j) {
          const kir::Id twice = k.op(ir::OpKind::Mul, DType::Float32,
                                     {k.load(x, k.add(k.mul(i, width), j)), k.float_constant(DType::Float32, 2.0)});
          k.store(acc, j, k.op(combine, DType::Float32, {k.load(acc, j), twice}));
        });
      });
    });
    const runtime::Tier0Kernel kernel = one_call_kernel(k, "row");
    EXPECT_EQ(kernel.shape().batched, 1);
    EXPECT_EQ(kernel.shape().in_order, 0);
    struct Case {
      int64_t rows, width, a, b;
    };
    for (const Case& c : {Case{300, 64, 0, 64}, Case{300, 64, 5, 40}, Case{7, 3, 0, 3}, Case{2000, 1, 0, 1},
                          Case{5, 1500, 0, 1500}, Case{0, 5, 0, 5}, Case{9, 5, 2, 2}}) {
      std::vector<float> values(static_cast<size_t>(c.rows * c.width));
      for (size_t i = 0; i < values.size(); ++i) values[i] = 0.1f * static_cast<float>((i * 7919) % 1000) - 50.0f;
      std::vector<float> got(static_cast<size_t>(c.width)), want(static_cast<size_t>(c.width));
      for (int64_t j = 0; j < c.width; ++j) got[static_cast<size_t>(j)] = want[static_cast<size_t>(j)] = 0.5f * static_cast<float>(j);
      for (int64_t i = 0; i < c.rows; ++i) {
        for (int64_t j = c.a; j < c.b; ++j) {
          float& w = want[static_cast<size_t>(j)];
          const float v = values[static_cast<size_t>(i * c.width + j)] * 2.0f;
          const float operands[] = {w, v};
          w = ir::semantics::apply_same<float>(combine, operands);
        }
      }
      void* args[] = {got.data(), values.data()};
      const int64_t dims[] = {c.rows, c.width, c.a, c.b};
      ASSERT_EQ(kernel.run(args, dims, 0, 1), 0);
      for (int64_t j = 0; j < c.width; ++j) {
        ASSERT_EQ(got[static_cast<size_t>(j)], want[static_cast<size_t>(j)])
            << ir::op_name(combine) << ", " << c.rows << " rows of " << c.width << ", columns " << c.a << ".." << c.b << ": " << j;
      }
    }
  }
}

/// In a loop of rows (runs of n, as KernelContext::for_runs), what depends on the row alone
/// (a row's scale loaded at the run's index, its square root, a bool flag of the row and a
/// select on it) is computed once per row, and an operation of it with the row's elements
/// takes it as one value per row (Runner::with_row_value): the same values as lane by lane,
/// for rows of 1, 3 and 40 and slices that cut rows at both ends.
TEST(TierZeroTest, ValuesOfTheRowAloneAreComputedOncePerRow) {
  kir::Builder k;
  const int x = k.new_buffer(DType::Float32), scale = k.new_buffer(DType::Float32), flag = k.new_buffer(DType::Bool);
  const int y = k.new_buffer(DType::Float32);
  const kir::Id n = k.dim(k.new_dim());
  for_runs(k, n, [&](kir::Id run, kir::Id, kir::Id at) {
    const kir::Id root = k.op(ir::OpKind::Sqrt, DType::Float32, {k.load(scale, run)});
    const kir::Id shift = k.select(k.load(flag, run), k.float_constant(DType::Float32, 1.0), k.float_constant(DType::Float32, -2.0));
    const kir::Id scaled = k.op(ir::OpKind::Mul, DType::Float32, {k.load(x, at), root});
    k.store(y, at, k.op(ir::OpKind::Add, DType::Float32, {scaled, shift}));
  });
  const runtime::Tier0Kernel kernel = one_call_kernel(k, "element");
  for (const int64_t width : {1, 3, 40}) {
    const int64_t rows = 2000 / width + 1, total = rows * width;
    const std::vector<float> values = ramp(total, 0.25f);
    std::vector<float> scales(static_cast<size_t>(rows));
    for (int64_t r = 0; r < rows; ++r) scales[static_cast<size_t>(r)] = 0.5f * static_cast<float>(r % 7) + 0.25f;
    std::vector<uint8_t> flags(static_cast<size_t>(rows));
    for (int64_t r = 0; r < rows; ++r) flags[static_cast<size_t>(r)] = static_cast<uint8_t>(r % 3 == 1 ? 7 : 0);
    for (const auto& [begin, end] : std::vector<std::pair<int64_t, int64_t>>{{0, total}, {width / 2 + 1, total - 1}}) {
      std::vector<float> got(static_cast<size_t>(total), -9.0f);
      void* args[] = {const_cast<float*>(values.data()), const_cast<float*>(scales.data()), flags.data(), got.data()};
      ASSERT_EQ(kernel.run(args, &width, begin, end), 0);
      for (int64_t i = 0; i < total; ++i) {
        const int64_t r = i / width;
        const float want = i >= begin && i < end ? values[static_cast<size_t>(i)] * std::sqrt(scales[static_cast<size_t>(r)]) +
                                                       (flags[static_cast<size_t>(r)] != 0 ? 1.0f : -2.0f)
                                                 : -9.0f;
        ASSERT_EQ(got[static_cast<size_t>(i)], want) << "rows of " << width << ", slice " << begin << ".." << end << ": " << i;
      }
    }
  }
}

/// A comparison of a value of the row (a one-hot's class, loaded at the row) with the column
/// is computed per row as runs of equal lanes: equal at one lane at most, ordered in two runs.
/// The same values as lane by lane, for classes before, inside and past the row, on either
/// side of the comparison, for rows of 1, 3 and 40 and slices that cut rows at both ends.
TEST(TierZeroTest, AComparisonOfAValueOfTheRowWithTheColumnIsTheComparisonInOrder) {
  const std::vector<ir::OpKind> ops = {ir::OpKind::Eq, ir::OpKind::Ne, ir::OpKind::Lt, ir::OpKind::Ge};
  kir::Builder k;
  const int label = k.new_buffer(DType::Int64);
  std::vector<int> outs;
  for (size_t i = 0; i < 2 * ops.size(); ++i) outs.push_back(k.new_buffer(DType::Bool));
  const kir::Id n = k.dim(k.new_dim());
  for_runs(k, n, [&](kir::Id run, kir::Id j, kir::Id at) {
    const kir::Id cls = k.load(label, run);
    for (size_t i = 0; i < ops.size(); ++i) {
      k.store(outs[2 * i], at, k.op(ops[i], DType::Bool, {cls, j}));
      k.store(outs[2 * i + 1], at, k.op(ops[i], DType::Bool, {k.sub(j, k.index(1)), cls}));
    }
  });
  const runtime::Tier0Kernel kernel = one_call_kernel(k, "element");
  for (const int64_t width : {1, 3, 40}) {
    const int64_t rows = 2000 / width + 1, total = rows * width;
    std::vector<int64_t> labels(static_cast<size_t>(rows));
    for (int64_t r = 0; r < rows; ++r) labels[static_cast<size_t>(r)] = (r * 7) % (width + 3) - 1;
    for (const auto& [begin, end] : std::vector<std::pair<int64_t, int64_t>>{{0, total}, {width / 2 + 1, total - 1}}) {
      std::vector<std::vector<uint8_t>> got(outs.size(), std::vector<uint8_t>(static_cast<size_t>(total), 2));
      std::vector<void*> args = {labels.data()};
      for (auto& g : got) args.push_back(g.data());
      ASSERT_EQ(kernel.run(args.data(), &width, begin, end), 0);
      for (int64_t i = 0; i < total; ++i) {
        const bool ran = i >= begin && i < end;
        const int64_t cls = labels[static_cast<size_t>(i / width)], j = i % width;
        for (size_t o = 0; o < ops.size(); ++o) {
          const uint8_t left = ran ? ir::semantics::apply_compare<int64_t>(ops[o], cls, j) : 2;
          const uint8_t right = ran ? ir::semantics::apply_compare<int64_t>(ops[o], j - 1, cls) : 2;
          ASSERT_EQ(got[2 * o][static_cast<size_t>(i)], left) << "op " << o << ", rows of " << width << ", slice " << begin << ": " << i;
          ASSERT_EQ(got[2 * o + 1][static_cast<size_t>(i)], right) << "op " << o << ", rows of " << width << ": " << i;
        }
      }
    }
  }
}

/// A loop of rows folded into one accumulator (a loss summed over rows and classes, one
/// thread) runs in batches of rows, each row's values folded in one call of the fold, in
/// order: the result of a block per row, bit for bit (float sums fold a call's values in
/// lanes, so the calls must be the rows). Rows of 1, 64, 300 (a batch not a multiple of
/// the block) and 1500 (longer than a block), a column range inside the row, and no rows.
TEST(TierZeroTest, RowsFoldedIntoOneAccumulatorRunInBatchesOfRows) {
  for (const ir::OpKind combine : {ir::OpKind::Add, ir::OpKind::Maximum}) {
    kir::Builder k;
    const int x = k.new_buffer(DType::Float32), out = k.new_buffer(DType::Float32);
    const int acc = k.new_local(DType::Float32);
    const kir::Id rows = k.dim(k.new_dim()), width = k.dim(k.new_dim()), a = k.dim(k.new_dim()), b = k.dim(k.new_dim());
    const float start = combine == ir::OpKind::Add ? 0.0f : -INFINITY;
    k.loop(k.begin(), k.end(), [&](kir::Id v) {
      k.assign(acc, k.float_constant(DType::Float32, start));
      k.loop(k.index(0), rows, [&](kir::Id i) {
        k.loop(a, b, [&](kir::Id j) {
          k.fold(acc, combine, k.op(ir::OpKind::Mul, DType::Float32,
                                    {k.load(x, k.add(k.mul(i, width), j)), k.float_constant(DType::Float32, 2.0)}));
        });
      });
      k.store(out, v, k.local(acc));
    });
    const runtime::Tier0Kernel kernel = one_call_kernel(k, "row");
    EXPECT_EQ(kernel.shape().batched, 1);
    const runtime::tier0::FoldFn fold = runtime::tier0::block_table().fold[static_cast<int>(combine)][static_cast<int>(DType::Float32)];
    struct Case {
      int64_t rows, width, a, b;
    };
    for (const Case& c : {Case{2000, 1, 0, 1}, Case{300, 64, 0, 64}, Case{40, 300, 0, 300}, Case{9, 1500, 0, 1500},
                          Case{300, 64, 5, 40}, Case{0, 5, 0, 5}}) {
      std::vector<float> values(static_cast<size_t>(c.rows * c.width));
      for (size_t i = 0; i < values.size(); ++i) values[i] = 0.1f * static_cast<float>((i * 7919) % 1000) - 50.3f;
      float want = start;
      for (int64_t i = 0; i < c.rows; ++i) {
        std::vector<float> row;
        for (int64_t j = c.a; j < c.b; ++j) row.push_back(values[static_cast<size_t>(i * c.width + j)] * 2.0f);
        for (size_t first = 0; first < row.size(); first += runtime::Tier0Kernel::kBlock) {  // a block's lanes a call
          fold(row.data() + first, std::min<int64_t>(runtime::Tier0Kernel::kBlock, static_cast<int64_t>(row.size() - first)), &want);
        }
      }
      float got = -1;
      void* args[] = {values.data(), &got};
      const int64_t dims[] = {c.rows, c.width, c.a, c.b};
      ASSERT_EQ(kernel.run(args, dims, 0, 1), 0);
      EXPECT_EQ(got, want) << ir::op_name(combine) << ", " << c.rows << " rows of " << c.width << ", columns " << c.a << ".." << c.b;
    }
  }
}

/// A copy loop: an innermost loop of copies under a loop whose offsets are not affine (the
/// heads of attention put back together: out[(r % 3) * 4 * n + (r / 3) * n + j] = in[r * n +
/// j], a run of n per row r). Tier 0 runs each run as one copy, for any slice of the rows.
TEST(TierZeroTest, AnInnermostLoopOfCopiesRunsAsCopies) {
  kir::Builder k;
  const int in = k.new_buffer(DType::Float32), out = k.new_buffer(DType::Float32), fill = k.new_buffer(DType::Float32);
  const kir::Id n = k.dim(k.new_dim());
  k.loop(k.begin(), k.end(), [&](kir::Id r) {
    const kir::Id to_row = k.add(k.mul(k.mul(k.rem(r, k.index(3)), k.index(4)), n), k.mul(k.div(r, k.index(3)), n));
    k.loop(k.index(0), n, [&](kir::Id j) {
      k.store(out, k.add(to_row, j), k.load(in, k.add(k.mul(r, n), j)));
      k.store(fill, k.add(k.mul(r, n), j), k.float_constant(DType::Float32, 2.5));
    });
  });
  k.kernel().kind = "row";
  k.kernel().count = k.index(12);
  k.kernel().work = n;
  const runtime::Tier0Kernel kernel(k.take());
  EXPECT_EQ(kernel.shape().copies, 2);
  for (const int64_t width : {int64_t{5}, int64_t{1}, int64_t{0}}) {
    for (const auto& [begin, end] : std::vector<std::pair<int64_t, int64_t>>{{0, 12}, {4, 9}, {7, 7}}) {
      std::vector<float> x(static_cast<size_t>(12 * width)), y(x.size(), -1.0f), filled(x.size(), -1.0f);
      for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i);
      void* args[] = {x.data(), y.data(), filled.data()};
      ASSERT_EQ(kernel.run(args, &width, begin, end), 0);
      for (int64_t r = 0; r < 12; ++r) {
        for (int64_t j = 0; j < width; ++j) {
          const bool ran = r >= begin && r < end;
          const size_t to = static_cast<size_t>((r % 3) * 4 * width + (r / 3) * width + j), at = static_cast<size_t>(r * width + j);
          EXPECT_EQ(y[to], ran ? x[at] : -1.0f) << width << " " << begin << ".." << end << ": row " << r << " " << j;
          EXPECT_EQ(filled[at], ran ? 2.5f : -1.0f);
        }
      }
    }
  }
}

/// Every ISA's row copy (a copy nest's contiguous rows of 16 to 512 bytes, in the ISA's
/// widest moves, the last overlapping the one before) copies exactly each row's bytes, rows
/// of any length in that range (a multiple of the move or not) at any pitch, and nothing
/// between them.
TEST(TierZeroTest, EveryIsasRowCopyCopiesExactlyTheRows) {
  using runtime::tier0::kCopyRowsBytes;
  for (int isa = 0; isa < 3; ++isa) {
    const runtime::tier0::BlockTable* table = runtime::tier0::block_table_for(isa);
    if (table == nullptr) continue;  // the CPU lacks it
    for (const int64_t bytes : {int64_t{16}, int64_t{24}, int64_t{32}, int64_t{40}, int64_t{64}, int64_t{100},
                                int64_t{128}, int64_t{200}, kCopyRowsBytes}) {
      for (const int64_t pad : {int64_t{0}, int64_t{3}, int64_t{64}}) {
        constexpr int64_t kRows = 5;
        const int64_t in_row = bytes + pad, out_row = bytes + 2 * pad + 1;
        std::vector<std::byte> in(static_cast<size_t>(kRows * in_row)), out(static_cast<size_t>(kRows * out_row + 7));
        for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<std::byte>(i * 7 + 1);
        std::fill(out.begin(), out.end(), std::byte{0xEE});
        table->copy_rows(out.data() + 7, out_row, in.data(), in_row, kRows, bytes);
        for (int64_t i = 0; i < static_cast<int64_t>(out.size()); ++i) {
          const int64_t at = i - 7, row = at / out_row, col = at % out_row;
          const bool copied = at >= 0 && row < kRows && col < bytes;
          EXPECT_EQ(out[static_cast<size_t>(i)], copied ? in[static_cast<size_t>(row * in_row + col)] : std::byte{0xEE})
              << table->isa << ": rows of " << bytes << " bytes, pad " << pad << ", byte " << i;
        }
      }
    }
  }
}

/// A short nest that reads what it stores where it stores it (an optimiser's update in a
/// matmul's epilogue: w[i] = w[i] - g[i]) is flattened: one block of its rows, run as a
/// block where the rows do not overlap (pitch 8, 9) and one lane at a time where they do
/// (pitch 3, 0: an element updated again reads its new value, as in order).
TEST(TierZeroTest, AShortNestThatReadsWhereItStoresRunsFlattenedWhereItsRowsDoNotOverlap) {
  kir::Builder k;
  const int w = k.new_buffer(DType::Float32), g = k.new_buffer(DType::Float32);
  const kir::Id width = k.dim(k.new_dim()), pitch = k.dim(k.new_dim());
  k.loop(k.begin(), k.end(), [&](kir::Id) {
    k.loop(k.index(0), k.index(6), [&](kir::Id r) {
      k.loop(k.index(0), k.min(k.index(8), width), [&](kir::Id j) {
        const kir::Id at = k.add(k.mul(r, pitch), j);
        k.store(w, at, k.op(ir::OpKind::Sub, DType::Float32, {k.load(w, at), k.load(g, at)}));
      });
    });
  });
  k.kernel().kind = "tile";
  k.kernel().count = k.index(1);
  k.kernel().work = k.index(48);
  const runtime::Tier0Kernel kernel(k.take());
  EXPECT_EQ(kernel.shape().flattened, 1);
  for (const int64_t pitch_value : {8, 9, 3, 0}) {
    std::vector<float> weights(64, 1.0f), grads(64), expected(64, 1.0f);
    for (size_t i = 0; i < grads.size(); ++i) grads[i] = 0.25f * static_cast<float>(i);
    for (int64_t r = 0; r < 6; ++r) {
      for (int64_t j = 0; j < 8; ++j) expected[r * pitch_value + j] -= grads[r * pitch_value + j];
    }
    void* args[] = {weights.data(), grads.data()};
    const int64_t dims[] = {8, pitch_value};
    ASSERT_EQ(kernel.run(args, dims, 0, 1), 0);
    for (size_t i = 0; i < weights.size(); ++i) EXPECT_EQ(weights[i], expected[i]) << "pitch " << pitch_value << " at " << i;
  }
}

/// A flattened nest's rows stay rows: index values of its two variables are affine in each
/// (a stride per lane and one per row), so its loads and stores run a row at a time, where
/// they are not affine across the whole block. Each pattern against the nest run in order:
/// a tile stored into a wider matrix, a transposed read and a transposed store, a value per
/// row and one per column, a clamp that binds in some columns, and quotients and remainders
/// that are affine by rows (/ 32, % 32) or not at all (/ 4, % 4).
TEST(TierZeroTest, AFlattenedNestReadsAndStoresItsRowsAsRows) {
  kir::Builder k;
  const int x = k.new_buffer(DType::Float32), per_row = k.new_buffer(DType::Float32), per_col = k.new_buffer(DType::Float32);
  const int out = k.new_buffer(DType::Float32), out_t = k.new_buffer(DType::Float32);
  const kir::Id pitch = k.dim(k.new_dim()), r0 = k.dim(k.new_dim()), c0 = k.dim(k.new_dim()), lim = k.dim(k.new_dim());
  const kir::Id rows = k.min(k.index(6), k.dim(k.new_dim())), cols = k.min(k.index(32), k.dim(k.new_dim()));
  auto f32 = [&](kir::Id i) { return k.convert(i, DType::Float32); };
  auto add = [&](kir::Id a, kir::Id b) { return k.op(ir::OpKind::Add, DType::Float32, {a, b}); };
  k.loop(k.begin(), k.end(), [&](kir::Id) {
    k.loop(k.index(0), rows, [&](kir::Id r) {
      k.loop(k.index(0), cols, [&](kir::Id j) {
        const kir::Id row = k.add(r0, r), col = k.add(c0, j);
        const kir::Id wide = k.add(k.mul(r, k.index(32)), j), narrow = k.add(k.mul(r, k.index(8)), j);
        kir::Id v = k.op(ir::OpKind::Mul, DType::Float32, {k.load(per_row, row), k.load(per_col, col)});
        v = add(v, k.load(x, k.add(k.mul(col, pitch), row)));
        v = add(v, f32(k.min(col, lim)));
        v = add(v, f32(k.add(k.mul(k.div(wide, k.index(32)), k.index(1000)), k.rem(wide, k.index(32)))));
        v = add(v, f32(k.add(k.mul(k.div(narrow, k.index(4)), k.index(100000)), k.rem(narrow, k.index(4)))));
        k.store(out, k.add(k.mul(row, pitch), col), v);
        k.store(out_t, k.add(k.mul(col, pitch), row), f32(k.add(k.mul(r, k.index(100)), j)));
      });
    });
  });
  k.kernel().kind = "tile";
  k.kernel().count = k.index(1);
  k.kernel().work = k.index(192);
  const runtime::Tier0Kernel kernel(k.take());
  EXPECT_EQ(kernel.shape().flattened, 1);
  const int64_t w = 40, r0_value = 3, c0_value = 5;
  for (const auto& [row_count, col_count] :
       std::vector<std::pair<int64_t, int64_t>>{{6, 32}, {6, 8}, {1, 32}, {4, 3}, {5, 1}, {2, 31}, {0, 4}, {3, 0}}) {
    for (const int64_t lim_value : {c0_value + 32, c0_value + 2}) {
      std::vector<float> xs(static_cast<size_t>(w * w)), rs(static_cast<size_t>(w)), cs(static_cast<size_t>(w));
      for (size_t i = 0; i < xs.size(); ++i) xs[i] = 0.5f * static_cast<float>(i % 61);
      for (size_t i = 0; i < rs.size(); ++i) {
        rs[i] = static_cast<float>(i) + 1.0f;
        cs[i] = 0.25f * static_cast<float>(i);
      }
      std::vector<float> y(static_cast<size_t>(w * w), -1.0f), y_t(y.size(), -1.0f), want(y), want_t(y);
      for (int64_t r = 0; r < row_count; ++r) {
        for (int64_t j = 0; j < col_count; ++j) {
          const int64_t row = r0_value + r, col = c0_value + j, wide = 32 * r + j, narrow = 8 * r + j;
          float v = rs[static_cast<size_t>(row)] * cs[static_cast<size_t>(col)];
          v += xs[static_cast<size_t>(col * w + row)];
          v += static_cast<float>(std::min(col, lim_value));
          v += static_cast<float>(wide / 32 * 1000 + wide % 32);
          v += static_cast<float>(narrow / 4 * 100000 + narrow % 4);
          want[static_cast<size_t>(row * w + col)] = v;
          want_t[static_cast<size_t>(col * w + row)] = static_cast<float>(100 * r + j);
        }
      }
      void* args[] = {xs.data(), rs.data(), cs.data(), y.data(), y_t.data()};
      const int64_t dims[] = {w, r0_value, c0_value, lim_value, row_count, col_count};
      ASSERT_EQ(kernel.run(args, dims, 0, 1), 0);
      for (size_t i = 0; i < y.size(); ++i) {
        ASSERT_EQ(y[i], want[i]) << row_count << "x" << col_count << " clamped at " << lim_value << ": " << i / w << " " << i % w;
        ASSERT_EQ(y_t[i], want_t[i]) << row_count << "x" << col_count << " transposed: " << i / w << " " << i % w;
      }
    }
  }
}

/// A loop of rows (a rows kernel: per row, a maximum folded, then a sum that reads it, both
/// stored, and a row stored from both) runs a batch of rows at a time, each statement for
/// every row of the batch: the same values for rows of any length (none, 1, 7, 64, 600
/// rows of which fill a block one at a time, 1500 longer than a block) and any slice of the
/// rows. The values are multiples of 0.5 whose sums are exact, so any order of folding is
/// the in-order result. A sum that reads the row's elements of the output before the row
/// stores them (what a softmax's scaling reads back, at the one offset the nest stores at)
/// is batched too, and reads what was there; a scan (a fold read back in its own loop) and a
/// sum that reads the next row's elements of the output (which that row stores) are not.
TEST(TierZeroTest, ALoopOfRowsRunsInBatchesOfRows) {
  enum class Sum { OfX, Scan, OfOutput, OfNextRowsOutput };
  auto rows_kernel = [](Sum what) {
    kir::Builder k;
    const int x = k.new_buffer(DType::Float32), max_out = k.new_buffer(DType::Float32);
    const int sum_out = k.new_buffer(DType::Float32), row_out = k.new_buffer(DType::Float32);
    const int max = k.new_local(DType::Float32), sum = k.new_local(DType::Float32);
    const kir::Id n = k.dim(k.new_dim());
    auto f32 = [&](ir::OpKind op, kir::Id a, kir::Id b) { return k.op(op, DType::Float32, {a, b}); };
    k.loop(k.begin(), k.end(), [&](kir::Id row) {
      auto at = [&](kir::Id j) { return k.add(k.mul(row, n), j); };
      k.assign(max, k.float_constant(DType::Float32, -INFINITY));
      k.loop(k.index(0), n, [&](kir::Id j) { k.fold(max, ir::OpKind::Maximum, k.load(x, at(j))); });
      k.assign(sum, k.float_constant(DType::Float32, 0));
      k.loop(k.index(0), n, [&](kir::Id j) {
        const kir::Id summed = what == Sum::OfOutput           ? k.load(row_out, at(j))
                               : what == Sum::OfNextRowsOutput ? k.load(row_out, k.add(at(j), n))
                                                               : k.load(x, at(j));
        k.fold(sum, ir::OpKind::Add, f32(ir::OpKind::Sub, summed, k.local(max)));
        if (what == Sum::Scan) k.store(row_out, at(j), k.local(sum));
      });
      k.store(max_out, row, k.local(max));
      k.loop(k.index(0), n, [&](kir::Id j) {
        k.store(row_out, at(j), f32(ir::OpKind::Add, f32(ir::OpKind::Sub, k.load(x, at(j)), k.local(max)), k.local(sum)));
      });
      k.store(sum_out, row, k.local(sum));
    });
    k.kernel().kind = "row";
    k.kernel().count = k.index(37);
    k.kernel().work = n;
    return k.take();
  };
  EXPECT_EQ(runtime::Tier0Kernel(rows_kernel(Sum::Scan)).shape().batched, 0);
  EXPECT_EQ(runtime::Tier0Kernel(rows_kernel(Sum::OfNextRowsOutput)).shape().batched, 0);
  for (const Sum what : {Sum::OfX, Sum::OfOutput}) {
    const runtime::Tier0Kernel kernel(rows_kernel(what));
    EXPECT_EQ(kernel.shape().batched, 1);
    const int64_t rows = 37;
    for (const int64_t n : {0, 1, 7, 64, 600, 1500}) {
      for (const auto& [begin, end] : std::vector<std::pair<int64_t, int64_t>>{{0, 37}, {5, 30}, {36, 37}, {4, 4}}) {
        std::vector<float> xs(static_cast<size_t>(rows * n));
        for (size_t i = 0; i < xs.size(); ++i) xs[i] = 0.5f * static_cast<float>((i * 7) % 11);
        std::vector<float> maxima(rows, -1), sums(rows, -1), out(xs.size());
        for (size_t i = 0; i < out.size(); ++i) out[i] = -0.5f * static_cast<float>(i % 5);
        std::vector<float> want_maxima = maxima, want_sums = sums, want_out = out;
        for (int64_t r = begin; r < end; ++r) {
          float m = -INFINITY, t = 0;
          for (int64_t j = 0; j < n; ++j) m = std::max(m, xs[static_cast<size_t>(r * n + j)]);
          for (int64_t j = 0; j < n; ++j) t += (what == Sum::OfOutput ? out : xs)[static_cast<size_t>(r * n + j)] - m;
          want_maxima[static_cast<size_t>(r)] = m;
          want_sums[static_cast<size_t>(r)] = t;
          for (int64_t j = 0; j < n; ++j) want_out[static_cast<size_t>(r * n + j)] = xs[static_cast<size_t>(r * n + j)] - m + t;
        }
        void* args[] = {xs.data(), maxima.data(), sums.data(), out.data()};
        ASSERT_EQ(kernel.run(args, &n, begin, end), 0);
        const std::string where = std::string(what == Sum::OfOutput ? "reading back, " : "") + "rows of " +
                                  std::to_string(n) + ", slice " + std::to_string(begin) + ".." + std::to_string(end);
        EXPECT_EQ(maxima, want_maxima) << where;
        EXPECT_EQ(sums, want_sums) << where;
        EXPECT_EQ(out, want_out) << where;
      }
    }
  }
}

/// A comparison of two index values affine over a block (a causal mask) is computed from
/// their bases and strides, as runs of equal lanes: each of the six, with values that cross
/// zero and a constant side, against the comparison in order; an equality that no lane
/// meets; one of values that wrap around (v 2^62), which has no runs to find; and one of an
/// index value against data (a load), which is not affine, the same way.
TEST(TierZeroTest, ComparisonsOfIndexValuesAreTheComparisonsInOrder) {
  const std::vector<ir::OpKind> ops = {ir::OpKind::Eq, ir::OpKind::Ne, ir::OpKind::Lt,
                                       ir::OpKind::Le, ir::OpKind::Gt, ir::OpKind::Ge};
  kir::Builder k;
  const int data = k.new_buffer(DType::Int64);
  std::vector<int> outs;
  for (size_t i = 0; i <= ops.size() + 2; ++i) outs.push_back(k.new_buffer(DType::Bool));
  constexpr int64_t kWrapping = int64_t{1} << 62;
  k.loop(k.begin(), k.end(), [&](kir::Id v) {
    const kir::Id rising = k.sub(k.mul(v, k.index(2)), k.index(9)), falling = k.sub(k.index(30), v);
    for (size_t i = 0; i < ops.size(); ++i) {
      k.store(outs[i], v, k.op(ops[i], DType::Bool, {rising, i % 2 == 0 ? falling : k.index(7)}));
    }
    k.store(outs[ops.size()], v, k.op(ir::OpKind::Eq, DType::Bool, {rising, k.index(8)}));
    k.store(outs[ops.size() + 1], v, k.op(ir::OpKind::Lt, DType::Bool, {k.mul(v, k.index(kWrapping)), falling}));
    k.store(outs.back(), v, k.op(ir::OpKind::Lt, DType::Bool, {k.load(data, v), rising}));
  });
  k.kernel().kind = "element";
  k.kernel().count = k.index(40);
  k.kernel().work = k.index(1);
  const runtime::Tier0Kernel kernel(k.take());
  for (const auto& [begin, end] : std::vector<std::pair<int64_t, int64_t>>{{0, 40}, {3, 29}, {39, 40}}) {
    std::vector<int64_t> values(40);
    for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<int64_t>((i * 5) % 17) - 4;
    std::vector<std::vector<uint8_t>> got(outs.size(), std::vector<uint8_t>(40, 2));
    std::vector<void*> args = {values.data()};
    for (auto& g : got) args.push_back(g.data());
    ASSERT_EQ(kernel.run(args.data(), nullptr, begin, end), 0);
    for (int64_t v = 0; v < 40; ++v) {
      const bool ran = v >= begin && v < end;
      const int64_t rising = 2 * v - 9;
      for (size_t i = 0; i < ops.size(); ++i) {
        const int64_t other = i % 2 == 0 ? 30 - v : 7;
        const uint8_t want = ran ? ir::semantics::apply_compare<int64_t>(ops[i], rising, other) : 2;
        ASSERT_EQ(got[i][static_cast<size_t>(v)], want) << "op " << i << " at " << v;
      }
      ASSERT_EQ(got[ops.size()][static_cast<size_t>(v)], ran ? uint8_t{0} : 2) << "no lane equal, at " << v;
      const auto wrapped = static_cast<int64_t>(static_cast<uint64_t>(v) * static_cast<uint64_t>(kWrapping));
      ASSERT_EQ(got[ops.size() + 1][static_cast<size_t>(v)], ran ? uint8_t{wrapped < 30 - v} : 2) << "wrapping, at " << v;
      ASSERT_EQ(got.back()[static_cast<size_t>(v)], ran ? uint8_t{values[static_cast<size_t>(v)] < rising} : 2) << v;
    }
  }
}

/// A loop whose variable is divided by an invariant (a pack of A's rows through the heads'
/// view: v / 32 and v % 32) runs its blocks as rows of the divisor, from multiples of it,
/// where the quotient and remainder are affine: the same stores as in order, for divisors
/// long enough to be rows (32, 40) and too short (4, 9), over slices that start and end
/// inside a row.
TEST(TierZeroTest, ALoopDividedByAnInvariantRunsInRowsOfIt) {
  kir::Builder k;
  const int x = k.new_buffer(DType::Float32), out = k.new_buffer(DType::Float32);
  const kir::Id d = k.dim(k.new_dim());
  k.loop(k.begin(), k.end(), [&](kir::Id v) {
    const kir::Id from = k.add(k.mul(k.div(v, d), k.index(50)), k.rem(v, d));
    k.store(out, k.add(k.mul(v, k.index(3)), k.index(1)), k.op(ir::OpKind::Mul, DType::Float32, {k.load(x, from), k.float_constant(DType::Float32, 2)}));
  });
  k.kernel().kind = "element";
  k.kernel().count = k.index(3000);
  k.kernel().work = k.index(1);
  const runtime::Tier0Kernel kernel(k.take());
  for (const int64_t divisor : {32, 40, 4, 9}) {
    for (const auto& [begin, end] : std::vector<std::pair<int64_t, int64_t>>{{0, 3000}, {45, 2021}, {1030, 1031}}) {
      std::vector<float> xs(static_cast<size_t>(3000 / divisor + 1) * 50);
      for (size_t i = 0; i < xs.size(); ++i) xs[i] = static_cast<float>(i % 997);
      std::vector<float> got(3 * 3000 + 1, -1.0f), want = got;
      for (int64_t v = begin; v < end; ++v) {
        want[static_cast<size_t>(3 * v + 1)] = 2.0f * xs[static_cast<size_t>(v / divisor * 50 + v % divisor)];
      }
      void* args[] = {xs.data(), got.data()};
      ASSERT_EQ(kernel.run(args, &divisor, begin, end), 0);
      ASSERT_EQ(got, want) << "divisor " << divisor << ", slice " << begin << ".." << end;
    }
  }
}

/// A slice of a row in runs (the heads' cat: a part of each output row, in runs of a head's
/// columns, each read through its head's index) runs as one loop over the slice, its runs
/// as rows: the same stores as in order, for runs of 32, of 3 and of none (n = max(0, 1):
/// nothing stored, though the slice has elements).
TEST(TierZeroTest, ASliceOfARowInRunsRunsAsOneLoop) {
  kir::Builder k;
  const int x = k.new_buffer(DType::Float32), out = k.new_buffer(DType::Float32);
  const kir::Id m = k.dim(k.new_dim()), len = k.dim(k.new_dim());
  k.loop(k.begin(), k.end(), [&](kir::Id row) {
    const kir::Id lo = k.add(k.mul(row, k.index(200)), k.index(5)), hi = k.add(lo, len);
    const kir::Id n = k.max(m, k.index(1));
    k.loop(k.div(lo, n), k.ceil_div(hi, n), [&](kir::Id run) {
      const kir::Id base = k.mul(run, n);
      k.loop(k.max(k.sub(lo, base), k.index(0)), k.min(k.sub(hi, base), m), [&](kir::Id j) {
        const kir::Id from = k.add(k.mul(k.rem(run, k.index(3)), k.index(40)), j);
        k.store(out, k.add(base, j), k.load(x, from));
      });
    });
  });
  k.kernel().kind = "row";
  k.kernel().count = k.index(6);
  k.kernel().work = len;
  const runtime::Tier0Kernel kernel(k.take());
  EXPECT_EQ(kernel.shape().flattened, 1);
  std::vector<float> xs(200);
  for (size_t i = 0; i < xs.size(); ++i) xs[i] = static_cast<float>(i) + 0.5f;
  for (const int64_t run_length : {32, 3, 0}) {
    for (const auto& [begin, end] : std::vector<std::pair<int64_t, int64_t>>{{0, 6}, {2, 5}}) {
      const int64_t dims[] = {run_length, 150};
      std::vector<float> got(1200, -1.0f), want = got;
      for (int64_t r = begin; r < end; ++r) {
        const int64_t n = std::max<int64_t>(run_length, 1);
        for (int64_t e = r * 200 + 5; e < r * 200 + 155 && run_length > 0; ++e) {
          want[static_cast<size_t>(e)] = xs[static_cast<size_t>((e / n) % 3 * 40 + e % n)];
        }
      }
      void* args[] = {xs.data(), got.data()};
      ASSERT_EQ(kernel.run(args, dims, begin, end), 0);
      ASSERT_EQ(got, want) << "runs of " << run_length << ", rows " << begin << ".." << end;
    }
  }
}

/// A check of each row's index (an embedding's), before the row's stores: tier 0 runs the
/// checks ahead of the nest, a block of rows at a time, and then the nest as one loop over the
/// slice (elementwise, in runs) or in batches of rows (a row's sum), reading the table's row
/// that each index picks as one run per row. Where every index is in range, the stores in
/// order (each element, and its offset in the table as a value, which puts that offset's
/// lanes in its block); where one is not, the first row that fails is the one reported, and
/// neither it nor any row after it has stored.
TEST(TierZeroTest, TheChecksOfALoopsRowsRunAheadOfItsNest) {
  auto kernel = [](bool sums) {
    kir::Builder k;
    const int ids = k.new_buffer(DType::Int64), status = k.new_buffer(DType::Int64);
    const int table = k.new_buffer(DType::Float32), out = k.new_buffer(DType::Float32);
    const int where = k.new_buffer(DType::Float32);
    const kir::Id n = k.dim(k.new_dim()), entries = k.dim(k.new_dim());
    auto checked = [&](kir::Id row) {
      const kir::Id id = k.load(ids, row);
      const kir::Id ok = k.op(ir::OpKind::LogicalAnd, DType::Bool,
                              {k.op(ir::OpKind::Ge, DType::Bool, {id, k.index(0)}), k.op(ir::OpKind::Lt, DType::Bool, {id, entries})});
      k.check(ok, id, status);
      return id;
    };
    if (sums) {  // a rows kernel: out[row] = the sum of the picked row
      const int sum = k.new_local(DType::Float32);
      k.loop(k.begin(), k.end(), [&](kir::Id row) {
        k.assign(sum, k.float_constant(DType::Float32, 0));
        const kir::Id id = checked(row);
        k.loop(k.index(0), n, [&](kir::Id j) { k.fold(sum, ir::OpKind::Add, k.load(table, k.add(k.mul(id, n), j))); });
        k.store(out, row, k.local(sum));
      });
      k.kernel().kind = "row";
      k.kernel().work = n;
    } else {  // the slice [Begin, End) of the elements, in runs of n (KernelContext::for_runs)
      k.loop(k.div(k.begin(), n), k.ceil_div(k.end(), n), [&](kir::Id run) {
        const kir::Id id = checked(run);
        const kir::Id base = k.mul(run, n);
        k.loop(k.max(k.sub(k.begin(), base), k.index(0)), k.min(k.sub(k.end(), base), n), [&](kir::Id j) {
          const kir::Id at = k.add(k.mul(id, n), j);
          k.store(std::vector<int>{out, where}, {k.add(base, j), k.add(base, j)},
                  {k.load(table, at), k.convert(at, DType::Float32)});
        });
      });
      k.kernel().kind = "elementwise";
      k.kernel().work = k.index(1);
    }
    k.kernel().count = k.index(0);
    return k.take();
  };
  const runtime::Tier0Kernel runs(kernel(false)), rows(kernel(true));
  EXPECT_EQ(runs.shape().checked_ahead, 1);
  EXPECT_EQ(runs.shape().flattened, 1);
  EXPECT_EQ(rows.shape().checked_ahead, 1);
  EXPECT_EQ(rows.shape().batched, 1);
  const int64_t entries = 5, count = 40;
  for (const int64_t n : {1, 7, 128, 1500}) {
    std::vector<float> table(static_cast<size_t>(entries * n));
    for (size_t i = 0; i < table.size(); ++i) table[i] = 0.25f * static_cast<float>((i * 13) % 17);
    for (const int64_t bad : {int64_t{-1}, int64_t{9}, int64_t{31}}) {  // the row with an index out of range, or none
      std::vector<int64_t> ids(count);
      for (int64_t r = 0; r < count; ++r) ids[static_cast<size_t>(r)] = (r * 3) % entries;
      if (bad >= 0) ids[static_cast<size_t>(bad)] = bad % 2 == 0 ? -2 : entries + 4;
      if (bad == 31) ids[35] = -7;  // a later row fails too: the first is reported
      const int64_t dims[] = {n, entries};
      // The elementwise kernel over elements [begin, end) of the count rows of n; the rows
      // kernel over rows [begin / n, end / n).
      for (const auto& [begin, end] : std::vector<std::pair<int64_t, int64_t>>{{0, count * n}, {n / 2 + 3, count * n - 1}}) {
        std::vector<float> got(static_cast<size_t>(count * n), -1.0f), got_where = got, got_sums(count, -1.0f);
        std::vector<float> want = got, want_where = got, want_sums = got_sums;
        const int64_t first_row = begin / n, last_row = (end + n - 1) / n;
        int64_t failed_row = -1;
        for (int64_t r = first_row; r < last_row && failed_row < 0; ++r) {
          const int64_t id = ids[static_cast<size_t>(r)];
          if (id < 0 || id >= entries) failed_row = r;
        }
        for (int64_t e = begin; e < end && failed_row < 0; ++e) {
          const int64_t at = ids[static_cast<size_t>(e / n)] * n + e % n;
          want[static_cast<size_t>(e)] = table[static_cast<size_t>(at)];
          want_where[static_cast<size_t>(e)] = static_cast<float>(at);
        }
        int64_t code = 0;
        void* args[] = {ids.data(), &code, table.data(), got.data(), got_where.data()};
        const int32_t status = runs.run(args, dims, begin, end);
        const std::string what = "rows of " + std::to_string(n) + ", bad row " + std::to_string(bad) + ", slice " +
                                 std::to_string(begin) + ".." + std::to_string(end);
        if (failed_row < 0) {
          ASSERT_EQ(status, 0) << what;
          EXPECT_EQ(got, want) << what;
          EXPECT_EQ(got_where, want_where) << what;
        } else {
          ASSERT_EQ(status, 1) << what;
          EXPECT_EQ(code, ids[static_cast<size_t>(failed_row)]) << what;
          for (int64_t e = failed_row * n; e < count * n; ++e) ASSERT_EQ(got[static_cast<size_t>(e)], -1.0f) << what;
        }
        // The rows kernel over whole rows.
        const int64_t row_begin = begin / n, row_end = end / n;
        int64_t failed = -1;
        for (int64_t r = row_begin; r < row_end && failed < 0; ++r) {
          const int64_t id = ids[static_cast<size_t>(r)];
          if (id < 0 || id >= entries) failed = r;
          float sum = 0;
          for (int64_t j = 0; j < n && failed < 0; ++j) sum += table[static_cast<size_t>(id * n + j)];
          if (failed < 0) want_sums[static_cast<size_t>(r)] = sum;
        }
        code = 0;
        void* row_args[] = {ids.data(), &code, table.data(), got_sums.data(), nullptr};
        const int32_t row_status = rows.run(row_args, dims, row_begin, row_end);
        if (failed < 0) {
          ASSERT_EQ(row_status, 0) << what;
          EXPECT_EQ(got_sums, want_sums) << what;
        } else {
          ASSERT_EQ(row_status, 1) << what;
          EXPECT_EQ(code, ids[static_cast<size_t>(failed)]) << what;
          for (int64_t r = failed; r < count; ++r) ASSERT_EQ(got_sums[static_cast<size_t>(r)], -1.0f) << what;
        }
      }
    }
  }
}

/// A scatter-add (an embedding's gradient: each row of x added into the row of B its index
/// picks, B[idx[i] n + j] += x[i n + j]) runs in batches of rows like an accumulation into
/// columns: x for the batch, then each row added into B in the rows' order, so rows that pick
/// one row of B add into it in turn: the sums in order, bit for bit.
TEST(TierZeroTest, RowsAddedIntoTheRowsTheirIndicesPickRunInBatchesInOrder) {
  kir::Builder k;
  const int ids = k.new_buffer(DType::Int64), x = k.new_buffer(DType::Float32), b = k.new_buffer(DType::Float32);
  const kir::Id n = k.dim(k.new_dim());
  k.loop(k.begin(), k.end(), [&](kir::Id row) {
    const kir::Id picked = k.mul(k.load(ids, row), n);
    k.loop(k.index(0), n, [&](kir::Id j) {
      const kir::Id at = k.add(picked, j);
      k.store(b, at, k.op(ir::OpKind::Add, DType::Float32, {k.load(b, at), k.load(x, k.add(k.mul(row, n), j))}));
    });
  });
  k.kernel().kind = "row";
  k.kernel().count = k.index(0);
  k.kernel().work = n;
  const runtime::Tier0Kernel kernel(k.take());
  EXPECT_EQ(kernel.shape().batched, 1);
  {  // An index read from B itself may change as the rows add into B: that nest keeps its order.
    kir::Builder self;
    const int into = self.new_buffer(DType::Float32), from = self.new_buffer(DType::Float32);
    const kir::Id m = self.dim(self.new_dim());
    self.loop(self.begin(), self.end(), [&](kir::Id row) {
      const kir::Id picked = self.mul(self.convert(self.load(into, row), DType::Int64), m);
      self.loop(self.index(0), m, [&](kir::Id j) {
        const kir::Id at = self.add(picked, j);
        self.store(into, at, self.op(ir::OpKind::Add, DType::Float32, {self.load(into, at), self.load(from, j)}));
      });
    });
    self.kernel().kind = "row";
    self.kernel().count = self.index(0);
    self.kernel().work = m;
    EXPECT_EQ(runtime::Tier0Kernel(self.take()).shape().batched, 0);
  }
  const int64_t rows = 300, entries = 7;
  std::vector<int64_t> idx(rows);
  for (int64_t r = 0; r < rows; ++r) idx[static_cast<size_t>(r)] = (r * r + 3 * r) % entries;
  for (const int64_t n : {1, 5, 64, 1100}) {
    std::vector<float> xs(static_cast<size_t>(rows * n));
    for (size_t i = 0; i < xs.size(); ++i) xs[i] = 1.0f / static_cast<float>(1 + (i * 7) % 13) + 1e4f * static_cast<float>(i % 3);
    for (const auto& [begin, end] : std::vector<std::pair<int64_t, int64_t>>{{0, rows}, {17, 250}}) {
      std::vector<float> got(static_cast<size_t>(entries * n), 0.5f), want = got;
      for (int64_t r = begin; r < end; ++r) {
        for (int64_t j = 0; j < n; ++j) {
          want[static_cast<size_t>(idx[static_cast<size_t>(r)] * n + j)] += xs[static_cast<size_t>(r * n + j)];
        }
      }
      void* args[] = {idx.data(), xs.data(), got.data()};
      ASSERT_EQ(kernel.run(args, &n, begin, end), 0);
      EXPECT_EQ(got, want) << "rows of " << n << ", rows " << begin << ".." << end;
    }
  }
}

/// Stores at offsets read from data may write one element twice: such a nest runs in its
/// order (the element written by iterations (7, 0) and, before it, (0, 1) ends with the
/// former's value; inverted it would end with the latter's).
TEST(TierZeroTest, StoresAtOffsetsReadFromDataKeepTheirOrder) {
  kir::Builder k;
  const int index = k.new_buffer(DType::Int64), out = k.new_buffer(DType::Int64);
  k.loop(k.begin(), k.end(), [&](kir::Id) {
    k.loop(k.index(0), k.dim(k.new_dim()), [&](kir::Id i) {
      k.loop(k.index(0), k.index(2), [&](kir::Id j) {
        const kir::Id position = k.add(k.mul(i, k.index(2)), j);
        k.store(out, k.load(index, position), position);
      });
    });
  });
  k.kernel().kind = "element";
  k.kernel().count = k.index(1);
  k.kernel().work = k.index(16);
  const runtime::Tier0Kernel kernel(k.take());
  std::vector<int64_t> where(16), written(16, -1);
  for (int64_t p = 0; p < 16; ++p) where[static_cast<size_t>(p)] = p;
  where[1] = 0;   // iteration (0, 1)
  where[14] = 0;  // iteration (7, 0), after it
  void* args[] = {where.data(), written.data()};
  const int64_t dims[] = {8};
  ASSERT_EQ(kernel.run(args, dims, 0, 1), 0);
  EXPECT_EQ(written[0], 14);
  EXPECT_EQ(written[15], 15);
}

/// A graph runs on tier 0 at once; its second run queues its compile (a graph that runs once,
/// as a model's initialisation, never competes with the steps for the cores), and the run
/// after the switch is compiled code's.
TEST(TierTest, AutoRunsANewGraphAtOnceAndCompiledCodeAfterItsBackgroundCompile) {
  tests::ScopedTier tier(Tier::Auto);
  tests::ScopedCompileCost at_once(0);
  reset_metrics();
  const std::vector<float> first = program(ramp(64 * 16, 0.1f));
  Metrics m = metrics();
  EXPECT_EQ(m.graphs_executed, 1);
  EXPECT_EQ(m.tier0_kernel_runs, m.kernels_launched) << "nothing was compiled before: tier 0 ran every kernel";
  EXPECT_GE(m.tier0_kernel_runs, 1);
  wait_for_compiles();
  EXPECT_EQ(metrics().kernels_compiled, 0) << "a graph run once is not compiled";

  const std::vector<float> second = program(ramp(64 * 16, 0.1f));
  wait_for_compiles();
  m = metrics();
  EXPECT_EQ(m.tier0_kernel_runs, m.kernels_launched) << "the second run was tier 0's too";
  EXPECT_EQ(m.tier_switches, 1);
  EXPECT_GE(m.kernels_compiled_background, 1);
  EXPECT_EQ(m.kernels_compiled_background, m.kernels_compiled);

  const int64_t tier0_runs = m.tier0_kernel_runs;
  const std::vector<float> third = program(ramp(64 * 16, 0.1f));
  m = metrics();
  EXPECT_EQ(m.tier0_kernel_runs, tier0_runs) << "after the switch, compiled code runs the graph";
  EXPECT_EQ(m.cache_hits, 1);
  EXPECT_EQ(first, second);
  EXPECT_EQ(first, third);  // elementwise arithmetic, max and exp per row: the same on both tiers here
}

/// Tier 0 lowers a new graph's kernels as tasks on the runtime's threads: the same kernels,
/// named alike and with the same size program, as lowering them one by one.
TEST(TierTest, LoweringKernelsAsParallelTasksGivesTheKernelsOfLoweringInOrder) {
  const Tensor w = Tensor::from_vector<float>(ramp(8 * 4, 0.01f), {8, 4});
  const Tensor x = Tensor::from_vector<float>(ramp(5 * 8, 0.02f), {5, 8});
  const Tensor g = matmul(transpose(x, 0, 1), softmax(matmul(x, w), 1));
  const Tensor y = layer_norm(x * 2.0 + 1.0, 1) - mean(x, {0}, true);
  const ir::Graph graph = ir::build_graph(std::vector<ir::NodePtr>{g.impl()->ir(), y.impl()->ir()});
  const lowering::LoweredGraph in_order = lowering::lower_graph(graph);
  auto on_threads = [](size_t count, absl::FunctionRef<void(size_t)> task) {
    std::vector<std::thread> threads;  // each kernel on a thread of its own, all at once
    for (size_t i = 0; i < count; ++i) threads.emplace_back([&, i] { task(i); });
    for (std::thread& t : threads) t.join();
  };
  const lowering::LoweredGraph parallel = lowering::lower_graph(graph, lowering::plan_graph(graph), {}, on_threads);
  ASSERT_GE(in_order.kernels.size(), 4u);
  ASSERT_EQ(parallel.kernels.size(), in_order.kernels.size());
  EXPECT_EQ(lowering::kernels_text(parallel), lowering::kernels_text(in_order));
  for (size_t k = 0; k < in_order.kernels.size(); ++k) {
    EXPECT_EQ(parallel.kernels[k].content, in_order.kernels[k].content);
    EXPECT_EQ(parallel.plan.kernels[k].count, in_order.plan.kernels[k].count);
    EXPECT_EQ(parallel.plan.kernels[k].work, in_order.plan.kernels[k].work);
    EXPECT_EQ(parallel.plan.kernels[k].frame.dims, in_order.plan.kernels[k].frame.dims);
  }
  EXPECT_EQ(lowering::print_plan(graph, parallel.plan), lowering::print_plan(graph, in_order.plan));
}

TEST(TierTest, TierZeroAloneNeverCompiles) {
  tests::ScopedTier tier(Tier::Interpret);
  reset_metrics();
  Tensor w = Tensor::from_vector<float>(ramp(8 * 4, 0.01f), {8, 4});
  const Tensor x = Tensor::from_vector<float>(ramp(5 * 8, 0.02f), {5, 8});
  for (int step = 0; step < 3; ++step) {
    const Tensor g = matmul(transpose(x, 0, 1), softmax(matmul(x, w), 1));
    w -= 0.1 * g;
    mark_step();
  }
  const Metrics m = metrics();
  EXPECT_EQ(m.kernels_compiled, 0);
  EXPECT_EQ(m.compiles, 0);
  EXPECT_EQ(m.compile_seconds, 0.0);
  EXPECT_GT(m.plan_seconds, 0.0);
  EXPECT_GT(m.tier0_prepare_seconds, 0.0) << "the first run's graph was lowered and readied for tier 0";
  EXPECT_EQ(m.tier0_kernel_runs, m.kernels_launched);
  EXPECT_GE(m.donations, 2) << "tier 0 writes into donated buffers as compiled code does";
  EXPECT_TRUE(std::isfinite(w.to_vector<float>()[0]));
}

TEST(TierTest, AGraphRunsTheKernelsOtherGraphsCompiledWithoutWaiting) {
  const Tensor x = Tensor::from_vector<float>(ramp(32 * 24, 0.05f), {32, 24});
  const Tensor z = Tensor::from_vector<float>(ramp(7, 1.0f), {7});
  {
    tests::ScopedTier tier(Tier::Compile);
    (void)sum(exp(x), {1}).to_vector<float>();  // compiles the row kernel
  }
  tests::ScopedTier tier(Tier::Auto);
  tests::ScopedCompileCost at_once(0);
  reset_metrics();
  // A new graph, run twice: the same row kernel, and an elementwise kernel of another shape.
  Tensor other;
  for (int run = 0; run < 2; ++run) {
    const Tensor rows = sum(exp(x), {1});
    other = z * 3.0 + 1.0;
    sync({rows, other});
  }
  const Metrics m = metrics();
  EXPECT_EQ(m.kernels_launched, 4);
  EXPECT_EQ(m.tier0_kernel_runs, 2) << "the row kernel ran compiled; only the new one ran on tier 0";
  wait_for_compiles();
  EXPECT_EQ(metrics().kernels_compiled, 1) << "the second run queued the new kernel's compile";
  EXPECT_FLOAT_EQ(other.to_vector<float>()[6], 3.0f * (6.0f - 3.0f) + 1.0f);
}

/// A job's kernels compile on helpers that take only idle cores (SCHED_IDLE); a job still
/// running after the compiler's patience has its own thread take the kernels left. Here the
/// one helper holds kernel 0 until kernels 1 and 2 are done, so only the job's thread can do
/// them, at its normal policy, once the patience is over.
TEST(BackgroundCompilerTest, KernelsCompileInIdleTimeAndTheJobsThreadTakesTheRestAfterItsPatience) {
  auto policy = [] { return sched_getscheduler(0); };
  {
    runtime::BackgroundCompiler compiler(1, std::chrono::milliseconds(20));
    std::mutex mutex;
    std::condition_variable changed;
    std::vector<int> ran(3, -1);  // each kernel's thread's policy
    compiler.for_each(3, [&](size_t i) {
      std::unique_lock lock(mutex);
      ran[i] = policy();
      changed.notify_all();
      if (i == 0) changed.wait_for(lock, std::chrono::seconds(30), [&] { return ran[1] >= 0 && ran[2] >= 0; });
    });
    EXPECT_EQ(ran[0], SCHED_IDLE);
    EXPECT_EQ(ran[1], SCHED_OTHER);
    EXPECT_EQ(ran[2], SCHED_OTHER);
  }
  {  // a job done within the patience: every kernel on the helpers
    runtime::BackgroundCompiler compiler(2, std::chrono::seconds(60));
    std::vector<std::atomic<int>> ran(5);
    for (auto& r : ran) r = -1;
    compiler.for_each(ran.size(), [&](size_t i) { ran[i] = policy(); });
    for (const auto& r : ran) EXPECT_EQ(r.load(), SCHED_IDLE);
    compiler.for_each(0, [&](size_t) { ADD_FAILURE() << "no kernels, no task"; });
  }
}

/// The policy alone, on made-up times (a kernel's compile costing 50 ns): nothing before the
/// second run; then the kernels tier 0 has spent twice that in (every index of their
/// content, once); the whole graph once the kernels still open have together spent twice
/// their cost, or the graph has run for the cost of the kernels it came with, once; nothing
/// after.
TEST(TierUpTest, HotKernelsFirstThenTheWholeGraphOnce) {
  using runtime::TierUp;
  const ir::Hash128 a{1, 0}, b{2, 0}, c{3, 0};
  TierUp policy(std::vector<ir::Hash128>{a, b, a, c});  // kernels 0 and 2 are one content
  const std::vector<bool> none(4, false);
  constexpr int64_t kCost = 50, kRun = 1;  // the graph's runs: 1 ns each, far from 3 * 50
  TierUp::Decision d = policy.after_run(std::vector<int64_t>{90, 1, 90, 1}, none, kRun, kCost);
  EXPECT_FALSE(d.whole);
  EXPECT_TRUE(d.kernels.empty()) << "a graph run once compiles nothing";
  d = policy.after_run(std::vector<int64_t>{60, 2, 60, 2}, none, kRun, kCost);
  EXPECT_FALSE(d.whole) << "124 ns over 3 contents is short of 300";
  EXPECT_THAT(d.kernels, ElementsAre(0, 2)) << "content a has spent 120 ns";
  d = policy.after_run(std::vector<int64_t>{500, 3, 500, 3}, none, kRun, kCost);
  EXPECT_FALSE(d.whole);
  EXPECT_TRUE(d.kernels.empty()) << "a is queued already; b and c have spent 6 ns of 200";
  d = policy.after_run(std::vector<int64_t>{900, 99, 900, 101}, none, kRun, kCost);
  EXPECT_TRUE(d.whole) << "b and c: 200 ns, twice their cost";
  d = policy.after_run(std::vector<int64_t>{900, 999, 900, 999}, none, kRun, kCost);
  EXPECT_FALSE(d.whole) << "queued once";
  EXPECT_TRUE(d.kernels.empty());

  TierUp shared(std::vector<ir::Hash128>{a, b});
  (void)shared.after_run(std::vector<int64_t>{0, 0}, std::vector<bool>{true, false}, kRun, kCost);
  d = shared.after_run(std::vector<int64_t>{0, 100}, std::vector<bool>{true, false}, kRun, kCost);
  EXPECT_TRUE(d.whole) << "a has code from another graph: b alone is open, and has spent twice its cost";

  TierUp loop(std::vector<ir::Hash128>{a, b, c});  // came with 3 kernels to compile: 150 ns
  (void)loop.after_run(std::vector<int64_t>{0, 0, 0}, std::vector<bool>(3, false), 70, kCost);
  EXPECT_FALSE(loop.after_run(std::vector<int64_t>{1, 1, 1}, std::vector<bool>(3, false), 70, kCost).whole);
  EXPECT_TRUE(loop.after_run(std::vector<int64_t>{2, 2, 2}, std::vector<bool>(3, false), 10, kCost).whole)
      << "the graph has run 150 ns: a loop's body compiles whole, its cold kernels with it";

  TierUp never(std::vector<ir::Hash128>{a, b, c});  // a cost that would overflow twice over
  const int64_t huge = std::numeric_limits<int64_t>::max() / 2;
  (void)never.after_run(std::vector<int64_t>{0, 0, 0}, std::vector<bool>(3, false), kRun, huge);
  d = never.after_run(std::vector<int64_t>{5, 5, 5}, std::vector<bool>(3, false), kRun, huge);
  EXPECT_FALSE(d.whole) << "saturates: never";
  EXPECT_TRUE(d.kernels.empty());

  TierUp at_once(std::vector<ir::Hash128>{a, b});
  (void)at_once.after_run(std::vector<int64_t>{0, 0}, none, 0, 0);
  EXPECT_TRUE(at_once.after_run(std::vector<int64_t>{0, 0}, none, 0, 0).whole) << "cost 0: from the second run";
}

TEST(TierTest, ACompileCostThatIsNotANumberIsAnError) {
  try {
    set_compile_cost(std::numeric_limits<double>::quiet_NaN());
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "set_compile_cost: the cost is NaN");
  }
}

/// A cost no run reaches: the graph stays on tier 0, and nothing is compiled.
TEST(TierTest, AGraphCompilesNothingUntilTierZeroHasSpentTheBudget) {
  tests::ScopedTier tier(Tier::Auto);
  tests::ScopedCompileCost never(1e9);
  reset_metrics();
  const Tensor x = Tensor::from_vector<float>(ramp(48 * 16, 0.1f), {48, 16});
  std::vector<float> results[5];  // kernels no other test compiles: tier 0 runs them all
  for (std::vector<float>& result : results) result = (log1p(abs(x)) * 0.75 - sigmoid(x)).to_vector<float>();
  wait_for_compiles();
  const Metrics m = metrics();
  EXPECT_EQ(m.kernels_compiled, 0);
  EXPECT_EQ(m.tier_switches, 0);
  EXPECT_EQ(m.tier0_kernel_runs, m.kernels_launched);
  for (const std::vector<float>& result : results) EXPECT_EQ(result, results[0]);
}

/// One kernel that tier 0 spends milliseconds in and 20 of other contents that take
/// microseconds: with a compile costing half a run of the big kernel on tier 0 (timed first,
/// alone, so the test holds on a slow or sanitized build), the big one has spent twice that
/// after two runs and compiles alone, while the graph is far from the cost of its 21 kernels;
/// it hands its code over, and the graph keeps running the rest on tier 0 without switching.
TEST(TierTest, AHotKernelCompilesAheadOfItsGraph) {
  const Tensor big = Tensor::from_vector<float>(ramp(1 << 20, 1e-6f), {1 << 20});
  auto hot = [&] { return exp(big) * 0.5 + tanh(big); };
  double one_run_ms = 0;
  {
    tests::ScopedTier tier(Tier::Interpret);  // a graph of the hot kernel alone, never compiled
    for (int r = 0; r < 2; ++r) {
      const auto start = std::chrono::steady_clock::now();
      sync({hot()});
      one_run_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    }
  }
  tests::ScopedTier tier(Tier::Auto);
  tests::ScopedCompileCost cost(one_run_ms / 2);  // hot after two runs
  const std::vector<std::function<Tensor(const Tensor&)>> light = {
      [](const Tensor& t) { return neg(t); },      [](const Tensor& t) { return abs(t); },
      [](const Tensor& t) { return exp(t); },      [](const Tensor& t) { return log1p(abs(t)); },
      [](const Tensor& t) { return expm1(t); },    [](const Tensor& t) { return sqrt(abs(t)); },
      [](const Tensor& t) { return sin(t); },      [](const Tensor& t) { return cos(t); },
      [](const Tensor& t) { return tanh(t); },     [](const Tensor& t) { return sigmoid(t); },
      [](const Tensor& t) { return relu(t); },     [](const Tensor& t) { return gelu(t); },
      [](const Tensor& t) { return erf(t); },      [](const Tensor& t) { return floor(t); },
      [](const Tensor& t) { return ceil(t); },     [](const Tensor& t) { return round(t); },
      [](const Tensor& t) { return sign(t); },     [](const Tensor& t) { return silu(t); },
      [](const Tensor& t) { return softplus(t); }, [](const Tensor& t) { return rsqrt(abs(t) + 1.0); }};
  std::vector<Tensor> small;  // one shape each: one kernel each, of distinct contents
  for (size_t i = 0; i < light.size(); ++i) {
    const int64_t n = static_cast<int64_t>(i) + 1;
    small.push_back(Tensor::from_vector<float>(ramp(n, 0.5f), {n}));
  }
  reset_metrics();
  auto run = [&] {
    std::vector<Tensor> results = {hot()};
    for (size_t i = 0; i < light.size(); ++i) results.push_back(light[i](small[i]));
    sync(results);
    return results[1].to_vector<float>()[0];
  };
  for (int r = 0; r < 5 && metrics().kernels_compiled_background == 0; ++r) {
    EXPECT_FLOAT_EQ(run(), 3.0f);
    wait_for_compiles();
  }
  Metrics m = metrics();
  ASSERT_EQ(m.kernels_compiled_background, 1) << "the big kernel, alone (a run of it: " << one_run_ms << " ms)";
  EXPECT_EQ(m.tier_switches, 0);
  const int64_t launched = m.kernels_launched, tier0_runs = m.tier0_kernel_runs;
  run();
  m = metrics();
  EXPECT_EQ((m.kernels_launched - launched) - (m.tier0_kernel_runs - tier0_runs), 1) << "its code runs it";
}

TEST(TierTest, AnIndexOutOfRangeIsTheSameErrorOnBothTiers) {
  const Tensor table = Tensor::from_vector<float>(ramp(5 * 3, 1.0f), {5, 3});
  const Tensor index = Tensor::from_vector<int64_t>({1, 4, 7, 0}, {4});
  std::string messages[2];
  for (int t = 0; t < 2; ++t) {
    tests::ScopedTier tier(t == 0 ? Tier::Interpret : Tier::Compile);
    Tensor picked = index_select(table, 0, index);
    try {
      (void)picked.to_vector<float>();
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      messages[t] = e.what();
    }
  }
  EXPECT_THAT(messages[0], HasSubstr("index_select"));
  EXPECT_THAT(messages[0], HasSubstr("7"));
  EXPECT_EQ(messages[0], messages[1]);
}

TEST(TierTest, ARunOfOnlyCompiledKernelsSwitchesNothingAndQueuesNothing) {
  const Tensor x = Tensor::from_vector<float>(ramp(100, 0.3f), {100});
  {
    tests::ScopedTier tier(Tier::Compile);
    (void)(x * 2.0).to_vector<float>();
  }
  tests::ScopedTier tier(Tier::Auto);
  reset_metrics();
  (void)(x * 2.0).to_vector<float>();  // the same graph: its compiled form is in the cache
  wait_for_compiles();
  const Metrics m = metrics();
  EXPECT_EQ(m.tier0_kernel_runs, 0);
  EXPECT_EQ(m.tier_switches, 0);
  EXPECT_EQ(m.cache_hits, 1);
}

}  // namespace
}  // namespace lazyjit

namespace lazyjit {
namespace {

/// Distance in units in the last place between two finite values of one float type.
template <class T>
int64_t ulps(T a, T b) {
  using I = std::conditional_t<sizeof(T) == 4, int32_t, int64_t>;
  auto ordered = [](T v) {
    I i;
    std::memcpy(&i, &v, sizeof v);
    return i < 0 ? static_cast<int64_t>(std::numeric_limits<I>::min()) - static_cast<int64_t>(i) : static_cast<int64_t>(i);
  };
  return std::abs(ordered(a) - ordered(b));
}

/// f's values on `tier`; on tier 0, every kernel ran there (none compiled earlier in the
/// process stood in for it).
template <class T>
std::vector<T> on_tier(Tier tier, const std::function<Tensor()>& f) {
  tests::ScopedTier scoped(tier);
  const Metrics before = metrics();
  std::vector<T> values = f().template to_vector<T>();
  if (tier == Tier::Interpret) {
    EXPECT_GT(metrics().tier0_kernel_runs, before.tier0_kernel_runs);
    EXPECT_EQ(tests::launches_not_on_tier0(before), 0);
  }
  return values;
}

/// docs/semantics.md, "Tiers": math functions may differ between the tiers in their last
/// bits (compiled loops call libm for some elements, libmvec for others; tier 0 libmvec for
/// all), by at most kMathUlps; everything else elementwise is bit for bit (differential tests).
constexpr int64_t kMathUlps = 4;

template <class T>
void expect_math_within_ulps() {
  const DType dtype = std::is_same_v<T, float> ? DType::Float32 : DType::Float64;
  // A whole tensor, and rows of 3 and 15 in a row kernel (its inner loops are remainders,
  // where compiled code calls libm).
  std::vector<T> values(4111 * 15);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<T>(-6.0 + 12.0 * static_cast<double>(i % 4111) / 4110.0);
  const Tensor flat = Tensor::from_vector<T>(values, {static_cast<int64_t>(values.size())});
  const Tensor rows3 = reshape(slice(flat, 0, 0, 4110 * 3), {4110, 3});
  const Tensor rows15 = reshape(flat, {4111, 15});
  using Op = std::function<Tensor(const Tensor&)>;
  auto everywhere = [&](Op op) -> std::function<Tensor()> {
    return [=] {
      return cat({op(flat), reshape(op(rows3 - amax(rows3, {1}, true)), {-1}),
                  reshape(op(rows15 - amax(rows15, {1}, true)), {-1})}, 0);
    };
  };
  const std::pair<const char*, std::function<Tensor()>> ops[] = {
      {"exp", everywhere([](const Tensor& x) { return exp(x); })},
      {"log", everywhere([](const Tensor& x) { return log(abs(x) + 0.01); })},
      {"sin", everywhere([](const Tensor& x) { return sin(x); })},
      {"cos", everywhere([](const Tensor& x) { return cos(x); })},
      {"tanh", everywhere([](const Tensor& x) { return tanh(x); })},
      {"log1p", everywhere([](const Tensor& x) { return log1p(abs(x)); })},
      {"expm1", everywhere([](const Tensor& x) { return expm1(x); })},
      {"sigmoid", everywhere([](const Tensor& x) { return sigmoid(x); })},
      {"gelu", everywhere([](const Tensor& x) { return gelu(x); })},
      {"pow", everywhere([](const Tensor& x) { return pow(abs(x) + 0.01, x * 0.5); })},
  };
  for (const auto& [name, f] : ops) {
    const std::vector<T> b = on_tier<T>(Tier::Interpret, f), a = on_tier<T>(Tier::Compile, f);
    int64_t worst = 0;
    for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, ulps(a[i], b[i]));
    EXPECT_LE(worst, kMathUlps) << name << " " << dtype_name(dtype);
  }
}

TEST(TierTest, MathFunctionsDifferBetweenTiersByAFewUlpsAtMost) {
  expect_math_within_ulps<float>();
  expect_math_within_ulps<double>();
}

/// Maximum and minimum folds: tier 0 keeps a block's maxima in lanes, compiled code in the
/// vectoriser's; both give the in-order result to the bit, NaN (the same quiet NaN) and
/// signed zeros included. Rows of every length around the lanes' width, with a NaN early,
/// late or nowhere, and ties of -0 and +0.
template <class T>
void expect_extrema_in_order_on_both_tiers() {
  constexpr int64_t kRows = 6;
  for (const int64_t n : {1, 15, 16, 17, 33, 1000, 1031}) {
    std::vector<T> values(static_cast<size_t>(kRows * n));
    for (int64_t r = 0; r < kRows; ++r) {
      for (int64_t i = 0; i < n; ++i) {
        T& v = values[static_cast<size_t>(r * n + i)];
        v = static_cast<T>(((i * 37 + r * 11) % 23) - 11);
        if constexpr (std::is_floating_point_v<T>) {
          if (r == 1) v = i % 2 == 0 ? T(-0.0) : T(0.0);             // zeros alone: +0 the maximum, -0 the minimum
          if (r == 2) v = i % 3 == 0 ? T(-0.0) : -std::abs(v) - 1;  // -0 above everything else
          if (r == 3 && i == n / 2) v = std::numeric_limits<T>::quiet_NaN();
          if (r == 4 && i == n - 1) v = std::numeric_limits<T>::quiet_NaN();
        }
      }
    }
    const Tensor x = Tensor::from_vector<T>(values, {kRows, n});
    for (const bool maximum : {true, false}) {
      const auto f = [&] { return maximum ? amax(x, {1}) : amin(x, {1}); };
      const std::vector<T> got[] = {on_tier<T>(Tier::Interpret, f), on_tier<T>(Tier::Compile, f)};
      for (int64_t r = 0; r < kRows; ++r) {
        T want = values[static_cast<size_t>(r * n)];  // in order
        for (int64_t i = 1; i < n; ++i) {
          const T v = values[static_cast<size_t>(r * n + i)];
          if constexpr (std::is_floating_point_v<T>) {
            if (std::isnan(want) || std::isnan(v)) {
              want = std::numeric_limits<T>::quiet_NaN();
              continue;
            }
            if (v == want) {  // equal: +0 is above -0
              want = maximum == std::signbit(want) ? v : want;
              continue;
            }
          }
          want = maximum ? std::max(want, v) : std::min(want, v);
        }
        for (int compiled = 0; compiled < 2; ++compiled) {
          EXPECT_EQ(std::memcmp(&got[compiled][r], &want, sizeof(T)), 0)
              << (compiled ? "compiled" : "tier 0") << (maximum ? " amax" : " amin") << ", rows of " << n << ", row " << r
              << ": " << got[compiled][r] << ", not " << want;
        }
      }
    }
  }
}

TEST(TierTest, MaximumAndMinimumFoldsAreTheInOrderResultOnBothTiers) {
  expect_extrema_in_order_on_both_tiers<float>();
  expect_extrema_in_order_on_both_tiers<double>();
  expect_extrema_in_order_on_both_tiers<int32_t>();
}

/// Float sums: the tiers add a row's elements in different orders (compiled code as LLVM's
/// vectoriser splits it into lanes, tier 0 in kFoldLanes lanes per block); each is within
/// the usual bound of a reordered sum, n * eps * sum |x|.
TEST(TierTest, FloatSumsDifferBetweenTiersWithinTheReorderingBound) {
  std::vector<float> values(64 * 1000);
  for (size_t i = 0; i < values.size(); ++i) values[i] = std::sin(0.37f * static_cast<float>(i)) * 100.0f;
  const Tensor x = Tensor::from_vector<float>(values, {64, 1000});
  const auto f = [&] { return sum(x, {1}); };
  const std::vector<float> b = on_tier<float>(Tier::Interpret, f), a = on_tier<float>(Tier::Compile, f);
  for (int64_t r = 0; r < 64; ++r) {
    double magnitude = 0;
    for (int64_t c = 0; c < 1000; ++c) magnitude += std::fabs(values[r * 1000 + c]);
    EXPECT_LE(std::fabs(static_cast<double>(a[r]) - b[r]), 1000 * 0x1p-24 * magnitude) << "row " << r;
  }
}

}  // namespace
}  // namespace lazyjit

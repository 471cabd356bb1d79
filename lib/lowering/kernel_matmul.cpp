// Matmul kernels to kernel IR: operand packing, and the register-blocked product with its
// fused epilogue.
#include <vector>

#include "ir/structured.h"
#include "lowering/fusion.h"
#include "lowering/internal_error.h"
#include "lowering/kernel_context.h"

namespace lazyjit::lowering {
namespace {

using ir::OpKind;
using kir::Id;
using Index = GraphValues::Index;

class Matmul {
 public:
  explicit Matmul(KernelContext& c) : c(c) {}


  struct Gemm {
    int product, a, b;
    int rank, a_rank, b_rank;
    MatmulTiling tile;
    Id m, n, k;
  };

  Gemm gemm() {
    Gemm g;
    g.product = c.spec.domain;
    g.a = c.graph.operands[g.product][0];
    g.b = c.graph.operands[g.product][1];
    g.rank = c.node(g.product).rank();
    g.a_rank = c.node(g.a).rank();
    g.b_rank = c.node(g.b).rank();
    g.tile = matmul_tiling(dtype_size(c.node(g.product).dtype()));
    g.m = c.v.dim(g.a, g.a_rank - 2);
    g.k = c.v.dim(g.a, g.a_rank - 1);
    g.n = c.v.dim(g.b, g.b_rank - 1);
    return g;
  }

  /// PackA: panel t holds MR rows of one batch of A as [K][MR] (rows past M are zero).
  /// PackB: panel t holds NR columns of one batch of B as [K][NR] (columns past N are zero).
  /// The operand's expression is evaluated as it is packed (a transpose or an activation
  /// costs no pass of its own). A panel's lanes inside the operand are a loop of their own,
  /// with no clamp in their index (contiguous reads vectorise), and the lanes past it another
  /// that writes zeros.
  void pack(bool left) {
    const Gemm g = gemm();
    const int operand = left ? g.a : g.b;
    const int rank = left ? g.a_rank : g.b_rank;
    const int64_t width = left ? g.tile.mr : g.tile.nr;
    const Id extent = left ? g.m : g.n;
    const Id panels = c.k.ceil_div(extent, c.i64(width));
    const int temp = c.spec.temps[0];
    const int buffer = c.v.buffer(temp_buffer_index(c.num_parameters, static_cast<int>(c.graph.roots.size()), temp), c.v.dtype(operand));
    c.k.loop(c.k.begin(), c.k.end(), [&](Id t) {
      std::vector<Id> dims(rank, c.i64(0));
      c.v.unravel_into(operand, c.k.div(t, panels), 0, rank - 2, dims);
      const Id first = c.k.mul(c.k.rem(t, panels), c.i64(width));
      const Id base = c.k.mul(c.k.mul(t, g.k), c.i64(width));
      const Id inside = c.k.min(c.i64(width), c.k.sub(extent, first));  // lanes [0, inside) hold values
      auto slot = [&](Id kk, Id lane) { return c.k.add(base, c.k.add(c.k.mul(kk, c.i64(width)), lane)); };
      auto element = [&](Id kk, Id lane) {
        const Id at = c.k.add(first, lane);
        dims[rank - 2] = left ? at : kk;
        dims[rank - 1] = left ? kk : at;
        c.k.store(buffer, slot(kk, lane), c.v.at(operand, Index{dims}));
      };
      auto zero = [&](Id kk, Id lane) { c.k.store(buffer, slot(kk, lane), c.k.constant(c.v.dtype(operand), 0)); };
      if (left && !ir::is_transpose(c.node(operand))) {  // read A along its rows (x^T's lie along x's columns)
        c.k.loop(c.i64(0), inside, [&](Id lane) { c.k.loop(c.i64(0), g.k, [&](Id kk) { element(kk, lane); }); });
        c.k.loop(inside, c.i64(width), [&](Id lane) { c.k.loop(c.i64(0), g.k, [&](Id kk) { zero(kk, lane); }); });
      } else {  // B, or a transposed A: a panel row is `width` contiguous elements
        c.k.loop(c.i64(0), g.k, [&](Id kk) {
          c.k.loop(c.i64(0), inside, [&](Id lane) { element(kk, lane); });
          c.k.loop(inside, c.i64(width), [&](Id lane) { zero(kk, lane); });
        });
      }
    });
    const Id batch = c.v.numel(operand, 0, rank - 2);
    c.k.kernel().count = c.k.mul(batch, panels);
    c.k.kernel().work = c.k.mul(g.k, c.i64(width));
  }

  /// Tiles of MB rows by NR columns: each MR-row block accumulates over all of K in
  /// registers (the micro-kernel), lands in a tile, and the epilogue evaluates the kernel's
  /// results from it element by element (vectorised along the columns).
  void matmul() {
    const Gemm g = gemm();
    const DType dtype = c.node(g.product).dtype();
    const int num_results = static_cast<int>(c.graph.roots.size());
    const int packed_a_temp = packed_temp(TempBuffer::Kind::PackedA);
    const int a_read = left_in_place(c.graph, c.plan.cuts, g.product);  // A's rows, where they lie
    const int a_in_place = a_read == g.a ? -1 : a_read;                   // ... through a window
    const int packed_a = c.v.buffer(packed_a_temp >= 0 ? temp_buffer_index(c.num_parameters, num_results, packed_a_temp)
                                                       : c.plan.buffer_of[a_read],
                                    dtype);
    const int b_in_place = window_in_place(c.graph, g.product, 1);
    auto temp = [&](TempBuffer::Kind kind) { return temp_buffer_index(c.num_parameters, num_results, packed_temp(kind)); };
    const int b = c.v.buffer(b_in_place >= 0 ? c.plan.buffer_of[b_in_place] : temp(TempBuffer::Kind::PackedB), dtype);
    const int b_rows = b_in_place < 0 ? -1 : c.v.buffer(temp(TempBuffer::Kind::RowsOfB), DType::Int64);
    const int tile = c.k.new_local(dtype, g.tile.mr * g.tile.nr);
    const Id col_panels = c.k.ceil_div(g.n, c.i64(g.tile.nr));
    // Rows per tile: MB, or all of a short A (up to 2 MB rows): B's panel, which a tile reads
    // once per MR rows, then comes from memory once instead of once per block.
    // (Index arithmetic alone, for the launch geometry: short is 1 when M <= 2 MB, else 0.)
    const Id whole = c.k.mul(c.k.ceil_div(g.m, c.i64(g.tile.mr)), c.i64(g.tile.mr));
    const Id is_short = c.k.sub(c.i64(1), c.k.min(c.k.div(g.m, c.i64(2 * g.tile.mb + 1)), c.i64(1)));
    const Id mb = c.k.max(c.i64(g.tile.mb), c.k.mul(whole, is_short));
    const Id row_blocks = c.k.ceil_div(g.m, mb);
    const Id a_panels = c.k.ceil_div(g.m, c.i64(g.tile.mr));
    c.k.loop(c.k.begin(), c.k.end(), [&](Id t) {
      const Id panel = c.k.rem(t, col_panels);
      const Id rest = c.k.div(t, col_panels);
      const Id block = c.k.rem(rest, row_blocks);
      const Id batch = c.k.div(rest, row_blocks);
      std::vector<Id> out(g.rank, c.i64(0));
      c.v.unravel_into(g.product, batch, 0, g.rank - 2, out);
      const Id a_batch = batch_of(g.a, g.a_rank, out, g.rank);
      const Id b_batch = batch_of(g.b, g.b_rank, out, g.rank);
      const Id row0 = c.k.mul(block, mb);
      const Id col0 = c.k.mul(panel, c.i64(g.tile.nr));
      const Id rows = c.k.min(mb, c.k.sub(g.m, row0));
      const Id cols = c.k.min(c.i64(g.tile.nr), c.k.sub(g.n, col0));
      c.k.loop(c.i64(0), c.k.ceil_div(rows, c.i64(g.tile.mr)), [&](Id micro) {
        kir::MicroKernel step{.a = packed_a, .b = b, .tile = tile, .packed_a = packed_a_temp >= 0, .b_rows = b_rows, .k = g.k};
        if (b_in_place < 0) {
          step.b_base = c.k.mul(c.k.mul(c.k.add(c.k.mul(b_batch, col_panels), panel), g.k), c.i64(g.tile.nr));
        } else {  // where B's row 0 of this batch lies, at the tile's first column
          step.b_base = c.v.offset_in(g.b, b_in_place, Index{operand_dims(g.b, g.b_rank, out, g.rank, c.i64(0), col0)});
          step.cols = cols;
        }
        const Id first_row = c.k.add(row0, c.k.mul(micro, c.i64(g.tile.mr)));
        if (step.packed_a) {
          const Id a_panel = c.k.add(c.k.mul(a_batch, a_panels), c.k.add(c.k.div(row0, c.i64(g.tile.mr)), micro));
          step.a_rows.push_back(c.k.mul(c.k.mul(a_panel, g.k), c.i64(g.tile.mr)));
        } else {  // each of the MR rows of A in place (clamped to the last; its results are not stored)
          for (int64_t r = 0; r < g.tile.mr; ++r) {
            const Id row = c.k.min(c.k.add(first_row, c.i64(r)), c.k.sub(g.m, c.i64(1)));
            step.a_rows.push_back(a_in_place < 0 ? c.k.mul(c.k.add(c.k.mul(a_batch, g.m), row), g.k)
                                                 : a_row_in_place(g, a_in_place, out, row));
          }
        }
        c.k.matmul(std::move(step));
        epilogue(g, tile, out, first_row, c.k.min(c.i64(g.tile.mr), c.k.sub(g.m, first_row)), col0, cols);
      });
    });
    c.k.kernel().count = c.k.mul(c.k.mul(c.v.numel(g.product, 0, g.rank - 2), row_blocks), col_panels);
    c.k.kernel().work = c.k.mul(c.k.mul(c.k.max(g.k, c.i64(1)), mb), c.i64(g.tile.nr));
  }

  /// RowsOfB: entry kk of the table is the offset of B's row kk from its row 0, in the buffer
  /// B is read from in place (window_in_place); the same for every batch and column.
  void rows_of_b() {
    const Gemm g = gemm();
    const int base = window_in_place(c.graph, g.product, 1);
    const int num_results = static_cast<int>(c.graph.roots.size());
    const int table = c.v.buffer(temp_buffer_index(c.num_parameters, num_results, c.spec.temps[0]), DType::Int64);
    std::vector<Id> at(g.b_rank, c.i64(0));
    const Id first = c.v.offset_in(g.b, base, Index{at});
    c.k.loop(c.k.begin(), c.k.end(), [&](Id kk) {
      at[g.b_rank - 2] = kk;
      c.k.store(table, kk, c.k.sub(c.v.offset_in(g.b, base, Index{at}), first));
    });
    c.k.kernel().count = g.k;
    c.k.kernel().work = c.i64(1);
  }

  /// The temporary holding this product's packed operand, or -1 (A read in place).
  int packed_temp(TempBuffer::Kind kind) const {
    for (size_t t = 0; t < c.plan.temps.size(); ++t) {
      if (c.plan.temps[t].kind == kind && c.plan.temps[t].node == c.spec.domain) return static_cast<int>(t);
    }
    if (kind != TempBuffer::Kind::PackedA) internal_error("a matmul without its packed operand or row offsets");
    return -1;
  }

  /// Where row `row` of A, a window read in place over `base`, starts in base's buffer.
  Id a_row_in_place(const Gemm& g, int base, const std::vector<Id>& out, Id row) {
    return c.v.offset_in(g.a, base, Index{operand_dims(g.a, g.a_rank, out, g.rank, row, c.i64(0))});
  }

  /// The multi-index of operand `n` (rank `rank`) at (row, col) of the batch of output
  /// index `out`: right-aligned, broadcast dims read 0.
  std::vector<Id> operand_dims(int n, int rank, const std::vector<Id>& out, int out_rank, Id row, Id col) {
    std::vector<Id> dims(rank, c.i64(0));
    for (int d = 0; d < rank - 2; ++d) {
      if (c.node(n).shape()[d] != 1) dims[d] = out[d + out_rank - rank];
    }
    dims[rank - 2] = row;
    dims[rank - 1] = col;
    return dims;
  }

  /// The linear batch index of operand `n` (rank `rank`) for output batch dims `out`:
  /// right-aligned, broadcast dims read 0.
  Id batch_of(int n, int rank, const std::vector<Id>& out, int out_rank) {
    Id linear = c.i64(0);
    for (int d = 0; d < rank - 2; ++d) {
      if (c.node(n).shape()[d] == 1) continue;
      linear = c.k.add(c.k.mul(linear, c.v.dim(n, d)), out[d + out_rank - rank]);
    }
    return linear;
  }

  void epilogue(const Gemm& g, int tile, std::vector<Id> out, Id first_row, Id rows, Id col0, Id cols) {
    std::vector<std::pair<int, int>> temps;
    for (int t : c.spec.temps) temps.emplace_back(c.plan.temps[t].node, c.plan.buffer_of[c.plan.temps[t].node]);
    c.k.loop(c.i64(0), rows, [&](Id r) {
      c.k.loop(c.i64(0), cols, [&](Id j) {
        c.v.bind(g.product, c.k.local(tile, c.k.add(c.k.mul(r, c.i64(g.tile.nr)), j)));
        out[g.rank - 2] = c.k.add(first_row, r);
        out[g.rank - 1] = c.k.add(col0, j);
        c.store_results(c.spec.results, c.v.ravel(g.product, out), Index{out}, /*below_reshapes=*/true, temps);
        c.v.unbind(g.product);
      });
    });
  }

 private:
  KernelContext& c;
};

}  // namespace

void build_pack(KernelContext& c, bool left) { Matmul(c).pack(left); }
void build_matmul(KernelContext& c) { Matmul(c).matmul(); }
void build_rows_of_b(KernelContext& c) { Matmul(c).rows_of_b(); }

}  // namespace lazyjit::lowering

// Tier 0's runner: one kernel call's interpreter state (a prepared program's registers,
// locals and blocks) and what runs it, statement by statement (tier0_runner.cpp: outer
// loops, matmul steps, copy nests) and a block at a time (tier0_block.cpp: innermost loops).
// Internal to lib/runtime.
#pragma once

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "runtime/tier0_copies.h"
#include "runtime/tier0_program.h"

namespace lazyjit::runtime::tier0 {

using kir::Expr;
using kir::ExprKind;
using Program = Tier0Kernel::Program;

/// One call's state: scalar registers, locals, blocks.
struct Frame {
  const Program& p;
  void* const* args;
  const int64_t* dims;
  uint64_t* regs;
  std::byte* locals;
  std::byte* blocks;  // max_blocks blocks of kBlock 8-byte lanes

  void* reg(Id e) const { return &regs[e]; }
  int64_t index(Id e) const { return static_cast<int64_t>(regs[e]); }
  std::byte* buffer(int slot) const { return static_cast<std::byte*>(args[slot]); }
  std::byte* local(int slot) const { return locals + p.local_offset[slot]; }
};

/// a / b and a % b for b > 0: a shift and a mask where b is a power of two (a model's dims
/// mostly are: heads, sequence, head size), which a hardware division costs 10 to 40 times.
inline uint64_t quotient(uint64_t a, uint64_t b) { return (b & (b - 1)) == 0 ? a >> std::countr_zero(b) : a / b; }
inline uint64_t remainder(uint64_t a, uint64_t b) { return (b & (b - 1)) == 0 ? a & (b - 1) : a % b; }

/// Index arithmetic as kir::IndexOp defines it: wrapping, and 0 for a division by 0.
inline int64_t index_op(kir::IndexOp op, int64_t a, int64_t b) {
  const auto ua = static_cast<uint64_t>(a), ub = static_cast<uint64_t>(b);
  switch (op) {
    case kir::IndexOp::Add: return static_cast<int64_t>(ua + ub);
    case kir::IndexOp::Sub: return static_cast<int64_t>(ua - ub);
    case kir::IndexOp::Mul: return static_cast<int64_t>(ua * ub);
    case kir::IndexOp::Div: return ub == 0 ? 0 : static_cast<int64_t>(quotient(ua, ub));
    case kir::IndexOp::Rem: return ub == 0 ? 0 : static_cast<int64_t>(remainder(ua, ub));
    case kir::IndexOp::Min: return std::min(a, b);
    case kir::IndexOp::Max: return std::max(a, b);
  }
  return 0;
}

/// An affine index value's steps over a block: per lane of a row, and per row.
struct Strides {
  int64_t lane = 0, row = 0;
};

/// Runs one call of a prepared kernel (iterations [begin, end) over a bound frame): its
/// statements in order, each innermost loop a block of lanes at a time. Its per-expression
/// state (which values a block holds, which are affine and how) lives as long as the call.
class Runner {
 public:
  explicit Runner(Frame& f)
      : f_(f),
        p_(f.p),
        k_(f.p.k),
        ready_(k_.exprs.size()),
        affine_(k_.exprs.size()),
        lane_step_(k_.exprs.size()),
        row_step_(k_.exprs.size()),
        in_place_(k_.exprs.size()),
        per_row_(k_.exprs.size()),
        row_sum_(k_.exprs.size()),
        stored_over_of_(p_.loops.size()),
        broadcast_(k_.exprs.size()) {}

  /// One expression's scalar value into its register: a load, a local, an operation or a
  /// random draw (eval_all computes index arithmetic itself, from Program::index_code).
  void eval(Id id);

  /// Evaluates `ids` in order, index arithmetic inline (a matmul tile's row offsets, a row's
  /// bounds: most of what an iteration evaluates).
  void eval_all(const std::vector<Id>& ids);

  int32_t steps(const std::vector<Step>& steps);

  int32_t run(const Step& step);

 private:
  /// The k x NR panel of a B read in place (kir::MicroKernel): row kk's first `cols` elements
  /// from b_base + b_rows[kk], zeros after them. Packed once for the micro-kernels of a tile
  /// (one b_base) in this call.
  const std::byte* pack_rows(const kir::MicroKernel& m, DType dtype, int64_t b_base);

  /// An index expression of a copy nest with outer variable u (-1 in a copy loop) and inner
  /// v, which CopyNests proved affine: c + su * u + sv * v (in the wrapping arithmetic of
  /// kir::IndexOp).
  struct Linear {
    uint64_t c, su, sv;
  };
  Linear linear(Id e, int u, int v) const;

  /// A copy nest over outer iterations [lo, hi): each store of each inner loop in turn, over
  /// the whole nest. A copy loop is one row: its inner loop is itself.
  int32_t copy_nest(const tier0::CopyNest& nest, int64_t lo, int64_t hi);

  tier0::FoldFn fold(ir::OpKind op, DType dtype) const {
    return p_.table->fold[static_cast<int>(op)][static_cast<int>(dtype)];
  }

  void fail(const Stmt& check, int64_t offending) {
    __atomic_store_n(reinterpret_cast<int64_t*>(f_.buffer(check.slot)), offending, __ATOMIC_RELAXED);
  }

  /// Expression `e`'s block in the running block loop.
  std::byte* block(Id e) const {
    // Blocks are as long as this loop entry's widest (a row of 64 takes 512 bytes a block,
    // not kBlock's 8 KiB): short loops keep their values close together.
    return f_.blocks + static_cast<size_t>(loop_->slot[e]) * static_cast<size_t>(width_) * 8;
  }

  /// `e` as an array of the block's n lanes: Uniform values broadcast (once per loop entry,
  /// or not at all where its block still holds the value), affine Index values materialised
  /// (once per block).
  const std::byte* lanes(Id e, int64_t n);

  /// Rows of a block of n lanes.
  int64_t rows_of(int64_t n) const { return (n + row_ - 1) / row_; }

  /// Values `e` (Form::Row) once per row of the block, into the first rows_of(n) places of
  /// its block: its operands' values per row (a broadcast's, an index value's at the row's
  /// first lane, another such value's), then one call of its block function, or a gather of
  /// a load at the rows' offsets.
  void compute_per_row(Id id, const Expr& e, int64_t n);

  /// The values per row that `o`'s block holds in this block (Form::Row, computed per row:
  /// compute_per_row, not yet spread), or null.
  const std::byte* row_block(Id o) const {
    return loop_->form[o] == Form::Row && per_row_[o] == block_epoch_ ? block(o) : nullptr;
  }

  /// Operand `o` of a per-row computation, one value per row: a broadcast as it is, a
  /// per-row value where it still is one, else its lanes at each row's first (into scratch
  /// `which`).
  const std::byte* row_values(Id o, int64_t n, size_t which);

  /// Spreads the per-row values at the start of `out` along their rows, in place: last row
  /// first, so that each row's value is read before any lane overwrites it.
  void spread(std::byte* out, int64_t size, int64_t n);

  /// Calls f(row, its first lane, its lanes) for each row of a block of n lanes.
  template <class F>
  void for_rows(int64_t n, F&& f) const {
    for (int64_t r = 0, first = 0; first < n; ++r, first += row_) f(r, first, std::min(row_, n - first));
  }

  /// The strides of x op y over this block's n lanes, where x and y are affine and so is the
  /// result. The lanes are rows by columns (a rectangle that bounds a shorter last row), and
  /// each side of an affine value's comparison is monotonic along both.
  std::optional<Strides> affine_strides(kir::IndexOp op, Id x, Id y, int64_t n) const;

  /// An Index expression over a block: affine when its operands are and its op keeps them so
  /// over these n lanes, else computed lane by lane.
  void compute_index(Id id, const Expr& e, int64_t n);

  /// o[i] = a[i] / d (whole) or a[i] % d (unsigned, as kir::IndexOp) for 0 < d < 2^52: a quotient
  /// estimated in double precision (off by a few at most where a[i] < 2^52), then corrected;
  /// a hardware division per lane costs several times more.
  static void divide_by(const int64_t* a, int64_t d, bool whole, int64_t* o, int64_t n);

  /// The buffers (as slot bits) whose memory a loop storing to buffers `writes` reaches:
  /// those and any other slot bound to the same memory (a donated parameter and the result
  /// that took it over). A unit-stride load of any other buffer is read where it lies.
  uint64_t stored_over(uint64_t writes) const;

  /// Whether index value `o` is affine over this block (else its lanes are in its block).
  bool affine_offset(Id o) const { return loop_->form[o] == Form::Uniform || affine_[o]; }
  Strides strides_of(Id o) const {
    return loop_->form[o] == Form::Uniform ? Strides{} : Strides{lane_step_[o], row_step_[o]};
  }
  // (Two arrays, each written and read 8 bytes at a time: a 16-byte copy of Strides that
  // two 8-byte stores had just written stalled on store forwarding, block after block.)
  void set_strides(Id o, Strides s) {
    lane_step_[o] = s.lane;
    row_step_[o] = s.row;
  }
  /// Whether affine `o` steps by one stride over all n lanes of the block: one row, or rows
  /// that continue one another.
  bool one_stride(Id o, int64_t n) const {
    const Strides s = strides_of(o);
    return n <= row_ || s.row == s.lane * row_;
  }

  /// Computes block value `id` over n lanes.
  void compute(Id id, int64_t n);

  /// Whether `e` is a comparison of two affine index values (a causal mask: a row's index
  /// against a column's; a bounds check), or of one and a value of the row (a one-hot's class
  /// against the column), then computed into `out` from their bases and strides (a value of
  /// the row: its row's value, stride 0), neither materialised in a block.
  bool compare_affine(const Expr& e, uint8_t* out, int64_t n);

  /// Whether `e` is a two-operand operation of a value of the row (Form::Row, one value per
  /// row in its block) and lanes (a norm's statistics beside the row's elements), then
  /// computed into `out` a row at a time with the row's value as one operand, not spread.
  bool with_row_value(const Expr& e, std::byte* out, int64_t n);

  /// A row's comparison of a + sa j against b + sb j for j < len as at most three runs of
  /// equal lanes (`lane(j)`: the comparison at j), where neither side wraps over the row:
  /// their difference is then linear in j, so an ordering changes value at most once (found
  /// by bisection) and an equality holds at one lane, all or none. A causal mask's row of
  /// 64 costs a few comparisons and two fills instead of 64 comparisons.
  template <class Lane>
  static bool compare_by_segments(ir::OpKind op, uint64_t a, int64_t sa, uint64_t b, int64_t sb, int64_t len,
                                  const Lane& lane, uint8_t* out);

  /// Writes n lanes of `value` at `offset` (one element: the last lane's value, as in order).
  void write(std::byte* base, DType dtype, Id offset, Id value, int64_t n);

  /// n elements of `size` bytes from base's element `at` on, `stride` elements apart, into out.
  static void read_run(std::byte* out, const std::byte* base, int64_t at, int64_t stride, int64_t n, int64_t size);

  /// The block's n lanes as rows of contiguous elements, `rows_apart` elements apart from
  /// base's element `at` on (0: one row read again, a bias), read into out, the whole rows in
  /// one BlockTable::copy_rows: a band's epilogue moves rows of 32 floats, and a call of
  /// memcpy per row cost about as much as the row. False where the rows are too short or too
  /// long for it, or too few (the caller goes row by row).
  bool read_rows(std::byte* out, const std::byte* base, int64_t at, int64_t rows_apart, int64_t n, int64_t size) const;
  /// The same, written from in to base: false also where the rows would overlap (rows written
  /// over each other go in order, row by row).
  bool write_rows(std::byte* base, int64_t at, int64_t rows_apart, const std::byte* in, int64_t n, int64_t size) const;
  /// Whether read_rows and write_rows take a block of n lanes of `size` bytes.
  bool rows_move_at_once(int64_t n, int64_t size) const { return n / row_ >= 2 && copy_rows_takes(row_ * size); }

  /// Whether index expression `sum` is a value of the row (Form::Row, its values in this
  /// block) plus an affine value, in a block whose rows are the loop's: the offset of a row of
  /// a table picked by an index (an embedding's, a gather's) and the column. Its lanes are put
  /// in its block only where something reads them (lanes()); a load at it reads a run per row.
  struct RowSum {
    Id row, column;  ///< the value of the row, the affine value
  };
  std::optional<RowSum> row_plus_affine(Id sum) const;
  /// The sum's value at row r's first lane, `first` (each next lane: strides_of(column).lane on).
  int64_t row_start(const RowSum& sum, int64_t r, int64_t first);

  /// A load at offset o (row_plus_affine) as one run per row of the block; else false (a
  /// gather, lane by lane).
  bool read_row_runs(std::byte* out, const std::byte* base, Id o, int64_t n, int64_t size);
  /// n elements of `size` bytes from in to base's element `at` on, `stride` elements apart,
  /// in order (one element: the last value).
  static void write_run(std::byte* base, int64_t at, int64_t stride, const std::byte* in, int64_t n, int64_t size);

  int32_t block_loop(const BlockLoop& loop, int64_t lo, int64_t hi);

  /// Lanes [start, start + n) of the running block loop.
  int32_t run_block(const BlockLoop& loop, int64_t start, int64_t n);

  /// Whether this block's lanes are at distinct offsets at each of loop.distinct (strictly
  /// increasing, as a flattened epilogue's rows are when they do not overlap).
  bool distinct(const BlockLoop& loop, int64_t n);

  int32_t block_statement(const Stmt& s, int64_t n);

  /// The store B[o] = op(B[o], x) of an accumulating loop (BlockLoop::accumulate): x for
  /// the whole block, then each row combined into B in order (one call of op's block
  /// function per row where o runs along it, else one per lane): the same elements, each
  /// combined with the rows' values in the rows' order.
  void accumulate(const Stmt& s, int64_t n);

  Frame& f_;
  const Program& p_;
  const kir::Kernel& k_;
  const BlockLoop* loop_ = nullptr;  // the block loop running
  std::vector<std::byte> panel_;     // a B read in place, packed (pack_rows)
  int64_t panel_of_ = -1;            // the b_base whose rows panel_ holds
  int64_t width_ = 0;                // its lanes per block (the first block's)
  int64_t row_ = 0;                  // its lanes per row: a flattened nest's inner loop, else width_
  bool rows_ = false;                // the running loop's blocks are rows of row_ (BlockLoop::row)
  bool aligned_ = false;             // the running block begins a row
  // Per expression: the epoch in which its lanes were put in its block (the loop entry's for
  // a broadcast, the block's for the others); an Index expression is affine in this block,
  // with this stride (its base in its register).
  bool ready(Id e) const { return ready_[e] == (loop_->form[e] == Form::Uniform ? entry_epoch_ : block_epoch_); }
  void set_ready(Id e) { ready_[e] = loop_->form[e] == Form::Uniform ? entry_epoch_ : block_epoch_; }
  std::vector<uint64_t> ready_;
  std::vector<uint8_t> affine_;  // (bytes: a bit's read-modify-write per block costs)
  std::vector<int64_t> lane_step_, row_step_;
  std::vector<const std::byte*> in_place_;  // per expression: its lanes where they lie (a load), or null
  std::vector<uint64_t> per_row_;           // per Form::Row expression: the block whose rows' values its block holds
  std::vector<uint64_t> row_sum_;           // per Index expression: the block in which it is row_plus_affine, its lanes not yet put
  std::vector<std::byte> row_scratch_;      // operands of per-row computations (row_values)
  uint64_t stored_over_ = 0;                // the running block loop's stored_over
  std::vector<std::optional<uint64_t>> stored_over_of_;  // per block loop, once known in this call
  uint64_t clock_ = 0, entry_epoch_ = 0, block_epoch_ = 0;
  // A loop entered again (a loop of rows, a batch at a time) finds its broadcasts where it
  // left them, unless another block loop ran in between or its blocks moved (another width):
  // per Uniform expression, the scratch epoch and the value of its broadcast.
  struct Broadcasted {
    uint64_t epoch = 0, bits = 0;
  };
  std::vector<Broadcasted> broadcast_;
  uint64_t scratch_epoch_ = 1;
  const BlockLoop* filled_loop_ = nullptr;
  int64_t filled_width_ = 0;
};

}  // namespace lazyjit::runtime::tier0

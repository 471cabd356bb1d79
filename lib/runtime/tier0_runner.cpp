// Tier 0: the block interpreter that runs a prepared kernel (tier0_program.h).
#include <algorithm>
#include <cstring>
#include <limits>
#include <optional>

#include "lowering/internal_error.h"
#include "lowering/kernel_abi.h"
#include "runtime/tier0_copies.h"
#include "runtime/tier0_program.h"

namespace lazyjit::runtime {

using kir::Expr;
using kir::ExprKind;
using kir::Id;
using kir::Stmt;
using lowering::internal_error;
using tier0::bit;
using tier0::BlockLoop;
using tier0::Broadcast;
using tier0::by_size;
using tier0::Copy2d;
using tier0::copy_elements;
using tier0::Fill2d;
using tier0::Gather;
using tier0::Scatter;
using tier0::ScatterStrided;
using tier0::Strided;
using tier0::Form;
using tier0::Step;
using tier0::Writes;
using Program = Tier0Kernel::Program;

namespace {

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

int64_t index_op(kir::IndexOp op, int64_t a, int64_t b) {
  const auto ua = static_cast<uint64_t>(a), ub = static_cast<uint64_t>(b);
  switch (op) {
    case kir::IndexOp::Add: return static_cast<int64_t>(ua + ub);
    case kir::IndexOp::Sub: return static_cast<int64_t>(ua - ub);
    case kir::IndexOp::Mul: return static_cast<int64_t>(ua * ub);
    case kir::IndexOp::Div: return ub == 0 ? 0 : static_cast<int64_t>(ua / ub);
    case kir::IndexOp::Rem: return ub == 0 ? 0 : static_cast<int64_t>(ua % ub);
    case kir::IndexOp::Min: return std::min(a, b);
    case kir::IndexOp::Max: return std::max(a, b);
  }
  return 0;
}

/// An affine index value's steps over a block: per lane of a row, and per row.
struct Strides {
  int64_t lane = 0, row = 0;
};

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
        broadcast_(k_.exprs.size()),
        stored_over_of_(p_.loops.size()) {}

  /// One expression's scalar value into its register.
  void eval(Id id) {
    if (const tier0::IndexCode& c = p_.index_code[id]; c.index) {
      f_.regs[id] = static_cast<uint64_t>(index_op(c.op, f_.index(c.a), f_.index(c.b)));
      return;
    }
    const Expr& e = k_.exprs[id];
    switch (e.kind) {
      case ExprKind::Load: {
        const int64_t size = dtype_size(e.dtype);
        copy_elements(reinterpret_cast<std::byte*>(f_.reg(id)), f_.buffer(e.slot) + f_.index(e.operands[0]) * size, 1,
                      size, e.dtype == DType::Bool);
        return;
      }
      case ExprKind::Local: {
        const int64_t size = dtype_size(e.dtype);
        const int64_t at = e.operands.empty() ? 0 : f_.index(e.operands[0]);
        std::memcpy(f_.reg(id), f_.local(e.slot) + at * size, static_cast<size_t>(size));
        return;
      }
      case ExprKind::Op: {
        const void* operands[3] = {};
        for (size_t i = 0; i < e.operands.size(); ++i) operands[i] = f_.reg(e.operands[i]);
        p_.fn[id](operands, f_.reg(id), 1);
        return;
      }
      case ExprKind::Random: {
        const int64_t counter = f_.index(e.operands[1]);
        p_.table->random[e.op == static_cast<uint8_t>(ir::OpKind::Randn)][e.dtype == DType::Float64](
            f_.regs[e.operands[0]], &counter, f_.reg(id), 1);
        return;
      }
      default: internal_error("tier 0 met an expression it evaluates only once per call");
    }
  }

  /// Evaluates `ids` in order, index arithmetic inline (a matmul tile's row offsets, a row's
  /// bounds: most of what an iteration evaluates).
  void eval_all(const std::vector<Id>& ids) {
    for (Id e : ids) {
      if (const tier0::IndexCode& c = p_.index_code[e]; c.index) {
        f_.regs[e] = static_cast<uint64_t>(index_op(c.op, f_.index(c.a), f_.index(c.b)));
      } else {
        eval(e);
      }
    }
  }

  int32_t steps(const std::vector<Step>& steps) {
    for (const Step& step : steps) {
      eval_all(step.pre);
      if (const int32_t status = run(step); status != 0) return status;
    }
    return 0;
  }

  int32_t run(const Step& step) {
    const Stmt& s = *step.stmt;
    switch (s.kind) {
      case Stmt::Kind::For: {
        const int64_t lo = f_.index(s.lo), hi = f_.index(s.hi);
        if (step.block_loop >= 0) return block_loop(p_.loops[step.block_loop], lo, hi);
        if (step.copy_nest >= 0) return copy_nest(p_.copy_nests[step.copy_nest], lo, hi);
        for (int64_t i = lo; i < hi; ++i) {
          if (step.var != kir::kNone) f_.regs[step.var] = static_cast<uint64_t>(i);
          eval_all(step.hoisted);
          if (const int32_t status = steps(step.body); status != 0) return status;
        }
        return 0;
      }
      case Stmt::Kind::Store:
        for (size_t i = 0; i < s.values.size(); ++i) {
          const int64_t size = dtype_size(k_.buffers[s.buffers[i]].dtype);
          std::memcpy(f_.buffer(s.buffers[i]) + f_.index(s.offsets[i]) * size, f_.reg(s.values[i]),
                      static_cast<size_t>(size));
        }
        return 0;
      case Stmt::Kind::Assign:
      case Stmt::Kind::Fold: {
        const DType dtype = k_.locals[s.slot].dtype;
        const int64_t size = dtype_size(dtype);
        std::byte* at = f_.local(s.slot) + (s.offsets.empty() ? 0 : f_.index(s.offsets[0]) * size);
        if (s.kind == Stmt::Kind::Assign) std::memcpy(at, f_.reg(s.values[0]), static_cast<size_t>(size));
        else fold(s.op, dtype)(f_.reg(s.values[0]), 1, at);
        return 0;
      }
      case Stmt::Kind::Check:
        if (f_.regs[s.values[0]] & 0xff) return 0;
        fail(s, f_.index(s.values[1]));
        return s.code;
      case Stmt::Kind::Matmul: {
        const kir::MicroKernel& m = s.micro;
        int64_t rows[6] = {};
        for (size_t r = 0; r < m.a_rows.size() && r < 6; ++r) rows[r] = f_.index(m.a_rows[r]);
        const DType dtype = k_.buffers[m.b].dtype;
        const std::byte* b = f_.buffer(m.b);
        int64_t b_base = f_.index(m.b_base);
        if (m.b_rows >= 0) {  // B in place: its rows packed into a panel here first
          b = pack_rows(m, dtype, b_base);
          b_base = 0;
        }
        const int64_t tile_at = m.tile_at == kir::kNone ? 0 : f_.index(m.tile_at);
        p_.table->matmul[static_cast<int>(dtype)](f_.buffer(m.a), rows, m.packed_a, b, b_base, f_.index(m.k),
                                                  f_.local(m.tile) + tile_at * dtype_size(dtype));
        return 0;
      }
    }
    return 0;
  }

 private:
  /// The k x NR panel of a B read in place (kir::MicroKernel): row kk's first `cols` elements
  /// from b_base + b_rows[kk], zeros after them. Packed once for the micro-kernels of a tile
  /// (one b_base) in this call.
  const std::byte* pack_rows(const kir::MicroKernel& m, DType dtype, int64_t b_base) {
    if (b_base == panel_of_) return panel_.data();
    const int64_t size = dtype_size(dtype), nr = lowering::matmul_tiling(size).nr;
    const int64_t k = f_.index(m.k), cols = f_.index(m.cols);
    panel_.assign(static_cast<size_t>(k * nr * size), std::byte{0});
    const auto* rows = reinterpret_cast<const int64_t*>(f_.buffer(m.b_rows));
    const std::byte* b = f_.buffer(m.b);
    for (int64_t kk = 0; kk < k; ++kk) std::memcpy(&panel_[kk * nr * size], b + (b_base + rows[kk]) * size, cols * size);
    panel_of_ = b_base;
    return panel_.data();
  }

  /// An index expression of a copy nest with outer variable u (-1 in a copy loop) and inner
  /// v, which CopyNests proved affine: c + su * u + sv * v (in the wrapping arithmetic of
  /// kir::IndexOp).
  struct Linear {
    uint64_t c, su, sv;
  };
  Linear linear(Id e, int u, int v) const {
    const uint64_t both = (u < 0 ? 0 : tier0::bit(u)) | tier0::bit(v);
    if ((p_.vars[e] & both) == 0) return {f_.regs[e], 0, 0};
    const Expr& x = k_.exprs[e];
    if (x.kind == ExprKind::Var) return x.slot == u ? Linear{0, 1, 0} : Linear{0, 0, 1};
    const Linear a = linear(x.operands[0], u, v), b = linear(x.operands[1], u, v);
    switch (static_cast<kir::IndexOp>(x.op)) {
      case kir::IndexOp::Add: return {a.c + b.c, a.su + b.su, a.sv + b.sv};
      case kir::IndexOp::Sub: return {a.c - b.c, a.su - b.su, a.sv - b.sv};
      default: {  // Mul, one side invariant
        const bool a_fixed = (p_.vars[x.operands[0]] & both) == 0;
        const uint64_t by = a_fixed ? a.c : b.c;
        const Linear& l = a_fixed ? b : a;
        return {l.c * by, l.su * by, l.sv * by};
      }
    }
  }

  /// A copy nest over outer iterations [lo, hi): each store of each inner loop in turn, over
  /// the whole nest. A copy loop is one row: its inner loop is itself.
  int32_t copy_nest(const tier0::CopyNest& nest, int64_t lo, int64_t hi) {
    if (lo >= hi) return 0;
    const int64_t rows = nest.outer < 0 ? 1 : hi - lo;
    for (const tier0::CopyNest::Inner& inner : nest.inners) {
      const int64_t first = f_.index(inner.lo), n = f_.index(inner.hi) - first;
      if (n <= 0) continue;
      auto at = [&](const Linear& l) {
        return static_cast<int64_t>(l.c + l.su * static_cast<uint64_t>(lo) + l.sv * static_cast<uint64_t>(first));
      };
      for (const tier0::CopyNest::Copy& c : inner.copies) {
        const int64_t size = dtype_size(k_.buffers[c.to].dtype);
        const Linear to = linear(c.to_offset, nest.outer, inner.var);
        std::byte* out = f_.buffer(c.to) + at(to) * size;
        const auto to_row = static_cast<int64_t>(to.su), to_col = static_cast<int64_t>(to.sv);
        if (c.from < 0) {
          by_size<Fill2d>(size, out, to_row, to_col, static_cast<const void*>(f_.reg(c.value)), rows, n);
          continue;
        }
        const Linear from = linear(c.from_offset, nest.outer, inner.var);
        const std::byte* in = (c.from_local ? f_.local(c.from) : f_.buffer(c.from)) + at(from) * size;
        by_size<Copy2d>(size, out, to_row, to_col, in, static_cast<int64_t>(from.su), static_cast<int64_t>(from.sv), rows, n);
      }
    }
    return 0;
  }

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
  const std::byte* lanes(Id e, int64_t n) {
    std::byte* out = block(e);
    if (ready(e)) return in_place_[e] != nullptr ? in_place_[e] : out;
    set_ready(e);
    if (loop_->form[e] == Form::Row) {  // one value per row (compute_per_row): spread along the rows
      spread(out, dtype_size(k_.exprs[e].dtype), n);
      per_row_[e] = 0;
    } else if (loop_->form[e] == Form::Uniform) {
      Broadcasted& b = broadcast_[e];
      if (b.epoch != scratch_epoch_ || b.bits != f_.regs[e]) {
        by_size<Broadcast>(dtype_size(k_.exprs[e].dtype), out, static_cast<const void*>(f_.reg(e)), width_);
        b = {scratch_epoch_, f_.regs[e]};
      }
    } else {  // an affine Index value (the others are computed into their blocks)
      auto* o = reinterpret_cast<int64_t*>(out);
      const int64_t base = f_.index(e);
      const Strides s = strides_of(e);
      for_rows(n, [&](int64_t r, int64_t first, int64_t len) {
        for (int64_t i = 0; i < len; ++i) o[first + i] = base + s.row * r + s.lane * i;
      });
    }
    return out;
  }

  /// Rows of a block of n lanes.
  int64_t rows_of(int64_t n) const { return (n + row_ - 1) / row_; }

  /// Values `e` (Form::Row) once per row of the block, into the first rows_of(n) places of
  /// its block: its operands' values per row (a broadcast's, an index value's at the row's
  /// first lane, another such value's), then one call of its block function, or a gather of
  /// a load at the rows' offsets.
  void compute_per_row(Id id, const Expr& e, int64_t n) {
    const int64_t rows = rows_of(n);
    in_place_[id] = nullptr;
    std::byte* out = block(id);
    per_row_[id] = block_epoch_;
    if (e.kind == ExprKind::Op) {
      const void* operands[3] = {};
      for (size_t i = 0; i < e.operands.size(); ++i) operands[i] = row_values(e.operands[i], n, i);
      p_.fn[id](operands, out, rows);
      return;
    }
    // A load (or an array local's element) at an offset the same along each row.
    const int64_t size = dtype_size(e.dtype);
    const std::byte* base = e.kind == ExprKind::Load ? f_.buffer(e.slot) : f_.local(e.slot);
    const auto* at = reinterpret_cast<const int64_t*>(row_values(e.operands[0], n, 0));
    by_size<Gather>(size, out, base, at, rows);
    if (e.kind == ExprKind::Load && e.dtype == DType::Bool) {
      for (int64_t r = 0; r < rows; ++r) out[r] = std::byte{out[r] != std::byte{0}};
    }
  }

  /// Operand `o` of a per-row computation, one value per row: a broadcast as it is, a
  /// per-row value where it still is one, else its lanes at each row's first (into scratch
  /// `which`).
  const std::byte* row_values(Id o, int64_t n, size_t which) {
    if (loop_->form[o] == Form::Uniform) return lanes(o, n);
    if (loop_->form[o] == Form::Row && per_row_[o] == block_epoch_) return block(o);
    const int64_t rows = rows_of(n), size = dtype_size(k_.exprs[o].dtype);
    if (row_scratch_.size() < 3 * static_cast<size_t>(Tier0Kernel::kBlock) * 8) {
      row_scratch_.resize(3 * static_cast<size_t>(Tier0Kernel::kBlock) * 8);
    }
    std::byte* out = row_scratch_.data() + which * static_cast<size_t>(Tier0Kernel::kBlock) * 8;
    if (k_.exprs[o].kind == ExprKind::Index && affine_offset(o)) {
      auto* v = reinterpret_cast<int64_t*>(out);
      const Strides s = strides_of(o);
      for (int64_t r = 0; r < rows; ++r) v[r] = f_.index(o) + s.row * r;
      return out;
    }
    by_size<Strided>(size, out, lanes(o, n), 0, row_, rows);
    return out;
  }

  /// Spreads the per-row values at the start of `out` along their rows, in place: last row
  /// first, so that each row's value is read before any lane overwrites it.
  void spread(std::byte* out, int64_t size, int64_t n) {
    for (int64_t r = rows_of(n) - 1; r >= 0; --r) {
      const int64_t first = r * row_, len = std::min(row_, n - first);
      std::byte value[8];
      std::memcpy(value, out + r * size, static_cast<size_t>(size));
      by_size<Broadcast>(size, out + first * size, static_cast<const void*>(value), len);
    }
  }

  /// Calls f(row, its first lane, its lanes) for each row of a block of n lanes.
  template <class F>
  void for_rows(int64_t n, F&& f) const {
    for (int64_t r = 0, first = 0; first < n; ++r, first += row_) f(r, first, std::min(row_, n - first));
  }

  /// The strides of x op y over this block's n lanes, where x and y are affine and so is the
  /// result. The lanes are rows by columns (a rectangle that bounds a shorter last row), and
  /// each side of an affine value's comparison is monotonic along both.
  std::optional<Strides> affine_strides(kir::IndexOp op, Id x, Id y, int64_t n) const {
    const int64_t bx = f_.index(x), by = f_.index(y);
    const int64_t last_col = std::min(row_, n) - 1, last_row = (n - 1) / row_;
    Strides sx = strides_of(x), sy = strides_of(y);
    if (last_row == 0) sx.row = sy.row = 0;  // one row: no row strides
    auto corners = [&](int64_t base, Strides s) {
      const int64_t ends[4] = {base, base + s.lane * last_col, base + s.row * last_row,
                               base + s.lane * last_col + s.row * last_row};
      return std::pair{*std::min_element(ends, ends + 4), *std::max_element(ends, ends + 4)};
    };
    switch (op) {
      case kir::IndexOp::Add: return Strides{sx.lane + sy.lane, sx.row + sy.row};
      case kir::IndexOp::Sub: return Strides{sx.lane - sy.lane, sx.row - sy.row};
      case kir::IndexOp::Mul:
        if (sy.lane == 0 && sy.row == 0) return Strides{sx.lane * by, sx.row * by};
        if (sx.lane == 0 && sx.row == 0) return Strides{sy.lane * bx, sy.row * bx};
        return std::nullopt;
      case kir::IndexOp::Min:
      case kir::IndexOp::Max: {
        // One side wins on every lane: x - y keeps one sign over the rectangle's corners.
        const auto [lo, hi] = corners(bx - by, Strides{sx.lane - sy.lane, sx.row - sy.row});
        const bool min = op == kir::IndexOp::Min;
        if (min ? hi <= 0 : lo >= 0) return sx;
        if (min ? lo >= 0 : hi <= 0) return sy;
        return std::nullopt;
      }
      case kir::IndexOp::Div:
      case kir::IndexOp::Rem: {
        // A constant divisor; a dividend that does not decrease from a non-negative base.
        if (sy.lane != 0 || sy.row != 0 || by <= 0 || bx < 0 || sx.lane < 0 || sx.row < 0) return std::nullopt;
        const bool quotient = op == kir::IndexOp::Div;
        if (bx / by == corners(bx, sx).second / by) return quotient ? Strides{} : sx;  // within one multiple
        if (sx.row % by != 0) return std::nullopt;
        if (sx.lane % by == 0) return quotient ? Strides{sx.lane / by, sx.row / by} : Strides{};
        // Each row within one multiple (a flattened nest's variable over its rows).
        if (bx % by + sx.lane * last_col < by) {
          return quotient ? Strides{0, sx.row / by} : Strides{sx.lane, 0};
        }
        return std::nullopt;
      }
    }
    return std::nullopt;
  }

  /// An Index expression over a block: affine when its operands are and its op keeps them so
  /// over these n lanes, else computed lane by lane.
  void compute_index(Id id, const Expr& e, int64_t n) {
    const Id x = e.operands[0], y = e.operands[1];
    const auto op = static_cast<kir::IndexOp>(e.op);
    if (affine_offset(x) && affine_offset(y)) {
      if (const std::optional<Strides> s = affine_strides(op, x, y, n)) {
        f_.regs[id] = static_cast<uint64_t>(index_op(op, f_.index(x), f_.index(y)));  // the base: lane 0's value
        ready_[id] = 0;
        affine_[id] = true;
        set_strides(id, *s);
        return;
      }
    }
    affine_[id] = false;
    set_ready(id);
    auto* o = reinterpret_cast<int64_t*>(block(id));
    if ((op == kir::IndexOp::Div || op == kir::IndexOp::Rem) && affine_offset(x) && one_stride(x, n) &&
        loop_->form[y] == Form::Uniform && f_.index(y) > 0 && f_.index(x) >= 0 && strides_of(x).lane >= 0) {
      // An affine dividend crossing multiples of the divisor: quotient and remainder stepped
      // lane by lane, no division per lane.
      const int64_t d = f_.index(y), step = strides_of(x).lane, step_q = step / d, step_r = step % d;
      int64_t q = f_.index(x) / d, r = f_.index(x) % d;
      const bool quotient = op == kir::IndexOp::Div;
      for (int64_t i = 0; i < n; ++i) {
        o[i] = quotient ? q : r;
        q += step_q;
        r += step_r;
        if (r >= d) {
          r -= d;
          ++q;
        }
      }
      return;
    }
    const auto* a = reinterpret_cast<const int64_t*>(lanes(x, n));
    const auto* b = reinterpret_cast<const int64_t*>(lanes(y, n));
    switch (op) {
      case kir::IndexOp::Add: for (int64_t i = 0; i < n; ++i) o[i] = static_cast<int64_t>(uint64_t(a[i]) + uint64_t(b[i])); break;
      case kir::IndexOp::Sub: for (int64_t i = 0; i < n; ++i) o[i] = static_cast<int64_t>(uint64_t(a[i]) - uint64_t(b[i])); break;
      case kir::IndexOp::Mul: for (int64_t i = 0; i < n; ++i) o[i] = static_cast<int64_t>(uint64_t(a[i]) * uint64_t(b[i])); break;
      case kir::IndexOp::Min: for (int64_t i = 0; i < n; ++i) o[i] = std::min(a[i], b[i]); break;
      case kir::IndexOp::Max: for (int64_t i = 0; i < n; ++i) o[i] = std::max(a[i], b[i]); break;
      case kir::IndexOp::Div:
      case kir::IndexOp::Rem:
        if (loop_->form[y] == Form::Uniform && f_.index(y) > 0 && f_.index(y) < (int64_t{1} << 52)) {
          divide_by(a, f_.index(y), op == kir::IndexOp::Div, o, n);
        } else {
          for (int64_t i = 0; i < n; ++i) o[i] = index_op(op, a[i], b[i]);
        }
        break;
    }
  }

  /// o[i] = a[i] / d or a[i] % d (unsigned, as kir::IndexOp) for 0 < d < 2^52: a quotient
  /// estimated in double precision (off by a few at most where a[i] < 2^52), then corrected;
  /// a hardware division per lane costs several times more.
  static void divide_by(const int64_t* a, int64_t d, bool quotient, int64_t* o, int64_t n) {
    const double inverse = 1.0 / static_cast<double>(d);
    for (int64_t i = 0; i < n; ++i) {
      const uint64_t x = static_cast<uint64_t>(a[i]);
      if (x >= (uint64_t{1} << 52)) {
        o[i] = static_cast<int64_t>(quotient ? x / static_cast<uint64_t>(d) : x % static_cast<uint64_t>(d));
        continue;
      }
      int64_t q = static_cast<int64_t>(static_cast<double>(x) * inverse);
      int64_t r = static_cast<int64_t>(x) - q * d;
      while (r < 0) {
        --q;
        r += d;
      }
      while (r >= d) {
        ++q;
        r -= d;
      }
      o[i] = quotient ? q : r;
    }
  }

  /// The buffers (as slot bits) whose memory a loop storing to buffers `writes` reaches:
  /// those and any other slot bound to the same memory (a donated parameter and the result
  /// that took it over). A unit-stride load of any other buffer is read where it lies.
  uint64_t stored_over(uint64_t writes) const {
    uint64_t reached = writes;
    const int count = static_cast<int>(k_.buffers.size());
    for (int w = 0; w < count; ++w) {
      if ((writes & bit(w)) == 0) continue;
      for (int r = 0; r < count; ++r) {
        if (f_.buffer(r) == f_.buffer(w)) reached |= bit(r);
      }
    }
    return reached;
  }

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
  void compute(Id id, int64_t n) {
    const Expr& e = k_.exprs[id];
    if (e.kind == ExprKind::Index) {
      compute_index(id, e, n);
      return;
    }
    if (loop_->form[id] == Form::Row && row_ < n && aligned_) {  // (else lane by lane)
      compute_per_row(id, e, n);
      return;
    }
    set_ready(id);
    in_place_[id] = nullptr;
    std::byte* out = block(id);
    switch (e.kind) {
      case ExprKind::Load:
      case ExprKind::Local: {
        const int64_t size = dtype_size(e.dtype);
        const std::byte* base = e.kind == ExprKind::Load ? f_.buffer(e.slot) : f_.local(e.slot);
        if (e.operands.empty()) {
          by_size<Broadcast>(size, out, static_cast<const void*>(base), n);
          return;
        }
        const Id o = e.operands[0];
        const bool affine = affine_offset(o), one = affine && one_stride(o, n);
        if (e.kind == ExprKind::Load && e.dtype != DType::Bool && one && strides_of(o).lane == 1 &&
            (stored_over_ & bit(e.slot)) == 0) {
          in_place_[id] = base + f_.index(o) * size;  // read where it lies: nothing this loop stores reaches it
          return;
        }
        if (!affine) {
          by_size<Gather>(size, out, base, reinterpret_cast<const int64_t*>(lanes(o, n)), n);
        } else if (one) {
          read_run(out, base, f_.index(o), strides_of(o).lane, n, size);
        } else {
          const Strides s = strides_of(o);
          for_rows(n, [&](int64_t r, int64_t first, int64_t len) {
            read_run(out + first * size, base, f_.index(o) + s.row * r, s.lane, len, size);
          });
        }
        if (e.kind == ExprKind::Load && e.dtype == DType::Bool) {
          for (int64_t i = 0; i < n; ++i) out[i] = std::byte{out[i] != std::byte{0}};
        }
        return;
      }
      case ExprKind::Op: {
        if (compare_affine(e, reinterpret_cast<uint8_t*>(out), n)) return;
        const void* operands[3] = {};
        for (size_t i = 0; i < e.operands.size(); ++i) operands[i] = lanes(e.operands[i], n);
        p_.fn[id](operands, out, n);
        return;
      }
      case ExprKind::Random:
        p_.table->random[e.op == static_cast<uint8_t>(ir::OpKind::Randn)][e.dtype == DType::Float64](
            f_.regs[e.operands[0]], reinterpret_cast<const int64_t*>(lanes(e.operands[1], n)), out, n);
        return;
      default: internal_error("tier 0 met a block expression it does not know");
    }
  }

  /// Whether `e` is a comparison of two affine index values (a causal mask: a row's index
  /// against a column's; a one-hot's class against the column; a bounds check), then
  /// computed into `out` from their bases and strides, neither materialised in a block.
  bool compare_affine(const Expr& e, uint8_t* out, int64_t n) {
    if (ir::op_info(static_cast<ir::OpKind>(e.op)).dtype_rule != ir::DTypeRule::Compare) return false;
    const Id x = e.operands[0], y = e.operands[1];
    if (k_.exprs[x].dtype != DType::Int64 || !affine_offset(x) || !affine_offset(y)) return false;
    const auto op = static_cast<ir::OpKind>(e.op);
    const Strides sx = strides_of(x), sy = strides_of(y);
    const auto bx = static_cast<uint64_t>(f_.index(x)), by = static_cast<uint64_t>(f_.index(y));
    auto each = [&](auto compare) {
      for_rows(n, [&](int64_t r, int64_t first, int64_t len) {
        // Index arithmetic wraps (kir::IndexOp): the lanes' values in unsigned steps.
        const uint64_t ax = bx + static_cast<uint64_t>(sx.row * r), ay = by + static_cast<uint64_t>(sy.row * r);
        auto lane = [&](int64_t j) {
          const auto i = static_cast<uint64_t>(j);
          return static_cast<uint8_t>(compare(static_cast<int64_t>(ax + static_cast<uint64_t>(sx.lane) * i),
                                              static_cast<int64_t>(ay + static_cast<uint64_t>(sy.lane) * i)));
        };
        if (!compare_by_segments(op, ax, sx.lane, ay, sy.lane, len, lane, out + first)) {
          for (int64_t j = 0; j < len; ++j) out[first + j] = lane(j);
        }
      });
    };
    switch (op) {
      case ir::OpKind::Eq: each([](int64_t a, int64_t b) { return a == b; }); break;
      case ir::OpKind::Ne: each([](int64_t a, int64_t b) { return a != b; }); break;
      case ir::OpKind::Lt: each([](int64_t a, int64_t b) { return a < b; }); break;
      case ir::OpKind::Le: each([](int64_t a, int64_t b) { return a <= b; }); break;
      case ir::OpKind::Gt: each([](int64_t a, int64_t b) { return a > b; }); break;
      case ir::OpKind::Ge: each([](int64_t a, int64_t b) { return a >= b; }); break;
      default: return false;
    }
    return true;
  }

  /// A row's comparison of a + sa j against b + sb j for j < len as at most three runs of
  /// equal lanes (`lane(j)`: the comparison at j), where neither side wraps over the row:
  /// their difference is then linear in j, so an ordering changes value at most once (found
  /// by bisection) and an equality holds at one lane, all or none. A causal mask's row of
  /// 64 costs a few comparisons and two fills instead of 64 comparisons.
  template <class Lane>
  static bool compare_by_segments(ir::OpKind op, uint64_t a, int64_t sa, uint64_t b, int64_t sb, int64_t len,
                                  const Lane& lane, uint8_t* out) {
    using Wide = __int128;
    auto fits = [&](uint64_t base, int64_t step) {
      const Wide last = static_cast<Wide>(static_cast<int64_t>(base)) + static_cast<Wide>(step) * (len - 1);
      return last >= std::numeric_limits<int64_t>::min() && last <= std::numeric_limits<int64_t>::max();
    };
    if (len <= 0 || !fits(a, sa) || !fits(b, sb)) return false;
    const uint8_t head = lane(0);
    if (op == ir::OpKind::Eq || op == ir::OpKind::Ne) {
      const Wide d = static_cast<Wide>(static_cast<int64_t>(a)) - static_cast<int64_t>(b), k = static_cast<Wide>(sa) - sb;
      const uint8_t apart = op == ir::OpKind::Ne;  // the value where the sides differ
      std::memset(out, k == 0 ? head : apart, static_cast<size_t>(len));
      if (k != 0 && d % k == 0 && -d / k >= 0 && -d / k < len) out[static_cast<int64_t>(-d / k)] = lane(static_cast<int64_t>(-d / k));
      return true;
    }
    int64_t lo = 0, hi = len;  // lane(j) == head for j < lo; the first other lane is in [lo, hi]
    while (lo + 1 < hi) {
      const int64_t mid = lo + (hi - lo) / 2;
      if (lane(mid) == head) lo = mid;
      else hi = mid;
    }
    std::memset(out, head, static_cast<size_t>(hi));
    std::memset(out + hi, head ^ 1, static_cast<size_t>(len - hi));
    return true;
  }

  /// Writes n lanes of `value` at `offset` (one element: the last lane's value, as in order).
  void write(std::byte* base, DType dtype, Id offset, Id value, int64_t n) {
    const int64_t size = dtype_size(dtype);
    const std::byte* in = lanes(value, n);
    if (!affine_offset(offset)) {
      by_size<Scatter>(size, base, in, reinterpret_cast<const int64_t*>(lanes(offset, n)), n);
    } else if (one_stride(offset, n)) {
      write_run(base, f_.index(offset), strides_of(offset).lane, in, n, size);
    } else {
      const Strides s = strides_of(offset);
      for_rows(n, [&](int64_t r, int64_t first, int64_t len) {
        write_run(base, f_.index(offset) + s.row * r, s.lane, in + first * size, len, size);
      });
    }
  }

  /// n elements of `size` bytes from base's element `at` on, `stride` elements apart, into out.
  static void read_run(std::byte* out, const std::byte* base, int64_t at, int64_t stride, int64_t n, int64_t size) {
    if (stride == 1) std::memcpy(out, base + at * size, static_cast<size_t>(n * size));
    else if (stride == 0) by_size<Broadcast>(size, out, static_cast<const void*>(base + at * size), n);
    else by_size<Strided>(size, out, base, at, stride, n);
  }
  /// n elements of `size` bytes from in to base's element `at` on, `stride` elements apart,
  /// in order (one element: the last value).
  static void write_run(std::byte* base, int64_t at, int64_t stride, const std::byte* in, int64_t n, int64_t size) {
    if (stride == 1) std::memcpy(base + at * size, in, static_cast<size_t>(n * size));
    else if (stride == 0) std::memcpy(base + at * size, in + (n - 1) * size, static_cast<size_t>(size));
    else by_size<ScatterStrided>(size, base, in, at, stride, n);
  }

  int32_t block_loop(const BlockLoop& loop, int64_t lo, int64_t hi) {
    if (lo >= hi) return 0;
    loop_ = &loop;
    std::optional<uint64_t>& reached = stored_over_of_[static_cast<size_t>(&loop - p_.loops.data())];
    if (!reached) reached = stored_over(loop.writes);  // once per call: the frame's buffers stay
    stored_over_ = *reached;
    eval_all(loop.entry);
    // A loop of rows (BlockLoop::row) runs blocks of whole rows from multiples of the block
    // (the first may be shorter: rows begin at multiples of their length); other blocks are
    // one row.
    int64_t step = loop.block;
    const int64_t row = loop.row == kir::kNone ? 0 : f_.index(loop.row);
    const bool rows = row > (loop.divisor_rows ? BlockLoop::kMinRow - 1 : 1) && row < loop.block && lo >= 0;
    if (rows) step = loop.block / row * row;
    width_ = std::min(step, hi - lo);
    row_ = rows ? row : width_;
    entry_epoch_ = ++clock_;  // broadcasts are filled on first use
    if (&loop != filled_loop_ || width_ != filled_width_) {  // another loop's blocks, or other places
      ++scratch_epoch_;
      filled_loop_ = &loop;
      filled_width_ = width_;
    }
    for (int64_t start = lo; start < hi;) {
      const int64_t n = std::min(rows ? step - start % step : step, hi - start);
      if (const int32_t status = run_block(loop, start, n); status != 0) return status;
      start += n;
    }
    return 0;
  }

  /// Lanes [start, start + n) of the running block loop.
  int32_t run_block(const BlockLoop& loop, int64_t start, int64_t n) {
    block_epoch_ = ++clock_;
    aligned_ = start % row_ == 0;  // the block's rows are the loop's (a slice may begin inside one)
    if (loop.var != kir::kNone) {
      f_.regs[loop.var] = static_cast<uint64_t>(start);
      affine_[loop.var] = true;
      set_strides(loop.var, Strides{1, row_});
    }
    for (const BlockLoop::Statement& statement : loop.body) {
      for (Id e : statement.compute) compute(e, n);
      if (n > 1 && !distinct(loop, n)) {  // (the loop is one statement) lanes that meet run in order
        for (int64_t i = 0; i < n; ++i) {
          if (const int32_t status = run_block(loop, start + i, 1); status != 0) return status;
        }
        return 0;
      }
      if (const int32_t status = block_statement(*statement.stmt, n); status != 0) return status;
    }
    return 0;
  }

  /// Whether this block's lanes are at distinct offsets at each of loop.distinct (strictly
  /// increasing, as a flattened epilogue's rows are when they do not overlap).
  bool distinct(const BlockLoop& loop, int64_t n) {
    for (Id o : loop.distinct) {
      if (affine_offset(o) && one_stride(o, n)) {
        if (strides_of(o).lane == 0) return false;
        continue;
      }
      const auto* at = reinterpret_cast<const int64_t*>(lanes(o, n));
      for (int64_t i = 1; i < n; ++i) {
        if (at[i] <= at[i - 1]) return false;
      }
    }
    return true;
  }

  int32_t block_statement(const Stmt& s, int64_t n) {
    switch (s.kind) {
      case Stmt::Kind::Store:
        if (loop_->accumulate) {
          accumulate(s, n);
          return 0;
        }
        for (size_t i = 0; i < s.values.size(); ++i) {
          write(f_.buffer(s.buffers[i]), k_.buffers[s.buffers[i]].dtype, s.offsets[i], s.values[i], n);
        }
        return 0;
      case Stmt::Kind::Assign:
      case Stmt::Kind::Fold: {
        const DType dtype = k_.locals[s.slot].dtype;
        const int64_t size = dtype_size(dtype);
        if (s.kind == Stmt::Kind::Assign) {
          if (s.offsets.empty()) {
            std::memcpy(f_.local(s.slot), lanes(s.values[0], n) + (n - 1) * size, static_cast<size_t>(size));
          } else {
            write(f_.local(s.slot), dtype, s.offsets[0], s.values[0], n);
          }
          return 0;
        }
        const tier0::FoldFn combine = fold(s.op, dtype);
        const std::byte* values = lanes(s.values[0], n);
        if (s.offsets.empty()) {
          combine(values, n, f_.local(s.slot));
          return 0;
        }
        const Id o = s.offsets[0];
        if (loop_->fold_rows && affine_offset(o) && strides_of(o).lane == 0) {
          // A batch of rows (NestInverter::batched), one accumulator each: each row's lanes
          // fold in one call, as a row in a block of its own did.
          const Strides st = strides_of(o);
          for_rows(n, [&](int64_t r, int64_t first, int64_t len) {
            combine(values + first * size, len, f_.local(s.slot) + (f_.index(o) + st.row * r) * size);
          });
          return 0;
        }
        const auto* at = reinterpret_cast<const int64_t*>(lanes(o, n));
        for (int64_t i = 0; i < n; ++i) combine(values + i * size, 1, f_.local(s.slot) + at[i] * size);
        return 0;
      }
      case Stmt::Kind::Check: {
        const std::byte* ok = lanes(s.values[0], n);
        for (int64_t i = 0; i < n; ++i) {
          if (ok[i] == std::byte{0}) {
            fail(s, reinterpret_cast<const int64_t*>(lanes(s.values[1], n))[i]);
            return s.code;
          }
        }
        return 0;
      }
      default: internal_error("tier 0 met a statement a block loop cannot hold");
    }
  }

  /// The store B[o] = op(B[o], x) of an accumulating loop (BlockLoop::accumulate): x for
  /// the whole block, then each row combined into B in order (one call of op's block
  /// function per row where o runs along it, else one per lane): the same elements, each
  /// combined with the rows' values in the rows' order.
  void accumulate(const Stmt& s, int64_t n) {
    const Id value = s.values[0], offset = s.offsets[0];
    const tier0::BlockFn combine = p_.fn[value];
    const int64_t size = dtype_size(k_.exprs[value].dtype);
    std::byte* base = f_.buffer(s.buffers[0]);
    const std::byte* x = lanes(k_.exprs[value].operands[1], n);
    if (affine_offset(offset) && strides_of(offset).lane == 1) {
      const Strides st = strides_of(offset);
      for_rows(n, [&](int64_t r, int64_t first, int64_t len) {
        std::byte* at = base + (f_.index(offset) + st.row * r) * size;
        const void* operands[] = {at, x + first * size};
        combine(operands, at, len);
      });
      return;
    }
    const auto* at = reinterpret_cast<const int64_t*>(lanes(offset, n));
    for (int64_t i = 0; i < n; ++i) {
      const void* operands[] = {base + at[i] * size, x + i * size};
      combine(operands, base + at[i] * size, 1);
    }
  }

  Frame& f_;
  const Program& p_;
  const kir::Kernel& k_;
  const BlockLoop* loop_ = nullptr;  // the block loop running
  std::vector<std::byte> panel_;     // a B read in place, packed (pack_rows)
  int64_t panel_of_ = -1;            // the b_base whose rows panel_ holds
  int64_t width_ = 0;                // its lanes per block (the first block's)
  int64_t row_ = 0;                  // its lanes per row: a flattened nest's inner loop, else width_
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

/// The calling thread's scratch, reused across calls: registers, locals, blocks (64-byte
/// aligned).
std::vector<uint64_t>& thread_scratch() {
  thread_local std::vector<uint64_t> scratch;
  return scratch;
}

}  // namespace

void Tier0Kernel::prepare_thread() {
  (void)tier0::block_table();
  std::vector<uint64_t>& scratch = thread_scratch();
  constexpr size_t kWords = 32 * kBlock;  // a kernel of up to 32 blocks live at once (256 KiB)
  if (scratch.size() < kWords) scratch.resize(kWords);
}

int32_t run_program(const Tier0Kernel::Program& p, void* const* args, const int64_t* dims, int64_t begin,
                    int64_t end) {
  const kir::Kernel& k = p.k;
  std::vector<uint64_t>& scratch = thread_scratch();
  const size_t regs = (k.exprs.size() + 7) / 8 * 8;
  const size_t words = regs + static_cast<size_t>(p.locals_bytes) / 8 +
                       static_cast<size_t>(p.max_blocks) * static_cast<size_t>(Tier0Kernel::kBlock) + 8;
  if (scratch.size() < words) scratch.resize(words);
  auto* aligned = reinterpret_cast<uint64_t*>((reinterpret_cast<uintptr_t>(scratch.data()) + 63) / 64 * 64);
  Frame frame{p, args, dims, aligned, reinterpret_cast<std::byte*>(aligned + regs),
              reinterpret_cast<std::byte*>(aligned + regs) + p.locals_bytes};
  const auto* scalars = k.num_scalars > 0 ? static_cast<const uint64_t*>(args[k.buffers.size()]) : nullptr;
  for (Id id : p.statics) {
    const Expr& e = k.exprs[id];
    uint64_t raw = 0;
    DType from = DType::Int64;
    switch (e.kind) {
      case ExprKind::Const:
        raw = static_cast<uint64_t>(e.bits);
        from = is_floating(e.dtype) ? DType::Float64 : DType::Int64;
        break;
      case ExprKind::Begin: raw = static_cast<uint64_t>(begin); break;
      case ExprKind::End: raw = static_cast<uint64_t>(end); break;
      case ExprKind::Dim: raw = static_cast<uint64_t>(dims[e.slot]); break;
      case ExprKind::Scalar:
        raw = scalars[e.slot];
        from = is_floating(e.dtype) ? DType::Float64 : DType::Int64;
        break;
      default: break;
    }
    frame.regs[id] = 0;
    if (from == e.dtype || (e.kind != ExprKind::Const && e.kind != ExprKind::Scalar)) {
      frame.regs[id] = raw;
      continue;
    }
    const void* operand = &raw;
    p.table->cast[static_cast<int>(from)][static_cast<int>(e.dtype)](&operand, &frame.regs[id], 1);
  }
  Runner runner(frame);
  runner.eval_all(p.root_hoisted);
  return runner.steps(p.root);
}

}  // namespace lazyjit::runtime

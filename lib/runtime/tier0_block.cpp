// Tier 0: innermost loops a block of lanes at a time (Runner, tier0_runner.h): index values
// affine over a block or computed lane by lane, broadcasts, loads and stores as runs, folds,
// accumulations into columns (values of the row, and comparisons as runs of equal lanes:
// tier0_rows.cpp).
#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <optional>

#include "lowering/internal_error.h"
#include "runtime/tier0_runner.h"

namespace lazyjit::runtime::tier0 {

using lowering::internal_error;

const std::byte* Runner::lanes(Id e, int64_t n) {
  std::byte* out = block(e);
  if (ready(e)) return in_place_[e] != nullptr ? in_place_[e] : out;
  set_ready(e);
  if (row_block(e) != nullptr) {  // one value per row (compute_per_row): spread along the rows
    spread(out, dtype_size(k_.exprs[e].dtype), n);
    per_row_[e] = 0;
  } else if (loop_->form[e] == Form::Uniform) {
    Broadcasted& b = broadcast_[e];
    if (b.epoch != scratch_epoch_ || b.bits != f_.regs[e]) {
      by_size<Broadcast>(dtype_size(k_.exprs[e].dtype), out, static_cast<const void*>(f_.reg(e)), width_);
      b = {scratch_epoch_, f_.regs[e]};
    }
  } else if (row_sum_[e] == block_epoch_) {  // a value of the row plus an affine one
    const RowSum sum = *row_plus_affine(e);
    auto* o = reinterpret_cast<int64_t*>(out);
    const int64_t lane = strides_of(sum.column).lane;
    for_rows(n, [&](int64_t r, int64_t first, int64_t len) {
      const int64_t at = row_start(sum, r, first);
      for (int64_t i = 0; i < len; ++i) o[first + i] = at + lane * i;
    });
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

inline std::optional<Strides> Runner::affine_strides(kir::IndexOp op, Id x, Id y, int64_t n) const {
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
      const bool whole = op == kir::IndexOp::Div;
      if (bx / by == corners(bx, sx).second / by) return whole ? Strides{} : sx;  // within one multiple
      if (sx.row % by != 0) return std::nullopt;
      if (sx.lane % by == 0) return whole ? Strides{sx.lane / by, sx.row / by} : Strides{};
      // Each row within one multiple (a flattened nest's variable over its rows).
      if (bx % by + sx.lane * last_col < by) {
        return whole ? Strides{0, sx.row / by} : Strides{sx.lane, 0};
      }
      return std::nullopt;
    }
  }
  return std::nullopt;
}

inline void Runner::compute_index(Id id, const Expr& e, int64_t n) {
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
  if (op == kir::IndexOp::Add && row_plus_affine(id)) {  // its lanes put only where read
    ready_[id] = 0;
    row_sum_[id] = block_epoch_;
    return;
  }
  set_ready(id);
  auto* o = reinterpret_cast<int64_t*>(block(id));
  if ((op == kir::IndexOp::Div || op == kir::IndexOp::Rem) && affine_offset(x) && one_stride(x, n) &&
      loop_->form[y] == Form::Uniform && f_.index(y) > 0 && f_.index(x) >= 0 && strides_of(x).lane >= 0) {
    // An affine dividend crossing multiples of the divisor: quotient and remainder stepped
    // lane by lane, no division per lane.
    const int64_t d = f_.index(y);
    const auto x0 = static_cast<uint64_t>(f_.index(x)), step = static_cast<uint64_t>(strides_of(x).lane);
    const auto ud = static_cast<uint64_t>(d);
    const auto step_q = static_cast<int64_t>(quotient(step, ud)), step_r = static_cast<int64_t>(remainder(step, ud));
    auto q = static_cast<int64_t>(quotient(x0, ud)), r = static_cast<int64_t>(remainder(x0, ud));
    const bool whole = op == kir::IndexOp::Div;
    for (int64_t i = 0; i < n; ++i) {
      o[i] = whole ? q : r;
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

inline void Runner::divide_by(const int64_t* a, int64_t d, bool whole, int64_t* o, int64_t n) {
  if ((d & (d - 1)) == 0) {  // a power of two: shifts and masks (the lanes as unsigned)
    const int shift = std::countr_zero(static_cast<uint64_t>(d));
    const uint64_t mask = static_cast<uint64_t>(d) - 1;
    for (int64_t i = 0; i < n; ++i) {
      const auto x = static_cast<uint64_t>(a[i]);
      o[i] = static_cast<int64_t>(whole ? x >> shift : x & mask);
    }
    return;
  }
  const double inverse = 1.0 / static_cast<double>(d);
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t x = static_cast<uint64_t>(a[i]);
    if (x >= (uint64_t{1} << 52)) {
      o[i] = static_cast<int64_t>(whole ? x / static_cast<uint64_t>(d) : x % static_cast<uint64_t>(d));
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
    o[i] = whole ? q : r;
  }
}

inline uint64_t Runner::stored_over(uint64_t writes) const {
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

inline void Runner::compute(Id id, int64_t n) {
  const Expr& e = k_.exprs[id];
  if (loop_->form[id] == Form::Row && row_ < n && aligned_) {  // (else lane by lane)
    compute_per_row(id, e, n);
    return;
  }
  if (e.kind == ExprKind::Index) {
    compute_index(id, e, n);
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
      const bool unchanged = e.kind == ExprKind::Load ? (stored_over_ & bit(e.slot)) == 0
                                                      : (loop_->writes_locals & bit(e.slot)) == 0;
      if (e.dtype != DType::Bool && one && strides_of(o).lane == 1 && unchanged) {
        in_place_[id] = base + f_.index(o) * size;  // read where it lies: nothing this loop stores reaches it
        return;
      }
      if (!affine) {
        if (!read_row_runs(out, base, o, n, size)) {
          by_size<Gather>(size, out, base, reinterpret_cast<const int64_t*>(lanes(o, n)), n);
        }
      } else if (one) {
        read_run(out, base, f_.index(o), strides_of(o).lane, n, size);
      } else if (const Strides s = strides_of(o); s.lane != 1 || !read_rows(out, base, f_.index(o), s.row, n, size)) {
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
      // (tier0_rows.cpp, called only where their case may hold: a comparison, a row's value)
      if (ir::op_info(static_cast<ir::OpKind>(e.op)).dtype_rule == ir::DTypeRule::Compare) {
        if (compare_affine(e, reinterpret_cast<uint8_t*>(out), n)) return;
      } else if (e.operands.size() == 2 && (row_block(e.operands[0]) != nullptr || row_block(e.operands[1]) != nullptr)) {
        if (with_row_value(e, out, n)) return;
      } else if (e.operands.size() == 2 &&
                 (loop_->form[e.operands[0]] == Form::Uniform) != (loop_->form[e.operands[1]] == Form::Uniform)) {
        // An operand the same for the whole loop (a step size, a scale) as one value, not a
        // broadcast block: the same scalar semantics, one block fewer read.
        const int which = loop_->form[e.operands[0]] == Form::Uniform ? 0 : 1;
        if (const tier0::BlockFn fn = p_.table->same_with_scalar[which][e.op][static_cast<int>(e.dtype)]) {
          const void* operands[2];
          operands[which] = f_.reg(e.operands[which]);
          operands[1 - which] = lanes(e.operands[1 - which], n);
          fn(operands, out, n);
          return;
        }
      }
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

inline void Runner::write(std::byte* base, DType dtype, Id offset, Id value, int64_t n) {
  const int64_t size = dtype_size(dtype);
  const std::byte* in = lanes(value, n);
  if (!affine_offset(offset)) {
    by_size<Scatter>(size, base, in, reinterpret_cast<const int64_t*>(lanes(offset, n)), n);
  } else if (one_stride(offset, n)) {
    write_run(base, f_.index(offset), strides_of(offset).lane, in, n, size);
  } else if (const Strides s = strides_of(offset); s.lane != 1 || !write_rows(base, f_.index(offset), s.row, in, n, size)) {
    for_rows(n, [&](int64_t r, int64_t first, int64_t len) {
      write_run(base, f_.index(offset) + s.row * r, s.lane, in + first * size, len, size);
    });
  }
}

bool Runner::read_rows(std::byte* out, const std::byte* base, int64_t at, int64_t rows_apart, int64_t n,
                       int64_t size) const {
  if (!rows_move_at_once(n, size)) return false;
  const int64_t bytes = row_ * size, whole = n / row_, rest = n - whole * row_;
  const std::byte* rows = base + at * size;
  p_.table->copy_rows(out, bytes, rows, rows_apart * size, whole, bytes);
  if (rest > 0) std::memcpy(out + whole * bytes, rows + whole * rows_apart * size, static_cast<size_t>(rest * size));
  return true;
}

bool Runner::write_rows(std::byte* base, int64_t at, int64_t rows_apart, const std::byte* in, int64_t n,
                        int64_t size) const {
  if (!rows_move_at_once(n, size) || rows_apart < row_) return false;
  const int64_t bytes = row_ * size, whole = n / row_, rest = n - whole * row_;
  std::byte* rows = base + at * size;
  p_.table->copy_rows(rows, rows_apart * size, in, bytes, whole, bytes);
  if (rest > 0) std::memcpy(rows + whole * rows_apart * size, in + whole * bytes, static_cast<size_t>(rest * size));
  return true;
}

void Runner::read_run(std::byte* out, const std::byte* base, int64_t at, int64_t stride, int64_t n, int64_t size) {
  if (stride == 1) std::memcpy(out, base + at * size, static_cast<size_t>(n * size));
  else if (stride == 0) by_size<Broadcast>(size, out, static_cast<const void*>(base + at * size), n);
  else by_size<Strided>(size, out, base, at, stride, n);
}

inline void Runner::write_run(std::byte* base, int64_t at, int64_t stride, const std::byte* in, int64_t n, int64_t size) {
  if (stride == 1) std::memcpy(base + at * size, in, static_cast<size_t>(n * size));
  else if (stride == 0) std::memcpy(base + at * size, in + (n - 1) * size, static_cast<size_t>(size));
  else by_size<ScatterStrided>(size, base, in, at, stride, n);
}

int32_t Runner::block_loop(const BlockLoop& loop, int64_t lo, int64_t hi) {
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
  rows_ = rows;
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

inline int32_t Runner::run_block(const BlockLoop& loop, int64_t start, int64_t n) {
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

inline bool Runner::distinct(const BlockLoop& loop, int64_t n) {
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

inline int32_t Runner::block_statement(const Stmt& s, int64_t n) {
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
      if (s.offsets.empty() && loop_->fold_rows) {
        // Rows folded into one accumulator (NestInverter::folds_rows): a call per row, in
        // order, as each row's own block made (a row longer than a block: per block, as then).
        const int64_t row = std::max<int64_t>(1, std::min(row_, f_.index(loop_->row)));
        for (int64_t first = 0; first < n; first += row) combine(values + first * size, std::min(row, n - first), f_.local(s.slot));
        return 0;
      }
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

inline void Runner::accumulate(const Stmt& s, int64_t n) {
  const Id value = s.values[0], offset = s.offsets[0];
  const tier0::BlockFn combine = p_.fn[value];
  const int64_t size = dtype_size(k_.exprs[value].dtype);
  std::byte* base = f_.buffer(s.buffers[0]);
  const std::byte* x = lanes(k_.exprs[value].operands[1], n);
  // Each row's elements in one call, rows in order, where o runs along the row: affine, or
  // a row that data picks plus the column (a scatter-add).
  auto by_rows = [&](auto&& row_start_at) {
    for_rows(n, [&](int64_t r, int64_t first, int64_t len) {
      std::byte* at = base + row_start_at(r, first) * size;
      const void* operands[] = {at, x + first * size};
      combine(operands, at, len);
    });
  };
  if (affine_offset(offset) && strides_of(offset).lane == 1) {
    by_rows([&](int64_t r, int64_t) { return f_.index(offset) + strides_of(offset).row * r; });
    return;
  }
  if (const std::optional<RowSum> sum = affine_offset(offset) ? std::nullopt : row_plus_affine(offset);
      sum && strides_of(sum->column).lane == 1) {
    by_rows([&](int64_t r, int64_t first) { return row_start(*sum, r, first); });
    return;
  }
  const auto* at = reinterpret_cast<const int64_t*>(lanes(offset, n));
  for (int64_t i = 0; i < n; ++i) {
    const void* operands[] = {base + at[i] * size, x + i * size};
    combine(operands, base + at[i] * size, 1);
  }
}

}  // namespace lazyjit::runtime::tier0

// Tier 0's values of the row (Runner, tier0_runner.h): in a loop of rows (BlockLoop::row),
// values the same along a row computed once per row (a norm's statistics, a table's row
// picked by an index) and used as such: an operand of the row's elements, the base of a run
// read per row, a comparison with the column as runs of equal lanes.
#include <algorithm>
#include <cstring>
#include <limits>
#include <optional>
#include <utility>

#include "runtime/tier0_runner.h"

namespace lazyjit::runtime::tier0 {

using kir::Expr;
using kir::ExprKind;
using kir::Id;

void Runner::compute_per_row(Id id, const Expr& e, int64_t n) {
  const int64_t rows = rows_of(n);
  in_place_[id] = nullptr;
  std::byte* out = block(id);
  per_row_[id] = block_epoch_;
  if (e.kind == ExprKind::Index) {  // of data (Program::build_block_loop): never affine
    affine_[id] = false;
    const auto* a = reinterpret_cast<const int64_t*>(row_values(e.operands[0], n, 0));
    const auto* b = reinterpret_cast<const int64_t*>(row_values(e.operands[1], n, 1));
    auto* o = reinterpret_cast<int64_t*>(out);
    for (int64_t r = 0; r < rows; ++r) o[r] = index_op(static_cast<kir::IndexOp>(e.op), a[r], b[r]);
    return;
  }
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

const std::byte* Runner::row_values(Id o, int64_t n, size_t which) {
  if (loop_->form[o] == Form::Uniform) return lanes(o, n);
  if (const std::byte* rows = row_block(o)) return rows;
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

void Runner::spread(std::byte* out, int64_t size, int64_t n) {
  for (int64_t r = rows_of(n) - 1; r >= 0; --r) {
    const int64_t first = r * row_, len = std::min(row_, n - first);
    std::byte value[8];
    std::memcpy(value, out + r * size, static_cast<size_t>(size));
    by_size<Broadcast>(size, out + first * size, static_cast<const void*>(value), len);
  }
}

bool Runner::with_row_value(const Expr& e, std::byte* out, int64_t n) {
  if (e.operands.size() != 2 || ir::op_info(static_cast<ir::OpKind>(e.op)).dtype_rule != ir::DTypeRule::Same) return false;
  const std::byte* first = row_block(e.operands[0]);
  const std::byte* second = row_block(e.operands[1]);
  if ((first == nullptr) == (second == nullptr)) return false;  // neither, or both (then e is one too)
  const int which = first != nullptr ? 0 : 1;
  const tier0::BlockFn fn = p_.table->same_with_scalar[which][e.op][static_cast<int>(e.dtype)];
  if (fn == nullptr) return false;
  const int64_t size = dtype_size(e.dtype);
  const std::byte* rows = first != nullptr ? first : second;
  const std::byte* lanes_of = lanes(e.operands[1 - which], n);
  for_rows(n, [&](int64_t r, int64_t at, int64_t len) {
    const void* operands[2];
    operands[which] = rows + r * size;
    operands[1 - which] = lanes_of + at * size;
    fn(operands, out + at * size, len);
  });
  return true;
}

bool Runner::compare_affine(const Expr& e, uint8_t* out, int64_t n) {
  if (ir::op_info(static_cast<ir::OpKind>(e.op)).dtype_rule != ir::DTypeRule::Compare) return false;
  const Id x = e.operands[0], y = e.operands[1];
  // A side is affine, or one value per row (a one-hot's class, loaded at the row) that this
  // block holds per row: stride 0 along the row, its row's value at the row's first lane.
  const auto* row_x = reinterpret_cast<const uint64_t*>(row_block(x));
  const auto* row_y = reinterpret_cast<const uint64_t*>(row_block(y));
  if (k_.exprs[x].dtype != DType::Int64 || !(row_x || affine_offset(x)) || !(row_y || affine_offset(y))) return false;
  const auto op = static_cast<ir::OpKind>(e.op);
  const Strides sx = row_x ? Strides{} : strides_of(x), sy = row_y ? Strides{} : strides_of(y);
  const auto bx = static_cast<uint64_t>(f_.index(x)), by = static_cast<uint64_t>(f_.index(y));
  auto each = [&](auto compare) {
    for_rows(n, [&](int64_t r, int64_t first, int64_t len) {
      // Index arithmetic wraps (kir::IndexOp): the lanes' values in unsigned steps.
      const uint64_t ax = row_x ? row_x[r] : bx + static_cast<uint64_t>(sx.row * r);
      const uint64_t ay = row_y ? row_y[r] : by + static_cast<uint64_t>(sy.row * r);
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

template <class Lane>
bool Runner::compare_by_segments(ir::OpKind op, uint64_t a, int64_t sa, uint64_t b, int64_t sb, int64_t len,
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
    if (k != 0 && d % k == 0 && -d / k >= 0 && -d / k < len) {  // the one lane where the sides meet
      const auto at = static_cast<int64_t>(-d / k);
      out[at] = lane(at);
    }
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

std::optional<Runner::RowSum> Runner::row_plus_affine(Id sum) const {
  const Expr& x = k_.exprs[sum];
  if (!rows_ || !aligned_ || x.kind != ExprKind::Index || static_cast<kir::IndexOp>(x.op) != kir::IndexOp::Add) return std::nullopt;
  auto of_row = [&](Id o) { return row_block(o) != nullptr || (loop_->form[o] == Form::Row && ready(o)); };
  const Id a = x.operands[0], b = x.operands[1];
  if (of_row(a) && affine_offset(b)) return RowSum{a, b};
  if (of_row(b) && affine_offset(a)) return RowSum{b, a};
  return std::nullopt;
}

int64_t Runner::row_start(const RowSum& sum, int64_t r, int64_t first) {
  const std::byte* rows = row_block(sum.row);  // its values per row, or (ready) its lanes
  const int64_t row = rows != nullptr ? reinterpret_cast<const int64_t*>(rows)[r]
                                      : reinterpret_cast<const int64_t*>(block(sum.row))[first];
  return row + f_.index(sum.column) + strides_of(sum.column).row * r;
}

bool Runner::read_row_runs(std::byte* out, const std::byte* base, Id o, int64_t n, int64_t size) {
  const std::optional<RowSum> sum = row_plus_affine(o);
  if (!sum) return false;
  const int64_t lane = strides_of(sum->column).lane;
  for_rows(n, [&](int64_t r, int64_t first, int64_t len) {
    read_run(out + first * size, base, row_start(*sum, r, first), lane, len, size);
  });
  return true;
}

}  // namespace lazyjit::runtime::tier0

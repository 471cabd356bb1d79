// Tier 0's nests run in batches (NestInverter, tier0_inverter.h): a loop of rows that folds
// or accumulates a batch of rows at a time, and a loop of micro-kernels a band at a time
// before the band's epilogue.
#include <algorithm>
#include <optional>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "runtime/tier0_inverter.h"

namespace lazyjit::runtime::tier0 {

std::optional<std::pair<int64_t, int64_t>> NestInverter::coefficients(Id e, int a, int b) const {
  using Pair = std::pair<int64_t, int64_t>;
  const Expr& x = k_.exprs[e];
  if (x.kind == ExprKind::Var) return x.slot == a ? Pair{1, 0} : x.slot == b ? Pair{0, 1} : Pair{0, 0};
  if ((nests_.vars(e) & (bit(a) | bit(b))) == 0) return Pair{0, 0};
  if (x.kind != ExprKind::Index) return std::nullopt;
  const auto l = coefficients(x.operands[0], a, b), r = coefficients(x.operands[1], a, b);
  if (!l || !r) return std::nullopt;
  switch (static_cast<kir::IndexOp>(x.op)) {
    case kir::IndexOp::Add: return std::pair{l->first + r->first, l->second + r->second};
    case kir::IndexOp::Sub: return std::pair{l->first - r->first, l->second - r->second};
    case kir::IndexOp::Mul:
      if (const auto c = b_.constant_value(x.operands[1])) return std::pair{l->first * *c, l->second * *c};
      if (const auto c = b_.constant_value(x.operands[0])) return std::pair{r->first * *c, r->second * *c};
      return std::nullopt;
    default: return std::nullopt;
  }
}

std::optional<NestInverter::Band> NestInverter::band(const Stmt& loop) const {
  if (!is_index(loop.lo, 0) || loop.body.size() != 2) return std::nullopt;
  const Stmt& step = loop.body[0];
  const Stmt& rows = loop.body[1];
  if (step.kind != Stmt::Kind::Matmul || step.micro.tile_at != kir::kNone || rows.kind != Stmt::Kind::For ||
      !is_index(rows.lo, 0) || rows.body.size() != 1 || rows.body[0].kind != Stmt::Kind::For) {
    return std::nullopt;
  }
  const Stmt& cols = rows.body[0];
  const int m = loop.slot, r = rows.slot, tile = step.micro.tile;
  const uint64_t both = bit(m) | bit(r);
  if (!innermost(cols) || ((nests_.vars(cols.lo) | nests_.vars(cols.hi)) & both) != 0) return std::nullopt;
  const auto bound = operands(rows.hi, kir::IndexOp::Min);
  if (!bound) return std::nullopt;
  const auto [first, second] = *bound;
  const std::optional<int64_t> mr = b_.constant_value(first);
  const int64_t size = k_.locals[tile].size;
  if (!mr || *mr <= 0 || size % *mr != 0 || coefficients(second, m, r) != std::pair<int64_t, int64_t>{-*mr, 0}) {
    return std::nullopt;
  }
  const Band band{*mr, size / *mr, second, nests_.is_copy_nest(rows)};
  uint64_t read = bit(step.micro.a) | bit(step.micro.b) | (step.micro.b_rows >= 0 ? bit(step.micro.b_rows) : 0);
  for (Id e : direct_uses(step)) read |= nests_.loads(e);
  uint64_t stored = 0;
  std::vector<char> seen(k_.exprs.size(), 0);  // 1: through the row, 2: not
  auto through_row = [&](auto&& self, Id e) -> bool {
    if ((nests_.vars(e) & both) == 0 && (nests_.locals(e) & bit(tile)) == 0) return true;
    if (seen[e] != 0) return seen[e] == 1;
    const Expr& x = k_.exprs[e];
    bool ok = false;
    if (x.kind == ExprKind::Local && x.slot == tile) {
      ok = !x.operands.empty() && coefficients(x.operands[0], m, r) == std::pair<int64_t, int64_t>{0, band.nr};
    } else if (const auto c = x.kind == ExprKind::Index ? coefficients(e, m, r) : std::nullopt;
               c && c->first == band.mr * c->second) {
      ok = true;  // a multiple of the row, plus invariants
    } else if (x.kind != ExprKind::Var) {  // (m or r alone is not the row)
      ok = std::all_of(x.operands.begin(), x.operands.end(), [&](Id o) { return self(self, o); });
    }
    seen[e] = ok ? 1 : 2;
    return ok;
  };
  for (const Stmt& t : cols.body) {
    if (t.kind != Stmt::Kind::Store) return std::nullopt;
    for (size_t i = 0; i < t.values.size(); ++i) {
      if (!through_row(through_row, t.offsets[i]) || !through_row(through_row, t.values[i])) return std::nullopt;
      stored |= bit(t.buffers[i]);
    }
  }
  if ((stored & read) != 0 || reads_local(k_.body, tile, &cols)) return std::nullopt;
  if (!band.copies && !flattens(rows)) return std::nullopt;
  return band;
}

bool NestInverter::reads_local(const std::vector<Stmt>& stmts, int local, const Stmt* except) const {
  for (const Stmt& s : stmts) {
    if (&s == except) continue;
    for (Id e : direct_uses(s)) {
      if ((nests_.locals(e) & bit(local)) != 0) return true;
    }
    if (s.kind == Stmt::Kind::For && reads_local(s.body, local, except)) return true;
  }
  return false;
}

Stmt NestInverter::banded(Stmt loop, const Band& band) {
  Stmt step = std::move(loop.body[0]), rows = std::move(loop.body[1]);
  const int tile = step.micro.tile;
  const Id zero = b_.index(0), tiles = b_.index(kBandTiles), count = loop.hi;
  const auto [band_slot, c] = b_.new_var();
  const Id first = b_.mul(c, tiles);
  const auto [micro_slot, micro] = b_.new_var();
  std::vector<Stmt> micro_body{std::move(step)};
  b_.substitute(micro_body, {{loop.slot, micro}});
  micro_body[0].micro.tile_at = b_.mul(b_.sub(micro, first), b_.index(band.mr * band.nr));
  Stmt micros{.kind = Stmt::Kind::For, .slot = micro_slot, .lo = first, .hi = b_.min(b_.add(first, tiles), count)};
  micros.body = std::move(micro_body);
  std::vector<Stmt> left{Stmt{.kind = Stmt::Kind::For, .lo = band.rows_left, .hi = band.rows_left}};
  b_.substitute(left, {{loop.slot, first}});  // D - MR c B
  const Id band_rows = b_.mul(b_.index(band.mr), b_.min(tiles, b_.sub(count, first)));
  const auto [q_slot, q] = b_.new_var();
  Stmt epilogue{.kind = Stmt::Kind::For, .slot = q_slot, .lo = zero, .hi = b_.max(zero, b_.min(left[0].lo, band_rows))};
  epilogue.body = std::move(rows.body);
  b_.substitute(epilogue.body, {{loop.slot, first}, {rows.slot, q}});
  b_.kernel().locals[static_cast<size_t>(tile)].size *= kBandTiles;
  Stmt bands{.kind = Stmt::Kind::For, .slot = band_slot, .lo = zero, .hi = b_.ceil_div(count, tiles)};
  bands.body.push_back(std::move(micros));
  bands.body.push_back(band.copies ? std::move(epilogue) : flattened(std::move(epilogue)));
  return bands;
}

const Stmt* NestInverter::rows_of_one_loop(const Stmt& nest) const {
  if (nest.body.size() != 1 || nest.body[0].kind != Stmt::Kind::For || !innermost(nest.body[0])) return nullptr;
  const Stmt& inner = nest.body[0];
  const uint64_t bounds_vars = nests_.vars(inner.lo) | nests_.vars(inner.hi);
  if ((bounds_vars & bit(nest.slot)) != 0 || (nests_.loads(inner.lo) | nests_.loads(inner.hi)) != 0) return nullptr;
  return &inner;
}

bool NestInverter::accumulates(const Stmt& nest) const {
  const Stmt* inner = rows_of_one_loop(nest);
  if (inner == nullptr || inner->body.size() != 1) return false;
  const Stmt& store = inner->body[0];
  if (store.kind != Stmt::Kind::Store || store.values.size() != 1) return false;
  const uint64_t row = bit(nest.slot);
  const Id o = store.offsets[0];
  const Expr& value = k_.exprs[store.values[0]];
  const uint64_t stored = bit(store.buffers[0]), o_loads = nests_.loads(o);
  const bool per_row = (nests_.vars(o) & row) != 0;
  // o the same for every row and reading no memory, or picked per row by data the nest does
  // not store (a scatter)
  if (per_row ? o_loads == 0 || (o_loads & stored) != 0 : o_loads != 0) return false;
  if (value.kind != ExprKind::Op || value.operands.size() != 2) return false;
  if (ir::op_info(static_cast<ir::OpKind>(value.op)).dtype_rule != ir::DTypeRule::Same) return false;
  const Expr& acc = k_.exprs[value.operands[0]];
  return acc.kind == ExprKind::Load && acc.slot == store.buffers[0] && acc.operands[0] == o &&
         (nests_.loads(value.operands[1]) & stored) == 0;
}

bool NestInverter::folds_rows(const Stmt& nest) const {
  const Stmt* inner = rows_of_one_loop(nest);
  if (inner == nullptr || k_.locals.size() > 63) return false;  // (locals as slot bits)
  uint64_t folded = 0;
  for (const Stmt& t : inner->body) {
    if (t.kind != Stmt::Kind::Fold || !t.offsets.empty() || k_.locals[t.slot].size != 1) return false;
    folded |= bit(t.slot);
  }
  return std::none_of(inner->body.begin(), inner->body.end(),
                      [&](const Stmt& t) { return (nests_.locals(t.values[0]) & folded) != 0; });
}

Stmt NestInverter::accumulated(Stmt nest, bool folds) {
  Stmt inner = std::move(nest.body[0]);
  const Id zero = b_.index(0), one = b_.index(1);
  const Id n = b_.max(b_.sub(inner.hi, inner.lo), zero), m = b_.max(b_.sub(nest.hi, nest.lo), zero);
  const Id rows = b_.max(one, b_.div(b_.index(Tier0Kernel::kBlock), b_.max(n, one)));
  const auto [batch_slot, batch] = b_.new_var();
  const Id first = b_.mul(batch, rows);
  const auto [slot, w] = b_.new_var();
  const Id row = b_.add(b_.add(nest.lo, first), b_.div(w, n)), column = b_.add(inner.lo, b_.rem(w, n));
  b_.substitute(inner.body, {{nest.slot, row}, {inner.slot, column}});
  Stmt flat{.kind = Stmt::Kind::For, .slot = slot, .lo = zero, .hi = b_.mul(b_.min(rows, b_.sub(m, first)), n)};
  flat.body = std::move(inner.body);
  rows_.push_back({slot, n, /*fold_rows=*/folds, /*accumulate=*/!folds});
  Stmt batches{.kind = Stmt::Kind::For, .slot = batch_slot, .lo = zero, .hi = b_.ceil_div(m, rows)};
  batches.body.push_back(std::move(flat));
  return batches;
}

bool NestInverter::batchable(const Stmt& nest) const {
  if (nest.kind != Stmt::Kind::For || !is(nest.lo, ExprKind::Begin) || !is(nest.hi, ExprKind::End) || innermost(nest)) {
    return false;
  }
  // Locals as slot bits, each a local of its own (at most 63 of them).
  if (k_.locals.size() > 63) return false;
  const uint64_t row = bit(nest.slot);
  uint64_t written = 0, fresh = 0;
  for (const Stmt& t : nest.body) {
    if (t.kind == Stmt::Kind::Assign) written |= bit(t.slot);
    if (t.kind != Stmt::Kind::For) continue;
    for (const Stmt& u : t.body) {
      if (u.kind == Stmt::Kind::Fold) written |= bit(u.slot);
    }
  }
  uint64_t stored = 0, read = 0;
  bool any_fold = false;
  // Whether `e` reads only locals that are not written here or are fresh in this row and
  // not `folding`; adds the buffers it reads.
  auto reads_ok = [&](Id e, uint64_t folding) {
    read |= nests_.loads(e);
    return (nests_.locals(e) & written & ~(fresh & ~folding)) == 0;
  };
  auto store_ok = [&](const Stmt& t, uint64_t folding) {
    for (size_t i = 0; i < t.values.size(); ++i) {
      if ((nests_.vars(t.offsets[i]) & row) == 0) return false;
      if (!reads_ok(t.offsets[i], folding) || !reads_ok(t.values[i], folding)) return false;
      stored |= bit(t.buffers[i]);
    }
    return true;
  };
  auto scalar = [&](int local) { return k_.locals[local].size == 1; };
  for (const Stmt& t : nest.body) {
    switch (t.kind) {
      case Stmt::Kind::Assign:
        if (!t.offsets.empty() || !scalar(t.slot) || !reads_ok(t.values[0], 0)) return false;
        fresh |= bit(t.slot);
        break;
      case Stmt::Kind::Store:
        if (!store_ok(t, 0)) return false;
        break;
      case Stmt::Kind::For: {
        if (!innermost(t) || ((nests_.vars(t.lo) | nests_.vars(t.hi)) & row) != 0) return false;
        if ((nests_.loads(t.lo) | nests_.loads(t.hi)) != 0 || !reads_ok(t.lo, 0) || !reads_ok(t.hi, 0)) return false;
        uint64_t folding = 0;
        for (const Stmt& u : t.body) {
          if (u.kind == Stmt::Kind::Fold) folding |= bit(u.slot);
        }
        for (const Stmt& u : t.body) {
          if (u.kind == Stmt::Kind::Fold) {
            if (!u.offsets.empty() || !scalar(u.slot) || (fresh & bit(u.slot)) == 0 || !reads_ok(u.values[0], folding)) return false;
          } else if (u.kind != Stmt::Kind::Store || !store_ok(u, folding)) {
            return false;
          }
        }
        any_fold = any_fold || folding != 0;
        break;
      }
      default: return false;
    }
  }
  return any_fold && ((stored & read) == 0 || reads_back_own_rows(nest, stored & read));
}

bool NestInverter::reads_back_own_rows(const Stmt& nest, uint64_t back) const {
  // The offset function is the first one met, which reads no memory; each other one equals
  // it with its inner loop's variable renamed.
  Id first = kir::kNone;
  int first_var = -1;
  auto same = [&](Id offset, int var) {
    if (first == kir::kNone) {
      first = offset;
      first_var = var;
      return nests_.loads(offset) == 0;
    }
    return same_offset(first, first_var, offset, var);
  };
  std::vector<int> checked(k_.exprs.size(), -2);  // per expression: the variable it was found right under
  auto loads_ok = [&](auto&& self, Id e, int var) -> bool {
    if ((nests_.loads(e) & back) == 0 || checked[e] == var) return true;
    const Expr& x = k_.exprs[e];
    if (x.kind == ExprKind::Load && (bit(x.slot) & back) != 0 && !same(x.operands[0], var)) return false;
    if (!std::all_of(x.operands.begin(), x.operands.end(), [&](Id o) { return self(self, o, var); })) return false;
    checked[e] = var;
    return true;
  };
  auto statement_ok = [&](const Stmt& t, int var) {
    for (size_t i = 0; i < t.values.size(); ++i) {
      if (t.kind == Stmt::Kind::Store && (bit(t.buffers[i]) & back) != 0 && !same(t.offsets[i], var)) return false;
      if (!loads_ok(loads_ok, t.values[i], var)) return false;
    }
    return std::all_of(t.offsets.begin(), t.offsets.end(), [&](Id o) { return loads_ok(loads_ok, o, var); });
  };
  Id bounds_lo = kir::kNone, bounds_hi = kir::kNone;  // the inner loops that touch them: one range
  for (const Stmt& t : nest.body) {
    if (t.kind != Stmt::Kind::For) {
      if (!statement_ok(t, -1)) return false;
      continue;
    }
    for (const Stmt& u : t.body) {
      if (!statement_ok(u, t.slot)) return false;
    }
    std::vector<Id> uses;
    subtree_uses(t.body, uses);
    if ((subtree_writes(t.body).buffers & back) != 0 ||
        std::any_of(uses.begin(), uses.end(), [&](Id e) { return (nests_.loads(e) & back) != 0; })) {
      if (bounds_lo != kir::kNone && (t.lo != bounds_lo || t.hi != bounds_hi)) return false;
      bounds_lo = t.lo;
      bounds_hi = t.hi;
    }
  }
  return true;
}

bool NestInverter::same_offset(Id a, int va, Id b, int vb) const {
  const auto var_bit = [](int v) { return v < 0 ? uint64_t{0} : bit(v); };
  if (a == b) return (nests_.vars(a) & (var_bit(va) | var_bit(vb))) == 0 || va == vb;
  const Expr& x = k_.exprs[a];
  const Expr& y = k_.exprs[b];
  if (x.kind == ExprKind::Var && y.kind == ExprKind::Var) return x.slot == va && y.slot == vb;
  if (x.kind != ExprKind::Index || y.kind != ExprKind::Index || x.op != y.op) return false;
  return same_offset(x.operands[0], va, y.operands[0], vb) && same_offset(x.operands[1], va, y.operands[1], vb);
}

Stmt NestInverter::batched(Stmt nest) {
  const Id zero = b_.index(0), one = b_.index(1);
  Id longest = one;
  for (const Stmt& t : nest.body) {
    if (t.kind == Stmt::Kind::For) longest = b_.max(longest, b_.sub(t.hi, t.lo));
  }
  const Id rows = b_.max(one, b_.div(b_.index(Tier0Kernel::kBlock), longest));
  const auto [batch_slot, batch] = b_.new_var();
  const Id base = b_.mul(batch, rows);
  const Id first = b_.max(b_.sub(nest.lo, base), zero), last = b_.min(b_.sub(nest.hi, base), rows);
  Stmt batches{.kind = Stmt::Kind::For, .slot = batch_slot, .lo = b_.div(nest.lo, rows), .hi = b_.ceil_div(nest.hi, rows)};
  absl::flat_hash_map<int, int> arrays;  // each local the nest writes: its array of rows
  for (const Stmt& t : nest.body) {
    if (t.kind == Stmt::Kind::Assign && !arrays.contains(t.slot)) {
      arrays[t.slot] = b_.new_local(k_.locals[t.slot].dtype, Tier0Kernel::kBlock);
    }
  }
  auto elements = [&](Id at) {
    absl::flat_hash_map<int, std::pair<int, Id>> map;
    for (const auto& [local, array] : arrays) map[local] = {array, at};
    return map;
  };
  int row_loop = -1;  // the open loop of row statements in batches.body, and its variable
  Id u = kir::kNone;
  for (Stmt& t : nest.body) {
    if (t.kind == Stmt::Kind::For) {
      const Id n = b_.max(b_.sub(t.hi, t.lo), zero);
      const auto [slot, w] = b_.new_var();
      const Id row = b_.div(w, n);
      Stmt flat{.kind = Stmt::Kind::For, .slot = slot, .lo = b_.mul(first, n), .hi = b_.mul(last, n)};
      flat.body = std::move(t.body);
      b_.substitute(flat.body, {{nest.slot, b_.add(base, row)}, {t.slot, b_.add(t.lo, b_.rem(w, n))}}, elements(row));
      rows_.push_back({slot, n, /*fold_rows=*/true});
      batches.body.push_back(std::move(flat));
      row_loop = -1;
      continue;
    }
    if (row_loop < 0) {
      const auto [slot, var] = b_.new_var();
      batches.body.push_back(Stmt{.kind = Stmt::Kind::For, .slot = slot, .lo = first, .hi = last});
      row_loop = static_cast<int>(batches.body.size()) - 1;
      u = var;
    }
    Stmt& loop = batches.body[static_cast<size_t>(row_loop)];
    std::vector<Stmt> one_statement{std::move(t)};
    b_.substitute(one_statement, {{nest.slot, b_.add(base, u)}}, elements(u));
    loop.body.push_back(std::move(one_statement[0]));
  }
  return batches;
}

}  // namespace lazyjit::runtime::tier0

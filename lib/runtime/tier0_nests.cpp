// Tier 0's loop nests reshaped before a kernel is prepared (NestInverter, tier0_inverter.h:
// its inversions, runs and flattened nests; its batches are in tier0_batches.cpp), and the
// statement helpers tier0.cpp shares (tier0_nests.h).
#include "runtime/tier0_nests.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "runtime/tier0_inverter.h"

namespace lazyjit::runtime::tier0 {

using kir::Id;
using kir::Stmt;

/// The expressions a statement uses itself (not its body's).
std::vector<Id> direct_uses(const Stmt& s) {
  std::vector<Id> uses;
  switch (s.kind) {
    case Stmt::Kind::For: uses = {s.lo, s.hi}; break;
    case Stmt::Kind::Store:
    case Stmt::Kind::Assign:
    case Stmt::Kind::Fold:
    case Stmt::Kind::Check:
      uses = s.offsets;
      uses.insert(uses.end(), s.values.begin(), s.values.end());
      break;
    case Stmt::Kind::Matmul:
      uses = s.micro.a_rows;
      uses.push_back(s.micro.k);
      uses.push_back(s.micro.b_base);
      if (s.micro.cols != kir::kNone) uses.push_back(s.micro.cols);
      if (s.micro.tile_at != kir::kNone) uses.push_back(s.micro.tile_at);
      break;
  }
  return uses;
}

Writes direct_writes(const Stmt& s) {
  Writes w;
  switch (s.kind) {
    case Stmt::Kind::Store:
      for (int b : s.buffers) w.buffers |= bit(b);
      break;
    case Stmt::Kind::Assign:
    case Stmt::Kind::Fold: w.locals |= bit(s.slot); break;
    case Stmt::Kind::Matmul: w.locals |= bit(s.micro.tile); break;
    default: break;
  }
  return w;
}

Writes subtree_writes(const std::vector<Stmt>& stmts) {
  Writes w;
  for (const Stmt& s : stmts) {
    w |= direct_writes(s);
    if (s.kind == Stmt::Kind::For) w |= subtree_writes(s.body);
  }
  return w;
}

void subtree_uses(const std::vector<Stmt>& stmts, std::vector<Id>& uses) {
  for (const Stmt& s : stmts) {
    for (Id e : direct_uses(s)) uses.push_back(e);
    if (s.kind == Stmt::Kind::For) subtree_uses(s.body, uses);
  }
}

bool innermost(const Stmt& loop) {
  return std::none_of(loop.body.begin(), loop.body.end(),
                      [](const Stmt& s) { return s.kind == Stmt::Kind::For || s.kind == Stmt::Kind::Matmul; });
}

std::optional<Stmt> NestInverter::checks_ahead(Stmt& nest) {
  if (nest.kind != Stmt::Kind::For || innermost(nest)) return std::nullopt;
  const auto is_check = [](const Stmt& t) { return t.kind == Stmt::Kind::Check; };
  if (std::count_if(nest.body.begin(), nest.body.end(), is_check) != 1) return std::nullopt;
  const auto check = std::find_if(nest.body.begin(), nest.body.end(), is_check);
  const Writes written = subtree_writes(nest.body);
  for (Id v : check->values) {
    if ((nests_.loads(v) & written.buffers) != 0 || (nests_.locals(v) & written.locals) != 0) return std::nullopt;
  }
  const auto [slot, row] = b_.new_var();
  Stmt checks{.kind = Stmt::Kind::For, .slot = slot, .lo = nest.lo, .hi = nest.hi};
  checks.body.push_back(std::move(*check));
  nest.body.erase(check);
  b_.substitute(checks.body, {{nest.slot, row}});
  return checks;
}

void NestInverter::invert(std::vector<Stmt>& body) {
  std::vector<Stmt> out;
  for (Stmt& s : body) {
    if (std::optional<Stmt> checks = checks_ahead(s)) {
      out.push_back(*std::move(checks));
      ++checked_ahead_;
    }
    if (s.kind != Stmt::Kind::For || nests_.is_copy_nest(s)) {  // a copy nest runs as copies instead
      out.push_back(std::move(s));
    } else if (const std::optional<Band> b = band(s)) {
      out.push_back(banded(std::move(s), *b));
      ++banded_;
    } else if (const bool folds = folds_rows(s); folds || accumulates(s)) {
      out.push_back(accumulated(std::move(s), folds));
      ++batched_;
    } else if (const std::optional<Runs> r = runs(s)) {
      const bool linear = r->one || read_linearly(s, r->base);
      out.push_back(linear ? linearised(std::move(s), *r) : by_rows(std::move(s), *r));
      ++flattened_;
    } else if (flattenable(s)) {
      out.push_back(flattened(std::move(s)));
      ++flattened_;
    } else if (batchable(s)) {
      out.push_back(batched(std::move(s)));
      ++batched_;
    } else if (!invertible(s)) {
      invert(s.body);
      out.push_back(std::move(s));
    } else {
      std::vector<Stmt> inners = std::move(s.body);
      s.body.clear();
      // The nest split into one per inner loop; a short one inverted, or flattened where its
      // rows lie whole in memory.
      for (Stmt& inner : inners) {
        Stmt outer = s;
        if (!short_under(inner, s)) {
          outer.body.push_back(std::move(inner));
          out.push_back(std::move(outer));
        } else if (moves_rows(inner)) {
          outer.body.push_back(std::move(inner));
          out.push_back(flattened(std::move(outer)));
          ++flattened_;
        } else {
          std::swap(outer.body, inner.body);
          out.push_back(chunked(std::move(outer), std::move(inner)));
        }
      }
    }
  }
  body = std::move(out);
}

std::optional<int64_t> NestInverter::upper(Id e) const {
  const Expr& x = k_.exprs[e];
  if (x.kind == ExprKind::Const) return x.bits;
  if (x.kind != ExprKind::Index) return std::nullopt;
  const auto op = static_cast<kir::IndexOp>(x.op);
  const std::optional<int64_t> a = upper(x.operands[0]), b = upper(x.operands[1]);
  if (op == kir::IndexOp::Min) return a && b ? std::min(*a, *b) : a ? a : b;
  if (op == kir::IndexOp::Max && a && b) return std::max(*a, *b);
  return std::nullopt;
}

Stmt NestInverter::chunked(Stmt outer, Stmt inner) {
  const std::optional<int64_t> steps = upper(outer.hi);
  if (steps && *steps <= kChunk) {  // one chunk
    inner.body.push_back(std::move(outer));
    return inner;
  }
  const Id zero = b_.index(0), chunk = b_.index(kChunk);
  const auto [slot, strip] = b_.new_var();
  Stmt strips{.kind = Stmt::Kind::For, .slot = slot, .lo = zero,
              .hi = b_.ceil_div(b_.max(b_.sub(outer.hi, outer.lo), zero), chunk)};
  const Id first = b_.add(outer.lo, b_.mul(strip, chunk));
  outer.hi = b_.min(b_.add(first, chunk), outer.hi);
  outer.lo = first;
  inner.body.push_back(std::move(outer));
  strips.body.push_back(std::move(inner));
  return strips;
}

std::optional<std::pair<Id, Id>> NestInverter::operands(Id e, kir::IndexOp op) const {
  const Expr& x = k_.exprs[e];
  if (x.kind != ExprKind::Index || static_cast<kir::IndexOp>(x.op) != op) return std::nullopt;
  return std::pair{x.operands[0], x.operands[1]};
}

std::optional<NestInverter::Runs> NestInverter::runs(const Stmt& nest) {
  if (nest.body.size() != 1 || nest.body[0].kind != Stmt::Kind::For || !innermost(nest.body[0])) return std::nullopt;
  const Stmt& inner = nest.body[0];
  const auto hi = operands(inner.hi, kir::IndexOp::Min);                      // min(hi - base, m)
  const auto left = hi ? operands(hi->first, kir::IndexOp::Sub) : std::nullopt;  // hi - base
  if (!left) return std::nullopt;
  const Id length = hi->second, end = left->first, base = left->second;
  const auto product = operands(base, kir::IndexOp::Mul);  // run * n
  if (!product || !is(product->first, ExprKind::Var) || k_.exprs[product->first].slot != nest.slot) return std::nullopt;
  const Id n = product->second;
  const auto at_least_one = operands(n, kir::IndexOp::Max);  // max(m, 1)
  if (n != length && !(at_least_one && at_least_one->first == length && is_index(at_least_one->second, 1))) {
    return std::nullopt;
  }
  const auto lo = operands(inner.lo, kir::IndexOp::Max);                        // max(lo - base, 0)
  const auto from = lo ? operands(lo->first, kir::IndexOp::Sub) : std::nullopt;  // lo - base
  if (!from || !is_index(lo->second, 0) || from->second != base) return std::nullopt;
  const auto first = operands(nest.lo, kir::IndexOp::Div);   // lo / n
  const auto last = operands(nest.hi, kir::IndexOp::Div);    // (hi + n - 1) / n
  const auto sum = last ? operands(last->first, kir::IndexOp::Add) : std::nullopt;
  if (!first || first->first != from->first || first->second != n || !sum || last->second != n || sum->first != end) {
    return std::nullopt;
  }
  const auto less = operands(sum->second, kir::IndexOp::Sub);  // n - 1, folded when n is a constant
  const bool n_less_one = (less && less->first == n && is_index(less->second, 1)) ||
                          (is(n, ExprKind::Const) && is_index(sum->second, k_.exprs[n].bits - 1));
  if (!n_less_one) return std::nullopt;
  const uint64_t both = bit(nest.slot) | bit(inner.slot);
  if (((nests_.vars(from->first) | nests_.vars(end)) & both) != 0) return std::nullopt;
  // Runs of length 0 under n = max(0, 1) store nothing, whatever the slice says.
  const Id stop = n == length ? end : b_.add(from->first, b_.mul(b_.sub(end, from->first), b_.min(length, b_.index(1))));
  const bool one = is(from->first, ExprKind::Begin) && is(end, ExprKind::End) && k_.count == n;
  return Runs{n, base, from->first, stop, one};
}

bool NestInverter::read_linearly(const Stmt& nest, Id base) const {
  const Stmt& inner = nest.body[0];
  std::vector<char> seen(k_.exprs.size(), 0);
  bool other_use = false;
  auto visit = [&](auto&& self, Id e) -> void {
    if (other_use || seen[e]) return;
    seen[e] = 1;
    const auto sum_of = operands(e, kir::IndexOp::Add);
    if (sum_of && sum_of->first == base && is(sum_of->second, ExprKind::Var) && k_.exprs[sum_of->second].slot == inner.slot) return;
    if (is(e, ExprKind::Var)) {
      other_use = k_.exprs[e].slot == nest.slot || k_.exprs[e].slot == inner.slot;
      return;
    }
    for (Id o : k_.exprs[e].operands) self(self, o);
  };
  std::vector<Id> uses;
  subtree_uses(inner.body, uses);
  for (Id e : uses) visit(visit, e);
  return !other_use;
}

Stmt NestInverter::linearised(Stmt nest, const Runs& runs) {
  Stmt inner = std::move(nest.body[0]);
  const auto [slot, w] = b_.new_var();
  b_.substitute(inner.body, {{nest.slot, b_.index(0)}, {inner.slot, w}});
  Stmt flat{.kind = Stmt::Kind::For, .slot = slot, .lo = runs.lo, .hi = runs.hi};
  flat.body = std::move(inner.body);
  return flat;
}

Stmt NestInverter::by_rows(Stmt nest, const Runs& runs) {
  Stmt inner = std::move(nest.body[0]);
  const auto [slot, w] = b_.new_var();
  b_.substitute(inner.body, {{nest.slot, b_.div(w, runs.n)}, {inner.slot, b_.rem(w, runs.n)}});
  Stmt flat{.kind = Stmt::Kind::For, .slot = slot, .lo = runs.lo, .hi = runs.hi};
  flat.body = std::move(inner.body);
  rows_.push_back({slot, runs.n});
  return flat;
}

bool NestInverter::flattenable(const Stmt& nest) const {
  if (nest.body.size() != 1 || nest.body[0].kind != Stmt::Kind::For) return false;
  return !short_under(nest.body[0], nest) && flattens(nest);
}

bool NestInverter::flattens(const Stmt& nest) const {
  const Stmt& inner = nest.body[0];
  if (((nests_.vars(inner.lo) | nests_.vars(inner.hi)) & bit(nest.slot)) != 0) return false;
  const std::optional<int64_t> n = upper(inner.hi);
  if (!n || *n > kShort || inner.body.empty()) return false;
  uint64_t stored = 0, read = 0;
  for (const Stmt& t : inner.body) {
    if (t.kind != Stmt::Kind::Store) return false;
    for (size_t i = 0; i < t.values.size(); ++i) {
      stored |= bit(t.buffers[i]);
      read |= nests_.loads(t.offsets[i]);
    }
  }
  if ((stored & read) != 0) return false;
  // The values read a stored buffer only at the offset every store to it has, and in one
  // store statement: a block loop checks such a block's offsets for distinct lanes
  // (Program::build_block_loop); any other runs a lane at a time, slower than unflattened.
  bool reads_stored = false;
  for (const Stmt& t : inner.body) {
    for (Id v : t.values) reads_stored = reads_stored || (nests_.loads(v) & stored) != 0;
  }
  if (!reads_stored) return true;
  if (inner.body.size() != 1) return false;
  std::vector<char> seen(k_.exprs.size(), 0);
  auto where_stored = [&](auto&& self, Id e) -> bool {
    if (seen[e] || (nests_.loads(e) & stored) == 0) return true;
    seen[e] = 1;
    const Expr& x = k_.exprs[e];
    if (x.kind == ExprKind::Load && (bit(x.slot) & stored) != 0) {
      for (const Stmt& t : inner.body) {
        for (size_t i = 0; i < t.buffers.size(); ++i) {
          if (bit(t.buffers[i]) == bit(x.slot) && t.offsets[i] != x.operands[0]) return false;
        }
      }
      return true;
    }
    for (Id o : x.operands) {
      if (!self(self, o)) return false;
    }
    return true;
  };
  for (const Stmt& t : inner.body) {
    for (Id v : t.values) {
      if (!where_stored(where_stored, v)) return false;
    }
  }
  return true;
}

Stmt NestInverter::flattened(Stmt nest) {
  Stmt inner = std::move(nest.body[0]);
  const Id zero = b_.index(0);
  const Id n = b_.max(b_.sub(inner.hi, inner.lo), zero), m = b_.max(b_.sub(nest.hi, nest.lo), zero);
  const auto [slot, w] = b_.new_var();
  b_.substitute(inner.body, {{nest.slot, b_.add(nest.lo, b_.div(w, n))}, {inner.slot, b_.add(inner.lo, b_.rem(w, n))}});
  Stmt flat{.kind = Stmt::Kind::For, .slot = slot, .lo = zero, .hi = b_.mul(m, n)};
  flat.body = std::move(inner.body);
  rows_.push_back({slot, n});
  return flat;
}

bool NestInverter::moves_rows(const Stmt& inner) const {
  auto unit = [&](Id offset) { return coefficients(offset, inner.slot, inner.slot) == std::pair<int64_t, int64_t>{1, 0}; };
  std::vector<char> seen(k_.exprs.size(), 0);
  auto loads_unit = [&](auto&& self, Id e) -> bool {
    if (seen[e] || nests_.loads(e) == 0) return true;
    seen[e] = 1;
    const Expr& x = k_.exprs[e];
    if (x.kind == ExprKind::Load) return unit(x.operands[0]);
    return std::all_of(x.operands.begin(), x.operands.end(), [&](Id o) { return self(self, o); });
  };
  for (const Stmt& t : inner.body) {
    for (size_t i = 0; i < t.values.size(); ++i) {
      if (!unit(t.offsets[i]) || !loads_unit(loads_unit, t.values[i])) return false;
    }
  }
  return true;
}

bool NestInverter::short_under(const Stmt& inner, const Stmt& outer) const {
  const std::optional<int64_t> n = upper(inner.hi), m = upper(outer.hi);
  return n && *n <= kShort && (!m || *m > *n);
}

bool NestInverter::invertible(const Stmt& nest) const {
  uint64_t stored = 0, read = 0;
  bool any_short = false;
  for (const Stmt& inner : nest.body) {
    if (inner.kind != Stmt::Kind::For) return false;
    if (((nests_.vars(inner.lo) | nests_.vars(inner.hi)) & bit(nest.slot)) != 0) return false;
    read |= nests_.loads(inner.lo) | nests_.loads(inner.hi);
    for (const Stmt& t : inner.body) {
      if (t.kind != Stmt::Kind::Store) return false;
      for (size_t i = 0; i < t.values.size(); ++i) {
        if (nests_.loads(t.offsets[i]) != 0) return false;
        stored |= bit(t.buffers[i]);
        read |= nests_.loads(t.values[i]);
      }
    }
    any_short = any_short || short_under(inner, nest);
  }
  return any_short && (stored & read) == 0;
}

Inverted invert_nests(kir::Builder& b) {
  NestInverter inverter(b);
  inverter.invert(b.kernel().body);
  return {inverter.flattened(), inverter.batched(), inverter.banded(), inverter.checked_ahead(), inverter.rows()};
}

}  // namespace lazyjit::runtime::tier0

// Tier 0's loop nests reshaped before a kernel is prepared (NestInverter), and the statement
// helpers tier0.cpp shares (tier0_nests.h).
#include "runtime/tier0_nests.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/container/flat_hash_map.h"

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

namespace {

/// Loop nests inverted so that tier 0's blocks are long (Tier0Kernel's constructor).
///
/// Tier 0 runs an innermost loop a block at a time, and a block costs a fixed amount besides
/// its lanes. A nest whose inner loops are short under a long one (a pack: MR or NR lanes for
/// each of K steps) would pay that cost per handful of elements, so the nest runs inverted:
/// each short inner loop outside, the long one inside it, strip-mined: the long loop in
/// chunks of kChunk steps, each chunk run by every step of the short loop before the next
/// (a pack of B reads kChunk rows of it, each a few cache lines, NR times over: from L1, not
/// across all of K). That reorders the nest's stores,
/// which is the same result when its iterations are independent: its inner loops hold stores
/// only (no fold, assignment or check), at offsets of index arithmetic alone (no data-dependent
/// scatter: the lowering's kernels store such an element once), and nothing in the nest reads
/// a buffer the nest stores to. A pack of a stored operand is a copy nest (CopyNests) and is
/// left to run as copies. A short nest of stores under a loop that is not longer (a
/// product's epilogue, NR columns for each of MR rows) is flattened instead: one loop over
/// both, in the nest's own order, one block where there were MR. So is an elementwise
/// kernel's slice in runs (KernelContext::for_runs) that reads its elements at their linear
/// index alone: one loop over the slice, however short its rows.
class NestInverter {
 public:
  /// Inner loops of at most this many iterations under a longer loop are inverted.
  static constexpr int64_t kShort = 32;
  /// Steps of the long loop per chunk: a pack of B's rows of 32 floats then holds 16 KB of B
  /// and 16 KB of the panel at a time.
  static constexpr int64_t kChunk = 128;

  /// Inverts the nests of `b`'s kernel, adding the expressions a strip-mined nest needs.
  explicit NestInverter(kir::Builder& b) : b_(b), k_(b.kernel()), nests_(k_) {}

  void invert(std::vector<Stmt>& body) {
    std::vector<Stmt> out;
    for (Stmt& s : body) {
      if (s.kind != Stmt::Kind::For || nests_.is_copy_nest(s)) {  // a copy nest runs as copies instead
        out.push_back(std::move(s));
      } else if (const std::optional<Band> b = band(s)) {
        out.push_back(banded(std::move(s), *b));
        ++banded_;
      } else if (accumulates(s)) {
        out.push_back(accumulated(std::move(s)));
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
        for (Stmt& inner : inners) {  // the nest split into one per inner loop, short ones inverted
          Stmt outer = s;
          if (short_under(inner, s)) {
            std::swap(outer.body, inner.body);
            out.push_back(chunked(std::move(outer), std::move(inner)));
          } else {
            outer.body.push_back(std::move(inner));
            out.push_back(std::move(outer));
          }
        }
      }
    }
    body = std::move(out);
  }

  /// How many nests invert() flattened, how many loops of rows it batched, and how many loops
  /// of micro-kernels it runs a band at a time.
  int flattened() const { return flattened_; }
  int batched() const { return batched_; }
  int banded() const { return banded_; }
  /// Per loop it made of rows: its slot, the rows' length, whether its folds are per row.
  const std::vector<tier0::Rows>& rows() const { return rows_; }

 private:
  /// The largest value `e` may take, if its expression bounds it.
  std::optional<int64_t> upper(Id e) const {
    const Expr& x = k_.exprs[e];
    if (x.kind == ExprKind::Const) return x.bits;
    if (x.kind != ExprKind::Index) return std::nullopt;
    const auto op = static_cast<kir::IndexOp>(x.op);
    const std::optional<int64_t> a = upper(x.operands[0]), b = upper(x.operands[1]);
    if (op == kir::IndexOp::Min) return a && b ? std::min(*a, *b) : a ? a : b;
    if (op == kir::IndexOp::Max && a && b) return std::max(*a, *b);
    return std::nullopt;
  }

  /// `inner` with `outer` (holding inner's old body) as its body, strip-mined: `for c: inner:
  /// for v in [lo + c * kChunk, min(lo + c * kChunk + kChunk, hi))`. Only the long loop's
  /// order within a chunk is kept: the nest's iterations are independent (invertible).
  Stmt chunked(Stmt outer, Stmt inner) {
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

  /// The operands of `e` when it is Index expression `op`.
  std::optional<std::pair<Id, Id>> operands(Id e, kir::IndexOp op) const {
    const Expr& x = k_.exprs[e];
    if (x.kind != ExprKind::Index || static_cast<kir::IndexOp>(x.op) != op) return std::nullopt;
    return std::pair{x.operands[0], x.operands[1]};
  }
  bool is(Id e, ExprKind kind) const { return k_.exprs[e].kind == kind; }
  bool is_index(Id e, int64_t value) const { return is(e, ExprKind::Const) && k_.exprs[e].bits == value; }

  /// Where `nest` is a slice [lo, hi) in runs of n elements (KernelContext::for_runs: `for
  /// run in [lo / n, (hi + n - 1) / n): for j in [max(lo - run n, 0), min(hi - run n, m))`,
  /// m the run's length, n = m or max(m, 1)), with lo and hi invariant in it ([Begin, End):
  /// an elementwise kernel; a part of a row: a head's run in the heads' cat): its
  /// iterations are the elements lo to hi in order, one long loop for tier 0 however short
  /// the runs (a weight's update over rows of 10 ran in blocks of 10; a softmax's rows of 64
  /// in blocks of 64; the cat, a copy of 32 per head and row).
  struct Runs {
    Id n, base;  ///< the run length, run n
    Id lo, hi;   ///< the slice; hi is lo where the runs are empty (m = 0 < n)
    /// The slice is [Begin, End) of a kernel of n iterations: one run, run 0, so j is the
    /// linear index (a 1-D parameter's update, whose operands read j and whose result
    /// stores run n + j: the same element, which tier 0 must see to run it a block at a time).
    bool one = false;
  };
  std::optional<Runs> runs(const Stmt& nest) {
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

  /// Whether the statements of runs `nest` (base: run n) read run and j only through run n + j
  /// (an elementwise kernel whose operands are all read at the linear index).
  bool read_linearly(const Stmt& nest, Id base) const {
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

  /// `nest` (runs read linearly) as `for w in [lo, hi)` over its statements, with run n + j
  /// replaced by w: run becomes 0 and j becomes w, which the builder folds to w.
  Stmt linearised(Stmt nest, const Runs& runs) {
    Stmt inner = std::move(nest.body[0]);
    const auto [slot, w] = b_.new_var();
    b_.substitute(inner.body, {{nest.slot, b_.index(0)}, {inner.slot, w}});
    Stmt flat{.kind = Stmt::Kind::For, .slot = slot, .lo = runs.lo, .hi = runs.hi};
    flat.body = std::move(inner.body);
    return flat;
  }

  /// `nest` (runs of length n read otherwise too: a row's index, a causal mask, a head) as
  /// `for w in [lo, hi)` with run = w / n and j = w % n: a block holds whole runs as its
  /// rows (BlockLoop::row), along which index values stay affine.
  Stmt by_rows(Stmt nest, const Runs& runs) {
    Stmt inner = std::move(nest.body[0]);
    const auto [slot, w] = b_.new_var();
    b_.substitute(inner.body, {{nest.slot, b_.div(w, runs.n)}, {inner.slot, b_.rem(w, runs.n)}});
    Stmt flat{.kind = Stmt::Kind::For, .slot = slot, .lo = runs.lo, .hi = runs.hi};
    flat.body = std::move(inner.body);
    rows_.push_back({slot, runs.n});
    return flat;
  }

  /// Whether `nest` is a loop whose body is one short innermost loop of stores (a matmul's
  /// epilogue: NR columns for each of MR rows) whose bounds do not depend on it, which
  /// inverting would not lengthen (its own loop is not the longer), and which reads a buffer
  /// it stores to only where it stores it (an optimiser's update of its state in place: the
  /// block loop then checks, block by block, that those offsets are distinct).
  bool flattenable(const Stmt& nest) const {
    if (nest.body.size() != 1 || nest.body[0].kind != Stmt::Kind::For) return false;
    return !short_under(nest.body[0], nest) && flattens(nest);
  }

  /// Whether `nest`, a loop whose body is one loop, may run as one loop over both (flattened):
  /// flattenable's conditions but the length of the outer loop.
  bool flattens(const Stmt& nest) const {
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

  /// `nest` as one loop over its iterations in their order, `for w in [0, m n)` with the
  /// outer variable lo + w / n and the inner one lo' + w % n (n iterations of the inner loop,
  /// m of the outer): one block where there were m short ones, the same stores in the same order.
  Stmt flattened(Stmt nest) {
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

  /// Micro-kernels per band (banded): a band of rows of the product, its tiles' epilogue
  /// in blocks of whole rows.
  static constexpr int64_t kBandTiles = 16;

  /// A loop of micro-kernels, each followed by its tile's epilogue (Matmul::matmul,
  /// lowering/kernel_matmul.cpp), that banded() may run a band at a time.
  struct Band {
    int64_t mr = 0, nr = 0;  ///< the tile's rows and columns
    Id rows_left = kir::kNone;  ///< D: the product's rows left from micro-kernel 0's first
    bool copies = false;        ///< the epilogue is a copy nest (else it runs flattened)
  };

  /// The coefficients of loop variables (slots) a and b in index expression e, where e is
  /// built from them and invariants by Add, Sub and Mul by a constant.
  std::optional<std::pair<int64_t, int64_t>> coefficients(Id e, int a, int b) const {
    const Expr& x = k_.exprs[e];
    if (x.kind == ExprKind::Var) return x.slot == a ? std::pair<int64_t, int64_t>{1, 0} : x.slot == b ? std::pair<int64_t, int64_t>{0, 1} : std::pair<int64_t, int64_t>{0, 0};
    if ((nests_.vars(e) & (bit(a) | bit(b))) == 0) return std::pair<int64_t, int64_t>{0, 0};
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

  /// Whether `loop` is a loop of micro-kernels with their epilogue:
  ///   for m in [0, U): matmul tile = ...; for r in [0, min(MR, D - MR m)): for j: stores S
  /// where D and the columns' bounds are invariant in m and r, S reads the tile only at
  /// r NR + j (the tile's r, j: NR its size over MR) and depends on m and r otherwise only
  /// through MR m + r (the product's row), the epilogue stores nothing the micro-kernels
  /// read, nothing else reads the tile, and the epilogue runs as copies or flattened.
  std::optional<Band> band(const Stmt& loop) const {
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

  /// Whether a statement of `stmts` other than the stores of `except` reads local `local`.
  bool reads_local(const std::vector<Stmt>& stmts, int local, const Stmt* except) const {
    for (const Stmt& s : stmts) {
      if (&s == except) continue;
      for (Id e : direct_uses(s)) {
        if ((nests_.locals(e) & bit(local)) != 0) return true;
      }
      if (s.kind == Stmt::Kind::For && reads_local(s.body, local, except)) return true;
    }
    return false;
  }

  /// `loop` (band) a band of kBandTiles micro-kernels at a time, each into its place in a
  /// tile array of the band, then the band's epilogue over its rows q (m = c B, r = q: the
  /// same rows MR m + r, each reading the band at q NR + j):
  ///   for c in [0, ceil(U / B)):
  ///     for m' in [c B, min(c B + B, U)): matmul tile[(m' - c B) MR NR] = ...
  ///     for q in [0, max(0, min(D(c B), MR min(B, U - c B)))): for j: S(c B, q)
  /// The micro-kernels write nothing the epilogues read but their own tiles, and the
  /// epilogues store nothing the micro-kernels read, so the band's order is the same result;
  /// the rows q are the nest's (m, r) in its order. Where a tile's epilogue was one block of
  /// at most MR rows, the band's runs in blocks of whole rows (flattened) or as one copy.
  Stmt banded(Stmt loop, const Band& band) {
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

  /// Whether `nest` is a loop of rows that accumulates each row into the same elements (a
  /// sum over a dim that is not the innermost: a bias's gradient, a norm's over the batch):
  ///   for i in [lo, hi): for j in [a, b): B[o] = op(B[o], x)
  /// with a, b and o invariant in i and reading no memory, op an elementwise operation of
  /// two operands, and x reading nothing the nest stores. Row by row, each element of B is
  /// combined with the rows' values in their order; a tier-0 block per row paid its fixed
  /// cost per row of j.
  bool accumulates(const Stmt& nest) const {
    if (nest.body.size() != 1 || nest.body[0].kind != Stmt::Kind::For || !innermost(nest.body[0])) return false;
    const Stmt& inner = nest.body[0];
    const uint64_t row = bit(nest.slot);
    if (((nests_.vars(inner.lo) | nests_.vars(inner.hi)) & row) != 0 || (nests_.loads(inner.lo) | nests_.loads(inner.hi)) != 0) {
      return false;
    }
    if (inner.body.size() != 1 || inner.body[0].kind != Stmt::Kind::Store || inner.body[0].values.size() != 1) return false;
    const Stmt& store = inner.body[0];
    const Id o = store.offsets[0];
    const Expr& value = k_.exprs[store.values[0]];
    if ((nests_.vars(o) & row) != 0 || nests_.loads(o) != 0 || value.kind != ExprKind::Op || value.operands.size() != 2) return false;
    if (ir::op_info(static_cast<ir::OpKind>(value.op)).dtype_rule != ir::DTypeRule::Same) return false;
    const Expr& acc = k_.exprs[value.operands[0]];
    const uint64_t stored = bit(store.buffers[0]);
    return acc.kind == ExprKind::Load && acc.slot == store.buffers[0] && acc.operands[0] == o &&
           (nests_.loads(value.operands[1]) & stored) == 0;
  }

  /// `nest` (accumulates) in batches of R rows, R = max(1, kBlock / n) for rows of n:
  ///   for c in [0, ceil((hi - lo) / R)): for w in [0, min(R, hi - lo - c R) n):
  ///     B[o] = op(B[o], x) at i = lo + c R + w / n, j = a + w % n
  /// whose block loop computes x for the batch and combines it into B row by row
  /// (BlockLoop::accumulate).
  Stmt accumulated(Stmt nest) {
    Stmt inner = std::move(nest.body[0]);
    const Id zero = b_.index(0), one = b_.index(1);
    const Id n = b_.max(b_.sub(inner.hi, inner.lo), zero), m = b_.max(b_.sub(nest.hi, nest.lo), zero);
    const Id rows = b_.max(one, b_.div(b_.index(Tier0Kernel::kBlock), b_.max(n, one)));
    const auto [batch_slot, batch] = b_.new_var();
    const Id first = b_.mul(batch, rows);
    const auto [slot, w] = b_.new_var();
    b_.substitute(inner.body, {{nest.slot, b_.add(b_.add(nest.lo, first), b_.div(w, n))}, {inner.slot, b_.add(inner.lo, b_.rem(w, n))}});
    Stmt flat{.kind = Stmt::Kind::For, .slot = slot, .lo = zero, .hi = b_.mul(b_.min(rows, b_.sub(m, first)), n)};
    flat.body = std::move(inner.body);
    rows_.push_back({slot, n, /*fold_rows=*/false, /*accumulate=*/true});
    Stmt batches{.kind = Stmt::Kind::For, .slot = batch_slot, .lo = zero, .hi = b_.ceil_div(m, rows)};
    batches.body.push_back(std::move(flat));
    return batches;
  }

  /// Whether `nest` is a loop of rows that may run a batch of rows at a time, each of its
  /// statements for every row of the batch before the next (a rows kernel: a row's
  /// accumulators assigned, folded over short loops, and stored). It qualifies when:
  ///  - it is the kernel's loop [Begin, End), and its statements are assignments of scalar
  ///    locals, stores, and innermost loops of folds into scalar locals and stores (at least
  ///    one fold: a loop of rows that only stores runs as copies or one block per row), whose
  ///    bounds read neither the row nor memory;
  ///  - each local the nest writes is assigned in every row before the row reads or folds
  ///    it, and no inner loop reads a local it folds (a scan runs in order);
  ///  - every store's offset reads the row, and nothing the nest reads is stored in it.
  /// Rows then share nothing but what they read (a parameter donated to a result is read at
  /// each element before that element is written, which batching keeps), and the kernel IR
  /// stores each element once, so the batches' order of stores is the same result.
  bool batchable(const Stmt& nest) const {
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
    return any_fold && (stored & read) == 0;
  }

  /// `nest` (batchable) in batches of R rows, R the rows of its longest inner loop that a
  /// block holds (at least 1), each batch the rows [c R, c R + R) of the slice:
  ///   for c in [Begin / R, ceil(End / R)):
  ///     row statements:  for u in [first, last): ... (row c R + u, each local l as L[u])
  ///     an inner loop of n:  for w in [first n, last n): ... (row c R + w / n, its variable
  ///                          lo + w % n, each local as L[w / n]; rows of n: BlockLoop::row)
  /// with first and last the batch's rows in the slice, and L an array of a block's rows per
  /// local the nest writes. Each row folds its n values in one call of the fold (a segment
  /// of the block, Runner::block_statement), as it did in a block of its own: the same sums.
  Stmt batched(Stmt nest) {
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

  bool short_under(const Stmt& inner, const Stmt& outer) const {
    const std::optional<int64_t> n = upper(inner.hi), m = upper(outer.hi);
    return n && *n <= kShort && (!m || *m > *n);
  }

  bool invertible(const Stmt& nest) const {
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

  kir::Builder& b_;  // new expressions go after their operands, as the program's analysis wants
  const kir::Kernel& k_;
  const CopyNests nests_;  // of the kernel as given
  int flattened_ = 0, batched_ = 0, banded_ = 0;
  std::vector<tier0::Rows> rows_;
};

}  // namespace

Inverted invert_nests(kir::Builder& b) {
  NestInverter inverter(b);
  inverter.invert(b.kernel().body);
  return {inverter.flattened(), inverter.batched(), inverter.banded(), inverter.rows()};
}

}  // namespace lazyjit::runtime::tier0

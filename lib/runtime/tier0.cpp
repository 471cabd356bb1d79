// Tier 0: a kernel's kernel IR prepared for the block interpreter (tier0_runner.cpp runs it):
// expression levels, hoisting, per-statement evaluation lists, block loops and their forms.
#include "runtime/tier0.h"

#include <algorithm>
#include <optional>
#include <span>

#include "lowering/internal_error.h"
#include "runtime/tier0_program.h"

namespace lazyjit::runtime {

using kir::Expr;
using kir::ExprKind;
using kir::Id;
using kir::Stmt;
using lowering::internal_error;
using tier0::bit;
using tier0::BlockLoop;
using tier0::Form;
using tier0::Step;
using tier0::Writes;

namespace {

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

/// Copy nests: a loop whose body is loops only, each of which only copies. Tier 0 runs such
/// a nest as one strided copy per store (tier0::CopyNest) instead of a block loop per
/// iteration of the outer loop, whose fixed cost a pack (MR or NR lanes per step of K) or a
/// matmul's epilogue would pay per handful of elements. A nest qualifies when:
///  - every inner loop's bounds are invariant in the outer variable;
///  - inner loops hold stores only, each value a load (of a buffer, or of an array local: a
///    matmul's tile) or invariant in the nest, and not bool (a bool load reads 0 or 1, which
///    a copy would not);
///  - every offset, stored at or loaded from, is affine in the two variables: built from them
///    and invariants by Add, Sub, and Mul by an invariant; offsets stored at read no data;
///  - nothing the nest reads is stored in it.
/// Its iterations are then independent (the kernel IR's rule: offsets of index arithmetic
/// alone store each element once), so each store may run over the whole nest in turn.
class CopyNests {
 public:
  explicit CopyNests(const kir::Kernel& k) : k_(k), vars_(k.exprs.size(), 0), loads_(k.exprs.size(), 0) {
    for (size_t i = 0; i < k.exprs.size(); ++i) {
      const Expr& e = k.exprs[i];
      for (Id o : e.operands) {
        vars_[i] |= vars_[o];
        loads_[i] |= loads_[o];
      }
      if (e.kind == ExprKind::Var) vars_[i] |= bit(e.slot);
      if (e.kind == ExprKind::Load) loads_[i] |= bit(e.slot);
    }
  }

  /// The loop variables (as slot bits) and buffers `e` reads.
  const std::vector<uint64_t>& vars() const { return vars_; }
  uint64_t vars(Id e) const { return vars_[e]; }
  uint64_t loads(Id e) const { return loads_[e]; }

  bool is_copy_nest(const Stmt& nest) const {
    if (nest.kind != Stmt::Kind::For || nest.body.empty()) return false;
    uint64_t stored = 0, read = loads_[nest.lo] | loads_[nest.hi];
    for (const Stmt& inner : nest.body) {
      if (inner.kind != Stmt::Kind::For) return false;
      if (((vars_[inner.lo] | vars_[inner.hi]) & bit(nest.slot)) != 0) return false;
      read |= loads_[inner.lo] | loads_[inner.hi];
      if (!copies(inner, nest.slot, stored, read)) return false;
    }
    return (stored & read) == 0;  // locals: a nest of stores writes none
  }

  /// A copy loop: one loop that only copies as a copy nest's inner loops do (offsets affine
  /// in its variable), reading nothing it stores. Tier 0 runs it as one strided copy per
  /// store: an innermost loop under a loop whose offsets are not affine (the heads of
  /// attention put back together: a short run per head and row) pays no block per run.
  bool is_copy_loop(const Stmt& loop) const {
    if (loop.kind != Stmt::Kind::For) return false;
    uint64_t stored = 0, read = loads_[loop.lo] | loads_[loop.hi];
    return copies(loop, loop.slot, stored, read) && (stored & read) == 0;
  }

  /// Whether `loop` (of variable v, in a nest of outer variable u, or u = v) holds stores
  /// only, each value a load at an offset affine in u and v (or invariant in both), not bool,
  /// at an offset affine in u and v that reads no data; adds what they store and read.
  bool copies(const Stmt& loop, int u, uint64_t& stored, uint64_t& read) const {
    if (loop.body.empty()) return false;
    const int v = loop.slot;
    const uint64_t both = bit(u) | bit(v);
    for (const Stmt& t : loop.body) {
      if (t.kind != Stmt::Kind::Store) return false;
      for (size_t i = 0; i < t.values.size(); ++i) {
        const Expr& value = k_.exprs[t.values[i]];
        if (value.dtype == DType::Bool || loads_[t.offsets[i]] != 0 || !affine(t.offsets[i], u, v)) return false;
        if (value.kind == ExprKind::Load || (value.kind == ExprKind::Local && !value.operands.empty())) {
          if (!affine(value.operands[0], u, v)) return false;
        } else if ((vars_[t.values[i]] & both) != 0) {
          return false;
        }
        stored |= bit(t.buffers[i]);
        read |= loads_[t.values[i]] | loads_[t.offsets[i]];
      }
    }
    return true;
  }

  /// Whether index expression `e` is affine in loop variables u and v (slots).
  bool affine(Id e, int u, int v) const {
    if ((vars_[e] & (bit(u) | bit(v))) == 0) return true;
    const Expr& x = k_.exprs[e];
    if (x.kind == ExprKind::Var) return x.slot == u || x.slot == v;
    if (x.kind != ExprKind::Index) return false;
    const Id a = x.operands[0], b = x.operands[1];
    switch (static_cast<kir::IndexOp>(x.op)) {
      case kir::IndexOp::Add:
      case kir::IndexOp::Sub: return affine(a, u, v) && affine(b, u, v);
      case kir::IndexOp::Mul:
        return ((vars_[a] & (bit(u) | bit(v))) == 0 && affine(b, u, v)) ||
               ((vars_[b] & (bit(u) | bit(v))) == 0 && affine(a, u, v));
      default: return false;
    }
  }

 private:
  const kir::Kernel& k_;
  std::vector<uint64_t> vars_, loads_;  // per expression: the loop variables and buffers it reads
};

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
      } else if (const std::optional<Runs> r = runs(s)) {
        out.push_back(read_linearly(s, r->base) ? linearised(std::move(s), *r) : by_rows(std::move(s), *r));
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

  /// How many nests invert() flattened, and how many loops of rows it batched.
  int flattened() const { return flattened_; }
  int batched() const { return batched_; }
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
    return Runs{n, base, from->first, stop};
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
    const Stmt& inner = nest.body[0];
    if (((nests_.vars(inner.lo) | nests_.vars(inner.hi)) & bit(nest.slot)) != 0 || short_under(inner, nest)) return false;
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
    const uint64_t row = bit(nest.slot);
    std::vector<char> written(k_.locals.size(), 0), fresh(k_.locals.size(), 0);
    for (const Stmt& t : nest.body) {
      if (t.kind == Stmt::Kind::Assign) written[t.slot] = 1;
      if (t.kind != Stmt::Kind::For) continue;
      for (const Stmt& u : t.body) {
        if (u.kind == Stmt::Kind::Fold) written[u.slot] = 1;
      }
    }
    uint64_t stored = 0, read = 0;
    bool any_fold = false;
    // Whether `e` reads only locals that are not written here or are fresh in this row and
    // not in `folding`; adds the buffers it reads.
    auto reads_ok = [&](Id e, const std::vector<int>& folding) {
      read |= nests_.loads(e);
      bool ok = true;
      visit_locals(e, [&](int local) {
        const bool folded = std::find(folding.begin(), folding.end(), local) != folding.end();
        ok = ok && (!written[local] || (fresh[local] && !folded));
      });
      return ok;
    };
    auto store_ok = [&](const Stmt& t, const std::vector<int>& folding) {
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
          if (!t.offsets.empty() || !scalar(t.slot) || !reads_ok(t.values[0], {})) return false;
          fresh[t.slot] = 1;
          break;
        case Stmt::Kind::Store:
          if (!store_ok(t, {})) return false;
          break;
        case Stmt::Kind::For: {
          if (!innermost(t) || ((nests_.vars(t.lo) | nests_.vars(t.hi)) & row) != 0) return false;
          if ((nests_.loads(t.lo) | nests_.loads(t.hi)) != 0 || !reads_ok(t.lo, {}) || !reads_ok(t.hi, {})) return false;
          std::vector<int> folding;
          for (const Stmt& u : t.body) {
            if (u.kind == Stmt::Kind::Fold) folding.push_back(u.slot);
          }
          for (const Stmt& u : t.body) {
            if (u.kind == Stmt::Kind::Fold) {
              if (!u.offsets.empty() || !scalar(u.slot) || !fresh[u.slot] || !reads_ok(u.values[0], folding)) return false;
            } else if (u.kind != Stmt::Kind::Store || !store_ok(u, folding)) {
              return false;
            }
          }
          any_fold = any_fold || !folding.empty();
          break;
        }
        default: return false;
      }
    }
    return any_fold && (stored & read) == 0;
  }

  /// Calls f(local) for each scalar read of a local in `e`.
  template <class F>
  void visit_locals(Id e, F&& f) const {
    const Expr& x = k_.exprs[e];
    if (x.kind == ExprKind::Local) f(x.slot);
    for (Id o : x.operands) visit_locals(o, f);
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
  int flattened_ = 0, batched_ = 0;
  std::vector<tier0::Rows> rows_;
};

}  // namespace

namespace {
using Program = Tier0Kernel::Program;
}  // namespace

void Program::analyse() {
  const size_t n = k.exprs.size();
  level.assign(n, 0);
  buffers_read.assign(n, 0);
  locals_read.assign(n, 0);
  is_static.assign(n, false);
  fn.assign(n, nullptr);
  std::vector<int> var_depth(k.num_vars, 0);
  auto depths = [&](auto&& self, const std::vector<Stmt>& stmts, int depth) -> void {
    for (const Stmt& s : stmts) {
      if (s.kind != Stmt::Kind::For) continue;
      var_depth[s.slot] = depth + 1;
      self(self, s.body, depth + 1);
    }
  };
  depths(depths, k.body, 0);
  for (size_t i = 0; i < n; ++i) {
    const Expr& e = k.exprs[i];
    for (Id o : e.operands) {
      level[i] = std::max(level[i], level[o]);
      buffers_read[i] |= buffers_read[o];
      locals_read[i] |= locals_read[o];
    }
    switch (e.kind) {
      case ExprKind::Const:
      case ExprKind::Begin:
      case ExprKind::End:
      case ExprKind::Dim:
      case ExprKind::Scalar:
        is_static[i] = true;
        statics.push_back(static_cast<Id>(i));
        break;
      case ExprKind::Var: level[i] = var_depth[e.slot]; break;
      case ExprKind::Load: buffers_read[i] |= bit(e.slot); break;
      case ExprKind::Local: locals_read[i] |= bit(e.slot); break;
      case ExprKind::Op: {
        const auto op = static_cast<ir::OpKind>(e.op);
        const int d = static_cast<int>(e.dtype);
        const int operand = static_cast<int>(k.exprs[e.operands[0]].dtype);
        switch (ir::op_info(op).dtype_rule) {
          case ir::DTypeRule::Cast: fn[i] = table->cast[operand][d]; break;
          case ir::DTypeRule::Compare: fn[i] = table->compare[e.op][operand]; break;
          case ir::DTypeRule::Select: fn[i] = table->select[d]; break;
          default: fn[i] = table->same[e.op][d]; break;
        }
        if (fn[i] == nullptr) internal_error("tier 0 has no block function for an operation of this kernel");
        break;
      }
      default: break;
    }
  }
  for (const kir::Local& local : k.locals) {
    local_offset.push_back(locals_bytes);
    locals_bytes += (local.size * 8 + 63) / 64 * 64;
  }
}

std::vector<Id> Program::closure(const std::vector<Id>& uses, const std::vector<bool>& have) const {
  std::vector<bool> in(k.exprs.size(), false);
  std::vector<Id> stack;
  for (Id e : uses) {
    if (e != kir::kNone && !in[e]) {
      in[e] = true;
      stack.push_back(e);
    }
  }
  while (!stack.empty()) {
    const Id e = stack.back();
    stack.pop_back();
    if (have[e]) continue;  // available: its operands need not be computed for it
    for (Id o : k.exprs[e].operands) {
      if (!in[o]) {
        in[o] = true;
        stack.push_back(o);
      }
    }
  }
  std::vector<Id> out;
  for (size_t e = 0; e < in.size(); ++e) {
    if (in[e] && !have[e] && !is_static[e] && k.exprs[e].kind != ExprKind::Var) out.push_back(static_cast<Id>(e));
  }
  return out;  // operands come before their users
}

std::vector<Step> Program::schedule(const std::vector<Stmt>& stmts, int depth, std::vector<bool>& computed) {
  std::vector<Step> steps;
  for (const Stmt& s : stmts) {
    Step step;
    step.stmt = &s;
    step.pre = closure(direct_uses(s), computed);
    for (Id e : step.pre) computed[e] = true;
    if (s.kind == Stmt::Kind::For && std::find(copy_nest_stmts.begin(), copy_nest_stmts.end(), &s) != copy_nest_stmts.end()) {
      step.copy_nest = build_copy_nest(s, step, computed);
      forget(computed, subtree_writes(s.body));
    } else if (s.kind == Stmt::Kind::For) {
      const Writes written = subtree_writes(s.body);
      std::vector<bool> inner = computed;
      forget(inner, written);  // stale after the first iteration's writes
      for (size_t e = 0; e < k.exprs.size(); ++e) {
        if (k.exprs[e].kind == ExprKind::Var && k.exprs[e].slot == s.slot) step.var = static_cast<Id>(e);
      }
      if (innermost(s)) {
        step.block_loop = build_block_loop(s, depth + 1, inner);
      } else {
        std::vector<Id> uses;
        subtree_uses(s.body, uses);
        for (Id e : closure(uses, inner)) {
          if (!memory(e) && level[e] <= depth + 1) step.hoisted.push_back(e);
        }
        for (Id e : step.hoisted) inner[e] = true;
        step.body = schedule(s.body, depth + 1, inner);
      }
      forget(computed, written);
    } else {
      forget(computed, direct_writes(s));
    }
    steps.push_back(std::move(step));
  }
  return steps;
}

int Program::build_block_loop(const Stmt& s, int depth, const std::vector<bool>& computed) {
  BlockLoop loop;
  for (size_t e = 0; e < k.exprs.size(); ++e) {
    if (k.exprs[e].kind == ExprKind::Var && k.exprs[e].slot == s.slot) loop.var = static_cast<Id>(e);
  }
  const Writes written = subtree_writes(s.body);
  loop.writes = written.buffers;
  std::vector<Id> uses;
  subtree_uses(s.body, uses);
  for (const tier0::Rows& r : rows) {
    if (r.slot != s.slot) continue;
    loop.row = r.length;
    loop.fold_rows = r.fold_rows;
  }
  if (loop.row != kir::kNone) uses.push_back(loop.row);  // read at the loop's entry
  const std::vector<Id> needed = closure(uses, computed);
  std::vector<bool> varying(k.exprs.size(), false);
  auto reads_written = [&](Id e) {
    return (buffers_read[e] & written.buffers) != 0 || (locals_read[e] & written.locals) != 0;
  };
  if (loop.var != kir::kNone) varying[loop.var] = true;
  for (Id e : needed) varying[e] = level[e] >= depth || reads_written(e);
  const size_t n = k.exprs.size();
  loop.form.assign(n, Form::Uniform);
  loop.slot.assign(n, -1);
  for (Id e : needed) {
    if (!varying[e]) {
      loop.entry.push_back(e);
      continue;
    }
    const bool index = k.exprs[e].kind == ExprKind::Index && !reads_written(e);
    loop.form[e] = index ? Form::Index : Form::Block;
  }
  if (loop.var != kir::kNone) loop.form[loop.var] = Form::Index;
  // Rows of a divisor of the variable (BlockLoop::kMinRow long at least, checked as it
  // runs): its quotient and remainder are then affine in a block.
  for (Id e : needed) {
    if (loop.row != kir::kNone || loop.var == kir::kNone) break;
    const Expr& x = k.exprs[e];
    if (x.kind != ExprKind::Index) continue;
    const auto op = static_cast<kir::IndexOp>(x.op);
    if ((op == kir::IndexOp::Div || op == kir::IndexOp::Rem) && x.operands[0] == loop.var && !varying[x.operands[1]]) {
      loop.row = x.operands[1];
      loop.divisor_rows = true;
    }
  }

  // A loop that reads what it writes runs in order, one iteration per block, unless each such
  // read is a load at the very element the loop stores there, one element per iteration (a
  // column fold's accumulator): its offset is the variable plus invariants.
  auto unit_stride = [&](auto&& self, Id e) -> std::optional<int64_t> {
    if (!varying[e]) return 0;
    const Expr& x = k.exprs[e];
    if (e == loop.var) return 1;
    if (x.kind != ExprKind::Index || reads_written(e)) return std::nullopt;
    const auto op = static_cast<kir::IndexOp>(x.op);
    const std::optional<int64_t> s0 = self(self, x.operands[0]), s1 = self(self, x.operands[1]);
    if (!s0 || !s1) return std::nullopt;
    if (op == kir::IndexOp::Add) return *s0 + *s1;
    if (op == kir::IndexOp::Sub) return *s0 - *s1;
    return std::nullopt;
  };
  // Where it is one store statement (a flattened epilogue: rows one after another) whose
  // offsets are not unit stride, the block runs as a block when its lanes' offsets there are
  // distinct (loop.distinct, checked per block), else one lane at a time.
  bool in_order = false;
  const bool one_store = s.body.size() == 1 && s.body[0].kind == Stmt::Kind::Store;
  for (Id e : needed) {
    const Expr& x = k.exprs[e];
    if (x.kind == ExprKind::Local && (written.locals & bit(x.slot)) != 0) in_order = true;
    if (x.kind != ExprKind::Load || (written.buffers & bit(x.slot)) == 0) continue;
    const Id offset = x.operands[0];
    bool same_element = true;
    for (const Stmt& t : s.body) {
      if (t.kind != Stmt::Kind::Store) continue;
      for (size_t i = 0; i < t.buffers.size(); ++i) {
        if (t.buffers[i] == x.slot && t.offsets[i] != offset) same_element = false;
      }
    }
    if (same_element && unit_stride(unit_stride, offset) == std::optional<int64_t>(1)) continue;
    if (same_element && one_store) {
      if (std::find(loop.distinct.begin(), loop.distinct.end(), offset) == loop.distinct.end()) loop.distinct.push_back(offset);
      continue;
    }
    in_order = true;
  }
  if (in_order) loop.distinct.clear();
  loop.block = in_order ? 1 : Tier0Kernel::kBlock;

  // Blocks: every varying expression may need one (an Index one when it is not affine, or
  // read by a block operation); Uniform ones that a block operation, a statement's value or
  // an offset reads get a broadcast block, filled at the loop's entry.
  auto give_block = [&](Id e) {
    if (loop.slot[e] < 0) loop.slot[e] = loop.slots++;
  };
  std::vector<Id> all = needed;
  if (loop.var != kir::kNone && std::find(all.begin(), all.end(), loop.var) == all.end()) all.push_back(loop.var);
  std::sort(all.begin(), all.end());
  for (Id e : all) {
    if (loop.form[e] == Form::Uniform) continue;
    give_block(e);
    const Expr& x = k.exprs[e];
    for (size_t i = 0; i < x.operands.size(); ++i) {
      if (x.kind == ExprKind::Random && i == 0) continue;  // the seed is read from its register
      give_block(x.operands[i]);
    }
  }
  for (const Stmt& t : s.body) {
    for (Id v : t.values) give_block(v);
    for (Id o : t.offsets) give_block(o);
  }
  max_blocks = std::max(max_blocks, loop.slots);

  // Each statement computes the block values it is the first to need; in an in-order loop a
  // write makes the values that read it stale (as the emitter forgets them).
  std::vector<bool> have(n, true);
  for (Id e : all) {
    if (varying[e] && e != loop.var) have[e] = false;
  }
  for (const Stmt& t : s.body) {
    BlockLoop::Statement statement{&t, {}};
    statement.compute = closure(direct_uses(t), have);
    for (Id e : statement.compute) have[e] = true;
    const Writes w = direct_writes(t);
    for (Id e : all) {
      if (varying[e] && e != loop.var && ((buffers_read[e] & w.buffers) != 0 || (locals_read[e] & w.locals) != 0)) {
        have[e] = false;
      }
    }
    loop.body.push_back(std::move(statement));
  }
  loops.push_back(std::move(loop));
  return static_cast<int>(loops.size()) - 1;
}

int Program::build_copy_nest(const Stmt& nest, Step& step, std::vector<bool>& computed) {
  // A copy loop (CopyNests::is_copy_loop) is its own one inner loop.
  const bool single = !nest.body.empty() && nest.body[0].kind != Stmt::Kind::For;
  tier0::CopyNest copy{.outer = single ? -1 : nest.slot};
  std::vector<Id> invariants;
  // The largest parts of an offset that are invariant in the nest: in registers before it.
  auto invariant_parts = [&](auto&& self, Id e, uint64_t both) -> void {
    if ((vars[e] & both) == 0) {
      invariants.push_back(e);
    } else if (k.exprs[e].kind != ExprKind::Var) {
      for (Id o : k.exprs[e].operands) self(self, o, both);
    }
  };
  for (const Stmt& loop : single ? std::span<const Stmt>(&nest, 1) : std::span<const Stmt>(nest.body)) {
    tier0::CopyNest::Inner inner{.lo = loop.lo, .hi = loop.hi, .var = loop.slot};
    invariants.push_back(loop.lo);
    invariants.push_back(loop.hi);
    const uint64_t both = bit(nest.slot) | bit(loop.slot);
    for (const Stmt& store : loop.body) {
      for (size_t i = 0; i < store.values.size(); ++i) {
        tier0::CopyNest::Copy c{.to = store.buffers[i], .to_offset = store.offsets[i], .value = store.values[i]};
        invariant_parts(invariant_parts, c.to_offset, both);
        const Expr& value = k.exprs[c.value];
        if ((value.kind == ExprKind::Load || value.kind == ExprKind::Local) && (vars[c.value] & both) != 0) {
          c.from = value.slot;
          c.from_local = value.kind == ExprKind::Local;
          c.from_offset = value.operands[0];
          invariant_parts(invariant_parts, c.from_offset, both);
        } else {
          invariants.push_back(c.value);
        }
        inner.copies.push_back(c);
      }
    }
    copy.inners.push_back(std::move(inner));
  }
  for (Id e : closure(invariants, computed)) {
    step.pre.push_back(e);
    computed[e] = true;
  }
  copy_nests.push_back(std::move(copy));
  return static_cast<int>(copy_nests.size()) - 1;
}

Tier0Kernel::Tier0Kernel(const kir::Kernel& kernel) {
  auto p = std::make_unique<Program>();
  kir::Builder builder(kernel);
  NestInverter inverter(builder);
  inverter.invert(builder.kernel().body);
  p->flattened = inverter.flattened();
  p->batched = inverter.batched();
  p->rows = inverter.rows();
  p->k = std::move(builder.kernel());
  p->table = &tier0::block_table();
  p->analyse();
  const CopyNests nests(p->k);
  p->vars = nests.vars();
  auto find_copy_nests = [&](auto&& self, const std::vector<Stmt>& stmts) -> void {
    for (const Stmt& s : stmts) {
      if (nests.is_copy_nest(s) || (innermost(s) && nests.is_copy_loop(s))) p->copy_nest_stmts.push_back(&s);
      else if (s.kind == Stmt::Kind::For) self(self, s.body);
    }
  };
  find_copy_nests(find_copy_nests, p->k.body);
  std::vector<bool> computed(p->k.exprs.size(), false);
  for (Id e : p->statics) computed[e] = true;
  std::vector<Id> uses;
  subtree_uses(p->k.body, uses);
  for (Id e : p->closure(uses, computed)) {
    if (!p->memory(e) && p->level[e] == 0) p->root_hoisted.push_back(e);
  }
  for (Id e : p->root_hoisted) computed[e] = true;
  p->root = p->schedule(p->k.body, 0, computed);
  program_ = std::move(p);
}

Tier0Kernel::~Tier0Kernel() = default;
Tier0Kernel::Tier0Kernel(Tier0Kernel&&) noexcept = default;
Tier0Kernel& Tier0Kernel::operator=(Tier0Kernel&&) noexcept = default;

Tier0Kernel::Shape Tier0Kernel::shape() const {
  Shape shape{.flattened = program_->flattened, .batched = program_->batched};
  for (const tier0::CopyNest& nest : program_->copy_nests) {
    for (const tier0::CopyNest::Inner& inner : nest.inners) shape.copies += static_cast<int>(inner.copies.size());
  }
  return shape;
}

int32_t Tier0Kernel::run(void* const* args, const int64_t* dims, int64_t begin, int64_t end) const {
  return run_program(*program_, args, dims, begin, end);
}

}  // namespace lazyjit::runtime

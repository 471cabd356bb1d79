// Tier 0's loop nests: the statement helpers its preparation shares, the copy nests it runs
// as strided copies, and the nests it reshapes before preparing a kernel (NestInverter, in
// tier0_nests.cpp). Internal to lib/runtime.
#pragma once

#include <cstdint>
#include <vector>

#include "lowering/kir.h"
#include "runtime/tier0_program.h"

namespace lazyjit::runtime::tier0 {

using kir::Expr;
using kir::ExprKind;

/// The expressions a statement uses itself (not its body's).
std::vector<Id> direct_uses(const Stmt& s);
/// What a statement writes itself, and what a list of statements writes, bodies included.
Writes direct_writes(const Stmt& s);
Writes subtree_writes(const std::vector<Stmt>& stmts);
/// Appends the expressions a list of statements uses, bodies included.
void subtree_uses(const std::vector<Stmt>& stmts, std::vector<Id>& uses);
/// Whether a loop holds no loop and no matmul step.
bool innermost(const Stmt& loop);

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
  explicit CopyNests(const kir::Kernel& k)
      : k_(k), vars_(k.exprs.size(), 0), loads_(k.exprs.size(), 0), locals_(k.exprs.size(), 0) {
    for (size_t i = 0; i < k.exprs.size(); ++i) {
      const Expr& e = k.exprs[i];
      for (Id o : e.operands) {
        vars_[i] |= vars_[o];
        loads_[i] |= loads_[o];
        locals_[i] |= locals_[o];
      }
      if (e.kind == ExprKind::Var) vars_[i] |= bit(e.slot);
      if (e.kind == ExprKind::Load) loads_[i] |= bit(e.slot);
      if (e.kind == ExprKind::Local) locals_[i] |= bit(e.slot);
    }
  }

  /// The loop variables, buffers and locals `e` reads (as slot bits).
  const std::vector<uint64_t>& vars() const { return vars_; }
  uint64_t vars(Id e) const { return vars_[e]; }
  uint64_t loads(Id e) const { return loads_[e]; }
  uint64_t locals(Id e) const { return locals_[e]; }

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
  std::vector<uint64_t> vars_, loads_, locals_;  // per expression: the slots it reads
};

/// What invert_nests made of a kernel's nests.
struct Inverted {
  int flattened = 0;  ///< nests flattened into one loop (a tile's rows, a slice in runs)
  int batched = 0;    ///< loops of rows run a batch of rows at a time
  int banded = 0;     ///< loops of micro-kernels run a band at a time, then the band's epilogue
  int checked_ahead = 0;  ///< checks of a loop's rows run ahead of its nest, a block of rows at a time
  std::vector<Rows> rows;
};

/// Reshapes the nests of `b`'s kernel for tier 0 (NestInverter, tier0_nests.cpp): short
/// loops under long ones inverted, short nests flattened, loops of rows batched.
Inverted invert_nests(kir::Builder& b);

}  // namespace lazyjit::runtime::tier0

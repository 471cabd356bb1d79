// Tier 0: a kernel's kernel IR prepared for the block interpreter (tier0_runner.cpp runs it):
// its nests reshaped (tier0_nests.cpp), then expression levels, hoisting, per-statement
// evaluation lists, block loops and their forms.
#include "runtime/tier0.h"

#include <algorithm>
#include <optional>
#include <span>

#include "lowering/internal_error.h"
#include "runtime/tier0_nests.h"
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
using tier0::CopyNests;
using tier0::direct_uses;
using tier0::direct_writes;
using tier0::innermost;
using tier0::subtree_uses;
using tier0::subtree_writes;
using tier0::Writes;

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
  index_code.assign(n, {});
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
      case ExprKind::Index:
        index_code[i] = {e.operands[0], e.operands[1], static_cast<kir::IndexOp>(e.op)};
        break;
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
  loop.writes_locals = written.locals;
  std::vector<Id> uses;
  subtree_uses(s.body, uses);
  for (const tier0::Rows& r : rows) {
    if (r.slot != s.slot) continue;
    loop.row = r.length;
    loop.fold_rows = r.fold_rows;
    loop.accumulate = r.accumulate;
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
  // In a loop of rows, what reads the variable only through its row (w / row) is the same
  // along each row: an operation or a load of such values is computed once per row.
  if (loop.row != kir::kNone && loop.var != kir::kNone) {
    std::vector<char> along_row(n, 0);  // varying, the same along a row
    auto same_along = [&](Id o) { return !varying[o] || along_row[o] != 0; };
    for (Id e : needed) {
      if (!varying[e]) continue;
      const Expr& x = k.exprs[e];
      if (x.kind == ExprKind::Index && static_cast<kir::IndexOp>(x.op) == kir::IndexOp::Div && x.operands[0] == loop.var &&
          x.operands[1] == loop.row) {
        along_row[e] = 1;
      } else if ((x.kind == ExprKind::Index || x.kind == ExprKind::Op || x.kind == ExprKind::Load ||
                  (x.kind == ExprKind::Local && !x.operands.empty())) &&
                 !reads_written(e) && std::all_of(x.operands.begin(), x.operands.end(), same_along)) {
        along_row[e] = 1;
      }
      // (Index arithmetic of data, a table's row picked by an index, is never affine: per row too.)
      const bool of_data = loop.form[e] == Form::Index && memory(e);
      if (along_row[e] != 0 && (loop.form[e] == Form::Block || of_data)) loop.form[e] = Form::Row;
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
  // An accumulating loop reads B[o] only as its store's combine does, row by row in order.
  const Id accumulated = loop.accumulate ? k.exprs[s.body[0].values[0]].operands[0] : kir::kNone;
  for (Id e : needed) {
    const Expr& x = k.exprs[e];
    if (e == accumulated) continue;
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
    if (loop.accumulate) {  // the offset and x; the runner combines them into B itself
      statement.compute = closure({t.offsets[0], k.exprs[t.values[0]].operands[1]}, have);
    } else {
      statement.compute = closure(direct_uses(t), have);
    }
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
  tier0::Inverted inverted = tier0::invert_nests(builder);
  p->flattened = inverted.flattened;
  p->batched = inverted.batched;
  p->banded = inverted.banded;
  p->checked_ahead = inverted.checked_ahead;
  p->rows = std::move(inverted.rows);
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
  Shape shape{.flattened = program_->flattened, .batched = program_->batched, .banded = program_->banded,
              .checked_ahead = program_->checked_ahead};
  for (const tier0::BlockLoop& loop : program_->loops) shape.in_order += loop.block == 1 ? 1 : 0;
  for (const tier0::CopyNest& nest : program_->copy_nests) {
    for (const tier0::CopyNest::Inner& inner : nest.inners) shape.copies += static_cast<int>(inner.copies.size());
  }
  return shape;
}

int32_t Tier0Kernel::run(void* const* args, const int64_t* dims, int64_t begin, int64_t end) const {
  return run_program(*program_, args, dims, begin, end);
}

}  // namespace lazyjit::runtime

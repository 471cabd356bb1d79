// Kernel IR: construction (kir::Builder). Its text, byte and verified forms: kir_text.cpp.
#include "lowering/kir.h"

#include <algorithm>
#include <bit>


namespace lazyjit::kir {

Builder::Builder(Kernel kernel) : kernel_(std::move(kernel)) {
  for (size_t i = 0; i < kernel_.exprs.size(); ++i) ids_.try_emplace(kernel_.exprs[i], static_cast<Id>(i));
}

Id Builder::add(Expr e) {
  const auto [it, fresh] = ids_.try_emplace(e, static_cast<Id>(kernel_.exprs.size()));
  if (fresh) kernel_.exprs.push_back(std::move(e));
  return it->second;
}

namespace {

/// Calls f(id) for every expression a statement uses, through a reference it may rewrite.
template <class F>
void for_each_use(std::vector<Stmt>& body, F&& f) {
  for (Stmt& s : body) {
    for (Id* id : {&s.lo, &s.hi, &s.micro.k, &s.micro.b_base, &s.micro.cols, &s.micro.tile_at}) {
      if (*id != kNone) f(*id);
    }
    for (auto* ids : {&s.offsets, &s.values, &s.micro.a_rows}) {
      for (Id& id : *ids) f(id);
    }
    for_each_use(s.body, f);
  }
}

}  // namespace

Kernel Builder::take() {
  Kernel& k = kernel_;
  std::vector<bool> live(k.exprs.size(), false);
  auto mark = [&](Id& id) { live[id] = true; };
  for_each_use(k.body, mark);
  for (Id launch : {k.count, k.work}) {
    if (launch != kNone) live[launch] = true;
  }
  for (size_t i = k.exprs.size(); i-- > 0;) {
    if (!live[i]) continue;
    for (Id o : k.exprs[i].operands) live[o] = true;
  }
  std::vector<Id> renumbered(k.exprs.size(), kNone);
  std::vector<Expr> kept;
  for (size_t i = 0; i < k.exprs.size(); ++i) {
    if (!live[i]) continue;
    renumbered[i] = static_cast<Id>(kept.size());
    kept.push_back(std::move(k.exprs[i]));
    for (Id& o : kept.back().operands) o = renumbered[o];
  }
  k.exprs = std::move(kept);
  for_each_use(k.body, [&](Id& id) { id = renumbered[id]; });
  for (Id* launch : {&k.count, &k.work}) {
    if (*launch != kNone) *launch = renumbered[*launch];
  }
  ids_.clear();
  return std::move(kernel_);
}

void Builder::substitute(std::vector<Stmt>& body, const absl::flat_hash_map<int, Id>& values) {
  substitute(body, values, {});
}

void Builder::substitute(std::vector<Stmt>& body, const absl::flat_hash_map<int, Id>& values,
                         const absl::flat_hash_map<int, std::pair<int, Id>>& elements) {
  absl::flat_hash_map<Id, Id> done;
  auto rewrite = [&](auto&& self, Id id) -> Id {
    if (const auto it = done.find(id); it != done.end()) return it->second;
    Expr e = kernel_.exprs[id];
    Id to = id;
    if (e.kind == ExprKind::Var) {
      if (const auto it = values.find(e.slot); it != values.end()) to = it->second;
    } else if (e.kind == ExprKind::Local && e.operands.empty() && elements.contains(e.slot)) {
      const auto& [array, at] = elements.at(e.slot);
      to = local(array, at);
    } else if (!e.operands.empty()) {
      bool changed = false;
      for (Id& o : e.operands) {
        const Id r = self(self, o);
        changed = changed || r != o;
        o = r;
      }
      if (changed) to = e.kind == ExprKind::Index ? arith(static_cast<IndexOp>(e.op), e.operands[0], e.operands[1]) : add(std::move(e));
    }
    done.emplace(id, to);
    return to;
  };
  for_each_use(body, [&](Id& id) { id = rewrite(rewrite, id); });
  auto to_elements = [&](auto&& self, std::vector<Stmt>& stmts) -> void {
    for (Stmt& s : stmts) {
      const bool scalar_write = (s.kind == Stmt::Kind::Assign || s.kind == Stmt::Kind::Fold) && s.offsets.empty();
      if (scalar_write && elements.contains(s.slot)) {
        const auto& [array, at] = elements.at(s.slot);
        s.slot = array;
        s.offsets = {at};
      }
      self(self, s.body);
    }
  };
  if (!elements.empty()) to_elements(to_elements, body);
}

Id Builder::constant(DType dtype, int64_t bits) { return add({ExprKind::Const, dtype, 0, -1, bits}); }

Id Builder::float_constant(DType dtype, double value) {
  return is_floating(dtype) ? constant(dtype, std::bit_cast<int64_t>(value)) : constant(dtype, static_cast<int64_t>(value));
}

Id Builder::load(int buffer, Id offset) {
  return add({ExprKind::Load, kernel_.buffers[buffer].dtype, 0, buffer, 0, {offset}});
}

Id Builder::local(int slot, Id offset) {
  Expr e{ExprKind::Local, kernel_.locals[slot].dtype, 0, slot};
  if (offset != kNone) e.operands.push_back(offset);
  return add(std::move(e));
}

Id Builder::op(ir::OpKind op, DType dtype, std::vector<Id> operands) {
  return add({ExprKind::Op, dtype, static_cast<uint8_t>(op), -1, 0, std::move(operands)});
}

Id Builder::random(ir::OpKind op, DType dtype, Id seed, Id counter) {
  return add({ExprKind::Random, dtype, static_cast<uint8_t>(op), -1, 0, {seed, counter}});
}

std::optional<int64_t> Builder::constant_value(Id e) const {
  const Expr& x = kernel_.exprs[e];
  if (x.kind != ExprKind::Const || x.dtype != DType::Int64) return std::nullopt;
  return x.bits;
}

std::optional<Id> Builder::recombined(Id multiple, Id rest) const {
  const Expr& m = kernel_.exprs[multiple];
  const Expr& r = kernel_.exprs[rest];
  auto is = [&](const Expr& e, IndexOp op) { return e.kind == ExprKind::Index && static_cast<IndexOp>(e.op) == op; };
  if (!is(m, IndexOp::Mul) || !is(r, IndexOp::Rem)) return std::nullopt;
  const Id x = r.operands[0], d = r.operands[1];
  for (int side = 0; side < 2; ++side) {
    const Expr& quotient = kernel_.exprs[m.operands[side]];
    if (m.operands[1 - side] == d && is(quotient, IndexOp::Div) && quotient.operands[0] == x &&
        quotient.operands[1] == d) {
      // Exact in the wrapping arithmetic for d > 0. A divisor of 0 (kir's division by zero
      // is 0) is a dim of an empty shape, whose indices no loop visits.
      return x;
    }
  }
  return std::nullopt;
}

Id Builder::arith(IndexOp op, Id a, Id b) {
  const std::optional<int64_t> x = constant_value(a), y = constant_value(b);
  if (x && y && !((op == IndexOp::Div || op == IndexOp::Rem) && *y == 0)) {
    const uint64_t ux = static_cast<uint64_t>(*x), uy = static_cast<uint64_t>(*y);
    switch (op) {
      case IndexOp::Add: return index(static_cast<int64_t>(ux + uy));
      case IndexOp::Sub: return index(static_cast<int64_t>(ux - uy));
      case IndexOp::Mul: return index(static_cast<int64_t>(ux * uy));
      case IndexOp::Div: return index(static_cast<int64_t>(ux / uy));
      case IndexOp::Rem: return index(static_cast<int64_t>(ux % uy));
      case IndexOp::Min: return index(std::min(*x, *y));
      case IndexOp::Max: return index(std::max(*x, *y));
    }
  }
  switch (op) {
    case IndexOp::Add:
      if (x == 0) return b;
      if (y == 0) return a;
      for (const auto& [left, rest] : {std::pair{a, b}, std::pair{b, a}}) {
        if (const std::optional<Id> whole = recombined(left, rest)) return *whole;
        // (p + (x / d) * d) + x % d, as an offset's terms are summed: p + x.
        const Expr& e = kernel_.exprs[left];
        if (e.kind != ExprKind::Index || static_cast<IndexOp>(e.op) != IndexOp::Add) continue;
        for (int side = 0; side < 2; ++side) {
          if (const std::optional<Id> whole = recombined(e.operands[side], rest)) {
            return arith(IndexOp::Add, e.operands[1 - side], *whole);
          }
        }
      }
      break;
    case IndexOp::Sub:
      if (y == 0) return a;
      break;
    case IndexOp::Mul:
      if (x == 0 || y == 0) return index(0);
      if (x == 1) return b;
      if (y == 1) return a;
      break;
    case IndexOp::Div:
      if (y == 1) return a;
      break;
    case IndexOp::Rem:
      if (y == 1) return index(0);
      break;
    default: break;
  }
  return add({ExprKind::Index, DType::Int64, static_cast<uint8_t>(op), -1, 0, {a, b}});
}

Id Builder::convert(Id value, DType to) {
  return dtype(value) == to ? value : op(ir::OpKind::Cast, to, {value});
}

Id Builder::select(Id cond, Id a, Id b) {
  return a == b ? a : op(ir::OpKind::Where, dtype(a), {cond, a, b});
}

void Builder::emit(Stmt s) {
  (open_.empty() ? kernel_.body : open_.back().body).push_back(std::move(s));
}

void Builder::store(std::vector<int> buffers, std::vector<Id> offsets, std::vector<Id> values) {
  for (int b : buffers) kernel_.buffers[b].written = true;
  Stmt s{Stmt::Kind::Store};
  s.buffers = std::move(buffers);
  s.offsets = std::move(offsets);
  s.values = std::move(values);
  emit(std::move(s));
}

void Builder::assign(int local, Id value, Id offset) {
  Stmt s{Stmt::Kind::Assign, local};
  if (offset != kNone) s.offsets.push_back(offset);
  s.values.push_back(value);
  emit(std::move(s));
}

void Builder::fold(int local, ir::OpKind combine, Id value) {
  Stmt s{Stmt::Kind::Fold, local};
  s.op = combine;
  s.values.push_back(value);
  emit(std::move(s));
}

void Builder::matmul(MicroKernel micro) {
  Stmt s{Stmt::Kind::Matmul};
  s.micro = std::move(micro);
  emit(std::move(s));
}

size_t Builder::depth(Id e) const {
  std::vector<Id> stack = {e};
  std::vector<bool> seen(kernel_.exprs.size(), false);
  size_t deepest = 0;
  while (!stack.empty()) {
    const Expr& x = kernel_.exprs[stack.back()];
    stack.pop_back();
    // A value that a statement of this kernel may have written (a local, a buffer the kernel
    // stores to) is read where it is: moved earlier, it could be read before its write.
    if (x.kind == ExprKind::Local || (x.kind == ExprKind::Load && kernel_.buffers[x.slot].written)) {
      return open_.size();
    }
    if (x.kind == ExprKind::Var) {
      for (size_t d = deepest; d < open_.size(); ++d) {
        if (open_[d].slot == x.slot) deepest = d + 1;
      }
    }
    for (Id o : x.operands) {
      if (!seen[o]) stack.push_back(o);
      seen[o] = true;
    }
  }
  return deepest;
}

int Builder::check(Id cond, Id value, int status_buffer) {
  kernel_.buffers[status_buffer].written = true;
  Stmt s{Stmt::Kind::Check, status_buffer};
  s.code = ++kernel_.num_checks;
  s.values = {cond, value};
  size_t at = std::max(depth(cond), depth(value));
  // Hoisted out of the loops it does not depend on, innermost first, but not out of a guard:
  // a loop whose bound is a condition, not index arithmetic (a scatter's "the index covers
  // this line"), may run no iteration, and its check would read an index past the index's
  // end. Out of a loop that may run no iteration over a dim of 0, the check must hold where
  // the loop is empty too (`cond or hi <= lo`, below): it goes no higher than those bounds.
  auto may_be_empty = [&](const Stmt& loop) {
    const std::optional<int64_t> lo = constant_value(loop.lo), hi = constant_value(loop.hi);
    if (lo && hi) return *hi <= *lo;
    return !(kernel_.exprs[loop.lo].kind == ExprKind::Begin && kernel_.exprs[loop.hi].kind == ExprKind::End);
  };
  for (size_t d = open_.size(); d > at; --d) {
    const Stmt& loop = open_[d - 1];
    if (!index_arithmetic(loop.hi)) at = d;
    else if (may_be_empty(loop)) at = std::max({at, depth(loop.lo), depth(loop.hi)});
  }
  for (size_t d = open_.size(); d > at; --d) {
    const Stmt& loop = open_[d - 1];
    if (!may_be_empty(loop)) continue;
    const Id empty = op(ir::OpKind::Le, DType::Bool, {loop.hi, loop.lo});
    s.values[0] = op(ir::OpKind::LogicalOr, DType::Bool, {s.values[0], empty});
  }
  (at == 0 ? kernel_.body : open_[at - 1].body).push_back(std::move(s));
  return kernel_.num_checks;
}

bool Builder::index_arithmetic(Id e) const {
  const Expr& x = kernel_.exprs[e];
  switch (x.kind) {
    case ExprKind::Const:
    case ExprKind::Var:
    case ExprKind::Begin:
    case ExprKind::End:
    case ExprKind::Dim: return true;
    case ExprKind::Index: return index_arithmetic(x.operands[0]) && index_arithmetic(x.operands[1]);
    default: return false;
  }
}

}  // namespace lazyjit::kir

// Kernel IR: a kernel's text (what lazyjit-dump prints), its bytes (what its content hash
// names it by) and its verifier, whose messages quote expressions as the text does.
#include <bit>

#include "fmt/format.h"
#include "lowering/kir.h"

namespace lazyjit::kir {

namespace {

constexpr const char* kIndexOps[] = {"add", "sub", "mul", "div", "rem", "min", "max"};

std::string type_name(DType dtype) {
  switch (dtype) {
    case DType::Bool: return "bool";
    case DType::Int32: return "i32";
    case DType::Int64: return "i64";
    case DType::Float32: return "f32";
    case DType::Float64: return "f64";
  }
  return "?";
}

std::string operands_text(const Expr& e) {
  std::string text;
  for (Id o : e.operands) text += fmt::format("{}%{}", text.empty() ? "" : ", ", o);
  return text;
}

std::string expr_text(const Expr& e) {
  const std::string t = type_name(e.dtype);
  switch (e.kind) {
    case ExprKind::Const:
      if (is_floating(e.dtype)) return fmt::format("{} {}", t, std::bit_cast<double>(e.bits));
      return e.dtype == DType::Int64 ? fmt::format("{}", e.bits) : fmt::format("{} {}", t, e.bits);
    case ExprKind::Var: return fmt::format("v{}", e.slot);
    case ExprKind::Begin: return "begin";
    case ExprKind::End: return "end";
    case ExprKind::Dim: return fmt::format("d{}", e.slot);
    case ExprKind::Scalar: return fmt::format("{} s{}", t, e.slot);
    case ExprKind::Load: return fmt::format("load {} b{}[%{}]", t, e.slot, e.operands[0]);
    case ExprKind::Local:
      return e.operands.empty() ? fmt::format("l{}", e.slot) : fmt::format("l{}[%{}]", e.slot, e.operands[0]);
    case ExprKind::Index: return fmt::format("{} {}", kIndexOps[e.op], operands_text(e));
    case ExprKind::Op:
    case ExprKind::Random:
      return fmt::format("{} {} {}", ir::op_name(static_cast<ir::OpKind>(e.op)), t, operands_text(e));
  }
  return "?";
}

void print_body(const std::vector<Stmt>& body, int depth, std::string& out) {
  const std::string indent(2 * depth, ' ');
  for (const Stmt& s : body) {
    switch (s.kind) {
      case Stmt::Kind::For:
        out += fmt::format("{}for v{} in [%{}, %{}):\n", indent, s.slot, s.lo, s.hi);
        print_body(s.body, depth + 1, out);
        break;
      case Stmt::Kind::Store: {
        std::string targets, values;
        for (size_t i = 0; i < s.values.size(); ++i) {
          targets += fmt::format("{}b{}[%{}]", i ? ", " : "", s.buffers[i], s.offsets[i]);
          values += fmt::format("{}%{}", i ? ", " : "", s.values[i]);
        }
        out += fmt::format("{}store {} = {}\n", indent, targets, values);
        break;
      }
      case Stmt::Kind::Assign:
        out += s.offsets.empty() ? fmt::format("{}l{} = %{}\n", indent, s.slot, s.values[0])
                                 : fmt::format("{}l{}[%{}] = %{}\n", indent, s.slot, s.offsets[0], s.values[0]);
        break;
      case Stmt::Kind::Fold:
        out += fmt::format("{}l{} = {}(l{}, %{})\n", indent, s.slot, ir::op_name(s.op), s.slot, s.values[0]);
        break;
      case Stmt::Kind::Check:
        out += fmt::format("{}check %{} else fail {} with %{} into b{}\n", indent, s.values[0], s.code, s.values[1],
                           s.slot);
        break;
      case Stmt::Kind::Matmul: {
        const MicroKernel& m = s.micro;
        std::string rows;
        for (Id r : m.a_rows) rows += fmt::format("{}%{}", rows.empty() ? "" : ", ", r);
        const std::string b = m.b_rows < 0 ? fmt::format("packed: %{}", m.b_base)
                                            : fmt::format("rows: %{} + b{}, cols %{}", m.b_base, m.b_rows, m.cols);
        const std::string at = m.tile_at == kNone ? "" : fmt::format("[%{}]", m.tile_at);
        out += fmt::format("{}matmul l{}{} = b{}[{}: {}] x b{}[{}] over %{}\n", indent, m.tile, at, m.a,
                           m.packed_a ? "packed" : "rows", rows, m.b, b, m.k);
        break;
      }
    }
  }
}

}  // namespace

std::string print(const Kernel& kernel) {
  std::string frame;
  for (size_t b = 0; b < kernel.buffers.size(); ++b) {
    frame += fmt::format("{}b{}: {}{}", b ? ", " : "", b, type_name(kernel.buffers[b].dtype),
                         kernel.buffers[b].written ? " out" : "");
  }
  std::string out = fmt::format("kernel per {} ({}; dims {}; scalars {})\n", kernel.kind, frame, kernel.num_dims,
                                kernel.num_scalars);
  for (size_t l = 0; l < kernel.locals.size(); ++l) {
    const Local& local = kernel.locals[l];
    out += local.size == 1 ? fmt::format("  local l{}: {}\n", l, type_name(local.dtype))
                           : fmt::format("  local l{}: {}[{}]\n", l, type_name(local.dtype), local.size);
  }
  for (size_t i = 0; i < kernel.exprs.size(); ++i) out += fmt::format("  %{} = {}\n", i, expr_text(kernel.exprs[i]));
  out += fmt::format("  count %{} work %{}\n", kernel.count, kernel.work);
  print_body(kernel.body, 1, out);
  return out;
}

namespace {

class Encoder {
 public:
  std::string run(const Kernel& k) {
    text(k.kind);
    put(k.buffers.size());
    for (const Buffer& b : k.buffers) put(static_cast<int64_t>(b.dtype) * 2 + b.written);
    put(k.num_dims, k.num_scalars, k.locals.size());
    for (const Local& l : k.locals) put(static_cast<int64_t>(l.dtype), l.size);
    put(k.exprs.size());
    for (const Expr& e : k.exprs) {
      put(static_cast<int64_t>(e.kind), static_cast<int64_t>(e.dtype), e.op, e.slot, e.bits);
      ids(e.operands);
    }
    put(k.count, k.work);
    body(k.body);
    return std::move(out_);
  }

 private:
  template <class... T>
  void put(T... values) {
    for (const int64_t v : {static_cast<int64_t>(values)...}) out_.append(reinterpret_cast<const char*>(&v), sizeof v);
  }
  void text(const std::string& s) {
    put(s.size());
    out_ += s;
  }
  template <class T>
  void ids(const std::vector<T>& v) {
    put(v.size());
    for (const T& x : v) put(x);
  }
  void body(const std::vector<Stmt>& stmts) {
    put(stmts.size());
    for (const Stmt& s : stmts) {
      put(static_cast<int64_t>(s.kind), s.slot, s.code, static_cast<int64_t>(s.op), s.lo, s.hi);
      ids(s.buffers);
      ids(s.offsets);
      ids(s.values);
      if (s.kind == Stmt::Kind::Matmul) {
        const MicroKernel& m = s.micro;
        put(m.a, m.b, m.tile, m.packed_a, m.b_rows, m.k, m.b_base, m.cols, m.tile_at);
        ids(m.a_rows);
      }
      body(s.body);
    }
  }

  std::string out_;
};

}  // namespace

std::string encode(const Kernel& kernel) { return Encoder().run(kernel); }

namespace {

class Verifier {
 public:
  explicit Verifier(const Kernel& k) : k_(k), var_uses_(k.exprs.size()) {}

  std::string run() {
    for (size_t i = 0; i < k_.exprs.size() && error_.empty(); ++i) expr(static_cast<Id>(i));
    if (error_.empty()) index_use(k_.count, "the count");
    if (error_.empty()) index_use(k_.work, "the work");
    if (error_.empty()) body(k_.body);
    return error_;
  }

 private:
  void fail(const std::string& what) {
    if (error_.empty()) error_ = what;
  }
  bool valid(Id e) const { return e >= 0 && static_cast<size_t>(e) < k_.exprs.size(); }

  void expr(Id i) {
    const Expr& e = k_.exprs[i];
    for (Id o : e.operands) {
      if (!valid(o) || o >= i) return fail(fmt::format("%{} uses %{}, which does not come before it", i, o));
      var_uses_[i].insert(var_uses_[i].end(), var_uses_[o].begin(), var_uses_[o].end());
    }
    auto need = [&](bool ok, const char* what) {
      if (!ok) fail(fmt::format("%{} = {}: {}", i, expr_text(e), what));
    };
    auto int64 = [&](Id o) { return k_.exprs[o].dtype == DType::Int64; };
    switch (e.kind) {
      case ExprKind::Var:
        var_uses_[i].push_back(e.slot);
        need(e.slot >= 0 && e.slot < k_.num_vars, "no such loop variable");
        break;
      case ExprKind::Dim: need(e.slot >= 0 && e.slot < k_.num_dims, "no such dim"); break;
      case ExprKind::Scalar: need(e.slot >= 0 && e.slot < k_.num_scalars, "no such scalar"); break;
      case ExprKind::Load:
        need(e.slot >= 0 && static_cast<size_t>(e.slot) < k_.buffers.size(), "no such buffer");
        if (error_.empty()) need(k_.buffers[e.slot].dtype == e.dtype && e.operands.size() == 1 && int64(e.operands[0]),
                                 "a load has its buffer's dtype and one Int64 offset");
        break;
      case ExprKind::Local:
        need(e.slot >= 0 && static_cast<size_t>(e.slot) < k_.locals.size(), "no such local");
        if (error_.empty()) {
          const Local& l = k_.locals[e.slot];
          need(l.dtype == e.dtype && e.operands.size() == (l.size == 1 ? 0u : 1u), "a local has its dtype and an offset if an array");
        }
        break;
      case ExprKind::Index:
        need(e.dtype == DType::Int64 && e.operands.size() == 2 && int64(e.operands[0]) && int64(e.operands[1]),
             "index arithmetic is on Int64");
        break;
      case ExprKind::Op: {
        const ir::OpInfo& info = ir::op_info(static_cast<ir::OpKind>(e.op));
        need(info.access == ir::AccessPattern::Elementwise && static_cast<int>(e.operands.size()) == info.arity,
             "an elementwise op with its arity");
        if (error_.empty() && info.dtype_rule == ir::DTypeRule::Select) {
          need(k_.exprs[e.operands[0]].dtype == DType::Bool && k_.exprs[e.operands[1]].dtype == e.dtype &&
                   k_.exprs[e.operands[2]].dtype == e.dtype,
               "where takes a Bool condition and two values of its dtype");
        }
        if (error_.empty() && info.dtype_rule == ir::DTypeRule::Same) {
          for (Id o : e.operands) need(k_.exprs[o].dtype == e.dtype, "operands have the result's dtype");
        }
        break;
      }
      case ExprKind::Random:
        need(e.operands.size() == 2 && int64(e.operands[0]) && int64(e.operands[1]) && is_floating(e.dtype),
             "a random value of a float dtype from an Int64 seed and counter");
        break;
      default: break;
    }
    std::sort(var_uses_[i].begin(), var_uses_[i].end());
    var_uses_[i].erase(std::unique(var_uses_[i].begin(), var_uses_[i].end()), var_uses_[i].end());
  }

  void use(Id e, const std::string& where) {
    if (!valid(e)) return fail(fmt::format("{} uses %{}, which does not exist", where, e));
    for (int v : var_uses_[e]) {
      if (std::find(scope_.begin(), scope_.end(), v) == scope_.end()) {
        return fail(fmt::format("{} uses %{}, which reads v{} outside its loop", where, e, v));
      }
    }
  }
  void index_use(Id e, const std::string& where) {
    use(e, where);
    if (error_.empty() && k_.exprs[e].dtype != DType::Int64) fail(fmt::format("{}: %{} is not Int64", where, e));
  }

  void body(const std::vector<Stmt>& stmts) {
    for (const Stmt& s : stmts) {
      if (!error_.empty()) return;
      switch (s.kind) {
        case Stmt::Kind::For:
          index_use(s.lo, "a loop bound");
          index_use(s.hi, "a loop bound");
          scope_.push_back(s.slot);
          body(s.body);
          scope_.pop_back();
          break;
        case Stmt::Kind::Store:
          if (s.buffers.size() != s.values.size() || s.offsets.size() != s.values.size()) return fail("a store's lists differ in length");
          for (size_t i = 0; i < s.values.size(); ++i) {
            const int b = s.buffers[i];
            if (b < 0 || static_cast<size_t>(b) >= k_.buffers.size() || !k_.buffers[b].written) return fail(fmt::format("a store to b{}, which is not an output", b));
            index_use(s.offsets[i], "a store");
            use(s.values[i], "a store");
            if (error_.empty() && k_.exprs[s.values[i]].dtype != k_.buffers[b].dtype) fail(fmt::format("a store of %{} to b{} of another dtype", s.values[i], b));
          }
          break;
        case Stmt::Kind::Fold:
          if (!ir::is_fold_combine(s.op)) {
            return fail(fmt::format("a fold into l{} combines with {}", s.slot, ir::op_name(s.op)));
          }
          [[fallthrough]];
        case Stmt::Kind::Assign: {
          if (s.slot < 0 || static_cast<size_t>(s.slot) >= k_.locals.size()) return fail(fmt::format("an assignment to l{}, which does not exist", s.slot));
          const Local& l = k_.locals[s.slot];
          if (s.offsets.size() != (l.size == 1 ? 0u : 1u)) return fail(fmt::format("an assignment to l{} without its offset", s.slot));
          for (Id o : s.offsets) index_use(o, "an assignment");
          use(s.values[0], "an assignment");
          if (error_.empty() && k_.exprs[s.values[0]].dtype != l.dtype) fail(fmt::format("an assignment of %{} to l{} of another dtype", s.values[0], s.slot));
          break;
        }
        case Stmt::Kind::Check: {
          if (s.values.size() != 2) return fail("a check needs a condition and a value");
          use(s.values[0], "a check");
          use(s.values[1], "a check");
          if (!error_.empty()) return;
          if (k_.exprs[s.values[0]].dtype != DType::Bool) return fail("a check's condition is not Bool");
          if (k_.exprs[s.values[1]].dtype != DType::Int64) return fail("a check's value is not Int64");
          if (s.slot < 0 || static_cast<size_t>(s.slot) >= k_.buffers.size() || k_.buffers[s.slot].dtype != DType::Int64 ||
              !k_.buffers[s.slot].written) {
            return fail(fmt::format("check {}: b{} is not a written Int64 status buffer", s.code, s.slot));
          }
          if (s.code < 1 || s.code > k_.num_checks) return fail(fmt::format("check code {} of {}", s.code, k_.num_checks));
          break;
        }
        case Stmt::Kind::Matmul: {
          const MicroKernel& m = s.micro;
          auto buffer_ok = [&](int b) { return b >= 0 && static_cast<size_t>(b) < k_.buffers.size(); };
          if (!buffer_ok(m.a) || !buffer_ok(m.b) || m.tile < 0 || static_cast<size_t>(m.tile) >= k_.locals.size()) {
            return fail("a matmul step with a missing operand or tile");
          }
          index_use(m.k, "a matmul step");
          index_use(m.b_base, "a matmul step");
          if (m.tile_at != kNone) index_use(m.tile_at, "a matmul step");
          if (m.b_rows >= 0) {
            if (!buffer_ok(m.b_rows) || k_.buffers[m.b_rows].dtype != DType::Int64) {
              return fail("a matmul step whose B rows are not an Int64 buffer");
            }
            index_use(m.cols, "a matmul step");
          }
          for (Id r : m.a_rows) index_use(r, "a matmul step");
          break;
        }
      }
    }
  }

  const Kernel& k_;
  std::vector<std::vector<int>> var_uses_;  // per expression: the loop variables it reads
  std::vector<int> scope_;
  std::string error_;
};

}  // namespace

std::string verify(const Kernel& kernel) { return Verifier(kernel).run(); }

}  // namespace lazyjit::kir

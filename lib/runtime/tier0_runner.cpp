// Tier 0: the block interpreter that runs a prepared kernel (tier0_program.h): its
// statements one at a time, outer loops, matmul steps and copy nests (innermost loops run a
// block at a time: tier0_block.cpp).
#include <algorithm>
#include <cstring>

#include "lowering/internal_error.h"
#include "lowering/kernel_abi.h"
#include "runtime/tier0_runner.h"

namespace lazyjit::runtime {

using kir::Expr;
using kir::ExprKind;
using kir::Id;
using kir::Stmt;

namespace tier0 {

using lowering::internal_error;

inline void Runner::eval(Id id) {
  const Expr& e = k_.exprs[id];
  switch (e.kind) {
    case ExprKind::Load: {
      const int64_t size = dtype_size(e.dtype);
      copy_elements(reinterpret_cast<std::byte*>(f_.reg(id)), f_.buffer(e.slot) + f_.index(e.operands[0]) * size, 1,
                    size, e.dtype == DType::Bool);
      return;
    }
    case ExprKind::Local: {
      const int64_t size = dtype_size(e.dtype);
      const int64_t at = e.operands.empty() ? 0 : f_.index(e.operands[0]);
      std::memcpy(f_.reg(id), f_.local(e.slot) + at * size, static_cast<size_t>(size));
      return;
    }
    case ExprKind::Op: {
      const void* operands[3] = {};
      for (size_t i = 0; i < e.operands.size(); ++i) operands[i] = f_.reg(e.operands[i]);
      p_.fn[id](operands, f_.reg(id), 1);
      return;
    }
    case ExprKind::Random: {
      const int64_t counter = f_.index(e.operands[1]);
      p_.table->random[e.op == static_cast<uint8_t>(ir::OpKind::Randn)][e.dtype == DType::Float64](
          f_.regs[e.operands[0]], &counter, f_.reg(id), 1);
      return;
    }
    default: internal_error("tier 0 met an expression it evaluates only once per call");
  }
}

void Runner::eval_all(const std::vector<Id>& ids) {
  for (Id e : ids) {
    if (const tier0::IndexCode& c = p_.index_code[e]; c.index()) {
      f_.regs[e] = static_cast<uint64_t>(index_op(c.op, f_.index(c.a), f_.index(c.b)));
    } else {
      eval(e);
    }
  }
}

int32_t Runner::steps(const std::vector<Step>& steps) {
  for (const Step& step : steps) {
    eval_all(step.pre);
    if (const int32_t status = run(step); status != 0) return status;
  }
  return 0;
}

int32_t Runner::run(const Step& step) {
  const Stmt& s = *step.stmt;
  switch (s.kind) {
    case Stmt::Kind::For: {
      const int64_t lo = f_.index(s.lo), hi = f_.index(s.hi);
      if (step.block_loop >= 0) return block_loop(p_.loops[step.block_loop], lo, hi);
      if (step.copy_nest >= 0) return copy_nest(p_.copy_nests[step.copy_nest], lo, hi);
      for (int64_t i = lo; i < hi; ++i) {
        if (step.var != kir::kNone) f_.regs[step.var] = static_cast<uint64_t>(i);
        eval_all(step.hoisted);
        if (const int32_t status = steps(step.body); status != 0) return status;
      }
      return 0;
    }
    case Stmt::Kind::Store:
      for (size_t i = 0; i < s.values.size(); ++i) {
        const int64_t size = dtype_size(k_.buffers[s.buffers[i]].dtype);
        std::memcpy(f_.buffer(s.buffers[i]) + f_.index(s.offsets[i]) * size, f_.reg(s.values[i]),
                    static_cast<size_t>(size));
      }
      return 0;
    case Stmt::Kind::Assign:
    case Stmt::Kind::Fold: {
      const DType dtype = k_.locals[s.slot].dtype;
      const int64_t size = dtype_size(dtype);
      std::byte* at = f_.local(s.slot) + (s.offsets.empty() ? 0 : f_.index(s.offsets[0]) * size);
      if (s.kind == Stmt::Kind::Assign) std::memcpy(at, f_.reg(s.values[0]), static_cast<size_t>(size));
      else fold(s.op, dtype)(f_.reg(s.values[0]), 1, at);
      return 0;
    }
    case Stmt::Kind::Check:
      if (f_.regs[s.values[0]] & 0xff) return 0;
      fail(s, f_.index(s.values[1]));
      return s.code;
    case Stmt::Kind::Matmul: {
      const kir::MicroKernel& m = s.micro;
      int64_t rows[6] = {};
      for (size_t r = 0; r < m.a_rows.size() && r < 6; ++r) rows[r] = f_.index(m.a_rows[r]);
      const DType dtype = k_.buffers[m.b].dtype;
      const std::byte* b = f_.buffer(m.b);
      int64_t b_base = f_.index(m.b_base);
      if (m.b_rows >= 0) {  // B in place: its rows packed into a panel here first
        b = pack_rows(m, dtype, b_base);
        b_base = 0;
      }
      const int64_t tile_at = m.tile_at == kir::kNone ? 0 : f_.index(m.tile_at);
      p_.table->matmul[static_cast<int>(dtype)](f_.buffer(m.a), rows, m.packed_a, b, b_base, f_.index(m.k),
                                                f_.local(m.tile) + tile_at * dtype_size(dtype));
      return 0;
    }
  }
  return 0;
}

inline const std::byte* Runner::pack_rows(const kir::MicroKernel& m, DType dtype, int64_t b_base) {
  if (b_base == panel_of_) return panel_.data();
  const int64_t size = dtype_size(dtype), nr = lowering::matmul_tiling(size).nr;
  const int64_t k = f_.index(m.k), cols = f_.index(m.cols);
  panel_.assign(static_cast<size_t>(k * nr * size), std::byte{0});
  const auto* rows = reinterpret_cast<const int64_t*>(f_.buffer(m.b_rows));
  const std::byte* b = f_.buffer(m.b);
  for (int64_t kk = 0; kk < k; ++kk) std::memcpy(&panel_[kk * nr * size], b + (b_base + rows[kk]) * size, cols * size);
  panel_of_ = b_base;
  return panel_.data();
}

inline Runner::Linear Runner::linear(Id e, int u, int v) const {
  const uint64_t both = (u < 0 ? 0 : tier0::bit(u)) | tier0::bit(v);
  if ((p_.vars[e] & both) == 0) return {f_.regs[e], 0, 0};
  const Expr& x = k_.exprs[e];
  if (x.kind == ExprKind::Var) return x.slot == u ? Linear{0, 1, 0} : Linear{0, 0, 1};
  const Linear a = linear(x.operands[0], u, v), b = linear(x.operands[1], u, v);
  switch (static_cast<kir::IndexOp>(x.op)) {
    case kir::IndexOp::Add: return {a.c + b.c, a.su + b.su, a.sv + b.sv};
    case kir::IndexOp::Sub: return {a.c - b.c, a.su - b.su, a.sv - b.sv};
    default: {  // Mul, one side invariant
      const bool a_fixed = (p_.vars[x.operands[0]] & both) == 0;
      const uint64_t by = a_fixed ? a.c : b.c;
      const Linear& l = a_fixed ? b : a;
      return {l.c * by, l.su * by, l.sv * by};
    }
  }
}

inline int32_t Runner::copy_nest(const tier0::CopyNest& nest, int64_t lo, int64_t hi) {
  if (lo >= hi) return 0;
  const int64_t rows = nest.outer < 0 ? 1 : hi - lo;
  for (const tier0::CopyNest::Inner& inner : nest.inners) {
    const int64_t first = f_.index(inner.lo), n = f_.index(inner.hi) - first;
    if (n <= 0) continue;
    auto at = [&](const Linear& l) {
      return static_cast<int64_t>(l.c + l.su * static_cast<uint64_t>(lo) + l.sv * static_cast<uint64_t>(first));
    };
    for (const tier0::CopyNest::Copy& c : inner.copies) {
      const int64_t size = dtype_size(k_.buffers[c.to].dtype);
      const Linear to = linear(c.to_offset, nest.outer, inner.var);
      std::byte* out = f_.buffer(c.to) + at(to) * size;
      const auto to_row = static_cast<int64_t>(to.su), to_col = static_cast<int64_t>(to.sv);
      if (c.from < 0) {
        by_size<Fill2d>(size, out, to_row, to_col, static_cast<const void*>(f_.reg(c.value)), rows, n);
        continue;
      }
      const Linear from = linear(c.from_offset, nest.outer, inner.var);
      const std::byte* in = (c.from_local ? f_.local(c.from) : f_.buffer(c.from)) + at(from) * size;
      const auto from_row = static_cast<int64_t>(from.su), from_col = static_cast<int64_t>(from.sv);
      if (to_col == 1 && from_col == 1 && tier0::copy_rows_takes(n * size)) {
        p_.table->copy_rows(out, to_row * size, in, from_row * size, rows, n * size);
      } else {
        by_size<Copy2d>(size, out, to_row, to_col, in, from_row, from_col, rows, n);
      }
    }
  }
  return 0;
}

}  // namespace tier0

namespace {
/// The calling thread's scratch, reused across calls: registers, locals, blocks (64-byte
/// aligned).
std::vector<uint64_t>& thread_scratch() {
  thread_local std::vector<uint64_t> scratch;
  return scratch;
}

}  // namespace

void Tier0Kernel::prepare_thread() {
  (void)tier0::block_table();
  std::vector<uint64_t>& scratch = thread_scratch();
  constexpr size_t kWords = 32 * kBlock;  // a kernel of up to 32 blocks live at once (256 KiB)
  if (scratch.size() < kWords) scratch.resize(kWords);
}

int32_t run_program(const Tier0Kernel::Program& p, void* const* args, const int64_t* dims, int64_t begin,
                    int64_t end) {
  const kir::Kernel& k = p.k;
  std::vector<uint64_t>& scratch = thread_scratch();
  const size_t regs = (k.exprs.size() + 7) / 8 * 8;
  const size_t words = regs + static_cast<size_t>(p.locals_bytes) / 8 +
                       static_cast<size_t>(p.max_blocks) * static_cast<size_t>(Tier0Kernel::kBlock) + 8;
  if (scratch.size() < words) scratch.resize(words);
  auto* aligned = reinterpret_cast<uint64_t*>((reinterpret_cast<uintptr_t>(scratch.data()) + 63) / 64 * 64);
  tier0::Frame frame{p, args, dims, aligned, reinterpret_cast<std::byte*>(aligned + regs),
                     reinterpret_cast<std::byte*>(aligned + regs) + p.locals_bytes};
  const auto* scalars = k.num_scalars > 0 ? static_cast<const uint64_t*>(args[k.buffers.size()]) : nullptr;
  for (Id id : p.statics) {
    const Expr& e = k.exprs[id];
    uint64_t raw = 0;
    DType from = DType::Int64;
    switch (e.kind) {
      case ExprKind::Const:
        raw = static_cast<uint64_t>(e.bits);
        from = is_floating(e.dtype) ? DType::Float64 : DType::Int64;
        break;
      case ExprKind::Begin: raw = static_cast<uint64_t>(begin); break;
      case ExprKind::End: raw = static_cast<uint64_t>(end); break;
      case ExprKind::Dim: raw = static_cast<uint64_t>(dims[e.slot]); break;
      case ExprKind::Scalar:
        raw = scalars[e.slot];
        from = is_floating(e.dtype) ? DType::Float64 : DType::Int64;
        break;
      default: break;
    }
    frame.regs[id] = 0;
    if (from == e.dtype || (e.kind != ExprKind::Const && e.kind != ExprKind::Scalar)) {
      frame.regs[id] = raw;
      continue;
    }
    const void* operand = &raw;
    p.table->cast[static_cast<int>(from)][static_cast<int>(e.dtype)](&operand, &frame.regs[id], 1);
  }
  tier0::Runner runner(frame);
  runner.eval_all(p.root_hoisted);
  return runner.steps(p.root);
}

}  // namespace lazyjit::runtime

// Kernel IR to LLVM IR: counted loops, hoisted frame reads, scoped reuse of computed values,
// and the register-blocked matmul step.
#include "codegen/kir_llvm.h"

#include <bit>

#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/Intrinsics.h"
#include "llvm/IR/MDBuilder.h"
#include "llvm/Support/raw_ostream.h"
#include "codegen/elementwise.h"
#include "codegen/loop_hints.h"
#include "codegen/philox_llvm.h"
#include "codegen/portable_math.h"
#include "lowering/internal_error.h"
#include "lowering/kernel_abi.h"

namespace lazyjit::codegen {
namespace {

using lowering::internal_error;
using lowering::MatmulTiling;
using lowering::matmul_tiling;
using kir::Expr;
using kir::ExprKind;
using kir::Id;
using kir::Stmt;
using llvm::Value;

class Emitter {
 public:
  Emitter(const kir::Kernel& kernel, llvm::Function* body, EmitTarget target)
      : k_(kernel), target_(target), ctx_(body->getContext()), body_(body), b_(ctx_), hoist_(ctx_), values_(kernel.exprs.size()),
        buffers_read_(kernel.exprs.size(), 0), locals_read_(kernel.exprs.size(), 0), vars_(kernel.num_vars) {
    for (size_t i = 0; i < k_.exprs.size(); ++i) {
      const Expr& e = k_.exprs[i];
      if (e.kind == ExprKind::Load) buffers_read_[i] = bit(e.slot);
      if (e.kind == ExprKind::Local) locals_read_[i] = bit(e.slot);
      for (Id o : e.operands) {
        buffers_read_[i] |= buffers_read_[o];
        locals_read_[i] |= locals_read_[o];
      }
    }
    const int buffers = static_cast<int>(k_.buffers.size());
    scalars_ = k_.num_scalars > 0 ? body->getArg(buffers) : nullptr;
    dims_ = body->getArg(buffers + (k_.num_scalars > 0 ? 1 : 0));
    begin_ = body->getArg(body->arg_size() - 2);
    end_ = body->getArg(body->arg_size() - 1);
  }

  void emit() {
    auto* entry = llvm::BasicBlock::Create(ctx_, "entry", body_);
    auto* start = llvm::BasicBlock::Create(ctx_, "start", body_);
    hoist_.SetInsertPoint(llvm::BranchInst::Create(start, entry));
    b_.SetInsertPoint(start);
    for (const kir::Local& local : k_.locals) {
      llvm::Type* type = value_type(ctx_, local.dtype);
      llvm::AllocaInst* slot = hoist_.CreateAlloca(local.size == 1 ? type : llvm::ArrayType::get(type, local.size));
      if (local.size > 1) slot->setAlignment(llvm::Align(64));
      locals_.push_back(slot);
    }
    body(k_.body);
    b_.CreateRet(b_.getInt32(0));
  }

 private:
  Value* i64(int64_t v) { return b_.getInt64(v); }

  /// Frame reads and constants are computed once, at the top; the rest where first used in a
  /// scope, and reused there until the scope ends (or, for values read from a buffer or a
  /// local, until a write to it). Nothing that can trap (a division) moves above its loop.
  Value* value(Id id) {
    if (values_[id] != nullptr) return values_[id];
    const Expr& e = k_.exprs[id];
    Value* v = nullptr;
    switch (e.kind) {
      case ExprKind::Const: {
        llvm::Type* type = value_type(ctx_, e.dtype);
        if (is_floating(e.dtype)) v = llvm::ConstantFP::get(type, std::bit_cast<double>(e.bits));
        else v = llvm::ConstantInt::get(type, static_cast<uint64_t>(e.bits), /*isSigned=*/true);
        break;
      }
      case ExprKind::Begin: v = begin_; break;
      case ExprKind::End: v = end_; break;
      case ExprKind::Dim:
        v = hoist_.CreateLoad(hoist_.getInt64Ty(), hoist_.CreateConstInBoundsGEP1_64(hoist_.getInt64Ty(), dims_, e.slot),
                              "d" + std::to_string(e.slot));
        break;
      case ExprKind::Scalar: {
        const DType raw = is_floating(e.dtype) ? DType::Float64 : DType::Int64;
        Value* bits = hoist_.CreateLoad(value_type(ctx_, raw), hoist_.CreateConstInBoundsGEP1_64(hoist_.getInt64Ty(), scalars_, e.slot),
                                        "s" + std::to_string(e.slot));
        v = emit_convert(hoist_, bits, raw, e.dtype);
        break;
      }
      default: return remember(id, compute(e));
    }
    values_[id] = v;  // valid everywhere: never forgotten
    return v;
  }

  Value* remember(Id id, Value* v) {
    values_[id] = v;
    trail_.push_back(id);
    return v;
  }

  Value* compute(const Expr& e) {
    switch (e.kind) {
      case ExprKind::Var: return vars_[e.slot];
      case ExprKind::Load: {
        llvm::Type* type = storage_type(ctx_, e.dtype);
        Value* v = b_.CreateLoad(type, b_.CreateInBoundsGEP(type, body_->getArg(e.slot), value(e.operands[0])));
        return e.dtype == DType::Bool ? b_.CreateICmpNE(v, b_.getInt8(0)) : v;
      }
      case ExprKind::Local: return b_.CreateLoad(value_type(ctx_, e.dtype), local_address(e.slot, e.operands));
      case ExprKind::Index: return index(static_cast<kir::IndexOp>(e.op), value(e.operands[0]), value(e.operands[1]));
      case ExprKind::Op: {
        std::vector<Value*> args;
        for (Id o : e.operands) args.push_back(value(o));
        return emit_op(b_, static_cast<ir::OpKind>(e.op), e.dtype, k_.exprs[e.operands[0]].dtype, args);
      }
      case ExprKind::Random:
        return emit_random(b_, static_cast<ir::OpKind>(e.op), e.dtype, value(e.operands[0]), value(e.operands[1]));
      default: break;
    }
    internal_error("the kernel IR emitter met an expression it does not know");
  }

  Value* index(kir::IndexOp op, Value* x, Value* y) {
    switch (op) {
      case kir::IndexOp::Add: return b_.CreateAdd(x, y, "", /*HasNUW=*/true, /*HasNSW=*/true);
      case kir::IndexOp::Sub: return b_.CreateSub(x, y);
      case kir::IndexOp::Mul: return b_.CreateMul(x, y, "", /*HasNUW=*/true, /*HasNSW=*/true);
      case kir::IndexOp::Div: return b_.CreateUDiv(x, y);
      case kir::IndexOp::Rem: return b_.CreateURem(x, y);
      case kir::IndexOp::Min: return b_.CreateBinaryIntrinsic(llvm::Intrinsic::smin, x, y);
      case kir::IndexOp::Max: return b_.CreateBinaryIntrinsic(llvm::Intrinsic::smax, x, y);
    }
    return nullptr;
  }

  Value* local_address(int slot, const std::vector<Id>& offset) {
    if (offset.empty()) return locals_[slot];
    return b_.CreateInBoundsGEP(value_type(ctx_, k_.locals[slot].dtype), locals_[slot], value(offset[0]));
  }

  /// Slots as bits of a mask; slots past 63 share the last bit.
  static uint64_t bit(int slot) { return uint64_t{1} << std::min(slot, 63); }

  /// After a write to buffers or locals: the values read from them before it are read again.
  void forget(uint64_t buffers, uint64_t locals) {
    for (Id id : trail_) {
      if ((buffers_read_[id] & buffers) != 0 || (locals_read_[id] & locals) != 0) values_[id] = nullptr;
    }
  }

  void store(int buffer, Value* offset, Value* v, DType dtype) {
    if (dtype == DType::Bool) v = b_.CreateZExt(v, b_.getInt8Ty());
    llvm::Type* type = storage_type(ctx_, dtype);
    b_.CreateStore(v, b_.CreateInBoundsGEP(type, body_->getArg(buffer), offset));
  }

  void body(const std::vector<Stmt>& stmts) {
    for (const Stmt& s : stmts) {
      switch (s.kind) {
        case Stmt::Kind::For: loop(s); break;
        case Stmt::Kind::Store: {
          std::vector<Value*> offsets, values;
          for (size_t i = 0; i < s.values.size(); ++i) {
            offsets.push_back(value(s.offsets[i]));
            values.push_back(value(s.values[i]));
          }
          uint64_t written = 0;
          for (size_t i = 0; i < s.values.size(); ++i) {
            store(s.buffers[i], offsets[i], values[i], k_.buffers[s.buffers[i]].dtype);
            written |= bit(s.buffers[i]);
          }
          forget(written, 0);
          break;
        }
        case Stmt::Kind::Assign:
        case Stmt::Kind::Fold: {
          Value* v = value(s.values[0]);
          Value* address = local_address(s.slot, s.offsets);
          if (s.kind == Stmt::Kind::Fold) v = combine(s.op, k_.locals[s.slot].dtype, b_.CreateLoad(v->getType(), address), v);
          b_.CreateStore(v, address);
          forget(0, bit(s.slot));
          break;
        }
        case Stmt::Kind::Matmul:
          matmul(s.micro);
          forget(0, bit(s.micro.tile));
          break;
        case Stmt::Kind::Check: check(s); break;
      }
    }
  }

  /// Unless the condition holds: the offending value to the status buffer, and return the
  /// check's code. Threads that fail at once each write a value of their own: one of them stays.
  void check(const Stmt& s) {
    Value* ok = value(s.values[0]);
    Value* offending = value(s.values[1]);
    auto* fail = llvm::BasicBlock::Create(ctx_, "check" + std::to_string(s.code) + ".fail", body_);
    auto* pass = llvm::BasicBlock::Create(ctx_, "check" + std::to_string(s.code) + ".ok", body_);
    llvm::MDBuilder weights(ctx_);
    b_.CreateCondBr(ok, pass, fail, weights.createLikelyBranchWeights());
    b_.SetInsertPoint(fail);
    llvm::StoreInst* store = b_.CreateAlignedStore(offending, body_->getArg(s.slot), llvm::Align(8));
    store->setAtomic(llvm::AtomicOrdering::Monotonic);
    b_.CreateRet(b_.getInt32(s.code));
    b_.SetInsertPoint(pass);
  }

  Value* combine(ir::OpKind op, DType dtype, Value* current, Value* v) {
    Value* args[] = {current, v};
    Value* next = emit_same(b_, op, dtype, args);
    if (op == ir::OpKind::Add && is_floating(dtype)) {
      llvm::FastMathFlags flags;
      flags.setAllowReassoc();
      llvm::cast<llvm::Instruction>(next)->setFastMathFlags(flags);
    }
    return next;
  }

  /// for (i = lo; i < hi; ++i) body(i), at the builder's position; leaves the builder after it.
  template <class F>
  void counted_loop(Value* lo, Value* hi, const std::string& name, F&& body, bool fold_tail = false) {
    llvm::BasicBlock* before = b_.GetInsertBlock();
    auto* header = llvm::BasicBlock::Create(ctx_, name, body_);
    auto* loop_body = llvm::BasicBlock::Create(ctx_, name + ".body", body_);
    auto* exit = llvm::BasicBlock::Create(ctx_, name + ".exit", body_);
    b_.CreateBr(header);
    b_.SetInsertPoint(header);
    llvm::PHINode* i = b_.CreatePHI(b_.getInt64Ty(), 2, name);
    i->addIncoming(lo, before);
    b_.CreateCondBr(b_.CreateICmpSLT(i, hi), loop_body, exit);
    b_.SetInsertPoint(loop_body);
    body(i);
    i->addIncoming(b_.CreateAdd(i, i64(1), name + ".next", /*HasNUW=*/true, /*HasNSW=*/true), b_.GetInsertBlock());
    llvm::BranchInst* latch = b_.CreateBr(header);
    if (fold_tail) {
      llvm::Metadata* hint[] = {llvm::MDString::get(ctx_, "llvm.loop.vectorize.predicate.enable"),
                                llvm::ConstantAsMetadata::get(b_.getTrue())};
      llvm::MDNode* id = llvm::MDNode::getDistinct(ctx_, {nullptr, llvm::MDNode::get(ctx_, hint)});
      id->replaceOperandWith(0, id);  // a loop's id names itself
      latch->setMetadata(llvm::LLVMContext::MD_loop, id);
    }
    b_.SetInsertPoint(exit);
  }

  /// A For: values first computed in its body are forgotten after it.
  void loop(const Stmt& s) {
    counted_loop(value(s.lo), value(s.hi), "v" + std::to_string(s.slot), [&](Value* i) {
      vars_[s.slot] = i;
      const size_t mark = trail_.size();
      body(s.body);
      for (size_t t = mark; t < trail_.size(); ++t) values_[trail_[t]] = nullptr;
      trail_.resize(mark);  // (what the body wrote was forgotten by its writes)
    }, target_ == EmitTarget::Cpu && folds_tail(k_, s));
  }

  /// Rows of a B read in place that the panel on the stack holds.
  static constexpr int64_t kPanelRows = 2048;

  /// MR rows by NR columns of accumulators (two vectors per row) over all of K, then the
  /// tile stored to its local. A B read in place is first copied into a panel on the stack
  /// (its rows lie scattered and unaligned, a window's rows in the input): once per tile
  /// (the micro-kernels of a tile share b_base) when K fits the panel, else a block of
  /// kPanelRows rows at a time.
  void matmul(const kir::MicroKernel& m) {
    if (target_ == EmitTarget::Gpu) return matmul_scalar(m);
    const Tile t = tile_of(m);
    if (accumulators_.empty()) {
      for (int64_t i = 0; i < 2 * t.tiling.mr; ++i) accumulators_.push_back(hoist_.CreateAlloca(t.vector));
    }
    for (llvm::AllocaInst* a : accumulators_) b_.CreateStore(llvm::Constant::getNullValue(t.vector), a);
    std::vector<Value*> a_rows;
    for (Id r : m.a_rows) a_rows.push_back(value(r));
    if (m.b_rows < 0) {
      Value* b_base = value(m.b_base);
      counted_loop(i64(0), value(m.k), "kk", [&](Value* kk) {
        multiply(m, t, a_rows, kk, body_->getArg(m.b), b_.CreateAdd(b_base, b_.CreateMul(kk, i64(t.tiling.nr))));
      });
    } else {
      multiply_in_place(m, t, a_rows);
    }
    Value* tile = tile_of(m, t);
    for (int64_t i = 0; i < 2 * t.tiling.mr; ++i) {
      Value* p = b_.CreateConstInBoundsGEP1_64(t.scalar, tile, i * t.lanes);
      b_.CreateAlignedStore(b_.CreateLoad(t.vector, accumulators_[i]), p, llvm::Align(64));
    }
  }

  /// A micro-kernel's types: its tiling, element, and half-row vector (NR / 2 lanes).
  struct Tile {
    DType dtype;
    MatmulTiling tiling;
    llvm::Type* scalar;
    int64_t lanes;
    llvm::FixedVectorType* vector;
  };
  Tile tile_of(const kir::MicroKernel& m) {
    const DType dtype = k_.buffers[m.b].dtype;
    const MatmulTiling tiling = matmul_tiling(dtype_size(dtype));
    llvm::Type* scalar = value_type(ctx_, dtype);
    return {dtype, tiling, scalar, tiling.nr / 2, llvm::FixedVectorType::get(scalar, static_cast<unsigned>(tiling.nr / 2))};
  }

  /// One step of K: row kk of B (two aligned vectors at b_row of b_buffer) times the MR
  /// elements of A's column kk, into the accumulators.
  void multiply(const kir::MicroKernel& m, const Tile& t, const std::vector<Value*>& a_rows, Value* kk, Value* b_buffer,
                Value* b_row) {
    Value* bv[2];
    for (int half = 0; half < 2; ++half) {
      Value* p = b_.CreateInBoundsGEP(t.scalar, b_buffer, b_.CreateAdd(b_row, i64(half * t.lanes)));
      bv[half] = b_.CreateAlignedLoad(t.vector, p, llvm::Align(64));
    }
    Value* a_row = m.packed_a ? b_.CreateAdd(a_rows[0], b_.CreateMul(kk, i64(t.tiling.mr))) : nullptr;
    for (int64_t r = 0; r < t.tiling.mr; ++r) {
      Value* at = m.packed_a ? b_.CreateAdd(a_row, i64(r)) : b_.CreateAdd(a_rows[r], kk);
      Value* a = b_.CreateLoad(t.scalar, b_.CreateInBoundsGEP(t.scalar, body_->getArg(m.a), at));
      Value* splat = b_.CreateVectorSplat(static_cast<unsigned>(t.lanes), a);
      for (int half = 0; half < 2; ++half) {
        llvm::AllocaInst* slot = accumulators_[r * 2 + half];
        Value* sum = b_.CreateLoad(t.vector, slot);
        sum = is_floating(t.dtype) ? b_.CreateIntrinsic(llvm::Intrinsic::fma, {t.vector}, {splat, bv[half], sum})
                                   : b_.CreateAdd(b_.CreateMul(splat, bv[half]), sum);
        b_.CreateStore(sum, slot);
      }
    }
  }

  /// All of K for a B read in place: its rows copied into the panel (once per tile when K
  /// fits, else a block at a time), each row's first `cols` columns under a mask (no read
  /// past them) and zeros after, then multiplied from there.
  void multiply_in_place(const kir::MicroKernel& m, const Tile& t, const std::vector<Value*>& a_rows) {
    if (panel_ == nullptr) {
      panel_ = hoist_.CreateAlloca(t.scalar, i64(kPanelRows * t.tiling.nr));
      panel_->setAlignment(llvm::Align(64));
      panel_of_ = hoist_.CreateAlloca(b_.getInt64Ty());
      hoist_.CreateStore(i64(-1), panel_of_);  // the b_base whose rows the panel holds
    }
    Value* mask[2];
    Value* cols = b_.CreateVectorSplat(static_cast<unsigned>(t.lanes), value(m.cols));
    for (int half = 0; half < 2; ++half) {
      std::vector<llvm::Constant*> lane;
      for (int64_t j = 0; j < t.lanes; ++j) lane.push_back(b_.getInt64(half * t.lanes + j));
      mask[half] = b_.CreateICmpSLT(llvm::ConstantVector::get(lane), cols);
    }
    Value* b_base = value(m.b_base);
    Value* k = value(m.k);
    Value* blocks = b_.CreateSDiv(b_.CreateAdd(k, i64(kPanelRows - 1)), i64(kPanelRows));
    Value* whole = b_.CreateICmpSLE(blocks, i64(1));
    Value* fresh = b_.CreateOr(b_.CreateNot(whole), b_.CreateICmpNE(b_.CreateLoad(b_.getInt64Ty(), panel_of_), b_base));
    b_.CreateStore(b_.CreateSelect(whole, b_base, i64(-1)), panel_of_);
    counted_loop(i64(0), blocks, "kb", [&](Value* block) {
      Value* first = b_.CreateMul(block, i64(kPanelRows));
      Value* rest = b_.CreateSub(k, first);
      Value* rows = b_.CreateSelect(b_.CreateICmpSLT(rest, i64(kPanelRows)), rest, i64(kPanelRows));
      counted_loop(i64(0), b_.CreateSelect(fresh, rows, i64(0)), "copy", [&](Value* i) {
        Value* at = b_.CreateInBoundsGEP(b_.getInt64Ty(), body_->getArg(m.b_rows), b_.CreateAdd(first, i));
        Value* offset = b_.CreateLoad(b_.getInt64Ty(), at);
        Value* row = b_.CreateAdd(b_base, offset);
        for (int half = 0; half < 2; ++half) {
          Value* from = b_.CreateInBoundsGEP(t.scalar, body_->getArg(m.b), b_.CreateAdd(row, i64(half * t.lanes)));
          Value* v = b_.CreateMaskedLoad(t.vector, from, llvm::Align(dtype_size(t.dtype)), mask[half],
                                         llvm::Constant::getNullValue(t.vector));
          Value* to = b_.CreateInBoundsGEP(t.scalar, panel_, b_.CreateAdd(b_.CreateMul(i, i64(t.tiling.nr)), i64(half * t.lanes)));
          b_.CreateAlignedStore(v, to, llvm::Align(64));
        }
      });
      counted_loop(i64(0), rows, "kk", [&](Value* i) {
        multiply(m, t, a_rows, b_.CreateAdd(first, i), panel_, b_.CreateMul(i, i64(t.tiling.nr)));
      });
    });
  }

  /// Where the micro-kernel's tile starts in its local (MicroKernel::tile_at).
  Value* tile_of(const kir::MicroKernel& m, const Tile& t) {
    if (m.tile_at == kir::kNone) return locals_[m.tile];
    return b_.CreateInBoundsGEP(t.scalar, locals_[m.tile], value(m.tile_at));
  }

  /// A GPU thread's micro-kernel: scalar accumulators in the tile itself, B's rows read
  /// where they lie (packed or in place, no panel: a GPU thread's stack is small and slow).
  void matmul_scalar(const kir::MicroKernel& m) {
    const Tile t = tile_of(m);
    const MatmulTiling& tiling = t.tiling;
    llvm::Type* scalar = t.scalar;
    Value* tile = tile_of(m, t);
    counted_loop(i64(0), i64(tiling.mr * tiling.nr), "zero", [&](Value* i) {
      b_.CreateStore(llvm::Constant::getNullValue(scalar), b_.CreateInBoundsGEP(scalar, tile, i));
    });
    std::vector<Value*> a_rows;
    for (Id r : m.a_rows) a_rows.push_back(value(r));
    Value* b_base = value(m.b_base);
    Value* cols = m.b_rows < 0 ? i64(tiling.nr) : value(m.cols);
    Value* a_buffer = body_->getArg(m.a);
    Value* b_buffer = body_->getArg(m.b);
    counted_loop(i64(0), value(m.k), "kk", [&](Value* kk) {
      Value* b_row = m.b_rows < 0
                         ? b_.CreateAdd(b_base, b_.CreateMul(kk, i64(tiling.nr)))
                         : b_.CreateAdd(b_base, b_.CreateLoad(b_.getInt64Ty(),
                                                              b_.CreateInBoundsGEP(b_.getInt64Ty(), body_->getArg(m.b_rows), kk)));
      for (int64_t r = 0; r < tiling.mr; ++r) {
        Value* at = m.packed_a ? b_.CreateAdd(a_rows[0], b_.CreateAdd(b_.CreateMul(kk, i64(tiling.mr)), i64(r)))
                               : b_.CreateAdd(a_rows[r], kk);
        Value* a = b_.CreateLoad(scalar, b_.CreateInBoundsGEP(scalar, a_buffer, at));
        counted_loop(i64(0), cols, "j", [&](Value* j) {
          Value* slot = b_.CreateInBoundsGEP(scalar, tile, b_.CreateAdd(i64(r * tiling.nr), j));
          Value* x = b_.CreateLoad(scalar, b_.CreateInBoundsGEP(scalar, b_buffer, b_.CreateAdd(b_row, j)));
          Value* sum = b_.CreateLoad(scalar, slot);
          sum = is_floating(t.dtype) ? b_.CreateIntrinsic(llvm::Intrinsic::fma, {scalar}, {a, x, sum})
                                   : b_.CreateAdd(b_.CreateMul(a, x), sum);
          b_.CreateStore(sum, slot);
        });
      }
    });
  }

  const kir::Kernel& k_;
  EmitTarget target_;
  llvm::LLVMContext& ctx_;
  llvm::Function* body_;
  llvm::IRBuilder<> b_;
  llvm::IRBuilder<> hoist_;
  std::vector<Value*> values_;      // per expression: its value where the builder is, if known
  std::vector<uint64_t> buffers_read_, locals_read_;  // per expression: the slots it reads (bit)
  std::vector<Id> trail_;           // expressions remembered in the open scopes, in order
  std::vector<Value*> vars_;
  std::vector<llvm::AllocaInst*> locals_, accumulators_;
  llvm::AllocaInst *panel_ = nullptr, *panel_of_ = nullptr;  // a B read in place, and its b_base
  Value *scalars_ = nullptr, *dims_ = nullptr, *begin_ = nullptr, *end_ = nullptr;
};

}  // namespace

llvm::Function* emit_body(const kir::Kernel& kernel, const std::string& symbol, llvm::Module& module,
                          EmitTarget target) {
  llvm::LLVMContext& ctx = module.getContext();
  auto* ptr = llvm::PointerType::get(ctx, 0);
  auto* i64 = llvm::Type::getInt64Ty(ctx);
  const unsigned pointers = frame_pointers(kernel);
  std::vector<llvm::Type*> params(pointers + 1, ptr);  // the buffers, the scalar frame, the dims
  params.insert(params.end(), {i64, i64});
  auto* body = llvm::Function::Create(llvm::FunctionType::get(llvm::Type::getInt32Ty(ctx), params, false),
                                      llvm::Function::InternalLinkage, symbol + ".body", module);
  body->addFnAttr(llvm::Attribute::NoUnwind);
  for (unsigned i = 0; i <= pointers; ++i) body->addParamAttr(i, llvm::Attribute::NoAlias);
  Emitter(kernel, body, target).emit();
  if (target == EmitTarget::Gpu) use_portable_math(module);
  return body;
}

void emit_llvm(const kir::Kernel& kernel, const std::string& symbol, llvm::Module& module, EmitTarget body_target) {
  llvm::LLVMContext& ctx = module.getContext();
  llvm::IRBuilder<> b(ctx);
  auto* ptr = b.getPtrTy();
  auto* i64 = b.getInt64Ty();
  const unsigned pointers = frame_pointers(kernel);
  llvm::Function* body = emit_body(kernel, symbol, module, body_target);
  auto* entry = llvm::Function::Create(llvm::FunctionType::get(b.getInt32Ty(), {ptr, ptr, i64, i64}, false),
                                       llvm::Function::ExternalLinkage, symbol, module);
  entry->addFnAttr(llvm::Attribute::NoUnwind);
  const char* names[] = {"args", "dims", "begin", "end"};
  for (int i = 0; i < 4; ++i) entry->getArg(i)->setName(names[i]);
  b.SetInsertPoint(llvm::BasicBlock::Create(ctx, "entry", entry));
  std::vector<Value*> args;
  for (unsigned k = 0; k < pointers; ++k) args.push_back(b.CreateLoad(ptr, b.CreateConstInBoundsGEP1_64(ptr, entry->getArg(0), k)));
  for (int i = 1; i < 4; ++i) args.push_back(entry->getArg(i));
  b.CreateRet(b.CreateCall(body, args));
}

KernelModule emit_module(const lowering::LoweredKernel& kernel, EmitTarget body_target) {
  const std::string symbol = "lj_" + kernel.content.to_hex();
  KernelModule m{std::make_unique<llvm::LLVMContext>(), nullptr};
  m.module = std::make_unique<llvm::Module>(symbol, *m.context);
  m.module->setSourceFileName(symbol);
  emit_llvm(kernel.kir, symbol, *m.module, body_target);
  return m;
}

std::string module_text(const llvm::Module& module) {
  std::string text;
  llvm::raw_string_ostream os(text);
  module.print(os, nullptr);
  return text;
}

std::string llvm_ir_text(const lowering::LoweredGraph& lowered) {
  std::string text;
  for (const lowering::LoweredKernel& kernel : lowered.kernels) text += module_text(*emit_module(kernel).module);
  return text;
}

}  // namespace lazyjit::codegen

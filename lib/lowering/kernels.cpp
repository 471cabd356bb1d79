// Elementwise-over-views, Rows, PackA, PackB and Matmul kernels.
#include "lowering/kernels.h"

#include <algorithm>

#include "lowering/elementwise.h"
#include "lowering/expr.h"
#include "lowering/fusion.h"
#include "llvm/IR/Intrinsics.h"

namespace lazyjit::lowering {
namespace {

using ir::OpKind;
using llvm::Value;
using Index = ExprEmitter::Index;

class Emitter {
 public:
  Emitter(llvm::Module& module, const ir::Graph& graph, const KernelPlan& plan, const KernelSpec& spec,
          std::span<const Alias> aliases)
      : graph_(graph), plan_(plan), spec_(spec), aliases_(aliases),
        num_parameters_(static_cast<int>(graph.parameters.size())),
        fn_(module, spec.symbol,
            temp_buffer_index(num_parameters_, static_cast<int>(graph.roots.size()), static_cast<int>(plan.temps.size()))),
        b_(fn_.builder()), e_(fn_, graph, plan, spec) {}

  KernelFrame emit() {
    switch (spec_.kind) {
      case KernelKind::Elementwise: elementwise(); break;
      case KernelKind::Rows: rows(); break;
      case KernelKind::PackA: pack(/*left=*/true); break;
      case KernelKind::PackB: pack(/*left=*/false); break;
      case KernelKind::Matmul: matmul(); break;
    }
    return fn_.finish(scalar_table_index(num_parameters_, static_cast<int>(graph_.roots.size())));
  }

 private:
  const ir::Node& node(int n) const { return *graph_.nodes[n]; }
  Value* i64(int64_t v) { return b_.getInt64(v); }
  Value* min(Value* a, Value* b) { return b_.CreateBinaryIntrinsic(llvm::Intrinsic::smin, a, b); }
  Value* ceil_div(Value* a, int64_t b) { return b_.CreateUDiv(b_.CreateAdd(a, i64(b - 1)), i64(b)); }

  /// The buffer result `r` is written to: its own, or the parameter it was donated.
  int output_buffer(int r) const {
    for (const Alias& a : aliases_) {
      if (a.result == r) return a.parameter;
    }
    return num_parameters_ + r;
  }

  /// Stores `results` at one element (`offset` into their buffers, `index` in the domain):
  /// the roots, or with `below_reshapes` the product itself for a result that reshapes it
  /// (an epilogue indexes the product, whose elements such a result holds in the same order;
  /// the other results have the product's shape, reshapes of a parameter included). Every value is
  /// computed before the first store: a result donated a parameter's buffer must not
  /// overwrite the element another result still reads from it.
  void store_results(const std::vector<int>& results, Value* offset, const Index& index, bool below_reshapes = false) {
    std::vector<int> nodes;
    std::vector<Value*> values;
    for (int r : results) {
      const int root = graph_.roots[r];
      nodes.push_back(below_reshapes && stored_value(graph_, root) == spec_.domain ? spec_.domain : root);
      values.push_back(e_.at(nodes.back(), index));
    }
    for (size_t i = 0; i < results.size(); ++i) e_.store(nodes[i], output_buffer(results[i]), offset, values[i]);
  }

  /// The domain index of `linear` over its first `count` kept dims (`kept`, ascending; the
  /// folded dims of `dims` are left to the caller's loops).
  void unravel_kept(Value* linear, const std::vector<int>& kept, size_t count, std::vector<Value*>& dims) {
    const int d = spec_.domain;
    for (size_t k = count; k-- > 0;) {
      const int dim = kept[k];
      if (node(d).shape()[dim] == 1) continue;
      dims[dim] = k == 0 ? linear : b_.CreateURem(linear, e_.dim(d, dim));
      if (k > 0) linear = b_.CreateUDiv(linear, e_.dim(d, dim));
    }
  }

  /// The iterations [begin, end) as runs along a dim of size `inner`: body(run, base, j0, j1)
  /// covers iterations base + [j0, j1) of run `run` (the iteration's index divided by inner).
  void for_runs(Value* inner, const std::function<void(Value*, Value*, Value*, Value*)>& body) {
    emit_for(b_, b_.CreateUDiv(fn_.begin(), inner), ceil_div_by(fn_.end(), inner), "run", [&](Value* run) {
      Value* base = b_.CreateMul(run, inner);
      Value* j0 = b_.CreateBinaryIntrinsic(llvm::Intrinsic::smax, b_.CreateSub(fn_.begin(), base), i64(0));
      Value* j1 = min(b_.CreateSub(fn_.end(), base), inner);
      body(run, base, j0, j1);
    });
  }

  /// Elements [begin, end) of the domain, as runs along its innermost dim: the outer index is
  /// derived once per run, the inner loop is unit-stride for contiguous reads.
  void elementwise() {
    const int d = spec_.domain;
    const int rank = node(d).rank();
    for_runs(rank == 0 ? i64(1) : e_.dim(d, rank - 1), [&](Value* row, Value* base, Value* j0, Value* j1) {
      std::vector<Value*> dims(rank, i64(0));
      if (rank > 1) e_.unravel_into(d, row, 0, rank - 1, dims);
      emit_for(b_, j0, j1, "j", [&](Value* j) {
        e_.forget();
        if (rank > 0) dims[rank - 1] = j;
        Index index{dims, b_.CreateAdd(base, j)};
        store_results(spec_.results, index.linear, index);
        if (spec_.cut >= 0) e_.store(spec_.cut, plan_.buffer_of[spec_.cut], index.linear, e_.at(spec_.cut, index));
      });
    });
    e_.forget();
  }

  Value* ceil_div_by(Value* a, Value* b) { return b_.CreateUDiv(b_.CreateAdd(a, b_.CreateSub(b, i64(1))), b); }

  /// Nested loops over the folded dims of the domain (innermost last), filling `dims`.
  void over_row(std::vector<Value*>& dims, size_t k, const std::function<void()>& body) {
    if (k == spec_.reduced.size()) {
      e_.forget();
      body();
      e_.forget();
      return;
    }
    const int d = spec_.reduced[k];
    emit_for(b_, i64(0), e_.dim(spec_.domain, d), "r" + std::to_string(d), [&](Value* i) {
      dims[d] = i;
      over_row(dims, k + 1, body);
    });
  }

  void rows() {
    const int d = spec_.domain;
    const int rank = node(d).rank();
    std::vector<int> kept;
    for (int k = 0; k < rank; ++k) {
      if (!std::binary_search(spec_.reduced.begin(), spec_.reduced.end(), k)) kept.push_back(k);
    }
    if (folds_columns(kept)) return columns(kept);
    emit_for(b_, fn_.begin(), fn_.end(), "row", [&](Value* row) {
      std::vector<Value*> dims(rank, i64(0));
      unravel_kept(row, kept, kept.size(), dims);
      const auto [kept_node, kept_result] = kept_in_output();
      for (int s : spec_.stages) {
        const bool keep = kept_node >= 0 && s == spec_.stages.back();
        e_.bind(s, fold(s, dims, keep ? output_buffer(kept_result) : -1));
      }
      std::vector<int> per_row, per_element;
      for (int r : spec_.results) {
        const bool stage = std::ranges::find(spec_.stages, stored_value(graph_, graph_.roots[r])) != spec_.stages.end();
        (stage ? per_row : per_element).push_back(r);
      }
      if (!per_element.empty()) {
        over_row(dims, 0, [&] {
          Value* offset = e_.ravel(d, dims);
          if (kept_node >= 0) e_.bind(kept_node, e_.load(kept_node, output_buffer(kept_result), offset));
          store_results(per_element, offset, Index{dims, nullptr});
          if (kept_node >= 0) e_.unbind(kept_node);
        });
      }
      for (int r : per_row) {
        const int value = stored_value(graph_, graph_.roots[r]);
        e_.store(value, output_buffer(r), row, e_.at(value, {}));
      }
      for (int t : spec_.temps) e_.store(plan_.temps[t].node, plan_.buffer_of[plan_.temps[t].node], row, e_.at(plan_.temps[t].node, {}));
      for (int s : spec_.stages) e_.unbind(s);
    });
  }

  /// One row of reduction `s`, folded in index order (per element of the result, so the
  /// order does not depend on the thread count). Float sums may reassociate: the vectoriser
  /// keeps lanes of partial sums, the same ones on every run.
  /// A lone sum, amax or amin that keeps the innermost dim (`sum(x, 0)`): folding one output
  /// element at a time would read its inputs a stride apart, so it folds whole runs of the
  /// innermost dim at once instead, in the output buffer. Not when that buffer was donated
  /// by the input (the fold folds over size-1 dims): the identity would overwrite the input.
  bool folds_columns(const std::vector<int>& kept) const {
    if (spec_.stages.size() != 1 || kept.empty() || kept.back() != node(spec_.domain).rank() - 1) return false;
    const OpKind op = node(spec_.stages[0]).op();
    if (op != OpKind::Sum && op != OpKind::Amax && op != OpKind::Amin) return false;
    if (!spec_.results.empty() && output_buffer(spec_.results[0]) != num_parameters_ + spec_.results[0]) return false;
    return !spec_.results.empty() || !spec_.temps.empty();
  }

  /// Iterations are the kept elements, as in rows(); each run of them along the innermost
  /// dim starts at the fold's identity in the first output buffer and takes in the reduced
  /// elements in index order (the order rows() uses), a unit-stride vector loop per step.
  void columns(const std::vector<int>& kept) {
    const int d = spec_.domain;
    const int rank = node(d).rank();
    const int s = spec_.stages[0];
    const int operand = graph_.operands[s][0];
    const OpKind op = node(s).op();
    const DType in = node(operand).dtype(), acc_dtype = node(s).dtype();
    llvm::Type* type = value_type(b_.getContext(), acc_dtype);
    std::vector<int> outputs;
    for (int r : spec_.results) outputs.push_back(output_buffer(r));
    for (int t : spec_.temps) outputs.push_back(plan_.buffer_of[plan_.temps[t].node]);
    const int acc = outputs[0];
    for_runs(e_.dim(d, rank - 1), [&](Value* run, Value* base, Value* j0, Value* j1) {
      std::vector<Value*> dims(rank, i64(0));
      unravel_kept(run, kept, kept.size() - 1, dims);
      emit_for(b_, j0, j1, "init", [&](Value* j) { e_.store(s, acc, b_.CreateAdd(base, j), identity(op, acc_dtype, type)); });
      over_row(dims, 0, [&] {
        emit_for(b_, j0, j1, "j", [&](Value* j) {
          e_.forget();
          dims[rank - 1] = j;
          Value* v = emit_convert(b_, e_.at(operand, Index{dims, nullptr}), in, acc_dtype);
          Value* at = b_.CreateAdd(base, j);
          Value* current = e_.load(s, acc, at);
          Value* next = nullptr;
          if (op == OpKind::Sum) {
            next = is_floating(acc_dtype) ? b_.CreateFAdd(current, v)
                                          : acc_dtype == DType::Bool ? b_.CreateOr(current, v) : b_.CreateAdd(current, v);
          } else {
            Value* args[] = {current, v};
            next = emit_same(b_, op == OpKind::Amax ? OpKind::Maximum : OpKind::Minimum, acc_dtype, args);
          }
          e_.store(s, acc, at, next);
          e_.forget();
        });
      });
      for (size_t o = 1; o < outputs.size(); ++o) {
        emit_for(b_, j0, j1, "copy", [&](Value* j) {
          Value* at = b_.CreateAdd(base, j);
          e_.store(s, outputs[o], at, e_.load(s, acc, at));
        });
      }
    });
    e_.forget();
  }

  /// The last stage's operand, when a result of the row reads it and can hold it: the stage
  /// pass stores it in that result's buffer and the output pass reads it back (the row is in
  /// cache), so softmax computes exp once per element. Not for a donated buffer, whose old
  /// values the output pass may still read.
  std::pair<int, int> kept_in_output() const {
    if (spec_.stages.empty()) return {-1, -1};
    const int operand = graph_.operands[spec_.stages.back()][0];
    if (ir::op_info(node(operand).op()).kind != ir::LoweringKind::Elementwise) return {-1, -1};
    if (node(operand).shape() != node(spec_.domain).shape()) return {-1, -1};
    for (int r : spec_.results) {
      const int root = graph_.roots[r];
      if (output_buffer(r) != num_parameters_ + r || node(root).dtype() != node(operand).dtype() ||
          node(root).rank() != node(spec_.domain).rank() || !reaches(root, operand)) {
        continue;
      }
      return {operand, r};
    }
    return {-1, -1};
  }

  /// Whether `from` computes `target` within this kernel (elementwise paths only, so the
  /// value is read at the element being written).
  bool reaches(int from, int target) const {
    if (from == target) return true;
    if (ir::op_info(node(from).op()).kind != ir::LoweringKind::Elementwise) return false;
    for (int operand : graph_.operands[from]) {
      if (node(operand).rank() == node(from).rank() && node(operand).unit_dims() == node(from).unit_dims() &&
          reaches(operand, target)) {
        return true;
      }
    }
    return false;
  }

  Value* fold(int s, std::vector<Value*>& dims, int keep_in = -1) {
    const ir::Node& reduce = node(s);
    const int operand = graph_.operands[s][0];
    const DType in = node(operand).dtype();
    const DType acc_dtype = reduce.op() == OpKind::Argmax ? in : reduce.dtype();
    llvm::Type* type = value_type(b_.getContext(), acc_dtype);
    llvm::IRBuilder<>& h = fn_.hoist();
    llvm::AllocaInst* acc = h.CreateAlloca(type);
    llvm::AllocaInst* where = reduce.op() == OpKind::Argmax ? h.CreateAlloca(b_.getInt64Ty()) : nullptr;
    b_.CreateStore(identity(reduce.op(), acc_dtype, type), acc);
    if (where) b_.CreateStore(i64(0), where);
    over_row(dims, 0, [&] {
      Value* element = e_.at(operand, Index{dims, nullptr});
      if (keep_in >= 0) e_.store(operand, keep_in, e_.ravel(spec_.domain, dims), element);
      Value* v = emit_convert(b_, element, in, acc_dtype);
      Value* current = b_.CreateLoad(type, acc);
      Value* next = nullptr;
      switch (reduce.op()) {
        case OpKind::Sum:
          if (is_floating(acc_dtype)) {
            next = b_.CreateFAdd(current, v);
            llvm::FastMathFlags flags;
            flags.setAllowReassoc();
            llvm::cast<llvm::Instruction>(next)->setFastMathFlags(flags);
          } else {
            next = acc_dtype == DType::Bool ? b_.CreateOr(current, v) : b_.CreateAdd(current, v);
          }
          break;
        case OpKind::Amax: case OpKind::Amin: {
          Value* args[] = {current, v};
          next = emit_same(b_, reduce.op() == OpKind::Amax ? OpKind::Maximum : OpKind::Minimum, acc_dtype, args);
          break;
        }
        default: {  // argmax: the first maximum; NaN counts as the maximum
          Value* better = is_floating(acc_dtype) ? b_.CreateFCmpOGT(v, current) : b_.CreateICmpSGT(v, current);
          if (is_floating(acc_dtype)) {
            better = b_.CreateOr(better, b_.CreateAnd(b_.CreateFCmpUNO(v, v), b_.CreateFCmpORD(current, current)));
          }
          next = b_.CreateSelect(better, v, current);
          b_.CreateStore(b_.CreateSelect(better, dims[reduce.attrs()[0]], b_.CreateLoad(b_.getInt64Ty(), where)), where);
        }
      }
      b_.CreateStore(next, acc);
    });
    return where ? b_.CreateLoad(b_.getInt64Ty(), where) : b_.CreateLoad(type, acc);
  }

  Value* identity(OpKind op, DType dtype, llvm::Type* type) {
    if (op == OpKind::Sum) return llvm::Constant::getNullValue(type);
    const bool low = op == OpKind::Amax || op == OpKind::Argmax;  // start below every value
    if (is_floating(dtype)) return llvm::ConstantFP::getInfinity(type, /*Negative=*/low);
    if (dtype == DType::Bool) return b_.getInt1(!low);
    const unsigned bits = type->getIntegerBitWidth();
    return b_.getInt(low ? llvm::APInt::getSignedMinValue(bits) : llvm::APInt::getSignedMaxValue(bits));
  }

  struct Gemm {
    int product, a, b;
    int rank, a_rank, b_rank;
    MatmulTiling tile;
    Value *m, *n, *k;
  };

  Gemm gemm() {
    Gemm g;
    g.product = spec_.domain;
    g.a = graph_.operands[g.product][0];
    g.b = graph_.operands[g.product][1];
    g.rank = node(g.product).rank();
    g.a_rank = node(g.a).rank();
    g.b_rank = node(g.b).rank();
    g.tile = matmul_tiling(dtype_size(node(g.product).dtype()));
    g.m = e_.dim(g.a, g.a_rank - 2);
    g.k = e_.dim(g.a, g.a_rank - 1);
    g.n = e_.dim(g.b, g.b_rank - 1);
    return g;
  }

  /// PackA: panel t holds MR rows of one batch of A as [K][MR] (rows past M are zero).
  /// PackB: panel t holds NR columns of one batch of B as [K][NR] (columns past N are zero).
  /// The operand's expression is evaluated as it is packed (a transpose or an activation
  /// costs no pass of its own).
  void pack(bool left) {
    const Gemm g = gemm();
    const int operand = left ? g.a : g.b;
    const int rank = left ? g.a_rank : g.b_rank;
    const int64_t width = left ? g.tile.mr : g.tile.nr;
    Value* extent = left ? g.m : g.n;
    Value* panels = ceil_div(extent, width);
    const int temp = spec_.temps[0];
    const int buffer = temp_buffer_index(num_parameters_, static_cast<int>(graph_.roots.size()), temp);
    emit_for(b_, fn_.begin(), fn_.end(), "panel", [&](Value* t) {
      std::vector<Value*> dims(rank, i64(0));
      e_.unravel_into(operand, b_.CreateUDiv(t, panels), 0, rank - 2, dims);
      Value* first = b_.CreateMul(b_.CreateURem(t, panels), i64(width));
      Value* base = b_.CreateMul(b_.CreateMul(t, g.k), i64(width));
      Value* last = b_.CreateSub(extent, i64(1));
      auto element = [&](Value* kk, Value* lane) {
        Value* at = b_.CreateAdd(first, lane);
        dims[rank - 2] = left ? min(at, last) : kk;
        dims[rank - 1] = left ? kk : min(at, last);
        Value* v = e_.at(operand, Index{dims, nullptr});
        v = b_.CreateSelect(b_.CreateICmpSLT(at, extent), v, llvm::Constant::getNullValue(v->getType()));
        e_.store(operand, buffer, b_.CreateAdd(base, b_.CreateAdd(b_.CreateMul(kk, i64(width)), lane)), v);
      };
      if (left) {  // read A along its rows
        emit_for(b_, i64(0), i64(width), "lane", [&](Value* lane) {
          emit_for(b_, i64(0), g.k, "k", [&](Value* kk) { e_.forget(); element(kk, lane); });
        });
      } else {  // read B along its rows too: a panel row is NR contiguous columns
        emit_for(b_, i64(0), g.k, "k", [&](Value* kk) {
          emit_for(b_, i64(0), i64(width), "lane", [&](Value* lane) { e_.forget(); element(kk, lane); });
        });
      }
      e_.forget();
    });
  }

  /// Tiles of MB rows by NR columns: each MR-row block accumulates over all of K in
  /// registers (MR x 2 vectors), lands in a stack tile, and the epilogue evaluates the
  /// kernel's results from it element by element (vectorised along the columns).
  void matmul() {
    const Gemm g = gemm();
    const ir::Node& product = node(g.product);
    llvm::LLVMContext& ctx = b_.getContext();
    llvm::Type* scalar = value_type(ctx, product.dtype());
    const int64_t lanes = g.tile.nr / 2;
    auto* vector = llvm::FixedVectorType::get(scalar, static_cast<unsigned>(lanes));
    const bool floating = is_floating(product.dtype());
    const int num_results = static_cast<int>(graph_.roots.size());
    const int packed_a_temp = packed_temp(TempBuffer::Kind::PackedA);
    const int packed_a = packed_a_temp < 0 ? plan_.buffer_of[g.a] : temp_buffer_index(num_parameters_, num_results, packed_a_temp);
    const int packed_b = temp_buffer_index(num_parameters_, num_results, packed_temp(TempBuffer::Kind::PackedB));

    llvm::IRBuilder<>& h = fn_.hoist();
    llvm::AllocaInst* tile = h.CreateAlloca(llvm::ArrayType::get(scalar, g.tile.mr * g.tile.nr));
    tile->setAlignment(llvm::Align(64));
    std::vector<llvm::AllocaInst*> acc;
    for (int64_t i = 0; i < 2 * g.tile.mr; ++i) acc.push_back(h.CreateAlloca(vector));

    Value* col_panels = ceil_div(g.n, g.tile.nr);
    Value* row_blocks = ceil_div(g.m, g.tile.mb);
    Value* a_panels = ceil_div(g.m, g.tile.mr);
    emit_for(b_, fn_.begin(), fn_.end(), "tile", [&](Value* t) {
      Value* panel = b_.CreateURem(t, col_panels);
      Value* rest = b_.CreateUDiv(t, col_panels);
      Value* block = b_.CreateURem(rest, row_blocks);
      Value* batch = b_.CreateUDiv(rest, row_blocks);
      std::vector<Value*> out(g.rank, i64(0));
      e_.unravel_into(g.product, batch, 0, g.rank - 2, out);
      Value* a_batch = batch_of(g.a, g.a_rank, out, g.rank);
      Value* b_batch = batch_of(g.b, g.b_rank, out, g.rank);
      Value* b_base = b_.CreateMul(b_.CreateMul(b_.CreateAdd(b_.CreateMul(b_batch, col_panels), panel), g.k), i64(g.tile.nr));
      Value* row0 = b_.CreateMul(block, i64(g.tile.mb));
      Value* col0 = b_.CreateMul(panel, i64(g.tile.nr));
      Value* rows = min(i64(g.tile.mb), b_.CreateSub(g.m, row0));
      Value* cols = min(i64(g.tile.nr), b_.CreateSub(g.n, col0));
      emit_for(b_, i64(0), ceil_div(rows, g.tile.mr), "micro", [&](Value* micro) {
        Value* a_panel = b_.CreateAdd(b_.CreateMul(a_batch, a_panels), b_.CreateAdd(b_.CreateMul(block, i64(g.tile.mb / g.tile.mr)), micro));
        Value* a_base = b_.CreateMul(b_.CreateMul(a_panel, g.k), i64(g.tile.mr));
        // Unpacked A: each of the MR rows (clamped to the last; its results are not stored).
        std::vector<Value*> a_rows;
        if (packed_a_temp < 0) {
          Value* first = b_.CreateAdd(row0, b_.CreateMul(micro, i64(g.tile.mr)));
          for (int64_t r = 0; r < g.tile.mr; ++r) {
            Value* row = min(b_.CreateAdd(first, i64(r)), b_.CreateSub(g.m, i64(1)));
            a_rows.push_back(b_.CreateMul(b_.CreateAdd(b_.CreateMul(a_batch, g.m), row), g.k));
          }
        }
        for (llvm::AllocaInst* a : acc) b_.CreateStore(llvm::Constant::getNullValue(vector), a);
        emit_for(b_, i64(0), g.k, "kk", [&](Value* kk) {
          Value* b_row = b_.CreateAdd(b_base, b_.CreateMul(kk, i64(g.tile.nr)));
          Value* bv[2];
          for (int half = 0; half < 2; ++half) {
            Value* p = b_.CreateInBoundsGEP(scalar, fn_.buffer(packed_b), b_.CreateAdd(b_row, i64(half * lanes)));
            bv[half] = b_.CreateAlignedLoad(vector, p, llvm::Align(64));
          }
          Value* a_row = b_.CreateAdd(a_base, b_.CreateMul(kk, i64(g.tile.mr)));
          for (int64_t r = 0; r < g.tile.mr; ++r) {
            Value* at = a_rows.empty() ? b_.CreateAdd(a_row, i64(r)) : b_.CreateAdd(a_rows[r], kk);
            Value* a = b_.CreateLoad(scalar, b_.CreateInBoundsGEP(scalar, fn_.buffer(packed_a), at));
            Value* splat = b_.CreateVectorSplat(static_cast<unsigned>(lanes), a);
            for (int half = 0; half < 2; ++half) {
              llvm::AllocaInst* slot = acc[r * 2 + half];
              Value* sum = b_.CreateLoad(vector, slot);
              sum = floating ? b_.CreateIntrinsic(llvm::Intrinsic::fma, {vector}, {splat, bv[half], sum})
                             : b_.CreateAdd(b_.CreateMul(splat, bv[half]), sum);
              b_.CreateStore(sum, slot);
            }
          }
        });
        for (int64_t i = 0; i < 2 * g.tile.mr; ++i) {
          Value* p = b_.CreateConstInBoundsGEP1_64(scalar, tile, i * lanes);
          b_.CreateAlignedStore(b_.CreateLoad(vector, acc[i]), p, llvm::Align(64));
        }
        Value* first_row = b_.CreateAdd(row0, b_.CreateMul(micro, i64(g.tile.mr)));
        Value* micro_rows = min(i64(g.tile.mr), b_.CreateSub(g.m, first_row));
        epilogue(g, tile, scalar, out, first_row, micro_rows, col0, cols);
      });
    });
  }

  /// The temporary holding this product's packed operand, or -1 (A read in place).
  int packed_temp(TempBuffer::Kind kind) const {
    for (size_t t = 0; t < plan_.temps.size(); ++t) {
      if (plan_.temps[t].kind == kind && plan_.temps[t].node == spec_.domain) return static_cast<int>(t);
    }
    if (kind == TempBuffer::Kind::PackedB) llvm::report_fatal_error("lowering: matmul without its packed operand");
    return -1;
  }

  /// The linear batch index of operand `n` (rank `rank`) for output batch dims `out`:
  /// right-aligned, broadcast dims read 0.
  Value* batch_of(int n, int rank, const std::vector<Value*>& out, int out_rank) {
    std::vector<Value*> dims(rank, i64(0));
    for (int d = 0; d < rank - 2; ++d) {
      dims[d] = node(n).shape()[d] == 1 ? i64(0) : out[d + out_rank - rank];
    }
    Value* linear = i64(0);
    for (int d = 0; d < rank - 2; ++d) {
      if (node(n).shape()[d] == 1) continue;
      linear = b_.CreateAdd(b_.CreateMul(linear, e_.dim(n, d)), dims[d]);
    }
    return linear;
  }

  void epilogue(const Gemm& g, Value* tile, llvm::Type* scalar, std::vector<Value*> out, Value* first_row,
                Value* rows, Value* col0, Value* cols) {
    emit_for(b_, i64(0), rows, "er", [&](Value* r) {
      emit_for(b_, i64(0), cols, "ej", [&](Value* j) {
        e_.forget();
        Value* value = b_.CreateLoad(scalar, b_.CreateInBoundsGEP(scalar, tile, b_.CreateAdd(b_.CreateMul(r, i64(g.tile.nr)), j)));
        e_.bind(g.product, value);
        out[g.rank - 2] = b_.CreateAdd(first_row, r);
        out[g.rank - 1] = b_.CreateAdd(col0, j);
        Index index{out, nullptr};
        Value* offset = e_.ravel(g.product, out);
        store_results(spec_.results, offset, index, /*below_reshapes=*/true);
        for (int t : spec_.temps) e_.store(g.product, plan_.buffer_of[plan_.temps[t].node], offset, value);
        e_.unbind(g.product);
      });
    });
    e_.forget();
  }

  const ir::Graph& graph_;
  const KernelPlan& plan_;
  const KernelSpec& spec_;
  std::span<const Alias> aliases_;
  int num_parameters_;
  KernelFunction fn_;
  llvm::IRBuilder<>& b_;
  ExprEmitter e_;
};

}  // namespace

KernelFrame emit_planned_kernel(llvm::Module& module, const ir::Graph& graph, const KernelPlan& plan,
                                const KernelSpec& spec, std::span<const Alias> aliases) {
  return Emitter(module, graph, plan, spec, aliases).emit();
}

}  // namespace lazyjit::lowering

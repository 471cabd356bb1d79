// Loop-nest emission: dim collapsing, the row/inner loop pair and the fused element body.
#include "lowering/loop_nest.h"

#include "llvm/IR/IRBuilder.h"
#include "lowering/elementwise.h"
#include "lowering/kernel_entry.h"
#include "lowering/fusion.h"

namespace lazyjit::lowering {
namespace {

using llvm::IRBuilder;
using llvm::Value;

/// Per indexed leaf (Parameter or Arange) and per iteration dim: whether the leaf is
/// broadcast there (its dim is 1 or missing). Dims where the iteration shape is 1 are dropped.
struct IndexPlan {
  std::vector<int> leaves;                  // node indices of the indexed leaves
  std::vector<std::vector<int>> groups;     // collapsed dims, outermost first
  std::vector<std::vector<bool>> broadcast; // [leaf][group]
};

bool leaf_broadcast(const ir::Node& leaf, int rank, int dim) {
  const int offset = rank - leaf.rank();
  return dim < offset || leaf.shape()[dim - offset] == 1;
}

IndexPlan plan_indexing(const ir::Graph& graph, const std::vector<bool>& needed, const ir::Node& root) {
  IndexPlan plan;
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    const ir::OpKind op = graph.nodes[i]->op();
    if (needed[i] && (op == ir::OpKind::Parameter || op == ir::OpKind::Arange)) plan.leaves.push_back(i);
  }
  const int rank = root.rank();
  std::vector<bool> previous;
  for (int d = 0; d < rank; ++d) {
    if (root.shape()[d] == 1) continue;
    std::vector<bool> pattern;
    for (int leaf : plan.leaves) pattern.push_back(leaf_broadcast(*graph.nodes[leaf], rank, d));
    if (!plan.groups.empty() && pattern == previous) {
      plan.groups.back().push_back(d);
    } else {
      plan.groups.push_back({d});
    }
    previous = std::move(pattern);
  }
  plan.broadcast.assign(plan.leaves.size(), std::vector<bool>(plan.groups.size()));
  for (size_t l = 0; l < plan.leaves.size(); ++l) {
    for (size_t g = 0; g < plan.groups.size(); ++g) {
      plan.broadcast[l][g] = leaf_broadcast(*graph.nodes[plan.leaves[l]], rank, plan.groups[g][0]);
    }
  }
  return plan;
}

class KernelEmitter {
 public:
  KernelEmitter(llvm::Module& module, const ir::Graph& graph, const KernelPlan& kernels, const KernelSpec& spec,
                std::span<const Alias> aliases)
      : aliases_(aliases), module_(module), ctx_(module.getContext()), graph_(graph), spec_(spec), b_(ctx_),
        num_temps_(static_cast<int>(kernels.temps.size())), needed_(region_of(graph, kernels, spec)),
        cut_buffer_(spec.cut >= 0 ? kernels.buffer_of[spec.cut] : -1),
        plan_(plan_indexing(graph, needed_, *graph.nodes[spec.domain])),
        domain_offset_(shape_offsets(graph)[spec.domain]), values_(graph.nodes.size(), nullptr) {}

  KernelFrame emit() {
    fn_ = create_kernel_body(module_, spec_.symbol, num_buffers());
    b_.SetInsertPoint(llvm::BasicBlock::Create(ctx_, "entry", fn_));
    emit_prologue();
    emit_loops();
    return finish_kernel(module_, spec_.symbol, fn_, num_buffers(),
                         scalar_table_index(static_cast<int>(graph_.parameters.size()), static_cast<int>(graph_.roots.size())));
  }

 private:
  int num_buffers() const {
    return temp_buffer_index(static_cast<int>(graph_.parameters.size()), static_cast<int>(graph_.roots.size()), num_temps_);
  }

  /// The buffer result `r` is written to: its own, or the parameter it was donated. Stores
  /// to a donated buffer go through the parameter's own argument, so every pointer argument
  /// stays noalias and the vectoriser needs no runtime overlap check: it sees the load and
  /// the store of one element through one pointer.
  int output_buffer(int r) const {
    for (const Alias& a : aliases_) {
      if (a.result == r) return a.parameter;
    }
    return static_cast<int>(graph_.parameters.size()) + r;
  }

  Value* arg(int i) { return fn_->getArg(i); }
  Value* shapes() { return arg(num_buffers()); }
  Value* begin() { return arg(num_buffers() + 1); }
  Value* end() { return arg(num_buffers() + 2); }
  Value* i64(int64_t v) { return b_.getInt64(v); }

  /// Collapsed sizes, per-leaf strides of the outer groups, and the scalars' values.
  void emit_prologue() {
    for (const auto& group : plan_.groups) {
      Value* size = nullptr;
      for (int d : group) {
        Value* dim = b_.CreateLoad(b_.getInt64Ty(),
                                   b_.CreateConstInBoundsGEP1_64(b_.getInt64Ty(), shapes(), domain_offset_ + d));
        size = size ? b_.CreateMul(size, dim) : dim;
      }
      sizes_.push_back(size);
    }
    inner_ = sizes_.empty() ? i64(1) : sizes_.back();
    const size_t groups = plan_.groups.size();
    strides_.assign(plan_.leaves.size(), std::vector<Value*>(groups, i64(0)));
    for (size_t l = 0; l < plan_.leaves.size(); ++l) {
      Value* stride = i64(1);
      for (size_t g = groups; g-- > 0;) {
        if (plan_.broadcast[l][g]) continue;
        strides_[l][g] = stride;
        stride = b_.CreateMul(stride, sizes_[g]);
      }
    }
    Value* table = arg(scalar_table_index(graph_.parameters.size(), graph_.roots.size()));
    for (size_t k = 0; k < graph_.scalars.size(); ++k) {
      const int n = graph_.scalars[k];
      if (!needed_[n]) continue;
      const DType dtype = graph_.nodes[n]->dtype();
      const DType slot = is_floating(dtype) ? DType::Float64 : DType::Int64;
      Value* raw = b_.CreateLoad(value_type(ctx_, slot), b_.CreateConstInBoundsGEP1_64(b_.getInt64Ty(), table, k),
                                 "scalar" + std::to_string(k));
      values_[n] = emit_convert(b_, raw, slot, dtype);
    }
    for (size_t n = 0; n < graph_.nodes.size(); ++n) {
      const ir::Node& node = *graph_.nodes[n];
      if (!needed_[n] || node.op() != ir::OpKind::Constant) continue;
      llvm::Type* type = value_type(ctx_, node.dtype());
      values_[n] = is_floating(node.dtype()) ? llvm::ConstantFP::get(type, node.scalar().f)
                                             : llvm::ConstantInt::get(type, node.scalar().i, /*isSigned=*/true);
    }
  }

  void emit_loops() {
    llvm::Function* fn = fn_;
    llvm::BasicBlock* entry = b_.GetInsertBlock();
    auto* row_header = llvm::BasicBlock::Create(ctx_, "row", fn);
    auto* row_body = llvm::BasicBlock::Create(ctx_, "row.body", fn);
    auto* inner_header = llvm::BasicBlock::Create(ctx_, "inner", fn);
    auto* inner_body = llvm::BasicBlock::Create(ctx_, "inner.body", fn);
    auto* row_latch = llvm::BasicBlock::Create(ctx_, "row.latch", fn);
    auto* exit = llvm::BasicBlock::Create(ctx_, "exit", fn);

    Value* first_row = b_.CreateUDiv(begin(), inner_, "first_row");
    b_.CreateBr(row_header);

    b_.SetInsertPoint(row_header);
    llvm::PHINode* row = b_.CreatePHI(b_.getInt64Ty(), 2, "row");
    row->addIncoming(first_row, entry);
    Value* base = b_.CreateMul(row, inner_, "base");
    b_.CreateCondBr(b_.CreateICmpSLT(base, end()), row_body, exit);

    b_.SetInsertPoint(row_body);
    Value* j0 = b_.CreateBinaryIntrinsic(llvm::Intrinsic::smax, b_.CreateSub(begin(), base), i64(0), nullptr, "j0");
    Value* j1 = b_.CreateBinaryIntrinsic(llvm::Intrinsic::smin, b_.CreateSub(end(), base), inner_, nullptr, "j1");
    emit_row_offsets(row);
    b_.CreateBr(inner_header);

    b_.SetInsertPoint(inner_header);
    llvm::PHINode* j = b_.CreatePHI(b_.getInt64Ty(), 2, "j");
    j->addIncoming(j0, row_body);
    b_.CreateCondBr(b_.CreateICmpSLT(j, j1), inner_body, row_latch);

    b_.SetInsertPoint(inner_body);
    emit_element(j, base);
    j->addIncoming(b_.CreateAdd(j, i64(1), "j.next"), b_.GetInsertBlock());
    b_.CreateBr(inner_header);

    b_.SetInsertPoint(row_latch);
    row->addIncoming(b_.CreateAdd(row, i64(1), "row.next"), row_latch);
    b_.CreateBr(row_header);

    b_.SetInsertPoint(exit);
    b_.CreateRetVoid();
  }

  /// Each leaf's offset at the start of `row`: the row's multi-index over the outer groups
  /// dotted with the leaf's strides.
  void emit_row_offsets(Value* row) {
    const size_t groups = plan_.groups.size();
    std::vector<Value*> index(groups, nullptr);
    Value* rest = row;
    for (size_t g = groups >= 1 ? groups - 1 : 0; g-- > 0;) {
      index[g] = b_.CreateURem(rest, sizes_[g]);
      rest = b_.CreateUDiv(rest, sizes_[g]);
    }
    row_offsets_.assign(plan_.leaves.size(), i64(0));
    for (size_t l = 0; l < plan_.leaves.size(); ++l) {
      for (size_t g = 0; g + 1 < groups; ++g) {
        if (plan_.broadcast[l][g]) continue;
        row_offsets_[l] = b_.CreateAdd(row_offsets_[l], b_.CreateMul(index[g], strides_[l][g]));
      }
    }
  }

  void emit_element(Value* j, Value* base) {
    for (size_t l = 0; l < plan_.leaves.size(); ++l) {
      const int n = plan_.leaves[l];
      const bool varies = !plan_.groups.empty() && !plan_.broadcast[l].back();
      Value* offset = varies ? b_.CreateAdd(row_offsets_[l], j) : row_offsets_[l];
      values_[n] = load_leaf(*graph_.nodes[n], n, offset);
    }
    for (size_t i = 0; i < graph_.nodes.size(); ++i) {
      const ir::Node& node = *graph_.nodes[i];
      if (!needed_[i] || ir::op_info(node.op()).kind == ir::LoweringKind::Leaf) continue;
      std::vector<Value*> args;
      for (int operand : graph_.operands[i]) args.push_back(values_[operand]);
      values_[i] = emit_elementwise(b_, node, args);
    }
    Value* out_index = b_.CreateAdd(base, j, "out");
    for (int r : spec_.results) store(graph_.roots[r], output_buffer(r), out_index);
    if (spec_.cut >= 0) store(spec_.cut, cut_buffer_, out_index);
  }

  void store(int n, int buffer, Value* index) {
    const ir::Node& node = *graph_.nodes[n];
    Value* value = values_[n];
    if (node.dtype() == DType::Bool) value = b_.CreateZExt(value, b_.getInt8Ty());
    llvm::Type* type = storage_type(ctx_, node.dtype());
    b_.CreateStore(value, b_.CreateInBoundsGEP(type, arg(buffer), index));
  }

  Value* load_leaf(const ir::Node& leaf, int n, Value* offset) {
    if (leaf.op() == ir::OpKind::Arange) return emit_convert(b_, offset, DType::Int64, leaf.dtype());
    llvm::Type* type = storage_type(ctx_, leaf.dtype());
    Value* buffer = arg(graph_.parameter_slot[n]);
    Value* v = b_.CreateLoad(type, b_.CreateInBoundsGEP(type, buffer, offset));
    return leaf.dtype() == DType::Bool ? b_.CreateICmpNE(v, b_.getInt8(0)) : v;
  }

  std::span<const Alias> aliases_;
  llvm::Module& module_;
  llvm::LLVMContext& ctx_;
  const ir::Graph& graph_;
  const KernelSpec& spec_;
  IRBuilder<> b_;
  int num_temps_;
  std::vector<bool> needed_;
  int cut_buffer_;
  IndexPlan plan_;
  int domain_offset_;
  llvm::Function* fn_ = nullptr;
  std::vector<Value*> sizes_;
  Value* inner_ = nullptr;
  std::vector<std::vector<Value*>> strides_;
  std::vector<Value*> row_offsets_;
  std::vector<Value*> values_;  // per node: its value in the element being computed
};

}  // namespace

KernelFrame emit_kernel(llvm::Module& module, const ir::Graph& graph, const KernelPlan& plan, const KernelSpec& spec,
                        std::span<const Alias> aliases) {
  return KernelEmitter(module, graph, plan, spec, aliases).emit();
}

}  // namespace lazyjit::lowering

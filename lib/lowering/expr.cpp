// Kernel scaffolding, loops and the index-walking expression evaluator.
#include "lowering/expr.h"

#include <algorithm>

#include "ir/philox.h"
#include "llvm/IR/Module.h"
#include "llvm/IR/Intrinsics.h"
#include "lowering/elementwise.h"
#include "lowering/fusion.h"
#include "lowering/kernel_entry.h"

namespace lazyjit::lowering {

using ir::OpKind;
using llvm::Value;

KernelFunction::KernelFunction(llvm::Module& module, const std::string& symbol, int num_buffers)
    : module_(module), symbol_(symbol), num_buffers_(num_buffers), b_(module.getContext()),
      hoist_(module.getContext()) {
  llvm::LLVMContext& ctx = module.getContext();
  body_ = create_kernel_body(module, symbol, num_buffers);
  auto* hoisted = llvm::BasicBlock::Create(ctx, "entry", body_);
  auto* start = llvm::BasicBlock::Create(ctx, "start", body_);
  hoist_.SetInsertPoint(hoisted);
  hoist_.SetInsertPoint(hoist_.CreateBr(start));
  b_.SetInsertPoint(start);
}

KernelFrame KernelFunction::finish(int scalar_table) {
  b_.CreateRetVoid();
  return finish_kernel(module_, symbol_, body_, num_buffers_, scalar_table);
}

void emit_for(llvm::IRBuilder<>& b, Value* lo, Value* hi, const std::string& name,
              const std::function<void(Value*)>& body) {
  llvm::LLVMContext& ctx = b.getContext();
  llvm::Function* fn = b.GetInsertBlock()->getParent();
  llvm::BasicBlock* before = b.GetInsertBlock();
  auto* header = llvm::BasicBlock::Create(ctx, name, fn);
  auto* loop_body = llvm::BasicBlock::Create(ctx, name + ".body", fn);
  auto* exit = llvm::BasicBlock::Create(ctx, name + ".exit", fn);
  b.CreateBr(header);
  b.SetInsertPoint(header);
  llvm::PHINode* i = b.CreatePHI(b.getInt64Ty(), 2, name);
  i->addIncoming(lo, before);
  b.CreateCondBr(b.CreateICmpSLT(i, hi), loop_body, exit);
  b.SetInsertPoint(loop_body);
  body(i);
  i->addIncoming(b.CreateAdd(i, b.getInt64(1), name + ".next", /*HasNUW=*/true, /*HasNSW=*/true), b.GetInsertBlock());
  b.CreateBr(header);
  b.SetInsertPoint(exit);
}

ExprEmitter::ExprEmitter(KernelFunction& fn, const ir::Graph& graph, const KernelPlan& plan, const KernelSpec& spec)
    : fn_(fn), b_(fn.builder()), graph_(graph), plan_(plan), spec_(spec), offsets_(shape_offsets(graph)) {
  computed_ = region_of(graph, plan, spec);
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    const bool stage = std::find(spec.stages.begin(), spec.stages.end(), static_cast<int>(i)) != spec.stages.end();
    if (plan.buffer_of[i] >= 0 && !stage && static_cast<int>(i) != spec.cut) computed_[i] = false;
  }
}

Value* ExprEmitter::dim(int node, int d) {
  if (graph_.nodes[node]->shape()[d] == 1) return i64(1);
  Value*& v = dims_[{node, d}];
  if (v == nullptr) {
    llvm::IRBuilder<>& h = fn_.hoist();
    v = h.CreateLoad(h.getInt64Ty(), h.CreateConstInBoundsGEP1_64(h.getInt64Ty(), fn_.shapes(), offsets_[node] + d));
  }
  return v;
}

Value* ExprEmitter::numel(int node, int first_dim, int end_dim) {
  Value* n = i64(1);
  for (int d = first_dim; d < end_dim; ++d) n = b_.CreateMul(n, dim(node, d), "", true, true);
  return n;
}

Value* ExprEmitter::ravel(int node, const std::vector<Value*>& dims) {
  Value* linear = i64(0);
  for (size_t d = 0; d < dims.size(); ++d) {
    if (graph_.nodes[node]->shape()[d] == 1) continue;
    linear = b_.CreateAdd(b_.CreateMul(linear, dim(node, d), "", true, true), dims[d], "", true, true);
  }
  return linear;
}

std::vector<Value*> ExprEmitter::unravel(int node, Value* linear) {
  std::vector<Value*> dims(graph_.nodes[node]->rank(), i64(0));
  unravel_into(node, linear, 0, graph_.nodes[node]->rank(), dims);
  return dims;
}

void ExprEmitter::unravel_into(int node, Value* linear, int first, int end, std::vector<Value*>& dims) {
  for (int d = end; d-- > first;) {
    if (graph_.nodes[node]->shape()[d] == 1) {
      dims[d] = i64(0);
      continue;
    }
    dims[d] = d == first ? linear : b_.CreateURem(linear, dim(node, d));
    if (d > first) linear = b_.CreateUDiv(linear, dim(node, d));
  }
}

Value* ExprEmitter::scalar(int node) {
  Value*& v = scalars_[node];
  if (v != nullptr) return v;
  const auto k = std::find(graph_.scalars.begin(), graph_.scalars.end(), node) - graph_.scalars.begin();
  llvm::IRBuilder<>& h = fn_.hoist();
  Value* table = fn_.buffer(scalar_table_index(graph_.parameters.size(), graph_.roots.size()));
  const ir::Node& leaf = *graph_.nodes[node];
  const bool floating = leaf.op() == OpKind::Scalar && is_floating(leaf.dtype());
  Value* raw = h.CreateLoad(floating ? h.getDoubleTy() : h.getInt64Ty(),
                            h.CreateConstInBoundsGEP1_64(h.getInt64Ty(), table, k), "scalar" + std::to_string(k));
  v = leaf.op() == OpKind::Scalar ? emit_convert(h, raw, floating ? DType::Float64 : DType::Int64, leaf.dtype()) : raw;
  return v;
}

Value* ExprEmitter::load(int node, int buffer, Value* offset) {
  const DType dtype = graph_.nodes[node]->dtype();
  llvm::Type* type = storage_type(b_.getContext(), dtype);
  Value* v = b_.CreateLoad(type, b_.CreateInBoundsGEP(type, fn_.buffer(buffer), offset));
  return dtype == DType::Bool ? b_.CreateICmpNE(v, b_.getInt8(0)) : v;
}

void ExprEmitter::store(int node, int buffer, Value* offset, Value* value) {
  const DType dtype = graph_.nodes[node]->dtype();
  if (dtype == DType::Bool) value = b_.CreateZExt(value, b_.getInt8Ty());
  llvm::Type* type = storage_type(b_.getContext(), dtype);
  b_.CreateStore(value, b_.CreateInBoundsGEP(type, fn_.buffer(buffer), offset));
}

std::vector<Value*> ExprEmitter::dims_of(int node, const Index& index) {
  if (static_cast<int>(index.dims.size()) == graph_.nodes[node]->rank()) return index.dims;
  return unravel(node, index.linear);
}

Value* ExprEmitter::linear_of(int node, const Index& index) {
  return index.linear != nullptr ? index.linear : ravel(node, index.dims);
}

ExprEmitter::Index ExprEmitter::operand_index(int node, int operand, const Index& index) {
  const ir::Node& n = *graph_.nodes[node];
  const ir::Node& o = *graph_.nodes[operand];
  if (o.rank() == n.rank() && o.unit_dims() == n.unit_dims()) return index;  // same shape
  const std::vector<Value*> dims = dims_of(node, index);
  Index result;
  const int offset = n.rank() - o.rank();
  for (int k = 0; k < o.rank(); ++k) result.dims.push_back(o.shape()[k] == 1 ? i64(0) : dims[k + offset]);
  return result;
}

Value* ExprEmitter::at(int node, const Index& index) {
  if (auto it = bound_.find(node); it != bound_.end()) return it->second;
  std::vector<const void*> key = {reinterpret_cast<const void*>(static_cast<intptr_t>(node)), index.linear};
  for (Value* d : index.dims) key.push_back(d);
  if (auto it = memo_.find(key); it != memo_.end()) return it->second;
  Value* v = nullptr;
  if (!computed_[node]) {
    v = load(node, plan_.buffer_of[node], linear_of(node, index));
  } else {
    v = compute(node, index);
  }
  memo_.emplace(std::move(key), v);
  return v;
}

Value* ExprEmitter::compute(int node, const Index& index) {
  const ir::Node& n = *graph_.nodes[node];
  switch (n.op()) {
    case OpKind::Scalar: return scalar(node);
    case OpKind::Constant: {
      llvm::Type* type = value_type(b_.getContext(), n.dtype());
      return is_floating(n.dtype()) ? llvm::ConstantFP::get(type, n.scalar().f)
                                    : llvm::ConstantInt::get(type, n.scalar().i, /*isSigned=*/true);
    }
    case OpKind::Arange: return emit_convert(b_, dims_of(node, index)[0], DType::Int64, n.dtype());
    case OpKind::Rand:
    case OpKind::Randn: return emit_random(b_, n.op(), n.dtype(), scalar(node), linear_of(node, index));
    default: break;
  }
  switch (ir::op_info(n.op()).kind) {
    case ir::LoweringKind::Elementwise: {
      std::vector<Value*> args;
      for (int operand : graph_.operands[node]) args.push_back(at(operand, operand_index(node, operand, index)));
      return emit_elementwise(b_, n, args);
    }
    case ir::LoweringKind::View: return view(node, index);
    default: break;
  }
  // Reductions and products are stages, bound values or buffers, never recomputed here.
  llvm::report_fatal_error(llvm::Twine("lowering: ") + std::string(ir::op_name(n.op())) + " evaluated in a kernel that does not hold it");
}

Value* ExprEmitter::view(int node, const Index& index) {
  const ir::Node& n = *graph_.nodes[node];
  const int operand = graph_.operands[node][0];
  switch (n.op()) {
    case OpKind::Reshape: return at(operand, Index{{}, linear_of(node, index)});
    case OpKind::Expand: return at(operand, operand_index(node, operand, index));
    case OpKind::Permute: {
      const std::vector<Value*> dims = dims_of(node, index);
      Index in;
      in.dims.resize(dims.size());
      for (size_t d = 0; d < dims.size(); ++d) in.dims[n.attrs()[d]] = dims[d];
      return at(operand, in);
    }
    case OpKind::Slice: {
      Index in{dims_of(node, index), nullptr};
      const int64_t d = n.attrs()[0];
      in.dims[d] = b_.CreateAdd(i64(n.attrs()[1]), b_.CreateMul(in.dims[d], i64(n.attrs()[2]), "", true, true), "", true, true);
      return at(operand, in);
    }
    case OpKind::Cat: {
      // Every part is read at its clamped index and the right one selected: no branches in
      // the loop, so it still vectorises.
      const std::vector<Value*> dims = dims_of(node, index);
      const int64_t d = n.attrs()[0];
      Value* start = i64(0);
      Value* result = nullptr;
      const auto& parts = graph_.operands[node];
      for (size_t k = 0; k < parts.size(); ++k) {
        Value* size = dim(parts[k], static_cast<int>(d));
        Value* local = b_.CreateSub(dims[d], start);
        // In [0, size): an empty part (size 0) is read at 0, which its buffer's minimum
        // allocation covers, and never selected.
        Value* clamped = b_.CreateBinaryIntrinsic(llvm::Intrinsic::smax,
                                                  b_.CreateBinaryIntrinsic(llvm::Intrinsic::smin, local, b_.CreateSub(size, i64(1))), i64(0));
        Index in{dims, nullptr};
        in.dims[d] = graph_.nodes[parts[k]]->shape()[d] == 1 ? i64(0) : clamped;
        Value* v = at(parts[k], in);
        result = result == nullptr ? v : b_.CreateSelect(b_.CreateICmpSLT(local, i64(0)), result, v);
        start = b_.CreateAdd(start, size);
      }
      return result;
    }
    default: break;
  }
  llvm::report_fatal_error("lowering: unknown view");
}

Value* emit_random(llvm::IRBuilder<>& b, OpKind op, DType dtype, Value* seed, Value* index) {
  auto* i32 = b.getInt32Ty();
  auto* i64 = b.getInt64Ty();
  auto lo = [&](Value* v) { return b.CreateTrunc(v, i32); };
  auto hi = [&](Value* v) { return b.CreateTrunc(b.CreateLShr(v, 32), i32); };
  Value* c0 = lo(index);
  Value* c1 = hi(index);
  Value* c2 = b.getInt32(0);
  Value* c3 = b.getInt32(0);
  Value* k0 = lo(seed);
  Value* k1 = hi(seed);
  for (int round = 0; round < ir::philox::kRounds; ++round) {
    Value* p0 = b.CreateMul(b.getInt64(ir::philox::kMul0), b.CreateZExt(c0, i64));
    Value* p1 = b.CreateMul(b.getInt64(ir::philox::kMul1), b.CreateZExt(c2, i64));
    Value* n0 = b.CreateXor(b.CreateXor(hi(p1), c1), k0);
    Value* n2 = b.CreateXor(b.CreateXor(hi(p0), c3), k1);
    c1 = lo(p1);
    c3 = lo(p0);
    c0 = n0;
    c2 = n2;
    k0 = b.CreateAdd(k0, b.getInt32(ir::philox::kWeyl0));
    k1 = b.CreateAdd(k1, b.getInt32(ir::philox::kWeyl1));
  }
  llvm::Type* type = value_type(b.getContext(), dtype);
  const bool f32 = dtype == DType::Float32;
  auto scaled = [&](Value* bits, double scale) {
    return b.CreateFMul(b.CreateUIToFP(bits, type), llvm::ConstantFP::get(type, scale));
  };
  auto wide = [&](Value* high, Value* low) {  // (high << 32 | low) >> 11
    return b.CreateLShr(b.CreateOr(b.CreateShl(b.CreateZExt(high, i64), 32), b.CreateZExt(low, i64)), 11);
  };
  if (op == OpKind::Rand) return f32 ? scaled(b.CreateLShr(c0, 8), 0x1p-24) : scaled(wide(c0, c1), 0x1p-53);
  Value* u1 = f32 ? scaled(b.CreateAdd(b.CreateLShr(c0, 8), b.getInt32(1)), 0x1p-24)
                  : scaled(b.CreateAdd(wide(c0, c1), b.getInt64(1)), 0x1p-53);
  Value* u2 = f32 ? scaled(b.CreateLShr(c1, 8), 0x1p-24) : scaled(wide(c2, c3), 0x1p-53);
  Value* radius = b.CreateUnaryIntrinsic(
      llvm::Intrinsic::sqrt,
      b.CreateFMul(llvm::ConstantFP::get(type, -2.0), b.CreateUnaryIntrinsic(llvm::Intrinsic::log, u1)));
  Value* angle = b.CreateFMul(llvm::ConstantFP::get(type, 6.283185307179586), u2);
  return b.CreateFMul(radius, b.CreateUnaryIntrinsic(llvm::Intrinsic::cos, angle));
}

}  // namespace lazyjit::lowering

// The pieces every kernel emitter shares: the ABI entry with its noalias body function,
// counted loops, and ExprEmitter, which evaluates a node of the graph at a multi-index by
// walking views, broadcasts and elementwise ops down to buffers, scalars and generators.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "llvm/IR/IRBuilder.h"
#include "lowering/kernel_abi.h"

namespace lazyjit::lowering {

/// One kernel's functions: `symbol` has the KernelFn ABI, loads the buffer pointers and calls
/// `symbol.body` (kernel_entry.h). Code goes into the body; `hoist` is a builder at the
/// end of the body's entry block, for values every iteration shares (dims, scalars).
class KernelFunction {
 public:
  KernelFunction(llvm::Module& module, const std::string& symbol, int num_buffers);

  llvm::IRBuilder<>& builder() { return b_; }
  llvm::IRBuilder<>& hoist() { return hoist_; }
  llvm::Function* body() const { return body_; }
  llvm::Value* buffer(int i) const { return body_->getArg(i); }
  llvm::Value* shapes() const { return body_->getArg(num_buffers_); }
  llvm::Value* begin() const { return body_->getArg(num_buffers_ + 1); }
  llvm::Value* end() const { return body_->getArg(num_buffers_ + 2); }
  /// Closes the body (return) once the emitter is done, and emits the entry (finish_kernel:
  /// `scalar_table` is the scalar table's index in the graph's buffer array).
  KernelFrame finish(int scalar_table);

 private:
  llvm::Module& module_;
  std::string symbol_;
  int num_buffers_;
  llvm::Function* body_;
  llvm::IRBuilder<> b_;
  llvm::IRBuilder<> hoist_;
};

/// for (i = lo; i < hi; ++i) body(i), at the builder's position; leaves the builder after
/// the loop. Values carried across iterations go through allocas (SROA makes them SSA).
void emit_for(llvm::IRBuilder<>& b, llvm::Value* lo, llvm::Value* hi, const std::string& name,
              const std::function<void(llvm::Value*)>& body);

/// Evaluates graph nodes at multi-indices inside one kernel's body.
class ExprEmitter {
 public:
  /// A position in a node's shape: its per-dim indices, its row-major linear index, or both
  /// (whichever is missing is derived when needed).
  struct Index {
    std::vector<llvm::Value*> dims;
    llvm::Value* linear = nullptr;
  };

  ExprEmitter(KernelFunction& fn, const ir::Graph& graph, const KernelPlan& plan, const KernelSpec& spec);

  /// The value of `node` at `index` (in the current block). Nodes the kernel does not
  /// compute are loaded from the buffer plan.buffer_of gives them, or are bound.
  llvm::Value* at(int node, const Index& index);
  /// Makes `node` evaluate to `value` at every index (a row's reduction, a matmul tile
  /// element), until unbind or forget.
  void bind(int node, llvm::Value* value) { bound_[node] = value; }
  void unbind(int node) { bound_.erase(node); }
  /// Drops remembered values: call when starting a loop body they do not dominate.
  void forget() { memo_.clear(); }

  /// Size of dim `d` of `node`: the constant 1 for the unit dims the key fixes, else read
  /// from the shape table once per call of the kernel.
  llvm::Value* dim(int node, int d);
  llvm::Value* numel(int node, int first_dim, int end_dim);
  llvm::Value* ravel(int node, const std::vector<llvm::Value*>& dims);
  std::vector<llvm::Value*> unravel(int node, llvm::Value* linear);
  /// The multi-index of `linear` over dims [first, end) of `node`, into those of `dims`.
  void unravel_into(int node, llvm::Value* linear, int first, int end, std::vector<llvm::Value*>& dims);
  /// A Scalar leaf's value or a generator's seed (from the scalar table, hoisted).
  llvm::Value* scalar(int node);
  /// Stores `value` (a register value of `node`'s dtype) at `offset` of buffer `buffer`.
  void store(int node, int buffer, llvm::Value* offset, llvm::Value* value);
  llvm::Value* load(int node, int buffer, llvm::Value* offset);
  llvm::Value* i64(int64_t v) { return b_.getInt64(v); }

 private:
  llvm::Value* compute(int node, const Index& index);
  llvm::Value* view(int node, const Index& index);
  Index operand_index(int node, int operand, const Index& index);
  std::vector<llvm::Value*> dims_of(int node, const Index& index);
  llvm::Value* linear_of(int node, const Index& index);

  KernelFunction& fn_;
  llvm::IRBuilder<>& b_;
  const ir::Graph& graph_;
  const KernelPlan& plan_;
  const KernelSpec& spec_;
  std::vector<int> offsets_;
  std::vector<bool> computed_;  // nodes this kernel computes rather than loads
  std::map<int, llvm::Value*> bound_;
  std::map<std::vector<const void*>, llvm::Value*> memo_;
  std::map<std::pair<int, int>, llvm::Value*> dims_;
  std::map<int, llvm::Value*> scalars_;
};

/// Philox4x32-10 of (seed, index) and the uniform or normal value of `dtype` it gives,
/// exactly as ir/philox.h computes them.
llvm::Value* emit_random(llvm::IRBuilder<>& b, ir::OpKind op, DType dtype, llvm::Value* seed, llvm::Value* index);

}  // namespace lazyjit::lowering

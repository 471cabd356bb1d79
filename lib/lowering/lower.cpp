// Graph to kernel IR, and kernel IR to LLVM modules.
#include "lowering/lower.h"

#include "absl/container/flat_hash_map.h"
#include "fmt/format.h"

#include "llvm/Support/raw_ostream.h"
#include "lowering/fusion.h"
#include "lowering/internal_error.h"
#include "lowering/kernel_builder.h"
#include "lowering/kir_llvm.h"
#include "lowering/plan.h"

namespace lazyjit::lowering {

namespace {

/// Adds `e`, an expression of `kernel` over its dims and constants (its count or work), to
/// `sizes`, its dims bound to the shape-table entries `frame` names. Returns its step.
int size_step(const kir::Kernel& kernel, kir::Id e, const KernelFrame& frame, SizeProgram& sizes,
              absl::flat_hash_map<kir::Id, int>& steps) {
  if (auto found = steps.find(e); found != steps.end()) return found->second;
  const kir::Expr& x = kernel.exprs[e];
  int step = -1;
  switch (x.kind) {
    case kir::ExprKind::Const: step = sizes.constant(x.bits); break;
    case kir::ExprKind::Dim: step = sizes.dim(frame.dims[x.slot]); break;
    case kir::ExprKind::Index: {
      using Op = SizeProgram::Op;
      static constexpr Op kOps[] = {Op::Add, Op::Sub, Op::Mul, Op::Div, Op::Rem, Op::Min, Op::Max};
      const int a = size_step(kernel, x.operands[0], frame, sizes, steps);
      const int b = size_step(kernel, x.operands[1], frame, sizes, steps);
      step = sizes.apply(kOps[x.op], a, b);
      break;
    }
    default: internal_error(fmt::format("a kernel's count or work reads %{}, which is not index arithmetic over dims", e));
  }
  steps.emplace(e, step);
  return step;
}

}  // namespace

LoweredGraph lower_graph(const ir::Graph& graph, std::span<const Alias> aliases) {
  return lower_graph(graph, plan_graph(graph), aliases);
}

LoweredGraph lower_graph(const ir::Graph& graph, KernelPlan plan, std::span<const Alias> aliases) {
  LoweredGraph lowered;
  lowered.plan = std::move(plan);
  for (KernelSpec& spec : lowered.plan.kernels) {
    LoweredKernel& kernel = lowered.kernels.emplace_back();
    kernel.kir = build_kernel(graph, lowered.plan, spec, aliases);
    if (const std::string problem = kir::verify(kernel.kir); !problem.empty()) {
      internal_error("invalid kernel IR: " + problem + "\n" + kir::print(kernel.kir));
    }
    kernel.content = ir::hash_bytes(kir::print(kernel.kir));
    spec.symbol = "lj_" + kernel.content.to_hex();
    absl::flat_hash_map<kir::Id, int> steps;
    spec.count = size_step(kernel.kir, kernel.kir.count, spec.frame, lowered.plan.sizes, steps);
    spec.work = size_step(kernel.kir, kernel.kir.work, spec.frame, lowered.plan.sizes, steps);
  }
  return lowered;
}

llvm::Module& module_of(LoweredKernel& kernel) {
  if (kernel.module == nullptr) {
    const std::string symbol = "lj_" + kernel.content.to_hex();
    kernel.context = std::make_unique<llvm::LLVMContext>();
    kernel.module = std::make_unique<llvm::Module>(symbol, *kernel.context);
    kernel.module->setSourceFileName(symbol);
    emit_llvm(kernel.kir, symbol, *kernel.module);
  }
  return *kernel.module;
}

std::string module_text(const llvm::Module& module) {
  std::string text;
  llvm::raw_string_ostream os(text);
  module.print(os, nullptr);
  return text;
}

std::string lowered_text(LoweredGraph& lowered) {
  std::string text;
  for (LoweredKernel& kernel : lowered.kernels) text += module_text(module_of(kernel));
  return text;
}

std::string kernels_text(const LoweredGraph& lowered) {
  std::string text;
  for (size_t k = 0; k < lowered.kernels.size(); ++k) {
    text += fmt::format("; {}\n{}", lowered.plan.kernels[k].symbol, kir::print(lowered.kernels[k].kir));
  }
  return text;
}

namespace {

TensorSignature signature_of(const ir::Node& node) {
  return {node.dtype(), std::vector<int64_t>(node.shape().begin(), node.shape().end())};
}

class LlvmComputation : public Computation {
 public:
  LlvmComputation(const ir::Graph& graph, LoweredGraph lowered) : lowered_(std::move(lowered)) {
    for (const ir::Node* p : graph.parameters) parameters_.push_back(signature_of(*p));
    for (int root : graph.roots) results_.push_back(signature_of(*graph.nodes[root]));
  }
  const std::vector<TensorSignature>& parameter_shapes() const override { return parameters_; }
  const std::vector<TensorSignature>& result_shapes() const override { return results_; }
  std::string to_string() const override { return lowered_text(lowered_); }

 private:
  mutable LoweredGraph lowered_;  // modules are emitted when first printed
  std::vector<TensorSignature> parameters_;
  std::vector<TensorSignature> results_;
};

}  // namespace

std::unique_ptr<Computation> LlvmLoweringContext::build() {
  return std::make_unique<LlvmComputation>(graph_, lower_graph(graph_));
}

}  // namespace lazyjit::lowering

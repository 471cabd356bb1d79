// Graph to LLVM module.
#include "lowering/lower.h"

#include "llvm/Support/raw_ostream.h"
#include "lowering/fusion.h"
#include "lowering/kernels.h"
#include "lowering/loop_nest.h"

namespace lazyjit::lowering {

namespace {

/// The symbol a kernel is emitted under, before its content names it: every kernel's text is
/// hashed under this one name.
constexpr const char* kCanonicalSymbol = "lj_kernel";

LoweredKernel lower_kernel(const ir::Graph& graph, KernelPlan& plan, KernelSpec& spec, std::span<const Alias> aliases) {
  LoweredKernel kernel;
  kernel.context = std::make_unique<llvm::LLVMContext>();
  kernel.module = std::make_unique<llvm::Module>(kCanonicalSymbol, *kernel.context);
  spec.symbol = kCanonicalSymbol;
  spec.frame = spec.collapsed ? emit_kernel(*kernel.module, graph, plan, spec, aliases)
                              : emit_planned_kernel(*kernel.module, graph, plan, spec, aliases);
  kernel.content = ir::hash_bytes(module_text(*kernel.module));
  spec.symbol = "lj_" + kernel.content.to_hex();
  kernel.module->getFunction(kCanonicalSymbol)->setName(spec.symbol);
  kernel.module->getFunction(std::string(kCanonicalSymbol) + ".body")->setName(spec.symbol + ".body");
  kernel.module->setModuleIdentifier(spec.symbol);
  kernel.module->setSourceFileName(spec.symbol);
  return kernel;
}

}  // namespace

LoweredGraph lower_graph(const ir::Graph& graph, std::span<const Alias> aliases) {
  LoweredGraph lowered;
  lowered.plan = plan_kernels(graph, symbol_prefix(graph));
  for (KernelSpec& spec : lowered.plan.kernels) {
    lowered.kernels.push_back(lower_kernel(graph, lowered.plan, spec, aliases));
  }
  return lowered;
}

std::string module_text(const llvm::Module& module) {
  std::string text;
  llvm::raw_string_ostream os(text);
  module.print(os, nullptr);
  return text;
}

std::string lowered_text(const LoweredGraph& lowered) {
  std::string text;
  for (const LoweredKernel& kernel : lowered.kernels) text += module_text(*kernel.module);
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
  LoweredGraph lowered_;
  std::vector<TensorSignature> parameters_;
  std::vector<TensorSignature> results_;
};

}  // namespace

std::unique_ptr<Computation> LlvmLoweringContext::build() {
  return std::make_unique<LlvmComputation>(graph_, lower_graph(graph_));
}

}  // namespace lazyjit::lowering

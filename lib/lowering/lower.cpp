// Graph to LLVM module.
#include "lowering/lower.h"

#include "llvm/Support/raw_ostream.h"
#include "lowering/fusion.h"
#include "lowering/kernels.h"
#include "lowering/loop_nest.h"

namespace lazyjit::lowering {

LoweredGraph lower_graph(const ir::Graph& graph, std::span<const Alias> aliases) {
  LoweredGraph lowered;
  lowered.context = std::make_unique<llvm::LLVMContext>();
  const std::string name = symbol_prefix(graph);
  lowered.module = std::make_unique<llvm::Module>(name, *lowered.context);
  lowered.plan = plan_kernels(graph, name);
  for (KernelSpec& spec : lowered.plan.kernels) {
    spec.frame = spec.collapsed ? emit_kernel(*lowered.module, graph, lowered.plan, spec, aliases)
                                : emit_planned_kernel(*lowered.module, graph, lowered.plan, spec, aliases);
  }
  return lowered;
}

std::string module_text(const llvm::Module& module) {
  std::string text;
  llvm::raw_string_ostream os(text);
  module.print(os, nullptr);
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
  std::string to_string() const override { return module_text(*lowered_.module); }

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

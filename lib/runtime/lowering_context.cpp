// The LLVM backend's LoweringContext: lowering's kernel IR, codegen's LLVM text.
#include "runtime/lowering_context.h"

#include "codegen/jit_compiler.h"
#include "lowering/lower.h"

namespace lazyjit::runtime {
namespace {

TensorSignature signature_of(const ir::Node& node) {
  return {node.dtype(), std::vector<int64_t>(node.shape().begin(), node.shape().end())};
}

class LlvmComputation : public Computation {
 public:
  LlvmComputation(const ir::Graph& graph, const lowering::LoweredGraph& lowered) : text_(codegen::llvm_ir_text(lowered)) {
    for (const ir::Node* p : graph.parameters) parameters_.push_back(signature_of(*p));
    for (int root : graph.roots) results_.push_back(signature_of(*graph.nodes[root]));
  }
  const std::vector<TensorSignature>& parameter_shapes() const override { return parameters_; }
  const std::vector<TensorSignature>& result_shapes() const override { return results_; }
  std::string to_string() const override { return text_; }

 private:
  std::string text_;
  std::vector<TensorSignature> parameters_;
  std::vector<TensorSignature> results_;
};

}  // namespace

std::unique_ptr<Computation> LlvmLoweringContext::build() {
  return std::make_unique<LlvmComputation>(graph_, lowering::lower_graph(graph_));
}

}  // namespace lazyjit::runtime

// The LLVM backend's LoweringContext (include/lazyjit/backend.h, DESIGN.md section 2).
#pragma once

#include <memory>

#include "ir/graph.h"
#include "lazyjit/backend.h"

namespace lazyjit::runtime {

/// Lowers one graph into a Computation: its parameters' and results' signatures, and as text
/// the LLVM IR its kernels are emitted as (before optimisation), in plan order.
class LlvmLoweringContext : public LoweringContext {
 public:
  explicit LlvmLoweringContext(const ir::Graph& graph) : graph_(graph) {}
  std::unique_ptr<Computation> build() override;

 private:
  const ir::Graph& graph_;
};

}  // namespace lazyjit::runtime

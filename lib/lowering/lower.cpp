// Graph to kernel IR.
#include "lowering/lower.h"

#include "absl/container/flat_hash_map.h"
#include "fmt/format.h"

#include "lowering/fusion.h"
#include "lowering/internal_error.h"
#include "lowering/kernel_builder.h"
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

void in_order(size_t count, absl::FunctionRef<void(size_t)> task) {
  for (size_t i = 0; i < count; ++i) task(i);
}

LoweredGraph lower_graph(const ir::Graph& graph, KernelPlan plan, std::span<const Alias> aliases,
                         ForEachKernel for_each) {
  LoweredGraph lowered;
  lowered.plan = std::move(plan);
  lowered.kernels.resize(lowered.plan.kernels.size());
  for_each(lowered.kernels.size(), [&](size_t k) {
    KernelSpec& spec = lowered.plan.kernels[k];
    LoweredKernel& kernel = lowered.kernels[k];
    kernel.kir = build_kernel(graph, lowered.plan, spec, aliases);
    if (const std::string problem = kir::verify(kernel.kir); !problem.empty()) {
      internal_error("invalid kernel IR: " + problem + "\n" + kir::print(kernel.kir));
    }
    kernel.content = ir::hash_bytes(kir::encode(kernel.kir));
    spec.symbol = "lj_" + kernel.content.to_hex();
  });
  // The plan's size program is shared: its steps are added in kernel order.
  for (size_t k = 0; k < lowered.kernels.size(); ++k) {
    KernelSpec& spec = lowered.plan.kernels[k];
    const LoweredKernel& kernel = lowered.kernels[k];
    absl::flat_hash_map<kir::Id, int> steps;
    spec.count = size_step(kernel.kir, kernel.kir.count, spec.frame, lowered.plan.sizes, steps);
    spec.work = size_step(kernel.kir, kernel.kir.work, spec.frame, lowered.plan.sizes, steps);
  }
  return lowered;
}

std::string kernels_text(const LoweredGraph& lowered) {
  std::string text;
  for (size_t k = 0; k < lowered.kernels.size(); ++k) {
    text += fmt::format("; {}\n{}", lowered.plan.kernels[k].symbol, kir::print(lowered.kernels[k].kir));
  }
  return text;
}

}  // namespace lazyjit::lowering

#include "codegen/loop_hints.h"

#include <algorithm>
#include <vector>

#include "ir/op.h"

namespace lazyjit::codegen {
namespace {

/// Whether a value stored in `body` calls a math function.
bool stores_call_math(const kir::Kernel& kernel, const std::vector<kir::Stmt>& body) {
  std::vector<bool> seen(kernel.exprs.size(), false);
  std::vector<kir::Id> stack;
  for (const kir::Stmt& t : body) stack.insert(stack.end(), t.values.begin(), t.values.end());
  while (!stack.empty()) {
    const kir::Id id = stack.back();
    stack.pop_back();
    if (seen[id]) continue;
    seen[id] = true;
    const kir::Expr& e = kernel.exprs[id];
    if (e.kind == kir::ExprKind::Op && ir::calls_math(static_cast<ir::OpKind>(e.op))) return true;
    stack.insert(stack.end(), e.operands.begin(), e.operands.end());
  }
  return false;
}

}  // namespace

bool folds_tail(const kir::Kernel& kernel, const kir::Stmt& s) {
  if (kernel.kind == "panel") return false;
  const bool innermost = std::none_of(s.body.begin(), s.body.end(), [](const kir::Stmt& t) {
    return t.kind == kir::Stmt::Kind::For || t.kind == kir::Stmt::Kind::Matmul || t.kind == kir::Stmt::Kind::Fold;
  });
  return innermost && !stores_call_math(kernel, s.body);
}

}  // namespace lazyjit::codegen

#include "codegen/loop_hints.h"

#include <algorithm>
#include <vector>

#include "ir/op.h"

namespace lazyjit::codegen {
namespace {

/// The ops a loop's stores compute from which it is masked: below, the mask's instructions
/// (about 6 an iteration: the lanes' indices compared with the trip count) cost more than
/// its copies save. relu(x * 1.5 + 0.25) * 0.5 + x over 2^16 floats (5 ops, its data in
/// L2) ran 30-40% slower masked.
constexpr int kMaskedBodyOps = 16;

/// The ops that the values stored in `body` compute, each counted once, or -1 when one of
/// them calls a math function.
int ops_stored(const kir::Kernel& kernel, const std::vector<kir::Stmt>& body) {
  std::vector<bool> seen(kernel.exprs.size(), false);
  std::vector<kir::Id> stack;
  for (const kir::Stmt& t : body) stack.insert(stack.end(), t.values.begin(), t.values.end());
  int ops = 0;
  while (!stack.empty()) {
    const kir::Id id = stack.back();
    stack.pop_back();
    if (seen[id]) continue;
    seen[id] = true;
    const kir::Expr& e = kernel.exprs[id];
    if (e.kind == kir::ExprKind::Op && ir::calls_math(static_cast<ir::OpKind>(e.op))) return -1;
    if (e.kind == kir::ExprKind::Op) ++ops;
    stack.insert(stack.end(), e.operands.begin(), e.operands.end());
  }
  return ops;
}

}  // namespace

bool folds_tail(const kir::Kernel& kernel, const kir::Stmt& s) {
  const bool innermost = std::none_of(s.body.begin(), s.body.end(), [](const kir::Stmt& t) {
    return t.kind == kir::Stmt::Kind::For || t.kind == kir::Stmt::Kind::Matmul || t.kind == kir::Stmt::Kind::Fold;
  });
  return innermost && ops_stored(kernel, s.body) >= kMaskedBodyOps;
}

}  // namespace lazyjit::codegen

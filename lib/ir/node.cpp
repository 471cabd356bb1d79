// Node destruction without recursion through operands.
#include "ir/node.h"

#include <vector>

namespace lazyjit::ir {
namespace {

/// The operands that destructors on this thread have handed over and not yet released; null
/// when no destruction is running. A destructor that finds it set moves its operands there
/// instead of releasing them, so the outermost one releases the whole chain in a loop.
thread_local std::vector<NodePtr>* pending_release = nullptr;

}  // namespace

Node::~Node() {
  if (operands_.empty()) return;
  if (pending_release != nullptr) {
    for (NodePtr& operand : operands_) pending_release->push_back(std::move(operand));
    return;
  }
  std::vector<NodePtr> pending(std::make_move_iterator(operands_.begin()), std::make_move_iterator(operands_.end()));
  pending_release = &pending;
  while (!pending.empty()) {
    NodePtr last = std::move(pending.back());
    pending.pop_back();
    last.reset();  // a node released here appends its operands to `pending`
  }
  pending_release = nullptr;
}

}  // namespace lazyjit::ir

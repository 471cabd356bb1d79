// Reverse-mode differentiation of the lazy graph: grad() walks the IR that computes the output
// in reverse topological order, asks each node's rule (ops.def, vjp.cpp) for its operands'
// cotangents, and sums them per node. The rules are traced with the public ops, so the
// backward pass is ordinary lazy IR: it fuses with the forward pass and the update into one
// mark_step, and nothing runs until it is read.
#include "lazyjit/autograd.h"

#include <array>
#include <mutex>
#include <set>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "autograd/vjp.h"
#include "fmt/format.h"
#include "ir/graph.h"
#include "ir/shape.h"
#include "lazyjit/error.h"
#include "lazyjit/ops.h"
#include "runtime/custom_gradient.h"
#include "runtime/runtime.h"
#include "runtime/tensor_impl.h"

namespace lazyjit {
namespace detail {
Tensor make_pending(ir::NodePtr node);
}

namespace autograd {
namespace {

std::string describe(const ir::Node& node) {
  return fmt::format("{}{}", dtype_name(node.dtype()), ir::shape_to_string(node.shape()));
}

/// The graphs that syncs kept, by the data leaf later ops read (GraphExecutor::kept_histories):
/// to differentiate, such a leaf is its history, an identity edge from the leaf to it.
using Histories = absl::flat_hash_map<const ir::Node*, ir::NodePtr>;

/// What `node` is computed from, for differentiation: its operands, or a kept leaf's history.
std::span<const ir::NodePtr> inputs_of(const ir::Node* node, const Histories& histories) {
  if (!node->operands().empty()) return node->operands();
  auto found = histories.find(node);
  return found == histories.end() ? std::span<const ir::NodePtr>() : std::span(&found->second, 1);
}

/// The nodes `root` depends on (through kept histories too), each after its inputs.
std::vector<ir::NodePtr> post_order(const ir::NodePtr& root, const Histories& histories) {
  std::vector<ir::NodePtr> order;
  absl::flat_hash_set<const ir::Node*> seen;
  std::vector<std::pair<const ir::Node*, size_t>> stack;
  ir::walk_post_order(
      root.get(), [&](const ir::Node* node) { return seen.contains(node); },
      [&](const ir::Node* node) {
        seen.insert(node);
        order.push_back(node->shared_from_this());
      },
      [&](const ir::Node* node) { return inputs_of(node, histories); }, stack);
  return order;
}

/// The IR a tensor's value was computed by: its pending IR, or once a sync materialised it,
/// the graph the sync kept (until the next mark_step), or else its data leaf.
ir::NodePtr graph_of(const Tensor& t) {
  ir::NodePtr history = t.impl()->history();
  return history ? history : t.impl()->ir_value();
}

/// The error for an output that holds data and no graph (materialised by a step barrier).
std::string no_graph_message(const char* op) {
  return fmt::format("{}: the output is data with no graph to differentiate: mark_step() ends a step's graphs, so "
                     "take gradients before it (a tensor made from data has no graph either)",
                     op);
}

/// Whether a gradient may flow from a result of this dtype.
bool carries_gradient(DType dtype) { return is_floating(dtype); }

/// The op that turned floating values leading to an input into `node`'s integer or bool
/// value (argmax under a reshape and a cast): where the derivative chain breaks.
ir::OpKind breaking_op(const ir::Node* node, const absl::flat_hash_set<const ir::Node*>& leads) {
  for (;;) {
    const ir::Node* next = nullptr;
    for (const ir::NodePtr& operand : node->operands()) {
      if (!leads.contains(operand.get())) continue;
      if (carries_gradient(operand->dtype())) return node->op();
      next = operand.get();
    }
    if (next == nullptr) return node->op();
    node = next;
  }
}

/// A cotangent as pieces along one dim: each the node that fills [offset, offset + size), or
/// null for zeros (a splatted 0: the zero padding of a slice's cotangent).
struct Piece {
  int64_t size;
  ir::NodePtr node;
  int64_t from = 0;  // where the piece starts in `node` along the dim
};

bool is_zero(const ir::Node& node) {
  return node.op() == ir::OpKind::Scalar && node.scalar().as_double(node.dtype()) == 0.0;
}

/// `t` as pieces along `dim` when it is a cat along it, else one piece.
std::vector<Piece> pieces_of(const ir::NodePtr& t, int64_t dim) {
  if (t->op() != ir::OpKind::Cat || t->attrs()[0] != dim) return {{t->shape()[dim], is_zero(*t) ? nullptr : t}};
  std::vector<Piece> pieces;
  for (const ir::NodePtr& part : t->operands()) pieces.push_back({part->shape()[dim], is_zero(*part) ? nullptr : part});
  return pieces;
}

/// a + b, where both are cats along one dim whose nonzero pieces do not overlap (the
/// cotangents of disjoint slices of one tensor: q, k and v of a fused projection): the cat
/// of their nonzero pieces, instead of sums over zero padding that every later reader would
/// recompute. Else a plain sum.
Tensor add_cotangents(const Tensor& a, const Tensor& b) {
  const ir::NodePtr x = a.impl()->ir_value(), y = b.impl()->ir_value();
  const ir::Node* cat_node = x->op() == ir::OpKind::Cat ? x.get() : y->op() == ir::OpKind::Cat ? y.get() : nullptr;
  if (cat_node == nullptr || x->shape() != y->shape() || x->dtype() != y->dtype()) return a + b;
  const int64_t dim = cat_node->attrs()[0];
  const std::vector<Piece> left = pieces_of(x, dim), right = pieces_of(y, dim);
  std::vector<Piece> merged;
  size_t i = 0, j = 0;
  int64_t at_left = 0, at_right = 0;  // offsets into left[i] and right[j]
  while (i < left.size() && j < right.size()) {
    const int64_t size = std::min(left[i].size - at_left, right[j].size - at_right);
    const Piece& l = left[i];
    const Piece& r = right[j];
    if (l.node != nullptr && r.node != nullptr && size > 0) return a + b;  // they overlap
    const Piece& kept = l.node != nullptr ? l : r;
    const int64_t from = (l.node != nullptr ? at_left : at_right) + kept.from;
    if (size > 0) {
      if (kept.node == nullptr && !merged.empty() && merged.back().node == nullptr) merged.back().size += size;
      else merged.push_back({size, kept.node, from});
    }
    at_left += size;
    at_right += size;
    if (at_left == l.size) ++i, at_left = 0;
    if (at_right == r.size) ++j, at_right = 0;
  }
  std::vector<Tensor> parts;
  for (const Piece& piece : merged) {
    std::vector<int64_t> shape = a.shape();
    shape[dim] = piece.size;
    if (piece.node == nullptr) {
      parts.push_back(zeros(shape, a.dtype()));
      continue;
    }
    const Tensor whole = detail::make_pending(piece.node);
    const bool all = piece.from == 0 && piece.size == piece.node->shape()[dim];
    parts.push_back(all ? whole : slice(whole, dim, piece.from, piece.from + piece.size));
  }
  return parts.size() == 1 ? parts[0] : cat(parts, dim);
}

}  // namespace

/// The gradients of `output` (seeded with `seed`) with respect to `inputs`; an input the
/// output does not depend on gets an undefined tensor when `allow_unused`, an Error otherwise.
static std::vector<Tensor> differentiate(const char* op, const Tensor& output, const std::vector<Tensor>& inputs,
                                  const Tensor& seed, bool allow_unused) {
  runtime::GraphExecutor& executor = runtime::Runtime::get().graph_executor();
  executor.keep_history_on_sync();
  const Histories histories = executor.kept_histories();
  const ir::NodePtr root = graph_of(output);
  // An input is its current value and, when a sync materialised it since the output was
  // traced, the graph that computed it: the output may depend on either.
  std::vector<std::array<ir::NodePtr, 2>> wrt;
  absl::flat_hash_set<const ir::Node*> wanted;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined()) throw Error(fmt::format("{}: input {} is an undefined tensor", op, i));
    wrt.push_back({inputs[i].impl()->ir_value(), inputs[i].impl()->history()});
    if (!carries_gradient(wrt.back()[0]->dtype())) {
      throw Error(fmt::format("{}: input {} is {}; only floating tensors have gradients", op, i,
                              describe(*wrt.back()[0])));
    }
    for (const ir::NodePtr& node : wrt.back()) {
      if (node) wanted.insert(node.get());
    }
  }

  // Which nodes lead to an input: only those need cotangents.
  const std::vector<ir::NodePtr> order = post_order(root, histories);
  absl::flat_hash_set<const ir::Node*> leads;
  for (const ir::NodePtr& node : order) {
    if (wanted.contains(node.get())) {
      leads.insert(node.get());
      continue;
    }
    if (node->stops_gradient()) continue;
    for (const ir::NodePtr& operand : inputs_of(node.get(), histories)) {
      if (leads.contains(operand.get())) {
        leads.insert(node.get());
        break;
      }
    }
  }

  const runtime::CustomGradients custom_rules = runtime::custom_gradients();
  absl::flat_hash_map<const ir::Node*, Tensor> cotangent;
  if (leads.contains(root.get())) cotangent[root.get()] = seed;
  std::set<ir::OpKind> blocked;  // ops that stopped a gradient on its way to an input
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    const ir::NodePtr& node = *it;
    auto found = cotangent.find(node.get());
    if (found == cotangent.end()) continue;
    // An input's total is read at the end; any other node's is done with once passed on.
    const bool keep = wanted.contains(node.get());
    const Tensor g = keep ? found->second : std::move(found->second);
    if (!keep) cotangent.erase(found);
    if (node->stops_gradient()) continue;
    if (node->operands().empty()) {  // a kept leaf passes its cotangent to its history
      if (keep) continue;  // an input's leaf and history are one input: summed once, at the end
      for (const ir::NodePtr& history : inputs_of(node.get(), histories)) {
        if (!leads.contains(history.get())) continue;
        Tensor& sum = cotangent[history.get()];
        sum = sum.defined() ? sum + g : g;
      }
      continue;
    }

    if (const auto custom = custom_rules.find(node.get()); custom != custom_rules.end()) {  // a composition's own rule
      const runtime::CustomGradient& rule = *custom->second;
      const std::vector<Tensor> parts = rule.rule(g);
      for (size_t i = 0; i < rule.inputs.size() && i < parts.size(); ++i) {
        const ir::NodePtr input = rule.inputs[i].lock();  // alive: the result reaches it
        if (input == nullptr || !leads.contains(input.get()) || !parts[i].defined()) continue;
        Tensor part = sum_to(parts[i], input->shape());
        if (part.dtype() != input->dtype()) part = part.to(input->dtype());
        Tensor& sum = cotangent[input.get()];
        sum = sum.defined() ? add_cotangents(sum, part) : part;
      }
      continue;
    }
    const std::vector<Tensor> parts = vjp(node, g);
    for (size_t i = 0; i < node->operands().size(); ++i) {
      const ir::NodePtr& operand = node->operands()[i];
      if (!leads.contains(operand.get())) continue;
      if (i >= parts.size() || !parts[i].defined() || !carries_gradient(operand->dtype())) {
        blocked.insert(breaking_op(operand.get(), leads));
        continue;
      }
      Tensor part = sum_to(parts[i], operand->shape());
      if (part.dtype() != operand->dtype()) part = part.to(operand->dtype());
      Tensor& sum = cotangent[operand.get()];
      sum = sum.defined() ? add_cotangents(sum, part) : part;
    }
  }

  std::vector<Tensor> grads;
  for (size_t i = 0; i < wrt.size(); ++i) {
    Tensor total;
    bool used = false;
    for (const ir::NodePtr& node : wrt[i]) {
      if (!node) continue;
      used = used || leads.contains(node.get());
      auto found = cotangent.find(node.get());
      if (found != cotangent.end()) total = total.defined() ? total + found->second : found->second;
    }
    if (total.defined()) {
      grads.push_back(total);
      continue;
    }
    const ir::Node& input = *wrt[i][0];
    if (!used || !leads.contains(root.get())) {
      if (allow_unused) {
        grads.emplace_back();
        continue;
      }
      if (root->op() == ir::OpKind::Parameter) throw Error(no_graph_message(op));
      const std::string updated =
          inputs[i].impl()->updates() > 0
              ? " as it is now (it was updated in place, and a value an in-place update replaced is another value)"
              : "";
      throw Error(fmt::format("{}: the output does not depend on input {} ({}){}", op, i, describe(input), updated));
    }
    std::string why;
    for (ir::OpKind blocker : blocked) {
      why += fmt::format("{}{} ({})", why.empty() ? "" : ", ", ir::op_name(blocker),
                         differentiability(blocker) == Differentiability::NotDifferentiable
                             ? not_differentiable_reason(blocker)
                             : "its result is not floating");
    }
    throw Error(fmt::format("{}: the output depends on input {} ({}) only through ops that are not differentiable: {}",
                            op, i, describe(input), why));
  }
  return grads;
}

namespace {

Tensor checked_seed(const char* op, const Tensor& output, const Tensor* grad_output) {
  if (!output.defined()) throw Error(fmt::format("{}: the output is an undefined tensor", op));
  const ir::NodePtr root = graph_of(output);
  if (!carries_gradient(root->dtype())) {
    throw Error(fmt::format("{}: the output is {}; only floating tensors have gradients", op, describe(*root)));
  }
  if (grad_output == nullptr) {
    if (ir::numel(root->shape()) != 1) {
      throw Error(fmt::format("{}: the output is {}, not one element; pass a grad_output of its shape for the "
                              "vector-Jacobian product",
                              op, describe(*root)));
    }
    return full(output.shape(), 1.0, output.dtype());
  }
  const char* name = std::string_view(op) == "backward" ? "gradient" : "grad_output";
  if (!grad_output->defined()) throw Error(fmt::format("{}: {} is an undefined tensor", op, name));
  if (grad_output->shape() != output.shape()) {
    throw Error(fmt::format("{}: {} is {}, the output is {}; they must have one shape", op, name,
                            describe(*grad_output->impl()->ir_value()), describe(*root)));
  }
  return grad_output->dtype() == output.dtype() ? *grad_output : grad_output->to(output.dtype());
}

/// The tensors marked requires_grad, weakly: a mark does not keep a tensor alive.
class MarkedTensors {
 public:
  void add(const std::shared_ptr<detail::TensorImpl>& t) {
    std::lock_guard lock(mutex_);
    marked_.push_back(t);
  }
  /// The marked tensors still alive and marked; forgets the rest.
  std::vector<std::shared_ptr<detail::TensorImpl>> alive() {
    std::lock_guard lock(mutex_);
    std::vector<std::shared_ptr<detail::TensorImpl>> out;
    std::erase_if(marked_, [&](const std::weak_ptr<detail::TensorImpl>& weak) {
      std::shared_ptr<detail::TensorImpl> t = weak.lock();
      if (!t || !t->requires_grad()) return true;
      out.push_back(std::move(t));
      return false;
    });
    return out;
  }

 private:
  std::mutex mutex_;
  std::vector<std::weak_ptr<detail::TensorImpl>> marked_;
};

MarkedTensors& marked_tensors() {
  static MarkedTensors* marked = new MarkedTensors;  // never destroyed: tensors may outlive statics
  return *marked;
}

void accumulate_into_marked(const char* op, const Tensor& output, const Tensor& seed) {
  if (graph_of(output)->op() == ir::OpKind::Parameter && !output.impl()->requires_grad()) {
    throw Error(no_graph_message(op));
  }
  std::vector<std::shared_ptr<detail::TensorImpl>> targets = marked_tensors().alive();
  std::vector<Tensor> inputs;
  for (const auto& t : targets) inputs.emplace_back(t);
  const std::vector<Tensor> grads = differentiate(op, output, inputs, seed, /*allow_unused=*/true);
  bool any = false;
  for (size_t i = 0; i < targets.size(); ++i) {
    if (!grads[i].defined()) continue;
    any = true;
    std::shared_ptr<detail::TensorImpl> old = targets[i]->grad();
    targets[i]->set_grad((old ? Tensor(old) + grads[i] : grads[i]).impl());
  }
  if (!any) throw Error(fmt::format("{}: the output does not depend on any tensor with requires_grad()", op));
}

}  // namespace
}  // namespace autograd

std::vector<Tensor> grad(const Tensor& output, const std::vector<Tensor>& inputs) {
  return autograd::differentiate("grad", output, inputs, autograd::checked_seed("grad", output, nullptr),
                                 /*allow_unused=*/false);
}

std::vector<Tensor> grad(const Tensor& output, const std::vector<Tensor>& inputs, const Tensor& grad_output) {
  return autograd::differentiate("grad", output, inputs, autograd::checked_seed("grad", output, &grad_output),
                                 /*allow_unused=*/false);
}

Tensor& Tensor::requires_grad_(bool requires_grad) {
  detail::TensorImpl& t = checked_impl("requires_grad_");
  if (requires_grad && !is_floating(t.dtype())) {
    throw Error(fmt::format("requires_grad_: the tensor is {}; only floating tensors can require gradients",
                            autograd::describe(*t.ir_value())));
  }
  if (requires_grad && !t.requires_grad()) autograd::marked_tensors().add(impl_);
  runtime::Runtime::get().graph_executor().keep_history_on_sync();
  t.set_requires_grad(requires_grad);
  return *this;
}

bool Tensor::requires_grad() const { return checked_impl("requires_grad").requires_grad(); }

Tensor Tensor::grad() const { return Tensor(checked_impl("grad").grad()); }

void Tensor::zero_grad() { checked_impl("zero_grad").set_grad(nullptr); }

void Tensor::backward() const { autograd::accumulate_into_marked("backward", *this, autograd::checked_seed("backward", *this, nullptr)); }

void Tensor::backward(const Tensor& gradient) const {
  autograd::accumulate_into_marked("backward", *this, autograd::checked_seed("backward", *this, &gradient));
}

}  // namespace lazyjit

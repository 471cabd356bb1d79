// Custom gradients: a composition may give its result a gradient rule of its own (conv2d's
// input gradient as a convolution, where the rules of its nodes would give col2im of a
// product K times the input). Autograd then maps the result's cotangent to the named inputs
// with that rule, instead of through the nodes between them.
#pragma once

#include <functional>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "ir/node.h"
#include "lazyjit/tensor.h"

namespace lazyjit::runtime {

/// Nothing here keeps a node alive: the inputs (and any node the rule reads) are reachable
/// from the result, so they live while it does. A kept node would keep its buffer, and a
/// parameter's update could not take the buffer over at the step barrier.
struct CustomGradient {
  std::vector<std::weak_ptr<const ir::Node>> inputs;  ///< the nodes that receive cotangents, in rule order
  /// The cotangents of `inputs` (undefined for one that gets none) for the result's
  /// cotangent; traced with the public ops, like any rule.
  std::function<std::vector<Tensor>(const Tensor& g)> rule;
};

using CustomGradients = absl::flat_hash_map<const ir::Node*, std::shared_ptr<const CustomGradient>>;

/// Gives `result`'s node the rule; kept while that node lives.
void set_custom_gradient(const ir::NodePtr& result, CustomGradient gradient);
/// The rules of the nodes alive now: taken once per differentiation, which then looks each
/// node up without a lock.
CustomGradients custom_gradients();

}  // namespace lazyjit::runtime

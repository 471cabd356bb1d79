// Reverse-mode automatic differentiation over the lazy graph.
#pragma once

#include <vector>

#include "lazyjit/tensor.h"

namespace lazyjit {

/// The gradients of `output` with respect to each of `inputs`, as lazy tensors: backward IR is
/// traced from `output`'s graph and nothing runs until the gradients are materialised (they
/// can join the same mark_step as the forward pass and the update). `output` must be a
/// floating tensor with one element (a loss). The gradient of an input has the input's shape
/// and dtype; it is the derivative through the value the input had when `output` was traced.
///
/// Only floating tensors carry gradients: paths through integer or bool values (argmax,
/// comparisons, casts from int) contribute nothing, as in PyTorch. Errors: an input that is
/// not floating, an input `output` does not depend on, and an input that `output` depends on
/// only through ops that are not differentiable (the message names the op).
std::vector<Tensor> grad(const Tensor& output, const std::vector<Tensor>& inputs);

/// The vector-Jacobian product: as above for an `output` of any shape, seeded with
/// `grad_output` (the cotangent: output's shape, converted to output's dtype) instead of 1.
///
/// The output may already be materialised: a sync (`item`, `to_vector`) keeps the graph that
/// computed a tensor until the next mark_step() once autograd is in use, so `loss.item()`
/// before `loss.backward()` works. mark_step() ends every step's graphs: take gradients
/// before it.
std::vector<Tensor> grad(const Tensor& output, const std::vector<Tensor>& inputs, const Tensor& grad_output);

}  // namespace lazyjit

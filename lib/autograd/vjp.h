// The vector-Jacobian rules of the op table (the LAZYJIT_VJP and LAZYJIT_NO_VJP lines of
// ir/ops.def, next to each op's row) and what the gradient tests ask of them.
#pragma once

#include <span>
#include <vector>

#include "ir/node.h"
#include "lazyjit/tensor.h"

namespace lazyjit::autograd {

/// What the op table says about an op's derivative.
enum class Differentiability {
  Leaf,               ///< no operands: gradients stop (or are collected) here
  Rule,               ///< a LAZYJIT_VJP line gives the cotangent of every operand
  NotDifferentiable,  ///< a LAZYJIT_NO_VJP line says why (an integer or bool result)
  Missing,            ///< neither: a row added without a rule (the gradient tests fail)
};
Differentiability differentiability(ir::OpKind op);
/// For NotDifferentiable ops: the reason ops.def gives ("its result is bool").
const char* not_differentiable_reason(ir::OpKind op);

/// The cotangents of `node`'s operands, given the cotangent `g` of its result: one entry per
/// operand, undefined where the rule gives none. Entries may still have a broadcast shape
/// or another float dtype; the caller reduces them to the operand's shape (sum_to) and dtype.
std::vector<Tensor> vjp(const ir::NodePtr& node, const Tensor& g);

/// `g` summed over the dims that broadcasting added to reach its shape from `shape`.
Tensor sum_to(const Tensor& g, std::span<const int64_t> shape);

}  // namespace lazyjit::autograd

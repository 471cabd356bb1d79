// Shape and dtype rules of the ops that are not elementwise: reductions, views, matmul and
// random leaves. One rule per op, used by the builder (on user input, after the API has
// normalised negative dims and the like) and by the verifier (on parsed or built graphs).
#pragma once

#include <span>

#include "absl/status/statusor.h"
#include "ir/node.h"

namespace lazyjit::ir {

/// The result dtype and shape of `op` over `operands` with `attrs`, or an error naming the
/// op and the offending values. Reshape, Expand and Slice take the result shape from
/// `given` (their attrs do not determine it) and check it.
absl::StatusOr<std::pair<DType, Shape>> structured_result(OpKind op, std::span<const NodePtr> operands,
                                                           const Node::Attrs& attrs, const Shape* given);

/// A node of a non-elementwise op, checked by structured_result. Operands are not promoted:
/// callers convert them first (cat and matmul take one dtype).
absl::StatusOr<NodePtr> make_structured(OpKind op, Node::Operands operands, Node::Attrs attrs,
                                        const Shape* given = nullptr);

/// The error of an index out of range at run time (IndexSelect, Gather): found by the
/// interpreter and by the kernel status word alike.
std::string index_error(OpKind op, const Node::Attrs& attrs, int64_t index, int64_t size);

/// A Rand or Randn leaf: element i is a function of (seed, i) alone (scalar_semantics.h).
NodePtr make_random(OpKind op, int64_t seed, DType dtype, Shape shape);

}  // namespace lazyjit::ir

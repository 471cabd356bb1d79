// The IR verifier: checks the invariants every layer below the builder relies on.
#pragma once

#include "absl/status/status.h"
#include "ir/graph.h"

namespace lazyjit::ir {

/// Checks each node of `graph`: arity, operand dtypes (one dtype per op, as its Admits column
/// allows), result dtype, and that the result shape is the broadcast of the operands'.
/// The error names the node (%index and op) and what is wrong.
absl::Status verify(const Graph& graph);

/// The same checks for one node; the error says what is wrong ("has the wrong result
/// dtype"), leaving the node's position and op to the caller.
absl::Status verify_node(const Node& node);

}  // namespace lazyjit::ir

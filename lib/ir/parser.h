// Parsing the text form of graphs (.ljir; see printer.h and docs/text_format.md).
#pragma once

#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/node.h"

namespace lazyjit::ir {

/// A graph read from text: its roots, in `return` order. Parameters are HostBuffers holding
/// the values the text gives, or zeros; `given[slot]` says which.
struct ParsedGraph {
  std::vector<NodePtr> roots;
  std::vector<NodePtr> parameters;  ///< one Parameter leaf per slot
  std::vector<bool> given;          ///< per slot: whether the text held its values
};

/// Parses `text`. Errors name the line and column and what was expected, e.g.
/// "line 3, column 14: expected ',' or ':' after an operand, got 'x'". Never crashes.
absl::StatusOr<ParsedGraph> parse_graph(std::string_view text);

}  // namespace lazyjit::ir

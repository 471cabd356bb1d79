// The text form of a graph (.ljir), one node per line:
//   graph {
//     %0 = parameter 0 : float32[4,8]          (with values: ... = [1, 2, ...])
//     %1 = scalar 1.5 : float32[]
//     %2 = mul %0, %1 : float32[4,8]
//     return %2
//   }
#pragma once

#include <string>

#include "ir/graph.h"

namespace lazyjit::ir {

struct PrintOptions {
  bool with_key = true;    ///< a first comment line with the graph key
  bool with_values = false;  ///< parameters' values, so the text can be run as it was
};

/// "[v0, v1, ...]": a buffer's elements, row-major, each in the shortest text that reads
/// back to the same value (bools as true/false).
std::string values_text(const BackendData& data);

/// The graph as text; parse_graph (parser.h) reads it back to the same text and key.
std::string print_graph(const Graph& graph, PrintOptions options = {});

}  // namespace lazyjit::ir

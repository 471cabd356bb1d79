// The text form of a graph (.ljir), one node per line:
//   graph {
//     %0 = parameter 0 : float32[4,8]
//     %1 = scalar 1.5 : float32[]
//     %2 = mul %0, %1 : float32[4,8]
//     return %2
//   }
#pragma once

#include <string>

#include "ir/graph.h"

namespace lazyjit::ir {

/// The graph as text; `with_key` adds a comment line with the graph key.
std::string print_graph(const Graph& graph, bool with_key = true);

}  // namespace lazyjit::ir

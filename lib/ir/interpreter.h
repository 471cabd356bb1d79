// The reference interpreter: evaluates any graph directly, one element at a time. It is the
// oracle of the differential tests, so it favours the obvious over the fast.
#pragma once

#include <cstdint>
#include <vector>

#include "ir/graph.h"
#include "lazyjit/dtype.h"

namespace lazyjit::ir {

/// A host tensor: dtype, shape and row-major elements in their storage type.
struct HostTensor {
  DType dtype = DType::Float32;
  Shape shape;
  std::vector<uint8_t> bytes;

  int64_t numel() const { return ir::numel(shape); }
  /// Element i converted to double (exact for every value but int64 past 2^53).
  double as_double(int64_t i) const;
};

/// Evaluates `graph` and returns the value of each root, in order. Parameters are read from
/// the Parameter nodes' buffers, scalars from the Scalar nodes.
std::vector<HostTensor> interpret(const Graph& graph);

}  // namespace lazyjit::ir

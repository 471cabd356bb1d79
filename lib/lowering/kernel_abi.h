// The kernel ABI shared by lowering (which emits kernels), codegen (which compiles them) and
// the runtime (which calls them). See DESIGN.md section 7.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace lazyjit::lowering {

/// Every kernel of a graph has this signature and runs the iterations [begin, end) of its
/// outermost parallel loop (the row-major linear index of its iteration shape):
///   buffers: graph.parameters.size() parameter buffers, then one buffer per result, then a
///            pointer to the scalar table (8 bytes per Scalar leaf: int64 or double)
///   shapes:  the dims of this kernel's iteration shape (from the runtime shape table)
/// Generated code has no threads of its own; the runtime splits [0, numel) among threads.
using KernelFn = void (*)(void* const* buffers, const int64_t* shapes, int64_t begin, int64_t end);

/// What the runtime needs to launch one kernel of a lowered graph.
struct KernelSpec {
  std::string symbol;        ///< the function's name in the compiled module
  int iteration_result = 0;  ///< the result whose shape is the iteration space
  std::vector<int> results;  ///< the results this kernel writes
};

/// A result written into a parameter's buffer (donation at the step barrier): the result
/// and the parameter have one shape and dtype, and the kernel reads each element of the
/// parameter before it writes that element of the result.
struct Alias {
  int result;
  int parameter;
  friend bool operator==(const Alias&, const Alias&) = default;
};

/// Index of the scalar table in a graph's buffer array.
inline int scalar_table_index(int num_parameters, int num_results) {
  return num_parameters + num_results;
}

}  // namespace lazyjit::lowering

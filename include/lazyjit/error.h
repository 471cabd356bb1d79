// The one exception type the public API throws.
#pragma once

#include <stdexcept>
#include <string>

namespace lazyjit {

/// Thrown for every user mistake (bad shapes, dtypes, dims, inputs) at the call that made it,
/// and for failures to compile or run a graph. The message names the op and the values,
/// e.g. "add: shapes [2,3] and [4,3] cannot be broadcast (dim 0: 2 vs 4)".
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace lazyjit

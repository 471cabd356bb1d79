// How nn and optim error messages show a tensor: "float32[2, 3]".
#pragma once

#include <string>

#include "fmt/format.h"
#include "fmt/ranges.h"
#include "lazyjit/dtype.h"
#include "lazyjit/tensor.h"

namespace lazyjit::nn {

inline std::string describe(const Tensor& t) {
  return fmt::format("{}[{}]", dtype_name(t.dtype()), fmt::join(t.shape(), ", "));
}

}  // namespace lazyjit::nn
